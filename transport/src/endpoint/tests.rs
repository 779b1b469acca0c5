//! The peer index (issue #13, no per-packet scans): endpoint operations and port status reach
//! exactly the QPs connected to their peer, in slot order, and nothing stale is left after a
//! reset, a destroy or a slot's reuse.

use core::net::Ipv6Addr;

use mrc_srv6::wire::{Dscp, Ecn, EthernetAddress};

use super::Endpoint;
use super::datapath::OutgoingOp;
use crate::config::{EndpointConfig, EvProfile, ExplicitEv, ExplicitValue, PathMode, PortConfig};
use crate::ev::SrPath;
use crate::qp::frames::bth;
use crate::stats::DropReason;
use crate::time::Instant;
use crate::verbs::{
    InitAttr, QpCap, QpInitAttr, QpState, QpTransition, Qpn, RemoteNic, RtrAttr, RtsAttr,
    VerbsError,
};
use crate::wire::erth::ENDPOINT_QPN;
use crate::wire::{Body, EndpointOp, ErthRepr, FrameRepr, Opcode, Route, TsethRepr, WireConfig};

const ME: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 0xe);
const A: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 0xa);
const B: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 0xb);

fn endpoint() -> Endpoint {
    let ports = (0..2)
        .map(|p| {
            PortConfig::new(
                EthernetAddress([2, 0, 0, 0, 0, p]),
                EthernetAddress([2, 0, 0, 0xff, 0, p]),
            )
        })
        .collect();
    Endpoint::new(EndpointConfig::new(7, ME, ports, PathMode::Ecmp)).unwrap()
}

/// Four QPs in slots 0..4, towards A, B, A and B.
fn abab(ep: &mut Endpoint) -> [Qpn; 4] {
    [A, B, A, B].map(|p| connect(ep, p).unwrap())
}

/// A QP taken to RTS towards `peer` (its remote QPN made up).
fn connect(ep: &mut Endpoint, peer: Ipv6Addr) -> Result<Qpn, VerbsError> {
    let (qpn, rtr) = to_rtr(ep, peer, InitAttr::default())?;
    rtr?;
    ep.modify_qp(qpn, QpTransition::Rts(RtsAttr::new(0)))?;
    Ok(qpn)
}

/// A QP (its own PD and CQ) through INIT with `init`, then asked to move to RTR towards
/// `peer` (its remote QPN made up): the QP, and how that move went.
fn to_rtr(
    ep: &mut Endpoint,
    peer: Ipv6Addr,
    init: InitAttr,
) -> Result<(Qpn, Result<(), VerbsError>), VerbsError> {
    let pd = ep.alloc_pd()?;
    let cq = ep.create_cq(64)?;
    let qpn = ep.create_qp(&QpInitAttr {
        pd,
        send_cq: cq,
        recv_cq: cq,
        cap: QpCap::default(),
        sq_sig_all: false,
    })?;
    ep.modify_qp(qpn, QpTransition::Init(init))?;
    let remote = RemoteNic {
        addr: peer,
        host: None,
    };
    let rtr = ep.modify_qp(qpn, QpTransition::Rtr(RtrAttr::new(remote, Qpn(0x77), 0)));
    Ok((qpn, rtr))
}

/// An endpoint request from `src` to us (QP 2, brief §2.12).
fn request(src: Ipv6Addr, op: EndpointOp, port_status_mask: u32) -> Vec<u8> {
    let repr = FrameRepr {
        src_mac: EthernetAddress([2, 0, 0, 0, 1, 0]),
        dst_mac: EthernetAddress([2, 0, 0, 0, 0, 0]),
        route: Route::Ecmp,
        src_addr: src,
        dst_addr: ME,
        dscp: Dscp(46),
        ecn: Ecn::NotEct,
        entropy: 0x0001_0002,
        bth: bth(Opcode::EndpointRequest, ENDPOINT_QPN, 9),
        body: Body::EndpointRequest(ErthRepr {
            op,
            port_status_mask,
            tx_timestamp: 5,
            tsr: false,
            format_type: TsethRepr::DEFAULT_FORMAT,
        }),
    };
    let mut buf = vec![0u8; repr.buffer_len(0)];
    repr.build(&mut buf, &[], &WireConfig::default()).unwrap();
    buf
}

fn slot(qpn: Qpn) -> u32 {
    qpn.0 & ((1 << super::QPN_INDEX_BITS) - 1)
}

fn remote_up(ep: &Endpoint, qpn: Qpn) -> u32 {
    ep.qps.get(qpn.0).unwrap().remote_up()
}

/// The QP slot and peer of each queued endpoint operation, in queue order.
fn queued(ep: &mut Endpoint) -> Vec<(u32, Ipv6Addr, bool)> {
    let ops: Vec<OutgoingOp> = ep.ep_ops.drain(..).collect();
    ops.iter()
        .map(|o| (o.via, o.remote, o.answer.is_some()))
        .collect()
}

#[test]
fn probes_and_port_status_reach_only_their_peers_qps_through_the_index() {
    let mut ep = endpoint();
    let now = Instant(1_000);
    // Slots 0..4: A, B, A, B.
    let [a0, b0, a1, b1] = abab(&mut ep);
    assert_eq!(ep.peers.slots(A), &[slot(a0), slot(a1)]);
    assert_eq!(ep.peers.slots(B), &[slot(b0), slot(b1)]);

    // A probe from A is answered through A's QP of lowest slot.
    ep.handle_packet(now, 1, &request(A, EndpointOp::EvProbe, 0));
    assert_eq!(queued(&mut ep), [(slot(a0), A, true)]);
    // A port status from A reaches A's QPs only.
    ep.handle_packet(now, 0, &request(A, EndpointOp::PortStatusUpdate, 0b01));
    for (q, want) in [(a0, 0b01), (a1, 0b01), (b0, u32::MAX), (b1, u32::MAX)] {
        assert_eq!(remote_up(&ep, q), want, "{q:?}");
    }
    assert_eq!(ep.stats().endpoint_ops_received, 2);

    // Reset A's first QP: it leaves the index, and A's probes go through its other QP.
    ep.modify_qp(a0, QpTransition::Reset).unwrap();
    assert_eq!(ep.peers.slots(A), &[slot(a1)]);
    ep.handle_packet(now, 1, &request(A, EndpointOp::EvProbe, 0));
    assert_eq!(queued(&mut ep), [(slot(a1), A, true)]);
    // Connected again (to B now): it joins B's QPs, in slot order.
    ep.modify_qp(a0, QpTransition::Init(InitAttr::default()))
        .unwrap();
    let remote = RemoteNic {
        addr: B,
        host: None,
    };
    ep.modify_qp(a0, QpTransition::Rtr(RtrAttr::new(remote, Qpn(0x77), 0)))
        .unwrap();
    assert_eq!(ep.peers.slots(B), &[slot(a0), slot(b0), slot(b1)]);
    assert_eq!(ep.peers.slots(A), &[slot(a1)]);
    ep.handle_packet(now, 1, &request(B, EndpointOp::EvProbe, 0));
    assert_eq!(queued(&mut ep), [(slot(a0), B, true)]);

    // Destroy A's last QP: A is a stranger now, its probes dropped as from a wrong peer.
    ep.destroy_qp(a1).unwrap();
    assert!(ep.peers.slots(A).is_empty());
    assert!(ep.peers.iter().all(|(p, _)| p != A));
    let wrong = ep.stats().drops.get(DropReason::WrongPeer);
    ep.handle_packet(now, 1, &request(A, EndpointOp::EvProbe, 0));
    assert!(queued(&mut ep).is_empty());
    assert_eq!(ep.stats().drops.get(DropReason::WrongPeer), wrong + 1);

    // The freed slot is reused by a QP to B: no stale entry of A routes to it.
    let n = connect(&mut ep, B).unwrap();
    assert_eq!(slot(n), slot(a1), "the slab reuses the slot");
    assert_ne!(n, a1);
    assert!(ep.peers.slots(A).is_empty());
    assert_eq!(ep.peers.slots(B), &[slot(a0), slot(b0), slot(n), slot(b1)]);
    ep.handle_packet(now, 0, &request(A, EndpointOp::PortStatusUpdate, 0b10));
    assert_eq!(
        remote_up(&ep, n),
        u32::MAX,
        "A's port status reaches no QP of B"
    );
    ep.handle_packet(now, 0, &request(B, EndpointOp::PortStatusUpdate, 0b10));
    for q in [a0, b0, n, b1] {
        assert_eq!(remote_up(&ep, q), 0b10, "{q:?}");
    }
}

#[test]
fn a_local_port_status_tells_each_peer_once_through_its_first_qp_in_slot_order() {
    let mut ep = endpoint();
    let now = Instant(1_000);
    // Slots 0..5: A, B, A, B, and a QP still in INIT (no peer).
    let [a0, b0, a1, _b1] = abab(&mut ep);
    // A's first QP in ERROR keeps its peer but tells it nothing: A is told through a1, after
    // B (through b0): the order of the slots, not of the peers' addresses.
    ep.modify_qp(a0, QpTransition::Error).unwrap();
    assert_eq!(ep.peers.slots(A), &[slot(a0), slot(a1)]);
    ep.handle_port_status(now, 1, false);
    assert_eq!(
        queued(&mut ep),
        [(slot(b0), B, false), (slot(a1), A, false)]
    );
    // A peer with a request queued already is not told twice.
    ep.handle_port_status(now, 1, true);
    ep.handle_port_status(now, 0, false);
    assert_eq!(
        queued(&mut ep),
        [(slot(b0), B, false), (slot(a1), A, false)]
    );

    // A full queue refuses every QP able to tell a peer, one drop each (as a scan that asked
    // for every connected QP counted them).
    let filler = OutgoingOp {
        op: EndpointOp::EvProbe,
        via: slot(b0),
        remote: B,
        answer: None,
    };
    while ep.push_ep_op(filler) {}
    let dropped = ep.stats().control_dropped;
    ep.handle_port_status(now, 0, true);
    // A: a1 (a0 is in ERROR); B: b0 and b1.
    assert_eq!(ep.stats().control_dropped, dropped + 3);
}

/// OCP mrc_ctl.h EV profiles (brief §3.1): an SRv6 EV list given to an ECMP endpoint is
/// accepted as a profile (the sizes fit) but fails the QP's move to RTR with `InvalidAttr`,
/// leaving it in INIT with no EVs; a QP on a STEV list of the same endpoint connects.
#[test]
fn an_srv6_ev_list_on_an_ecmp_endpoint_fails_rtr_cleanly() {
    let mut ep = endpoint();
    let route = ExplicitEv {
        plane: 1,
        value: ExplicitValue::Route(SrPath {
            outer_da: Ipv6Addr::new(0xfcbb, 0, 0, 0, 0, 0, 0, 1),
            segment: None,
        }),
    };
    let stev = ExplicitEv {
        plane: 0,
        value: ExplicitValue::Entropy(0x1234_5678),
    };
    let srv6 = ep
        .add_ev_profile(EvProfile {
            explicit: Some([stev, route].into()),
            ..EvProfile::default()
        })
        .unwrap();
    let ecmp = ep
        .add_ev_profile(EvProfile {
            explicit: Some([stev].into()),
            ..EvProfile::default()
        })
        .unwrap();
    let mut qp = |ev_profile| {
        let init = InitAttr {
            ev_profile,
            ..InitAttr::default()
        };
        to_rtr(&mut ep, A, init).unwrap()
    };
    let (bad, rtr) = qp(srv6);
    assert_eq!(
        rtr,
        Err(VerbsError::InvalidAttr("SRv6 EVs on an ECMP endpoint"))
    );
    let (good, rtr) = qp(ecmp);
    rtr.unwrap();
    assert!(ep.ev_stats(bad).is_empty());
    assert_eq!(ep.query_qp(bad).unwrap().state, QpState::Init);
    assert!(
        ep.peers.slots(A) == [slot(good)],
        "only the QP that connected"
    );
    let evs = ep.ev_stats(good);
    assert_eq!(evs.len(), 1);
    assert_eq!((evs[0].plane, evs[0].entropy), (0, 0x1234_5678));
}
