//! A small packet-level model for congestion-control tests, no engine needed: N window-limited
//! senders with infinite backlog share one bottleneck, a FIFO with ECN marking above a threshold
//! and trimming when full (a trimmed packet comes back as NACK TRIMMED, as in an MRC fabric).
//! Every packet is SACKed on its own. The return path has up to 1 µs of jitter and marking is
//! RED-like, both drawn from a fixed-seed generator: deterministic, yet free of the phase
//! locking a perfectly regular model shows (Floyd & Jacobson, "On traffic phase effects").

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use super::{AckSample, CongestionController, NackCause, NackSample};
use crate::time::{Duration, Instant};

/// The bottleneck and the fixed delays around it.
#[derive(Debug, Clone, Copy)]
struct Fabric {
    /// Bottleneck rate (also each sender's NIC rate), bits per second.
    rate_bps: u64,
    /// Nominal bytes per packet.
    mtu: u64,
    /// Sender → bottleneck.
    to_queue: Duration,
    /// Bottleneck → receiver → SACK back at the sender.
    back: Duration,
    /// Queue capacity, bytes; a packet that does not fit is trimmed.
    capacity: u64,
    /// ECN marking starts above this many queued bytes and is certain this far below
    /// `capacity` (see [`mark`]).
    ecn_threshold: u64,
}

impl Fabric {
    fn serialisation(&self) -> Duration {
        Duration(self.mtu * 8 * 1_000_000_000 / self.rate_bps)
    }
}

#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// Sender may transmit.
    Send { flow: usize },
    /// A packet reaches the bottleneck.
    Arrive { flow: usize, sent: Instant },
    /// The bottleneck finished serialising its head packet.
    Depart,
    /// Feedback reaches the sender.
    Feedback {
        flow: usize,
        sent: Instant,
        ecn: bool,
        trimmed: bool,
    },
}

struct Flow {
    cc: Box<dyn CongestionController>,
    start: Instant,
    inflight: u64,
    next_send: Instant,
    send_pending: bool,
    delivered_after: u64,
}

/// Run `ccs` (one per flow, flow i starting at `starts[i]`) until `end`; returns the bytes each
/// flow got through the bottleneck after `measure_from`.
fn run(
    fabric: Fabric,
    ccs: Vec<Box<dyn CongestionController>>,
    starts: &[Instant],
    end: Instant,
    measure_from: Instant,
) -> Vec<u64> {
    let mut flows: Vec<Flow> = ccs
        .into_iter()
        .zip(starts)
        .map(|(cc, &start)| Flow {
            cc,
            start,
            inflight: 0,
            next_send: start,
            send_pending: false,
            delivered_after: 0,
        })
        .collect();
    let mut events = BinaryHeap::new();
    let mut seq = 0u64;
    let mut push = |events: &mut BinaryHeap<_>, at: Instant, ev: Event| {
        seq += 1;
        events.push(Reverse((at, seq, ev)));
    };
    for (i, f) in flows.iter_mut().enumerate() {
        f.send_pending = true;
        push(&mut events, f.start, Event::Send { flow: i });
    }
    let mut queue: VecDeque<(usize, Instant, bool)> = VecDeque::new();
    let mut queued_bytes = 0u64;
    let mut rng = 0x9E37_79B9_7F4A_7C15u64;
    let ser = fabric.serialisation();

    while let Some(Reverse((now, _, ev))) = events.pop() {
        if now > end {
            break;
        }
        match ev {
            Event::Send { flow } => {
                let f = &mut flows[flow];
                f.send_pending = false;
                if f.inflight + fabric.mtu <= f.cc.window() {
                    f.inflight += fabric.mtu;
                    f.cc.on_packet_sent(now, fabric.mtu as u32);
                    push(
                        &mut events,
                        now + fabric.to_queue,
                        Event::Arrive { flow, sent: now },
                    );
                    f.next_send = now + ser;
                    f.send_pending = true;
                    push(&mut events, f.next_send, Event::Send { flow });
                }
            }
            Event::Arrive { flow, sent } => {
                if queued_bytes + fabric.mtu > fabric.capacity {
                    // Trimmed: the header jumps the queue, the receiver NACKs it.
                    let ev = Event::Feedback {
                        flow,
                        sent,
                        ecn: false,
                        trimmed: true,
                    };
                    push(&mut events, now + fabric.back, ev);
                } else {
                    let ecn = mark(&mut rng, queued_bytes, fabric);
                    if queue.is_empty() {
                        push(&mut events, now + ser, Event::Depart);
                    }
                    queue.push_back((flow, sent, ecn));
                    queued_bytes += fabric.mtu;
                }
            }
            Event::Depart => {
                let (flow, sent, ecn) = queue.pop_front().expect("a departure has a packet");
                queued_bytes -= fabric.mtu;
                if !queue.is_empty() {
                    push(&mut events, now + ser, Event::Depart);
                }
                if now >= measure_from {
                    flows[flow].delivered_after += fabric.mtu;
                }
                let ev = Event::Feedback {
                    flow,
                    sent,
                    ecn,
                    trimmed: false,
                };
                let jitter = Duration(xorshift(&mut rng) % 1_000);
                push(&mut events, now + fabric.back + jitter, ev);
            }
            Event::Feedback {
                flow,
                sent,
                ecn,
                trimmed,
            } => {
                let f = &mut flows[flow];
                f.inflight -= fabric.mtu;
                if trimmed {
                    f.cc.on_nack(
                        now,
                        &NackSample {
                            bytes: fabric.mtu,
                            inflight_bytes: f.inflight,
                            cause: NackCause::Trimmed,
                            rtt: None,
                        },
                    );
                } else {
                    f.cc.on_ack(
                        now,
                        &AckSample {
                            newly_acked_bytes: fabric.mtu,
                            inflight_bytes: f.inflight,
                            rtt: Some(now - sent),
                            ecn,
                            rcv_cwnd_pen: 0,
                            rcvd_bytes_delta: 0,
                        },
                    );
                }
                if !f.send_pending {
                    f.send_pending = true;
                    let at = f.next_send.max(now);
                    push(&mut events, at, Event::Send { flow });
                }
            }
        }
    }
    flows.iter().map(|f| f.delivered_after).collect()
}

/// RED-style marking, as the UEC simulator configures switches: never below `ecn_threshold`,
/// always above `capacity - ecn_threshold`, linear in between (xorshift64, fixed seed).
fn mark(rng: &mut u64, queued: u64, fabric: Fabric) -> bool {
    let (lo, hi) = (fabric.ecn_threshold, fabric.capacity - fabric.ecn_threshold);
    if queued <= lo {
        return false;
    }
    if queued >= hi {
        return true;
    }
    xorshift(rng) % (hi - lo) < queued - lo
}

fn xorshift(rng: &mut u64) -> u64 {
    *rng ^= *rng << 13;
    *rng ^= *rng >> 7;
    *rng ^= *rng << 17;
    *rng
}

/// Jain's fairness index: 1 when all equal, 1/n when one flow has everything.
fn jain(xs: &[u64]) -> f64 {
    let sum: f64 = xs.iter().map(|&x| x as f64).sum();
    let sq: f64 = xs.iter().map(|&x| (x as f64).powi(2)).sum();
    sum * sum / (xs.len() as f64 * sq)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::{CcProfile, FixedWindow, NsccConfig, PathFacts, build};

    /// 100 Gb/s, 4000-byte packets, 12 µs base RTT (+ one serialisation), one-BDP queue, ECN
    /// from 20 % to 80 % of it (the UEC simulator's defaults): the reference network of the NSCC
    /// gains.
    fn fabric() -> (Fabric, PathFacts) {
        let fabric = Fabric {
            rate_bps: 100_000_000_000,
            mtu: 4_000,
            to_queue: Duration::from_micros(2),
            back: Duration::from_micros(10),
            capacity: 150_000,
            ecn_threshold: 30_000,
        };
        let facts = PathFacts {
            line_rate_bps: fabric.rate_bps,
            base_rtt: Duration::from_micros(12) + fabric.serialisation(),
            mtu_bytes: fabric.mtu as u32,
        };
        (fabric, facts)
    }

    #[test]
    fn jain_index_is_one_for_equal_shares_and_one_over_n_for_a_hog() {
        assert!((jain(&[5, 5, 5, 5]) - 1.0).abs() < 1e-12);
        assert!((jain(&[8, 0, 0, 0]) - 0.25).abs() < 1e-12);
    }

    #[test]
    fn nscc_senders_sharing_a_bottleneck_converge_to_a_fair_share() {
        let (fabric, facts) = fabric();
        let n = 4;
        // Flow 0 owns the link first; the others join one by one with a full BDP window.
        let starts: Vec<Instant> = (0..n).map(|i| Instant(i * 200_000)).collect();
        let ccs = (0..n)
            .map(|_| build(&CcProfile::Nscc(NsccConfig::default()), &facts))
            .collect();
        let end = Instant::ZERO + Duration::from_millis(6);
        let from = Instant::ZERO + Duration::from_millis(3);
        let got = run(fabric, ccs, &starts, end, from);

        let index = jain(&got);
        assert!(index > 0.9, "Jain index {index:.3}, shares {got:?}");
        // And the link stays busy: at least 80 % of capacity delivered.
        let capacity = fabric.rate_bps / 8 * (end - from).as_nanos() / 1_000_000_000;
        let total: u64 = got.iter().sum();
        assert!(
            total * 10 >= capacity * 8,
            "delivered {total} of {capacity}"
        );
    }

    #[test]
    fn fixed_windows_of_different_sizes_do_not_converge() {
        // The model can tell unfair from fair: fixed windows keep their 7:1 ratio.
        let (fabric, _) = fabric();
        let ccs: Vec<Box<dyn CongestionController>> = vec![
            Box::new(FixedWindow::new(140_000)),
            Box::new(FixedWindow::new(20_000)),
        ];
        let got = run(
            fabric,
            ccs,
            &[Instant::ZERO, Instant::ZERO],
            Instant(2_000_000),
            Instant(1_000_000),
        );
        assert!(jain(&got) < 0.7, "shares {got:?}");
    }
}
