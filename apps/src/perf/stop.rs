//! Ending a timed run early. In a `-D` or `--run_infinitely` run over a real-time backend (mem,
//! DPDK), the first SIGINT (Ctrl-C) or SIGTERM ends the run as if its time were up: the senders
//! stop posting and signal their tail, both ends exchange and report what ran, and the process
//! exits as it would have at the end of the duration. A second signal ends the process at once
//! (exit status 128 + the signal's number, as a shell reports it).
//!
//! A counted run (`-n`) and the side of a two-host run that only receives keep the default:
//! the signal ends the process, since there is no tail of theirs to wait for.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use anyhow::Context as _;
use signal_hook::consts::{SIGINT, SIGTERM};

use super::settings::{BackendKind, Settings};

static REQUESTED: OnceLock<Arc<AtomicBool>> = OnceLock::new();

/// From now on, SIGINT and SIGTERM end the run instead of the process (once; the second one
/// ends the process). Idempotent.
pub fn install() -> anyhow::Result<()> {
    if REQUESTED.get().is_some() {
        return Ok(());
    }
    let flag = REQUESTED
        .get_or_init(|| Arc::new(AtomicBool::new(false)))
        .clone();
    for sig in [SIGINT, SIGTERM] {
        // Registered first, so it sees the flag as it was before this signal: set means a
        // second signal.
        signal_hook::flag::register_conditional_shutdown(sig, 128 + sig, flag.clone())
            .context("installing the signal handlers")?;
        signal_hook::flag::register(sig, flag.clone()).context("installing the signal handlers")?;
    }
    Ok(())
}

/// Whether a signal asked the run to end.
pub fn requested() -> bool {
    REQUESTED.get().is_some_and(|f| f.load(Ordering::Relaxed))
}

/// Whether a signal should end the run of `s` rather than the process: a timed or endless run
/// over a real-time backend, on a side that sends (not the server of a two-host DPDK run, which
/// follows its client's end).
pub fn ends_the_run(s: &Settings) -> bool {
    let timed = s.duration.is_some() || s.run_infinitely;
    let server = s.backend == BackendKind::Dpdk && s.server.is_none() && s.traffic.is_none();
    timed && s.backend != BackendKind::Sim && !server
}
