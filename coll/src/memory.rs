//! Registered memory for the simulator at scale: 64 ranks with three 256 MB buffers each do
//! not fit in a machine, but their contents do when the data is a block pattern
//! ([`crate::pattern::Granularity::Block`]): a [`CompactMemory`] keeps each 4 KiB block as one
//! repeated 8-byte word while it is one, and as its own bytes as soon as anything else is
//! written into it. It is exact memory whatever is written; only its size depends on the
//! data.

use mrc_transport::verbs::Memory;

/// Bytes per block (the engine's payload MTU, so whole packets fill whole blocks).
pub const COMPACT_BLOCK: usize = 4096;

#[derive(Debug, Clone)]
enum Block {
    /// Every aligned 8-byte word of the block is this one (little-endian bytes).
    Word(u64),
    Bytes(Box<[u8]>),
}

/// Memory stored as one word per block where it can be. Starts zeroed.
#[derive(Debug, Clone)]
pub struct CompactMemory {
    len: usize,
    blocks: Vec<Block>,
}

impl CompactMemory {
    /// `len` zero bytes.
    pub fn new(len: usize) -> Self {
        Self {
            len,
            blocks: vec![Block::Word(0); len.div_ceil(COMPACT_BLOCK)],
        }
    }

    /// Blocks stored as bytes (the rest cost one word each).
    pub fn dense_blocks(&self) -> usize {
        self.blocks
            .iter()
            .filter(|b| matches!(b, Block::Bytes(_)))
            .count()
    }

    fn block_len(&self, i: usize) -> usize {
        (self.len - i * COMPACT_BLOCK).min(COMPACT_BLOCK)
    }
}

/// The one word `bytes` repeats, if it is whole words of one value.
fn uniform_word(bytes: &[u8]) -> Option<u64> {
    if !bytes.len().is_multiple_of(8) || bytes.is_empty() {
        return None;
    }
    let first = &bytes[..8];
    bytes
        .chunks_exact(8)
        .all(|c| c == first)
        .then(|| u64::from_le_bytes(first.try_into().expect("8 bytes")))
}

fn fill_word(word: u64, phase: usize, dst: &mut [u8]) {
    let w = word.to_le_bytes();
    for (i, b) in dst.iter_mut().enumerate() {
        *b = w[(phase + i) % 8];
    }
}

impl Memory for CompactMemory {
    fn len(&self) -> usize {
        self.len
    }

    fn read(&self, offset: usize, dst: &mut [u8]) {
        let mut done = 0;
        while done < dst.len() {
            let at = offset + done;
            let (i, within) = (at / COMPACT_BLOCK, at % COMPACT_BLOCK);
            let n = (self.block_len(i) - within).min(dst.len() - done);
            let out = &mut dst[done..done + n];
            match &self.blocks[i] {
                Block::Word(w) => fill_word(*w, within % 8, out),
                Block::Bytes(b) => out.copy_from_slice(&b[within..within + n]),
            }
            done += n;
        }
    }

    fn write(&mut self, offset: usize, src: &[u8]) {
        let mut done = 0;
        while done < src.len() {
            let at = offset + done;
            let (i, within) = (at / COMPACT_BLOCK, at % COMPACT_BLOCK);
            let block_len = self.block_len(i);
            let n = (block_len - within).min(src.len() - done);
            let part = &src[done..done + n];
            done += n;
            if n == block_len && block_len == COMPACT_BLOCK {
                self.blocks[i] = match uniform_word(part) {
                    Some(w) => Block::Word(w),
                    None => Block::Bytes(part.into()),
                };
                continue;
            }
            if let Block::Word(w) = self.blocks[i] {
                let mut same = vec![0; n];
                fill_word(w, within % 8, &mut same);
                if same == part {
                    continue;
                }
                let mut bytes = vec![0; block_len].into_boxed_slice();
                fill_word(w, 0, &mut bytes);
                self.blocks[i] = Block::Bytes(bytes);
            }
            if let Block::Bytes(b) = &mut self.blocks[i] {
                b[within..within + n].copy_from_slice(part);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn behaves_as_plain_memory_and_stays_compact_for_block_words() {
        const LEN: usize = 3 * COMPACT_BLOCK + 100;
        let mut m = CompactMemory::new(LEN);
        let mut model = vec![0u8; LEN];
        // A whole block of one word: compact.
        let word: Vec<u8> = (0..COMPACT_BLOCK).map(|i| (i % 8) as u8 + 1).collect();
        m.write(COMPACT_BLOCK, &word);
        model[COMPACT_BLOCK..2 * COMPACT_BLOCK].copy_from_slice(&word);
        assert_eq!(m.dense_blocks(), 0);
        // A partial write of the same bytes keeps it compact; another value does not.
        m.write(COMPACT_BLOCK + 16, &word[16..40]);
        assert_eq!(m.dense_blocks(), 0);
        m.write(COMPACT_BLOCK + 3, &[9, 9]);
        model[COMPACT_BLOCK + 3..COMPACT_BLOCK + 5].copy_from_slice(&[9, 9]);
        assert_eq!(m.dense_blocks(), 1);
        // Writes across blocks and into the short last block.
        let noise: Vec<u8> = (0..COMPACT_BLOCK + 300)
            .map(|i| (i * 7 % 251) as u8)
            .collect();
        m.write(2 * COMPACT_BLOCK - 150, &noise[..COMPACT_BLOCK + 250]);
        model[2 * COMPACT_BLOCK - 150..3 * COMPACT_BLOCK + 100]
            .copy_from_slice(&noise[..COMPACT_BLOCK + 250]);
        for (off, len) in [(0, LEN), (5, 4000), (COMPACT_BLOCK - 3, 10), (LEN - 7, 7)] {
            let mut got = vec![0u8; len];
            m.read(off, &mut got);
            assert_eq!(got, model[off..off + len], "read {off}+{len}");
        }
        // Rewriting a dense block with one word makes it compact again.
        m.write(COMPACT_BLOCK, &word);
        assert_eq!(m.dense_blocks(), 2);
    }
}
