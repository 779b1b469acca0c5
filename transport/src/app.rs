//! Applications as state machines (docs/ARCHITECTURE.md, "Applications as state machines"): a
//! perf test or a collective is written once against [`Verbs`] and driven by whoever owns the
//! NIC: the simulator in virtual time on its own thread (over an [`Endpoint`] directly), the
//! NIC runtime in real time (over its thread-safe handle).

use crate::endpoint::Endpoint;
use crate::time::Instant;
use crate::verbs::{Qpn, RecvWr, SendWr, VerbsError, WorkCompletion};

/// What an application may ask of its NIC while it runs (connections are set up before it
/// starts, out of band). Object safe.
pub trait Verbs {
    /// Post a Write or Write-with-Immediate.
    fn post_send(&mut self, qpn: Qpn, wr: &SendWr<'_>) -> Result<(), VerbsError>;
    /// Post a receive for an incoming Write-with-Immediate.
    fn post_recv(&mut self, qpn: Qpn, wr: &RecvWr) -> Result<(), VerbsError>;
    /// Read local registered memory.
    fn mr_read(&self, lkey: u32, va: u64, dst: &mut [u8]) -> Result<(), VerbsError>;
    /// Write local registered memory.
    fn mr_write(&mut self, lkey: u32, va: u64, src: &[u8]) -> Result<(), VerbsError>;
}

impl Verbs for Endpoint {
    fn post_send(&mut self, qpn: Qpn, wr: &SendWr<'_>) -> Result<(), VerbsError> {
        Self::post_send(self, qpn, wr)
    }
    fn post_recv(&mut self, qpn: Qpn, wr: &RecvWr) -> Result<(), VerbsError> {
        Self::post_recv(self, qpn, wr)
    }
    fn mr_read(&self, lkey: u32, va: u64, dst: &mut [u8]) -> Result<(), VerbsError> {
        Self::mr_read(self, lkey, va, dst)
    }
    fn mr_write(&mut self, lkey: u32, va: u64, src: &[u8]) -> Result<(), VerbsError> {
        Self::mr_write(self, lkey, va, src)
    }
}

/// An application: reacts to its start, to the completions of its host's CQs and to its own
/// timer.
pub trait Application {
    /// The run starts.
    fn start(&mut self, now: Instant, verbs: &mut dyn Verbs);
    /// A completion arrived.
    fn on_completion(&mut self, now: Instant, wc: &WorkCompletion, verbs: &mut dyn Verbs);
    /// The time [`next_timer`](Self::next_timer) named has come.
    fn on_timer(&mut self, now: Instant, verbs: &mut dyn Verbs) {
        let _ = (now, verbs);
    }
    /// When the application next wants [`on_timer`](Self::on_timer).
    fn next_timer(&self) -> Option<Instant> {
        None
    }
    /// Everything it had to do is done.
    fn is_done(&self) -> bool;
}
