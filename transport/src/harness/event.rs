//! The harness's event queue (integer nanoseconds, ties broken by insertion order) and its
//! trace: what happened, when, for assertions and for checking that a seed replays exactly.

use core::cmp::Ordering;
use std::collections::BinaryHeap;

use super::{NodeId, PathId};
use crate::time::Instant;

/// Something scheduled.
#[derive(Debug)]
pub(super) enum Event {
    /// Drain a node's transmissions (after a verbs call, or when a port has room again).
    Poll { node: NodeId },
    /// A node's timer, valid if `generation` is still the node's current one.
    Timeout { node: NodeId, generation: u64 },
    /// A NIC port finished serialising its head frame.
    PortTxDone { node: NodeId, port: u8 },
    /// A path finished serialising its head frame.
    PathTxDone { path: PathId },
    /// A frame reaches the far end of a path.
    Deliver {
        path: PathId,
        epoch: u64,
        frame: Vec<u8>,
    },
    /// A frame injected by the test, straight into a node's port.
    Inject {
        node: NodeId,
        port: u8,
        frame: Vec<u8>,
    },
    /// A path goes up or down.
    PathState { path: PathId, up: bool },
    /// A node's port goes up or down.
    PortState { node: NodeId, port: u8, up: bool },
}

struct Entry {
    at: Instant,
    seq: u64,
    event: Event,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    // Earliest first (BinaryHeap is a max-heap), then first scheduled first.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

/// A deterministic priority queue of events.
#[derive(Default)]
pub(super) struct EventQueue {
    heap: BinaryHeap<Entry>,
    seq: u64,
}

impl EventQueue {
    pub fn push(&mut self, at: Instant, event: Event) {
        self.seq += 1;
        self.heap.push(Entry {
            at,
            seq: self.seq,
            event,
        });
    }

    pub fn pop(&mut self) -> Option<(Instant, Event)> {
        self.heap.pop().map(|e| (e.at, e.event))
    }

    pub fn peek_time(&self) -> Option<Instant> {
        self.heap.peek().map(|e| e.at)
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }
}

impl core::fmt::Debug for EventQueue {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "EventQueue({} pending)", self.heap.len())
    }
}

/// Why a frame went nowhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// The queue was full and the frame could not be trimmed.
    TailDrop,
    /// Random loss on the link.
    Lost,
    /// The path or port was down.
    Down,
    /// No path leads where the frame is addressed.
    Unroutable,
}

/// One thing that happened in the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TraceEvent {
    /// A node sent a frame of `len` bytes on `port`.
    Transmit { node: NodeId, port: u8, len: usize },
    /// A frame entered a path's queue (after any trim or mark).
    Enqueue {
        path: PathId,
        len: usize,
        marked: bool,
        trimmed: bool,
    },
    /// A frame was dropped.
    Drop {
        path: Option<PathId>,
        reason: DropReason,
    },
    /// A frame was delayed for reordering.
    Reorder { path: PathId },
    /// A frame was duplicated.
    Duplicate { path: PathId },
    /// A node received a frame.
    Deliver { node: NodeId, port: u8, len: usize },
    /// A node's timer fired.
    Timeout { node: NodeId },
    /// A path changed state.
    Path { path: PathId, up: bool },
    /// A port changed state.
    Port { node: NodeId, port: u8, up: bool },
}
