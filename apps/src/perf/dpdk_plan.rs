//! `--backend dpdk --plan PLAN`: the two sides are hosts of the plan, their ports cabled to
//! the plan's switches (the kernel fabric of `mrc-fabric linux PLAN`, docs/interop.md). The
//! engines run in SRv6 mode: each EV is one of the plan's uSID paths (PROTOCOL.md "uSID
//! addressing"), the NIC addresses are the plan's, and each port finds the MAC of its T0 by
//! neighbour discovery of the T0's link-local address.

use std::net::Ipv6Addr;
use std::sync::Arc;

use mrc_nic::NextHop;
use mrc_srv6::plan::{HostId, Plan};
use mrc_transport::{EndpointConfig, PathMode};

use super::plan::load_plan;
use super::settings::Settings;
use super::traffic::ends;

/// Outer IPv6 40 + SRH 24 + inner IPv6 40 + UDP 8 + BTH 12 + METH 4 + TSETH 4 + RETH 16 +
/// ImmDt 4 + ICRC 4 (brief §2.1): the headers the plan's MTU must leave room for.
const SRV6_MRC_HEADER_BYTES: u32 = 156;

/// The two ends of a run on the plan's fabric.
#[derive(Debug, Clone)]
pub struct PlanEnds {
    pub plan: Arc<Plan>,
    /// This side's host.
    pub me: HostId,
    /// The other side's host.
    pub peer: HostId,
}

impl PlanEnds {
    /// The client is host 0 and the server the first host of the next rack (as the simulator
    /// backend), so every path crosses a spine. `me`: 0 the client, 1 the server.
    pub fn new(s: &Settings, me: u16, ports: u8) -> anyhow::Result<Self> {
        let plan = load_plan(s)?;
        if plan.planes() != ports {
            crate::bail_usage!(
                "plan {:?} has {} planes but --eal names {ports} ports: one port per plane, in plane order",
                plan.name(),
                plan.planes()
            );
        }
        let (c, sv) = ends(&plan);
        let (mine, theirs) = if me == 0 { (c, sv) } else { (sv, c) };
        Ok(Self {
            plan: Arc::new(plan),
            me: HostId(mine),
            peer: HostId(theirs),
        })
    }

    /// This host's NIC address in the plan.
    pub fn nic_addr(&self) -> Ipv6Addr {
        self.plan.nic_addr(self.me)
    }

    /// The peer's NIC address in the plan.
    pub fn peer_addr(&self) -> Ipv6Addr {
        self.plan.nic_addr(self.peer)
    }

    /// `ec` (built for ECMP) turned to SRv6 mode on the plan: paths, NIC address, a payload
    /// MTU that fits the plan's MTU with every SRv6 header.
    pub fn apply(&self, ec: &mut EndpointConfig) {
        ec.path_mode = PathMode::Srv6 {
            paths: self.plan.clone(),
            host: self.me.0,
        };
        ec.nic_addr = self.nic_addr();
        let room = self.plan.mtu().saturating_sub(SRV6_MRC_HEADER_BYTES);
        if room < ec.payload_mtu {
            ec.payload_mtu = 1 << room.max(64).ilog2();
        }
    }

    /// Each port resolves its T0's link-local address (the upper end of the host link in the
    /// plan's Linux emission) by neighbour discovery.
    pub fn next_hops(&self) -> Vec<NextHop> {
        vec![NextHop::Resolve(Plan::linux_upper_link_local()); usize::from(self.plan.planes())]
    }

    /// Paths between the two ends in plane 0.
    pub fn paths_per_plane(&self) -> u32 {
        self.plan.path_count(self.me, self.peer, 0).unwrap_or(0)
    }
}
