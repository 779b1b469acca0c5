//! Congestion-control cost per feedback: what NSCC, DCQCN and the fixed window cost the datapath
//! on every SACK (`on_ack`) and every send (`on_packet_sent`). The fixed window is the floor
//! measured in the same run; report NSCC and DCQCN as ratios against it.
//!
//! `cargo bench -p mrc-perf-bench --bench cc -- --quick`

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use mrc_transport::cc::{
    AckSample, CcProfile, CongestionController, DcqcnConfig, NsccConfig, PathFacts, build,
};
use mrc_transport::{Duration, Instant};

/// 400 Gb/s, 10 µs, 4 KiB packets (the brief's anchor network).
fn facts() -> PathFacts {
    PathFacts {
        line_rate_bps: 400_000_000_000,
        base_rtt: Duration::from_micros(10),
        mtu_bytes: 4_136,
    }
}

/// A stream of SACK samples touching every quadrant: mostly clean, some delayed, some marked.
fn samples() -> Vec<AckSample> {
    (0..1024u64)
        .map(|i| AckSample {
            newly_acked_bytes: 4_136,
            inflight_bytes: 400_000,
            rtt: Some(Duration(10_000 + (i * 7_919) % 12_000)),
            ecn: i % 16 == 0,
            rcv_cwnd_pen: 0,
            rcvd_bytes_delta: 4_096,
        })
        .collect()
}

fn profiles() -> [(&'static str, CcProfile); 3] {
    [
        ("fixed", CcProfile::Fixed { window_bytes: None }),
        ("nscc", CcProfile::Nscc(NsccConfig::default())),
        ("dcqcn", CcProfile::Dcqcn(DcqcnConfig::default())),
    ]
}

fn on_ack(c: &mut Criterion) {
    let acks = samples();
    let mut g = c.benchmark_group("cc/on_ack");
    g.throughput(Throughput::Elements(acks.len() as u64));
    for (name, profile) in profiles() {
        let mut cc: Box<dyn CongestionController> = build(&profile, &facts());
        let mut now = Instant::ZERO;
        g.bench_function(name, |b| {
            b.iter(|| {
                for ack in &acks {
                    now += Duration(10);
                    cc.on_ack(now, black_box(ack));
                }
                black_box(cc.window())
            });
        });
    }
    g.finish();
}

fn on_packet_sent(c: &mut Criterion) {
    let mut g = c.benchmark_group("cc/on_packet_sent");
    g.throughput(Throughput::Elements(1024));
    for (name, profile) in profiles() {
        let mut cc: Box<dyn CongestionController> = build(&profile, &facts());
        let mut now = Instant::ZERO;
        g.bench_function(name, |b| {
            b.iter(|| {
                for _ in 0..1024 {
                    now += Duration(10);
                    cc.on_packet_sent(now, black_box(4_136));
                }
                black_box(cc.next_send_time(now))
            });
        });
    }
    g.finish();
}

criterion_group!(benches, on_ack, on_packet_sent);
criterion_main!(benches);
