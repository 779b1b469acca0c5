//! Lcores: a closure launched on a worker lcore runs a `net_ring` loopback with queue handles
//! moved into it and returns its result; launch rules (main lcore only, worker lcores only,
//! one job at a time, panics reported); a non-EAL thread registered as an lcore.

mod common;

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use mrc_dpdk::{Eal, Error, MbufBurst, Mempool, MempoolConfig, Port, PortConfig};

const TEST: &str = "dpdk_lcore";

fn main() -> ExitCode {
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        return mrc_skip::skip_exit(TEST, "needs 2 CPUs (a main and a worker lcore)");
    }
    let prefix = common::unique_prefix("lcore");
    let eal = match common::init_eal(&common::eal_args(&prefix, "0-1", &["net_ring0".into()])) {
        Ok(eal) => eal,
        Err(why) => return mrc_skip::skip_exit(TEST, &why),
    };
    let _dir = common::RuntimeDirGuard::new(&eal);
    assert_eq!(eal.worker_lcores(), [1]);
    assert_eq!(eal.lcore_count(), 2);

    let pool = Mempool::create(&eal, &MempoolConfig::new("lcore_pool", 2047)).expect("pool");
    loopback_on_a_worker(&eal, &pool);
    launch_rules(&eal);
    registered_thread(&eal, &pool);

    assert_eq!(pool.in_use(), 0);
    drop(pool);
    eal.cleanup().expect("cleanup");
    println!("{TEST}: ok");
    ExitCode::SUCCESS
}

/// The poll loop runs on lcore 1 with the queue handles moved into it; the main lcore waits.
fn loopback_on_a_worker(eal: &Eal, pool: &Mempool) {
    let mut port = Port::by_name(eal, "net_ring0").expect("port");
    let mut queues = port
        .configure(&PortConfig::default(), pool)
        .expect("configure");
    port.start().expect("start");
    let (mut rx, mut tx) = (queues.rx.remove(0), queues.tx.remove(0));
    let pool2 = pool.clone();
    let job = eal
        .launch(1, move || {
            let lcore = Eal::current_lcore();
            let mut out = MbufBurst::<32>::new();
            let mut back = MbufBurst::<32>::new();
            let mut seqs = Vec::new();
            for round in 0..100_u64 {
                for i in 0..32 {
                    out.push(common::frame_mbuf(&pool2, round * 32 + i, 128))
                        .expect("room");
                }
                assert_eq!(tx.tx_burst(&mut out), 32);
                assert_eq!(rx.rx_burst(&mut back), 32);
                for m in back.drain() {
                    seqs.push(
                        common::check_frame(m.data())
                            .expect("ours")
                            .expect("intact"),
                    );
                }
            }
            (lcore, seqs)
        })
        .expect("launch");
    assert_eq!(job.lcore(), 1);
    let (lcore, seqs) = job.wait().expect("job result");
    assert_eq!(lcore, Some(1), "the closure ran on lcore 1");
    assert_eq!(seqs, (0..3200).collect::<Vec<u64>>());
    assert_eq!(port.stats().expect("stats").ipackets, 3200);
    // The queue handles went with the closure and are dropped: the port can stop.
    port.stop().expect("stop");
}

fn launch_rules(eal: &Eal) {
    assert!(
        matches!(eal.launch(0, || ()), Err(Error::NotWorkerLcore(0))),
        "the main lcore is no worker"
    );
    assert!(matches!(
        eal.launch(7, || ()),
        Err(Error::NotWorkerLcore(7))
    ));

    let release = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&release);
    let busy = eal
        .launch(1, move || {
            // Released below; the deadline only stops the spin if the test failed before.
            let deadline = Instant::now() + Duration::from_mins(1);
            while !flag.load(Ordering::Acquire) && Instant::now() < deadline {
                std::hint::spin_loop();
            }
            7
        })
        .expect("launch");
    assert!(matches!(eal.launch(1, || 0), Err(Error::LcoreBusy(1))));
    assert!(!busy.is_finished());
    release.store(true, Ordering::Release);
    assert_eq!(busy.wait().expect("result"), 7);

    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {})); // the panic below is expected: keep the log clean
    let panicked = eal
        .launch(1, || -> u32 { panic!("expected panic in a launched job") })
        .expect("launch");
    let outcome = panicked.wait();
    std::panic::set_hook(default_hook);
    assert!(matches!(outcome, Err(Error::LcorePanicked(1))));
    assert_eq!(
        eal.launch(1, || 5)
            .expect("the lcore is usable again")
            .wait()
            .expect("result"),
        5
    );

    let eal2 = eal.clone();
    let from_other_thread =
        std::thread::spawn(move || matches!(eal2.launch(1, || ()), Err(Error::NotMainLcore)));
    assert!(
        from_other_thread.join().expect("thread"),
        "only the main lcore launches"
    );
}

fn registered_thread(eal: &Eal, pool: &Mempool) {
    assert!(
        matches!(eal.register_thread(), Err(Error::AlreadyLcore(0))),
        "the main thread is lcore 0"
    );
    let (eal2, pool2) = (eal.clone(), pool.clone());
    let lcores = std::thread::spawn(move || {
        assert_eq!(Eal::current_lcore(), None, "a plain thread has no lcore id");
        let reg = eal2.register_thread().expect("register");
        let id = reg.lcore();
        assert_eq!(Eal::current_lcore(), Some(id));
        assert!(matches!(eal2.register_thread(), Err(Error::AlreadyLcore(x)) if x == id));
        let m = pool2.alloc().expect("alloc from a registered thread");
        drop(m);
        drop(reg);
        (id, Eal::current_lcore())
    })
    .join()
    .expect("thread");
    assert!(lcores.0 > 1, "a free lcore id, not 0 or 1: {}", lcores.0);
    assert_eq!(lcores.1, None, "unregistered");
}
