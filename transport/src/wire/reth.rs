//! RDMA Extended Transport Header, 16 bytes, in every Write packet (IBTA vol. 1 §9.3.3;
//! MRC 1.0 §5.6, brief §2.8).
//!
//! ```text
//!  0..8    VA (64): virtual address of this packet's payload
//!  8..12   R_Key (32)
//!  12..16  DMA length (32): length of the whole Write operation
//! ```

use core::fmt;

use super::{Result, be, check_len};

/// Length of the RETH.
pub const RETH_LEN: usize = 16;

mod field {
    pub const VA: usize = 0;
    pub const RKEY: usize = 8;
    pub const DMA_LEN: usize = 12;
}

/// A read/write view of a RETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RethPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> RethPacket<T> {
    /// Wrap without checking; accessors panic on a short buffer.
    pub const fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }
    /// Wrap after checking the length.
    pub fn new_checked(buffer: T) -> Result<Self> {
        check_len(buffer.as_ref(), RETH_LEN, "RETH")?;
        Ok(Self { buffer })
    }
    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }
    /// Virtual address where this packet's payload goes.
    pub fn va(&self) -> u64 {
        be::u64_at(self.buffer.as_ref(), field::VA)
    }
    /// Remote key of the target memory region.
    pub fn rkey(&self) -> u32 {
        be::u32_at(self.buffer.as_ref(), field::RKEY)
    }
    /// DMA length of the whole Write.
    pub fn dma_len(&self) -> u32 {
        be::u32_at(self.buffer.as_ref(), field::DMA_LEN)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> RethPacket<T> {
    /// Set the virtual address.
    pub fn set_va(&mut self, v: u64) {
        be::set_u64(self.buffer.as_mut(), field::VA, v);
    }
    /// Set the R_Key.
    pub fn set_rkey(&mut self, v: u32) {
        be::set_u32(self.buffer.as_mut(), field::RKEY, v);
    }
    /// Set the DMA length.
    pub fn set_dma_len(&mut self, v: u32) {
        be::set_u32(self.buffer.as_mut(), field::DMA_LEN, v);
    }
}

/// A parsed RETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct RethRepr {
    pub va: u64,
    pub rkey: u32,
    pub dma_len: u32,
}

impl RethRepr {
    /// Parse a checked view.
    pub fn parse<T: AsRef<[u8]>>(p: &RethPacket<T>) -> Result<Self> {
        Ok(Self {
            va: p.va(),
            rkey: p.rkey(),
            dma_len: p.dma_len(),
        })
    }
    /// Bytes [`RethRepr::emit`] writes.
    pub const fn buffer_len(&self) -> usize {
        RETH_LEN
    }
    /// Write the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut RethPacket<T>) {
        p.set_va(self.va);
        p.set_rkey(self.rkey);
        p.set_dma_len(self.dma_len);
    }
}

impl fmt::Display for RethRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "RETH va 0x{:x} rkey 0x{:08x} dmalen {}",
            self.va, self.rkey, self.dma_len
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// VA 0x0000_7f00_dead_beef, R_Key 0x11223344, DMA length 65536, typed from the layout.
    const VECTOR: [u8; 16] = [
        0x00, 0x00, 0x7f, 0x00, 0xde, 0xad, 0xbe, 0xef, 0x11, 0x22, 0x33, 0x44, 0x00, 0x01, 0x00,
        0x00,
    ];

    #[test]
    fn parses_hand_written_vector() {
        let r = RethRepr::parse(&RethPacket::new_checked(&VECTOR[..]).unwrap()).unwrap();
        assert_eq!(r.va, 0x7f00_dead_beef);
        assert_eq!(r.rkey, 0x1122_3344);
        assert_eq!(r.dma_len, 65536);
        let mut out = [0u8; 16];
        r.emit(&mut RethPacket::new_unchecked(&mut out[..]));
        assert_eq!(out, VECTOR);
        assert_eq!(
            r.to_string(),
            "RETH va 0x7f00deadbeef rkey 0x11223344 dmalen 65536"
        );
        assert!(RethPacket::new_checked(&VECTOR[..15]).is_err());
    }

    proptest! {
        #[test]
        fn roundtrip(va in any::<u64>(), rkey in any::<u32>(), dma_len in any::<u32>()) {
            let r = RethRepr { va, rkey, dma_len };
            let mut buf = [0u8; RETH_LEN];
            r.emit(&mut RethPacket::new_unchecked(&mut buf[..]));
            prop_assert_eq!(RethRepr::parse(&RethPacket::new_checked(&buf[..]).unwrap()).unwrap(), r);
        }

        #[test]
        fn never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..32)) {
            if let Ok(p) = RethPacket::new_checked(&bytes[..]) {
                let _ = RethRepr::parse(&p).unwrap().to_string();
            }
        }
    }
}
