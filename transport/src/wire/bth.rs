//! Base Transport Header, 12 bytes (IBTA vol. 1 §9.2; MRC 1.0 §5.3, brief §2.5).
//!
//! ```text
//!  0       opcode (8)
//!  1       SE (1) | M (1) | PadCnt (2) | TVer (4)
//!  2..4    P_Key (16)
//!  4       reserved (8; IBTA FECN/BECN/resv6, masked to 1s in the ICRC)
//!  5..8    DestQP (24)
//!  8       AckReq (1) | rtx (1) | ts (1) | reserved (5)     <- MRC's flags in IBTA's resv7
//!  9..12   PSN (24)
//! ```
//!
//! MRC keeps the IBTA layout and uses two bits that IBTA reserves in the byte after DestQP
//! \[T-py\]\[T-mani\]\[T-ns3\]: `rtx` (this packet is a retransmission) and `ts` (a TSETH follows
//! the METH). Their exact bit positions are our choice \[I\]: the two bits right after AckReq.

use core::fmt;

use super::opcode::Opcode;
use super::{Result, U24_MASK, be, check_len};

/// Length of the BTH.
pub const BTH_LEN: usize = 12;

mod field {
    pub const OPCODE: usize = 0;
    /// SE | M | PadCnt | TVer.
    pub const FLAGS: usize = 1;
    pub const PKEY: usize = 2;
    /// IBTA resv8a (FECN/BECN in IB); masked in the ICRC.
    pub const RESV8A: usize = 4;
    pub const DEST_QP: usize = 5;
    /// AckReq | rtx | ts | reserved.
    pub const ACK_BYTE: usize = 8;
    pub const PSN: usize = 9;
}

const SE: u8 = 0x80;
const MIG: u8 = 0x40;
const ACK_REQ: u8 = 0x80;
const RTX: u8 = 0x40;
const TS: u8 = 0x20;

/// A read/write view of a BTH at the start of a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BthPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> BthPacket<T> {
    /// Wrap a buffer without checking its length; accessors panic on a short buffer.
    pub const fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    /// Wrap a buffer after checking it holds a whole BTH.
    pub fn new_checked(buffer: T) -> Result<Self> {
        check_len(buffer.as_ref(), BTH_LEN, "BTH")?;
        Ok(Self { buffer })
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Opcode (brief §2.3).
    pub fn opcode(&self) -> Opcode {
        Opcode::from_u8(self.buffer.as_ref()[field::OPCODE])
    }
    /// Solicited event (SE).
    pub fn solicited(&self) -> bool {
        self.buffer.as_ref()[field::FLAGS] & SE != 0
    }
    /// Migration request (M).
    pub fn mig_req(&self) -> bool {
        self.buffer.as_ref()[field::FLAGS] & MIG != 0
    }
    /// Pad count (bytes of padding before the ICRC).
    pub fn pad_count(&self) -> u8 {
        (self.buffer.as_ref()[field::FLAGS] >> 4) & 0b11
    }
    /// Transport header version.
    pub fn tver(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS] & 0x0f
    }
    /// Partition key.
    pub fn pkey(&self) -> u16 {
        be::u16_at(self.buffer.as_ref(), field::PKEY)
    }
    /// The reserved byte IBTA masks in the ICRC (FECN/BECN in native IB).
    pub fn resv8a(&self) -> u8 {
        self.buffer.as_ref()[field::RESV8A]
    }
    /// Destination QP number (24 bits).
    pub fn dest_qp(&self) -> u32 {
        be::u24_at(self.buffer.as_ref(), field::DEST_QP)
    }
    /// Acknowledge request (A).
    pub fn ack_req(&self) -> bool {
        self.buffer.as_ref()[field::ACK_BYTE] & ACK_REQ != 0
    }
    /// MRC `rtx`: the packet is a retransmission (brief §2.5).
    pub fn rtx(&self) -> bool {
        self.buffer.as_ref()[field::ACK_BYTE] & RTX != 0
    }
    /// MRC `ts`: a TSETH follows the METH (brief §2.5, §2.7).
    pub fn ts(&self) -> bool {
        self.buffer.as_ref()[field::ACK_BYTE] & TS != 0
    }
    /// Packet sequence number (24 bits).
    pub fn psn(&self) -> u32 {
        be::u24_at(self.buffer.as_ref(), field::PSN)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> BthPacket<T> {
    fn set_bit(&mut self, at: usize, mask: u8, on: bool) {
        let b = &mut self.buffer.as_mut()[at];
        *b = if on { *b | mask } else { *b & !mask };
    }
    /// Set the opcode.
    pub fn set_opcode(&mut self, op: Opcode) {
        self.buffer.as_mut()[field::OPCODE] = op.to_u8();
    }
    /// Set SE.
    pub fn set_solicited(&mut self, on: bool) {
        self.set_bit(field::FLAGS, SE, on);
    }
    /// Set M.
    pub fn set_mig_req(&mut self, on: bool) {
        self.set_bit(field::FLAGS, MIG, on);
    }
    /// Set the pad count (2 bits).
    pub fn set_pad_count(&mut self, pad: u8) {
        let b = &mut self.buffer.as_mut()[field::FLAGS];
        *b = (*b & !0x30) | ((pad & 0b11) << 4);
    }
    /// Set the transport header version (4 bits).
    pub fn set_tver(&mut self, tver: u8) {
        let b = &mut self.buffer.as_mut()[field::FLAGS];
        *b = (*b & 0xf0) | (tver & 0x0f);
    }
    /// Set the partition key.
    pub fn set_pkey(&mut self, pkey: u16) {
        be::set_u16(self.buffer.as_mut(), field::PKEY, pkey);
    }
    /// Set the reserved byte.
    pub fn set_resv8a(&mut self, v: u8) {
        self.buffer.as_mut()[field::RESV8A] = v;
    }
    /// Set the destination QP (low 24 bits).
    pub fn set_dest_qp(&mut self, qpn: u32) {
        be::set_u24(self.buffer.as_mut(), field::DEST_QP, qpn);
    }
    /// Set AckReq.
    pub fn set_ack_req(&mut self, on: bool) {
        self.set_bit(field::ACK_BYTE, ACK_REQ, on);
    }
    /// Set `rtx`.
    pub fn set_rtx(&mut self, on: bool) {
        self.set_bit(field::ACK_BYTE, RTX, on);
    }
    /// Set `ts`.
    pub fn set_ts(&mut self, on: bool) {
        self.set_bit(field::ACK_BYTE, TS, on);
    }
    /// Set the PSN (low 24 bits).
    pub fn set_psn(&mut self, psn: u32) {
        be::set_u24(self.buffer.as_mut(), field::PSN, psn);
    }
}

/// A parsed BTH. Reserved bits are dropped on parse and written as zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BthRepr {
    pub opcode: Opcode,
    pub solicited: bool,
    pub mig_req: bool,
    /// 0..=3.
    pub pad_count: u8,
    /// 0..=15 (0 for IBTA 1.x and MRC).
    pub tver: u8,
    pub pkey: u16,
    /// 24 bits.
    pub dest_qp: u32,
    pub ack_req: bool,
    /// Retransmission flag (MRC).
    pub rtx: bool,
    /// TSETH-present flag (MRC).
    pub ts: bool,
    /// 24 bits.
    pub psn: u32,
}

impl BthRepr {
    /// The default partition key (IBTA full-membership default P_Key).
    pub const DEFAULT_PKEY: u16 = 0xffff;

    /// Parse a checked view.
    pub fn parse<T: AsRef<[u8]>>(p: &BthPacket<T>) -> Result<Self> {
        Ok(Self {
            opcode: p.opcode(),
            solicited: p.solicited(),
            mig_req: p.mig_req(),
            pad_count: p.pad_count(),
            tver: p.tver(),
            pkey: p.pkey(),
            dest_qp: p.dest_qp(),
            ack_req: p.ack_req(),
            rtx: p.rtx(),
            ts: p.ts(),
            psn: p.psn(),
        })
    }

    /// Bytes [`BthRepr::emit`] writes.
    pub const fn buffer_len(&self) -> usize {
        BTH_LEN
    }

    /// Write the header into the first 12 bytes of `p`'s buffer.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut BthPacket<T>) {
        let b = p.buffer.as_mut();
        b[field::OPCODE] = self.opcode.to_u8();
        b[field::FLAGS] = if self.solicited { SE } else { 0 }
            | if self.mig_req { MIG } else { 0 }
            | ((self.pad_count & 0b11) << 4)
            | (self.tver & 0x0f);
        be::set_u16(b, field::PKEY, self.pkey);
        b[field::RESV8A] = 0;
        be::set_u24(b, field::DEST_QP, self.dest_qp & U24_MASK);
        b[field::ACK_BYTE] = if self.ack_req { ACK_REQ } else { 0 }
            | if self.rtx { RTX } else { 0 }
            | if self.ts { TS } else { 0 };
        be::set_u24(b, field::PSN, self.psn & U24_MASK);
    }
}

impl fmt::Display for BthRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "BTH {} qp 0x{:06x} psn {}",
            self.opcode, self.dest_qp, self.psn
        )?;
        for (on, name) in [
            (self.ack_req, " ackreq"),
            (self.rtx, " rtx"),
            (self.ts, " ts"),
            (self.solicited, " se"),
            (self.mig_req, " m"),
        ] {
            if on {
                f.write_str(name)?;
            }
        }
        if self.pad_count != 0 {
            write!(f, " pad {}", self.pad_count)?;
        }
        if self.pkey != Self::DEFAULT_PKEY {
            write!(f, " pkey 0x{:04x}", self.pkey)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Typed from the layout table above: Write Middle, SE=1, PadCnt=2, TVer=0, P_Key 0xffff,
    /// DestQP 0x000123, AckReq=1, rtx=1, ts=0, PSN 0xabcdef.
    const VECTOR: [u8; 12] = [
        0xC7, 0xA0, 0xff, 0xff, 0x00, 0x00, 0x01, 0x23, 0xC0, 0xab, 0xcd, 0xef,
    ];

    #[test]
    fn parses_hand_written_vector() {
        let r = BthRepr::parse(&BthPacket::new_checked(&VECTOR[..]).unwrap()).unwrap();
        assert_eq!(r.opcode, Opcode::WriteMiddle);
        assert!(r.solicited && !r.mig_req);
        assert_eq!((r.pad_count, r.tver, r.pkey), (2, 0, 0xffff));
        assert_eq!(r.dest_qp, 0x123);
        assert!(r.ack_req && r.rtx && !r.ts);
        assert_eq!(r.psn, 0xabcdef);
        let mut out = [0u8; 12];
        r.emit(&mut BthPacket::new_unchecked(&mut out[..]));
        assert_eq!(out, VECTOR);
        assert_eq!(
            r.to_string(),
            "BTH WRITE_MIDDLE qp 0x000123 psn 11259375 ackreq rtx se pad 2"
        );
    }

    #[test]
    fn rejects_short_buffers() {
        assert!(BthPacket::new_checked(&VECTOR[..11]).is_err());
    }

    #[test]
    fn setters_keep_neighbouring_bits() {
        let mut b = VECTOR;
        let mut p = BthPacket::new_unchecked(&mut b[..]);
        p.set_ts(true);
        p.set_rtx(false);
        assert!(p.ack_req() && p.ts() && !p.rtx());
        p.set_pad_count(1);
        assert!(p.solicited() && p.pad_count() == 1);
        p.set_psn(0x1ff_ffff);
        assert_eq!(p.psn(), 0xff_ffff);
        assert_eq!(p.dest_qp(), 0x123);
    }

    pub(crate) fn arb_bth() -> impl Strategy<Value = BthRepr> {
        (
            any::<u8>(),
            any::<[bool; 5]>(),
            0u8..4,
            0u8..16,
            any::<u16>(),
            0u32..=U24_MASK,
            0u32..=U24_MASK,
        )
            .prop_map(|(op, f, pad_count, tver, pkey, dest_qp, psn)| BthRepr {
                opcode: Opcode::from_u8(op),
                solicited: f[0],
                mig_req: f[1],
                pad_count,
                tver,
                pkey,
                dest_qp,
                ack_req: f[2],
                rtx: f[3],
                ts: f[4],
                psn,
            })
    }

    proptest! {
        #[test]
        fn roundtrip(r in arb_bth()) {
            let mut buf = [0u8; BTH_LEN];
            r.emit(&mut BthPacket::new_unchecked(&mut buf[..]));
            let parsed = BthRepr::parse(&BthPacket::new_checked(&buf[..]).unwrap()).unwrap();
            prop_assert_eq!(parsed, r);
            let mut again = [0u8; BTH_LEN];
            parsed.emit(&mut BthPacket::new_unchecked(&mut again[..]));
            prop_assert_eq!(again, buf);
        }

        #[test]
        fn never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..24)) {
            if let Ok(p) = BthPacket::new_checked(&bytes[..]) {
                let _ = BthRepr::parse(&p).unwrap().to_string();
            }
        }
    }
}
