//! The verbs: every bad call returns a typed error (never a panic), the QP state machine
//! refuses transitions out of order, and limits hold.

mod common;

use common::{ConnOpts, NetBuilder, connect, nic};
use mrc_transport::verbs::{
    Access, CqHandle, InitAttr, PdHandle, QpCap, QpInitAttr, QpState, QpTransition, Qpn, RecvWr,
    RemoteNic, RtrAttr, RtsAttr, SendOpcode, SendWr, Sge, VerbsError, WcStatus, WorkCompletion,
};
use mrc_transport::{Duration, Endpoint, EndpointConfig, PathMode};

fn endpoint() -> Endpoint {
    common::standalone(0)
}

fn qp_attr(pd: PdHandle, cq: CqHandle) -> QpInitAttr {
    QpInitAttr {
        pd,
        send_cq: cq,
        recv_cq: cq,
        cap: QpCap {
            max_send_wr: 2,
            max_recv_wr: 1,
            max_send_sge: 2,
        },
        sq_sig_all: false,
    }
}

fn remote() -> RemoteNic {
    RemoteNic {
        addr: nic(1),
        host: Some(1),
    }
}

#[test]
fn handles_and_keys_that_do_not_exist_are_refused() {
    let mut ep = endpoint();
    let pd = ep.alloc_pd().unwrap();
    let cq = ep.create_cq(8).unwrap();
    let bad_pd = PdHandle(pd.0 ^ 0x1_0000);
    let bad_cq = CqHandle(cq.0 + 1);
    assert_eq!(ep.create_cq(0), Err(VerbsError::InvalidAttr("CQ depth")));
    assert_eq!(
        ep.reg_mr(bad_pd, 0, Box::new(vec![0u8; 8]), Access::NONE),
        Err(VerbsError::InvalidPd(bad_pd))
    );
    assert_eq!(
        ep.create_qp(&qp_attr(bad_pd, cq)),
        Err(VerbsError::InvalidPd(bad_pd))
    );
    assert_eq!(
        ep.create_qp(&qp_attr(pd, bad_cq)),
        Err(VerbsError::InvalidCq(bad_cq))
    );
    let ghost = Qpn(0x12_3456);
    assert_eq!(ep.query_qp(ghost).err(), Some(VerbsError::InvalidQp(ghost)));
    assert_eq!(
        ep.modify_qp(ghost, QpTransition::Error),
        Err(VerbsError::InvalidQp(ghost))
    );
    assert_eq!(
        ep.post_recv(ghost, &RecvWr { wr_id: 0 }),
        Err(VerbsError::InvalidQp(ghost))
    );
    assert_eq!(
        ep.poll_cq(bad_cq, &mut [WorkCompletion::EMPTY]),
        Err(VerbsError::InvalidCq(bad_cq))
    );
    assert_eq!(ep.dereg_mr(77).err(), Some(VerbsError::InvalidLkey(77)));
    assert_eq!(
        ep.mr_read(77, 0, &mut [0]),
        Err(VerbsError::InvalidLkey(77))
    );
    assert_eq!(ep.mr_write(77, 0, &[0]), Err(VerbsError::InvalidLkey(77)));
    assert!(ep.mr_slice(77).is_none());
    // In-use resources cannot be freed.
    let k = ep
        .reg_mr(pd, 0x1000, Box::new(vec![0u8; 8]), Access::LOCAL_WRITE)
        .unwrap();
    assert_eq!(
        ep.dealloc_pd(pd),
        Err(VerbsError::Busy {
            what: "protection domain"
        })
    );
    let qp = ep.create_qp(&qp_attr(pd, cq)).unwrap();
    assert_eq!(
        ep.destroy_cq(cq),
        Err(VerbsError::Busy {
            what: "completion queue"
        })
    );
    ep.destroy_qp(qp).unwrap();
    ep.destroy_cq(cq).unwrap();
    assert_eq!(
        ep.query_qp(qp).err(),
        Some(VerbsError::InvalidQp(qp)),
        "a destroyed QPN is dead"
    );
    // Local memory access is bounds-checked.
    assert_eq!(
        ep.mr_read(k.lkey, 0x1007, &mut [0, 0]),
        Err(VerbsError::OutOfBounds)
    );
    ep.mr_write(k.lkey, 0x1006, &[1, 2]).unwrap();
    assert_eq!(&ep.mr_slice(k.lkey).unwrap()[6..], &[1, 2]);
    ep.dereg_mr(k.lkey).unwrap();
    ep.dealloc_pd(pd).unwrap();
}

#[test]
fn the_state_machine_goes_in_order_with_checked_attributes() {
    let mut ep = endpoint();
    let pd = ep.alloc_pd().unwrap();
    let cq = ep.create_cq(8).unwrap();
    let qp = ep.create_qp(&qp_attr(pd, cq)).unwrap();
    assert!(qp.0 > 2, "QPN 2 is the endpoint-operation address");
    let rtr = RtrAttr::new(remote(), Qpn(0x4000), 0);
    let rts = RtsAttr::new(0);
    assert_eq!(
        ep.modify_qp(qp, QpTransition::Rtr(rtr)),
        Err(VerbsError::InvalidTransition {
            from: QpState::Reset,
            to: QpState::Rtr
        })
    );
    let bad_profile = InitAttr {
        ev_profile: 9,
        ..InitAttr::default()
    };
    assert_eq!(
        ep.modify_qp(qp, QpTransition::Init(bad_profile)),
        Err(VerbsError::InvalidAttr("unknown EV profile"))
    );
    ep.modify_qp(qp, QpTransition::Init(InitAttr::default()))
        .unwrap();
    for (what, attr) in [
        ("MPR", RtrAttr { mpr: 100, ..rtr }),
        (
            "WIMM",
            RtrAttr {
                wimm_limit: 0,
                ..rtr
            },
        ),
        (
            "QPN 2",
            RtrAttr {
                dest_qpn: Qpn(2),
                ..rtr
            },
        ),
        (
            "no plan host",
            RtrAttr {
                remote: RemoteNic {
                    host: None,
                    ..remote()
                },
                ..rtr
            },
        ),
    ] {
        assert!(
            matches!(
                ep.modify_qp(qp, QpTransition::Rtr(attr)),
                Err(VerbsError::InvalidAttr(_))
            ),
            "{what}"
        );
    }
    assert_eq!(
        ep.query_qp(qp).unwrap().state,
        QpState::Init,
        "a refused transition changes nothing"
    );
    ep.modify_qp(qp, QpTransition::Rtr(rtr)).unwrap();
    for attr in [
        RtsAttr {
            retry_linear: 8,
            ..rts
        },
        RtsAttr {
            retry_exp: 26,
            ..rts
        },
        RtsAttr { mpr: 0, ..rts },
    ] {
        assert!(matches!(
            ep.modify_qp(qp, QpTransition::Rts(attr)),
            Err(VerbsError::InvalidAttr(_))
        ));
    }
    ep.modify_qp(qp, QpTransition::Rts(rts)).unwrap();
    let info = ep.query_qp(qp).unwrap();
    assert_eq!(info.state, QpState::Rts);
    assert_eq!(info.rtr, Some(rtr));
    assert_eq!(info.rts, Some(rts));
    ep.modify_qp(qp, QpTransition::Reset).unwrap();
    assert_eq!(ep.query_qp(qp).unwrap().state, QpState::Reset);
    assert_eq!(ep.query_qp(qp).unwrap().rtr, None);
}

#[test]
fn posting_checks_state_gather_lists_and_queue_depths() {
    let mut n = NetBuilder::default().build();
    let c = connect(
        &mut n,
        0,
        1,
        ConnOpts {
            cap: QpCap {
                max_send_wr: 2,
                max_recv_wr: 1,
                max_send_sge: 2,
            },
            ..ConnOpts::default()
        },
    );
    let ep = n.ep(0);
    let k = ep
        .reg_mr(c.pd_a, 0x1000, Box::new(vec![0u8; 64]), Access::LOCAL_WRITE)
        .unwrap();
    let other_pd = ep.alloc_pd().unwrap();
    let foreign = ep
        .reg_mr(
            other_pd,
            0x1000,
            Box::new(vec![0u8; 64]),
            Access::LOCAL_WRITE,
        )
        .unwrap();
    let wr = |sg: &'static [Sge]| SendWr {
        wr_id: 5,
        opcode: SendOpcode::Write,
        sg_list: sg,
        remote_addr: 0,
        rkey: 1,
        signaled: true,
    };
    let sge = |lkey, addr, length| Sge { addr, length, lkey };
    let leak = |v: Vec<Sge>| -> &'static [Sge] { Box::leak(v.into_boxed_slice()) };
    let cases = [
        (
            leak(vec![sge(k.lkey, 0x1000, 8); 3]),
            VerbsError::TooManySge { given: 3, max: 2 },
        ),
        (leak(vec![sge(k.lkey, 0x1030, 32)]), VerbsError::OutOfBounds),
        (
            leak(vec![sge(k.lkey ^ 0x4000_0000, 0x1000, 8)]),
            VerbsError::InvalidLkey(k.lkey ^ 0x4000_0000),
        ),
        (
            leak(vec![sge(foreign.lkey, 0x1000, 8)]),
            VerbsError::WrongPd,
        ),
    ];
    for (sg, err) in cases {
        assert_eq!(ep.post_send(c.qp_a, &wr(sg)), Err(err));
    }
    let ok = leak(vec![sge(k.lkey, 0x1000, 8)]);
    let far = SendWr {
        remote_addr: u64::MAX - 4,
        ..wr(ok)
    };
    assert_eq!(ep.post_send(c.qp_a, &far), Err(VerbsError::AddressOverflow));
    ep.post_send(c.qp_a, &wr(ok)).unwrap();
    ep.post_send(c.qp_a, &wr(ok)).unwrap();
    assert_eq!(
        ep.post_send(c.qp_a, &wr(ok)),
        Err(VerbsError::SendQueueFull)
    );
    ep.post_recv(c.qp_a, &RecvWr { wr_id: 1 }).unwrap();
    assert_eq!(
        ep.post_recv(c.qp_a, &RecvWr { wr_id: 2 }),
        Err(VerbsError::RecvQueueFull)
    );
    // An errored QP completes everything flushed, including what is posted afterwards.
    ep.modify_qp(c.qp_a, QpTransition::Error).unwrap();
    ep.post_send(c.qp_a, &wr(ok)).unwrap();
    let wcs = common::drain_cq(&mut n, 0, c.cq_a);
    assert_eq!(
        wcs.len(),
        4,
        "two sends, one receive, one send after the error"
    );
    assert!(wcs.iter().all(|w| w.status == WcStatus::WrFlushError));
    // Posting before RTS is refused.
    let ep = n.ep(0);
    let qp = ep.create_qp(&qp_attr(c.pd_a, c.cq_a)).unwrap();
    assert_eq!(
        ep.post_send(qp, &wr(ok)),
        Err(VerbsError::InvalidState(QpState::Reset))
    );
    assert_eq!(
        ep.post_recv(qp, &RecvWr { wr_id: 1 }),
        Err(VerbsError::InvalidState(QpState::Reset))
    );
}

#[test]
fn limits_hold_and_configurations_are_validated() {
    let mut cfg = EndpointConfig::new(1, nic(0), vec![], PathMode::Ecmp);
    assert!(Endpoint::new(cfg.clone()).is_err(), "no ports");
    cfg.ports = common::standalone(0).config().ports.clone();
    cfg.limits.max_pds = 2;
    cfg.limits.max_cqs = 1;
    cfg.payload_mtu = 32;
    assert!(Endpoint::new(cfg.clone()).is_err(), "MTU too small");
    cfg.payload_mtu = 1024;
    let mut ep = Endpoint::new(cfg).unwrap();
    ep.alloc_pd().unwrap();
    ep.alloc_pd().unwrap();
    assert!(matches!(
        ep.alloc_pd(),
        Err(VerbsError::LimitReached { .. })
    ));
    ep.create_cq(1).unwrap();
    assert!(matches!(
        ep.create_cq(1),
        Err(VerbsError::LimitReached { .. })
    ));
}

#[test]
fn a_write_longer_than_the_largest_message_is_refused_at_post_time() {
    fn tweak(cfg: &mut EndpointConfig) {
        cfg.limits.max_message_bytes = 1000;
    }
    let mut n = NetBuilder {
        tweak,
        ..NetBuilder::default()
    }
    .build();
    let c = connect(&mut n, 0, 1, ConnOpts::default());
    let src = common::region(&mut n, 0, c.pd_a, 0x1000, 4096, common::pattern(3));
    let dst = common::region(&mut n, 1, c.pd_b, 0x8000, 4096, |_| 0);
    let post = |n: &mut common::Net, wr_id, sg: &[(u64, u32)]| {
        let sg: Vec<Sge> = sg
            .iter()
            .map(|&(addr, length)| Sge {
                addr,
                length,
                lkey: src.lkey,
            })
            .collect();
        n.ep(0).post_send(
            c.qp_a,
            &SendWr {
                wr_id,
                opcode: SendOpcode::Write,
                sg_list: &sg,
                remote_addr: 0x8000,
                rkey: dst.rkey,
                signaled: true,
            },
        )
    };
    // One byte too many, alone or summed over the gather list.
    assert_eq!(
        post(&mut n, 1, &[(0x1000, 1001)]),
        Err(VerbsError::MessageTooLong(1001))
    );
    assert_eq!(
        post(&mut n, 2, &[(0x1000, 600), (0x1800, 600)]),
        Err(VerbsError::MessageTooLong(1200))
    );
    // Refused ones are not queued: nothing is sent, nothing completes.
    n.run_until_idle(Duration::from_millis(10));
    assert_eq!(n.ep(0).qp_stats(c.qp_a).unwrap().data_packets_sent, 0);
    assert!(common::drain_cq(&mut n, 0, c.cq_a).is_empty());
    // The largest message itself goes.
    post(&mut n, 3, &[(0x1000, 400), (0x1800, 600)]).unwrap();
    n.run_until_idle(Duration::from_millis(10));
    let wcs = common::drain_cq(&mut n, 0, c.cq_a);
    let got: Vec<_> = wcs
        .iter()
        .map(|w| (w.wr_id, w.status, w.byte_len))
        .collect();
    assert_eq!(got, [(3, WcStatus::Success, 1000)]);
    let mem = n.ep(1).mr_slice(dst.lkey).unwrap();
    let p = common::pattern(3);
    assert!((0..400).all(|i| mem[i] == p(i)));
    assert!((0..600).all(|i| mem[400 + i] == p(0x800 + i)));
}

#[test]
fn events_past_the_queue_bound_are_counted_and_dropped_the_first_ones_kept() {
    use mrc_transport::{Event, Instant};
    let mut cfg = common::standalone(0).config().clone();
    cfg.limits.max_events = 3;
    let mut ep = Endpoint::new(cfg).unwrap();
    let t = Instant::ZERO;
    // Five port changes, nobody draining: the queue keeps the first three.
    for (port, up) in [(0, false), (1, false), (0, true), (1, true), (0, false)] {
        ep.handle_port_status(t, port, up);
    }
    assert_eq!(ep.stats().events_dropped, 2);
    let got: Vec<Event> = std::iter::from_fn(|| ep.poll_event()).collect();
    assert_eq!(
        got,
        [
            Event::PortStatus { port: 0, up: false },
            Event::PortStatus { port: 1, up: false },
            Event::PortStatus { port: 0, up: true },
        ]
    );
    // Drained, the queue takes events again; the count stays.
    ep.handle_port_status(t, 1, false);
    assert_eq!(
        ep.poll_event(),
        Some(Event::PortStatus { port: 1, up: false })
    );
    assert_eq!(ep.poll_event(), None);
    assert_eq!(ep.stats().events_dropped, 2);
}

#[test]
fn a_completion_that_does_not_fit_its_cq_is_lost_and_reported() {
    use mrc_transport::Event;
    let mut n = NetBuilder::default().build();
    let c = connect(
        &mut n,
        0,
        1,
        ConnOpts {
            cq_depth: 2,
            ..ConnOpts::default()
        },
    );
    let src = common::region(&mut n, 0, c.pd_a, 0x1000, 4096, common::pattern(4));
    let dst = common::region(&mut n, 1, c.pd_b, 0x8000, 4096, |_| 0);
    let post = |n: &mut common::Net, wr_id| {
        let sge = [Sge {
            addr: 0x1000,
            length: 100,
            lkey: src.lkey,
        }];
        n.ep(0)
            .post_send(
                c.qp_a,
                &SendWr {
                    wr_id,
                    opcode: SendOpcode::Write,
                    sg_list: &sge,
                    remote_addr: 0x8000,
                    rkey: dst.rkey,
                    signaled: true,
                },
            )
            .unwrap();
    };
    // Three signaled Writes into a CQ of two, not polled until all are done.
    for id in 1..=3 {
        post(&mut n, id);
    }
    n.run_until(Duration::from_millis(10), |n| {
        n.ep(0).qp_stats(c.qp_a).unwrap().messages_completed == 3
    });
    let overruns: Vec<Event> = n
        .events(0)
        .into_iter()
        .filter(|e| matches!(e, Event::CqOverrun { .. }))
        .collect();
    assert_eq!(overruns, [Event::CqOverrun { cq: c.cq_a }]);
    assert_eq!(n.ep(0).stats().cq_overruns, 1);
    // The CQ holds the two that fitted, oldest first; the third is gone.
    let ids: Vec<u64> = common::drain_cq(&mut n, 0, c.cq_a)
        .iter()
        .map(|w| w.wr_id)
        .collect();
    assert_eq!(ids, [1, 2]);
    // The QP carries on: drained, the CQ takes the next completion.
    assert_eq!(n.ep(0).query_qp(c.qp_a).unwrap().state, QpState::Rts);
    post(&mut n, 4);
    n.run_until_idle(Duration::from_millis(10));
    let wcs = common::drain_cq(&mut n, 0, c.cq_a);
    let got: Vec<_> = wcs.iter().map(|w| (w.wr_id, w.status)).collect();
    assert_eq!(got, [(4, WcStatus::Success)]);
    assert_eq!(n.ep(0).stats().cq_overruns, 1);
    assert!(n.events(0).is_empty());
}
