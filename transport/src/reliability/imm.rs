//! Write-with-Immediate ordering at the responder (brief §3.8): an immediate is delivered only
//! once every packet of its message and of every earlier message arrived (the cumulative ACK
//! passed its last packet), strictly in RQMSN order. Early immediates wait here, at most the
//! QP's Write-with-Immediate limit of them.

/// A message whose immediate waits for delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PendingImm {
    /// Sequence number of the message's last packet.
    pub last_seq: u64,
    pub imm: u32,
    /// The message length (RETH DMA length).
    pub len: u32,
}

/// A message beyond the Write-with-Immediate limit arrived (the requester broke the
/// negotiated bound: the QP fails, brief §3.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BeyondLimit;

/// Immediates waiting for their turn, indexed by RQMSN.
#[derive(Debug)]
pub struct ImmStash {
    slots: Vec<Option<PendingImm>>,
    next: u16,
    waiting: usize,
}

impl ImmStash {
    /// A stash for at most `limit` outstanding messages.
    pub fn new(limit: u16) -> Self {
        Self {
            slots: vec![None; usize::from(limit.max(1))],
            next: 0,
            waiting: 0,
        }
    }

    /// The RQMSN expected next.
    pub fn next_rqmsn(&self) -> u16 {
        self.next
    }

    /// Immediates stashed.
    pub fn waiting(&self) -> usize {
        self.waiting
    }

    /// Stash the immediate of message `rqmsn`.
    pub fn insert(&mut self, rqmsn: u16, pending: PendingImm) -> Result<(), BeyondLimit> {
        let ahead = usize::from(rqmsn.wrapping_sub(self.next));
        if ahead >= self.slots.len() {
            return Err(BeyondLimit);
        }
        let len = self.slots.len();
        let slot = &mut self.slots[usize::from(rqmsn) % len];
        if slot.is_none() {
            self.waiting += 1;
        }
        *slot = Some(pending);
        Ok(())
    }

    /// The next immediate, if its message and all before it are complete (`cack` is the
    /// cumulative ACK: everything below arrived).
    pub fn peek_ready(&self, cack: u64) -> Option<PendingImm> {
        let slot = self.slots[usize::from(self.next) % self.slots.len()];
        slot.filter(|p| p.last_seq < cack)
    }

    /// Remove the immediate [`peek_ready`](Self::peek_ready) returned.
    pub fn pop(&mut self) {
        let len = self.slots.len();
        if self.slots[usize::from(self.next) % len].take().is_some() {
            self.waiting -= 1;
            self.next = self.next.wrapping_add(1);
        }
    }

    /// Heap bytes held.
    pub fn heap_bytes(&self) -> usize {
        self.slots.capacity() * size_of::<Option<PendingImm>>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(last_seq: u64, imm: u32) -> PendingImm {
        PendingImm {
            last_seq,
            imm,
            len: 0,
        }
    }

    #[test]
    fn delivers_in_rqmsn_order_once_complete() {
        let mut s = ImmStash::new(4);
        s.insert(1, p(20, 0xb)).unwrap();
        assert_eq!(s.peek_ready(100), None, "message 0 has not shown up");
        s.insert(0, p(10, 0xa)).unwrap();
        assert_eq!(
            s.peek_ready(10),
            None,
            "its last packet is not below the cumulative ACK"
        );
        assert_eq!(s.peek_ready(11), Some(p(10, 0xa)));
        s.pop();
        assert_eq!(s.peek_ready(11), None);
        assert_eq!(s.peek_ready(21), Some(p(20, 0xb)));
        s.pop();
        assert_eq!(s.next_rqmsn(), 2);
        assert_eq!(s.waiting(), 0);
    }

    #[test]
    fn the_limit_is_enforced_across_wraparound() {
        let mut s = ImmStash::new(2);
        for m in 0..70_000u32 {
            let m = m as u16;
            s.insert(m, p(u64::from(m), 0)).unwrap();
            assert_eq!(s.insert(m.wrapping_add(2), p(0, 0)), Err(BeyondLimit));
            assert!(s.peek_ready(u64::MAX).is_some());
            s.pop();
        }
    }
}
