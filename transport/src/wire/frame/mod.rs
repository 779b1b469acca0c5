//! Whole MRC frames, both path modes (MRC 1.0 §5.1, brief §2.1, PROTOCOL.md "Frames"):
//!
//! ```text
//! SRv6: Ethernet | outer IPv6 (DA = uSID path) | [SRH, one segment] | inner IPv6 (DA = NIC)
//!       | UDP | BTH | body | payload | pad | ICRC
//! ECMP: Ethernet | IPv6 | UDP | BTH | body | payload | pad | ICRC
//! ```
//!
//! Building: [`FrameRepr::emit`] writes every header into the caller's buffer (an mbuf's data
//! room) and returns a [`FrameLayout`]; the caller copies the payload straight from registered
//! memory into `buf[layout.payload]`, then [`FrameLayout::finish`] writes the ICRC (and the
//! UDP checksum when configured). [`FrameRepr::build`] does all three from a slice. The
//! engine's QPs emit through a [`HeaderTemplate`] instead (issue #13, header templates): the
//! same bytes, the fixed headers copied and only the per-packet fields patched.
//!
//! Parsing: [`parse_frame`] returns typed headers and a view of the payload, without copying.
//! A frame whose outer DSCP says "trimmed" is classified before anything else and parsed only
//! as far as its bytes survived, never length- or ICRC-checked.
//!
//! The receive fast path (issue #13): [`parse_lean`] reads the two hot kinds, data (Write,
//! Write-with-Immediate) and SACK frames in the engine's own untrimmed layouts, into a
//! [`LeanFrame`] holding only what the engine's dispatch and its data, SACK and ACK handlers read;
//! every other frame goes to [`parse_frame`] and a full [`Frame`].

mod body;
mod emit;
mod fast;
mod parse;
mod template;
mod trim;

use core::fmt;
use core::net::Ipv6Addr;
use core::ops::Range;

use mrc_srv6::wire::{Dscp, Ecn, EthernetAddress, EthernetRepr, Ipv6Repr};

pub use body::{Body, WriteHeaders};
pub use fast::parse_lean;
pub use parse::{parse_frame, parse_frame_general};
pub use template::{HeaderTemplate, PacketFields, TEMPLATE_MAX_LEN, TemplateKey, TemplateLayout};
pub use trim::trim_frame;

use super::aeth::AethRepr;
use super::bth::BthRepr;
use super::cc_state::CcStateRepr;
use super::config::Trimmed;
use super::seth::SethRepr;
use super::udp::UdpRepr;

/// Length of a one-segment SRH (RFC 8754 §2: 8 fixed bytes + one 16-byte segment).
pub const SRH_ONE_SEGMENT_LEN: usize = 24;

/// How the frame is routed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Route {
    /// One IPv6 header to the destination NIC; switches hash the EV (brief §8).
    Ecmp,
    /// IPv6-in-IPv6: the outer DA is the uSID path (brief §2.16), optionally continued by a
    /// one-segment SRH holding the next uSID container (segments left 1, the DA being the
    /// omitted first segment, RFC 8754 §4.1.1).
    Srv6 {
        path: Ipv6Addr,
        srh_segment: Option<Ipv6Addr>,
    },
}

impl Route {
    /// Borrowed.
    #[inline]
    pub fn as_ref(&self) -> RouteRef<'_> {
        match self {
            Self::Ecmp => RouteRef::Ecmp,
            Self::Srv6 { path, srh_segment } => RouteRef::Srv6 {
                path,
                srh_segment: srh_segment.as_ref(),
            },
        }
    }
}

/// A [`Route`] borrowed from where it lives (an EV table's cold array): what a header
/// template patches per packet (issue #13: no copy of the route through the stack).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteRef<'a> {
    Ecmp,
    Srv6 {
        path: &'a Ipv6Addr,
        srh_segment: Option<&'a Ipv6Addr>,
    },
}

impl RouteRef<'_> {
    /// Owned.
    pub fn to_route(self) -> Route {
        match self {
            Self::Ecmp => Route::Ecmp,
            Self::Srv6 { path, srh_segment } => Route::Srv6 {
                path: *path,
                srh_segment: srh_segment.copied(),
            },
        }
    }
}

/// Every header field of a frame to build. The BTH's `ts` flag and pad count are derived
/// from `body` and the payload length when emitting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FrameRepr {
    pub src_mac: EthernetAddress,
    pub dst_mac: EthernetAddress,
    pub route: Route,
    /// This NIC's address: source of both IPv6 headers.
    pub src_addr: Ipv6Addr,
    /// The destination NIC (inner DA in SRv6 mode, the only DA in ECMP mode).
    pub dst_addr: Ipv6Addr,
    /// Traffic class of the frame (see [`super::DscpConfig::for_packet`]).
    pub dscp: Dscp,
    pub ecn: Ecn,
    /// The 32-bit EV, split onto UDP source port and flow label by the configured order.
    pub entropy: u32,
    pub bth: BthRepr,
    pub body: Body,
}

/// Where things landed in a frame [`FrameRepr::emit`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameLayout {
    /// Total frame length, ICRC included.
    pub len: usize,
    /// Where the caller puts the payload.
    pub payload: Range<usize>,
    /// Offset of the IPv6 header the ICRC starts at (the inner one in SRv6 mode).
    pub icrc_from: usize,
}

/// A one-segment-or-more SRH as seen in a received frame (RFC 8754 §2), kept as a view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SrhView<'a> {
    pub segments_left: u8,
    pub last_entry: u8,
    pub flags: u8,
    pub tag: u16,
    /// The segment list, 16 bytes per segment, index 0 first.
    pub segments: &'a [u8],
}

impl SrhView<'_> {
    /// Number of segments in the list.
    pub fn len(&self) -> usize {
        self.segments.len() / 16
    }
    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.segments.len() < 16
    }
    /// Segment `i` of the list.
    pub fn segment(&self, i: usize) -> Option<Ipv6Addr> {
        let s = self.segments.get(i * 16..i * 16 + 16)?;
        let mut o = [0u8; 16];
        o.copy_from_slice(s);
        Some(Ipv6Addr::from(o))
    }
}

impl fmt::Display for SrhView<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "SRH sl {} last {} segs [",
            self.segments_left, self.last_entry
        )?;
        for i in 0..self.len() {
            if let Some(s) = self.segment(i) {
                write!(f, "{}{s}", if i == 0 { "" } else { ", " })?;
            }
        }
        f.write_str("]")
    }
}

/// A parsed frame: typed headers and a view of the payload in the input buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame<'a> {
    pub eth: EthernetRepr,
    /// The outer (SRv6) or only (ECMP) IPv6 header: DSCP/ECN are read here.
    pub outer: Ipv6Repr,
    pub srh: Option<SrhView<'a>>,
    /// The inner IPv6 header (SRv6 mode).
    pub inner: Option<Ipv6Repr>,
    pub udp: UdpRepr,
    /// Set when the outer DSCP says a switch trimmed the frame.
    pub trimmed: Option<Trimmed>,
    /// The 32-bit EV joined from UDP source port and flow label (inner, else outer).
    pub entropy: u32,
    pub bth: BthRepr,
    /// The headers after the BTH; `None` only for a trimmed frame that lost them.
    pub body: Option<Body>,
    /// Payload (without pad or ICRC). For a trimmed frame: whatever survived after the body.
    pub payload: &'a [u8],
    /// The ICRC carried (checked unless configured off); `None` for trimmed frames.
    pub icrc: Option<u32>,
}

impl Frame<'_> {
    /// Outer DSCP (what switches classify and rewrite).
    pub fn dscp(&self) -> Dscp {
        self.outer.dscp
    }
    /// Outer ECN (what switches mark).
    pub fn ecn(&self) -> Ecn {
        self.outer.ecn
    }
    /// The frame came IPv6-in-IPv6 (SRv6 mode).
    pub fn is_srv6(&self) -> bool {
        self.inner.is_some()
    }
    /// The sending NIC.
    pub fn src_addr(&self) -> Ipv6Addr {
        self.inner.map_or(self.outer.src_addr, |i| i.src_addr)
    }
    /// The destination NIC.
    pub fn dst_addr(&self) -> Ipv6Addr {
        self.inner.map_or(self.outer.dst_addr, |i| i.dst_addr)
    }
}

impl Frame<'_> {
    /// The [`FrameRepr`] that builds this frame again (`None` for a trimmed frame that lost
    /// its body). With an SRH, its first segment becomes the route's `srh_segment`.
    pub fn to_repr(&self) -> Option<FrameRepr> {
        let route = match (self.inner, &self.srh) {
            (None, _) => Route::Ecmp,
            (Some(_), srh) => Route::Srv6 {
                path: self.outer.dst_addr,
                srh_segment: srh.and_then(|s| s.segment(0)),
            },
        };
        Some(FrameRepr {
            src_mac: self.eth.src_addr,
            dst_mac: self.eth.dst_addr,
            route,
            src_addr: self.src_addr(),
            dst_addr: self.dst_addr(),
            dscp: self.outer.dscp,
            ecn: self.outer.ecn,
            entropy: self.entropy,
            bth: self.bth,
            body: self.body?,
        })
    }
}

impl<'a> Frame<'a> {
    /// The [`LeanFrame`] of this frame's fields, for an untrimmed data, SACK or ACK frame (`None`
    /// otherwise): what [`parse_lean`] gives when it takes the frame (the oracle of the
    /// tests and the fuzz target).
    pub fn to_lean(&self) -> Option<LeanFrame<'a>> {
        if self.trimmed.is_some() {
            return None;
        }
        let body = match self.body? {
            Body::Write(write) => LeanBody::Data(DataFrame {
                entropy: self.entropy,
                ecn: self.ecn(),
                write,
                payload: self.payload,
            }),
            Body::Sack { seth, cc } => LeanBody::Sack { seth, cc },
            Body::Ack(a) => LeanBody::Ack(a),
            _ => return None,
        };
        Some(LeanFrame {
            src_addr: self.src_addr(),
            dst_addr: self.dst_addr(),
            bth: self.bth,
            body,
        })
    }
}

/// A received data, SACK or ACK frame, reduced to what the engine's dispatch and its data,
/// SACK and ACK handlers read (issue #13, lean receive path): about half a [`Frame`], built by
/// [`parse_lean`] straight from fixed offsets without the Ethernet, IPv6, SRH and UDP reprs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeanFrame<'a> {
    /// The sending NIC (inner IPv6 SA in SRv6 mode, the only SA in ECMP mode).
    pub src_addr: Ipv6Addr,
    /// The destination NIC.
    pub dst_addr: Ipv6Addr,
    pub bth: BthRepr,
    pub body: LeanBody<'a>,
}

/// The body of a [`LeanFrame`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeanBody<'a> {
    /// A Write or Write-with-Immediate (0xC6–0xCB).
    Data(DataFrame<'a>),
    /// A SACK (0xDC): SETH then CC_STATE.
    Sack { seth: SethRepr, cc: CcStateRepr },
    /// A transport ACK (0xD1): AETH. With small messages one follows nearly every SACK
    /// (brief §2.13), so it takes the lean path too.
    Ack(AethRepr),
}

/// A Write packet as the responder reads it (brief §4.1), from a [`LeanFrame`] or a [`Frame`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataFrame<'a> {
    /// The 32-bit EV joined from UDP source port and flow label.
    pub entropy: u32,
    /// Outer ECN (what switches mark).
    pub ecn: Ecn,
    pub write: WriteHeaders,
    /// Payload (without pad or ICRC).
    pub payload: &'a [u8],
}

impl fmt::Display for Frame<'_> {
    /// One line per header, outermost first, tcpdump style.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "Ethernet {} > {} type {}",
            self.eth.src_addr, self.eth.dst_addr, self.eth.ethertype
        )?;
        writeln!(f, "{}", self.outer)?;
        if let Some(s) = &self.srh {
            writeln!(f, "{s}")?;
        }
        if let Some(i) = &self.inner {
            writeln!(f, "{i}")?;
        }
        writeln!(f, "{}", self.udp)?;
        writeln!(f, "{} ev 0x{:08x}", self.bth, self.entropy)?;
        if let Some(b) = &self.body {
            writeln!(f, "{b}")?;
        }
        match (self.trimmed, self.icrc) {
            (Some(t), _) => write!(
                f,
                "TRIMMED ({}) {} bytes survive after headers",
                match t {
                    Trimmed::InFabric => "in fabric",
                    Trimmed::LastHop => "at last hop",
                },
                self.payload.len()
            ),
            (None, Some(icrc)) => {
                write!(f, "payload {} bytes icrc 0x{icrc:08x}", self.payload.len())
            }
            (None, None) => write!(f, "payload {} bytes", self.payload.len()),
        }
    }
}

#[cfg(test)]
mod tests;
