//! Errors of the NIC runtime.

use mrc_transport::config::ConfigError;
use mrc_transport::verbs::VerbsError;

/// Everything that can go wrong outside the datapath (which reports through completions and
/// events instead).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NicError {
    /// The engine refused a verbs call.
    #[error(transparent)]
    Verbs(#[from] VerbsError),
    /// The engine configuration is unusable.
    #[error("engine configuration: {0}")]
    Config(#[from] ConfigError),
    /// The NIC configuration and its ports disagree.
    #[error("NIC configuration: {0}")]
    Setup(String),
    /// The NIC thread has stopped (shut down, or it ended with an error): nothing reaches the
    /// engine any more.
    #[error("the NIC thread has stopped")]
    Stopped,
    /// The NIC thread did not answer a control call in time.
    #[error("the NIC thread did not answer within {0:?}")]
    Timeout(std::time::Duration),
    /// The NIC thread panicked.
    #[error("the NIC thread panicked")]
    Panicked,
    /// DPDK failed.
    #[cfg(feature = "dpdk")]
    #[error("DPDK: {0}")]
    Dpdk(#[from] mrc_dpdk::Error),
    /// The operating system refused (thread creation).
    #[error(transparent)]
    Io(#[from] std::io::Error),
}
