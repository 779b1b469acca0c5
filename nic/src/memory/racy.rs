//! Racing copies at memcpy speed: byte-wise atomic copies into and out of a region's words in
//! inline assembly: 64-byte AVX-512 moves with a byte-masked tail below 2 KiB where the CPU has
//! AVX-512BW, 32-byte AVX2 moves (the tail by `rep movsb`) where it has AVX2 but not AVX-512,
//! `rep movsb` otherwise (`rep stosb` to fill). The only `unsafe` in `mrc-nic`.
//!
//! # What the copies are, in the memory model
//!
//! Each copy means "a relaxed atomic load or store of every byte of the range, in no
//! particular order" (C++ P1478 byte-wise atomic memcpy; Rust RFC 3301 `AtomicPerByte`, still
//! open). Rust has no such operation yet and LLVM does not vectorise atomic loops, so we write
//! it in assembly. The argument, in three steps:
//!
//! 1. *An asm block is a black box that may do what an FFI function may do*
//!    (Reference, `asm.rules.black-box`, `asm.rules.mem-same-as-ffi`): the compiler assumes
//!    nothing about the instructions, only that the block reads and writes memory reachable
//!    from the pointers it is given, as a foreign function could. Its effect on the abstract
//!    machine is that of *some* sequence of operations the machine has; we name the one:
//!    `AtomicU8::load/store(Relaxed)` of each byte in the range.
//! 2. *The hardware does at least that.* On x86-64 every byte a `rep movsb` / `rep stosb` or a
//!    vector move touches is read or written by a single-copy-atomic access (no instruction
//!    tears a byte; a string store never writes a byte outside its range, nor a masked vector
//!    store a masked-off byte, Intel SDM vol. 2, VMOVDQU8); x86-TSO gives each location
//!    a coherent order, which is all `Relaxed` asks. Fast-string stores may become visible out
//!    of order *with each other* (Intel SDM vol. 3A, "Fast-String Operation and Out-of-Order
//!    Stores"), which per-byte relaxed allows, and they are ordered before a later store to a
//!    separate flag, which is how the completion rings publish them (a release push after the
//!    copy, an acquire pop before the reader's copy): a completed operation's bytes are
//!    visible, as before.
//! 3. *No mixed sizes.* Rust forbids racing atomic accesses that partially overlap
//!    (`std::sync::atomic`, "mixed-size accesses"), so in this build *every* access to a
//!    region's bytes after its creation is one of these byte-wise copies: `read`, `write`,
//!    `fill`, `to_vec` and the engine's [`Memory`](mrc_transport::verbs::Memory) impl all come
//!    here, the `AtomicU64` word loop in `memory.rs` is compiled for other targets and for
//!    single-threaded tests only. Partial words at the ends need no read-modify-write: a byte
//!    store leaves its neighbours alone, so two writers of neighbouring bytes keep each
//!    other's bytes.
//!
//! The other side of each copy is the caller's own `&[u8]` / `&mut [u8]`, read or written
//! non-atomically with no one racing (the borrow says so).
//!
//! # Why this and not ...
//!
//! - `ptr::copy_nonoverlapping` on the words: a non-atomic access racing with the other
//!   thread's copy is a data race, undefined behaviour, whatever the machine code.
//! - `volatile_copy_memory`: volatile is not atomic; racing volatile accesses are data races.
//!   `atomic_element_unordered_copy_*` (LLVM's element-wise unordered atomic memcpy) was an
//!   unstable intrinsic and is gone from `core`.
//! - `atomic-memcpy` (taiki-e): sound per-word relaxed atomics, but of one sized `T` at a
//!   time (not a slice) and at word-loop speed: measured for 4 KiB on this machine at 6-7 GB/s
//!   store and 6-23 GB/s load, against 55-70 GB/s for memcpy.
//! - SIMD intrinsics (`_mm512_loadu_si512`) are ordinary non-atomic Rust accesses to the
//!   compiler: the same data race as `copy_nonoverlapping`.
//! - `rep movsb` alone: needs no feature detection and runs at memcpy speed from 2-4 KiB (this
//!   CPU has ERMSB and FSRM), but its start-up costs it about half of memcpy's speed at 1 KiB;
//!   the AVX-512 loop does better there (reads especially). Figures in docs/nics.md, from
//!   `perf/benches/nic_memory.rs`.
//!
//! - `rep movsb` where the CPU has no AVX-512: on the AMD EPYC (Zen 3) VMs this project also
//!   runs on, `rep movsb` moves 4 KiB at 13-17 GB/s against 84 GB/s for 32-byte vector moves
//!   (issue #13), so there the AVX2 loop takes every length.
//!
//! Not closed: at 64 B a copy still costs about twice a plain one (the range check, the
//! feature test and an out-of-line call per copy).

use std::arch::asm;
use std::sync::atomic::AtomicU64;

const WORD: usize = 8;

/// Below this many bytes the AVX-512 loop beats `rep movsb`'s start-up; from it on `rep
/// movsb` runs at memcpy speed (measured with `perf/benches/nic_memory.rs`).
const VECTOR_BELOW_BYTES: usize = 2048;

/// How one copy moves its bytes. Both access every byte of the range once, byte-wise, and no
/// byte outside it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    /// `rep movsb` (ERMSB/FSRM make it memcpy-fast from about 2 KiB).
    RepMovsb,
    /// 64-byte AVX-512 loads and stores, the last partial block through a byte mask; only where
    /// the CPU has AVX-512BW and BMI2 (checked at run time).
    Avx512,
    /// 32-byte AVX2 loads and stores, the last `len % 32` bytes by `rep movsb`; only where the
    /// CPU has AVX2 (checked at run time).
    Avx2,
}

impl Kind {
    /// The copy this CPU does fastest for `len` bytes.
    fn for_len(len: usize) -> Self {
        if Self::Avx512.available() {
            if len < VECTOR_BELOW_BYTES {
                Self::Avx512
            } else {
                Self::RepMovsb
            }
        } else if Self::Avx2.available() {
            Self::Avx2
        } else {
            Self::RepMovsb
        }
    }

    /// Whether this CPU can run it.
    pub(super) fn available(self) -> bool {
        match self {
            Self::RepMovsb => true,
            Self::Avx512 => {
                std::arch::is_x86_feature_detected!("avx512bw")
                    && std::arch::is_x86_feature_detected!("bmi2")
            }
            Self::Avx2 => std::arch::is_x86_feature_detected!("avx2"),
        }
    }
}

/// The region's first byte, as a pointer the asm may read and write through (the words are
/// `UnsafeCell`s, so writing through a pointer derived from `&[AtomicU64]` is allowed, as
/// `AtomicU64::as_ptr` does).
fn base(words: &[AtomicU64]) -> *mut u8 {
    words.as_ptr().cast::<u8>().cast_mut()
}

fn check(words: &[AtomicU64], offset: usize, len: usize) {
    assert!(
        offset
            .checked_add(len)
            .is_some_and(|end| end <= words.len() * WORD),
        "range {offset}+{len} outside {} words",
        words.len()
    );
}

/// Copies `dst.len()` bytes of the region starting at byte `offset` into `dst`, each byte by a
/// relaxed atomic load.
pub(super) fn load(words: &[AtomicU64], offset: usize, dst: &mut [u8]) {
    load_with(Kind::for_len(dst.len()), words, offset, dst);
}

/// Copies `src` into the region starting at byte `offset`, each byte by a relaxed atomic
/// store; bytes outside the range are never written.
pub(super) fn store(words: &[AtomicU64], offset: usize, src: &[u8]) {
    store_with(Kind::for_len(src.len()), words, offset, src);
}

/// [`load`] by the given kind of copy.
///
/// # Panics
/// If the range is outside `words`, or `kind` is not [`available`](Kind::available).
pub(super) fn load_with(kind: Kind, words: &[AtomicU64], offset: usize, dst: &mut [u8]) {
    check(words, offset, dst.len());
    // Safety: `offset..offset + dst.len()` lies inside `words` (checked above) and `dst` is
    // exclusively ours and does not overlap the region (a `&mut` borrow); `copy` reads those
    // bytes of the region byte-wise (the per-byte relaxed atomic load of the module doc).
    unsafe {
        copy(
            kind,
            dst.as_mut_ptr(),
            base(words).add(offset).cast_const(),
            dst.len(),
        );
    }
}

/// [`store`] by the given kind of copy.
///
/// # Panics
/// As [`load_with`].
pub(super) fn store_with(kind: Kind, words: &[AtomicU64], offset: usize, src: &[u8]) {
    check(words, offset, src.len());
    // Safety: `offset..offset + src.len()` lies inside `words` (checked above) and `src` is a
    // shared borrow no one writes meanwhile, not overlapping the region; `copy` writes exactly
    // those bytes of the region, byte-wise (the per-byte relaxed atomic store of the doc).
    unsafe {
        copy(kind, base(words).add(offset), src.as_ptr(), src.len());
    }
}

/// Copies `len` bytes from `src` to `dst`: every byte read once and written once by a
/// byte-granular access, no byte outside either range touched.
///
/// # Safety
/// `src..src + len` readable and `dst..dst + len` writable for the whole call, not
/// overlapping; any concurrent access to them is another of these copies (the module doc).
/// # Panics
/// If `kind` is not available on this CPU.
unsafe fn copy(kind: Kind, dst: *mut u8, src: *const u8, len: usize) {
    match kind {
        // Safety: the caller's contract; `rep movsb` clobbers only rcx/rsi/rdi (declared) and
        // keeps the flags (DF is clear on entry, `asm.rules.x86-df`).
        Kind::RepMovsb => unsafe {
            asm!(
                "rep movsb",
                inout("rcx") len => _,
                inout("rsi") src => _,
                inout("rdi") dst => _,
                options(nostack, preserves_flags),
            );
        },
        Kind::Avx512 => {
            assert!(kind.available(), "AVX-512BW copy on a CPU without it");
            // Safety: the caller's contract, and the CPU has AVX-512BW and BMI2 (asserted).
            unsafe { copy_avx512(dst, src, len) }
        }
        Kind::Avx2 => {
            assert!(kind.available(), "AVX2 copy on a CPU without it");
            // Safety: the caller's contract, and the CPU has AVX2 (asserted).
            unsafe { copy_avx2(dst, src, len) }
        }
    }
}

/// [`copy`] with 32-byte vector moves, four at a time while 128 bytes are left; the last
/// `len % 32` bytes by `rep movsb`. Every byte is read and written once.
///
/// # Safety
/// As [`copy`], on a CPU with AVX2.
#[target_feature(enable = "avx2")]
unsafe fn copy_avx2(dst: *mut u8, src: *const u8, len: usize) {
    // Safety: the caller's contract and CPU features. Every vector move is within the first
    // `len - len % 32` bytes (the loop conditions), `rep movsb` moves the rest; `clobber_abi
    // ("C")` declares the vector registers clobbered (so `vzeroupper` after the ymm moves
    // breaks no value the compiler keeps), flags are clobbered (no `preserves_flags`), DF is
    // clear on entry (`asm.rules.x86-df`).
    unsafe {
        asm!(
            "5:",
            "cmp rcx, 128",
            "jb 2f",
            "vmovdqu ymm0, [rsi]",
            "vmovdqu ymm1, [rsi + 32]",
            "vmovdqu ymm2, [rsi + 64]",
            "vmovdqu ymm3, [rsi + 96]",
            "vmovdqu [rdi], ymm0",
            "vmovdqu [rdi + 32], ymm1",
            "vmovdqu [rdi + 64], ymm2",
            "vmovdqu [rdi + 96], ymm3",
            "add rsi, 128",
            "add rdi, 128",
            "sub rcx, 128",
            "jmp 5b",
            "2:",
            "cmp rcx, 32",
            "jb 3f",
            "vmovdqu ymm0, [rsi]",
            "vmovdqu [rdi], ymm0",
            "add rsi, 32",
            "add rdi, 32",
            "sub rcx, 32",
            "jmp 2b",
            "3:",
            "vzeroupper",
            "rep movsb",
            inout("rcx") len => _,
            inout("rsi") src => _,
            inout("rdi") dst => _,
            clobber_abi("C"),
            options(nostack),
        );
    }
}

/// [`copy`] with 64-byte vector moves; the last `len % 64` bytes go through a byte mask, and
/// masked-off bytes are neither read nor written (nor fault).
///
/// # Safety
/// As [`copy`], on a CPU with AVX-512BW and BMI2.
#[target_feature(enable = "avx512f,avx512bw,bmi2")]
unsafe fn copy_avx512(dst: *mut u8, src: *const u8, len: usize) {
    // Safety: the caller's contract and CPU features. `clobber_abi("C")` declares every
    // vector and mask register clobbered (so `vzeroupper`, which avoids the SSE transition
    // penalty after the zmm moves, breaks no value the compiler keeps), flags are clobbered
    // (no `preserves_flags`).
    unsafe {
        asm!(
            "5:",
            "cmp rcx, 256",
            "jb 2f",
            "vmovdqu8 zmm0, [rsi]",
            "vmovdqu8 zmm1, [rsi + 64]",
            "vmovdqu8 zmm2, [rsi + 128]",
            "vmovdqu8 zmm3, [rsi + 192]",
            "vmovdqu8 [rdi], zmm0",
            "vmovdqu8 [rdi + 64], zmm1",
            "vmovdqu8 [rdi + 128], zmm2",
            "vmovdqu8 [rdi + 192], zmm3",
            "add rsi, 256",
            "add rdi, 256",
            "sub rcx, 256",
            "jmp 5b",
            "2:",
            "cmp rcx, 64",
            "jb 3f",
            "vmovdqu8 zmm0, [rsi]",
            "vmovdqu8 [rdi], zmm0",
            "add rsi, 64",
            "add rdi, 64",
            "sub rcx, 64",
            "jmp 2b",
            "3:",
            "test rcx, rcx",
            "jz 4f",
            "mov rax, -1",
            "bzhi rax, rax, rcx",
            "kmovq k1, rax",
            "vmovdqu8 zmm0 {{k1}}{{z}}, [rsi]",
            "vmovdqu8 [rdi] {{k1}}, zmm0",
            "4:",
            "vzeroupper",
            inout("rcx") len => _,
            inout("rsi") src => _,
            inout("rdi") dst => _,
            out("rax") _,
            clobber_abi("C"),
            options(nostack),
        );
    }
}

/// Sets `len` bytes of the region starting at byte `offset` to `byte`, each by a relaxed
/// atomic store.
pub(super) fn fill(words: &[AtomicU64], offset: usize, len: usize, byte: u8) {
    check(words, offset, len);
    // Safety: `offset..offset + len` lies inside `words` (checked above); `rep stosb` writes
    // exactly those bytes, each as a byte-sized access; clobbers rcx/rdi (declared), reads al.
    unsafe {
        asm!(
            "rep stosb",
            inout("rcx") len => _,
            inout("rdi") base(words).add(offset) => _,
            in("al") byte,
            options(nostack, preserves_flags),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_round_trips_every_offset_and_length_against_a_plain_buffer() {
        let kinds: Vec<Kind> = [Kind::RepMovsb, Kind::Avx512, Kind::Avx2]
            .into_iter()
            .filter(|k| k.available())
            .collect();
        assert!(kinds.contains(&Kind::RepMovsb));
        let mut salt = 0_u8;
        for &kind in &kinds {
            for len in (0..300).chain([4095, 4096, 4097, 9000]) {
                for offset in 0..16 {
                    salt = salt.wrapping_add(1);
                    let total: usize = offset + len + 13;
                    let words: Vec<AtomicU64> = (0..total.div_ceil(WORD))
                        .map(|_| AtomicU64::new(0))
                        .collect();
                    let back: Vec<u8> = (0..total).map(|i| (i as u8) ^ 0x5a).collect();
                    store_with(Kind::RepMovsb, &words, 0, &back);
                    let src: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_add(salt)).collect();
                    store_with(kind, &words, offset, &src);
                    let mut model = back.clone();
                    model[offset..offset + len].copy_from_slice(&src);
                    let mut all = vec![0xee; total];
                    load_with(Kind::RepMovsb, &words, 0, &mut all);
                    assert_eq!(all, model, "{kind:?} store {offset}+{len}");
                    let mut part = vec![0xee; len + 2];
                    load_with(kind, &words, offset, &mut part[1..=len]);
                    assert_eq!(part[1..=len], src[..], "{kind:?} load {offset}+{len}");
                    assert_eq!(
                        (part[0], part[len + 1]),
                        (0xee, 0xee),
                        "{kind:?} {offset}+{len}"
                    );
                }
            }
        }
    }
}
