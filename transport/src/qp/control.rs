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
}

impl ControlQueue {
    pub fn new(limit: usize) -> Self {
        Self {
            slots: vec![Control::Ack { msn: 0, plane: 0 }; limit].into_boxed_slice(),
            head: 0,
            len: 0,
        }
    }

    #[inline(always)]
    pub fn push(&mut self, c: Control, ctx: &mut Ctx<'_>) {
        let cap = self.slots.len();
        if self.len >= cap {
            ctx.stats.control_dropped += 1;
            return;
        }
        let mut i = self.head + self.len;
        if i >= cap {
            i -= cap;
        }
        self.slots[i] = c;
        self.len += 1;
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

    pub fn heap_bytes(&self) -> usize {
        self.slots.len() * size_of::<Control>()
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
