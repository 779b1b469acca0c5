//! CC_STATE, 8 bytes, after the SETH of every SACK (MRC 1.0 §5.8 / §8.4, brief §2.9)
//! \[T-py\]\[T-ns3\].
//!
//! ```text
//!  0..2   tx_timestamp (16): the triggering packet's TSETH timestamp, reflected
//!  2..4   reserved (1) | ooo_count (15): packets held out of order at the responder
//!  4      restore_cwnd (1) | rcv_cwnd_pen (7): receiver window penalty
//!  5..8   rcvd_bytes (24): wrapping count of received bytes in 256-byte units
//! ```

use core::fmt;

use super::{Result, be, check_len};

/// Length of the CC_STATE.
pub const CC_STATE_LEN: usize = 8;

/// Bytes per unit of `rcvd_bytes` (brief §2.9).
pub const RCVD_BYTES_UNIT: u64 = 256;

mod field {
    pub const TX_TIMESTAMP: usize = 0;
    /// reserved (1) | ooo_count (15).
    pub const OOO: usize = 2;
    /// restore_cwnd (1) | rcv_cwnd_pen (7).
    pub const PEN: usize = 4;
    pub const RCVD_BYTES: usize = 5;
}

/// A read/write view of a CC_STATE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CcStatePacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> CcStatePacket<T> {
    /// Wrap without checking; accessors panic on a short buffer.
    pub const fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }
    /// Wrap after checking the length.
    pub fn new_checked(buffer: T) -> Result<Self> {
        check_len(buffer.as_ref(), CC_STATE_LEN, "CC_STATE")?;
        Ok(Self { buffer })
    }
    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }
    /// Reflected transmit timestamp (128 ns units).
    pub fn tx_timestamp(&self) -> u16 {
        be::u16_at(self.buffer.as_ref(), field::TX_TIMESTAMP)
    }
    /// Out-of-order packet count (15 bits).
    pub fn ooo_count(&self) -> u16 {
        be::u16_at(self.buffer.as_ref(), field::OOO) & 0x7fff
    }
    /// The responder asks the sender to restore its window.
    pub fn restore_cwnd(&self) -> bool {
        self.buffer.as_ref()[field::PEN] & 0x80 != 0
    }
    /// Receiver window penalty (7 bits).
    pub fn rcv_cwnd_pen(&self) -> u8 {
        self.buffer.as_ref()[field::PEN] & 0x7f
    }
    /// Wrapping received-bytes counter, 256-byte units (24 bits).
    pub fn rcvd_bytes(&self) -> u32 {
        be::u24_at(self.buffer.as_ref(), field::RCVD_BYTES)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> CcStatePacket<T> {
    /// Set the reflected timestamp.
    pub fn set_tx_timestamp(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::TX_TIMESTAMP, v);
    }
    /// Set the out-of-order count (15 bits; the reserved bit becomes zero).
    pub fn set_ooo_count(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::OOO, v & 0x7fff);
    }
    /// Set restore_cwnd and the penalty (7 bits).
    pub fn set_pen(&mut self, restore_cwnd: bool, rcv_cwnd_pen: u8) {
        self.buffer.as_mut()[field::PEN] =
            if restore_cwnd { 0x80 } else { 0 } | (rcv_cwnd_pen & 0x7f);
    }
    /// Set the received-bytes counter (low 24 bits).
    pub fn set_rcvd_bytes(&mut self, v: u32) {
        be::set_u24(self.buffer.as_mut(), field::RCVD_BYTES, v);
    }
}

/// A parsed CC_STATE.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct CcStateRepr {
    pub tx_timestamp: u16,
    /// 15 bits.
    pub ooo_count: u16,
    pub restore_cwnd: bool,
    /// 7 bits.
    pub rcv_cwnd_pen: u8,
    /// 24 bits, units of [`RCVD_BYTES_UNIT`].
    pub rcvd_bytes: u32,
}

impl CcStateRepr {
    /// Bytes received between two successive counters `earlier` and `self` (mod 2^24 units).
    pub const fn rcvd_bytes_since(&self, earlier: u32) -> u64 {
        (self.rcvd_bytes.wrapping_sub(earlier) & 0x00ff_ffff) as u64 * RCVD_BYTES_UNIT
    }
    /// Parse a checked view.
    pub fn parse<T: AsRef<[u8]>>(p: &CcStatePacket<T>) -> Result<Self> {
        Ok(Self {
            tx_timestamp: p.tx_timestamp(),
            ooo_count: p.ooo_count(),
            restore_cwnd: p.restore_cwnd(),
            rcv_cwnd_pen: p.rcv_cwnd_pen(),
            rcvd_bytes: p.rcvd_bytes(),
        })
    }
    /// Bytes [`CcStateRepr::emit`] writes.
    pub const fn buffer_len(&self) -> usize {
        CC_STATE_LEN
    }
    /// Write the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut CcStatePacket<T>) {
        p.set_tx_timestamp(self.tx_timestamp);
        p.set_ooo_count(self.ooo_count);
        p.set_pen(self.restore_cwnd, self.rcv_cwnd_pen);
        p.set_rcvd_bytes(self.rcvd_bytes);
    }
}

impl fmt::Display for CcStateRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "CC_STATE ts {} ooo {} pen {}{} rcvd {}x256B",
            self.tx_timestamp,
            self.ooo_count,
            self.rcv_cwnd_pen,
            if self.restore_cwnd { " restore" } else { "" },
            self.rcvd_bytes
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Typed from the layout: ts 0xbeef, ooo 0x0102, restore=1 pen 5, rcvd 0x0a0b0c.
    const VECTOR: [u8; 8] = [0xbe, 0xef, 0x01, 0x02, 0x85, 0x0a, 0x0b, 0x0c];

    #[test]
    fn parses_hand_written_vector() {
        let r = CcStateRepr::parse(&CcStatePacket::new_checked(&VECTOR[..]).unwrap()).unwrap();
        assert_eq!(
            r,
            CcStateRepr {
                tx_timestamp: 0xbeef,
                ooo_count: 0x102,
                restore_cwnd: true,
                rcv_cwnd_pen: 5,
                rcvd_bytes: 0x0a0b0c
            }
        );
        let mut out = [0u8; 8];
        r.emit(&mut CcStatePacket::new_unchecked(&mut out[..]));
        assert_eq!(out, VECTOR);
        assert_eq!(
            r.to_string(),
            "CC_STATE ts 48879 ooo 258 pen 5 restore rcvd 658188x256B"
        );
        assert!(CcStatePacket::new_checked(&VECTOR[..7]).is_err());
    }

    #[test]
    fn rcvd_bytes_counter_wraps() {
        let r = CcStateRepr {
            rcvd_bytes: 1,
            ..CcStateRepr::default()
        };
        assert_eq!(r.rcvd_bytes_since(0x00ff_ffff), 2 * 256);
    }

    proptest! {
        #[test]
        fn roundtrip(ts in any::<u16>(), ooo in 0u16..0x8000, restore in any::<bool>(), pen in 0u8..128, rcvd in 0u32..0x0100_0000) {
            let r = CcStateRepr { tx_timestamp: ts, ooo_count: ooo, restore_cwnd: restore, rcv_cwnd_pen: pen, rcvd_bytes: rcvd };
            let mut buf = [0u8; CC_STATE_LEN];
            r.emit(&mut CcStatePacket::new_unchecked(&mut buf[..]));
            prop_assert_eq!(CcStateRepr::parse(&CcStatePacket::new_checked(&buf[..]).unwrap()).unwrap(), r);
        }

        #[test]
        fn never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..12)) {
            if let Ok(p) = CcStatePacket::new_checked(&bytes[..]) {
                let _ = CcStateRepr::parse(&p).unwrap().to_string();
            }
        }
    }
}
