//! Asynchronous events (libibverbs async events, plus what observers of path health want),
//! drained with `Endpoint::poll_event`. The queue is bounded (`Limits::max_events`): once it is
//! full, new events are counted (`EndpointStats::events_dropped`) and dropped, never
//! accumulated; the queue keeps the oldest.

use core::net::Ipv6Addr;
use std::collections::VecDeque;

use crate::ev::{EvId, EvState};
use crate::verbs::{CqHandle, Qpn, WcStatus};

/// Something the application or an observer may want to know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// A local port went up or down (`handle_port_status`).
    PortStatus { port: u8, up: bool },
    /// A peer told us which of its ports are up (PORT_STATUS_UPDATE, brief §3.10): bit `i`
    /// of `up_mask` is its port `i`.
    RemotePortStatus { remote: Ipv6Addr, up_mask: u32 },
    /// A QP failed and moved to ERROR; its work requests completed with `status` (the first)
    /// and flushed (the rest).
    QpFatal { qpn: Qpn, status: WcStatus },
    /// An EV of a QP changed state (to or from ASSUMED_BAD or DENIED).
    EvState {
        qpn: Qpn,
        ev: EvId,
        plane: u8,
        from: EvState,
        to: EvState,
    },
    /// ECMP mode: a burst of failures was read as a remap; the QP drew a fresh EV set.
    EcmpRemap { qpn: Qpn },
    /// A completion did not fit its CQ and was lost (counted in `EndpointStats::cq_overruns`);
    /// the CQ keeps the older ones and the QP carries on.
    CqOverrun { cq: CqHandle },
}

/// The bounded event queue.
#[derive(Debug)]
pub(crate) struct EventQueue {
    events: VecDeque<Event>,
    limit: usize,
    pub dropped: u64,
}

impl EventQueue {
    pub fn new(limit: u32) -> Self {
        let limit = limit.max(1) as usize;
        Self {
            // Grown as events wait, up to the limit: an endpoint polled often holds a few
            // (a thousand simulated hosts reserved 98 KB each; issue #14).
            events: VecDeque::with_capacity(limit.min(16)),
            limit,
            dropped: 0,
        }
    }

    pub fn push(&mut self, e: Event) {
        if self.events.len() >= self.limit {
            self.dropped += 1;
        } else {
            self.events.push_back(e);
        }
    }

    pub fn pop(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Heap bytes the queue may grow to (what it holds is at most this).
    pub fn heap_bytes(&self) -> usize {
        self.limit.max(self.events.capacity()) * size_of::<Event>()
    }
}
