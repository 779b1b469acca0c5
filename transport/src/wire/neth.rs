//! Reliability NACK header, 20 bytes, of opcode 0xDD (MRC 1.0 §5.9, brief §2.10) \[T\].
//!
//! ```text
//!  0..2    type (4) | next (5) | reserved (7)
//!  2       reason (8)            3  vendor_info (8)
//!  4..8    entropy (32): EV of the NACKed packet, reflected
//!  8..10   spdcid (16)          10..12  dpdcid (16)
//!  12      reserved (8)         13..16  nack_psn (24)
//!  16      cc_type (4) | cc_flags (4)
//!  17      reserved (8)
//!  18..20  tx_timestamp (16): the NACKed packet's TSETH timestamp, reflected
//! ```
//!
//! Type/next, vendor info, entropy, the PDC identifiers, the PSN and CC are the common fields
//! of `ext`; the reason, byte 17 and the timestamp are the NETH's own.

use core::fmt;

use super::ext::ExtPrefix;
use super::{Result, be, check_len};

/// Length of the NETH.
pub const NETH_LEN: usize = 20;

/// Why the responder NACKs a packet (brief §2.10 table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NackReason {
    /// 0x01: trimmed in the fabric (congestion on that path).
    Trimmed,
    /// 0x02: trimmed at the last hop (incast at the destination).
    TrimmedLastHop,
    /// 0x06: PSN tracking exhausted.
    NoBitmap,
    /// 0x07: no packet buffer.
    NoPktBuffer,
    /// 0x0A: no resource.
    NoResource,
    /// 0x0B: PSN outside the MPR window.
    PsnOutOfWindow,
    /// 0x19: unexpected event: fatal, the QP goes to ERROR.
    UnexpectedEvent,
    /// Any other code.
    Unknown(u8),
}

impl NackReason {
    /// Decode a code.
    pub const fn from_u8(code: u8) -> Self {
        match code {
            0x01 => Self::Trimmed,
            0x02 => Self::TrimmedLastHop,
            0x06 => Self::NoBitmap,
            0x07 => Self::NoPktBuffer,
            0x0A => Self::NoResource,
            0x0B => Self::PsnOutOfWindow,
            0x19 => Self::UnexpectedEvent,
            other => Self::Unknown(other),
        }
    }
    /// The wire code.
    pub const fn to_u8(self) -> u8 {
        match self {
            Self::Trimmed => 0x01,
            Self::TrimmedLastHop => 0x02,
            Self::NoBitmap => 0x06,
            Self::NoPktBuffer => 0x07,
            Self::NoResource => 0x0A,
            Self::PsnOutOfWindow => 0x0B,
            Self::UnexpectedEvent => 0x19,
            Self::Unknown(code) => code,
        }
    }
    /// Spec name.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Trimmed => "TRIMMED",
            Self::TrimmedLastHop => "TRIMMED_LASTHOP",
            Self::NoBitmap => "NO_BITMAP",
            Self::NoPktBuffer => "NO_PKT_BUFFER",
            Self::NoResource => "NO_RESOURCE",
            Self::PsnOutOfWindow => "PSN_OOR_WINDOW",
            Self::UnexpectedEvent => "UNEXP_EVENT",
            Self::Unknown(_) => "UNKNOWN",
        }
    }
}

impl fmt::Display for NackReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unknown(code) => write!(f, "UNKNOWN(0x{code:02x})"),
            known => f.write_str(known.name()),
        }
    }
}

mod field {
    pub const REASON: usize = 2;
    pub const RESERVED2: usize = 17;
    pub const TX_TIMESTAMP: usize = 18;
}

/// A read/write view of a NETH. Type, next, vendor info, entropy, PDC identifiers, NACKed PSN
/// and CC are the common fields of `ext::ExtPrefix`; the view has the NETH's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NethPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> NethPacket<T> {
    /// Wrap without checking; accessors panic on a short buffer.
    pub const fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }
    /// Wrap after checking the length.
    pub fn new_checked(buffer: T) -> Result<Self> {
        check_len(buffer.as_ref(), NETH_LEN, "NETH")?;
        Ok(Self { buffer })
    }
    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }
    /// NACK reason.
    pub fn reason(&self) -> NackReason {
        NackReason::from_u8(self.buffer.as_ref()[field::REASON])
    }
    /// Reflected transmit timestamp (128 ns units).
    pub fn tx_timestamp(&self) -> u16 {
        be::u16_at(self.buffer.as_ref(), field::TX_TIMESTAMP)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> NethPacket<T> {
    /// Set the reason.
    pub fn set_reason(&mut self, r: NackReason) {
        self.buffer.as_mut()[field::REASON] = r.to_u8();
    }
    /// Set the reflected timestamp (the reserved byte before it becomes zero).
    pub fn set_tx_timestamp(&mut self, v: u16) {
        let b = self.buffer.as_mut();
        b[field::RESERVED2] = 0;
        be::set_u16(b, field::TX_TIMESTAMP, v);
    }
}

/// A parsed NETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NethRepr {
    /// 4 bits.
    pub hdr_type: u8,
    /// 5 bits.
    pub next: u8,
    pub reason: NackReason,
    pub vendor_info: u8,
    pub entropy: u32,
    pub spdcid: u16,
    pub dpdcid: u16,
    /// 24 bits.
    pub nack_psn: u32,
    /// 4 bits.
    pub cc_type: u8,
    /// 4 bits.
    pub cc_flags: u8,
    pub tx_timestamp: u16,
}

impl NethRepr {
    /// Parse a checked view.
    pub fn parse<T: AsRef<[u8]>>(p: &NethPacket<T>) -> Result<Self> {
        let c = ExtPrefix::new_unchecked(p.buffer.as_ref());
        Ok(Self {
            hdr_type: c.hdr_type(),
            next: c.next(),
            reason: p.reason(),
            vendor_info: c.vendor_info(),
            entropy: c.entropy(),
            spdcid: c.spdcid(),
            dpdcid: c.dpdcid(),
            nack_psn: c.psn(),
            cc_type: c.cc_type(),
            cc_flags: c.cc_flags(),
            tx_timestamp: p.tx_timestamp(),
        })
    }
    /// Bytes [`NethRepr::emit`] writes.
    pub const fn buffer_len(&self) -> usize {
        NETH_LEN
    }
    /// Write the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut NethPacket<T>) {
        let mut c = ExtPrefix::new_unchecked(p.buffer.as_mut());
        c.set_type_next(self.hdr_type, self.next, 0);
        c.set_vendor_info(self.vendor_info);
        c.set_entropy(self.entropy);
        c.set_pdcids(self.spdcid, self.dpdcid);
        c.set_psn(self.nack_psn);
        c.set_cc(self.cc_type, self.cc_flags);
        p.set_reason(self.reason);
        p.set_tx_timestamp(self.tx_timestamp);
    }
}

impl fmt::Display for NethRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "NETH {} psn {} ev 0x{:08x} pdc {}>{} ts {}",
            self.reason, self.nack_psn, self.entropy, self.spdcid, self.dpdcid, self.tx_timestamp
        )?;
        if self.vendor_info != 0 {
            write!(f, " vendor 0x{:02x}", self.vendor_info)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::U24_MASK;
    use super::*;
    use proptest::prelude::*;

    /// Typed from the layout: type 2 next 3 -> 0x2180; reason TRIMMED; vendor 0x55; entropy
    /// 0x00010002; spdcid 0x0a; dpdcid 0x0b; nack_psn 0x123456; cc 3/4; ts 0x0102.
    const VECTOR: [u8; 20] = [
        0x21, 0x80, 0x01, 0x55, 0x00, 0x01, 0x00, 0x02, 0x00, 0x0a, 0x00, 0x0b, 0x00, 0x12, 0x34,
        0x56, 0x34, 0x00, 0x01, 0x02,
    ];

    #[test]
    fn parses_hand_written_vector() {
        let r = NethRepr::parse(&NethPacket::new_checked(&VECTOR[..]).unwrap()).unwrap();
        assert_eq!((r.hdr_type, r.next), (2, 3));
        assert_eq!(r.reason, NackReason::Trimmed);
        assert_eq!(r.vendor_info, 0x55);
        assert_eq!(r.entropy, 0x0001_0002);
        assert_eq!((r.spdcid, r.dpdcid), (0x0a, 0x0b));
        assert_eq!(r.nack_psn, 0x123456);
        assert_eq!((r.cc_type, r.cc_flags), (3, 4));
        assert_eq!(r.tx_timestamp, 0x0102);
        let mut out = [0u8; NETH_LEN];
        r.emit(&mut NethPacket::new_unchecked(&mut out[..]));
        assert_eq!(out, VECTOR);
        assert_eq!(
            r.to_string(),
            "NETH TRIMMED psn 1193046 ev 0x00010002 pdc 10>11 ts 258 vendor 0x55"
        );
        assert!(NethPacket::new_checked(&VECTOR[..19]).is_err());
    }

    /// What each reason does to the QP and its EV is `qp/feedback.rs`'s business (its test
    /// `nack_reasons_retry_and_blame_as_the_brief_says`): a wire enum describes bytes only.
    #[test]
    fn reason_codes_match_the_brief() {
        let table = [
            (0x01, NackReason::Trimmed),
            (0x02, NackReason::TrimmedLastHop),
            (0x06, NackReason::NoBitmap),
            (0x07, NackReason::NoPktBuffer),
            (0x0A, NackReason::NoResource),
            (0x0B, NackReason::PsnOutOfWindow),
            (0x19, NackReason::UnexpectedEvent),
        ];
        for (code, reason) in table {
            assert_eq!(NackReason::from_u8(code), reason);
            assert_eq!(reason.to_u8(), code);
        }
        assert_eq!(NackReason::from_u8(0x42), NackReason::Unknown(0x42));
        for code in 0..=255u8 {
            assert_eq!(NackReason::from_u8(code).to_u8(), code);
        }
    }

    proptest! {
        #[test]
        fn roundtrip(t in 0u8..16, n in 0u8..32, reason in any::<u8>(), vi in any::<u8>(), ev in any::<u32>(),
                     s in any::<u16>(), d in any::<u16>(), psn in 0u32..=U24_MASK, ct in 0u8..16, cf in 0u8..16, ts in any::<u16>()) {
            let r = NethRepr { hdr_type: t, next: n, reason: NackReason::from_u8(reason), vendor_info: vi, entropy: ev,
                               spdcid: s, dpdcid: d, nack_psn: psn, cc_type: ct, cc_flags: cf, tx_timestamp: ts };
            let mut buf = [0u8; NETH_LEN];
            r.emit(&mut NethPacket::new_unchecked(&mut buf[..]));
            prop_assert_eq!(NethRepr::parse(&NethPacket::new_checked(&buf[..]).unwrap()).unwrap(), r);
        }

        #[test]
        fn never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..32)) {
            if let Ok(p) = NethPacket::new_checked(&bytes[..]) {
                let _ = NethRepr::parse(&p).unwrap().to_string();
            }
        }
    }
}
