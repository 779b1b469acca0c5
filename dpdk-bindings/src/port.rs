//! Ethernet ports (`rte_ethdev`): identity, configuration, start/stop, link, counters.
//!
//! Control-path calls live on [`Port`] (`Send`, not `Sync`: DPDK's control API is not
//! thread-safe). The datapath lives on [`RxQueue`]/[`TxQueue`] handles, one per lcore.

use std::cell::Cell;
use std::ffi::{CStr, CString, c_char};
use std::marker::PhantomData;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::config::PortConfig;
use crate::eal::Eal;
use crate::error::{Error, Result, check};
use crate::info::{LinkStatus, MacAddr, PortInfo, PortStats};
use crate::mempool::Mempool;
use crate::port_shared::PortShared;
use crate::queue::{RxQueue, TxQueue};
use crate::sys;

/// An Ethernet port, owned: one handle per port in the process. Once configured, it is stopped
/// and closed (for virtual devices: removed) when it and all its queue handles are dropped.
pub struct Port {
    shared: Arc<PortShared>,
    _not_sync: PhantomData<Cell<()>>,
}

impl std::fmt::Debug for Port {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Port")
            .field("id", &self.id())
            .field("started", &self.is_started())
            .finish()
    }
}

/// The queue handles made by [`Port::configure`], indexed by queue id.
#[derive(Debug)]
pub struct Queues {
    /// RX queues `0..rx_queues`.
    pub rx: Vec<RxQueue>,
    /// TX queues `0..tx_queues`.
    pub tx: Vec<TxQueue>,
}

impl Port {
    /// Ids of the available ports (`RTE_ETH_FOREACH_DEV`).
    pub fn ids(_eal: &Eal) -> Vec<u16> {
        let mut ids = Vec::new();
        let mut next = 0_u64;
        loop {
            // SAFETY: the EAL is initialised; iterates the ethdev table.
            next = unsafe {
                sys::rte_eth_find_next_owned_by(next as u16, u64::from(sys::RTE_ETH_DEV_NO_OWNER))
            };
            if next >= u64::from(sys::RTE_MAX_ETHPORTS) {
                return ids;
            }
            ids.push(next as u16);
            next += 1;
        }
    }

    /// Takes ownership of port `id`.
    pub fn by_id(eal: &Eal, id: u16) -> Result<Self> {
        // SAFETY: the EAL is initialised; a validity check of any id.
        let valid = unsafe { sys::rte_eth_dev_is_valid_port(id) } != 0;
        if !valid || u32::from(id) >= sys::RTE_MAX_ETHPORTS {
            return Err(Error::InvalidPort(id));
        }
        Ok(Self {
            shared: Arc::new(PortShared::claim(eal, id)?),
            _not_sync: PhantomData,
        })
    }

    /// Takes ownership of the port named `name` (`net_memif0`, `0000:3b:00.0`, ...).
    pub fn by_name(eal: &Eal, name: &str) -> Result<Self> {
        let c_name =
            CString::new(name).map_err(|_| Error::InvalidArgument("port name contains NUL"))?;
        let mut id = 0_u16;
        // SAFETY: `c_name` is NUL-terminated; `id` is a valid out-parameter.
        let ret = unsafe { sys::rte_eth_dev_get_port_by_name(c_name.as_ptr(), &raw mut id) };
        if ret != 0 {
            return Err(Error::PortNotFound(name.to_owned()));
        }
        Self::by_id(eal, id)
    }

    /// The port id.
    pub fn id(&self) -> u16 {
        self.shared.id
    }

    /// Whether the port is started.
    pub fn is_started(&self) -> bool {
        self.shared.started.load(Ordering::Acquire)
    }

    /// Name, driver, MAC and limits.
    pub fn info(&self) -> Result<PortInfo> {
        let raw = self.raw_info()?;
        let mut name: [c_char; sys::RTE_ETH_NAME_MAX_LEN as usize] =
            [0; sys::RTE_ETH_NAME_MAX_LEN as usize];
        // SAFETY: `name` has the RTE_ETH_NAME_MAX_LEN bytes DPDK may write, NUL included.
        check("rte_eth_dev_get_name_by_port", unsafe {
            sys::rte_eth_dev_get_name_by_port(self.id(), name.as_mut_ptr())
        })?;
        // SAFETY: DPDK wrote a NUL-terminated name.
        let name = unsafe { CStr::from_ptr(name.as_ptr()) }
            .to_string_lossy()
            .into_owned();
        let driver = if raw.driver_name.is_null() {
            String::new()
        } else {
            // SAFETY: a static NUL-terminated string of the driver.
            unsafe { CStr::from_ptr(raw.driver_name) }
                .to_string_lossy()
                .into_owned()
        };
        // SAFETY: valid port id; returns -1 (any) or a socket.
        let socket = unsafe { sys::rte_eth_dev_socket_id(self.id()) };
        Ok(PortInfo {
            id: self.id(),
            name,
            driver,
            mac: self.mac()?,
            max_rx_queues: raw.max_rx_queues,
            max_tx_queues: raw.max_tx_queues,
            min_mtu: raw.min_mtu,
            max_mtu: raw.max_mtu,
            max_rx_frame: raw.max_rx_pktlen,
            max_rx_descriptors: raw.rx_desc_lim.nb_max,
            max_tx_descriptors: raw.tx_desc_lim.nb_max,
            socket: u32::try_from(socket).ok(),
        })
    }

    fn raw_info(&self) -> Result<sys::rte_eth_dev_info> {
        let mut info = sys::rte_eth_dev_info::default();
        // SAFETY: valid port id; `info` is a valid out-parameter.
        check("rte_eth_dev_info_get", unsafe {
            sys::rte_eth_dev_info_get(self.id(), &raw mut info)
        })?;
        Ok(info)
    }

    /// The port's MAC address.
    pub fn mac(&self) -> Result<MacAddr> {
        let mut addr = sys::rte_ether_addr::default();
        // SAFETY: valid port id; `addr` is a valid out-parameter.
        check("rte_eth_macaddr_get", unsafe {
            sys::rte_eth_macaddr_get(self.id(), &raw mut addr)
        })?;
        Ok(MacAddr(addr.addr_bytes))
    }

    /// Configures queues, descriptors and MTU, and returns the queue handles. The port must be
    /// stopped and have no queue handles alive. RX queues fill from `pool`, which must hold
    /// frames of the MTU (`MempoolConfig::frames_up_to(mtu + 18)`) and is kept alive by the
    /// port.
    pub fn configure(&mut self, config: &PortConfig, pool: &Mempool) -> Result<Queues> {
        if self.is_started() {
            return Err(Error::InvalidArgument("configure needs a stopped port"));
        }
        let id = self.id();
        let handles = Arc::strong_count(&self.shared) - 1;
        let shared =
            Arc::get_mut(&mut self.shared).ok_or(Error::QueuesInUse { port: id, handles })?;
        if config.rx_queues == 0 && config.tx_queues == 0 {
            return Err(Error::InvalidArgument("a port needs at least one queue"));
        }
        shared.configuring(pool);
        let mut conf = sys::rte_eth_conf::default();
        conf.rxmode.mtu = config.mtu.map_or(0, u32::from); // 0: the driver's default (1500)
        // SAFETY: valid, stopped port; `conf` is a fully initialised rte_eth_conf.
        check("rte_eth_dev_configure", unsafe {
            sys::rte_eth_dev_configure(id, config.rx_queues, config.tx_queues, &raw const conf)
        })?;
        let (mut rxd, mut txd) = (config.rx_descriptors, config.tx_descriptors);
        // SAFETY: valid port; in/out parameters.
        check("rte_eth_dev_adjust_nb_rx_tx_desc", unsafe {
            sys::rte_eth_dev_adjust_nb_rx_tx_desc(id, &raw mut rxd, &raw mut txd)
        })?;
        // SAFETY: valid port. -1 (unknown socket) passes through as SOCKET_ID_ANY.
        let socket = unsafe { sys::rte_eth_dev_socket_id(id) } as u32;
        for q in 0..config.rx_queues {
            // SAFETY: configured port, queue in range; NULL = the driver's default rxconf; the
            // pool stays alive in `shared.rx_pools` for as long as the port exists.
            check("rte_eth_rx_queue_setup", unsafe {
                sys::rte_eth_rx_queue_setup(id, q, rxd, socket, std::ptr::null(), pool.as_ptr())
            })?;
        }
        for q in 0..config.tx_queues {
            // SAFETY: configured port, queue in range; NULL = the driver's default txconf.
            check("rte_eth_tx_queue_setup", unsafe {
                sys::rte_eth_tx_queue_setup(id, q, txd, socket, std::ptr::null())
            })?;
        }
        let rx = (0..config.rx_queues)
            .map(|q| RxQueue::new(Arc::clone(&self.shared), q))
            .collect();
        let tx = (0..config.tx_queues)
            .map(|q| TxQueue::new(Arc::clone(&self.shared), q))
            .collect();
        Ok(Queues { rx, tx })
    }

    /// Starts the port (`rte_eth_dev_start`); bursts on its queues work from now on.
    pub fn start(&mut self) -> Result<()> {
        if self.is_started() {
            return Ok(());
        }
        // SAFETY: valid, configured port owned by us.
        check("rte_eth_dev_start", unsafe {
            sys::rte_eth_dev_start(self.id())
        })?;
        self.shared.started.store(true, Ordering::Release);
        Ok(())
    }

    /// Stops the port. Every queue handle must be dropped first ([`Error::QueuesInUse`]): a
    /// burst running during `rte_eth_dev_stop` is undefined behaviour in DPDK.
    pub fn stop(&mut self) -> Result<()> {
        let handles = Arc::strong_count(&self.shared) - 1;
        if handles > 0 {
            return Err(Error::QueuesInUse {
                port: self.id(),
                handles,
            });
        }
        if !self.is_started() {
            return Ok(());
        }
        self.shared.started.store(false, Ordering::Release);
        // SAFETY: valid started port and no queue handle exists, so no burst is running.
        check("rte_eth_dev_stop", unsafe {
            sys::mrc_shim_dev_stop(self.id())
        })
        .map(drop)
    }

    /// Link state, without waiting (`rte_eth_link_get_nowait`).
    pub fn link(&self) -> Result<LinkStatus> {
        let mut link = sys::rte_eth_link::default();
        // SAFETY: valid port; `link` is a valid out-parameter.
        check("rte_eth_link_get_nowait", unsafe {
            sys::rte_eth_link_get_nowait(self.id(), &raw mut link)
        })?;
        let speed = link.link_speed;
        Ok(LinkStatus {
            up: u32::from(link.link_status()) == sys::RTE_ETH_LINK_UP,
            speed_mbps: (speed != sys::RTE_ETH_SPEED_NUM_NONE
                && speed != sys::RTE_ETH_SPEED_NUM_UNKNOWN)
                .then_some(speed),
            full_duplex: u32::from(link.link_duplex()) == sys::RTE_ETH_LINK_FULL_DUPLEX,
            autoneg: u32::from(link.link_autoneg()) == sys::RTE_ETH_LINK_AUTONEG,
        })
    }

    /// Basic counters (`rte_eth_stats_get`).
    pub fn stats(&self) -> Result<PortStats> {
        let mut s = sys::rte_eth_stats::default();
        // SAFETY: valid port; `s` is a valid out-parameter.
        check("rte_eth_stats_get", unsafe {
            sys::rte_eth_stats_get(self.id(), &raw mut s)
        })?;
        Ok(PortStats {
            ipackets: s.ipackets,
            opackets: s.opackets,
            ibytes: s.ibytes,
            obytes: s.obytes,
            imissed: s.imissed,
            ierrors: s.ierrors,
            oerrors: s.oerrors,
            rx_nombuf: s.rx_nombuf,
        })
    }

    /// Zeroes the basic counters.
    pub fn reset_stats(&mut self) -> Result<()> {
        // SAFETY: valid port.
        check("rte_eth_stats_reset", unsafe {
            sys::rte_eth_stats_reset(self.id())
        })
        .map(drop)
    }

    /// Turns promiscuous mode on or off (drivers without it fail with `ENOTSUP`).
    pub fn set_promiscuous(&mut self, on: bool) -> Result<()> {
        // SAFETY: valid port.
        let ret = unsafe {
            if on {
                sys::rte_eth_promiscuous_enable(self.id())
            } else {
                sys::rte_eth_promiscuous_disable(self.id())
            }
        };
        check(
            if on {
                "rte_eth_promiscuous_enable"
            } else {
                "rte_eth_promiscuous_disable"
            },
            ret,
        )
        .map(drop)
    }

    /// Whether promiscuous mode is on.
    pub fn is_promiscuous(&self) -> Result<bool> {
        // SAFETY: valid port.
        check("rte_eth_promiscuous_get", unsafe {
            sys::rte_eth_promiscuous_get(self.id())
        })
        .map(|on| on == 1)
    }

    /// The current MTU.
    pub fn mtu(&self) -> Result<u16> {
        let mut mtu = 0_u16;
        // SAFETY: valid port; `mtu` is a valid out-parameter.
        check("rte_eth_dev_get_mtu", unsafe {
            sys::rte_eth_dev_get_mtu(self.id(), &raw mut mtu)
        })?;
        Ok(mtu)
    }

    /// Changes the MTU (many drivers want the port stopped for this).
    pub fn set_mtu(&mut self, mtu: u16) -> Result<()> {
        // SAFETY: valid port.
        check("rte_eth_dev_set_mtu", unsafe {
            sys::rte_eth_dev_set_mtu(self.id(), mtu)
        })
        .map(drop)
    }
}
