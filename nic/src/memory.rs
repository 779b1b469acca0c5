//! Registered memory shared between an application thread and the NIC thread.
//!
//! # Why atomics
//!
//! With ibverbs the NIC DMAs into application memory while the application may be reading it;
//! the verbs contract says the contents are defined once the completion has been polled, and a
//! racing read sees whatever is there. Rust's memory model is stricter: two threads touching
//! the same bytes without synchronisation, at least one writing, is a data race and undefined
//! behaviour, even through raw pointers or volatile accesses. So the bytes of a
//! [`MemoryRegion`] live in `AtomicU64` words and every access, on both sides, is atomic. A
//! racing access is then a *race* (the reader may see old bytes, new bytes or a mix) but never
//! a *data race*: the exact ibverbs contract, with no undefined behaviour reachable from safe
//! code.
//!
//! # Two ways to copy, one per build
//!
//! - On x86-64 every access (`read`, `write`, `fill`, the engine's [`Memory`] impl) is a
//!   byte-wise relaxed atomic copy in inline assembly, AVX-512 moves or `rep movsb`
//!   (`memory/racy.rs`, the crate's only `unsafe`, with the soundness argument). It runs at
//!   `memcpy` speed from 4 KiB and at about half of it for short copies; the word loop below
//!   ran at 0.1-0.3x `memcpy` up to 4 KiB, because LLVM does not vectorise atomic loops
//!   (figures in docs/nics.md).
//! - Elsewhere, and in the tests on every target, the safe word loop: relaxed `AtomicU64`
//!   loads and stores of whole words in the middle of a range and a read-modify-write for the
//!   partial words at its ends (another writer may own the bytes around them).
//!
//! The two are never mixed on one build's regions (Rust forbids racing atomic accesses of
//! different sizes on overlapping bytes). Ordering comes from the completion rings either
//! way: the NIC thread pushes a completion (a release operation of the lock-free queue) after
//! the payload stores, the application pops it (acquire) before reading, so every byte of a
//! completed operation is visible to the thread that polled its completion.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
#[cfg_attr(target_arch = "x86_64", cfg(test))]
use std::sync::atomic::Ordering;

use mrc_transport::verbs::Memory;

#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)] // the one fenced module (docs/STYLE.md rule 9)
mod racy;

const WORD: usize = 8;

/// A buffer the application and the NIC thread share: the NIC places received payload into it
/// and reads send payload from it, the application reads and writes it with copies. Cheap to
/// clone (a shared handle).
///
/// Register it with [`NicHandle::reg_mr`](crate::NicHandle::reg_mr). Contents written by a
/// peer are defined once the completion that covers them was polled; contents the NIC sends
/// must not change between `post_send` and its completion (as with ibverbs).
#[derive(Clone)]
pub struct MemoryRegion {
    inner: Arc<Words>,
}

struct Words {
    words: Box<[AtomicU64]>,
    len: usize,
}

impl fmt::Debug for MemoryRegion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryRegion")
            .field("len", &self.len())
            .finish()
    }
}

impl MemoryRegion {
    /// `len` zero bytes.
    pub fn new(len: usize) -> Self {
        let words = (0..len.div_ceil(WORD)).map(|_| AtomicU64::new(0)).collect();
        Self {
            inner: Arc::new(Words { words, len }),
        }
    }

    /// A region holding a copy of `bytes`.
    pub fn from_slice(bytes: &[u8]) -> Self {
        let r = Self::new(bytes.len());
        r.write(0, bytes);
        r
    }

    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.inner.len
    }

    /// Zero bytes long.
    pub fn is_empty(&self) -> bool {
        self.inner.len == 0
    }

    /// Whether `other` is a handle to the same buffer.
    pub fn same_buffer(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// Copies `dst.len()` bytes starting at `offset` into `dst`.
    ///
    /// # Panics
    /// If the range is not inside the region (caller misuse).
    pub fn read(&self, offset: usize, dst: &mut [u8]) {
        self.check(offset, dst.len());
        self.inner.read(offset, dst);
    }

    /// Copies `src` into the region starting at `offset`.
    ///
    /// # Panics
    /// If the range is not inside the region (caller misuse).
    pub fn write(&self, offset: usize, src: &[u8]) {
        self.check(offset, src.len());
        self.inner.write(offset, src);
    }

    /// Sets every byte to `byte`.
    pub fn fill(&self, byte: u8) {
        self.inner.fill(byte);
    }

    /// A copy of the whole region.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = vec![0; self.len()];
        self.inner.read(0, &mut v);
        v
    }

    /// A copy of `len` bytes at `offset`.
    pub fn read_vec(&self, offset: usize, len: usize) -> Vec<u8> {
        let mut v = vec![0; len];
        self.read(offset, &mut v);
        v
    }

    fn check(&self, offset: usize, len: usize) {
        assert!(
            offset.checked_add(len).is_some_and(|end| end <= self.len()),
            "range {offset}+{len} outside a region of {} bytes",
            self.len()
        );
    }
}

/// The copies this build uses: byte-wise asm copies on x86-64, the word loop elsewhere.
#[cfg(target_arch = "x86_64")]
impl Words {
    fn read(&self, offset: usize, dst: &mut [u8]) {
        racy::load(&self.words, offset, dst);
    }

    fn write(&self, offset: usize, src: &[u8]) {
        racy::store(&self.words, offset, src);
    }

    fn fill(&self, byte: u8) {
        racy::fill(&self.words, 0, self.len, byte);
    }
}

#[cfg(not(target_arch = "x86_64"))]
impl Words {
    fn read(&self, offset: usize, dst: &mut [u8]) {
        self.read_words(offset, dst);
    }

    fn write(&self, offset: usize, src: &[u8]) {
        self.write_words(offset, src);
    }

    fn fill(&self, byte: u8) {
        self.fill_words(byte);
    }
}

/// The safe word loop: the copies on targets without `racy`, and the tests' reference on every
/// target (run single-threaded there, so never mixed with the byte-wise copies in a race).
#[cfg_attr(target_arch = "x86_64", cfg(test))]
impl Words {
    /// Byte `i` of the region is byte `i % 8` of `words[i / 8]` in native order, so whole
    /// words move with `to_ne_bytes`/`from_ne_bytes`.
    fn read_words(&self, offset: usize, dst: &mut [u8]) {
        let mut pos = 0; // bytes of `dst` done
        while pos < dst.len() {
            let at = offset + pos;
            let (w, skew) = (at / WORD, at % WORD);
            let bytes = self.words[w].load(Ordering::Relaxed).to_ne_bytes();
            let n = (WORD - skew).min(dst.len() - pos);
            dst[pos..pos + n].copy_from_slice(&bytes[skew..skew + n]);
            pos += n;
            // Whole words from here on (the range's start is now word-aligned).
            if skew + n == WORD {
                let whole = (dst.len() - pos) / WORD;
                for (chunk, word) in dst[pos..pos + whole * WORD]
                    .chunks_exact_mut(WORD)
                    .zip(&self.words[w + 1..w + 1 + whole])
                {
                    chunk.copy_from_slice(&word.load(Ordering::Relaxed).to_ne_bytes());
                }
                pos += whole * WORD;
            }
        }
    }

    fn write_words(&self, offset: usize, src: &[u8]) {
        let mut pos = 0;
        while pos < src.len() {
            let at = offset + pos;
            let (w, skew) = (at / WORD, at % WORD);
            let n = (WORD - skew).min(src.len() - pos);
            if n == WORD {
                // A whole word: one plain store.
                let mut bytes = [0; WORD];
                bytes.copy_from_slice(&src[pos..pos + WORD]);
                self.words[w].store(u64::from_ne_bytes(bytes), Ordering::Relaxed);
            } else {
                // Part of a word: keep the bytes around it (another writer may own them).
                let mut mask = [0_u8; WORD];
                let mut value = [0_u8; WORD];
                mask[skew..skew + n].fill(0xff);
                value[skew..skew + n].copy_from_slice(&src[pos..pos + n]);
                let (mask, value) = (u64::from_ne_bytes(mask), u64::from_ne_bytes(value));
                let _ = self.words[w].fetch_update(Ordering::Relaxed, Ordering::Relaxed, |old| {
                    Some(old & !mask | value)
                });
            }
            pos += n;
            if skew + n == WORD {
                let whole = (src.len() - pos) / WORD;
                for (chunk, word) in src[pos..pos + whole * WORD]
                    .chunks_exact(WORD)
                    .zip(&self.words[w + 1..w + 1 + whole])
                {
                    let mut bytes = [0; WORD];
                    bytes.copy_from_slice(chunk);
                    word.store(u64::from_ne_bytes(bytes), Ordering::Relaxed);
                }
                pos += whole * WORD;
            }
        }
    }

    fn fill_words(&self, byte: u8) {
        let w = u64::from_ne_bytes([byte; WORD]);
        for word in &self.words {
            word.store(w, Ordering::Relaxed);
        }
    }
}

/// The engine's view: the NIC thread holds a clone inside its memory-region table.
impl Memory for MemoryRegion {
    fn len(&self) -> usize {
        self.inner.len
    }

    fn read(&self, offset: usize, dst: &mut [u8]) {
        MemoryRegion::read(self, offset, dst);
    }

    fn write(&mut self, offset: usize, src: &[u8]) {
        MemoryRegion::write(self, offset, src);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(len: usize, salt: u8) -> Vec<u8> {
        (0..len)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(salt))
            .collect()
    }

    #[test]
    fn every_offset_and_length_round_trips_against_a_plain_buffer() {
        const LEN: usize = 53; // not a multiple of the word size
        let region = MemoryRegion::new(LEN);
        let mut model = vec![0_u8; LEN];
        let mut salt = 0_u8;
        for offset in 0..LEN {
            for len in 0..=LEN - offset {
                salt = salt.wrapping_add(1);
                let src = pattern(len, salt);
                region.write(offset, &src);
                model[offset..offset + len].copy_from_slice(&src);
                assert_eq!(region.to_vec(), model, "after writing {offset}+{len}");
                let mut back = vec![0xaa; len];
                region.read(offset, &mut back);
                assert_eq!(back, src, "reading {offset}+{len}");
            }
        }
    }

    /// The two ways to copy: the build's (byte-wise asm on x86-64) and the word loop.
    #[derive(Clone, Copy, Debug)]
    enum Path {
        Build,
        Words,
    }

    impl Path {
        fn other(self) -> Self {
            match self {
                Self::Build => Self::Words,
                Self::Words => Self::Build,
            }
        }

        fn write(self, r: &MemoryRegion, offset: usize, src: &[u8]) {
            r.check(offset, src.len());
            match self {
                Self::Build => r.inner.write(offset, src),
                Self::Words => r.inner.write_words(offset, src),
            }
        }

        fn read(self, r: &MemoryRegion, offset: usize, len: usize) -> Vec<u8> {
            r.check(offset, len);
            let mut v = vec![0xee; len];
            match self {
                Self::Build => r.inner.read(offset, &mut v),
                Self::Words => r.inner.read_words(offset, &mut v),
            }
            v
        }
    }

    #[test]
    fn every_offset_and_length_round_trips_through_both_copies() {
        // Lengths around every partial-word case, and past a page and a jumbo frame.
        let lens = (0..300).chain([4095, 4096, 4097, 9000]);
        let mut salt = 0_u8;
        for path in [Path::Build, Path::Words] {
            for len in lens.clone() {
                for offset in 0..16 {
                    salt = salt.wrapping_add(1);
                    // Bytes around the range (and the padding of the last word) must survive.
                    let total = offset + len + 13;
                    let region = MemoryRegion::new(total);
                    let mut model = pattern(total, 0x5a);
                    path.other().write(&region, 0, &model);
                    let src = pattern(len, salt);
                    path.write(&region, offset, &src);
                    model[offset..offset + len].copy_from_slice(&src);
                    let ctx = format!("{path:?} {offset}+{len}");
                    assert_eq!(path.other().read(&region, 0, total), model, "{ctx}");
                    assert_eq!(path.read(&region, 0, total), model, "{ctx}");
                    assert_eq!(path.read(&region, offset, len), src, "{ctx}");
                    assert_eq!(path.other().read(&region, offset, len), src, "{ctx}");
                }
            }
        }
    }

    #[test]
    fn fill_sets_every_byte_through_both_copies() {
        for len in [0, 1, 7, 8, 9, 63, 4097] {
            let (a, b) = (MemoryRegion::new(len), MemoryRegion::new(len));
            a.fill(0x3c);
            b.inner.fill_words(0x3c);
            assert_eq!(Path::Words.read(&a, 0, len), vec![0x3c; len], "{len}");
            assert_eq!(Path::Build.read(&b, 0, len), vec![0x3c; len], "{len}");
        }
    }

    #[test]
    fn concurrent_writers_of_neighbouring_ranges_keep_each_others_edges() {
        // Two threads own alternating segments of odd lengths, so every segment starts and
        // ends inside a word the other thread writes at the same time.
        let cuts = [0, 3, 8, 19, 20, 37, 41, 64, 70, 99, 128, 131, 200];
        let region = MemoryRegion::new(200);
        const ROUNDS: u32 = 100_000;
        let last = (ROUNDS % 251) as u8;
        let start = std::sync::Barrier::new(2);
        std::thread::scope(|s| {
            for t in 0..2_usize {
                let (r, cuts, start) = (region.clone(), &cuts, &start);
                s.spawn(move || {
                    start.wait();
                    for round in (1..=ROUNDS).map(|n| (n % 251) as u8) {
                        for seg in cuts.windows(2).skip(t).step_by(2) {
                            r.write(seg[0], &vec![round; seg[1] - seg[0]]);
                        }
                        // No one else writes these bytes: a neighbour's write that put back
                        // a stale copy of them would show here as an older round.
                        for seg in cuts.windows(2).skip(t).step_by(2) {
                            let back = r.read_vec(seg[0], seg[1] - seg[0]);
                            assert!(back.iter().all(|&b| b == round), "{seg:?}: {back:?}");
                        }
                    }
                });
            }
        });
        assert_eq!(region.to_vec(), vec![last; 200]);
    }

    #[test]
    fn engine_writes_are_seen_through_every_clone() {
        let app = MemoryRegion::from_slice(b"hello, world");
        let mut nic: Box<dyn Memory> = Box::new(app.clone());
        nic.write(7, b"there");
        assert_eq!(app.to_vec(), b"hello, there");
        let mut out = [0; 5];
        nic.read(0, &mut out);
        assert_eq!(&out, b"hello");
        assert_eq!(nic.len(), 12);
        assert!(nic.as_slice().is_none(), "shared memory is never lent");
        app.fill(b'z');
        assert_eq!(app.read_vec(3, 2), b"zz");
        assert!(app.same_buffer(&app.clone()) && !app.same_buffer(&MemoryRegion::new(12)));
    }

    #[test]
    #[should_panic(expected = "outside a region")]
    fn a_range_past_the_end_is_caller_misuse() {
        MemoryRegion::new(8).read(4, &mut [0; 5]);
    }

    #[test]
    fn concurrent_writers_of_neighbouring_bytes_keep_each_others_bytes() {
        // Two threads write disjoint, interleaved byte ranges that share words; partial-word
        // writes must not clobber the other thread's bytes.
        let region = MemoryRegion::new(64);
        std::thread::scope(|s| {
            for t in 0..2_u8 {
                let r = region.clone();
                s.spawn(move || {
                    for round in 0..2000_u32 {
                        for i in (usize::from(t)..64).step_by(2) {
                            r.write(i, &[t * 100 + (round % 50) as u8]);
                        }
                    }
                });
            }
        });
        let v = region.to_vec();
        for (i, &b) in v.iter().enumerate() {
            assert_eq!(b, (i % 2) as u8 * 100 + 49, "byte {i}");
        }
    }
}
