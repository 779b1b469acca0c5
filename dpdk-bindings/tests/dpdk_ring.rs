//! Loopback through `net_ring` (in-process, TX queue i feeds RX queue i through a 1024-slot
//! ring): frames of many sizes come back byte for byte and in order; a full ring refuses the
//! rest of a burst, which stays in the burst, in order, to be sent again. Last: a pool dropped
//! with an mbuf still out is kept alive, and the EAL cleanup says so instead of unmapping it.

mod common;

use std::process::ExitCode;

use mrc_dpdk::{Error, MbufBurst, Mempool, MempoolConfig, Port, PortConfig, RxQueue, TxQueue};

const TEST: &str = "dpdk_ring";
/// One more than the ring holds (1024 slots, 1023 usable), so the ring fills up.
const FRAMES: u64 = 1100;

fn main() -> ExitCode {
    let prefix = common::unique_prefix("ring");
    let eal = match common::init_eal(&common::eal_args(&prefix, "0", &["net_ring0".into()])) {
        Ok(eal) => eal,
        Err(why) => return mrc_skip::skip_exit(TEST, &why),
    };
    let _dir = common::RuntimeDirGuard::new(&eal);

    let pool = Mempool::create(&eal, &MempoolConfig::new("ring_pool", 4095)).expect("pool");
    let mut port = Port::by_name(&eal, "net_ring0").expect("port");
    let config = PortConfig {
        rx_queues: 2,
        tx_queues: 2,
        ..PortConfig::default()
    };
    let mut queues = port.configure(&config, &pool).expect("configure");
    port.start().expect("start");
    assert!(port.link().expect("link").up);

    let (rx, tx) = (&mut queues.rx, &mut queues.tx);
    let sent = send_until_full(&pool, &mut tx[0]);
    assert!(
        sent.len() < FRAMES as usize,
        "the ring must have refused some frames"
    );
    println!(
        "{TEST}: ring took {} of {FRAMES} frames before refusing",
        sent.len()
    );
    let got = receive(&mut rx[0], sent.len());
    assert_eq!(got, sent, "every frame back, byte for byte, in order");
    assert_eq!(
        rx[1].rx_burst(&mut MbufBurst::<32>::new()),
        0,
        "queue 1 saw nothing of queue 0"
    );

    // Queue 1 is a separate ring.
    let mut burst = MbufBurst::<8>::new();
    for seq in 0..8 {
        burst
            .push(common::frame_mbuf(&pool, 5000 + seq, 60 + seq as usize))
            .expect("room");
    }
    assert_eq!(tx[1].tx_burst(&mut burst), 8);
    assert_eq!(
        receive(&mut rx[1], 8)
            .iter()
            .map(|(s, _)| *s)
            .collect::<Vec<_>>(),
        (5000..5008).collect::<Vec<_>>()
    );

    let stats = port.stats().expect("stats");
    assert_eq!(stats.opackets, stats.ipackets, "{stats:?}");
    assert_eq!(stats.opackets, sent.len() as u64 + 8, "{stats:?}");
    drop(queues);
    port.stop().expect("stop");
    assert_eq!(pool.in_use(), 0, "nothing left in the rings or in bursts");

    // A frame still out when its pool goes: the pool is kept, the EAL is not cleaned up.
    let straggler = pool.alloc().expect("alloc");
    drop(port);
    drop(pool);
    assert!(matches!(eal.cleanup(), Err(Error::MbufsOutstanding)));
    assert!(straggler.is_empty(), "the mbuf's memory is still mapped");
    drop(straggler);
    println!("{TEST}: ok");
    ExitCode::SUCCESS
}

/// Sends frames 0.. in bursts of 32 until the ring refuses some; checks that the refused ones
/// stayed in the burst, in order. Returns (seq, length) of every frame the ring took.
fn send_until_full(pool: &Mempool, tx: &mut TxQueue) -> Vec<(u64, usize)> {
    let mut sent = Vec::new();
    let mut burst = MbufBurst::<32>::new();
    let mut seq = 0;
    while seq < FRAMES {
        while !burst.is_full() && seq < FRAMES {
            let len = common::frame_len(seq, 60, 2048);
            burst
                .push(common::frame_mbuf(pool, seq, len))
                .expect("room");
            seq += 1;
        }
        let offered: Vec<(u64, usize)> = burst
            .iter()
            .map(|m| (frame_seq(m.data()), m.len()))
            .collect();
        let n = tx.tx_burst(&mut burst);
        sent.extend_from_slice(&offered[..n]);
        if n < offered.len() {
            let left: Vec<(u64, usize)> = burst
                .iter()
                .map(|m| (frame_seq(m.data()), m.len()))
                .collect();
            assert_eq!(
                left,
                offered[n..],
                "the refused frames stay in the burst, in order"
            );
            assert_eq!(tx.tx_burst_or_free(&mut burst), 0, "still full");
            assert!(burst.is_empty(), "tx_burst_or_free frees what was refused");
            return sent;
        }
    }
    sent
}

/// Receives `count` frames, checking each; returns (seq, length) in arrival order.
fn receive(rx: &mut RxQueue, count: usize) -> Vec<(u64, usize)> {
    let mut got = Vec::new();
    let mut burst = MbufBurst::<32>::new();
    let mut idle = 0;
    while got.len() < count && idle < 1000 {
        if rx.rx_burst(&mut burst) == 0 {
            idle += 1;
            continue;
        }
        for m in burst.drain() {
            assert!(m.is_contiguous());
            got.push((frame_seq(m.data()), m.len()));
        }
    }
    got
}

fn frame_seq(frame: &[u8]) -> u64 {
    match common::check_frame(frame) {
        Some(Ok(seq)) => seq,
        other => panic!("not a good test frame: {other:?}"),
    }
}
