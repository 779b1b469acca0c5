//! The event queue, keyed by (time, sequence number): events at the same time run in the
//! order they were scheduled, so a run is a pure function of its inputs.
//!
//! A calendar queue: time is cut into buckets of [`BUCKET_PS`] picoseconds; the next
//! [`BUCKETS`] buckets are vectors, sorted only when they become current; events further
//! ahead wait in a binary heap and move into their bucket as the calendar reaches them. A big
//! fabric keeps hundreds of thousands of frames in flight, and a single heap of them spends
//! its time in cache misses; buckets of a few hundred events do not. A bucket the calendar
//! has passed gives its vector back to a spare list that the next bucket to fill takes from,
//! so the queue holds what is pending, not every bucket's high-water mark (the calendar
//! passes 16 000 buckets in a 65 µs run: 224 MB of empty vectors at 1024 hosts, issue #14).

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
    /// The link of fault `index` (a flap) comes back up.
    FlapUp { index: u32 },
    /// Periodic statistics for the observer.
    Sample,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    at: SimTime,
    seq: u64,
    event: Event,
}

impl Entry {
    fn key(&self) -> (SimTime, u64) {
        (self.at, self.seq)
    }
}

/// Min-heap order for the far events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Far(Entry);

impl Ord for Far {
    fn cmp(&self, other: &Self) -> Ordering {
        other.0.key().cmp(&self.0.key())
    }
}

impl PartialOrd for Far {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Bucket width: 4.096 ns (a 64-byte frame at 100 Gb/s takes 5.12 ns).
pub const BUCKET_SHIFT: u32 = 12;
/// Width of a bucket in picoseconds.
pub const BUCKET_PS: u64 = 1 << BUCKET_SHIFT;
/// Buckets ahead of the current one: a horizon of about 268 µs.
pub const BUCKETS: usize = 1 << 16;

/// The pending events.
#[derive(Debug)]
pub struct EventQueue {
    buckets: Vec<Vec<Entry>>,
    /// Absolute index of the current bucket.
    base: u64,
    /// The current bucket is sorted, latest first (pop from the end).
    sorted: bool,
    /// Events in the buckets.
    near: usize,
    far: BinaryHeap<Far>,
    seq: u64,
    /// Empty vectors with room, from buckets the calendar passed.
    spare: Vec<Vec<Entry>>,
}

impl Default for EventQueue {
    fn default() -> Self {
        Self {
            buckets: (0..BUCKETS).map(|_| Vec::new()).collect(),
            base: 0,
            sorted: false,
            near: 0,
            far: BinaryHeap::new(),
            seq: 0,
            spare: Vec::new(),
        }
    }
}

fn bucket_of(t: SimTime) -> u64 {
    t.0 >> BUCKET_SHIFT
}

impl EventQueue {
    /// Schedule `event` at `at` (never before the last event popped).
    pub fn push(&mut self, at: SimTime, event: Event) {
        self.seq += 1;
        let e = Entry {
            at,
            seq: self.seq,
            event,
        };
        self.place(e);
    }

    fn place(&mut self, e: Entry) {
        let idx = bucket_of(e.at).max(self.base);
        if idx >= self.base + BUCKETS as u64 {
            self.far.push(Far(e));
            return;
        }
        let b = &mut self.buckets[(idx % BUCKETS as u64) as usize];
        if b.capacity() == 0
            && let Some(v) = self.spare.pop()
        {
            *b = v;
        }
        if idx == self.base && self.sorted {
            // Keep the current bucket sorted latest-first.
            let pos = b.partition_point(|x| x.key() > e.key());
            b.insert(pos, e);
        } else {
            b.push(e);
        }
        self.near += 1;
    }

    /// Make the current bucket the first non-empty one and sort it; `false` if empty.
    fn settle(&mut self) -> bool {
        loop {
            let cur = (self.base % BUCKETS as u64) as usize;
            if !self.buckets[cur].is_empty() {
                if !self.sorted {
                    self.buckets[cur].sort_unstable_by_key(|e| core::cmp::Reverse(e.key()));
                    self.sorted = true;
                }
                return true;
            }
            let passed = core::mem::take(&mut self.buckets[cur]);
            if passed.capacity() > 0 {
                self.spare.push(passed);
            }
            if self.near == 0 {
                // Jump straight to the next far event.
                let Some(f) = self.far.peek() else {
                    return false;
                };
                self.base = bucket_of(f.0.at);
            } else {
                self.base += 1;
            }
            self.sorted = false;
            while let Some(f) = self.far.peek() {
                if bucket_of(f.0.at) >= self.base + BUCKETS as u64 {
                    break;
                }
                let Far(e) = self.far.pop().expect("peeked");
                self.place(e);
            }
        }
    }

    /// The earliest event, if any.
    pub fn pop(&mut self) -> Option<(SimTime, Event)> {
        if !self.settle() {
            return None;
        }
        let cur = (self.base % BUCKETS as u64) as usize;
        let e = self.buckets[cur]
            .pop()
            .expect("settled on a non-empty bucket");
        self.near -= 1;
        Some((e.at, e.event))
    }

    /// Time of the earliest event.
    pub fn peek_time(&mut self) -> Option<SimTime> {
        if !self.settle() {
            return None;
        }
        let cur = (self.base % BUCKETS as u64) as usize;
        self.buckets[cur].last().map(|e| e.at)
    }

    /// Heap bytes held by the pending events' buckets and the spare vectors.
    pub fn heap_bytes(&self) -> usize {
        let vecs = self.buckets.iter().chain(&self.spare);
        vecs.map(|b| b.capacity() * size_of::<Entry>())
            .sum::<usize>()
            + self.buckets.capacity() * size_of::<Vec<Entry>>()
            + self.far.capacity() * size_of::<Far>()
    }

    /// Events pending.
    pub fn len(&self) -> usize {
        self.near + self.far.len()
    }

    /// No event pending.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SimRng;

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

    #[test]
    fn matches_a_sorted_reference_with_far_events_and_pushes_while_popping() {
        let mut rng = SimRng::new(3);
        let mut q = EventQueue::default();
        let mut reference = Vec::new();
        let mut seq = 0u64;
        let mut now = 0u64;
        let mut popped = Vec::new();
        for round in 0..20_000u32 {
            // Mostly near events, some a millisecond or a second ahead.
            let ahead = match rng.below(10) {
                0 => rng.below(1_000_000_000),
                1 => rng.below(1_000_000_000_000),
                _ => rng.below(50_000),
            };
            let at = SimTime(now + ahead);
            seq += 1;
            q.push(at, Event::Fault { index: round });
            reference.push((at, seq, round));
            if rng.below(3) == 0
                && let Some((t, Event::Fault { index })) = q.pop()
            {
                assert!(t.0 >= now, "time never goes back");
                now = t.0;
                popped.push((t, index));
            }
        }
        while let Some((t, Event::Fault { index })) = q.pop() {
            popped.push((t, index));
        }
        assert!(q.is_empty());
        // Every event came out once, and in (time, seq) order among those pending together:
        // check against a replay with a plain sorted list.
        assert_eq!(popped.len(), reference.len());
        let mut sorted = popped.clone();
        sorted.sort_by_key(|&(t, i)| (t, reference[i as usize].1));
        let mut seen = vec![false; reference.len()];
        for &(_, i) in &popped {
            assert!(!seen[i as usize]);
            seen[i as usize] = true;
        }
        for w in popped.windows(2) {
            assert!(w[0].0 <= w[1].0, "non-decreasing times");
            if w[0].0 == w[1].0 {
                assert!(w[0].1 < w[1].1, "ties in schedule order");
            }
        }
    }

    #[test]
    fn passed_buckets_give_their_room_back() {
        // A steady stream through a hundred thousand buckets, 64 events pending at a time
        // spread over four buckets: the queue holds about what is pending, not what it passed.
        let mut q = EventQueue::default();
        let empty = q.heap_bytes();
        let mut next = 0u64;
        for _ in 0..64 {
            q.push(SimTime(next * BUCKET_PS / 16), Event::Sample);
            next += 1;
        }
        for _ in 0..1_600_000 {
            let (t, _) = q.pop().expect("pending");
            assert!(t.0 <= next * BUCKET_PS / 16);
            q.push(SimTime(next * BUCKET_PS / 16), Event::Sample);
            next += 1;
        }
        let held = q.heap_bytes() - empty;
        assert!(held < 64 * 1024, "{held} bytes held for 64 pending events");
        assert_eq!(q.len(), 64);
    }
}
