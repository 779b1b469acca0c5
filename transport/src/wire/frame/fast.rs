//! The receive fast path (issue #13, "fixed offsets once the outer headers are recognised"):
//! the frames the engine itself sends, read at fixed offsets with one length check per
//! header instead of a checked view and a typed repr per header.
//!
//! It recognises the three layouts of MRC 1.0 §5.1 (PROTOCOL.md "Frames"), untrimmed:
//!
//! ```text
//! ECMP          Ethernet(14) | IPv6(40)                        | UDP(8) | BTH(12) | body ...
//! SRv6          Ethernet(14) | IPv6(40) | IPv6(40)             | UDP(8) | BTH(12) | body ...
//! SRv6 + SRH    Ethernet(14) | IPv6(40) | SRH(24) | IPv6(40)   | UDP(8) | BTH(12) | body ...
//! ```
//!
//! and accepts a frame only when every check of the general parser ([`super::parse_frame`])
//! passes; anything else (a trimmed frame, an SRH of another length, a length that does not
//! add up, a bad ICRC, an unknown opcode) returns `None` and the general parser decides, so
//! both agree on every frame and the errors stay the general parser's. The agreement is a
//! property test (`tests.rs`) and a fuzz invariant (`fuzz/fuzz_targets/frame.rs`).

use core::net::Ipv6Addr;

use mrc_srv6::wire::ipv6::next_header;
use mrc_srv6::wire::{Dscp, Ecn, EthernetAddress, EthernetProtocol, EthernetRepr, Ipv6Repr};

use super::super::bth::{BTH_LEN, BthPacket, BthRepr};
use super::super::config::{FlowLabelPlacement, WireConfig};
use super::super::icrc::{self, ICRC_LEN};
use super::super::opcode::Opcode;
use super::super::udp::{UDP_HEADER_LEN, UdpRepr};
use mrc_srv6::wire::SrhPacket;

use super::super::Result;
use super::{Body, Frame, SRH_ONE_SEGMENT_LEN, SrhView};

const ETH: usize = 14;
const IP6: usize = 40;

#[inline(always)]
fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

#[inline(always)]
fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// The fixed IPv6 header at the start of `h` (40 bytes, version already checked).
#[inline(always)]
fn ipv6(h: &[u8; IP6]) -> Ipv6Repr {
    let word0 = u32_at(h, 0);
    let tc = (word0 >> 20) as u8;
    let mut src = [0u8; 16];
    src.copy_from_slice(&h[8..24]);
    let mut dst = [0u8; 16];
    dst.copy_from_slice(&h[24..40]);
    Ipv6Repr {
        dscp: Dscp::new(tc >> 2),
        ecn: Ecn::from_bits(tc),
        flow_label: word0 & 0x000f_ffff,
        payload_len: u16_at(h, 4),
        next_header: h[6],
        hop_limit: h[7],
        src_addr: Ipv6Addr::from(src),
        dst_addr: Ipv6Addr::from(dst),
    }
}

/// `b[at..at + N]` as an array, if it is there.
#[inline(always)]
fn fixed<const N: usize>(b: &[u8], at: usize) -> Option<&[u8; N]> {
    b.get(at..at.checked_add(N)?)?.try_into().ok()
}

/// The parsed frame, when it is one of the engine's own untrimmed layouts and every check of
/// the general parser passes; `None` sends it to the general parser.
#[inline]
pub(super) fn parse<'a>(frame: &'a [u8], cfg: &WireConfig) -> Option<Frame<'a>> {
    let eth: &[u8; ETH] = fixed(frame, 0)?;
    if u16_at(eth, 12) != u16::from(EthernetProtocol::Ipv6) {
        return None;
    }
    let oh: &[u8; IP6] = fixed(frame, ETH)?;
    if oh[0] >> 4 != 6 {
        return None;
    }
    let outer = ipv6(oh);
    if cfg.dscp.trimmed(outer.dscp).is_some() {
        return None;
    }
    // Strict: the outer payload fits and the frame ends there (bytes after it, an FCS, are
    // ignored, as by the general parser).
    let end = (ETH + IP6).checked_add(usize::from(outer.payload_len))?;
    if end > frame.len() {
        return None;
    }
    let frame = &frame[..end];
    let mut at = ETH + IP6;
    let mut nh = outer.next_header;
    let mut srh = None;
    if nh == next_header::ROUTING {
        let (view, len, next) = parse_srh(&frame[at..]).ok()?;
        if len != SRH_ONE_SEGMENT_LEN {
            return None;
        }
        srh = Some(view);
        at += len;
        nh = next;
    }
    let mut inner = None;
    let mut icrc_from = ETH;
    if nh == next_header::IPV6 {
        let ih: &[u8; IP6] = fixed(frame, at)?;
        if ih[0] >> 4 != 6 {
            return None;
        }
        let r = ipv6(ih);
        icrc_from = at;
        at += IP6;
        // Strict: the inner payload is exactly what the outer one leaves.
        if at + usize::from(r.payload_len) != end {
            return None;
        }
        nh = r.next_header;
        inner = Some(r);
    } else if srh.is_some() {
        return None;
    }
    if nh != next_header::UDP {
        return None;
    }
    let uh: &[u8; UDP_HEADER_LEN] = fixed(frame, at)?;
    let udp = UdpRepr {
        src_port: u16_at(uh, 0),
        dst_port: u16_at(uh, 2),
        length: u16_at(uh, 4),
        checksum: u16_at(uh, 6),
    };
    if udp.dst_port != cfg.udp_dport || usize::from(udp.length) != end - at {
        return None;
    }
    at += UDP_HEADER_LEN;
    let bh: &[u8; BTH_LEN] = fixed(frame, at)?;
    let opcode = Opcode::from_u8(bh[0]);
    if !opcode.is_known() {
        return None;
    }
    let bth = BthRepr::parse(&BthPacket::new_unchecked(&bh[..])).ok()?;
    at += BTH_LEN;
    let flow_label = match (cfg.flow_label, inner) {
        (FlowLabelPlacement::Inner | FlowLabelPlacement::Both, Some(i)) => i.flow_label,
        _ => outer.flow_label,
    };
    let entropy = cfg.entropy_order.join(udp.src_port, flow_label);
    let icrc_at = end.checked_sub(ICRC_LEN).filter(|&i| i >= at)?;
    let (body, body_len) = Body::parse(opcode, bth.ts, &frame[at..icrc_at]).ok()?;
    at += body_len;
    let payload_end = icrc_at
        .checked_sub(usize::from(bth.pad_count))
        .filter(|&p| p >= at)?;
    let trailer: &[u8; ICRC_LEN] = fixed(frame, icrc_at)?;
    let carried = icrc::read(trailer);
    if cfg.verify_icrc && icrc::compute(&frame[icrc_from..icrc_at]).ok()? != carried {
        return None;
    }
    Some(Frame {
        eth: EthernetRepr {
            dst_addr: EthernetAddress([eth[0], eth[1], eth[2], eth[3], eth[4], eth[5]]),
            src_addr: EthernetAddress([eth[6], eth[7], eth[8], eth[9], eth[10], eth[11]]),
            ethertype: EthernetProtocol::Ipv6,
        },
        outer,
        srh,
        inner,
        udp,
        trimmed: None,
        entropy,
        bth,
        body: Some(body),
        payload: &frame[at..payload_end],
        icrc: Some(carried),
    })
}

/// Parse an SRH at the start of `b` (validated by mrc-srv6's view, RFC 8754 §2): the view,
/// its length, its next header.
/// (Shared with the general parser.)
pub(super) fn parse_srh(b: &[u8]) -> Result<(SrhView<'_>, usize, u8)> {
    let p = SrhPacket::new_checked(b)?;
    let len = p.header_len();
    let view = SrhView {
        segments_left: p.segments_left(),
        last_entry: p.last_entry(),
        flags: p.flags(),
        tag: p.tag(),
        segments: &b[8..8 + 16 * p.segment_count()],
    };
    Ok((view, len, p.next_header()))
}
