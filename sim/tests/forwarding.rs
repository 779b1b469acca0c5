//! The switches, seen from raw frames built by the wire module: uSID forwarding follows
//! exactly the path the EV names, trimmed packets arrive as headers with the trim DSCP (a
//! distinct one at the last hop), and a failed link blackholes exactly the paths through it.

mod common;

use common::{TINY, limit, sim, us};
use mrc_sim::{Fault, FaultKind, Sim, SimConfig};
use mrc_srv6::plan::{HostId, NodeId, Plan, SwitchId};
use mrc_srv6::wire::{Dscp, Ecn, EthernetAddress, Ipv6Packet};
use mrc_transport::wire::{
    Body, BthRepr, FrameRepr, MethRepr, Opcode, RethRepr, Route, Trimmed, WireConfig, WriteHeaders,
    parse_frame,
};

/// A 4 KiB RDMA Write from `src` to `dst` along `plan`'s path `index` of `plane`.
fn write_frame(plan: &Plan, src: u32, dst: u32, plane: u8, index: u32) -> Vec<u8> {
    let path = plan.path(HostId(src), HostId(dst), plane, index).unwrap();
    let wire = WireConfig::default();
    let repr = FrameRepr {
        src_mac: EthernetAddress([2, 0, 0, 0, 0, 1]),
        dst_mac: EthernetAddress([2, 0, 0, 0, 0, 2]),
        route: Route::Srv6 {
            path: path.da,
            srh_segment: None,
        },
        src_addr: plan.nic_addr(HostId(src)),
        dst_addr: plan.nic_addr(HostId(dst)),
        dscp: wire.dscp.trimmable,
        ecn: Ecn::Ect0,
        entropy: index,
        bth: BthRepr {
            opcode: Opcode::WriteOnly,
            solicited: false,
            mig_req: false,
            pad_count: 0,
            tver: 0,
            pkey: BthRepr::DEFAULT_PKEY,
            dest_qp: 0x100,
            ack_req: false,
            rtx: false,
            ts: false,
            psn: 7,
        },
        body: Body::Write(WriteHeaders {
            meth: MethRepr { rqmsn: 0, msn: 1 },
            tseth: None,
            reth: RethRepr {
                va: 0x1000,
                rkey: 0x42,
                dma_len: 4096,
            },
            immdt: None,
        }),
    };
    let mut buf = vec![0u8; 9000];
    let len = repr.build(&mut buf, &[0xab; 4096], &wire).unwrap();
    buf.truncate(len);
    buf
}

/// Every egress port (node, peer) that sent at least one frame.
fn busy_links(s: &Sim) -> Vec<(NodeId, NodeId)> {
    let plan = s.plan().clone();
    let mut nodes: Vec<NodeId> = plan.hosts().map(NodeId::Host).collect();
    nodes.extend(plan.switches().map(NodeId::Switch));
    let mut out = Vec::new();
    for n in nodes {
        for k in 0..plan.port_count(n) {
            let peer = plan.link(n, k).unwrap().peer;
            if s.link_stats(n, peer).unwrap().tx_frames > 0 {
                out.push((n, peer));
            }
        }
    }
    out
}

#[test]
fn usid_forwarding_follows_exactly_the_path_the_ev_names() {
    let plan = common::plan(TINY);
    for (src, dst) in [(0u32, 3u32), (0, 1), (2, 1)] {
        for plane in 0..plan.planes() {
            let n = plan.path_count(HostId(src), HostId(dst), plane).unwrap();
            for index in 0..n {
                let path = plan.path(HostId(src), HostId(dst), plane, index).unwrap();
                let mut s = sim(TINY, SimConfig::default());
                s.capture(true);
                s.inject(src, plane, &write_frame(&plan, src, dst, plane, index))
                    .unwrap();
                s.run(limit(), &mut |_| {});
                // The links crossed are exactly the path's hops, in any order.
                let mut expected: Vec<(NodeId, NodeId)> = path
                    .hops()
                    .iter()
                    .map(|h| (h.node, plan.link(h.node, h.egress_port).unwrap().peer))
                    .collect();
                expected.sort();
                let mut crossed = busy_links(&s);
                crossed.sort();
                assert_eq!(crossed, expected, "{path}");
                // It reached the destination on the path's plane, its container used up.
                let d = &s.captured()[0];
                assert_eq!((d.host, d.plane), (dst, plane));
                let f = parse_frame(&d.frame, &WireConfig::default()).unwrap();
                assert_eq!(f.dst_addr(), plan.nic_addr(HostId(dst)));
                assert_eq!(s.captured().len(), 1);
            }
        }
    }
}

#[test]
fn trimmed_packets_arrive_as_headers_with_the_trim_dscp() {
    let plan = common::plan(TINY);
    let wire = WireConfig::default();
    let keep = usize::from(wire.trim_size);
    // In the fabric: hosts 0 and 1 (rack 0) both push 240 frames to rack 1 through spine 0 of
    // plane 0: the T0's uplink queue (256 KiB) overflows.
    let mut s = sim(TINY, SimConfig::default());
    s.capture(true);
    for i in 0..240 {
        let (src, dst) = if i % 2 == 0 { (0, 2) } else { (1, 3) };
        s.inject(src, 0, &write_frame(&plan, src, dst, 0, 0))
            .unwrap();
    }
    s.run(limit(), &mut |_| {});
    let trims = s
        .link_stats(
            NodeId::Switch(SwitchId::t0(0, 0)),
            NodeId::Switch(SwitchId::t1(0, 0)),
        )
        .unwrap()
        .trimmed;
    assert!(trims > 0, "the uplink trimmed");
    let cut: Vec<_> = s
        .captured()
        .iter()
        .filter(|d| d.frame.len() < 1000)
        .collect();
    assert_eq!(cut.len() as u64, trims, "every trimmed header arrives");
    for d in &cut {
        assert_eq!(d.frame.len(), keep);
        let ip = Ipv6Packet::new_checked(&d.frame[14..]).unwrap();
        assert_eq!(ip.dscp(), wire.dscp.trimmed);
        let f = parse_frame(&d.frame, &wire).unwrap();
        assert_eq!(f.trimmed, Some(Trimmed::InFabric));
        assert_eq!(f.bth.psn, 7, "the headers the NACK needs survive");
    }
    assert_eq!(s.captured().len(), 240, "nothing is lost, only cut");

    // At the last hop: hosts 0 and 2 (two racks, two spines) both push to host 1: the
    // downlink of T0(0, 0) overflows and trims with the last-hop code point, unmarked.
    let mut s = sim(TINY, SimConfig::default());
    s.capture(true);
    for i in 0..240 {
        let (src, idx) = if i % 2 == 0 { (0, 2) } else { (2, 1) };
        s.inject(src, 0, &write_frame(&plan, src, 1, 0, idx))
            .unwrap();
    }
    s.run(limit(), &mut |_| {});
    let last: Vec<_> = s
        .captured()
        .iter()
        .filter(|d| d.frame.len() == keep)
        .collect();
    assert!(!last.is_empty(), "the last hop trimmed");
    for d in &last {
        let ip = Ipv6Packet::new_checked(&d.frame[14..]).unwrap();
        assert_eq!(ip.dscp(), wire.dscp.trimmed_last_hop);
        assert_eq!(
            parse_frame(&d.frame, &wire).unwrap().trimmed,
            Some(Trimmed::LastHop)
        );
    }
    for d in s.captured() {
        let ip = Ipv6Packet::new_checked(&d.frame[14..]).unwrap();
        assert_ne!(ip.ecn(), Ecn::Ce, "no ECN marking on the last hop");
    }
    assert_eq!(Dscp(16), wire.dscp.trimmed_last_hop);
}

#[test]
fn a_failed_link_blackholes_exactly_its_paths() {
    let plan = common::plan(TINY);
    let t0 = NodeId::Switch(SwitchId::t0(1, 0));
    let t1 = NodeId::Switch(SwitchId::t1(1, 1));
    let mut s = sim(TINY, SimConfig::default());
    s.capture(true);
    s.schedule(Fault::at_us(1, FaultKind::LinkDown(t0, t1)));
    s.run(mrc_sim::RunLimit::until(us(2)), &mut |_| {});
    // Every path from host 0 and host 1 (rack 0) to every other host, every plane.
    let mut sent = Vec::new();
    for src in [0u32, 1] {
        for dst in 0..4u32 {
            if src == dst {
                continue;
            }
            for plane in 0..2 {
                for index in 0..plan.path_count(HostId(src), HostId(dst), plane).unwrap() {
                    let p = plan.path(HostId(src), HostId(dst), plane, index).unwrap();
                    let crosses_up = p
                        .hops()
                        .iter()
                        .any(|h| h.node == t0 && plan.link(t0, h.egress_port).unwrap().peer == t1);
                    s.inject(src, plane, &write_frame(&plan, src, dst, plane, index))
                        .unwrap();
                    sent.push((src, dst, plane, index, crosses_up));
                }
            }
        }
    }
    s.run(limit(), &mut |_| {});
    let delivered = s.captured();
    let blackholed = sent.iter().filter(|x| x.4).count();
    assert!(blackholed > 0, "some paths use the failed link");
    assert_eq!(delivered.len(), sent.len() - blackholed);
    let down = s.link_stats(t0, t1).unwrap().down_dropped;
    assert_eq!(
        down as usize, blackholed,
        "exactly the paths through it are lost"
    );
}

/// An ECMP-mode frame (one IPv6 header to the destination NIC) with entropy `ev`.
fn ecmp_frame(plan: &Plan, src: u32, dst: u32, ev: u32) -> Vec<u8> {
    let plan_path = write_frame(plan, src, dst, 0, 0);
    let wire = WireConfig::default();
    let mut repr = parse_frame(&plan_path, &wire).unwrap().to_repr().unwrap();
    repr.route = Route::Ecmp;
    repr.entropy = ev;
    let mut buf = vec![0u8; 9000];
    let len = repr.build(&mut buf, &[0xcd; 4096], &wire).unwrap();
    buf.truncate(len);
    buf
}

#[test]
fn ecmp_switches_hash_the_entropy_value_onto_the_uplinks() {
    let plan = common::plan(TINY);
    let cfg = || SimConfig {
        routing: mrc_sim::Routing::Ecmp,
        ..SimConfig::default()
    };
    let t0 = NodeId::Switch(SwitchId::t0(0, 0));
    let uplink_of = |ev: u32| {
        let mut s = sim(TINY, cfg());
        s.capture(true);
        s.inject(0, 0, &ecmp_frame(&plan, 0, 3, ev)).unwrap();
        s.run(limit(), &mut |_| {});
        assert_eq!(s.captured().len(), 1, "delivered to host 3");
        assert_eq!(s.captured()[0].host, 3);
        (0..2u16)
            .find(|&sp| {
                s.link_stats(t0, NodeId::Switch(SwitchId::t1(0, sp)))
                    .unwrap()
                    .tx_frames
                    == 1
            })
            .expect("one uplink carried it")
    };
    let spines: Vec<u16> = (0..32).map(uplink_of).collect();
    assert!(
        spines.contains(&0) && spines.contains(&1),
        "EVs spread: {spines:?}"
    );
    assert_eq!(uplink_of(7), spines[7], "one EV, one path");
}

#[test]
fn the_plan_sim_table_sets_the_switch_features() {
    let text =
        format!("{TINY}\n[sim]\ntrim = false\necn = false\nrouting = \"ecmp\"\nhost_tx_ring = 3\n");
    let plan = common::plan(&text);
    let c = SimConfig::from_plan(&plan).unwrap();
    assert!(!c.trim && !c.ecn);
    assert_eq!(c.routing, mrc_sim::Routing::Ecmp);
    assert_eq!(c.host_tx_ring, 3);
    let bad = common::plan(&format!("{TINY}\n[sim]\ntrim = 3\n"));
    assert!(SimConfig::from_plan(&bad).is_err());
}
