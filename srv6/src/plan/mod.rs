//! The fabric plan: a multi-plane two-tier Clos (brief §5.4) described by a TOML file, with the
//! uSID allocation (docs/PROTOCOL.md "uSID addressing") that names every switch, every path
//! between two hosts and every switch's static forwarding table. Reading the TOML (`config.rs`)
//! is the `toml` feature, on by default.
//!
//! - Every host has one port per plane; port `p` connects to T0(`p`, rack of the host) on the
//!   T0's downlink `k` (the host's position in its rack).
//! - Every T0 of a plane connects to every T1 of that plane.
//! - Paths are computed on demand (never enumerated up front) from (src, dst, plane, index):
//!   see [`Plan::path`].
//! - Switches forward by shift-and-lookup on static tables (brief §5.1): [`Plan::switch_table`]
//!   gives the table as data, [`Plan::lookup`] does what the switch does to one address.
//! - [`Plan::linux_config`] makes Linux network namespaces behave as the plan's switches.
//!
//! Port numbering, used by paths, tables and links:
//!
//! | node | ports |
//! |---|---|
//! | host `h` | `p` = plane `p`, towards T0(`p`, rack) |
//! | T0(`p`, `i`) | `0..hosts_per_t0`: downlink `k` to host `i * hosts_per_t0 + k`; then `hosts_per_t0 + s`: uplink to T1(`p`, `s`) |
//! | T1(`p`, `s`) | `i`: to T0(`p`, `i`) |

use core::fmt;
use core::net::Ipv6Addr;
use core::str::FromStr;

use crate::wire::{Usid, UsidFormat};

pub mod alloc;
#[cfg(feature = "toml")]
mod config;
mod linux;
mod path;
mod table;

pub use alloc::UsidOwner;
#[cfg(feature = "toml")]
pub use config::{PlanError, SMALL_PLAN_TOML};
pub use linux::{LinuxError, LinuxPart};
pub use path::{Hop, MAX_PATH_HOPS, Path, PathError};
pub use table::{DropReason, Forward, Route, RouteAction, Trace, TraceEnd};

/// A host, numbered rack by rack: host `h` sits in rack `h / hosts_per_t0` on downlink
/// `h % hosts_per_t0`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HostId(pub u32);

impl fmt::Display for HostId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "h{}", self.0)
    }
}

/// Switch tier: T0 (leaf, one per rack and plane) or T1 (spine).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Tier {
    T0,
    T1,
}

/// A switch: tier, plane and index within the plane (the rack for a T0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SwitchId {
    pub plane: u8,
    pub tier: Tier,
    pub index: u16,
}

impl SwitchId {
    /// T0 `rack` of `plane`.
    pub const fn t0(plane: u8, rack: u16) -> Self {
        Self {
            plane,
            tier: Tier::T0,
            index: rack,
        }
    }

    /// T1 `spine` of `plane`.
    pub const fn t1(plane: u8, spine: u16) -> Self {
        Self {
            plane,
            tier: Tier::T1,
            index: spine,
        }
    }
}

impl fmt::Display for SwitchId {
    /// `t0-<plane>-<index>` or `t1-<plane>-<index>`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tier = match self.tier {
            Tier::T0 => "t0",
            Tier::T1 => "t1",
        };
        write!(f, "{tier}-{}-{}", self.plane, self.index)
    }
}

/// Any node of the fabric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum NodeId {
    Host(HostId),
    Switch(SwitchId),
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Host(h) => h.fmt(f),
            Self::Switch(s) => s.fmt(f),
        }
    }
}

/// A node name that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad node name {0:?}: expected h<host>, t0-<plane>-<rack> or t1-<plane>-<spine>")]
pub struct NodeNameError(pub String);

impl FromStr for NodeId {
    type Err = NodeNameError;

    /// `h3` (or just `3`), `t0-1-0`, `t1-0-1`.
    fn from_str(s: &str) -> Result<Self, NodeNameError> {
        let bad = || NodeNameError(s.to_owned());
        let number = |v: &str| v.parse::<u32>().map_err(|_| bad());
        if let Some(rest) = s.strip_prefix('h') {
            return Ok(Self::Host(HostId(number(rest)?)));
        }
        if let Ok(h) = s.parse::<u32>() {
            return Ok(Self::Host(HostId(h)));
        }
        let mut parts = s.split('-');
        let tier = match parts.next() {
            Some("t0") => Tier::T0,
            Some("t1") => Tier::T1,
            _ => return Err(bad()),
        };
        let plane = u8::try_from(number(parts.next().ok_or_else(bad)?)?).map_err(|_| bad())?;
        let index = u16::try_from(number(parts.next().ok_or_else(bad)?)?).map_err(|_| bad())?;
        if parts.next().is_some() {
            return Err(bad());
        }
        Ok(Self::Switch(SwitchId { plane, tier, index }))
    }
}

/// How the last uSID of a path names the destination host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "toml",
    derive(serde::Deserialize),
    serde(rename_all = "lowercase")
)]
pub enum HostMode {
    /// The last uSID is the destination T0's local downlink uSID: scales to 131 072 hosts.
    Downlink,
    /// Every host owns a global uSID, the last of the path: what a Linux host needs, since an
    /// exhausted container must end on an address the host owns (at most 24 576 hosts).
    Global,
}

/// What the uSIDs of a path name at the switches after the first (the first is always the
/// source T0's uN uSID).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(
    feature = "toml",
    derive(serde::Deserialize),
    serde(rename_all = "lowercase")
)]
pub enum SwitchMode {
    /// Nodes (uN, `End` with NEXT-C-SID): each switch shifts its own uSID and forwards on the
    /// next one, the spine by its own uN uSID: `block : T0 : T1 : T0 : last`.
    #[default]
    Node,
    /// Adjacencies (uA, `End.X` with NEXT-C-SID): after the source T0's uN uSID, each uSID names
    /// the port the switch reading it leaves by, with no lookup: `block : T0 : uA(uplink) :
    /// uA(downlink) : last`. Linux has it from 6.x (Debian's 6.12; 6.1 accepts the route and
    /// drops the flavor).
    Adjacency,
}

/// The two link tiers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LinkTier {
    /// Host port to T0 downlink.
    Host,
    /// T0 uplink to T1.
    Fabric,
}

/// Optional queue parameters of the egress ports onto a link tier, for the simulator.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct QueueParams {
    /// Egress buffer per port.
    pub buffer_bytes: Option<u64>,
    /// Queue depth where ECN marking starts.
    pub ecn_min_bytes: Option<u64>,
    /// Queue depth where the marking probability reaches `ecn_max_prob`.
    pub ecn_max_bytes: Option<u64>,
    /// Marking probability at `ecn_max_bytes`, in (0, 1].
    pub ecn_max_prob: Option<f64>,
}

/// Parameters of every link of one tier (both directions).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinkParams {
    pub speed_gbps: u32,
    /// One-way propagation latency.
    pub latency_ns: u64,
    pub queue: QueueParams,
}

/// One end of a link, seen from a node's port.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Link {
    pub tier: LinkTier,
    pub peer: NodeId,
    pub peer_port: u16,
    pub params: LinkParams,
}

/// A validated fabric plan. Build it with `Plan::from_toml`, `Plan::load` or `Plan::builtin`
/// (feature `toml`, on by default).
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub(crate) name: String,
    pub(crate) planes: u8,
    pub(crate) t0_per_plane: u16,
    pub(crate) t1_per_plane: u16,
    pub(crate) hosts_per_t0: u16,
    pub(crate) block: Ipv6Addr,
    pub(crate) host_mode: HostMode,
    pub(crate) switch_mode: SwitchMode,
    pub(crate) nic_prefix: Ipv6Addr,
    pub(crate) nic_prefix_len: u8,
    pub(crate) mtu: u32,
    pub(crate) host_link: LinkParams,
    pub(crate) fabric_link: LinkParams,
    #[cfg(feature = "toml")]
    pub(crate) sim: toml::Table,
}

impl Plan {
    /// The plan's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Number of planes (= ports per host).
    pub fn planes(&self) -> u8 {
        self.planes
    }

    /// T0 switches (racks) per plane.
    pub fn t0_per_plane(&self) -> u16 {
        self.t0_per_plane
    }

    /// T1 switches (spines) per plane.
    pub fn t1_per_plane(&self) -> u16 {
        self.t1_per_plane
    }

    /// Hosts per T0 (per rack).
    pub fn hosts_per_t0(&self) -> u16 {
        self.hosts_per_t0
    }

    /// Number of hosts.
    pub fn host_count(&self) -> u32 {
        u32::from(self.t0_per_plane) * u32::from(self.hosts_per_t0)
    }

    /// Number of switches over all planes.
    pub fn switch_count(&self) -> u32 {
        u32::from(self.planes) * (u32::from(self.t0_per_plane) + u32::from(self.t1_per_plane))
    }

    /// The uSID format (F3216).
    pub fn format(&self) -> UsidFormat {
        UsidFormat::F3216
    }

    /// The uSID locator block (a /32).
    pub fn block(&self) -> Ipv6Addr {
        self.block
    }

    /// How hosts are addressed by the last uSID.
    pub fn host_mode(&self) -> HostMode {
        self.host_mode
    }

    /// What a path's uSIDs name after the source T0.
    pub fn switch_mode(&self) -> SwitchMode {
        self.switch_mode
    }

    /// IP MTU of every link.
    pub fn mtu(&self) -> u32 {
        self.mtu
    }

    /// Parameters of a link tier.
    pub fn link_params(&self, tier: LinkTier) -> LinkParams {
        match tier {
            LinkTier::Host => self.host_link,
            LinkTier::Fabric => self.fabric_link,
        }
    }

    /// The free-form `[sim]` table of the plan file (empty if absent), for the simulator.
    #[cfg(feature = "toml")]
    pub fn sim(&self) -> &toml::Table {
        &self.sim
    }

    /// True if `host` exists.
    pub fn has_host(&self, host: HostId) -> bool {
        host.0 < self.host_count()
    }

    /// True if `switch` exists.
    pub fn has_switch(&self, switch: SwitchId) -> bool {
        let n = match switch.tier {
            Tier::T0 => self.t0_per_plane,
            Tier::T1 => self.t1_per_plane,
        };
        switch.plane < self.planes && switch.index < n
    }

    /// The rack (T0 index) of a host.
    pub fn rack_of(&self, host: HostId) -> u16 {
        (host.0 / u32::from(self.hosts_per_t0)) as u16
    }

    /// The T0 downlink a host hangs off (its position in the rack).
    pub fn downlink_of(&self, host: HostId) -> u16 {
        (host.0 % u32::from(self.hosts_per_t0)) as u16
    }

    /// The host on downlink `k` of rack `rack`.
    pub fn host_at(&self, rack: u16, k: u16) -> HostId {
        HostId(u32::from(rack) * u32::from(self.hosts_per_t0) + u32::from(k))
    }

    /// The uN uSID of a switch.
    pub fn switch_usid(&self, switch: SwitchId) -> Usid {
        alloc::switch_usid(switch)
    }

    /// The last uSID of every path to `host`: its global uSID or its T0 downlink uSID.
    pub fn host_final_usid(&self, host: HostId) -> Usid {
        match self.host_mode {
            HostMode::Global => alloc::host_usid(host),
            HostMode::Downlink => alloc::downlink_usid(self.downlink_of(host)),
        }
    }

    /// The address in the uSID block that packets reach `host` with (`block : final uSID ::`);
    /// the host owns it (in "downlink" mode every host on downlink `k` of any rack shares it).
    pub fn host_sid_addr(&self, host: HostId) -> Ipv6Addr {
        self.format()
            .locator(self.block, self.host_final_usid(host))
    }

    /// The NIC address of a host (the inner IPv6 destination): `nic_prefix + host + 1`.
    pub fn nic_addr(&self, host: HostId) -> Ipv6Addr {
        Ipv6Addr::from(u128::from(self.nic_prefix) + u128::from(host.0) + 1)
    }

    /// The host owning a NIC address, if any.
    pub fn host_of_nic(&self, addr: Ipv6Addr) -> Option<HostId> {
        let host_bits = 128 - u32::from(self.nic_prefix_len);
        let a = u128::from(addr);
        if a >> host_bits != u128::from(self.nic_prefix) >> host_bits {
            return None;
        }
        let offset = (a - u128::from(self.nic_prefix)).checked_sub(1)?;
        let host = HostId(u32::try_from(offset).ok()?);
        self.has_host(host).then_some(host)
    }

    /// What a uSID names in this plan (`None` if nothing of this plan owns it; downlinks only in
    /// "downlink" mode, host uSIDs only in "global" mode).
    pub fn usid_owner(&self, usid: Usid) -> Option<UsidOwner> {
        let owner = alloc::owner(usid)?;
        let exists = match owner {
            UsidOwner::Switch(s) => self.has_switch(s),
            UsidOwner::Host(h) => self.host_mode == HostMode::Global && self.has_host(h),
            UsidOwner::Downlink(k) => self.host_mode == HostMode::Downlink && k < self.hosts_per_t0,
            UsidOwner::Adjacency(p) => {
                self.switch_mode == SwitchMode::Adjacency
                    && p < (self.hosts_per_t0 + self.t1_per_plane).max(self.t0_per_plane)
            }
        };
        exists.then_some(owner)
    }

    /// Number of ports of a node (0 for a node outside the plan).
    pub fn port_count(&self, node: NodeId) -> u16 {
        match node {
            NodeId::Host(h) if self.has_host(h) => u16::from(self.planes),
            NodeId::Switch(s) if self.has_switch(s) => match s.tier {
                Tier::T0 => self.hosts_per_t0 + self.t1_per_plane,
                Tier::T1 => self.t0_per_plane,
            },
            _ => 0,
        }
    }

    /// The link on `port` of `node`: who is at the other end, on which port, and its
    /// parameters. `None` for a port or node outside the plan.
    pub fn link(&self, node: NodeId, port: u16) -> Option<Link> {
        if port >= self.port_count(node) {
            return None;
        }
        let (tier, peer, peer_port) = match node {
            NodeId::Host(h) => {
                let t0 = SwitchId::t0(port as u8, self.rack_of(h));
                (LinkTier::Host, NodeId::Switch(t0), self.downlink_of(h))
            }
            NodeId::Switch(s) => match s.tier {
                Tier::T0 if port < self.hosts_per_t0 => (
                    LinkTier::Host,
                    NodeId::Host(self.host_at(s.index, port)),
                    u16::from(s.plane),
                ),
                Tier::T0 => {
                    let spine = port - self.hosts_per_t0;
                    (
                        LinkTier::Fabric,
                        NodeId::Switch(SwitchId::t1(s.plane, spine)),
                        s.index,
                    )
                }
                Tier::T1 => (
                    LinkTier::Fabric,
                    NodeId::Switch(SwitchId::t0(s.plane, port)),
                    self.hosts_per_t0 + s.index,
                ),
            },
        };
        Some(Link {
            tier,
            peer,
            peer_port,
            params: self.link_params(tier),
        })
    }

    /// A deterministic, locally administered MAC for `port` of `node`:
    /// `02 | tier (2 bits) plane (4) index (18) port (16)`. Unique over the whole plan.
    pub fn mac(&self, node: NodeId, port: u16) -> [u8; 6] {
        let (tier, plane, index) = match node {
            NodeId::Host(h) => (0u64, 0u64, u64::from(h.0)),
            NodeId::Switch(s) => (
                match s.tier {
                    Tier::T0 => 1,
                    Tier::T1 => 2,
                },
                u64::from(s.plane),
                u64::from(s.index),
            ),
        };
        let bits =
            (tier << 38) | ((plane & 0xf) << 34) | ((index & 0x3_ffff) << 16) | u64::from(port);
        let b = bits.to_be_bytes();
        [0x02, b[3], b[4], b[5], b[6], b[7]]
    }

    /// Every switch, plane by plane, T0s then T1s.
    pub fn switches(&self) -> impl Iterator<Item = SwitchId> + '_ {
        (0..self.planes).flat_map(move |p| {
            (0..self.t0_per_plane)
                .map(move |i| SwitchId::t0(p, i))
                .chain((0..self.t1_per_plane).map(move |s| SwitchId::t1(p, s)))
        })
    }

    /// Every host.
    pub fn hosts(&self) -> impl Iterator<Item = HostId> + use<> {
        (0..self.host_count()).map(HostId)
    }
}

// Every test builds its plan from TOML.
#[cfg(all(test, feature = "toml"))]
mod tests;
