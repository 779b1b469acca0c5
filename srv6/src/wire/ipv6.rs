//! The IPv6 fixed header (RFC 8200 §3), with the traffic class split into DSCP and ECN
//! (RFC 2474, RFC 3168) and the 20-bit flow label (RFC 6437).
//!
//! MRC uses it twice in SRv6 mode (outer header: DA = uSID path; inner header: DA = the
//! destination NIC) and once in ECMP mode.

use core::fmt;
use core::net::Ipv6Addr;

use super::{Result, WireError, check_len};

/// Length of the fixed IPv6 header.
pub const IPV6_HEADER_LEN: usize = 40;

/// IP protocol numbers MRC meets (IANA "Assigned Internet Protocol Numbers").
pub mod next_header {
    /// UDP (RFC 768).
    pub const UDP: u8 = 17;
    /// IPv6 encapsulated in IPv6 (RFC 2473): SRv6 mode's inner header.
    pub const IPV6: u8 = 41;
    /// IPv6 Routing Header (RFC 8200 §4.4); routing type 4 is the SRH.
    pub const ROUTING: u8 = 43;
    /// ICMPv6 (RFC 4443).
    pub const ICMPV6: u8 = 58;
    /// No next header.
    pub const NONE: u8 = 59;
}

/// Differentiated Services Code Point: the upper 6 bits of the traffic class (RFC 2474 §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Dscp(pub u8);

impl Dscp {
    /// The code point, masked to 6 bits.
    pub const fn new(value: u8) -> Self {
        Self(value & 0x3f)
    }
}

impl fmt::Display for Dscp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Explicit Congestion Notification codepoint: the lower 2 bits of the traffic class
/// (RFC 3168 §5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Ecn {
    /// Not ECN-capable transport.
    #[default]
    NotEct,
    /// ECN-capable transport, codepoint ECT(1).
    Ect1,
    /// ECN-capable transport, codepoint ECT(0).
    Ect0,
    /// Congestion experienced.
    Ce,
}

impl Ecn {
    /// Decode the two low bits of a traffic class.
    pub const fn from_bits(bits: u8) -> Self {
        match bits & 0b11 {
            0b00 => Self::NotEct,
            0b01 => Self::Ect1,
            0b10 => Self::Ect0,
            _ => Self::Ce,
        }
    }

    /// The two-bit codepoint.
    pub const fn bits(self) -> u8 {
        match self {
            Self::NotEct => 0b00,
            Self::Ect1 => 0b01,
            Self::Ect0 => 0b10,
            Self::Ce => 0b11,
        }
    }
}

mod field {
    use core::ops::Range;
    /// Version (4) | traffic class (8) | flow label (20).
    pub const VER_TC_FL: Range<usize> = 0..4;
    pub const PAYLOAD_LEN: Range<usize> = 4..6;
    pub const NEXT_HEADER: usize = 6;
    pub const HOP_LIMIT: usize = 7;
    pub const SRC: Range<usize> = 8..24;
    pub const DST: Range<usize> = 24..40;
}

/// A read/write view of an IPv6 fixed header at the start of a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv6Packet<T> {
    /// Wrap a buffer without checking it. Accessors may panic on a short buffer; use
    /// [`Ipv6Packet::new_checked`] for bytes from a peer.
    pub const fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    /// Wrap a buffer after checking it holds the fixed header and version 6.
    pub fn new_checked(buffer: T) -> Result<Self> {
        check_len(buffer.as_ref(), IPV6_HEADER_LEN)?;
        let packet = Self::new_unchecked(buffer);
        if packet.version() != 6 {
            return Err(WireError::Malformed {
                what: "IPv6 version",
            });
        }
        Ok(packet)
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn word0(&self) -> u32 {
        let b = &self.buffer.as_ref()[field::VER_TC_FL];
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }

    /// Version (always 6 once checked).
    pub fn version(&self) -> u8 {
        (self.word0() >> 28) as u8
    }

    /// The whole 8-bit traffic class.
    pub fn traffic_class(&self) -> u8 {
        (self.word0() >> 20) as u8
    }

    /// DSCP (upper 6 bits of the traffic class).
    pub fn dscp(&self) -> Dscp {
        Dscp::new(self.traffic_class() >> 2)
    }

    /// ECN (lower 2 bits of the traffic class).
    pub fn ecn(&self) -> Ecn {
        Ecn::from_bits(self.traffic_class())
    }

    /// The 20-bit flow label.
    pub fn flow_label(&self) -> u32 {
        self.word0() & 0x000f_ffff
    }

    /// Length of everything after the fixed header, in bytes.
    pub fn payload_len(&self) -> u16 {
        let b = &self.buffer.as_ref()[field::PAYLOAD_LEN];
        u16::from_be_bytes([b[0], b[1]])
    }

    /// Protocol of the header that follows.
    pub fn next_header(&self) -> u8 {
        self.buffer.as_ref()[field::NEXT_HEADER]
    }

    /// Hop limit.
    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::HOP_LIMIT]
    }

    /// Source address.
    pub fn src_addr(&self) -> Ipv6Addr {
        addr_from(&self.buffer.as_ref()[field::SRC])
    }

    /// Destination address.
    pub fn dst_addr(&self) -> Ipv6Addr {
        addr_from(&self.buffer.as_ref()[field::DST])
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Ipv6Packet<&'a T> {
    /// The bytes after the fixed header, bounded by the payload length (or the buffer, if it
    /// is shorter: a trimmed packet keeps its original length field).
    pub fn payload(&self) -> &'a [u8] {
        let buf = self.buffer.as_ref();
        let end = (IPV6_HEADER_LEN + usize::from(self.payload_len())).min(buf.len());
        &buf[IPV6_HEADER_LEN..end]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6Packet<T> {
    fn set_word0(&mut self, word: u32) {
        self.buffer.as_mut()[field::VER_TC_FL].copy_from_slice(&word.to_be_bytes());
    }

    /// Set the version field.
    pub fn set_version(&mut self, version: u8) {
        let w = (self.word0() & 0x0fff_ffff) | (u32::from(version & 0xf) << 28);
        self.set_word0(w);
    }

    /// Set the whole traffic class.
    pub fn set_traffic_class(&mut self, tc: u8) {
        let w = (self.word0() & 0xf00f_ffff) | (u32::from(tc) << 20);
        self.set_word0(w);
    }

    /// Set the DSCP, keeping the ECN bits.
    pub fn set_dscp(&mut self, dscp: Dscp) {
        let tc = (self.traffic_class() & 0b11) | (dscp.0 << 2);
        self.set_traffic_class(tc);
    }

    /// Set the ECN bits, keeping the DSCP.
    pub fn set_ecn(&mut self, ecn: Ecn) {
        let tc = (self.traffic_class() & !0b11) | ecn.bits();
        self.set_traffic_class(tc);
    }

    /// Set the 20-bit flow label (higher bits are ignored).
    pub fn set_flow_label(&mut self, label: u32) {
        let w = (self.word0() & 0xfff0_0000) | (label & 0x000f_ffff);
        self.set_word0(w);
    }

    /// Set the payload length.
    pub fn set_payload_len(&mut self, len: u16) {
        self.buffer.as_mut()[field::PAYLOAD_LEN].copy_from_slice(&len.to_be_bytes());
    }

    /// Set the next header.
    pub fn set_next_header(&mut self, nh: u8) {
        self.buffer.as_mut()[field::NEXT_HEADER] = nh;
    }

    /// Set the hop limit.
    pub fn set_hop_limit(&mut self, hop_limit: u8) {
        self.buffer.as_mut()[field::HOP_LIMIT] = hop_limit;
    }

    /// Set the source address.
    pub fn set_src_addr(&mut self, addr: Ipv6Addr) {
        self.buffer.as_mut()[field::SRC].copy_from_slice(&addr.octets());
    }

    /// Set the destination address.
    pub fn set_dst_addr(&mut self, addr: Ipv6Addr) {
        self.buffer.as_mut()[field::DST].copy_from_slice(&addr.octets());
    }

    /// The bytes after the fixed header (the whole rest of the buffer), mutable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[IPV6_HEADER_LEN..]
    }
}

fn addr_from(bytes: &[u8]) -> Ipv6Addr {
    let mut octets = [0u8; 16];
    octets.copy_from_slice(bytes);
    Ipv6Addr::from(octets)
}

/// A parsed IPv6 fixed header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv6Repr {
    pub dscp: Dscp,
    pub ecn: Ecn,
    /// 20-bit flow label.
    pub flow_label: u32,
    pub payload_len: u16,
    pub next_header: u8,
    pub hop_limit: u8,
    pub src_addr: Ipv6Addr,
    pub dst_addr: Ipv6Addr,
}

impl Ipv6Repr {
    /// Parse a checked view.
    pub fn parse<T: AsRef<[u8]>>(packet: &Ipv6Packet<T>) -> Result<Self> {
        Ok(Self {
            dscp: packet.dscp(),
            ecn: packet.ecn(),
            flow_label: packet.flow_label(),
            payload_len: packet.payload_len(),
            next_header: packet.next_header(),
            hop_limit: packet.hop_limit(),
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
        })
    }

    /// Bytes [`Ipv6Repr::emit`] writes.
    pub const fn buffer_len(&self) -> usize {
        IPV6_HEADER_LEN
    }

    /// Write the header into the first 40 bytes of `packet`'s buffer.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Ipv6Packet<T>) {
        packet.set_word0(
            (6 << 28)
                | (u32::from((self.dscp.0 << 2) | self.ecn.bits()) << 20)
                | (self.flow_label & 0x000f_ffff),
        );
        packet.set_payload_len(self.payload_len);
        packet.set_next_header(self.next_header);
        packet.set_hop_limit(self.hop_limit);
        packet.set_src_addr(self.src_addr);
        packet.set_dst_addr(self.dst_addr);
    }
}

impl fmt::Display for Ipv6Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "IPv6 {} > {} dscp {} ecn {:?} flow 0x{:05x} nh {} hlim {} len {}",
            self.src_addr,
            self.dst_addr,
            self.dscp,
            self.ecn,
            self.flow_label,
            self.next_header,
            self.hop_limit,
            self.payload_len
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 8200 §3 layout, written by hand: version 6, TC 0x12 (DSCP 4, ECN 0b10 = ECT(0)),
    /// flow label 0x54321, payload 8, next header UDP, hop limit 64, ::1 > 2001:db8::2.
    const VECTOR: [u8; 40] = [
        0x61, 0x25, 0x43, 0x21, 0x00, 0x08, 17, 64, //
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, //
        0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2,
    ];

    #[test]
    fn parses_hand_written_vector() {
        let p = Ipv6Packet::new_checked(&VECTOR[..]).unwrap();
        let r = Ipv6Repr::parse(&p).unwrap();
        assert_eq!(r.dscp, Dscp(4));
        assert_eq!(r.ecn, Ecn::Ect0);
        assert_eq!(r.flow_label, 0x54321);
        assert_eq!(r.payload_len, 8);
        assert_eq!(r.next_header, next_header::UDP);
        assert_eq!(r.hop_limit, 64);
        assert_eq!(r.src_addr, Ipv6Addr::LOCALHOST);
        assert_eq!(r.dst_addr, "2001:db8::2".parse::<Ipv6Addr>().unwrap());
        let mut out = [0u8; 40];
        r.emit(&mut Ipv6Packet::new_unchecked(&mut out[..]));
        assert_eq!(out, VECTOR);
    }

    #[test]
    fn rejects_short_and_wrong_version() {
        assert!(Ipv6Packet::new_checked(&VECTOR[..39]).is_err());
        let mut v4 = VECTOR;
        v4[0] = 0x45;
        assert_eq!(
            Ipv6Packet::new_checked(&v4[..]).unwrap_err(),
            WireError::Malformed {
                what: "IPv6 version"
            }
        );
    }

    #[test]
    fn setters_keep_neighbouring_bits() {
        let mut b = VECTOR;
        let mut p = Ipv6Packet::new_unchecked(&mut b[..]);
        p.set_dscp(Dscp(12));
        assert_eq!(p.ecn(), Ecn::Ect0);
        assert_eq!(p.flow_label(), 0x54321);
        p.set_ecn(Ecn::Ce);
        assert_eq!(p.dscp(), Dscp(12));
        p.set_flow_label(0xfffff);
        assert_eq!(p.traffic_class(), (12 << 2) | 3);
        assert_eq!(p.version(), 6);
    }

    proptest::proptest! {
        #[test]
        fn roundtrip(tc in 0u8.., fl in 0u32..0x100000, len in 0u16.., nh in 0u8.., hl in 0u8.., s in proptest::prelude::any::<[u8;16]>(), d in proptest::prelude::any::<[u8;16]>()) {
            let r = Ipv6Repr { dscp: Dscp::new(tc >> 2), ecn: Ecn::from_bits(tc), flow_label: fl, payload_len: len, next_header: nh, hop_limit: hl, src_addr: s.into(), dst_addr: d.into() };
            let mut buf = [0u8; 40];
            r.emit(&mut Ipv6Packet::new_unchecked(&mut buf[..]));
            let parsed = Ipv6Repr::parse(&Ipv6Packet::new_checked(&buf[..]).unwrap()).unwrap();
            proptest::prop_assert_eq!(parsed, r);
        }

        #[test]
        fn never_panics(bytes in proptest::collection::vec(0u8.., 0..64)) {
            if let Ok(p) = Ipv6Packet::new_checked(&bytes[..]) {
                let _ = Ipv6Repr::parse(&p);
                let _ = p.payload();
            }
        }
    }
}
