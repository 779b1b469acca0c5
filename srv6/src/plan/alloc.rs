//! The uSID allocation: ONE function of (plane, tier, index), and its inverse
//! (docs/PROTOCOL.md "uSID addressing", brief §2.16).
//!
//! | owner | uSID | range | room |
//! |---|---|---|---|
//! | T0 `i` of plane `p` (uN) | `0x1000 + 512 p + i` | `0x1000..=0x1fff` | 8 planes × 512 T0 |
//! | T1 `s` of plane `p` (uN) | `0x2000 + 256 p + s` | `0x2000..=0x27ff` | 8 planes × 256 T1 |
//! | host `h` ("global" mode) | `0x8000 + h` | `0x8000..=0xdfff` | 24 576 hosts |
//! | downlink `k` of a T0 (local) | `0xe000 + k` | `0xe000..=0xe0ff` | 256 per T0 |
//! | adjacency out of port `p` (local uA) | `0xe800 + p` | `0xe800..=0xe9ff` | 512 per switch |
//!
//! Downlink uSIDs are local to each T0 (the same value means "leave on downlink k" on every
//! T0), which is what lets the "downlink" host mode address 8 × 512 × 256 = 131 072 hosts
//! (brief §5.4) with 16-bit uSIDs. Adjacency uSIDs (uA, RFC 9800's End.X with NEXT-C-SID) are
//! local the same way: "shift, then leave by port `p`" on whichever switch reads them, in plans
//! whose switches use them ([`super::SwitchMode::Adjacency`]). uSID 0 is End-of-Container and
//! is never allocated.

use crate::wire::Usid;

use super::{HostId, SwitchId, Tier};

/// Most planes a plan may have.
pub const MAX_PLANES: u32 = 8;
/// Most T0 switches (racks) per plane.
pub const MAX_T0_PER_PLANE: u32 = 512;
/// Most T1 switches (spines) per plane.
pub const MAX_T1_PER_PLANE: u32 = 256;
/// Most hosts (downlinks) per T0.
pub const MAX_HOSTS_PER_T0: u32 = 256;
/// Most hosts with a global uSID ("global" host mode).
pub const MAX_GLOBAL_HOSTS: u32 = 0x6000;
/// Most ports of a switch with an adjacency uSID (a T0's 256 downlinks and 256 uplinks, or a
/// T1's 512 downlinks).
pub const MAX_SWITCH_PORTS: u32 = 512;

const T0_BASE: u32 = 0x1000;
const T1_BASE: u32 = 0x2000;
const HOST_BASE: u32 = 0x8000;
const DOWNLINK_BASE: u32 = 0xe000;
const ADJACENCY_BASE: u32 = 0xe800;

/// What a uSID names, by the allocation alone (without checking a plan's sizes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UsidOwner {
    /// A switch's uN uSID.
    Switch(SwitchId),
    /// A host's global uSID.
    Host(HostId),
    /// Downlink `k` of whichever T0 reads it.
    Downlink(u16),
    /// The adjacency out of port `p` of whichever switch reads it (uA).
    Adjacency(u16),
}

/// The uN uSID of a switch. Panics outside the allocation's limits (plans are validated
/// against them first).
pub fn switch_usid(switch: SwitchId) -> Usid {
    let (p, i) = (u32::from(switch.plane), u32::from(switch.index));
    match switch.tier {
        Tier::T0 => {
            assert!(
                p < MAX_PLANES && i < MAX_T0_PER_PLANE,
                "T0 {switch} outside allocation"
            );
            Usid(T0_BASE + p * MAX_T0_PER_PLANE + i)
        }
        Tier::T1 => {
            assert!(
                p < MAX_PLANES && i < MAX_T1_PER_PLANE,
                "T1 {switch} outside allocation"
            );
            Usid(T1_BASE + p * MAX_T1_PER_PLANE + i)
        }
    }
}

/// The global uSID of a host ("global" host mode).
pub fn host_usid(host: HostId) -> Usid {
    assert!(
        host.0 < MAX_GLOBAL_HOSTS,
        "host {host} outside the global uSID range"
    );
    Usid(HOST_BASE + host.0)
}

/// The local uSID of downlink `k` of a T0.
pub fn downlink_usid(k: u16) -> Usid {
    assert!(
        u32::from(k) < MAX_HOSTS_PER_T0,
        "downlink {k} outside allocation"
    );
    Usid(DOWNLINK_BASE + u32::from(k))
}

/// The local uA uSID of port `p` of a switch: shift, then leave by that port.
pub fn adjacency_usid(p: u16) -> Usid {
    assert!(
        u32::from(p) < MAX_SWITCH_PORTS,
        "port {p} outside the adjacency allocation"
    );
    Usid(ADJACENCY_BASE + u32::from(p))
}

/// The inverse: which node (or downlink) a uSID names, or `None` outside every range.
pub fn owner(usid: Usid) -> Option<UsidOwner> {
    let v = usid.0;
    let owner = match v {
        _ if (T0_BASE..T0_BASE + MAX_PLANES * MAX_T0_PER_PLANE).contains(&v) => {
            let off = v - T0_BASE;
            UsidOwner::Switch(SwitchId {
                plane: (off / MAX_T0_PER_PLANE) as u8,
                tier: Tier::T0,
                index: (off % MAX_T0_PER_PLANE) as u16,
            })
        }
        _ if (T1_BASE..T1_BASE + MAX_PLANES * MAX_T1_PER_PLANE).contains(&v) => {
            let off = v - T1_BASE;
            UsidOwner::Switch(SwitchId {
                plane: (off / MAX_T1_PER_PLANE) as u8,
                tier: Tier::T1,
                index: (off % MAX_T1_PER_PLANE) as u16,
            })
        }
        _ if (HOST_BASE..HOST_BASE + MAX_GLOBAL_HOSTS).contains(&v) => {
            UsidOwner::Host(HostId(v - HOST_BASE))
        }
        _ if (DOWNLINK_BASE..DOWNLINK_BASE + MAX_HOSTS_PER_T0).contains(&v) => {
            UsidOwner::Downlink((v - DOWNLINK_BASE) as u16)
        }
        _ if (ADJACENCY_BASE..ADJACENCY_BASE + MAX_SWITCH_PORTS).contains(&v) => {
            UsidOwner::Adjacency((v - ADJACENCY_BASE) as u16)
        }
        _ => return None,
    };
    Some(owner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn allocation_is_injective_and_invertible_at_full_scale() {
        let mut seen = HashSet::new();
        for plane in 0..MAX_PLANES as u8 {
            for (tier, n) in [(Tier::T0, MAX_T0_PER_PLANE), (Tier::T1, MAX_T1_PER_PLANE)] {
                for index in 0..n as u16 {
                    let sw = SwitchId { plane, tier, index };
                    let u = switch_usid(sw);
                    assert!(u.0 != 0 && u.0 <= 0xffff);
                    assert!(seen.insert(u), "{sw} collides");
                    assert_eq!(owner(u), Some(UsidOwner::Switch(sw)));
                }
            }
        }
        for h in 0..MAX_GLOBAL_HOSTS {
            let u = host_usid(HostId(h));
            assert!(u.0 <= 0xffff && seen.insert(u));
            assert_eq!(owner(u), Some(UsidOwner::Host(HostId(h))));
        }
        for k in 0..MAX_HOSTS_PER_T0 as u16 {
            let u = downlink_usid(k);
            assert!(u.0 <= 0xffff && seen.insert(u));
            assert_eq!(owner(u), Some(UsidOwner::Downlink(k)));
        }
        for port in 0..MAX_SWITCH_PORTS as u16 {
            let u = adjacency_usid(port);
            assert!(u.0 <= 0xffff && seen.insert(u));
            assert_eq!(owner(u), Some(UsidOwner::Adjacency(port)));
        }
        assert_eq!(owner(Usid(0)), None);
        assert_eq!(owner(Usid(0x3000)), None);
        assert_eq!(owner(Usid(0xffff)), None);
    }

    #[test]
    fn documented_values() {
        let t0 = |plane, index| SwitchId {
            plane,
            tier: Tier::T0,
            index,
        };
        let t1 = |plane, index| SwitchId {
            plane,
            tier: Tier::T1,
            index,
        };
        assert_eq!(switch_usid(t0(0, 0)), Usid(0x1000));
        assert_eq!(switch_usid(t0(1, 3)), Usid(0x1203));
        assert_eq!(switch_usid(t0(7, 511)), Usid(0x1fff));
        assert_eq!(switch_usid(t1(1, 1)), Usid(0x2101));
        assert_eq!(switch_usid(t1(7, 255)), Usid(0x27ff));
        assert_eq!(host_usid(HostId(3)), Usid(0x8003));
        assert_eq!(downlink_usid(255), Usid(0xe0ff));
        assert_eq!(adjacency_usid(2), Usid(0xe802));
        assert_eq!(adjacency_usid(511), Usid(0xe9ff));
    }
}
