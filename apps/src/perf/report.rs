//! The text a perftest user reads and parses: the banner, the settings block and the QPs'
//! address lines, the result tables with perftest's columns and number formats, then what
//! perftest cannot show: per-plane and per-EV counters and how the faults were ridden
//! through. With `--output` only the one figure asked for, as perftest prints it.
//!
//! The strings are perftest's (src/perftest_parameters.h, perftest_communication.h): the
//! bandwidth unit is perftest 4.x's `MB/sec` (2^20 bytes; perftest 24.07 and later spell the
//! same figure `MiB/sec`).

use std::fmt::Write as _;
use std::net::Ipv6Addr;
use std::sync::{Arc, Mutex};

use super::app::{PerfApp, lock};
use super::backend::{CheckResult, FabricInfo, PeriodReport, QpAddress};
use super::measure::{BwResult, LatResult, Row};
use super::settings::{BackendKind, BwUnits, OutputFigure, Settings, TestKind};
use crate::metrics::counters::Snapshot;
use crate::units::fmt_duration;

/// perftest's separator line.
pub const RULE: &str =
    "---------------------------------------------------------------------------------------";

fn on_off(b: bool) -> &'static str {
    if b { "ON" } else { "OFF" }
}

/// `--output`: only the one figure goes to stdout (no banner, tables or counters).
pub const fn quiet(s: &Settings) -> bool {
    s.perftest.output.is_some()
}

/// perftest's test title: `RDMA_Write BW Test`, `RDMA_Write_imm Bidirectional BW Test`,
/// `RDMA_Write Latency Test`.
pub fn title(s: &Settings) -> String {
    let verb = match s.test {
        TestKind::WriteBw | TestKind::WriteLat => "RDMA_Write",
        TestKind::WriteImmBw => "RDMA_Write_imm",
    };
    let kind = match (s.test.is_bw(), s.bidirectional) {
        (true, true) => "Bidirectional BW",
        (true, false) => "BW",
        (false, _) => "Latency",
    };
    format!("{verb} {kind} Test")
}

/// The banner and settings block (perftest's lines first, then ours), and the QPs' address
/// lines; nothing with `--output`.
pub fn header(s: &Settings, f: &FabricInfo) -> String {
    let mut o = String::new();
    if quiet(s) {
        return o;
    }
    if s.test.is_bw() && s.duration.is_some() && !s.perftest.no_peak {
        let _ = writeln!(o, " WARNING: BW peak won't be measured in this run.");
    }
    let _ = writeln!(o, "{RULE}");
    let _ = writeln!(o, "                    {}", title(s));
    let device = s.backend.device();
    let _ = writeln!(o, " Dual-port       : OFF\t\tDevice         : {device}");
    let _ = writeln!(
        o,
        " Number of qps   : {}\t\tTransport type : MRC ({})",
        s.qps, f.routing
    );
    let _ = writeln!(o, " Connection type : RC\t\tUsing SRQ      : OFF");
    let _ = writeln!(o, " TX depth        : {}", s.tx_depth);
    if !s.test.is_bw() || s.test == TestKind::WriteImmBw {
        let _ = writeln!(o, " RX depth        : {}", s.rx_depth);
    }
    if s.test.is_bw() {
        let _ = writeln!(o, " CQ Moderation   : {}", s.cq_mod);
    }
    let _ = writeln!(o, " Mtu             : {}[B]", f.payload_mtu);
    let _ = writeln!(o, " Link type       : Ethernet");
    if let Some(x) = s.perftest.gid_index {
        let _ = writeln!(o, " GID index       : {x}");
    }
    let _ = writeln!(o, " Max inline data : 0[B]");
    let _ = writeln!(o, " rdma_cm QPs\t : OFF");
    let _ = writeln!(o, " Data ex. method : {}", f.exchange);
    let _ = writeln!(o, " Fabric          : {}", f.fabric);
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
    if s.traffic.is_some() {
        let _ = writeln!(
            o,
            " Backend         : {} ({} hosts in the plan)",
            s.backend.name(),
            f.hosts
        );
        let _ = writeln!(
            o,
            " Pattern         : {} ({} QPs per flow)",
            f.client, s.qps
        );
    } else {
        let _ = writeln!(
            o,
            " Backend         : {} ({} hosts, {} -> {})",
            s.backend.name(),
            f.hosts,
            f.client,
            f.server
        );
    }
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
    let _ = writeln!(o, "{RULE}");
    for (side, list) in [
        ("local", &f.addresses.local),
        ("remote", &f.addresses.remote),
    ] {
        for a in list {
            let _ = writeln!(o, "{}", address_line(side, a));
            let _ = writeln!(o, "{}", gid_line(a.gid));
        }
    }
    o
}

/// C's `printf("%#0Nx", v)` as glibc prints it: `0x` and hex digits zero-padded to `width`
/// characters in all, except that zero has no `0x` (`%#04x` of 0 is `0000`).
fn c_hex(v: u64, width: usize) -> String {
    if v == 0 {
        format!("{:0width$}", 0)
    } else {
        format!("{v:#0width$x}")
    }
}

/// perftest's address line of one QP end (`ctx_print_pingpong_data`): ` local address: LID
/// 0000 QPN 0x0002 PSN 0x000064 RKey 0x1234567 VAddr 0x00000010020000`. An MRC NIC has no
/// LID (RoCE's is 0 too).
pub fn address_line(side: &str, a: &QpAddress) -> String {
    format!(
        " {side} address: LID {} QPN {} PSN {} RKey {} VAddr {}",
        c_hex(0, 4),
        c_hex(u64::from(a.qpn), 6),
        c_hex(u64::from(a.psn), 6),
        c_hex(u64::from(a.rkey), 8),
        c_hex(a.vaddr, 16)
    )
}

/// perftest's GID line: the 16 bytes in decimal, two digits at least, colon-separated (a
/// RoCE GID is the interface's IPv6 address, as an MRC NIC's is).
pub fn gid_line(gid: Ipv6Addr) -> String {
    let bytes: Vec<String> = gid.octets().iter().map(|b| format!("{b:02}")).collect();
    format!(" GID: {}", bytes.join(":"))
}

/// The column header of the result table, after perftest's rule; nothing with `--output`.
pub fn table_header(s: &Settings) -> String {
    let u = s.units.label();
    let cols = if s.test.is_bw() {
        format!(" #bytes     #iterations    BW peak[{u}]    BW average[{u}]   MsgRate[Mpps]")
    } else if s.duration.is_some() {
        " #bytes        #iterations       t_avg[usec]    tps average".to_owned()
    } else {
        " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    \
         t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] "
            .to_owned()
    };
    let cpu = if s.perftest.cpu_util {
        "    CPU_Util[%]"
    } else {
        ""
    };
    format!("{RULE}\n{cols}{cpu}")
}

/// perftest's CPU column after a row (`\t    %-3.2f`).
fn cpu_cell(cpu: Option<f64>) -> String {
    cpu.map_or_else(String::new, |c| format!("\t    {c:<3.2}"))
}

/// One bandwidth row, in perftest's format (six decimals for Gb/s below 0.1, as perftest).
pub fn bw_row(units: BwUnits, r: &BwResult) -> String {
    let line = if units == BwUnits::Gbps && r.average < 0.1 {
        format!(
            " {:<7}    {}           {:<7.6}            {:<7.6}            {:<7.6}",
            r.size, r.iterations, r.peak, r.average, r.msg_rate_mpps
        )
    } else {
        format!(
            " {:<7}    {:<10}       {:<7.2}            {:<7.2}\t\t   {:<7.6}",
            r.size, r.iterations, r.peak, r.average, r.msg_rate_mpps
        )
    };
    line + &cpu_cell(r.cpu_util)
}

/// One latency row in perftest's format (the short form with `-D`).
pub fn lat_row(r: &LatResult, duration: bool) -> String {
    if duration {
        format!(
            " {:<7}       {}            {:<7.2}        {:<7.2}",
            r.size, r.iterations, r.t_avg, r.tps
        ) + &cpu_cell(r.cpu_util)
    } else {
        format!(
            " {:<7} {}          {:<7.2}        {:<7.2}      {:<7.2}  \t       {:<7.2}     \t\
             {:<7.2}\t\t{:<7.2} \t\t{:<7.2}",
            r.size, r.iterations, r.t_min, r.t_max, r.t_typical, r.t_avg, r.t_stdev, r.p99, r.p99_9
        ) + &cpu_cell(r.cpu_util)
    }
}

/// The figure `--output` prints, as perftest prints it (`%lf`).
fn figure(f: OutputFigure, bw: Option<&BwResult>, lat: Option<&LatResult>) -> String {
    let v = match (f, bw, lat) {
        (OutputFigure::Bandwidth, Some(b), _) => b.average,
        (OutputFigure::MessageRate, Some(b), _) => b.msg_rate_mpps,
        (OutputFigure::Latency, _, Some(l)) => l.t_avg,
        _ => 0.0,
    };
    format!("{v:.6}")
}

/// What a size prints: its row (the one figure with `--output`) and, with `-b
/// --report-both`, perftest's Local and Remote sections after it.
pub fn row_text(s: &Settings, row: &Row) -> String {
    match (row, s.perftest.output) {
        (Row::Bw { total, .. }, Some(f)) => figure(f, Some(total), None),
        (Row::Lat(l), Some(f)) => figure(f, None, Some(l)),
        (Row::Lat(l), None) => lat_row(l, s.duration.is_some()),
        (Row::Bw { total, directions }, None) => {
            let mut o = bw_row(s.units, total);
            for (name, d) in ["Local", "Remote"].iter().zip(directions) {
                let _ = write!(
                    o,
                    "\n{RULE}\n\n {name} results: \n{}\n{}",
                    table_header(s),
                    bw_row(s.units, d)
                );
            }
            o
        }
    }
}

/// A `--run_infinitely` period line, printed as it happens.
pub fn print_period(s: &Settings, p: &PeriodReport) {
    let line = if s.test.is_bw() {
        let bytes = p.bytes as f64;
        let r = BwResult {
            size: p.size,
            iterations: p.messages / u64::from(p.qps.max(1)),
            messages: p.messages,
            bytes: bytes as u64,
            elapsed_ns: p.period_ns,
            peak: 0.0,
            average: s.units.of(bytes, p.period_ns as f64),
            msg_rate_mpps: p.messages as f64 * 1e3 / p.period_ns as f64,
            cpu_util: None,
        };
        match s.perftest.output {
            Some(f) => figure(f, Some(&r), None),
            None => bw_row(s.units, &r),
        }
    } else {
        let n = p.rtts_ns.len().max(1) as f64;
        let r = LatResult {
            size: p.size,
            iterations: p.rtts_ns.len() as u64,
            t_avg: p.rtts_ns.iter().sum::<u64>() as f64 / n / 2e3,
            tps: p.rtts_ns.len() as f64 * 1e9 / p.period_ns as f64,
            ..super::measure::latency(p.size, &[])
        };
        match s.perftest.output {
            Some(f) => figure(f, None, Some(&r)),
            None => lat_row(&r, true),
        }
    };
    crate::outln!("{line}");
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
    let mut total = crate::metrics::counters::PlaneRow::default();
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
        causes.add(&q.stats.retransmits);
    }
    let planes = snap.planes();
    let retired: u64 = planes.iter().map(|p| p.evs_retired).sum();
    let restored: u64 = planes.iter().map(|p| p.evs_restored).sum();
    format!(
        "{RULE}\n Faults: {} packets retransmitted (timeout {}, SACK-inferred {}, trim {}, NACK {}, \
         port down {}, go-back-N {}, tail probe {}); {} EVs retired, {} restored by probes; {}\n",
        causes.total(),
        causes.timeout,
        causes.inferred,
        causes.trim,
        causes.nack,
        causes.port_down,
        causes.rewind,
        causes.tail_probe,
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
        format!(" Data check: WRONG: {c}")
    }
}

/// `--run_infinitely`: one result line per period.
#[derive(Debug, Default)]
pub struct Periods {
    last_bytes: u64,
    last_rtts: Vec<usize>,
    last_ns: u64,
}

impl Periods {
    /// Print the line of the period that ends at `now_ns`, when the receivers had placed
    /// `delivered_bytes` of payload in all (counted per packet: completions come one per `-Q`
    /// messages, and a period that ends between two would swing by `-Q` messages).
    /// Returns the period's round trips (ns) of each app, in the order of `apps` (write_lat's
    /// latency histogram).
    pub fn report(
        &mut self,
        s: &Settings,
        size: u64,
        apps: &[Arc<Mutex<PerfApp>>],
        now_ns: u64,
        delivered_bytes: u64,
    ) -> Vec<Vec<u64>> {
        let mut rtts = Vec::new();
        let mut per_app = Vec::with_capacity(apps.len());
        let mut k = 0;
        for a in apps {
            let app = lock(a);
            let mut mine = Vec::new();
            for r in app.records() {
                if self.last_rtts.len() <= k {
                    self.last_rtts.push(0);
                }
                mine.extend_from_slice(&r.rtts_ns[self.last_rtts[k]..]);
                self.last_rtts[k] = r.rtts_ns.len();
                k += 1;
            }
            rtts.extend_from_slice(&mine);
            per_app.push(mine);
        }
        let bytes = delivered_bytes.saturating_sub(self.last_bytes);
        let report = PeriodReport {
            size,
            messages: bytes / size.max(1),
            bytes,
            qps: s.qps,
            period_ns: now_ns - self.last_ns,
            rtts_ns: rtts,
        };
        self.last_bytes = delivered_bytes;
        self.last_ns = now_ns;
        if report.period_ns > 0 {
            print_period(s, &report);
        }
        per_app
    }
}
