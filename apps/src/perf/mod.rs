//! `mrc-perf`: perftest's bandwidth and latency tests over MRC (docs/mrc-perf.md).
//!
//! ```text
//!  cli ──► Settings ──► backend (sim | mem | dpdk) ──► PerfApp on each host (app.rs)
//!                          │  per size: records + counters Snapshot
//!                          ▼
//!          measure (BW / latency rows) ──► report (tables) · json · metrics exporter
//! ```
//!
//! The tests are written once, as [`app::PerfApp`], an `Application` state machine over the
//! engine's verbs; a backend only builds the hosts, connects the QPs, drives the applications
//! and hands back their records and the engines' counters.

pub mod app;
pub mod backend;
pub mod check;
pub mod cli;
pub mod dpdk_backend;
pub mod dpdk_plan;
pub mod dpdk_ranks;
pub mod fabric_report;
pub mod json;
pub mod limits;
pub mod live;
pub mod measure;
pub mod mem_backend;
pub mod nic_backend;
pub mod pace;
pub mod plan;
pub mod report;
pub mod sampling;
pub mod settings;
pub mod sim_backend;
pub mod stop;
pub mod traffic;

use std::borrow::Cow;
use std::sync::Arc;

use crate::metrics::Exporter;
use crate::metrics::counters::Snapshot;
use crate::metrics::telemetry::Telemetry;
use crate::{out, outln};
use backend::{CheckResult, FabricInfo, Hooks, SizeOutcome};
use dpdk_backend::DpdkBackend;
use measure::Row;
use mem_backend::MemBackend;
use settings::{BackendKind, Settings, TestKind};
use sim_backend::SimBackend;

/// The backend of a run.
#[derive(Debug)]
enum Backend {
    Sim(Box<SimBackend>),
    Mem(Box<MemBackend>),
    Dpdk(Box<DpdkBackend>),
    /// `--backend dpdk --pattern`: this process is one host (rank) of the pattern.
    Ranks(Box<dpdk_ranks::RanksBackend>),
}

impl Backend {
    fn info(&self) -> &FabricInfo {
        match self {
            Self::Sim(b) => b.info(),
            Self::Mem(b) => b.info(),
            Self::Dpdk(b) => b.info(),
            Self::Ranks(b) => b.info(),
        }
    }

    /// The hosts and flows of a pattern run.
    fn wiring(&self) -> Option<&traffic::Wiring> {
        match self {
            Self::Sim(b) => Some(b.wiring()),
            Self::Mem(b) => Some(b.wiring()),
            Self::Ranks(b) => Some(b.wiring()),
            Self::Dpdk(_) => None,
        }
    }

    fn run_size(&mut self, size: u64, hooks: &Hooks) -> anyhow::Result<SizeOutcome> {
        match self {
            Self::Sim(b) => b.run_size(size, hooks),
            Self::Mem(b) => b.run_size(size, hooks),
            Self::Dpdk(b) => b.run_size(size, hooks),
            Self::Ranks(b) => b.run_size(size, hooks),
        }
    }

    /// This process prints the report (every backend but a rank other than 0).
    fn lead(&self) -> bool {
        match self {
            Self::Ranks(b) => b.lead(),
            _ => true,
        }
    }

    /// What this process's telemetry publishes of the run's counters: every host it runs
    /// (under mpirun, its own host alone; `None` for a rank without a flow, whose samples of
    /// its NIC stand).
    fn own_counters<'a>(&self, all: &'a Snapshot) -> Option<Cow<'a, Snapshot>> {
        match self {
            Self::Ranks(b) => b.own_counters(all).map(Cow::Owned),
            _ => Some(Cow::Borrowed(all)),
        }
    }
}

/// How a run ended.
#[derive(Debug)]
pub struct RunOutcome {
    pub rows: Vec<Row>,
    pub counters: Snapshot,
    pub check: Option<CheckResult>,
    pub error: Option<String>,
    /// `--pattern`: the flows, hosts and bursts of every size.
    pub patterns: Vec<fabric_report::PatternReport>,
}

impl RunOutcome {
    /// Every message completed and, with `--check`, every byte is right.
    pub fn ok(&self) -> bool {
        self.error.is_none() && self.check.as_ref().is_none_or(|c| c.bytes_wrong == 0)
    }
}

/// The result row of one size.
pub fn row_of(s: &Settings, o: &SizeOutcome) -> Row {
    measure::row(s, o)
}

/// write_lat: every one-way latency sample of the pinging QPs (half a round trip, as the
/// table's t_typical) into `mrc_write_latency_seconds{host}`.
fn observe_latency(e: &Exporter, o: &SizeOutcome) {
    for (h, (recs, sending)) in o.records.iter().zip(&o.sending).enumerate() {
        let host = o.counters.hosts.get(h).map_or(h as u32, |c| c.host);
        for (r, _) in recs.iter().zip(sending).filter(|(_, s)| **s) {
            e.latency.observe_round_trips(host, &r.rtts_ns);
        }
    }
}

/// Run every size, print the tables (and JSON), return what happened.
pub fn run(s: &Settings) -> anyhow::Result<RunOutcome> {
    limits::check_memory(s, limits::memory_available())?;
    limits::check_output(s)?;
    if stop::ends_the_run(s) {
        stop::install()?;
    }
    let mut backend = match s.backend {
        BackendKind::Sim => Backend::Sim(Box::new(SimBackend::new(s)?)),
        BackendKind::Mem => Backend::Mem(Box::new(MemBackend::new(s)?)),
        BackendKind::Dpdk if s.traffic.is_some() => {
            Backend::Ranks(Box::new(dpdk_ranks::RanksBackend::new(s)?))
        }
        BackendKind::Dpdk => Backend::Dpdk(Box::new(DpdkBackend::new(s)?)),
    };
    let info: FabricInfo = backend.info().clone();
    let json = s.out_json || s.out_json_file.is_some();
    // The sinks, and the JSON sample series: sampled when any is asked for.
    let mut sinks = s.telemetry.clone();
    if let Backend::Ranks(b) = &backend {
        b.rank_telemetry(&mut sinks);
    }
    let telemetry = if sinks.any_sink() || sinks.sample_every.is_some() || json {
        Some(Arc::new(Telemetry::start(
            &sinks,
            // `host` is a per-series label already (both ends run here in sim and mem).
            &[("test", s.test.name())],
        )?))
    } else {
        None
    };
    // Under mpirun every rank runs this; rank 0 alone prints and writes the files.
    let lead = backend.lead();
    let quiet = report::quiet(s) || !lead;
    if lead {
        out!("{}", report::header(s, &info));
    }
    if !quiet {
        outln!("{}", report::table_header(s));
    }
    let hooks = Hooks {
        live: s.live_every.is_some() && !s.run_infinitely,
        telemetry: telemetry.clone(),
        memory: None,
        live_label: None,
    };
    let mut out = RunOutcome {
        rows: Vec::new(),
        counters: Snapshot::default(),
        check: None,
        error: None,
        patterns: Vec::new(),
    };
    let host_line_gbps = f64::from(info.link_gbps) * f64::from(info.planes);
    for &size in &s.sizes {
        let o = backend.run_size(size, &hooks)?;
        let row = row_of(s, &o);
        if lead {
            outln!("{}", report::row_text(s, &row));
        }
        out.rows.push(row);
        out.counters.add(&o.counters);
        if let Some(t) = &telemetry {
            if s.test == TestKind::WriteLat {
                observe_latency(t.exporter(), &o);
            }
            if let Some(own) = backend.own_counters(&out.counters) {
                t.publish(&own);
            }
        }
        if let Some(c) = &o.check {
            out.check.get_or_insert_default().add(c);
        }
        if s.traffic.is_some()
            && let Some(w) = backend.wiring()
        {
            out.patterns
                .push(fabric_report::build(s, w, &o, host_line_gbps));
        }
        if let Some(e) = o.error {
            out.error = Some(format!("{size} bytes: {e}"));
            break;
        }
    }
    if !quiet {
        for p in &out.patterns {
            out!("{}", fabric_report::text(p));
        }
        out!("{}", report::plane_table(&out.counters));
        // A pattern's every QP would make the per-EV table a wall of text: on request only.
        if s.traffic.is_none() || s.all_evs {
            out!("{}", report::ev_table(&out.counters, s.all_evs));
        }
        out!(
            "{}",
            report::fault_summary(s, &info, &out.counters, out.error.is_none())
        );
        if let Some(c) = &out.check {
            outln!("{}", report::check_line(c));
        }
        outln!("{}", report::RULE);
    }
    if let Some(t) = &telemetry {
        // Failures are on stderr already; a telemetry failure does not fail the run.
        let own = backend
            .own_counters(&out.counters)
            .unwrap_or_else(|| Cow::Owned(t.exporter().last()));
        let _ = t.finish(&own);
    }
    if let Some(last) = out.patterns.last().filter(|_| lead) {
        let svg = s.matrix_svg.clone().or_else(|| {
            s.out_json_file
                .as_ref()
                .map(|j| j.with_extension("matrix.svg"))
        });
        if let Some(path) = svg {
            std::fs::write(&path, fabric_report::svg(last)).map_err(|e| {
                crate::usage!("--matrix-svg {}: cannot write it ({e})", path.display())
            })?;
            if !quiet {
                outln!(" Heatmap: {}", path.display());
            }
        }
    }
    if json && lead {
        let samples = telemetry.as_ref().map(|t| t.samples()).unwrap_or_default();
        let doc = json::document(
            s,
            &info,
            &out.rows,
            &out.counters,
            out.check.as_ref(),
            out.error.as_deref(),
            &samples,
        );
        let mut doc = doc;
        if s.traffic.is_some() {
            doc["pattern"] = serde_json::to_value(&out.patterns)?;
        }
        let text = serde_json::to_string_pretty(&doc)?;
        if let Some(path) = &s.out_json_file {
            std::fs::write(path, text.clone() + "\n").map_err(|e| {
                crate::usage!("--out_json_file {}: cannot write it ({e})", path.display())
            })?;
        }
        if s.out_json {
            outln!("{text}");
        }
    }
    if let Some(t) = &telemetry {
        t.linger();
    }
    Ok(out)
}
