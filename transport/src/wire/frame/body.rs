//! The headers after the BTH, chosen by the opcode (brief §2.3 table).

use core::fmt;

use super::super::aeth::{AETH_LEN, AethPacket, AethRepr};
use super::super::cc_state::{CC_STATE_LEN, CcStatePacket, CcStateRepr};
use super::super::eeth::{EETH_LEN, EethPacket, EethRepr};
use super::super::erth::{ERTH_LEN, ErthPacket, ErthRepr};
use super::super::immdt::{IMMDT_LEN, ImmDtPacket, ImmDtRepr};
use super::super::meth::{METH_LEN, MethPacket, MethRepr};
use super::super::neth::{NETH_LEN, NethPacket, NethRepr};
use super::super::opcode::Opcode;
use super::super::peth::{PETH_LEN, PethPacket, PethRepr};
use super::super::reth::{RETH_LEN, RethPacket, RethRepr};
use super::super::seth::{SETH_LEN, SethPacket, SethRepr};
use super::super::tseth::{TSETH_LEN, TsethPacket, TsethRepr};
use super::super::{Result, WireError};

/// The extension headers of an RDMA Write packet: `METH | [TSETH] | RETH | [ImmDt]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WriteHeaders {
    pub meth: MethRepr,
    /// Present when the BTH `ts` flag is set.
    pub tseth: Option<TsethRepr>,
    pub reth: RethRepr,
    /// Present exactly for the "with Immediate" opcodes.
    pub immdt: Option<ImmDtRepr>,
}

/// Everything between the BTH and the payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Body {
    /// 0xC6–0xCB.
    Write(WriteHeaders),
    /// 0xD1.
    Ack(AethRepr),
    /// 0xDC: SETH then CC_STATE.
    Sack { seth: SethRepr, cc: CcStateRepr },
    /// 0xDD.
    Nack(NethRepr),
    /// 0xDE.
    Probe(PethRepr),
    /// 0xD8.
    EndpointRequest(ErthRepr),
    /// 0xD9.
    EndpointResponse(EethRepr),
}

impl Body {
    /// Bytes the body takes on the wire.
    pub const fn buffer_len(&self) -> usize {
        match self {
            Self::Write(w) => {
                METH_LEN
                    + RETH_LEN
                    + if w.tseth.is_some() { TSETH_LEN } else { 0 }
                    + if w.immdt.is_some() { IMMDT_LEN } else { 0 }
            }
            Self::Ack(_) => AETH_LEN,
            Self::Sack { .. } => SETH_LEN + CC_STATE_LEN,
            Self::Nack(_) => NETH_LEN,
            Self::Probe(_) => PETH_LEN,
            Self::EndpointRequest(_) => ERTH_LEN,
            Self::EndpointResponse(_) => EETH_LEN,
        }
    }

    /// Whether this body is what `opcode` carries (a Write's ImmDt included).
    pub const fn matches(&self, opcode: Opcode) -> bool {
        match self {
            Self::Write(w) => opcode.is_write() && (w.immdt.is_some() == opcode.has_immediate()),
            Self::Ack(_) => matches!(opcode, Opcode::Ack),
            Self::Sack { .. } => matches!(opcode, Opcode::Sack),
            Self::Nack(_) => matches!(opcode, Opcode::Nack),
            Self::Probe(_) => matches!(opcode, Opcode::Probe),
            Self::EndpointRequest(_) => matches!(opcode, Opcode::EndpointRequest),
            Self::EndpointResponse(_) => matches!(opcode, Opcode::EndpointResponse),
        }
    }

    /// The TSETH-present flag this body needs in the BTH.
    pub const fn ts_flag(&self) -> bool {
        matches!(self, Self::Write(WriteHeaders { tseth: Some(_), .. }))
    }

    /// Parse the body `opcode` announces from the start of `buf`; `ts` is the BTH flag.
    /// Returns the body and its length.
    pub fn parse(opcode: Opcode, ts: bool, buf: &[u8]) -> Result<(Self, usize)> {
        if opcode.is_write()
            && let Some((w, len)) = write_fixed(opcode, ts, buf)
        {
            return Ok((Self::Write(w), len));
        }
        Self::parse_checked(opcode, ts, buf)
    }

    /// [`parse`](Self::parse) one checked view per header: every body, and the typed error
    /// of a short one.
    fn parse_checked(opcode: Opcode, ts: bool, buf: &[u8]) -> Result<(Self, usize)> {
        let body = match opcode {
            op if op.is_write() => {
                let meth = MethRepr::parse(&MethPacket::new_checked(buf)?)?;
                let mut at = METH_LEN;
                let tseth = if ts {
                    let t = TsethRepr::parse(&TsethPacket::new_checked(tail(buf, at))?)?;
                    at += TSETH_LEN;
                    Some(t)
                } else {
                    None
                };
                let reth = RethRepr::parse(&RethPacket::new_checked(tail(buf, at))?)?;
                at += RETH_LEN;
                let immdt = if op.has_immediate() {
                    Some(ImmDtRepr::parse(&ImmDtPacket::new_checked(tail(buf, at))?)?)
                } else {
                    None
                };
                Self::Write(WriteHeaders {
                    meth,
                    tseth,
                    reth,
                    immdt,
                })
            }
            Opcode::Ack => Self::Ack(AethRepr::parse(&AethPacket::new_checked(buf)?)?),
            Opcode::Sack => {
                let seth = SethRepr::parse(&SethPacket::new_checked(buf)?)?;
                let cc = CcStateRepr::parse(&CcStatePacket::new_checked(tail(buf, SETH_LEN))?)?;
                Self::Sack { seth, cc }
            }
            Opcode::Nack => Self::Nack(NethRepr::parse(&NethPacket::new_checked(buf)?)?),
            Opcode::Probe => Self::Probe(PethRepr::parse(&PethPacket::new_checked(buf)?)?),
            Opcode::EndpointRequest => {
                Self::EndpointRequest(ErthRepr::parse(&ErthPacket::new_checked(buf)?)?)
            }
            Opcode::EndpointResponse => {
                Self::EndpointResponse(EethRepr::parse(&EethPacket::new_checked(buf)?)?)
            }
            other => return Err(WireError::UnknownOpcode(other.to_u8())),
        };
        let len = body.buffer_len();
        Ok((body, len))
    }

    /// Write the body at the start of `buf`, which must hold [`Body::buffer_len`] bytes.
    pub fn emit(&self, buf: &mut [u8]) {
        // Each header's view over exactly its own bytes: one bounds check per header, none
        // per field (issue #13).
        match self {
            Self::Write(w) => {
                w.meth
                    .emit(&mut MethPacket::new_unchecked(&mut buf[..METH_LEN]));
                let mut at = METH_LEN;
                if let Some(t) = &w.tseth {
                    t.emit(&mut TsethPacket::new_unchecked(
                        &mut buf[at..at + TSETH_LEN],
                    ));
                    at += TSETH_LEN;
                }
                w.reth
                    .emit(&mut RethPacket::new_unchecked(&mut buf[at..at + RETH_LEN]));
                at += RETH_LEN;
                if let Some(i) = &w.immdt {
                    i.emit(&mut ImmDtPacket::new_unchecked(
                        &mut buf[at..at + IMMDT_LEN],
                    ));
                }
            }
            Self::Ack(a) => a.emit(&mut AethPacket::new_unchecked(&mut buf[..AETH_LEN])),
            Self::Sack { seth, cc } => {
                seth.emit(&mut SethPacket::new_unchecked(&mut buf[..SETH_LEN]));
                cc.emit(&mut CcStatePacket::new_unchecked(
                    &mut buf[SETH_LEN..SETH_LEN + CC_STATE_LEN],
                ));
            }
            Self::Nack(n) => n.emit(&mut NethPacket::new_unchecked(&mut buf[..NETH_LEN])),
            Self::Probe(p) => p.emit(&mut PethPacket::new_unchecked(&mut buf[..PETH_LEN])),
            Self::EndpointRequest(e) => {
                e.emit(&mut ErthPacket::new_unchecked(&mut buf[..ERTH_LEN]));
            }
            Self::EndpointResponse(e) => {
                e.emit(&mut EethPacket::new_unchecked(&mut buf[..EETH_LEN]));
            }
        }
    }
}

/// A Write's headers when all of them are in `buf`: one length check, then each header read
/// at its fixed offset (the receive fast path, issue #13). `None` (too short) leaves the
/// typed error to the checked parse.
#[inline]
pub(super) fn write_fixed(op: Opcode, ts: bool, buf: &[u8]) -> Option<(WriteHeaders, usize)> {
    let tseth_len = if ts { TSETH_LEN } else { 0 };
    let imm_len = if op.has_immediate() { IMMDT_LEN } else { 0 };
    let len = METH_LEN + tseth_len + RETH_LEN + imm_len;
    let b = buf.get(..len)?;
    let meth = MethRepr::parse(&MethPacket::new_unchecked(&b[..METH_LEN])).ok()?;
    let at = METH_LEN + tseth_len;
    let tseth = if ts {
        Some(TsethRepr::parse(&TsethPacket::new_unchecked(&b[METH_LEN..at])).ok()?)
    } else {
        None
    };
    let reth = RethRepr::parse(&RethPacket::new_unchecked(&b[at..at + RETH_LEN])).ok()?;
    let immdt = if op.has_immediate() {
        Some(ImmDtRepr::parse(&ImmDtPacket::new_unchecked(&b[at + RETH_LEN..])).ok()?)
    } else {
        None
    };
    let w = WriteHeaders {
        meth,
        tseth,
        reth,
        immdt,
    };
    Some((w, len))
}

/// `buf[at..]`, or an empty slice past the end (the next `new_checked` reports truncation).
fn tail(buf: &[u8], at: usize) -> &[u8] {
    buf.get(at..).unwrap_or(&[])
}

impl fmt::Display for Body {
    /// One line per header, tcpdump style.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Write(w) => {
                write!(f, "{}", w.meth)?;
                if let Some(t) = &w.tseth {
                    write!(f, "\n{t}")?;
                }
                write!(f, "\n{}", w.reth)?;
                if let Some(i) = &w.immdt {
                    write!(f, "\n{i}")?;
                }
                Ok(())
            }
            Self::Ack(a) => write!(f, "{a}"),
            Self::Sack { seth, cc } => write!(f, "{seth}\n{cc}"),
            Self::Nack(n) => write!(f, "{n}"),
            Self::Probe(p) => write!(f, "{p}"),
            Self::EndpointRequest(e) => write!(f, "{e}"),
            Self::EndpointResponse(e) => write!(f, "{e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #[test]
        fn fixed_offset_write_parse_matches_the_checked_one(
            code in 0xc6u8..=0xcb,
            ts in any::<bool>(),
            buf in proptest::collection::vec(any::<u8>(), 0..40),
        ) {
            let op = Opcode::from_u8(code);
            prop_assert_eq!(
                write_fixed(op, ts, &buf).map(|(w, n)| (Body::Write(w), n)),
                Body::parse_checked(op, ts, &buf).ok()
            );
        }
    }
}
