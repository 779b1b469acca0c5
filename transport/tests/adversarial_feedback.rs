//! Adversarial feedback and control (brief §2.9–§2.13, §3.5): SACKs, NACKs and ACKs about
//! PSNs or messages never sent complete nothing and are counted; probe and endpoint-request
//! floods are answered within the control backlog and leave the endpoint's memory where it
//! was; a peer that never acknowledges holds the requester to its window and retry budget,
//! never to more memory.

mod adversarial_support;
mod common;

use adversarial_support::{DST_VA, LEN, Lab, assert_untouched, forge, snapshot};
use common::{ConnOpts, drain_cq, pattern, region};
use mrc_transport::stats::DropReason;
use mrc_transport::verbs::{QpState, RtsAttr, SendOpcode, SendWr, Sge, WcStatus};
use mrc_transport::wire::erth::ENDPOINT_QPN;
use mrc_transport::wire::{
    AethRepr, Body, EndpointOp, ErthRepr, NackReason, NethRepr, Opcode, PethRepr, SethRepr,
};
use mrc_transport::{Duration, PortMask};

fn nack(sack: &[u8], reason: NackReason, psn: u32) -> Vec<u8> {
    forge(sack, |r, _| {
        let Body::Sack { seth, .. } = r.body else {
            panic!("a SACK")
        };
        r.bth.opcode = Opcode::Nack;
        r.body = Body::Nack(NethRepr {
            hdr_type: 0,
            next: 0,
            reason,
            vendor_info: 0,
            entropy: seth.entropy,
            spdcid: 0,
            dpdcid: 0,
            nack_psn: psn & 0xff_ffff,
            cc_type: 0,
            cc_flags: 0,
            tx_timestamp: 0,
        });
    })
}

fn sack(template: &[u8], f: impl FnOnce(&mut SethRepr)) -> Vec<u8> {
    forge(template, |r, _| {
        let Body::Sack { seth, .. } = &mut r.body else {
            panic!("a SACK")
        };
        f(seth);
    })
}

/// Post a Write of the guarded `dst` region's size from host 0 while the only path is down,
/// feed host 0 forged feedback, check that nothing completed, then let the path come back
/// and check that the Write completes with every byte in place.
#[test]
fn feedback_about_psns_or_messages_never_sent_completes_nothing() {
    let mut lab = Lab::new();
    let c = lab.c;
    let now = lab.n.now();
    lab.n.path_down(0, 0, now, now + Duration::from_micros(300));
    lab.n.run_for(Duration::from_nanos(1));
    let src = region(&mut lab.n, 0, c.pd_a, 0x7000_0000, LEN, pattern(9));
    let sge = [Sge {
        addr: 0x7000_0000,
        length: LEN as u32,
        lkey: src.lkey,
    }];
    let wr = SendWr {
        wr_id: 55,
        opcode: SendOpcode::Write,
        sg_list: &sge,
        remote_addr: DST_VA,
        rkey: lab.dst.keys.rkey,
        signaled: true,
    };
    lab.n.ep(0).post_send(c.qp_a, &wr).unwrap();
    lab.n.run_for(Duration::from_micros(5));
    let next = lab.next_psn;
    let s = lab.sack.clone();
    let cases: Vec<(&str, Vec<u8>, Option<DropReason>)> = vec![
        (
            "SACK beyond every PSN sent",
            sack(&s, |h| h.cack_psn = (next + 1000) & 0xff_ffff),
            Some(DropReason::BadAck),
        ),
        (
            "SACK half the PSN space behind",
            sack(&s, |h| h.cack_psn = (next + 0x80_0000) & 0xff_ffff),
            Some(DropReason::BadAck),
        ),
        (
            "SACK bitmap over PSNs never sent",
            sack(&s, |h| {
                h.cack_psn = next;
                h.sack_offset = 2;
                h.sack_bitmap = u64::MAX;
            }),
            Some(DropReason::BadAck),
        ),
        (
            "SACK bitmap far ahead",
            sack(&s, |h| {
                h.cack_psn = next;
                h.sack_offset = i16::MAX;
                h.sack_bitmap = u64::MAX;
            }),
            Some(DropReason::BadAck),
        ),
        (
            "SACK bitmap far behind",
            sack(&s, |h| {
                h.cack_psn = next;
                h.sack_offset = i16::MIN;
                h.sack_bitmap = u64::MAX;
            }),
            None,
        ),
        (
            "NACK TRIMMED for a PSN never sent",
            nack(&s, NackReason::Trimmed, next + 500),
            Some(DropReason::BadAck),
        ),
        (
            "NACK TRIMMED_LASTHOP for a PSN never sent",
            nack(&s, NackReason::TrimmedLastHop, next + 500),
            Some(DropReason::BadAck),
        ),
        (
            "NACK out of window for a PSN never sent",
            nack(&s, NackReason::PsnOutOfWindow, next + 2),
            Some(DropReason::BadAck),
        ),
        (
            "NACK no resource for a PSN never sent",
            nack(&s, NackReason::NoResource, next + 3),
            Some(DropReason::BadAck),
        ),
        (
            "fatal NACK for a PSN never sent",
            nack(&s, NackReason::UnexpectedEvent, next + 3),
            Some(DropReason::BadAck),
        ),
        (
            "fatal NACK for a PSN long acknowledged",
            nack(&s, NackReason::UnexpectedEvent, next.wrapping_sub(1)),
            Some(DropReason::Stale),
        ),
        (
            "ACK naming a message never sent",
            forge(&s, |r, _| {
                r.bth.opcode = Opcode::Ack;
                r.body = Body::Ack(AethRepr::ack(100));
            }),
            Some(DropReason::BadAck),
        ),
    ];
    let before = snapshot(&lab.mrs);
    for (what, frame, reason) in cases {
        let t0 = lab.all_drops(0);
        let r0 = reason.map(|r| lab.drops(0, r));
        let now = lab.n.now();
        lab.n.ep(0).handle_packet(now, 0, &frame);
        if let (Some(r), Some(r0)) = (reason, r0) {
            assert_eq!(lab.drops(0, r), r0 + 1, "{what}: counted as {r}");
            assert_eq!(lab.all_drops(0), t0 + 1, "{what}: counted once");
        }
        lab.n.run_for(Duration::from_micros(5));
        assert!(
            drain_cq(&mut lab.n, 0, c.cq_a).is_empty(),
            "{what}: completed nothing"
        );
        assert_eq!(
            lab.n.ep(0).query_qp(c.qp_a).unwrap().state,
            QpState::Rts,
            "{what}: QP lives"
        );
        assert_untouched(&lab.mrs, &before, what);
    }
    // The path comes back: the Write is delivered whole, as if nothing had been said.
    let mut wcs = Vec::new();
    lab.n.run_until(Duration::from_millis(50), |n| {
        wcs.extend(drain_cq(n, 0, c.cq_a));
        !wcs.is_empty()
    });
    assert_eq!((wcs[0].wr_id, wcs[0].status), (55, WcStatus::Success));
    let want = pattern(9);
    let got = lab.dst.mem.bytes();
    assert!(
        got.iter().enumerate().all(|(i, &b)| b == want(i)),
        "every byte delivered"
    );
}

/// QP probes (brief §3.5) and endpoint EV probes (brief §2.12) by the hundred thousand:
/// answered while the control backlog has room, the rest counted and dropped; memory does
/// not move.
#[test]
fn probe_floods_are_answered_within_the_backlog_and_memory_does_not_move() {
    let mut lab = Lab::new();
    let w = lab.write.clone();
    let qp_probe = forge(&w, |r, p| {
        p.clear();
        r.bth.opcode = Opcode::Probe;
        r.bth.psn = lab.next_psn;
        r.body = Body::Probe(PethRepr {
            hdr_type: 0,
            next: 0,
            vendor_info: 0,
            probe_id: 7,
            spdcid: 0,
            dpdcid: 0,
            tx_timestamp: 0,
            tsr: false,
            format_type: 0,
        });
    });
    let ep_probe = |src: Option<std::net::Ipv6Addr>| {
        forge(&w, |r, p| {
            p.clear();
            r.bth.opcode = Opcode::EndpointRequest;
            r.bth.dest_qp = ENDPOINT_QPN;
            if let Some(a) = src {
                r.src_addr = a;
            }
            r.body = Body::EndpointRequest(ErthRepr {
                op: EndpointOp::EvProbe,
                port_status_mask: 0,
                tx_timestamp: 0,
                tsr: false,
                format_type: 0,
            });
        })
    };
    let known = ep_probe(None);
    let stranger = ep_probe(Some(common::nic(9)));
    let before = snapshot(&lab.mrs);
    let heap = [lab.n.ep(0).heap_bytes(), lab.n.ep(1).heap_bytes()];
    let limits = lab.n.ep_ref(1).config().limits;
    let s0 = lab.n.ep(1).stats();
    let q0 = lab.n.ep(1).qp_stats(lab.c.qp_b).unwrap();
    const N: u64 = 100_000;
    let mut buf = vec![0u8; lab.n.ep(1).max_frame_len()];
    let mut sent = 0u64;
    let mut now = lab.n.now();
    for i in 0..N {
        now += Duration::from_nanos(10);
        let f = match i % 3 {
            0 => &qp_probe,
            1 => &known,
            _ => &stranger,
        };
        let ep = lab.n.ep(1);
        ep.handle_packet(now, 0, f);
        // Drain now and then: between drains the backlogs fill and overflow.
        if i % 1000 == 999 {
            while ep.poll_transmit(now, PortMask::ALL, &mut buf).is_some() {
                sent += 1;
            }
            ep.handle_timeout(now);
            while ep.poll_event().is_some() {}
        }
    }
    let s = lab.n.ep(1).stats();
    let q = lab.n.ep(1).qp_stats(lab.c.qp_b).unwrap();
    let qp_probes = N.div_ceil(3);
    let ep_probes = (N + 1) / 3;
    let strangers = N / 3;
    assert_eq!(
        q.probes_answered - q0.probes_answered,
        qp_probes,
        "every QP probe is taken in"
    );
    assert_eq!(
        s.drops.get(DropReason::WrongPeer) - s0.drops.get(DropReason::WrongPeer),
        strangers,
        "EV probes from a NIC no QP talks to are refused"
    );
    let answers_possible = qp_probes + ep_probes;
    let control_dropped = s.control_dropped - s0.control_dropped;
    assert!(control_dropped > 0, "the backlog overflowed and counted it");
    assert!(
        sent + control_dropped <= answers_possible + 2 * N / 1000,
        "no answer without a probe"
    );
    // At most one backlog's worth of answers per drain.
    let per_drain = u64::from(limits.max_control_backlog.min(1024 + 16)) + 64 + 4;
    assert!(sent <= (N / 1000) * per_drain, "{sent} answers");
    assert_eq!(
        [lab.n.ep(0).heap_bytes(), lab.n.ep(1).heap_bytes()],
        heap,
        "memory did not move"
    );
    assert_untouched(&lab.mrs, &before, "probe flood");
    assert_eq!(
        lab.n.ep(1).query_qp(lab.c.qp_b).unwrap().state,
        QpState::Rts
    );
}

/// A peer that never acknowledges (its QP is gone: our data reaches it and is dropped
/// there, nothing comes back): the requester keeps at most its window in flight, spends its
/// retry budget, fails the QP with every work request completed, and its memory, and the
/// silent peer's, never moves.
#[test]
fn a_peer_that_never_acknowledges_costs_a_window_and_a_retry_budget_not_memory() {
    // A short retry budget: 2 linear + 2 exponential retries of 1.024 µs × 2^6.
    let opts = ConnOpts {
        rts: |a| RtsAttr {
            timeout: 6,
            retry_linear: 2,
            retry_exp: 2,
            ..a
        },
        ..ConnOpts::default()
    };
    let mut lab = Lab::with(opts);
    let c = lab.c;
    let src = region(&mut lab.n, 0, c.pd_a, 0x7000_0000, 1 << 20, pattern(3));
    let heap = [lab.n.ep(0).heap_bytes(), lab.n.ep(1).heap_bytes()];
    let qp_heap = lab.n.ep(0).qp_heap_bytes(c.qp_a).unwrap();
    println!(
        "a connected QP holds {qp_heap} heap bytes; its endpoint {} (docs/limits.md)",
        heap[0]
    );
    lab.n.ep(1).destroy_qp(c.qp_b).unwrap();
    let heap1 = lab.n.ep(1).heap_bytes();
    let sge = [Sge {
        addr: 0x7000_0000,
        length: 1 << 20,
        lkey: src.lkey,
    }];
    let max_wr = opts.cap.max_send_wr as u64;
    for id in 0..max_wr {
        lab.n
            .ep(0)
            .post_send(
                c.qp_a,
                &SendWr {
                    wr_id: id,
                    opcode: SendOpcode::Write,
                    sg_list: &sge,
                    remote_addr: DST_VA,
                    rkey: lab.dst.keys.rkey,
                    signaled: true,
                },
            )
            .unwrap();
    }
    assert!(
        lab.n
            .ep(0)
            .post_send(
                c.qp_a,
                &SendWr {
                    wr_id: 999,
                    opcode: SendOpcode::Write,
                    sg_list: &sge,
                    remote_addr: DST_VA,
                    rkey: lab.dst.keys.rkey,
                    signaled: true,
                }
            )
            .is_err(),
        "the send queue is bounded"
    );
    let mpr = u64::from(opts.rtr_mpr);
    let mut wcs = Vec::new();
    let mut max_sent = 0;
    lab.n.run_until(Duration::from_millis(100), |n| {
        let s = n.ep(0).qp_stats(c.qp_a).unwrap();
        max_sent = max_sent.max(s.data_packets_sent);
        assert!(
            s.data_packets_sent <= mpr,
            "never more than the window of new packets: {}",
            s.data_packets_sent
        );
        // Never more than when connected (an errored QP lets its rings go).
        assert!(n.ep(0).heap_bytes() <= heap[0], "requester memory");
        assert!(
            n.ep(0).qp_heap_bytes(c.qp_a).unwrap() <= qp_heap,
            "per-QP memory"
        );
        assert_eq!(n.ep(1).heap_bytes(), heap1, "silent peer memory");
        wcs.extend(drain_cq(n, 0, c.cq_a));
        wcs.len() as u64 == max_wr
    });
    assert_eq!(wcs[0].status, WcStatus::RetryExceeded);
    assert!(wcs[1..].iter().all(|w| w.status == WcStatus::WrFlushError));
    assert_eq!(
        wcs.iter().map(|w| w.wr_id).collect::<Vec<_>>(),
        (0..max_wr).collect::<Vec<_>>()
    );
    assert_eq!(lab.n.ep(0).query_qp(c.qp_a).unwrap().state, QpState::Error);
    assert!(
        lab.drops(1, DropReason::UnknownQp) > 0,
        "the data reached the silent peer"
    );
    assert!(heap[1] >= heap1);
    assert!(max_sent > 0);
}
