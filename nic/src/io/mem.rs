//! In-memory links between NIC threads of one process: per plane, a tiny switch that delivers
//! each frame into the receive ring of the host it is for. No thread of its own: the sending
//! NIC thread delivers. Buffers are fixed-size boxes recycled through a free ring per plane, so
//! a frame moves by pointer from the sender's staging buffer to the receiver's ring.
//!
//! Forwarding, per plane: a multicast destination MAC (neighbour discovery) is flooded to every
//! other host; a destination MAC of a host's port goes to that host; anything else is routed on
//! the IPv6 destination (the inner header's in SRv6 mode, where the outer one names a path), as
//! a router whose MAC is [`router_mac`] would. Hosts use that MAC as their static next hop, or
//! resolve each other's addresses with neighbour discovery.
//!
//! Faults per host port ([`MemControl`]): link down (both directions drop, and the port reports
//! its link down), and dropping every n-th frame the port sends.

use std::collections::HashMap;
use std::net::Ipv6Addr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};

use crossbeam_queue::ArrayQueue;
use mrc_srv6::wire::EthernetAddress;
use mrc_transport::{PortMask, Transmit};

use super::{IoStats, PacketIo, RX_BURST, TX_BURST};

/// Default bytes per buffer: a 9000-byte MTU frame and then some.
pub const DEFAULT_FRAME_ROOM: usize = 9216;
/// Default frames per receive ring.
pub const DEFAULT_RING_DEPTH: usize = 1024;

/// The MAC of plane `plane`'s switch, the static next hop of hosts on a [`MemFabric`].
pub const fn router_mac(plane: u8) -> EthernetAddress {
    EthernetAddress([0x02, 0x5e, 0, 0, 0xff, plane])
}

/// The MAC of port `plane` of host `host` on a [`MemFabric`].
pub const fn host_mac(host: u16, plane: u8) -> EthernetAddress {
    let [hi, lo] = host.to_be_bytes();
    EthernetAddress([0x02, 0x5e, hi, lo, 0, plane])
}

/// Builds an in-memory fabric: add hosts, then [`build`](Self::build) one [`MemIo`] per host.
#[derive(Debug, Clone)]
pub struct MemFabric {
    planes: usize,
    frame_room: usize,
    ring_depth: usize,
    hosts: Vec<Ipv6Addr>,
}

/// The most planes a [`MemFabric`] has (the engine's ports per NIC).
pub const MAX_PLANES: usize = 32;

/// A plane count no [`MemFabric`] has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{0} planes: an in-memory fabric has 1 to {MAX_PLANES}")]
pub struct PlanesError(pub usize);

impl MemFabric {
    /// A fabric of `planes` planes (1..=[`MAX_PLANES`]), no hosts yet; another count is an
    /// error (a user's `--planes 0` is refused, not a panic).
    pub fn try_new(planes: usize) -> Result<Self, PlanesError> {
        if !(1..=MAX_PLANES).contains(&planes) {
            return Err(PlanesError(planes));
        }
        Ok(Self {
            planes,
            frame_room: DEFAULT_FRAME_ROOM,
            ring_depth: DEFAULT_RING_DEPTH,
            hosts: Vec::new(),
        })
    }

    /// [`try_new`](Self::try_new) for a count known to be right.
    ///
    /// # Panics
    /// If `planes` is not 1..=[`MAX_PLANES`].
    pub fn new(planes: usize) -> Self {
        Self::try_new(planes).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Bytes per buffer (the longest frame).
    pub fn frame_room(mut self, bytes: usize) -> Self {
        self.frame_room = bytes;
        self
    }

    /// Frames per receive ring.
    pub fn ring_depth(mut self, frames: usize) -> Self {
        self.ring_depth = frames.max(1);
        self
    }

    /// Adds a host whose NIC answers to `nic_addr`; returns its index.
    pub fn add_host(&mut self, nic_addr: Ipv6Addr) -> u16 {
        self.hosts.push(nic_addr);
        (self.hosts.len() - 1) as u16
    }

    /// Two hosts, ready: `(a, b, control)`.
    pub fn pair(planes: usize, a: Ipv6Addr, b: Ipv6Addr) -> (MemIo, MemIo, MemControl) {
        let mut f = Self::new(planes);
        f.add_host(a);
        f.add_host(b);
        let (mut ios, control) = f.build();
        let b = ios.pop().expect("two hosts");
        let a = ios.pop().expect("two hosts");
        (a, b, control)
    }

    /// One [`MemIo`] per host (in the order they were added) and the fault controls.
    pub fn build(self) -> (Vec<MemIo>, MemControl) {
        let hosts = self.hosts.len();
        let ports = (0..hosts * self.planes)
            .map(|_| PortState::new(self.ring_depth))
            .collect();
        // Every buffer is in a receive ring, staged, or being read: a bound, made on demand.
        let pool = Pool::new(
            hosts * self.planes * (self.ring_depth + 2 * RX_BURST) + 16,
            self.frame_room,
        );
        let by_addr = self
            .hosts
            .iter()
            .enumerate()
            .map(|(i, a)| (*a, i))
            .collect();
        let by_mac = (0..hosts)
            .flat_map(|h| (0..self.planes).map(move |p| (host_mac(h as u16, p as u8), h)))
            .collect();
        let inner = Arc::new(Inner {
            planes: self.planes,
            hosts,
            frame_room: self.frame_room,
            ports,
            pool,
            by_addr,
            by_mac,
        });
        let ios = (0..hosts)
            .map(|host| MemIo {
                fabric: Arc::clone(&inner),
                host,
                staged: None,
                burst: Vec::with_capacity(TX_BURST),
                rx_held: Vec::with_capacity(RX_BURST),
                stats: IoStats::default(),
            })
            .collect();
        (ios, MemControl { inner })
    }
}

struct Inner {
    planes: usize,
    hosts: usize,
    frame_room: usize,
    /// `ports[host * planes + plane]`.
    ports: Vec<PortState>,
    pool: Pool,
    by_addr: HashMap<Ipv6Addr, usize>,
    by_mac: HashMap<EthernetAddress, usize>,
}

impl Inner {
    fn port(&self, host: usize, plane: usize) -> &PortState {
        &self.ports[host * self.planes + plane]
    }

    /// Where a frame from `src` on `plane` goes.
    fn route(&self, src: usize, frame: &[u8]) -> Route {
        let Some(dst_mac) = frame.get(..6) else {
            return Route::Nowhere;
        };
        if dst_mac[0] & 1 != 0 {
            return Route::Flood;
        }
        if let Some(&h) = self.by_mac.get(&EthernetAddress::from_bytes(dst_mac)) {
            return if h == src {
                Route::Nowhere
            } else {
                Route::Host(h)
            };
        }
        match ipv6_destination(frame).and_then(|a| self.by_addr.get(&a)) {
            Some(&h) if h != src => Route::Host(h),
            _ => Route::Nowhere,
        }
    }

    /// Puts `frame` into `dst`'s ring on `plane`, or recycles it (port down, ring full).
    fn deliver(&self, dst: usize, plane: usize, frame: Frame) -> bool {
        let port = self.port(dst, plane);
        if !port.up.load(Ordering::Relaxed) {
            self.pool.put(frame.buf);
            return false;
        }
        match port.rx.push(frame) {
            Ok(()) => true,
            Err(frame) => {
                self.pool.put(frame.buf);
                false
            }
        }
    }
}

enum Route {
    Host(usize),
    Flood,
    Nowhere,
}

/// The IPv6 destination that names the receiving NIC: the outer DA, or in SRv6 mode the inner
/// header's (after an optional SRH).
fn ipv6_destination(frame: &[u8]) -> Option<Ipv6Addr> {
    const ETH: usize = 14;
    if frame.get(12..14)? != [0x86, 0xdd] {
        return None;
    }
    let addr = |at: usize| -> Option<Ipv6Addr> {
        let b: [u8; 16] = frame.get(at..at + 16)?.try_into().ok()?;
        Some(Ipv6Addr::from(b))
    };
    let mut next = *frame.get(ETH + 6)?;
    let mut at = ETH + 40;
    if next == 43 {
        // RFC 8754 §2: routing header; its length is in 8-octet units after the first 8.
        next = *frame.get(at)?;
        at += (usize::from(*frame.get(at + 1)?) + 1) * 8;
    }
    if next == 41 {
        addr(at + 24)
    } else {
        addr(ETH + 24)
    }
}

struct Frame {
    buf: Box<[u8]>,
    len: usize,
}

struct PortState {
    rx: ArrayQueue<Frame>,
    up: AtomicBool,
    /// Drop every n-th frame sent from this port (0: none).
    drop_every: AtomicU32,
    sent: AtomicU64,
    delivered: AtomicU64,
    dropped: AtomicU64,
}

impl PortState {
    fn new(depth: usize) -> Self {
        Self {
            rx: ArrayQueue::new(depth),
            up: AtomicBool::new(true),
            drop_every: AtomicU32::new(0),
            sent: AtomicU64::new(0),
            delivered: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
        }
    }
}

/// The fabric's buffers, made on demand up to a cap and recycled.
struct Pool {
    free: ArrayQueue<Box<[u8]>>,
    made: AtomicUsize,
    cap: usize,
    room: usize,
}

impl Pool {
    fn new(cap: usize, room: usize) -> Self {
        Self {
            free: ArrayQueue::new(cap),
            made: AtomicUsize::new(0),
            cap,
            room,
        }
    }

    fn get(&self) -> Option<Box<[u8]>> {
        if let Some(b) = self.free.pop() {
            return Some(b);
        }
        let made = self.made.fetch_add(1, Ordering::Relaxed);
        if made < self.cap {
            Some(vec![0; self.room].into_boxed_slice())
        } else {
            self.made.fetch_sub(1, Ordering::Relaxed);
            None
        }
    }

    fn put(&self, buf: Box<[u8]>) {
        // Never full: at most `cap` buffers exist.
        let _ = self.free.push(buf);
    }
}

/// One host's ports on a [`MemFabric`]. `Send`: moves into its NIC thread.
pub struct MemIo {
    fabric: Arc<Inner>,
    host: usize,
    staged: Option<Box<[u8]>>,
    /// The staged burst of [`PacketIo::tx_buffers`], in order.
    burst: Vec<Box<[u8]>>,
    /// The frames of the RX burst being handed over by [`PacketIo::rx_frames`] (kept for its
    /// capacity).
    rx_held: Vec<Frame>,
    stats: IoStats,
}

impl std::fmt::Debug for MemIo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemIo")
            .field("host", &self.host)
            .field("planes", &self.fabric.planes)
            .finish()
    }
}

impl MemIo {
    /// This host's index on the fabric.
    pub fn host(&self) -> u16 {
        self.host as u16
    }

    /// Sends the first `len` bytes of `buf` on `port`: into the receiver's ring, or lost.
    fn commit(&mut self, buf: Box<[u8]>, port: u8, len: usize) {
        let plane = usize::from(port);
        let fabric = &*self.fabric;
        if plane >= fabric.planes || len > buf.len() {
            self.stats.tx_dropped += 1;
            fabric.pool.put(buf);
            return;
        }
        let state = fabric.port(self.host, plane);
        let n = state.sent.fetch_add(1, Ordering::Relaxed) + 1;
        let every = u64::from(state.drop_every.load(Ordering::Relaxed));
        let lost = every != 0 && n.is_multiple_of(every);
        if lost || !state.up.load(Ordering::Relaxed) {
            state.dropped.fetch_add(1, Ordering::Relaxed);
            self.stats.tx_dropped += 1;
            fabric.pool.put(buf);
            return;
        }
        self.stats.tx_frames += 1;
        self.stats.tx_bytes += len as u64;
        match fabric.route(self.host, &buf[..len]) {
            Route::Host(dst) => {
                if fabric.deliver(dst, plane, Frame { buf, len }) {
                    state.delivered.fetch_add(1, Ordering::Relaxed);
                } else {
                    state.dropped.fetch_add(1, Ordering::Relaxed);
                }
            }
            Route::Flood => {
                for dst in (0..fabric.hosts).filter(|&h| h != self.host) {
                    let Some(mut copy) = fabric.pool.get() else {
                        state.dropped.fetch_add(1, Ordering::Relaxed);
                        continue;
                    };
                    copy[..len].copy_from_slice(&buf[..len]);
                    if fabric.deliver(dst, plane, Frame { buf: copy, len }) {
                        state.delivered.fetch_add(1, Ordering::Relaxed);
                    }
                }
                fabric.pool.put(buf);
            }
            Route::Nowhere => {
                state.dropped.fetch_add(1, Ordering::Relaxed);
                fabric.pool.put(buf);
            }
        }
    }
}

impl PacketIo for MemIo {
    fn port_count(&self) -> usize {
        self.fabric.planes
    }

    fn mac(&self, port: u8) -> EthernetAddress {
        host_mac(self.host as u16, port)
    }

    fn frame_room(&self) -> usize {
        self.fabric.frame_room
    }

    fn rx_burst<F: FnMut(&[u8])>(&mut self, port: u8, mut f: F) -> usize {
        let plane = usize::from(port);
        let state = self.fabric.port(self.host, plane);
        let up = state.up.load(Ordering::Relaxed);
        let mut n = 0;
        while n < RX_BURST {
            let Some(frame) = state.rx.pop() else { break };
            if up {
                f(&frame.buf[..frame.len]);
                self.stats.rx_frames += 1;
                self.stats.rx_bytes += frame.len as u64;
                n += 1;
            } else {
                self.stats.rx_dropped += 1;
            }
            self.fabric.pool.put(frame.buf);
        }
        n
    }

    fn rx_frames<F: FnOnce(&[&[u8]])>(&mut self, port: u8, f: F) -> usize {
        let plane = usize::from(port);
        let fabric = &*self.fabric;
        let state = fabric.port(self.host, plane);
        let up = state.up.load(Ordering::Relaxed);
        while self.rx_held.len() < RX_BURST {
            let Some(frame) = state.rx.pop() else { break };
            if up {
                self.stats.rx_frames += 1;
                self.stats.rx_bytes += frame.len as u64;
                self.rx_held.push(frame);
            } else {
                self.stats.rx_dropped += 1;
                fabric.pool.put(frame.buf);
            }
        }
        let n = self.rx_held.len();
        if n > 0 {
            let mut frames: [&[u8]; RX_BURST] = [&[]; RX_BURST];
            for (view, frame) in frames.iter_mut().zip(&self.rx_held) {
                *view = &frame.buf[..frame.len];
            }
            f(&frames[..n]);
            for frame in self.rx_held.drain(..) {
                fabric.pool.put(frame.buf);
            }
        }
        n
    }

    fn tx_ready(&self) -> PortMask {
        let mut mask = 0;
        for p in 0..self.fabric.planes {
            if self.fabric.port(self.host, p).up.load(Ordering::Relaxed) {
                mask |= 1 << p;
            }
        }
        PortMask(mask)
    }

    fn tx_room(&self) -> (PortMask, usize) {
        // A link takes every frame at once (a full receive ring drops, it never refuses).
        (self.tx_ready(), TX_BURST)
    }

    type TxBuf = Box<[u8]>;

    fn tx_buffers(&mut self, n: usize) -> &mut [Box<[u8]>] {
        let n = n.min(TX_BURST);
        while self.burst.len() < n {
            let Some(buf) = self.fabric.pool.get() else {
                self.stats.tx_no_buffer += 1;
                break;
            };
            self.burst.push(buf);
        }
        let staged = self.burst.len().min(n);
        &mut self.burst[..staged]
    }

    fn tx_commit_burst(&mut self, sent: &[Transmit]) {
        let n = sent.len().min(self.burst.len());
        let mut staged = std::mem::take(&mut self.burst);
        for (buf, t) in staged.drain(..n).zip(sent) {
            self.commit(buf, t.port, t.len);
        }
        // The buffers not committed stay staged, in order.
        self.burst = staged;
    }

    fn tx_buffer(&mut self) -> Option<&mut [u8]> {
        if self.staged.is_none() {
            let buf = self.fabric.pool.get();
            if buf.is_none() {
                self.stats.tx_no_buffer += 1;
            }
            self.staged = buf;
        }
        self.staged.as_deref_mut()
    }

    fn tx_commit(&mut self, port: u8, len: usize) {
        let Some(buf) = self.staged.take() else {
            return;
        };
        self.commit(buf, port, len);
    }

    fn tx_flush(&mut self) {
        // Frames are in their receiver's ring as soon as they are committed.
    }

    fn link_up(&mut self, port: u8) -> bool {
        usize::from(port) < self.fabric.planes
            && self
                .fabric
                .port(self.host, usize::from(port))
                .up
                .load(Ordering::Relaxed)
    }

    fn stats(&self) -> IoStats {
        self.stats
    }
}

impl Drop for MemIo {
    fn drop(&mut self) {
        for buf in self.staged.take().into_iter().chain(self.burst.drain(..)) {
            self.fabric.pool.put(buf);
        }
    }
}

/// Fault injection and counters of a [`MemFabric`]'s host ports. Cheap to clone; usable from
/// any thread.
#[derive(Clone)]
pub struct MemControl {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for MemControl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemControl")
            .field("hosts", &self.inner.hosts)
            .field("planes", &self.inner.planes)
            .finish()
    }
}

/// Counters of one host port of a [`MemFabric`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MemPortStats {
    /// Frames the host sent on the port.
    pub sent: u64,
    /// Frames of those put into a receiver's ring.
    pub delivered: u64,
    /// Frames of those lost: link down, dropped on purpose, no receiver, receiver ring full.
    pub dropped: u64,
    /// Frames waiting in the port's receive ring.
    pub queued: usize,
}

impl MemControl {
    /// Takes the link of `host`'s port `plane` down (`false`) or up: while down, the port
    /// reports its link down, and frames to or from it are lost.
    pub fn set_link(&self, host: u16, plane: u8, up: bool) {
        self.inner
            .port(usize::from(host), usize::from(plane))
            .up
            .store(up, Ordering::Relaxed);
    }

    /// Drops every `n`-th frame `host` sends on `plane` (0: none).
    pub fn drop_every(&self, host: u16, plane: u8, n: u32) {
        self.inner
            .port(usize::from(host), usize::from(plane))
            .drop_every
            .store(n, Ordering::Relaxed);
    }

    /// Counters of `host`'s port `plane`.
    pub fn port_stats(&self, host: u16, plane: u8) -> MemPortStats {
        let p = self.inner.port(usize::from(host), usize::from(plane));
        MemPortStats {
            sent: p.sent.load(Ordering::Relaxed),
            delivered: p.delivered.load(Ordering::Relaxed),
            dropped: p.dropped.load(Ordering::Relaxed),
            queued: p.rx.len(),
        }
    }
}

#[cfg(test)]
mod tests;
