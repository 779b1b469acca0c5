//! NSCC behaviour, one quadrant or mechanism per test, on the reference network
//! (100 Gb/s × 12 µs, 4000-byte packets: BDP 150 KB, max window 262.5 KB, target 9 µs).

use proptest::prelude::*;

use super::*;
use crate::cc::{AckSample, CongestionController, NackCause, NackSample, PathFacts};
use crate::time::{Duration, Instant};

const MTU: u64 = 4_000;
const RTT_NS: u64 = 12_000;

fn facts() -> PathFacts {
    PathFacts {
        line_rate_bps: 100_000_000_000,
        base_rtt: Duration(RTT_NS),
        mtu_bytes: MTU as u32,
    }
}

fn nscc(config: NsccConfig) -> Nscc {
    Nscc::new(&config, &facts())
}

fn ack(bytes: u64, delay_ns: u64, ecn: bool) -> AckSample {
    AckSample {
        newly_acked_bytes: bytes,
        inflight_bytes: 0,
        rtt: Some(Duration(RTT_NS + delay_ns)),
        ecn,
        rcv_cwnd_pen: 0,
        rcvd_bytes_delta: 0,
    }
}

fn trim_nack(bytes: u64) -> NackSample {
    NackSample {
        bytes,
        inflight_bytes: 0,
        cause: NackCause::Trimmed,
        rtt: None,
    }
}

/// One round trip of SACK clocking: a window's worth of one-packet SACKs spread over the RTT
/// starting at `start`, each built by `sample`. Returns the time after the round.
fn round(cc: &mut Nscc, start: Instant, sample: impl Fn() -> AckSample) -> Instant {
    let packets = cc.window().div_ceil(MTU).max(1);
    for i in 0..packets {
        cc.on_ack(start + Duration(RTT_NS * i / packets), &sample());
    }
    start + Duration(RTT_NS)
}

#[test]
fn window_grows_from_one_packet_to_the_ceiling_on_clean_sacks() {
    let mut cc = nscc(NsccConfig {
        initial_cwnd: Some(MTU),
        ..NsccConfig::default()
    });
    assert_eq!(cc.window(), MTU);
    let max = cc.params().max_cwnd;
    let mut now = Instant::ZERO;
    let mut rounds = 0;
    while cc.window() < max {
        let before = cc.window();
        now = round(&mut cc, now, || ack(MTU, 0, false));
        assert!(
            cc.window() >= before,
            "a clean SACK never shrinks the window"
        );
        rounds += 1;
        assert!(rounds < 40, "stuck at {} after {rounds} RTTs", cc.window());
    }
    assert_eq!(cc.window(), max);
    assert!(
        cc.stats().fast_increase_bytes > 0,
        "zero delay uses fast increase"
    );
}

#[test]
fn delay_below_target_grows_proportionally_not_fast() {
    let mut cc = nscc(NsccConfig {
        initial_cwnd: Some(10 * MTU),
        eta: Some(0.0),
        ..NsccConfig::default()
    });
    let mut now = Instant::ZERO;
    let near = {
        let mut c = cc.clone();
        round(&mut c, now, || ack(MTU, 8_000, false));
        c.window()
    };
    now = round(&mut cc, now, || ack(MTU, 2_000, false));
    assert!(
        cc.window() > near,
        "more headroom below target, faster increase"
    );
    for _ in 0..200 {
        now = round(&mut cc, now, || ack(MTU, 2_000, false));
    }
    assert_eq!(cc.window(), cc.params().max_cwnd);
    assert_eq!(cc.stats().fast_increase_bytes, 0);
    assert!(cc.stats().proportional_increase_bytes > 0);
}

#[test]
fn delay_above_target_without_ecn_is_a_fair_increase() {
    let mut cc = nscc(NsccConfig {
        initial_cwnd: Some(20 * MTU),
        eta: Some(0.0),
        ..NsccConfig::default()
    });
    let fi = cc.params().fi_bytes;
    round(&mut cc, Instant::ZERO, || ack(MTU, 15_000, false));
    // One window of deliveries adds about fi bytes (inc = fi·delivered, applied as inc/cwnd).
    let grown = cc.window() - 20 * MTU;
    assert!(grown > fi / 2 && grown <= fi + MTU, "grew {grown}, fi {fi}");
    assert_eq!(cc.stats().fair_increase_bytes, grown);
}

#[test]
fn ecn_with_high_delay_cuts_at_most_once_per_base_rtt_and_at_most_by_max_md_jump() {
    let mut cc = nscc(NsccConfig {
        disable_qa: true,
        eta: Some(0.0),
        ..NsccConfig::default()
    });
    let start = cc.window();
    let t0 = Instant(1_000_000);
    // The first marked, high-delay SACK cuts by γ·(avg − target)/avg on the EWMA.
    cc.on_ack(t0, &ack(MTU, 100 * RTT_NS, true));
    let avg = cc.avg_delay_ns();
    let target = cc.params().target_ns;
    let expected = start - start * (avg - target) * 4 / 5 / avg;
    assert!(
        cc.window().abs_diff(expected) <= 2,
        "{} vs {expected}",
        cc.window()
    );
    assert_eq!(cc.stats().multiplicative_decreases, 1);

    // More marks in the same base RTT: no further cut.
    let once = cc.window();
    for i in 1..50 {
        cc.on_ack(t0 + Duration(i * 200), &ack(MTU, 100 * RTT_NS, true));
    }
    assert_eq!(cc.window(), once);
    assert_eq!(cc.stats().multiplicative_decreases, 1);

    // One base RTT later, with the average far above target: exactly a halving (the bound).
    cc.on_ack(t0 + Duration(RTT_NS + 1), &ack(MTU, 100 * RTT_NS, true));
    assert_eq!(cc.stats().multiplicative_decreases, 2);
    assert_eq!(cc.window(), once - once / 2);

    // A smaller max_md_jump bounds the cut further.
    let mut gentle = nscc(NsccConfig {
        disable_qa: true,
        eta: Some(0.0),
        max_md_jump: 0.25,
        ..NsccConfig::default()
    });
    for i in 0..60 {
        gentle.on_ack(t0 + Duration(i), &ack(MTU, 100 * RTT_NS, true));
    }
    let w = gentle.window();
    gentle.on_ack(t0 + Duration(RTT_NS + 100), &ack(MTU, 100 * RTT_NS, true));
    assert_eq!(gentle.window(), w - w / 4);
}

#[test]
fn ecn_below_target_changes_nothing() {
    let mut cc = nscc(NsccConfig {
        eta: Some(0.0),
        ..NsccConfig::default()
    });
    let start = cc.window();
    let mut now = Instant::ZERO;
    for _ in 0..20 {
        now = round(&mut cc, now, || ack(MTU, 3_000, true));
    }
    assert_eq!(cc.window(), start);
    assert_eq!(*cc.stats(), NsccStats::default());
}

#[test]
fn quick_adapt_snaps_to_delivered_bytes_after_a_trim_burst_and_ignores_stale_marks() {
    let mut cc = nscc(NsccConfig {
        initial_cwnd: Some(225_000),
        ..NsccConfig::default()
    });
    let period = RTT_NS + cc.params().target_ns;
    // First feedback opens the first Quick Adapt period.
    cc.on_ack(Instant(0), &ack(MTU, 0, false));
    // A trim burst: two packets get through, ten are trimmed.
    cc.on_ack(Instant(5_000), &ack(MTU, 0, false));
    for i in 0..10 {
        cc.on_nack(Instant(6_000 + i), &trim_nack(MTU));
    }
    cc.on_ack(Instant(7_000), &ack(MTU, 0, false));
    assert!(
        cc.window() > 100_000,
        "before the period ends only NACK decrements apply"
    );
    assert_eq!(cc.stats().quick_adapts, 0);

    // The period ends: the window becomes what was delivered in it (3 packets, counting this).
    let mut stale = ack(MTU, 0, false);
    stale.inflight_bytes = 40 * MTU;
    cc.on_ack(Instant(period + 1), &stale);
    assert_eq!(cc.stats().quick_adapts, 1);
    assert_eq!(cc.window(), 3 * MTU);

    // Marks on packets that were in flight before QA are stale: no decrease for them.
    for i in 0..30 {
        cc.on_ack(Instant(period + 2 + i), &ack(MTU, 10 * RTT_NS, true));
    }
    assert_eq!(cc.window(), 3 * MTU);
    assert_eq!(cc.stats().multiplicative_decreases, 0);
}

#[test]
fn quick_adapt_does_not_fire_when_enough_was_delivered_or_when_disabled() {
    for (disable_qa, delivered_packets) in [(false, 10), (true, 2)] {
        let mut cc = nscc(NsccConfig {
            disable_qa,
            ..NsccConfig::default()
        });
        let period = RTT_NS + cc.params().target_ns;
        cc.on_ack(Instant(0), &ack(MTU, 0, false));
        for i in 0..delivered_packets {
            cc.on_ack(Instant(100 + i), &ack(MTU, 0, false));
        }
        cc.on_nack(Instant(5_000), &trim_nack(MTU));
        cc.on_ack(Instant(period + 1), &ack(MTU, 0, false));
        assert_eq!(cc.stats().quick_adapts, 0, "disable_qa={disable_qa}");
        assert!(cc.window() > 100_000);
    }
}

#[test]
fn penalty_127_shrinks_the_window_to_about_one_packet_per_rtt() {
    let mut cc = nscc(NsccConfig::default());
    let mut now = Instant::ZERO;
    for _ in 0..10 {
        now = round(&mut cc, now, || AckSample {
            rcv_cwnd_pen: 127,
            ..ack(MTU, 0, false)
        });
    }
    assert!(cc.window() <= 2 * MTU, "window {}", cc.window());
    assert!(cc.stats().penalty_decrease_bytes > 0);
}

#[test]
fn penalty_64_for_one_rtt_halves_the_window() {
    let mut cc = nscc(NsccConfig {
        initial_cwnd: Some(40 * MTU),
        eta: Some(0.0),
        ..NsccConfig::default()
    });
    // ECN below target: the no-change quadrant, so only the penalty acts.
    for i in 0..40 {
        cc.on_ack(
            Instant(i * 100),
            &AckSample {
                rcv_cwnd_pen: 64,
                ..ack(MTU, 2_000, true)
            },
        );
    }
    assert_eq!(cc.window(), 20 * MTU);
}

#[test]
fn trimmed_nack_shrinks_by_the_nacked_bytes_and_other_nacks_do_not() {
    let mut cc = nscc(NsccConfig {
        initial_cwnd: Some(20 * MTU),
        ..NsccConfig::default()
    });
    cc.on_nack(Instant(10), &trim_nack(MTU));
    assert_eq!(cc.window(), 19 * MTU);
    cc.on_nack(
        Instant(20),
        &NackSample {
            cause: NackCause::TrimmedLastHop,
            ..trim_nack(MTU)
        },
    );
    assert_eq!(cc.window(), 18 * MTU);
    cc.on_nack(
        Instant(30),
        &NackSample {
            cause: NackCause::Other,
            ..trim_nack(MTU)
        },
    );
    assert_eq!(cc.window(), 18 * MTU);
    for i in 0..100 {
        cc.on_nack(Instant(50 + i), &trim_nack(MTU));
    }
    assert_eq!(cc.window(), MTU, "never below one packet");
}

#[test]
fn a_silent_loss_shrinks_the_window_only_where_the_fabric_does_not_trim() {
    // Where the fabric trims, congestion shows as trims: a silent loss is the path's, which EV
    // health retires, and the window stays.
    let mut cc = nscc(NsccConfig {
        initial_cwnd: Some(20 * MTU),
        ..NsccConfig::default()
    });
    cc.on_loss(Instant(40), 2 * MTU);
    assert_eq!(cc.window(), 20 * MTU);
    assert_eq!(cc.stats().loss_decrease_bytes, 0);
    // Where it drops, a loss is a full queue: the window shrinks by the lost bytes.
    let mut cc = nscc(NsccConfig {
        initial_cwnd: Some(20 * MTU),
        trimming: false,
        ..NsccConfig::default()
    });
    cc.on_loss(Instant(40), 2 * MTU);
    assert_eq!(cc.window(), 18 * MTU);
    assert_eq!(cc.stats().loss_decrease_bytes, 2 * MTU);
}

#[derive(Debug, Clone)]
enum Input {
    Ack {
        dt: u64,
        bytes: u64,
        rcvd: u64,
        rtt: Option<u64>,
        ecn: bool,
        pen: u8,
        inflight: u64,
    },
    Nack {
        dt: u64,
        bytes: u64,
        cause: u8,
    },
    Loss {
        dt: u64,
        bytes: u64,
    },
    Sent {
        dt: u64,
        bytes: u32,
    },
}

fn input() -> impl Strategy<Value = Input> {
    prop_oneof![
        4 => (0..50_000u64, 0..1_000_000u64, 0..100_000u64, proptest::option::of(0..2_000_000u64),
              any::<bool>(), any::<u8>(), 0..2_000_000u64)
            .prop_map(|(dt, bytes, rcvd, rtt, ecn, pen, inflight)| Input::Ack {
                dt, bytes, rcvd, rtt, ecn, pen, inflight
            }),
        1 => (0..50_000u64, 0..100_000u64, 0..3u8)
            .prop_map(|(dt, bytes, cause)| Input::Nack { dt, bytes, cause }),
        1 => (0..50_000u64, 0..100_000u64).prop_map(|(dt, bytes)| Input::Loss { dt, bytes }),
        1 => (0..50_000u64, any::<u32>()).prop_map(|(dt, bytes)| Input::Sent { dt, bytes }),
    ]
}

fn config() -> impl Strategy<Value = NsccConfig> {
    (
        any::<bool>(),
        0.0..1.0f64,
        0.0..1.0f64,
        0..8u8,
        proptest::option::of(1..400_000u64),
    )
        .prop_map(
            |(disable_qa, gamma, max_md_jump, qa_gate, max_cwnd)| NsccConfig {
                disable_qa,
                gamma,
                max_md_jump,
                max_cwnd,
                qa_gate,
                ..NsccConfig::default()
            },
        )
}

proptest! {
    #[test]
    fn window_stays_within_bounds(cfg in config(), inputs in prop::collection::vec(input(), 0..300)) {
        let mut cc = nscc(cfg);
        let (min, max) = (cc.params().min_cwnd, cc.params().max_cwnd);
        let mut now = Instant::ZERO;
        for i in inputs {
            match i {
                Input::Ack { dt, bytes, rcvd, rtt, ecn, pen, inflight } => {
                    now += Duration(dt);
                    cc.on_ack(now, &AckSample {
                        newly_acked_bytes: bytes,
                        inflight_bytes: inflight,
                        rtt: rtt.map(Duration),
                        ecn,
                        rcv_cwnd_pen: pen,
                        rcvd_bytes_delta: rcvd,
                    });
                }
                Input::Nack { dt, bytes, cause } => {
                    now += Duration(dt);
                    let cause = [NackCause::Trimmed, NackCause::TrimmedLastHop, NackCause::Other]
                        [usize::from(cause)];
                    cc.on_nack(now, &NackSample { bytes, inflight_bytes: 0, cause, rtt: None });
                }
                Input::Loss { dt, bytes } => {
                    now += Duration(dt);
                    cc.on_loss(now, bytes);
                }
                Input::Sent { dt, bytes } => {
                    now += Duration(dt);
                    cc.on_packet_sent(now, bytes);
                }
            }
            prop_assert!((min..=max).contains(&cc.window()), "window {} outside [{min}, {max}]", cc.window());
        }
    }
}
