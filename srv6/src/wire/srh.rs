//! The Segment Routing Header (RFC 8754 §2): an IPv6 Routing header of routing type 4 that
//! carries a list of segments (IPv6 addresses, in reverse order: Segment List[0] is the last
//! segment of the path) and optional TLVs.
//!
//! MRC sends its paths in the outer destination address (a uSID container, see
//! [`super::usid`]); a one-segment SRH carries a second container when a path needs more than
//! six uSIDs (brief §2.16).
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! | Next Header   |  Hdr Ext Len  | Routing Type  | Segments Left |
//! |  Last Entry   |     Flags     |              Tag              |
//! |            Segment List[0] (128-bit IPv6 address)             |
//! |                              ...                              |
//! |            Segment List[n] (128-bit IPv6 address)             |
//! //         Optional Type Length Value objects (variable)       //
//! ```

use core::fmt;
use core::net::Ipv6Addr;

use super::{Result, WireError, check_len};

/// Routing type of the SRH in the IPv6 Routing header (RFC 8754 §2).
pub const ROUTING_TYPE_SRH: u8 = 4;
/// Length of the fixed part, before the segment list.
pub const SRH_FIXED_LEN: usize = 8;
/// Length of one segment.
pub const SEGMENT_LEN: usize = 16;

mod field {
    use core::ops::Range;
    pub const NEXT_HEADER: usize = 0;
    pub const HDR_EXT_LEN: usize = 1;
    pub const ROUTING_TYPE: usize = 2;
    pub const SEGMENTS_LEFT: usize = 3;
    pub const LAST_ENTRY: usize = 4;
    pub const FLAGS: usize = 5;
    pub const TAG: Range<usize> = 6..8;
    pub const SEGMENTS: usize = super::SRH_FIXED_LEN;
}

/// SRH TLV types (RFC 8754 §2.1, IANA "Segment Routing Header TLVs").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TlvType {
    /// One byte of padding, no length field (RFC 8754 §2.1.1.1).
    Pad1,
    /// Padding of `length` bytes (RFC 8754 §2.1.1.2).
    PadN,
    /// HMAC (RFC 8754 §2.1.2).
    Hmac,
    /// Any other type: skipped by length.
    Unknown(u8),
}

impl From<u8> for TlvType {
    fn from(value: u8) -> Self {
        match value {
            0 => Self::Pad1,
            4 => Self::PadN,
            5 => Self::Hmac,
            other => Self::Unknown(other),
        }
    }
}

impl From<TlvType> for u8 {
    fn from(value: TlvType) -> Self {
        match value {
            TlvType::Pad1 => 0,
            TlvType::PadN => 4,
            TlvType::Hmac => 5,
            TlvType::Unknown(other) => other,
        }
    }
}

/// One TLV after the segment list: its type and its data (empty for Pad1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tlv<'a> {
    pub kind: TlvType,
    pub data: &'a [u8],
}

/// Iterator over TLV bytes that were validated by [`check_tlvs`].
#[derive(Debug, Clone)]
pub struct Tlvs<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for Tlvs<'a> {
    type Item = Tlv<'a>;

    fn next(&mut self) -> Option<Tlv<'a>> {
        let (&kind, after) = self.rest.split_first()?;
        let kind = TlvType::from(kind);
        if kind == TlvType::Pad1 {
            self.rest = after;
            return Some(Tlv { kind, data: &[] });
        }
        // Lengths were checked when the view was made; stay total anyway.
        let Some((&len, after)) = after.split_first() else {
            self.rest = &[];
            return None;
        };
        let len = usize::from(len).min(after.len());
        let (data, rest) = after.split_at(len);
        self.rest = rest;
        Some(Tlv { kind, data })
    }
}

/// Walk TLV bytes: every TLV must fit (RFC 8754 §2.1: Pad1 is one byte, every other TLV is
/// type, length and `length` bytes of data).
fn check_tlvs(mut rest: &[u8]) -> Result<()> {
    while let Some((&kind, after)) = rest.split_first() {
        if TlvType::from(kind) == TlvType::Pad1 {
            rest = after;
            continue;
        }
        let Some((&len, after)) = after.split_first() else {
            return Err(WireError::Malformed {
                what: "SRH TLV header",
            });
        };
        if after.len() < usize::from(len) {
            return Err(WireError::Malformed {
                what: "SRH TLV length",
            });
        }
        rest = &after[usize::from(len)..];
    }
    Ok(())
}

/// The segments of an SRH in wire order, Segment List[0] first. Zero-copy: each item is read
/// from the 16 bytes it occupies.
#[derive(Debug, Clone)]
pub struct Segments<'a> {
    chunks: core::slice::ChunksExact<'a, u8>,
}

impl Iterator for Segments<'_> {
    type Item = Ipv6Addr;

    fn next(&mut self) -> Option<Ipv6Addr> {
        self.chunks.next().map(addr_from)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.chunks.size_hint()
    }
}

impl ExactSizeIterator for Segments<'_> {}

impl DoubleEndedIterator for Segments<'_> {
    fn next_back(&mut self) -> Option<Ipv6Addr> {
        self.chunks.next_back().map(addr_from)
    }
}

fn addr_from(bytes: &[u8]) -> Ipv6Addr {
    let mut octets = [0u8; 16];
    octets.copy_from_slice(bytes);
    Ipv6Addr::from(octets)
}

/// A read/write view of a Segment Routing Header at the start of a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SrhPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> SrhPacket<T> {
    /// Wrap a buffer without checking it. Accessors may panic on a short buffer; use
    /// [`SrhPacket::new_checked`] for bytes from a peer.
    pub const fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    /// Wrap a buffer after [`SrhPacket::check`].
    pub fn new_checked(buffer: T) -> Result<Self> {
        let packet = Self::new_unchecked(buffer);
        packet.check()?;
        Ok(packet)
    }

    /// Validate the header, so that no accessor can read past it:
    /// - the buffer holds the fixed part and `(hdr_ext_len + 1) * 8` bytes (RFC 8200 §4.4);
    /// - the routing type is 4;
    /// - the segment list (`last_entry + 1` segments) fits in the header (RFC 8754 §2);
    /// - segments left is at most `last_entry + 1` (RFC 8754 §4.3.1.1);
    /// - the bytes after the segment list are whole TLVs (RFC 8754 §2.1).
    pub fn check(&self) -> Result<()> {
        let buf = self.buffer.as_ref();
        check_len(buf, SRH_FIXED_LEN)?;
        check_len(buf, self.header_len())?;
        if self.routing_type() != ROUTING_TYPE_SRH {
            return Err(WireError::Malformed {
                what: "SRH routing type",
            });
        }
        if self.segment_list_end() > self.header_len() {
            return Err(WireError::Malformed {
                what: "SRH last entry beyond header",
            });
        }
        if usize::from(self.segments_left()) > self.segment_count() {
            return Err(WireError::Malformed {
                what: "SRH segments left beyond last entry",
            });
        }
        check_tlvs(&buf[self.segment_list_end()..self.header_len()])
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Protocol of the header that follows.
    pub fn next_header(&self) -> u8 {
        self.buffer.as_ref()[field::NEXT_HEADER]
    }

    /// Header length in 8-octet units, not counting the first 8 octets.
    pub fn hdr_ext_len(&self) -> u8 {
        self.buffer.as_ref()[field::HDR_EXT_LEN]
    }

    /// Whole header length in bytes: `(hdr_ext_len + 1) * 8`.
    pub fn header_len(&self) -> usize {
        (usize::from(self.hdr_ext_len()) + 1) * 8
    }

    /// Routing type (4 once checked).
    pub fn routing_type(&self) -> u8 {
        self.buffer.as_ref()[field::ROUTING_TYPE]
    }

    /// Number of segments still to visit.
    pub fn segments_left(&self) -> u8 {
        self.buffer.as_ref()[field::SEGMENTS_LEFT]
    }

    /// Index of the last element of the segment list (its length minus one).
    pub fn last_entry(&self) -> u8 {
        self.buffer.as_ref()[field::LAST_ENTRY]
    }

    /// Flags (no flag is defined by RFC 8754; kept verbatim).
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS]
    }

    /// Tag (RFC 8754 §2: marks a class or group of packets).
    pub fn tag(&self) -> u16 {
        let b = &self.buffer.as_ref()[field::TAG];
        u16::from_be_bytes([b[0], b[1]])
    }

    /// Number of segments in the list: `last_entry + 1`.
    pub fn segment_count(&self) -> usize {
        usize::from(self.last_entry()) + 1
    }

    fn segment_list_end(&self) -> usize {
        field::SEGMENTS + self.segment_count() * SEGMENT_LEN
    }

    /// Segment List[`index`], or `None` past the last entry.
    pub fn segment(&self, index: usize) -> Option<Ipv6Addr> {
        if index >= self.segment_count() {
            return None;
        }
        let start = field::SEGMENTS + index * SEGMENT_LEN;
        self.buffer
            .as_ref()
            .get(start..start + SEGMENT_LEN)
            .map(addr_from)
    }

    /// The segment the packet is travelling to: Segment List[segments left] (RFC 8754 §4.3.1).
    /// `None` when segments left is past the list.
    pub fn active_segment(&self) -> Option<Ipv6Addr> {
        self.segment(usize::from(self.segments_left()))
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> SrhPacket<&'a T> {
    /// The segment list in wire order (Segment List[0], the final segment, first).
    pub fn segments(&self) -> Segments<'a> {
        let buf = self.buffer.as_ref();
        let end = self.segment_list_end().min(buf.len());
        let start = field::SEGMENTS.min(end);
        Segments {
            chunks: buf[start..end].chunks_exact(SEGMENT_LEN),
        }
    }

    /// The raw TLV bytes between the segment list and the end of the header.
    pub fn tlv_bytes(&self) -> &'a [u8] {
        let buf = self.buffer.as_ref();
        let end = self.header_len().min(buf.len());
        let start = self.segment_list_end().min(end);
        &buf[start..end]
    }

    /// The TLVs after the segment list.
    pub fn tlvs(&self) -> Tlvs<'a> {
        Tlvs {
            rest: self.tlv_bytes(),
        }
    }

    /// The bytes after the header.
    pub fn payload(&self) -> &'a [u8] {
        let buf = self.buffer.as_ref();
        &buf[self.header_len().min(buf.len())..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> SrhPacket<T> {
    /// Set the next header.
    pub fn set_next_header(&mut self, value: u8) {
        self.buffer.as_mut()[field::NEXT_HEADER] = value;
    }

    /// Set the header length in 8-octet units after the first 8.
    pub fn set_hdr_ext_len(&mut self, value: u8) {
        self.buffer.as_mut()[field::HDR_EXT_LEN] = value;
    }

    /// Set the routing type.
    pub fn set_routing_type(&mut self, value: u8) {
        self.buffer.as_mut()[field::ROUTING_TYPE] = value;
    }

    /// Set segments left.
    pub fn set_segments_left(&mut self, value: u8) {
        self.buffer.as_mut()[field::SEGMENTS_LEFT] = value;
    }

    /// Set the last entry.
    pub fn set_last_entry(&mut self, value: u8) {
        self.buffer.as_mut()[field::LAST_ENTRY] = value;
    }

    /// Set the flags.
    pub fn set_flags(&mut self, value: u8) {
        self.buffer.as_mut()[field::FLAGS] = value;
    }

    /// Set the tag.
    pub fn set_tag(&mut self, value: u16) {
        self.buffer.as_mut()[field::TAG].copy_from_slice(&value.to_be_bytes());
    }

    /// Set Segment List[`index`]. Panics past the buffer (caller misuse).
    pub fn set_segment(&mut self, index: usize, addr: Ipv6Addr) {
        let start = field::SEGMENTS + index * SEGMENT_LEN;
        self.buffer.as_mut()[start..start + SEGMENT_LEN].copy_from_slice(&addr.octets());
    }

    /// The TLV area, mutable (between the segment list and the end of the header).
    pub fn tlv_bytes_mut(&mut self) -> &mut [u8] {
        let (start, end) = (self.segment_list_end(), self.header_len());
        &mut self.buffer.as_mut()[start..end]
    }
}

/// A segment list held either as wire bytes (parsed) or as addresses (to emit). Both are in
/// wire order: element 0 is Segment List[0], the final segment of the path.
#[derive(Debug, Clone, Copy)]
pub enum SegmentList<'a> {
    /// `16 * n` bytes from a packet.
    Wire(&'a [u8]),
    /// Addresses given by the caller.
    Addrs(&'a [Ipv6Addr]),
}

impl<'a> SegmentList<'a> {
    /// Number of segments.
    pub fn len(&self) -> usize {
        match self {
            Self::Wire(bytes) => bytes.len() / SEGMENT_LEN,
            Self::Addrs(addrs) => addrs.len(),
        }
    }

    /// True when the list is empty (never the case in a valid SRH).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Element `index`.
    pub fn get(&self, index: usize) -> Option<Ipv6Addr> {
        match self {
            Self::Wire(bytes) => bytes
                .get(index * SEGMENT_LEN..(index + 1) * SEGMENT_LEN)
                .map(addr_from),
            Self::Addrs(addrs) => addrs.get(index).copied(),
        }
    }

    /// The segments in wire order.
    pub fn iter(&self) -> impl Iterator<Item = Ipv6Addr> + 'a {
        let list = *self;
        (0..list.len()).filter_map(move |i| list.get(i))
    }
}

impl PartialEq for SegmentList<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Eq for SegmentList<'_> {}

/// A parsed (or to-be-emitted) Segment Routing Header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SrhRepr<'a> {
    pub next_header: u8,
    pub segments_left: u8,
    pub flags: u8,
    pub tag: u16,
    /// Segment List[0..=last_entry], wire order. 1 to 128 segments (the header length byte
    /// bounds the whole header to 2 KiB).
    pub segments: SegmentList<'a>,
    /// TLV bytes after the segment list, emitted verbatim; their length must keep the header a
    /// multiple of 8 bytes (pad with Pad1/PadN).
    pub tlvs: &'a [u8],
}

impl<'a> SrhRepr<'a> {
    /// The SRH MRC uses to extend a path beyond one container: a single segment (the next
    /// container), not yet reached (segments left 1), no TLV (brief §2.16, RFC 9800 §4.1: when
    /// the destination address container is exhausted, the node falls back to the SRH).
    pub fn one_segment(next_header: u8, segment: &'a Ipv6Addr) -> Self {
        Self {
            next_header,
            segments_left: 1,
            flags: 0,
            tag: 0,
            segments: SegmentList::Addrs(core::slice::from_ref(segment)),
            tlvs: &[],
        }
    }

    /// Parse a checked view.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &SrhPacket<&'a T>) -> Result<Self> {
        packet.check()?;
        let buf = packet.buffer.as_ref();
        Ok(Self {
            next_header: packet.next_header(),
            segments_left: packet.segments_left(),
            flags: packet.flags(),
            tag: packet.tag(),
            segments: SegmentList::Wire(&buf[field::SEGMENTS..packet.segment_list_end()]),
            tlvs: packet.tlv_bytes(),
        })
    }

    /// Bytes [`SrhRepr::emit`] writes.
    pub fn buffer_len(&self) -> usize {
        SRH_FIXED_LEN + self.segments.len() * SEGMENT_LEN + self.tlvs.len()
    }

    /// Write the header into the start of `packet`'s buffer. Panics if the repr cannot be
    /// encoded (no segment, more than 128, or a length that is not a multiple of 8): a caller
    /// bug, never peer input.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut SrhPacket<T>) {
        let len = self.buffer_len();
        assert!(
            !self.segments.is_empty() && self.segments.len() <= 128,
            "SRH needs 1 to 128 segments"
        );
        assert!(
            len.is_multiple_of(8) && len <= 2048,
            "SRH length must be a multiple of 8"
        );
        packet.set_next_header(self.next_header);
        packet.set_hdr_ext_len((len / 8 - 1) as u8);
        packet.set_routing_type(ROUTING_TYPE_SRH);
        packet.set_segments_left(self.segments_left);
        packet.set_last_entry((self.segments.len() - 1) as u8);
        packet.set_flags(self.flags);
        packet.set_tag(self.tag);
        for (i, segment) in self.segments.iter().enumerate() {
            packet.set_segment(i, segment);
        }
        packet.tlv_bytes_mut().copy_from_slice(self.tlvs);
    }
}

impl fmt::Display for SrhRepr<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "SRH nh {} sl {} le {} flags 0x{:02x} tag {} segs [",
            self.next_header,
            self.segments_left,
            self.segments.len().saturating_sub(1),
            self.flags,
            self.tag
        )?;
        for (i, segment) in self.segments.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{segment}")?;
        }
        write!(f, "]")?;
        if !self.tlvs.is_empty() {
            write!(f, " tlvs {}B", self.tlvs.len())?;
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "srh_tests.rs"]
mod tests;
