//! What the NIC thread sends and receives through: one port per plane, bursts in, frames out.
//!
//! Two implementations: [`dpdk::DpdkIo`] (DPDK ports: real NICs or virtual devices) and
//! [`mem::MemIo`] (in-memory links between threads, with fault injection). The poll loop is
//! generic over [`PacketIo`], so the hot path has no dynamic dispatch.

#[cfg(feature = "dpdk")]
pub mod dpdk;
pub mod mem;

use mrc_srv6::wire::EthernetAddress;
use mrc_transport::{PortMask, Transmit};

use crate::error::NicError;

/// Frames received per port and per call of [`PacketIo::rx_burst`] at most (DPDK l2fwd's
/// `MAX_PKT_BURST`).
pub const RX_BURST: usize = 32;

/// Frames staged for one transmit burst at most (DPDK l2fwd's `MAX_PKT_BURST`).
pub const TX_BURST: usize = 32;

/// Burst I/O over the ports of one NIC (port `i` = plane `i`), polled by one thread.
///
/// The poll loop uses the burst calls, l2fwd's shape (issue #13, the NIC loop in l2fwd
/// shape): [`rx_frames`](Self::rx_frames) hands a whole RX burst over at once, and
/// [`tx_buffers`](Self::tx_buffers) + [`tx_commit_burst`](Self::tx_commit_burst) stage a burst
/// of buffers for the engine to fill and queue the filled ones together. The one-frame calls
/// below remain for callers that send or receive a frame at a time.
///
/// Sending goes through one staging buffer: [`tx_buffer`](Self::tx_buffer) lends it (an mbuf's
/// data room, a link buffer), the engine writes a frame into it and learns which port the frame
/// leaves on, then [`tx_commit`](Self::tx_commit) queues it there. A buffer that was lent but
/// not committed stays staged for the next frame. [`tx_flush`](Self::tx_flush) pushes partial
/// bursts out; the poll loop calls it once per iteration (its drain timer is one iteration).
pub trait PacketIo: Send {
    /// Number of ports (planes).
    fn port_count(&self) -> usize;

    /// The MAC address of `port`.
    fn mac(&self, port: u8) -> EthernetAddress;

    /// The longest frame a [`tx_buffer`](Self::tx_buffer) holds and a port receives whole.
    fn frame_room(&self) -> usize;

    /// Called once on the thread that will poll, before the first burst (DPDK: registers a
    /// non-EAL thread, so it gets an lcore id and mempool caches). The guard lives as long as
    /// the poll loop.
    fn enter_thread(&mut self) -> Result<ThreadGuard, NicError> {
        Ok(ThreadGuard::none())
    }

    /// Receives up to [`RX_BURST`] frames from `port`, each handed to `f` as a view into its
    /// buffer (nothing is copied); returns how many. Never blocks.
    fn rx_burst<F: FnMut(&[u8])>(&mut self, port: u8, f: F) -> usize;

    /// Receives up to [`RX_BURST`] frames from `port` and hands them to `f` all at once, in
    /// order, as views into their buffers (DPDK: the mbufs of one `rte_eth_rx_burst`; nothing
    /// is copied); returns how many. `f` is not called when nothing arrived. Never blocks.
    fn rx_frames<F: FnOnce(&[&[u8]])>(&mut self, port: u8, f: F) -> usize;

    /// The ports that take a frame now (link up and room in their TX queue).
    fn tx_ready(&self) -> PortMask;

    /// The ports that take a frame now ([`tx_ready`](Self::tx_ready)), and how many frames
    /// every one of them takes at least before one of its queues is full: a burst of that many
    /// frames, spread over those ports in any way, is queued whole by
    /// [`tx_commit_burst`](Self::tx_commit_burst). At least 1 when the mask is not empty.
    fn tx_room(&self) -> (PortMask, usize);

    /// One staging buffer of a burst (an mbuf, a link buffer): at least
    /// [`frame_room`](Self::frame_room) bytes to write a frame into.
    type TxBuf: AsMut<[u8]>;

    /// Stages up to `n` buffers (at most [`TX_BURST`]; DPDK: allocated in bulk) and lends
    /// them, in order; fewer, or none, when buffers ran out. Buffers staged and not committed
    /// stay staged for the next burst.
    fn tx_buffers(&mut self, n: usize) -> &mut [Self::TxBuf];

    /// Queues the first `sent.len()` staged buffers, buffer `i` as the first `sent[i].len`
    /// bytes on port `sent[i].port`, in order; the others stay staged. A port that cannot take
    /// one (down, or full because the caller asked for more than
    /// [`tx_room`](Self::tx_room)) drops it and counts the drop, as
    /// [`tx_commit`](Self::tx_commit) does. A port queue that fills is sent at once; what the
    /// port refuses stays queued, in order, for the next flush.
    fn tx_commit_burst(&mut self, sent: &[Transmit]);

    /// The staging buffer (at least [`frame_room`](Self::frame_room) bytes), or `None` when no
    /// buffer is free right now.
    fn tx_buffer(&mut self) -> Option<&mut [u8]>;

    /// Queues the first `len` bytes of the staging buffer on `port`. A port that cannot take it
    /// (full, down) drops it and counts the drop.
    fn tx_commit(&mut self, port: u8, len: usize);

    /// Pushes queued frames to the ports (partial bursts too). Frames a port refuses stay
    /// queued for the next flush.
    fn tx_flush(&mut self);

    /// Link state of `port`. May cost a system call: the poll loop asks once per link-poll
    /// interval.
    fn link_up(&mut self, port: u8) -> bool;

    /// Counters.
    fn stats(&self) -> IoStats;
}

/// Asks the CPU to bring the first cache line of `frame` (its headers) close ahead of use:
/// DPDK's `rte_prefetch0` (through `mrc-dpdk`'s safe wrapper), which l2fwd issues per frame of
/// an RX burst (issue #13, the NIC loop in l2fwd shape). A hint: it changes no result; a no-op
/// without the `dpdk` feature.
#[inline(always)]
pub fn prefetch0(frame: &[u8]) {
    #[cfg(feature = "dpdk")]
    mrc_dpdk::prefetch0(frame);
    #[cfg(not(feature = "dpdk"))]
    let _ = frame;
}

/// Keeps a per-thread registration alive (see [`PacketIo::enter_thread`]).
pub struct ThreadGuard(Option<Box<dyn std::any::Any>>);

impl ThreadGuard {
    /// Nothing to keep.
    pub fn none() -> Self {
        Self(None)
    }

    /// Keeps `guard` until the poll loop ends.
    pub fn new(guard: Box<dyn std::any::Any>) -> Self {
        Self(Some(guard))
    }
}

impl std::fmt::Debug for ThreadGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("ThreadGuard")
            .field(&self.0.is_some())
            .finish()
    }
}

/// Counters of a [`PacketIo`], totals since it was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IoStats {
    /// Frames received and handed on.
    pub rx_frames: u64,
    /// Bytes of those frames.
    pub rx_bytes: u64,
    /// Frames taken by the ports.
    pub tx_frames: u64,
    /// Bytes of those frames.
    pub tx_bytes: u64,
    /// Received frames dropped before the engine saw them (chained mbufs, link down).
    pub rx_dropped: u64,
    /// Frames dropped at commit (port down or full) or lost by the link.
    pub tx_dropped: u64,
    /// Flushes in which a port refused part of a burst (kept for the next flush).
    pub tx_refused: u64,
    /// Times no staging buffer was free.
    pub tx_no_buffer: u64,
}
