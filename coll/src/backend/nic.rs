//! A rank on a software NIC (`mrc-nic`): its protection domain, completion queue, shared
//! buffers and QPs, what it tells its peers out of band ([`RankInfo`]), and the connection of
//! its QPs once every peer's information is known. Shared by the thread and process backends.

use std::net::Ipv6Addr;

use mrc_nic::io::mem::router_mac;
use mrc_nic::{MemoryRegion, NicError, NicHandle};
use mrc_srv6::wire::EthernetAddress;
use mrc_transport::verbs::{
    Access, CqHandle, InitAttr, QpCap, QpInitAttr, QpTransition, Qpn, RemoteNic, RtrAttr, RtsAttr,
};
use mrc_transport::{Duration, EndpointConfig, PathMode, PortConfig};

use super::{BufferSizes, RECV_VA, RankBuffers, SEND_VA, STAGE_VA};
use crate::comm::{CommSetup, PeerLink, Region};

/// The NIC address of rank `r` (a unique local address per rank).
pub fn rank_addr(r: usize) -> Ipv6Addr {
    Ipv6Addr::new(
        0xfd00,
        0x6d72,
        0x63,
        0xc011,
        0,
        0,
        (r >> 16) as u16,
        r as u16 + 1,
    )
}

/// An ECMP-mode engine for rank `r` with `planes` ports whose next hop is each plane's
/// switch (`router_mac`, the in-memory fabric's; DPDK ports resolve or use it as given).
/// Timers are relaxed for machines whose cores the NIC threads share.
pub fn endpoint_config(r: usize, planes: usize) -> EndpointConfig {
    let ports = (0..planes)
        .map(|p| PortConfig::new(EthernetAddress([2, 0, 0, 0, 0, 0]), router_mac(p as u8)))
        .collect();
    let mut cfg = EndpointConfig::new(0xc011 ^ r as u64, rank_addr(r), ports, PathMode::Ecmp);
    cfg.timers.initial_rtt = Duration::from_micros(500);
    cfg.timers.pto_min = Duration::from_millis(5);
    cfg
}

/// What a rank tells its peers: its address, its buffers and which of its QPs serves whom.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RankInfo {
    pub rank: usize,
    pub addr: Ipv6Addr,
    pub buffers: RankBuffers,
    /// (peer rank, local QPN).
    pub qpns: Vec<(usize, u32)>,
}

/// One rank's NIC resources.
#[derive(Debug)]
pub struct RankNic {
    pub rank: usize,
    pub addr: Ipv6Addr,
    pub handle: NicHandle,
    pub cq: CqHandle,
    /// Input, output and staging buffers (kept alive while the NIC uses them).
    pub memory: [MemoryRegion; 3],
    regions: [Region; 3],
    buffers: RankBuffers,
    qps: Vec<(usize, Qpn)>,
}

impl RankNic {
    /// PD, CQ, buffers and one QP (INIT) per peer.
    pub fn new(
        handle: &NicHandle,
        rank: usize,
        peers: &[usize],
        sizes: BufferSizes,
        cap: QpCap,
    ) -> Result<Self, NicError> {
        let pd = handle.alloc_pd()?;
        let depth = (cap.max_send_wr + cap.max_recv_wr) * peers.len().max(1) as u32;
        let cq = handle.create_cq(depth.next_power_of_two())?;
        let access = Access::LOCAL_WRITE | Access::REMOTE_WRITE;
        let mut memory = Vec::new();
        let mut regions = Vec::new();
        let mut rkeys = Vec::new();
        for (va, len) in [
            (SEND_VA, sizes.send),
            (RECV_VA, sizes.recv),
            (STAGE_VA, sizes.stage),
        ] {
            let m = MemoryRegion::new(len as usize);
            let keys = handle.reg_mr(pd, va, &m, access)?;
            memory.push(m);
            regions.push(Region {
                lkey: keys.lkey,
                va,
                len,
            });
            rkeys.push(keys.rkey);
        }
        let mut qps = Vec::new();
        for &peer in peers {
            let qpn = handle.create_qp(&QpInitAttr {
                pd,
                send_cq: cq,
                recv_cq: cq,
                cap,
                sq_sig_all: false,
            })?;
            handle.modify_qp(qpn, QpTransition::Init(InitAttr::default()))?;
            qps.push((peer, qpn));
        }
        let regions: [Region; 3] = regions.try_into().expect("three regions");
        Ok(Self {
            rank,
            addr: rank_addr(rank),
            handle: handle.clone(),
            cq,
            memory: memory.try_into().expect("three regions"),
            buffers: RankBuffers::of(regions[1], rkeys[1], regions[2], rkeys[2]),
            regions,
            qps,
        })
    }

    /// Its QPs, one per peer.
    pub fn qpns(&self) -> Vec<Qpn> {
        self.qps.iter().map(|&(_, q)| q).collect()
    }

    /// What the peers need.
    pub fn info(&self) -> RankInfo {
        RankInfo {
            rank: self.rank,
            addr: self.addr,
            buffers: self.buffers,
            qpns: self.qps.iter().map(|&(p, q)| (p, q.0)).collect(),
        }
    }

    /// Moves every QP to RTS towards its peer's QP (`infos` indexed by rank).
    pub fn connect(&self, infos: &[RankInfo]) -> Result<Vec<PeerLink>, NicError> {
        let mut links = Vec::new();
        for &(peer, qpn) in &self.qps {
            let theirs = &infos[peer];
            let dest = theirs
                .qpns
                .iter()
                .find(|(p, _)| *p == self.rank)
                .map(|&(_, q)| Qpn(q))
                .ok_or(NicError::Verbs(
                    mrc_transport::verbs::VerbsError::InvalidAttr(
                        "the peer has no QP towards this rank",
                    ),
                ))?;
            let remote = RemoteNic {
                addr: theirs.addr,
                host: None,
            };
            self.handle
                .modify_qp(qpn, QpTransition::Rtr(RtrAttr::new(remote, dest, 0)))?;
            self.handle
                .modify_qp(qpn, QpTransition::Rts(RtsAttr::new(0)))?;
            links.push(theirs.buffers.link(peer, qpn));
        }
        Ok(links)
    }

    /// The communicator of this rank.
    pub fn setup(
        &self,
        nranks: usize,
        links: Vec<PeerLink>,
        window: u32,
        recv_depth: u32,
    ) -> CommSetup {
        CommSetup {
            rank: self.rank,
            nranks,
            send: self.regions[0],
            recv: self.regions[1],
            stage: self.regions[2],
            links,
            window,
            recv_depth,
        }
    }
}

/// The peers of `rank` among `pairs`.
pub fn peers_of(rank: usize, pairs: &[(usize, usize)]) -> Vec<usize> {
    pairs
        .iter()
        .filter_map(|&(a, b)| {
            if a == rank {
                Some(b)
            } else if b == rank {
                Some(a)
            } else {
                None
            }
        })
        .collect()
}
