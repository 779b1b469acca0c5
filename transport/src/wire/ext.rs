//! The fields the MRC extension headers after the BTH share, read and written once (MRC 1.0
//! §5.8–§5.10, §7.4.7–§7.4.8; brief §2.9–§2.12).
//!
//! [`ExtPrefix`] views the leading bytes of a SETH, NETH, PETH, ERTH or EETH. Each header's repr
//! reads and writes its common fields through it, and each header has only the rows of this
//! table that are marked for it (same offset, same meaning):
//!
//! ```text
//!  bytes   field                                     SETH NETH PETH ERTH EETH
//!  0..2    type (4) | next (5) | header bits (7)      x    x    x
//!  0       op (2) | reserved (6); 1..4 reserved                      x    x
//!  3       vendor_info (8)                                 x    x
//!  4..8    entropy (32): the reflected EV             x    x
//!  4..8    port_status_mask (32)                                     x    x
//!  8..12   spdcid (16) | dpdcid (16)                  x    x    x
//!  12..16  reserved (8) | psn (24)                    x    x
//!  16      cc_type (4) | cc_flags (4)                 x    x
//! ```
//!
//! `psn` is the PSN the feedback is anchored at: SETH's cumulative ACK PSN, NETH's NACKed PSN.
//! The `op` and mask offsets are our layout \[I\] (see `erth`).
//!
//! What each header keeps, because its layout differs there:
//! - SETH: the header bits of the first word (M, reserved, PR), `ack_psn_offset` at 2..4 (where
//!   NETH has its reason and vendor info), MPR at 17 (NETH: reserved), the SACK offset and bitmap.
//! - NETH: `reason` at 2, reserved byte 17, and its bare reflected 16-bit `tx_timestamp` at 18
//!   (no TSR or format, like CC_STATE's).
//! - PETH: reserved byte 2 (NETH: reason), `probe_id` and reserved at 4..8 (where SETH and NETH
//!   carry the entropy), the timestamp block at 12.
//! - ERTH: reserved 8..12 and the timestamp block at 12; EETH: the timestamp block at 8, the
//!   service time at 12..16 and the reserved tail.
//!
//! The timestamp block `tx_timestamp (16) | TSR (1) | reserved (11) | format_type (4)` is the
//! TSETH layout; PETH, ERTH and EETH carry it at offsets of their own, so it is not a prefix
//! field: they view those four bytes as a [`TsethPacket`](super::tseth::TsethPacket).

use super::be;

/// Offsets, with the headers that have each field (the module table).
mod field {
    /// SETH, NETH, PETH: type | next | header bits. ERTH, EETH: op | reserved, to byte 4.
    pub const WORD0: usize = 0;
    /// NETH, PETH.
    pub const VENDOR_INFO: usize = 3;
    /// SETH, NETH: entropy. ERTH, EETH: port status mask.
    pub const WORD1: usize = 4;
    /// SETH, NETH, PETH: spdcid, then dpdcid.
    pub const SPDCID: usize = 8;
    pub const DPDCID: usize = 10;
    /// SETH, NETH: a reserved byte, then the 24-bit PSN.
    pub const PSN_RESERVED: usize = 12;
    pub const PSN: usize = 13;
    /// SETH, NETH.
    pub const CC: usize = 16;
}

/// Bits 6..0 of the first word: the header's own (SETH's M and PR; reserved in NETH and PETH).
const HEADER_BITS: u16 = 0x007f;

/// A read/write view of the common leading fields of an extension header. Built by the header
/// views after their own length check; use only the rows of the module table the header has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ExtPrefix<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> ExtPrefix<T> {
    /// Wrap the header's bytes; accessors panic past their end.
    pub const fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }
    fn bytes(&self) -> &[u8] {
        self.buffer.as_ref()
    }
    fn word0(&self) -> u16 {
        be::u16_at(self.bytes(), field::WORD0)
    }
    /// Header type (4 bits; meaning not public, brief §10).
    pub fn hdr_type(&self) -> u8 {
        (self.word0() >> 12) as u8
    }
    /// Next-header code (5 bits; meaning not public, brief §10).
    pub fn next(&self) -> u8 {
        ((self.word0() >> 7) & 0x1f) as u8
    }
    /// Bits 6..0 of the first word, the header's own.
    pub fn header_bits(&self) -> u8 {
        (self.word0() & HEADER_BITS) as u8
    }
    /// Endpoint operation code (2 bits).
    pub fn op_bits(&self) -> u8 {
        self.bytes()[field::WORD0] >> 6
    }
    /// Vendor-specific information.
    pub fn vendor_info(&self) -> u8 {
        self.bytes()[field::VENDOR_INFO]
    }
    /// Reflected EV of the packet the feedback is about.
    pub fn entropy(&self) -> u32 {
        be::u32_at(self.bytes(), field::WORD1)
    }
    /// One bit per port, bit i = port i+1 up.
    pub fn port_status_mask(&self) -> u32 {
        be::u32_at(self.bytes(), field::WORD1)
    }
    /// Source connection identifier.
    pub fn spdcid(&self) -> u16 {
        be::u16_at(self.bytes(), field::SPDCID)
    }
    /// Destination connection identifier.
    pub fn dpdcid(&self) -> u16 {
        be::u16_at(self.bytes(), field::DPDCID)
    }
    /// The anchor PSN (24 bits).
    pub fn psn(&self) -> u32 {
        be::u24_at(self.bytes(), field::PSN)
    }
    /// Congestion-control type (4 bits).
    pub fn cc_type(&self) -> u8 {
        self.bytes()[field::CC] >> 4
    }
    /// Congestion-control flags (4 bits).
    pub fn cc_flags(&self) -> u8 {
        self.bytes()[field::CC] & 0x0f
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> ExtPrefix<T> {
    fn bytes_mut(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }
    /// Set type, next and the header's own bits 6..0 of the first word.
    pub fn set_type_next(&mut self, hdr_type: u8, next: u8, header_bits: u16) {
        let w = (u16::from(hdr_type & 0x0f) << 12)
            | (u16::from(next & 0x1f) << 7)
            | (header_bits & HEADER_BITS);
        be::set_u16(self.bytes_mut(), field::WORD0, w);
    }
    /// Set the endpoint operation code; the reserved rest of bytes 0..4 becomes zero.
    pub fn set_op_bits(&mut self, op: u8) {
        let b = self.bytes_mut();
        b[field::WORD0..field::WORD1].fill(0);
        b[field::WORD0] = op << 6;
    }
    /// Set the vendor information.
    pub fn set_vendor_info(&mut self, v: u8) {
        self.bytes_mut()[field::VENDOR_INFO] = v;
    }
    /// Set the reflected EV.
    pub fn set_entropy(&mut self, v: u32) {
        be::set_u32(self.bytes_mut(), field::WORD1, v);
    }
    /// Set the port status mask.
    pub fn set_port_status_mask(&mut self, v: u32) {
        be::set_u32(self.bytes_mut(), field::WORD1, v);
    }
    /// Set the source and destination connection identifiers.
    pub fn set_pdcids(&mut self, spdcid: u16, dpdcid: u16) {
        let b = self.bytes_mut();
        be::set_u16(b, field::SPDCID, spdcid);
        be::set_u16(b, field::DPDCID, dpdcid);
    }
    /// Set the anchor PSN (low 24 bits; the reserved byte before it becomes zero).
    pub fn set_psn(&mut self, v: u32) {
        let b = self.bytes_mut();
        b[field::PSN_RESERVED] = 0;
        be::set_u24(b, field::PSN, v);
    }
    /// Set CC type and flags (4 bits each).
    pub fn set_cc(&mut self, cc_type: u8, cc_flags: u8) {
        self.bytes_mut()[field::CC] = (cc_type << 4) | (cc_flags & 0x0f);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_sit_at_the_table_offsets() {
        let mut b = [0xa5u8; 17];
        let mut p = ExtPrefix::new_unchecked(&mut b[..]);
        p.set_type_next(0x12, 0x23, 0x1ff);
        p.set_vendor_info(0x55);
        p.set_entropy(0x0102_0304);
        p.set_pdcids(0x0506, 0x0708);
        p.set_psn(0xff09_0a0b);
        p.set_cc(3, 0x14);
        assert_eq!(
            b,
            [
                0x21, 0xff, 0xa5, 0x55, 1, 2, 3, 4, 5, 6, 7, 8, 0, 9, 10, 11, 0x34
            ]
        );
        let p = ExtPrefix::new_unchecked(&b[..]);
        assert_eq!((p.hdr_type(), p.next(), p.header_bits()), (2, 3, 0x7f));
        assert_eq!((p.vendor_info(), p.entropy()), (0x55, 0x0102_0304));
        assert_eq!(
            (p.spdcid(), p.dpdcid(), p.psn()),
            (0x0506, 0x0708, 0x090a0b)
        );
        assert_eq!((p.cc_type(), p.cc_flags()), (3, 4));

        let mut e = [0xffu8; 8];
        let mut p = ExtPrefix::new_unchecked(&mut e[..]);
        p.set_op_bits(1);
        p.set_port_status_mask(0xfd);
        assert_eq!(e, [0x40, 0, 0, 0, 0, 0, 0, 0xfd]);
        let p = ExtPrefix::new_unchecked(&e[..]);
        assert_eq!((p.op_bits(), p.port_status_mask()), (1, 0xfd));
    }
}
