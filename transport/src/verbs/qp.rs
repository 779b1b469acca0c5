//! The QP state machine and its attributes (libibverbs `ibv_modify_qp` states, with the
//! attribute split of the OCP `mrc.h` API: brief §7.1).
//!
//! RESET → INIT (EV profile, CC profile, transport mode) → RTR (the peer: NIC address and plan
//! host, QPN, receive PSN, responder MPR and Write-with-Immediate limit) → RTS (send PSN,
//! timeout, retry counts, requester MPR and Write-with-Immediate limit). Any state may go to
//! ERROR or RESET. Dynamic MPR (brief §3.5, capability DYNAMIC_MPR) is enabled per direction
//! as the API does it: on the responder at RTR, on the requester at RTS; it takes effect only
//! when both ends of the connection enable it.

use core::fmt;
use core::net::Ipv6Addr;

use super::{CqHandle, PdHandle, VerbsError};
use crate::config::defaults;

/// A QP number (24 bits on the wire). QPNs handed out by an endpoint are never 0, 1 or 2:
/// QP 2 is the endpoint-operation address (brief §2.12).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Qpn(pub u32);

impl Qpn {
    /// The reserved destination of endpoint operations (brief §2.12).
    pub const ENDPOINT: Self = Self(2);
}

impl fmt::Display for Qpn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "qp{:#x}", self.0)
    }
}

/// QP states (libibverbs names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QpState {
    Reset,
    Init,
    /// Ready to receive.
    Rtr,
    /// Ready to send.
    Rts,
    Error,
}

/// What a QP is made of (libibverbs `ibv_qp_init_attr`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpInitAttr {
    pub pd: PdHandle,
    pub send_cq: CqHandle,
    pub recv_cq: CqHandle,
    pub cap: QpCap,
    /// Every send work request completes, whatever its `signaled` flag.
    pub sq_sig_all: bool,
}

/// Queue sizes of a QP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpCap {
    /// Outstanding send work requests.
    pub max_send_wr: u32,
    /// Posted receive work requests.
    pub max_recv_wr: u32,
    /// Gather entries per send work request.
    pub max_send_sge: u32,
}

impl Default for QpCap {
    fn default() -> Self {
        Self {
            max_send_wr: defaults::MAX_SEND_WR,
            max_recv_wr: defaults::MAX_RECV_WR,
            max_send_sge: defaults::MAX_SEND_SGE,
        }
    }
}

/// How a QP recovers losses and picks paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum TransportMode {
    /// MRC: per-packet spraying over the EV set, SACK/NACK selective retransmission.
    #[default]
    Mrc,
    /// The baseline MRC replaces, for experiments on the same fabric: one path per QP,
    /// go-back-N (the responder drops out-of-order packets and NAKs the expected PSN, the
    /// requester rewinds), congestion control from the CC profile (DCQCN-like in experiments).
    RoceLike,
}

/// Attributes of RESET → INIT.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct InitAttr {
    /// Index into `EndpointConfig::ev_profiles` (agreed out of band, as the API's profile ids).
    pub ev_profile: u16,
    /// Index into `EndpointConfig::cc_profiles`.
    pub cc_profile: u16,
    pub mode: TransportMode,
}

/// The peer NIC a QP talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RemoteNic {
    /// The NIC's own IPv6 address (the inner destination in SRv6 mode, the only one in ECMP).
    pub addr: Ipv6Addr,
    /// Its host id in the fabric plan (SRv6 mode: names the paths towards it).
    pub host: Option<u32>,
}

/// Attributes of INIT → RTR: what the responder side needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RtrAttr {
    pub remote: RemoteNic,
    /// The peer's QPN.
    pub dest_qpn: Qpn,
    /// First PSN expected from the peer.
    pub rq_psn: u32,
    /// Responder MPR: PSNs accepted beyond the cumulative ACK (a multiple of 64).
    pub mpr: u32,
    /// Responder bound on Write-with-Immediate messages awaiting completion.
    pub wimm_limit: u16,
    /// Dynamic MPR (brief §3.5): every SACK advertises the responder's current MPR (set at
    /// run time with `Endpoint::set_qp_mpr`, at most `mpr`; `mpr` itself until then) for a
    /// requester that enabled it too. Needs `mpr` within 128..=32640 (the SETH field's 8 bits
    /// of 128-PSN units). Off: SACKs carry MPR 0.
    pub dynamic_mpr: bool,
}

impl RtrAttr {
    /// RTR attributes towards `remote`'s QP `dest_qpn`, everything else at its default.
    pub const fn new(remote: RemoteNic, dest_qpn: Qpn, rq_psn: u32) -> Self {
        Self {
            remote,
            dest_qpn,
            rq_psn,
            mpr: defaults::MPR,
            wimm_limit: defaults::WIMM_LIMIT,
            dynamic_mpr: false,
        }
    }
}

/// Attributes of RTR → RTS: what the requester side needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RtsAttr {
    /// First PSN this QP sends.
    pub sq_psn: u32,
    /// QP retry timeout exponent: 1.024 µs × 2^timeout (brief §3.7), at most 24.
    pub timeout: u8,
    /// Retries at the fixed interval before backing off (at most 7).
    pub retry_linear: u8,
    /// Retries with exponential backoff after the linear ones (at most 25).
    pub retry_exp: u8,
    /// Requester MPR: PSNs in flight beyond the peer's cumulative ACK (≤ the peer's RTR MPR).
    pub mpr: u32,
    /// Requester bound on outstanding Write-with-Immediate messages.
    pub wimm_limit: u16,
    /// Dynamic MPR (brief §3.5): the window follows the MPR the peer's SACKs advertise
    /// (never above `mpr`), when the peer's responder enabled it too. Off: the advertisement
    /// is ignored and `mpr` is the window.
    pub dynamic_mpr: bool,
}

impl RtsAttr {
    /// RTS attributes starting at `sq_psn`, everything else at its default.
    pub const fn new(sq_psn: u32) -> Self {
        Self {
            sq_psn,
            timeout: defaults::TIMEOUT_EXPONENT,
            retry_linear: defaults::RETRY_LINEAR,
            retry_exp: defaults::RETRY_EXP,
            mpr: defaults::MPR,
            wimm_limit: defaults::WIMM_LIMIT,
            dynamic_mpr: false,
        }
    }
}

/// A `modify_qp` request: the target state and the attributes that transition needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QpTransition {
    Init(InitAttr),
    Rtr(RtrAttr),
    Rts(RtsAttr),
    /// Fail the QP: outstanding work requests complete flushed.
    Error,
    /// Back to RESET: all state dropped (queued completions already in CQs stay).
    Reset,
}

impl QpTransition {
    /// The state this transition leads to.
    pub const fn target(&self) -> QpState {
        match self {
            Self::Init(_) => QpState::Init,
            Self::Rtr(_) => QpState::Rtr,
            Self::Rts(_) => QpState::Rts,
            Self::Error => QpState::Error,
            Self::Reset => QpState::Reset,
        }
    }

    /// Check that the transition is allowed from `from` (libibverbs state diagram).
    pub fn check_from(&self, from: QpState) -> Result<(), VerbsError> {
        let ok = matches!(
            (from, self.target()),
            (QpState::Reset, QpState::Init)
                | (QpState::Init, QpState::Rtr)
                | (QpState::Rtr, QpState::Rts)
                | (_, QpState::Error | QpState::Reset)
        );
        if ok {
            Ok(())
        } else {
            Err(VerbsError::InvalidTransition {
                from,
                to: self.target(),
            })
        }
    }
}

/// What `query_qp` reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpInfo {
    pub qpn: Qpn,
    pub state: QpState,
    pub init_attr: QpInitAttr,
    pub init: Option<InitAttr>,
    pub rtr: Option<RtrAttr>,
    pub rts: Option<RtsAttr>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_diagram() {
        use QpState::{Error, Init, Reset, Rtr, Rts};
        let init = QpTransition::Init(InitAttr::default());
        let remote = RemoteNic {
            addr: Ipv6Addr::LOCALHOST,
            host: None,
        };
        let rtr = QpTransition::Rtr(RtrAttr::new(remote, Qpn(7), 0));
        let rts = QpTransition::Rts(RtsAttr::new(0));
        assert!(init.check_from(Reset).is_ok());
        assert!(rtr.check_from(Init).is_ok());
        assert!(rts.check_from(Rtr).is_ok());
        for from in [Reset, Init, Rtr, Rts, Error] {
            assert!(QpTransition::Error.check_from(from).is_ok());
            assert!(QpTransition::Reset.check_from(from).is_ok());
        }
        assert_eq!(
            rts.check_from(Init),
            Err(VerbsError::InvalidTransition {
                from: Init,
                to: Rts
            })
        );
        assert!(init.check_from(Rts).is_err());
        assert!(rtr.check_from(Error).is_err());
    }
}
