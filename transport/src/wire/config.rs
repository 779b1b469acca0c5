//! The wire knobs of `docs/PROTOCOL.md`, each with its default defined here once. The engine
//! embeds a [`WireConfig`] in its own configuration.

use mrc_srv6::wire::Dscp;

use super::entropy::EntropyOrder;
use super::neth::NackReason;
use super::opcode::Opcode;

/// RoCEv2's well-known UDP destination port (brief §2.2; the transcriptions also say 4971).
pub const ROCEV2_UDP_PORT: u16 = 4791;

/// DSCP code points of MRC's traffic classes (PROTOCOL.md table, brief §2.14).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DscpConfig {
    /// First transmissions of data packets, trimmable (4).
    pub trimmable: Dscp,
    /// Data retransmissions (8).
    pub retransmission: Dscp,
    /// Data where the network must not trim (0).
    pub no_trim: Dscp,
    /// What a switch rewrites a trimmed packet to (12).
    pub trimmed: Dscp,
    /// What the last-hop switch rewrites a trimmed packet to (16).
    pub trimmed_last_hop: Dscp,
    /// SACK, NACK, ACK, endpoint responses (46).
    pub control: Dscp,
}

impl Default for DscpConfig {
    fn default() -> Self {
        Self {
            trimmable: Dscp(4),
            retransmission: Dscp(8),
            no_trim: Dscp(0),
            trimmed: Dscp(12),
            trimmed_last_hop: Dscp(16),
            control: Dscp(46),
        }
    }
}

/// Where a trimmed frame was trimmed, read from its DSCP (brief §2.15).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Trimmed {
    /// In the fabric: congestion on the path (NACK TRIMMED, the EV is skipped).
    InFabric,
    /// At the last hop: incast at the destination (NACK TRIMMED_LASTHOP).
    LastHop,
}

impl Trimmed {
    /// The NACK reason the responder answers a trimmed packet with (brief §2.10).
    pub const fn nack_reason(self) -> NackReason {
        match self {
            Self::InFabric => NackReason::Trimmed,
            Self::LastHop => NackReason::TrimmedLastHop,
        }
    }
}

impl DscpConfig {
    /// Recognise a trimmed frame by its (outer) DSCP.
    pub fn trimmed(&self, dscp: Dscp) -> Option<Trimmed> {
        if dscp == self.trimmed {
            Some(Trimmed::InFabric)
        } else if dscp == self.trimmed_last_hop {
            Some(Trimmed::LastHop)
        } else {
            None
        }
    }

    /// The code point a packet leaves with: writes and probes on the data class
    /// (retransmissions on their own, `trim == false` on the no-trim one), everything else
    /// on the control class.
    pub fn for_packet(&self, opcode: Opcode, rtx: bool, trim: bool) -> Dscp {
        match opcode {
            op if op.is_write() || op == Opcode::Probe || op == Opcode::EndpointRequest => {
                if !trim {
                    self.no_trim
                } else if rtx {
                    self.retransmission
                } else {
                    self.trimmable
                }
            }
            _ => self.control,
        }
    }
}

/// Which IPv6 headers carry the EV's flow-label bits in SRv6 mode (brief §2.1 \[I\]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum FlowLabelPlacement {
    /// Outer header only (the inner one gets 0).
    Outer,
    /// Inner header only (the outer one gets 0).
    Inner,
    /// Both (default). The parser reads the inner label and falls back to the outer.
    #[default]
    Both,
}

/// Wire knobs shared by the builder and the parser.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WireConfig {
    /// UDP destination port of MRC (4791).
    pub udp_dport: u16,
    /// Traffic-class code points.
    pub dscp: DscpConfig,
    /// Bytes a switch keeps when it trims (256): at least every header through RETH.
    pub trim_size: u16,
    /// How the 32-bit EV maps onto UDP source port and flow label.
    pub entropy_order: EntropyOrder,
    /// Which headers carry the flow-label bits in SRv6 mode.
    pub flow_label: FlowLabelPlacement,
    /// Hop limit of emitted IPv6 headers (64).
    pub hop_limit: u8,
    /// Compute the UDP checksum when building (false: 0, the ICRC protects the datagram as in
    /// RoCEv2 NICs; true is only needed when a kernel UDP socket must accept the frame).
    pub udp_checksum: bool,
    /// Check the ICRC when parsing (true; `mrc-fabric dump` turns it off to show bad frames).
    pub verify_icrc: bool,
}

impl Default for WireConfig {
    fn default() -> Self {
        Self {
            udp_dport: ROCEV2_UDP_PORT,
            dscp: DscpConfig::default(),
            trim_size: 256,
            entropy_order: EntropyOrder::default(),
            flow_label: FlowLabelPlacement::default(),
            hop_limit: 64,
            udp_checksum: false,
            verify_icrc: true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_protocol_md() {
        let c = WireConfig::default();
        assert_eq!(c.udp_dport, 4791);
        assert_eq!(c.trim_size, 256);
        let d = c.dscp;
        assert_eq!(
            [
                d.trimmable,
                d.retransmission,
                d.no_trim,
                d.trimmed,
                d.trimmed_last_hop,
                d.control
            ],
            [Dscp(4), Dscp(8), Dscp(0), Dscp(12), Dscp(16), Dscp(46)]
        );
    }

    #[test]
    fn classes() {
        let d = DscpConfig::default();
        assert_eq!(d.trimmed(Dscp(12)), Some(Trimmed::InFabric));
        assert_eq!(d.trimmed(Dscp(16)), Some(Trimmed::LastHop));
        assert_eq!(d.trimmed(Dscp(4)), None);
        assert_eq!(Trimmed::InFabric.nack_reason(), NackReason::Trimmed);
        assert_eq!(Trimmed::LastHop.nack_reason(), NackReason::TrimmedLastHop);
        assert_eq!(d.for_packet(Opcode::WriteMiddle, false, true), Dscp(4));
        assert_eq!(d.for_packet(Opcode::WriteMiddle, true, true), Dscp(8));
        assert_eq!(d.for_packet(Opcode::WriteOnly, true, false), Dscp(0));
        assert_eq!(d.for_packet(Opcode::Sack, false, true), Dscp(46));
        assert_eq!(d.for_packet(Opcode::Nack, false, true), Dscp(46));
    }
}
