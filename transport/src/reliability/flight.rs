//! The requester's flight (brief §3.6): every packet between the oldest unacknowledged PSN and
//! the next new one, in a ring indexed by sequence number, with
//!
//! - the scoreboard: cumulative ACKs and 64-bit SACK bitmaps merged into per-packet state, so
//!   successive SACKs at different offsets describe a flight far wider than one bitmap;
//! - the RACK reference (RFC 8985: the most recently sent packet known delivered) and the
//!   primitives the loss rules of `loss.rs` apply to the oldest outstanding transmission (which
//!   packets are older than a given age, when the next one will be), given the window and the
//!   RTTs those rules choose;
//! - the retransmission queue.
//!
//! Transmissions are also kept in send order (a ring of `(seq, tx_id)`, stale items dropped
//! lazily) so both loss rules look only at the oldest live transmission: O(1) amortized per
//! packet, no allocation after creation.

use std::collections::VecDeque;

use super::PathEvidence;
use crate::time::{Duration, Instant};

/// Where a packet of the flight stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryState {
    /// Sent, no news yet.
    InFlight,
    /// Delivered (cumulatively or selectively acknowledged).
    Acked,
    /// Declared lost (NACK, inference, timeout, rewind): waiting in the retransmission queue.
    Lost,
}

/// Slots of a flight's ring before it first grows.
pub const INITIAL_ENTRIES: u64 = 64;

/// One packet of the flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlightEntry {
    /// Time of the latest transmission.
    pub sent_at: Instant,
    /// Id of the latest transmission (increasing per QP: orders transmissions).
    pub tx_id: u64,
    /// Absolute index of its work request in the send queue.
    pub wr: u64,
    /// Packet index within the work request.
    pub pkt: u32,
    /// Payload bytes.
    pub len: u16,
    /// EV of the latest transmission.
    pub ev: u16,
    /// Transmissions so far.
    pub tx_count: u8,
    pub state: EntryState,
}

const EMPTY: FlightEntry = FlightEntry {
    sent_at: Instant::ZERO,
    tx_id: 0,
    wr: 0,
    pkt: 0,
    len: 0,
    ev: 0,
    tx_count: 0,
    state: EntryState::Acked,
};

#[derive(Debug, Clone, Copy)]
struct Sent {
    seq: u64,
    tx_id: u64,
}

/// RACK state: the most recently sent packet known delivered.
#[derive(Debug, Clone, Copy, Default)]
struct Rack {
    tx_id: u64,
    rtt: Duration,
    /// The least RTT seen: a retransmission acknowledged sooner than this after it left was
    /// not what arrived (RFC 8985 §6.2 step 2).
    min_rtt: Duration,
}

/// What a SACK did to the flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SackOutcome {
    pub newly_acked_packets: u32,
    pub newly_acked_bytes: u64,
}

/// The requester's flight.
#[derive(Debug)]
pub struct Flight {
    entries: Vec<FlightEntry>,
    mask: u64,
    /// Longest the ring grows: `capacity` rounded up to a power of two.
    max_entries: u64,
    capacity: u64,
    una: u64,
    nxt: u64,
    order: VecDeque<Sent>,
    order_capacity: usize,
    retx: VecDeque<u64>,
    next_tx_id: u64,
    rack: Rack,
    inflight_bytes: u64,
    per_packet_overhead: u64,
}

impl Flight {
    /// A flight of at most `capacity` packets, each counting its payload plus
    /// `per_packet_overhead` nominal bytes in flight. Its ring starts at [`INITIAL_ENTRIES`]
    /// and doubles when the packets in flight fill it, up to `capacity` rounded up to a power
    /// of two: a QP costs the window it uses, not its MPR (issue #14).
    pub fn new(capacity: u32, per_packet_overhead: u32) -> Self {
        let max_entries = u64::from(capacity).next_power_of_two().max(INITIAL_ENTRIES);
        Self {
            entries: vec![EMPTY; INITIAL_ENTRIES as usize],
            mask: INITIAL_ENTRIES - 1,
            max_entries,
            capacity: u64::from(capacity),
            una: 0,
            nxt: 0,
            order: VecDeque::new(),
            order_capacity: 4 * INITIAL_ENTRIES as usize,
            retx: VecDeque::new(),
            next_tx_id: 1,
            rack: Rack::default(),
            inflight_bytes: 0,
            per_packet_overhead: u64::from(per_packet_overhead),
        }
    }

    /// Double the ring (the packets in flight fill it), each packet moved to its slot in the
    /// new one.
    #[cold]
    #[inline(never)]
    fn grow(&mut self) {
        let size = self.entries.len() * 2;
        let mask = size as u64 - 1;
        let mut entries = vec![EMPTY; size];
        for seq in self.una..self.nxt {
            entries[(seq & mask) as usize] = self.entries[(seq & self.mask) as usize];
        }
        self.entries = entries;
        self.mask = mask;
        self.order_capacity = 4 * size;
    }

    /// Oldest sequence number not cumulatively acknowledged.
    pub fn una(&self) -> u64 {
        self.una
    }

    /// Next new sequence number.
    pub fn nxt(&self) -> u64 {
        self.nxt
    }

    /// No packet outstanding.
    pub fn is_empty(&self) -> bool {
        self.una == self.nxt
    }

    /// Room for one more new packet (the MPR bound).
    pub fn has_room(&self) -> bool {
        self.nxt - self.una < self.capacity
    }

    /// Nominal bytes of packets in flight (sent and neither acknowledged nor declared lost).
    pub fn inflight_bytes(&self) -> u64 {
        self.inflight_bytes
    }

    /// Nominal bytes of a packet with `len` payload bytes.
    pub fn nominal(&self, len: u16) -> u64 {
        u64::from(len) + self.per_packet_overhead
    }

    /// The packet `seq`, if it is in the flight.
    pub fn entry(&self, seq: u64) -> Option<&FlightEntry> {
        (self.una..self.nxt)
            .contains(&seq)
            .then(|| &self.entries[(seq & self.mask) as usize])
    }

    fn slot(&mut self, seq: u64) -> &mut FlightEntry {
        &mut self.entries[(seq & self.mask) as usize]
    }

    fn push_order(&mut self, item: Sent) {
        if self.order.len() == self.order_capacity {
            // Drop stale items; at most `capacity` are live, so room appears.
            let (entries, mask, una) = (&self.entries, self.mask, self.una);
            self.order.retain(|s| live(entries, mask, una, *s));
        }
        self.order.push_back(item);
    }

    /// Record a new packet sent now; the caller checked [`has_room`](Self::has_room).
    pub fn send_new(&mut self, now: Instant, wr: u64, pkt: u32, len: u16, ev: u16) -> u64 {
        debug_assert!(self.has_room());
        if self.nxt - self.una == self.entries.len() as u64 {
            self.grow();
        }
        let seq = self.nxt;
        let tx_id = self.next_tx_id;
        self.next_tx_id += 1;
        *self.slot(seq) = FlightEntry {
            sent_at: now,
            tx_id,
            wr,
            pkt,
            len,
            ev,
            tx_count: 1,
            state: EntryState::InFlight,
        };
        self.nxt += 1;
        self.inflight_bytes += self.nominal(len);
        self.push_order(Sent { seq, tx_id });
        seq
    }

    /// The oldest packet waiting for retransmission.
    pub fn next_retransmit(&mut self) -> Option<u64> {
        while let Some(&seq) = self.retx.front() {
            if seq >= self.una && seq < self.nxt && self.slot(seq).state == EntryState::Lost {
                return Some(seq);
            }
            self.retx.pop_front();
        }
        None
    }

    /// Whether any packet waits for retransmission.
    pub fn has_retransmit(&mut self) -> bool {
        self.next_retransmit().is_some()
    }

    /// Record the retransmission of `seq` (the head of the queue) on `ev`, now.
    pub fn retransmit(&mut self, now: Instant, seq: u64, ev: u16) {
        debug_assert_eq!(self.next_retransmit(), Some(seq));
        self.retx.pop_front();
        let tx_id = self.next_tx_id;
        self.next_tx_id += 1;
        let e = self.slot(seq);
        e.sent_at = now;
        e.tx_id = tx_id;
        e.ev = ev;
        e.tx_count = e.tx_count.saturating_add(1);
        e.state = EntryState::InFlight;
        let len = e.len;
        self.inflight_bytes += self.nominal(len);
        self.push_order(Sent { seq, tx_id });
    }

    /// Declare `seq` lost (it leaves the flight and waits for retransmission). `false` when it
    /// is not an in-flight packet (already acknowledged or already lost).
    pub fn mark_lost(&mut self, seq: u64) -> bool {
        if !(self.una..self.nxt).contains(&seq) || self.slot(seq).state != EntryState::InFlight {
            return false;
        }
        self.slot(seq).state = EntryState::Lost;
        let len = self.slot(seq).len;
        self.inflight_bytes -= self.nominal(len);
        self.retx.push_back(seq);
        true
    }

    fn deliver(
        &mut self,
        seq: u64,
        now: Instant,
        on_acked: &mut impl FnMut(u64, &FlightEntry),
    ) -> Option<u64> {
        let e = self.entries[(seq & self.mask) as usize];
        if e.state == EntryState::Acked {
            return None;
        }
        if e.state == EntryState::InFlight {
            self.inflight_bytes -= self.nominal(e.len);
        }
        self.slot(seq).state = EntryState::Acked;
        // RACK (RFC 8985 §6.2) from unambiguous samples only: a retransmission acknowledged
        // within the least RTT after it left cannot be what arrived (step 2); one acknowledged
        // later can (a tail probe's answer then exposes every older hole at once, issue #14).
        let unambiguous = e.tx_count == 1
            || (self.rack.min_rtt > Duration::ZERO
                && now.saturating_since(e.sent_at) >= self.rack.min_rtt);
        if unambiguous && e.tx_id > self.rack.tx_id {
            self.rack.tx_id = e.tx_id;
        }
        on_acked(seq, &e);
        Some(self.nominal(e.len))
    }

    /// Merge a SACK: everything below `cack` and the set bits of `bitmap` (bit i = `base + i`)
    /// are delivered. `on_acked` sees each newly delivered packet once. Sequence numbers beyond
    /// what was sent are ignored (the caller rejects such SACKs before).
    pub fn on_sack(
        &mut self,
        now: Instant,
        cack: u64,
        base: u64,
        bitmap: u64,
        on_acked: &mut impl FnMut(u64, &FlightEntry),
    ) -> SackOutcome {
        let mut out = SackOutcome::default();
        let cack = cack.min(self.nxt);
        while self.una < cack {
            if let Some(bytes) = self.deliver(self.una, now, on_acked) {
                out.newly_acked_packets += 1;
                out.newly_acked_bytes += bytes;
            }
            self.una += 1;
        }
        let mut bits = bitmap;
        while bits != 0 {
            let i = u64::from(bits.trailing_zeros());
            bits &= bits - 1;
            let seq = base + i;
            if seq >= self.una
                && seq < self.nxt
                && let Some(bytes) = self.deliver(seq, now, on_acked)
            {
                out.newly_acked_packets += 1;
                out.newly_acked_bytes += bytes;
            }
        }
        out
    }

    /// Set the RTT RACK uses (the latest unambiguous sample) and the least RTT seen.
    pub fn set_rack_rtt(&mut self, rtt: Duration, min_rtt: Duration) {
        self.rack.rtt = rtt;
        self.rack.min_rtt = min_rtt;
    }

    /// The oldest live transmission: pops stale items on the way.
    fn oldest(&mut self) -> Option<(u64, FlightEntry)> {
        while let Some(&s) = self.order.front() {
            if live(&self.entries, self.mask, self.una, s) {
                return Some((s.seq, self.entries[(s.seq & self.mask) as usize]));
            }
            self.order.pop_front();
        }
        None
    }

    /// How long the RACK rule waits for `e` (RFC 8985 §6.2, brief §3.6): the RACK RTT (or its
    /// path's, if longer) plus `reorder_window`, and a quarter of that RTT more when nothing
    /// sent on its path after it was delivered yet. Packets on one path arrive in the order
    /// they were sent, so a later one delivered on `e`'s own EV says `e` was dropped; without
    /// that, `e` may just sit in a queue of its path (issue #14: on a loss-free 128-host
    /// permutation the plain rule resent 194 packets, 0.07 %, this one 5; at 1 % random loss
    /// the extra wait costs less than the spurious resends did).
    fn loss_wait(
        &self,
        e: &FlightEntry,
        reorder_window: Duration,
        paths: &impl PathEvidence,
    ) -> Duration {
        let rtt = self.rack.rtt.max(paths.srtt(e.ev));
        if paths.overtaken(e.ev, e.tx_id) {
            rtt + reorder_window
        } else {
            rtt + Duration(rtt.as_nanos() / 4) + reorder_window
        }
    }

    /// RACK loss inference: every in-flight packet sent before the latest delivered one and out
    /// for longer than its [`loss_wait`](Self::loss_wait) is declared lost and handed to
    /// `on_lost`.
    pub fn detect_losses(
        &mut self,
        now: Instant,
        reorder_window: Duration,
        paths: &impl PathEvidence,
        on_lost: &mut impl FnMut(u64, &FlightEntry),
    ) {
        while let Some((seq, e)) = self.oldest() {
            if e.tx_id >= self.rack.tx_id
                || e.sent_at + self.loss_wait(&e, reorder_window, paths) > now
            {
                return;
            }
            self.order.pop_front();
            self.mark_lost(seq);
            on_lost(seq, &e);
        }
    }

    /// When [`detect_losses`](Self::detect_losses) would next declare a loss with no new
    /// information.
    pub fn loss_deadline(
        &mut self,
        reorder_window: Duration,
        paths: &impl PathEvidence,
    ) -> Option<Instant> {
        let (_, e) = self.oldest()?;
        (e.tx_id < self.rack.tx_id).then(|| e.sent_at + self.loss_wait(&e, reorder_window, paths))
    }

    /// The per-packet path-failure timeout: every in-flight transmission older than its
    /// timeout is declared lost and handed to `on_timeout`. The timeout is `pto` for a first
    /// transmission and doubles with each retransmission of the same packet (up to 16×), so a
    /// packet nobody answers is not resent at the fast rate for the whole retry budget.
    /// `path_pto(ev)` is the least a packet on `ev` waits (a few of its path's RTTs).
    pub fn on_pto(
        &mut self,
        now: Instant,
        pto: Duration,
        path_pto: &impl Fn(u16) -> Duration,
        on_timeout: &mut impl FnMut(u64, &FlightEntry),
    ) {
        while let Some((seq, e)) = self.oldest() {
            if e.sent_at + backed_off(pto.max(path_pto(e.ev)), e.tx_count) > now {
                return;
            }
            self.order.pop_front();
            self.mark_lost(seq);
            on_timeout(seq, &e);
        }
    }

    /// When the oldest transmission times out.
    pub fn pto_deadline(
        &mut self,
        pto: Duration,
        path_pto: &impl Fn(u16) -> Duration,
    ) -> Option<Instant> {
        self.oldest()
            .map(|(_, e)| e.sent_at + backed_off(pto.max(path_pto(e.ev)), e.tx_count))
    }

    /// The oldest packet still in flight (neither acknowledged nor declared lost).
    pub fn oldest_in_flight(&self) -> Option<u64> {
        (self.una..self.nxt)
            .find(|&s| self.entries[(s & self.mask) as usize].state == EntryState::InFlight)
    }

    /// Go-back-N: declare every in-flight packet from `from` on lost, in order.
    pub fn rewind(&mut self, from: u64) {
        for seq in from.max(self.una)..self.nxt {
            self.mark_lost(seq);
        }
    }

    /// Declare lost every in-flight packet whose EV matches (a local port went down under it).
    pub fn lose_where(&mut self, mut on_ev: impl FnMut(u16) -> bool) -> u32 {
        let mut n = 0;
        for seq in self.una..self.nxt {
            let e = self.entries[(seq & self.mask) as usize];
            if e.state == EntryState::InFlight && on_ev(e.ev) && self.mark_lost(seq) {
                n += 1;
            }
        }
        n
    }

    /// Heap bytes the flight may hold: its rings grown to their longest (the packets a full
    /// MPR keeps in flight and their orders). Set by the capacity, whatever the traffic.
    pub fn heap_bytes(&self) -> usize {
        let n = self.max_entries as usize;
        n * size_of::<FlightEntry>() + 4 * n * size_of::<Sent>() + n * 8
    }

    /// Heap bytes held now (at most [`heap_bytes`](Self::heap_bytes)).
    pub fn heap_held(&self) -> usize {
        self.entries.capacity() * size_of::<FlightEntry>()
            + self.order.capacity() * size_of::<Sent>()
            + self.retx.capacity() * 8
    }
}

fn backed_off(pto: Duration, tx_count: u8) -> Duration {
    pto.saturating_mul(1 << u32::from(tx_count.saturating_sub(1)).min(4))
}

fn live(entries: &[FlightEntry], mask: u64, una: u64, s: Sent) -> bool {
    let e = &entries[(s.seq & mask) as usize];
    s.seq >= una && e.tx_id == s.tx_id && e.state == EntryState::InFlight
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(us: u64) -> Instant {
        Instant(us * 1_000)
    }
    const US: Duration = Duration::from_micros(1);

    fn sent(n: u64) -> Flight {
        let mut f = Flight::new(128, 100);
        for i in 0..n {
            f.send_new(t(i), 0, i as u32, 1000, i as u16);
        }
        f
    }

    fn collect(f: &mut Flight, cack: u64, base: u64, bm: u64) -> (SackOutcome, Vec<u64>) {
        let mut seen = Vec::new();
        let out = f.on_sack(t(1000), cack, base, bm, &mut |s, _| seen.push(s));
        (out, seen)
    }

    #[test]
    fn cumulative_and_selective_acks_merge_into_one_scoreboard() {
        let mut f = sent(10);
        assert_eq!(f.inflight_bytes(), 10 * 1100);
        let (o, seen) = collect(&mut f, 2, 4, 0b101);
        assert_eq!(seen, [0, 1, 4, 6]);
        assert_eq!(o.newly_acked_packets, 4);
        assert_eq!(f.una(), 2);
        // A later SACK repeating 4 and 6 counts them once.
        let (o, seen) = collect(&mut f, 3, 4, 0b111);
        assert_eq!(seen, [2, 5]);
        assert_eq!(o.newly_acked_bytes, 2 * 1100);
        assert_eq!(f.inflight_bytes(), 4 * 1100);
        // Bits beyond what was sent are ignored.
        let (_, seen) = collect(&mut f, 3, 60, u64::MAX);
        assert!(seen.is_empty());
    }

    #[test]
    fn rack_declares_a_hole_lost_only_after_the_reordering_window() {
        let mut f = sent(10);
        f.set_rack_rtt(Duration::from_micros(5), Duration::ZERO);
        // 5 delivered (sent at t=5), 0..5 not yet.
        collect(&mut f, 0, 5, 1);
        let mut lost = Vec::new();
        f.detect_losses(
            t(8),
            US.saturating_mul(2),
            &|_| Duration::ZERO,
            &mut |s, _| lost.push(s),
        );
        assert_eq!(lost, [0, 1], "sent at 0 and 1: out for 8 and 7 µs ≥ 5 + 2");
        assert_eq!(
            f.loss_deadline(US.saturating_mul(2), &|_| Duration::ZERO),
            Some(t(9)),
            "seq 2 sent at 2 qualifies at 9"
        );
        f.detect_losses(
            t(20),
            US.saturating_mul(2),
            &|_| Duration::ZERO,
            &mut |s, _| lost.push(s),
        );
        assert_eq!(
            lost,
            [0, 1, 2, 3, 4],
            "never the packets sent after the delivered one"
        );
        assert_eq!(f.next_retransmit(), Some(0));
        assert_eq!(f.inflight_bytes(), 4 * 1100);
    }

    /// Paths as loss inference sees them: one RTT for all, and per EV the latest delivered
    /// transmission (what `EvTable` keeps).
    struct Order {
        rtt: Duration,
        delivered: Vec<u64>,
    }

    impl PathEvidence for Order {
        fn srtt(&self, _ev: u16) -> Duration {
            self.rtt
        }

        fn overtaken(&self, ev: u16, tx_id: u64) -> bool {
            self.delivered[usize::from(ev)] > tx_id
        }
    }

    /// Packets 0..8 sent 1 µs apart, alternating between EVs 0 and 1 (tx ids 1..=8), an 8 µs
    /// RTT, the SACK `mask` collected from `base`, and each EV's latest delivered tx id.
    fn alternating_flight(base: u64, mask: u64, delivered: Vec<u64>) -> (Flight, Order) {
        let mut f = Flight::new(128, 100);
        for i in 0..8u64 {
            f.send_new(t(i), 0, i as u32, 1000, (i % 2) as u16);
        }
        f.set_rack_rtt(Duration::from_micros(8), Duration::ZERO);
        collect(&mut f, 0, base, mask);
        let paths = Order {
            rtt: Duration::from_micros(8),
            delivered,
        };
        (f, paths)
    }

    #[test]
    fn a_hole_its_own_path_has_not_overtaken_waits_a_quarter_rtt_more() {
        // Packets 0..8 alternate between EVs 0 and 1 (tx ids 1..=8); 4 (EV 0, sent at 4)
        // and 5 (EV 1, sent at 5) are delivered.
        let (mut f, paths) = alternating_flight(4, 0b11, vec![5, 6]);
        let reo = US.saturating_mul(2);
        // Seq 0 (EV 0) was overtaken on its own path by seq 4: lost at 0 + 8 + 2. Seq 1
        // (EV 1) by seq 5 likewise, at 11.
        let mut lost = Vec::new();
        f.detect_losses(t(11), reo, &paths, &mut |s, _| lost.push(s));
        assert_eq!(lost, [0, 1]);
        // Seq 2 (EV 0, tx 3) was overtaken by tx 5 too; seq 3 (EV 1, tx 4) by tx 6.
        f.detect_losses(t(13), reo, &paths, &mut |s, _| lost.push(s));
        assert_eq!(lost, [0, 1, 2, 3]);

        // The same flight with nothing delivered after seq 0 on EV 0: it may be queued on
        // its path, so it waits 8 + 2 + 8 / 4 = 12 µs.
        let (mut f, paths) = alternating_flight(5, 0b1, vec![0, 6]);
        let mut lost = Vec::new();
        f.detect_losses(t(11), reo, &paths, &mut |s, _| lost.push(s));
        assert!(lost.is_empty(), "{lost:?}");
        assert_eq!(f.loss_deadline(reo, &paths), Some(t(12)));
        f.detect_losses(t(12), reo, &paths, &mut |s, _| lost.push(s));
        assert_eq!(
            lost,
            [0, 1],
            "seq 1 (EV 1, overtaken) was due at 11, behind seq 0"
        );
        // Seq 2 (EV 0, not overtaken) is due at 2 + 12; seq 3 (EV 1) at 13, behind it.
        f.detect_losses(t(13), reo, &paths, &mut |s, _| lost.push(s));
        assert_eq!(lost, [0, 1]);
        f.detect_losses(t(14), reo, &paths, &mut |s, _| lost.push(s));
        assert_eq!(lost, [0, 1, 2, 3]);
        assert_eq!(
            f.loss_deadline(reo, &paths),
            Some(t(16)),
            "seq 4: EV 0, sent at 4"
        );
    }

    #[test]
    fn a_packet_on_a_slow_path_is_late_before_it_is_lost() {
        // `sent` puts packet i on EV i. EV 0's path has a 20 µs RTT, the others 5 µs.
        let path = |ev: u16| Duration::from_micros(if ev == 0 { 20 } else { 5 });
        let mut f = sent(10);
        f.set_rack_rtt(Duration::from_micros(5), Duration::ZERO);
        collect(&mut f, 0, 5, 1);
        let mut lost = Vec::new();
        f.detect_losses(t(8), US.saturating_mul(2), &path, &mut |s, _| lost.push(s));
        assert!(lost.is_empty(), "seq 0 waits for its own path: {lost:?}");
        assert_eq!(f.loss_deadline(US.saturating_mul(2), &path), Some(t(22)));
        f.detect_losses(t(22), US.saturating_mul(2), &path, &mut |s, _| lost.push(s));
        assert_eq!(lost, [0, 1, 2, 3, 4]);
        // The per-packet timeout likewise: never below a path's own floor.
        let mut f = sent(2);
        let floor = |ev: u16| Duration::from_micros(if ev == 0 { 30 } else { 0 });
        assert_eq!(
            f.pto_deadline(US.saturating_mul(5), &floor),
            Some(t(30)),
            "the oldest, seq 0, waits for its path"
        );
        let mut to = Vec::new();
        f.on_pto(t(10), US.saturating_mul(5), &floor, &mut |s, _| to.push(s));
        assert!(to.is_empty(), "seq 0 is the oldest and waits 30 µs");
        f.on_pto(t(30), US.saturating_mul(5), &floor, &mut |s, _| to.push(s));
        assert_eq!(to, [0, 1]);
    }

    #[test]
    fn retransmissions_are_timed_from_their_own_send_time() {
        let mut f = sent(3);
        assert!(f.mark_lost(0));
        assert!(!f.mark_lost(0), "already lost");
        f.retransmit(t(10), 0, 9);
        assert_eq!(f.entry(0).unwrap().tx_count, 2);
        assert_eq!(
            f.pto_deadline(US.saturating_mul(5), &|_| Duration::ZERO),
            Some(t(6)),
            "seq 1 (sent at 1) is now oldest"
        );
        let mut to = Vec::new();
        f.on_pto(
            t(7),
            US.saturating_mul(5),
            &|_| Duration::ZERO,
            &mut |s, e| to.push((s, e.ev)),
        );
        assert_eq!(to, [(1, 1), (2, 2)]);
        assert_eq!(
            f.pto_deadline(US.saturating_mul(5), &|_| Duration::ZERO),
            Some(t(20)),
            "its timeout doubled"
        );
        // The retransmission of 0 is delivered: nothing left to time out.
        collect(&mut f, 1, 0, 0);
        assert_eq!(
            f.pto_deadline(US.saturating_mul(5), &|_| Duration::ZERO),
            None
        );
    }

    #[test]
    fn a_late_original_cancels_the_pending_retransmission() {
        let mut f = sent(2);
        f.mark_lost(0);
        let (o, seen) = collect(&mut f, 0, 0, 1);
        assert_eq!(seen, [0]);
        assert_eq!(o.newly_acked_packets, 1);
        assert_eq!(f.next_retransmit(), None);
    }

    #[test]
    fn rewind_and_room() {
        let mut f = Flight::new(4, 0);
        for i in 0..4 {
            assert!(f.has_room());
            f.send_new(t(i), 0, 0, 1, 0);
        }
        assert!(!f.has_room(), "MPR bound");
        collect(&mut f, 1, 0, 0);
        assert!(f.has_room());
        f.rewind(2);
        assert_eq!(f.next_retransmit(), Some(2));
        f.retransmit(t(9), 2, 0);
        assert_eq!(f.next_retransmit(), Some(3));
        assert_eq!(f.lose_where(|ev| ev == 0), 2, "1 and 2 were in flight");
    }

    #[test]
    fn send_order_ring_stays_bounded_under_churn() {
        let mut f = Flight::new(64, 0);
        for i in 0..64 {
            f.send_new(t(i), 0, 0, 1, 0);
        }
        // Retransmit seq 5 thousands of times: stale items must be compacted away.
        for k in 0..10_000u64 {
            f.mark_lost(5);
            f.retransmit(t(100 + k), 5, 0);
        }
        assert!(f.order.len() <= f.order_capacity);
        let before = f.heap_held();
        for k in 0..10_000u64 {
            f.mark_lost(6);
            f.retransmit(t(20_000 + k), 6, 0);
        }
        assert_eq!(f.heap_held(), before);
        assert!(f.heap_held() <= f.heap_bytes());
    }

    #[test]
    fn the_ring_grows_with_the_window_and_keeps_every_packet() {
        let mut f = Flight::new(1024, 0);
        let (bound, held) = (f.heap_bytes(), f.heap_held());
        assert!(held * 8 < bound, "starts small: {held} of {bound}");
        // Start off zero so the packets in flight wrap the ring as it grows.
        for i in 0..40u64 {
            f.send_new(t(i), i, i as u32, 1, 0);
        }
        collect(&mut f, 30, 0, 0);
        for i in 40..1054u64 {
            assert!(f.has_room());
            f.send_new(t(i), i, i as u32, 1, (i % 7) as u16);
        }
        assert!(!f.has_room(), "the MPR bound holds");
        for seq in 30..1054u64 {
            let e = f.entry(seq).expect("in flight");
            assert_eq!((e.wr, e.pkt, e.sent_at), (seq, seq as u32, t(seq)));
        }
        assert_eq!(f.heap_bytes(), bound, "the bound is the capacity's");
        assert!(f.heap_held() <= bound);
        // Every packet comes out once: a SACK past a hole, then the rest.
        let (_, seen) = collect(&mut f, 30, 1000, 0b11);
        assert_eq!(seen, [1000, 1001]);
        let (o, _) = collect(&mut f, 1054, 0, 0);
        assert_eq!(o.newly_acked_packets, 1024 - 2);
        assert!(f.is_empty());
    }
}
