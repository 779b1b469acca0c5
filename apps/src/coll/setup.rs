//! What a run needs checked before it prints anything: the backend and the options that
//! belong to it, the ranks (the plan's hosts, the root), the window, the planes, the memory
//! the buffers take, the JSON file. Each refusal is one [`Usage`](crate::tool::Usage) line
//! naming the option and what to give instead.

use std::fs::File;
use std::io::Write as _;

use mrc_coll::backend::BufferSizes;
use mrc_coll::memory::COMPACT_BLOCK;
use mrc_coll::spec::SpecError;
use mrc_coll::{BenchOpts, Row};
use mrc_srv6::plan::Plan;

use super::cli::Args;
use crate::{bail_usage, usage};

/// Where the ranks run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sim,
    Mem,
    Dpdk,
}

/// Ranks when `--ranks` is not given (sim, mem).
pub const DEFAULT_RANKS: usize = 8;
/// Planes when `--planes` is not given (mem, dpdk --memif, switch).
pub const DEFAULT_PLANES: usize = 2;
/// Planes a fabric of ours has: 1 to this (ports per rank).
pub const MAX_PLANES: usize = 8;
/// The most Write-with-Immediates in flight per connection: the engine's outstanding
/// Write-with-Immediate limit, which the receives a rank keeps posted also match.
pub const MAX_WINDOW: u32 = mrc_transport::config::defaults::WIMM_LIMIT as u32;

impl Backend {
    pub fn of(args: &Args) -> anyhow::Result<Self> {
        let b = match args.backend.as_str() {
            "sim" => Self::Sim,
            "mem" => Self::Mem,
            "dpdk" => Self::Dpdk,
            other => bail_usage!("--backend {other}: sim, mem or dpdk"),
        };
        b.check_options(args)?;
        Ok(b)
    }

    const fn name(self) -> &'static str {
        match self {
            Self::Sim => "sim",
            Self::Mem => "mem",
            Self::Dpdk => "dpdk",
        }
    }

    /// Options of another backend are refused (never silently ignored), as is a window the
    /// engine cannot keep in flight.
    fn check_options(self, args: &Args) -> anyhow::Result<()> {
        let given = |on: bool, flag: &str, for_what: &str| -> anyhow::Result<()> {
            if on {
                bail_usage!(
                    "{flag} is for {for_what}, not --backend {}: leave it out",
                    self.name()
                );
            }
            Ok(())
        };
        let faults =
            !(args.fail_link.is_empty() && args.flap_link.is_empty() && args.loss.is_empty());
        if self != Self::Sim {
            given(args.plan.is_some(), "--plan", "--backend sim")?;
            given(args.seed.is_some(), "--seed", "--backend sim")?;
            given(
                faults,
                "--fail-link, --flap-link and --loss",
                "--backend sim",
            )?;
        }
        if self != Self::Dpdk {
            for (on, flag) in [
                (args.eal.is_some(), "--eal"),
                (args.memif.is_some(), "--memif"),
                (args.switch.is_some(), "--switch"),
                (args.tcp_rank.is_some(), "--tcp-rank"),
                (args.tcp_ranks.is_some(), "--tcp-ranks"),
                (args.tcp_addr.is_some(), "--tcp-addr"),
            ] {
                given(on, flag, "--backend dpdk")?;
            }
        }
        if self == Self::Sim {
            given(
                args.planes.is_some(),
                "--planes",
                "--backend mem and dpdk (the simulator's come from --plan)",
            )?;
        }
        if self == Self::Dpdk && args.eal.is_some() {
            given(
                args.planes.is_some(),
                "--planes",
                "--memif (with --eal, a plane is each port the EAL arguments name)",
            )?;
        }
        window(args.window)
    }
}

/// `--window W`: 1 to [`MAX_WINDOW`].
pub fn window(w: u32) -> anyhow::Result<()> {
    if !(1..=MAX_WINDOW).contains(&w) {
        bail_usage!(
            "--window {w}: 1 to {MAX_WINDOW} Write-with-Immediates in flight per connection \
             (the engine's limit)"
        );
    }
    Ok(())
}

/// `--planes P` (default 2): 1 to [`MAX_PLANES`].
pub fn planes(args: &Args) -> anyhow::Result<usize> {
    let p = args.planes.unwrap_or(DEFAULT_PLANES);
    if !(1..=MAX_PLANES).contains(&p) {
        bail_usage!("--planes {p}: 1 to {MAX_PLANES} planes (ports per rank)");
    }
    Ok(p)
}

/// `--ranks N` of the simulator: 1 to the plan's hosts.
pub fn sim_ranks(args: &Args, plan: &Plan) -> anyhow::Result<usize> {
    let n = args.ranks.unwrap_or(DEFAULT_RANKS);
    let hosts = plan.host_count() as usize;
    if n == 0 || n > hosts {
        bail_usage!(
            "--ranks {n}: 1 to {hosts} (the hosts of plan {}; a larger fabric: --plan)",
            plan.name()
        );
    }
    Ok(n)
}

/// `--ranks N` of the threads: 1 or more (up to what the immediates can name).
pub fn mem_ranks(args: &Args) -> anyhow::Result<usize> {
    let n = args.ranks.unwrap_or(DEFAULT_RANKS);
    let max = mrc_coll::proto::MAX_RANKS;
    if n == 0 || n > max {
        bail_usage!("--ranks {n}: 1 to {max}");
    }
    Ok(n)
}

/// Every operation of the run for `nranks` ranks, refusing what the ranks cannot run.
pub fn rows(opts: &BenchOpts, nranks: usize) -> anyhow::Result<Vec<Row>> {
    let rows = opts.rows(nranks).map_err(|e| match e {
        SpecError::BadRoot { root, nranks } => usage!(
            "-r {root}: {nranks} ranks have roots 0 to {} (-1: every root in turn)",
            nranks - 1
        ),
        SpecError::TooManySlices { slices } => usage!(
            "-e {}: {slices} slices of --slice-bytes per block, more than an immediate names: \
             give a larger --slice-bytes",
            opts.max_bytes
        ),
        SpecError::NoRanks | SpecError::TooManyRanks(_) => usage!("--ranks {nranks}: {e}"),
        SpecError::NotPowerOfTwo(n) => {
            usage!("--ranks {n}: hypercube needs a power-of-two number of ranks (2, 4, 8, ...)")
        }
        other => usage!("{other}"),
    })?;
    if rows.is_empty() {
        bail_usage!("no sizes between -b and -e");
    }
    Ok(rows)
}

/// The memory the buffers of `ranks` ranks take in this process (`compact`: the simulator's
/// memory, one word per 4 KiB block) must be there: a run never starts to die of it later.
pub fn memory(rows: &[Row], ranks: usize, compact: bool) -> anyhow::Result<()> {
    let s = BufferSizes::for_rows(rows);
    let per_rank = s.send + s.recv + s.stage;
    let need = if compact {
        // A block costs a word and its tag; the small buffers are dense.
        per_rank / COMPACT_BLOCK as u64 * 16 + per_rank.min(3 << 16)
    } else {
        per_rank
    }
    .saturating_mul(ranks as u64);
    let Some(avail) = available_memory() else {
        return Ok(());
    };
    if need > avail {
        let gib = |b: u64| b as f64 / f64::from(1u32 << 30);
        bail_usage!(
            "-e {}: the buffers of {ranks} ranks take {:.1} GiB, more than the {:.1} GiB of \
             memory available: give a smaller -e or fewer ranks",
            rows.iter().map(|r| r.spec.size_bytes()).max().unwrap_or(0),
            gib(need),
            gib(avail)
        );
    }
    Ok(())
}

/// `MemAvailable` of /proc/meminfo, in bytes.
fn available_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The `-J` file, created before the run (so a path that cannot be written is refused
/// first), written at its end.
#[derive(Debug)]
pub struct JsonFile {
    path: String,
    file: File,
}

impl JsonFile {
    pub fn create(path: &str) -> anyhow::Result<Self> {
        let file = File::create(path)
            .map_err(|e| usage!("-J {path}: {e}: give a file that can be written"))?;
        Ok(Self {
            path: path.to_owned(),
            file,
        })
    }

    pub fn write(mut self, doc: &serde_json::Value) -> anyhow::Result<()> {
        let text = serde_json::to_string_pretty(doc)?;
        self.file
            .write_all(text.as_bytes())
            .and_then(|()| self.file.flush())
            .map_err(|e| usage!("-J {}: {e}", self.path))
    }
}
