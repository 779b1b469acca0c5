//! What a port reports: identity, link and counters. Plain data, the same with or without DPDK.

use std::fmt;

/// An Ethernet MAC address.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct MacAddr(pub [u8; 6]);

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [a, b, c, d, e, g] = self.0;
        write!(f, "{a:02x}:{b:02x}:{c:02x}:{d:02x}:{e:02x}:{g:02x}")
    }
}

impl fmt::Debug for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MacAddr({self})")
    }
}

/// Identity and limits of a port (`rte_eth_dev_info_get` and friends).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortInfo {
    /// Port id.
    pub id: u16,
    /// Device name, e.g. `net_memif0` or a PCI address.
    pub name: String,
    /// Driver (PMD) name, e.g. `net_memif`, `mlx5_pci`.
    pub driver: String,
    /// Current MAC address.
    pub mac: MacAddr,
    /// Maximum RX queues.
    pub max_rx_queues: u16,
    /// Maximum TX queues.
    pub max_tx_queues: u16,
    /// Smallest MTU the driver accepts.
    pub min_mtu: u16,
    /// Largest MTU the driver accepts.
    pub max_mtu: u16,
    /// Largest frame the driver receives.
    pub max_rx_frame: u32,
    /// Maximum RX descriptors per queue.
    pub max_rx_descriptors: u16,
    /// Maximum TX descriptors per queue.
    pub max_tx_descriptors: u16,
    /// NUMA socket of the device, when known.
    pub socket: Option<u32>,
}

/// Link state (`rte_eth_link_get_nowait`: never blocks).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LinkStatus {
    /// Link up.
    pub up: bool,
    /// Speed in Mb/s; `None` when the driver does not know.
    pub speed_mbps: Option<u32>,
    /// Full duplex.
    pub full_duplex: bool,
    /// Autonegotiated.
    pub autoneg: bool,
}

/// Basic port counters (`rte_eth_stats_get`), totals since start or the last reset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PortStats {
    /// Frames received.
    pub ipackets: u64,
    /// Frames sent.
    pub opackets: u64,
    /// Bytes received.
    pub ibytes: u64,
    /// Bytes sent.
    pub obytes: u64,
    /// Frames dropped by the hardware because the RX queues were full.
    pub imissed: u64,
    /// Erroneous received frames.
    pub ierrors: u64,
    /// Failed transmissions.
    pub oerrors: u64,
    /// RX mbuf allocation failures.
    pub rx_nombuf: u64,
}
