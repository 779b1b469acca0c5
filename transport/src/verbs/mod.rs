//! The verbs-like API's types, in libibverbs names and the OCP `mrc.h` shape (brief §7.1):
//! protection domains, memory regions and the [`Memory`] trait behind them, completion
//! queues, QP states and attributes, work requests and completions, and [`VerbsError`].
//!
//! The calls themselves are methods of [`Endpoint`](crate::Endpoint), which owns all of it.

mod cq;
mod memory;
pub(crate) mod mr;
mod qp;
mod wr;

use core::fmt;
use core::ops::BitOr;

pub(crate) use cq::Cq;
pub use cq::{WcOpcode, WcStatus, WorkCompletion};
pub use memory::Memory;
pub use mr::MrKeys;
pub(crate) use mr::{MrTable, RemoteAccessError};
pub use qp::{
    InitAttr, QpCap, QpInfo, QpInitAttr, QpState, QpTransition, Qpn, RemoteNic, RtrAttr, RtsAttr,
    TransportMode,
};
pub use wr::{RecvWr, SendOpcode, SendWr, Sge};

/// A protection domain. Regions and QPs of one domain only see each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PdHandle(pub u32);

/// A completion queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CqHandle(pub u32);

/// Access rights of a memory region (libibverbs `ibv_access_flags`, the ones MRC uses).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Access(u8);

impl Access {
    /// No rights beyond local reads.
    pub const NONE: Self = Self(0);
    /// The NIC may write the region locally (required by remote write).
    pub const LOCAL_WRITE: Self = Self(1);
    /// Peers may RDMA-Write into the region.
    pub const REMOTE_WRITE: Self = Self(2);

    /// Every flag of `other` is set in `self`.
    pub const fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }
}

impl BitOr for Access {
    type Output = Self;
    fn bitor(self, rhs: Self) -> Self {
        Self(self.0 | rhs.0)
    }
}

impl fmt::Debug for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let lw = if self.contains(Self::LOCAL_WRITE) {
            "LOCAL_WRITE"
        } else {
            ""
        };
        let rw = if self.contains(Self::REMOTE_WRITE) {
            "|REMOTE_WRITE"
        } else {
            ""
        };
        write!(f, "Access({lw}{rw})")
    }
}

/// Why a verbs call was refused. The engine never panics on a bad call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum VerbsError {
    #[error("no such protection domain {0:?}")]
    InvalidPd(PdHandle),
    #[error("no such completion queue {0:?}")]
    InvalidCq(CqHandle),
    #[error("no such QP {0}")]
    InvalidQp(Qpn),
    #[error("no memory region with lkey {0:#x}")]
    InvalidLkey(u32),
    #[error("the memory region belongs to another protection domain")]
    WrongPd,
    #[error("range outside the memory region")]
    OutOfBounds,
    #[error("remote write access requires local write access")]
    InvalidAccess,
    #[error("iova + length overflows 64 bits")]
    AddressOverflow,
    #[error("limit reached: {what}")]
    LimitReached { what: &'static str },
    #[error("{what} is still in use")]
    Busy { what: &'static str },
    #[error("invalid QP transition {from:?} -> {to:?}")]
    InvalidTransition { from: QpState, to: QpState },
    #[error("invalid attribute: {0}")]
    InvalidAttr(&'static str),
    #[error("operation not allowed in QP state {0:?}")]
    InvalidState(QpState),
    #[error("send queue full")]
    SendQueueFull,
    #[error("receive queue full")]
    RecvQueueFull,
    #[error("too many gather entries: {given} > {max}")]
    TooManySge { given: usize, max: u32 },
    #[error("message of {0} bytes exceeds the maximum")]
    MessageTooLong(u64),
    #[error("the memory of this region cannot be lent as a slice")]
    NoSlice,
}
