//! How a simulation is set up beyond the fabric plan: routing mode, switch features, NIC
//! queues, seeds, and defaults for the queue parameters a plan may leave out. The plan's
//! free-form `[sim]` table can set the same knobs (see [`SimConfig::from_plan`]).

use mrc_srv6::plan::{LinkParams, LinkTier, Plan};
use mrc_transport::wire::{self, WireConfig};
use mrc_transport::{Duration, EndpointConfig};

use crate::port::{EcnProfile, PortModel, TrimMode};

/// Defaults for queue parameters a plan does not give.
pub mod defaults {
    /// Egress buffer per switch port.
    pub const BUFFER_BYTES: u64 = 1 << 20;
    /// ECN marking starts above this queue depth.
    pub const ECN_MIN_BYTES: u64 = 64 * 1024;
    /// Marking probability reaches its maximum here.
    pub const ECN_MAX_BYTES: u64 = 256 * 1024;
    /// Marking probability at `ECN_MAX_BYTES`.
    pub const ECN_MAX_PROB: f64 = 0.2;
    /// Frames a host NIC port queues before its `ready` bit clears.
    pub const HOST_TX_RING: usize = 8;
}

/// Bytes of a SACK frame: Ethernet, outer and inner IPv6, UDP, BTH, SETH and CC_STATE, ICRC.
const SACK_FRAME_BYTES: usize = 14
    + 2 * 40
    + wire::UDP_HEADER_LEN
    + wire::BTH_LEN
    + wire::SETH_LEN
    + wire::CC_STATE_LEN
    + wire::icrc::ICRC_LEN;

/// How switches pick the next hop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Routing {
    /// SRv6 uSID shift-and-lookup on static tables (brief §5.1); engines source-route.
    Srv6,
    /// ECMP: T0 uplink chosen by a hash of addresses, flow label and UDP source port (the EV).
    Ecmp,
}

/// A hook to adjust every host's engine configuration (CC profile, EV profile, timers...).
pub type EndpointTweak = std::sync::Arc<dyn Fn(u32, &mut EndpointConfig) + Send + Sync>;

/// Settings of a run.
#[derive(Clone)]
pub struct SimConfig {
    /// Seed of the fabric's randomness (ECN, loss) and, mixed with the host id, of every engine.
    pub seed: u64,
    pub routing: Routing,
    /// Switches trim on overflow (else tail drop).
    pub trim: bool,
    /// Switches mark ECN (never on the last hop, brief §5.2).
    pub ecn: bool,
    /// Frames a host port queues before it reports "full" to its engine.
    pub host_tx_ring: usize,
    /// DSCP code points and trim size (must match the engines').
    pub wire: WireConfig,
    /// Every engine's payload MTU; `None`: the engine's default.
    pub payload_mtu: Option<u32>,
    /// Period of observer samples (virtual time); `None`: no samples.
    pub sample_every: Option<Duration>,
    /// Adjusts each host's engine configuration after the simulator built it.
    pub endpoint_tweak: Option<EndpointTweak>,
}

impl core::fmt::Debug for SimConfig {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SimConfig")
            .field("seed", &self.seed)
            .field("routing", &self.routing)
            .field("trim", &self.trim)
            .field("ecn", &self.ecn)
            .field("host_tx_ring", &self.host_tx_ring)
            .field("payload_mtu", &self.payload_mtu)
            .field("sample_every", &self.sample_every)
            .finish_non_exhaustive()
    }
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            seed: 1,
            routing: Routing::Srv6,
            trim: true,
            ecn: true,
            host_tx_ring: defaults::HOST_TX_RING,
            wire: WireConfig::default(),
            payload_mtu: None,
            sample_every: None,
            endpoint_tweak: None,
        }
    }
}

/// A `[sim]` value of the wrong type or an unknown key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("plan [sim] table: {0}")]
pub struct SimTableError(pub String);

impl SimConfig {
    /// Defaults overridden by the plan's `[sim]` table: `trim` (bool), `ecn` (bool),
    /// `routing` ("srv6" | "ecmp"), `host_tx_ring` (integer), `seed` (integer).
    pub fn from_plan(plan: &Plan) -> Result<Self, SimTableError> {
        let mut c = Self::default();
        c.apply_plan(plan)?;
        Ok(c)
    }

    /// Override this configuration with the keys the plan's `[sim]` table sets (those it does
    /// not set keep their values).
    pub fn apply_plan(&mut self, plan: &Plan) -> Result<(), SimTableError> {
        for (k, v) in plan.sim() {
            let bad = |want: &str| SimTableError(format!("{k} = {v}: {want}"));
            match k.as_str() {
                "trim" => self.trim = v.as_bool().ok_or_else(|| bad("use true or false"))?,
                "ecn" => self.ecn = v.as_bool().ok_or_else(|| bad("use true or false"))?,
                "routing" => {
                    self.routing = match v.as_str() {
                        Some("srv6") => Routing::Srv6,
                        Some("ecmp") => Routing::Ecmp,
                        _ => return Err(bad("use \"srv6\" or \"ecmp\"")),
                    }
                }
                "host_tx_ring" => {
                    self.host_tx_ring = v
                        .as_integer()
                        .and_then(|n| usize::try_from(n).ok())
                        .filter(|&n| n > 0)
                        .ok_or_else(|| bad("use a whole number of frames, 1 or more"))?;
                }
                "seed" => {
                    self.seed = v
                        .as_integer()
                        .and_then(|n| u64::try_from(n).ok())
                        .ok_or_else(|| bad("use a whole number, 0 or more"))?;
                }
                _ => {
                    return Err(SimTableError(format!(
                        "unknown key {k} (the keys are trim, ecn, routing, host_tx_ring, seed)"
                    )));
                }
            }
        }
        Ok(())
    }

    /// The model of a switch egress port onto a link of `tier`; `last_hop` for a T0 downlink
    /// (no ECN there, last-hop trim code point: brief §5.2, §2.15).
    pub fn switch_port(&self, params: LinkParams, last_hop: bool) -> PortModel {
        let q = params.queue;
        let ecn = (self.ecn && !last_hop).then(|| EcnProfile {
            min_bytes: q.ecn_min_bytes.unwrap_or(defaults::ECN_MIN_BYTES),
            max_bytes: q.ecn_max_bytes.unwrap_or(defaults::ECN_MAX_BYTES),
            max_prob: q.ecn_max_prob.unwrap_or(defaults::ECN_MAX_PROB),
        });
        let trim = match (self.trim, last_hop) {
            (false, _) => TrimMode::Off,
            (true, false) => TrimMode::InFabric,
            (true, true) => TrimMode::LastHop,
        };
        PortModel {
            rate_gbps: params.speed_gbps,
            latency_ps: params.latency_ns * 1000,
            buffer_bytes: q.buffer_bytes.unwrap_or(defaults::BUFFER_BYTES),
            ecn,
            trim,
        }
    }

    /// Adds `tweak` to the engine configuration hook, after any tweak already set.
    pub fn tweak_endpoints(
        &mut self,
        tweak: impl Fn(u32, &mut EndpointConfig) + Send + Sync + 'static,
    ) {
        let before = self.endpoint_tweak.take();
        self.endpoint_tweak = Some(std::sync::Arc::new(move |h, c| {
            if let Some(before) = &before {
                before(h, c);
            }
            tweak(h, c);
        }));
    }

    /// The fabric's longest unloaded round trip (issue #14): a `frame_bytes` frame from a host
    /// through its T0, a T1 and another rack's T0 to a host, stored and forwarded at every
    /// hop, and a SACK back the same way. It is what NSCC scales its window ceiling, target
    /// delay and gains from (brief §3.4: `base_rtt`; htsim: the network's largest unloaded
    /// RTT); the simulator sets every NIC's RTT estimate to it, as a controller sets a CC
    /// profile's `base_rtt` for the fabric it knows. The engine's own default, 20 µs, is a
    /// guess for a fabric it knows nothing of: 3.5× this in `load-balance`, so NSCC aimed at
    /// 15 µs of queueing and the T0 uplinks queued 81 KB at the 99th percentile.
    pub fn unloaded_rtt(plan: &Plan, frame_bytes: usize) -> Duration {
        let host = plan.link_params(LinkTier::Host);
        let fabric = plan.link_params(LinkTier::Fabric);
        let cross_rack = plan.t0_per_plane() > 1;
        let hop = |l: &LinkParams, bytes: usize| {
            let gbps = u64::from(l.speed_gbps.max(1));
            (bytes as u64 * 8_000).div_ceil(gbps) + l.latency_ns * 1000
        };
        let way = |bytes: usize| {
            let fabric_hops = if cross_rack {
                2 * hop(&fabric, bytes)
            } else {
                0
            };
            2 * hop(&host, bytes) + fabric_hops
        };
        Duration::from_nanos((way(frame_bytes) + way(SACK_FRAME_BYTES)).div_ceil(1000))
    }

    /// The model of a host NIC port: a FIFO bounded by the TX ring (the engine stops when it
    /// is full), no ECN, no trimming.
    pub fn host_port(&self, plan: &Plan) -> PortModel {
        let params = plan.link_params(LinkTier::Host);
        PortModel {
            rate_gbps: params.speed_gbps,
            latency_ps: params.latency_ns * 1000,
            buffer_bytes: u64::MAX,
            ecn: None,
            trim: TrimMode::Off,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(racks: u16) -> Plan {
        let text = crate::experiments::fabric_toml(
            "t",
            2,
            racks,
            4,
            4,
            50,
            512 * 1024,
            crate::experiments::LATENCY_NS,
        );
        Plan::from_toml(&text, "<t>").unwrap()
    }

    #[test]
    fn the_unloaded_rtt_is_every_hop_a_frame_and_a_sack_cross() {
        // 50 Gb/s: a 4250-byte frame serialises in 680 ns, a 154-byte SACK in 24.64 ns; host
        // links 100 ns, fabric links 600 ns.
        let frame = 4250;
        let cross =
            4 * 680_000 + 2 * 100_000 + 2 * 600_000 + 4 * 24_640 + 2 * 100_000 + 2 * 600_000;
        assert_eq!(
            SimConfig::unloaded_rtt(&plan(4), frame),
            Duration::from_nanos((cross as u64).div_ceil(1000))
        );
        // One rack: host, T0, host.
        let within = 2 * 680_000 + 2 * 100_000 + 2 * 24_640 + 2 * 100_000;
        assert_eq!(
            SimConfig::unloaded_rtt(&plan(1), frame),
            Duration::from_nanos((within as u64).div_ceil(1000))
        );
    }
}
