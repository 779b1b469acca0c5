//! Applications as state machines over the verbs (docs/ARCHITECTURE.md): the engine's own
//! traits, re-exported. The simulator drives them in virtual time on the host's thread, over
//! the host's [`Endpoint`](mrc_transport::Endpoint); the NIC runtime drives the same code on
//! real ports.

pub use mrc_transport::app::{Application, Verbs};
