//! The perf tests as application state machines (docs/ARCHITECTURE.md, "Applications as state
//! machines"): written once against the engine's [`Verbs`], driven by the simulator in
//! virtual time or by a NIC thread's driver in real time. One [`PerfApp`] runs on each host
//! and serves every QP of that host.
//!
//! - Bandwidth (`write_bw`, `write_imm_bw`): keep up to `tx_depth` Writes outstanding per QP,
//!   one in `cq_mod` signalled (perftest's CQ moderation), paced by [`Pacer`]. The peer of a
//!   Write-with-Immediate test keeps `rx_depth` receives posted and counts the immediates.
//! - Latency (`write_lat`): ping-pong of Write-with-Immediate; the pinger records each round
//!   trip. MRC places the packets of a message in any order (brief §3.6), so the last-byte
//!   polling perftest uses to see a Write arrive would be unsound; the receive completion of
//!   the immediate, delivered once every byte is placed, is MRC's arrival signal.

use std::sync::{Arc, Mutex, MutexGuard};

use mrc_transport::app::{Application, Verbs};
use mrc_transport::verbs::{
    Qpn, RecvWr, SendOpcode, SendWr, Sge, WcOpcode, WcStatus, WorkCompletion,
};
use mrc_transport::{Duration, Instant};

use super::check::message_bytes;
use super::pace::Pacer;
use super::settings::{Pattern, TestKind};

/// `wr_id` = QP index << 48 | message number.
const WR_QP_SHIFT: u32 = 48;
const WR_MSG_MASK: u64 = (1 << WR_QP_SHIFT) - 1;

/// How one QP of this host takes part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpWiring {
    pub qpn: Qpn,
    /// This host sends on it (bandwidth) or pings (latency).
    pub send: bool,
    /// This host consumes the peer's Write-with-Immediate messages on it (or pongs them).
    pub receive: bool,
    /// Local source buffer.
    pub lkey: u32,
    pub local_addr: u64,
    /// The peer's destination buffer.
    pub remote_addr: u64,
    pub rkey: u32,
    /// Message `k` uses source and destination slot `k % slots` (each `size` bytes on from
    /// `local_addr` and `remote_addr`); one without `--check`.
    pub slots: u32,
    /// `--check`: this host's number in the patterns; each message's own bytes are written
    /// into its source slot before it is posted ([`check`](super::check)).
    pub pattern_host: Option<u32>,
    /// The pacing starts this long after the application (`--mode storage`: each QP's own
    /// phase; zero otherwise, every QP in step).
    pub start_offset: Duration,
}

/// What every host's application is told.
#[derive(Debug, Clone, Copy)]
pub struct AppParams {
    pub test: TestKind,
    pub size: u64,
    /// Messages per QP (iterations mode).
    pub iters: u64,
    /// Send for this long instead (`-D`); `None`: iterations mode.
    pub duration: Option<Duration>,
    /// Never finish (`--run_infinitely`).
    pub infinite: bool,
    pub tx_depth: u32,
    pub rx_depth: u32,
    pub cq_mod: u32,
    pub pattern: Pattern,
    /// Each sending QP's share of its host's line rate, Gb/s (0: not known): what on/off load
    /// shapes the wire with ([`Pacer`]).
    pub line_gbps_per_qp: f64,
    /// When the pacing starts, on this host's clock (`None`: when the application starts).
    /// Under mpirun every rank is given the one start time of the run, so a rank the OS
    /// schedules late still releases its bursts at the common times.
    pub pace_origin: Option<Instant>,
}

impl AppParams {
    fn counted(&self) -> bool {
        self.duration.is_none() && !self.infinite
    }
}

/// Counters and timestamps of one QP, read by the measurements.
#[derive(Debug, Clone, Default)]
pub struct QpRecord {
    pub qpn: Qpn,
    /// Messages posted and known complete (bandwidth sender, latency pinger).
    pub posted: u64,
    pub completed: u64,
    /// Immediates received (bandwidth receiver, latency ponger).
    pub received: u64,
    /// Post time of every message (iterations mode, bandwidth).
    pub post_times: Vec<Instant>,
    /// `(messages complete, time)` at every signalled completion (iterations mode).
    pub completions: Vec<(u64, Instant)>,
    pub first_post: Option<Instant>,
    pub last_completion: Option<Instant>,
    /// Round trips, ns (latency pinger).
    pub rtts_ns: Vec<u64>,
}

#[derive(Debug)]
struct QpRun {
    wiring: QpWiring,
    rec: QpRecord,
    pacer: Pacer,
    /// Messages posted with a signal (the highest message number + 1).
    signalled_upto: u64,
    /// Pinger: when the outstanding ping left.
    ping_at: Option<Instant>,
    /// Ponger: pongs sent, pongs known complete, and pings not answered yet because the send
    /// queue was full (a pong's completion can come after the next ping, when the pinger's
    /// ACK of it is coalesced or late).
    pongs: u64,
    pongs_done: u64,
    pongs_owed: u64,
}

/// The perf application of one host.
#[derive(Debug)]
pub struct PerfApp {
    params: AppParams,
    qps: Vec<QpRun>,
    start: Option<Instant>,
    deadline: Option<Instant>,
    /// Earliest pacing wake-up wanted.
    wake: Option<Instant>,
    /// The first failure (a verbs error or an error completion); the run stops.
    error: Option<String>,
    /// The duration is over (seen by a callback at or after the deadline).
    stopped: bool,
    /// [`PerfApp::end_now`] was called: the run ends as if its duration were over.
    ended_early: bool,
    /// `--check`: the bytes of the message being posted.
    scratch: Vec<u8>,
}

impl PerfApp {
    /// The application of a host whose QPs are wired as `qps`.
    pub fn new(params: AppParams, qps: Vec<QpWiring>) -> Self {
        let qps = qps
            .into_iter()
            .map(|wiring| QpRun {
                wiring,
                rec: QpRecord {
                    qpn: wiring.qpn,
                    ..QpRecord::default()
                },
                pacer: Pacer::new(params.pattern, params.size, Instant::ZERO)
                    .with_line_rate(params.line_gbps_per_qp),
                signalled_upto: 0,
                ping_at: None,
                pongs: 0,
                pongs_done: 0,
                pongs_owed: 0,
            })
            .collect();
        Self {
            params,
            qps,
            start: None,
            deadline: None,
            wake: None,
            error: None,
            stopped: false,
            ended_early: false,
            scratch: Vec::new(),
        }
    }

    /// Per-QP records so far.
    pub fn records(&self) -> impl Iterator<Item = &QpRecord> {
        self.qps.iter().map(|q| &q.rec)
    }

    /// Ends a timed (`-D`) or endless (`--run_infinitely`) run now, as if its duration were
    /// over: the senders stop posting, signal their tail and finish once every message posted
    /// completed. Called before the start, the run ends as soon as it starts. A counted run
    /// (`-n`) is not affected.
    pub fn end_now(&mut self) {
        if self.params.counted() {
            return;
        }
        self.ended_early = true;
        if let Some(start) = self.start {
            // In the past: the next callback sees the duration over.
            self.deadline = Some(start);
        }
    }

    /// Whether [`PerfApp::end_now`] ended the run.
    pub fn ended_early(&self) -> bool {
        self.ended_early
    }

    /// When the application started.
    pub fn started_at(&self) -> Option<Instant> {
        self.start
    }

    /// The first failure, if any.
    pub fn error(&self) -> Option<&str> {
        self.error.as_deref()
    }

    /// Messages completed by this host's senders (or round trips by its pingers).
    pub fn messages_done(&self) -> u64 {
        self.qps.iter().map(|q| q.rec.completed).sum()
    }

    fn fail(&mut self, what: String) {
        if self.error.is_none() {
            self.error = Some(what);
        }
    }

    fn sending_allowed(&mut self, now: Instant) -> bool {
        if self.deadline.is_some_and(|d| now >= d) {
            self.stopped = true;
        }
        self.error.is_none() && !self.stopped
    }

    fn post_write(
        &mut self,
        i: usize,
        now: Instant,
        imm: bool,
        signaled: bool,
        verbs: &mut dyn Verbs,
    ) -> bool {
        let size = self.params.size;
        let q = &mut self.qps[i];
        let k = q.rec.posted;
        let w = q.wiring;
        let slot_offset = (k % u64::from(w.slots.max(1))) * size;
        if let Some(host) = w.pattern_host {
            message_bytes(host, i as u32, k, size, &mut self.scratch);
            if let Err(e) = verbs.mr_write(w.lkey, w.local_addr + slot_offset, &self.scratch) {
                self.fail(format!("writing message {k}'s bytes on QP {}: {e}", w.qpn));
                return false;
            }
        }
        let q = &mut self.qps[i];
        let sge = [Sge {
            addr: w.local_addr + slot_offset,
            length: size as u32,
            lkey: w.lkey,
        }];
        let wr = SendWr {
            wr_id: ((i as u64) << WR_QP_SHIFT) | (k & WR_MSG_MASK),
            opcode: if imm {
                SendOpcode::WriteWithImm(k as u32)
            } else {
                SendOpcode::Write
            },
            sg_list: &sge,
            remote_addr: w.remote_addr + slot_offset,
            rkey: w.rkey,
            signaled,
        };
        match verbs.post_send(w.qpn, &wr) {
            Ok(()) => {
                q.rec.posted += 1;
                q.rec.first_post.get_or_insert(now);
                if signaled {
                    q.signalled_upto = q.rec.posted;
                }
                true
            }
            Err(e) => {
                self.fail(format!("post_send on QP {}: {e}", w.qpn));
                false
            }
        }
    }

    /// Bandwidth sender: post what the depth, the count and the pacing allow.
    fn fill_bw(&mut self, i: usize, now: Instant, verbs: &mut dyn Verbs) {
        let p = self.params;
        let imm = p.test == TestKind::WriteImmBw;
        loop {
            let allowed = self.sending_allowed(now);
            let q = &self.qps[i];
            if !q.wiring.send || self.error.is_some() {
                return;
            }
            let k = q.rec.posted;
            let room = k - q.rec.completed < u64::from(p.tx_depth);
            if !allowed {
                // Duration over: make sure the tail is signalled so it completes.
                if room && q.signalled_upto < k {
                    self.post_write(i, now, imm, true, verbs);
                }
                return;
            }
            if (p.counted() && k >= p.iters) || !room {
                return;
            }
            let at = self.qps[i].pacer.release(k, now);
            if at > now {
                self.wake = Some(self.wake.map_or(at, |w| w.min(at)));
                return;
            }
            let signaled =
                (k + 1).is_multiple_of(u64::from(p.cq_mod)) || (p.counted() && k + 1 == p.iters);
            let record = p.counted();
            if !self.post_write(i, now, imm, signaled, verbs) {
                return;
            }
            self.qps[i].pacer.on_posted(now);
            if record {
                self.qps[i].rec.post_times.push(now);
            }
        }
    }

    /// Pongs a send queue holds at once (the QPs are created with one slot more).
    fn pong_room(&self) -> u64 {
        u64::from(self.params.tx_depth.max(self.params.cq_mod).max(1))
    }

    /// Latency ponger: answer the pings owed while the send queue has room.
    fn pong(&mut self, i: usize, now: Instant, verbs: &mut dyn Verbs) {
        while self.error.is_none() && self.qps[i].pongs_owed > 0 {
            let q = &self.qps[i];
            if q.pongs - q.pongs_done >= self.pong_room() {
                return;
            }
            if !self.post_write(i, now, true, true, verbs) {
                return;
            }
            let q = &mut self.qps[i];
            q.pongs += 1;
            q.pongs_owed -= 1;
        }
    }

    /// Latency pinger: the next ping, when the previous pong is back.
    fn ping(&mut self, i: usize, now: Instant, verbs: &mut dyn Verbs) {
        let p = self.params;
        let allowed = self.sending_allowed(now);
        let q = &self.qps[i];
        if !q.wiring.send || q.ping_at.is_some() || !allowed {
            return;
        }
        if p.counted() && q.rec.posted >= p.iters {
            return;
        }
        let posted = q.rec.posted;
        let at = self.qps[i].pacer.release(posted, now);
        if at > now {
            self.wake = Some(self.wake.map_or(at, |w| w.min(at)));
            return;
        }
        if self.post_write(i, now, true, true, verbs) {
            self.qps[i].ping_at = Some(now);
        }
    }

    fn post_recv(&mut self, i: usize, verbs: &mut dyn Verbs) {
        let w = self.qps[i].wiring;
        if let Err(e) = verbs.post_recv(w.qpn, &RecvWr { wr_id: i as u64 }) {
            self.fail(format!("post_recv on QP {}: {e}", w.qpn));
        }
    }

    fn kick(&mut self, now: Instant, verbs: &mut dyn Verbs) {
        self.wake = None;
        for i in 0..self.qps.len() {
            if self.params.test.is_bw() {
                self.fill_bw(i, now, verbs);
            } else {
                self.ping(i, now, verbs);
            }
        }
    }

    fn index_of(&self, qpn: Qpn) -> Option<usize> {
        self.qps.iter().position(|q| q.wiring.qpn == qpn)
    }

    fn on_send_done(&mut self, i: usize, now: Instant, wc: &WorkCompletion) {
        let k = wc.wr_id & WR_MSG_MASK;
        let record = self.params.counted() && self.params.test.is_bw();
        let r = &mut self.qps[i].rec;
        if self.params.test.is_bw() {
            // A signalled completion covers every message before it (send queue order).
            r.completed = r.completed.max(k + 1);
            r.last_completion = Some(now);
            let done = r.completed;
            self.qps[i].pacer.on_completed(done, now);
            let r = &mut self.qps[i].rec;
            if record {
                r.completions.push((r.completed, now));
            }
        } else if !self.qps[i].wiring.send {
            // A pong left: room for the next owed one.
            self.qps[i].pongs_done += 1;
        }
    }

    fn on_receive(&mut self, i: usize, now: Instant, verbs: &mut dyn Verbs) {
        self.qps[i].rec.received += 1;
        self.post_recv(i, verbs);
        if self.params.test.is_bw() {
            return;
        }
        let q = &mut self.qps[i];
        if q.wiring.send {
            // Pinger: the pong is back.
            if let Some(t) = q.ping_at.take() {
                q.rec.rtts_ns.push(now.saturating_since(t).as_nanos());
                q.rec.completed += 1;
                q.rec.last_completion = Some(now);
            }
            self.ping(i, now, verbs);
        } else if self.error.is_none() {
            // Ponger: answer at once (no pacing: the pinger paces), as the send queue allows.
            self.qps[i].pongs_owed += 1;
            self.pong(i, now, verbs);
        }
    }
}

impl Application for PerfApp {
    fn start(&mut self, now: Instant, verbs: &mut dyn Verbs) {
        self.start = Some(now);
        self.deadline = if self.ended_early {
            Some(now)
        } else {
            self.params.duration.map(|d| now + d)
        };
        let origin = self.params.pace_origin.unwrap_or(now);
        for q in &mut self.qps {
            q.pacer = Pacer::new(
                self.params.pattern,
                self.params.size,
                origin + q.wiring.start_offset,
            )
            .with_line_rate(self.params.line_gbps_per_qp);
        }
        let needs_recv = !self.params.test.is_bw() || self.params.test == TestKind::WriteImmBw;
        for i in 0..self.qps.len() {
            if needs_recv && (self.qps[i].wiring.receive || !self.params.test.is_bw()) {
                for _ in 0..self.params.rx_depth {
                    self.post_recv(i, verbs);
                }
            }
        }
        self.kick(now, verbs);
    }

    fn on_completion(&mut self, now: Instant, wc: &WorkCompletion, verbs: &mut dyn Verbs) {
        let Some(i) = self.index_of(wc.qpn) else {
            return;
        };
        if wc.status != WcStatus::Success {
            if wc.status != WcStatus::WrFlushError {
                self.fail(format!(
                    "QP {}: work request {} completed with {:?}",
                    wc.qpn,
                    wc.wr_id & WR_MSG_MASK,
                    wc.status
                ));
            }
            return;
        }
        match wc.opcode {
            WcOpcode::RdmaWrite => {
                self.on_send_done(i, now, wc);
                if !self.params.test.is_bw() {
                    self.pong(i, now, verbs);
                }
            }
            WcOpcode::RecvRdmaWithImm => self.on_receive(i, now, verbs),
        }
        if self.params.test.is_bw() {
            self.fill_bw(i, now, verbs);
        }
    }

    fn on_timer(&mut self, now: Instant, verbs: &mut dyn Verbs) {
        self.kick(now, verbs);
    }

    fn next_timer(&self) -> Option<Instant> {
        if self.error.is_some() {
            return None;
        }
        // The deadline wakes the senders up to stop and signal their tail.
        let deadline = self.deadline.filter(|_| !self.stopped);
        match (self.wake, deadline) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn is_done(&self) -> bool {
        if self.error.is_some() {
            return true;
        }
        if self.params.infinite && !self.ended_early {
            return false;
        }
        let p = self.params;
        self.qps.iter().all(|q| {
            let w = q.wiring;
            let sent = !w.send
                || if p.counted() {
                    q.rec.completed >= p.iters
                } else {
                    // Duration over, the tail signalled, every message accounted for.
                    self.stopped
                        && q.signalled_upto >= q.rec.posted
                        && q.rec.completed >= q.rec.posted
                };
            let got = !w.receive
                || !p.counted()
                || match p.test {
                    TestKind::WriteBw => true,
                    TestKind::WriteImmBw => q.rec.received >= p.iters,
                    TestKind::WriteLat => q.pongs >= p.iters,
                };
            sent && got
        })
    }
}

/// Lock a shared application (a panicked holder leaves its records readable).
pub fn lock(app: &Mutex<PerfApp>) -> MutexGuard<'_, PerfApp> {
    app.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A [`PerfApp`] shared with the thread that reports on it while it runs (live lines,
/// `--run_infinitely` periods, the records at the end).
#[derive(Debug, Clone)]
pub struct SharedApp(pub Arc<Mutex<PerfApp>>);

impl Application for SharedApp {
    fn start(&mut self, now: Instant, verbs: &mut dyn Verbs) {
        lock(&self.0).start(now, verbs);
    }
    fn on_completion(&mut self, now: Instant, wc: &WorkCompletion, verbs: &mut dyn Verbs) {
        lock(&self.0).on_completion(now, wc, verbs);
    }
    fn on_timer(&mut self, now: Instant, verbs: &mut dyn Verbs) {
        lock(&self.0).on_timer(now, verbs);
    }
    fn next_timer(&self) -> Option<Instant> {
        lock(&self.0).next_timer()
    }
    fn is_done(&self) -> bool {
        lock(&self.0).is_done()
    }
}
