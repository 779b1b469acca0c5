//! The text a perftest user reads and parses: the banner, the settings block, the result
//! tables with perftest's columns, then what perftest cannot show: per-plane and per-EV
//! counters and how the faults were ridden through.

use std::fmt::Write as _;

use super::backend::{CheckResult, FabricInfo, PeriodReport};
use super::counters::Snapshot;
use super::measure::{BwResult, LatResult};
use super::settings::{BackendKind, Settings, fmt_duration};

/// perftest's separator line.
pub const RULE: &str =
    "---------------------------------------------------------------------------------------";

fn on_off(b: bool) -> &'static str {
    if b { "ON" } else { "OFF" }
}

/// The banner and settings block.
pub fn header(s: &Settings, f: &FabricInfo) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "{RULE}");
    let _ = writeln!(o, "                    {}", s.test.banner());
    let device = format!("mrc-{} ({})", s.backend.name(), f.fabric);
    let _ = writeln!(o, " Dual-port       : OFF\t\tDevice         : {device}");
    let _ = writeln!(
        o,
        " Number of qps   : {}\t\tTransport type : MRC ({})",
        s.qps, f.routing
    );
    let _ = writeln!(o, " Connection type : RC\t\tUsing SRQ      : OFF");
    let _ = writeln!(o, " Bidirectional   : {}", on_off(s.bidirectional));
    let _ = writeln!(o, " TX depth        : {}", s.tx_depth);
    if !s.test.is_bw() || s.test == super::settings::TestKind::WriteImmBw {
        let _ = writeln!(o, " RX depth        : {}", s.rx_depth);
    }
    let _ = writeln!(o, " CQ Moderation   : {}", s.cq_mod);
    let _ = writeln!(o, " Mtu             : {}[B]", f.payload_mtu);
    let _ = writeln!(o, " Link type       : Ethernet");
    if f.link_gbps > 0 {
        let _ = writeln!(o, " Planes          : {} x {} Gb/s", f.planes, f.link_gbps);
    } else {
        let _ = writeln!(o, " Planes          : {}", f.planes);
    }
    if f.paths_per_plane > 0 {
        let _ = writeln!(o, " Paths per plane : {}", f.paths_per_plane);
    }
    let _ = writeln!(
        o,
        " EV profile      : {} per plane, {} active",
        f.evs_per_plane, f.active_evs_per_plane
    );
    let _ = writeln!(o, " Congestion ctrl : {}", s.cc.name());
    let _ = writeln!(o, " Traffic         : {}", s.pattern);
    if let Some(d) = s.duration {
        let _ = writeln!(
            o,
            " Duration        : {}{}",
            fmt_duration(d),
            if s.run_infinitely {
                " (run infinitely)"
            } else {
                ""
            }
        );
    }
    let _ = writeln!(
        o,
        " Backend         : {} ({} hosts, {} -> {})",
        s.backend.name(),
        f.hosts,
        f.client,
        f.server
    );
    let _ = writeln!(o, " Clock           : {}", f.clock);
    if f.faults.is_empty() {
        let _ = writeln!(o, " Faults          : none");
    }
    for (i, l) in f.faults.iter().enumerate() {
        let label = if i == 0 {
            "Faults          :"
        } else {
            "                 "
        };
        let _ = writeln!(o, " {label} {l}");
    }
    let _ = writeln!(o, " Data check      : {}", on_off(s.check));
    let _ = writeln!(o, " Data ex. method : {}", f.exchange);
    let _ = writeln!(o, "{RULE}");
    o
}

/// The column header of the result table.
pub fn table_header(s: &Settings) -> String {
    let u = s.units.label();
    if s.test.is_bw() {
        format!(" #bytes     #iterations    BW peak[{u}]    BW average[{u}]   MsgRate[Mpps]")
    } else if s.duration.is_some() {
        " #bytes        #iterations       t_avg[usec]    tps average".to_owned()
    } else {
        " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    \
         t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec]"
            .to_owned()
    }
}

/// One bandwidth row.
pub fn bw_row(r: &BwResult) -> String {
    format!(
        " {:<10} {:<14} {:<18.2} {:<22.2} {:.6}",
        r.size, r.iterations, r.peak, r.average, r.msg_rate_mpps
    )
}

/// One latency row (the short form with `-D`).
pub fn lat_row(r: &LatResult, duration: bool) -> String {
    if duration {
        format!(
            " {:<13} {:<17} {:<14.2} {:.2}",
            r.size, r.iterations, r.t_avg, r.tps
        )
    } else {
        format!(
            " {:<6} {:<13} {:<14.2} {:<12.2} {:<18.2} {:<14.2} {:<15.2} {:<22.2} {:.2}",
            r.size, r.iterations, r.t_min, r.t_max, r.t_typical, r.t_avg, r.t_stdev, r.p99, r.p99_9
        )
    }
}

/// A `--run_infinitely` period line, printed as it happens.
pub fn print_period(s: &Settings, p: &PeriodReport) {
    let line = if s.test.is_bw() {
        let bytes = p.bytes as f64;
        format!(
            " {:<10} {:<14} {:<18.2} {:<22.2} {:.6}",
            p.size,
            p.messages / u64::from(p.qps.max(1)),
            0.0,
            s.units.of(bytes, p.period_ns as f64),
            p.messages as f64 * 1e3 / p.period_ns as f64
        )
    } else {
        let n = p.rtts_ns.len().max(1) as f64;
        let avg = p.rtts_ns.iter().sum::<u64>() as f64 / n / 2e3;
        format!(
            " {:<13} {:<17} {:<14.2} {:.2}",
            p.size,
            p.rtts_ns.len(),
            avg,
            p.rtts_ns.len() as f64 * 1e9 / p.period_ns as f64
        )
    };
    println!("{line}");
}

fn human(bytes: u64) -> String {
    bytes.to_string()
}

/// The per-plane table (all hosts), with each plane's share of the delivered bytes.
pub fn plane_table(snap: &Snapshot) -> String {
    let rows = snap.planes();
    let changes = snap.ev_changes_per_plane(rows.len());
    let delivered: u64 = rows.iter().map(|r| r.rx_bytes).sum();
    let mut o = String::new();
    let _ = writeln!(o, "{RULE}");
    let _ = writeln!(o, " Per plane (all hosts; bytes are payload)");
    let _ = writeln!(
        o,
        " plane  tx_bytes        delivered_bytes  share   retx     trims    NACKs    ECN      \
         losses   EV_changes  EVs_retired  port_down"
    );
    let mut total = super::counters::PlaneRow::default();
    for r in &rows {
        let share = if delivered > 0 {
            r.rx_bytes as f64 * 100.0 / delivered as f64
        } else {
            0.0
        };
        let _ = writeln!(
            o,
            " {:<6} {:<15} {:<16} {:<7} {:<8} {:<8} {:<8} {:<8} {:<8} {:<11} {:<12} {}",
            r.plane,
            human(r.tx_bytes),
            human(r.rx_bytes),
            format!("{share:.1}%"),
            r.retransmits,
            r.trims,
            r.nacks,
            r.ecn,
            r.losses(),
            changes[usize::from(r.plane)],
            r.evs_retired,
            r.port_down_events
        );
        total.add(r);
    }
    let _ = writeln!(
        o,
        " {:<6} {:<15} {:<16} {:<7} {:<8} {:<8} {:<8} {:<8} {:<8} {:<11} {:<12} {}",
        "total",
        total.tx_bytes,
        total.rx_bytes,
        "100%",
        total.retransmits,
        total.trims,
        total.nacks,
        total.ecn,
        total.losses(),
        changes.iter().sum::<u64>(),
        total.evs_retired,
        total.port_down_events
    );
    o
}

/// The per-EV table: every EV of every QP, or only those that carried data or changed state.
pub fn ev_table(snap: &Snapshot, all: bool) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "{RULE}");
    let _ = writeln!(
        o,
        " Per EV ({})",
        if all {
            "every EV of every QP"
        } else {
            "EVs that carried data or changed state; --all-evs for every EV"
        }
    );
    let _ = writeln!(
        o,
        " host  qpn       ev    plane  state        packets   bytes        retx    trims   \
         NACKs   ECN     losses  changes  srtt[usec]"
    );
    let mut shown = 0;
    let mut hidden = 0;
    for e in snap.hosts.iter().flat_map(|h| &h.evs) {
        if !all && !e.is_active() {
            hidden += 1;
            continue;
        }
        shown += 1;
        let _ = writeln!(
            o,
            " h{:<4} {:<9} {:<5} {:<6} {:<12} {:<9} {:<12} {:<7} {:<7} {:<7} {:<7} {:<7} {:<8} {:.2}",
            e.host,
            format!("{:#06x}", e.qpn),
            e.ev,
            e.plane,
            e.state.to_string(),
            e.packets,
            e.bytes,
            e.retransmits,
            e.trims,
            e.nacks,
            e.ecn,
            e.losses(),
            e.state_changes,
            e.srtt_ns as f64 / 1e3
        );
    }
    if hidden > 0 {
        let _ = writeln!(o, " ({shown} shown, {hidden} idle GOOD EVs not shown)");
    }
    o
}

/// How the run went through its faults: retransmissions by cause, EVs retired and restored,
/// and whether every message still completed.
pub fn fault_summary(s: &Settings, f: &FabricInfo, snap: &Snapshot, complete: bool) -> String {
    if f.faults.is_empty() {
        return String::new();
    }
    let mut causes = mrc_transport::stats::RetransmitCauses::default();
    for q in snap.hosts.iter().flat_map(|h| &h.qps) {
        let r = &q.stats.retransmits;
        causes.trim += r.trim;
        causes.nack += r.nack;
        causes.inferred += r.inferred;
        causes.timeout += r.timeout;
        causes.retry += r.retry;
        causes.port_down += r.port_down;
        causes.rewind += r.rewind;
    }
    let planes = snap.planes();
    let retired: u64 = planes.iter().map(|p| p.evs_retired).sum();
    let restored: u64 = planes.iter().map(|p| p.evs_restored).sum();
    format!(
        "{RULE}\n Faults: {} packets retransmitted (timeout {}, SACK-inferred {}, trim {}, NACK {}, \
         port down {}, go-back-N {}); {} EVs retired, {} restored by probes; {}\n",
        causes.total(),
        causes.timeout,
        causes.inferred,
        causes.trim,
        causes.nack,
        causes.port_down,
        causes.rewind,
        retired,
        restored,
        if complete {
            format!(
                "every message completed{}",
                if s.backend == BackendKind::Sim {
                    " (ridden through)"
                } else {
                    ""
                }
            )
        } else {
            "NOT every message completed".to_owned()
        }
    )
}

/// The `--check` line.
pub fn check_line(c: &CheckResult) -> String {
    if c.bytes_checked == 0 && c.bytes_wrong == 0 {
        " Data check: nothing was written to this side".to_owned()
    } else if c.bytes_wrong == 0 {
        format!(
            " Data check: {} messages ({} bytes) verified as they landed, all correct",
            c.messages_checked, c.bytes_checked
        )
    } else {
        format!(" Data check: WRONG: {}", c.summary())
    }
}
