//! Every path (tables, crc32fast, the 128-bit and the 512-bit folds, and the public API's
//! pick) gives `crc32fast::hash` at every length 0..=9000 and every start alignment, in one
//! piece and in several; `update_copy` copies exactly `src` and touches no other byte of `dst`.
//! Paths this CPU lacks are skipped by name (printed), never silently.

use mrc_crc::Crc32;
use mrc_crc::path::{self, Path};
use proptest::prelude::*;

const MAX_LEN: usize = 9000;
/// Room to start a buffer at any of 64 alignments.
const ALIGNS: usize = 64;

/// Pseudo-random bytes (xorshift64*), the same on every run.
fn bytes(n: usize, seed: u64) -> Vec<u8> {
    let mut s = seed | 1;
    (0..n)
        .map(|_| {
            s ^= s >> 12;
            s ^= s << 25;
            s ^= s >> 27;
            (s.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 56) as u8
        })
        .collect()
}

/// A buffer whose start is 64-byte aligned, so `buf[a..]` starts at alignment `a`.
struct Aligned {
    storage: Vec<u8>,
    start: usize,
}

impl Aligned {
    fn new(data: &[u8]) -> Self {
        let mut storage = vec![0u8; data.len() + ALIGNS];
        let start = storage.as_ptr().align_offset(ALIGNS);
        storage[start..start + data.len()].copy_from_slice(data);
        Self { storage, start }
    }
    fn at(&self, align: usize, len: usize) -> &[u8] {
        &self.storage[self.start + align..self.start + align + len]
    }
}

fn paths() -> Vec<Path> {
    let (have, lack): (Vec<Path>, Vec<Path>) = Path::ALL.into_iter().partition(|p| p.available());
    if !lack.is_empty() {
        eprintln!("this CPU lacks {lack:?}: not tested here");
    }
    have
}

/// The lengths at which every alignment is tried: all up to 300 (every tail of every block
/// count the folds special-case), and either side of each power of two up to 8 KiB and of
/// the maximum.
fn some_lengths() -> Vec<usize> {
    let mut v: Vec<usize> = (0..=300).collect();
    for p in [512, 1024, 2048, 4096, 8192, MAX_LEN] {
        v.extend(
            [p - 17, p - 16, p - 1, p, p + 1, p + 15]
                .into_iter()
                .filter(|&l| l <= MAX_LEN),
        );
    }
    v
}

#[test]
fn update_matches_crc32fast_at_every_length_and_alignment() {
    let data = bytes(MAX_LEN + ALIGNS, 1);
    let buf = Aligned::new(&data);
    let paths = paths();
    let check = |align: usize, len: usize| {
        let s = buf.at(align, len);
        let want = crc32fast::hash(s);
        for &p in &paths {
            assert_eq!(path::update(p, 0, s), want, "{p:?} len {len} align {align}");
        }
    };
    for len in 0..=MAX_LEN {
        for align in 0..3 {
            check(align, len);
        }
    }
    for len in some_lengths() {
        for align in 3..ALIGNS {
            check(align, len);
        }
    }
}

#[test]
fn the_public_api_matches_crc32fast() {
    let data = bytes(MAX_LEN, 2);
    for len in [0, 1, 15, 16, 17, 63, 64, 127, 128, 255, 256, 1000, MAX_LEN] {
        let s = &data[..len];
        assert_eq!(mrc_crc::hash(s), crc32fast::hash(s), "len {len}");
        let mut c = Crc32::default();
        c.update(s);
        assert_eq!(c.finalize(), crc32fast::hash(s), "len {len}");
        assert_eq!(c, Crc32::from_state(crc32fast::hash(s)));
    }
    assert_eq!(Crc32::new().finalize(), 0);
    assert_eq!(mrc_crc::hash(b"123456789"), 0xCBF4_3926);
}

#[test]
fn split_updates_and_from_state_continue_identically() {
    let data = bytes(MAX_LEN, 3);
    let paths = paths();
    let cuts = bytes(3 * 600, 4);
    for (i, c) in cuts.chunks(3).enumerate() {
        // Lengths all over 0..=9000 (denser at the short end), cut at random points.
        let len = if i % 2 == 0 {
            i % 300
        } else {
            (i * 15) % (MAX_LEN + 1)
        };
        let s = &data[..len];
        let a = usize::from(c[0]) * len / 255;
        let b = a + usize::from(c[1]) * (len - a) / 255;
        let want = crc32fast::hash(s);
        for &p in &paths {
            let mut st = path::update(p, 0, &s[..a]);
            st = path::update(p, st, &s[a..b]);
            st = path::update(p, st, &s[b..]);
            assert_eq!(st, want, "{p:?} len {len} cut at {a}, {b}");
        }
        let mut crc = Crc32::new();
        crc.update(&s[..a]);
        let mut resumed = Crc32::from_state(crc.state());
        resumed.update(&s[a..b]);
        let mut dst = vec![0u8; len - b];
        resumed.update_copy(&mut dst, &s[b..]);
        assert_eq!(resumed.finalize(), want, "len {len} cut at {a}, {b}");
        assert_eq!(dst, s[b..]);
    }
}

/// `update_copy` on `path` from `src` at `sa` to `dst` at `da`: the CRC, the copy, and the
/// guard bytes around it.
fn check_copy(p: Path, src: &Aligned, dst: &mut [u8], sa: usize, da: usize, len: usize) {
    const GUARD: u8 = 0xA5;
    let s = src.at(sa, len);
    dst.fill(GUARD);
    let d = dst.as_mut_ptr().align_offset(ALIGNS) + da;
    let st = path::update_copy(p, 0x1234_5678, &mut dst[d..d + len], s);
    assert_eq!(
        st,
        path::update(Path::Table, 0x1234_5678, s),
        "{p:?} len {len} src align {sa} dst align {da}"
    );
    assert_eq!(&dst[d..d + len], s, "{p:?} copy, len {len} {sa}/{da}");
    assert!(
        dst[..d].iter().chain(&dst[d + len..]).all(|&b| b == GUARD),
        "{p:?} wrote outside dst, len {len} {sa}/{da}"
    );
}

#[test]
fn update_copy_copies_and_matches_at_every_length_and_alignment() {
    let data = bytes(MAX_LEN + ALIGNS, 5);
    let src = Aligned::new(&data);
    let mut dst = vec![0u8; MAX_LEN + 3 * ALIGNS];
    let paths = paths();
    for len in 0..=MAX_LEN {
        let (sa, da) = [(0, 0), (1, 0), (0, 7), (13, 50)][len % 4];
        for &p in &paths {
            check_copy(p, &src, &mut dst, sa, da, len);
        }
    }
    for len in [
        0, 1, 15, 16, 17, 63, 64, 65, 127, 128, 129, 255, 256, 257, 300, 1025, 4111,
    ] {
        for sa in 0..ALIGNS {
            for da in 0..ALIGNS {
                for &p in &paths {
                    check_copy(p, &src, &mut dst, sa, da, len);
                }
            }
        }
    }
}

/// `update_after` and `update_copy_after` (one reduction for a frame's headers and its
/// payload, issue #13) equal the two pieces fed one after the other, on every path, for every
/// head length up to 300 against payloads of every length up to 300 and beyond, and every
/// alignment of the copy; the copy touches no byte outside `dst`.
#[test]
fn two_pieces_with_one_reduction_match_crc32fast() {
    const GUARD: u8 = 0x5A;
    let data = bytes(2 * MAX_LEN + ALIGNS, 8);
    let src = Aligned::new(&data);
    let mut dst = vec![0u8; MAX_LEN + 3 * ALIGNS];
    let paths = paths();
    let lens: Vec<usize> = (0..=300)
        .chain([511, 512, 1024, 4096, 4111, MAX_LEN])
        .collect();
    for (i, head_len) in (0..=300usize).cycle().take(lens.len() * 3).enumerate() {
        let len = lens[i % lens.len()];
        let (sa, da) = [(0, 0), (1, 0), (0, 7), (13, 50)][i % 4];
        let head = &data[MAX_LEN..MAX_LEN + head_len];
        let s = src.at(sa, len);
        let mut want = crc32fast::Hasher::new_with_initial(0x1234_5678);
        want.update(head);
        want.update(s);
        let want = want.finalize();
        for &p in &paths {
            assert_eq!(
                path::update_after(p, 0x1234_5678, head, s),
                want,
                "{p:?} head {head_len} len {len}"
            );
            dst.fill(GUARD);
            let d = dst.as_mut_ptr().align_offset(ALIGNS) + da;
            let st = path::update_copy_after(p, 0x1234_5678, head, &mut dst[d..d + len], s);
            assert_eq!(st, want, "{p:?} copy, head {head_len} len {len} {sa}/{da}");
            assert_eq!(&dst[d..d + len], s, "{p:?} copy, head {head_len} len {len}");
            assert!(
                dst[..d].iter().chain(&dst[d + len..]).all(|&b| b == GUARD),
                "{p:?} wrote outside dst, head {head_len} len {len}"
            );
        }
    }
    let mut c = Crc32::new();
    let mut out = [0u8; 9];
    c.update_copy_after(b"1234", &mut out[..5], b"56789");
    assert_eq!(c.finalize(), 0xCBF4_3926);
    let mut c = Crc32::new();
    c.update_after(b"1234", b"56789");
    assert_eq!(c.finalize(), 0xCBF4_3926);
}

/// `start_delta`: a byte XORed into the message and the start state adjusted instead give the
/// same CRC, at every offset up to 200 and for every delta; `hash_const` is `hash`.
#[test]
fn a_delta_moved_to_the_start_state_gives_the_same_crc() {
    let data = bytes(260, 9);
    for offset in 0..200usize {
        for delta in 0..=255u8 {
            let len = offset + 1 + (usize::from(delta) % 60);
            let mut changed = data[..len].to_vec();
            changed[offset] ^= delta;
            let mut c = Crc32::from_state(0x89ab_cdef ^ mrc_crc::start_delta(offset, delta));
            c.update(&data[..len]);
            let mut want = Crc32::from_state(0x89ab_cdef);
            want.update(&changed);
            assert_eq!(
                c.finalize(),
                want.finalize(),
                "offset {offset} delta {delta}"
            );
        }
    }
    for len in 0..100 {
        assert_eq!(
            mrc_crc::hash_const(&data[..len]),
            crc32fast::hash(&data[..len])
        );
    }
}

#[test]
#[should_panic(expected = "differ in length")]
fn update_copy_refuses_different_lengths() {
    let mut dst = [0u8; 64];
    Crc32::new().update_copy(&mut dst, &[0u8; 65]);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Any bytes, any cuts: every path and `update_copy` agree with crc32fast.
    #[test]
    fn any_bytes_any_cuts(data in proptest::collection::vec(any::<u8>(), 0..3000), cut in 0usize..3000, seed in any::<u32>()) {
        let cut = cut.min(data.len());
        let want = crc32fast::hash(&data);
        for p in paths() {
            let st = path::update(p, seed, &data[..cut]);
            let mut dst = vec![0u8; data.len() - cut];
            prop_assert_eq!(path::update_copy(p, st, &mut dst, &data[cut..]), {
                let mut h = crc32fast::Hasher::new_with_initial(seed);
                h.update(&data);
                h.finalize()
            });
            prop_assert_eq!(&dst[..], &data[cut..]);
            prop_assert_eq!(path::update(p, 0, &data), want);
        }
    }
}
