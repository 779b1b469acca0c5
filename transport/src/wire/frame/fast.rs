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
//!
//! The same walk over the headers ([`walk`]) gives either a full [`Frame`] ([`parse`], behind
//! [`super::parse_frame`]) or, for the hot kinds (data, SACK and transport ACK frames), a
//! [`LeanFrame`] ([`parse_lean`]) that the engine's receive path dispatches without building
//! the 240-byte `Frame` at all.

use core::net::Ipv6Addr;
use core::ops::Range;

use mrc_srv6::wire::ipv6::next_header;
use mrc_srv6::wire::{
    Dscp, Ecn, EthernetFrame, EthernetProtocol, EthernetRepr, IPV6_HEADER_LEN, Ipv6Repr, SrhPacket,
};

use super::super::aeth::{AETH_LEN, AethPacket, AethRepr};
use super::super::bth::{BTH_LEN, BthPacket, BthRepr};
use super::super::cc_state::{CC_STATE_LEN, CcStatePacket, CcStateRepr};
use super::super::config::{FlowLabelPlacement, WireConfig};
use super::super::icrc::{self, ICRC_LEN};
use super::super::opcode::Opcode;
use super::super::seth::{SETH_LEN, SethPacket, SethRepr};
use super::super::udp::{UDP_HEADER_LEN, UdpPacket, UdpRepr};
use super::super::{Result, WireError};
use super::body::write_fixed;
use super::{Body, DataFrame, Frame, LeanBody, LeanFrame, SRH_ONE_SEGMENT_LEN, SrhView};

const ETH: usize = 14;

/// The `N` bytes at `at`, if they are there: every header below is read through its view
/// over exactly its own bytes, so one check covers all its fields.
#[inline(always)]
fn fixed<const N: usize>(b: &[u8], at: usize) -> Option<&[u8]> {
    b.get(at..at.checked_add(N)?)
}

/// The IPv6 fixed header at `at`, if it is one (version 6): `Ipv6Repr::parse`'s fields read
/// straight from the 40 bytes (through mrc-srv6's checked view it costs ~120 instructions
/// more per packet, two headers per SRv6 frame: `perf/stages.py`).
#[inline(always)]
fn ipv6(b: &[u8], at: usize) -> Option<Ipv6Repr> {
    let h: &[u8; IPV6_HEADER_LEN] = fixed::<IPV6_HEADER_LEN>(b, at)?.try_into().ok()?;
    let word0 = u32::from_be_bytes([h[0], h[1], h[2], h[3]]);
    if word0 >> 28 != 6 {
        return None;
    }
    let tc = (word0 >> 20) as u8;
    let addr =
        |at: usize| Ipv6Addr::from(<[u8; 16]>::try_from(&h[at..at + 16]).unwrap_or_default());
    Some(Ipv6Repr {
        dscp: Dscp::new(tc >> 2),
        ecn: Ecn::from_bits(tc),
        flow_label: word0 & 0x000f_ffff,
        payload_len: u16::from_be_bytes([h[4], h[5]]),
        next_header: h[6],
        hop_limit: h[7],
        src_addr: addr(8),
        dst_addr: addr(24),
    })
}

/// One of the engine's own untrimmed layouts, its headers checked up to the body exactly as
/// the general parser checks them: what the fast [`Frame`] and the [`LeanFrame`] are both
/// read from.
struct Walk<'a> {
    /// The frame up to the end of the outer IPv6 payload (an FCS after it cut off).
    frame: &'a [u8],
    outer: Ipv6Repr,
    srh: Option<SrhView<'a>>,
    inner: Option<Ipv6Repr>,
    /// The IPv6 header naming both NICs (the inner one in SRv6 mode): the ICRC starts there.
    nics_at: usize,
    udp: UdpRepr,
    entropy: u32,
    bth: BthRepr,
    /// The first byte after the BTH.
    body_at: usize,
    /// Where the ICRC sits (at or after `body_at`).
    icrc_at: usize,
}

/// Ethernet to BTH of one of the engine's own untrimmed layouts; `None` for anything else.
#[inline(always)]
fn walk<'a>(frame: &'a [u8], cfg: &WireConfig) -> Option<Walk<'a>> {
    let e = EthernetFrame::new_unchecked(fixed::<ETH>(frame, 0)?);
    if e.ethertype() != EthernetProtocol::Ipv6 {
        return None;
    }
    let outer = ipv6(frame, ETH)?;
    if cfg.dscp.trimmed(outer.dscp).is_some() {
        return None;
    }
    // Strict: the outer payload fits and the frame ends there (bytes after it, an FCS, are
    // ignored, as by the general parser).
    let end = (ETH + IPV6_HEADER_LEN).checked_add(usize::from(outer.payload_len))?;
    let frame = frame.get(..end)?;
    let mut at = ETH + IPV6_HEADER_LEN;
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
    let mut nics_at = ETH;
    if nh == next_header::IPV6 {
        let r = ipv6(frame, at)?;
        nics_at = at;
        at += IPV6_HEADER_LEN;
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
    let udp = UdpRepr::parse(&UdpPacket::new_unchecked(fixed::<UDP_HEADER_LEN>(
        frame, at,
    )?))
    .ok()?;
    if udp.dst_port != cfg.udp_dport || usize::from(udp.length) != end - at {
        return None;
    }
    at += UDP_HEADER_LEN;
    let bth = BthRepr::parse(&BthPacket::new_unchecked(fixed::<BTH_LEN>(frame, at)?)).ok()?;
    if !bth.opcode.is_known() {
        return None;
    }
    at += BTH_LEN;
    let flow_label = match (cfg.flow_label, inner) {
        (FlowLabelPlacement::Inner | FlowLabelPlacement::Both, Some(i)) => i.flow_label,
        _ => outer.flow_label,
    };
    let entropy = cfg.entropy_order.join(udp.src_port, flow_label);
    let icrc_at = end.checked_sub(ICRC_LEN).filter(|&i| i >= at)?;
    Some(Walk {
        frame,
        outer,
        srh,
        inner,
        nics_at,
        udp,
        entropy,
        bth,
        body_at: at,
        icrc_at,
    })
}

impl Walk<'_> {
    /// The body's bytes (up to the ICRC).
    #[inline(always)]
    fn body(&self) -> &[u8] {
        &self.frame[self.body_at..self.icrc_at]
    }

    /// The general parser's last two checks, once the body's `body_len` bytes are read: the
    /// pad count fits (`None` otherwise, the general parser's error), and the ICRC, unless
    /// configured off (a bad one is the general parser's `BadIcrc`, computed once). The
    /// payload's range and the ICRC carried.
    #[inline(always)]
    fn finish(&self, body_len: usize, cfg: &WireConfig) -> Option<Result<(Range<usize>, u32)>> {
        let at = self.body_at + body_len;
        let payload_end = self
            .icrc_at
            .checked_sub(usize::from(self.bth.pad_count))
            .filter(|&p| p >= at)?;
        let carried = icrc::read(self.frame[self.icrc_at..].try_into().ok()?);
        if cfg.verify_icrc {
            let computed = icrc::compute(&self.frame[self.nics_at..self.icrc_at]).ok()?;
            if computed != carried {
                return Some(Err(WireError::BadIcrc { computed, carried }));
            }
        }
        Some(Ok((at..payload_end, carried)))
    }

    /// The IPv6 header naming both NICs.
    #[inline(always)]
    fn nics(&self) -> &Ipv6Repr {
        self.inner.as_ref().unwrap_or(&self.outer)
    }
}

/// The parsed frame, when it is one of the engine's own untrimmed layouts and every check of
/// the general parser passes up to the ICRC; then a bad ICRC is the general parser's
/// `BadIcrc` too (it would find the same). `None` sends the frame to the general parser.
#[inline]
pub(super) fn parse<'a>(frame: &'a [u8], cfg: &WireConfig) -> Option<Result<Frame<'a>>> {
    let w = walk(frame, cfg)?;
    let (body, body_len) = Body::parse(w.bth.opcode, w.bth.ts, w.body()).ok()?;
    let (payload, carried) = match w.finish(body_len, cfg)? {
        Ok(p) => p,
        Err(e) => return Some(Err(e)),
    };
    let e = EthernetFrame::new_unchecked(&w.frame[..ETH]);
    Some(Ok(Frame {
        eth: EthernetRepr {
            src_addr: e.src_addr(),
            dst_addr: e.dst_addr(),
            ethertype: EthernetProtocol::Ipv6,
        },
        outer: w.outer,
        srh: w.srh,
        inner: w.inner,
        udp: w.udp,
        trimmed: None,
        entropy: w.entropy,
        bth: w.bth,
        body: Some(body),
        payload: &w.frame[payload],
        icrc: Some(carried),
    }))
}

/// The lean view of a data (Write, Write-with-Immediate), SACK or transport ACK frame in one
/// of the engine's own untrimmed layouts, every check of the general parser passed (issue #13,
/// lean receive path): `Some(Ok)` exactly when [`parse_frame`](super::parse_frame) would give
/// an untrimmed frame of those kinds in those layouts, with the same fields
/// ([`Frame::to_lean`]); a bad ICRC is the general parser's `BadIcrc`. `None` for every other
/// frame (trimmed, NACK, probe, endpoint operation, another layout, anything the general
/// parser refuses): the caller parses it with `parse_frame`. The agreement is a property test (`tests.rs`) and a
/// fuzz invariant (`fuzz/fuzz_targets/frame.rs`).
#[inline]
pub fn parse_lean<'a>(frame: &'a [u8], cfg: &WireConfig) -> Option<Result<LeanFrame<'a>>> {
    let w = walk(frame, cfg)?;
    let body = match w.bth.opcode {
        op if op.is_write() => {
            let (write, len) = write_fixed(op, w.bth.ts, w.body())?;
            let payload = match w.finish(len, cfg)? {
                Ok((p, _)) => &w.frame[p],
                Err(e) => return Some(Err(e)),
            };
            LeanBody::Data(DataFrame {
                entropy: w.entropy,
                ecn: w.outer.ecn,
                write,
                payload,
            })
        }
        Opcode::Sack => {
            let (seth, cc) = sack_fixed(w.body())?;
            if let Err(e) = w.finish(SETH_LEN + CC_STATE_LEN, cfg)? {
                return Some(Err(e));
            }
            LeanBody::Sack { seth, cc }
        }
        Opcode::Ack => {
            let b = fixed::<AETH_LEN>(w.body(), 0)?;
            let aeth = AethRepr::parse(&AethPacket::new_unchecked(b)).ok()?;
            if let Err(e) = w.finish(AETH_LEN, cfg)? {
                return Some(Err(e));
            }
            LeanBody::Ack(aeth)
        }
        _ => return None,
    };
    let nics = w.nics();
    Some(Ok(LeanFrame {
        src_addr: nics.src_addr,
        dst_addr: nics.dst_addr,
        bth: w.bth,
        body,
    }))
}

/// A SACK's SETH and CC_STATE when both are in `buf`: one length check, then each read at
/// its fixed offset (what `Body::parse` gives a SACK, without its error: too short a body is
/// the general parser's to report).
#[inline(always)]
fn sack_fixed(buf: &[u8]) -> Option<(SethRepr, CcStateRepr)> {
    let b = fixed::<{ SETH_LEN + CC_STATE_LEN }>(buf, 0)?;
    let seth = SethRepr::parse(&SethPacket::new_unchecked(&b[..SETH_LEN])).ok()?;
    let cc = CcStateRepr::parse(&CcStatePacket::new_unchecked(&b[SETH_LEN..])).ok()?;
    Some((seth, cc))
}

/// Parse an SRH at the start of `b` (validated by mrc-srv6's view, RFC 8754 §2): the view,
/// its length, its next header. Shared with the general parser.
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
