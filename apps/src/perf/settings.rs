//! What a run is asked to do, checked: the command line ([`super::cli`]) turns into a
//! [`Settings`], and every backend, application and report reads only this.

use std::fmt;
use std::path::PathBuf;

use mrc_transport::Duration;
use mrc_transport::verbs::{InitAttr, TransportMode};

use crate::faults::FaultSpec;
use crate::units::fmt_duration;

/// The perf test (perftest's binary names without the `ib_` prefix).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TestKind {
    /// `ib_write_bw`: RDMA Writes, bandwidth.
    WriteBw,
    /// `ib_write_bw --write_with_imm`: Write-with-Immediate, bandwidth; the peer consumes a
    /// receive per message.
    WriteImmBw,
    /// `ib_write_lat`: ping-pong, half the round trip.
    WriteLat,
}

impl TestKind {
    /// The name on the command line.
    pub const fn name(self) -> &'static str {
        match self {
            Self::WriteBw => "write_bw",
            Self::WriteImmBw => "write_imm_bw",
            Self::WriteLat => "write_lat",
        }
    }

    /// perftest's banner line.
    pub const fn banner(self) -> &'static str {
        match self {
            Self::WriteBw => "RDMA_Write BW Test",
            Self::WriteImmBw => "RDMA_Write_imm BW Test",
            Self::WriteLat => "RDMA_Write Latency Test",
        }
    }

    /// A bandwidth test.
    pub const fn is_bw(self) -> bool {
        !matches!(self, Self::WriteLat)
    }

    /// perftest's default message size.
    pub const fn default_size(self) -> u64 {
        if self.is_bw() { 65536 } else { 2 }
    }

    /// perftest's default iteration count.
    pub const fn default_iters(self) -> u64 {
        if self.is_bw() { 5000 } else { 1000 }
    }

    /// perftest's default TX depth.
    pub const fn default_tx_depth(self) -> u32 {
        if self.is_bw() { 128 } else { 1 }
    }
}

/// Where the NICs are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendKind {
    /// The built-in simulated multi-plane fabric (virtual time).
    Sim,
    /// Two software NIC threads over in-memory links in this process.
    Mem,
    /// DPDK ports; server/client over a TCP exchange.
    Dpdk,
}

impl BackendKind {
    pub const fn name(self) -> &'static str {
        match self {
            Self::Sim => "sim",
            Self::Mem => "mem",
            Self::Dpdk => "dpdk",
        }
    }

    /// The device name perftest's `-d` and banner use.
    pub const fn device(self) -> &'static str {
        match self {
            Self::Sim => "mrc-sim",
            Self::Mem => "mrc-mem",
            Self::Dpdk => "mrc-dpdk",
        }
    }
}

/// Congestion control and transport mode of the QPs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CcChoice {
    /// MRC with NSCC (brief §3.4).
    Nscc,
    /// MRC with a constant window of one BDP.
    Fixed,
    /// The RoCE-like baseline: one path, go-back-N, DCQCN; switches tail-drop.
    Roce,
}

impl CcChoice {
    pub const fn name(self) -> &'static str {
        match self {
            Self::Nscc => "nscc",
            Self::Fixed => "fixed",
            Self::Roce => "roce",
        }
    }
}

/// Bandwidth units of the tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BwUnits {
    /// 2^20 bytes per second, perftest's default, which it labels `MB/sec` (perftest 4.x,
    /// Debian 12's; perftest 24.07 and later print `MiB/sec` for the same figure).
    MiBps,
    /// Gb/s (10^9 bits), `--report_gbits`.
    Gbps,
}

impl BwUnits {
    /// The column unit perftest prints.
    pub const fn label(self) -> &'static str {
        match self {
            Self::MiBps => "MB/sec",
            Self::Gbps => "Gb/sec",
        }
    }

    /// `bytes` over `ns` nanoseconds in these units.
    pub fn of(self, bytes: f64, ns: f64) -> f64 {
        if ns <= 0.0 {
            return 0.0;
        }
        let per_sec = bytes * 1e9 / ns;
        match self {
            Self::MiBps => per_sec / f64::from(1u32 << 20),
            Self::Gbps => per_sec * 8.0 / 1e9,
        }
    }
}

/// The one figure `--output` prints instead of the tables (perftest's verbosity levels).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputFigure {
    /// `--output=bandwidth`: BW average, in the table's units.
    Bandwidth,
    /// `--output=message_rate`: MsgRate, Mpps.
    MessageRate,
    /// `--output=latency`: t_avg, usec.
    Latency,
}

/// What perftest's remaining options ask for (`cli/perftest.rs` checks them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PerftestOpts {
    /// Payload bytes per packet (`-m`); `None`: the engine's (4096, or what the plan carries).
    pub mtu: Option<u32>,
    /// No BW peak (`-N`): printed as 0, as perftest does.
    pub no_peak: bool,
    /// Print only this figure (`--output`).
    pub output: Option<OutputFigure>,
    /// The `CPU_Util[%]` column: the CPU the NIC thread(s) used (`--cpu_util`).
    pub cpu_util: bool,
    /// With `-b`, each direction's table after the sum (`--report-both`).
    pub report_both: bool,
    /// The GID index asked for (`-x`), shown in the banner.
    pub gid_index: Option<u32>,
}

/// A rate limit (`--rate_limit` with `--rate_units`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Rate {
    /// Bits per second of message payload (units `M` and `g`).
    BitsPerSec(f64),
    /// Messages per second (unit `p`).
    MsgsPerSec(f64),
}

/// How each QP paces its messages. Every pattern starts at the run's start on every QP and
/// host together (in the simulator exactly, at virtual time zero; on DPDK ports when both
/// sides leave the exchange's READY barrier).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Pattern {
    /// As fast as the TX depth allows (perftest's default).
    #[default]
    Saturate,
    /// A steady rate, released `burst` messages at a time (`--rate_limit`, `--burst_size`).
    Rate { rate: Rate, burst: u32 },
    /// `burst` messages back to back, then a gap, repeated (`--burst_size` with `--burst_gap`).
    Bursts { burst: u32, gap: Duration },
    /// Saturate for `on`, stay silent for `off`, repeated (`--on_off`).
    OnOff { on: Duration, off: Duration },
    /// `--mode storage`: a steady rate released `burst` messages at a time, each QP
    /// free-running: it starts at its own seeded phase within one burst period, and each
    /// burst is due a period after its previous burst actually went (a late burst never
    /// catches up), so parallel flows drift apart as storage clients' rate limiters do.
    Storage { rate: Rate, burst: u32 },
}

impl Pattern {
    /// The `--mode` this pattern is.
    pub const fn mode(&self) -> &'static str {
        match self {
            Self::Saturate => "saturate",
            Self::Rate { .. } => "rate_limit",
            Self::Bursts { .. } => "sync_burst",
            Self::OnOff { .. } => "training",
            Self::Storage { .. } => "storage",
        }
    }

    /// Messages per burst of a bursty mode (on/off: none, its bursts are periods).
    pub const fn burst(&self) -> Option<u32> {
        match *self {
            Self::Bursts { burst, .. } | Self::Storage { burst, .. } | Self::Rate { burst, .. } => {
                Some(burst)
            }
            Self::Saturate | Self::OnOff { .. } => None,
        }
    }

    /// The time between two bursts of one QP at message size `size` (bursts, rate, storage:
    /// the rate's period; on/off: ON + OFF).
    pub fn period_ns(&self, size: u64) -> Option<f64> {
        match *self {
            Self::Saturate => None,
            Self::Bursts { gap, .. } => Some(gap.0 as f64),
            Self::OnOff { on, off } => Some((on + off).0 as f64),
            Self::Rate { rate, burst } | Self::Storage { rate, burst } => {
                Some(rate.burst_period_ns(burst, size))
            }
        }
    }
}

impl Rate {
    /// The time one burst of `burst` messages of `size` bytes takes at this rate, ns.
    pub fn burst_period_ns(self, burst: u32, size: u64) -> f64 {
        let burst = u64::from(burst.max(1));
        match self {
            Self::BitsPerSec(bps) => (burst * size * 8) as f64 * 1e9 / bps,
            Self::MsgsPerSec(pps) => burst as f64 * 1e9 / pps,
        }
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::Saturate => f.write_str("saturate"),
            Self::Rate {
                rate: Rate::BitsPerSec(b),
                burst,
            } => write!(f, "rate {:.3} Gb/s, burst {burst}", b / 1e9),
            Self::Rate {
                rate: Rate::MsgsPerSec(p),
                burst,
            } => write!(f, "rate {p:.0} msg/s, burst {burst}"),
            Self::Bursts { burst, gap } => {
                write!(f, "bursts of {burst} every {}", fmt_duration(gap))
            }
            Self::OnOff { on, off } => {
                write!(f, "on {} / off {}", fmt_duration(on), fmt_duration(off))
            }
            Self::Storage { rate, burst } => {
                match rate {
                    Rate::BitsPerSec(b) => write!(f, "storage: {:.3} Gb/s", b / 1e9)?,
                    Rate::MsgsPerSec(p) => write!(f, "storage: {p:.0} msg/s")?,
                }
                write!(f, ", burst {burst}, each QP free-running")
            }
        }
    }
}

/// Everything a run needs, checked.
#[derive(Debug, Clone)]
pub struct Settings {
    pub test: TestKind,
    pub backend: BackendKind,
    /// The server to connect to (client side of a two-host run); `None`: server, or both ends
    /// in this process.
    pub server: Option<String>,
    /// Message sizes, one result row each (`-s`, or 2..2^23 with `-a`).
    pub sizes: Vec<u64>,
    /// Iterations per QP (`-n`).
    pub iters: u64,
    /// Run for this long instead of `iters` (`-D`).
    pub duration: Option<Duration>,
    /// Report every `duration`, forever (`--run_infinitely`).
    pub run_infinitely: bool,
    /// QP pairs (`-q`).
    pub qps: u32,
    /// Traffic both ways; the result is the sum (`-b`).
    pub bidirectional: bool,
    pub units: BwUnits,
    /// Outstanding sends per QP (`-t`).
    pub tx_depth: u32,
    /// Receives kept posted per QP (`-r`).
    pub rx_depth: u32,
    /// One signalled send in this many (`-Q`).
    pub cq_mod: u32,
    pub pattern: Pattern,
    /// TCP port of the out-of-band exchange (`-p`).
    pub port: u16,
    /// Print the JSON document (`--out_json`); to this file (`--out_json_file`).
    pub out_json: bool,
    pub out_json_file: Option<PathBuf>,
    /// Simulated fabric: number of planes (`--planes`).
    pub planes: Option<u8>,
    /// EVs per plane of each QP (`--evs`).
    pub evs: Option<u16>,
    /// Fabric plan file or built-in name (`--plan`).
    pub plan: Option<String>,
    pub cc: CcChoice,
    /// Simulated faults (`--fail-link`, `--flap-link`, `--loss`).
    pub faults: Vec<FaultSpec>,
    /// The telemetry sinks and sampling (`--metrics`, `--push`, `--metrics-textfile`,
    /// `--sample-every`).
    pub telemetry: crate::metrics::telemetry::TelemetryConfig,
    /// Fill patterns and verify the bytes at the end (`--check`).
    pub check: bool,
    /// Live per-plane bandwidth on stderr every this long (`None`: off; zero: automatic).
    pub live_every: Option<Duration>,
    /// DPDK EAL arguments (`--eal`).
    pub eal: Option<String>,
    /// Seed of the simulated fabric and engines.
    pub seed: u64,
    /// Per-EV table: every EV, or only those that carried data or changed state.
    pub all_evs: bool,
    /// perftest's remaining options (`-m`, `-N`, `--output`, `--cpu_util`, `--report-both`,
    /// `-x`).
    pub perftest: PerftestOpts,
    /// `--pattern`, `--hosts`, `--victim`, `--pairs FILE`: traffic over many hosts; `None`:
    /// the one client and one server of perftest.
    pub traffic: Option<super::traffic::TrafficSpec>,
    /// Where the N × N heatmap goes (`--matrix-svg`; default: next to `--out_json_file`).
    pub matrix_svg: Option<PathBuf>,
    /// `--backend dpdk --pattern`: this process's rank and the ranks, given by hand
    /// (`--tcp-rank R --tcp-ranks N`; `None`: mpirun's).
    pub tcp_rank: Option<(usize, usize)>,
    /// Rank 0's rendezvous address (`--tcp-addr`; default 127.0.0.1:`-p`).
    pub tcp_addr: Option<String>,
    /// The one-machine memif fabric of `mrc-coll switch --memif NAME` (`--memif`), and the
    /// switch's control address (`--switch`).
    pub memif: Option<String>,
    pub switch: Option<String>,
}

impl Settings {
    /// Message bytes per QP and direction for a size (iterations mode).
    pub fn bytes_per_qp(&self, size: u64) -> u64 {
        size * self.iters
    }

    /// The largest message size.
    pub fn max_size(&self) -> u64 {
        self.sizes.iter().copied().max().unwrap_or(0)
    }

    /// The QP attributes both ends must agree on, on every backend.
    pub fn init_attr(&self) -> InitAttr {
        InitAttr {
            ev_profile: 0,
            cc_profile: 0,
            mode: if self.cc == CcChoice::Roce {
                TransportMode::RoceLike
            } else {
                TransportMode::Mrc
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_follow_perftest() {
        // 2^20 bytes in one second is 1 MiB/s, and 8.388608 Mb/s.
        let b = f64::from(1u32 << 20);
        assert!((BwUnits::MiBps.of(b, 1e9) - 1.0).abs() < 1e-12);
        assert!((BwUnits::Gbps.of(b, 1e9) - 0.008_388_608).abs() < 1e-12);
        assert_eq!(BwUnits::Gbps.of(1.0, 0.0), 0.0);
    }
}
