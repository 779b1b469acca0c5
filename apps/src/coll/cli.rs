//! The command line: nccl-tests' options with nccl-tests' letters and meanings (`-b -e -f -i
//! -n -m -w -N -c -o -d -r -z -T -a -g -t -G -C -J`), the collective as the first word, plus
//! the backends and the simulated faults. Every option is either honoured as nccl-tests
//! defines it or refused by name with what to give instead; none is ignored.

use clap::Parser;
use mrc_coll::bench::{Average, parse_size};
use mrc_coll::program::Blocking;
use mrc_coll::{BenchOpts, Collective, DataType, RedOp};

use crate::faults::{FaultSpec, parse_fail_link, parse_flap_link, parse_loss};
use crate::{bail_usage, usage};

/// mrc-coll: nccl-tests' collective benchmarks over MRC, on the simulated fabric, on threads
/// or on processes.
#[derive(Debug, Parser)]
#[command(name = "mrc-coll", version, long_about = None)]
#[command(after_help = "Examples:\n  \
    mrc-coll all_reduce --backend sim --ranks 64 -b 8 -e 256M -f 2 -n 1 -w 0\n  \
    mrc-coll all_reduce --backend sim --ranks 64 -b 256M -e 256M -n 2 --fail-link\n  \
    mrc-coll broadcast --backend sim --ranks 8 -b 1K -e 64M -f 4 -r 0\n  \
    mrc-coll alltoall --backend mem --ranks 4 -b 1K -e 4M -f 4 -g 1 -t 1\n  \
    mrc-coll switch --ranks 4 --memif demo &   # one machine: a memif switch per plane\n  \
    mpirun --allow-run-as-root --oversubscribe -np 4 mrc-coll all_reduce --backend dpdk --memif demo -b 8 -e 1M -f 4")]
pub struct Args {
    /// all_reduce | all_gather | reduce_scatter | alltoall | sendrecv | broadcast | reduce |
    /// gather | scatter | hypercube (or with _perf); or `switch`: the one-machine memif fabric
    /// that `--backend dpdk` ranks join.
    pub collective: Option<String>,

    /// Smallest size in bytes (K, M, G suffixes).
    #[arg(short = 'b', long = "minbytes", default_value = "32M")]
    pub min_bytes: String,
    /// Largest size in bytes.
    #[arg(short = 'e', long = "maxbytes", default_value = "32M")]
    pub max_bytes: String,
    /// Multiply the size by this between lines (more than 1; else -i applies).
    #[arg(short = 'f', long = "stepfactor")]
    pub step_factor: Option<u64>,
    /// Add this many bytes between lines (when no -f above 1).
    #[arg(short = 'i', long = "stepbytes", default_value = "1M")]
    pub step_bytes: String,
    /// Timed iterations per line.
    #[arg(short = 'n', long = "iters", default_value_t = 20)]
    pub iters: u32,
    /// Operations per timed iteration (run one after another; the time is per operation).
    #[arg(short = 'm', long = "agg_iters", default_value_t = 1)]
    pub agg_iters: u32,
    /// Warm-up iterations per line.
    #[arg(short = 'w', long = "warmup_iters", default_value_t = 1)]
    pub warmup: u32,
    /// Run the whole sweep this many times (nccl-tests' 0, forever, is refused).
    #[arg(short = 'N', long = "run_cycles", default_value_t = 1)]
    pub run_cycles: u32,
    /// Checked operations per line (0: none).
    #[arg(short = 'c', long = "check", default_value_t = 1)]
    pub check: u32,
    /// Reduction: sum, prod, max, min, avg or all.
    #[arg(short = 'o', long = "op", default_value = "sum")]
    pub op: String,
    /// Data type: int8, uint8, int32, uint32, int64, uint64, half, float, double, bfloat16 or all.
    #[arg(short = 'd', long = "datatype", default_value = "float")]
    pub dtype: String,
    /// Root rank of broadcast, reduce, gather and scatter (-1: every root in turn).
    #[arg(short = 'r', long = "root", default_value_t = -1, allow_negative_numbers = true)]
    pub root: i64,
    /// 0: operations back to back; 1: a barrier after each; 2: as 0 (a rank always waits for
    /// its operation); 3: a barrier after each iteration, its time left out.
    #[arg(short = 'z', long = "blocking", default_value_t = 0)]
    pub blocking: u8,
    /// An operation or barrier not complete after this many seconds fails the run (0: none).
    #[arg(short = 'T', long = "timeout", default_value_t = 0)]
    pub timeout: u64,
    /// The time of a line: 0 rank 0's, 1 the mean over the ranks, 2 the min, 3 the max.
    #[arg(short = 'a', long = "average", default_value_t = 1)]
    pub average: u8,
    /// GPUs per thread: 1 (a rank is one process, thread or simulated host).
    #[arg(short = 'g', long = "ngpus", default_value_t = 1)]
    pub ngpus: u32,
    /// Threads per process: 1 (the ranks come from --ranks or mpirun).
    #[arg(short = 't', long = "nthreads", default_value_t = 1)]
    pub nthreads: u32,
    /// CUDA graph launches: 0 (operations are posted by the rank's CPU).
    #[arg(short = 'G', long = "cudagraph", default_value_t = 0)]
    pub cudagraph: u32,
    /// Report CPU time: 0 (the time is of the whole operation).
    #[arg(short = 'C', long = "report_cputime", default_value_t = 0)]
    pub report_cputime: u8,
    /// Write the results as JSON to this file.
    #[arg(short = 'J', long = "output_file")]
    pub json: Option<String>,
    /// --metrics, --push, --metrics-textfile, --sample-every ...: every rank's engine
    /// counters and the table's lines (docs/metrics.md).
    #[command(flatten)]
    pub telemetry: crate::metrics::telemetry::TelemetryArgs,

    /// sim (simulated hosts), mem (threads over in-memory links) or dpdk (processes).
    #[arg(long, default_value = "sim")]
    pub backend: String,
    /// Ranks (sim, mem: default 8; dpdk takes them from mpirun or --tcp-ranks).
    #[arg(long)]
    pub ranks: Option<usize>,
    /// Fabric plan file or built-in name (sim; default: the 8-plane, 128-host plan).
    #[arg(long)]
    pub plan: Option<String>,
    /// Seed of the simulated fabric (sim; default 1).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Bytes per Write-with-Immediate (a slice of a rank's block): a multiple of 4K.
    #[arg(long = "slice-bytes", default_value = "256K")]
    pub slice_bytes: String,
    /// Write-with-Immediates in flight per connection (1 to the engine's limit, 128).
    #[arg(long, default_value_t = mrc_coll::comm::DEFAULT_WINDOW)]
    pub window: u32,
    /// Planes of the in-memory fabric (mem) or memif ports per rank (dpdk --memif, switch):
    /// 1 to 8, default 2.
    #[arg(long)]
    pub planes: Option<usize>,

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
    /// dpdk: rank 0's rendezvous address (host:port; default 127.0.0.1:18515).
    #[arg(long = "tcp-addr")]
    pub tcp_addr: Option<String>,
}

/// The parsed fault options.
#[derive(Debug, Clone, Default)]
pub struct FaultArgs {
    pub specs: Vec<FaultSpec>,
}

/// The most bytes a slice may have.
const MAX_SLICE_BYTES: u64 = 1 << 30;

fn size(flag: &str, s: &str) -> anyhow::Result<u64> {
    parse_size(s).map_err(|e| usage!("{flag} {s}: {e}"))
}

/// What the first word may be.
const COLLECTIVES: &str = "all_reduce, all_gather, reduce_scatter, alltoall, sendrecv, \
                           broadcast, reduce, gather, scatter, hypercube (or switch)";

impl Args {
    /// The first word: the collective, or `switch`.
    pub fn collective(&self) -> anyhow::Result<&str> {
        self.collective
            .as_deref()
            .ok_or_else(|| usage!("name the collective first: {COLLECTIVES}"))
    }

    /// The benchmark's options, every nccl-tests option checked (what depends on the ranks
    /// is checked once they are known: [`super::setup`]).
    pub fn bench(&self) -> anyhow::Result<BenchOpts> {
        let name = self.collective()?;
        let coll: Collective = name
            .parse()
            .map_err(|_| usage!("unknown collective {name:?}: one of {COLLECTIVES}"))?;
        let mut o = BenchOpts::new(coll);
        self.sweep(&mut o)?;
        self.nccl_flags(&mut o)?;
        o.slice_bytes = size("--slice-bytes", &self.slice_bytes)?;
        if o.slice_bytes == 0
            || !o.slice_bytes.is_multiple_of(4096)
            || o.slice_bytes > MAX_SLICE_BYTES
        {
            bail_usage!(
                "--slice-bytes {}: a multiple of 4K up to 1G (whole pages per Write)",
                self.slice_bytes
            );
        }
        o.dtypes = if self.dtype == "all" {
            DataType::ALL.to_vec()
        } else {
            vec![self.dtype.parse().map_err(|e| usage!("-d: {e}"))?]
        };
        o.ops = if self.op == "all" {
            RedOp::ALL.to_vec()
        } else {
            vec![self.op.parse().map_err(|e| usage!("-o: {e}"))?]
        };
        o.root = match (self.root, coll.rooted()) {
            (-1, _) => None,
            (r, true) if r >= 0 => Some(r as usize),
            (r, true) => bail_usage!("-r {r}: a rank, or -1 for every root in turn"),
            (r, false) => bail_usage!(
                "-r {r}: {coll} has no root (broadcast, reduce, gather and scatter have one): \
                 leave -r out"
            ),
        };
        Ok(o)
    }

    /// `-b -e -f -i`, `-n -m -w -N`: the sweep.
    fn sweep(&self, o: &mut BenchOpts) -> anyhow::Result<()> {
        o.min_bytes = size("-b", &self.min_bytes)?;
        o.max_bytes = size("-e", &self.max_bytes)?;
        o.step_bytes = size("-i", &self.step_bytes)?;
        o.step_factor = self.step_factor.unwrap_or(0);
        let (b, e) = (&self.min_bytes, &self.max_bytes);
        if o.min_bytes > o.max_bytes {
            bail_usage!("-b {b} is larger than -e {e}: give -b at most -e");
        }
        if o.min_bytes < o.max_bytes {
            if o.step_factor > 1 && o.min_bytes == 0 {
                bail_usage!(
                    "-b 0 -f {}: 0 never grows by a factor: give -b 1 or more",
                    o.step_factor
                );
            }
            if o.step_factor <= 1 && o.step_bytes == 0 {
                bail_usage!(
                    "-i {}: the size would never grow from -b {b} to -e {e}: give -i BYTES \
                     above 0 or -f FACTOR above 1",
                    self.step_bytes
                );
            }
        }
        if o.too_many_sizes() {
            bail_usage!(
                "-b {b} -e {e}: more than {} sizes with this step: give a larger -i or a -f",
                mrc_coll::bench::MAX_SIZES
            );
        }
        if self.iters == 0 {
            bail_usage!("-n 0: give at least one timed iteration");
        }
        if self.agg_iters == 0 {
            bail_usage!("-m 0: give at least one operation per iteration");
        }
        if self.run_cycles == 0 {
            bail_usage!("-N 0 (run forever) is not supported: give the number of cycles");
        }
        o.iters = self.iters;
        o.agg_iters = self.agg_iters;
        o.warmup = self.warmup;
        o.run_cycles = self.run_cycles;
        o.checks = self.check;
        Ok(())
    }

    /// `-z -T -a`, and `-g -t -G -C`, which have one value here.
    fn nccl_flags(&self, o: &mut BenchOpts) -> anyhow::Result<()> {
        o.blocking = Blocking::from_code(self.blocking).ok_or_else(|| {
            usage!(
                "-z {}: 0 (no blocking), 1 (barrier after each operation), 2 (wait after each) \
                 or 3 (barrier after each iteration, not timed)",
                self.blocking
            )
        })?;
        o.average = Average::from_code(self.average).ok_or_else(|| {
            usage!(
                "-a {}: 0 (rank 0's time), 1 (the mean), 2 (the min) or 3 (the max)",
                self.average
            )
        })?;
        o.timeout_secs = (self.timeout > 0).then_some(self.timeout);
        if self.ngpus != 1 {
            bail_usage!(
                "mrc-coll runs one rank per process or host: -g {} cannot be honoured, give -g 1",
                self.ngpus
            );
        }
        if self.nthreads != 1 {
            bail_usage!(
                "mrc-coll runs one rank per process, thread or host: -t {} cannot be honoured, \
                 give -t 1 (and the ranks with --ranks or mpirun -np)",
                self.nthreads
            );
        }
        if self.cudagraph != 0 {
            bail_usage!(
                "-G {}: there are no CUDA graphs here (a rank's CPU posts every operation): \
                 give -G 0",
                self.cudagraph
            );
        }
        if self.report_cputime != 0 {
            bail_usage!(
                "-C {}: a rank's CPU posts and completes each operation, there is no separate \
                 launch time to report: give -C 0",
                self.report_cputime
            );
        }
        Ok(())
    }

    /// The fault options.
    pub fn faults(&self) -> anyhow::Result<FaultArgs> {
        // The parsers' messages mostly name their option already.
        let named = |flag: &str, s: &str, e: crate::tool::Usage| {
            let e = e.to_string();
            if e.starts_with("--") {
                usage!("{e}")
            } else {
                usage!("{flag} {s}: {e}")
            }
        };
        let mut specs = Vec::new();
        for s in &self.fail_link {
            specs.push(parse_fail_link(s).map_err(|e| named("--fail-link", s, e))?);
        }
        for s in &self.flap_link {
            specs.push(parse_flap_link(s).map_err(|e| named("--flap-link", s, e))?);
        }
        for s in &self.loss {
            specs.push(parse_loss(s).map_err(|e| named("--loss", s, e))?);
        }
        Ok(FaultArgs { specs })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Args {
        let mut all = vec!["mrc-coll"];
        all.extend_from_slice(args);
        Args::try_parse_from(all).expect("parses")
    }

    fn refusal(args: &[&str]) -> String {
        let e = parse(args).bench().expect_err("refused");
        assert!(crate::tool::is_usage(&e), "{e:#}");
        crate::tool::one_line(&e)
    }

    #[test]
    fn nccl_tests_flags_are_honoured_or_refused_by_name() {
        let o = parse(&[
            "all_reduce",
            "-g",
            "1",
            "-t",
            "1",
            "-a",
            "3",
            "-z",
            "3",
            "-m",
            "2",
        ])
        .bench()
        .unwrap();
        assert_eq!(o.average, Average::Max);
        assert_eq!(
            (o.blocking, o.agg_iters),
            (Blocking::BarrierIterExcluded, 2)
        );
        let o = parse(&["reduce", "-r", "2", "-T", "5", "-N", "3", "-c", "2"])
            .bench()
            .unwrap();
        assert_eq!((o.root, o.timeout_secs), (Some(2), Some(5)));
        assert_eq!((o.run_cycles, o.checks), (3, 2));
        assert_eq!(parse(&["gather", "-r", "-1"]).bench().unwrap().root, None);
        for (args, names) in [
            (&["all_reduce", "-g", "2"][..], "-g 2"),
            (&["all_reduce", "-t", "4"], "-t 4"),
            (&["all_reduce", "-G", "1"], "-G 1"),
            (&["all_reduce", "-C", "1"], "-C 1"),
            (&["all_reduce", "-a", "4"], "-a 4"),
            (&["all_reduce", "-z", "9"], "-z 9"),
            (&["all_reduce", "-N", "0"], "-N 0"),
            (&["all_reduce", "-m", "0"], "-m 0"),
            (&["all_reduce", "-n", "0"], "-n 0"),
            (&["all_reduce", "-r", "0"], "has no root"),
            (&["broadcast", "-r", "-2"], "-r -2"),
            (&["all_reduce", "-b", "8", "-e", "1M", "-i", "0"], "-i 0"),
            (&["all_reduce", "-b", "0", "-e", "1M", "-f", "2"], "-b 0"),
            (&["all_reduce", "-b", "1", "-e", "1G", "-i", "1"], "sizes"),
            (&["all_reduce", "-b", "2M", "-e", "1M"], "-b 2M"),
            (&["all_reduce", "-b", "lots"], "-b lots"),
            (&["all_reduce", "--slice-bytes", "1000"], "--slice-bytes"),
            (&["all_reduce", "-d", "quad"], "quad"),
            (&["all_reduce", "-o", "xor"], "xor"),
            (&["allreduce"], "allreduce"),
        ] {
            let line = refusal(args);
            assert!(line.contains(names), "{args:?}: {line}");
        }
        // One size needs no step.
        assert!(
            parse(&["all_reduce", "-b", "8", "-e", "8", "-i", "0"])
                .bench()
                .is_ok()
        );
    }
}
