//! A NIC on DPDK's `net_null`: the port fabricates a stream of 64-byte frames of nothing and
//! swallows whatever is sent. The engine must take the junk as drops, never as traffic, and
//! the NIC must keep sending through it: a Write towards a peer that never answers leaves as
//! data frames and is retransmitted, while the loop keeps serving control calls.
//! `harness = false`: the EAL initialises once per process.

mod support;

use std::process::ExitCode;
use std::time::{Duration, Instant};

use mrc_nic::Nic;
use mrc_nic::io::dpdk::DpdkPorts;
use mrc_transport::stats::DropReason;
use mrc_transport::verbs::{SendOpcode, SendWr, Sge};
use support::eal::{RuntimeDir, eal_args, init, lcores, unique};
use support::{Plan, SRC_VA, nic_addr, nic_config, side};

const TEST: &str = "dpdk_null";

fn main() -> ExitCode {
    let prefix = unique("nicnull");
    let eal = match init(&eal_args(&prefix, &lcores(), &["net_null0".to_owned()])) {
        Ok(eal) => eal,
        Err(why) => return mrc_skip::skip_exit(TEST, &why),
    };
    let _dir = RuntimeDir::of(&eal);
    let mut ports = DpdkPorts::new(["net_null0"]);
    ports.frame_room = 4608;
    ports.mbufs = 4095;
    let io = ports
        .open(&eal)
        .expect("null port")
        .pop()
        .expect("one engine");
    let (nic, handle) = Nic::spawn(nic_config(0, 1, Vec::new()), io).expect("nic");

    // A QP towards a peer that does not exist, one Write posted.
    let plan = Plan::new(1, 8192);
    let me = side(&handle, &plan, 1);
    me.connect(me.info(nic_addr(1)), 0, 0);
    let sge = [Sge {
        addr: SRC_VA,
        length: 8192,
        lkey: me.src_keys.lkey,
    }];
    let wr = SendWr {
        wr_id: 1,
        opcode: SendOpcode::Write,
        sg_list: &sge,
        remote_addr: support::DST_VA,
        rkey: 0,
        signaled: true,
    };
    handle.post_send(me.qpn, &wr).expect("post");

    let deadline = Instant::now() + Duration::from_mins(1);
    loop {
        let engine = handle.endpoint_stats().expect("engine stats");
        let qp = handle.qp_stats(me.qpn).expect("qp stats").expect("qp");
        let nic_stats = handle.nic_stats().expect("nic stats");
        let junk = engine.frames_received;
        let dropped: u64 = DropReason::ALL.iter().map(|&r| engine.drops.get(r)).sum();
        if junk > 10_000 && qp.data_packets_sent >= 2 && nic_stats.io.tx_frames >= 2 {
            assert_eq!(
                dropped, junk,
                "every junk frame is a counted drop: {engine:?}"
            );
            assert_eq!(qp.data_packets_received, 0);
            break;
        }
        assert!(Instant::now() < deadline, "{engine:?} {qp:?} {nic_stats:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
    let exit = nic.shutdown().expect("shutdown");
    assert!(exit.stats.io.rx_frames > 10_000, "{:?}", exit.stats);
    drop(exit.io);
    println!(
        "{TEST}: ok: {} junk frames dropped by the engine, {} frames sent into the sink",
        exit.stats.io.rx_frames, exit.stats.io.tx_frames
    );
    ExitCode::SUCCESS
}
