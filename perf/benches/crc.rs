//! The ICRC's CRC-32/ISO-HDLC at the lengths a packet has (20 B of headers, a 64 B Write, a
//! SACK, up to a 9000 B jumbo payload): `crc32fast::hash` (the baseline, measured in the same
//! run), `crc-fast` (the other SIMD crate), ours (`mrc_crc::hash`, and each of its paths on its
//! own), and the fused copy + CRC (`Crc32::update_copy`) against `copy_from_slice` followed by
//! crc32fast. The summary at the end prints ns per call and GB/s, and the ratios to crc32fast.
//!
//! `cargo bench -p mrc-perf-bench --bench crc -- --quick`

use std::hint::black_box;
use std::time::Instant as WallClock;

use crc_fast::CrcAlgorithm;
use criterion::{Criterion, Throughput};
use mrc_crc::Crc32;
use mrc_crc::path::{self, Path};

const LENS: [usize; 7] = [20, 64, 150, 256, 1024, 4096, 9000];

/// Pseudo-random bytes, the same on every run.
fn bytes(n: usize) -> Vec<u8> {
    let mut s = 0x9E37_79B9_7F4A_7C15u64;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s as u8
        })
        .collect()
}

/// A way to CRC one buffer, by name.
type Hasher = (&'static str, fn(&[u8]) -> u32);

fn hashers() -> Vec<Hasher> {
    let mut v: Vec<Hasher> = vec![
        ("crc32fast", crc32fast::hash),
        ("crc_fast", |d| {
            crc_fast::checksum(CrcAlgorithm::Crc32IsoHdlc, d) as u32
        }),
        ("ours", mrc_crc::hash),
        ("ours_table", |d| path::update(Path::Table, 0, d)),
    ];
    if Path::Pclmul.available() {
        v.push(("ours_pclmul", |d| path::update(Path::Pclmul, 0, d)));
    }
    if Path::Avx2.available() {
        v.push(("ours_avx2", |d| path::update(Path::Avx2, 0, d)));
    }
    if Path::Avx512.available() {
        v.push(("ours_avx512", |d| path::update(Path::Avx512, 0, d)));
    }
    v
}

fn copy_then_crc32fast(dst: &mut [u8], src: &[u8]) -> u32 {
    dst.copy_from_slice(src);
    crc32fast::hash(dst)
}

fn fused(dst: &mut [u8], src: &[u8]) -> u32 {
    let mut c = Crc32::new();
    c.update_copy(dst, src);
    c.finalize()
}

fn bench(c: &mut Criterion) {
    let data = bytes(LENS[LENS.len() - 1]);
    let mut dst = vec![0u8; data.len()];
    for len in LENS {
        let src = &data[..len];
        let mut g = c.benchmark_group(format!("crc/{len}B"));
        g.throughput(Throughput::Bytes(len as u64));
        for (name, f) in hashers() {
            assert_eq!(f(src), crc32fast::hash(src), "{name}");
            g.bench_function(name, |b| b.iter(|| f(black_box(src))));
        }
        let d = &mut dst[..len];
        g.bench_function("copy_then_crc32fast", |b| {
            b.iter(|| copy_then_crc32fast(black_box(&mut *d), black_box(src)));
        });
        g.bench_function("ours_update_copy", |b| {
            b.iter(|| fused(black_box(&mut *d), black_box(src)));
        });
        g.finish();
    }
}

/// CPU time this thread has run, from the scheduler (`/proc/thread-self/schedstat`, ns): on a
/// machine shared with other work, time on the CPU is what a packet costs a core.
fn cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

/// Run `f` for about `secs` seconds of wall time, in rounds of `round` calls (a clock read
/// costs more than a short CRC); the seconds of CPU (or, where the scheduler does not say, of
/// wall time) one call takes.
fn per_call(secs: f64, round: u64, mut f: impl FnMut()) -> f64 {
    f();
    let mut n = 0u64;
    let start = WallClock::now();
    let cpu0 = cpu_ns();
    while start.elapsed().as_secs_f64() < secs {
        for _ in 0..round {
            f();
        }
        n += round;
    }
    let wall = start.elapsed().as_secs_f64();
    let cpu = cpu0.zip(cpu_ns()).map(|(a, b)| (b - a) as f64 / 1e9);
    cpu.unwrap_or(wall) / n as f64
}

/// The summary: ns per call and GB/s for each, ours against crc32fast, fused against copy +
/// crc32fast.
fn summary() {
    let data = bytes(LENS[LENS.len() - 1]);
    let mut dst = vec![0u8; data.len()];
    let names: Vec<&str> = hashers().iter().map(|h| h.0).collect();
    println!("\nCRC-32/ISO-HDLC, ns per call (GB/s), CPU time on one core:");
    print!("  {:>6}", "bytes");
    for n in &names {
        print!(" {n:>17}");
    }
    println!(
        " {:>17} {:>17}  {:>10} {:>10}",
        "copy+crc32fast", "ours_update_copy", "crc32fast/ours", "copy+crc/fused"
    );
    for len in LENS {
        let src = &data[..len];
        // Rounds of ~64 KiB or 64 calls: the clock read (~25 ns) stays under 1 % of a round.
        let round = (65536 / len as u64).max(64);
        let cell = |t: f64| format!("{:7.1} ({:5.1})", t * 1e9, len as f64 / t / 1e9);
        print!("  {len:>6}");
        let mut baseline = 0.0;
        let mut ours = 0.0;
        for (name, f) in hashers() {
            let t = per_call(0.3, round, || {
                black_box(f(black_box(src)));
            });
            match name {
                "crc32fast" => baseline = t,
                "ours" => ours = t,
                _ => {}
            }
            print!(" {:>17}", cell(t));
        }
        let d = &mut dst[..len];
        let unfused = per_call(0.3, round, || {
            black_box(copy_then_crc32fast(black_box(&mut *d), black_box(src)));
        });
        let fused_t = per_call(0.3, round, || {
            black_box(fused(black_box(&mut *d), black_box(src)));
        });
        println!(
            " {:>17} {:>17}  {:>14.2} {:>14.2}",
            cell(unfused),
            cell(fused_t),
            baseline / ours,
            unfused / fused_t
        );
    }
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    bench(&mut c);
    c.final_summary();
    // `cargo bench` passes --bench; `cargo test --benches` does not (then criterion only checks
    // each benchmark runs once, and so do we).
    // Under `--profile-time` (perf record) the profile is of the one benchmark named, alone.
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--bench") && !args.iter().any(|a| a == "--profile-time") {
        summary();
    }
}
