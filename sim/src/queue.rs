//! The event queue: a binary heap keyed by (time, sequence number). Events at the same time
//! run in the order they were scheduled, so a run is a pure function of its inputs.

use core::cmp::Ordering;
use std::collections::BinaryHeap;

use crate::pool::PacketId;
use crate::time::SimTime;

/// Index of a directed port (a node's egress port) in the fabric.
pub type PortId = u32;

/// Something that happens at a point in simulated time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// Port `port` finished serialising its current frame.
    TxDone { port: PortId },
    /// A frame reaches the node at the far end of `from` (sent in link epoch `epoch`).
    Arrive {
        from: PortId,
        pkt: PacketId,
        epoch: u32,
    },
    /// A host's engine asked to be woken (`poll_timeout`).
    EngineTimer { host: u32 },
    /// A host's application asked to be woken.
    AppTimer { host: u32 },
    /// Fault number `index` of the schedule takes effect.
    Fault { index: u32 },
    /// Periodic statistics for the observer.
    Sample,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    at: SimTime,
    seq: u64,
    event: Event,
}

impl Ord for Entry {
    fn cmp(&self, other: &Self) -> Ordering {
        // Min-heap on (at, seq).
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// The pending events.
#[derive(Debug, Default)]
pub struct EventQueue {
    heap: BinaryHeap<Entry>,
    seq: u64,
}

impl EventQueue {
    /// Schedule `event` at `at`.
    pub fn push(&mut self, at: SimTime, event: Event) {
        self.seq += 1;
        self.heap.push(Entry {
            at,
            seq: self.seq,
            event,
        });
    }

    /// The earliest event, if any.
    pub fn pop(&mut self) -> Option<(SimTime, Event)> {
        self.heap.pop().map(|e| (e.at, e.event))
    }

    /// Time of the earliest event.
    pub fn peek_time(&self) -> Option<SimTime> {
        self.heap.peek().map(|e| e.at)
    }

    /// Events pending.
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// No event pending.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn earliest_first_and_ties_in_schedule_order() {
        let mut q = EventQueue::default();
        q.push(SimTime(5), Event::Sample);
        q.push(SimTime(1), Event::TxDone { port: 1 });
        q.push(SimTime(1), Event::TxDone { port: 2 });
        q.push(SimTime(3), Event::EngineTimer { host: 0 });
        let order: Vec<_> = core::iter::from_fn(|| q.pop()).collect();
        assert_eq!(
            order,
            vec![
                (SimTime(1), Event::TxDone { port: 1 }),
                (SimTime(1), Event::TxDone { port: 2 }),
                (SimTime(3), Event::EngineTimer { host: 0 }),
                (SimTime(5), Event::Sample),
            ]
        );
    }
}
