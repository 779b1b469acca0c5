//! Wire formats: views (`FooPacket<T: AsRef<[u8]>>`) that check lengths before any access, and
//! reprs (`FooRepr`) with `parse`, `buffer_len` and `emit`.

pub mod ipv6;
pub mod srh;
pub mod usid;

pub use ipv6::{Dscp, Ecn, IPV6_HEADER_LEN, Ipv6Packet, Ipv6Repr};
pub use srh::{SegmentList, SrhPacket, SrhRepr, Tlv, TlvType};
pub use usid::{Usid, UsidContainer, UsidError, UsidFormat};

/// Ethernet and neighbour discovery come from smoltcp (wire types only).
pub use smoltcp::wire::{
    ETHERNET_HEADER_LEN, EthernetAddress, EthernetFrame, EthernetProtocol, EthernetRepr,
    Icmpv6Packet, Icmpv6Repr, NdiscNeighborFlags, NdiscRepr, RawHardwareAddress,
};

/// Errors of every decoder in this crate. Peer bytes never panic: they produce one of these.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// The buffer is shorter than the header (or a length field inside it) says.
    #[error("truncated: need {need} bytes, have {have}")]
    Truncated { need: usize, have: usize },
    /// A field holds a value the format does not allow.
    #[error("malformed {what}")]
    Malformed { what: &'static str },
}

/// Result of every decoder in this crate.
pub type Result<T> = core::result::Result<T, WireError>;

/// Check that `buf` holds at least `need` bytes.
#[inline]
pub fn check_len(buf: &[u8], need: usize) -> Result<()> {
    if buf.len() < need {
        Err(WireError::Truncated {
            need,
            have: buf.len(),
        })
    } else {
        Ok(())
    }
}
