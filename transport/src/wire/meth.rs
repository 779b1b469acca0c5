//! Message Extended Transport Header, 4 bytes, in every request packet (MRC 1.0 §5.4,
//! brief §2.6).
//!
//! ```text
//!  0..2   RQMSN (16): receive-queue MSN, counts Write-with-Immediate messages
//!  2..4   MSN (16): message sequence number
//! ```

use core::fmt;

use super::{Result, be, check_len};

/// Length of the METH.
pub const METH_LEN: usize = 4;

mod field {
    pub const RQMSN: usize = 0;
    pub const MSN: usize = 2;
}

/// A read/write view of a METH.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MethPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> MethPacket<T> {
    /// Wrap without checking; accessors panic on a short buffer.
    pub const fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }
    /// Wrap after checking the length.
    pub fn new_checked(buffer: T) -> Result<Self> {
        check_len(buffer.as_ref(), METH_LEN, "METH")?;
        Ok(Self { buffer })
    }
    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }
    /// Receive-queue MSN (brief §2.6): one per Write-with-Immediate message.
    pub fn rqmsn(&self) -> u16 {
        be::u16_at(self.buffer.as_ref(), field::RQMSN)
    }
    /// Message sequence number (brief §2.6).
    pub fn msn(&self) -> u16 {
        be::u16_at(self.buffer.as_ref(), field::MSN)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> MethPacket<T> {
    /// Set the RQMSN.
    pub fn set_rqmsn(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::RQMSN, v);
    }
    /// Set the MSN.
    pub fn set_msn(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::MSN, v);
    }
}

/// A parsed METH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct MethRepr {
    pub rqmsn: u16,
    pub msn: u16,
}

impl MethRepr {
    /// Parse a checked view.
    pub fn parse<T: AsRef<[u8]>>(p: &MethPacket<T>) -> Result<Self> {
        Ok(Self {
            rqmsn: p.rqmsn(),
            msn: p.msn(),
        })
    }
    /// Bytes [`MethRepr::emit`] writes.
    pub const fn buffer_len(&self) -> usize {
        METH_LEN
    }
    /// Write the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut MethPacket<T>) {
        p.set_rqmsn(self.rqmsn);
        p.set_msn(self.msn);
    }
}

impl fmt::Display for MethRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "METH msn {} rqmsn {}", self.msn, self.rqmsn)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// RQMSN 0x0102, MSN 0xfffe, typed from the layout.
    const VECTOR: [u8; 4] = [0x01, 0x02, 0xff, 0xfe];

    #[test]
    fn parses_hand_written_vector() {
        let r = MethRepr::parse(&MethPacket::new_checked(&VECTOR[..]).unwrap()).unwrap();
        assert_eq!(
            r,
            MethRepr {
                rqmsn: 0x0102,
                msn: 0xfffe
            }
        );
        let mut out = [0u8; 4];
        r.emit(&mut MethPacket::new_unchecked(&mut out[..]));
        assert_eq!(out, VECTOR);
        assert_eq!(r.to_string(), "METH msn 65534 rqmsn 258");
        assert!(MethPacket::new_checked(&VECTOR[..3]).is_err());
    }

    proptest! {
        #[test]
        fn roundtrip(rqmsn in any::<u16>(), msn in any::<u16>()) {
            let r = MethRepr { rqmsn, msn };
            let mut buf = [0u8; METH_LEN];
            r.emit(&mut MethPacket::new_unchecked(&mut buf[..]));
            prop_assert_eq!(MethRepr::parse(&MethPacket::new_checked(&buf[..]).unwrap()).unwrap(), r);
        }

        #[test]
        fn never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..8)) {
            if let Ok(p) = MethPacket::new_checked(&bytes[..]) {
                let _ = MethRepr::parse(&p).unwrap().to_string();
            }
        }
    }
}
