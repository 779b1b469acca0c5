//! The responder's packet tracker (brief §4.1): a ring bitmap of at least MPR bits over the PSN
//! window `[cack, cack + mpr)`, advanced by counting trailing ones of 64-bit words, plus the
//! message facts the semantic layer needs about the packet just below the cumulative ACK.

/// Where an arriving sequence number falls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    /// New: inside the window and not seen before.
    New,
    /// Already received (below the cumulative ACK, or its bit is set).
    Duplicate,
    /// Beyond the window (`cack + mpr` or later).
    OutOfWindow,
}

/// The responder's view of which packets arrived.
#[derive(Debug)]
pub struct Tracker {
    words: Vec<u64>,
    /// Message number and "ends a message" flag of each tracked slot, so the semantic layer
    /// can tell which message the cumulative ACK has just completed.
    msg: Vec<u16>,
    ends: Vec<u64>,
    ring_mask: u64,
    mpr: u64,
    cack: u64,
    /// One past the highest sequence number received.
    highest: u64,
    /// Packets received above the cumulative ACK (the SACK's `ooo_count`).
    ooo: u64,
}

impl Tracker {
    /// A tracker accepting `mpr` sequence numbers beyond the cumulative ACK.
    pub fn new(mpr: u32) -> Self {
        let bits = u64::from(mpr).next_power_of_two().max(128);
        Self {
            words: vec![0; (bits / 64) as usize],
            msg: vec![0; bits as usize],
            ends: vec![0; (bits / 64) as usize],
            ring_mask: bits - 1,
            mpr: u64::from(mpr),
            cack: 0,
            highest: 0,
            ooo: 0,
        }
    }

    /// Everything below this arrived.
    pub fn cack(&self) -> u64 {
        self.cack
    }

    /// One past the highest sequence number received.
    pub fn highest(&self) -> u64 {
        self.highest
    }

    /// Packets received above the cumulative ACK.
    pub fn out_of_order(&self) -> u64 {
        self.ooo
    }

    /// Classify `seq` without recording it.
    pub fn classify(&self, seq: u64) -> Arrival {
        if seq < self.cack || (seq < self.highest && self.bit(seq)) {
            Arrival::Duplicate
        } else if seq >= self.cack + self.mpr {
            Arrival::OutOfWindow
        } else {
            Arrival::New
        }
    }

    #[inline]
    fn bit(&self, seq: u64) -> bool {
        let pos = seq & self.ring_mask;
        self.words[(pos / 64) as usize] & (1 << (pos % 64)) != 0
    }

    /// Record a new arrival (`classify` said [`Arrival::New`]) of a packet of message `msn`,
    /// the last of it if `ends_message`. Returns how far the cumulative ACK moved.
    pub fn record(&mut self, seq: u64, msn: u16, ends_message: bool) -> u64 {
        debug_assert_eq!(self.classify(seq), Arrival::New);
        let pos = seq & self.ring_mask;
        let (w, b) = ((pos / 64) as usize, pos % 64);
        self.words[w] |= 1 << b;
        self.msg[pos as usize] = msn;
        if ends_message {
            self.ends[w] |= 1 << b;
        } else {
            self.ends[w] &= !(1 << b);
        }
        self.highest = self.highest.max(seq + 1);
        if seq != self.cack {
            self.ooo += 1;
            return 0;
        }
        self.advance()
    }

    /// Move the cumulative ACK over the run of received bits at its position, clearing them
    /// so the ring can be reused. O(run / 64).
    fn advance(&mut self) -> u64 {
        let start = self.cack;
        loop {
            let pos = self.cack & self.ring_mask;
            let (w, b) = ((pos / 64) as usize, pos % 64);
            let run = u64::from((!(self.words[w] >> b)).trailing_zeros()).min(64 - b);
            if run == 0 {
                break;
            }
            let mask = if run == 64 {
                u64::MAX
            } else {
                ((1u64 << run) - 1) << b
            };
            self.words[w] &= !mask;
            self.cack += run;
        }
        let moved = self.cack - start;
        // The packet at `start` was not counted as out of order; the rest of the run was.
        self.ooo -= moved - 1;
        moved
    }

    /// The message number of the packet just below the cumulative ACK, and whether it ended
    /// its message: the last message the cumulative ACK covers entirely is that one if it
    /// ended, else the one before. `None` before anything arrived.
    pub fn last_acked_packet(&self) -> Option<(u16, bool)> {
        let seq = self.cack.checked_sub(1)?;
        let pos = seq & self.ring_mask;
        let ends = self.ends[(pos / 64) as usize] & (1 << (pos % 64)) != 0;
        Some((self.msg[pos as usize], ends))
    }

    /// 64 bits of the bitmap starting at `base` (≥ the cumulative ACK): bit i = `base + i`
    /// arrived. Bits at or beyond the highest arrival are zero.
    pub fn bitmap_at(&self, base: u64) -> u64 {
        let mut out = 0u64;
        let end = self.highest.min(base + 64);
        let mut seq = base.max(self.cack);
        while seq < end {
            let pos = seq & self.ring_mask;
            let (w, b) = ((pos / 64) as usize, pos % 64);
            let take = (64 - b).min(end - seq);
            let chunk = (self.words[w] >> b)
                & if take == 64 {
                    u64::MAX
                } else {
                    (1 << take) - 1
                };
            out |= chunk << (seq - base);
            seq += take;
        }
        out
    }

    /// Heap bytes held.
    pub fn heap_bytes(&self) -> usize {
        self.words.capacity() * 8 + self.ends.capacity() * 8 + self.msg.capacity() * 2
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_order_arrivals_advance_the_cumulative_ack() {
        let mut t = Tracker::new(128);
        for s in 0..300 {
            assert_eq!(t.classify(s), Arrival::New);
            assert_eq!(t.record(s, 0, false), 1);
        }
        assert_eq!(t.cack(), 300);
        assert_eq!(t.out_of_order(), 0);
        assert_eq!(t.classify(12), Arrival::Duplicate);
    }

    #[test]
    fn a_hole_holds_the_ack_until_filled_then_it_jumps() {
        let mut t = Tracker::new(256);
        for s in 1..200 {
            assert_eq!(t.record(s, 0, false), 0);
        }
        assert_eq!(t.cack(), 0);
        assert_eq!(t.out_of_order(), 199);
        assert_eq!(t.classify(100), Arrival::Duplicate);
        assert_eq!(t.bitmap_at(0), !1);
        assert_eq!(
            t.bitmap_at(150),
            (1 << 50) - 1,
            "bits beyond the highest are zero"
        );
        assert_eq!(t.record(0, 0, false), 200);
        assert_eq!(t.cack(), 200);
        assert_eq!(t.out_of_order(), 0);
        assert_eq!(t.bitmap_at(200), 0);
    }

    #[test]
    fn window_edge_and_reuse_of_the_ring() {
        let mut t = Tracker::new(128);
        assert_eq!(t.classify(127), Arrival::New);
        assert_eq!(t.classify(128), Arrival::OutOfWindow);
        for s in 0..1000 {
            t.record(s, 0, false);
        }
        assert_eq!(t.classify(1000 + 127), Arrival::New);
        assert_eq!(t.classify(1000 + 128), Arrival::OutOfWindow);
        assert_eq!(t.bitmap_at(1000), 0, "old bits were cleared");
    }

    #[test]
    fn message_facts_of_the_last_acked_packet() {
        let mut t = Tracker::new(128);
        assert_eq!(t.last_acked_packet(), None);
        t.record(0, 7, false);
        assert_eq!(t.last_acked_packet(), Some((7, false)));
        t.record(2, 8, true);
        t.record(1, 7, true);
        assert_eq!(t.last_acked_packet(), Some((8, true)));
    }

    #[test]
    fn bitmap_across_word_and_ring_boundaries() {
        let mut t = Tracker::new(128);
        for s in 0..100 {
            t.record(s, 0, false);
        }
        // Ring of 128 bits: 100..228 wraps. Receive 101, 130, 163, 200.
        for s in [101, 130, 163, 200] {
            t.record(s, 0, false);
        }
        let bm = t.bitmap_at(100);
        assert_eq!(bm, 1 << 1 | 1 << 30 | 1 << 63);
        let bm = t.bitmap_at(137);
        assert_eq!(bm, 1 << 26 | 1 << 63);
    }
}
