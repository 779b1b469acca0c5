//! Per-lcore datapath handles of a port: one `RxQueue`/`TxQueue` per queue id, moved to the
//! lcore that polls it. `Send`, not `Sync`; bursts take `&mut self`.

use std::cell::Cell;
use std::marker::PhantomData;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::burst::MbufBurst;
use crate::port_shared::PortShared;
use crate::sys;

/// Receive side of one queue of a port.
pub struct RxQueue {
    port: Arc<PortShared>,
    queue: u16,
    _not_sync: PhantomData<Cell<()>>,
}

/// Transmit side of one queue of a port.
pub struct TxQueue {
    port: Arc<PortShared>,
    queue: u16,
    _not_sync: PhantomData<Cell<()>>,
}

impl RxQueue {
    pub(crate) fn new(port: Arc<PortShared>, queue: u16) -> Self {
        Self {
            port,
            queue,
            _not_sync: PhantomData,
        }
    }

    /// The port id.
    pub fn port_id(&self) -> u16 {
        self.port.id
    }

    /// The queue id.
    pub fn queue_id(&self) -> u16 {
        self.queue
    }

    /// Receives up to the free room of `burst` (`rte_eth_rx_burst`), appending to it; returns
    /// how many arrived. Never blocks; 0 while the port is stopped.
    #[inline]
    pub fn rx_burst<const N: usize>(&mut self, burst: &mut MbufBurst<N>) -> usize {
        let room = burst.capacity() - burst.len();
        if room == 0 || !self.port.started.load(Ordering::Acquire) {
            return 0;
        }
        // SAFETY: the port is started and stays so while this handle lives (stop needs every
        // queue handle dropped); this handle is the only poller of the queue (`&mut self`, not
        // Sync); the spare slots hold `room` pointers and DPDK fills the first `n` with owned
        // mbufs.
        let n = unsafe {
            sys::rte_eth_rx_burst(self.port.id, self.queue, burst.spare_ptr(), room as u16)
        };
        // SAFETY: see above: `n <= room` slots were written.
        unsafe { burst.commit(n as usize) };
        n as usize
    }
}

impl TxQueue {
    pub(crate) fn new(port: Arc<PortShared>, queue: u16) -> Self {
        Self {
            port,
            queue,
            _not_sync: PhantomData,
        }
    }

    /// The port id.
    pub fn port_id(&self) -> u16 {
        self.port.id
    }

    /// The queue id.
    pub fn queue_id(&self) -> u16 {
        self.queue
    }

    /// Sends from the front of `burst` (`rte_eth_tx_burst`); returns how many the NIC took.
    /// What it refused stays in `burst`, in order, to retry or to free (`burst.clear()`).
    /// Never blocks; sends nothing while the port is stopped.
    #[inline]
    pub fn tx_burst<const N: usize>(&mut self, burst: &mut MbufBurst<N>) -> usize {
        if burst.is_empty() || !self.port.started.load(Ordering::Acquire) {
            return 0;
        }
        // SAFETY: as in `rx_burst`; the first `len` slots are owned mbufs; DPDK takes ownership
        // of the first `sent` of them, which the burst then forgets.
        let sent = unsafe {
            sys::rte_eth_tx_burst(
                self.port.id,
                self.queue,
                burst.held_ptr(),
                burst.len() as u16,
            )
        };
        burst.consume_front(sent as usize);
        sent as usize
    }

    /// Like [`TxQueue::tx_burst`], then frees what the NIC refused (the l2fwd idiom); `burst`
    /// is empty afterwards. Returns how many were sent.
    #[inline]
    pub fn tx_burst_or_free<const N: usize>(&mut self, burst: &mut MbufBurst<N>) -> usize {
        let sent = self.tx_burst(burst);
        burst.clear();
        sent
    }
}

impl std::fmt::Debug for RxQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RxQueue")
            .field("port", &self.port.id)
            .field("queue", &self.queue)
            .finish()
    }
}

impl std::fmt::Debug for TxQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TxQueue")
            .field("port", &self.port.id)
            .field("queue", &self.queue)
            .finish()
    }
}
