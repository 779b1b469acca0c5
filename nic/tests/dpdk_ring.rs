//! Two engines in one process over DPDK `net_ring` ports, one port per plane (two planes): one
//! on a `std` thread the runtime starts, one on an EAL worker lcore (`Eal::launch`).
//! A ring port is a loopback: what TX queue `i` sends, RX queue `i` receives. Each port gets
//! two queues and the engines take them crosswise (A sends on queue 1 and receives on 0, B the
//! other way round), so every frame A sends reaches B and back: a pair of NICs on a wire,
//! each engine with its own queues on every port. Writes and Write-with-Immediates both ways,
//! every byte checked. First, on a third ring port of its own, a burst the port refuses part of
//! stays queued and leaves later, in order. `harness = false`: the EAL initialises once per
//! process.

mod support;

use std::process::ExitCode;
use std::time::Duration;

use mrc_dpdk::{Eal, Mempool, MempoolConfig, Port, PortConfig};
use mrc_nic::io::PacketIo;
use mrc_nic::io::dpdk::{DpdkIo, PortSet, QueuePair};
use mrc_nic::{Nic, NicRunner};
use mrc_srv6::wire::EthernetAddress;
use mrc_transport::Transmit;
use support::eal::{RuntimeDir, eal_args, init, unique};
use support::{Plan, both_ways, connect_pair, nic_addr, nic_config, run_apps, side};

const TEST: &str = "dpdk_ring";
const PLANES: usize = 2;
const FRAME_ROOM: u16 = 4608;
/// The ring port of the refusal check.
const REFUSING: &str = "net_ring9";

/// The sequence number a frame of the refusal check carries.
fn seq_of(frame: &[u8]) -> u32 {
    frame
        .get(..4)
        .and_then(|b| b.try_into().ok())
        .map_or(u32::MAX, u32::from_be_bytes)
}

/// Bursts committed with `tx_commit_burst` until the port has no room: the loopback ring
/// (never drained meanwhile) fills, a burst is taken in part, the rest stays queued; once the
/// ring is read, the flush sends them: every frame arrives once, in order, none dropped (issue
/// #13, the NIC loop in l2fwd shape: frames refused by a full port stay queued).
fn refused_frames_stay_queued_and_leave_in_order(eal: &Eal, pool: &Mempool) {
    let mut port = Port::by_name(eal, REFUSING).expect("ring port");
    let mac = EthernetAddress(port.mac().expect("mac").0);
    let q = port
        .configure(&PortConfig::default(), pool)
        .expect("configure");
    port.start().expect("start");
    let (rx, tx) = (q.rx.into_iter().next(), q.tx.into_iter().next());
    let (Some(rx), Some(tx)) = (rx, tx) else {
        panic!("one queue each way");
    };
    let queues = vec![QueuePair {
        rx,
        tx,
        mac,
        link: 0,
    }];
    let mut io = DpdkIo::new(eal, pool, queues, PortSet::new(vec![port]), 256).expect("io");
    let mut seq = 0_u32;
    let mut out = Vec::new();
    // Until the port takes no more (a ring holds 1023 frames; 4096 bounds a port that drops).
    for burst in 0.. {
        let (ready, room) = io.tx_room();
        if ready.0 == 0 || seq >= 4096 {
            break;
        }
        // An odd first burst, so that the ring's end falls inside a burst.
        let want = if burst == 0 { room.min(5) } else { room };
        out.clear();
        for buf in io.tx_buffers(want) {
            let buf = buf.as_mut();
            buf[..4].copy_from_slice(&seq.to_be_bytes());
            buf[4..64].fill(0x5a);
            out.push(Transmit { len: 64, port: 0 });
            seq += 1;
        }
        assert_eq!(out.len(), want, "buffers staged");
        io.tx_commit_burst(&out);
    }
    let s = io.stats();
    assert!(s.tx_refused > 0 && s.tx_frames < u64::from(seq), "{s:?}");
    assert_eq!((s.tx_dropped, s.tx_no_buffer), (0, 0), "{s:?}");
    let mut got = Vec::new();
    let mut read = |io: &mut DpdkIo| {
        while io.rx_frames(0, |frames| got.extend(frames.iter().map(|f| seq_of(f)))) > 0 {}
    };
    read(&mut io);
    io.tx_flush();
    read(&mut io);
    let s = io.stats();
    assert_eq!(got, (0..seq).collect::<Vec<_>>(), "{s:?}");
    assert_eq!(
        (s.tx_frames, s.rx_frames, s.tx_dropped),
        (u64::from(seq), u64::from(seq), 0)
    );
    println!(
        "{TEST}: refused frames stay queued: {seq} frames, {} refusals, all in order",
        s.tx_refused
    );
}

fn main() -> ExitCode {
    let prefix = unique("nicring");
    let vdevs: Vec<String> = (0..PLANES).map(|p| format!("net_ring{p}")).collect();
    let mut all_vdevs = vdevs.clone();
    all_vdevs.push(REFUSING.to_owned());
    // Two lcores (the main one and a worker for engine B), both free to run on either CPU.
    let cores = if std::thread::available_parallelism().map_or(1, usize::from) >= 2 {
        "--lcores=0@(0-1),1@(0-1)"
    } else {
        "--lcores=0@0,1@0"
    };
    let eal = match init(&eal_args(&prefix, cores, &all_vdevs)) {
        Ok(eal) => eal,
        Err(why) => return mrc_skip::skip_exit(TEST, &why),
    };
    let _dir = RuntimeDir::of(&eal);

    let pool = Mempool::create(
        &eal,
        &MempoolConfig::new("nicring", 8191).frames_up_to(FRAME_ROOM),
    )
    .expect("pool");
    refused_frames_stay_queued_and_leave_in_order(&eal, &pool);
    let config = PortConfig {
        rx_queues: 2,
        tx_queues: 2,
        ..PortConfig::default()
    };
    let mut ports = Vec::new();
    let mut queues = Vec::new();
    for name in &vdevs {
        let mut port = Port::by_name(&eal, name).expect("ring port");
        let mac = EthernetAddress(port.mac().expect("mac").0);
        let q = port.configure(&config, &pool).expect("configure");
        port.start().expect("start");
        queues.push((q, mac));
        ports.push(port);
    }
    let ports = PortSet::new(ports);
    // Engine A: RX queue 0, TX queue 1 of every port; engine B: RX 1, TX 0.
    let mut wiring: [Vec<QueuePair>; 2] = [Vec::new(), Vec::new()];
    for (link, (q, mac)) in queues.into_iter().enumerate() {
        let mut rx = q.rx.into_iter();
        let mut tx = q.tx.into_iter();
        let (rx0, rx1) = (rx.next().unwrap(), rx.next().unwrap());
        let (tx0, tx1) = (tx.next().unwrap(), tx.next().unwrap());
        wiring[0].push(QueuePair {
            rx: rx0,
            tx: tx1,
            mac,
            link,
        });
        wiring[1].push(QueuePair {
            rx: rx1,
            tx: tx0,
            mac,
            link,
        });
    }
    // Engine A on a std thread (registered with the EAL by its I/O), engine B on EAL lcore 1.
    let mut wiring = wiring.into_iter();
    let io = |queues| {
        DpdkIo::new(&eal, &pool, queues, ports.clone(), usize::from(FRAME_ROOM)).expect("io")
    };
    let a_io = io(wiring.next().unwrap());
    let b_io = io(wiring.next().unwrap());
    let (nic_a, handle_a) = Nic::spawn(nic_config(0, PLANES, Vec::new()), a_io).expect("nic a");
    let (runner_b, handle_b) =
        NicRunner::new(nic_config(1, PLANES, Vec::new()), b_io).expect("nic b");
    let lcore = *eal.worker_lcores().first().expect("a worker lcore");
    let job_b = eal.launch(lcore, move || runner_b.run()).expect("launch");
    let handles = [handle_a, handle_b];

    let plan = Plan::new(200, 20_000);
    let sides = [side(&handles[0], &plan, 11), side(&handles[1], &plan, 12)];
    connect_pair(&sides[0], nic_addr(0), &sides[1], nic_addr(1));
    let apps = both_ways(&plan, &sides, [nic_addr(0), nic_addr(1)], [11, 12]);
    let done = run_apps(&sides, apps, Duration::from_mins(1));
    for t in &done {
        t.assert_clean();
    }

    let mut per_port_frames = [0_u64; PLANES];
    let exit_a = nic_a.shutdown().expect("shutdown a");
    handles[1].request_stop();
    let exit_b = job_b.wait().expect("lcore job").expect("nic b");
    for exit in [exit_a, exit_b] {
        let s = exit.stats;
        assert!(s.io.rx_frames > 0 && s.io.tx_frames > 0, "{s:?}");
        assert_eq!(
            (s.io.rx_dropped, s.io.tx_dropped, s.doorbell_errors),
            (0, 0, 0),
            "{s:?}"
        );
        drop(exit.io);
    }
    for (i, frames) in per_port_frames.iter_mut().enumerate() {
        *frames = ports.stats(i).expect("port stats").opackets;
        assert!(*frames > 50, "plane {i} carried {frames} frames");
    }
    drop(ports);
    drop(pool);
    println!(
        "{TEST}: ok: {} messages each way over {PLANES} ring ports ({per_port_frames:?} frames per port)",
        plan.msgs.len()
    );
    ExitCode::SUCCESS
}
