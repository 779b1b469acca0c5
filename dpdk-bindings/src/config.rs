//! Configuration of pools and ports: plain data, the same with or without DPDK.

use crate::{DEFAULT_DATA_ROOM, HEADROOM};

/// How to create a packet-mbuf pool (`rte_pktmbuf_pool_create`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MempoolConfig {
    /// Unique name in this process (DPDK limits it to 26 bytes).
    pub name: String,
    /// Number of mbufs. DPDK's advice: a power of two minus one.
    pub mbufs: u32,
    /// Per-lcore cache size (0 = none); at most 512 and at most `mbufs / 1.5`.
    pub cache: u32,
    /// Buffer size of each mbuf, headroom ([`HEADROOM`]) included. A frame of `n` bytes needs
    /// `n + HEADROOM`; the default fits a 2048-byte frame. Jumbo frames for 4 KB payloads need
    /// e.g. `HEADROOM + 9216`.
    pub data_room: u16,
    /// NUMA socket to allocate on; `None` = any.
    pub socket: Option<u32>,
}

impl MempoolConfig {
    /// `mbufs` buffers of the default data room, with a per-lcore cache of up to 256.
    pub fn new(name: impl Into<String>, mbufs: u32) -> Self {
        Self {
            name: name.into(),
            mbufs,
            cache: (mbufs / 3 * 2).min(256),
            data_room: DEFAULT_DATA_ROOM,
            socket: None,
        }
    }

    /// The same, with a data room big enough for frames of `frame_bytes` (headroom added).
    pub fn frames_up_to(mut self, frame_bytes: u16) -> Self {
        self.data_room = frame_bytes.saturating_add(HEADROOM);
        self
    }
}

/// How to configure a port (`rte_eth_dev_configure` and the queue setups).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortConfig {
    /// Number of RX queues (one per polling lcore, typically).
    pub rx_queues: u16,
    /// Number of TX queues.
    pub tx_queues: u16,
    /// RX descriptors per queue; adjusted to the driver's limits.
    pub rx_descriptors: u16,
    /// TX descriptors per queue; adjusted to the driver's limits.
    pub tx_descriptors: u16,
    /// MTU (L3 bytes, without Ethernet header and FCS); `None` keeps the driver's default
    /// (1500). 4 KB RDMA payloads plus MRC headers need a jumbo MTU, e.g. 9000.
    pub mtu: Option<u16>,
}

impl Default for PortConfig {
    fn default() -> Self {
        Self {
            rx_queues: 1,
            tx_queues: 1,
            rx_descriptors: 1024,
            tx_descriptors: 1024,
            mtu: None,
        }
    }
}

/// The ports that EAL arguments bring up, in the order they name them: every `--vdev=NAME,...`
/// (or `--vdev NAME,...`) and `-a NAME` / `--allow=NAME`, without the device arguments after
/// the first comma. The order is what callers map to planes (one port per plane).
pub fn eal_port_names<S: AsRef<str>>(eal: &[S]) -> Vec<String> {
    let mut out = Vec::new();
    let mut it = eal.iter().map(AsRef::as_ref);
    while let Some(a) = it.next() {
        let value = match a
            .strip_prefix("--vdev=")
            .or_else(|| a.strip_prefix("--allow="))
        {
            Some(v) => Some(v),
            None if matches!(a, "--vdev" | "-a" | "--allow") => it.next(),
            None => None,
        };
        if let Some(v) = value {
            out.push(v.split(',').next().unwrap_or_default().to_owned());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::eal_port_names;

    #[test]
    fn port_names_come_from_vdevs_and_allowed_devices_in_order() {
        let a = "--no-huge --vdev=net_memif0,role=client,socket=/s -a 0000:3b:00.0 --vdev net_ring1 \
                 --allow=0000:3b:00.1,dv_flow_en=0 -l 0";
        let a: Vec<&str> = a.split_whitespace().collect();
        assert_eq!(
            eal_port_names(&a),
            ["net_memif0", "0000:3b:00.0", "net_ring1", "0000:3b:00.1"]
        );
        assert!(eal_port_names(&["--no-huge", "-a"]).is_empty());
    }
}
