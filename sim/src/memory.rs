//! Registered memory for workloads at scale without storing their bytes: a source region whose
//! bytes are a function of (salt, offset), and a destination region that checks every byte
//! placed into it against the same function and remembers which ranges were written. A
//! thousand hosts moving megabytes each then cost kilobytes, and every byte is still verified.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use mrc_transport::verbs::Memory;

/// The pattern word `index` of `salt`: one multiply, so checking 4 KiB per packet stays cheap;
/// any byte placed at the wrong offset or from the wrong message differs.
fn word(salt: u64, index: u64) -> u64 {
    let z = (salt ^ index.wrapping_mul(0xd6e8_feb8_6659_fd93)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z ^ (z >> 29)
}

/// Fill `dst` with the pattern of `salt` from `offset` on: one mixed 64-bit word per 8 bytes
/// of the region.
pub fn fill_pattern(salt: u64, offset: usize, dst: &mut [u8]) {
    let head = ((8 - offset % 8) % 8).min(dst.len());
    if head > 0 {
        let w = word(salt, (offset / 8) as u64).to_le_bytes();
        let from = offset % 8;
        dst[..head].copy_from_slice(&w[from..from + head]);
    }
    let mut index = offset.div_ceil(8) as u64;
    let mut chunks = dst[head..].chunks_exact_mut(8);
    for c in &mut chunks {
        c.copy_from_slice(&word(salt, index).to_le_bytes());
        index += 1;
    }
    let tail = chunks.into_remainder();
    if !tail.is_empty() {
        let n = tail.len();
        tail.copy_from_slice(&word(salt, index).to_le_bytes()[..n]);
    }
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
        fill_pattern(self.salt, offset, dst);
    }
    fn write(&mut self, _offset: usize, _src: &[u8]) {
        // A source region is never a write target in the workloads.
    }
}

/// What a [`CheckedMemory`] saw.
#[derive(Debug, Default)]
pub struct CheckState {
    /// Written ranges, merged: start -> end.
    ranges: BTreeMap<usize, usize>,
    /// Writes whose bytes differed from the pattern.
    pub corrupt_writes: u64,
    /// Bytes written (duplicates counted again).
    pub bytes_written: u64,
}

impl CheckState {
    fn insert(&mut self, start: usize, end: usize) {
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
        self.ranges.iter().map(|(a, b)| b - a).sum()
    }

    /// `0..len` was written completely.
    pub fn complete(&self, len: usize) -> bool {
        len == 0 || self.ranges.get(&0) == Some(&len)
    }
}

/// A destination region that verifies every write against the pattern of `salt`, shifted by
/// `pattern_offset` (the source offset its byte 0 corresponds to).
#[derive(Debug, Clone)]
pub struct CheckedMemory {
    pub len: usize,
    pub salt: u64,
    pub state: Arc<Mutex<CheckState>>,
    scratch: Vec<u8>,
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
                scratch: Vec::new(),
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
        fill_pattern(self.salt, offset, dst);
    }
    fn write(&mut self, offset: usize, src: &[u8]) {
        self.scratch.resize(src.len(), 0);
        fill_pattern(self.salt, offset, &mut self.scratch);
        let mut st = self.state.lock().expect("check state lock");
        if self.scratch != src {
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
