//! The engine's configuration: every default of `docs/PROTOCOL.md` that the engine owns is a
//! constant in [`defaults`], defined here once; the wire knobs live in the wire module's
//! `WireConfig`, embedded here.

use core::net::Ipv6Addr;
use std::sync::Arc;

use mrc_srv6::wire::EthernetAddress;

use crate::cc::CcProfile;
use crate::path::{PathSource, SrPath};
use crate::time::Duration;
use crate::wire::WireConfig;
use crate::wire::bth::BTH_LEN;
use crate::wire::icrc::ICRC_LEN;

/// Every default the engine uses, in one place.
pub mod defaults {
    use crate::time::Duration;

    /// Send work requests per QP.
    pub const MAX_SEND_WR: u32 = 1024;
    /// Receive work requests per QP.
    pub const MAX_RECV_WR: u32 = 1024;
    /// Gather entries per send work request.
    pub const MAX_SEND_SGE: u32 = 4;
    /// MPR in PSNs (the OCP example's MPR = 8 × 128, brief §3.5).
    pub const MPR: u32 = 1024;
    /// Outstanding Write-with-Immediate messages (OCP example, brief §3.5).
    pub const WIMM_LIMIT: u16 = 128;
    /// QP retry timeout exponent: 1.024 µs × 2^14 ≈ 16.8 ms (brief §3.7).
    pub const TIMEOUT_EXPONENT: u8 = 14;
    /// Linear retries before backing off (PROTOCOL.md).
    pub const RETRY_LINEAR: u8 = 7;
    /// Exponential retries after the linear ones (PROTOCOL.md).
    pub const RETRY_EXP: u8 = 25;
    /// EVs per plane (PROTOCOL.md: 256 per QP = 32 per plane with 8 planes).
    pub const EVS_PER_PLANE: u16 = 32;
    /// Active EVs per plane (PROTOCOL.md: 128 active of 256).
    pub const ACTIVE_EVS_PER_PLANE: u16 = 16;
    /// Active EVs per plane that path-failure demotions never go below (`ev_min_active`), at
    /// most a quarter of the plane's EVs (the OCP examples' `ev_count / 4`): a plane of only a
    /// few paths can retire a dead one instead of spraying into it.
    pub const EV_FLOOR_PER_PLANE: u16 = 2;
    /// Rotations between reshuffles of the EV order (brief §3.2).
    pub const RESHUFFLE_ROUNDS: u32 = 4;
    /// Consecutive successful probes that bring a retired EV back (PROTOCOL.md).
    pub const PROBE_SUCCESSES: u8 = 3;
    /// First transmissions on one EV inferred lost from SACK holes in a row, with nothing sent
    /// on it delivered in between, that retire it (a timeout retires at once). One inferred
    /// loss is as often reordering between paths as a dead path; a blackhole loses them all.
    pub const INFERRED_LOSSES_TO_RETIRE: u8 = 3;
    /// First transmissions inferred lost among the last 16 sent on one EV (and acknowledged or
    /// found missing) that retire it, deliveries between or not: a gray path, one that drops a
    /// share of its packets (brief §6.2 #15: 20 % injected drop goes inactive at once). Three
    /// of 16 is a loss rate near 19 %; at 1 % random loss it happens once in ~1 800 windows.
    pub const LOSSY_OF_16_TO_RETIRE: u8 = 3;
    /// ECMP mode: EVs failing within [`REMAP_WINDOW`] that are read as a remap of the fabric's
    /// hashing rather than as individual path failures (brief §8.2).
    pub const REMAP_BURST: u16 = 8;
    /// ECMP mode: the window of [`REMAP_BURST`].
    pub const REMAP_WINDOW: Duration = Duration::from_micros(200);
    /// RTT assumed before the first sample.
    pub const INITIAL_RTT: Duration = Duration::from_micros(20);
    /// Smallest per-packet path-failure timeout.
    pub const PTO_MIN: Duration = Duration::from_micros(50);
    /// Per-packet timeout in smoothed RTTs (plus 4 × RTT variance).
    pub const PTO_SRTT_MULTIPLIER: u32 = 3;
    /// Smallest reordering window of loss inference (RACK-style; brief §3.6).
    pub const REORDER_MIN: Duration = Duration::from_micros(4);
    /// First probe of a retired EV, and the spacing of the probes that bring it back.
    pub const PROBE_INTERVAL_MIN: Duration = Duration::from_micros(100);
    /// Probe backoff ceiling for an EV that keeps failing (brief §3.3: ~10 ms).
    pub const PROBE_INTERVAL_MAX: Duration = Duration::from_millis(10);
    /// A peer's port reported down is probed again after this long, unless an update says it
    /// is back first: updates are best effort (brief §2.12), and the one saying "up" may be
    /// lost. Its plane's EVs go out to the probes (backing off to `PROBE_INTERVAL_MAX` while
    /// the port stays down) and carry data again once answered.
    pub const REMOTE_PORT_DOWN_HOLD: Duration = Duration::from_millis(2);
    /// SACK coalescing: at most this many data packets per SACK without another trigger.
    pub const SACK_EVERY_PACKETS: u32 = 4;
    /// SACK coalescing: at most this many payload bytes per SACK.
    pub const SACK_EVERY_BYTES: u32 = 16 * 1024;
    /// SACK coalescing: at most this delay before a pending SACK leaves.
    pub const SACK_DELAY: Duration = Duration::from_micros(2);
    /// Payload bytes per data packet.
    pub const PAYLOAD_MTU: u32 = 4096;
    /// Line rate assumed per port when the configuration does not say.
    pub const PORT_LINE_RATE_BPS: u64 = 100_000_000_000;
}

/// One local port: one network plane (MRC 1.0 multi-plane, brief §5.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortConfig {
    /// The port's MAC address (Ethernet source).
    pub mac: EthernetAddress,
    /// The MAC of the switch (or peer) the port is cabled to (Ethernet destination).
    pub next_hop_mac: EthernetAddress,
    /// Line rate in bits per second (sizes congestion windows).
    pub line_rate_bps: u64,
}

impl PortConfig {
    /// A port with the default line rate.
    pub const fn new(mac: EthernetAddress, next_hop_mac: EthernetAddress) -> Self {
        Self {
            mac,
            next_hop_mac,
            line_rate_bps: defaults::PORT_LINE_RATE_BPS,
        }
    }
}

/// How paths are named.
#[derive(Debug, Clone)]
pub enum PathMode {
    /// SRv6 uSID source routing (PROTOCOL.md default): EVs are paths of the fabric plan.
    Srv6 {
        paths: Arc<dyn PathSource>,
        /// This NIC's host id in the plan.
        host: u32,
    },
    /// Fabrics without SRv6: EVs are UDP source ports + flow labels the switches hash.
    Ecmp,
}

/// Which EV selection policy a profile uses (built by [`crate::ev::build_selector`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum SelectorKind {
    /// Spraying in SRv6 mode, recycling in ECMP mode.
    #[default]
    Auto,
    /// Pseudo-random rotation over the active set, plane-balanced, reshuffled periodically
    /// (brief §3.2).
    Spray,
    /// ECMP: EVs whose feedback came back clean are reused first; the rotation explores only
    /// when none is waiting (brief §8.2, REPS-style).
    Recycle,
    /// One path per QP (the RoCE-like baseline).
    SinglePath,
}

/// EVs one QP holds at most, over all its planes (an EV id names a table entry in 12 bits:
/// ECMP mode carries it in the flow label, brief §3.1).
pub const MAX_EVS_PER_QP: usize = 1 << 12;

/// One EV a controller listed (OCP `mrc_ctl.h`, EXP and GEN EV profiles, brief §3.1): the
/// plane (= local port, 0-based) it leaves on and what names its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ExplicitEv {
    /// The plane (= local port, 0-based) it leaves on.
    pub plane: u8,
    /// What names its path: an entropy (ECMP mode) or a route (SRv6 mode).
    pub value: ExplicitValue,
}

/// What names the path of an [`ExplicitEv`] (OCP `mrc_ctl.h` `mrc_ctl_ev_t`, brief §3.1): it
/// must match the endpoint's [`PathMode`], or the QP fails to reach RTR.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExplicitValue {
    /// ECMP mode: the 32-bit EV on the wire exactly (UDP source port + flow label, split by
    /// the endpoint's `EntropyOrder`).
    Entropy(u32),
    /// SRv6 mode: the route (outer DA and optional SRH segment).
    Route(SrPath),
}

/// An EV profile (the API's `mrc_ctl` EV profiles, brief §3.1, §7.2; OCP mrc_ctl.h EV
/// profiles).
///
/// Either the EVs are generated per QP ([`Self::evs_per_plane`] of each plane: from the plan
/// in SRv6 mode, drawn at random in ECMP mode), or, with [`Self::explicit`], a QP takes
/// exactly the controller's list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvProfile {
    /// EVs generated per plane (ignored with an [`explicit`](Self::explicit) list).
    pub evs_per_plane: u16,
    /// Active EVs per plane; the rest of the plane's EVs are backups.
    pub active_per_plane: u16,
    /// Active EVs per plane that path-failure demotions never go below
    /// ([`defaults::EV_FLOOR_PER_PLANE`]).
    pub floor_per_plane: u16,
    /// Rotations between reshuffles of the spray order (brief §3.2).
    pub reshuffle_rounds: u32,
    /// The EV selection policy.
    pub selector: SelectorKind,
    /// Consecutive successful probes that bring a retired EV back.
    pub probe_successes: u8,
    /// Consecutive inferred losses that retire an EV ([`defaults::INFERRED_LOSSES_TO_RETIRE`]).
    pub inferred_losses_to_retire: u8,
    /// Inferred losses among an EV's last 16 first transmissions that retire it, a gray path
    /// ([`defaults::LOSSY_OF_16_TO_RETIRE`]); 0: only losses in a row do.
    pub lossy_of_16_to_retire: u8,
    /// ECMP mode: failures within [`Self::remap_window`] read as a remap (brief §8.2).
    pub remap_burst: u16,
    /// ECMP mode: the window of [`Self::remap_burst`].
    pub remap_window: Duration,
    /// The controller's own EVs (OCP mrc_ctl.h EXP and GEN EV profiles, brief §3.1): a QP
    /// initialised with this profile builds its EV table from exactly this list (plane 0's
    /// entries in list order, then plane 1's, ...; duplicates weight the spray), and
    /// [`Self::evs_per_plane`] is ignored. `None` (the default): EVs are generated.
    pub explicit: Option<Arc<[ExplicitEv]>>,
}

impl EvProfile {
    /// Whether the sizes are consistent for a NIC with `ports` planes (at most
    /// [`MAX_EVS_PER_QP`] EVs per QP). With an [`explicit`](Self::explicit) list: the list is
    /// non-empty, at most [`MAX_EVS_PER_QP`] long and names only planes below `ports`
    /// (OCP mrc_ctl.h EV profiles, brief §3.1).
    pub fn fits(&self, ports: usize) -> bool {
        let evs = match &self.explicit {
            Some(list) => {
                !list.is_empty()
                    && list.len() <= MAX_EVS_PER_QP
                    && list.iter().all(|e| usize::from(e.plane) < ports)
            }
            None => {
                self.evs_per_plane != 0
                    && self.active_per_plane <= self.evs_per_plane
                    && usize::from(self.evs_per_plane).saturating_mul(ports) <= MAX_EVS_PER_QP
            }
        };
        evs && self.active_per_plane != 0
            && self.floor_per_plane <= self.active_per_plane
            && self.probe_successes != 0
            && self.inferred_losses_to_retire != 0
            && self.lossy_of_16_to_retire <= 16
    }
}

impl Default for EvProfile {
    fn default() -> Self {
        Self {
            evs_per_plane: defaults::EVS_PER_PLANE,
            active_per_plane: defaults::ACTIVE_EVS_PER_PLANE,
            floor_per_plane: defaults::EV_FLOOR_PER_PLANE,
            reshuffle_rounds: defaults::RESHUFFLE_ROUNDS,
            selector: SelectorKind::Auto,
            probe_successes: defaults::PROBE_SUCCESSES,
            inferred_losses_to_retire: defaults::INFERRED_LOSSES_TO_RETIRE,
            lossy_of_16_to_retire: defaults::LOSSY_OF_16_TO_RETIRE,
            remap_burst: defaults::REMAP_BURST,
            remap_window: defaults::REMAP_WINDOW,
            explicit: None,
        }
    }
}

/// Timers of loss detection and path health.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimerConfig {
    pub initial_rtt: Duration,
    pub pto_min: Duration,
    pub pto_srtt_multiplier: u32,
    pub reorder_min: Duration,
    pub probe_interval_min: Duration,
    pub probe_interval_max: Duration,
    /// How long a peer's port reported down is avoided before it is tried again
    /// ([`defaults::REMOTE_PORT_DOWN_HOLD`]).
    pub remote_port_down_hold: Duration,
}

impl Default for TimerConfig {
    fn default() -> Self {
        Self {
            initial_rtt: defaults::INITIAL_RTT,
            pto_min: defaults::PTO_MIN,
            pto_srtt_multiplier: defaults::PTO_SRTT_MULTIPLIER,
            reorder_min: defaults::REORDER_MIN,
            probe_interval_min: defaults::PROBE_INTERVAL_MIN,
            probe_interval_max: defaults::PROBE_INTERVAL_MAX,
            remote_port_down_hold: defaults::REMOTE_PORT_DOWN_HOLD,
        }
    }
}

/// SACK coalescing of the default SACK policy (brief §4.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AckConfig {
    pub every_packets: u32,
    pub every_bytes: u32,
    pub delay: Duration,
}

impl Default for AckConfig {
    fn default() -> Self {
        Self {
            every_packets: defaults::SACK_EVERY_PACKETS,
            every_bytes: defaults::SACK_EVERY_BYTES,
            delay: defaults::SACK_DELAY,
        }
    }
}

/// Bounds on every table of an endpoint: whatever the input, its state stays within them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub max_qps: u32,
    pub max_mrs: u32,
    pub max_pds: u32,
    pub max_cqs: u32,
    pub max_cq_depth: u32,
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_mpr: u32,
    pub max_wimm: u16,
    pub max_message_bytes: u64,
    /// Events waiting in `poll_event` (more are counted and dropped).
    pub max_events: u32,
    /// Control packets (SACK, NACK, ACK) waiting to leave per QP, at most (and at most the
    /// QP's MPR + 16): more are counted and dropped, the peer's timers recover.
    pub max_control_backlog: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_qps: 4096,
            max_mrs: 4096,
            max_pds: 256,
            max_cqs: 1024,
            max_cq_depth: 1 << 16,
            max_send_wr: 1 << 14,
            max_recv_wr: 1 << 14,
            max_send_sge: 16,
            max_mpr: 1 << 16,
            max_wimm: 4096,
            max_message_bytes: 1 << 31,
            max_events: 4096,
            max_control_backlog: 1 << 16,
        }
    }
}

/// Everything an [`Endpoint`](crate::Endpoint) is built from.
#[derive(Debug, Clone)]
pub struct EndpointConfig {
    /// Seed of every random choice: same seed, same inputs, same outputs.
    pub seed: u64,
    /// This NIC's IPv6 address (same on every plane).
    pub nic_addr: Ipv6Addr,
    /// Local ports; port `i` is plane `i`.
    pub ports: Vec<PortConfig>,
    pub path_mode: PathMode,
    /// Wire knobs (UDP port, DSCPs, trim size, entropy layout): `docs/PROTOCOL.md`.
    pub wire: WireConfig,
    /// Send a TSETH in every data packet, so SACKs echo an unambiguous RTT sample.
    pub tseth: bool,
    /// Payload bytes per data packet.
    pub payload_mtu: u32,
    /// EV profiles, indexed by `InitAttr::ev_profile`.
    pub ev_profiles: Vec<EvProfile>,
    /// CC profiles, indexed by `InitAttr::cc_profile`.
    pub cc_profiles: Vec<CcProfile>,
    pub timers: TimerConfig,
    pub ack: AckConfig,
    pub limits: Limits,
}

impl EndpointConfig {
    /// The largest frame an endpoint with this configuration writes (what a transmit buffer
    /// must hold).
    pub fn max_frame_len(&self) -> usize {
        // Ethernet + outer IPv6 + SRH + inner IPv6 + UDP + BTH + the largest body + payload +
        // pad + ICRC.
        14 + 40 + 24 + 40 + 8 + BTH_LEN + 36 + self.payload_mtu as usize + 3 + ICRC_LEN
    }

    /// A configuration with every default, for a NIC at `nic_addr` with these ports.
    pub fn new(seed: u64, nic_addr: Ipv6Addr, ports: Vec<PortConfig>, path_mode: PathMode) -> Self {
        Self {
            seed,
            nic_addr,
            ports,
            path_mode,
            wire: WireConfig::default(),
            tseth: true,
            payload_mtu: defaults::PAYLOAD_MTU,
            ev_profiles: vec![EvProfile::default()],
            cc_profiles: vec![CcProfile::default()],
            timers: TimerConfig::default(),
            ack: AckConfig::default(),
            limits: Limits::default(),
        }
    }

    /// Check the configuration is usable.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.ports.is_empty() || self.ports.len() > 32 {
            return Err(ConfigError::Ports(self.ports.len()));
        }
        if !(64..=9000).contains(&self.payload_mtu) {
            return Err(ConfigError::PayloadMtu(self.payload_mtu));
        }
        if self.ev_profiles.is_empty() || self.cc_profiles.is_empty() {
            return Err(ConfigError::NoProfile);
        }
        if !self.ev_profiles.iter().all(|p| p.fits(self.ports.len())) {
            return Err(ConfigError::EvProfile);
        }
        if self.limits.max_qps > 1 << 14 || self.limits.max_mpr > 1 << 20 {
            return Err(ConfigError::Limits);
        }
        Ok(())
    }
}

/// A configuration the engine cannot run with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("{0} ports: need 1..=32")]
    Ports(usize),
    #[error("payload MTU {0} outside 64..=9000")]
    PayloadMtu(u32),
    #[error("at least one EV profile and one CC profile are needed")]
    NoProfile,
    #[error(
        "EV profile sizes are inconsistent, above 4096 EVs per QP, or its EV list is empty or \
         names a missing plane"
    )]
    EvProfile,
    #[error("limits exceed what QPN and PSN spaces can index")]
    Limits,
    #[error("no room for another profile (profile indices are 16-bit)")]
    TooManyProfiles,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(list: Vec<ExplicitEv>) -> EvProfile {
        EvProfile {
            explicit: Some(list.into()),
            ..EvProfile::default()
        }
    }

    fn stev(plane: u8, v: u32) -> ExplicitEv {
        ExplicitEv {
            plane,
            value: ExplicitValue::Entropy(v),
        }
    }

    #[test]
    fn an_explicit_list_fits_when_non_empty_on_existing_planes_and_at_most_4096_long() {
        // `evs_per_plane` is ignored: 0, or too many for the ports, does not matter.
        let p = EvProfile {
            evs_per_plane: 0,
            ..listed(vec![stev(0, 1), stev(1, 2), stev(1, 2)])
        };
        assert!(p.fits(2));
        assert!(!p.fits(1), "plane 1 on a one-port NIC");
        assert!(
            EvProfile {
                evs_per_plane: 4096,
                ..p.clone()
            }
            .fits(2)
        );
        assert!(!listed(Vec::new()).fits(8), "an empty list");
        let full: Vec<ExplicitEv> = (0..MAX_EVS_PER_QP as u32).map(|v| stev(0, v)).collect();
        assert!(listed(full.clone()).fits(1));
        let over: Vec<ExplicitEv> = (0..=MAX_EVS_PER_QP as u32).map(|v| stev(0, v)).collect();
        assert!(!listed(over).fits(1), "4097 EVs");
        // The other rules hold as for generated profiles.
        let base = listed(full);
        for bad in [
            EvProfile {
                active_per_plane: 0,
                ..base.clone()
            },
            EvProfile {
                floor_per_plane: base.active_per_plane + 1,
                ..base.clone()
            },
            EvProfile {
                probe_successes: 0,
                ..base.clone()
            },
            EvProfile {
                inferred_losses_to_retire: 0,
                ..base.clone()
            },
            EvProfile {
                lossy_of_16_to_retire: 17,
                ..base.clone()
            },
        ] {
            assert!(!bad.fits(1), "{bad:?}");
        }
    }

    #[test]
    fn generated_profiles_fit_as_before() {
        let d = EvProfile::default();
        assert!(d.fits(8));
        assert!(
            EvProfile {
                evs_per_plane: 512,
                ..d.clone()
            }
            .fits(8)
        );
        assert!(
            !EvProfile {
                evs_per_plane: 513,
                ..d.clone()
            }
            .fits(8)
        );
        assert!(
            !EvProfile {
                evs_per_plane: 0,
                ..d.clone()
            }
            .fits(1)
        );
        assert!(
            !EvProfile {
                active_per_plane: 33,
                ..d
            }
            .fits(1)
        );
    }
}
