//! Packet reliability, decoupled from the semantic layer as MRC does it (brief §1, item 9):
//! the requester's flight with its SACK scoreboard; loss detection (`loss.rs`: the reordering
//! window, RACK-style inference and the per-packet path-failure timeout); the long QP retry
//! budget; the responder's tracker, SACK policy and Write-with-Immediate ordering; RTT
//! estimation; 24-bit PSN arithmetic.

pub mod ack_policy;
pub mod flight;
pub mod imm;
pub mod loss;
pub mod psn;
pub mod retry;
pub mod rtt;
pub mod tracker;

pub use ack_policy::{
    AckDecision, AckPolicy, Coalescing, DataArrival, SackPolicy, build_ack_policy,
};
pub use flight::{EntryState, Flight, FlightEntry, SackOutcome};
pub use imm::{BeyondLimit, ImmStash, PendingImm};
pub use loss::{LossDeadlines, LossDetection, PathEvidence};
pub use retry::{RetryBudget, RetryVerdict};
pub use rtt::RttEstimator;
pub use tracker::{Arrival, Tracker};
