//! BTH opcodes MRC uses, from the IBTA manufacturer-specific range (MRC 1.0 §5.2, brief §2.3),
//! and the headers that follow each.

use core::fmt;

/// A header that can follow the BTH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Header {
    /// Message extended transport header (brief §2.6).
    Meth,
    /// Requester timestamp, present when the BTH `ts` flag is set (brief §2.7).
    Tseth,
    /// RDMA extended transport header (brief §2.8).
    Reth,
    /// Immediate data (brief §2.3).
    ImmDt,
    /// Transport ACK extended header (brief §2.13).
    Aeth,
    /// Reliability SACK header (brief §2.9).
    Seth,
    /// Congestion-control state carried after the SETH (brief §2.9).
    CcState,
    /// Reliability NACK header (brief §2.10).
    Neth,
    /// Reliability probe header (brief §2.11).
    Peth,
    /// Endpoint request header (brief §2.12).
    Erth,
    /// Endpoint response header (brief §2.12).
    Eeth,
}

/// The BTH opcode (brief §2.3). Codes outside MRC's set are kept in `Unknown`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Opcode {
    /// 0xC6 RDMA Write First.
    WriteFirst,
    /// 0xC7 RDMA Write Middle.
    WriteMiddle,
    /// 0xC8 RDMA Write Last.
    WriteLast,
    /// 0xC9 RDMA Write Last with Immediate.
    WriteLastImm,
    /// 0xCA RDMA Write Only.
    WriteOnly,
    /// 0xCB RDMA Write Only with Immediate.
    WriteOnlyImm,
    /// 0xD1 Transport ACK (semantic, message level).
    Ack,
    /// 0xD8 Endpoint request (EV probe, port status update), to QP 0x2.
    EndpointRequest,
    /// 0xD9 Endpoint response.
    EndpointResponse,
    /// 0xDC Reliability SACK.
    Sack,
    /// 0xDD Reliability NACK.
    Nack,
    /// 0xDE Reliability probe request.
    Probe,
    /// Any other code.
    Unknown(u8),
}

use Header::{Aeth, CcState, Eeth, Erth, ImmDt, Meth, Neth, Peth, Reth, Seth, Tseth};

impl Opcode {
    /// The RDMA Write opcodes, in code order (brief §2.3).
    pub const WRITES: [Opcode; 6] = [
        Self::WriteFirst,
        Self::WriteMiddle,
        Self::WriteLast,
        Self::WriteLastImm,
        Self::WriteOnly,
        Self::WriteOnlyImm,
    ];

    /// Decode a code.
    pub const fn from_u8(code: u8) -> Self {
        match code {
            0xC6 => Self::WriteFirst,
            0xC7 => Self::WriteMiddle,
            0xC8 => Self::WriteLast,
            0xC9 => Self::WriteLastImm,
            0xCA => Self::WriteOnly,
            0xCB => Self::WriteOnlyImm,
            0xD1 => Self::Ack,
            0xD8 => Self::EndpointRequest,
            0xD9 => Self::EndpointResponse,
            0xDC => Self::Sack,
            0xDD => Self::Nack,
            0xDE => Self::Probe,
            other => Self::Unknown(other),
        }
    }

    /// The wire code.
    pub const fn to_u8(self) -> u8 {
        match self {
            Self::WriteFirst => 0xC6,
            Self::WriteMiddle => 0xC7,
            Self::WriteLast => 0xC8,
            Self::WriteLastImm => 0xC9,
            Self::WriteOnly => 0xCA,
            Self::WriteOnlyImm => 0xCB,
            Self::Ack => 0xD1,
            Self::EndpointRequest => 0xD8,
            Self::EndpointResponse => 0xD9,
            Self::Sack => 0xDC,
            Self::Nack => 0xDD,
            Self::Probe => 0xDE,
            Self::Unknown(code) => code,
        }
    }

    /// An RDMA Write (request packet carrying payload).
    pub const fn is_write(self) -> bool {
        matches!(
            self,
            Self::WriteFirst
                | Self::WriteMiddle
                | Self::WriteLast
                | Self::WriteLastImm
                | Self::WriteOnly
                | Self::WriteOnlyImm
        )
    }

    /// A Write that carries immediate data (ImmDt after RETH).
    pub const fn has_immediate(self) -> bool {
        matches!(self, Self::WriteLastImm | Self::WriteOnlyImm)
    }

    /// The last packet of a message (Last or Only, with or without immediate).
    pub const fn ends_message(self) -> bool {
        matches!(
            self,
            Self::WriteLast | Self::WriteLastImm | Self::WriteOnly | Self::WriteOnlyImm
        )
    }

    /// The first packet of a message (First or Only).
    pub const fn starts_message(self) -> bool {
        matches!(
            self,
            Self::WriteFirst | Self::WriteOnly | Self::WriteOnlyImm
        )
    }

    /// One of MRC's opcodes.
    pub const fn is_known(self) -> bool {
        !matches!(self, Self::Unknown(_))
    }

    /// The headers that follow the BTH, in order (brief §2.3). The TSETH of a Write is listed
    /// but present only when the BTH `ts` flag is set. Empty for unknown opcodes.
    pub const fn headers(self) -> &'static [Header] {
        match self {
            Self::WriteFirst | Self::WriteMiddle | Self::WriteLast | Self::WriteOnly => {
                &[Meth, Tseth, Reth]
            }
            Self::WriteLastImm | Self::WriteOnlyImm => &[Meth, Tseth, Reth, ImmDt],
            Self::Ack => &[Aeth],
            Self::EndpointRequest => &[Erth],
            Self::EndpointResponse => &[Eeth],
            Self::Sack => &[Seth, CcState],
            Self::Nack => &[Neth],
            Self::Probe => &[Peth],
            Self::Unknown(_) => &[],
        }
    }

    /// Short upper-case name, as tcpdump prints it.
    pub const fn name(self) -> &'static str {
        match self {
            Self::WriteFirst => "WRITE_FIRST",
            Self::WriteMiddle => "WRITE_MIDDLE",
            Self::WriteLast => "WRITE_LAST",
            Self::WriteLastImm => "WRITE_LAST_IMM",
            Self::WriteOnly => "WRITE_ONLY",
            Self::WriteOnlyImm => "WRITE_ONLY_IMM",
            Self::Ack => "ACK",
            Self::EndpointRequest => "EP_REQ",
            Self::EndpointResponse => "EP_RESP",
            Self::Sack => "SACK",
            Self::Nack => "NACK",
            Self::Probe => "PROBE",
            Self::Unknown(_) => "UNKNOWN",
        }
    }
}

impl From<u8> for Opcode {
    fn from(code: u8) -> Self {
        Self::from_u8(code)
    }
}

impl From<Opcode> for u8 {
    fn from(op: Opcode) -> Self {
        op.to_u8()
    }
}

impl fmt::Display for Opcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unknown(code) => write!(f, "UNKNOWN(0x{code:02x})"),
            known => f.write_str(known.name()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_match_the_brief_table() {
        let table = [
            (0xC6, Opcode::WriteFirst),
            (0xC7, Opcode::WriteMiddle),
            (0xC8, Opcode::WriteLast),
            (0xC9, Opcode::WriteLastImm),
            (0xCA, Opcode::WriteOnly),
            (0xCB, Opcode::WriteOnlyImm),
            (0xD1, Opcode::Ack),
            (0xD8, Opcode::EndpointRequest),
            (0xD9, Opcode::EndpointResponse),
            (0xDC, Opcode::Sack),
            (0xDD, Opcode::Nack),
            (0xDE, Opcode::Probe),
        ];
        for (code, op) in table {
            assert_eq!(Opcode::from_u8(code), op);
            assert_eq!(op.to_u8(), code);
            assert!(op.is_known());
        }
        assert_eq!(Opcode::from_u8(0x0A), Opcode::Unknown(0x0A));
    }

    #[test]
    fn every_code_round_trips() {
        for code in 0..=255u8 {
            assert_eq!(Opcode::from_u8(code).to_u8(), code);
        }
    }

    #[test]
    fn header_stacks() {
        assert_eq!(Opcode::WriteMiddle.headers(), &[Meth, Tseth, Reth]);
        assert_eq!(Opcode::WriteOnlyImm.headers(), &[Meth, Tseth, Reth, ImmDt]);
        assert_eq!(Opcode::Sack.headers(), &[Seth, CcState]);
        assert_eq!(Opcode::Nack.headers(), &[Neth]);
        assert!(Opcode::Unknown(3).headers().is_empty());
        assert!(Opcode::WriteLastImm.has_immediate() && Opcode::WriteLastImm.ends_message());
        assert!(!Opcode::Sack.is_write());
        assert_eq!(Opcode::Unknown(0x11).to_string(), "UNKNOWN(0x11)");
    }
}
