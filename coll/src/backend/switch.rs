//! The fabric of `--backend dpdk` on one machine: one switch per plane, as a process of its
//! own (`mrc-coll switch`). A memif link is point to point, and an MRC NIC sprays a QP's
//! packets over all its planes, so every port of a rank must reach every peer: each rank has
//! one port per plane, linked to this switch, which forwards a frame to the rank whose NIC
//! address is the frame's IPv6 destination, on the plane it came in on (a star per plane, as
//! a rail-optimised fabric's top-of-rack switches are).
//!
//! ```text
//!   rank 0 ─ plane 0 ─┐               ┌─ plane 0 ─ rank 2
//!   rank 0 ─ plane 1 ─┤   mrc-coll    ├─ plane 1 ─ rank 2
//!   rank 1 ─ plane 0 ─┤    switch     ├─ plane 0 ─ rank 3
//!   rank 1 ─ plane 1 ─┘ (memif server)└─ plane 1 ─ rank 3
//! ```
//!
//! Port `i` of the switch's `--eal` is rank `i / planes`, plane `i % planes`. The switch holds
//! the memif *server* side of every link and only then listens on its control address: a rank
//! connects there first, so its memif client ports never start before the server listens
//! (the DPDK memif client does not retry). At the end each rank stops polling, then says
//! `STOPPED` (or its connection closes); once every rank did, the switch stops and closes its
//! ports, and the ranks close theirs after seeing their links go down (docs/nics.md, the memif
//! teardown rules).

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::io::{BufRead as _, BufReader, Write as _};
use std::net::{Ipv6Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use mrc_dpdk::{Eal, Mbuf, MbufBurst, Mempool, MempoolConfig, Port, PortConfig, RxQueue, TxQueue};
use mrc_srv6::wire::{EthernetFrame, EthernetProtocol, Ipv6Packet};

use super::nic::rank_addr;

/// Why the switch could not run.
#[derive(Debug, thiserror::Error)]
pub enum SwitchError {
    #[error("DPDK: {0}")]
    Dpdk(#[from] mrc_dpdk::Error),
    #[error("control address: {0}")]
    Io(#[from] std::io::Error),
    #[error("{ports} ports in --eal for {ranks} ranks of {planes} planes (one per rank and plane)")]
    Ports {
        ports: usize,
        ranks: usize,
        planes: usize,
    },
}

/// How the switch runs.
#[derive(Debug, Clone)]
pub struct SwitchOpts {
    /// EAL arguments; their ports (vdevs or PCI devices) in rank-major order.
    pub eal: Vec<String>,
    pub ranks: usize,
    pub planes: usize,
    /// Where the ranks say hello and goodbye.
    pub control: SocketAddr,
    /// The switch gives up after this long (a rank that never came).
    pub lifetime: Duration,
}

/// What the switch did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SwitchStats {
    pub received: u64,
    pub forwarded: u64,
    /// Not IPv6, not for a rank, or back out of the port it came in on.
    pub unroutable: u64,
    /// Refused by a full TX queue.
    pub tx_dropped: u64,
    /// Ranks that said goodbye (or went away) before the switch stopped.
    pub ranks_stopped: usize,
}

/// The rank whose NIC address is `frame`'s IPv6 destination.
pub fn route<S: BuildHasher>(frame: &[u8], table: &HashMap<Ipv6Addr, usize, S>) -> Option<usize> {
    let eth = EthernetFrame::new_checked(frame).ok()?;
    if eth.ethertype() != EthernetProtocol::Ipv6 {
        return None;
    }
    let ip = Ipv6Packet::new_checked(eth.payload()).ok()?;
    table.get(&ip.dst_addr()).copied()
}

/// The switch's ports, opened and started.
struct Fabric {
    rx: Vec<RxQueue>,
    tx: Vec<TxQueue>,
    ports: Vec<Port>,
    pool: Mempool,
}

fn open(eal: &Eal, names: &[String]) -> Result<Fabric, SwitchError> {
    let per_port: u32 = 1024;
    let pool = Mempool::create(
        eal,
        &MempoolConfig::new("mrc-coll-switch", per_port * names.len() as u32 * 2 - 1)
            .frames_up_to(9216),
    )?;
    let config = PortConfig {
        rx_queues: 1,
        tx_queues: 1,
        rx_descriptors: 512,
        tx_descriptors: 512,
        mtu: None,
    };
    let (mut rx, mut tx, mut ports) = (Vec::new(), Vec::new(), Vec::new());
    for name in names {
        let mut port = Port::by_name(eal, name)?;
        let q = port.configure(&config, &pool)?;
        port.start()?;
        rx.extend(q.rx);
        tx.extend(q.tx);
        ports.push(port);
    }
    Ok(Fabric {
        rx,
        tx,
        ports,
        pool,
    })
}

/// One rank's control connection: `HELLO rank planes` answered `OK` (or `ERR why`), then
/// `STOPPED` or the end of the stream.
fn serve_rank(s: TcpStream, ranks: usize, planes: usize, stopped: &AtomicUsize) {
    let Ok(mut w) = s.try_clone() else {
        return;
    };
    let mut lines = BufReader::new(s).lines();
    let hello = lines.next().and_then(Result::ok).unwrap_or_default();
    let mut words = hello.split_whitespace();
    let ok = match (words.next(), words.next(), words.next()) {
        (Some("HELLO"), Some(r), Some(p)) => match (r.parse::<usize>(), p.parse::<usize>()) {
            (Ok(r), Ok(p)) if r < ranks && p == planes => Ok(()),
            (Ok(r), Ok(p)) => Err(format!(
                "rank {r} with {p} planes; this switch serves ranks 0..{ranks} with {planes}"
            )),
            _ => Err(format!("a malformed hello {hello:?}")),
        },
        _ => Err(format!("a malformed hello {hello:?}")),
    };
    if let Err(why) = ok {
        let _ = writeln!(w, "ERR {why}");
        return;
    }
    if writeln!(w, "OK").is_err() {
        return;
    }
    // STOPPED, or a rank that went away: either way it no longer polls its ports.
    for line in lines {
        match line {
            Ok(l) if l.trim() == "STOPPED" => break,
            Ok(_) => {}
            Err(_) => break,
        }
    }
    stopped.fetch_add(1, Ordering::SeqCst);
}

/// Runs the switch until every rank stopped (or `lifetime` passed). `ready` is called with
/// the control address once the ports listen.
pub fn run(
    opts: &SwitchOpts,
    ready: &mut dyn FnMut(SocketAddr),
) -> Result<SwitchStats, SwitchError> {
    let names = mrc_dpdk::eal_port_names(&opts.eal);
    if names.len() != opts.ranks * opts.planes || names.is_empty() {
        return Err(SwitchError::Ports {
            ports: names.len(),
            ranks: opts.ranks,
            planes: opts.planes,
        });
    }
    let eal = Eal::init(&opts.eal)?;
    let mut fabric = open(&eal, &names)?;
    let listener = TcpListener::bind(opts.control)?;
    let stopped = Arc::new(AtomicUsize::new(0));
    {
        let (ranks, planes, stopped) = (opts.ranks, opts.planes, Arc::clone(&stopped));
        let listener = listener.try_clone()?;
        std::thread::Builder::new()
            .name("mrc-coll-switch-ctl".into())
            .spawn(move || {
                for s in listener.incoming().flatten() {
                    let stopped = Arc::clone(&stopped);
                    std::thread::spawn(move || serve_rank(s, ranks, planes, &stopped));
                }
            })?;
    }
    ready(listener.local_addr()?);
    let table: HashMap<Ipv6Addr, usize> = (0..opts.ranks).map(|r| (rank_addr(r), r)).collect();
    let mut stats = forward(&mut fabric, &table, opts, &stopped);
    stats.ranks_stopped = stopped.load(Ordering::SeqCst);
    // The ranks stopped polling: close the server side first (queues, then ports).
    let Fabric {
        rx,
        tx,
        ports,
        pool,
    } = fabric;
    drop((rx, tx));
    drop(ports);
    drop(pool);
    drop(eal);
    Ok(stats)
}

fn forward(
    fabric: &mut Fabric,
    table: &HashMap<Ipv6Addr, usize>,
    opts: &SwitchOpts,
    stopped: &AtomicUsize,
) -> SwitchStats {
    let mut stats = SwitchStats::default();
    let n = fabric.rx.len();
    let mut inbound: MbufBurst = MbufBurst::default();
    let mut out: Vec<MbufBurst> = (0..n).map(|_| MbufBurst::default()).collect();
    let deadline = Instant::now() + opts.lifetime;
    let mut idle = 0_u32;
    let flush = |tx: &mut TxQueue, b: &mut MbufBurst, stats: &mut SwitchStats| {
        let len = b.len() as u64;
        let sent = tx.tx_burst_or_free(b) as u64;
        stats.forwarded += sent;
        stats.tx_dropped += len - sent;
    };
    while stopped.load(Ordering::Relaxed) < opts.ranks && Instant::now() < deadline {
        let mut got = 0;
        for i in 0..n {
            got += fabric.rx[i].rx_burst(&mut inbound);
            for m in inbound.drain() {
                stats.received += 1;
                let to = route(m.data(), table).map(|r| r * opts.planes + i % opts.planes);
                match to {
                    Some(o) if o != i => {
                        if let Err(m) = out[o].push(m) {
                            flush(&mut fabric.tx[o], &mut out[o], &mut stats);
                            push_or_drop(&mut out[o], m, &mut stats);
                        }
                    }
                    _ => stats.unroutable += 1,
                }
            }
        }
        for (o, b) in out.iter_mut().enumerate() {
            if !b.is_empty() {
                flush(&mut fabric.tx[o], b, &mut stats);
            }
        }
        if got > 0 {
            idle = 0;
        } else {
            // Cores shared with the ranks' NIC threads: give them the CPU when idle.
            idle = idle.saturating_add(1);
            if idle > 64 {
                std::thread::yield_now();
            }
        }
    }
    stats
}

fn push_or_drop(b: &mut MbufBurst, m: Mbuf, stats: &mut SwitchStats) {
    if b.push(m).is_err() {
        stats.tx_dropped += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(ethertype: [u8; 2], dst: Ipv6Addr) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 40 + 8];
        f[12..14].copy_from_slice(&ethertype);
        f[14] = 0x60;
        f[18..20].copy_from_slice(&8u16.to_be_bytes());
        f[20] = 17;
        f[21] = 64;
        f[38..54].copy_from_slice(&dst.octets());
        f
    }

    #[test]
    fn frames_go_to_the_rank_of_their_destination_and_nothing_else_is_routed() {
        let table: HashMap<Ipv6Addr, usize> = (0..4).map(|r| (rank_addr(r), r)).collect();
        for r in 0..4 {
            assert_eq!(route(&frame([0x86, 0xdd], rank_addr(r)), &table), Some(r));
        }
        assert_eq!(route(&frame([0x86, 0xdd], rank_addr(4)), &table), None);
        assert_eq!(route(&frame([0x08, 0x00], rank_addr(1)), &table), None);
        let f = frame([0x86, 0xdd], rank_addr(1));
        for cut in [0, 13, 14, 30, 53] {
            assert_eq!(route(&f[..cut], &table), None, "{cut} bytes");
        }
    }
}
