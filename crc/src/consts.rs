//! The folding constants, computed at compile time from the polynomial alone (Gopal et al.,
//! "Fast CRC Computation for Generic Polynomials Using PCLMULQDQ Instruction", Intel 2009,
//! the bit-reflected variant).
//!
//! Conventions. A reflected register of the CRC holds coefficient `x^(31-i)` in bit `i`; a
//! 128-bit block of message, loaded little-endian, holds `x^(127-k)` in bit `k` (the first
//! byte's low bit is the highest power). A carry-less multiply of two 64-bit halves whose
//! bits stand for `x^(e1-i)` and `x^(e2-j)` gives a product whose bit `k` stands for
//! `x^(e1+e2-k)`: every constant below is placed so the product lands on the powers it must.

use crate::table::POLY_REFLECTED;

/// `x^e mod P`, reflected (bit `i` is the coefficient of `x^(31-i)`).
pub(crate) const fn xpow_mod(e: u32) -> u32 {
    // x^0 is bit 31; multiplying by x is a right shift, and x^32 folds back in as P - x^32.
    let mut r = 0x8000_0000u32;
    let mut i = 0;
    while i < e {
        r = if r & 1 == 1 {
            (r >> 1) ^ POLY_REFLECTED
        } else {
            r >> 1
        };
        i += 1;
    }
    r
}

/// The multiplier that moves a 64-bit half (bits for `x^(63-i)`) `e - 32` bits further, into
/// a 128-bit block: `x^32 * (x^e mod P)` placed with bit `j` for `x^(64-j)`, i.e. the
/// reflected remainder shifted left by one (the paper's `(x^e mod P)' << 1`). The product is
/// congruent and at most 127 bits long.
const fn fold_k(e: u32) -> u64 {
    (xpow_mod(e) as u64) << 1
}

/// The pair that folds a 128-bit block `dist_bits` further along the message: its low half
/// (the higher powers) by `x^(dist+64)`, its high half by `x^dist`. `[low, high]` as the two
/// 64-bit lanes of the register (low first).
const fn fold_pair(dist_bits: u32) -> [u64; 2] {
    [fold_k(dist_bits + 32), fold_k(dist_bits - 32)]
}

// Named constants, so that they are computed by the compiler (a `const fn` called at run time
// runs at run time: thousands of shifts per call).
pub(crate) const FOLD_128: [u64; 2] = fold_pair(128);
pub(crate) const FOLD_256: [u64; 2] = fold_pair(256);
pub(crate) const FOLD_384: [u64; 2] = fold_pair(384);
pub(crate) const FOLD_512: [u64; 2] = fold_pair(512);
pub(crate) const FOLD_1024: [u64; 2] = fold_pair(1024);
pub(crate) const FOLD_1536: [u64; 2] = fold_pair(1536);
pub(crate) const FOLD_2048: [u64; 2] = fold_pair(2048);

/// The final reduction of a 128-bit block `S` (the CRC of the whole is `S * x^32 mod P`):
/// 1. `S * x^32 = L * x^96 + H * x^32` becomes 96 bits: `L * (x * (x^95 mod P))`, the
///    multiplier placed with bit `j` for `x^(64-j)`: the reflected remainder `<< 32`;
/// 2. the top 32 of those 96 bits, times `x * (x^63 mod P)` the same way, leave 64 bits `B`
///    whose remainder mod P is the CRC;
/// 3. Barrett: `q = floor(floor(B / x^32) * mu / x^32)`, `CRC = (B + q * P) mod x^32`.
///
/// `[step 1, step 2]`.
pub(crate) const REDUCE_96_64: [u64; 2] =
    [(xpow_mod(95) as u64) << 32, (xpow_mod(63) as u64) << 32];

/// `[mu, P]` for the Barrett step, each 33 bits reflected (bit `i` for `x^(32-i)`).
pub(crate) const BARRETT: [u64; 2] = [reflect33(mu()), reflect33(POLY_NORMAL)];

/// The polynomial with its x^32 term, bit `i` for `x^i`.
const POLY_NORMAL: u64 = 0x1_04C1_1DB7;

/// `floor(x^64 / P)`, bit `i` for `x^i` (33 bits: P has degree 32).
pub(crate) const fn mu() -> u64 {
    let mut rem: u128 = 1 << 64;
    let mut q = 0u64;
    let mut d = 64;
    while d >= 32 {
        if rem & (1u128 << d) != 0 {
            rem ^= (POLY_NORMAL as u128) << (d - 32);
            q |= 1 << (d - 32);
        }
        d -= 1;
    }
    q
}

/// Reverse the low 33 bits.
pub(crate) const fn reflect33(v: u64) -> u64 {
    let mut r = 0;
    let mut i = 0;
    while i < 33 {
        if v & (1 << i) != 0 {
            r |= 1 << (32 - i);
        }
        i += 1;
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::update_bitwise;

    /// Software carry-less multiply, bit `i` for `x^i`.
    fn clmul(a: u64, b: u64) -> u128 {
        (0..64)
            .filter(|i| b >> i & 1 == 1)
            .fold(0, |acc, i| acc ^ (u128::from(a) << i))
    }

    #[test]
    fn xpow_is_what_zero_bytes_do_to_the_register() {
        // From the register holding x^0, each zero byte multiplies by x^8 (mod P).
        for n in 0..80 {
            assert_eq!(
                xpow_mod(8 * n),
                update_bitwise(0x8000_0000, &vec![0; n as usize])
            );
        }
    }

    #[test]
    fn mu_is_the_quotient_of_x64_by_p() {
        let m = mu();
        let prod = clmul(m, POLY_NORMAL);
        // mu * P = x^64 + (a remainder of degree < 32).
        assert_eq!(prod >> 32, 1 << 32, "{prod:#x}");
        assert_eq!(m >> 32, 1, "mu has degree 32");
    }

    /// The values the kernel's `crc32-pclmul_asm.S` and the paper print for this polynomial,
    /// as a second opinion on the derivation (the tests against crc32fast are the first).
    #[test]
    fn constants_match_the_published_ones() {
        assert_eq!(fold_pair(512), [0x1_5444_2bd4, 0x1_c6e4_1596]);
        assert_eq!(fold_pair(128), [0x1_7519_97d0, 0x0_ccaa_009e]);
        assert_eq!(fold_k(64), 0x1_63cd_6124);
        assert_eq!(BARRETT, [0x1_F701_1641, 0x1_DB71_0641]);
    }
}
