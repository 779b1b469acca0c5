//! Frame buffers, recycled: a frame is a `u32` handle into the pool; buffers freed by a drop,
//! a trim or a delivery go back on the free list, so a run in steady state allocates nothing
//! per packet.
//!
//! Laid out for a fabric of a thousand hosts and more (issue #14), where ~100 000 frames are
//! in flight at once and the simulator would otherwise spend its time in cache and TLB misses:
//!
//! - **The headers apart.** A frame's first [`HEAD`] bytes (Ethernet, outer IPv6 and the UDP
//!   source port: all a switch reads or rewrites, [`crate::switch`], [`crate::port`]) live in
//!   one dense array, one cache line per frame, and the rest in the frame's buffer. A switch
//!   hop touches one line of that array instead of a line of a separate page per frame (it
//!   was a third of the event loop's cycles at 1024 hosts, on the first header load). The
//!   hosts see the whole frame: [`Pool::seal`] splits what an engine wrote, [`Pool::frame`]
//!   puts the header back in front before an engine reads it.
//! - **Two sizes.** A full buffer (the largest frame) for an engine to write into, and a small
//!   one a short frame (a SACK, an ACK, a probe, a trimmed header) moves into once its length
//!   is known, so it does not hold a full buffer while it crosses the fabric.

/// A frame in the pool.
pub type PacketId = u32;

/// Bytes of a small buffer: a control frame with every SRv6 header fits.
pub const SMALL_CAP: usize = 256;

/// Bytes of a frame kept in the dense header array: Ethernet (14), outer IPv6 (40) and the
/// two bytes after it (an ECMP switch's UDP source port), in one cache line.
pub const HEAD: usize = 64;

/// One frame's first [`HEAD`] bytes, a cache line of its own.
#[derive(Debug, Clone, Copy)]
#[repr(C, align(64))]
struct Head([u8; HEAD]);

/// The pool of frame buffers: full ones of `frame_cap` bytes and small ones of
/// [`SMALL_CAP`], with every frame's first [`HEAD`] bytes apart.
#[derive(Debug)]
pub struct Pool {
    frame_cap: usize,
    /// [`SMALL_CAP`], or `frame_cap` when that is smaller (one size then).
    small_cap: usize,
    /// The bytes of each frame from [`HEAD`] on (the first [`HEAD`] are stale but in
    /// [`Pool::frame`]'s result).
    bufs: Vec<Box<[u8]>>,
    /// The first [`HEAD`] bytes of each frame.
    heads: Vec<Head>,
    lens: Vec<u32>,
    free: Vec<PacketId>,
    free_small: Vec<PacketId>,
    live: usize,
    peak: usize,
}

impl Pool {
    /// An empty pool of buffers of `frame_cap` bytes.
    pub fn new(frame_cap: usize) -> Self {
        Self {
            frame_cap,
            small_cap: SMALL_CAP.min(frame_cap),
            bufs: Vec::new(),
            heads: Vec::new(),
            lens: Vec::new(),
            free: Vec::new(),
            free_small: Vec::new(),
            live: 0,
            peak: 0,
        }
    }

    /// A full buffer of `frame_cap` bytes (contents unspecified) for a writer that
    /// [`seal`](Self::seal)s it afterwards.
    pub fn alloc(&mut self) -> PacketId {
        self.take(self.frame_cap)
    }

    /// A frame holding a copy of `bytes` (at most `frame_cap` long).
    pub fn alloc_copy(&mut self, bytes: &[u8]) -> PacketId {
        let cap = if bytes.len() <= self.small_cap {
            self.small_cap
        } else {
            self.frame_cap
        };
        let id = self.take(cap);
        self.bufs[id as usize][..bytes.len()].copy_from_slice(bytes);
        self.seal_in_place(id, bytes.len());
        id
    }

    fn take(&mut self, cap: usize) -> PacketId {
        self.live += 1;
        self.peak = self.peak.max(self.live);
        let free = if cap == self.frame_cap {
            &mut self.free
        } else {
            &mut self.free_small
        };
        if let Some(id) = free.pop() {
            self.lens[id as usize] = cap as u32;
            return id;
        }
        self.bufs.push(vec![0; cap].into_boxed_slice());
        self.heads.push(Head([0; HEAD]));
        self.lens.push(cap as u32);
        (self.bufs.len() - 1) as PacketId
    }

    /// The whole buffer of a frame from [`alloc`](Self::alloc), for a writer that seals it
    /// afterwards.
    pub fn buffer_mut(&mut self, id: PacketId) -> &mut [u8] {
        &mut self.bufs[id as usize]
    }

    /// A writer put `len` bytes into `id`'s buffer: the frame is those bytes, a short one
    /// moved to a small buffer. Returns its handle.
    #[inline]
    pub fn seal(&mut self, id: PacketId, len: usize) -> PacketId {
        if len <= self.small_cap && self.bufs[id as usize].len() != self.small_cap {
            let small = self.take(self.small_cap);
            let (src, dst) = two(&mut self.bufs, id as usize, small as usize);
            dst[..len].copy_from_slice(&src[..len]);
            self.free(id);
            self.seal_in_place(small, len);
            return small;
        }
        self.seal_in_place(id, len);
        id
    }

    fn seal_in_place(&mut self, id: PacketId, len: usize) {
        assert!(
            len <= self.bufs[id as usize].len(),
            "frame longer than its buffer"
        );
        self.lens[id as usize] = len as u32;
        let n = len.min(HEAD);
        self.heads[id as usize].0[..n].copy_from_slice(&self.bufs[id as usize][..n]);
    }

    /// Give a buffer back.
    pub fn free(&mut self, id: PacketId) {
        debug_assert!(
            !self.free.contains(&id) && !self.free_small.contains(&id),
            "double free of frame {id}"
        );
        self.live -= 1;
        if self.bufs[id as usize].len() == self.small_cap && self.frame_cap != self.small_cap {
            self.free_small.push(id);
        } else {
            self.free.push(id);
        }
    }

    /// The frame's first [`HEAD`] bytes (all of it if shorter): what a switch reads.
    #[inline]
    pub fn head(&self, id: PacketId) -> &[u8] {
        let n = (self.lens[id as usize] as usize).min(HEAD);
        &self.heads[id as usize].0[..n]
    }

    /// The frame's first [`HEAD`] bytes, writable: what a switch rewrites.
    #[inline]
    pub fn head_mut(&mut self, id: PacketId) -> &mut [u8] {
        let n = (self.lens[id as usize] as usize).min(HEAD);
        &mut self.heads[id as usize].0[..n]
    }

    /// The whole frame, its header put back in front.
    pub fn frame(&mut self, id: PacketId) -> &[u8] {
        let len = self.lens[id as usize] as usize;
        let n = len.min(HEAD);
        let buf = &mut self.bufs[id as usize];
        buf[..n].copy_from_slice(&self.heads[id as usize].0[..n]);
        &buf[..len]
    }

    /// Run `f` on the whole frame, writable; `f` returns the frame's new length (at most
    /// the old: a trim), which the pool takes with the bytes.
    pub fn edit<E>(
        &mut self,
        id: PacketId,
        f: impl FnOnce(&mut [u8]) -> Result<usize, E>,
    ) -> Result<usize, E> {
        let len = self.frame(id).len();
        let new = f(&mut self.bufs[id as usize][..len])?.min(len);
        self.seal_in_place(id, new);
        Ok(new)
    }

    /// Frame length in bytes.
    pub fn len(&self, id: PacketId) -> usize {
        self.lens[id as usize] as usize
    }

    /// Frames in use now.
    pub fn live(&self) -> usize {
        self.live
    }

    /// Most frames in use at once.
    pub fn peak(&self) -> usize {
        self.peak
    }

    /// Bytes of every buffer the pool holds (in use or free) and of its tables.
    pub fn heap_bytes(&self) -> usize {
        self.bufs.iter().map(|b| b.len()).sum::<usize>()
            + self.bufs.capacity() * size_of::<Box<[u8]>>()
            + self.heads.capacity() * size_of::<Head>()
            + (self.lens.capacity() + self.free.capacity() + self.free_small.capacity()) * 4
    }

    /// Buffer capacity.
    pub fn frame_cap(&self) -> usize {
        self.frame_cap
    }
}

/// Buffers `a` (read) and `b` (written) of `bufs`, two different ones.
fn two(bufs: &mut [Box<[u8]>], a: usize, b: usize) -> (&[u8], &mut [u8]) {
    debug_assert_ne!(a, b);
    if a < b {
        let (x, y) = bufs.split_at_mut(b);
        (&x[a], &mut y[0])
    } else {
        let (x, y) = bufs.split_at_mut(a);
        (&y[0], &mut x[b])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(p: &mut Pool, bytes: &[u8]) -> PacketId {
        let id = p.alloc();
        p.buffer_mut(id)[..bytes.len()].copy_from_slice(bytes);
        p.seal(id, bytes.len())
    }

    #[test]
    fn buffers_are_recycled() {
        let mut p = Pool::new(1024);
        let long: Vec<u8> = (0..600u32).map(|i| i as u8).collect();
        let a = write(&mut p, &long);
        assert_eq!(p.frame(a), &long[..]);
        p.free(a);
        let b = write(&mut p, &long);
        assert_eq!(a, b, "the freed buffer is reused");
        let _c = p.alloc();
        assert_eq!((p.live(), p.peak()), (2, 2));
    }

    #[test]
    fn short_frames_move_to_small_buffers() {
        let mut p = Pool::new(4096);
        let s = write(&mut p, b"hello");
        assert_eq!(p.frame(s), b"hello");
        assert_eq!(p.live(), 1, "the full buffer went back");
        let full = p.alloc();
        assert_ne!(full, s, "and is reused for the next full frame");
        let long = vec![7u8; SMALL_CAP + 1];
        p.buffer_mut(full)[..long.len()].copy_from_slice(&long);
        assert_eq!(
            p.seal(full, long.len()),
            full,
            "a long frame keeps its buffer"
        );
        p.free(s);
        let t = p.alloc_copy(b"abc");
        assert_eq!(
            (t, p.frame(t)),
            (s, &b"abc"[..]),
            "small buffers are recycled"
        );
        assert!(p.heap_bytes() >= 4096 + SMALL_CAP);
        // A pool whose frames are all short has one size.
        let mut tiny = Pool::new(100);
        let x = write(&mut tiny, &[1; 10]);
        tiny.free(x);
        assert_eq!(tiny.alloc_copy(&[2; 50]), x);
    }

    #[test]
    fn the_header_lives_apart_and_comes_back_in_front() {
        let mut p = Pool::new(4096);
        let bytes: Vec<u8> = (0..1000u32).map(|i| (i * 7) as u8).collect();
        let id = write(&mut p, &bytes);
        assert_eq!(p.head(id), &bytes[..HEAD]);
        // A switch rewrites a header byte; the frame read whole has it.
        p.head_mut(id)[20] ^= 0xff;
        let mut want = bytes.clone();
        want[20] ^= 0xff;
        assert_eq!(p.frame(id), &want[..]);
        // An edit past the header and a trim.
        p.edit(id, |f| {
            f[500] = 1;
            f[3] = 2;
            Ok::<_, ()>(600)
        })
        .unwrap();
        want[500] = 1;
        want[3] = 2;
        assert_eq!(p.head(id), &want[..HEAD]);
        assert_eq!(p.frame(id), &want[..600]);
        // A frame shorter than the header.
        let s = p.alloc_copy(&bytes[..10]);
        assert_eq!((p.head(s), p.len(s)), (&bytes[..10], 10));
        p.head_mut(s)[9] = 0;
        assert_eq!(p.frame(s)[9], 0);
    }
}
