//! Errors of the safe layer. DPDK reports failures as negative errno return values or through
//! `rte_errno`; both are mapped here, in one place (`check`, `last_error`).

use std::fmt;

/// Result with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// An errno value from DPDK (positive): a Linux errno or one of DPDK's own (`E_RTE_*`).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Errno(pub i32);

impl Errno {
    /// DPDK's "operation not allowed in secondary processes" (`E_RTE_SECONDARY`).
    pub const RTE_SECONDARY: Self = Self(1001);
    /// DPDK's "missing rte_config" (`E_RTE_NO_CONFIG`).
    pub const RTE_NO_CONFIG: Self = Self(1002);

    /// The operation is not supported by this driver (`ENOTSUP`, which Linux spells `EOPNOTSUPP`).
    pub fn is_not_supported(self) -> bool {
        self.0 == libc::ENOTSUP
    }
}

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::RTE_SECONDARY => write!(
                f,
                "operation not allowed in a secondary process (errno {})",
                self.0
            ),
            Self::RTE_NO_CONFIG => write!(f, "missing rte_config (errno {})", self.0),
            // std's message is strerror's, plus " (os error N)".
            Self(code) => write!(f, "{}", std::io::Error::from_raw_os_error(code)),
        }
    }
}

impl fmt::Debug for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Errno({}: {self})", self.0)
    }
}

/// Everything that can go wrong in the safe layer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The crate was compiled without DPDK (no libdpdk or libclang, or `MRC_DPDK_DISABLE=1`).
    #[error(
        "mrc-dpdk was built without DPDK ({reason}); install it with \
         `apt-get install libdpdk-dev pkg-config libclang-dev` and rebuild"
    )]
    NotBuilt {
        /// Why the build script left DPDK out.
        reason: &'static str,
    },
    /// `Eal::init` was called a second time in this process (DPDK allows one init per process,
    /// even after a cleanup or a failed init).
    #[error("the EAL was already initialised in this process (rte_eal_init runs once per process)")]
    AlreadyInitialized,
    /// `rte_eal_init` rejected the arguments or could not set up the environment.
    #[error("rte_eal_init failed: {0}")]
    EalInit(Errno),
    /// `Eal::cleanup` was called while other handles (pools, ports, queues, jobs, clones of the
    /// `Eal`) were alive; the EAL is cleaned up when the last of them is dropped.
    #[error(
        "the EAL is still used by {handles} other handle(s); it is cleaned up when the last one drops"
    )]
    EalInUse {
        /// How many other handles hold the EAL.
        handles: usize,
    },
    /// Mbufs were still out when their pool was dropped, so the EAL was not cleaned up (its
    /// memory must stay mapped for them); it is reclaimed when the process exits.
    #[error("EAL cleanup skipped: a mempool was dropped with mbufs still in use")]
    MbufsOutstanding,
    /// A DPDK call failed with an errno.
    #[error("{op} failed: {errno}")]
    Dpdk {
        /// The DPDK function that failed.
        op: &'static str,
        /// Its errno.
        errno: Errno,
    },
    /// An argument the safe layer rejects before calling DPDK.
    #[error("invalid argument: {0}")]
    InvalidArgument(&'static str),
    /// The mempool had no free mbuf (or not enough for a bulk allocation).
    #[error("mempool exhausted")]
    PoolEmpty,
    /// An append/prepend/adj/trim asked for more bytes than the mbuf has room or data for.
    #[error("mbuf has room for {available} bytes, {requested} requested")]
    NoRoom {
        /// Bytes asked for.
        requested: usize,
        /// Bytes available (tailroom, headroom or data, depending on the operation).
        available: usize,
    },
    /// No ethdev port with this name.
    #[error("no DPDK port named {0:?}")]
    PortNotFound(String),
    /// No ethdev port with this id.
    #[error("no DPDK port with id {0}")]
    InvalidPort(u16),
    /// Another `Port` handle already owns this port.
    #[error("port {0} is already owned by another Port handle")]
    PortInUse(u16),
    /// Reconfiguring or stopping a port needs every `RxQueue`/`TxQueue` of it dropped first.
    #[error("port {port}: {handles} queue handle(s) still alive")]
    QueuesInUse {
        /// The port.
        port: u16,
        /// How many queue handles are alive.
        handles: usize,
    },
    /// Lcore launch and wait only work from the main lcore (the thread that ran `Eal::init`).
    #[error("lcore jobs can only be launched from the main lcore")]
    NotMainLcore,
    /// The lcore is not an enabled worker lcore of this EAL (see `Eal::worker_lcores`).
    #[error("lcore {0} is not an enabled worker lcore")]
    NotWorkerLcore(u32),
    /// The worker lcore is still running a job.
    #[error("lcore {0} is busy")]
    LcoreBusy(u32),
    /// The closure launched on a worker lcore panicked.
    #[error("the job on lcore {0} panicked")]
    LcorePanicked(u32),
    /// `register_thread` on a thread that already has an lcore id (an EAL thread or a thread
    /// registered before).
    #[error("this thread already has lcore id {0}")]
    AlreadyLcore(u32),
}

impl Error {
    /// The errno behind this error, when DPDK gave one.
    pub fn errno(&self) -> Option<Errno> {
        match self {
            Self::EalInit(e) | Self::Dpdk { errno: e, .. } => Some(*e),
            _ => None,
        }
    }
}

/// Maps a DPDK return value: negative is `-errno`, anything else is success.
#[cfg(not(mrc_dpdk_absent))]
pub(crate) fn check(op: &'static str, ret: i32) -> Result<u32> {
    if ret < 0 {
        Err(Error::Dpdk {
            op,
            errno: Errno(-ret),
        })
    } else {
        Ok(ret as u32)
    }
}

/// The error a DPDK call reported through `rte_errno` (calls that return -1 or NULL).
#[cfg(not(mrc_dpdk_absent))]
pub(crate) fn last_error(op: &'static str) -> Error {
    Error::Dpdk {
        op,
        errno: rte_errno(),
    }
}

/// This thread's `rte_errno` (a macro, read through the shim).
#[cfg(not(mrc_dpdk_absent))]
pub(crate) fn rte_errno() -> Errno {
    // SAFETY: reads this thread's per-lcore errno variable; no arguments, no side effects.
    Errno(unsafe { crate::sys::mrc_shim_errno() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_built_says_how_to_install() {
        let text = Error::NotBuilt {
            reason: "libdpdk not found",
        }
        .to_string();
        assert!(text.contains("built without DPDK"), "{text}");
        assert!(text.contains("libdpdk not found"), "{text}");
        assert!(
            text.contains("apt-get install libdpdk-dev pkg-config libclang-dev"),
            "{text}"
        );
        assert!(text.contains("rebuild"), "{text}");
    }

    #[test]
    fn errno_display_names_the_error() {
        assert!(Errno(libc::EINVAL).to_string().contains("Invalid argument"));
        assert!(Errno::RTE_SECONDARY.to_string().contains("secondary"));
        assert!(Errno(libc::ENOTSUP).is_not_supported());
        let e = Error::Dpdk {
            op: "rte_eth_dev_start",
            errno: Errno(libc::EIO),
        };
        assert_eq!(e.errno(), Some(Errno(libc::EIO)));
        assert!(
            e.to_string().starts_with("rte_eth_dev_start failed: "),
            "{e}"
        );
    }

    #[cfg(not(mrc_dpdk_absent))]
    #[test]
    fn check_maps_negative_returns() {
        assert_eq!(check("op", 7).unwrap(), 7);
        let err = check("op", -libc::ENODEV).unwrap_err();
        assert_eq!(err.errno(), Some(Errno(libc::ENODEV)));
    }
}
