//! The x86_64 folds: PCLMULQDQ over 128-bit blocks, VPCLMULQDQ over 256-bit (AVX2, two
//! 128-bit lanes) and 512-bit ones (AVX-512, four lanes folded in parallel), all finished by
//! the same 128-bit tail and Barrett reduction (Gopal et al. 2009; the constants in `consts.rs`).
//!
//! The only module of the crate with `unsafe`: the intrinsics' loads and stores take raw
//! pointers, and the `#[target_feature]` functions may only run on a CPU that has the
//! features. Both are fenced here: the entry points are safe and check the features (detected
//! once, cached); every pointer is within `src[..len]` / `dst[..len]`, which the callers pass
//! as slices of that length.
//!
//! Each kernel is generic over `COPY`: when set, every vector loaded from `src` is stored to
//! the same offset of `dst` before it is folded (the fused copy + CRC).

#![allow(unsafe_code)]

use core::arch::x86_64::{
    __m128i, __m256i, __m512i, _mm_and_si128, _mm_blendv_epi8, _mm_clmulepi64_si128,
    _mm_cvtsi32_si128, _mm_extract_epi32, _mm_loadu_si128, _mm_set_epi64x, _mm_setzero_si128,
    _mm_shuffle_epi8, _mm_srli_si128, _mm_storeu_si128, _mm_unpackhi_epi64, _mm_xor_si128,
    _mm256_broadcastsi128_si256, _mm256_castsi256_si128, _mm256_clmulepi64_epi128,
    _mm256_extracti128_si256, _mm256_loadu_si256, _mm256_storeu_si256, _mm256_xor_si256,
    _mm256_zextsi128_si256, _mm512_broadcast_i32x4, _mm512_castsi512_si128,
    _mm512_clmulepi64_epi128, _mm512_extracti32x4_epi32, _mm512_loadu_si512, _mm512_set_epi64,
    _mm512_storeu_si512, _mm512_ternarylogic_epi64, _mm512_xor_si512, _mm512_zextsi128_si512,
};
use std::sync::atomic::{AtomicU8, Ordering};

use crate::consts::{
    BARRETT, FOLD_128, FOLD_256, FOLD_384, FOLD_512, FOLD_1024, FOLD_1536, FOLD_2048, REDUCE_96_64,
};

/// What this CPU offers, detected once.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Level {
    /// Neither fold: the caller falls back.
    None = 1,
    /// PCLMULQDQ with SSE4.1 and SSSE3: the 128-bit fold.
    Pclmul = 2,
    /// And AVX2 with VPCLMULQDQ: the 256-bit fold (AMD Zen 3 and 4, Intel client cores
    /// without AVX-512; issue #13: there the 128-bit fold runs at 0.4x crc32fast at 4 KiB).
    Avx2 = 3,
    /// And AVX-512 F/VL/BW with VPCLMULQDQ: the 512-bit fold.
    Avx512 = 4,
}

/// 0 until the first call detects.
static LEVEL: AtomicU8 = AtomicU8::new(0);

#[inline]
pub(crate) fn level() -> Level {
    match LEVEL.load(Ordering::Relaxed) {
        1 => Level::None,
        2 => Level::Pclmul,
        3 => Level::Avx2,
        4 => Level::Avx512,
        _ => detect(),
    }
}

#[cold]
fn detect() -> Level {
    let pclmul = std::is_x86_feature_detected!("pclmulqdq")
        && std::is_x86_feature_detected!("sse4.1")
        && std::is_x86_feature_detected!("ssse3");
    let avx2 = pclmul
        && std::is_x86_feature_detected!("avx2")
        && std::is_x86_feature_detected!("vpclmulqdq");
    let avx512 = avx2
        && std::is_x86_feature_detected!("avx512f")
        && std::is_x86_feature_detected!("avx512vl")
        && std::is_x86_feature_detected!("avx512bw")
        && std::is_x86_feature_detected!("vpclmulqdq");
    let level = if avx512 {
        Level::Avx512
    } else if avx2 {
        Level::Avx2
    } else if pclmul {
        Level::Pclmul
    } else {
        Level::None
    };
    LEVEL.store(level as u8, Ordering::Relaxed);
    level
}

/// From this many bytes the 256-bit kernel runs four 256-bit accumulators; below it, one.
const AVX2_WIDE_BYTES: usize = 128;
/// From this many bytes the 256-bit kernel folds 256-bit blocks at all (below: 128-bit).
const AVX2_MIN_BYTES: usize = 64;
/// From this many bytes the 512-bit kernel runs four 512-bit accumulators; below it, one.
const AVX512_WIDE_BYTES: usize = 256;
/// From this many bytes the 512-bit kernel folds 512-bit blocks at all (below: 128-bit).
const AVX512_MIN_BYTES: usize = 128;

/// The raw register after `src` (and `dst` filled with `src` when `COPY`), on the fastest fold
/// at `at_most`; `None` if this CPU has neither. `src.len() >= 16`.
pub(crate) fn fold<const COPY: bool>(
    at_most: Level,
    crc: u32,
    dst: &mut [u8],
    src: &[u8],
) -> Option<u32> {
    assert!(src.len() >= 16, "the folds take at least one block");
    assert!(
        !COPY || dst.len() == src.len(),
        "dst and src differ in length"
    );
    let dst = dst.as_mut_ptr();
    match level().min(at_most) {
        Level::None => None,
        // Safety: the CPU has PCLMULQDQ, SSE4.1 and SSSE3 (detected); `src` holds `len`
        // readable bytes and, when COPY, `dst` as many writable ones (checked above), and
        // they do not overlap (a shared and a unique borrow).
        Level::Pclmul => Some(unsafe { whole_128::<COPY>(crc, src.as_ptr(), dst, src.len()) }),
        // Safety: as above, and the CPU has AVX2 and VPCLMULQDQ (detected).
        Level::Avx2 => Some(unsafe { whole_256::<COPY>(crc, src.as_ptr(), dst, src.len()) }),
        // Safety: as above, and the CPU has AVX-512 F/VL/BW and VPCLMULQDQ (detected).
        Level::Avx512 => Some(unsafe { whole_512::<COPY>(crc, src.as_ptr(), dst, src.len()) }),
    }
}

/// [`fold`] over `head`, then over `src` (copied into `dst` when COPY), with one reduction at
/// the end instead of one per piece: the 128-bit remainder after `head` moves on 128 bits and
/// seeds `src`'s first block, as the folds' own blocks do. `head.len() >= 16`,
/// `src.len() >= 16`.
pub(crate) fn fold_after<const COPY: bool>(
    at_most: Level,
    crc: u32,
    head: &[u8],
    dst: &mut [u8],
    src: &[u8],
) -> Option<u32> {
    assert!(
        head.len() >= 16 && src.len() >= 16,
        "the folds take at least one block"
    );
    assert!(
        !COPY || dst.len() == src.len(),
        "dst and src differ in length"
    );
    let dst = dst.as_mut_ptr();
    let (h, hl, s, sl) = (head.as_ptr(), head.len(), src.as_ptr(), src.len());
    match level().min(at_most) {
        Level::None => None,
        // Safety: as in `fold`, for both pieces; `head` is only read (COPY is false for it,
        // so its `dst` is never written).
        Level::Pclmul => Some(unsafe { after_128::<COPY>(crc, h, hl, s, dst, sl) }),
        // Safety: as above, and the CPU has AVX2 and VPCLMULQDQ (detected).
        Level::Avx2 => Some(unsafe { after_256::<COPY>(crc, h, hl, s, dst, sl) }),
        // Safety: as above, and the CPU has AVX-512 F/VL/BW and VPCLMULQDQ (detected).
        Level::Avx512 => Some(unsafe { after_512::<COPY>(crc, h, hl, s, dst, sl) }),
    }
}

/// One kernel's whole CRC and the two-piece one, for a kernel's feature set: `$kernel` folds
/// a piece from a 128-bit seed to its 128-bit remainder.
macro_rules! entry_points {
    ($features:literal, $whole:ident, $after:ident, $kernel:ident) => {
        /// # Safety
        /// The CPU has the features; `src[..len]` readable, `len >= 16`; when COPY,
        /// `dst[..len]` writable.
        #[target_feature(enable = $features)]
        unsafe fn $whole<const COPY: bool>(
            crc: u32,
            src: *const u8,
            dst: *mut u8,
            len: usize,
        ) -> u32 {
            // Safety: the caller's contract.
            reduce(unsafe { $kernel::<COPY>(_mm_cvtsi32_si128(crc as i32), src, dst, len) })
        }

        /// # Safety
        /// The CPU has the features; `head[..head_len]` and `src[..len]` readable, both
        /// lengths `>= 16`; when COPY, `dst[..len]` writable.
        #[target_feature(enable = $features)]
        unsafe fn $after<const COPY: bool>(
            crc: u32,
            head: *const u8,
            head_len: usize,
            src: *const u8,
            dst: *mut u8,
            len: usize,
        ) -> u32 {
            // Safety: the caller's contract; `head` is only read (COPY false, null `dst`
            // never written).
            let x = unsafe {
                $kernel::<false>(
                    _mm_cvtsi32_si128(crc as i32),
                    head,
                    core::ptr::null_mut(),
                    head_len,
                )
            };
            let seed = fold_by(x, pair(FOLD_128));
            // Safety: the caller's contract.
            reduce(unsafe { $kernel::<COPY>(seed, src, dst, len) })
        }
    };
}

entry_points!("pclmulqdq,sse4.1,ssse3", whole_128, after_128, fold_128);
entry_points!(
    "avx2,vpclmulqdq,pclmulqdq,sse4.1,ssse3",
    whole_256,
    after_256,
    fold_256
);
entry_points!(
    "avx512f,avx512vl,avx512bw,vpclmulqdq,pclmulqdq,sse4.1,ssse3",
    whole_512,
    after_512,
    fold_512
);

// ---- 128-bit ----------------------------------------------------------------------------

/// `[low, high]` as a register.
#[inline]
#[target_feature(enable = "sse2")]
fn pair(k: [u64; 2]) -> __m128i {
    _mm_set_epi64x(k[1] as i64, k[0] as i64)
}

/// `x` moved `dist` bits on: its two halves times their constants, added.
#[inline]
#[target_feature(enable = "pclmulqdq,sse4.1,ssse3")]
fn fold_by(x: __m128i, k: __m128i) -> __m128i {
    _mm_xor_si128(
        _mm_clmulepi64_si128::<0x00>(x, k),
        _mm_clmulepi64_si128::<0x11>(x, k),
    )
}

/// Load 16 bytes at `src + off` (and store them at `dst + off` when COPY).
///
/// # Safety
/// `src + off .. + 16` readable; when COPY, `dst + off .. + 16` writable.
#[inline]
#[target_feature(enable = "pclmulqdq,sse4.1,ssse3")]
unsafe fn load<const COPY: bool>(src: *const u8, dst: *mut u8, off: usize) -> __m128i {
    // Safety: the caller's contract; unaligned loads and stores take any address.
    unsafe {
        let v = _mm_loadu_si128(src.add(off).cast());
        if COPY {
            _mm_storeu_si128(dst.add(off).cast(), v);
        }
        v
    }
}

/// The 128-bit remainder of `src` (copied into `dst` when COPY) after `seed`, which is XORed
/// into its first block: the CRC register there, or the remainder of bytes before, moved on
/// 128 bits. [`reduce`] makes it a register.
///
/// # Safety
/// The CPU has PCLMULQDQ, SSE4.1, SSSE3; `src[..len]` readable, `len >= 16`; when COPY,
/// `dst[..len]` writable.
#[target_feature(enable = "pclmulqdq,sse4.1,ssse3")]
unsafe fn fold_128<const COPY: bool>(
    seed: __m128i,
    src: *const u8,
    dst: *mut u8,
    len: usize,
) -> __m128i {
    let mut p;
    let x;
    // Safety: every `load` below has `p + 16 <= len` (the loop conditions; `len >= 64` for
    // the first four), and `finish` gets `p <= len`, `len >= 16`.
    unsafe {
        if len >= 64 {
            // Four blocks in flight, each folded 512 bits on: the multiplies overlap.
            let k = pair(FOLD_512);
            let mut x0 = _mm_xor_si128(load::<COPY>(src, dst, 0), seed);
            let mut x1 = load::<COPY>(src, dst, 16);
            let mut x2 = load::<COPY>(src, dst, 32);
            let mut x3 = load::<COPY>(src, dst, 48);
            p = 64;
            while len - p >= 64 {
                x0 = _mm_xor_si128(fold_by(x0, k), load::<COPY>(src, dst, p));
                x1 = _mm_xor_si128(fold_by(x1, k), load::<COPY>(src, dst, p + 16));
                x2 = _mm_xor_si128(fold_by(x2, k), load::<COPY>(src, dst, p + 32));
                x3 = _mm_xor_si128(fold_by(x3, k), load::<COPY>(src, dst, p + 48));
                p += 64;
            }
            x = _mm_xor_si128(
                _mm_xor_si128(fold_by(x0, pair(FOLD_384)), fold_by(x1, pair(FOLD_256))),
                _mm_xor_si128(fold_by(x2, pair(FOLD_128)), x3),
            );
        } else {
            x = _mm_xor_si128(load::<COPY>(src, dst, 0), seed);
            p = 16;
        }
        // Safety: as above, `p <= len` and `len >= 16`.
        finish::<COPY>(x, src, dst, p, len)
    }
}

/// Fold the blocks left after `p` into `x`, then the partial block: the remainder.
///
/// # Safety
/// As `fold_128`, and `16 <= len`, `p <= len`.
#[inline]
#[target_feature(enable = "pclmulqdq,sse4.1,ssse3")]
unsafe fn finish<const COPY: bool>(
    mut x: __m128i,
    src: *const u8,
    dst: *mut u8,
    mut p: usize,
    len: usize,
) -> __m128i {
    let k128 = pair(FOLD_128);
    while len - p >= 16 {
        // Safety: `p + 16 <= len`.
        x = _mm_xor_si128(fold_by(x, k128), unsafe { load::<COPY>(src, dst, p) });
        p += 16;
    }
    let t = len - p;
    if t > 0 {
        // The message ends with `x` (16 bytes) and `t` more. Its last 16 bytes are `x`'s
        // last 16 - t and the tail, which is the end of the last 16 bytes of `src`; its first
        // t are `x`'s first t, which behind 16 - t zero bytes (zeros in front change nothing)
        // make a block that folds 128 bits on onto those 16.
        // Safety: `len >= 16`, so `len - 16 .. len` is in bounds; `t < 16` so the masks' reads
        // stay within the 48 bytes of SHIFT.
        unsafe {
            let last = load::<COPY>(src, dst, len - 16);
            let up = _mm_loadu_si128(SHIFT.as_ptr().add(t).cast());
            let down = _mm_loadu_si128(SHIFT.as_ptr().add(16 + t).cast());
            let head = _mm_shuffle_epi8(x, up);
            // `down` has its high bit set exactly on the bytes the tail fills.
            let rest = _mm_blendv_epi8(_mm_shuffle_epi8(x, down), last, down);
            x = _mm_xor_si128(fold_by(head, k128), rest);
        }
    }
    x
}

/// `SHIFT[t..t + 16]` moves a register's bytes up by 16 - t (zeros in), `SHIFT[16 + t..]`
/// down by t (0x80 where zeros come in): `pshufb` masks.
static SHIFT: [u8; 48] = {
    let mut s = [0x80u8; 48];
    let mut i = 0;
    while i < 16 {
        s[16 + i] = i as u8;
        i += 1;
    }
    s
};

/// The raw register from a 128-bit block `S` whose CRC is `S * x^32 mod P`.
#[inline]
#[target_feature(enable = "pclmulqdq,sse4.1,ssse3")]
fn reduce(x: __m128i) -> u32 {
    let zero = _mm_setzero_si128();
    let k = pair(REDUCE_96_64);
    // 128 -> 96 bits (bits 32..128): the low half's product, plus the high half moved 32 on.
    let a = _mm_xor_si128(
        _mm_clmulepi64_si128::<0x00>(x, k),
        _mm_srli_si128::<4>(_mm_unpackhi_epi64(zero, x)),
    );
    // 96 -> 64 bits (the high half): the top 32 times their constant, plus the rest.
    let b = _mm_xor_si128(
        _mm_clmulepi64_si128::<0x10>(a, k),
        _mm_unpackhi_epi64(zero, a),
    );
    // Barrett.
    let mp = pair(BARRETT);
    let b_top = _mm_and_si128(b, _mm_set_epi64x(0xFFFF_FFFF, 0));
    let t1 = _mm_clmulepi64_si128::<0x01>(b_top, mp);
    let q = _mm_and_si128(t1, _mm_set_epi64x(0, 0xFFFF_FFFF));
    let t2 = _mm_clmulepi64_si128::<0x10>(q, mp);
    (_mm_extract_epi32::<3>(b) ^ _mm_extract_epi32::<1>(t2)) as u32
}

// ---- 256-bit ----------------------------------------------------------------------------

/// The 256-bit fold's feature set.
macro_rules! avx2 {
    ($($item:item)*) => {$(
        #[target_feature(enable = "avx2,vpclmulqdq,pclmulqdq,sse4.1,ssse3")]
        $item
    )*};
}

avx2! {
    /// Each 128-bit lane of `x` moved on by `k` (the same pair in both lanes).
    #[inline]
    fn fold_by_256(x: __m256i, k: __m256i) -> __m256i {
        _mm256_xor_si256(
            _mm256_clmulepi64_epi128::<0x00>(x, k),
            _mm256_clmulepi64_epi128::<0x11>(x, k),
        )
    }

    /// Load 32 bytes at `src + off` (and store them at `dst + off` when COPY).
    ///
    /// # Safety
    /// `src + off .. + 32` readable; when COPY, `dst + off .. + 32` writable.
    #[inline]
    unsafe fn load_256<const COPY: bool>(src: *const u8, dst: *mut u8, off: usize) -> __m256i {
        // Safety: the caller's contract; unaligned loads and stores take any address.
        unsafe {
            let v = _mm256_loadu_si256(src.add(off).cast());
            if COPY {
                _mm256_storeu_si256(dst.add(off).cast(), v);
            }
            v
        }
    }

    /// Two lanes per register, four registers (eight blocks in flight): the 128-bit fold's
    /// method on twice the width, for CPUs with VPCLMULQDQ but not AVX-512. The remainder, as
    /// [`fold_128`].
    ///
    /// # Safety
    /// The CPU has the features; `src[..len]` readable, `len >= 16`; when COPY, `dst[..len]`
    /// writable.
    unsafe fn fold_256<const COPY: bool>(
        seed: __m128i,
        src: *const u8,
        dst: *mut u8,
        len: usize,
    ) -> __m128i {
        if len < AVX2_MIN_BYTES {
            // Safety: the same contract, and these features include fold_128's.
            return unsafe { fold_128::<COPY>(seed, src, dst, len) };
        }
        let seed = _mm256_zextsi128_si256(seed);
        let k256 = _mm256_broadcastsi128_si256(pair(FOLD_256));
        let mut p;
        let mut y;
        // Safety: every `load_256` below has `p + 32 <= len` (the loop conditions, and
        // `len >= AVX2_MIN_BYTES >= 32` or `>= AVX2_WIDE_BYTES >= 128` for the first ones).
        unsafe {
            if len >= AVX2_WIDE_BYTES {
                // Each register's lanes move 1024 bits on per round of 128 bytes.
                let k = _mm256_broadcastsi128_si256(pair(FOLD_1024));
                let mut x0 = _mm256_xor_si256(load_256::<COPY>(src, dst, 0), seed);
                let mut x1 = load_256::<COPY>(src, dst, 32);
                let mut x2 = load_256::<COPY>(src, dst, 64);
                let mut x3 = load_256::<COPY>(src, dst, 96);
                p = 128;
                while len - p >= 128 {
                    x0 = _mm256_xor_si256(fold_by_256(x0, k), load_256::<COPY>(src, dst, p));
                    x1 = _mm256_xor_si256(fold_by_256(x1, k), load_256::<COPY>(src, dst, p + 32));
                    x2 = _mm256_xor_si256(fold_by_256(x2, k), load_256::<COPY>(src, dst, p + 64));
                    x3 = _mm256_xor_si256(fold_by_256(x3, k), load_256::<COPY>(src, dst, p + 96));
                    p += 128;
                }
                // x0 is 96 bytes before x3, x1 64, x2 32: fold them on in turn.
                y = _mm256_xor_si256(fold_by_256(x0, k256), x1);
                y = _mm256_xor_si256(fold_by_256(y, k256), x2);
                y = _mm256_xor_si256(fold_by_256(y, k256), x3);
            } else {
                y = _mm256_xor_si256(load_256::<COPY>(src, dst, 0), seed);
                p = 32;
            }
            while len - p >= 32 {
                y = _mm256_xor_si256(fold_by_256(y, k256), load_256::<COPY>(src, dst, p));
                p += 32;
            }
        }
        // Two lanes to one: the low lane moved on 128 bits, plus the high one.
        let lo = _mm256_castsi256_si128(y);
        let hi = _mm256_extracti128_si256::<1>(y);
        let x = _mm_xor_si128(fold_by(lo, pair(FOLD_128)), hi);
        // Safety: `p <= len`, `len >= 16`, and the contract of this function.
        unsafe { finish::<COPY>(x, src, dst, p, len) }
    }
}

const _: () = assert!(AVX2_MIN_BYTES >= 32 && AVX2_WIDE_BYTES >= 128);

// ---- 512-bit ----------------------------------------------------------------------------

/// The 512-bit fold's feature set.
macro_rules! avx512 {
    ($($item:item)*) => {$(
        #[target_feature(enable = "avx512f,avx512vl,avx512bw,vpclmulqdq,pclmulqdq,sse4.1,ssse3")]
        $item
    )*};
}

avx512! {
    /// Each 128-bit lane of `x` moved on by the lane's pair in `k`.
    #[inline]
    fn fold_by_512(x: __m512i, k: __m512i) -> __m512i {
        _mm512_xor_si512(
            _mm512_clmulepi64_epi128::<0x00>(x, k),
            _mm512_clmulepi64_epi128::<0x11>(x, k),
        )
    }

    /// `x` moved on by `k`, plus `data` (one three-way xor).
    #[inline]
    fn fold_add_512(x: __m512i, k: __m512i, data: __m512i) -> __m512i {
        _mm512_ternarylogic_epi64::<0x96>(
            _mm512_clmulepi64_epi128::<0x00>(x, k),
            _mm512_clmulepi64_epi128::<0x11>(x, k),
            data,
        )
    }

    /// Load 64 bytes at `src + off` (and store them at `dst + off` when COPY).
    ///
    /// # Safety
    /// `src + off .. + 64` readable; when COPY, `dst + off .. + 64` writable.
    #[inline]
    unsafe fn load_512<const COPY: bool>(src: *const u8, dst: *mut u8, off: usize) -> __m512i {
        // Safety: the caller's contract; unaligned loads and stores take any address.
        unsafe {
            let v = _mm512_loadu_si512(src.add(off).cast());
            if COPY {
                _mm512_storeu_si512(dst.add(off).cast(), v);
            }
            v
        }
    }

    /// Four 512-bit accumulators from 256 bytes, one from 128; the remainder, as [`fold_128`].
    ///
    /// # Safety
    /// The CPU has the features; `src[..len]` readable, `len >= 16`; when COPY, `dst[..len]`
    /// writable.
    unsafe fn fold_512<const COPY: bool>(
        seed: __m128i,
        src: *const u8,
        dst: *mut u8,
        len: usize,
    ) -> __m128i {
        if len < AVX512_MIN_BYTES {
            // Safety: the same contract, and these features include fold_128's.
            return unsafe { fold_128::<COPY>(seed, src, dst, len) };
        }
        let seed = _mm512_zextsi128_si512(seed);
        let k512 = _mm512_broadcast_i32x4(pair(FOLD_512));
        let mut p;
        let mut y;
        // Safety: every `load_512` below has `p + 64 <= len` (the loop conditions, and
        // `len >= AVX512_MIN_BYTES >= 64` or `>= AVX512_WIDE_BYTES` for the first ones).
        unsafe {
            if len >= AVX512_WIDE_BYTES {
                // Four 512-bit accumulators (sixteen blocks in flight), each 2048 bits on.
                let k = _mm512_broadcast_i32x4(pair(FOLD_2048));
                let mut x0 = _mm512_xor_si512(load_512::<COPY>(src, dst, 0), seed);
                let mut x1 = load_512::<COPY>(src, dst, 64);
                let mut x2 = load_512::<COPY>(src, dst, 128);
                let mut x3 = load_512::<COPY>(src, dst, 192);
                p = 256;
                while len - p >= 256 {
                    x0 = fold_add_512(x0, k, load_512::<COPY>(src, dst, p));
                    x1 = fold_add_512(x1, k, load_512::<COPY>(src, dst, p + 64));
                    x2 = fold_add_512(x2, k, load_512::<COPY>(src, dst, p + 128));
                    x3 = fold_add_512(x3, k, load_512::<COPY>(src, dst, p + 192));
                    p += 256;
                }
                let k1536 = _mm512_broadcast_i32x4(pair(FOLD_1536));
                let k1024 = _mm512_broadcast_i32x4(pair(FOLD_1024));
                y = _mm512_ternarylogic_epi64::<0x96>(
                    fold_by_512(x0, k1536),
                    fold_by_512(x1, k1024),
                    fold_add_512(x2, k512, x3),
                );
            } else {
                y = _mm512_xor_si512(load_512::<COPY>(src, dst, 0), seed);
                p = 64;
            }
            while len - p >= 64 {
                y = fold_add_512(y, k512, load_512::<COPY>(src, dst, p));
                p += 64;
            }
        }
        // Four lanes to one: lane i moved on 128 * (3 - i) bits, the last as it is.
        let [a0, a1] = FOLD_384;
        let [b0, b1] = FOLD_256;
        let [c0, c1] = FOLD_128;
        let k = _mm512_set_epi64(0, 0, c1 as i64, c0 as i64, b1 as i64, b0 as i64, a1 as i64, a0 as i64);
        let t = fold_by_512(y, k);
        let x = _mm_xor_si128(
            _mm_xor_si128(_mm512_castsi512_si128(t), _mm512_extracti32x4_epi32::<1>(t)),
            _mm_xor_si128(_mm512_extracti32x4_epi32::<2>(t), _mm512_extracti32x4_epi32::<3>(y)),
        );
        // Safety: `p <= len`, `len >= 16`, and the contract of this function.
        unsafe { finish::<COPY>(x, src, dst, p, len) }
    }
}

const _: () = assert!(AVX512_MIN_BYTES >= 64 && AVX512_WIDE_BYTES >= 256);
