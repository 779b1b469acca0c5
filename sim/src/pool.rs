//! Frame buffers, recycled: a frame is a `u32` handle into the pool; buffers freed by a drop,
//! a trim or a delivery go back on spare lists, so a run in steady state allocates nothing
//! per packet.
//!
//! Laid out for a fabric of a thousand hosts and more (issue #14), where ~100 000 frames are
//! in flight at once and the simulator would otherwise spend its time and memory on them:
//!
//! - **The headers apart.** A frame's first [`HEAD`] bytes (Ethernet, outer IPv6 and the UDP
//!   source port: all a switch reads or rewrites, [`crate::switch`], [`crate::port`]) live in
//!   one dense array, one cache line per frame with its length, and the rest in the frame's body. A switch
//!   hop touches one line of that array instead of a line of a separate page per frame (it
//!   was a third of the event loop's cycles at 1024 hosts, on the first header load). The
//!   hosts see the whole frame: [`Pool::seal`] splits what an engine wrote, [`Pool::frame`]
//!   puts the header back in front before an engine reads it.
//! - **Payloads not kept.** An engine writes every frame into one scratch buffer. A data
//!   frame whose payload is a workload's pattern ([`crate::memory::PatternMemory`], read by
//!   the engine straight into that buffer) keeps only its headers and ICRC and where the
//!   pattern goes; [`Pool::frame`] writes the pattern back when a host reads the frame. The
//!   bytes a host sees are the bytes the engine wrote, every one still checked at the
//!   destination, and a frame crossing the fabric costs a small buffer instead of a full one
//!   (a 1024-host permutation held 450 MB of payloads in flight).
//! - **Two sizes.** A full body (the largest frame) for a frame that has to keep its bytes,
//!   and a small one for a short frame (a SACK, an ACK, a probe, a trimmed header) and for
//!   the headers of a pattern frame.

use crate::memory::{PatternRead, fill_pattern};

/// A frame in the pool.
pub type PacketId = u32;

/// Bytes of a small buffer: a control frame with every SRv6 header fits.
pub const SMALL_CAP: usize = 256;

/// Bytes of a frame kept in the dense header array: Ethernet (14), outer IPv6 (40) and the
/// two bytes after it (an ECMP switch's UDP source port), with the frame's length in one
/// cache line.
pub const HEAD: usize = 60;

/// One frame's first [`HEAD`] bytes and its length, a cache line of its own: a switch hop
/// and a port's admission read both with one miss (the lengths in an array of their own
/// were a second one per hop at 4096 hosts).
#[derive(Debug, Clone, Copy)]
#[repr(C, align(64))]
struct Head {
    bytes: [u8; HEAD],
    len: u32,
}

/// Where a frame's bytes are, from [`HEAD`] on (the first [`HEAD`] bytes of a body are stale:
/// the header array has them).
#[derive(Debug)]
enum Body {
    /// None yet (a free slot).
    Empty,
    /// The frame's bytes.
    Bytes(Box<[u8]>),
    /// Bytes `at..at + n` are the pattern of `salt` from `offset`; `rest` holds the bytes
    /// before them and, from `at` on, the bytes after them.
    Pattern {
        rest: Box<[u8]>,
        at: u16,
        n: u16,
        salt: u64,
        offset: u64,
    },
}

/// The pool of frames: bodies of `frame_cap` bytes and of [`SMALL_CAP`], every frame's
/// first [`HEAD`] bytes apart, and one scratch buffer engines write into.
#[derive(Debug)]
pub struct Pool {
    frame_cap: usize,
    /// [`SMALL_CAP`], or `frame_cap` when that is smaller (one size then).
    small_cap: usize,
    /// The first [`HEAD`] bytes and the length of each frame.
    heads: Vec<Head>,
    bodies: Vec<Body>,
    /// Slots with no frame.
    free: Vec<PacketId>,
    /// Bodies no frame uses, full and small.
    spare: Vec<Box<[u8]>>,
    spare_small: Vec<Box<[u8]>>,
    /// Where an engine writes a frame and a pattern frame is rebuilt for a host.
    scratch: Box<[u8]>,
    live: usize,
    peak: usize,
}

impl Pool {
    /// An empty pool for frames of at most `frame_cap` bytes.
    pub fn new(frame_cap: usize) -> Self {
        Self {
            frame_cap,
            small_cap: SMALL_CAP.min(frame_cap),
            heads: Vec::new(),
            bodies: Vec::new(),
            free: Vec::new(),
            spare: Vec::new(),
            spare_small: Vec::new(),
            scratch: vec![0; frame_cap].into_boxed_slice(),
            live: 0,
            peak: 0,
        }
    }

    /// The scratch buffer of `frame_cap` bytes (contents unspecified), for a writer that
    /// [`seal`](Self::seal)s what it wrote.
    pub fn scratch_mut(&mut self) -> &mut [u8] {
        &mut self.scratch
    }

    /// A writer put `len` bytes into the scratch buffer: they become a frame. `read`: the
    /// last pattern read on this thread ([`crate::memory::take_pattern_read`]); when it
    /// wrote into those bytes, the frame keeps where the pattern goes instead of its bytes.
    pub fn seal(&mut self, len: usize, read: Option<PatternRead>) -> PacketId {
        assert!(
            len <= self.frame_cap,
            "frame longer than the pool's buffers"
        );
        let id = self.slot();
        let span = read.and_then(|r| {
            let at = r.addr.checked_sub(self.scratch.as_ptr() as usize)?;
            let after = len.checked_sub(at)?.checked_sub(r.len)?;
            (at >= HEAD && at + after <= self.small_cap && u16::try_from(r.len).is_ok())
                .then_some((at, r))
        });
        match span {
            Some((at, r)) => {
                let (n, after) = (r.len, len - at - r.len);
                debug_assert!(
                    crate::memory::is_pattern(r.salt, r.offset, &self.scratch[at..at + n]),
                    "a pattern read's bytes were overwritten"
                );
                let mut rest = self.body(self.small_cap);
                rest[HEAD..at].copy_from_slice(&self.scratch[HEAD..at]);
                rest[at..at + after].copy_from_slice(&self.scratch[at + n..len]);
                self.bodies[id as usize] = Body::Pattern {
                    rest,
                    at: at as u16,
                    n: n as u16,
                    salt: r.salt,
                    offset: r.offset as u64,
                };
                self.set_head(id, len);
            }
            None => self.keep_scratch(id, len),
        }
        id
    }

    /// A frame holding a copy of `bytes` (at most `frame_cap` long).
    pub fn alloc_copy(&mut self, bytes: &[u8]) -> PacketId {
        self.scratch[..bytes.len()].copy_from_slice(bytes);
        self.seal(bytes.len(), None)
    }

    /// A free slot, its body empty.
    fn slot(&mut self) -> PacketId {
        self.live += 1;
        self.peak = self.peak.max(self.live);
        if let Some(id) = self.free.pop() {
            return id;
        }
        self.heads.push(Head {
            bytes: [0; HEAD],
            len: 0,
        });
        self.bodies.push(Body::Empty);
        (self.bodies.len() - 1) as PacketId
    }

    /// A body of `cap` bytes ([`SMALL_CAP`] or `frame_cap`), spare or new.
    fn body(&mut self, cap: usize) -> Box<[u8]> {
        let spare = if cap == self.small_cap {
            &mut self.spare_small
        } else {
            &mut self.spare
        };
        spare
            .pop()
            .unwrap_or_else(|| vec![0; cap].into_boxed_slice())
    }

    /// Give a body back to its spare list.
    fn unbody(&mut self, id: PacketId) {
        let b = match core::mem::replace(&mut self.bodies[id as usize], Body::Empty) {
            Body::Empty => return,
            Body::Bytes(b) | Body::Pattern { rest: b, .. } => b,
        };
        if b.len() == self.small_cap {
            self.spare_small.push(b);
        } else {
            self.spare.push(b);
        }
    }

    /// Frame `id` is the scratch buffer's first `len` bytes, kept whole in a body of the
    /// size it needs.
    fn keep_scratch(&mut self, id: PacketId, len: usize) {
        let cap = if len <= self.small_cap {
            self.small_cap
        } else {
            self.frame_cap
        };
        let mut b = self.body(cap);
        let from = HEAD.min(len);
        b[from..len].copy_from_slice(&self.scratch[from..len]);
        self.bodies[id as usize] = Body::Bytes(b);
        self.set_head(id, len);
    }

    /// The frame's length and header from the scratch buffer.
    fn set_head(&mut self, id: PacketId, len: usize) {
        let h = &mut self.heads[id as usize];
        h.len = len as u32;
        let n = len.min(HEAD);
        h.bytes[..n].copy_from_slice(&self.scratch[..n]);
    }

    /// Give a frame back.
    pub fn free(&mut self, id: PacketId) {
        debug_assert!(
            !matches!(self.bodies[id as usize], Body::Empty),
            "double free of frame {id}"
        );
        self.unbody(id);
        self.live -= 1;
        self.free.push(id);
    }

    /// The frame's first [`HEAD`] bytes (all of it if shorter): what a switch reads.
    #[inline]
    pub fn head(&self, id: PacketId) -> &[u8] {
        let h = &self.heads[id as usize];
        &h.bytes[..(h.len as usize).min(HEAD)]
    }

    /// The frame's first [`HEAD`] bytes, writable: what a switch rewrites.
    #[inline]
    pub fn head_mut(&mut self, id: PacketId) -> &mut [u8] {
        let h = &mut self.heads[id as usize];
        &mut h.bytes[..(h.len as usize).min(HEAD)]
    }

    /// The whole frame, its header put back in front (a pattern frame rebuilt in the scratch
    /// buffer).
    pub fn frame(&mut self, id: PacketId) -> &[u8] {
        let len = self.heads[id as usize].len as usize;
        let n = len.min(HEAD);
        let head = &self.heads[id as usize].bytes[..n];
        match &mut self.bodies[id as usize] {
            Body::Empty => unreachable!("frame {id} is free"),
            Body::Bytes(b) => {
                b[..n].copy_from_slice(head);
                &b[..len]
            }
            Body::Pattern {
                rest,
                at,
                n: span,
                salt,
                offset,
            } => {
                let (at, span) = (usize::from(*at), usize::from(*span));
                let out = &mut self.scratch[..len];
                out[..n].copy_from_slice(head);
                out[n..at].copy_from_slice(&rest[n..at]);
                fill_pattern(*salt, *offset as usize, &mut out[at..at + span]);
                out[at + span..].copy_from_slice(&rest[at..len - span]);
                out
            }
        }
    }

    /// Run `f` on the whole frame, writable; `f` returns the frame's new length (at most
    /// the old: a trim), which the pool takes with the bytes, in a small body when the frame
    /// became short. A pattern frame keeps its bytes from then on.
    pub fn edit<E>(
        &mut self,
        id: PacketId,
        f: impl FnOnce(&mut [u8]) -> Result<usize, E>,
    ) -> Result<usize, E> {
        let len = self.frame(id).len();
        if let Body::Bytes(b) = &mut self.bodies[id as usize]
            && b.len() == self.small_cap
        {
            // Whole already, in a body of the size it keeps at any new length.
            let new = f(&mut b[..len])?.min(len);
            let h = &mut self.heads[id as usize];
            h.bytes[..new.min(HEAD)].copy_from_slice(&b[..new.min(HEAD)]);
            h.len = new as u32;
            return Ok(new);
        }
        if let Body::Bytes(b) = &self.bodies[id as usize] {
            self.scratch[..len].copy_from_slice(&b[..len]);
        }
        let new = f(&mut self.scratch[..len])?.min(len);
        self.unbody(id);
        self.keep_scratch(id, new);
        Ok(new)
    }

    /// Frame length in bytes.
    pub fn len(&self, id: PacketId) -> usize {
        self.heads[id as usize].len as usize
    }

    /// Frames in use now.
    pub fn live(&self) -> usize {
        self.live
    }

    /// Most frames in use at once.
    pub fn peak(&self) -> usize {
        self.peak
    }

    /// Bytes of every body the pool holds (in use or spare) and of its tables.
    pub fn heap_bytes(&self) -> usize {
        let bodies = self
            .bodies
            .iter()
            .map(|b| match b {
                Body::Empty => 0,
                Body::Bytes(b) | Body::Pattern { rest: b, .. } => b.len(),
            })
            .sum::<usize>();
        let spare = self.spare.len() * self.frame_cap + self.spare_small.len() * self.small_cap;
        bodies
            + spare
            + self.scratch.len()
            + self.bodies.capacity() * size_of::<Body>()
            + self.heads.capacity() * size_of::<Head>()
            + (self.spare.capacity() + self.spare_small.capacity()) * size_of::<Box<[u8]>>()
            + self.free.capacity() * 4
    }

    /// Buffer capacity.
    pub fn frame_cap(&self) -> usize {
        self.frame_cap
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::{PatternMemory, take_pattern_read};
    use mrc_transport::verbs::Memory;

    fn write(p: &mut Pool, bytes: &[u8]) -> PacketId {
        p.scratch_mut()[..bytes.len()].copy_from_slice(bytes);
        p.seal(bytes.len(), None)
    }

    /// A frame as an engine writes one: `hdr` header bytes, `n` bytes of the pattern of
    /// `salt` from `offset` read into it, a 4-byte trailer. Returns the frame and its bytes.
    fn pattern_frame(
        p: &mut Pool,
        hdr: usize,
        n: usize,
        salt: u64,
        offset: usize,
    ) -> (PacketId, Vec<u8>) {
        let buf = p.scratch_mut();
        for (i, b) in buf[..hdr].iter_mut().enumerate() {
            *b = i as u8;
        }
        take_pattern_read();
        PatternMemory { len: 1 << 20, salt }.read(offset, &mut buf[hdr..hdr + n]);
        buf[hdr + n..hdr + n + 4].copy_from_slice(b"ICRC");
        let bytes = buf[..hdr + n + 4].to_vec();
        (p.seal(bytes.len(), take_pattern_read()), bytes)
    }

    #[test]
    fn buffers_are_recycled() {
        let mut p = Pool::new(1024);
        let long: Vec<u8> = (0..600u32).map(|i| i as u8).collect();
        let a = write(&mut p, &long);
        assert_eq!(p.frame(a), &long[..]);
        p.free(a);
        let held = p.heap_bytes();
        let b = write(&mut p, &long);
        assert_eq!(a, b, "the freed slot is reused");
        assert_eq!(p.heap_bytes(), held, "and its body");
        let _c = write(&mut p, b"x");
        assert_eq!((p.live(), p.peak()), (2, 2));
    }

    #[test]
    fn short_frames_take_small_bodies() {
        let mut p = Pool::new(4096);
        let s = write(&mut p, b"hello");
        assert_eq!(p.frame(s), b"hello");
        assert!(
            p.heap_bytes() < 4096 + 2 * SMALL_CAP + 1024,
            "no full body held"
        );
        let long = vec![7u8; SMALL_CAP + 1];
        let l = write(&mut p, &long);
        assert_eq!(p.frame(l), &long[..]);
        assert!(p.heap_bytes() >= 2 * 4096 + SMALL_CAP);
        p.free(s);
        let t = p.alloc_copy(b"abc");
        assert_eq!(
            (t, p.frame(t)),
            (s, &b"abc"[..]),
            "small bodies are recycled"
        );
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
        // Trimmed short, it moves to a small body.
        p.edit(id, |_| Ok::<_, ()>(100)).unwrap();
        assert_eq!(p.frame(id), &want[..100]);
        // A frame shorter than the header.
        let s = p.alloc_copy(&bytes[..10]);
        assert_eq!((p.head(s), p.len(s)), (&bytes[..10], 10));
        p.head_mut(s)[9] = 0;
        assert_eq!(p.frame(s)[9], 0);
    }

    #[test]
    fn a_pattern_payload_is_not_kept_and_comes_back_byte_for_byte() {
        let mut p = Pool::new(4300);
        let (a, bytes) = pattern_frame(&mut p, 120, 4096, 9, 12_345);
        let (b, other) = pattern_frame(&mut p, 100, 1000, 3, 7);
        assert!(
            p.heap_bytes() < 4300 + 2 * SMALL_CAP + 1024,
            "two payloads in flight, no full body: {}",
            p.heap_bytes()
        );
        assert_eq!(p.len(a), bytes.len());
        assert_eq!(p.head(a), &bytes[..HEAD]);
        // The scratch buffer is written over by the next frame; the frame still comes back.
        assert_eq!(p.frame(b), &other[..]);
        assert_eq!(p.frame(a), &bytes[..]);
        // A switch's rewrite of the header shows; so does a corrupted payload byte, which
        // keeps the frame's bytes from then on.
        p.head_mut(a)[15] ^= 0x40;
        let mut want = bytes.clone();
        want[15] ^= 0x40;
        assert_eq!(p.frame(a), &want[..]);
        p.edit(a, |f| {
            f[2000] ^= 1;
            Ok::<_, ()>(f.len())
        })
        .unwrap();
        want[2000] ^= 1;
        assert_eq!(p.frame(a), &want[..]);
        // A trim of a pattern frame.
        p.edit(b, |_| Ok::<_, ()>(90)).unwrap();
        assert_eq!(p.frame(b), &other[..90]);
        p.free(a);
        p.free(b);
        assert_eq!(p.live(), 0);
    }

    #[test]
    fn a_read_elsewhere_or_headers_too_long_keep_the_bytes() {
        let mut p = Pool::new(4300);
        // The read went into another buffer, then was copied in.
        let mut elsewhere = vec![0u8; 512];
        PatternMemory { len: 4096, salt: 1 }.read(0, &mut elsewhere);
        p.scratch_mut()[..512].copy_from_slice(&elsewhere);
        let held = p.heap_bytes();
        let a = p.seal(512, take_pattern_read());
        assert!(p.heap_bytes() >= held + 4300, "kept whole");
        assert_eq!(p.frame(a), &elsewhere[..]);
        // Headers and trailer together over a small body.
        let (b, bytes) = pattern_frame(&mut p, SMALL_CAP, 1000, 2, 0);
        assert_eq!(p.frame(b), &bytes[..]);
        // A read over the first HEAD bytes.
        let (c, bytes) = pattern_frame(&mut p, 10, 1000, 2, 0);
        assert_eq!(p.frame(c), &bytes[..]);
    }
}
