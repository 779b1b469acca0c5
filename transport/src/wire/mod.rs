//! MRC wire formats (MRC 1.0 §5, brief §2): one file per header, smoltcp-shaped.
//!
//! Every header has a `FooPacket<T: AsRef<[u8]>>` view whose `new_checked` validates the length
//! before any access (getters on `AsRef`, setters on `AsMut`), a `FooRepr` with `parse`,
//! `buffer_len` and `emit`, and a `Display` that prints it like tcpdump. Wire codes are enums
//! that keep an `Unknown(u8)` arm.
//!
//! The fields the extension headers SETH, NETH, PETH, ERTH and EETH share (type and next, vendor
//! info, entropy, PDC identifiers, PSN, CC, endpoint op and port mask) are read and written once,
//! by `ext::ExtPrefix`, which their reprs use; their timestamp blocks are TSETH-shaped and
//! viewed as a [`TsethPacket`].
//!
//! On top of the headers:
//! - [`WireConfig`]: the wire knobs of `docs/PROTOCOL.md` (UDP port, DSCPs, trim size, entropy
//!   layout), defined once; the engine embeds it in its configuration.
//! - [`entropy`]: the one mapping between (UDP source port, flow label) and the 32-bit EV.
//! - [`icrc`]: the RoCEv2 invariant CRC (IBTA Annex A17) over the (inner) IPv6 header onwards.
//! - [`frame`]: whole frames in SRv6 mode (`Ethernet | outer IPv6 | [SRH] | inner IPv6 | UDP |
//!   BTH | ...`) and ECMP mode (`Ethernet | IPv6 | UDP | BTH | ...`): a builder that writes into
//!   a caller-provided buffer and a parser that returns typed headers and a payload view, both
//!   without allocating.

pub mod aeth;
pub mod bth;
pub mod cc_state;
pub mod config;
pub mod eeth;
pub mod entropy;
pub mod erth;
pub(crate) mod ext;
pub mod frame;
pub mod icrc;
pub mod immdt;
pub mod meth;
pub mod neth;
pub mod opcode;
pub mod peth;
pub mod reth;
#[cfg(test)]
mod roundtrip_tests;
pub mod seth;
pub mod tseth;
pub mod udp;

pub use aeth::{AETH_LEN, AethPacket, AethRepr};
pub use bth::{BTH_LEN, BthPacket, BthRepr};
pub use cc_state::{CC_STATE_LEN, CcStatePacket, CcStateRepr};
pub use config::{DscpConfig, FlowLabelPlacement, Trimmed, WireConfig};
pub use eeth::{EETH_LEN, EethPacket, EethRepr};
pub use entropy::{Entropy, EntropyOrder};
pub use erth::{ERTH_LEN, EndpointOp, ErthPacket, ErthRepr};
pub use frame::{
    Body, Frame, FrameLayout, FrameRepr, HeaderTemplate, PacketFields, Route, RouteRef, SrhView,
    TEMPLATE_MAX_LEN, TemplateKey, TemplateLayout, WriteHeaders, parse_frame, parse_frame_general,
    trim_frame,
};
pub use immdt::{IMMDT_LEN, ImmDtPacket, ImmDtRepr};
pub use meth::{METH_LEN, MethPacket, MethRepr};
pub use neth::{NETH_LEN, NackReason, NethPacket, NethRepr};
pub use opcode::{Header, Opcode};
pub use peth::{PETH_LEN, PethPacket, PethRepr};
pub use reth::{RETH_LEN, RethPacket, RethRepr};
pub use seth::{MultipathVerdict, SETH_LEN, SethPacket, SethRepr};
pub use tseth::{TSETH_LEN, TsethPacket, TsethRepr};
pub use udp::{UDP_HEADER_LEN, UdpPacket, UdpRepr};

/// Errors of every decoder (and of the frame builder's buffer check). Peer bytes never panic:
/// they produce one of these, and each cause is its own variant so the engine can count them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// A header does not fit in what is left of the frame.
    #[error("truncated {what}: need {need} bytes, have {have}")]
    Truncated {
        what: &'static str,
        need: usize,
        have: usize,
    },
    /// A field holds a value the format does not allow.
    #[error("malformed {what}")]
    Malformed { what: &'static str },
    /// The Ethernet frame does not carry IPv6.
    #[error("ethertype 0x{0:04x} is not IPv6")]
    NotIpv6(u16),
    /// The IPv6 next-header chain does not lead to UDP the way MRC frames do.
    #[error("unexpected IPv6 next header {0}")]
    UnexpectedNextHeader(u8),
    /// The UDP destination port is not the configured MRC port.
    #[error("UDP destination port {0} is not the MRC port")]
    NotMrcPort(u16),
    /// The BTH opcode is not one of MRC's (brief §2.3).
    #[error("opcode 0x{0:02x} is not an MRC opcode")]
    UnknownOpcode(u8),
    /// A length field disagrees with the bytes of the frame.
    #[error("length mismatch in {what}: header says {claimed}, frame has {actual}")]
    LengthMismatch {
        what: &'static str,
        claimed: usize,
        actual: usize,
    },
    /// The invariant CRC does not match: the frame was corrupted.
    #[error("bad ICRC: computed 0x{computed:08x}, frame carries 0x{carried:08x}")]
    BadIcrc { computed: u32, carried: u32 },
    /// The caller's buffer cannot hold the frame it asked to build.
    #[error("buffer too small: need {need} bytes, have {have}")]
    BufferTooSmall { need: usize, have: usize },
}

impl From<mrc_srv6::wire::WireError> for WireError {
    fn from(e: mrc_srv6::wire::WireError) -> Self {
        match e {
            mrc_srv6::wire::WireError::Truncated { need, have } => Self::Truncated {
                what: "IPv6 or SRH header",
                need,
                have,
            },
            mrc_srv6::wire::WireError::Malformed { what } => Self::Malformed { what },
            #[allow(unreachable_patterns)]
            _ => Self::Malformed {
                what: "IPv6 header",
            },
        }
    }
}

/// Result of every decoder in this module.
pub type Result<T> = core::result::Result<T, WireError>;

/// Check that `buf` holds at least `need` bytes of `what`.
#[inline]
pub(crate) fn check_len(buf: &[u8], need: usize, what: &'static str) -> Result<()> {
    if buf.len() < need {
        Err(WireError::Truncated {
            what,
            need,
            have: buf.len(),
        })
    } else {
        Ok(())
    }
}

/// Big-endian field access shared by the header views. Callers index only after
/// `new_checked` (or with a buffer they sized themselves).
pub(crate) mod be {
    #[inline]
    pub fn u16_at(b: &[u8], at: usize) -> u16 {
        u16::from_be_bytes([b[at], b[at + 1]])
    }
    #[inline]
    pub fn u24_at(b: &[u8], at: usize) -> u32 {
        u32::from_be_bytes([0, b[at], b[at + 1], b[at + 2]])
    }
    #[inline]
    pub fn u32_at(b: &[u8], at: usize) -> u32 {
        u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
    }
    #[inline]
    pub fn u64_at(b: &[u8], at: usize) -> u64 {
        let mut x = [0u8; 8];
        x.copy_from_slice(&b[at..at + 8]);
        u64::from_be_bytes(x)
    }
    #[inline]
    pub fn set_u16(b: &mut [u8], at: usize, v: u16) {
        b[at..at + 2].copy_from_slice(&v.to_be_bytes());
    }
    /// Writes the low 24 bits of `v`.
    #[inline]
    pub fn set_u24(b: &mut [u8], at: usize, v: u32) {
        b[at..at + 3].copy_from_slice(&v.to_be_bytes()[1..]);
    }
    #[inline]
    pub fn set_u32(b: &mut [u8], at: usize, v: u32) {
        b[at..at + 4].copy_from_slice(&v.to_be_bytes());
    }
    #[inline]
    pub fn set_u64(b: &mut [u8], at: usize, v: u64) {
        b[at..at + 8].copy_from_slice(&v.to_be_bytes());
    }
}

/// 24-bit PSN / MSN / QPN mask (IBTA: these fields are 24 bits wide).
pub const U24_MASK: u32 = 0x00ff_ffff;
