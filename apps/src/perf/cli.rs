//! The command line: perftest's options with perftest's spelling and meaning where they apply
//! (short flags exactly: `-s -a -n -D -q -b -t -r -Q -p`; its long flags with underscores),
//! plus the MRC ones (`--planes`, `--evs`, `--plan`, `--cc`, faults, metrics, backends).

use std::path::PathBuf;

use clap::Parser;
use mrc_transport::Duration;

use super::settings::{BackendKind, BwUnits, CcChoice, Pattern, Rate, Settings, TestKind};
use super::traffic::{Traffic, TrafficSpec};
use crate::faults;
use crate::units::parse_duration;

/// mrc-perf: perftest-style bandwidth and latency tests over MRC, with what perftest cannot
/// show: what every plane and path did.
#[derive(Debug, Parser)]
#[command(name = "mrc-perf", version, about, long_about = None)]
#[command(after_help = "Examples:\n  \
    mrc-perf                                  write_bw on the simulated 4-plane fabric\n  \
    mrc-perf write_bw --fail-link             ... with a T0-T1 link failing mid-run\n  \
    mrc-perf write_lat -s 64 -n 2000          latency, half round trip\n  \
    mrc-perf write_bw -q 4 -b --report_gbits  4 QPs both ways, Gb/s\n  \
    mrc-perf write_bw --backend dpdk --eal \"...\"            server\n  \
    mrc-perf write_bw SERVER --backend dpdk --eal \"...\"     client")]
pub struct Args {
    /// write_bw | write_imm_bw | write_lat (also with perftest's ib_ prefix).
    #[arg(default_value = "write_bw")]
    pub test: String,
    /// The server to connect to (client side of a two-host run).
    pub server: Option<String>,

    /// Message size in bytes (default 65536 for BW, 2 for latency).
    #[arg(short = 's', long = "size")]
    pub size: Option<u64>,
    /// Sweep sizes 2 .. 2^23.
    #[arg(short = 'a', long = "all", conflicts_with = "size")]
    pub all: bool,
    /// Iterations per QP (default 5000 for BW, 1000 for latency).
    #[arg(short = 'n', long = "iters")]
    pub iters: Option<u64>,
    /// Run for this long instead of a number of iterations (seconds, or 2ms, 500us...).
    #[arg(short = 'D', long = "duration")]
    pub duration: Option<String>,
    /// Print a result line every duration, forever (needs -D).
    #[arg(long = "run_infinitely", requires = "duration")]
    pub run_infinitely: bool,
    /// Number of QPs.
    #[arg(short = 'q', long = "qp", default_value_t = 1)]
    pub qps: u32,
    /// Traffic both ways (BW tests); the result is the sum.
    #[arg(short = 'b', long = "bidirectional")]
    pub bidirectional: bool,
    /// Report Gb/s (10^9 bits) instead of MB/s (perftest's MB: 2^20 bytes).
    #[arg(long = "report_gbits")]
    pub report_gbits: bool,
    /// Outstanding sends per QP (default 128 for BW, 1 for latency).
    #[arg(short = 't', long = "tx-depth")]
    pub tx_depth: Option<u32>,
    /// Receives kept posted per QP.
    #[arg(short = 'r', long = "rx-depth", default_value_t = 512)]
    pub rx_depth: u32,
    /// One signalled completion every this many sends.
    #[arg(short = 'Q', long = "cq-mod", default_value_t = 100)]
    pub cq_mod: u32,
    /// Rate limit per QP, in --rate_units.
    #[arg(long = "rate_limit")]
    pub rate_limit: Option<f64>,
    /// M (Mb/s), g (Gb/s) or p (messages/s).
    #[arg(long = "rate_units", default_value = "g")]
    pub rate_units: String,
    /// Messages released together (with --rate_limit or --burst_gap).
    #[arg(long = "burst_size")]
    pub burst_size: Option<u32>,
    /// Synchronized bursts: a burst of --burst_size messages starts every this long on every
    /// QP and host together.
    #[arg(
        long = "burst-gap",
        visible_alias = "burst_gap",
        requires = "burst_size"
    )]
    pub burst_gap: Option<String>,
    /// On/off load: saturate for ON, pause for OFF (e.g. 100us,400us), repeated.
    #[arg(long = "on-off", visible_alias = "on_off", conflicts_with_all = ["rate_limit", "burst_gap"])]
    pub on_off: Option<String>,
    /// TCP port of the out-of-band QP exchange.
    #[arg(short = 'p', long = "port", default_value_t = 18515)]
    pub port: u16,
    /// Print the results as JSON too.
    #[arg(long = "out_json")]
    pub out_json: bool,
    /// Write the JSON results to this file.
    #[arg(long = "out_json_file")]
    pub out_json_file: Option<PathBuf>,

    /// Planes of the built-in simulated fabric (default 4).
    #[arg(long)]
    pub planes: Option<u8>,
    /// EVs per plane of every QP.
    #[arg(long)]
    pub evs: Option<u16>,
    /// Fabric plan: a TOML file or a built-in name (small).
    #[arg(long)]
    pub plan: Option<String>,
    /// Congestion control: nscc (MRC), fixed (one BDP window), roce (one path, go-back-N,
    /// DCQCN, no trimming).
    #[arg(long, default_value = "nscc")]
    pub cc: String,
    /// sim (built-in simulated fabric), mem (two NIC threads), dpdk.
    #[arg(long, default_value = "sim")]
    pub backend: String,
    /// DPDK EAL arguments (--backend dpdk), one string; the ports are its --vdev / -a
    /// devices, one per plane, in plane order.
    #[arg(long, allow_hyphen_values = true)]
    pub eal: Option<String>,
    /// Fail a link: bare = the client's plane-0 uplink, mid-run; or =A:B@TIME[,up@TIME].
    #[arg(long = "fail-link", num_args = 0..=1, require_equals = true, default_missing_value = "auto")]
    pub fail_link: Vec<String>,
    /// Flap a link: =[A:B][@START][,period=T][,down=T][,count=N].
    #[arg(long = "flap-link", num_args = 0..=1, require_equals = true, default_missing_value = "auto")]
    pub flap_link: Vec<String>,
    /// Random loss: P[@TIME] on every link, or A:B=P[@TIME] on one.
    #[arg(long)]
    pub loss: Vec<String>,
    /// --metrics, --push, --metrics-textfile, --sample-every ... (docs/metrics.md).
    #[command(flatten)]
    pub telemetry: crate::metrics::telemetry::TelemetryArgs,
    /// Fill the source buffers with patterns and verify the destinations at the end.
    #[arg(long)]
    pub check: bool,
    /// Live per-plane bandwidth on stderr every this long (default: a tenth of the run).
    #[arg(long = "live-every")]
    pub live_every: Option<String>,
    /// No live per-plane bandwidth.
    #[arg(long = "no-live")]
    pub no_live: bool,
    /// Show every EV in the per-EV table, not only those that carried data.
    #[arg(long = "all-evs")]
    pub all_evs: bool,
    /// Seed of the simulated fabric and engines.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,

    /// Traffic over many hosts: pair (perftest's), pairs, permutation, incast:K, all2all or
    /// ring (docs/mrc-perf.md, "Testing a fabric").
    #[arg(long)]
    pub pattern: Option<String>,
    /// A traffic matrix: one `SRC DST` per line (host numbers), instead of --pattern.
    #[arg(long, conflicts_with = "pattern")]
    pub pairs: Option<PathBuf>,
    /// Hosts the pattern spans: the plan's first N (default: every host; without --plan a
    /// built-in fabric of N hosts).
    #[arg(long)]
    pub hosts: Option<u32>,
    /// With incast:K, a flow into a rack mate of the incast's receiver.
    #[arg(long)]
    pub victim: bool,
    /// Traffic mode: saturate, training (--on-off), storage (--rate_limit, free-running
    /// QPs) or sync_burst (--burst_size, --burst-gap, every flow in step).
    #[arg(long)]
    pub mode: Option<String>,
    /// Write the flows' N x N Gb/s heatmap here (SVG; default: next to --out_json_file).
    #[arg(long = "matrix-svg")]
    pub matrix_svg: Option<PathBuf>,
    /// dpdk --pattern on one machine: memif ports (--planes, 2 by default) to `mrc-coll
    /// switch --ranks N --memif NAME`.
    #[arg(long)]
    pub memif: Option<String>,
    /// dpdk --pattern: the switch's control address (default with --memif: 127.0.0.1:18600).
    #[arg(long)]
    pub switch: Option<String>,
    /// dpdk --pattern without mpirun: this process's rank (with --tcp-ranks).
    #[arg(long = "tcp-rank", requires = "tcp_ranks")]
    pub tcp_rank: Option<usize>,
    /// dpdk --pattern without mpirun: the number of ranks (with --tcp-rank).
    #[arg(long = "tcp-ranks", requires = "tcp_rank")]
    pub tcp_ranks: Option<usize>,
    /// dpdk --pattern: rank 0's rendezvous address (default 127.0.0.1:-p).
    #[arg(long = "tcp-addr")]
    pub tcp_addr: Option<String>,

    // perftest's remaining options, with its spelling; checked in cli/perftest.rs.
    /// Connection type: RC (MRC is RC-only).
    #[arg(short = 'c', long = "connection")]
    pub connection: Option<String>,
    /// Device: mrc-sim, mrc-mem or mrc-dpdk, the one --backend picks.
    #[arg(short = 'd', long = "ib-dev")]
    pub ib_dev: Option<String>,
    /// Port of the device: 1 (an MRC device has one port, which spans every plane).
    #[arg(short = 'i', long = "ib-port")]
    pub ib_port: Option<u32>,
    /// GID index: 0 (the NIC's IPv6 address, its one GID).
    #[arg(short = 'x', long = "gid-index")]
    pub gid_index: Option<u32>,
    /// MTU: payload bytes per packet, 256, 512, 1024, 2048 or 4096.
    #[arg(short = 'm', long = "mtu")]
    pub mtu: Option<u32>,
    /// Max inline data: 0 (the software NIC has no inline sends).
    #[arg(short = 'I', long = "inline_size")]
    pub inline_size: Option<u32>,
    /// Post list: 1 (every send is posted on its own).
    #[arg(short = 'l', long = "post_list")]
    pub post_list: Option<u32>,
    /// Do not measure the BW peak (printed as 0).
    #[arg(short = 'N', long = "noPeak")]
    pub no_peak: bool,
    /// No CPU-frequency warning: accepted; times come from the OS clock, not CPU cycles.
    #[arg(short = 'F', long = "CPU-freq")]
    pub cpu_freq: bool,
    /// With -b, each direction's results too (Local, Remote) after the sum.
    #[arg(long = "report-both")]
    pub report_both: bool,
    /// Print only one figure: bandwidth or message_rate (BW tests), latency (write_lat).
    #[arg(long = "output")]
    pub output: Option<String>,
    /// Write-with-Immediate: write_bw becomes write_imm_bw; write_lat pings with it already.
    #[arg(long = "write_with_imm")]
    pub write_with_imm: bool,
    /// A CPU_Util[%] column: the CPU the NIC thread used over the run (mem, dpdk).
    #[arg(long = "cpu_util")]
    pub cpu_util: bool,
}

/// Tests: the settings of `mrc-perf ARGS...`.
#[cfg(test)]
pub(crate) fn parse(args: &[&str]) -> anyhow::Result<Settings> {
    use clap::Parser as _;
    let mut v = vec!["mrc-perf"];
    v.extend_from_slice(args);
    Args::try_parse_from(v)?.settings()
}

/// The finest `--live-every`: a simulated microsecond, or a real millisecond (each line
/// reads every counter of both NICs).
fn live_floor(b: BackendKind) -> Duration {
    if b == BackendKind::Sim {
        Duration::from_micros(1)
    } else {
        Duration::from_millis(1)
    }
}

mod perftest;

/// Sizes of `-a`: 2 .. 2^23.
pub fn sweep_sizes() -> Vec<u64> {
    (1..=23).map(|i| 1u64 << i).collect()
}

fn test_kind(s: &str) -> anyhow::Result<TestKind> {
    Ok(match s.strip_prefix("ib_").unwrap_or(s) {
        "write_bw" => TestKind::WriteBw,
        "write_imm_bw" => TestKind::WriteImmBw,
        "write_lat" => TestKind::WriteLat,
        other => anyhow::bail!(
            "unknown test {other:?}: write_bw, write_imm_bw or write_lat (MRC carries RDMA \
             Write and Write-with-Immediate only)"
        ),
    })
}

impl Args {
    /// Check the options and resolve the defaults.
    pub fn settings(&self) -> anyhow::Result<Settings> {
        let test = test_kind(&self.test)?;
        let test = self.with_write_with_imm(test);
        let backend = match self.backend.as_str() {
            "sim" => BackendKind::Sim,
            "mem" => BackendKind::Mem,
            "dpdk" => BackendKind::Dpdk,
            b => anyhow::bail!("unknown backend {b:?}: sim, mem or dpdk"),
        };
        let cc = match self.cc.as_str() {
            "nscc" => CcChoice::Nscc,
            "fixed" => CcChoice::Fixed,
            "roce" => CcChoice::Roce,
            c => anyhow::bail!("unknown --cc {c:?}: nscc, fixed or roce"),
        };
        if self.server.is_some() && backend != BackendKind::Dpdk {
            anyhow::bail!(
                "a SERVER address is for two hosts (--backend dpdk); the {} backend runs both ends here",
                backend.name()
            );
        }
        if self.eal.is_some() && backend != BackendKind::Dpdk {
            anyhow::bail!("--eal is for --backend dpdk");
        }
        if self.bidirectional && !test.is_bw() {
            anyhow::bail!(
                "-b (bidirectional) is for bandwidth tests; a latency test is a ping-pong already"
            );
        }
        let sizes = if self.all {
            sweep_sizes()
        } else {
            vec![self.size.unwrap_or(test.default_size())]
        };
        if sizes.iter().any(|&s| s == 0 || s > 1 << 30) {
            anyhow::bail!("-s: the message size must be 1 .. 2^30 bytes");
        }
        let iters = self.iters.unwrap_or(test.default_iters());
        if iters == 0 {
            anyhow::bail!("-n: at least one iteration");
        }
        let duration = self
            .duration
            .as_deref()
            .map(|d| parse_duration(d, 1e9))
            .transpose()
            .map_err(|e| anyhow::anyhow!("-D {e}"))?;
        if duration.is_some_and(|d| d.0 == 0) {
            anyhow::bail!("-D: the duration must be positive");
        }
        if !(1..=1024).contains(&self.qps) {
            anyhow::bail!("-q: 1 to 1024 QPs");
        }
        let tx_depth = self.tx_depth.unwrap_or(test.default_tx_depth());
        if !(1..=8192).contains(&tx_depth) || !(1..=8192).contains(&self.rx_depth) {
            anyhow::bail!("-t and -r: 1 to 8192");
        }
        let rx_depth = self.rx_depth;
        if test == TestKind::WriteImmBw && rx_depth < tx_depth {
            anyhow::bail!(
                "-r {rx_depth} < -t {tx_depth}: every Write-with-Immediate needs a posted receive"
            );
        }
        if self.cq_mod == 0 {
            anyhow::bail!(
                "-Q 0: one signalled completion every 1 or more sends (-Q 1 signals every one)"
            );
        }
        // perftest: the CQ moderation cannot exceed the TX depth.
        let cq_mod = if test.is_bw() {
            self.cq_mod.min(tx_depth)
        } else {
            1
        };
        let pattern = self.pattern()?;
        let mut faults_given = Vec::new();
        for f in &self.fail_link {
            faults_given.push(faults::parse_fail_link(f)?);
        }
        for f in &self.flap_link {
            faults_given.push(faults::parse_flap_link(f)?);
        }
        for f in &self.loss {
            faults_given.push(faults::parse_loss(f)?);
        }
        if !faults_given.is_empty() && backend != BackendKind::Sim {
            anyhow::bail!(
                "--fail-link, --flap-link and --loss act on the simulated fabric (--backend sim)"
            );
        }
        if self.planes.is_some() && backend == BackendKind::Dpdk && self.memif.is_none() {
            anyhow::bail!("--planes builds a fabric (sim, mem); on real ports a plane is a port");
        }
        if let Some(p) = self.planes
            && !(1..=8).contains(&p)
        {
            anyhow::bail!("--planes {p}: 1 to 8 planes");
        }
        if self.evs == Some(0) {
            anyhow::bail!("--evs 0: every QP needs at least one EV per plane");
        }
        let ranked = self.memif.is_some()
            || self.switch.is_some()
            || self.tcp_rank.is_some()
            || self.tcp_addr.is_some();
        if ranked
            && (backend != BackendKind::Dpdk || (self.pattern.is_none() && self.pairs.is_none()))
        {
            anyhow::bail!(
                "--memif, --switch, --tcp-rank and --tcp-addr are for --backend dpdk --pattern \
                 (one host per process)"
            );
        }
        if backend == BackendKind::Dpdk && self.eal.is_none() && self.memif.is_none() {
            anyhow::bail!(
                "--backend dpdk needs its ports: --eal \"... --vdev=NAME,... or -a PCI ...\", one port per plane"
            );
        }
        let telemetry = self.telemetry.config(
            "mrc-perf",
            &crate::metrics::telemetry::hostname(),
            backend == BackendKind::Sim,
        )?;
        let live_every = if self.no_live {
            None
        } else {
            let given = self
                .live_every
                .as_deref()
                .map(|d| parse_duration(d, 1e3))
                .transpose()
                .map_err(|e| anyhow::anyhow!("--live-every {e}"))?;
            Some(match given {
                None => Duration::ZERO,
                Some(d) => {
                    let floor = live_floor(backend);
                    if d < floor {
                        eprintln!(
                            "mrc-perf: --live-every {}: one line per {} at most on this backend",
                            self.live_every.as_deref().unwrap_or_default(),
                            if backend == BackendKind::Sim {
                                "1us"
                            } else {
                                "1ms"
                            }
                        );
                    }
                    d.max(floor)
                }
            })
        };
        if backend == BackendKind::Sim
            && let Some(d) = duration
            && d > Duration::from_millis(100)
        {
            eprintln!(
                "mrc-perf: -D {}: that much simulated time takes far longer in wall time (a \
                 400 Gb/s fabric simulates about a millisecond per second); a bare -D is in \
                 seconds, -D 2ms is a typical simulated run",
                self.duration.as_deref().unwrap_or_default()
            );
        }
        Ok(Settings {
            test,
            backend,
            server: self.server.clone(),
            sizes,
            iters,
            duration,
            run_infinitely: self.run_infinitely,
            qps: self.qps,
            bidirectional: self.bidirectional,
            units: if self.report_gbits {
                BwUnits::Gbps
            } else {
                BwUnits::MiBps
            },
            tx_depth,
            rx_depth,
            cq_mod,
            pattern,
            port: self.port,
            out_json: self.out_json,
            out_json_file: self.out_json_file.clone(),
            planes: self.planes,
            evs: self.evs,
            plan: self.plan.clone(),
            cc,
            faults: faults_given,
            telemetry,
            check: self.check,
            live_every,
            eal: self.eal.clone(),
            seed: self.seed,
            all_evs: self.all_evs,
            perftest: self.perftest_opts(test, backend)?,
            traffic: self.traffic()?,
            matrix_svg: self.matrix_svg.clone(),
            tcp_rank: match (self.tcp_rank, self.tcp_ranks) {
                (Some(r), Some(n)) if r < n => Some((r, n)),
                (Some(r), Some(n)) => {
                    anyhow::bail!("--tcp-rank {r} --tcp-ranks {n}: a rank is 0 to N-1")
                }
                _ => None,
            },
            tcp_addr: self.tcp_addr.clone(),
            memif: self.memif.clone(),
            switch: self.switch.clone(),
        })
    }

    /// `--pattern`, `--pairs`, `--hosts`, `--victim`.
    fn traffic(&self) -> anyhow::Result<Option<TrafficSpec>> {
        let pattern = match (&self.pattern, &self.pairs) {
            (Some(p), _) => Traffic::parse(p)?,
            (None, Some(f)) => Traffic::File(f.clone()),
            (None, None) => {
                if self.hosts.is_some() || self.victim {
                    anyhow::bail!(
                        "--hosts and --victim shape a traffic pattern: give --pattern (or --pairs FILE)"
                    );
                }
                if self.matrix_svg.is_some() {
                    anyhow::bail!("--matrix-svg draws a pattern's flows: give --pattern");
                }
                return Ok(None);
            }
        };
        if self.server.is_some() {
            anyhow::bail!(
                "a SERVER address is for a pair of DPDK hosts; a --pattern's hosts are the \
                 ranks of mpirun (or --tcp-rank/--tcp-ranks)"
            );
        }
        if let Some(n) = self.hosts
            && !(2..=65_536).contains(&n)
        {
            anyhow::bail!("--hosts {n}: 2 to 65536 hosts");
        }
        Ok(Some(TrafficSpec {
            pattern,
            hosts: self.hosts,
            victim: self.victim,
        }))
    }

    fn pattern(&self) -> anyhow::Result<Pattern> {
        let p = self.pacing()?;
        let Some(mode) = self.mode.as_deref() else {
            return Ok(p);
        };
        // --mode names what the pacing flags give, and checks they were given.
        Ok(match (mode, p) {
            ("saturate", Pattern::Saturate) => p,
            ("training", Pattern::OnOff { .. }) => p,
            ("sync_burst", Pattern::Bursts { .. }) => p,
            ("storage", Pattern::Rate { rate, burst }) => Pattern::Storage { rate, burst },
            ("saturate", _) => anyhow::bail!(
                "--mode saturate sends as fast as the TX depth allows: drop --rate_limit, \
                 --burst-gap and --on-off"
            ),
            ("training", _) => anyhow::bail!(
                "--mode training needs --on-off ON,OFF (e.g. --on-off 2ms,8ms): every flow \
                 on and off in step"
            ),
            ("sync_burst", _) => anyhow::bail!(
                "--mode sync_burst needs --burst_size N --burst-gap T (e.g. --burst_size 8 \
                 --burst-gap 20us): bursts in step on every flow"
            ),
            ("storage", _) => anyhow::bail!(
                "--mode storage needs --rate_limit (and --burst_size): each flow free-running \
                 at that rate"
            ),
            (m, _) => anyhow::bail!("--mode {m:?}: saturate, training, storage or sync_burst"),
        })
    }

    /// The pacing the flags give, without --mode.
    fn pacing(&self) -> anyhow::Result<Pattern> {
        let burst = self.burst_size.unwrap_or(1);
        if burst == 0 {
            anyhow::bail!("--burst_size must be at least 1");
        }
        if self.burst_size.is_some() && self.rate_limit.is_none() && self.burst_gap.is_none() {
            anyhow::bail!(
                "--burst_size paces bursts: give --rate_limit (perftest's rate limiter) or \
                 --burst-gap (synchronized bursts) with it"
            );
        }
        if let Some(r) = self.rate_limit {
            if !(r.is_finite() && r > 0.0) {
                anyhow::bail!("--rate_limit must be positive");
            }
            let rate = match self.rate_units.as_str() {
                "M" => Rate::BitsPerSec(r * 1e6),
                "g" => Rate::BitsPerSec(r * 1e9),
                "p" => Rate::MsgsPerSec(r),
                u => anyhow::bail!("--rate_units {u:?}: M (Mb/s), g (Gb/s) or p (messages/s)"),
            };
            if self.burst_gap.is_some() {
                anyhow::bail!("--burst-gap paces bursts itself; drop --rate_limit or --burst-gap");
            }
            return Ok(Pattern::Rate { rate, burst });
        }
        if let Some(g) = &self.burst_gap {
            let gap = parse_duration(g, 1e3).map_err(|e| anyhow::anyhow!("--burst-gap {e}"))?;
            if gap.0 == 0 {
                anyhow::bail!("--burst-gap must be positive");
            }
            return Ok(Pattern::Bursts { burst, gap });
        }
        if let Some(o) = &self.on_off {
            let (on, off) = o
                .split_once(',')
                .ok_or_else(|| anyhow::anyhow!("--on-off ON,OFF (e.g. 100us,400us)"))?;
            let on = parse_duration(on, 1e3).map_err(|e| anyhow::anyhow!("--on-off {e}"))?;
            let off = parse_duration(off, 1e3).map_err(|e| anyhow::anyhow!("--on-off {e}"))?;
            if on.0 == 0 {
                anyhow::bail!("--on-off: the on phase must be positive");
            }
            return Ok(Pattern::OnOff { on, off });
        }
        Ok(Pattern::Saturate)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perftest_defaults() {
        let s = parse(&[]).unwrap();
        assert_eq!(s.test, TestKind::WriteBw);
        assert_eq!(
            (s.sizes.clone(), s.iters, s.tx_depth, s.cq_mod),
            (vec![65536], 5000, 128, 100)
        );
        let l = parse(&["ib_write_lat"]).unwrap();
        assert_eq!((l.sizes[0], l.iters, l.tx_depth), (2, 1000, 1));
        let a = parse(&["write_bw", "-a", "-n", "10"]).unwrap();
        assert_eq!(a.sizes.len(), 23);
        assert_eq!(*a.sizes.last().unwrap(), 1 << 23);
    }

    #[test]
    fn short_flags_mean_what_perftest_means() {
        let s = parse(&[
            "write_imm_bw",
            "-s",
            "4096",
            "-n",
            "7",
            "-q",
            "3",
            "-b",
            "-t",
            "16",
            "-r",
            "64",
            "-Q",
            "4",
            "-p",
            "9999",
            "--report_gbits",
            "-D",
            "2ms",
        ])
        .unwrap();
        assert_eq!(s.sizes, [4096]);
        assert_eq!(
            (s.iters, s.qps, s.tx_depth, s.rx_depth, s.cq_mod, s.port),
            (7, 3, 16, 64, 4, 9999)
        );
        assert!(s.bidirectional);
        assert_eq!(s.units, BwUnits::Gbps);
        assert_eq!(s.duration, Some(Duration::from_millis(2)));
        // The CQ moderation is capped at the TX depth.
        assert_eq!(parse(&["-t", "8"]).unwrap().cq_mod, 8);
    }

    #[test]
    fn traffic_patterns() {
        let r = parse(&["--rate_limit", "10", "--burst_size", "4"]).unwrap();
        assert_eq!(
            r.pattern,
            Pattern::Rate {
                rate: Rate::BitsPerSec(10e9),
                burst: 4
            }
        );
        let b = parse(&["--burst_size", "8", "--burst-gap", "50us"]).unwrap();
        assert_eq!(
            b.pattern,
            Pattern::Bursts {
                burst: 8,
                gap: Duration::from_micros(50)
            }
        );
        assert!(parse(&["--on-off", "10us"]).is_err());
        assert!(parse(&["--rate_limit", "1", "--rate_units", "x"]).is_err());
    }

    #[test]
    fn actionable_refusals() {
        let e = |a: &[&str]| parse(a).unwrap_err().to_string();
        assert!(e(&["write_lat", "-b"]).contains("bandwidth tests"));
        assert!(e(&["read_bw"]).contains("unknown test"));
        assert!(e(&["write_bw", "host1"]).contains("--backend dpdk"));
        assert!(e(&["--backend", "mem", "--fail-link"]).contains("simulated fabric"));
        assert!(e(&["write_imm_bw", "-t", "64", "-r", "8"]).contains("posted receive"));
        assert!(
            parse(&["--run_infinitely"]).is_err(),
            "needs -D as in perftest"
        );
        let f = parse(&["--fail-link", "--fail-link=t0-0-0:t1-0-1@1ms"]).unwrap();
        assert_eq!(f.faults.len(), 2);
    }
}
