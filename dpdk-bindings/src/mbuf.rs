//! The owned packet buffer.
//!
//! Per-packet accessors (data pointer, lengths) read the bindgen'd `rte_mbuf` fields directly,
//! as DPDK's own inline functions do, instead of calling through C per packet; the
//! `dpdk_null` test checks them against the C macros on real mbufs. Mutations that walk
//! segments (append/prepend/adj/trim) call DPDK's inline functions through their wrappers.

use std::ptr::{NonNull, addr_of};

use crate::error::{Error, Result};
use crate::sys;

/// One packet mbuf (a chain of segments), owned: freed back to its pool on drop. `Send`, so it
/// can move between lcores; not `Sync`.
///
/// `repr(transparent)` over the `rte_mbuf` pointer, so an array of `Mbuf` is an array of
/// `struct rte_mbuf *` for the burst calls.
#[repr(transparent)]
pub struct Mbuf {
    raw: NonNull<sys::rte_mbuf>,
}

// SAFETY: an Mbuf is the only owner of its mbuf (refcount 1, never shared by this crate); DPDK
// frees mbufs from any thread (non-EAL threads bypass the per-lcore cache).
unsafe impl Send for Mbuf {}

impl std::fmt::Debug for Mbuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mbuf")
            .field("len", &self.len())
            .field("data_len", &self.data_len())
            .field("segments", &self.segment_count())
            .field("headroom", &self.headroom())
            .finish()
    }
}

/// Reads field `$f` of the `rte_mbuf` at `$p` without making a reference to the whole struct.
macro_rules! field {
    ($p:expr, $f:ident) => {
        // SAFETY: `$p` points to a live mbuf owned by (or chained from) this Mbuf.
        unsafe { addr_of!((*$p).$f).read() }
    };
}

impl Mbuf {
    pub(crate) fn from_non_null(raw: NonNull<sys::rte_mbuf>) -> Self {
        Self { raw }
    }

    /// Takes ownership of a raw mbuf.
    ///
    /// # Safety
    /// `raw` must be a valid packet mbuf that nobody else owns or frees (refcount 1, not
    /// attached to other mbufs), from a pool that stays alive.
    pub unsafe fn from_raw(raw: NonNull<sys::rte_mbuf>) -> Self {
        Self { raw }
    }

    /// Gives up ownership; the caller must free the mbuf (or hand it to DPDK).
    pub fn into_raw(self) -> NonNull<sys::rte_mbuf> {
        let raw = self.raw;
        std::mem::forget(self);
        raw
    }

    /// The raw mbuf, still owned by `self`.
    pub fn as_ptr(&self) -> *mut sys::rte_mbuf {
        self.raw.as_ptr()
    }

    /// Total frame length over all segments (`pkt_len`).
    #[inline]
    pub fn len(&self) -> usize {
        field!(self.raw.as_ptr(), pkt_len) as usize
    }

    /// No bytes at all.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes in the first segment (`data_len`); equals [`Mbuf::len`] when contiguous.
    #[inline]
    pub fn data_len(&self) -> usize {
        field!(self.raw.as_ptr(), data_len) as usize
    }

    /// Number of segments in the chain.
    #[inline]
    pub fn segment_count(&self) -> u16 {
        field!(self.raw.as_ptr(), nb_segs)
    }

    /// The whole frame is in the first segment, so [`Mbuf::data`] is the whole frame.
    #[inline]
    pub fn is_contiguous(&self) -> bool {
        self.segment_count() == 1
    }

    /// The first segment's bytes (the whole frame when [`Mbuf::is_contiguous`]).
    #[inline]
    pub fn data(&self) -> &[u8] {
        let (ptr, len) = segment_data(self.raw.as_ptr());
        // SAFETY: `ptr..ptr+len` is the initialised data area of a segment we own; it stays
        // valid and unaliased for the borrow of `self`.
        unsafe { std::slice::from_raw_parts(ptr, len) }
    }

    /// The first segment's bytes, writable.
    #[inline]
    pub fn data_mut(&mut self) -> &mut [u8] {
        let (ptr, len) = segment_data(self.raw.as_ptr());
        // SAFETY: as in `data`, and `&mut self` makes the borrow exclusive.
        unsafe { std::slice::from_raw_parts_mut(ptr, len) }
    }

    /// The bytes of every segment, in order.
    pub fn segments(&self) -> impl Iterator<Item = &[u8]> + '_ {
        let mut seg = self.raw.as_ptr();
        std::iter::from_fn(move || {
            if seg.is_null() {
                return None;
            }
            let (ptr, len) = segment_data(seg);
            seg = field!(seg, next);
            // SAFETY: a segment of the chain we own, valid for the borrow of `self`.
            Some(unsafe { std::slice::from_raw_parts(ptr.cast_const(), len) })
        })
    }

    /// Free bytes in front of the first segment's data ([`Mbuf::prepend`] room).
    #[inline]
    pub fn headroom(&self) -> usize {
        field!(self.raw.as_ptr(), data_off) as usize
    }

    /// Free bytes after the last segment's data ([`Mbuf::append`] room).
    pub fn tailroom(&self) -> usize {
        let last = self.last_segment();
        field!(last, buf_len) as usize
            - field!(last, data_off) as usize
            - field!(last, data_len) as usize
    }

    fn last_segment(&self) -> *mut sys::rte_mbuf {
        let mut seg = self.raw.as_ptr();
        loop {
            let next = field!(seg, next);
            if next.is_null() {
                return seg;
            }
            seg = next;
        }
    }

    /// Grows the frame by `n` bytes at the end (of the last segment); returns them to fill.
    pub fn append(&mut self, n: usize) -> Result<&mut [u8]> {
        let available = self.tailroom();
        let len = u16::try_from(n)
            .ok()
            .filter(|_| n <= available)
            .ok_or(Error::NoRoom {
                requested: n,
                available,
            })?;
        // SAFETY: we own the mbuf; DPDK checks the tailroom again and returns NULL on failure.
        let ptr = unsafe { sys::rte_pktmbuf_append(self.raw.as_ptr(), len) };
        let ptr = NonNull::new(ptr.cast::<u8>()).ok_or(Error::NoRoom {
            requested: n,
            available,
        })?;
        // SAFETY: DPDK returned the start of `n` bytes now inside the last segment's data area.
        Ok(unsafe { std::slice::from_raw_parts_mut(ptr.as_ptr(), n) })
    }

    /// Appends a copy of `bytes`.
    pub fn extend_from_slice(&mut self, bytes: &[u8]) -> Result<()> {
        self.append(bytes.len())?.copy_from_slice(bytes);
        Ok(())
    }

    /// Grows the frame by `n` bytes at the front (into the headroom); returns them to fill.
    pub fn prepend(&mut self, n: usize) -> Result<&mut [u8]> {
        let available = self.headroom();
        let len = u16::try_from(n)
            .ok()
            .filter(|_| n <= available)
            .ok_or(Error::NoRoom {
                requested: n,
                available,
            })?;
        // SAFETY: we own the mbuf; DPDK checks the headroom again and returns NULL on failure.
        let ptr = unsafe { sys::rte_pktmbuf_prepend(self.raw.as_ptr(), len) };
        let ptr = NonNull::new(ptr.cast::<u8>()).ok_or(Error::NoRoom {
            requested: n,
            available,
        })?;
        // SAFETY: DPDK returned the new start of the first segment's data, `n` bytes long at least.
        Ok(unsafe { std::slice::from_raw_parts_mut(ptr.as_ptr(), n) })
    }

    /// Removes `n` bytes from the front of the first segment (e.g. a parsed header).
    pub fn adj(&mut self, n: usize) -> Result<()> {
        let available = self.data_len();
        let len = u16::try_from(n)
            .ok()
            .filter(|_| n <= available)
            .ok_or(Error::NoRoom {
                requested: n,
                available,
            })?;
        // SAFETY: we own the mbuf; DPDK returns NULL if `len` exceeds the first segment.
        let ptr = unsafe { sys::rte_pktmbuf_adj(self.raw.as_ptr(), len) };
        if ptr.is_null() {
            Err(Error::NoRoom {
                requested: n,
                available,
            })
        } else {
            Ok(())
        }
    }

    /// Removes `n` bytes from the end of the last segment.
    pub fn trim(&mut self, n: usize) -> Result<()> {
        let available = field!(self.last_segment(), data_len) as usize;
        let len = u16::try_from(n)
            .ok()
            .filter(|_| n <= available)
            .ok_or(Error::NoRoom {
                requested: n,
                available,
            })?;
        // SAFETY: we own the mbuf; DPDK returns -1 if `len` exceeds the last segment.
        let ret = unsafe { sys::rte_pktmbuf_trim(self.raw.as_ptr(), len) };
        if ret == 0 {
            Ok(())
        } else {
            Err(Error::NoRoom {
                requested: n,
                available,
            })
        }
    }

    /// Shortens a contiguous frame to `len` bytes (no-op if already shorter).
    pub fn truncate(&mut self, len: usize) -> Result<()> {
        if !self.is_contiguous() {
            return Err(Error::InvalidArgument(
                "truncate needs a single-segment mbuf",
            ));
        }
        self.trim(self.len().saturating_sub(len))
    }

    /// Sets a one-segment frame's length to `len` bytes (`data_len` and `pkt_len`), longer or
    /// shorter, within the room after its data offset: what [`append`](Self::append) and
    /// [`truncate`](Self::truncate) do, as two field writes instead of calls into C (the NIC
    /// loop sizes every staged TX mbuf twice, issue #13).
    #[inline]
    pub fn set_len(&mut self, len: usize) -> Result<()> {
        let m = self.raw.as_ptr();
        if !self.is_contiguous() {
            return Err(Error::InvalidArgument(
                "set_len needs a single-segment mbuf",
            ));
        }
        let available = (field!(m, buf_len) as usize).saturating_sub(self.headroom());
        let Some(len16) = u16::try_from(len).ok().filter(|_| len <= available) else {
            return Err(Error::NoRoom {
                requested: len,
                available,
            });
        };
        // SAFETY: we own the mbuf (`&mut self`) and it has one segment; the new length stays
        // within its buffer after `data_off`, so every accessor's view stays in the buffer.
        unsafe {
            (*m).data_len = len16;
            (*m).pkt_len = u32::from(len16);
        }
        Ok(())
    }

    /// Empties the mbuf (frees chained segments) and restores the default headroom.
    pub fn reset(&mut self) {
        if !self.is_contiguous() {
            // The segments after the first go back to their pool; the reset below unlinks them.
            let rest = field!(self.raw.as_ptr(), next);
            // SAFETY: we own the chain, so its tail is ours to free.
            unsafe { sys::rte_pktmbuf_free(rest) };
        }
        // SAFETY: we own the first segment; resets next, lengths, offset and flags.
        unsafe { sys::rte_pktmbuf_reset(self.raw.as_ptr()) };
    }

    /// Appends `tail`'s segments to this frame (`rte_pktmbuf_chain`); gives `tail` back when
    /// the chain would exceed DPDK's segment limit.
    pub fn chain(&mut self, tail: Mbuf) -> Result<(), Mbuf> {
        // SAFETY: we own both chains; on success DPDK links `tail` behind our last segment and
        // ownership moves into our chain, on failure nothing changes.
        let ret = unsafe { sys::rte_pktmbuf_chain(self.raw.as_ptr(), tail.raw.as_ptr()) };
        if ret == 0 {
            std::mem::forget(tail);
            Ok(())
        } else {
            Err(tail)
        }
    }

    /// Copies a chained frame into its first segment, when the first segment has room.
    pub fn linearize(&mut self) -> Result<()> {
        // SAFETY: we own the chain; DPDK copies and frees the extra segments, or fails cleanly.
        let ret = unsafe { sys::rte_pktmbuf_linearize(self.raw.as_ptr()) };
        crate::error::check("rte_pktmbuf_linearize", ret).map(drop)
    }

    /// The port the frame was received on.
    pub fn port(&self) -> u16 {
        field!(self.raw.as_ptr(), port)
    }
}

/// Start and length of one segment's data: `buf_addr + data_off`, `data_len`
/// (what `rte_pktmbuf_mtod` and `rte_pktmbuf_data_len` expand to).
#[inline]
fn segment_data(seg: *mut sys::rte_mbuf) -> (*mut u8, usize) {
    let base = field!(seg, buf_addr).cast::<u8>();
    let off = field!(seg, data_off) as usize;
    // SAFETY: `data_off` lies within the segment's buffer.
    (unsafe { base.add(off) }, field!(seg, data_len) as usize)
}

/// The first segment's bytes, writable ([`Mbuf::data_mut`]): an mbuf as a buffer to write a
/// frame into (e.g. the engine's `poll_transmit_burst`).
impl AsMut<[u8]> for Mbuf {
    #[inline]
    fn as_mut(&mut self) -> &mut [u8] {
        self.data_mut()
    }
}

impl Drop for Mbuf {
    fn drop(&mut self) {
        // SAFETY: we own the mbuf chain; it goes back to its pool.
        unsafe { sys::rte_pktmbuf_free(self.raw.as_ptr()) };
    }
}
