//! Requester timestamp header, 4 bytes, optional, present when the BTH `ts` flag is set
//! (MRC 1.0 §5.5, brief §2.7).
//!
//! ```text
//!  0..2   tx_timestamp (16), in 128 ns units (wraps every ~8.4 ms)
//!  2      TSR (1) | reserved (7)
//!  3      reserved (4) | format_type (4, default 1)
//! ```

use core::fmt;

use super::{Result, be, check_len};

/// Length of the TSETH.
pub const TSETH_LEN: usize = 4;

/// Nanoseconds per unit of a 16-bit MRC timestamp (brief §2.7, \[T-ns3\]).
pub const TIMESTAMP_UNIT_NS: u64 = 128;

/// The 16-bit wire timestamp of a time in nanoseconds.
pub const fn timestamp_from_nanos(ns: u64) -> u16 {
    (ns / TIMESTAMP_UNIT_NS) as u16
}

/// Nanoseconds from a reflected timestamp `sent` to `now_ts`, both 16-bit wire values,
/// modulo the 2^16 wrap (valid for RTTs under ~8.4 ms).
pub const fn timestamp_elapsed_nanos(sent: u16, now_ts: u16) -> u64 {
    now_ts.wrapping_sub(sent) as u64 * TIMESTAMP_UNIT_NS
}

mod field {
    pub const TX_TIMESTAMP: usize = 0;
    /// TSR (1) | reserved (11) | format_type (4).
    pub const FLAGS: usize = 2;
}

const TSR: u16 = 0x8000;
const FORMAT: u16 = 0x000f;

/// A read/write view of a TSETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TsethPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> TsethPacket<T> {
    /// Wrap without checking; accessors panic on a short buffer.
    pub const fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }
    /// Wrap after checking the length.
    pub fn new_checked(buffer: T) -> Result<Self> {
        check_len(buffer.as_ref(), TSETH_LEN, "TSETH")?;
        Ok(Self { buffer })
    }
    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }
    /// Transmit timestamp, 128 ns units.
    pub fn tx_timestamp(&self) -> u16 {
        be::u16_at(self.buffer.as_ref(), field::TX_TIMESTAMP)
    }
    /// TSR: an implementation-defined resolution is in use \[T-ns3\].
    pub fn tsr(&self) -> bool {
        be::u16_at(self.buffer.as_ref(), field::FLAGS) & TSR != 0
    }
    /// Timestamp format type (4 bits; 1 by default).
    pub fn format_type(&self) -> u8 {
        (be::u16_at(self.buffer.as_ref(), field::FLAGS) & FORMAT) as u8
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> TsethPacket<T> {
    /// Set the transmit timestamp.
    pub fn set_tx_timestamp(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::TX_TIMESTAMP, v);
    }
    /// Set TSR and the format type; the reserved bits become zero.
    pub fn set_flags(&mut self, tsr: bool, format_type: u8) {
        let w = if tsr { TSR } else { 0 } | (u16::from(format_type) & FORMAT);
        be::set_u16(self.buffer.as_mut(), field::FLAGS, w);
    }
}

/// A parsed TSETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TsethRepr {
    /// 128 ns units.
    pub tx_timestamp: u16,
    pub tsr: bool,
    /// 4 bits.
    pub format_type: u8,
}

impl TsethRepr {
    /// The default format type (brief §2.7).
    pub const DEFAULT_FORMAT: u8 = 1;

    /// A timestamp of `now_ns` in the default format.
    pub const fn at_nanos(now_ns: u64) -> Self {
        Self {
            tx_timestamp: timestamp_from_nanos(now_ns),
            tsr: false,
            format_type: Self::DEFAULT_FORMAT,
        }
    }
    /// Parse a checked view.
    pub fn parse<T: AsRef<[u8]>>(p: &TsethPacket<T>) -> Result<Self> {
        Ok(Self {
            tx_timestamp: p.tx_timestamp(),
            tsr: p.tsr(),
            format_type: p.format_type(),
        })
    }
    /// Bytes [`TsethRepr::emit`] writes.
    pub const fn buffer_len(&self) -> usize {
        TSETH_LEN
    }
    /// Write the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut TsethPacket<T>) {
        p.set_tx_timestamp(self.tx_timestamp);
        p.set_flags(self.tsr, self.format_type);
    }
}

impl fmt::Display for TsethRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "TSETH ts {} ({} ns) fmt {}{}",
            self.tx_timestamp,
            u64::from(self.tx_timestamp) * TIMESTAMP_UNIT_NS,
            self.format_type,
            if self.tsr { " tsr" } else { "" }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// tx_timestamp 0x1234, TSR=1, format 1, typed from the layout.
    const VECTOR: [u8; 4] = [0x12, 0x34, 0x80, 0x01];

    #[test]
    fn parses_hand_written_vector() {
        let r = TsethRepr::parse(&TsethPacket::new_checked(&VECTOR[..]).unwrap()).unwrap();
        assert_eq!(
            r,
            TsethRepr {
                tx_timestamp: 0x1234,
                tsr: true,
                format_type: 1
            }
        );
        let mut out = [0u8; 4];
        r.emit(&mut TsethPacket::new_unchecked(&mut out[..]));
        assert_eq!(out, VECTOR);
        assert_eq!(r.to_string(), "TSETH ts 4660 (596480 ns) fmt 1 tsr");
        assert!(TsethPacket::new_checked(&VECTOR[..2]).is_err());
    }

    #[test]
    fn timestamps_wrap_in_128ns_units() {
        assert_eq!(timestamp_from_nanos(1280), 10);
        assert_eq!(TsethRepr::at_nanos(65_536 * 128 + 256).tx_timestamp, 2);
        assert_eq!(timestamp_elapsed_nanos(0xfffe, 3), 5 * 128);
    }

    proptest! {
        #[test]
        fn roundtrip(ts in any::<u16>(), tsr in any::<bool>(), format_type in 0u8..16) {
            let r = TsethRepr { tx_timestamp: ts, tsr, format_type };
            let mut buf = [0u8; TSETH_LEN];
            r.emit(&mut TsethPacket::new_unchecked(&mut buf[..]));
            prop_assert_eq!(TsethRepr::parse(&TsethPacket::new_checked(&buf[..]).unwrap()).unwrap(), r);
        }

        #[test]
        fn never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..8)) {
            if let Ok(p) = TsethPacket::new_checked(&bytes[..]) {
                let _ = TsethRepr::parse(&p).unwrap().to_string();
            }
        }
    }
}
