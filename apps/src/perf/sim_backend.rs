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

use super::app::{PerfApp, QpWiring, lock};
use super::backend::{
    Addresses, BUFFER_IOVA, FabricInfo, Hooks, QpAddress, Sampling, SizeOutcome, WrapMemory,
    app_params, finish_checks, host_memory, layout, profiles, roles,
};
use super::check::SharedDest;
use super::live::Live;
use super::plan::{ends, load_plan};
use super::report::Periods;
use super::settings::{CcChoice, Settings, TestKind};
use crate::faults;
use crate::metrics::counters::{HostCounters, Snapshot};

/// The simulator backend.
#[derive(Debug)]
pub struct SimBackend {
    settings: Settings,
    plan: Plan,
    client: u32,
    server: u32,
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
        let (client, server) = ends(&plan);
        // Build the fabric once to learn the MTU and EV profile the engines resolve to, and
        // the QPs' addresses: every size's fresh fabric is built alike, so they are the same.
        let mut sim = Sim::new(plan.clone(), sim_config(settings))
            .context("building the simulated fabric")?;
        let ec = sim.endpoint(client).config();
        let ev = ec.ev_profiles[0];
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
        let (keys, conns, _) = wire_up(&mut sim, settings, size, client, server, None)?;
        let l = layout(settings, size);
        let end = |h: u32, k: usize, qpn: fn(&mrc_sim::Conn) -> Qpn| -> Vec<QpAddress> {
            conns
                .iter()
                .enumerate()
                .map(|(i, conn)| QpAddress {
                    qpn: qpn(conn).0,
                    psn: SIM_PSN,
                    rkey: keys[k].rkey,
                    vaddr: l.dst(i as u32),
                    gid: plan.nic_addr(HostId(h)),
                })
                .collect()
        };
        let addresses = Addresses {
            local: end(client, 0, |c| c.a.qpn),
            remote: end(server, 1, |c| c.b.qpn),
        };
        let faults = faults::schedule(
            &settings.faults,
            &plan,
            client,
            Duration(expected_ns(settings, &plan, settings.max_size()) / 2),
        )
        .map_err(|e| crate::usage!("{e}"))?;
        let info = FabricInfo {
            clock: "simulated",
            fabric: plan.name().to_owned(),
            planes: plan.planes(),
            hosts: plan.host_count(),
            client: format!("h{client}"),
            server: format!("h{server}"),
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
            client,
            server,
            info,
        })
    }

    pub fn info(&self) -> &FabricInfo {
        &self.info
    }

    /// Run one message size on a fresh fabric.
    pub fn run_size(&mut self, size: u64, hooks: &Hooks) -> anyhow::Result<SizeOutcome> {
        let s = &self.settings;
        let mut cfg = sim_config(s);
        let expected = expected_ns(s, &self.plan, size);
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
        let (c, v) = (self.client, self.server);
        let (c_send, c_recv, s_send, s_recv) = roles(s.test, s.bidirectional);
        let (keys, conns, dests) = wire_up(&mut sim, s, size, c, v, hooks.memory)?;
        let l = layout(s, size);
        let wire = |me: usize, send, receive| -> Vec<QpWiring> {
            conns
                .iter()
                .enumerate()
                .map(|(i, conn)| QpWiring {
                    qpn: if me == 0 { conn.a.qpn } else { conn.b.qpn },
                    send,
                    receive,
                    lkey: keys[me].lkey,
                    local_addr: l.src(i as u32),
                    remote_addr: l.dst(i as u32),
                    rkey: keys[1 - me].rkey,
                    slots: l.slots,
                    pattern_host: s.check.then_some(if me == 0 { c } else { v }),
                })
                .collect()
        };
        let mut params = app_params(s, size);
        let line_gbps = f64::from(self.plan.link_params(LinkTier::Host).speed_gbps)
            * f64::from(self.plan.planes());
        params.line_gbps_per_qp = line_gbps / f64::from(s.qps.max(1));
        let apps = [
            Arc::new(Mutex::new(PerfApp::new(params, wire(0, c_send, c_recv)))),
            Arc::new(Mutex::new(PerfApp::new(params, wire(1, s_send, s_recv)))),
        ];
        sim.set_app(c, Box::new(SimApp(apps[0].clone())))?;
        sim.set_app(v, Box::new(SimApp(apps[1].clone())))?;
        let faults: Vec<Fault> =
            faults::schedule(&s.faults, &self.plan, c, Duration(expected / 2))?;
        for f in faults {
            sim.schedule(f);
        }
        let hosts = [c, v];
        let qpns: [Vec<Qpn>; 2] = [
            conns.iter().map(|x| x.a.qpn).collect(),
            conns.iter().map(|x| x.b.qpn).collect(),
        ];
        let mut live = Live::new(self.plan.planes(), sampling.live_min_ns());
        let mut periods = Periods::default();
        let mut observer = |sim: &Sim| {
            let snap = snapshot(sim, &hosts, &qpns);
            if hooks.live {
                live.print(&snap);
            }
            if let Some(t) = &hooks.telemetry
                && sampling.telemetry_due(snap.at_ns)
            {
                t.sample(&snap);
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
                if lock(&apps[0]).error().is_some() {
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
        let sending = [c_send, s_send].map(|x| vec![x; s.qps as usize]).to_vec();
        let records: Vec<Vec<_>> = apps
            .iter()
            .map(|a| lock(a).records().cloned().collect())
            .collect();
        let check = finish_checks(s.test, &records, &dests);
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

/// What [`wire_up`] made: both hosts' keys, the connections, and under `--check` the state
/// of what each host receives.
type Wired = (Vec<MrKeys>, Vec<mrc_sim::Conn>, Vec<Option<SharedDest>>);

/// Register both hosts' buffers (through `wrap`, if a test interposes) and connect the QPs,
/// client (`c`) to server (`v`).
fn wire_up(
    sim: &mut Sim,
    s: &Settings,
    size: u64,
    c: u32,
    v: u32,
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
    for (h, peer) in [(c, v), (v, c)] {
        let (mem, dest) = host_memory(s, size, peer);
        let mem = match wrap {
            Some(wrap) => wrap(mem),
            None => mem,
        };
        keys.push(sim.register(h, BUFFER_IOVA, mem)?);
        dests.push(dest);
    }
    let mut conns = Vec::new();
    for _ in 0..s.qps {
        conns.push(sim.connect(c, v, opts)?);
    }
    Ok((keys, conns, dests))
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
fn expected_ns(s: &Settings, plan: &Plan, size: u64) -> u64 {
    if let Some(d) = s.duration {
        return d.0;
    }
    let gbps = u64::from(plan.link_params(LinkTier::Host).speed_gbps) * u64::from(plan.planes());
    if s.test.is_bw() {
        let bytes = size * s.iters * u64::from(s.qps);
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
