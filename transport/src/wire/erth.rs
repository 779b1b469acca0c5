//! Endpoint request header, 16 bytes, of opcode 0xD8, sent to the reserved QP 0x2
//! (MRC 1.0 §7.4.7–§7.4.8, brief §2.12) \[T-py\]. The request identifier rides in BTH
//! PSN\[15:0\]; endpoint operations consume no PSN and are never retransmitted.
//!
//! ```text
//!  0       op (2: 0 PORT_STATUS_UPDATE, 1 EV_PROBE) | reserved (6)
//!  1..4    reserved (24)
//!  4..8    port_status_mask (32): bit i = local port i+1 is up
//!  8..12   reserved (32)
//!  12..14  tx_timestamp (16, 128 ns units)
//!  14..16  TSR (1) | reserved (11) | format_type (4)
//! ```
//!
//! Offsets of the mask and the timestamp are our layout \[I\]: the transcriptions list the
//! fields and the total size only. The operation and the mask are the common fields of `ext`
//! (shared with the EETH); bytes 12..16 are the TSETH layout (viewed as a [`TsethPacket`]).

use core::fmt;

use super::ext::ExtPrefix;
use super::tseth::TsethPacket;
use super::{Result, check_len};

/// Length of the ERTH.
pub const ERTH_LEN: usize = 16;

/// The reserved destination QP of endpoint operations (brief §2.12).
pub const ENDPOINT_QPN: u32 = 0x2;

/// Endpoint operation (the 2-bit `op` field of ERTH and EETH).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EndpointOp {
    /// 0: tell the peer which local ports are up (spec §7.4.8).
    PortStatusUpdate,
    /// 1: probe an EV (spec §7.4.7).
    EvProbe,
    /// 2 or 3.
    Unknown(u8),
}

impl EndpointOp {
    /// Decode the two bits.
    pub const fn from_bits(bits: u8) -> Self {
        match bits & 0b11 {
            0 => Self::PortStatusUpdate,
            1 => Self::EvProbe,
            other => Self::Unknown(other),
        }
    }
    /// The two-bit code.
    pub const fn bits(self) -> u8 {
        match self {
            Self::PortStatusUpdate => 0,
            Self::EvProbe => 1,
            Self::Unknown(b) => b & 0b11,
        }
    }
}

impl fmt::Display for EndpointOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::PortStatusUpdate => f.write_str("PORT_STATUS_UPDATE"),
            Self::EvProbe => f.write_str("EV_PROBE"),
            Self::Unknown(b) => write!(f, "UNKNOWN({b})"),
        }
    }
}

mod field {
    use core::ops::Range;
    pub const RESERVED: Range<usize> = 8..12;
    pub const TIMESTAMP: Range<usize> = 12..16;
}

/// A read/write view of an ERTH. The operation and the port status mask are the common fields
/// of `ext::ExtPrefix`; the view has the ERTH's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ErthPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> ErthPacket<T> {
    /// Wrap without checking; accessors panic on a short buffer.
    pub const fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }
    /// Wrap after checking the length.
    pub fn new_checked(buffer: T) -> Result<Self> {
        check_len(buffer.as_ref(), ERTH_LEN, "ERTH")?;
        Ok(Self { buffer })
    }
    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }
    /// The transmit timestamp, TSR and format type (the TSETH layout).
    pub fn timestamp(&self) -> TsethPacket<&[u8]> {
        TsethPacket::new_unchecked(&self.buffer.as_ref()[field::TIMESTAMP])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> ErthPacket<T> {
    /// Zero the reserved bytes 8..12.
    pub fn clear_reserved(&mut self) {
        self.buffer.as_mut()[field::RESERVED].fill(0);
    }
    /// The timestamp block, to write.
    pub fn timestamp_mut(&mut self) -> TsethPacket<&mut [u8]> {
        TsethPacket::new_unchecked(&mut self.buffer.as_mut()[field::TIMESTAMP])
    }
}

/// A parsed ERTH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ErthRepr {
    pub op: EndpointOp,
    pub port_status_mask: u32,
    pub tx_timestamp: u16,
    pub tsr: bool,
    /// 4 bits.
    pub format_type: u8,
}

impl ErthRepr {
    /// Parse a checked view.
    pub fn parse<T: AsRef<[u8]>>(p: &ErthPacket<T>) -> Result<Self> {
        let c = ExtPrefix::new_unchecked(p.buffer.as_ref());
        let ts = p.timestamp();
        Ok(Self {
            op: EndpointOp::from_bits(c.op_bits()),
            port_status_mask: c.port_status_mask(),
            tx_timestamp: ts.tx_timestamp(),
            tsr: ts.tsr(),
            format_type: ts.format_type(),
        })
    }
    /// Bytes [`ErthRepr::emit`] writes.
    pub const fn buffer_len(&self) -> usize {
        ERTH_LEN
    }
    /// Write the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut ErthPacket<T>) {
        let mut c = ExtPrefix::new_unchecked(p.buffer.as_mut());
        c.set_op_bits(self.op.bits());
        c.set_port_status_mask(self.port_status_mask);
        p.clear_reserved();
        let mut ts = p.timestamp_mut();
        ts.set_tx_timestamp(self.tx_timestamp);
        ts.set_flags(self.tsr, self.format_type);
    }
}

impl fmt::Display for ErthRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ERTH {} ports 0x{:08x} ts {} fmt {}{}",
            self.op,
            self.port_status_mask,
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

    /// Typed from the layout: EV_PROBE (op 1 -> 0x40), mask 0x000000fd, ts 0x1111, TSR 1 fmt 1.
    const VECTOR: [u8; 16] = [
        0x40, 0, 0, 0, 0x00, 0x00, 0x00, 0xfd, 0, 0, 0, 0, 0x11, 0x11, 0x80, 0x01,
    ];

    #[test]
    fn parses_hand_written_vector() {
        let r = ErthRepr::parse(&ErthPacket::new_checked(&VECTOR[..]).unwrap()).unwrap();
        assert_eq!(r.op, EndpointOp::EvProbe);
        assert_eq!(r.port_status_mask, 0xfd);
        assert_eq!((r.tx_timestamp, r.tsr, r.format_type), (0x1111, true, 1));
        let mut out = [0xffu8; ERTH_LEN];
        r.emit(&mut ErthPacket::new_unchecked(&mut out[..]));
        assert_eq!(out, VECTOR);
        assert_eq!(
            r.to_string(),
            "ERTH EV_PROBE ports 0x000000fd ts 4369 fmt 1 tsr"
        );
        assert!(ErthPacket::new_checked(&VECTOR[..15]).is_err());
        assert_eq!(EndpointOp::from_bits(3), EndpointOp::Unknown(3));
    }

    proptest! {
        #[test]
        fn roundtrip(op in 0u8..4, mask in any::<u32>(), ts in any::<u16>(), tsr in any::<bool>(), fmt in 0u8..16) {
            let r = ErthRepr { op: EndpointOp::from_bits(op), port_status_mask: mask, tx_timestamp: ts, tsr, format_type: fmt };
            let mut buf = [0u8; ERTH_LEN];
            r.emit(&mut ErthPacket::new_unchecked(&mut buf[..]));
            prop_assert_eq!(ErthRepr::parse(&ErthPacket::new_checked(&buf[..]).unwrap()).unwrap(), r);
        }

        #[test]
        fn never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..24)) {
            if let Ok(p) = ErthPacket::new_checked(&bytes[..]) {
                let _ = ErthRepr::parse(&p).unwrap().to_string();
            }
        }
    }
}
