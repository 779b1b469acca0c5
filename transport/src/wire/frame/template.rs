//! Header templates (issue #13, header templates): the bytes from the Ethernet header to the end
//! of the BTH, prebuilt once by the general emitter ([`FrameRepr::emit`]) for what a QP's
//! frames on one plane share, then copied per packet and patched only where packets differ.
//!
//! What a template holds (its [`TemplateKey`] and the configuration): both MACs, the
//! ethertype, the version, next headers and hop limit of every IPv6 header, both source
//! addresses and the inner (or only) destination, the SRH's fixed bytes, the UDP destination
//! port and zero checksum, the BTH's SE/M/TVer, P_Key, reserved byte and DestQP.
//!
//! What is patched per packet ([`PacketFields`]): the IPv6 first words (traffic class =
//! DSCP/ECN, flow label from the EV) and payload lengths, the SRv6 route (outer DA and SRH
//! segment, from the EV), the UDP source port (from the EV) and length, the BTH opcode, pad
//! count, AckReq/rtx/ts byte and PSN, and the whole body. The EV's route and entropy are
//! patched rather than keyed, so a template is per (QP, plane, layout), not per (QP, EV): an
//! EV re-drawn or recycled cannot leave a stale template behind, and the per-packet cost is
//! the same (patching the 16-byte outer DA and the segment costs what comparing them to a
//! per-EV key would, and one template per plane is what the cache holds instead of one per
//! EV).

use mrc_srv6::wire::{Dscp, ETHERNET_HEADER_LEN, Ecn, EthernetAddress, IPV6_HEADER_LEN};

use super::super::bth::BTH_LEN;
use super::super::config::{FlowLabelPlacement, WireConfig};
use super::super::icrc::ICRC_LEN;
use super::super::opcode::Opcode;
use super::super::udp::UDP_HEADER_LEN;
use super::super::{Result, WireError};
use super::emit::check_frame_len;
use super::{Body, FrameLayout, FrameRepr, Route, RouteRef, SRH_ONE_SEGMENT_LEN};

/// The longest fixed header block: Ethernet, outer IPv6, SRH, inner IPv6, UDP, BTH.
pub const TEMPLATE_MAX_LEN: usize =
    ETHERNET_HEADER_LEN + 2 * IPV6_HEADER_LEN + SRH_ONE_SEGMENT_LEN + UDP_HEADER_LEN + BTH_LEN;

/// Scratch room for building a template with the general emitter: the headers, the largest
/// body, the ICRC.
const SCRATCH_LEN: usize = TEMPLATE_MAX_LEN + 40 + ICRC_LEN;

/// The header layout a route gives (what a template's byte offsets depend on).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TemplateLayout {
    Ecmp = 0,
    Srv6 = 1,
    Srv6Srh = 2,
}

impl TemplateLayout {
    /// Number of layouts (slots per plane in a cache).
    pub const COUNT: usize = 3;

    /// The layout of the frames `route` routes.
    #[inline]
    pub fn of(route: &Route) -> Self {
        Self::of_ref(route.as_ref())
    }

    /// [`of`](Self::of) a borrowed route.
    #[inline]
    pub const fn of_ref(route: RouteRef<'_>) -> Self {
        match route {
            RouteRef::Ecmp => Self::Ecmp,
            RouteRef::Srv6 {
                srh_segment: None, ..
            } => Self::Srv6,
            RouteRef::Srv6 {
                srh_segment: Some(_),
                ..
            } => Self::Srv6Srh,
        }
    }

    /// Bytes of the fixed headers, Ethernet to BTH.
    #[inline]
    pub const fn header_len(self) -> usize {
        match self {
            Self::Ecmp => ETHERNET_HEADER_LEN + IPV6_HEADER_LEN + UDP_HEADER_LEN + BTH_LEN,
            Self::Srv6 => ETHERNET_HEADER_LEN + 2 * IPV6_HEADER_LEN + UDP_HEADER_LEN + BTH_LEN,
            Self::Srv6Srh => TEMPLATE_MAX_LEN,
        }
    }
}

/// Every input of a template's invariant bytes that is not the endpoint's configuration
/// (fixed for the endpoint's life but for the next-hop MACs, which are keyed here): a
/// template whose key differs from the packet's is rebuilt, never patched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TemplateKey {
    pub src_mac: EthernetAddress,
    pub dst_mac: EthernetAddress,
    pub src_addr: core::net::Ipv6Addr,
    pub dst_addr: core::net::Ipv6Addr,
    pub dest_qp: u32,
}

impl TemplateKey {
    /// Whether it is the key of frames between these MACs, NICs and to this QP: compared in
    /// place, field by field (a packet's key is not built to be compared: issue #13).
    #[inline]
    pub fn is(
        &self,
        src_mac: EthernetAddress,
        dst_mac: EthernetAddress,
        src_addr: core::net::Ipv6Addr,
        dst_addr: core::net::Ipv6Addr,
        dest_qp: u32,
    ) -> bool {
        self.dest_qp == dest_qp
            && self.dst_addr == dst_addr
            && self.dst_mac == dst_mac
            && self.src_mac == src_mac
            && self.src_addr == src_addr
    }

    /// The key of the frame `r` describes.
    pub const fn of(r: &FrameRepr) -> Self {
        Self {
            src_mac: r.src_mac,
            dst_mac: r.dst_mac,
            src_addr: r.src_addr,
            dst_addr: r.dst_addr,
            dest_qp: r.bth.dest_qp,
        }
    }
}

/// What differs between the frames of one template beside the EV's route and entropy (and
/// its DestQP, which the key holds: given here so a sender describes a packet once).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacketFields {
    pub dscp: Dscp,
    pub ecn: Ecn,
    pub opcode: Opcode,
    pub dest_qp: u32,
    pub psn: u32,
    pub ack_req: bool,
    pub rtx: bool,
    pub body: Body,
}

impl PacketFields {
    /// The per-packet fields of `r`.
    pub const fn of(r: &FrameRepr) -> Self {
        Self {
            dscp: r.dscp,
            ecn: r.ecn,
            opcode: r.bth.opcode,
            dest_qp: r.bth.dest_qp,
            psn: r.bth.psn,
            ack_req: r.bth.ack_req,
            rtx: r.bth.rtx,
            body: r.body,
        }
    }
}

/// A prebuilt fixed header block (see the module doc).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderTemplate {
    key: TemplateKey,
    layout: TemplateLayout,
    bytes: [u8; TEMPLATE_MAX_LEN],
}

impl HeaderTemplate {
    /// The template of the frames sharing `r`'s key and layout, written by the general
    /// emitter (so its invariant bytes are the reference's by construction).
    pub fn new(r: &FrameRepr, cfg: &WireConfig) -> Result<Self> {
        let layout = TemplateLayout::of(&r.route);
        let mut scratch = [0u8; SCRATCH_LEN];
        r.emit(&mut scratch, 0, cfg)?;
        let mut bytes = [0u8; TEMPLATE_MAX_LEN];
        bytes[..layout.header_len()].copy_from_slice(&scratch[..layout.header_len()]);
        Ok(Self {
            key: TemplateKey::of(r),
            layout,
            bytes,
        })
    }

    /// What it was built for.
    #[inline]
    pub const fn key(&self) -> &TemplateKey {
        &self.key
    }

    /// Its header layout.
    #[inline]
    pub const fn layout(&self) -> TemplateLayout {
        self.layout
    }

    /// [`FrameRepr::emit`] of the frame with this template's key, `route`, `entropy` and `f`'s
    /// fields: the same bytes, the same layout. A route of another layout is refused.
    #[inline]
    pub fn emit(
        &self,
        route: RouteRef<'_>,
        entropy: u32,
        f: &PacketFields,
        buf: &mut [u8],
        payload_len: usize,
        cfg: &WireConfig,
    ) -> Result<FrameLayout> {
        debug_assert!(f.body.matches(f.opcode), "body does not match opcode");
        debug_assert!(
            payload_len == 0 || f.opcode.is_write(),
            "only Writes carry payload"
        );
        let pad = (4 - payload_len % 4) % 4;
        let body_len = f.body.buffer_len();
        let head = self.layout.header_len();
        let len = head + body_len + payload_len + pad + ICRC_LEN;
        check_frame_len(len, buf.len())?;
        let hdr = &mut buf[..len];
        let udp_len = UDP_HEADER_LEN + BTH_LEN + body_len + payload_len + pad + ICRC_LEN;
        let ev = cfg.entropy_order.split(entropy);
        let tc = (u32::from(f.dscp.0) << 2) | u32::from(f.ecn.bits());
        let word0 = |fl: u32| ((6u32 << 28) | (tc << 20) | (fl & 0x000f_ffff)).to_be_bytes();
        const E: usize = ETHERNET_HEADER_LEN;
        const IP: usize = IPV6_HEADER_LEN;
        let (outer_fl, inner_fl) = match cfg.flow_label {
            FlowLabelPlacement::Outer => (ev.flow_label, 0),
            FlowLabelPlacement::Inner => (0, ev.flow_label),
            FlowLabelPlacement::Both => (ev.flow_label, ev.flow_label),
        };
        // Copy the fixed block (constant lengths: plain moves), then patch the IPv6 headers.
        let (inner, udp) = match (self.layout, route) {
            (TemplateLayout::Ecmp, RouteRef::Ecmp) => {
                const N: usize = TemplateLayout::Ecmp.header_len();
                hdr[..N].copy_from_slice(&self.bytes[..N]);
                hdr[E..E + 4].copy_from_slice(&word0(ev.flow_label));
                (E, E + IP)
            }
            (
                TemplateLayout::Srv6,
                RouteRef::Srv6 {
                    path,
                    srh_segment: None,
                },
            ) => {
                const N: usize = TemplateLayout::Srv6.header_len();
                hdr[..N].copy_from_slice(&self.bytes[..N]);
                hdr[E..E + 4].copy_from_slice(&word0(outer_fl));
                hdr[E + 4..E + 6].copy_from_slice(&((IP + udp_len) as u16).to_be_bytes());
                hdr[E + 24..E + 40].copy_from_slice(&path.octets());
                hdr[E + IP..E + IP + 4].copy_from_slice(&word0(inner_fl));
                (E + IP, E + 2 * IP)
            }
            (
                TemplateLayout::Srv6Srh,
                RouteRef::Srv6 {
                    path,
                    srh_segment: Some(segment),
                },
            ) => {
                const N: usize = TemplateLayout::Srv6Srh.header_len();
                const S: usize = E + IP;
                const I: usize = S + SRH_ONE_SEGMENT_LEN;
                hdr[..N].copy_from_slice(&self.bytes[..N]);
                hdr[E..E + 4].copy_from_slice(&word0(outer_fl));
                hdr[E + 4..E + 6]
                    .copy_from_slice(&((SRH_ONE_SEGMENT_LEN + IP + udp_len) as u16).to_be_bytes());
                hdr[E + 24..E + 40].copy_from_slice(&path.octets());
                hdr[S + 8..S + 24].copy_from_slice(&segment.octets());
                hdr[I..I + 4].copy_from_slice(&word0(inner_fl));
                (I, I + IP)
            }
            _ => {
                return Err(WireError::Malformed {
                    what: "route does not fit the header template",
                });
            }
        };
        hdr[inner + 4..inner + 6].copy_from_slice(&(udp_len as u16).to_be_bytes());
        hdr[udp..udp + 2].copy_from_slice(&ev.udp_sport.to_be_bytes());
        hdr[udp + 4..udp + 6].copy_from_slice(&(udp_len as u16).to_be_bytes());
        // BTH (field offsets of `bth.rs`): opcode, pad count beside the template's SE/M/TVer,
        // AckReq | rtx | ts (the rest reserved, zero), PSN.
        let bth = udp + UDP_HEADER_LEN;
        hdr[bth] = f.opcode.to_u8();
        hdr[bth + 1] = (self.bytes[bth + 1] & !0x30) | ((pad as u8) << 4);
        hdr[bth + 8] =
            (u8::from(f.ack_req) << 7) | (u8::from(f.rtx) << 6) | (u8::from(f.body.ts_flag()) << 5);
        hdr[bth + 9..bth + 12].copy_from_slice(&(f.psn & 0x00ff_ffff).to_be_bytes()[1..]);
        let at = bth + BTH_LEN;
        f.body.emit(&mut hdr[at..at + body_len]);
        let payload = at + body_len..at + body_len + payload_len;
        // The pad (at most 3 bytes, usually none) as one 4-byte store, not a call to memset:
        // the ICRC trailer follows it, so 4 bytes are always there, and `finish` writes the
        // trailer over the rest.
        hdr[payload.end..payload.end + ICRC_LEN].copy_from_slice(&[0; ICRC_LEN]);
        Ok(FrameLayout {
            len,
            payload,
            icrc_from: inner,
        })
    }
}
