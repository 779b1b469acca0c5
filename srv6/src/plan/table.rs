//! Static forwarding tables of the plan's switches, and the switch's shift-and-lookup
//! (brief §5.1, RFC 9800 §4.1): match own uN uSID → shift (End with NEXT-C-SID) → look the new
//! address up: neighbour switch uSID /48 → that port, local downlink (or own host's global
//! uSID) /48 → that downlink.
//!
//! Tables are produced lazily from the allocation: a T0 has 1 + T1s + hosts-per-T0 routes, a T1
//! has 1 + T0s routes, whatever the number of hosts. [`Plan::lookup`] computes the same answer
//! in O(1) from the allocation's inverse.

use core::fmt;
use core::net::Ipv6Addr;

use crate::wire::UsidContainer;

use super::{HostId, NodeId, Plan, SwitchId, SwitchMode, Tier, UsidOwner, alloc};

/// What a route does with a matching packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RouteAction {
    /// The switch's own uN uSID: End with the NEXT-C-SID flavor (shift, then look up again).
    End,
    /// One of the switch's uA uSIDs: End.X with the NEXT-C-SID flavor (shift, then out of this
    /// port, no lookup).
    EndX(u16),
    /// Send out of this port unchanged.
    Port(u16),
}

/// One entry of a switch's static table: `prefix/prefix_len -> action`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Route {
    pub prefix: Ipv6Addr,
    pub prefix_len: u8,
    pub action: RouteAction,
}

impl fmt::Display for Route {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{} ", self.prefix, self.prefix_len)?;
        match self.action {
            RouteAction::End => f.write_str("End (next-csid)"),
            RouteAction::EndX(p) => write!(f, "End.X (next-csid) port {p}"),
            RouteAction::Port(p) => write!(f, "port {p}"),
        }
    }
}

/// Why a switch drops a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// The destination is outside the uSID block: the switch has no route.
    NotInBlock,
    /// The active uSID names nothing this switch has a route for.
    NoRoute,
    /// The switch's uSID was active with nothing after it, or the container was empty.
    EmptyContainer,
}

/// What a switch does with a destination address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Forward {
    /// Send out of `port` with destination `da` (shifted if the switch's own uSID was active).
    Out { port: u16, da: Ipv6Addr },
    /// The switch's uSID was active and last: the container is exhausted and the switch falls
    /// back to End (RFC 9800 §4.1). With an SRH whose segments left is > 0 the caller moves to
    /// the next segment and looks up again; without one the packet is dropped.
    Exhausted { da: Ipv6Addr },
    /// Dropped.
    Drop(DropReason),
}

impl Plan {
    /// The static table of `switch`: own End, then one /48 per neighbour. Lazy; a switch
    /// outside the plan yields nothing.
    pub fn switch_table(&self, switch: SwitchId) -> impl Iterator<Item = Route> + '_ {
        let f = self.format();
        let len = f.locator_len();
        let exists = self.has_switch(switch);
        let route = move |usid, action| Route {
            prefix: f.locator(self.block, usid),
            prefix_len: len,
            action,
        };
        let own = exists.then(|| route(self.switch_usid(switch), RouteAction::End));
        let (ups, downs, spines) = match (exists, switch.tier) {
            (false, _) => (0, 0, 0),
            (true, Tier::T0) => (self.t1_per_plane, self.hosts_per_t0, 0),
            (true, Tier::T1) => (0, 0, self.t0_per_plane),
        };
        let uplinks = (0..ups).map(move |s| {
            route(
                self.switch_usid(SwitchId::t1(switch.plane, s)),
                RouteAction::Port(self.hosts_per_t0 + s),
            )
        });
        let downlinks = (0..downs).map(move |k| {
            let host = self.host_at(switch.index, k);
            route(self.host_final_usid(host), RouteAction::Port(k))
        });
        let t0s = (0..spines).map(move |i| {
            route(
                self.switch_usid(SwitchId::t0(switch.plane, i)),
                RouteAction::Port(i),
            )
        });
        // uA: a T0's uplinks, a T1's downlinks (the ports an adjacency path names).
        let adjacent = match (exists, self.switch_mode, switch.tier) {
            (true, SwitchMode::Adjacency, Tier::T0) => {
                self.hosts_per_t0..self.hosts_per_t0 + self.t1_per_plane
            }
            (true, SwitchMode::Adjacency, Tier::T1) => 0..self.t0_per_plane,
            _ => 0..0,
        };
        let adjacencies =
            adjacent.map(move |p| route(alloc::adjacency_usid(p), RouteAction::EndX(p)));
        own.into_iter()
            .chain(uplinks)
            .chain(downlinks)
            .chain(t0s)
            .chain(adjacencies)
    }

    /// True if `switch` has a uA uSID for `port` ([`Plan::switch_table`]'s End.X routes).
    fn has_adjacency(&self, switch: SwitchId, port: u16) -> bool {
        self.switch_mode == SwitchMode::Adjacency
            && match switch.tier {
                Tier::T0 => {
                    (self.hosts_per_t0..self.hosts_per_t0 + self.t1_per_plane).contains(&port)
                }
                Tier::T1 => port < self.t0_per_plane,
            }
    }

    /// The port `switch` routes a (not own) active uSID owner to, if it has a route.
    fn route_port(&self, switch: SwitchId, owner: UsidOwner) -> Option<u16> {
        match (switch.tier, owner) {
            (Tier::T0, UsidOwner::Switch(t1))
                if t1.tier == Tier::T1 && t1.plane == switch.plane =>
            {
                Some(self.hosts_per_t0 + t1.index)
            }
            (Tier::T0, UsidOwner::Downlink(k)) => Some(k),
            (Tier::T0, UsidOwner::Host(h)) if self.rack_of(h) == switch.index => {
                Some(self.downlink_of(h))
            }
            (Tier::T1, UsidOwner::Switch(t0))
                if t0.tier == Tier::T0 && t0.plane == switch.plane =>
            {
                Some(t0.index)
            }
            _ => None,
        }
    }

    /// What `switch` does with a packet for `da`: the same answer as a longest-prefix match on
    /// [`Plan::switch_table`] with End NEXT-C-SID processing, in O(1).
    pub fn lookup(&self, switch: SwitchId, da: Ipv6Addr) -> Forward {
        let f = self.format();
        let mut c = UsidContainer::from_addr(f, da);
        if !self.has_switch(switch) || c.block() != self.block {
            return Forward::Drop(DropReason::NotInBlock);
        }
        let own = self.switch_usid(switch);
        // RFC 9800 §4.1: while our uSID is active, shift; the kernel looks the shifted
        // address up again, which can hit our End route again.
        for _ in 0..f.capacity() {
            let Some(active) = c.active() else {
                return Forward::Drop(DropReason::EmptyContainer);
            };
            if active != own {
                let owner = self.usid_owner(active);
                if let Some(UsidOwner::Adjacency(port)) = owner {
                    // End.X with NEXT-C-SID: shift, then out of the port, no lookup.
                    if !self.has_adjacency(switch, port) {
                        return Forward::Drop(DropReason::NoRoute);
                    }
                    if !c.shift() {
                        return Forward::Exhausted { da: c.addr() };
                    }
                    return Forward::Out { port, da: c.addr() };
                }
                let port = owner.and_then(|owner| self.route_port(switch, owner));
                return match port {
                    Some(port) => Forward::Out { port, da: c.addr() },
                    None => Forward::Drop(DropReason::NoRoute),
                };
            }
            if !c.shift() {
                return Forward::Exhausted { da: c.addr() };
            }
        }
        Forward::Drop(DropReason::EmptyContainer)
    }

    /// Follow `da` from `first` through the fabric's switches by [`Plan::lookup`] until it
    /// leaves towards a host or stops. For tests and tools.
    pub fn trace(&self, first: SwitchId, da: Ipv6Addr) -> Trace {
        let mut crossed = Vec::new();
        let (mut switch, mut da) = (first, da);
        loop {
            let forward = self.lookup(switch, da);
            let stopped = |crossed| Trace {
                crossed,
                end: TraceEnd::Stopped {
                    at: switch,
                    forward,
                },
            };
            let Forward::Out { port, da: next_da } = forward else {
                return stopped(crossed);
            };
            crossed.push((switch, port));
            match self.link(NodeId::Switch(switch), port).map(|l| l.peer) {
                Some(NodeId::Switch(next)) if crossed.len() <= 8 => {
                    switch = next;
                    da = next_da;
                }
                Some(NodeId::Host(h)) => {
                    return Trace {
                        crossed,
                        end: TraceEnd::Host(h),
                    };
                }
                _ => return stopped(crossed),
            }
        }
    }
}

/// Where a traced packet went: the switches it crossed with their egress ports, and its end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trace {
    pub crossed: Vec<(SwitchId, u16)>,
    pub end: TraceEnd,
}

/// How a trace ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TraceEnd {
    /// Delivered to a host.
    Host(HostId),
    /// Stopped at a switch (dropped, exhausted, or looping).
    Stopped { at: SwitchId, forward: Forward },
}
