//! Copies into and out of a NIC [`MemoryRegion`] (the registered memory the application and
//! the NIC thread share), against `copy_from_slice` of the same bytes between two `Vec`s in
//! the same run: `write` is what the NIC does to place received payload (and the application
//! to fill a send buffer), `read` what it does to gather send payload. Sizes 64 B, 1 KiB,
//! 4 KiB and 64 KiB, at a word-aligned region offset (0) and an unaligned one (3).
//!
//! The summary at the end (under `cargo bench`, which passes `--bench`) prints GB/s of each
//! copy and its ratio to the `Vec` copy.
//!
//! `cargo bench -p mrc-perf-bench --bench nic_memory`

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use mrc_nic::MemoryRegion;

const SIZES: [usize; 4] = [64, 1024, 4096, 65536];
/// Region offsets: word-aligned, and 3 bytes past a word boundary.
const OFFSETS: [(usize, &str); 2] = [(0, "aligned"), (3, "unaligned")];

/// Source, destination and region for one size (the region has room for the unaligned offset).
struct Bufs {
    src: Vec<u8>,
    dst: Vec<u8>,
    region: MemoryRegion,
}

impl Bufs {
    fn new(len: usize) -> Self {
        Self {
            src: (0..len).map(|i| i as u8).collect(),
            dst: vec![0; len + 8],
            region: MemoryRegion::new(len + 8),
        }
    }

    fn write(&self, offset: usize) {
        self.region.write(offset, black_box(&self.src));
    }

    fn read(&mut self, offset: usize) {
        let n = self.src.len();
        self.region.read(offset, black_box(&mut self.dst[..n]));
    }

    /// The baseline: the same bytes between two plain buffers, at the same offset.
    fn vec_copy(&mut self, offset: usize) {
        let n = self.src.len();
        self.dst[offset..offset + n].copy_from_slice(black_box(&self.src));
        black_box(&mut self.dst);
    }
}

fn bench(c: &mut Criterion) {
    for len in SIZES {
        let mut g = c.benchmark_group(format!("nic_memory/{len}B"));
        g.throughput(Throughput::Bytes(len as u64));
        let mut b = Bufs::new(len);
        for (offset, name) in OFFSETS {
            g.bench_function(format!("region_write_{name}"), |x| {
                x.iter(|| b.write(offset));
            });
            g.bench_function(format!("region_read_{name}"), |x| x.iter(|| b.read(offset)));
            g.bench_function(format!("vec_copy_{name}"), |x| {
                x.iter(|| b.vec_copy(offset));
            });
        }
        g.finish();
    }
}

/// Seconds one call of `f` takes, over about `secs` seconds of wall time (calls batched so the
/// clock is read rarely).
fn per_call(secs: f64, mut f: impl FnMut()) -> f64 {
    const BATCH: u64 = 64;
    f();
    let (mut n, start) = (0u64, Instant::now());
    while start.elapsed().as_secs_f64() < secs {
        for _ in 0..BATCH {
            f();
        }
        n += BATCH;
    }
    start.elapsed().as_secs_f64() / n as f64
}

/// GB/s of each copy and its ratio to the plain `Vec` copy of the same bytes.
fn summary() {
    println!("\nMemoryRegion copies vs copy_from_slice between Vecs (GB/s; ratio = region / vec):");
    println!(
        "  {:>7} {:>9} | {:>8} {:>8} {:>8} | {:>6} {:>6}",
        "bytes", "offset", "write", "read", "vec", "w/vec", "r/vec"
    );
    for len in SIZES {
        let mut b = Bufs::new(len);
        for (offset, name) in OFFSETS {
            let gbs = |t: f64| len as f64 / t / 1e9;
            let w = gbs(per_call(0.2, || b.write(offset)));
            let r = gbs(per_call(0.2, || b.read(offset)));
            let v = gbs(per_call(0.2, || b.vec_copy(offset)));
            println!(
                "  {len:>7} {name:>9} | {w:8.1} {r:8.1} {v:8.1} | {:6.2} {:6.2}",
                w / v,
                r / v
            );
        }
    }
}

fn main() {
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_millis(700))
        .configure_from_args();
    bench(&mut c);
    c.final_summary();
    // `cargo bench` passes --bench; `cargo test --benches` does not (then criterion only checks
    // each benchmark runs once, and so do we). Under `--profile-time` the profile is of the one
    // benchmark named, alone.
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--bench") && !args.iter().any(|a| a == "--profile-time") {
        summary();
    }
}
