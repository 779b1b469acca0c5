//! The data a benchmark run writes into its input buffers and expects in its outputs (`-c 1`,
//! as nccl-tests checks): every rank's input is a function of (seed, rank, element), the
//! expected output is computed from the inputs of every rank in the order the ring combines
//! them, and an element is wrong unless it is bit-identical to the expected one.
//!
//! Values are small integers in every type (so sums stay exact where they can and products
//! stay finite for a while), drawn per operator: sums from -8..=8, products mostly 1 with some
//! 2s, max and min over a wider range. Unsigned types take the absolute value.
//!
//! [`Granularity`] says how often the value changes: per element (the strongest check), or
//! per (block of `g` bytes, position in an 8-byte word), so that a region holding a 256 MB
//! buffer can be stored as one word per block by the simulator's compact memory (see
//! [`crate::memory`]). A block pattern still catches any byte placed at another block or
//! another position in its word.

use crate::dtype::{DataType, RedOp};
use crate::reduce;

/// How often the input pattern changes along a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Granularity {
    /// Every element has its own value.
    Element,
    /// One value per (block of this many bytes, element position in its 8-byte word): each
    /// block is one repeated 8-byte word. A power of two, at least 8.
    Block(u32),
}

/// The input pattern of one operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pattern {
    pub dtype: DataType,
    /// The operator the values are drawn for (`None`: no reduction, any values).
    pub op: Option<RedOp>,
    /// Changes with the run (nccl-tests' `rep`), so stale data from an earlier run is wrong.
    pub seed: u64,
    pub granularity: Granularity,
}

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Pattern {
    /// The key of element `index` (elements with one key hold one value).
    pub fn key(&self, index: u64) -> u64 {
        match self.granularity {
            Granularity::Element => index,
            Granularity::Block(g) => {
                let size = self.dtype.size() as u64;
                let byte = index * size;
                (byte / u64::from(g)) * (8 / size) + (byte % 8) / size
            }
        }
    }

    /// The value (bit pattern) of key `key` of `rank`'s input, where `base` is the element
    /// index at which the rank's logical input starts (so a block of rank `p`'s buffer keeps
    /// its values wherever it is copied to).
    pub fn value_of_key(&self, rank: usize, key: u64) -> u64 {
        let h = mix(self.seed
            ^ (rank as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)
            ^ key.wrapping_mul(0xd6e8_feb8_6659_fd93));
        small_value(self.dtype, self.op, h)
    }

    /// The value (bit pattern) of element `index` of `rank`'s input.
    pub fn value(&self, rank: usize, index: u64) -> u64 {
        self.value_of_key(rank, self.key(index))
    }

    /// Writes elements `first..first + out.len() / size` of `rank`'s input into `out`.
    pub fn fill(&self, rank: usize, first: u64, out: &mut [u8]) {
        let size = self.dtype.size();
        let mut cache = KeyCache::default();
        for (i, e) in out.chunks_exact_mut(size).enumerate() {
            let key = self.key(first + i as u64);
            let v = cache.get(key, || self.value_of_key(rank, key));
            e.copy_from_slice(&v.to_le_bytes()[..size]);
        }
    }

    /// The reduction over every rank of element `index`, combined in the ring's order for an
    /// element owned by `owner` (ranks `owner + 1`, `owner + 2`, … , `owner`), with `avg`'s
    /// division at the end.
    pub fn reduced(&self, nranks: usize, owner: usize, index: u64) -> u64 {
        self.reduced_key(nranks, owner, self.key(index))
    }

    fn reduced_key(&self, nranks: usize, owner: usize, key: u64) -> u64 {
        let op = self.op.expect("a reduction pattern");
        let order = (1..=nranks).map(|k| (owner + k) % nranks);
        let v = reduce::fold(self.dtype, op, order.map(|r| self.value_of_key(r, key)))
            .expect("at least one rank");
        if op == RedOp::Avg {
            reduce::divide_bits(self.dtype, v, nranks as u32)
        } else {
            v
        }
    }
}

/// The last value of each of a few keys: consecutive elements cycle through at most 8 keys
/// in a block pattern, and one key in an element pattern.
#[derive(Debug, Default)]
pub struct KeyCache {
    slots: [(u64, u64); 8],
    valid: u8,
}

impl KeyCache {
    /// The cached value of `key`, or `compute()`'s.
    pub fn get(&mut self, key: u64, compute: impl FnOnce() -> u64) -> u64 {
        let slot = (key % 8) as usize;
        if self.valid & (1 << slot) != 0 && self.slots[slot].0 == key {
            return self.slots[slot].1;
        }
        let v = compute();
        self.slots[slot] = (key, v);
        self.valid |= 1 << slot;
        v
    }
}

/// A small value of `dtype` from the random word `h`, for operator `op`.
fn small_value(dtype: DataType, op: Option<RedOp>, h: u64) -> u64 {
    let v: i64 = match op {
        Some(RedOp::Sum | RedOp::Avg) => (h % 17) as i64 - 8,
        Some(RedOp::Prod) => {
            if h.is_multiple_of(8) {
                2
            } else {
                1
            }
        }
        Some(RedOp::Max | RedOp::Min) => (h % 201) as i64 - 100,
        None => (h % 2001) as i64 - 1000,
    };
    let unsigned = matches!(dtype, DataType::Uint8 | DataType::Uint32 | DataType::Uint64);
    let v = if unsigned { v.abs() } else { v };
    match dtype {
        DataType::Int8 | DataType::Uint8 => u64::from(v as u8),
        DataType::Int32 | DataType::Uint32 => u64::from(v as u32),
        DataType::Int64 | DataType::Uint64 => v as u64,
        DataType::Half => u64::from(half::f16::from_f32(v as f32).to_bits()),
        DataType::Bfloat16 => u64::from(half::bf16::from_f32(v as f32).to_bits()),
        DataType::Float => u64::from((v as f32).to_bits()),
        DataType::Double => (v as f64).to_bits(),
    }
}

/// Counts the elements of `got` (starting at element `first` of the output) that differ
/// from `expected(index, cache)`, comparing whole 8-byte words first.
pub fn count_wrong(
    dtype: DataType,
    got: &[u8],
    first: u64,
    mut expected: impl FnMut(u64) -> u64,
) -> u64 {
    let size = dtype.size();
    let mut wrong = 0;
    for (i, e) in got.chunks_exact(size).enumerate() {
        let want = expected(first + i as u64);
        if e != &want.to_le_bytes()[..size] {
            wrong += 1;
        }
    }
    wrong
}

/// The expected output of a reduction over a range of elements, with the per-key cache.
#[derive(Debug)]
pub struct Reduced<'a> {
    pattern: &'a Pattern,
    nranks: usize,
    cache: KeyCache,
    cache_owner: usize,
}

impl<'a> Reduced<'a> {
    pub fn new(pattern: &'a Pattern, nranks: usize) -> Self {
        Self {
            pattern,
            nranks,
            cache: KeyCache::default(),
            cache_owner: usize::MAX,
        }
    }

    /// The expected value of element `index`, owned (finished) by rank `owner`.
    pub fn get(&mut self, owner: usize, index: u64) -> u64 {
        if owner != self.cache_owner {
            self.cache = KeyCache::default();
            self.cache_owner = owner;
        }
        let key = self.pattern.key(index);
        let (p, n) = (self.pattern, self.nranks);
        self.cache.get(key, || p.reduced_key(n, owner, key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_pattern_repeats_one_word_per_block() {
        let p = Pattern {
            dtype: DataType::Float,
            op: Some(RedOp::Sum),
            seed: 3,
            granularity: Granularity::Block(4096),
        };
        let mut buf = vec![0u8; 3 * 4096];
        p.fill(5, 0, &mut buf);
        for block in buf.chunks(4096) {
            let w = &block[..8];
            assert!(block.chunks(8).all(|c| c == w));
        }
        assert_ne!(&buf[..8], &buf[4096..4104], "blocks differ");
        let mut other = vec![0u8; 4096];
        p.fill(6, 0, &mut other);
        assert_ne!(&buf[..4096], &other[..], "ranks differ");
        // A fill from the middle agrees with the whole.
        let mut part = vec![0u8; 40];
        p.fill(5, 1020, &mut part);
        assert_eq!(&part[..], &buf[4080..4120]);
    }

    #[test]
    fn element_pattern_values_fit_the_operator() {
        for dtype in DataType::ALL {
            for op in RedOp::ALL {
                let p = Pattern {
                    dtype,
                    op: Some(op),
                    seed: 11,
                    granularity: Granularity::Element,
                };
                let mut buf = vec![0u8; 64 * dtype.size()];
                p.fill(1, 0, &mut buf);
                let distinct: std::collections::HashSet<&[u8]> = buf.chunks(dtype.size()).collect();
                assert!(distinct.len() > 1, "{dtype} {op}: one value only");
            }
        }
    }

    #[test]
    fn reduced_follows_the_ring_order_and_divides_avg() {
        let p = Pattern {
            dtype: DataType::Int32,
            op: Some(RedOp::Avg),
            seed: 1,
            granularity: Granularity::Element,
        };
        let n = 5;
        let sum: i64 = (0..n).map(|r| i64::from(p.value(r, 7) as u32 as i32)).sum();
        let got = p.reduced(n, 2, 7) as u32 as i32;
        assert_eq!(i64::from(got), sum / n as i64);
        let mut r = Reduced::new(&p, n);
        assert_eq!(r.get(2, 7), p.reduced(n, 2, 7));
        let bytes: Vec<u8> = (0..4u64)
            .flat_map(|i| (p.reduced(n, 0, i) as u32).to_le_bytes())
            .collect();
        assert_eq!(count_wrong(DataType::Int32, &bytes, 0, |i| r.get(0, i)), 0);
        let mut bad = bytes.clone();
        bad[5] ^= 1;
        assert_eq!(count_wrong(DataType::Int32, &bad, 0, |i| r.get(0, i)), 1);
    }
}
