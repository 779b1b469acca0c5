//! CRC-32/ISO-HDLC — the zlib / Ethernet polynomial 0x04C11DB7, reflected, the RoCEv2 ICRC
//! (`shared/reference/fastpath.md`, "The ICRC") — at the speed this machine offers, with a fused copy +
//! CRC for the receive and transmit paths that move the payload anyway.
//!
//! The result is always `crc32fast::hash` of the bytes fed; the paths (README.md):
//! - under 16 bytes: slice-by-16 tables (`table.rs`, built at compile time);
//! - x86_64 with PCLMULQDQ: 128-bit folds, four blocks in flight from 64 bytes;
//! - x86_64 with AVX-512 F/VL/BW and VPCLMULQDQ: 512-bit folds from 128 bytes, four 512-bit
//!   accumulators from 256 (`x86.rs`, the crate's only `unsafe`);
//! - anything else: `crc32fast`.
//!
//! The CPU is asked once (cached in an atomic); a call costs no `cpuid`.
//!
//! ```
//! let mut c = mrc_crc::Crc32::new();
//! c.update(b"1234");
//! let mut dst = [0u8; 5];
//! c.update_copy(&mut dst, b"56789");
//! assert_eq!(&dst, b"56789");
//! assert_eq!(c.finalize(), 0xCBF4_3926); // the catalogue's check value
//! assert_eq!(mrc_crc::hash(b"123456789"), crc32fast::hash(b"123456789"));
//! ```

#![deny(unsafe_op_in_unsafe_fn)]

mod consts;
mod table;
#[cfg(target_arch = "x86_64")]
mod x86;

/// A running CRC-32/ISO-HDLC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Crc32 {
    /// The CRC of the bytes fed so far (what `finalize` would return).
    state: u32,
}

impl Crc32 {
    /// A CRC of no bytes yet (as `crc32fast::Hasher::new()`).
    pub const fn new() -> Self {
        Self { state: 0 }
    }

    /// Continue from a value `state()` returned. The state is the CRC of the bytes fed so
    /// far, so `from_state(crc32fast::hash(a))` fed `b` finalizes to the CRC of `a` then `b`.
    pub const fn from_state(state: u32) -> Self {
        Self { state }
    }

    /// The CRC of the bytes fed so far.
    pub fn state(&self) -> u32 {
        self.state
    }

    /// Fold `data` in.
    #[inline]
    pub fn update(&mut self, data: &[u8]) {
        self.state = path::update(path::Path::Best, self.state, data);
    }

    /// Copy `src` into `dst` (same length, panics otherwise) and fold `src` into the CRC, in
    /// one pass: each vector loaded is stored to `dst`, then folded.
    #[inline]
    pub fn update_copy(&mut self, dst: &mut [u8], src: &[u8]) {
        self.state = path::update_copy(path::Path::Best, self.state, dst, src);
    }

    /// Fold `head`, then `data`: as two [`update`](Self::update)s, but one pass without the
    /// reduction between them (a frame's headers, then its payload: issue #13).
    #[inline]
    pub fn update_after(&mut self, head: &[u8], data: &[u8]) {
        self.state = path::update_after(path::Path::Best, self.state, head, data);
    }

    /// Fold `head`, then copy `src` into `dst` (same length, panics otherwise) and fold it: as
    /// [`update`](Self::update) then [`update_copy`](Self::update_copy), one reduction.
    #[inline]
    pub fn update_copy_after(&mut self, head: &[u8], dst: &mut [u8], src: &[u8]) {
        self.state = path::update_copy_after(path::Path::Best, self.state, head, dst, src);
    }

    /// The CRC of all the bytes fed (`crc32fast::hash` of them).
    pub fn finalize(self) -> u32 {
        self.state
    }
}

impl Default for Crc32 {
    fn default() -> Self {
        Self::new()
    }
}

/// The CRC-32/ISO-HDLC of `data`.
#[inline]
pub fn hash(data: &[u8]) -> u32 {
    path::update(path::Path::Best, 0, data)
}

/// [`hash`] at compile time (a byte at a time), for constants.
pub const fn hash_const(data: &[u8]) -> u32 {
    !table::update_raw_const(!0, data)
}

/// The CRC is linear: XORing `delta` into byte `offset` of a message changes its CRC as XORing
/// `start_delta(offset, delta)` into the state it starts from does. So
/// `Crc32::from_state(s ^ start_delta(offset, delta))` fed a message ends where
/// `Crc32::from_state(s)` fed it with that byte XORed would: a protocol whose CRC covers some
/// bytes as fixed values (the RoCEv2 ICRC's masked fields) runs it over the bytes as they are
/// from an adjusted start (issue #13). `const`, for tables built at compile time; it costs
/// `offset` steps.
pub const fn start_delta(offset: usize, delta: u8) -> u32 {
    table::start_delta(offset, delta)
}

/// Each implementation on its own, so that the tests check every one on a machine that would
/// pick the fastest, and the bench can name them. Not a stable API.
#[doc(hidden)]
pub mod path {
    use crate::table;

    /// Under this many bytes the tables beat any fold's setup (and the folds need a block).
    const FOLD_MIN_BYTES: usize = 16;

    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Path {
        /// The fastest this CPU has (what the public API uses).
        Best,
        /// Slice-by-16 tables only.
        Table,
        /// The `crc32fast` crate (its own dispatch).
        Crc32fast,
        /// The 128-bit PCLMULQDQ fold (tables under 16 bytes).
        Pclmul,
        /// The 256-bit VPCLMULQDQ fold on AVX2 (128-bit under 64 bytes, tables under 16).
        Avx2,
        /// The 512-bit VPCLMULQDQ fold (128-bit under 128 bytes, tables under 16).
        Avx512,
    }

    impl Path {
        pub const ALL: [Path; 6] = [
            Path::Best,
            Path::Table,
            Path::Crc32fast,
            Path::Pclmul,
            Path::Avx2,
            Path::Avx512,
        ];

        /// Whether this CPU can run the path.
        pub fn available(self) -> bool {
            match self {
                Path::Best | Path::Table | Path::Crc32fast => true,
                #[cfg(target_arch = "x86_64")]
                Path::Pclmul => crate::x86::level() >= crate::x86::Level::Pclmul,
                #[cfg(target_arch = "x86_64")]
                Path::Avx2 => crate::x86::level() >= crate::x86::Level::Avx2,
                #[cfg(target_arch = "x86_64")]
                Path::Avx512 => crate::x86::level() >= crate::x86::Level::Avx512,
                #[cfg(not(target_arch = "x86_64"))]
                Path::Pclmul | Path::Avx2 | Path::Avx512 => false,
            }
        }
    }

    /// `state` (a CRC, as `Crc32::state`) continued over `data` on `path`. A path this CPU
    /// lacks falls back to the best it has below it (then to crc32fast).
    #[inline]
    pub fn update(path: Path, state: u32, data: &[u8]) -> u32 {
        match path {
            Path::Table => !table::update_raw(!state, data),
            Path::Crc32fast => crc32fast_update(state, data),
            _ => fold::<false>(path, state, &mut [], data),
        }
    }

    /// `state` continued over `src`, which is copied into `dst` (same length, panics
    /// otherwise).
    #[inline]
    pub fn update_copy(path: Path, state: u32, dst: &mut [u8], src: &[u8]) -> u32 {
        assert_eq!(
            dst.len(),
            src.len(),
            "Crc32::update_copy: dst and src differ in length"
        );
        match path {
            Path::Table | Path::Crc32fast => {
                dst.copy_from_slice(src);
                update(path, state, src)
            }
            _ => fold::<true>(path, state, dst, src),
        }
    }

    /// `state` continued over `head`, then `data`, with one reduction where both are a fold's.
    #[inline]
    pub fn update_after(path: Path, state: u32, head: &[u8], data: &[u8]) -> u32 {
        match path {
            Path::Table | Path::Crc32fast => update(path, update(path, state, head), data),
            _ => fold_after::<false>(path, state, head, &mut [], data),
        }
    }

    /// `state` continued over `head`, then over `src`, which is copied into `dst` (same
    /// length, panics otherwise), with one reduction where both are a fold's.
    #[inline]
    pub fn update_copy_after(
        path: Path,
        state: u32,
        head: &[u8],
        dst: &mut [u8],
        src: &[u8],
    ) -> u32 {
        assert_eq!(
            dst.len(),
            src.len(),
            "Crc32::update_copy_after: dst and src differ in length"
        );
        match path {
            Path::Table | Path::Crc32fast => update_copy(path, update(path, state, head), dst, src),
            _ => fold_after::<true>(path, state, head, dst, src),
        }
    }

    #[inline]
    fn fold_after<const COPY: bool>(
        path: Path,
        state: u32,
        head: &[u8],
        dst: &mut [u8],
        src: &[u8],
    ) -> u32 {
        #[cfg(target_arch = "x86_64")]
        {
            use crate::x86;
            if head.len() >= FOLD_MIN_BYTES
                && src.len() >= FOLD_MIN_BYTES
                && let Some(raw) = x86::fold_after::<COPY>(at_most(path), !state, head, dst, src)
            {
                return !raw;
            }
        }
        // A piece too short for a fold (or no fold on this CPU): one piece at a time.
        let state = fold::<false>(path, state, &mut [], head);
        fold::<COPY>(path, state, dst, src)
    }

    /// The widest fold a path may take.
    #[cfg(target_arch = "x86_64")]
    fn at_most(path: Path) -> crate::x86::Level {
        use crate::x86::Level;
        match path {
            Path::Pclmul => Level::Pclmul,
            Path::Avx2 => Level::Avx2,
            _ => Level::Avx512,
        }
    }

    #[inline]
    fn fold<const COPY: bool>(path: Path, state: u32, dst: &mut [u8], src: &[u8]) -> u32 {
        #[cfg(target_arch = "x86_64")]
        {
            use crate::x86::{self, Level};
            if src.len() < FOLD_MIN_BYTES {
                if x86::level() == Level::None {
                    return update_copy_fallback::<COPY>(state, dst, src);
                }
                if COPY {
                    dst.copy_from_slice(src);
                }
                return !table::update_raw(!state, src);
            }
            match x86::fold::<COPY>(at_most(path), !state, dst, src) {
                Some(raw) => !raw,
                None => update_copy_fallback::<COPY>(state, dst, src),
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (path, FOLD_MIN_BYTES);
            update_copy_fallback::<COPY>(state, dst, src)
        }
    }

    fn update_copy_fallback<const COPY: bool>(state: u32, dst: &mut [u8], src: &[u8]) -> u32 {
        if COPY {
            dst.copy_from_slice(src);
        }
        crc32fast_update(state, src)
    }

    fn crc32fast_update(state: u32, data: &[u8]) -> u32 {
        let mut h = crc32fast::Hasher::new_with_initial(state);
        h.update(data);
        h.finalize()
    }
}
