//! A fixed-size array of owned mbufs: what a poll loop receives into and transmits from.

use std::mem::MaybeUninit;
use std::ops::{Deref, DerefMut};

use crate::mbuf::Mbuf;
use crate::sys;

/// The burst size of DPDK's examples (l2fwd's `MAX_PKT_BURST`).
pub const BURST_SIZE: usize = 32;

/// Up to `N` owned mbufs, in order, with no heap allocation. Derefs to `[Mbuf]`; frees what it
/// still holds on drop (in bulk). `rx_burst` appends to it; `tx_burst` sends from its front.
pub struct MbufBurst<const N: usize = BURST_SIZE> {
    len: usize,
    /// `slots[..len]` are initialised. `Mbuf` is a transparent pointer, so this is also an
    /// array of `struct rte_mbuf *` for DPDK.
    slots: [MaybeUninit<Mbuf>; N],
}

impl<const N: usize> MbufBurst<N> {
    /// An empty burst.
    pub const fn new() -> Self {
        const {
            assert!(
                N > 0 && N <= u16::MAX as usize,
                "burst capacity must be 1..=65535"
            );
        };
        Self {
            len: 0,
            slots: [const { MaybeUninit::uninit() }; N],
        }
    }

    /// Mbufs held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Holds none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Holds `N`.
    pub fn is_full(&self) -> bool {
        self.len == N
    }

    /// `N`.
    pub const fn capacity(&self) -> usize {
        N
    }

    /// Adds `mbuf` at the end, or gives it back when full.
    pub fn push(&mut self, mbuf: Mbuf) -> Result<(), Mbuf> {
        if self.is_full() {
            return Err(mbuf);
        }
        self.slots[self.len].write(mbuf);
        self.len += 1;
        Ok(())
    }

    /// Removes the last mbuf.
    pub fn pop(&mut self) -> Option<Mbuf> {
        if self.len == 0 {
            return None;
        }
        self.len -= 1;
        // SAFETY: slot `len` was initialised and is now outside `..len`, so it is read once.
        Some(unsafe { self.slots[self.len].assume_init_read() })
    }

    /// Frees every mbuf (`rte_pktmbuf_free_bulk`).
    pub fn clear(&mut self) {
        let n = std::mem::replace(&mut self.len, 0);
        free_bulk(self.slots.as_mut_ptr().cast(), n);
    }

    /// Moves every mbuf out, front to back; those not taken are freed when the `Drain` drops.
    pub fn drain(&mut self) -> Drain<'_, N> {
        self.drain_front(N)
    }

    /// Moves the first `n` mbufs (all of them, if fewer) out, front to back; when the
    /// [`Drain`] drops, those not taken are freed and the others move to the front of
    /// this burst, in order. For a TX path that commits the front of a staged burst and keeps
    /// the rest staged, with no burst moved through the stack (issue #13: a 264-byte burst
    /// returned by value and read back at once stalled on store forwarding).
    pub fn drain_front(&mut self, n: usize) -> Drain<'_, N> {
        let len = std::mem::replace(&mut self.len, 0);
        let end = n.min(len);
        Drain {
            burst: self,
            next: 0,
            end,
            rest: len - end,
        }
    }

    /// The free slots after `len`, as DPDK's `struct rte_mbuf **`.
    pub(crate) fn spare_ptr(&mut self) -> *mut *mut sys::rte_mbuf {
        self.slots[self.len..].as_mut_ptr().cast()
    }

    /// The held mbufs, as DPDK's `struct rte_mbuf **`.
    pub(crate) fn held_ptr(&mut self) -> *mut *mut sys::rte_mbuf {
        self.slots.as_mut_ptr().cast()
    }

    /// Counts `n` more slots as held.
    ///
    /// # Safety
    /// DPDK must have written `n` owned, valid mbuf pointers into the spare slots.
    pub(crate) unsafe fn commit(&mut self, n: usize) {
        debug_assert!(self.len + n <= N);
        self.len += n;
    }

    /// Forgets the first `n` mbufs (ownership went to the NIC) and moves the rest to the front.
    pub(crate) fn consume_front(&mut self, n: usize) {
        debug_assert!(n <= self.len);
        let rest = self.len - n;
        // SAFETY: both ranges lie in `slots` (`ptr::copy` allows overlap). The remaining mbufs
        // move to the front bit for bit; the slots they leave are beyond the new `len`.
        unsafe { std::ptr::copy(self.slots.as_ptr().add(n), self.slots.as_mut_ptr(), rest) };
        self.len = rest;
    }
}

fn free_bulk(mbufs: *mut *mut sys::rte_mbuf, n: usize) {
    if n > 0 {
        // SAFETY: `mbufs[..n]` are owned mbufs that are forgotten by their holder before or by
        // this call; DPDK frees them back to their pools.
        unsafe { sys::rte_pktmbuf_free_bulk(mbufs, n as u32) };
    }
}

impl<const N: usize> Default for MbufBurst<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> Deref for MbufBurst<N> {
    type Target = [Mbuf];

    fn deref(&self) -> &[Mbuf] {
        // SAFETY: `slots[..len]` are initialised `Mbuf`s.
        unsafe { std::slice::from_raw_parts(self.slots.as_ptr().cast::<Mbuf>(), self.len) }
    }
}

impl<const N: usize> DerefMut for MbufBurst<N> {
    fn deref_mut(&mut self) -> &mut [Mbuf] {
        // SAFETY: `slots[..len]` are initialised `Mbuf`s, borrowed exclusively.
        unsafe { std::slice::from_raw_parts_mut(self.slots.as_mut_ptr().cast::<Mbuf>(), self.len) }
    }
}

impl<const N: usize> Drop for MbufBurst<N> {
    fn drop(&mut self) {
        self.clear();
    }
}

impl<const N: usize> std::fmt::Debug for MbufBurst<N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MbufBurst")
            .field("len", &self.len)
            .field("capacity", &N)
            .finish()
    }
}

/// Owned mbufs moved out of the front of an [`MbufBurst`] ([`MbufBurst::drain`],
/// [`MbufBurst::drain_front`]).
pub struct Drain<'a, const N: usize> {
    burst: &'a mut MbufBurst<N>,
    next: usize,
    end: usize,
    /// Mbufs after `end`, which stay in the burst.
    rest: usize,
}

impl<const N: usize> Iterator for Drain<'_, N> {
    type Item = Mbuf;

    #[inline]
    fn next(&mut self) -> Option<Mbuf> {
        if self.next == self.end {
            return None;
        }
        // SAFETY: slots `next..end + rest` are initialised and owned by the Drain (the
        // burst's `len` is 0 meanwhile); each of `next..end` is read once.
        let mbuf = unsafe { self.burst.slots[self.next].assume_init_read() };
        self.next += 1;
        Some(mbuf)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.end - self.next, Some(self.end - self.next))
    }
}

impl<const N: usize> ExactSizeIterator for Drain<'_, N> {}

impl<const N: usize> Drop for Drain<'_, N> {
    fn drop(&mut self) {
        free_bulk(
            self.burst.slots[self.next..self.end].as_mut_ptr().cast(),
            self.end - self.next,
        );
        let b = &mut *self.burst;
        // SAFETY: `end..end + rest` are initialised mbufs, moved bit for bit to the front
        // (`ptr::copy` allows overlap) and owned by the burst again from here on.
        unsafe {
            std::ptr::copy(
                b.slots.as_ptr().add(self.end),
                b.slots.as_mut_ptr(),
                self.rest,
            );
        }
        b.len = self.rest;
    }
}

impl<const N: usize> std::fmt::Debug for Drain<'_, N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Drain")
            .field("next", &self.next)
            .field("end", &self.end)
            .field("rest", &self.rest)
            .finish()
    }
}
