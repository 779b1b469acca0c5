//! One QP inside the engine: its verbs state machine and queues, its EV table, and the two
//! halves of MRC reliability: the requester (it sends Writes: `requester.rs`) and the
//! responder (it places them and answers: `responder.rs`). Frames are built in `frames.rs`.

mod feedback;
pub(crate) mod frames;
mod requester;
mod responder;
mod sendq;

use std::collections::VecDeque;

pub use frames::Transmit;
pub(crate) use frames::max_frame_len;
pub(crate) use requester::Requester;
pub(crate) use responder::Responder;
use sendq::{RecvQueue, SendQueue};

use crate::cc::{self, PathFacts};
use crate::config::{EndpointConfig, PathMode, SelectorKind};
use crate::ctx::{CcTable, Ctx};
use crate::ev::{EvSelector, EvTable, RemapDetector, build_selector};
use crate::event::Event;
use crate::rng::Rng;
use crate::stats::QpStats;
use crate::time::Instant;
use crate::verbs::{
    InitAttr, QpInfo, QpInitAttr, QpState, QpTransition, Qpn, RtrAttr, RtsAttr, SendWr,
    TransportMode, VerbsError, WcOpcode, WcStatus, WorkCompletion,
};
use crate::wire::{MultipathVerdict, NackReason};

/// A SACK to send: the packet that triggered it and what to echo.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SackTrigger {
    pub seq: u64,
    pub entropy: u32,
    pub verdict: MultipathVerdict,
    pub tx_ts: u16,
    pub plane: u8,
    /// Answers a reliability probe (SETH PR).
    pub probe: bool,
}

/// A control packet waiting to leave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Control {
    Sack(SackTrigger),
    Nack {
        psn: u32,
        reason: NackReason,
        vendor_info: u8,
        entropy: u32,
        tx_ts: u16,
        plane: u8,
    },
    /// Transport ACK (AETH): messages up to `msn` are complete.
    Ack {
        msn: u16,
        plane: u8,
    },
}

/// Why a QP produced nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TxOutcome {
    Sent(Transmit),
    /// Work is waiting but no port it may use has room: try again with other ports ready.
    Blocked,
    /// Nothing to send until an input or a timer changes something.
    Idle,
    /// Data waits for room in the congestion window, which QPs may share: woken when an
    /// acknowledgement of any of them makes room.
    Window,
}

/// The EVs of a QP and how it picks among them.
#[derive(Debug)]
pub(crate) struct Paths {
    pub table: EvTable,
    pub selector: Box<dyn EvSelector>,
    /// ECMP mode only.
    pub remap: Option<RemapDetector>,
}

/// A QP.
#[derive(Debug)]
pub(crate) struct Qp {
    pub qpn: Qpn,
    pub state: QpState,
    pub attr: QpInitAttr,
    pub init: Option<InitAttr>,
    pub rtr: Option<RtrAttr>,
    pub rts: Option<RtsAttr>,
    pub stats: QpStats,
    sq: SendQueue,
    rq: RecvQueue,
    rng: Rng,
    pub paths: Option<Paths>,
    req: Option<Requester>,
    resp: Option<Responder>,
    cc: Option<usize>,
    /// The peer's ports up (PORT_STATUS_UPDATE), bit i = its port i.
    pub remote_up: u32,
    /// When a port the peer said was down is probed again (updates are best effort: the one
    /// saying it came back may be lost).
    remote_recheck_at: Option<Instant>,
    ctrl: VecDeque<Control>,
    ctrl_limit: usize,
    // Endpoint scheduling state.
    pub in_tx_queue: bool,
    pub in_ctrl_queue: bool,
    pub armed: Option<Instant>,
    /// Data waits for the congestion controller's pacing.
    paced: bool,
    /// Something that can move this QP's deadline earlier happened since the endpoint last
    /// read it (plain sends into a busy flight cannot, so the per-packet path skips the read).
    pub timers_dirty: bool,
}

impl Qp {
    pub fn new(qpn: Qpn, attr: QpInitAttr, cfg: &EndpointConfig, rng: Rng) -> Self {
        let ctrl_limit = cfg.limits.max_control_backlog as usize;
        Self {
            qpn,
            state: QpState::Reset,
            attr,
            init: None,
            rtr: None,
            rts: None,
            stats: QpStats::default(),
            sq: SendQueue::new(attr.cap.max_send_wr, attr.cap.max_send_sge),
            rq: RecvQueue::new(attr.cap.max_recv_wr),
            rng,
            paths: None,
            req: None,
            resp: None,
            cc: None,
            remote_up: u32::MAX,
            remote_recheck_at: None,
            ctrl: VecDeque::new(),
            ctrl_limit,
            in_tx_queue: false,
            in_ctrl_queue: false,
            armed: None,
            paced: false,
            timers_dirty: true,
        }
    }

    /// The congestion controller slot this QP uses.
    pub fn cc_index(&self) -> Option<usize> {
        self.cc
    }

    pub fn info(&self) -> QpInfo {
        QpInfo {
            qpn: self.qpn,
            state: self.state,
            init_attr: self.attr,
            init: self.init,
            rtr: self.rtr,
            rts: self.rts,
        }
    }

    /// Apply a `modify_qp` transition.
    pub fn modify(&mut self, t: QpTransition, ctx: &mut Ctx<'_>) -> Result<(), VerbsError> {
        self.timers_dirty = true;
        t.check_from(self.state)?;
        let cfg = ctx.cfg;
        match t {
            QpTransition::Init(a) => {
                if usize::from(a.ev_profile) >= cfg.ev_profiles.len() {
                    return Err(VerbsError::InvalidAttr("unknown EV profile"));
                }
                if usize::from(a.cc_profile) >= cfg.cc_profiles.len() {
                    return Err(VerbsError::InvalidAttr("unknown CC profile"));
                }
                self.init = Some(a);
            }
            QpTransition::Rtr(a) => self.enter_rtr(a, cfg)?,
            QpTransition::Rts(a) => self.enter_rts(a, ctx)?,
            QpTransition::Error => {
                self.fail(WcStatus::WrFlushError, None, ctx);
                return Ok(());
            }
            QpTransition::Reset => {
                self.reset(ctx);
                return Ok(());
            }
        }
        self.state = t.target();
        Ok(())
    }

    fn enter_rtr(&mut self, a: RtrAttr, cfg: &EndpointConfig) -> Result<(), VerbsError> {
        check_mpr(a.mpr, cfg)?;
        if a.wimm_limit == 0 || a.wimm_limit > cfg.limits.max_wimm {
            return Err(VerbsError::InvalidAttr("WIMM limit"));
        }
        if a.dest_qpn.0 > 0x00ff_ffff || a.dest_qpn.0 <= Qpn::ENDPOINT.0 {
            return Err(VerbsError::InvalidAttr("destination QPN"));
        }
        let init = self.init.unwrap_or_default();
        let profile = &cfg.ev_profiles[usize::from(init.ev_profile)];
        let planes = cfg.ports.len() as u8;
        let order = cfg.wire.entropy_order;
        let (table, ecmp) = match &cfg.path_mode {
            PathMode::Srv6 { paths, host } => {
                let dst = a.remote.host.ok_or(VerbsError::InvalidAttr(
                    "SRv6 mode needs the remote plan host",
                ))?;
                let t = EvTable::srv6(
                    profile,
                    &cfg.timers,
                    planes,
                    &**paths,
                    *host,
                    dst,
                    order,
                    &mut self.rng,
                );
                (t, false)
            }
            PathMode::Ecmp => (
                EvTable::ecmp(profile, &cfg.timers, planes, order, &mut self.rng),
                true,
            ),
        };
        if table.is_empty() {
            return Err(VerbsError::InvalidAttr("no path towards the remote host"));
        }
        let kind = if init.mode == TransportMode::RoceLike {
            SelectorKind::SinglePath
        } else {
            profile.selector
        };
        let selector = build_selector(kind, ecmp, &table, profile.reshuffle_rounds);
        self.paths = Some(Paths {
            table,
            selector,
            remap: ecmp.then(|| RemapDetector::new(profile.remap_burst, profile.remap_window)),
        });
        self.resp = Some(Responder::new(&a, init.mode, cfg));
        // One control packet per PSN of the window at most waits (a burst of trimmed
        // headers), plus a few SACKs and ACKs.
        self.ctrl_limit = (a.mpr as usize + 16).min(self.ctrl_limit);
        self.ctrl = VecDeque::with_capacity(self.ctrl_limit);
        self.rtr = Some(a);
        Ok(())
    }

    fn enter_rts(&mut self, a: RtsAttr, ctx: &mut Ctx<'_>) -> Result<(), VerbsError> {
        let cfg = ctx.cfg;
        check_mpr(a.mpr, cfg)?;
        if a.wimm_limit == 0 || a.timeout > 31 || a.retry_linear > 7 || a.retry_exp > 25 {
            return Err(VerbsError::InvalidAttr(
                "RTS timeout, retry counts or WIMM limit",
            ));
        }
        let (Some(rtr), Some(init)) = (self.rtr, self.init) else {
            return Err(VerbsError::InvalidState(self.state));
        };
        let profile = cfg.cc_profiles[usize::from(init.cc_profile)].clone();
        let facts = PathFacts {
            line_rate_bps: cfg.ports.iter().map(|p| p.line_rate_bps).sum(),
            base_rtt: cfg.timers.initial_rtt,
            mtu_bytes: cc::nominal_packet_bytes(cfg.payload_mtu + frames::UDP_PAYLOAD_OVERHEAD),
        };
        let shared = init.mode == TransportMode::Mrc;
        self.cc = Some(
            ctx.ccs
                .attach(rtr.remote.addr, init.cc_profile, shared, || {
                    cc::build(&profile, &facts)
                }),
        );
        self.req = Some(Requester::new(&a, init.mode, cfg));
        self.rts = Some(a);
        Ok(())
    }

    /// Move to ERROR: the work request `culprit` (or the oldest) completes with `status`,
    /// every other one flushed; receives flushed; reliability state dropped.
    pub fn fail(&mut self, status: WcStatus, culprit: Option<u64>, ctx: &mut Ctx<'_>) {
        if self.state == QpState::Error {
            return;
        }
        let culprit = culprit.unwrap_or(self.sq.head());
        let send_cq = self.attr.send_cq;
        let recv_cq = self.attr.recv_cq;
        let head = self.sq.head();
        for (i, wr) in self.sq.drain().enumerate() {
            let abs = head + i as u64;
            ctx.complete(
                send_cq,
                WorkCompletion {
                    wr_id: wr.wr_id,
                    status: if abs == culprit {
                        status
                    } else {
                        WcStatus::WrFlushError
                    },
                    opcode: WcOpcode::RdmaWrite,
                    qpn: self.qpn,
                    byte_len: wr.len,
                    imm_data: None,
                },
            );
        }
        for wr_id in self.rq.drain() {
            ctx.complete(
                recv_cq,
                WorkCompletion {
                    wr_id,
                    status: WcStatus::WrFlushError,
                    opcode: WcOpcode::RecvRdmaWithImm,
                    qpn: self.qpn,
                    byte_len: 0,
                    imm_data: None,
                },
            );
        }
        self.drop_reliability(ctx);
        self.state = QpState::Error;
        if status != WcStatus::WrFlushError {
            ctx.events.push(Event::QpFatal {
                qpn: self.qpn,
                status,
            });
        }
    }

    fn drop_reliability(&mut self, ctx: &mut Ctx<'_>) {
        if let Some(i) = self.cc.take() {
            let inflight = self.req.as_ref().map_or(0, Requester::inflight_bytes);
            ctx.ccs.detach(i, inflight);
        }
        self.req = None;
        self.resp = None;
        self.ctrl.clear();
    }

    fn reset(&mut self, ctx: &mut Ctx<'_>) {
        self.drop_reliability(ctx);
        self.sq.drain().for_each(drop);
        self.rq.drain().for_each(drop);
        self.paths = None;
        self.init = None;
        self.rtr = None;
        self.rts = None;
        self.remote_up = u32::MAX;
        self.state = QpState::Reset;
    }

    /// `post_send`.
    pub fn post_send(&mut self, wr: &SendWr<'_>, ctx: &mut Ctx<'_>) -> Result<(), VerbsError> {
        match self.state {
            QpState::Rts => {}
            QpState::Error => {
                // libibverbs: work posted to a failed QP completes flushed.
                ctx.complete(
                    self.attr.send_cq,
                    WorkCompletion {
                        wr_id: wr.wr_id,
                        status: WcStatus::WrFlushError,
                        opcode: WcOpcode::RdmaWrite,
                        qpn: self.qpn,
                        byte_len: 0,
                        imm_data: None,
                    },
                );
                return Ok(());
            }
            s => return Err(VerbsError::InvalidState(s)),
        }
        if wr.sg_list.len() > self.attr.cap.max_send_sge as usize {
            return Err(VerbsError::TooManySge {
                given: wr.sg_list.len(),
                max: self.attr.cap.max_send_sge,
            });
        }
        let mut len = 0u64;
        for sge in wr.sg_list {
            ctx.mrs
                .check_local(self.attr.pd, sge.lkey, sge.addr, u64::from(sge.length))?;
            len += u64::from(sge.length);
        }
        if len > ctx.cfg.limits.max_message_bytes || len > u64::from(u32::MAX) {
            return Err(VerbsError::MessageTooLong(len));
        }
        if wr.remote_addr.checked_add(len).is_none() {
            return Err(VerbsError::AddressOverflow);
        }
        let signaled = wr.signaled || self.attr.sq_sig_all;
        self.sq
            .push(wr, len as u32, ctx.cfg.payload_mtu, signaled)?;
        Ok(())
    }

    /// `post_recv`.
    pub fn post_recv(&mut self, wr_id: u64, ctx: &mut Ctx<'_>) -> Result<(), VerbsError> {
        match self.state {
            QpState::Reset => return Err(VerbsError::InvalidState(QpState::Reset)),
            QpState::Error => {
                ctx.complete(
                    self.attr.recv_cq,
                    WorkCompletion {
                        wr_id,
                        status: WcStatus::WrFlushError,
                        opcode: WcOpcode::RecvRdmaWithImm,
                        qpn: self.qpn,
                        byte_len: 0,
                        imm_data: None,
                    },
                );
                return Ok(());
            }
            _ => {}
        }
        self.rq.push(wr_id)?;
        self.deliver_immediates(ctx);
        Ok(())
    }

    /// Queue a control packet (bounded: beyond the limit it is dropped and counted; the peer's
    /// timers recover).
    fn push_control(&mut self, c: Control, ctx: &mut Ctx<'_>) {
        if self.ctrl.len() >= self.ctrl_limit {
            ctx.stats.control_dropped += 1;
            return;
        }
        self.ctrl.push_back(c);
    }

    pub fn has_control(&self) -> bool {
        !self.ctrl.is_empty()
    }

    /// Whether data may be waiting (new packets, retransmissions, probes).
    /// The congestion controller slot this QP uses (shared with others towards one peer).
    pub(crate) fn cc_slot(&self) -> Option<usize> {
        self.cc
    }

    pub fn may_send_data(&mut self, now: Instant) -> bool {
        if self.state != QpState::Rts {
            return false;
        }
        self.sq.has_unsent()
            || self.req.as_mut().is_some_and(Requester::has_retransmit)
            || self
                .paths
                .as_mut()
                .is_some_and(|p| p.table.probe_due(now, u32::MAX).is_some())
    }

    /// A PORT_STATUS_UPDATE from the peer (brief §2.12, §3.10): its ports up are `mask`. A
    /// port newly down has its in-flight packets resent elsewhere, and is probed again after
    /// `hold` unless an update says it is back first.
    pub fn on_remote_port_status(&mut self, now: Instant, mask: u32, hold: crate::time::Duration) {
        let newly_down = self.remote_up & !mask;
        self.remote_up = mask;
        for p in 0..32u8 {
            if newly_down & (1 << p) != 0 {
                self.on_port_down(p);
            }
        }
        if newly_down != 0 {
            self.remote_recheck_at = Some(now + hold);
            self.timers_dirty = true;
        }
    }

    /// Planes a packet of this QP may leave on: local port up and ready, peer port up.
    fn planes(&self, ready: u32, ctx: &Ctx<'_>) -> u32 {
        ready & ctx.ports_up & self.remote_up
    }

    /// The earliest time this QP needs `on_timeout`. Work that only waits for a port
    /// (a due probe) is the transmit path's business, not a timer's; a pacing hold is.
    pub fn deadline(&mut self, now: Instant, ccs: &CcTable) -> Option<Instant> {
        let mut d = min_opt(
            self.resp.as_ref().and_then(Responder::deadline),
            self.remote_recheck_at,
        );
        if let (Some(req), Some(paths)) = (self.req.as_mut(), self.paths.as_ref()) {
            d = min_opt(d, req.deadline(&paths.table, now));
        }
        if self.paced {
            let pace = self
                .cc
                .and_then(|i| ccs.get(i))
                .and_then(|s| s.ctrl.next_send_time(Instant::ZERO))
                .filter(|&t| t > now);
            d = min_opt(d, pace);
        }
        d
    }

    /// Timers: whatever is due at `now`.
    pub fn on_timeout(&mut self, now: Instant, ctx: &mut Ctx<'_>) {
        self.paced = false;
        self.timers_dirty = true;
        if self.remote_recheck_at.is_some_and(|t| t <= now) {
            // Its planes go back to the probes: their EVs return on answers, not on hope.
            self.remote_recheck_at = None;
            if let Some(paths) = self.paths.as_mut() {
                for p in 0..paths.table.planes() {
                    if self.remote_up & (1 << p) == 0 {
                        paths.table.retire_plane(p, now);
                    }
                }
            }
            self.remote_up = u32::MAX;
        }
        if let Some(trigger) = self.resp.as_mut().and_then(|r| r.take_due_sack(now)) {
            self.queue_sack(trigger, ctx);
        }
        if self.state == QpState::Rts {
            self.requester_timeout(now, ctx);
        }
    }

    /// Forward EV state changes to the event queue.
    #[inline]
    pub fn flush_ev_changes(&mut self, ctx: &mut Ctx<'_>) {
        let Some(paths) = self.paths.as_mut().filter(|p| p.table.has_changes()) else {
            return;
        };
        while let Some(c) = paths.table.pop_change() {
            self.stats.ev_state_changes += 1;
            if let Some(p) = ctx.planes.get_mut(usize::from(c.plane)) {
                match c.to {
                    crate::ev::EvState::AssumedBad => p.evs_retired += 1,
                    crate::ev::EvState::Good => p.evs_restored += 1,
                    _ => {}
                }
            }
            ctx.events.push(Event::EvState {
                qpn: self.qpn,
                ev: c.ev,
                plane: c.plane,
                from: c.from,
                to: c.to,
            });
        }
    }

    /// A local port went down: packets in flight through it are resent elsewhere now.
    pub fn on_port_down(&mut self, port: u8) {
        let (Some(req), Some(paths)) = (self.req.as_mut(), self.paths.as_ref()) else {
            return;
        };
        let n = req.lose_on_plane(&paths.table, port);
        self.stats.retransmits.port_down += u64::from(n);
    }

    /// Heap bytes held by this QP (bounded-state checks).
    pub fn heap_bytes(&self) -> usize {
        self.sq.heap_bytes()
            + self.rq.heap_bytes()
            + self.ctrl.capacity() * size_of::<Control>()
            + self.paths.as_ref().map_or(0, |p| p.table.heap_bytes())
            + self.req.as_ref().map_or(0, Requester::heap_bytes)
            + self.resp.as_ref().map_or(0, Responder::heap_bytes)
    }
}

fn check_mpr(mpr: u32, cfg: &EndpointConfig) -> Result<(), VerbsError> {
    if mpr < 64 || !mpr.is_multiple_of(64) || mpr > cfg.limits.max_mpr {
        return Err(VerbsError::InvalidAttr(
            "MPR must be a multiple of 64 within the limit",
        ));
    }
    Ok(())
}

pub(crate) fn min_opt(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}
