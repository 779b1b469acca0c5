//! The scalar path: slice-by-16 over tables built at compile time. Short inputs (under 16
//! bytes, where a fold's setup costs more than it saves) and the fallback the SIMD paths are
//! tested against.
//!
//! Every function here works on the raw register (the CRC state complemented, as the
//! reflected algorithm keeps it between bytes); `lib.rs` does the complementing.

/// The reflected CRC-32/ISO-HDLC polynomial: 0x04C11DB7 with its bits reversed (the x^32
/// term implied).
pub(crate) const POLY_REFLECTED: u32 = 0xEDB8_8320;

/// `TABLES[k][b]`: the register after byte `b` followed by `k` zero bytes, from a zero
/// register. `TABLES[0]` is the classic byte-at-a-time table.
static TABLES: [[u32; 256]; 16] = build_tables();

/// `TABLES[0]` as a constant, for the functions below that run at compile time.
const BYTE: [u32; 256] = byte_table();

const fn byte_table() -> [u32; 256] {
    let mut t = [0u32; 256];
    let mut b = 0;
    while b < 256 {
        let mut c = b as u32;
        let mut bit = 0;
        while bit < 8 {
            c = if c & 1 == 1 {
                (c >> 1) ^ POLY_REFLECTED
            } else {
                c >> 1
            };
            bit += 1;
        }
        t[b] = c;
        b += 1;
    }
    t
}

const fn build_tables() -> [[u32; 256]; 16] {
    let mut t = [[0u32; 256]; 16];
    t[0] = byte_table();
    let mut k = 1;
    while k < 16 {
        let mut b = 0;
        while b < 256 {
            let prev = t[k - 1][b];
            t[k][b] = (prev >> 8) ^ t[0][(prev & 0xff) as usize];
            b += 1;
        }
        k += 1;
    }
    t
}

/// `TOP[x]`: the byte `b` whose `BYTE[b]` has top byte `x` (a permutation of 0..=255, which
/// makes the register's step over a zero byte invertible).
const TOP: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        t[(BYTE[b] >> 24) as usize] = b as u8;
        b += 1;
    }
    t
};

/// The raw register before one zero byte that leaves `r` after it: `A^-1(r)`, where
/// `A(r) = (r >> 8) ^ BYTE[r & 0xff]`.
const fn unstep(r: u32) -> u32 {
    let low = TOP[(r >> 24) as usize];
    ((r ^ BYTE[low as usize]) << 8) | low as u32
}

/// What XORing `delta` into byte `offset` of a message does to its CRC, moved to the register
/// before the message: byte `offset` changes the register after it by `BYTE[delta]`, and the
/// same change comes from `A^-(offset + 1)` of that before byte 0.
pub(crate) const fn start_delta(offset: usize, delta: u8) -> u32 {
    let mut r = BYTE[delta as usize];
    let mut k = 0;
    while k <= offset {
        r = unstep(r);
        k += 1;
    }
    r
}

/// Fold `data` into the raw register `crc` a byte at a time, at compile time.
pub(crate) const fn update_raw_const(mut crc: u32, data: &[u8]) -> u32 {
    let mut i = 0;
    while i < data.len() {
        crc = (crc >> 8) ^ BYTE[((crc ^ data[i] as u32) & 0xff) as usize];
        i += 1;
    }
    crc
}

#[inline(always)]
fn at(k: usize, byte: u32) -> u32 {
    TABLES[k][(byte & 0xff) as usize]
}

/// Fold `data` into the raw register `crc`: 16 bytes a step, then 8, then one at a time.
#[inline]
pub(crate) fn update_raw(mut crc: u32, data: &[u8]) -> u32 {
    let mut chunks = data.chunks_exact(16);
    for c in &mut chunks {
        crc = slice_by::<16>(crc, c);
    }
    let mut rest = chunks.remainder();
    if rest.len() >= 8 {
        crc = slice_by::<8>(crc, rest);
        rest = &rest[8..];
    }
    for &byte in rest {
        crc = (crc >> 8) ^ at(0, crc ^ u32::from(byte));
    }
    crc
}

/// One slice-by-`N` step over the first `N` bytes of `b` (`N` a multiple of 4): byte `i`
/// looked up in table `N - 1 - i`, the first word xored with the register.
#[inline(always)]
fn slice_by<const N: usize>(crc: u32, b: &[u8]) -> u32 {
    let mut out = 0;
    for w in 0..N / 4 {
        let mut v = u32::from_le_bytes([b[4 * w], b[4 * w + 1], b[4 * w + 2], b[4 * w + 3]]);
        if w == 0 {
            v ^= crc;
        }
        for k in 0..4 {
            out ^= at(N - 1 - (4 * w + k), v >> (8 * k));
        }
    }
    out
}

/// The bit-at-a-time definition, for the tests: nothing but the polynomial.
#[cfg(test)]
pub(crate) fn update_bitwise(mut crc: u32, data: &[u8]) -> u32 {
    for &byte in data {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ POLY_REFLECTED
            } else {
                crc >> 1
            };
        }
    }
    crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_match_the_bitwise_definition() {
        let data: Vec<u8> = (0..100u32).map(|i| (i * 37 + 11) as u8).collect();
        for len in 0..data.len() {
            assert_eq!(
                update_raw(!0, &data[..len]),
                update_bitwise(!0, &data[..len]),
                "len {len}"
            );
        }
        // The check value of CRC-32/ISO-HDLC (the catalogue's "123456789").
        assert_eq!(!update_raw(!0, b"123456789"), 0xCBF4_3926);
    }
}
