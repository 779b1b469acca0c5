//! Paths between two hosts, computed on demand from (src, dst, plane, index): never enumerated
//! up front, so the 131 072-host plan costs nothing to ask (docs/PROTOCOL.md "uSID
//! addressing", brief §2.16).
//!
//! In plane `p`, from host A (rack `a`) to host B (rack `b`, downlink `k`):
//! - through spine `s`: `block : T0(p,a) : T1(p,s) : T0(p,b) : last(B)`, index `s`;
//! - same rack, bounced off spine `s`: `block : T0(p,a) : T1(p,s) : T0(p,a) : last(B)`, index
//!   `s`; and straight through the T0: `block : T0(p,a) : last(B)`, the last index.
//!
//! `last(B)` is B's global uSID or `down(k)` (see [`super::HostMode`]). With adjacency
//! switch uSIDs ([`super::SwitchMode::Adjacency`]) the spine paths name the ports instead of
//! the switches after the first: `block : T0(p,a) : uA(uplink s) : uA(downlink b) : last(B)`.

use core::fmt;
use core::net::Ipv6Addr;

use crate::wire::{Usid, UsidContainer};

use super::{HostId, NodeId, Plan, SwitchId, SwitchMode, alloc};

/// Most hops (nodes that transmit the packet) on a path: host, T0, T1, T0.
pub const MAX_PATH_HOPS: usize = 4;

/// A node transmitting the packet, and the port it sends it out of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Hop {
    pub node: NodeId,
    pub egress_port: u16,
}

/// One source-routed path. Small and `Copy`: no allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Path {
    /// Plane = the source host's egress port.
    pub plane: u8,
    /// The spine the path crosses; `None` for the same-rack path straight through the T0.
    pub spine: Option<u16>,
    /// The path's index among [`Plan::path_count`] for its (src, dst, plane).
    pub index: u16,
    pub src: HostId,
    pub dst: HostId,
    /// The outer IPv6 destination address: the uSID container.
    pub da: Ipv6Addr,
    hops: [Hop; MAX_PATH_HOPS],
    hop_count: u8,
    usids: [Usid; MAX_PATH_HOPS],
    usid_count: u8,
}

impl Path {
    /// The transmitting nodes in order, from the source host, each with its egress port.
    pub fn hops(&self) -> &[Hop] {
        &self.hops[..usize::from(self.hop_count)]
    }

    /// The uSIDs of the container, in path order.
    pub fn usids(&self) -> &[Usid] {
        &self.usids[..usize::from(self.usid_count)]
    }

    /// True if the path crosses `switch`.
    pub fn crosses(&self, switch: SwitchId) -> bool {
        self.hops().iter().any(|h| h.node == NodeId::Switch(switch))
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} > {} plane {} ", self.src, self.dst, self.plane)?;
        match self.spine {
            Some(s) => write!(f, "spine {s}")?,
            None => f.write_str("direct")?,
        }
        write!(f, " da {} via", self.da)?;
        for hop in self.hops() {
            write!(f, " {}:{}", hop.node, hop.egress_port)?;
        }
        Ok(())
    }
}

/// A path request outside the plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    #[error("host {0} is not in the plan")]
    NoSuchHost(HostId),
    #[error("plane {0} is not in the plan")]
    NoSuchPlane(u8),
    #[error("source and destination are the same host {0}")]
    SameHost(HostId),
    #[error("path index {index} is out of range: there are {count} paths")]
    NoSuchPath { index: u32, count: u32 },
}

impl Plan {
    fn check_pair(&self, src: HostId, dst: HostId, plane: u8) -> Result<(), PathError> {
        for h in [src, dst] {
            if !self.has_host(h) {
                return Err(PathError::NoSuchHost(h));
            }
        }
        if plane >= self.planes {
            return Err(PathError::NoSuchPlane(plane));
        }
        if src == dst {
            return Err(PathError::SameHost(src));
        }
        Ok(())
    }

    /// Number of paths from `src` to `dst` in `plane`: one per spine, plus the direct one when
    /// both hosts share a rack.
    pub fn path_count(&self, src: HostId, dst: HostId, plane: u8) -> Result<u32, PathError> {
        self.check_pair(src, dst, plane)?;
        let same_rack = self.rack_of(src) == self.rack_of(dst);
        Ok(u32::from(self.t1_per_plane) + u32::from(same_rack))
    }

    /// Path `index` from `src` to `dst` in `plane` (index = spine; for a same-rack pair, the
    /// last index is the direct path). O(1).
    pub fn path(&self, src: HostId, dst: HostId, plane: u8, index: u32) -> Result<Path, PathError> {
        let count = self.path_count(src, dst, plane)?;
        if index >= count {
            return Err(PathError::NoSuchPath { index, count });
        }
        let (a, b) = (self.rack_of(src), self.rack_of(dst));
        let k = self.downlink_of(dst);
        let t0a = SwitchId::t0(plane, a);
        let t0b = SwitchId::t0(plane, b);
        let last = self.host_final_usid(dst);
        let host_hop = Hop {
            node: NodeId::Host(src),
            egress_port: u16::from(plane),
        };
        let spine = (index < u32::from(self.t1_per_plane)).then_some(index as u16);
        let (hops, hop_count, usids, usid_count) = if let Some(s) = spine {
            let t1 = SwitchId::t1(plane, s);
            (
                [
                    host_hop,
                    Hop {
                        node: NodeId::Switch(t0a),
                        egress_port: self.hosts_per_t0 + s,
                    },
                    Hop {
                        node: NodeId::Switch(t1),
                        egress_port: b,
                    },
                    Hop {
                        node: NodeId::Switch(t0b),
                        egress_port: k,
                    },
                ],
                4,
                match self.switch_mode {
                    SwitchMode::Node => [
                        self.switch_usid(t0a),
                        self.switch_usid(t1),
                        self.switch_usid(t0b),
                        last,
                    ],
                    SwitchMode::Adjacency => [
                        self.switch_usid(t0a),
                        alloc::adjacency_usid(self.hosts_per_t0 + s),
                        alloc::adjacency_usid(b),
                        last,
                    ],
                },
                4,
            )
        } else {
            let direct = Hop {
                node: NodeId::Switch(t0a),
                egress_port: k,
            };
            (
                [host_hop, direct, direct, direct],
                2,
                [self.switch_usid(t0a), last, last, last],
                2,
            )
        };
        let da = UsidContainer::new(self.format(), self.block, &usids[..usize::from(usid_count)])
            .expect("plan uSIDs are non-zero 16-bit values, at most 4")
            .addr();
        Ok(Path {
            plane,
            spine,
            index: index as u16,
            src,
            dst,
            da,
            hops,
            hop_count,
            usids,
            usid_count,
        })
    }

    /// The paths from `src` to `dst` in `plane`, computed lazily one at a time.
    pub fn paths(
        &self,
        src: HostId,
        dst: HostId,
        plane: u8,
    ) -> Result<impl Iterator<Item = Path> + '_, PathError> {
        let count = self.path_count(src, dst, plane)?;
        Ok((0..count).filter_map(move |i| self.path(src, dst, plane, i).ok()))
    }

    /// The paths from `src` to `dst` over every plane, plane by plane, lazily.
    pub fn paths_all_planes(
        &self,
        src: HostId,
        dst: HostId,
    ) -> Result<impl Iterator<Item = Path> + '_, PathError> {
        self.check_pair(src, dst, 0)?;
        Ok((0..self.planes).flat_map(move |p| {
            let count = self.path_count(src, dst, p).unwrap_or(0);
            (0..count).filter_map(move |i| self.path(src, dst, p, i).ok())
        }))
    }
}
