//! Reliability probe header, 16 bytes, of opcode 0xDE (MRC 1.0 §5.10 / §7.4.6, brief §2.11)
//! \[T-mani\]\[T-ns3\]. Sent to the peer QP on the EV under test; consumes no PSN; answered by a
//! SACK with PR set.
//!
//! ```text
//!  0..2    type (4) | next (5) | reserved (7)
//!  2       reserved (8)          3  vendor_info (8)
//!  4..6    probe_id (16)         6..8  reserved (16)
//!  8..10   spdcid (16)          10..12 dpdcid (16)
//!  12..14  tx_timestamp (16, 128 ns units)
//!  14..16  TSR (1) | reserved (11) | format_type (4)
//! ```
//!
//! Type/next, vendor info and the PDC identifiers are the common fields of `ext`; bytes
//! 12..16 are the TSETH layout (viewed as a [`TsethPacket`]).

use core::fmt;

use super::ext::ExtPrefix;
use super::tseth::TsethPacket;
use super::{Result, be, check_len};

/// Length of the PETH.
pub const PETH_LEN: usize = 16;

mod field {
    use core::ops::Range;
    pub const RESERVED: usize = 2;
    pub const PROBE_ID: usize = 4;
    pub const RESERVED2: Range<usize> = 6..8;
    pub const TIMESTAMP: Range<usize> = 12..16;
}

/// A read/write view of a PETH. Type, next, vendor info and PDC identifiers are the common
/// fields of `ext::ExtPrefix`; the view has the PETH's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PethPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> PethPacket<T> {
    /// Wrap without checking; accessors panic on a short buffer.
    pub const fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }
    /// Wrap after checking the length.
    pub fn new_checked(buffer: T) -> Result<Self> {
        check_len(buffer.as_ref(), PETH_LEN, "PETH")?;
        Ok(Self { buffer })
    }
    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }
    /// Probe identifier, echoed by the answer.
    pub fn probe_id(&self) -> u16 {
        be::u16_at(self.buffer.as_ref(), field::PROBE_ID)
    }
    /// The transmit timestamp, TSR and format type (the TSETH layout).
    pub fn timestamp(&self) -> TsethPacket<&[u8]> {
        TsethPacket::new_unchecked(&self.buffer.as_ref()[field::TIMESTAMP])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> PethPacket<T> {
    /// Set the probe identifier; the reserved bytes 2 and 6..8 become zero.
    pub fn set_probe_id(&mut self, v: u16) {
        let b = self.buffer.as_mut();
        b[field::RESERVED] = 0;
        be::set_u16(b, field::PROBE_ID, v);
        b[field::RESERVED2].fill(0);
    }
    /// The timestamp block, to write.
    pub fn timestamp_mut(&mut self) -> TsethPacket<&mut [u8]> {
        TsethPacket::new_unchecked(&mut self.buffer.as_mut()[field::TIMESTAMP])
    }
}

/// A parsed PETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PethRepr {
    /// 4 bits.
    pub hdr_type: u8,
    /// 5 bits.
    pub next: u8,
    pub vendor_info: u8,
    pub probe_id: u16,
    pub spdcid: u16,
    pub dpdcid: u16,
    pub tx_timestamp: u16,
    pub tsr: bool,
    /// 4 bits.
    pub format_type: u8,
}

impl PethRepr {
    /// Parse a checked view.
    pub fn parse<T: AsRef<[u8]>>(p: &PethPacket<T>) -> Result<Self> {
        let c = ExtPrefix::new_unchecked(p.buffer.as_ref());
        let ts = p.timestamp();
        Ok(Self {
            hdr_type: c.hdr_type(),
            next: c.next(),
            vendor_info: c.vendor_info(),
            probe_id: p.probe_id(),
            spdcid: c.spdcid(),
            dpdcid: c.dpdcid(),
            tx_timestamp: ts.tx_timestamp(),
            tsr: ts.tsr(),
            format_type: ts.format_type(),
        })
    }
    /// Bytes [`PethRepr::emit`] writes.
    pub const fn buffer_len(&self) -> usize {
        PETH_LEN
    }
    /// Write the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut PethPacket<T>) {
        let mut c = ExtPrefix::new_unchecked(p.buffer.as_mut());
        c.set_type_next(self.hdr_type, self.next, 0);
        c.set_vendor_info(self.vendor_info);
        c.set_pdcids(self.spdcid, self.dpdcid);
        p.set_probe_id(self.probe_id);
        let mut ts = p.timestamp_mut();
        ts.set_tx_timestamp(self.tx_timestamp);
        ts.set_flags(self.tsr, self.format_type);
    }
}

impl fmt::Display for PethRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "PETH probe {} pdc {}>{} ts {} fmt {}{}",
            self.probe_id,
            self.spdcid,
            self.dpdcid,
            self.tx_timestamp,
            self.format_type,
            if self.tsr { " tsr" } else { "" }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Typed from the layout: type 1 next 0 -> 0x1000; vendor 0; probe_id 0x0203; spdcid 4;
    /// dpdcid 5; ts 0x0607; TSR 0, format 1.
    const VECTOR: [u8; 16] = [
        0x10, 0x00, 0x00, 0x00, 0x02, 0x03, 0x00, 0x00, 0x00, 0x04, 0x00, 0x05, 0x06, 0x07, 0x00,
        0x01,
    ];

    #[test]
    fn parses_hand_written_vector() {
        let r = PethRepr::parse(&PethPacket::new_checked(&VECTOR[..]).unwrap()).unwrap();
        assert_eq!((r.hdr_type, r.next, r.vendor_info), (1, 0, 0));
        assert_eq!(r.probe_id, 0x0203);
        assert_eq!((r.spdcid, r.dpdcid), (4, 5));
        assert_eq!((r.tx_timestamp, r.tsr, r.format_type), (0x0607, false, 1));
        let mut out = [0xeeu8; PETH_LEN];
        r.emit(&mut PethPacket::new_unchecked(&mut out[..]));
        assert_eq!(out, VECTOR);
        assert_eq!(r.to_string(), "PETH probe 515 pdc 4>5 ts 1543 fmt 1");
        assert!(PethPacket::new_checked(&VECTOR[..15]).is_err());
    }

    proptest! {
        #[test]
        fn roundtrip(t in 0u8..16, n in 0u8..32, vi in any::<u8>(), id in any::<u16>(), s in any::<u16>(),
                     d in any::<u16>(), ts in any::<u16>(), tsr in any::<bool>(), fmt in 0u8..16) {
            let r = PethRepr { hdr_type: t, next: n, vendor_info: vi, probe_id: id, spdcid: s, dpdcid: d,
                               tx_timestamp: ts, tsr, format_type: fmt };
            let mut buf = [0u8; PETH_LEN];
            r.emit(&mut PethPacket::new_unchecked(&mut buf[..]));
            prop_assert_eq!(PethRepr::parse(&PethPacket::new_checked(&buf[..]).unwrap()).unwrap(), r);
        }

        #[test]
        fn never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..24)) {
            if let Ok(p) = PethPacket::new_checked(&bytes[..]) {
                let _ = PethRepr::parse(&p).unwrap().to_string();
            }
        }
    }
}
