//! Immediate data, 4 bytes, after the RETH of a Write-with-Immediate (IBTA vol. 1 §9.3.5;
//! brief §2.3).
//!
//! ```text
//!  0..4   immediate data (32), delivered to the responder's completion
//! ```

use core::fmt;

use super::{Result, be, check_len};

/// Length of the ImmDt header.
pub const IMMDT_LEN: usize = 4;

mod field {
    pub const IMM: usize = 0;
}

/// A read/write view of an ImmDt header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImmDtPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> ImmDtPacket<T> {
    /// Wrap without checking; accessors panic on a short buffer.
    pub const fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }
    /// Wrap after checking the length.
    pub fn new_checked(buffer: T) -> Result<Self> {
        check_len(buffer.as_ref(), IMMDT_LEN, "ImmDt")?;
        Ok(Self { buffer })
    }
    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }
    /// The immediate value, as the bytes read big-endian (libibverbs hands it over in network
    /// order; we keep the number the wire shows).
    pub fn imm(&self) -> u32 {
        be::u32_at(self.buffer.as_ref(), field::IMM)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> ImmDtPacket<T> {
    /// Set the immediate value.
    pub fn set_imm(&mut self, v: u32) {
        be::set_u32(self.buffer.as_mut(), field::IMM, v);
    }
}

/// A parsed ImmDt header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ImmDtRepr {
    pub imm: u32,
}

impl ImmDtRepr {
    /// Parse a checked view.
    pub fn parse<T: AsRef<[u8]>>(p: &ImmDtPacket<T>) -> Result<Self> {
        Ok(Self { imm: p.imm() })
    }
    /// Bytes [`ImmDtRepr::emit`] writes.
    pub const fn buffer_len(&self) -> usize {
        IMMDT_LEN
    }
    /// Write the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut ImmDtPacket<T>) {
        p.set_imm(self.imm);
    }
}

impl fmt::Display for ImmDtRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ImmDt 0x{:08x}", self.imm)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_hand_written_vector() {
        let v = [0xca, 0xfe, 0x00, 0x01];
        let r = ImmDtRepr::parse(&ImmDtPacket::new_checked(&v[..]).unwrap()).unwrap();
        assert_eq!(r.imm, 0xcafe_0001);
        let mut out = [0u8; 4];
        r.emit(&mut ImmDtPacket::new_unchecked(&mut out[..]));
        assert_eq!(out, v);
        assert_eq!(r.to_string(), "ImmDt 0xcafe0001");
        assert!(ImmDtPacket::new_checked(&v[..3]).is_err());
    }

    proptest! {
        #[test]
        fn roundtrip(imm in any::<u32>()) {
            let r = ImmDtRepr { imm };
            let mut buf = [0u8; IMMDT_LEN];
            r.emit(&mut ImmDtPacket::new_unchecked(&mut buf[..]));
            prop_assert_eq!(ImmDtRepr::parse(&ImmDtPacket::new_checked(&buf[..]).unwrap()).unwrap(), r);
        }
    }
}
