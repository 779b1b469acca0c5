//! One QP inside the engine, in two parts:
//!
//! - the verbs part (this file): the state machine, the send and receive queues, the CQ
//!   handles, the counters;
//! - a [`Connection`] (`conn.rs`) that exists from RTR on: the paths (`ev/`), the requester
//!   (`requester.rs`: Writes out, `feedback.rs`: what comes back), the responder
//!   (`responder.rs`: Writes in, SACK/NACK/ACK out), the control queue (`control.rs`) and the
//!   named deadlines (`timers.rs`). Frames are built in `frames.rs`.

mod conn;
mod control;
mod feedback;
pub(crate) mod frames;
mod requester;
mod responder;
mod sendq;
mod timers;

use core::net::Ipv6Addr;

pub(crate) use conn::Connection;
pub use frames::Transmit;
use sendq::{RecvQueue, SendQueue};

use crate::config::EndpointConfig;
use crate::ctx::Ctx;
use crate::ev::{EvEvent, EvState, Paths};
use crate::event::Event;
use crate::rng::Rng;
use crate::stats::QpStats;
use crate::time::{Duration, Instant};
use crate::verbs::{
    InitAttr, QpInfo, QpInitAttr, QpState, QpTransition, Qpn, RtrAttr, RtsAttr, SendWr, VerbsError,
    WcOpcode, WcStatus, WorkCompletion,
};

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

/// Where the endpoint's scheduler has a QP.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Sched {
    pub in_tx_queue: bool,
    pub in_ctrl_queue: bool,
    /// The deadline the endpoint's timer heap holds for it.
    pub armed: Option<Instant>,
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
    /// From RTR until RESET (kept in ERROR, inert, so its paths can still be read).
    conn: Option<Connection>,
    pub sched: Sched,
}

/// A connected QP borrowed apart: its connection and the pieces of the verbs part the
/// datapath uses with it.
pub(super) struct Parts<'a> {
    pub c: &'a mut Connection,
    pub sq: &'a mut SendQueue,
    pub stats: &'a mut QpStats,
    pub rng: &'a mut Rng,
    pub qpn: Qpn,
}

impl Qp {
    pub fn new(qpn: Qpn, attr: QpInitAttr, rng: Rng) -> Self {
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
            conn: None,
            sched: Sched::default(),
        }
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

    /// The connection and what the datapath uses with it, from RTR until RESET.
    fn parts(&mut self) -> Option<Parts<'_>> {
        let Self {
            conn: Some(c),
            sq,
            stats,
            rng,
            qpn,
            ..
        } = self
        else {
            return None;
        };
        Some(Parts {
            c,
            sq,
            stats,
            rng,
            qpn: *qpn,
        })
    }

    /// The paths, from RTR until RESET.
    pub fn paths(&self) -> Option<&Paths> {
        self.conn.as_ref().map(|c| &c.paths)
    }

    pub fn paths_mut(&mut self) -> Option<&mut Paths> {
        self.conn.as_mut().map(|c| &mut c.paths)
    }

    /// The peer NIC, from RTR until RESET.
    pub fn peer_addr(&self) -> Option<Ipv6Addr> {
        self.conn.as_ref().map(|c| c.peer.addr)
    }

    /// The peer's ports up (PORT_STATUS_UPDATE, bit i = its port i).
    pub fn remote_up(&self) -> u32 {
        self.conn.as_ref().map_or(u32::MAX, |c| c.remote_up)
    }

    /// The congestion controller slot this QP sends under (shared with others towards one
    /// peer), in RTS.
    pub fn cc_slot(&self) -> Option<usize> {
        self.conn
            .as_ref()
            .filter(|_| self.state == QpState::Rts)
            .map(|c| c.req.cc)
    }

    /// Apply a `modify_qp` transition.
    pub fn modify(&mut self, t: QpTransition, ctx: &mut Ctx<'_>) -> Result<(), VerbsError> {
        let r = self.transition(t, ctx);
        self.refresh_timers(ctx);
        r
    }

    fn transition(&mut self, t: QpTransition, ctx: &mut Ctx<'_>) -> Result<(), VerbsError> {
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
            QpTransition::Rtr(a) => {
                let init = self.init.unwrap_or_default();
                let conn = Connection::new(self.qpn, &init, &a, ctx, &mut self.rng)?;
                self.stats.mpr_advertised = conn.resp.mpr_advertised();
                self.conn = Some(conn);
                self.rtr = Some(a);
            }
            QpTransition::Rts(a) => {
                let Some(c) = self.conn.as_mut() else {
                    return Err(VerbsError::InvalidState(self.state));
                };
                c.req.start(&a, cfg)?;
                self.stats.mpr_window = c.req.window();
                self.rts = Some(a);
            }
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

    /// Dynamic MPR (brief §3.5): the responder's current MPR, advertised from the next SACK
    /// on: from 128 PSNs up to the RTR MPR (rounded down to whole 128-PSN units on the wire);
    /// the QP must have enabled dynamic MPR at RTR.
    pub fn set_mpr(&mut self, psns: u32) -> Result<(), VerbsError> {
        let (QpState::Rtr | QpState::Rts, Some(c), Some(rtr)) =
            (self.state, self.conn.as_mut(), self.rtr)
        else {
            return Err(VerbsError::InvalidState(self.state));
        };
        if !rtr.dynamic_mpr {
            return Err(VerbsError::InvalidAttr("dynamic MPR is off on this QP"));
        }
        if psns < crate::wire::seth::MPR_UNIT_PSNS || psns > rtr.mpr {
            return Err(VerbsError::InvalidAttr(
                "dynamic MPR beyond the RTR MPR or below 128 PSNs",
            ));
        }
        c.resp.set_mpr(psns);
        self.stats.mpr_advertised = c.resp.mpr_advertised();
        Ok(())
    }

    /// Move to ERROR: the work request `culprit` (or the oldest) completes with `status`,
    /// every other one flushed; receives flushed; the connection stops (its congestion
    /// controller released, control packets dropped; its paths stay readable).
    pub fn fail(&mut self, status: WcStatus, culprit: Option<u64>, ctx: &mut Ctx<'_>) {
        if self.state == QpState::Error {
            return;
        }
        let culprit = culprit.unwrap_or(self.sq.head());
        let head = self.sq.head();
        for (i, wr) in self.sq.drain().enumerate() {
            let abs = head + i as u64;
            let status = if abs == culprit {
                status
            } else {
                WcStatus::WrFlushError
            };
            let wc = send_completion(self.qpn, wr.wr_id, status, wr.len);
            ctx.complete(self.attr.send_cq, wc);
        }
        for wr_id in self.rq.drain() {
            let wc = recv_completion(self.qpn, wr_id, WcStatus::WrFlushError, 0, None);
            ctx.complete(self.attr.recv_cq, wc);
        }
        if let Some(c) = self.conn.as_mut() {
            c.stop(matches!(self.state, QpState::Rtr | QpState::Rts), ctx);
        }
        self.state = QpState::Error;
        if status != WcStatus::WrFlushError {
            ctx.events.push(Event::QpFatal {
                qpn: self.qpn,
                status,
            });
        }
    }

    fn reset(&mut self, ctx: &mut Ctx<'_>) {
        if let Some(mut c) = self.conn.take() {
            c.stop(matches!(self.state, QpState::Rtr | QpState::Rts), ctx);
        }
        self.sq.drain().for_each(drop);
        self.rq.drain().for_each(drop);
        self.init = None;
        self.rtr = None;
        self.rts = None;
        self.state = QpState::Reset;
    }

    /// `post_send`.
    pub fn post_send(&mut self, wr: &SendWr<'_>, ctx: &mut Ctx<'_>) -> Result<(), VerbsError> {
        match self.state {
            QpState::Rts => {}
            QpState::Error => {
                // libibverbs: work posted to a failed QP completes flushed.
                let wc = send_completion(self.qpn, wr.wr_id, WcStatus::WrFlushError, 0);
                ctx.complete(self.attr.send_cq, wc);
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
        if ctx.ports_up == 0 {
            self.arm_retry_while_stuck(ctx);
        }
        Ok(())
    }

    /// `post_recv`.
    pub fn post_recv(&mut self, wr_id: u64, ctx: &mut Ctx<'_>) -> Result<(), VerbsError> {
        match self.state {
            QpState::Reset => return Err(VerbsError::InvalidState(QpState::Reset)),
            QpState::Error => {
                let wc = recv_completion(self.qpn, wr_id, WcStatus::WrFlushError, 0, None);
                ctx.complete(self.attr.recv_cq, wc);
                return Ok(());
            }
            _ => {}
        }
        self.rq.push(wr_id)?;
        self.deliver_immediates(ctx);
        Ok(())
    }

    pub fn has_control(&self) -> bool {
        self.conn.as_ref().is_some_and(|c| !c.ctrl.is_empty())
    }

    /// Whether data may be waiting (new packets, retransmissions, probes).
    pub fn may_send_data(&mut self, now: Instant) -> bool {
        if self.state != QpState::Rts {
            return false;
        }
        let Some(c) = self.conn.as_mut() else {
            return false;
        };
        self.sq.has_unsent()
            || c.req.has_retransmit()
            || c.paths.table.probe_due(now, u32::MAX).is_some()
    }

    /// A PORT_STATUS_UPDATE from the peer (brief §2.12, §3.10): its ports up are `mask`. A
    /// port newly down has its in-flight packets resent elsewhere, and is probed again after
    /// `hold` unless an update says it is back first.
    pub fn on_remote_port_status(&mut self, mask: u32, hold: Duration, ctx: &mut Ctx<'_>) {
        let Some(c) = self.conn.as_mut() else {
            return;
        };
        let newly_down = c.remote_up & !mask;
        c.remote_up = mask;
        for p in 0..32u8 {
            if newly_down & (1 << p) != 0 {
                self.on_port_down(p, ctx);
            }
        }
        if newly_down != 0
            && let Some(c) = self.conn.as_mut()
        {
            c.timers
                .set(timers::Timer::RemotePorts, Some(ctx.now + hold));
            self.refresh_timers(ctx);
        }
    }

    /// A port (local, or the peer's) went down: packets in flight through it are resent
    /// elsewhere now (brief §3.10). EVs keep their state: the selector passes over the plane.
    pub fn on_port_down(&mut self, port: u8, ctx: &mut Ctx<'_>) {
        if self.state != QpState::Rts {
            return;
        }
        if let Some(c) = self.conn.as_mut() {
            let e = EvEvent::PortDown { plane: port };
            c.paths
                .react(e, ctx.now, &mut self.rng, &mut self.stats, ctx.planes);
            let n = c.req.lose_on_plane(&c.paths.table, port);
            self.stats.retransmits.port_down += u64::from(n);
        }
        if ctx.ports_up == 0 && self.sq.head() < self.sq.tail() {
            self.arm_retry_while_stuck(ctx);
        }
    }

    /// Work is posted and no local port is up, so no packet leaves to start the retry clock:
    /// start it now, so that ports that never come back end the work in RetryExceeded (MRC
    /// brief §3.7) instead of leaving it posted for ever. A packet that leaves later keeps
    /// this clock; progress refills it.
    fn arm_retry_while_stuck(&mut self, ctx: &Ctx<'_>) {
        if let Some(c) = self.conn.as_mut()
            && c.req.retry.deadline().is_none()
        {
            c.req.retry.arm(ctx.now);
            self.refresh_timers(ctx);
        }
    }

    /// Planes a packet of this QP may leave on: local port up and ready, peer port up.
    fn planes(&self, ready: u32, ctx: &Ctx<'_>) -> u32 {
        ready & ctx.ports_up & self.remote_up()
    }

    /// The earliest deadline of this QP (the endpoint arms it).
    #[inline]
    pub fn next_deadline(&self) -> Option<Instant> {
        self.conn.as_ref().and_then(|c| c.timers.next())
    }

    /// Re-read the deadlines derived from the connection's state (after an input that can
    /// change them).
    fn refresh_timers(&mut self, ctx: &Ctx<'_>) {
        let state = self.state;
        if let Some(c) = self.conn.as_mut() {
            c.refresh_timers(state, ctx.now, ctx.ccs);
        }
    }

    /// Timers: whatever is due at `now`.
    pub fn on_timeout(&mut self, now: Instant, ctx: &mut Ctx<'_>) {
        let Some(c) = self.conn.as_mut() else {
            return;
        };
        c.req.paced = false;
        if c.timers
            .get(timers::Timer::RemotePorts)
            .is_some_and(|t| t <= now)
        {
            // Its planes go back to the probes: their EVs return on answers, not on hope.
            c.timers.set(timers::Timer::RemotePorts, None);
            for p in 0..c.paths.table.planes() as u8 {
                if c.remote_up & (1 << p) == 0 {
                    let e = EvEvent::PeerPortUnconfirmed { plane: p };
                    c.paths
                        .react(e, now, &mut self.rng, &mut self.stats, ctx.planes);
                }
            }
            c.remote_up = u32::MAX;
        }
        let receiving = matches!(self.state, QpState::Rtr | QpState::Rts);
        if let Some(trigger) = c.resp.take_due_sack(now).filter(|_| receiving) {
            self.queue_sack(trigger, ctx);
        }
        if self.state == QpState::Rts {
            self.requester_timeout(now, ctx);
        }
        self.refresh_timers(ctx);
    }

    /// Forward EV state changes to the event queue.
    #[inline]
    pub fn flush_ev_changes(&mut self, ctx: &mut Ctx<'_>) {
        let Some(paths) = self.paths_mut().filter(|p| p.table.has_changes()) else {
            return;
        };
        let mut changes = 0;
        while let Some(c) = paths.table.pop_change() {
            changes += 1;
            if let Some(p) = ctx.planes.get_mut(usize::from(c.plane)) {
                match c.to {
                    EvState::AssumedBad => p.evs_retired += 1,
                    EvState::Good => p.evs_restored += 1,
                    _ => {}
                }
            }
            ctx.events.push(Event::EvState {
                qpn: paths.qpn,
                ev: c.ev,
                plane: c.plane,
                from: c.from,
                to: c.to,
            });
        }
        self.stats.ev_state_changes += changes;
    }

    /// Heap bytes held by this QP (bounded-state checks).
    pub fn heap_bytes(&self) -> usize {
        self.sq.heap_bytes()
            + self.rq.heap_bytes()
            + self.conn.as_ref().map_or(0, Connection::heap_bytes)
    }
}

/// MPR (the PSN window, brief §3.5): a multiple of 64 within the endpoint's limit.
fn check_mpr(mpr: u32, cfg: &EndpointConfig) -> Result<(), VerbsError> {
    if mpr < 64 || !mpr.is_multiple_of(64) || mpr > cfg.limits.max_mpr {
        return Err(VerbsError::InvalidAttr(
            "MPR must be a multiple of 64 within the limit",
        ));
    }
    Ok(())
}

/// The completion of a send work request.
fn send_completion(qpn: Qpn, wr_id: u64, status: WcStatus, byte_len: u32) -> WorkCompletion {
    WorkCompletion {
        wr_id,
        status,
        opcode: WcOpcode::RdmaWrite,
        qpn,
        byte_len,
        imm_data: None,
    }
}

/// The completion of a receive work request.
fn recv_completion(
    qpn: Qpn,
    wr_id: u64,
    status: WcStatus,
    byte_len: u32,
    imm_data: Option<u32>,
) -> WorkCompletion {
    WorkCompletion {
        wr_id,
        status,
        opcode: WcOpcode::RecvRdmaWithImm,
        qpn,
        byte_len,
        imm_data,
    }
}
