//! What a [`Port`](crate::Port) and its queue handles share: the port's id, whether it is
//! started, and the ownership of the port, which ends (stopping and closing a configured port)
//! when the last of them drops.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::eal::Eal;
use crate::error::{Error, Result};
use crate::mempool::Mempool;
use crate::sys;

/// One bit per port id: set while a `Port` handle (or its queues) owns the port.
static OWNED: AtomicU64 = AtomicU64::new(0);
const _: () = assert!(sys::RTE_MAX_ETHPORTS <= 64, "OWNED holds one bit per port");

/// State shared by a port and its queue handles. The port is stopped and closed when the last
/// of them drops.
pub(crate) struct PortShared {
    pub(crate) id: u16,
    /// Set after `rte_eth_dev_start`, cleared before `rte_eth_dev_stop`; bursts on a stopped
    /// port return nothing instead of reaching DPDK's "port not ready" stubs.
    pub(crate) started: AtomicBool,
    /// Every pool an RX queue of this port was set up with: they must outlive the port (a
    /// failed reconfiguration may leave queues on either the old or the new pool).
    rx_pools: Vec<Mempool>,
    /// `configure` ran (even partly): the port is stopped and closed on drop.
    configured: bool,
    _eal: Eal,
}

impl PortShared {
    /// Takes ownership of the valid port `id` (`id < RTE_MAX_ETHPORTS`), unless a handle
    /// already owns it.
    pub(crate) fn claim(eal: &Eal, id: u16) -> Result<Self> {
        if OWNED.fetch_or(1 << id, Ordering::SeqCst) & (1 << id) != 0 {
            return Err(Error::PortInUse(id));
        }
        Ok(Self {
            id,
            started: AtomicBool::new(false),
            rx_pools: Vec::new(),
            configured: false,
            _eal: eal.clone(),
        })
    }

    /// `configure` is about to set RX queues up on `pool`: from now on the port is stopped and
    /// closed on drop, and `pool` lives as long as the port.
    pub(crate) fn configuring(&mut self, pool: &Mempool) {
        self.configured = true;
        if !self.rx_pools.iter().any(|p| p.as_ptr() == pool.as_ptr()) {
            self.rx_pools.push(pool.clone());
        }
    }
}

impl Drop for PortShared {
    fn drop(&mut self) {
        // A port that was only looked at is left as it was.
        if self.configured {
            // SAFETY: no queue handle is left (they hold this Arc), so no burst is running; the
            // port id is valid and owned by us.
            unsafe {
                if self.started.load(Ordering::Acquire) {
                    sys::mrc_shim_dev_stop(self.id);
                }
                sys::mrc_shim_dev_close(self.id);
            }
        }
        OWNED.fetch_and(!(1 << self.id), Ordering::SeqCst);
    }
}
