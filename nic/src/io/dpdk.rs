//! DPDK ports as a [`PacketIo`]: one port per plane, one RX and one TX queue per engine, frames
//! received into mbufs and handed to the engine as views of their data, frames built by the
//! engine straight into an mbuf's data room. The loop reads like l2fwd: bursts of 32, a TX
//! burst per port sent when full and flushed once per iteration (the drain timer), frames the
//! NIC refused kept in order for the next flush.
//!
//! [`DpdkPorts`] opens, configures and starts the ports of a process and makes one [`DpdkIo`]
//! per engine (queue `i` of every port for engine `i`); [`DpdkIo::new`] takes queue handles
//! wired by hand instead (a test crossing the queues of a loopback device, say).

use std::sync::{Arc, Mutex};

use mrc_dpdk::{
    BURST_SIZE, Eal, HEADROOM, LinkStatus, Mbuf, MbufBurst, Mempool, MempoolConfig, Port,
    PortConfig, PortStats, RxQueue, TxQueue,
};
use mrc_srv6::wire::EthernetAddress;
use mrc_transport::{PortMask, Transmit};

use super::{IoStats, PacketIo, RX_BURST, TX_BURST, ThreadGuard};
use crate::error::NicError;

const _: () = assert!(RX_BURST <= BURST_SIZE && TX_BURST <= BURST_SIZE);

/// The ports of a process, shared by its engines for link-state queries and counters (DPDK's
/// control calls are not thread-safe: one at a time, and never waited for on the datapath).
#[derive(Clone)]
pub struct PortSet {
    ports: Arc<Mutex<Vec<Port>>>,
}

impl std::fmt::Debug for PortSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PortSet").finish_non_exhaustive()
    }
}

impl PortSet {
    /// Shares `ports` (opened, configured and started by the caller).
    pub fn new(ports: Vec<Port>) -> Self {
        Self {
            ports: Arc::new(Mutex::new(ports)),
        }
    }

    /// Link state of port `index`, or `None` when another thread holds the ports right now
    /// (the poll loop never waits) or the query failed.
    pub fn try_link(&self, index: usize) -> Option<LinkStatus> {
        let ports = self.ports.try_lock().ok()?;
        ports.get(index)?.link().ok()
    }

    /// Link state of port `index`, waiting for the ports if needed (control path).
    pub fn link(&self, index: usize) -> Option<LinkStatus> {
        let ports = self.ports.lock().ok()?;
        ports.get(index)?.link().ok()
    }

    /// Counters of port `index` (control path).
    pub fn stats(&self, index: usize) -> Option<PortStats> {
        let ports = self.ports.lock().ok()?;
        ports.get(index)?.stats().ok()
    }

    /// The ports back, once no other engine shares them (to close them at a chosen moment).
    pub fn into_ports(self) -> Option<Vec<Port>> {
        Arc::try_unwrap(self.ports).ok()?.into_inner().ok()
    }
}

/// The queues one engine uses on one port (= plane).
#[derive(Debug)]
pub struct QueuePair {
    /// Where this plane's frames arrive.
    pub rx: RxQueue,
    /// Where this plane's frames leave.
    pub tx: TxQueue,
    /// The port's MAC address (the engine's source MAC on this plane).
    pub mac: EthernetAddress,
    /// Index of the port in the [`PortSet`], for its link state.
    pub link: usize,
}

struct Plane {
    q: QueuePair,
    tx: MbufBurst<BURST_SIZE>,
    rx: MbufBurst<RX_BURST>,
    link_up: bool,
}

/// One engine's queues on every port. `Send`: built on the main thread, polled on the NIC's.
pub struct DpdkIo {
    planes: Vec<Plane>,
    pool: Mempool,
    ports: PortSet,
    eal: Eal,
    staged: Option<Mbuf>,
    /// The staged burst of [`PacketIo::tx_buffers`]: mbufs sized to `frame_room`, in order.
    burst: MbufBurst<TX_BURST>,
    frame_room: usize,
    stats: IoStats,
}

impl std::fmt::Debug for DpdkIo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DpdkIo")
            .field("planes", &self.planes.len())
            .field("pool", &self.pool)
            .field("frame_room", &self.frame_room)
            .finish_non_exhaustive()
    }
}

impl DpdkIo {
    /// An engine's I/O over `queues` (plane `i` = `queues[i]`), sending from `pool`, whose
    /// mbufs hold frames of up to `frame_room` bytes.
    pub fn new(
        eal: &Eal,
        pool: &Mempool,
        queues: Vec<QueuePair>,
        ports: PortSet,
        frame_room: usize,
    ) -> Result<Self, NicError> {
        if queues.is_empty() || queues.len() > 32 {
            return Err(NicError::Setup(format!(
                "{} planes: need 1..=32",
                queues.len()
            )));
        }
        let data = usize::from(pool.data_room()).saturating_sub(usize::from(HEADROOM));
        if frame_room > data {
            return Err(NicError::Setup(format!(
                "frames of {frame_room} bytes do not fit mbufs of {data}"
            )));
        }
        let planes = queues
            .into_iter()
            .map(|q| {
                let link_up = ports.link(q.link).is_some_and(|l| l.up);
                Plane {
                    q,
                    tx: MbufBurst::new(),
                    rx: MbufBurst::new(),
                    link_up,
                }
            })
            .collect();
        Ok(Self {
            planes,
            pool: pool.clone(),
            ports,
            eal: eal.clone(),
            staged: None,
            burst: MbufBurst::new(),
            frame_room,
            stats: IoStats::default(),
        })
    }

    /// The ports this engine shares with the others of the process.
    pub fn ports(&self) -> &PortSet {
        &self.ports
    }

    /// The pool frames are sent from.
    pub fn pool(&self) -> &Mempool {
        &self.pool
    }
}

impl PacketIo for DpdkIo {
    fn port_count(&self) -> usize {
        self.planes.len()
    }

    fn mac(&self, port: u8) -> EthernetAddress {
        self.planes[usize::from(port)].q.mac
    }

    fn frame_room(&self) -> usize {
        self.frame_room
    }

    fn enter_thread(&mut self) -> Result<ThreadGuard, NicError> {
        // A plain thread gets an lcore id (and so the pool's per-lcore cache); an EAL lcore
        // already has one.
        if Eal::current_lcore().is_some() {
            return Ok(ThreadGuard::none());
        }
        let registration = self.eal.register_thread()?;
        Ok(ThreadGuard::new(Box::new(registration)))
    }

    #[inline]
    fn rx_burst<F: FnMut(&[u8])>(&mut self, port: u8, mut f: F) -> usize {
        let plane = &mut self.planes[usize::from(port)];
        if plane.q.rx.rx_burst(&mut plane.rx) == 0 {
            return 0;
        }
        let mut n = 0;
        for m in plane.rx.iter() {
            // A frame in one segment is a view of the whole frame; the pools hold whole
            // frames, so a chained mbuf only comes from a misconfigured port.
            if m.is_contiguous() {
                f(m.data());
                self.stats.rx_bytes += m.len() as u64;
                n += 1;
            } else {
                self.stats.rx_dropped += 1;
            }
        }
        self.stats.rx_frames += n as u64;
        plane.rx.clear();
        n
    }

    #[inline]
    fn rx_frames<F: FnOnce(&[&[u8]])>(&mut self, port: u8, f: F) -> usize {
        let plane = &mut self.planes[usize::from(port)];
        if plane.q.rx.rx_burst(&mut plane.rx) == 0 {
            return 0;
        }
        // Views of the burst's mbufs (the PMD just wrote their headers), in order.
        let mut frames: [&[u8]; RX_BURST] = [&[]; RX_BURST];
        let mut n = 0;
        let mut bytes = 0;
        for m in plane.rx.iter() {
            // As in `rx_burst`: a chained mbuf only comes from a misconfigured port.
            if m.is_contiguous() {
                frames[n] = m.data();
                bytes += m.len() as u64;
                n += 1;
            } else {
                self.stats.rx_dropped += 1;
            }
        }
        if n > 0 {
            f(&frames[..n]);
        }
        self.stats.rx_frames += n as u64;
        self.stats.rx_bytes += bytes;
        plane.rx.clear();
        n
    }

    #[inline]
    fn tx_ready(&self) -> PortMask {
        let mut mask = 0;
        for (i, p) in self.planes.iter().enumerate() {
            if p.link_up && !p.tx.is_full() {
                mask |= 1 << i;
            }
        }
        PortMask(mask)
    }

    #[inline]
    fn tx_room(&self) -> (PortMask, usize) {
        let mut mask = 0;
        let mut room = TX_BURST;
        for (i, p) in self.planes.iter().enumerate() {
            if p.link_up && !p.tx.is_full() {
                mask |= 1 << i;
                room = room.min(p.tx.capacity() - p.tx.len());
            }
        }
        (PortMask(mask), room)
    }

    type TxBuf = Mbuf;

    #[inline]
    fn tx_buffers(&mut self, n: usize) -> &mut [Mbuf] {
        let n = n.min(TX_BURST);
        let have = self.burst.len();
        if have < n {
            // One bulk allocation for the burst (`rte_pktmbuf_alloc_bulk`), all or none; short
            // of mbufs, as many as there are, one by one.
            if self.pool.alloc_bulk(&mut self.burst, n - have).is_err() {
                while self.burst.len() < n {
                    let Ok(m) = self.pool.alloc() else { break };
                    let _ = self.burst.push(m);
                }
                if self.burst.len() < n {
                    self.stats.tx_no_buffer += 1;
                }
            }
            // The whole room, trimmed to each frame at commit (`new` checked that it fits);
            // mbufs from one that does not take it (none should) on go back to the pool.
            for i in have..self.burst.len() {
                if self.burst[i].set_len(self.frame_room).is_err() {
                    self.stats.tx_no_buffer += 1;
                    while self.burst.len() > i {
                        drop(self.burst.pop());
                    }
                    break;
                }
            }
        }
        let staged = self.burst.len().min(n);
        &mut self.burst[..staged]
    }

    #[inline]
    fn tx_commit_burst(&mut self, sent: &[Transmit]) {
        // The front is committed; the buffers not filled stay staged, in order.
        for (mut m, t) in self.burst.drain_front(sent.len()).zip(sent) {
            let Some(plane) = self.planes.get_mut(usize::from(t.port)) else {
                self.stats.tx_dropped += 1;
                continue;
            };
            if m.set_len(t.len).is_err() {
                self.stats.tx_dropped += 1;
                continue;
            }
            if plane.tx.push(m).is_err() {
                // tx_room said there was room: only a caller asking for more gets here.
                self.stats.tx_dropped += 1;
                continue;
            }
            self.stats.tx_bytes += t.len as u64;
            if plane.tx.is_full() {
                let sent = plane.q.tx.tx_burst(&mut plane.tx);
                self.stats.tx_frames += sent as u64;
                if !plane.tx.is_empty() {
                    self.stats.tx_refused += 1;
                }
            }
        }
    }

    #[inline]
    fn tx_buffer(&mut self) -> Option<&mut [u8]> {
        if self.staged.is_none() {
            let Ok(mut m) = self.pool.alloc() else {
                self.stats.tx_no_buffer += 1;
                return None;
            };
            // The whole room, trimmed to the frame at commit (`new` checked that it fits).
            if m.append(self.frame_room).is_err() {
                self.stats.tx_no_buffer += 1;
                return None;
            }
            self.staged = Some(m);
        }
        self.staged.as_mut().map(Mbuf::data_mut)
    }

    #[inline]
    fn tx_commit(&mut self, port: u8, len: usize) {
        let Some(mut m) = self.staged.take() else {
            return;
        };
        let Some(plane) = self.planes.get_mut(usize::from(port)) else {
            self.stats.tx_dropped += 1;
            return;
        };
        if m.truncate(len).is_err() {
            self.stats.tx_dropped += 1;
            return;
        }
        if plane.tx.push(m).is_err() {
            // tx_ready said there was room: only a caller ignoring it gets here.
            self.stats.tx_dropped += 1;
            return;
        }
        self.stats.tx_bytes += len as u64;
        if plane.tx.is_full() {
            let sent = plane.q.tx.tx_burst(&mut plane.tx);
            self.stats.tx_frames += sent as u64;
            if !plane.tx.is_empty() {
                self.stats.tx_refused += 1;
            }
        }
    }

    #[inline]
    fn tx_flush(&mut self) {
        for plane in &mut self.planes {
            if plane.tx.is_empty() {
                continue;
            }
            let sent = plane.q.tx.tx_burst(&mut plane.tx);
            self.stats.tx_frames += sent as u64;
            if !plane.tx.is_empty() {
                self.stats.tx_refused += 1;
            }
        }
    }

    fn link_up(&mut self, port: u8) -> bool {
        let Some(plane) = self.planes.get_mut(usize::from(port)) else {
            return false;
        };
        if let Some(link) = self.ports.try_link(plane.q.link) {
            plane.link_up = link.up;
        }
        plane.link_up
    }

    fn stats(&self) -> IoStats {
        self.stats
    }
}

/// Opens the ports of a process: one per plane, each with one RX and one TX queue per engine,
/// all receiving into one pool of whole-frame mbufs.
#[derive(Debug, Clone)]
pub struct DpdkPorts {
    /// Port names in plane order: PCI addresses (`0000:3b:00.0`) or vdev names (`net_memif0`).
    pub names: Vec<String>,
    /// Engines (queues per port).
    pub engines: u16,
    /// MTU to set (`None`: the driver's; memif takes jumbo frames without one, see
    /// docs/nics.md).
    pub mtu: Option<u16>,
    /// Bytes of frame per mbuf: at least the engine's largest frame (4 KB payloads need
    /// ~4.3 KB; 9216 fits a 9000-byte MTU).
    pub frame_room: u16,
    /// Mbufs in the pool.
    pub mbufs: u32,
    /// Descriptors per RX / TX queue.
    pub rx_descriptors: u16,
    pub tx_descriptors: u16,
    /// Turn promiscuous mode on (so neighbour solicitations to multicast groups arrive on real
    /// NICs); drivers without it are left as they are.
    pub promiscuous: bool,
    /// Name of the mbuf pool (unique in the process).
    pub pool_name: String,
}

impl DpdkPorts {
    /// The ports `names`, one engine, 9216-byte frames, defaults elsewhere.
    pub fn new<S: Into<String>>(names: impl IntoIterator<Item = S>) -> Self {
        Self {
            names: names.into_iter().map(Into::into).collect(),
            engines: 1,
            mtu: None,
            frame_room: 9216,
            mbufs: 8191,
            rx_descriptors: 1024,
            tx_descriptors: 1024,
            promiscuous: true,
            pool_name: "mrc-nic".to_owned(),
        }
    }

    /// Opens, configures and starts the ports; returns one [`DpdkIo`] per engine (engine `i`
    /// on queue `i` of every port).
    pub fn open(&self, eal: &Eal) -> Result<Vec<DpdkIo>, NicError> {
        let pool = Mempool::create(
            eal,
            &MempoolConfig::new(self.pool_name.clone(), self.mbufs).frames_up_to(self.frame_room),
        )?;
        let config = PortConfig {
            rx_queues: self.engines,
            tx_queues: self.engines,
            rx_descriptors: self.rx_descriptors,
            tx_descriptors: self.tx_descriptors,
            mtu: self.mtu,
        };
        let mut ports = Vec::new();
        let mut per_engine: Vec<Vec<QueuePair>> = (0..self.engines).map(|_| Vec::new()).collect();
        for (index, name) in self.names.iter().enumerate() {
            let mut port = Port::by_name(eal, name)?;
            let mac = EthernetAddress(port.mac()?.0);
            let queues = port.configure(&config, &pool)?;
            if self.promiscuous {
                // Best effort: virtual devices often do not implement it.
                let _ = port.set_promiscuous(true);
            }
            port.start()?;
            for (engine, (rx, tx)) in queues.rx.into_iter().zip(queues.tx).enumerate() {
                per_engine[engine].push(QueuePair {
                    rx,
                    tx,
                    mac,
                    link: index,
                });
            }
            ports.push(port);
        }
        let ports = PortSet::new(ports);
        per_engine
            .into_iter()
            .map(|queues| {
                DpdkIo::new(
                    eal,
                    &pool,
                    queues,
                    ports.clone(),
                    usize::from(self.frame_room),
                )
            })
            .collect()
    }
}
