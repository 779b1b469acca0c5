//! The responder's control packets (SACK, NACK, ACK: brief §2.9, §2.10, §2.13), queued until a
//! port has room, then sent on the QP's reverse EV of the plane their trigger arrived on
//! (brief §3.9).

use super::frames::{self, Transmit};
use super::{Parts, Qp, TxOutcome};
use crate::ctx::Ctx;
use crate::reliability::psn::psn_of;
use crate::wire::{AethRepr, Body, MultipathVerdict, NackReason, NethRepr, Opcode};

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

impl Control {
    /// The plane its trigger arrived on: where it goes back first.
    fn plane(&self) -> u8 {
        match *self {
            Self::Sack(t) => t.plane,
            Self::Nack { plane, .. } | Self::Ack { plane, .. } => plane,
        }
    }
}

/// The control packets of one QP, bounded: beyond the limit one is dropped and counted (the
/// peer's timers recover). A fixed ring of `limit` slots written in place by an inlined push
/// (issue #13: through `VecDeque::push_back`, which stayed out of line, a control packet built
/// piecewise on the caller's stack was read back whole, a store-forwarding stall per SACK).
#[derive(Debug)]
pub(crate) struct ControlQueue {
    slots: Box<[Control]>,
    /// The oldest (the next to leave).
    head: usize,
    len: usize,
    /// Slots the ring may grow to: beyond, a packet is dropped.
    limit: usize,
}

/// Slots of a control ring before it first grows: a QP keeps a few control packets waiting
/// at a time, and a thousand simulated hosts paid 25 KB each for rings that never filled
/// (issue #14).
const INITIAL_SLOTS: usize = 8;

impl ControlQueue {
    pub fn new(limit: usize) -> Self {
        Self {
            slots: Self::ring(limit.min(INITIAL_SLOTS)),
            head: 0,
            len: 0,
            limit,
        }
    }

    fn ring(n: usize) -> Box<[Control]> {
        vec![Control::Ack { msn: 0, plane: 0 }; n].into_boxed_slice()
    }

    /// Queue `c`; at the limit it is dropped and counted.
    #[inline(always)]
    pub fn push(&mut self, c: Control, ctx: &mut Ctx<'_>) {
        if !self.try_push(c) {
            ctx.stats.control_dropped += 1;
        }
    }

    /// Queue `c`, `false` at the limit.
    #[inline(always)]
    fn try_push(&mut self, c: Control) -> bool {
        if self.len >= self.slots.len() && !self.grow() {
            return false;
        }
        let cap = self.slots.len();
        let mut i = self.head + self.len;
        if i >= cap {
            i -= cap;
        }
        self.slots[i] = c;
        self.len += 1;
        true
    }

    /// Double the full ring, up to the limit, its packets in order from slot 0; `false` at
    /// the limit.
    #[cold]
    #[inline(never)]
    fn grow(&mut self) -> bool {
        let cap = self.slots.len();
        if cap >= self.limit {
            return false;
        }
        let mut ring = Self::ring((cap * 2).clamp(1, self.limit));
        for (k, slot) in ring.iter_mut().take(self.len).enumerate() {
            *slot = self.slots[(self.head + k) % cap];
        }
        self.slots = ring;
        self.head = 0;
        true
    }

    /// The next to leave.
    #[inline]
    pub fn front(&self) -> Option<&Control> {
        (self.len > 0).then(|| &self.slots[self.head])
    }

    /// The next has left.
    #[inline]
    pub fn pop_front(&mut self) {
        if self.len > 0 {
            self.head += 1;
            if self.head == self.slots.len() {
                self.head = 0;
            }
            self.len -= 1;
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn clear(&mut self) {
        self.head = 0;
        self.len = 0;
    }

    /// Heap bytes the ring may grow to (what it holds now is at most this).
    pub fn heap_bytes(&self) -> usize {
        self.limit * size_of::<Control>()
    }
}

impl Qp {
    /// The next control packet of this QP, on the reverse EV of its plane (brief §3.9).
    pub(crate) fn poll_control(
        &mut self,
        ready: u32,
        buf: &mut [u8],
        ctx: &mut Ctx<'_>,
    ) -> TxOutcome {
        let planes = self.planes(ready, ctx);
        let Some(Parts { c, stats, qpn, .. }) = self.parts() else {
            return TxOutcome::Idle;
        };
        let Some(&ctl) = c.ctrl.front() else {
            return TxOutcome::Idle;
        };
        let Some(ev) = c.paths.reverse_ev(planes, ctl.plane()) else {
            return TxOutcome::Blocked;
        };
        let cack_psn = psn_of(c.resp.rq_psn(), c.resp.cack());
        let (opcode, psn, body) = match ctl {
            Control::Sack(t) => (
                Opcode::Sack,
                cack_psn,
                c.resp.sack_body(&t, qpn.0, c.peer.qpn.0),
            ),
            Control::Nack {
                psn,
                reason,
                vendor_info,
                entropy,
                tx_ts,
                ..
            } => (
                Opcode::Nack,
                psn,
                Body::Nack(NethRepr {
                    hdr_type: 0,
                    next: 0,
                    reason,
                    vendor_info,
                    entropy,
                    spdcid: qpn.0 as u16,
                    dpdcid: c.peer.qpn.0 as u16,
                    nack_psn: psn,
                    cc_type: 0,
                    cc_flags: 0,
                    tx_timestamp: tx_ts,
                }),
            ),
            Control::Ack { msn, .. } => (
                Opcode::Ack,
                cack_psn,
                Body::Ack(AethRepr::ack(u32::from(msn))),
            ),
        };
        let route = c.paths.table.route_ref(ev);
        let sent = frames::emit_control_templated(
            &mut c.tmpl,
            ctx.cfg,
            route,
            c.peer.addr,
            opcode,
            c.peer.qpn.0,
            psn,
            body,
            buf,
        );
        let Ok(t) = sent else {
            debug_assert!(false, "poll_transmit buffer smaller than max_frame_len");
            return TxOutcome::Idle;
        };
        c.ctrl.pop_front();
        match ctl {
            Control::Sack(_) => {
                stats.sacks_sent += 1;
                c.resp.last_sack_ev = Some(ev);
            }
            Control::Ack { .. } => stats.acks_sent += 1,
            Control::Nack { .. } => {}
        }
        TxOutcome::Sent(Transmit {
            len: t.len,
            port: t.port,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ring_grows_to_its_limit_in_order_across_the_wrap() {
        let ack = |msn| Control::Ack { msn, plane: 0 };
        let mut q = ControlQueue::new(20);
        assert_eq!(q.slots.len(), INITIAL_SLOTS, "starts small");
        // Wrap the small ring first, then grow it while it wraps.
        let (mut next_in, mut next_out) = (0, 0);
        for _ in 0..5 {
            assert!(q.try_push(ack(next_in)));
            next_in += 1;
        }
        for _ in 0..4 {
            assert_eq!(q.front(), Some(&ack(next_out)));
            q.pop_front();
            next_out += 1;
        }
        while q.try_push(ack(next_in)) {
            next_in += 1;
        }
        assert_eq!(
            (q.len, q.slots.len()),
            (20, 20),
            "full at the limit, never beyond"
        );
        assert!(q.heap_bytes() >= q.slots.len() * size_of::<Control>());
        while let Some(&c) = q.front() {
            assert_eq!(c, ack(next_out), "in the order queued");
            q.pop_front();
            next_out += 1;
        }
        assert_eq!(next_out, next_in);
    }
}
