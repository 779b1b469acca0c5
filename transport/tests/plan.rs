//! SRv6 mode with the real fabric plan (`mrc_srv6::plan`): a QP's EVs are the plan's paths
//! (one per spine of each plane, plus the direct one inside a rack), frames carry the plan's
//! uSID containers, and a Write crosses the harness on them.

use std::sync::Arc;

use mrc_srv6::plan::{HostId, Plan};
use mrc_srv6::wire::EthernetAddress;
use mrc_transport::ev::PathSource;
use mrc_transport::harness::{
    Bound, Harness, HarnessConfig, LinkSpec, NodeId, NodeSpec, PathModel, PathSelect, PortModel,
    pattern,
};
use mrc_transport::verbs::InitAttr;
use mrc_transport::{Duration, Endpoint, EndpointConfig, PathMode, PortConfig};

fn endpoint(plan: &Arc<Plan>, host: u32) -> Endpoint {
    let ports = (0..plan.planes())
        .map(|p| {
            PortConfig::new(
                EthernetAddress([2, 0, 0, 0, host as u8, p]),
                EthernetAddress([2, 0, 0, 0xff, 0, p]),
            )
        })
        .collect();
    let paths: Arc<dyn PathSource> = plan.clone();
    let mut cfg = EndpointConfig::new(
        u64::from(host) + 1,
        plan.nic_addr(HostId(host)),
        ports,
        PathMode::Srv6 { paths, host },
    );
    cfg.payload_mtu = 2048;
    Endpoint::new(cfg).unwrap()
}

#[test]
fn evs_are_the_plans_paths_and_carry_a_write() {
    let plan = Arc::new(Plan::builtin("small").unwrap());
    // Hosts 0 and 3 sit in different racks: one path per spine in each plane.
    let (src, dst) = (0u32, 3u32);
    let mut h = Harness::new(HarnessConfig::default());
    let mut add = |host: u32| {
        h.add_node(
            endpoint(&plan, host),
            NodeSpec {
                addr: Some(plan.nic_addr(HostId(host))),
                ports: vec![PortModel::default(); usize::from(plan.planes())],
            },
        )
    };
    let (a, b) = (add(src), add(dst));
    assert_eq!((a, b), (NodeId(0), NodeId(1)));
    h.connect(
        a,
        b,
        &LinkSpec {
            ports: (0..plan.planes()).collect(),
            paths_per_port: usize::from(plan.t1_per_plane()),
            select: PathSelect::OuterDaHash,
            forward: PathModel::default(),
            reverse: PathModel::default(),
        },
    );
    let qp = h.connect_qps(a, b, InitAttr::default(), 1024).unwrap();
    let evs = h.node(a).ev_stats(qp.a.qpn);
    assert_eq!(
        evs.len(),
        usize::from(plan.planes()) * usize::from(plan.t1_per_plane())
    );
    for e in &evs {
        let da = e.path.unwrap().outer_da;
        let wanted = (0..plan.t1_per_plane()).any(|i| {
            plan.path(HostId(src), HostId(dst), e.plane, u32::from(i))
                .is_ok_and(|p| p.da == da)
        });
        assert!(
            wanted,
            "EV {} routes on a plan path of plane {}: {da}",
            e.id, e.plane
        );
    }
    let len = 1 << 20;
    let s = h.reg_pattern(&qp.a, 0x1000, len, 5).unwrap();
    let d = h.reg_pattern(&qp.b, 0x9000_0000, len, 0).unwrap();
    let sge = [mrc_transport::verbs::Sge {
        addr: 0x1000,
        length: len as u32,
        lkey: s.lkey,
    }];
    h.node_mut(a)
        .post_send(
            qp.a.qpn,
            &mrc_transport::verbs::SendWr {
                wr_id: 1,
                opcode: mrc_transport::verbs::SendOpcode::Write,
                sg_list: &sge,
                remote_addr: 0x9000_0000,
                rkey: d.rkey,
                signaled: true,
            },
        )
        .unwrap();
    h.run_until(Bound::time(Duration::from_millis(100)), |h| {
        !h.poll_all(a, qp.a.cq).is_empty()
    })
    .unwrap();
    h.check_region(b, d.lkey, 0, len, |i| pattern(5, i))
        .unwrap();
    let used = h
        .node(a)
        .ev_stats(qp.a.qpn)
        .iter()
        .filter(|e| e.stats.packets > 0)
        .count();
    assert_eq!(used, evs.len(), "every plan path carried data");
}
