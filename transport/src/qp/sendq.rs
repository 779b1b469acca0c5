//! A QP's send queue (work requests from `post_send` until their completion) and receive
//! queue (receive work requests waiting for Write-with-Immediate messages). Both are rings
//! bounded at `create_qp` by the QP's `max_send_wr` / `max_recv_wr`; each starts small and
//! doubles when the work requests outstanding fill it, so a QP costs the depth it uses, not
//! the depth it was given (issue #14: a thousand simulated hosts spent 130 MB on send queues
//! of 1024 slots that held one work request). Posting allocates only while a ring grows.

use std::collections::VecDeque;

use crate::verbs::{MrTable, SendOpcode, SendWr, Sge, VerbsError};
use crate::wire::icrc::Running;

/// Slots of a send queue's ring, and entries of a receive queue's, before they first grow.
const INITIAL_RING: usize = 16;

/// One posted send work request.
#[derive(Debug, Clone, Copy, Default)]
pub struct WrSlot {
    pub wr_id: u64,
    pub imm: Option<u32>,
    pub remote_addr: u64,
    pub rkey: u32,
    /// Message length in bytes.
    pub len: u32,
    pub n_sge: u8,
    pub signaled: bool,
    /// Message sequence number (METH MSN).
    pub msn: u16,
    /// Receive-queue MSN (METH RQMSN): counts Write-with-Immediate messages.
    pub rqmsn: u16,
    /// Sequence number of its first packet (valid once it started).
    pub first_seq: u64,
    /// Packets the message takes (a zero-length write takes one).
    pub packets: u32,
}

impl WrSlot {
    /// Sequence number one past its last packet.
    pub fn end_seq(&self) -> u64 {
        self.first_seq + u64::from(self.packets)
    }
}

/// The send queue.
#[derive(Debug)]
pub struct SendQueue {
    /// The ring, a power of two long (an index is a mask, not a 64-bit division: issue #13);
    /// at most `depth` of its slots hold work requests.
    slots: Vec<WrSlot>,
    /// Longest the ring grows: `depth` rounded up to a power of two.
    max_ring: usize,
    /// Work requests it holds at most (the QP's `max_send_wr`).
    depth: u64,
    sges: Vec<Sge>,
    max_sge: usize,
    /// Oldest work request not completed (absolute count of posts).
    head: u64,
    /// Work request whose packets go out next.
    next: u64,
    /// Packets of `next` already sent.
    next_pkt: u32,
    /// Next post.
    tail: u64,
    msn: u16,
    rqmsn: u16,
}

impl SendQueue {
    pub fn new(depth: u32, max_sge: u32) -> Self {
        let depth = depth.max(1) as usize;
        let max_ring = depth.next_power_of_two();
        let ring = max_ring.min(INITIAL_RING);
        let max_sge = max_sge.max(1) as usize;
        Self {
            slots: vec![WrSlot::default(); ring],
            max_ring,
            depth: depth as u64,
            sges: vec![Sge::default(); ring * max_sge],
            max_sge,
            head: 0,
            next: 0,
            next_pkt: 0,
            tail: 0,
            msn: 0,
            rqmsn: 0,
        }
    }

    #[inline]
    fn index(&self, abs: u64) -> usize {
        (abs & (self.slots.len() as u64 - 1)) as usize
    }

    /// Double the ring (the work requests outstanding fill it), each moved with its gather
    /// list to its slot in the new one.
    #[cold]
    #[inline(never)]
    fn grow(&mut self) {
        let ring = self.slots.len() * 2;
        debug_assert!(ring <= self.max_ring);
        let mut slots = vec![WrSlot::default(); ring];
        let mut sges = vec![Sge::default(); ring * self.max_sge];
        let m = self.max_sge;
        for abs in self.head..self.tail {
            let (from, to) = (self.index(abs), (abs & (ring as u64 - 1)) as usize);
            slots[to] = self.slots[from];
            sges[to * m..(to + 1) * m].copy_from_slice(&self.sges[from * m..(from + 1) * m]);
        }
        self.slots = slots;
        self.sges = sges;
    }

    /// Queue a work request of `len` bytes split into `mtu`-byte packets.
    pub fn push(
        &mut self,
        wr: &SendWr<'_>,
        len: u32,
        mtu: u32,
        signaled: bool,
    ) -> Result<(), VerbsError> {
        if self.tail - self.head >= self.depth {
            return Err(VerbsError::SendQueueFull);
        }
        if wr.sg_list.len() > self.max_sge {
            return Err(VerbsError::TooManySge {
                given: wr.sg_list.len(),
                max: self.max_sge as u32,
            });
        }
        let imm = match wr.opcode {
            SendOpcode::Write => None,
            SendOpcode::WriteWithImm(v) => Some(v),
        };
        if self.tail - self.head == self.slots.len() as u64 {
            self.grow();
        }
        let i = self.index(self.tail);
        self.sges[i * self.max_sge..i * self.max_sge + wr.sg_list.len()]
            .copy_from_slice(wr.sg_list);
        self.slots[i] = WrSlot {
            wr_id: wr.wr_id,
            imm,
            remote_addr: wr.remote_addr,
            rkey: wr.rkey,
            len,
            n_sge: wr.sg_list.len() as u8,
            signaled,
            msn: self.msn,
            rqmsn: self.rqmsn,
            first_seq: 0,
            packets: len.div_ceil(mtu).max(1),
        };
        self.msn = self.msn.wrapping_add(1);
        if imm.is_some() {
            self.rqmsn = self.rqmsn.wrapping_add(1);
        }
        self.tail += 1;
        Ok(())
    }

    /// The work request whose next packet goes out, and that packet's index.
    pub fn next_packet(&self) -> Option<(u64, &WrSlot, u32)> {
        (self.next < self.tail)
            .then(|| (self.next, &self.slots[self.index(self.next)], self.next_pkt))
    }

    /// The packet [`next_packet`](Self::next_packet) named left with sequence number `seq`.
    pub fn advance(&mut self, seq: u64) {
        let i = self.index(self.next);
        let slot = &mut self.slots[i];
        if self.next_pkt == 0 {
            slot.first_seq = seq;
        }
        self.next_pkt += 1;
        if self.next_pkt == slot.packets {
            self.next += 1;
            self.next_pkt = 0;
        }
    }

    /// The work request with absolute index `abs`.
    pub fn slot(&self, abs: u64) -> &WrSlot {
        &self.slots[self.index(abs)]
    }

    /// The oldest incomplete work request, if all its packets were sent.
    pub fn head_sent(&self) -> Option<&WrSlot> {
        (self.head < self.next).then(|| &self.slots[self.index(self.head)])
    }

    /// Absolute index of the oldest incomplete work request.
    pub fn head(&self) -> u64 {
        self.head
    }

    /// Complete the oldest work request.
    pub fn pop_head(&mut self) -> WrSlot {
        let s = self.slots[self.index(self.head)];
        self.head += 1;
        s
    }

    /// Whether packets wait to be sent for the first time.
    pub fn has_unsent(&self) -> bool {
        self.next < self.tail
    }

    /// Absolute index one past the last posted work request.
    pub fn tail(&self) -> u64 {
        self.tail
    }

    /// Absolute index one past the last work request whose packets all left.
    pub fn sent_index(&self) -> u64 {
        self.next
    }

    /// Copy `dst.len()` bytes of message `abs` starting at byte `offset` out of its gather
    /// list, running the frame's ICRC `crc` over them on the way (one pass, issue #13). Fails
    /// if a region was deregistered since the post.
    pub fn gather(
        &self,
        abs: u64,
        offset: u64,
        dst: &mut [u8],
        mrs: &MrTable,
        crc: &mut Running<'_>,
    ) -> Result<(), VerbsError> {
        let i = self.index(abs);
        let sges =
            &self.sges[i * self.max_sge..i * self.max_sge + usize::from(self.slots[i].n_sge)];
        let mut skip = offset;
        let mut out = 0usize;
        for sge in sges {
            if out == dst.len() {
                break;
            }
            let len = u64::from(sge.length);
            if skip >= len {
                skip -= len;
                continue;
            }
            let take = ((len - skip) as usize).min(dst.len() - out);
            mrs.read_local_crc(sge.lkey, sge.addr + skip, &mut dst[out..out + take], crc)?;
            out += take;
            skip = 0;
        }
        if out == dst.len() {
            Ok(())
        } else {
            Err(VerbsError::OutOfBounds)
        }
    }

    /// Drop everything (QP reset or error flush), returning the work requests in order.
    pub fn drain(&mut self) -> impl Iterator<Item = WrSlot> + '_ {
        let (head, tail) = (self.head, self.tail);
        self.head = tail;
        self.next = tail;
        self.next_pkt = 0;
        (head..tail).map(move |abs| self.slots[self.index(abs)])
    }

    /// Heap bytes the queue may hold: its ring grown to the depth. Set at creation, whatever
    /// is posted.
    pub fn heap_bytes(&self) -> usize {
        self.max_ring * (size_of::<WrSlot>() + self.max_sge * size_of::<Sge>())
    }

    /// Heap bytes held now (at most [`heap_bytes`](Self::heap_bytes)).
    #[cfg(test)]
    pub fn heap_held(&self) -> usize {
        self.slots.capacity() * size_of::<WrSlot>() + self.sges.capacity() * size_of::<Sge>()
    }
}

/// The receive queue: `wr_id`s of posted receives, consumed in order.
#[derive(Debug)]
pub struct RecvQueue {
    wrs: VecDeque<u64>,
    depth: usize,
}

impl RecvQueue {
    pub fn new(depth: u32) -> Self {
        let depth = depth.max(1) as usize;
        Self {
            wrs: VecDeque::with_capacity(depth.min(INITIAL_RING)),
            depth,
        }
    }

    pub fn push(&mut self, wr_id: u64) -> Result<(), VerbsError> {
        if self.wrs.len() >= self.depth {
            return Err(VerbsError::RecvQueueFull);
        }
        self.wrs.push_back(wr_id);
        Ok(())
    }

    pub fn pop(&mut self) -> Option<u64> {
        self.wrs.pop_front()
    }

    pub fn is_empty(&self) -> bool {
        self.wrs.is_empty()
    }

    pub fn drain(&mut self) -> impl Iterator<Item = u64> + '_ {
        self.wrs.drain(..)
    }

    /// Heap bytes the queue may hold: the depth's `wr_id`s (VecDeque grows by doubling, so
    /// up to twice the depth rounded up to a power of two).
    pub fn heap_bytes(&self) -> usize {
        self.depth.next_power_of_two() * 8
    }

    /// Heap bytes held now (at most [`heap_bytes`](Self::heap_bytes)).
    #[cfg(test)]
    pub fn heap_held(&self) -> usize {
        self.wrs.capacity() * 8
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verbs::{Access, PdHandle};

    #[test]
    fn segmentation_and_gather_across_sges() {
        let mut mrs = MrTable::new(4, 0);
        let pd = PdHandle(1);
        let data: Vec<u8> = (0..=255).collect();
        let k = mrs
            .register(pd, 0x100, Box::new(data), Access::LOCAL_WRITE)
            .unwrap();
        let sg = [
            Sge {
                addr: 0x100,
                length: 5,
                lkey: k.lkey,
            },
            Sge {
                addr: 0x180,
                length: 7,
                lkey: k.lkey,
            },
        ];
        let wr = SendWr {
            wr_id: 9,
            opcode: SendOpcode::WriteWithImm(3),
            sg_list: &sg,
            remote_addr: 0,
            rkey: 0,
            signaled: true,
        };
        let mut sq = SendQueue::new(2, 2);
        sq.push(&wr, 12, 4, true).unwrap();
        assert_eq!(sq.slot(0).packets, 3);
        assert_eq!(sq.slot(0).rqmsn, 0);
        let mut out = [0u8; 4];
        sq.gather(
            0,
            4,
            &mut out,
            &mrs,
            &mut Running::new(crate::wire::icrc::Crc::new(), &[]),
        )
        .unwrap();
        assert_eq!(
            out,
            [4, 0x80, 0x81, 0x82],
            "crosses from the first SGE to the second"
        );
        assert_eq!(
            sq.gather(
                0,
                10,
                &mut out,
                &mrs,
                &mut Running::new(crate::wire::icrc::Crc::new(), &[])
            ),
            Err(VerbsError::OutOfBounds)
        );
        for seq in 10..13 {
            let (abs, _, pkt) = sq.next_packet().unwrap();
            assert_eq!((abs, pkt), (0, seq as u32 - 10));
            sq.advance(seq);
        }
        assert!(sq.next_packet().is_none());
        assert_eq!(sq.head_sent().unwrap().end_seq(), 13);
        sq.push(&wr, 0, 4, false).unwrap();
        assert_eq!(sq.slot(1).packets, 1, "zero-length write takes one packet");
        assert_eq!(sq.slot(1).rqmsn, 1);
        assert_eq!(sq.push(&wr, 1, 4, false), Err(VerbsError::SendQueueFull));
        assert_eq!(sq.drain().map(|w| w.msn).collect::<Vec<_>>(), [0, 1]);
        assert!(sq.head_sent().is_none() && !sq.has_unsent());
    }

    #[test]
    fn the_ring_grows_with_what_is_outstanding_and_keeps_every_request() {
        let mut mrs = MrTable::new(4, 0);
        let pd = PdHandle(1);
        let data: Vec<u8> = (0..=255).collect();
        let k = mrs
            .register(pd, 0, Box::new(data), Access::LOCAL_WRITE)
            .unwrap();
        let depth = 100;
        let mut sq = SendQueue::new(depth, 2);
        let held0 = sq.heap_held();
        assert!(held0 < sq.heap_bytes() / 4, "starts small: {held0}");
        let post = |sq: &mut SendQueue, id: u64| {
            // Two SGEs naming bytes id and id + 1: what gather must find after a move.
            let b = id % 200;
            let sg = [
                Sge {
                    addr: b,
                    length: 1,
                    lkey: k.lkey,
                },
                Sge {
                    addr: b + 1,
                    length: 1,
                    lkey: k.lkey,
                },
            ];
            let wr = SendWr {
                wr_id: id,
                opcode: SendOpcode::Write,
                sg_list: &sg,
                remote_addr: id,
                rkey: 0,
                signaled: true,
            };
            sq.push(&wr, 2, 4, true)
        };
        let check = |sq: &SendQueue, abs: u64| {
            assert_eq!(sq.slot(abs).wr_id, abs);
            let mut out = [0u8; 2];
            sq.gather(
                abs,
                0,
                &mut out,
                &mrs,
                &mut Running::new(crate::wire::icrc::Crc::new(), &[]),
            )
            .unwrap();
            assert_eq!(out, [(abs % 200) as u8, (abs % 200) as u8 + 1]);
        };
        // Fill, drain a few, fill again so the live requests wrap the ring as it grows.
        let mut next = 0;
        for _ in 0..10 {
            post(&mut sq, next).unwrap();
            next += 1;
        }
        for _ in 0..7 {
            sq.pop_head();
        }
        while post(&mut sq, next).is_ok() {
            next += 1;
        }
        assert_eq!(sq.tail() - sq.head(), u64::from(depth), "full at its depth");
        for abs in sq.head()..sq.tail() {
            check(&sq, abs);
        }
        assert!(sq.heap_held() <= sq.heap_bytes());
        assert_eq!(sq.heap_held(), sq.heap_bytes(), "grown to the depth");
    }

    #[test]
    fn the_receive_ring_grows_to_its_depth_and_no_further() {
        let mut rq = RecvQueue::new(1000);
        assert!(rq.heap_held() * 8 < rq.heap_bytes());
        for id in 0..1000 {
            rq.push(id).unwrap();
        }
        assert_eq!(rq.push(1000), Err(VerbsError::RecvQueueFull));
        assert!(rq.heap_held() <= rq.heap_bytes());
        assert_eq!(
            rq.drain().collect::<Vec<_>>(),
            (0..1000).collect::<Vec<_>>()
        );
    }
}
