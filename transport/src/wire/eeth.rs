//! Endpoint response header, 36 bytes, of opcode 0xD9 (MRC 1.0 §7.4.7–§7.4.8, brief §2.12)
//! \[T-py\]. Always returns on the control traffic class.
//!
//! ```text
//!  0       op (2) | reserved (6)
//!  1..4    reserved (24)
//!  4..8    port_status_mask (32): the responder's ports that are up
//!  8..10   tx_timestamp (16): the request's timestamp, reflected
//!  10..12  TSR (1) | reserved (11) | format_type (4)
//!  12..16  service_time_ns (32): time the responder held the request
//!  16..36  reserved (160)
//! ```
//!
//! The transcriptions give "op + reflected timestamp + reserved words" and 36 bytes; the mask
//! and the service time (the API's `adj_svc_time` needs it) are our layout \[I\]. The operation
//! and the mask are the common fields of `ext` (shared with the ERTH); bytes 8..12 are the
//! TSETH layout (viewed as a [`TsethPacket`]).

use core::fmt;

use super::erth::EndpointOp;
use super::ext::ExtPrefix;
use super::tseth::TsethPacket;
use super::{Result, be, check_len};

/// Length of the EETH.
pub const EETH_LEN: usize = 36;

mod field {
    use core::ops::Range;
    pub const TIMESTAMP: Range<usize> = 8..12;
    pub const SERVICE_TIME: usize = 12;
    pub const RESERVED_TAIL: Range<usize> = 16..36;
}

/// A read/write view of an EETH. The operation and the port status mask are the common fields
/// of `ext::ExtPrefix`; the view has the EETH's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EethPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> EethPacket<T> {
    /// Wrap without checking; accessors panic on a short buffer.
    pub const fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }
    /// Wrap after checking the length.
    pub fn new_checked(buffer: T) -> Result<Self> {
        check_len(buffer.as_ref(), EETH_LEN, "EETH")?;
        Ok(Self { buffer })
    }
    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }
    /// The reflected request timestamp, TSR and format type (the TSETH layout).
    pub fn timestamp(&self) -> TsethPacket<&[u8]> {
        TsethPacket::new_unchecked(&self.buffer.as_ref()[field::TIMESTAMP])
    }
    /// Nanoseconds the responder held the request.
    pub fn service_time_ns(&self) -> u32 {
        be::u32_at(self.buffer.as_ref(), field::SERVICE_TIME)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> EethPacket<T> {
    /// The timestamp block, to write.
    pub fn timestamp_mut(&mut self) -> TsethPacket<&mut [u8]> {
        TsethPacket::new_unchecked(&mut self.buffer.as_mut()[field::TIMESTAMP])
    }
    /// Zero the reserved bytes 16..36.
    pub fn clear_reserved(&mut self) {
        self.buffer.as_mut()[field::RESERVED_TAIL].fill(0);
    }
    /// Set the service time.
    pub fn set_service_time_ns(&mut self, v: u32) {
        be::set_u32(self.buffer.as_mut(), field::SERVICE_TIME, v);
    }
}

/// A parsed EETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EethRepr {
    pub op: EndpointOp,
    pub port_status_mask: u32,
    pub tx_timestamp: u16,
    pub tsr: bool,
    /// 4 bits.
    pub format_type: u8,
    pub service_time_ns: u32,
}

impl EethRepr {
    /// Parse a checked view.
    pub fn parse<T: AsRef<[u8]>>(p: &EethPacket<T>) -> Result<Self> {
        let c = ExtPrefix::new_unchecked(p.buffer.as_ref());
        let ts = p.timestamp();
        Ok(Self {
            op: EndpointOp::from_bits(c.op_bits()),
            port_status_mask: c.port_status_mask(),
            tx_timestamp: ts.tx_timestamp(),
            tsr: ts.tsr(),
            format_type: ts.format_type(),
            service_time_ns: p.service_time_ns(),
        })
    }
    /// Bytes [`EethRepr::emit`] writes.
    pub const fn buffer_len(&self) -> usize {
        EETH_LEN
    }
    /// Write the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut EethPacket<T>) {
        p.clear_reserved();
        let mut c = ExtPrefix::new_unchecked(p.buffer.as_mut());
        c.set_op_bits(self.op.bits());
        c.set_port_status_mask(self.port_status_mask);
        let mut ts = p.timestamp_mut();
        ts.set_tx_timestamp(self.tx_timestamp);
        ts.set_flags(self.tsr, self.format_type);
        p.set_service_time_ns(self.service_time_ns);
    }
}

impl fmt::Display for EethRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "EETH {} ports 0x{:08x} ts {} svc {} ns",
            self.op, self.port_status_mask, self.tx_timestamp, self.service_time_ns
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_hand_written_vector() {
        // Typed from the layout: PORT_STATUS_UPDATE, mask 0x0000000f, ts 0x0a0b, fmt 1,
        // service time 1000 ns (0x3e8), 20 reserved zero bytes.
        let mut v = [0u8; EETH_LEN];
        v[4..16].copy_from_slice(&[0, 0, 0, 0x0f, 0x0a, 0x0b, 0x00, 0x01, 0, 0, 0x03, 0xe8]);
        let r = EethRepr::parse(&EethPacket::new_checked(&v[..]).unwrap()).unwrap();
        assert_eq!(r.op, EndpointOp::PortStatusUpdate);
        assert_eq!(r.port_status_mask, 0xf);
        assert_eq!((r.tx_timestamp, r.tsr, r.format_type), (0x0a0b, false, 1));
        assert_eq!(r.service_time_ns, 1000);
        let mut out = [0x77u8; EETH_LEN];
        r.emit(&mut EethPacket::new_unchecked(&mut out[..]));
        assert_eq!(out, v);
        assert_eq!(
            r.to_string(),
            "EETH PORT_STATUS_UPDATE ports 0x0000000f ts 2571 svc 1000 ns"
        );
        assert!(EethPacket::new_checked(&v[..35]).is_err());
    }

    proptest! {
        #[test]
        fn roundtrip(op in 0u8..4, mask in any::<u32>(), ts in any::<u16>(), tsr in any::<bool>(), fmt in 0u8..16, svc in any::<u32>()) {
            let r = EethRepr { op: EndpointOp::from_bits(op), port_status_mask: mask, tx_timestamp: ts, tsr, format_type: fmt, service_time_ns: svc };
            let mut buf = [0u8; EETH_LEN];
            r.emit(&mut EethPacket::new_unchecked(&mut buf[..]));
            prop_assert_eq!(EethRepr::parse(&EethPacket::new_checked(&buf[..]).unwrap()).unwrap(), r);
        }

        #[test]
        fn never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..48)) {
            if let Ok(p) = EethPacket::new_checked(&bytes[..]) {
                let _ = EethRepr::parse(&p).unwrap().to_string();
            }
        }
    }
}
