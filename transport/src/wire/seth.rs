//! Reliability SACK header, 28 bytes, of opcode 0xDC; a CC_STATE follows it (MRC 1.0 §5.8,
//! brief §2.9) \[T-py\]\[T-ns3\]. Bytes 16..28 mirror UET's ACK_CC layout.
//!
//! ```text
//!  0..2    type (4) | next (5) | M (2) | reserved (4) | PR (1)
//!  2..4    ack_psn_offset (signed 16): triggering PSN = cack_psn + offset
//!  4..8    entropy (32): EV of the triggering packet, reflected
//!  8..10   spdcid (16)      10..12  dpdcid (16)
//!  12      reserved (8)     13..16  cack_psn (24): everything before it was received
//!  16      cc_type (4) | cc_flags (4)
//!  17      MPR (8): current max PSN range, unit 128 PSNs (0: dynamic MPR off)
//!  18..20  sack_offset (signed 16): bitmap base = cack_psn + sack_offset
//!  20..28  sack_bitmap (64): bit i (LSB = 0) set = PSN base + i received
//! ```
//!
//! Type/next, entropy, the PDC identifiers, the PSN and CC are the common fields of
//! `ext`; the rest is the SETH's own.
//!
//! Bit order of the bitmap is our choice \[I\]: bit i is `1 << i` of the big-endian u64.

use core::fmt;

use super::ext::ExtPrefix;
use super::{Result, U24_MASK, be, check_len};

/// Length of the SETH (without the CC_STATE that follows it).
pub const SETH_LEN: usize = 28;

/// PSNs per unit of the MPR field (brief §2.9).
pub const MPR_UNIT_PSNS: u32 = 128;

/// The widest window the 8-bit MPR field can advertise: 255 units (brief §2.9, §3.5).
pub const MAX_ADVERTISED_MPR: u32 = u8::MAX as u32 * MPR_UNIT_PSNS;

/// The MPR field advertising a window of `psns` PSNs (dynamic MPR, brief §3.5): whole units,
/// rounded down so the requester never sends beyond what the responder accepts, at least one
/// (0 says dynamic MPR is off) and at most 255.
pub const fn mpr_field(psns: u32) -> u8 {
    let units = psns / MPR_UNIT_PSNS;
    if units == 0 {
        1
    } else if units > u8::MAX as u32 {
        u8::MAX
    } else {
        units as u8
    }
}

/// The responder's multipath verdict on the reflected EV (the 2-bit `M` field, brief §2.9).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum MultipathVerdict {
    /// 00: nothing to say about the path.
    #[default]
    None,
    /// 01: the forward path was ECN-marked: skip this EV once.
    SkipOnce,
    /// 10: the responder judges the path persistently bad.
    AlwaysSkip,
    /// Any other code (11).
    Unknown(u8),
}

impl MultipathVerdict {
    /// Decode the two bits.
    pub const fn from_bits(bits: u8) -> Self {
        match bits & 0b11 {
            0 => Self::None,
            1 => Self::SkipOnce,
            2 => Self::AlwaysSkip,
            other => Self::Unknown(other),
        }
    }
    /// The two-bit code.
    pub const fn bits(self) -> u8 {
        match self {
            Self::None => 0,
            Self::SkipOnce => 1,
            Self::AlwaysSkip => 2,
            Self::Unknown(b) => b & 0b11,
        }
    }
}

impl fmt::Display for MultipathVerdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::None => f.write_str("NONE"),
            Self::SkipOnce => f.write_str("SKIP_ONCE"),
            Self::AlwaysSkip => f.write_str("ALWAYS_SKIP"),
            Self::Unknown(b) => write!(f, "UNKNOWN({b})"),
        }
    }
}

mod field {
    pub const ACK_PSN_OFFSET: usize = 2;
    pub const MPR: usize = 17;
    pub const SACK_OFFSET: usize = 18;
    pub const SACK_BITMAP: usize = 20;
}

/// The SETH's header bits (bits 6..0 of the first word): M (2) | reserved (4) | PR (1).
const VERDICT_SHIFT: u8 = 5;
const PR: u8 = 0x01;

/// A read/write view of a SETH. Type, next, entropy, PDC identifiers, cumulative ACK PSN and
/// CC are the common fields of `ext::ExtPrefix`; the view has the SETH's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SethPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> SethPacket<T> {
    /// Wrap without checking; accessors panic on a short buffer.
    pub const fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }
    /// Wrap after checking the length.
    pub fn new_checked(buffer: T) -> Result<Self> {
        check_len(buffer.as_ref(), SETH_LEN, "SETH")?;
        Ok(Self { buffer })
    }
    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }
    fn header_bits(&self) -> u8 {
        ExtPrefix::new_unchecked(self.buffer.as_ref()).header_bits()
    }
    /// Multipath verdict on the reflected EV.
    pub fn verdict(&self) -> MultipathVerdict {
        MultipathVerdict::from_bits(self.header_bits() >> VERDICT_SHIFT)
    }
    /// PR: this SACK answers a reliability probe.
    pub fn probe_response(&self) -> bool {
        self.header_bits() & PR != 0
    }
    /// Signed offset of the triggering PSN from the cumulative ACK.
    pub fn ack_psn_offset(&self) -> i16 {
        be::u16_at(self.buffer.as_ref(), field::ACK_PSN_OFFSET) as i16
    }
    /// Max PSN range in units of 128 PSNs.
    pub fn mpr(&self) -> u8 {
        self.buffer.as_ref()[field::MPR]
    }
    /// Signed offset of the bitmap base from the cumulative ACK.
    pub fn sack_offset(&self) -> i16 {
        be::u16_at(self.buffer.as_ref(), field::SACK_OFFSET) as i16
    }
    /// Selective-ACK bitmap.
    pub fn sack_bitmap(&self) -> u64 {
        be::u64_at(self.buffer.as_ref(), field::SACK_BITMAP)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> SethPacket<T> {
    /// Set type, next, verdict and PR (reserved bits become zero).
    pub fn set_flags(&mut self, hdr_type: u8, next: u8, verdict: MultipathVerdict, pr: bool) {
        let bits = (verdict.bits() << VERDICT_SHIFT) | if pr { PR } else { 0 };
        ExtPrefix::new_unchecked(self.buffer.as_mut()).set_type_next(
            hdr_type,
            next,
            u16::from(bits),
        );
    }
    /// Set the triggering-PSN offset.
    pub fn set_ack_psn_offset(&mut self, v: i16) {
        be::set_u16(self.buffer.as_mut(), field::ACK_PSN_OFFSET, v as u16);
    }
    /// Set the MPR.
    pub fn set_mpr(&mut self, v: u8) {
        self.buffer.as_mut()[field::MPR] = v;
    }
    /// Set the bitmap base offset.
    pub fn set_sack_offset(&mut self, v: i16) {
        be::set_u16(self.buffer.as_mut(), field::SACK_OFFSET, v as u16);
    }
    /// Set the bitmap.
    pub fn set_sack_bitmap(&mut self, v: u64) {
        be::set_u64(self.buffer.as_mut(), field::SACK_BITMAP, v);
    }
}

/// A parsed SETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SethRepr {
    /// 4 bits.
    pub hdr_type: u8,
    /// 5 bits.
    pub next: u8,
    pub verdict: MultipathVerdict,
    /// PR: answers a reliability probe.
    pub probe_response: bool,
    pub ack_psn_offset: i16,
    pub entropy: u32,
    pub spdcid: u16,
    pub dpdcid: u16,
    /// 24 bits.
    pub cack_psn: u32,
    /// 4 bits.
    pub cc_type: u8,
    /// 4 bits.
    pub cc_flags: u8,
    /// Units of [`MPR_UNIT_PSNS`].
    pub mpr: u8,
    pub sack_offset: i16,
    pub sack_bitmap: u64,
}

impl SethRepr {
    /// The PSN whose arrival triggered this SACK (24-bit arithmetic).
    pub const fn ack_psn(&self) -> u32 {
        self.cack_psn
            .wrapping_add(self.ack_psn_offset as i32 as u32)
            & U24_MASK
    }
    /// The PSN of bitmap bit 0 (24-bit arithmetic).
    pub const fn bitmap_base(&self) -> u32 {
        self.cack_psn.wrapping_add(self.sack_offset as i32 as u32) & U24_MASK
    }
    /// Whether the bitmap marks `psn` received (false outside the 64-PSN window).
    pub const fn is_sacked(&self, psn: u32) -> bool {
        let i = psn.wrapping_sub(self.bitmap_base()) & U24_MASK;
        i < 64 && self.sack_bitmap & (1 << i) != 0
    }
    /// The MPR in PSNs (0: dynamic MPR off).
    pub const fn mpr_psns(&self) -> u32 {
        self.mpr as u32 * MPR_UNIT_PSNS
    }
    /// Parse a checked view.
    pub fn parse<T: AsRef<[u8]>>(p: &SethPacket<T>) -> Result<Self> {
        let c = ExtPrefix::new_unchecked(p.buffer.as_ref());
        Ok(Self {
            hdr_type: c.hdr_type(),
            next: c.next(),
            verdict: p.verdict(),
            probe_response: p.probe_response(),
            ack_psn_offset: p.ack_psn_offset(),
            entropy: c.entropy(),
            spdcid: c.spdcid(),
            dpdcid: c.dpdcid(),
            cack_psn: c.psn(),
            cc_type: c.cc_type(),
            cc_flags: c.cc_flags(),
            mpr: p.mpr(),
            sack_offset: p.sack_offset(),
            sack_bitmap: p.sack_bitmap(),
        })
    }
    /// Bytes [`SethRepr::emit`] writes.
    pub const fn buffer_len(&self) -> usize {
        SETH_LEN
    }
    /// Write the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut SethPacket<T>) {
        p.set_flags(self.hdr_type, self.next, self.verdict, self.probe_response);
        let mut c = ExtPrefix::new_unchecked(p.buffer.as_mut());
        c.set_entropy(self.entropy);
        c.set_pdcids(self.spdcid, self.dpdcid);
        c.set_psn(self.cack_psn);
        c.set_cc(self.cc_type, self.cc_flags);
        p.set_ack_psn_offset(self.ack_psn_offset);
        p.set_mpr(self.mpr);
        p.set_sack_offset(self.sack_offset);
        p.set_sack_bitmap(self.sack_bitmap);
    }
}

impl fmt::Display for SethRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "SETH cack {} ack_psn {} bitmap 0x{:016x}@{} ev 0x{:08x} m {}{} pdc {}>{} mpr {} cc {}/0x{:x}",
            self.cack_psn,
            self.ack_psn(),
            self.sack_bitmap,
            self.bitmap_base(),
            self.entropy,
            self.verdict,
            if self.probe_response { " pr" } else { "" },
            self.spdcid,
            self.dpdcid,
            self.mpr,
            self.cc_type,
            self.cc_flags
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Typed from the layout: type 1, next 2, M = SKIP_ONCE, PR = 1 -> 0x1121; ack_psn_offset
    /// +5; entropy 0xdeadbeef; spdcid 7; dpdcid 9; cack_psn 0x000100; cc_type 1 flags 2; MPR 4;
    /// sack_offset -2; bitmap 0x8000_0000_0000_0005.
    const VECTOR: [u8; 28] = [
        0x11, 0x21, 0x00, 0x05, 0xde, 0xad, 0xbe, 0xef, 0x00, 0x07, 0x00, 0x09, 0x00, 0x00, 0x01,
        0x00, 0x12, 0x04, 0xff, 0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x05,
    ];

    #[test]
    fn parses_hand_written_vector() {
        let r = SethRepr::parse(&SethPacket::new_checked(&VECTOR[..]).unwrap()).unwrap();
        assert_eq!((r.hdr_type, r.next), (1, 2));
        assert_eq!(r.verdict, MultipathVerdict::SkipOnce);
        assert!(r.probe_response);
        assert_eq!(r.ack_psn_offset, 5);
        assert_eq!(r.entropy, 0xdead_beef);
        assert_eq!((r.spdcid, r.dpdcid), (7, 9));
        assert_eq!(r.cack_psn, 0x100);
        assert_eq!((r.cc_type, r.cc_flags, r.mpr), (1, 2, 4));
        assert_eq!(r.sack_offset, -2);
        assert_eq!(r.sack_bitmap, 0x8000_0000_0000_0005);
        assert_eq!(r.ack_psn(), 0x105);
        assert_eq!(r.bitmap_base(), 0xfe);
        assert!(r.is_sacked(0xfe) && !r.is_sacked(0xff) && r.is_sacked(0x100));
        assert!(r.is_sacked(0xfe + 63) && !r.is_sacked(0xfe + 64));
        assert_eq!(r.mpr_psns(), 512);
        let mut out = [0u8; SETH_LEN];
        r.emit(&mut SethPacket::new_unchecked(&mut out[..]));
        assert_eq!(out, VECTOR);
        assert!(SethPacket::new_checked(&VECTOR[..27]).is_err());
        assert!(
            r.to_string()
                .starts_with("SETH cack 256 ack_psn 261 bitmap 0x8000000000000005@254")
        );
    }

    /// Dynamic MPR's advertisement (brief §3.5): units of 128 PSNs, rounded down, never 0
    /// (that is "off"), at most 255; read back in PSNs; byte 17 of the header.
    #[test]
    fn mpr_field_rounds_down_in_128_psn_units() {
        for (psns, field) in [
            (128, 1),
            (255, 1),
            (256, 2),
            (1000, 7),
            (1024, 8),
            (1088, 8),
            (MAX_ADVERTISED_MPR, 255),
            (MAX_ADVERTISED_MPR + 127, 255),
            (1 << 16, 255),
            (64, 1),
            (0, 1),
        ] {
            assert_eq!(mpr_field(psns), field, "{psns} PSNs");
        }
        for psns in (0..=MAX_ADVERTISED_MPR).step_by(64) {
            let back = u32::from(mpr_field(psns)) * MPR_UNIT_PSNS;
            assert!(
                back <= psns.max(MPR_UNIT_PSNS),
                "{psns} PSNs advertised as {back}"
            );
            assert!(
                back + MPR_UNIT_PSNS > psns,
                "{psns} PSNs advertised as {back}"
            );
        }
        let r = SethRepr {
            mpr: mpr_field(3 * 128 + 5),
            ..SethRepr::default()
        };
        assert_eq!(r.mpr_psns(), 384);
        let mut out = [0u8; SETH_LEN];
        r.emit(&mut SethPacket::new_unchecked(&mut out[..]));
        assert_eq!(out[field::MPR], 3);
        assert_eq!(SethRepr::default().mpr_psns(), 0, "0: dynamic MPR off");
    }

    #[test]
    fn psn_arithmetic_wraps_at_24_bits() {
        let r = SethRepr {
            cack_psn: 2,
            ack_psn_offset: -3,
            sack_offset: -1,
            sack_bitmap: 1,
            ..SethRepr::default()
        };
        assert_eq!(r.ack_psn(), U24_MASK);
        assert!(r.is_sacked(1));
    }

    pub(crate) fn arb_seth() -> impl Strategy<Value = SethRepr> {
        (
            (
                0u8..16,
                0u8..32,
                0u8..4,
                any::<bool>(),
                any::<i16>(),
                any::<u32>(),
            ),
            (
                any::<u16>(),
                any::<u16>(),
                0u32..=U24_MASK,
                0u8..16,
                0u8..16,
            ),
            (any::<u8>(), any::<i16>(), any::<u64>()),
        )
            .prop_map(|(a, b, c)| SethRepr {
                hdr_type: a.0,
                next: a.1,
                verdict: MultipathVerdict::from_bits(a.2),
                probe_response: a.3,
                ack_psn_offset: a.4,
                entropy: a.5,
                spdcid: b.0,
                dpdcid: b.1,
                cack_psn: b.2,
                cc_type: b.3,
                cc_flags: b.4,
                mpr: c.0,
                sack_offset: c.1,
                sack_bitmap: c.2,
            })
    }

    proptest! {
        #[test]
        fn roundtrip(r in arb_seth()) {
            let mut buf = [0u8; SETH_LEN];
            r.emit(&mut SethPacket::new_unchecked(&mut buf[..]));
            prop_assert_eq!(SethRepr::parse(&SethPacket::new_checked(&buf[..]).unwrap()).unwrap(), r);
        }

        #[test]
        fn never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..40)) {
            if let Ok(p) = SethPacket::new_checked(&bytes[..]) {
                let r = SethRepr::parse(&p).unwrap();
                let _ = (r.to_string(), r.is_sacked(0), r.ack_psn());
            }
        }
    }
}
