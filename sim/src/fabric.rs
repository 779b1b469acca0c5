//! The fabric of a plan, flattened for speed: every node's egress ports in one vector indexed
//! by [`PortId`], with the link to the peer's port; switches with their plan identity and a
//! "stopped forwarding" flag.
//!
//! Port layout: host `h` owns ports `h * planes .. (h + 1) * planes` (port `p` = plane `p`);
//! the switches follow, each a contiguous block in the plan's port numbering
//! (`mrc_srv6::plan` module docs).

use mrc_srv6::plan::{HostId, LinkTier, NodeId, Plan, SwitchId, Tier};

use crate::config::SimConfig;
use crate::port::Port;
use crate::queue::PortId;

/// Who owns a port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    Host(u32),
    /// A switch, by its index in [`Fabric::switches`].
    Switch(u32),
}

/// Where an egress port sits in the fabric, for the queue-occupancy series (issue #14): the
/// four hops a packet's queues can build at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum QueueTier {
    /// A host's port towards its T0 (the NIC's TX ring).
    HostUplink,
    /// A T0's port towards a T1.
    T0Uplink,
    /// A T1's port towards a T0.
    T1Downlink,
    /// A T0's port towards a host: the last hop.
    T0Downlink,
}

impl QueueTier {
    /// Every tier, in a packet's order.
    pub const ALL: [Self; 4] = [
        Self::HostUplink,
        Self::T0Uplink,
        Self::T1Downlink,
        Self::T0Downlink,
    ];

    /// Short name for tables and plots.
    pub fn name(self) -> &'static str {
        match self {
            Self::HostUplink => "host uplink",
            Self::T0Uplink => "T0 uplink",
            Self::T1Downlink => "T1 downlink",
            Self::T0Downlink => "T0 downlink",
        }
    }

    fn of(node: NodeId, tier: LinkTier) -> Self {
        match (node, tier) {
            (NodeId::Host(_), _) => Self::HostUplink,
            (NodeId::Switch(s), LinkTier::Host) if s.tier == Tier::T0 => Self::T0Downlink,
            (NodeId::Switch(s), _) if s.tier == Tier::T0 => Self::T0Uplink,
            (NodeId::Switch(_), _) => Self::T1Downlink,
        }
    }
}

/// Counters of a switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct SwitchStats {
    pub forwarded: u64,
    /// Dropped: no route for the active uSID (or not in the block, or exhausted).
    pub no_route: u64,
    /// Dropped because the switch had stopped forwarding.
    pub dead_dropped: u64,
}

/// One switch.
#[derive(Debug, Clone)]
pub struct Switch {
    pub id: SwitchId,
    /// First port's id; port `k` is `base + k`.
    pub base: PortId,
    /// Control plane up, forwarding dead (brief §6.1).
    pub dead: bool,
    pub stats: SwitchStats,
}

/// Ports, links and switches of a plan.
#[derive(Debug)]
pub struct Fabric {
    pub ports: Vec<Port>,
    /// Owner and local port number of every port.
    pub owner: Vec<(Owner, u16)>,
    /// The hop every port is, by port id.
    pub tiers: Vec<QueueTier>,
    pub switches: Vec<Switch>,
    pub planes: u8,
    t0: u16,
    t1: u16,
}

impl Fabric {
    /// Build every node and link of `plan`.
    pub fn build(plan: &Plan, cfg: &SimConfig) -> Self {
        let planes = plan.planes();
        let (t0, t1) = (plan.t0_per_plane(), plan.t1_per_plane());
        let mut owner = Vec::new();
        for h in plan.hosts() {
            for p in 0..u16::from(planes) {
                owner.push((Owner::Host(h.0), p));
            }
        }
        let mut switches = Vec::new();
        for (i, s) in plan.switches().enumerate() {
            let base = owner.len() as PortId;
            for k in 0..plan.port_count(NodeId::Switch(s)) {
                owner.push((Owner::Switch(i as u32), k));
            }
            switches.push(Switch {
                id: s,
                base,
                dead: false,
                stats: SwitchStats::default(),
            });
        }
        let mut f = Self {
            ports: Vec::with_capacity(owner.len()),
            tiers: Vec::with_capacity(owner.len()),
            owner,
            switches,
            planes,
            t0,
            t1,
        };
        let host_model = cfg.host_port(plan);
        for id in 0..f.owner.len() as PortId {
            let node = f.node_of(id);
            let local = f.owner[id as usize].1;
            let link = plan.link(node, local).expect("every built port has a link");
            let peer = f.port_of(link.peer, link.peer_port);
            let model = match node {
                NodeId::Host(_) => host_model.clone(),
                NodeId::Switch(s) => {
                    let last_hop = s.tier == Tier::T0 && link.tier == LinkTier::Host;
                    cfg.switch_port(link.params, last_hop)
                }
            };
            f.ports.push(Port::new(model, peer));
            f.tiers.push(QueueTier::of(node, link.tier));
        }
        f
    }

    /// Index of a switch in [`Fabric::switches`].
    pub fn switch_index(&self, s: SwitchId) -> u32 {
        let per_plane = u32::from(self.t0) + u32::from(self.t1);
        let within = match s.tier {
            Tier::T0 => u32::from(s.index),
            Tier::T1 => u32::from(self.t0) + u32::from(s.index),
        };
        u32::from(s.plane) * per_plane + within
    }

    /// The port `local` of a plan node.
    pub fn port_of(&self, node: NodeId, local: u16) -> PortId {
        match node {
            NodeId::Host(h) => h.0 * u32::from(self.planes) + u32::from(local),
            NodeId::Switch(s) => {
                self.switches[self.switch_index(s) as usize].base + PortId::from(local)
            }
        }
    }

    /// The plan node owning a port.
    pub fn node_of(&self, port: PortId) -> NodeId {
        match self.owner[port as usize].0 {
            Owner::Host(h) => NodeId::Host(HostId(h)),
            Owner::Switch(i) => NodeId::Switch(self.switches[i as usize].id),
        }
    }

    /// The port of `a` whose link leads to `b`, if they are neighbours.
    pub fn port_towards(&self, plan: &Plan, a: NodeId, b: NodeId) -> Option<PortId> {
        (0..plan.port_count(a))
            .find(|&k| plan.link(a, k).is_some_and(|l| l.peer == b))
            .map(|k| self.port_of(a, k))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_port_is_the_hop_it_leads_to() {
        // 2 planes × 3 racks × 4 hosts, 5 spines per plane.
        let text = crate::experiments::fabric_toml(
            "t",
            2,
            3,
            5,
            4,
            50,
            512 * 1024,
            crate::experiments::LATENCY_NS,
        );
        let plan = Plan::from_toml(&text, "<t>").unwrap();
        let f = Fabric::build(&plan, &SimConfig::default());
        let count = |t: QueueTier| f.tiers.iter().filter(|&&x| x == t).count();
        assert_eq!(f.tiers.len(), f.ports.len());
        assert_eq!(count(QueueTier::HostUplink), 2 * 12);
        assert_eq!(count(QueueTier::T0Downlink), 2 * 12);
        assert_eq!(count(QueueTier::T0Uplink), 2 * 3 * 5);
        assert_eq!(count(QueueTier::T1Downlink), 2 * 5 * 3);
        // A host's port leads to its T0; a T0 downlink back to a host.
        for (id, &tier) in f.tiers.iter().enumerate() {
            let peer = f.node_of(f.ports[id].peer);
            let expect_host_peer = tier == QueueTier::T0Downlink;
            assert_eq!(
                matches!(peer, NodeId::Host(_)),
                expect_host_peer,
                "port {id}"
            );
        }
    }
}
