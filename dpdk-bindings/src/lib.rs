//! `mrc-dpdk`: bindings to DPDK (>= 22.11) and a safe poll-mode layer over them.
//!
//! The safe layer follows DPDK's l2fwd: bursts of [`BURST_SIZE`], never block, free what the
//! NIC refused. Handles own their lifetimes: an [`Mbuf`] frees itself, a [`Port`] stops and
//! closes itself, the [`Eal`] is cleaned up when the last handle that needs it drops.
//!
//! ```no_run
//! use mrc_dpdk::{Eal, Mempool, MempoolConfig, MbufBurst, Port, PortConfig};
//!
//! # fn main() -> Result<(), mrc_dpdk::Error> {
//! let eal = Eal::init(["-l", "0", "--no-huge", "-m", "256", "--no-pci", "--no-shconf", "--vdev=net_null0"])?;
//! let pool = Mempool::create(&eal, &MempoolConfig::new("rx", 4095))?;
//! let mut port = Port::by_name(&eal, "net_null0")?;
//! let mut queues = port.configure(&PortConfig::default(), &pool)?;
//! port.start()?;
//! let (rx, tx) = (&mut queues.rx[0], &mut queues.tx[0]);
//! let mut burst = MbufBurst::<32>::new();
//! loop {
//!     // one timestamp per iteration, then:
//!     rx.rx_burst(&mut burst);
//!     for frame in burst.iter() {
//!         let _bytes: &[u8] = frame.data();
//!     }
//!     tx.tx_burst_or_free(&mut burst); // echo back; frees what the NIC refused
//! #   break;
//! }
//! # Ok(()) }
//! ```
//!
//! Without DPDK at build time (no libdpdk-dev or libclang, or `MRC_DPDK_DISABLE=1`), the crate
//! still builds with the same API, and [`Eal::init`] returns [`Error::NotBuilt`]; no other handle
//! can exist then.

mod config;
mod error;
mod info;

pub use config::{MempoolConfig, PortConfig, eal_port_names};
pub use error::{Errno, Error, Result};
pub use info::{LinkStatus, MacAddr, PortInfo, PortStats};

/// Bytes reserved in front of each mbuf's data for prepending headers (`RTE_PKTMBUF_HEADROOM`).
pub const HEADROOM: u16 = 128;
/// DPDK's default mbuf data room (`RTE_MBUF_DEFAULT_BUF_SIZE`): a 2048-byte frame plus headroom.
pub const DEFAULT_DATA_ROOM: u16 = 2048 + HEADROOM;

/// The DPDK version this crate was built against, or `None` when built without DPDK.
pub const DPDK_VERSION: Option<&str> = option_env!("MRC_DPDK_VERSION");

/// `rte_prefetch0`: asks the CPU to bring the cache line at the start of `bytes` (a frame's
/// headers) into every cache level ahead of use, as l2fwd does per received frame. A hint: it
/// never faults and changes no result. Pure Rust (`_mm_prefetch`), so it is there without
/// DPDK too; a no-op off x86-64.
#[inline(always)]
pub fn prefetch0(bytes: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint that never faults, whatever the address; this one is the
    // start of a live slice.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(
            bytes.as_ptr().cast(),
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = bytes;
}

#[cfg(not(mrc_dpdk_absent))]
mod burst;
#[cfg(not(mrc_dpdk_absent))]
mod eal;
#[cfg(not(mrc_dpdk_absent))]
mod lcore;
#[cfg(not(mrc_dpdk_absent))]
mod mbuf;
#[cfg(not(mrc_dpdk_absent))]
mod mempool;
#[cfg(not(mrc_dpdk_absent))]
mod port;
#[cfg(not(mrc_dpdk_absent))]
mod port_shared;
#[cfg(not(mrc_dpdk_absent))]
mod queue;
#[cfg(not(mrc_dpdk_absent))]
pub mod sys;

#[cfg(not(mrc_dpdk_absent))]
pub use {
    burst::{BURST_SIZE, Drain, MbufBurst},
    eal::{Eal, ThreadRegistration},
    lcore::LcoreJob,
    mbuf::Mbuf,
    mempool::Mempool,
    port::{Port, Queues},
    queue::{RxQueue, TxQueue},
};

// The fallback also compiles in test builds with DPDK, so its API is checked against the real one.
#[cfg(any(mrc_dpdk_absent, test))]
#[cfg_attr(not(mrc_dpdk_absent), allow(dead_code))]
mod absent;
#[cfg(mrc_dpdk_absent)]
pub use absent::{
    BURST_SIZE, Drain, Eal, LcoreJob, Mbuf, MbufBurst, Mempool, Port, Queues, RxQueue,
    ThreadRegistration, TxQueue,
};

#[cfg(all(test, not(mrc_dpdk_absent)))]
mod tests {
    #[test]
    fn constants_match_dpdk() {
        assert_eq!(u32::from(super::HEADROOM), crate::sys::RTE_PKTMBUF_HEADROOM);
        assert_eq!(
            u32::from(super::DEFAULT_DATA_ROOM),
            crate::sys::RTE_MBUF_DEFAULT_BUF_SIZE
        );
        assert!(super::DPDK_VERSION.is_some());
    }
}
