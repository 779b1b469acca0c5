//! Registered memory for workloads at scale without storing their bytes: a source region whose
//! bytes are a function of (salt, offset), and a destination region that checks every byte
//! placed into it against the same function and remembers which ranges were written. A
//! thousand hosts moving megabytes each then cost kilobytes, and every byte is still verified.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use mrc_transport::verbs::Memory;

/// The mixed value of 64-byte block `block` of `salt`: two multiplies per block.
fn block(salt: u64, block: u64) -> u64 {
    let z = (salt ^ block.wrapping_mul(0xd6e8_feb8_6659_fd93)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z ^ (z >> 29)
}

/// What each of a block's eight words adds to the block's value: distinct odd constants, so a
/// word placed one lane off differs too.
const LANES: [u64; 8] = [
    0x243f_6a88_85a3_08d3,
    0x1319_8a2e_0370_7345,
    0xa409_3822_299f_31d1,
    0x082e_fa98_ec4e_6c89,
    0x4528_21e6_38d0_1377,
    0xbe54_66cf_34e9_0c6d,
    0xc0ac_29b7_c97c_50dd,
    0x3f84_d5b5_b547_0917,
];

/// The pattern word `index` of `salt`: its block's value plus its lane's constant. Any byte
/// placed at the wrong offset or from the wrong message differs, and whole blocks are built
/// with one block value and eight adds (checking 4 KiB per packet at both ends was a tenth of
/// a 1024-host run's cycles with two multiplies per word; issue #14).
fn word(salt: u64, index: u64) -> u64 {
    block(salt, index >> 3).wrapping_add(LANES[(index & 7) as usize])
}

/// Fill `dst` with the pattern of `salt` from `offset` on: one 64-bit word per 8 bytes of the
/// region.
pub fn fill_pattern(salt: u64, offset: usize, dst: &mut [u8]) {
    let head = ((8 - offset % 8) % 8).min(dst.len());
    if head > 0 {
        let w = word(salt, (offset / 8) as u64).to_le_bytes();
        let from = offset % 8;
        dst[..head].copy_from_slice(&w[from..from + head]);
    }
    let mut index = offset.div_ceil(8) as u64;
    let mut rest = &mut dst[head..];
    // Words up to a block boundary, whole blocks, then the words and bytes left.
    while !index.is_multiple_of(8) && rest.len() >= 8 {
        let (w, r) = core::mem::take(&mut rest).split_at_mut(8);
        w.copy_from_slice(&word(salt, index).to_le_bytes());
        rest = r;
        index += 1;
    }
    let mut blocks = rest.chunks_exact_mut(64);
    for b in &mut blocks {
        let m = block(salt, index >> 3);
        for (w, lane) in b.chunks_exact_mut(8).zip(LANES) {
            w.copy_from_slice(&m.wrapping_add(lane).to_le_bytes());
        }
        index += 8;
    }
    let mut words = blocks.into_remainder().chunks_exact_mut(8);
    for c in &mut words {
        c.copy_from_slice(&word(salt, index).to_le_bytes());
        index += 1;
    }
    let tail = words.into_remainder();
    if !tail.is_empty() {
        let n = tail.len();
        tail.copy_from_slice(&word(salt, index).to_le_bytes()[..n]);
    }
}

/// The little-endian words of `b` (its whole ones).
fn words(b: &[u8]) -> impl Iterator<Item = u64> + '_ {
    b.chunks_exact(8)
        .map(|w| u64::from_le_bytes(w.try_into().unwrap_or_default()))
}

/// Whether `src` is the pattern of `salt` from `offset` on: [`fill_pattern`] 64 bytes at a
/// time into a stack block, compared.
pub fn is_pattern(salt: u64, offset: usize, src: &[u8]) -> bool {
    let mut want = [0u8; 64];
    src.chunks(64).enumerate().all(|(k, got)| {
        fill_pattern(salt, offset + 64 * k, &mut want[..got.len()]);
        // Word by word into one difference: vector compares inline, no memcmp call per
        // block (it was 8 % of a 1024-host run).
        let diff = words(&want[..got.len()])
            .zip(words(got))
            .fold(0, |d, (a, b)| d | (a ^ b));
        let tail = got.len() / 8 * 8;
        diff == 0 && want[tail..got.len()] == got[tail..]
    })
}

/// Where a [`PatternMemory`] read put its bytes, for the frame pool ([`crate::pool`]): a
/// data frame whose payload an engine read straight into the frame keeps where the pattern
/// goes instead of its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PatternRead {
    /// Address of the first byte written.
    pub addr: usize,
    pub len: usize,
    pub salt: u64,
    /// Offset in the region (the pattern's offset).
    pub offset: usize,
}

thread_local! {
    /// The last pattern read on this thread. The simulator runs its engines on its own
    /// thread, one call at a time, so the read an engine did while writing a frame is the
    /// last one here when the frame comes back.
    static LAST_READ: Cell<Option<PatternRead>> = const { Cell::new(None) };
}

/// The last pattern read on this thread since the last call, taken.
pub fn take_pattern_read() -> Option<PatternRead> {
    LAST_READ.take()
}

/// Fill `dst` with the pattern and note where it went.
fn read_pattern(salt: u64, offset: usize, dst: &mut [u8]) {
    fill_pattern(salt, offset, dst);
    LAST_READ.set(Some(PatternRead {
        addr: dst.as_ptr() as usize,
        len: dst.len(),
        salt,
        offset,
    }));
}

/// A read-only source region of `len` pattern bytes.
#[derive(Debug, Clone, Copy)]
pub struct PatternMemory {
    pub len: usize,
    pub salt: u64,
}

impl Memory for PatternMemory {
    fn len(&self) -> usize {
        self.len
    }
    fn read(&self, offset: usize, dst: &mut [u8]) {
        read_pattern(self.salt, offset, dst);
    }
    fn write(&mut self, _offset: usize, _src: &[u8]) {
        // A source region is never a write target in the workloads.
    }
}

/// What a [`CheckedMemory`] saw.
#[derive(Debug, Default)]
pub struct CheckState {
    /// Every byte below it was written: writes arrive mostly in order, and one that extends
    /// this prefix costs a comparison, not a tree update.
    prefix: usize,
    /// Written ranges past the prefix, merged and apart from it: start -> end.
    ranges: BTreeMap<usize, usize>,
    /// Writes whose bytes differed from the pattern.
    pub corrupt_writes: u64,
    /// Bytes written (duplicates counted again).
    pub bytes_written: u64,
}

impl CheckState {
    fn insert(&mut self, start: usize, end: usize) {
        if start <= self.prefix {
            self.prefix = self.prefix.max(end);
            // Ranges the prefix reached join it.
            while let Some(e) = self.ranges.first_entry() {
                if *e.key() > self.prefix {
                    break;
                }
                let (_, b) = e.remove_entry();
                self.prefix = self.prefix.max(b);
            }
            return;
        }
        let (mut s, mut e) = (start, end);
        // Merge with every overlapping or touching range.
        let before = self.ranges.range(..=s).next_back().map(|(&a, &b)| (a, b));
        if let Some((a, b)) = before
            && b >= s
        {
            s = a;
            e = e.max(b);
            self.ranges.remove(&a);
        }
        while let Some((&a, &b)) = self.ranges.range(s..=e).next() {
            e = e.max(b);
            self.ranges.remove(&a);
        }
        self.ranges.insert(s, e);
    }

    /// Bytes covered by at least one write.
    pub fn covered(&self) -> usize {
        self.prefix + self.ranges.iter().map(|(a, b)| b - a).sum::<usize>()
    }

    /// `0..len` was written completely.
    pub fn complete(&self, len: usize) -> bool {
        len == 0 || (self.prefix == len && self.ranges.is_empty())
    }
}

/// A destination region that verifies every write against the pattern of `salt`, shifted by
/// `pattern_offset` (the source offset its byte 0 corresponds to).
#[derive(Debug, Clone)]
pub struct CheckedMemory {
    pub len: usize,
    pub salt: u64,
    pub state: Arc<Mutex<CheckState>>,
}

impl CheckedMemory {
    /// A region of `len` bytes expecting the pattern of `salt`; keep `state` to check it.
    pub fn new(len: usize, salt: u64) -> (Self, Arc<Mutex<CheckState>>) {
        let state = Arc::new(Mutex::new(CheckState::default()));
        (
            Self {
                len,
                salt,
                state: state.clone(),
            },
            state,
        )
    }
}

impl Memory for CheckedMemory {
    fn len(&self) -> usize {
        self.len
    }
    fn read(&self, offset: usize, dst: &mut [u8]) {
        // What the region holds once written: the pattern.
        read_pattern(self.salt, offset, dst);
    }
    fn write(&mut self, offset: usize, src: &[u8]) {
        let intact = is_pattern(self.salt, offset, src);
        let mut st = self.state.lock().expect("check state lock");
        if !intact {
            st.corrupt_writes += 1;
        }
        st.bytes_written += src.len() as u64;
        if !src.is_empty() {
            st.insert(offset, offset + src.len());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pattern_is_offset_consistent() {
        let mut whole = [0u8; 64];
        fill_pattern(9, 0, &mut whole);
        let mut part = [0u8; 13];
        fill_pattern(9, 21, &mut part);
        assert_eq!(&whole[21..34], &part);
        let mut other = [0u8; 64];
        fill_pattern(10, 0, &mut other);
        assert_ne!(whole, other);
    }

    #[test]
    fn every_byte_is_its_words_byte_whatever_the_offset_and_length() {
        for offset in 0..80 {
            for len in 0..200 {
                let mut got = vec![0u8; len];
                fill_pattern(3, offset, &mut got);
                for (i, &b) in got.iter().enumerate() {
                    let p = offset + i;
                    assert_eq!(
                        b,
                        word(3, (p / 8) as u64).to_le_bytes()[p % 8],
                        "{offset} {len} {i}"
                    );
                }
            }
        }
    }

    #[test]
    fn is_pattern_is_fill_pattern_compared() {
        let mut whole = [0u8; 100];
        fill_pattern(7, 3, &mut whole);
        for start in 0..40 {
            for len in 0..60 {
                let part = &whole[start..start + len];
                assert!(is_pattern(7, 3 + start, part));
                assert_eq!(is_pattern(8, 3 + start, part), len == 0);
                if len > 0 {
                    assert!(!is_pattern(7, 4 + start, part), "shifted by one byte");
                    for at in 0..len {
                        let mut bad = part.to_vec();
                        bad[at] ^= 0x40;
                        assert!(!is_pattern(7, 3 + start, &bad), "{start} {len} {at}");
                    }
                }
            }
        }
    }

    #[test]
    fn coverage_in_any_order() {
        // Writes of a 64-byte region in every order of eight 8-byte pieces a permutation
        // walk gives, some overlapping: covered and complete agree with a byte map.
        let mut rng = 12345u64;
        for _ in 0..500 {
            let mut st = CheckState::default();
            let mut map = [false; 64];
            for _ in 0..12 {
                rng = rng
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let s = (rng >> 33) as usize % 64;
                let e = (s + 1 + (rng >> 50) as usize % 16).min(64);
                st.insert(s, e);
                map[s..e].iter_mut().for_each(|b| *b = true);
                assert_eq!(st.covered(), map.iter().filter(|b| **b).count());
                assert_eq!(st.complete(64), map.iter().all(|b| *b));
            }
        }
    }

    #[test]
    fn checked_memory_merges_ranges_and_catches_corruption() {
        let (mut m, st) = CheckedMemory::new(100, 5);
        let src = PatternMemory { len: 100, salt: 5 };
        let mut buf = vec![0u8; 100];
        src.read(0, &mut buf);
        m.write(50, &buf[50..100]);
        m.write(0, &buf[0..20]);
        assert!(!st.lock().unwrap().complete(100));
        m.write(20, &buf[20..50]);
        m.write(10, &buf[10..30]);
        {
            let s = st.lock().unwrap();
            assert!(s.complete(100));
            assert_eq!(s.covered(), 100);
            assert_eq!(s.corrupt_writes, 0);
        }
        let mut bad = buf[0..8].to_vec();
        bad[3] ^= 1;
        m.write(0, &bad);
        assert_eq!(st.lock().unwrap().corrupt_writes, 1);
    }
}
