//! The command line: nccl-tests' options with nccl-tests' letters (`-b -e -f -i -n -w -c -d -o
//! -r`), the collective as the first word, plus the backends and the simulated faults.

use clap::Parser;
use mrc_coll::bench::parse_size;
use mrc_coll::{BenchOpts, Collective, DataType, RedOp};

use crate::perf::faults::{FaultSpec, parse_fail_link, parse_flap_link, parse_loss};

/// mrc-coll: nccl-tests' collective benchmarks over MRC, on the simulated fabric, on threads
/// or on processes.
#[derive(Debug, Parser)]
#[command(name = "mrc-coll", version, about, long_about = None)]
#[command(after_help = "Examples:\n  \
    mrc-coll all_reduce --backend sim --ranks 64 -b 8 -e 256M -f 2 -n 1 -w 0\n  \
    mrc-coll all_reduce --backend sim --ranks 64 -b 256M -e 256M -n 2 --fail-link\n  \
    mrc-coll alltoall --backend mem --ranks 4 -b 1K -e 4M -f 4\n  \
    mrc-coll switch --ranks 4 --memif demo &   # one machine: a memif switch per plane\n  \
    mpirun --allow-run-as-root --oversubscribe -np 4 mrc-coll all_reduce --backend dpdk --memif demo -b 8 -e 1M -f 4")]
pub struct Args {
    /// all_reduce | all_gather | reduce_scatter | alltoall | sendrecv (or with _perf); or
    /// `switch`: the one-machine memif fabric that `--backend dpdk` ranks join.
    pub collective: String,

    /// Smallest size in bytes (K, M, G suffixes).
    #[arg(short = 'b', long = "minbytes", default_value = "32M")]
    pub min_bytes: String,
    /// Largest size in bytes.
    #[arg(short = 'e', long = "maxbytes", default_value = "32M")]
    pub max_bytes: String,
    /// Multiply the size by this between lines.
    #[arg(short = 'f', long = "stepfactor")]
    pub step_factor: Option<u64>,
    /// Add this many bytes between lines (when no -f).
    #[arg(short = 'i', long = "stepbytes", default_value = "1M")]
    pub step_bytes: String,
    /// Timed iterations per line.
    #[arg(short = 'n', long = "iters", default_value_t = 20)]
    pub iters: u32,
    /// Warm-up iterations per line.
    #[arg(short = 'w', long = "warmup_iters", default_value_t = 1)]
    pub warmup: u32,
    /// Check the results (1) or not (0).
    #[arg(short = 'c', long = "check", default_value_t = 1)]
    pub check: u8,
    /// Reduction: sum, prod, max, min, avg or all.
    #[arg(short = 'o', long = "op", default_value = "sum")]
    pub op: String,
    /// Data type: int8, uint8, int32, uint32, int64, uint64, half, float, double, bfloat16 or all.
    #[arg(short = 'd', long = "datatype", default_value = "float")]
    pub dtype: String,
    /// Root rank (printed; these collectives have none).
    #[arg(short = 'r', long = "root", default_value_t = -1)]
    pub root: i32,
    /// Write the results as JSON to this file.
    #[arg(short = 'J', long = "output_file")]
    pub json: Option<String>,

    /// sim (simulated hosts), mem (threads over in-memory links) or dpdk (processes).
    #[arg(long, default_value = "sim")]
    pub backend: String,
    /// Ranks (sim, mem; dpdk takes them from mpirun or --tcp-ranks).
    #[arg(long, default_value_t = 8)]
    pub ranks: usize,
    /// Fabric plan file or built-in name (sim; default: the 8-plane, 128-host plan).
    #[arg(long)]
    pub plan: Option<String>,
    /// Seed of the simulated fabric.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Bytes per Write-with-Immediate (a slice of a rank's block).
    #[arg(long = "slice-bytes", default_value = "256K")]
    pub slice_bytes: String,
    /// Write-with-Immediates in flight per connection.
    #[arg(long, default_value_t = mrc_coll::comm::DEFAULT_WINDOW)]
    pub window: u32,
    /// Planes of the in-memory fabric (mem) or DPDK ports per rank (dpdk).
    #[arg(long, default_value_t = 2)]
    pub planes: usize,

    /// Fail a link (sim): [A:B][@T][,up@T]; no time: mid-way through the last line's timed
    /// out-of-place loop; no link: rank 0's plane-0 T0 uplink to spine 0.
    #[arg(long = "fail-link", num_args = 0..=1, default_missing_value = "auto")]
    pub fail_link: Vec<String>,
    /// Flap a link (sim): [A:B][@START][,period=T][,down=T][,count=N].
    #[arg(long = "flap-link", num_args = 0..=1, default_missing_value = "auto")]
    pub flap_link: Vec<String>,
    /// Random loss (sim): P[@T] on every link, or A:B=P[@T].
    #[arg(long)]
    pub loss: Vec<String>,

    /// dpdk: EAL arguments of this rank (its ports, one per plane; rank-specific parts may use
    /// {rank}). switch: its ports, rank-major.
    #[arg(long)]
    pub eal: Option<String>,
    /// dpdk and switch: the one-machine fabric NAME: each rank gets a memif port per plane
    /// (--planes) to `mrc-coll switch --memif NAME`, which forwards between them.
    #[arg(long)]
    pub memif: Option<String>,
    /// dpdk and switch: the switch's control address (default with --memif: 127.0.0.1:18600).
    #[arg(long)]
    pub switch: Option<String>,
    /// dpdk without mpirun: this process's rank (TCP rendezvous).
    #[arg(long = "tcp-rank")]
    pub tcp_rank: Option<usize>,
    /// dpdk without mpirun: number of ranks (TCP rendezvous).
    #[arg(long = "tcp-ranks")]
    pub tcp_ranks: Option<usize>,
    /// dpdk without mpirun: rank 0's rendezvous address (host:port).
    #[arg(long = "tcp-addr", default_value = "127.0.0.1:18515")]
    pub tcp_addr: String,
}

/// The parsed fault options.
#[derive(Debug, Clone, Default)]
pub struct FaultArgs {
    pub specs: Vec<FaultSpec>,
}

impl Args {
    /// The benchmark's options.
    pub fn bench(&self) -> anyhow::Result<BenchOpts> {
        let coll: Collective = self.collective.parse()?;
        let mut o = BenchOpts::new(coll);
        o.min_bytes = parse_size(&self.min_bytes).map_err(anyhow::Error::msg)?;
        o.max_bytes = parse_size(&self.max_bytes).map_err(anyhow::Error::msg)?;
        o.step_bytes = parse_size(&self.step_bytes).map_err(anyhow::Error::msg)?;
        o.step_factor = self.step_factor.unwrap_or(0);
        o.iters = self.iters;
        o.warmup = self.warmup;
        o.check = self.check != 0;
        o.root = self.root;
        o.slice_bytes = parse_size(&self.slice_bytes).map_err(anyhow::Error::msg)?;
        o.dtypes = if self.dtype == "all" {
            DataType::ALL.to_vec()
        } else {
            vec![self.dtype.parse()?]
        };
        o.ops = if self.op == "all" {
            RedOp::ALL.to_vec()
        } else {
            vec![self.op.parse()?]
        };
        anyhow::ensure!(o.min_bytes <= o.max_bytes, "-b is larger than -e");
        anyhow::ensure!(self.iters > 0, "-n must be at least 1");
        Ok(o)
    }

    /// The fault options.
    pub fn faults(&self) -> anyhow::Result<FaultArgs> {
        let mut specs = Vec::new();
        for s in &self.fail_link {
            specs.push(parse_fail_link(s).map_err(anyhow::Error::msg)?);
        }
        for s in &self.flap_link {
            specs.push(parse_flap_link(s).map_err(anyhow::Error::msg)?);
        }
        for s in &self.loss {
            specs.push(parse_loss(s).map_err(anyhow::Error::msg)?);
        }
        Ok(FaultArgs { specs })
    }
}
