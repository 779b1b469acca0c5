//! Two processes, each a NIC with two planes over `net_memif` (two memif interfaces on one
//! socket): this process is the memif server, a child (this binary again, with a role in its
//! environment) the client. QP attributes go over the child's stdin/stdout, then both send
//! Writes and Write-with-Immediates to each other and check every byte they receive.
//!
//! Teardown follows the memif rules of docs/nics.md: the client stops polling first and says
//! so, the server then stops and closes its ports, the client closes its own ~100 ms after it
//! saw the links go down.

mod support;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, ExitCode, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use mrc_nic::io::dpdk::DpdkPorts;
use mrc_nic::{Nic, NicHandle};
use support::eal::{Child, RuntimeDir, eal_args, init, lcores, unique};
use support::{PeerInfo, Plan, Traffic, nic_addr, nic_config, run_apps, side};

const TEST: &str = "dpdk_memif";
const PLANES: usize = 2;
const ROLE: &str = "MRC_NIC_MEMIF_ROLE";
const SOCKET: &str = "MRC_NIC_MEMIF_SOCKET";
const LIMIT: Duration = Duration::from_mins(1);

fn main() -> ExitCode {
    match std::env::var(ROLE).as_deref() {
        Ok("client") => client(),
        _ => server(),
    }
}

/// Lines from a pipe, with timeouts.
struct Lines(mpsc::Receiver<String>);

impl Lines {
    fn new(r: impl std::io::Read + Send + 'static) -> Self {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(r).lines() {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Self(rx)
    }

    /// The next line starting with `word`; panics on a timeout or a closed pipe.
    fn expect(&self, word: &str) -> String {
        loop {
            let line = self
                .0
                .recv_timeout(LIMIT)
                .unwrap_or_else(|e| panic!("waiting for {word}: {e}"));
            if line.starts_with(word) {
                return line;
            }
        }
    }
}

fn vdevs(role: &str, socket: &str) -> Vec<String> {
    (0..PLANES)
        .map(|p| {
            format!(
                "net_memif{p},role={role},id={p},socket={socket},socket-abstract=yes,bsize=9216"
            )
        })
        .collect()
}

fn ports() -> DpdkPorts {
    let mut p = DpdkPorts::new((0..PLANES).map(|i| format!("net_memif{i}")));
    p.frame_room = 4608;
    p.mbufs = 8191;
    p.promiscuous = false;
    p
}

/// Waits until every plane's link is up (the peer connected).
fn wait_links(handle: &NicHandle) {
    let deadline = std::time::Instant::now() + LIMIT;
    while !handle.ports().expect("ports").iter().all(|p| p.usable) {
        assert!(
            std::time::Instant::now() < deadline,
            "memif links never came up"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Both processes: set up, exchange, run the traffic, check. `host` 0 is the server.
fn exchange_and_run(
    host: u16,
    handle: &NicHandle,
    send: &mut dyn FnMut(&str),
    lines: &Lines,
) -> Traffic {
    let plan = Plan::new(300, 16_000);
    let salt = 100 + u64::from(host);
    let me = side(handle, &plan, salt);
    send(&me.info(nic_addr(host)).to_line());
    let peer = PeerInfo::from_line(&lines.expect("PEER")).expect("peer line");
    let (my_psn, peer_psn) = if host == 0 { (7, 9) } else { (9, 7) };
    me.connect(peer, my_psn, peer_psn);
    wait_links(handle);
    let app = Traffic::new(&plan, &me, peer, 100 + u64::from(1 - host));
    let [done] = run_apps(&[me], [app], LIMIT);
    // The peer's last plain Writes are placed once *its* sends completed: wait for it.
    send("DONE");
    lines.expect("DONE");
    done.assert_clean();
    done
}

fn server() -> ExitCode {
    let prefix = unique("nicmemif-s");
    let socket = format!("/{}.sock", unique("nicmemif"));
    let eal = match init(&eal_args(&prefix, &lcores(), &vdevs("server", &socket))) {
        Ok(eal) => eal,
        Err(why) => return mrc_skip::skip_exit(TEST, &why),
    };
    let dir = RuntimeDir::of(&eal);
    let io = ports()
        .open(&eal)
        .expect("memif ports")
        .pop()
        .expect("one engine");
    let (nic, handle) = Nic::spawn(nic_config(0, PLANES, Vec::new()), io).expect("nic");

    let exe = std::env::current_exe().expect("own path");
    let mut child = Child(Some(
        Command::new(exe)
            .env(ROLE, "client")
            .env(SOCKET, &socket)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("client process"),
    ));
    let proc = child.0.as_mut().expect("child");
    // What the client's EAL prints, read to the end on a thread so the pipe never fills.
    let mut client_err = proc.stderr.take().expect("stderr");
    let client_err = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut client_err, &mut text);
        text
    });
    let mut to_child = proc.stdin.take().expect("stdin");
    let lines = Lines::new(proc.stdout.take().expect("stdout"));
    let mut send = |line: &str| {
        writeln!(to_child, "{line}").expect("to the client");
    };
    let done = exchange_and_run(0, &handle, &mut send, &lines);

    // The client stops polling first; then this side stops and closes its ports.
    send("STOP");
    lines.expect("STOPPED");
    let exit = nic.shutdown().expect("shutdown");
    let s = exit.stats;
    assert_eq!(
        (s.io.rx_dropped, s.io.tx_dropped, s.doorbell_errors),
        (0, 0, 0),
        "{s:?}"
    );
    drop(exit.io);
    drop(eal);
    let status = child.wait_for(LIMIT).expect("the client did not exit");
    assert!(status.success(), "client: {status}");
    // The client closes its ports as soon as it sees the links go down, while memif's control
    // thread may still be tearing the connection down: the bindings serialise the two
    // (`mrc_shim_dev_close`); a double free shows as DPDK's "Invalid memory".
    let client_err = client_err.join().expect("stderr reader");
    eprint!("{client_err}");
    assert!(
        !client_err.contains("Invalid memory") && !client_err.contains("panicked"),
        "client: {client_err}"
    );
    drop(dir);
    println!(
        "{TEST}: ok: {} messages each way over {PLANES} memif planes between two processes ({} frames in, {} out here)",
        done.plan.msgs.len(),
        s.io.rx_frames,
        s.io.tx_frames
    );
    ExitCode::SUCCESS
}

fn client() -> ExitCode {
    let socket = std::env::var(SOCKET).expect("socket name");
    let prefix = unique("nicmemif-c");
    let eal = init(&eal_args(&prefix, &lcores(), &vdevs("client", &socket))).expect("EAL");
    let _dir = RuntimeDir::of(&eal);
    let io = ports()
        .open(&eal)
        .expect("memif ports")
        .pop()
        .expect("one engine");
    let (nic, handle) = Nic::spawn(nic_config(1, PLANES, Vec::new()), io).expect("nic");
    let lines = Lines::new(std::io::stdin());
    let mut send = |line: &str| {
        let mut out = std::io::stdout().lock();
        writeln!(out, "{line}")
            .and_then(|()| out.flush())
            .expect("to the server");
    };
    exchange_and_run(1, &handle, &mut send, &lines);

    lines.expect("STOP");
    let exit = nic.shutdown().expect("shutdown");
    send("STOPPED");
    // Close only after the server closed its side (the bindings wait for memif's own
    // teardown of the connection: no grace period).
    let ports = exit.io.ports().clone();
    let deadline = std::time::Instant::now() + LIMIT;
    while (0..PLANES).any(|p| ports.link(p).is_some_and(|l| l.up)) {
        assert!(
            std::time::Instant::now() < deadline,
            "the server never closed"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    drop(ports);
    drop(exit.io);
    ExitCode::SUCCESS
}
