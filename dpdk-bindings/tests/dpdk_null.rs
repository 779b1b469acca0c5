//! EAL + pool + mbuf + port smoke test on `net_null` (a sink/source PMD): the EAL lifecycle,
//! mbuf accessors checked against DPDK's own C macros and inline functions, bursts, port
//! control (configure, start/stop, link, stats, promiscuous, MTU), and the ownership rules.

mod common;

use std::process::ExitCode;

use mrc_dpdk::{Eal, Error, Mbuf, MbufBurst, Mempool, MempoolConfig, Port, PortConfig};

const TEST: &str = "dpdk_null";

fn main() -> ExitCode {
    let prefix = common::unique_prefix("null");
    let args = common::eal_args(
        &prefix,
        "0",
        &["net_null0".into(), "net_null1,size=128".into()],
    );
    let eal = match common::init_eal(&args) {
        Ok(eal) => eal,
        Err(why) => return mrc_skip::skip_exit(TEST, &why),
    };
    let _dir = common::RuntimeDirGuard::new(&eal);

    assert!(matches!(Eal::init(&args), Err(Error::AlreadyInitialized)));
    assert_eq!(Eal::current_lcore(), Some(0));
    assert_eq!(eal.main_lcore(), 0);
    assert!(eal.worker_lcores().is_empty());

    let pool = Mempool::create(&eal, &MempoolConfig::new("null_pool", 1023)).expect("pool");
    mbuf_accessors_match_dpdk(&pool);
    mbuf_chains(&pool);
    bursts_own_their_mbufs(&eal, &pool);
    port_lifecycle(&eal, &pool);

    assert_eq!(pool.in_use(), 0, "every mbuf went back to the pool");
    drop(pool);
    eal.cleanup().expect("EAL cleanup");
    assert!(
        matches!(Eal::init(&args), Err(Error::AlreadyInitialized)),
        "no second init after cleanup"
    );
    println!("{TEST}: ok");
    ExitCode::SUCCESS
}

/// The Rust accessors (fields of the bindgen'd `rte_mbuf`) agree with DPDK's C definitions:
/// the macros through the shim, the inline functions through their generated wrappers.
#[cfg_attr(mrc_dpdk_absent, allow(unused_variables))]
fn check_against_c(m: &Mbuf) {
    // (A build without DPDK has no `sys` and no mbufs; this test then skips before getting here.)
    #[cfg(not(mrc_dpdk_absent))]
    {
        use mrc_dpdk::sys;
        let raw = m.as_ptr();
        // SAFETY: `raw` is a live mbuf owned by `m`; the shim and the wrappers only read it.
        unsafe {
            assert_eq!(
                m.data().as_ptr(),
                sys::mrc_shim_mtod(raw).cast::<u8>().cast_const(),
                "mtod"
            );
            assert_eq!(m.len(), sys::mrc_shim_pkt_len(raw) as usize, "pkt_len");
            assert_eq!(
                m.data_len(),
                usize::from(sys::mrc_shim_data_len(raw)),
                "data_len"
            );
            assert_eq!(
                m.headroom(),
                usize::from(sys::rte_pktmbuf_headroom(raw)),
                "headroom"
            );
            assert_eq!(
                m.tailroom(),
                usize::from(sys::rte_pktmbuf_tailroom(raw)),
                "tailroom"
            );
            assert_eq!(
                sys::rte_mbuf_refcnt_read(raw),
                1,
                "owned mbufs are not shared"
            );
        }
    }
}

fn mbuf_accessors_match_dpdk(pool: &Mempool) {
    let mut m = pool.alloc().expect("alloc");
    assert!(m.is_empty());
    assert_eq!(m.headroom(), usize::from(mrc_dpdk::HEADROOM));
    check_against_c(&m);

    let room = m.tailroom();
    m.append(100).expect("append").copy_from_slice(&[0xab; 100]);
    check_against_c(&m);
    m.prepend(14).expect("prepend").copy_from_slice(&[0x11; 14]);
    check_against_c(&m);
    assert_eq!(m.len(), 114);
    assert_eq!(
        &m.data()[..15],
        &[0x11; 14]
            .iter()
            .chain(&[0xab])
            .copied()
            .collect::<Vec<_>>()[..]
    );
    m.adj(4).expect("adj");
    m.trim(10).expect("trim");
    check_against_c(&m);
    assert_eq!(m.len(), 100);
    assert_eq!(m.data()[..10], [0x11; 10]);
    assert_eq!(m.data()[10..], [0xab; 90]);
    m.data_mut()[0] = 0x42;
    assert_eq!(m.data()[0], 0x42);

    // Asking for more than there is fails cleanly and changes nothing.
    let (len, head, tail) = (m.len(), m.headroom(), m.tailroom());
    assert!(matches!(m.append(tail + 1), Err(Error::NoRoom { .. })));
    assert!(matches!(m.prepend(head + 1), Err(Error::NoRoom { .. })));
    assert!(matches!(m.adj(len + 1), Err(Error::NoRoom { .. })));
    assert!(matches!(m.trim(len + 1), Err(Error::NoRoom { .. })));
    assert_eq!((m.len(), m.headroom(), m.tailroom()), (len, head, tail));
    check_against_c(&m);

    m.truncate(7).expect("truncate");
    assert_eq!(m.len(), 7);
    m.extend_from_slice(b"xyz").expect("extend");
    assert_eq!(&m.data()[7..], b"xyz");
    m.reset();
    assert!(m.is_empty());
    assert_eq!(m.tailroom(), room);
    check_against_c(&m);
}

fn mbuf_chains(pool: &Mempool) {
    let mut head = pool.alloc().expect("alloc");
    head.extend_from_slice(&[1; 1000]).expect("fill");
    let mut tail = pool.alloc().expect("alloc");
    tail.extend_from_slice(&[2; 500]).expect("fill");
    let tail_room = tail.tailroom();
    head.chain(tail).expect("chain");
    assert_eq!(
        (head.len(), head.data_len(), head.segment_count()),
        (1500, 1000, 2)
    );
    assert!(!head.is_contiguous());
    assert_eq!(
        head.tailroom(),
        tail_room,
        "append room is the last segment's"
    );
    let lens: Vec<usize> = head.segments().map(<[u8]>::len).collect();
    assert_eq!(lens, [1000, 500]);
    head.append(10).expect("append to the last segment").fill(3);
    head.trim(5).expect("trim the last segment");
    assert!(head.truncate(10).is_err(), "truncate wants one segment");
    let in_use = pool.in_use();
    head.linearize().expect("linearize");
    assert_eq!(pool.in_use(), in_use - 1, "the second segment went back");
    assert_eq!((head.len(), head.segment_count()), (1505, 1));
    assert!(head.data()[..1000].iter().all(|&b| b == 1));
    assert!(head.data()[1000..1500].iter().all(|&b| b == 2));
    assert!(head.data()[1500..].iter().all(|&b| b == 3));

    let mut tail = pool.alloc().expect("alloc");
    tail.extend_from_slice(&[4; 8]).expect("fill");
    head.chain(tail).expect("chain");
    head.reset();
    assert_eq!((head.len(), head.segment_count()), (0, 1));
    assert_eq!(pool.in_use(), in_use - 1, "reset freed the chained segment");
}

fn bursts_own_their_mbufs(eal: &Eal, pool: &Mempool) {
    let base = pool.in_use();
    let mut burst = MbufBurst::<32>::new();
    pool.alloc_bulk(&mut burst, 30).expect("bulk");
    pool.alloc_bulk(&mut burst, 2).expect("bulk");
    assert!(burst.is_full());
    assert!(matches!(
        pool.alloc_bulk(&mut burst, 1),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(pool.in_use(), base + 32);
    let extra = pool.alloc().expect("alloc");
    let extra = burst
        .push(extra)
        .expect_err("a full burst gives the mbuf back");
    drop(extra);
    for (i, m) in burst.iter_mut().enumerate() {
        m.extend_from_slice(&[i as u8; 3]).expect("fill");
    }
    let last = burst.pop().expect("pop");
    assert_eq!(last.data(), [31; 3]);
    drop(last);
    let mut drain = burst.drain();
    assert_eq!(drain.len(), 31);
    assert_eq!(drain.next().expect("first").data(), [0; 3]);
    drop(drain); // frees the 30 left
    assert!(burst.is_empty());
    assert_eq!(pool.in_use(), base);

    // The front out, in order; what is not taken is freed, the rest moves to the front.
    pool.alloc_bulk(&mut burst, 10).expect("bulk");
    for (i, m) in burst.iter_mut().enumerate() {
        m.extend_from_slice(&[i as u8; 2]).expect("fill");
    }
    let mut front = burst.drain_front(4);
    assert_eq!(front.len(), 4);
    assert_eq!(front.next().expect("0").data(), [0; 2]);
    assert_eq!(front.next().expect("1").data(), [1; 2]);
    drop(front); // frees 2 and 3
    assert_eq!(pool.in_use(), base + 6);
    let kept: Vec<u8> = burst.iter().map(|m| m.data()[0]).collect();
    assert_eq!(kept, [4, 5, 6, 7, 8, 9]);
    assert_eq!(
        burst.drain_front(99).count(),
        6,
        "more than held: all of them"
    );
    assert!(burst.is_empty());
    assert_eq!(pool.in_use(), base);

    // A pool runs dry without harm: PoolEmpty, all or nothing for bulk.
    let small = Mempool::create(
        eal,
        &MempoolConfig {
            cache: 0,
            ..MempoolConfig::new("tiny", 15)
        },
    )
    .expect("pool");
    let mut big = MbufBurst::<64>::new();
    assert!(matches!(
        small.alloc_bulk(&mut big, 16),
        Err(Error::PoolEmpty)
    ));
    assert!(big.is_empty());
    small.alloc_bulk(&mut big, 15).expect("all 15");
    assert!(matches!(small.alloc(), Err(Error::PoolEmpty)));
    big.clear();
    assert_eq!(small.in_use(), 0);
}

fn port_lifecycle(eal: &Eal, pool: &Mempool) {
    let ids = Port::ids(eal);
    assert_eq!(ids.len(), 2, "two net_null ports");
    assert!(matches!(
        Port::by_name(eal, "net_nope9"),
        Err(Error::PortNotFound(_))
    ));
    assert!(matches!(Port::by_id(eal, 31), Err(Error::InvalidPort(31))));

    let mut port = Port::by_name(eal, "net_null0").expect("port");
    assert!(matches!(
        Port::by_id(eal, port.id()),
        Err(Error::PortInUse(_))
    ));
    let info = port.info().expect("info");
    assert_eq!(info.name, "net_null0");
    assert_eq!(info.driver, "net_null");
    assert!(
        info.max_rx_queues >= 2 && info.max_tx_queues >= 2,
        "{info:?}"
    );

    let config = PortConfig {
        rx_queues: 2,
        tx_queues: 2,
        ..PortConfig::default()
    };
    let mut queues = port.configure(&config, pool).expect("configure");
    assert_eq!((queues.rx.len(), queues.tx.len()), (2, 2));
    assert_eq!(
        (queues.rx[1].port_id(), queues.rx[1].queue_id()),
        (port.id(), 1)
    );

    // Not started: bursts do nothing (and do not reach DPDK's "port not ready" stubs).
    let mut burst = MbufBurst::<32>::new();
    assert_eq!(queues.rx[0].rx_burst(&mut burst), 0);
    port.start().expect("start");
    assert!(port.link().expect("link").up);

    // net_null fabricates a full burst of 64-byte frames on RX and swallows everything on TX.
    assert_eq!(queues.rx[0].rx_burst(&mut burst), 32);
    assert!(burst.iter().all(|m| m.len() == 64 && m.port() == port.id()));
    assert_eq!(
        queues.rx[1].rx_burst(&mut burst),
        0,
        "a full burst has no room"
    );
    assert_eq!(queues.tx[1].tx_burst(&mut burst), 32);
    assert!(burst.is_empty());
    let stats = port.stats().expect("stats");
    assert!(stats.ipackets >= 32 && stats.opackets >= 32, "{stats:?}");
    port.reset_stats().expect("reset");
    assert_eq!(port.stats().expect("stats").opackets, 0);

    match port.set_promiscuous(true) {
        Ok(()) => assert!(port.is_promiscuous().expect("promiscuous")),
        Err(e) => assert!(e.errno().is_some_and(|e| e.is_not_supported()), "{e}"),
    }

    // Queue handles pin the port's configuration and running state.
    assert!(matches!(
        port.stop(),
        Err(Error::QueuesInUse { handles: 4, .. })
    ));
    let rx1 = queues.rx.pop().expect("rx1");
    drop(queues);
    assert!(matches!(
        port.stop(),
        Err(Error::QueuesInUse { handles: 1, .. })
    ));
    drop(rx1);
    port.stop().expect("stop");
    assert!(!port.is_started());

    // Reconfigure for jumbo frames, if the driver takes them.
    let jumbo = PortConfig {
        mtu: Some(9000),
        ..PortConfig::default()
    };
    if info.max_mtu >= 9000 {
        let queues = port.configure(&jumbo, pool).expect("configure jumbo");
        assert_eq!(port.mtu().expect("mtu"), 9000);
        port.start().expect("restart");
        drop(queues);
    } else {
        println!(
            "{TEST}: net_null max MTU {} < 9000, jumbo not checked here",
            info.max_mtu
        );
    }

    // A port that was only looked at is not closed when dropped; a configured one is.
    let looked_at = Port::by_name(eal, "net_null1").expect("port 1");
    drop(looked_at);
    let again = Port::by_name(eal, "net_null1").expect("still there");
    drop(again);
    drop(port);
    assert!(
        matches!(Port::by_name(eal, "net_null0"), Err(Error::PortNotFound(_))),
        "closed vdevs are removed"
    );
}
