//! UDP header, 8 bytes (RFC 768), as RoCEv2 uses it: destination port 4791 (configurable,
//! brief §2.2), source port carrying entropy bits (brief §2.4).
//!
//! ```text
//!  0..2  source port     2..4  destination port
//!  4..6  length          6..8  checksum (RFC 8200 §8.1 pseudo-header; masked in the ICRC)
//! ```
//!
//! Our own small view rather than smoltcp's `UdpPacket`/`UdpRepr`: smoltcp's repr computes
//! the checksum from IP addresses at emit time and derives the length from a payload it
//! writes itself, while MRC frames are built headers-first into an mbuf, the payload copied
//! afterwards, and the checksum is optional (the ICRC protects the datagram).

use core::fmt;
use core::net::Ipv6Addr;

use super::{Result, be, check_len};

/// Length of the UDP header.
pub const UDP_HEADER_LEN: usize = 8;

mod field {
    pub const SRC_PORT: usize = 0;
    pub const DST_PORT: usize = 2;
    pub const LENGTH: usize = 4;
    pub const CHECKSUM: usize = 6;
}

/// A read/write view of a UDP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> UdpPacket<T> {
    /// Wrap without checking; accessors panic on a short buffer.
    pub const fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }
    /// Wrap after checking the header fits.
    pub fn new_checked(buffer: T) -> Result<Self> {
        check_len(buffer.as_ref(), UDP_HEADER_LEN, "UDP header")?;
        Ok(Self { buffer })
    }
    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }
    /// Source port.
    pub fn src_port(&self) -> u16 {
        be::u16_at(self.buffer.as_ref(), field::SRC_PORT)
    }
    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        be::u16_at(self.buffer.as_ref(), field::DST_PORT)
    }
    /// Length of header and payload.
    pub fn length(&self) -> u16 {
        be::u16_at(self.buffer.as_ref(), field::LENGTH)
    }
    /// Checksum (0: not computed).
    pub fn checksum(&self) -> u16 {
        be::u16_at(self.buffer.as_ref(), field::CHECKSUM)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> UdpPacket<T> {
    /// Set the source port.
    pub fn set_src_port(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::SRC_PORT, v);
    }
    /// Set the destination port.
    pub fn set_dst_port(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::DST_PORT, v);
    }
    /// Set the length.
    pub fn set_length(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::LENGTH, v);
    }
    /// Set the checksum.
    pub fn set_checksum(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::CHECKSUM, v);
    }
}

/// A parsed UDP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UdpRepr {
    pub src_port: u16,
    pub dst_port: u16,
    /// Header plus payload, bytes.
    pub length: u16,
    pub checksum: u16,
}

impl UdpRepr {
    /// Parse a checked view.
    pub fn parse<T: AsRef<[u8]>>(p: &UdpPacket<T>) -> Result<Self> {
        Ok(Self {
            src_port: p.src_port(),
            dst_port: p.dst_port(),
            length: p.length(),
            checksum: p.checksum(),
        })
    }
    /// Bytes [`UdpRepr::emit`] writes.
    pub const fn buffer_len(&self) -> usize {
        UDP_HEADER_LEN
    }
    /// Write the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut UdpPacket<T>) {
        p.set_src_port(self.src_port);
        p.set_dst_port(self.dst_port);
        p.set_length(self.length);
        p.set_checksum(self.checksum);
    }
}

impl fmt::Display for UdpRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "UDP {} > {} len {} csum 0x{:04x}",
            self.src_port, self.dst_port, self.length, self.checksum
        )
    }
}

/// The UDP checksum over IPv6 (RFC 8200 §8.1): one's complement sum of the pseudo-header
/// (source, destination, upper-layer length, next header 17) and `datagram` (UDP header with
/// a zero checksum field, then payload). Returns 0xffff for a computed zero (RFC 768).
pub fn checksum_ipv6(src: &Ipv6Addr, dst: &Ipv6Addr, datagram: &[u8]) -> u16 {
    let mut sum: u64 = 0;
    for addr in [src, dst] {
        for pair in addr.octets().chunks_exact(2) {
            sum += u64::from(u16::from_be_bytes([pair[0], pair[1]]));
        }
    }
    sum += datagram.len() as u64;
    sum += 17;
    let mut chunks = datagram.chunks_exact(8);
    for c in &mut chunks {
        let w = u64::from_be_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        // Add the four 16-bit words of `w` without overflowing: fold halves first.
        sum += (w >> 48) + ((w >> 32) & 0xffff) + ((w >> 16) & 0xffff) + (w & 0xffff);
    }
    let rest = chunks.remainder();
    let mut pairs = rest.chunks_exact(2);
    for p in &mut pairs {
        sum += u64::from(u16::from_be_bytes([p[0], p[1]]));
    }
    if let [last] = pairs.remainder() {
        sum += u64::from(*last) << 8;
    }
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    match !(sum as u16) {
        0 => 0xffff,
        c => c,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_hand_written_vector() {
        // sport 0xc001, dport 4791 (0x12b7), length 40, checksum 0.
        let v = [0xc0, 0x01, 0x12, 0xb7, 0x00, 0x28, 0x00, 0x00];
        let r = UdpRepr::parse(&UdpPacket::new_checked(&v[..]).unwrap()).unwrap();
        assert_eq!(
            (r.src_port, r.dst_port, r.length, r.checksum),
            (0xc001, 4791, 40, 0)
        );
        let mut out = [0u8; 8];
        r.emit(&mut UdpPacket::new_unchecked(&mut out[..]));
        assert_eq!(out, v);
        assert_eq!(r.to_string(), "UDP 49153 > 4791 len 40 csum 0x0000");
        assert!(UdpPacket::new_checked(&v[..7]).is_err());
    }

    #[test]
    fn checksum_matches_etherparse() {
        let src: Ipv6Addr = "2001:db8::1".parse().unwrap();
        let dst: Ipv6Addr = "fcbb:bb00:e001::".parse().unwrap();
        let payload = [1u8, 2, 3, 4, 5, 6, 7];
        let header = etherparse::UdpHeader::with_ipv6_checksum(
            0xc001,
            4791,
            &etherparse::Ipv6Header {
                source: src.octets(),
                destination: dst.octets(),
                next_header: etherparse::IpNumber::UDP,
                ..Default::default()
            },
            &payload,
        )
        .unwrap();
        let mut datagram = header.to_bytes().to_vec();
        datagram[6..8].fill(0);
        datagram.extend_from_slice(&payload);
        assert_eq!(checksum_ipv6(&src, &dst, &datagram), header.checksum);
    }

    proptest! {
        #[test]
        fn roundtrip(s in any::<u16>(), d in any::<u16>(), l in any::<u16>(), c in any::<u16>()) {
            let r = UdpRepr { src_port: s, dst_port: d, length: l, checksum: c };
            let mut buf = [0u8; UDP_HEADER_LEN];
            r.emit(&mut UdpPacket::new_unchecked(&mut buf[..]));
            prop_assert_eq!(UdpRepr::parse(&UdpPacket::new_checked(&buf[..]).unwrap()).unwrap(), r);
        }
    }
}
