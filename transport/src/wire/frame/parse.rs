//! Parsing received frames (both modes) into typed headers and a payload view.

use mrc_srv6::wire::ipv6::next_header;
use mrc_srv6::wire::{
    ETHERNET_HEADER_LEN, EthernetFrame, EthernetProtocol, EthernetRepr, IPV6_HEADER_LEN,
    Ipv6Packet, Ipv6Repr,
};

use super::super::bth::{BTH_LEN, BthPacket, BthRepr};
use super::super::config::{FlowLabelPlacement, WireConfig};
use super::super::icrc::{self, ICRC_LEN};
use super::super::udp::{UDP_HEADER_LEN, UdpPacket, UdpRepr};
use super::super::{Result, WireError, check_len};
use super::fast::parse_srh;
use super::{Body, Frame};

/// Parse a received frame.
///
/// Order of checks (PROTOCOL.md "ICRC", brief §2.15): Ethernet and the outer IPv6 fixed header
/// are read first and the outer DSCP classifies a trimmed frame before anything else. A
/// trimmed frame is then parsed only as far as its bytes go: lengths are bounded by what
/// survived, the body is `None` if it was cut, and the ICRC is neither read nor checked; it
/// still yields BTH (QPN, PSN) and the EV so the engine can NACK it. Every other frame must
/// have consistent IPv6/UDP lengths, a pad count that fits, and (unless
/// `cfg.verify_icrc` is off) a good ICRC. Bytes after the outer IPv6 payload (an FCS) are
/// ignored.
///
/// The engine's own untrimmed layouts are read by a fixed-offset fast path
/// ([`super::fast`]); every other frame, and every frame it refuses, by the general parser
/// ([`parse_frame_general`]). Both give the same frame or the general parser's error.
#[inline]
pub fn parse_frame<'a>(frame: &'a [u8], cfg: &WireConfig) -> Result<Frame<'a>> {
    super::fast::parse(frame, cfg).unwrap_or_else(|| parse_frame_general(frame, cfg))
}

/// The general parser: every layout, trimmed frames, and a typed error for every frame it
/// refuses (the order of checks above).
pub fn parse_frame_general<'a>(frame: &'a [u8], cfg: &WireConfig) -> Result<Frame<'a>> {
    check_len(frame, ETHERNET_HEADER_LEN, "Ethernet header")?;
    let e = EthernetFrame::new_unchecked(frame);
    let eth = EthernetRepr {
        src_addr: e.src_addr(),
        dst_addr: e.dst_addr(),
        ethertype: e.ethertype(),
    };
    if eth.ethertype != EthernetProtocol::Ipv6 {
        return Err(WireError::NotIpv6(u16::from(eth.ethertype)));
    }

    let outer_at = ETHERNET_HEADER_LEN;
    let outer = Ipv6Repr::parse(&Ipv6Packet::new_checked(&frame[outer_at..])?)?;
    // MRC 1.0 §6 (brief §2.15): a trimmed frame is recognised by its DSCP first.
    let trimmed = cfg.dscp.trimmed(outer.dscp);
    let strict = trimmed.is_none();

    let mut at = outer_at + IPV6_HEADER_LEN;
    let end = bounded_end(
        at,
        outer.payload_len,
        frame.len(),
        strict,
        "outer IPv6 payload length",
    )?;
    let mut nh = outer.next_header;

    let mut srh = None;
    if nh == next_header::ROUTING {
        let (view, len, next) = parse_srh(&frame[at..end])?;
        srh = Some(view);
        at += len;
        nh = next;
    }

    let mut inner = None;
    let mut end = end;
    let mut icrc_from = outer_at;
    if nh == next_header::IPV6 {
        let r = Ipv6Repr::parse(&Ipv6Packet::new_checked(&frame[at..end])?)?;
        icrc_from = at;
        at += IPV6_HEADER_LEN;
        let outer_end = end;
        end = bounded_end(at, r.payload_len, end, strict, "inner IPv6 payload length")?;
        if strict && end != outer_end {
            return Err(WireError::LengthMismatch {
                what: "inner IPv6 payload length",
                claimed: usize::from(r.payload_len),
                actual: outer_end - at,
            });
        }
        nh = r.next_header;
        inner = Some(r);
    } else if srh.is_some() {
        return Err(WireError::UnexpectedNextHeader(nh));
    }
    if nh != next_header::UDP {
        return Err(WireError::UnexpectedNextHeader(nh));
    }

    let udp = UdpRepr::parse(&UdpPacket::new_checked(&frame[at..end])?)?;
    if udp.dst_port != cfg.udp_dport {
        return Err(WireError::NotMrcPort(udp.dst_port));
    }
    let udp_end = if strict {
        if usize::from(udp.length) != end - at {
            return Err(WireError::LengthMismatch {
                what: "UDP length",
                claimed: usize::from(udp.length),
                actual: end - at,
            });
        }
        end
    } else {
        end.min(at + usize::from(udp.length).max(UDP_HEADER_LEN))
    };
    at += UDP_HEADER_LEN;

    let bth = BthRepr::parse(&BthPacket::new_checked(&frame[at..udp_end])?)?;
    if !bth.opcode.is_known() {
        return Err(WireError::UnknownOpcode(bth.opcode.to_u8()));
    }
    at += BTH_LEN;

    let flow_label = match (cfg.flow_label, inner) {
        (FlowLabelPlacement::Inner | FlowLabelPlacement::Both, Some(i)) => i.flow_label,
        _ => outer.flow_label,
    };
    let entropy = cfg.entropy_order.join(udp.src_port, flow_label);

    if !strict {
        let (body, payload) = match Body::parse(bth.opcode, bth.ts, &frame[at..udp_end]) {
            Ok((body, len)) => (Some(body), &frame[at + len..udp_end]),
            Err(_) => (None, &frame[udp_end..udp_end]),
        };
        return Ok(Frame {
            eth,
            outer,
            srh,
            inner,
            udp,
            trimmed,
            entropy,
            bth,
            body,
            payload,
            icrc: None,
        });
    }

    let icrc_at =
        udp_end
            .checked_sub(ICRC_LEN)
            .filter(|&i| i >= at)
            .ok_or(WireError::Truncated {
                what: "ICRC",
                need: at + ICRC_LEN,
                have: udp_end,
            })?;
    let (body, body_len) = Body::parse(bth.opcode, bth.ts, &frame[at..icrc_at])?;
    at += body_len;
    let payload_end = icrc_at
        .checked_sub(usize::from(bth.pad_count))
        .filter(|&p| p >= at)
        .ok_or(WireError::LengthMismatch {
            what: "BTH pad count",
            claimed: usize::from(bth.pad_count),
            actual: icrc_at - at,
        })?;
    let mut trailer = [0u8; ICRC_LEN];
    trailer.copy_from_slice(&frame[icrc_at..udp_end]);
    let carried = icrc::read(&trailer);
    if cfg.verify_icrc {
        let computed = icrc::compute(&frame[icrc_from..icrc_at])?;
        if computed != carried {
            return Err(WireError::BadIcrc { computed, carried });
        }
    }
    Ok(Frame {
        eth,
        outer,
        srh,
        inner,
        udp,
        trimmed,
        entropy,
        bth,
        body: Some(body),
        payload: &frame[at..payload_end],
        icrc: Some(carried),
    })
}

/// End of an IPv6 payload that starts at `start`, claims `claimed` bytes, and must fit in
/// `limit`. Strict: the claim must fit, and the payload ends exactly there. Lenient (trimmed
/// frames): whatever survived, up to the claim.
fn bounded_end(
    start: usize,
    claimed: u16,
    limit: usize,
    strict: bool,
    what: &'static str,
) -> Result<usize> {
    let claimed = usize::from(claimed);
    let actual = limit.saturating_sub(start);
    if strict && claimed > actual {
        return Err(WireError::LengthMismatch {
            what,
            claimed,
            actual,
        });
    }
    Ok(start + claimed.min(actual))
}
