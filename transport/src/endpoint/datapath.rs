//! The sans-IO datapath of an [`Endpoint`]: frames in, frames out, timers, port status and
//! events (docs/ARCHITECTURE.md, "The engine's contract").

use core::cmp::Reverse;
use core::net::Ipv6Addr;

use mrc_srv6::wire::EthernetAddress;

use super::Endpoint;
use crate::event::Event;
use crate::qp::{Qp, Transmit, TxOutcome, frames};
use crate::stats::DropReason;
use crate::time::Instant;
use crate::verbs::QpState;
use crate::wire::erth::ENDPOINT_QPN;
use crate::wire::frame::{DataFrame, LeanBody, LeanFrame, parse_lean};
use crate::wire::tseth::timestamp_from_nanos;
use crate::wire::{
    Body, EethRepr, EndpointOp, ErthRepr, Frame, Opcode, TsethRepr, WireError, parse_frame,
};

/// A set of local ports (bit `i` = port `i`): which ports have TX room now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PortMask(pub u32);

impl PortMask {
    /// Every port.
    pub const ALL: Self = Self(u32::MAX);
    /// No port.
    pub const NONE: Self = Self(0);

    /// Just `port`.
    pub const fn only(port: u8) -> Self {
        Self(1 << port)
    }

    /// Whether `port` is in the set.
    pub const fn contains(self, port: u8) -> bool {
        port < 32 && self.0 & (1 << port) != 0
    }

    /// The set without `port`.
    pub const fn without(self, port: u8) -> Self {
        Self(self.0 & !(1 << port))
    }
}

/// An endpoint operation waiting to leave (brief §2.12), routed on a reverse EV of QP slot
/// `via` towards `remote`: a request of ours (a port status update, brief §3.10), or the
/// answer to one of the peer's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OutgoingOp {
    pub op: EndpointOp,
    pub via: u32,
    pub remote: Ipv6Addr,
    pub answer: Option<Answer>,
}

/// What an answer echoes of the request: the plane it arrived on (the answer goes back
/// through it first), its timestamp and its id (BTH PSN).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Answer {
    pub plane: u8,
    pub tx_ts: u16,
    pub id: u32,
}

impl Endpoint {
    /// A frame arrived on `port`. The payload of a Write is placed straight from `frame` into
    /// registered memory; nothing is kept of `frame` after the call.
    ///
    /// A thin wrapper of [`handle_packets`](Self::handle_packets) for one frame.
    pub fn handle_packet(&mut self, now: Instant, port: u8, frame: &[u8]) {
        self.handle_packets(now, port, [frame]);
    }

    /// A burst of frames arrived on `port` (what one RX burst of the NIC returned): one clock
    /// update and one port check for the burst, then each frame in order, exactly as
    /// [`handle_packet`](Self::handle_packet) would take it (issue #13, burst interfaces).
    pub fn handle_packets<'f>(
        &mut self,
        now: Instant,
        port: u8,
        frames: impl IntoIterator<Item = &'f [u8]>,
    ) {
        self.now = self.now.max(now);
        if usize::from(port) >= self.cfg.ports.len() {
            for _ in frames {
                self.stats.frames_received += 1;
                self.stats.drops.add(DropReason::Unexpected);
            }
            return;
        }
        for frame in frames {
            self.stats.frames_received += 1;
            self.receive(now, port, frame);
        }
    }

    /// One frame of a burst, on a port that exists. Data and SACK frames in the engine's own
    /// layouts take the lean path ([`parse_lean`], issue #13): no full [`Frame`] is built.
    /// Every other frame, and every frame the lean path does not take, is parsed by
    /// [`parse_frame`]; both paths make the same checks in the same order.
    #[inline]
    fn receive(&mut self, now: Instant, port: u8, frame: &[u8]) {
        match parse_lean(frame, &self.cfg.wire) {
            Some(Ok(f)) => self.receive_lean(now, port, frame, &f),
            Some(Err(e)) => self.stats.drops.add(drop_reason(e)),
            None => self.receive_general(now, port, frame),
        }
    }

    /// A data, SACK or ACK frame read by the lean path.
    #[inline]
    fn receive_lean(&mut self, now: Instant, port: u8, frame: &[u8], f: &LeanFrame<'_>) {
        if f.dst_addr != self.cfg.nic_addr {
            self.stats.drops.add(DropReason::NotForUs);
            return;
        }
        if f.bth.dest_qp == ENDPOINT_QPN {
            // Not an endpoint operation: the general path counts and drops it.
            self.receive_general(now, port, frame);
            return;
        }
        let Some(idx) = self.qp_for(f.bth.dest_qp, f.src_addr) else {
            return;
        };
        self.with_qp(idx, |qp, ctx| match &f.body {
            LeanBody::Data(d) => qp.on_data(now, port, &f.bth, d, ctx),
            LeanBody::Sack { seth, cc } => qp.on_sack(now, seth, cc, ctx),
            LeanBody::Ack(a) => qp.on_ack(a, ctx),
        });
    }

    /// Any frame, through the general [`Frame`].
    fn receive_general(&mut self, now: Instant, port: u8, frame: &[u8]) {
        // Read in place (a `Frame` is 240 bytes: not moved out of the result).
        let parsed = parse_frame(frame, &self.cfg.wire);
        let f = match &parsed {
            Ok(f) => f,
            Err(e) => {
                self.stats.drops.add(drop_reason(*e));
                return;
            }
        };
        if f.dst_addr() != self.cfg.nic_addr {
            self.stats.drops.add(DropReason::NotForUs);
            return;
        }
        if f.bth.dest_qp == ENDPOINT_QPN {
            self.on_endpoint_op(now, port, f);
            return;
        }
        let Some(idx) = self.qp_for(f.bth.dest_qp, f.src_addr()) else {
            return;
        };
        self.with_qp(idx, |qp, ctx| match (f.trimmed, &f.body) {
            (Some(how), _) => qp.on_trimmed(port, f, how, ctx),
            (None, Some(Body::Write(w))) => {
                let d = DataFrame {
                    entropy: f.entropy,
                    ecn: f.ecn(),
                    write: *w,
                    payload: f.payload,
                };
                qp.on_data(now, port, &f.bth, &d, ctx);
            }
            (None, Some(Body::Sack { seth, cc })) => qp.on_sack(now, seth, cc, ctx),
            (None, Some(Body::Nack(n))) => qp.on_nack(now, n, ctx),
            (None, Some(Body::Ack(a))) => qp.on_ack(a, ctx),
            (None, Some(Body::Probe(p))) => qp.on_probe(port, f, p, ctx),
            (None, _) => ctx.drop_frame(DropReason::Unexpected),
        });
    }

    /// The slot of QP `dest_qp` if it exists and is connected to `src`; otherwise the drop is
    /// counted (unknown QP, not connected, another peer) and `None`.
    #[inline]
    fn qp_for(&mut self, dest_qp: u32, src: Ipv6Addr) -> Option<usize> {
        let Some(idx) = self.qps.index_of(dest_qp) else {
            self.stats.drops.add(DropReason::UnknownQp);
            return None;
        };
        match self.qps.at(idx).and_then(Qp::peer_addr) {
            None => {
                self.stats.drops.add(DropReason::WrongState);
                None
            }
            Some(a) if a != src => {
                self.stats.drops.add(DropReason::WrongPeer);
                None
            }
            Some(_) => Some(idx),
        }
    }

    /// Write the next frame to send into `buf` (at least [`max_frame_len`] bytes) and say
    /// which port it leaves on. `ready` holds the ports with TX room: EVs on other planes are
    /// passed over, as MRC's send-time EV choice does (brief §3.2). `None`: nothing to send
    /// on those ports now.
    ///
    /// A thin wrapper of [`poll_transmit_burst`](Self::poll_transmit_burst) for one buffer.
    ///
    /// [`max_frame_len`]: Self::max_frame_len
    pub fn poll_transmit(
        &mut self,
        now: Instant,
        ready: PortMask,
        buf: &mut [u8],
    ) -> Option<Transmit> {
        let mut out = [Transmit { len: 0, port: 0 }];
        (self.poll_transmit_burst(now, ready, &mut [buf], &mut out) == 1).then_some(out[0])
    }

    /// Up to `bufs.len()` frames, the next ones [`poll_transmit`](Self::poll_transmit) would
    /// write, one per buffer (each at least [`max_frame_len`](Self::max_frame_len) bytes),
    /// with one clock update and one port check for the burst; their lengths and ports go to
    /// `out` (at least as long as `bufs`). Returns how many were written: fewer than asked
    /// when nothing more is due on `ready` now. For a NIC that takes a burst of descriptors
    /// whose ports all had room when the burst began (issue #13, burst interfaces).
    pub fn poll_transmit_burst<B: AsMut<[u8]>>(
        &mut self,
        now: Instant,
        ready: PortMask,
        bufs: &mut [B],
        out: &mut [Transmit],
    ) -> usize {
        self.now = self.now.max(now);
        let ready = ready.0 & self.ports_up;
        if ready == 0 {
            return 0;
        }
        let mut n = 0;
        for (buf, slot) in bufs.iter_mut().zip(out.iter_mut()) {
            let Some(t) = self.transmit(now, ready, buf.as_mut()) else {
                break;
            };
            *slot = t;
            n += 1;
        }
        n
    }

    /// The next frame on ports `ready` (already masked with the usable ones).
    #[inline]
    fn transmit(&mut self, now: Instant, ready: u32, buf: &mut [u8]) -> Option<Transmit> {
        if let Some(t) = self.poll_endpoint_op(ready, buf) {
            self.stats.frames_sent += 1;
            return Some(t);
        }
        for _ in 0..self.ctrl_queue.len() {
            let idx = self.ctrl_queue.pop_front()? as usize;
            let Some(qp) = self.qps.at_mut(idx) else {
                continue;
            };
            qp.sched.in_ctrl_queue = false;
            if let Some(TxOutcome::Sent(t)) =
                self.with_qp(idx, |qp, ctx| qp.poll_control(ready, buf, ctx))
            {
                self.stats.frames_sent += 1;
                return Some(t);
            }
        }
        for _ in 0..self.tx_queue.len() {
            let idx = self.tx_queue.pop_front()? as usize;
            let Some(qp) = self.qps.at_mut(idx) else {
                continue;
            };
            qp.sched.in_tx_queue = false;
            let outcome = self.with_qp(idx, |qp, ctx| qp.poll_data(now, ready, buf, ctx));
            match outcome {
                Some(TxOutcome::Sent(t)) => {
                    self.stats.frames_sent += 1;
                    return Some(t);
                }
                Some(outcome @ (TxOutcome::Idle | TxOutcome::Window)) => {
                    if outcome == TxOutcome::Window
                        && let Some(slot) = self
                            .qps
                            .at_mut(idx)
                            .and_then(|q| q.cc_slot())
                            .and_then(|i| self.ccs.get_mut(i))
                    {
                        slot.wait(idx as u32);
                    }
                    // Nothing until an input or a timer: out of the queue until then.
                    if let Some(q) = self.qps.at_mut(idx)
                        && q.sched.in_tx_queue
                    {
                        q.sched.in_tx_queue = false;
                        if self.tx_queue.back() == Some(&(idx as u32)) {
                            self.tx_queue.pop_back();
                        } else {
                            self.tx_queue.retain(|&i| i as usize != idx);
                        }
                    }
                }
                Some(TxOutcome::Blocked) | None => {}
            }
        }
        None
    }

    /// The earliest time [`handle_timeout`](Self::handle_timeout) has work (possibly in the
    /// past: call it now). `None`: no timer armed.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.timers.peek().map(|Reverse((t, _))| *t)
    }

    /// Run every timer due at `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.now = self.now.max(now);
        // Each QP runs at most once per call, so a deadline that does not move cannot spin.
        let mut due = core::mem::take(&mut self.due_scratch);
        due.clear();
        while let Some(&Reverse((t, idx))) = self.timers.peek() {
            if t > now {
                break;
            }
            self.timers.pop();
            let Some(qp) = self.qps.at_mut(idx as usize) else {
                continue;
            };
            if qp.sched.armed == Some(t) {
                qp.sched.armed = None;
                due.push(idx);
            }
        }
        for &idx in &due {
            self.with_qp(idx as usize, |qp, ctx| qp.on_timeout(now, ctx));
        }
        self.due_scratch = due;
    }

    /// A local port went up or down. Down: in-flight packets through it are resent on other
    /// planes at once and its EVs are passed over; either way every peer is told (PORT_STATUS
    /// _UPDATE, brief §3.10).
    pub fn handle_port_status(&mut self, now: Instant, port: u8, up: bool) {
        self.now = self.now.max(now);
        if usize::from(port) >= self.cfg.ports.len() {
            return;
        }
        let was_up = self.ports_up & (1 << port) != 0;
        if was_up == up {
            return;
        }
        if up {
            self.ports_up |= 1 << port;
        } else {
            self.ports_up &= !(1 << port);
            self.planes[usize::from(port)].port_down_events += 1;
        }
        self.events.push(Event::PortStatus { port, up });
        if !up {
            // Every QP reacts, in slot order (no allocation: slot indices, empty ones skipped).
            for idx in 0..self.qps.capacity_used() {
                if self.qps.at(idx).is_some() {
                    self.with_qp(idx, |qp, ctx| qp.on_port_down(port, ctx));
                }
            }
        }
        self.notify_peers();
    }

    /// Tell every peer our ports (PORT_STATUS_UPDATE, brief §3.10), through its QP of lowest
    /// slot in RTR or RTS, unless a request to it is queued already; peers in the order of
    /// those slots. Through the peer index: QPs without a peer are not visited (issue #13).
    ///
    /// This is what visiting every slot in order did, asking for each connected QP whether
    /// its peer was told yet: a queue that refuses an operation (full) refuses every later
    /// one of the call, so a peer it refuses is refused once per QP able to tell it.
    fn notify_peers(&mut self) {
        #[cfg(debug_assertions)]
        self.check_peer_index();
        let mut order = core::mem::take(&mut self.notify_scratch);
        order.clear();
        let able = |q: &Qp| matches!(q.state, QpState::Rtr | QpState::Rts);
        for (remote, slots) in self.peers.iter() {
            let mut tellers = slots
                .iter()
                .filter(|&&i| self.qps.at(i as usize).is_some_and(able));
            if let Some(&via) = tellers.next() {
                order.push((via, remote, 1 + tellers.count() as u32));
            }
        }
        order.sort_unstable_by_key(|&(via, _, _)| via);
        for &(via, remote, tellers) in &order {
            let queued = self.ep_ops.iter().any(|o| {
                o.op == EndpointOp::PortStatusUpdate && o.answer.is_none() && o.remote == remote
            });
            if queued {
                continue;
            }
            let op = OutgoingOp {
                op: EndpointOp::PortStatusUpdate,
                via,
                remote,
                answer: None,
            };
            if !self.push_ep_op(op) {
                // Refused: so is every other QP of this peer that asks.
                self.stats.control_dropped += u64::from(tellers - 1);
            }
        }
        self.notify_scratch = order;
    }

    /// The MAC of the switch behind `port` is now `mac` (the NIC runtime's neighbour discovery
    /// resolved it): frames leaving on `port` carry it from now on. `false` for no such port.
    pub fn set_next_hop_mac(&mut self, port: u8, mac: EthernetAddress) -> bool {
        match self.cfg.ports.get_mut(usize::from(port)) {
            Some(p) => {
                p.next_hop_mac = mac;
                true
            }
            None => false,
        }
    }

    /// The next asynchronous event.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop()
    }

    /// Queue an endpoint operation; `false` (and counted) when the queue is full.
    pub(super) fn push_ep_op(&mut self, op: OutgoingOp) -> bool {
        if self.ep_ops.len() >= self.ep_ops.capacity().max(64) {
            self.stats.control_dropped += 1;
            false
        } else {
            self.ep_ops.push_back(op);
            true
        }
    }

    /// An endpoint operation (QP 2, brief §2.12): a peer's port status, or an EV probe. It
    /// reaches the QPs connected to its sender through the peer index (issue #13).
    fn on_endpoint_op(&mut self, now: Instant, port: u8, f: &Frame<'_>) {
        self.stats.endpoint_ops_received += 1;
        let src = f.src_addr();
        match f.body {
            Some(Body::EndpointRequest(ErthRepr {
                op: EndpointOp::PortStatusUpdate,
                port_status_mask,
                ..
            })) => {
                let hold = self.cfg.timers.remote_port_down_hold;
                // Every QP to that peer, in slot order (no allocation: a reused list).
                let mut slots = core::mem::take(&mut self.peer_scratch);
                slots.clear();
                slots.extend_from_slice(self.peer_slots(src));
                for &idx in &slots {
                    self.with_qp(idx as usize, |qp, ctx| {
                        qp.on_remote_port_status(port_status_mask, hold, ctx);
                    });
                }
                self.peer_scratch = slots;
                self.events.push(Event::RemotePortStatus {
                    remote: src,
                    up_mask: port_status_mask,
                });
            }
            Some(Body::EndpointRequest(ErthRepr {
                op: EndpointOp::EvProbe,
                tx_timestamp,
                ..
            })) => match self.peer_slots(src).first() {
                // The answer goes through the peer's QP of lowest slot.
                Some(&via) => {
                    self.push_ep_op(OutgoingOp {
                        op: EndpointOp::EvProbe,
                        via,
                        remote: src,
                        answer: Some(Answer {
                            plane: port,
                            tx_ts: tx_timestamp,
                            id: f.bth.psn,
                        }),
                    });
                }
                None => self.stats.drops.add(DropReason::WrongPeer),
            },
            _ => self.stats.drops.add(DropReason::Unexpected),
        }
        let _ = now;
    }

    /// Build the next endpoint operation, routed on a reverse EV of the QP it goes through.
    fn poll_endpoint_op(&mut self, ready: u32, buf: &mut [u8]) -> Option<Transmit> {
        let o = *self.ep_ops.front()?;
        let (ports_up, now) = (self.ports_up, self.now);
        let qp = self.qps.at_mut(o.via as usize);
        let remote_up = qp.as_ref().map_or(0, |q| q.remote_up());
        let Some(paths) = qp.and_then(Qp::paths_mut) else {
            self.ep_ops.pop_front();
            return None;
        };
        let planes = ready & remote_up;
        let preferred = o.answer.map_or(planes.trailing_zeros() as u8, |a| a.plane);
        let ev = paths.reverse_ev(planes, preferred)?;
        let (opcode, psn, body) = match o.answer {
            None => (
                Opcode::EndpointRequest,
                0,
                Body::EndpointRequest(ErthRepr {
                    op: o.op,
                    port_status_mask: ports_up,
                    tx_timestamp: timestamp_from_nanos(now.as_nanos()),
                    tsr: false,
                    format_type: TsethRepr::DEFAULT_FORMAT,
                }),
            ),
            Some(a) => (
                Opcode::EndpointResponse,
                a.id,
                Body::EndpointResponse(EethRepr {
                    op: o.op,
                    port_status_mask: ports_up,
                    tx_timestamp: a.tx_ts,
                    tsr: false,
                    format_type: TsethRepr::DEFAULT_FORMAT,
                    service_time_ns: 0,
                }),
            ),
        };
        let ev = paths.table.route(ev);
        let t = frames::emit_control(
            &self.cfg,
            ev,
            o.remote,
            opcode,
            ENDPOINT_QPN,
            psn,
            body,
            buf,
        )
        .ok()?;
        self.ep_ops.pop_front();
        Some(t)
    }
}

fn drop_reason(e: WireError) -> DropReason {
    match e {
        WireError::Truncated { .. } => DropReason::Truncated,
        WireError::Malformed { .. }
        | WireError::LengthMismatch { .. }
        | WireError::BufferTooSmall { .. } => DropReason::Malformed,
        WireError::NotIpv6(_)
        | WireError::UnexpectedNextHeader(_)
        | WireError::NotMrcPort(_)
        | WireError::UnknownOpcode(_) => DropReason::NotMrc,
        WireError::BadIcrc { .. } => DropReason::BadIcrc,
    }
}
