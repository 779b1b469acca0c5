//! ACK Extended Transport Header, 4 bytes, of the transport ACK (opcode 0xD1) (IBTA vol. 1
//! §9.3.4; MRC 1.0 §5.12, brief §2.13).
//!
//! ```text
//!  0      syndrome (8): reserved (1) | type (2: 00 ACK, 01 RNR NAK, 11 NAK) | value (5)
//!  1..4   MSN (24): the last message completed at the responder
//! ```
//!
//! MRC has no RC end-to-end credits, so an ACK advertises the "no credit" value 0x1F \[T-ns3\].

use core::fmt;

use super::{Result, U24_MASK, be, check_len};

/// Length of the AETH.
pub const AETH_LEN: usize = 4;

mod field {
    pub const SYNDROME: usize = 0;
    pub const MSN: usize = 1;
}

/// A read/write view of an AETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AethPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> AethPacket<T> {
    /// Wrap without checking; accessors panic on a short buffer.
    pub const fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }
    /// Wrap after checking the length.
    pub fn new_checked(buffer: T) -> Result<Self> {
        check_len(buffer.as_ref(), AETH_LEN, "AETH")?;
        Ok(Self { buffer })
    }
    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }
    /// Syndrome byte.
    pub fn syndrome(&self) -> u8 {
        self.buffer.as_ref()[field::SYNDROME]
    }
    /// Message sequence number (24 bits).
    pub fn msn(&self) -> u32 {
        be::u24_at(self.buffer.as_ref(), field::MSN)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> AethPacket<T> {
    /// Set the syndrome.
    pub fn set_syndrome(&mut self, v: u8) {
        self.buffer.as_mut()[field::SYNDROME] = v;
    }
    /// Set the MSN (low 24 bits).
    pub fn set_msn(&mut self, v: u32) {
        be::set_u24(self.buffer.as_mut(), field::MSN, v);
    }
}

/// A parsed AETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AethRepr {
    pub syndrome: u8,
    /// 24 bits.
    pub msn: u32,
}

impl AethRepr {
    /// ACK syndrome with the "no end-to-end credit" count (brief §2.13).
    pub const SYNDROME_ACK_NO_CREDIT: u8 = 0x1f;

    /// A positive ACK of messages up to `msn`, with the no-credit syndrome.
    pub const fn ack(msn: u32) -> Self {
        Self {
            syndrome: Self::SYNDROME_ACK_NO_CREDIT,
            msn: msn & U24_MASK,
        }
    }
    /// The two type bits of the syndrome: 0 ACK, 1 RNR NAK, 3 NAK.
    pub const fn syndrome_type(&self) -> u8 {
        (self.syndrome >> 5) & 0b11
    }
    /// Parse a checked view.
    pub fn parse<T: AsRef<[u8]>>(p: &AethPacket<T>) -> Result<Self> {
        Ok(Self {
            syndrome: p.syndrome(),
            msn: p.msn(),
        })
    }
    /// Bytes [`AethRepr::emit`] writes.
    pub const fn buffer_len(&self) -> usize {
        AETH_LEN
    }
    /// Write the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut AethPacket<T>) {
        p.set_syndrome(self.syndrome);
        p.set_msn(self.msn & U24_MASK);
    }
}

impl fmt::Display for AethRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.syndrome_type() {
            0 => "ack",
            1 => "rnr-nak",
            2 => "reserved",
            _ => "nak",
        };
        write!(
            f,
            "AETH {kind} syndrome 0x{:02x} msn {}",
            self.syndrome, self.msn
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Syndrome 0x1f (ACK, no credit), MSN 0x010203, typed from the layout.
    const VECTOR: [u8; 4] = [0x1f, 0x01, 0x02, 0x03];

    #[test]
    fn parses_hand_written_vector() {
        let r = AethRepr::parse(&AethPacket::new_checked(&VECTOR[..]).unwrap()).unwrap();
        assert_eq!(r, AethRepr::ack(0x010203));
        assert_eq!(r.syndrome_type(), 0);
        let mut out = [0u8; 4];
        r.emit(&mut AethPacket::new_unchecked(&mut out[..]));
        assert_eq!(out, VECTOR);
        assert_eq!(r.to_string(), "AETH ack syndrome 0x1f msn 66051");
        assert!(AethPacket::new_checked(&VECTOR[..3]).is_err());
    }

    proptest! {
        #[test]
        fn roundtrip(syndrome in any::<u8>(), msn in 0u32..=U24_MASK) {
            let r = AethRepr { syndrome, msn };
            let mut buf = [0u8; AETH_LEN];
            r.emit(&mut AethPacket::new_unchecked(&mut buf[..]));
            prop_assert_eq!(AethRepr::parse(&AethPacket::new_checked(&buf[..]).unwrap()).unwrap(), r);
        }

        #[test]
        fn never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..8)) {
            if let Ok(p) = AethPacket::new_checked(&bytes[..]) {
                let _ = AethRepr::parse(&p).unwrap().to_string();
            }
        }
    }
}
