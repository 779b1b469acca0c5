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
/// more per packet, two headers per SRv6 frame: `perf/stages.py`). Only the full [`Frame`]
/// builds it; the walk reads the few fields it checks ([`Ipv6Head`]).
#[inline(always)]
fn ipv6(b: &[u8], at: usize) -> Option<Ipv6Repr> {
    let head = Ipv6Head::at(b, at)?;
    let h = fixed::<IPV6_HEADER_LEN>(b, at)?;
    let tc = (head.word0 >> 20) as u8;
    Some(Ipv6Repr {
        dscp: Dscp::new(tc >> 2),
        ecn: Ecn::from_bits(tc),
        flow_label: head.word0 & 0x000f_ffff,
        payload_len: head.payload_len,
        next_header: head.next_header,
        hop_limit: h[7],
        src_addr: addr_at(h, 8),
        dst_addr: addr_at(h, 24),
    })
}

/// The IPv6 address at `at` of `b` (which holds its 16 bytes).
#[inline(always)]
fn addr_at(b: &[u8], at: usize) -> Ipv6Addr {
    Ipv6Addr::from(<[u8; 16]>::try_from(&b[at..at + 16]).unwrap_or_default())
}

/// What the walk checks of an IPv6 fixed header: its first word (version, traffic class, flow
/// label), payload length and next header, read in place (issue #13: the walk builds no
/// `Ipv6Repr`, whose 40-odd bytes the compiler moved around the stack twice per header).
#[derive(Clone, Copy)]
struct Ipv6Head {
    word0: u32,
    payload_len: u16,
    next_header: u8,
}

impl Ipv6Head {
    /// The header at `at`, if its 40 bytes are there and it is version 6.
    #[inline(always)]
    fn at(b: &[u8], at: usize) -> Option<Self> {
        let h = fixed::<IPV6_HEADER_LEN>(b, at)?;
        let word0 = u32::from_be_bytes([h[0], h[1], h[2], h[3]]);
        (word0 >> 28 == 6).then(|| Self {
            word0,
            payload_len: u16::from_be_bytes([h[4], h[5]]),
            next_header: h[6],
        })
    }

    #[inline(always)]
    const fn traffic_class(self) -> u8 {
        (self.word0 >> 20) as u8
    }

    #[inline(always)]
    const fn flow_label(self) -> u32 {
        self.word0 & 0x000f_ffff
    }
}

/// One of the engine's own untrimmed layouts, its headers checked up to the body exactly as
/// the general parser checks them: what the fast [`Frame`] and the [`LeanFrame`] are both
/// read from. Offsets and the few values the checks read, no header reprs (the full
/// [`Frame`] reads its reprs again from the checked bytes).
struct Walk<'a> {
    /// The frame up to the end of the outer IPv6 payload (an FCS after it cut off).
    frame: &'a [u8],
    /// The outer traffic class (DSCP and the ECN switches mark).
    outer_tc: u8,
    /// Whether an SRH (at `ETH + 40`, one segment) and an inner IPv6 header follow.
    srh: bool,
    inner: bool,
    /// The IPv6 header naming both NICs (the inner one in SRv6 mode): the ICRC starts there.
    nics_at: usize,
    /// The UDP header.
    udp_at: usize,
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
    let outer = Ipv6Head::at(frame, ETH)?;
    let outer_tc = outer.traffic_class();
    if cfg.dscp.trimmed(Dscp::new(outer_tc >> 2)).is_some() {
        return None;
    }
    // Strict: the outer payload fits and the frame ends there (bytes after it, an FCS, are
    // ignored, as by the general parser).
    let end = (ETH + IPV6_HEADER_LEN).checked_add(usize::from(outer.payload_len))?;
    let frame = frame.get(..end)?;
    let mut at = ETH + IPV6_HEADER_LEN;
    let mut nh = outer.next_header;
    let mut srh = false;
    if nh == next_header::ROUTING {
        let (_, len, next) = parse_srh(&frame[at..]).ok()?;
        if len != SRH_ONE_SEGMENT_LEN {
            return None;
        }
        srh = true;
        at += len;
        nh = next;
    }
    let mut inner = false;
    let mut nics_at = ETH;
    let mut flow_label = outer.flow_label();
    if nh == next_header::IPV6 {
        let r = Ipv6Head::at(frame, at)?;
        nics_at = at;
        at += IPV6_HEADER_LEN;
        // Strict: the inner payload is exactly what the outer one leaves.
        if at + usize::from(r.payload_len) != end {
            return None;
        }
        nh = r.next_header;
        inner = true;
        if matches!(
            cfg.flow_label,
            FlowLabelPlacement::Inner | FlowLabelPlacement::Both
        ) {
            flow_label = r.flow_label();
        }
    } else if srh {
        return None;
    }
    if nh != next_header::UDP {
        return None;
    }
    let udp_at = at;
    let u = fixed::<UDP_HEADER_LEN>(frame, at)?;
    let (sport, dport, udp_len) = (
        u16::from_be_bytes([u[0], u[1]]),
        u16::from_be_bytes([u[2], u[3]]),
        u16::from_be_bytes([u[4], u[5]]),
    );
    if dport != cfg.udp_dport || usize::from(udp_len) != end - at {
        return None;
    }
    at += UDP_HEADER_LEN;
    let bth = BthRepr::parse(&BthPacket::new_unchecked(fixed::<BTH_LEN>(frame, at)?)).ok()?;
    if !bth.opcode.is_known() {
        return None;
    }
    at += BTH_LEN;
    let entropy = cfg.entropy_order.join(sport, flow_label);
    let icrc_at = end.checked_sub(ICRC_LEN).filter(|&i| i >= at)?;
    Some(Walk {
        frame,
        outer_tc,
        srh,
        inner,
        nics_at,
        udp_at,
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

    /// The source and destination NICs (the addresses of the IPv6 header at `nics_at`).
    #[inline(always)]
    fn nics(&self) -> (Ipv6Addr, Ipv6Addr) {
        let h = &self.frame[self.nics_at..self.nics_at + IPV6_HEADER_LEN];
        (addr_at(h, 8), addr_at(h, 24))
    }

    /// The outer ECN.
    #[inline(always)]
    const fn ecn(&self) -> Ecn {
        Ecn::from_bits(self.outer_tc)
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
    // The reprs, from the bytes the walk checked (this path builds the full `Frame`).
    let outer = ipv6(w.frame, ETH)?;
    let srh = if w.srh {
        Some(parse_srh(&w.frame[ETH + IPV6_HEADER_LEN..]).ok()?.0)
    } else {
        None
    };
    let inner = if w.inner {
        Some(ipv6(w.frame, w.nics_at)?)
    } else {
        None
    };
    let udp = UdpRepr::parse(&UdpPacket::new_unchecked(fixed::<UDP_HEADER_LEN>(
        w.frame, w.udp_at,
    )?))
    .ok()?;
    Some(Ok(Frame {
        eth: EthernetRepr {
            src_addr: e.src_addr(),
            dst_addr: e.dst_addr(),
            ethertype: EthernetProtocol::Ipv6,
        },
        outer,
        srh,
        inner,
        udp,
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
                ecn: w.ecn(),
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
    let (src_addr, dst_addr) = w.nics();
    Some(Ok(LeanFrame {
        src_addr,
        dst_addr,
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
