//! `--backend sim` (the default): the perf applications on two hosts of a simulated
//! multi-plane fabric, in virtual time. The fabric is the `--plan` given, or a small built-in
//! one: `--planes` planes (4 by default) × 2 racks × 2 spines, 2 hosts per rack, 100 Gb/s
//! links. The client is host 0 and the server the first host of the next rack, so every path
//! crosses a spine and a T0–T1 link failure is felt.

use std::sync::{Arc, Mutex};

use anyhow::Context as _;
use mrc_sim::{ConnOpts, Fault, RunLimit, Sim, SimConfig, SimTime};
use mrc_srv6::plan::{HostId, LinkTier, Plan};
use mrc_transport::verbs::{MrKeys, QpCap, Qpn, RecvWr, SendWr, VerbsError, WorkCompletion};
use mrc_transport::{Duration, Instant};

use super::app::{PerfApp, lock};
use super::backend::{
    Addresses, BUFFER_IOVA, FabricInfo, Hooks, QpAddress, SizeOutcome, WrapMemory, app_params,
    finish_pattern_checks, layout_of, pattern_memory, pattern_qps, profiles,
};
use super::check::SharedDest;
use super::live::Live;
use super::plan::load_plan;
use super::report::Periods;
use super::sampling::Sampling;
use super::settings::{CcChoice, Settings, TestKind};
use super::traffic::{self, Flow, Wiring, ends};
use crate::faults;
use crate::metrics::counters::{HostCounters, Snapshot};

/// The simulator backend.
#[derive(Debug)]
pub struct SimBackend {
    settings: Settings,
    plan: Plan,
    /// The hosts and their QPs: the client and server of a one-pair run, or a pattern's.
    wiring: Wiring,
    info: FabricInfo,
}

/// The simulator's `Application`, driving a shared [`PerfApp`] (the backend reads its
/// records during and after the run).
struct SimApp(Arc<Mutex<PerfApp>>);

/// The simulator's verbs seen as the engine's.
struct SimVerbs<'a>(&'a mut dyn mrc_sim::Verbs);

impl mrc_transport::app::Verbs for SimVerbs<'_> {
    fn post_send(&mut self, qpn: Qpn, wr: &SendWr<'_>) -> Result<(), VerbsError> {
        self.0.post_send(qpn, wr)
    }
    fn post_recv(&mut self, qpn: Qpn, wr: &RecvWr) -> Result<(), VerbsError> {
        self.0.post_recv(qpn, wr)
    }
    fn mr_read(&self, lkey: u32, va: u64, dst: &mut [u8]) -> Result<(), VerbsError> {
        self.0.mr_read(lkey, va, dst)
    }
    fn mr_write(&mut self, lkey: u32, va: u64, src: &[u8]) -> Result<(), VerbsError> {
        self.0.mr_write(lkey, va, src)
    }
}

impl mrc_sim::Application for SimApp {
    fn start(&mut self, now: Instant, verbs: &mut dyn mrc_sim::Verbs) {
        mrc_transport::app::Application::start(&mut *lock(&self.0), now, &mut SimVerbs(verbs));
    }
    fn on_completion(&mut self, now: Instant, wc: &WorkCompletion, verbs: &mut dyn mrc_sim::Verbs) {
        mrc_transport::app::Application::on_completion(
            &mut *lock(&self.0),
            now,
            wc,
            &mut SimVerbs(verbs),
        );
    }
    fn on_timer(&mut self, now: Instant, verbs: &mut dyn mrc_sim::Verbs) {
        mrc_transport::app::Application::on_timer(&mut *lock(&self.0), now, &mut SimVerbs(verbs));
    }
    fn next_timer(&self) -> Option<Instant> {
        mrc_transport::app::Application::next_timer(&*lock(&self.0))
    }
    fn is_done(&self) -> bool {
        mrc_transport::app::Application::is_done(&*lock(&self.0))
    }
}

impl SimBackend {
    /// Check the plan, the ends and the fault options.
    pub fn new(settings: &Settings) -> anyhow::Result<Self> {
        let plan = load_plan(settings)?;
        if let Some(evs) = settings.evs
            && u32::from(evs) * u32::from(plan.planes()) > 1 << 12
        {
            crate::bail_usage!(
                "--evs {evs}: a QP has at most 4096 EVs, {} per plane on {} planes",
                (1u32 << 12) / u32::from(plan.planes()),
                plan.planes()
            );
        }
        let flows = if let Some(t) = &settings.traffic {
            traffic::flows(t, &plan, settings.seed)?
        } else {
            let (c, v) = ends(&plan);
            vec![Flow {
                src: c,
                dst: v,
                victim: false,
            }]
        };
        let wiring = Wiring::new(flows, settings.qps);
        if settings.traffic.is_some() {
            let host_qps = wiring.local.iter().map(|q| q.len() as u64).sum();
            super::limits::check_pattern_memory(
                settings,
                host_qps,
                super::limits::memory_available(),
            )?;
        }
        let (client, server) = (wiring.flows[0].src, wiring.flows[0].dst);
        // Build the fabric once to learn the MTU and EV profile the engines resolve to, and
        // the QPs' addresses: every size's fresh fabric is built alike, so they are the same.
        let mut sim = Sim::new(plan.clone(), sim_config(settings))
            .context("building the simulated fabric")?;
        let ec = sim.endpoint(client).config();
        let ev = ec.ev_profiles[0].clone();
        let paths = plan
            .path_count(HostId(client), HostId(server), 0)
            .unwrap_or(0);
        let payload_mtu = ec.payload_mtu;
        if let Some(m) = settings.perftest.mtu
            && m != payload_mtu
        {
            crate::bail_usage!(
                "-m {m}: plan {:?} (IP MTU {}) carries at most {payload_mtu}-byte payloads",
                plan.name(),
                plan.mtu()
            );
        }
        let size = settings.sizes.first().copied().unwrap_or(0);
        let (keys, conns, _) = wire_up(&mut sim, settings, size, &wiring, None)?;
        // The addresses of the first flow's QPs (a one-pair run's every QP).
        let (ci, si) = (
            wiring.host_index(client).unwrap_or_default(),
            wiring.host_index(server).unwrap_or_default(),
        );
        let end = |me: usize, src_side: bool| -> Vec<QpAddress> {
            let l = layout_of(settings, size, wiring.local[me].len() as u32);
            wiring.local[me]
                .iter()
                .enumerate()
                .filter(|(_, q)| q.flow == 0 && q.src_side == src_side)
                .map(|(i, _)| QpAddress {
                    qpn: qpn_of(&conns, &wiring, me, i).0,
                    psn: SIM_PSN,
                    rkey: keys[me].rkey,
                    vaddr: l.dst(i as u32),
                    gid: plan.nic_addr(HostId(wiring.hosts[me])),
                })
                .collect()
        };
        let addresses = Addresses {
            local: end(ci, true),
            remote: end(si, false),
        };
        let faults = faults::schedule(
            &settings.faults,
            &plan,
            client,
            Duration(expected_ns(settings, &plan, &wiring, settings.max_size()) / 2),
        )
        .map_err(|e| crate::usage!("{e}"))?;
        let (client_name, server_name) = match &settings.traffic {
            Some(t) => (wiring.describe(&t.pattern), "-".to_owned()),
            None => (format!("h{client}"), format!("h{server}")),
        };
        let info = FabricInfo {
            clock: "simulated",
            fabric: plan.name().to_owned(),
            planes: plan.planes(),
            hosts: plan.host_count(),
            client: client_name,
            server: server_name,
            link_gbps: plan.link_params(LinkTier::Host).speed_gbps,
            payload_mtu,
            paths_per_plane: paths,
            // A QP has as many EVs per plane as the profile asks or the plan has paths.
            evs_per_plane: ev.evs_per_plane.min(paths as u16),
            active_evs_per_plane: ev.active_per_plane.min(paths as u16),
            faults: faults::describe(&faults),
            routing: match sim.config().routing {
                mrc_sim::Routing::Srv6 => "SRv6 uSID",
                mrc_sim::Routing::Ecmp => "ECMP",
            },
            exchange: "simulator",
            addresses,
        };
        Ok(Self {
            settings: settings.clone(),
            plan,
            wiring,
            info,
        })
    }

    pub fn info(&self) -> &FabricInfo {
        &self.info
    }

    /// The hosts, flows and QPs of the run.
    pub fn wiring(&self) -> &Wiring {
        &self.wiring
    }

    /// Run one message size on a fresh fabric.
    pub fn run_size(&mut self, size: u64, hooks: &Hooks) -> anyhow::Result<SizeOutcome> {
        let s = &self.settings;
        let mut cfg = sim_config(s);
        let expected = expected_ns(s, &self.plan, &self.wiring, size);
        let period = if s.run_infinitely {
            s.duration.unwrap_or(Duration::from_millis(1))
        } else {
            match s.live_every {
                Some(d) if d.0 > 0 => d,
                _ => Duration((expected / 10).max(1_000)),
            }
        };
        let mut sampling = Sampling::new(s, period);
        if hooks.live || hooks.telemetry.is_some() || s.run_infinitely {
            cfg.sample_every = Some(sampling.tick);
        }
        let mut sim = Sim::new(self.plan.clone(), cfg)?;
        let w = &self.wiring;
        let (keys, conns, dests) = wire_up(&mut sim, s, size, w, hooks.memory)?;
        let host_line = f64::from(self.plan.link_params(LinkTier::Host).speed_gbps)
            * f64::from(self.plan.planes());
        let mut apps = Vec::with_capacity(w.hosts.len());
        let mut sending = Vec::with_capacity(w.hosts.len());
        for me in 0..w.hosts.len() {
            let wiring = pattern_qps(
                s,
                size,
                w,
                me,
                keys[me].lkey,
                |i| qpn_of(&conns, w, me, i),
                |p| keys[p].rkey,
            );
            sending.push(wiring.iter().map(|q| q.send).collect::<Vec<_>>());
            let mut params = app_params(s, size);
            // Each sending QP's share of its host's line (on/off pacing).
            let senders = wiring.iter().filter(|q| q.send).count().max(1);
            params.line_gbps_per_qp = host_line / senders as f64;
            let app = Arc::new(Mutex::new(PerfApp::new(params, wiring)));
            sim.set_app(w.hosts[me], Box::new(SimApp(app.clone())))?;
            apps.push(app);
        }
        let faults: Vec<Fault> = faults::schedule(
            &s.faults,
            &self.plan,
            w.flows[0].src,
            Duration(expected / 2),
        )?;
        for f in faults {
            sim.schedule(f);
        }
        let hosts = w.hosts.clone();
        let qpns: Vec<Vec<Qpn>> = (0..hosts.len())
            .map(|me| {
                (0..w.local[me].len())
                    .map(|i| qpn_of(&conns, w, me, i))
                    .collect()
            })
            .collect();
        let mut live = Live::new(self.plan.planes(), sampling.live_min_ns());
        let mut periods = Periods::default();
        let mut observer = |sim: &Sim| {
            let snap = snapshot(sim, &hosts, &qpns);
            if hooks.live {
                live.print(&snap);
            }
            if let Some(t) = &hooks.telemetry
                && let Some(missed) = sampling.telemetry_due(snap.at_ns)
            {
                t.sample_after(&snap, missed);
            }
            if s.run_infinitely {
                let rtts =
                    periods.report(s, size, &apps, sim.now().as_nanos(), snap.delivered_bytes());
                if let Some(t) = &hooks.telemetry
                    && s.test == TestKind::WriteLat
                {
                    for (&h, r) in hosts.iter().zip(&rtts) {
                        t.exporter().latency.observe_round_trips(h, r);
                    }
                }
            }
        };
        if s.run_infinitely {
            loop {
                let until = SimTime(sim.now().0 + period.0 * 1000);
                sim.run(RunLimit::until(until), &mut observer);
                if apps.iter().any(|a| lock(a).error().is_some()) {
                    break;
                }
            }
        } else {
            // Give a run 50 times its expected length (and 100 ms) before calling it stuck.
            let limit = SimTime((expected.saturating_mul(50) + 100_000_000).saturating_mul(1000));
            sim.run(RunLimit::until(limit), &mut observer);
        }
        let mut error = apps.iter().find_map(|a| lock(a).error().map(str::to_owned));
        let all_done = apps
            .iter()
            .all(|a| mrc_transport::app::Application::is_done(&*lock(a)));
        if error.is_none() && !all_done {
            error = Some(format!(
                "the run did not finish by {:.3} ms of virtual time",
                sim.now().as_micros_f64() / 1e3
            ));
        }
        let counters = snapshot(&sim, &hosts, &qpns);
        let records: Vec<Vec<_>> = apps
            .iter()
            .map(|a| lock(a).records().cloned().collect())
            .collect();
        let check = finish_pattern_checks(s.test, &records, &dests, w);
        Ok(SizeOutcome {
            size,
            records,
            sending,
            counters,
            check,
            error,
            nic_cpu_percent: None,
        })
    }
}

/// The PSN both ends of a QP start at: [`Sim::connect`] moves them to RTR and RTS with 0.
const SIM_PSN: u32 = 0;

/// What [`wire_up`] made: every host's keys (as [`Wiring::hosts`]), the connections (flow
/// by flow, `-q` each), and under `--check` the state of what each host receives.
type Wired = (Vec<MrKeys>, Vec<mrc_sim::Conn>, Vec<Option<SharedDest>>);

/// Register every host's buffers (through `wrap`, if a test interposes) and connect the QPs
/// of every flow, source to destination.
fn wire_up(
    sim: &mut Sim,
    s: &Settings,
    size: u64,
    w: &Wiring,
    wrap: Option<WrapMemory>,
) -> anyhow::Result<Wired> {
    let init = s.init_attr();
    let opts = ConnOpts {
        init,
        cap: QpCap {
            max_send_wr: s.tx_depth.max(s.cq_mod) + 1,
            max_recv_wr: s.rx_depth.max(1),
            max_send_sge: 1,
        },
        ..ConnOpts::default()
    };
    let mut keys = Vec::new();
    let mut dests = Vec::new();
    for (me, qps) in w.local.iter().enumerate() {
        let senders: Vec<(u32, u32)> = qps
            .iter()
            .map(|q| (w.hosts[q.peer_host], q.peer_qp as u32))
            .collect();
        let (mem, dest) = pattern_memory(s, size, &senders);
        let mem = match wrap {
            Some(wrap) => wrap(mem),
            None => mem,
        };
        keys.push(sim.register(w.hosts[me], BUFFER_IOVA, mem)?);
        dests.push(dest);
    }
    let mut conns = Vec::new();
    for f in &w.flows {
        for _ in 0..w.qps_per_flow {
            conns.push(sim.connect(f.src, f.dst, opts)?);
        }
    }
    Ok((keys, conns, dests))
}

/// The QPN of host `me`'s QP `i` (indices of [`Wiring`]) among the connections.
fn qpn_of(conns: &[mrc_sim::Conn], w: &Wiring, me: usize, i: usize) -> Qpn {
    let q = w.local[me][i];
    let conn = &conns[q.flow * w.qps_per_flow as usize + q.index as usize];
    if q.src_side { conn.a.qpn } else { conn.b.qpn }
}

/// The simulator configuration: seed, CC profile, EV profile, trimming.
fn sim_config(s: &Settings) -> SimConfig {
    let (cc, evs, mtu) = (s.cc, s.evs, s.perftest.mtu);
    SimConfig {
        seed: s.seed,
        trim: cc != CcChoice::Roce,
        endpoint_tweak: Some(Arc::new(move |_, ec| profiles(cc, evs, mtu, ec))),
        ..SimConfig::default()
    }
}

/// How long a size should take in virtual time, ns: the bytes over the hosts' line rate, or
/// the duration, or round trips of a few microseconds.
fn expected_ns(s: &Settings, plan: &Plan, w: &Wiring, size: u64) -> u64 {
    if let Some(d) = s.duration {
        return d.0;
    }
    let gbps = u64::from(plan.link_params(LinkTier::Host).speed_gbps) * u64::from(plan.planes());
    if s.test.is_bw() {
        // The busiest host link carries this many flows of `-q` QPs.
        let bytes = size * s.iters * u64::from(s.qps) * u64::from(w.max_flows_per_host());
        (bytes * 8 / gbps.max(1)).max(1_000)
    } else {
        s.iters * (4_000 + size * 16 / gbps.max(1))
    }
}

/// Every host's counters (`hosts[i]` with its QPs `qpns[i]`), at the simulator's clock.
pub fn snapshot(sim: &Sim, hosts: &[u32], qpns: &[Vec<Qpn>]) -> Snapshot {
    let planes = sim.plan().planes();
    Snapshot {
        at_ns: sim.now().as_nanos(),
        hosts: hosts
            .iter()
            .zip(qpns)
            .map(|(&h, qpns)| {
                let ep = sim.endpoint(h);
                let ps: Vec<_> = (0..planes)
                    .map(|p| ep.plane_stats(p).unwrap_or_default())
                    .collect();
                let qs: Vec<_> = qpns
                    .iter()
                    .map(|&q| (q, ep.qp_stats(q).unwrap_or_default(), ep.ev_stats(q)))
                    .collect();
                let mut hc = HostCounters::new(h, &ps, &qs, ep.stats());
                hc.set_qp_states(|q| ep.query_qp(q).ok().map(|i| i.state));
                hc
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cc_choice_reaches_the_engines() {
        for (cc, want) in [("nscc", "nscc"), ("fixed", "fixed"), ("roce", "dcqcn")] {
            let s = super::super::cli::parse(&["--cc", cc]).unwrap();
            let plan = load_plan(&s).unwrap();
            let mut sim = Sim::new(plan, sim_config(&s)).unwrap();
            let conn = sim.connect(0, 2, ConnOpts::default()).unwrap();
            let name = sim.endpoint(0).cc_state(conn.a.qpn).unwrap().name;
            assert!(name.to_lowercase().contains(want), "--cc {cc}: {name}");
        }
    }

    /// Places one packet (the 40th the engine writes into the destinations) a packet further
    /// on than the engine said: what a placement bug would do.
    struct MisplaceOne {
        inner: Box<dyn mrc_transport::verbs::Memory>,
        dest_writes: u32,
    }

    impl std::fmt::Debug for MisplaceOne {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "MisplaceOne({})", self.dest_writes)
        }
    }

    impl mrc_transport::verbs::Memory for MisplaceOne {
        fn len(&self) -> usize {
            self.inner.len()
        }
        fn read(&self, offset: usize, dst: &mut [u8]) {
            self.inner.read(offset, dst);
        }
        fn write(&mut self, offset: usize, src: &[u8]) {
            // Sources are the first half of the layout: the application's own writes.
            if offset >= self.inner.len() / 2 {
                self.dest_writes += 1;
                if self.dest_writes == 40 && offset + 4096 + src.len() <= self.inner.len() {
                    self.inner.write(offset + 4096, src);
                    return;
                }
            }
            self.inner.write(offset, src);
        }
    }

    fn run_checked(args: &[&str], hooks: &Hooks) -> SizeOutcome {
        let mut v = vec!["--check", "--no-live"];
        v.extend_from_slice(args);
        let s = super::super::cli::parse(&v).unwrap();
        let mut b = SimBackend::new(&s).unwrap();
        b.run_size(s.sizes[0], hooks).unwrap()
    }

    #[test]
    fn check_catches_one_misplaced_packet_in_an_early_message() {
        let args = ["-s", "16384", "-n", "200", "-t", "8"];
        let clean = run_checked(&args, &Hooks::default());
        let c = clean.check.unwrap();
        assert_eq!((c.bytes_wrong, c.messages_checked), (0, 200), "{c:?}");
        let hooks = Hooks {
            memory: Some(|inner| {
                Box::new(MisplaceOne {
                    inner,
                    dest_writes: 0,
                })
            }),
            ..Hooks::default()
        };
        let bad = run_checked(&args, &hooks);
        assert!(bad.error.is_none(), "the engine saw nothing wrong");
        let c = bad.check.unwrap();
        // The 40th packet is in message 9 or so of 200: its slot was reused 24 times since,
        // so the destination's final bytes alone would not show it.
        assert_eq!(
            c.messages_wrong, 2,
            "the misplaced packet's message and the one it hit: {c:?}"
        );
        assert!(c.bytes_wrong >= 4096, "{c:?}");
        assert!(c.first_error.unwrap().contains("message"));
    }

    #[test]
    fn mtu_is_the_payload_per_packet_up_to_what_the_plan_carries() {
        let settings = |args: &[&str]| super::super::cli::parse(args).unwrap();
        let b = SimBackend::new(&settings(&["-m", "1024"])).unwrap();
        assert_eq!(b.info().payload_mtu, 1024);
        let b = SimBackend::new(&settings(&[])).unwrap();
        assert_eq!(b.info().payload_mtu, 4096, "the engine's default");
        // plans/small.toml's IP MTU of 3000 carries 2048-byte payloads with MRC's headers.
        let e = SimBackend::new(&settings(&["--plan", "small", "-m", "4096"])).unwrap_err();
        assert!(crate::tool::is_usage(&e), "{e}");
        assert!(e.to_string().contains("at most 2048"), "{e}");
        let b = SimBackend::new(&settings(&["--plan", "small", "-m", "2048"])).unwrap();
        assert_eq!(b.info().payload_mtu, 2048);
    }

    #[test]
    fn addresses_are_those_of_the_run() {
        let s = super::super::cli::parse(&["-q", "3", "-n", "2"]).unwrap();
        let mut b = SimBackend::new(&s).unwrap();
        let a = b.info().addresses.clone();
        assert_eq!((a.local.len(), a.remote.len()), (3, 3));
        let o = b.run_size(65536, &Hooks::default()).unwrap();
        for (h, side) in [(0, &a.local), (1, &a.remote)] {
            let ran: Vec<u32> = o.counters.hosts[h].qps.iter().map(|q| q.qpn).collect();
            let shown: Vec<u32> = side.iter().map(|x| x.qpn).collect();
            assert_eq!(ran, shown, "host {h}");
        }
    }
}
