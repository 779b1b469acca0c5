//! Applications as state machines over the verbs (docs/ARCHITECTURE.md, "Applications as state
//! machines"): the simulator drives them in virtual time on the host's thread; the same code
//! can be driven by a NIC runtime on real ports.
//!
//! These traits follow the shape the engine's contract names (`Application`: `start`,
//! `on_completion`, `on_timer`, over an object-safe `Verbs`). The engine does not export them
//! yet, so they live here; when `mrc_transport` grows its own, this module becomes a
//! re-export.

use mrc_transport::Endpoint;
use mrc_transport::Instant;
use mrc_transport::verbs::{Qpn, RecvWr, SendWr, VerbsError, WorkCompletion};

/// What an application may ask of its NIC while it runs (connections are set up before it
/// starts, out of band).
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
        Endpoint::post_send(self, qpn, wr)
    }
    fn post_recv(&mut self, qpn: Qpn, wr: &RecvWr) -> Result<(), VerbsError> {
        Endpoint::post_recv(self, qpn, wr)
    }
    fn mr_read(&self, lkey: u32, va: u64, dst: &mut [u8]) -> Result<(), VerbsError> {
        Endpoint::mr_read(self, lkey, va, dst)
    }
    fn mr_write(&mut self, lkey: u32, va: u64, src: &[u8]) -> Result<(), VerbsError> {
        Endpoint::mr_write(self, lkey, va, src)
    }
}

/// An application: reacts to its start, to completions of its host's CQ and to its own timer.
pub trait Application {
    /// The run starts (virtual time `now`).
    fn start(&mut self, now: Instant, verbs: &mut dyn Verbs);
    /// A completion arrived on the host's completion queue.
    fn on_completion(&mut self, now: Instant, wc: &WorkCompletion, verbs: &mut dyn Verbs);
    /// The time [`next_timer`](Self::next_timer) named has come.
    fn on_timer(&mut self, now: Instant, verbs: &mut dyn Verbs) {
        let _ = (now, verbs);
    }
    /// When the application next wants [`on_timer`](Self::on_timer).
    fn next_timer(&self) -> Option<Instant> {
        None
    }
    /// Everything it had to do is done (the run ends when every application is done).
    fn is_done(&self) -> bool;
}
