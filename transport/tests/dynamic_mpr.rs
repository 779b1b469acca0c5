//! Dynamic MPR (brief §3.5): a responder that enabled it at RTR advertises its current MPR in
//! every SACK; a requester that enabled it at RTS sends no new PSN at or beyond its cumulative
//! ACK plus that MPR, pausing when a shrink falls below what it already has in flight, and
//! opens up again when the MPR grows. With either end lacking the capability the static MPR
//! stays. The stories below read the requester's own frames, in the order it sent and
//! received them, not only its counters.

mod common;

use common::*;
use mrc_transport::Duration;
use mrc_transport::verbs::{
    InitAttr, QpCap, QpInitAttr, QpState, QpTransition, Qpn, RemoteNic, RtrAttr, RtsAttr,
    VerbsError,
};
use mrc_transport::wire::{Body, WireConfig, parse_frame};

/// The RTR and RTS MPR of both sides (the OCP example's 8 × 128 PSNs).
const MPR: u32 = 1024;
/// What the responder shrinks to: one unit of the SETH field.
const SMALL: u32 = 128;
/// Host 0's first PSN (see `connect`).
const SQ_PSN: u32 = 100;
/// A Write of 16 Ki packets of 256 B: many windows of either size.
const LEN: usize = 4 << 20;

/// Two hosts whose packets carry 256 payload bytes, so the congestion window holds well over
/// an MPR of packets and the MPR is what bounds the flight.
fn net() -> Net {
    NetBuilder {
        tweak: |c| c.payload_mtu = 256,
        ..NetBuilder::default()
    }
    .build()
}

type RtrFn = fn(RtrAttr) -> RtrAttr;
type RtsFn = fn(RtsAttr) -> RtsAttr;

/// Connect hosts 0 and 1 with dynamic MPR enabled on the responders (`rtr`) and on the
/// requesters (`rts`) or not.
fn connect_with(n: &mut Net, rtr: bool, rts: bool) -> Conn {
    let on_rtr: RtrFn = |a| RtrAttr {
        dynamic_mpr: true,
        ..a
    };
    let on_rts: RtsFn = |a| RtsAttr {
        dynamic_mpr: true,
        ..a
    };
    let off_rtr: RtrFn = |a| a;
    let off_rts: RtsFn = |a| a;
    connect(
        n,
        0,
        1,
        ConnOpts {
            rtr_mpr: MPR,
            rtr: if rtr { on_rtr } else { off_rtr },
            rts: if rts { on_rts } else { off_rts },
            ..ConnOpts::default()
        },
    )
}

/// A data packet host 0 sent, with what it had heard when it left: the highest cumulative ACK
/// of the SACKs it had received, and the MPR the latest of them not behind that one
/// advertised (PSNs; 0 = none, or dynamic MPR off). Sequence numbers count from `SQ_PSN`.
/// (A transport ACK can also move the requester's cumulative ACK; the one Write of these
/// stories gets its only ACK at the end, so the SACKs tell the whole story.)
#[derive(Debug, Clone, Copy)]
struct Sent {
    seq: u64,
    cack: u64,
    mpr: u32,
    rtx: bool,
}

impl Sent {
    /// PSNs from the cumulative ACK up to and including this one: the flight it makes.
    fn outstanding(&self) -> u64 {
        self.seq + 1 - self.cack
    }
}

/// A SACK host 0 received: its cumulative ACK, its MPR field, and the next new sequence
/// number the requester had then.
#[derive(Debug, Clone, Copy)]
struct Heard {
    cack: u64,
    field: u8,
    nxt: u64,
}

/// What host 0 sent and heard, from its recording.
fn sends(log: &[Seen]) -> (Vec<Sent>, Vec<Heard>) {
    let lenient = WireConfig {
        verify_icrc: false,
        ..WireConfig::default()
    };
    let seq = |psn: u32| u64::from(psn.wrapping_sub(SQ_PSN) & 0x00ff_ffff);
    let (mut cack, mut mpr, mut nxt) = (0, 0, 0);
    let (mut out, mut heard) = (Vec::new(), Vec::new());
    for s in log {
        match s {
            Seen::Received(f) => {
                let f = parse_frame(f, &lenient).expect("the engine's own frames parse");
                if let Some(Body::Sack { seth, .. }) = f.body {
                    let c = seq(seth.cack_psn);
                    heard.push(Heard {
                        cack: c,
                        field: seth.mpr,
                        nxt,
                    });
                    if c >= cack {
                        cack = c;
                        mpr = seth.mpr_psns();
                    }
                }
            }
            Seen::Sent(f) => {
                let f = parse_frame(f, &lenient).expect("the engine's own frames parse");
                if f.bth.opcode.is_write() {
                    nxt = nxt.max(seq(f.bth.psn) + 1);
                    out.push(Sent {
                        seq: seq(f.bth.psn),
                        cack,
                        mpr,
                        rtx: f.bth.rtx,
                    });
                }
            }
        }
    }
    (out, heard)
}

/// Run until host 1 has placed `packets` data packets.
fn run_until_received(n: &mut Net, c: &Conn, packets: u64) {
    let qp = c.qp_b;
    n.run_until(Duration::from_secs(1), |n| {
        n.ep_ref(1).qp_stats(qp).unwrap().data_packets_received >= packets
    });
}

fn max_outstanding(s: &[Sent]) -> u64 {
    s.iter().map(Sent::outstanding).max().unwrap_or(0)
}

/// A recorded 4 MiB Write on `c` (its bytes checked) whose responder shrinks its MPR to 128
/// once 3000 packets have arrived: what the requester sent and the SACKs it heard.
fn write_with_a_shrink(n: &mut Net, c: &Conn, salt: u64) -> (Vec<Sent>, Vec<Heard>) {
    n.record(0, true);
    let job = start_write(n, c, LEN, None, salt);
    run_until_received(n, c, 3000);
    n.ep(1).set_qp_mpr(c.qp_b, SMALL).unwrap();
    finish_write(n, c, job);
    sends(&n.recorded(0))
}

#[test]
fn a_responder_that_shrinks_its_mpr_mid_transfer_is_never_sent_a_psn_beyond_it() {
    let mut n = net();
    let c = connect_with(&mut n, true, true);
    // The receiver runs short of tracker room: from its next SACK on it says 128 PSNs.
    let (sent, sacks) = write_with_a_shrink(&mut n, &c, 1);

    let shrink = sacks.iter().find(|h| h.field == 1).unwrap();
    assert!(
        shrink.nxt - shrink.cack > u64::from(SMALL),
        "the shrink came with more than 128 PSNs in flight ({}): new sends had to pause",
        shrink.nxt - shrink.cack
    );
    let heard = sent
        .iter()
        .position(|s| s.mpr == SMALL)
        .expect("the shrink reached the requester");
    let (before, after) = sent.split_at(heard);
    assert!(
        before
            .iter()
            .all(|s| s.mpr == MPR || s.mpr == 0 && s.cack == 0),
        "until then the full MPR was advertised (nothing heard before the first SACK)"
    );
    assert!(
        max_outstanding(before) > u64::from(MPR) / 2,
        "before the shrink the flight was far wider than 128 PSNs: {}",
        max_outstanding(before)
    );
    assert!(
        after.len() > 10_000,
        "most of the Write left after the shrink"
    );
    for s in after {
        assert_eq!(s.mpr, SMALL, "the MPR stays small: {s:?}");
        assert!(
            s.seq < s.cack + u64::from(SMALL),
            "PSN {} sent with the cumulative ACK at {} and an MPR of {SMALL}",
            s.seq,
            s.cack
        );
    }
    assert!(sent.iter().all(|s| !s.rtx), "a clean fabric: no resends");
    assert!(sacks.iter().all(|h| h.field == 8 || h.field == 1));

    let req = n.ep_ref(0).qp_stats(c.qp_a).unwrap();
    let resp = n.ep_ref(1).qp_stats(c.qp_b).unwrap();
    assert_eq!(
        (req.mpr_peer, req.mpr_window, req.mpr_shrinks, req.mpr_grows),
        (128, 128, 1, 0)
    );
    assert!(req.mpr_pauses > 0);
    assert_eq!(resp.mpr_advertised, 128);
    assert_eq!(
        (resp.out_of_window, resp.nacks_sent.out_of_window),
        (0, 0),
        "what was in flight beyond the new MPR is still placed"
    );
}

#[test]
fn a_late_sack_from_before_the_shrink_does_not_widen_the_window_again() {
    // Paths that reorder: SACKs overtake each other on the way back, so some sent before
    // the shrink (saying 1024) arrive after it. Only a SACK whose cumulative ACK is not
    // behind the requester's speaks for the responder now.
    let mut n = NetBuilder {
        tweak: |c| c.payload_mtu = 256,
        spec: PathSpec {
            jitter: Duration::from_micros(4),
            ..PathSpec::default()
        },
        ..NetBuilder::default()
    }
    .build();
    let c = connect_with(&mut n, true, true);
    let (sent, sacks) = write_with_a_shrink(&mut n, &c, 5);

    let shrink = sacks.iter().position(|h| h.field == 1).unwrap();
    let mut cack = 0;
    let mut late = 0;
    for (i, h) in sacks.iter().enumerate() {
        late += usize::from(i > shrink && h.field == 8 && h.cack < cack);
        cack = cack.max(h.cack);
    }
    assert!(
        late > 0,
        "the scenario has late SACKs from before the shrink"
    );
    let heard = sent.iter().position(|s| s.mpr == SMALL).unwrap();
    let new: Vec<&Sent> = sent[heard..].iter().filter(|s| !s.rtx).collect();
    assert!(new.len() > 10_000);
    for s in new {
        assert!(
            s.seq < s.cack + u64::from(SMALL),
            "PSN {} sent for the first time with the cumulative ACK at {}",
            s.seq,
            s.cack
        );
    }
    let req = n.ep_ref(0).qp_stats(c.qp_a).unwrap();
    assert_eq!(
        (req.mpr_window, req.mpr_shrinks, req.mpr_grows),
        (128, 1, 0)
    );
}

#[test]
fn growing_the_mpr_again_restores_the_wide_flight() {
    let mut n = net();
    let c = connect_with(&mut n, true, true);
    n.record(0, true);
    let job = start_write(&mut n, &c, LEN, None, 2);
    run_until_received(&mut n, &c, 2000);
    n.ep(1).set_qp_mpr(c.qp_b, SMALL).unwrap();
    run_until_received(&mut n, &c, 6000);
    // Room again: back to the whole RTR MPR.
    n.ep(1).set_qp_mpr(c.qp_b, MPR).unwrap();
    finish_write(&mut n, &c, job);
    let (sent, _) = sends(&n.recorded(0));

    let shrunk = sent.iter().position(|s| s.mpr == SMALL).unwrap();
    let grown = shrunk
        + sent[shrunk..]
            .iter()
            .position(|s| s.mpr == MPR)
            .expect("the growth reached the requester");
    let (small, wide) = (&sent[shrunk..grown], &sent[grown..]);
    assert!(
        small.len() > 2000,
        "{} packets in the small window",
        small.len()
    );
    assert!(
        max_outstanding(small) <= u64::from(SMALL),
        "{}",
        max_outstanding(small)
    );
    assert!(wide.len() > 5000, "{} packets after the growth", wide.len());
    assert!(wide.iter().all(|s| s.seq < s.cack + u64::from(MPR)));
    assert!(
        max_outstanding(wide) > u64::from(MPR) / 2,
        "after the growth the flight is wide again: {} PSNs",
        max_outstanding(wide)
    );

    let req = n.ep_ref(0).qp_stats(c.qp_a).unwrap();
    assert_eq!(
        (req.mpr_peer, req.mpr_window, req.mpr_shrinks, req.mpr_grows),
        (1024, 1024, 1, 1)
    );
}

#[test]
fn a_requester_without_the_capability_keeps_the_static_mpr() {
    let mut n = net();
    // The responder advertises; the requester never enabled dynamic MPR.
    let c = connect_with(&mut n, true, false);
    let (sent, _) = write_with_a_shrink(&mut n, &c, 3);

    let heard = sent.iter().position(|s| s.mpr == SMALL).unwrap();
    let beyond = sent[heard..]
        .iter()
        .filter(|s| s.seq >= s.cack + u64::from(SMALL))
        .count();
    assert!(
        beyond > 1000,
        "the advertisement is ignored: {beyond} PSNs beyond it"
    );
    assert!(max_outstanding(&sent[heard..]) > u64::from(MPR) / 2);
    assert!(sent.iter().all(|s| s.seq < s.cack + u64::from(MPR)));

    let req = n.ep_ref(0).qp_stats(c.qp_a).unwrap();
    let resp = n.ep_ref(1).qp_stats(c.qp_b).unwrap();
    assert_eq!(
        (req.mpr_peer, req.mpr_window, req.mpr_shrinks),
        (128, 1024, 0),
        "heard, not obeyed"
    );
    assert_eq!(
        resp.out_of_window, 0,
        "the responder's tracker kept its RTR MPR"
    );
}

#[test]
fn a_responder_without_the_capability_advertises_nothing_and_the_static_mpr_stays() {
    let mut n = net();
    // The requester would follow an advertisement; the responder never enabled dynamic MPR.
    let c = connect_with(&mut n, false, true);
    assert_eq!(
        n.ep(1).set_qp_mpr(c.qp_b, SMALL),
        Err(VerbsError::InvalidAttr("dynamic MPR is off on this QP"))
    );
    n.record(0, true);
    write_and_check(&mut n, &c, LEN, None, 4);
    let (sent, sacks) = sends(&n.recorded(0));

    assert!(sacks.len() > 100);
    assert!(sacks.iter().all(|h| h.field == 0), "SACKs carry MPR 0");
    assert!(
        max_outstanding(&sent) > u64::from(MPR) / 2,
        "the flight uses the static MPR: {}",
        max_outstanding(&sent)
    );
    assert!(sent.iter().all(|s| s.seq < s.cack + u64::from(MPR)));
    let req = n.ep_ref(0).qp_stats(c.qp_a).unwrap();
    assert_eq!((req.mpr_peer, req.mpr_window), (0, 1024));
}

#[test]
fn dynamic_mpr_attributes_and_the_run_time_call_are_checked() {
    let mut n = net();
    let c = connect_with(&mut n, true, true);
    let ep = n.ep(1);
    for (psns, why) in [
        (127, "below one unit"),
        (MPR + 128, "beyond the RTR MPR"),
        (0, "zero"),
    ] {
        assert_eq!(
            ep.set_qp_mpr(c.qp_b, psns),
            Err(VerbsError::InvalidAttr(
                "dynamic MPR beyond the RTR MPR or below 128 PSNs"
            )),
            "{why}"
        );
    }
    // Any value in range; SACKs round it down to whole units of 128.
    ep.set_qp_mpr(c.qp_b, 1000).unwrap();
    assert_eq!(ep.qp_stats(c.qp_b).unwrap().mpr_advertised, 896);
    ep.set_qp_mpr(c.qp_b, MPR).unwrap();
    assert_eq!(ep.qp_stats(c.qp_b).unwrap().mpr_advertised, 1024);

    // An RTR MPR the 8-bit field of 128-PSN units cannot say is refused with dynamic MPR
    // on (and accepted without it); a QP not yet in RTR has no MPR to set.
    let mut ep = standalone(0);
    let pd = ep.alloc_pd().unwrap();
    let cq = ep.create_cq(8).unwrap();
    let qp = ep
        .create_qp(&QpInitAttr {
            pd,
            send_cq: cq,
            recv_cq: cq,
            cap: QpCap::default(),
            sq_sig_all: false,
        })
        .unwrap();
    ep.modify_qp(qp, QpTransition::Init(InitAttr::default()))
        .unwrap();
    assert_eq!(
        ep.set_qp_mpr(qp, SMALL),
        Err(VerbsError::InvalidState(QpState::Init))
    );
    let remote = RemoteNic {
        addr: nic(1),
        host: Some(1),
    };
    let rtr = RtrAttr {
        dynamic_mpr: true,
        ..RtrAttr::new(remote, Qpn(0x4000), 0)
    };
    for mpr in [64, 32_768] {
        assert_eq!(
            ep.modify_qp(qp, QpTransition::Rtr(RtrAttr { mpr, ..rtr })),
            Err(VerbsError::InvalidAttr(
                "dynamic MPR needs an MPR of 128 to 32640 PSNs"
            )),
            "RTR MPR {mpr}"
        );
    }
    let widest = RtrAttr { mpr: 32_640, ..rtr };
    ep.modify_qp(qp, QpTransition::Rtr(widest)).unwrap();
    assert_eq!(ep.qp_stats(qp).unwrap().mpr_advertised, 32_640);
    assert_eq!(ep.query_qp(qp).unwrap().rtr, Some(widest));
}
