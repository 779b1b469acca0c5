//! Faults on a schedule (brief §6): links that go down and up (or flap), per-link random loss
//! and gray links that drop silently, a switch whose forwarding dies while its links stay up,
//! a host port that goes down (the engine hears of it and tells its peers).
//!
//! Text form, one fault per line, times in microseconds (`#` starts a comment):
//!
//! ```text
//! 100 link-down t0-0-0 t1-0-0
//! 900 link-up t0-0-0 t1-0-0
//! 0 loss all 0.001                 # every link drops 0.1% of frames
//! 0 loss t0-1-0 t1-1-2 0.2          # a gray link
//! 50 switch-stop t1-0-1
//! 80 switch-start t1-0-1
//! 60 port-down h3 0                 # host 3, plane 0
//! 70 port-up h3 0
//! flap t0-0-0 t1-0-0 start 100 period 2000 down 500 count 5
//! 0 dup all 0.01                    # every link delivers 1% of frames twice
//! 0 corrupt t0-0-0 t1-0-1 0.001     # flips one byte of 0.1% of frames
//! 0 reorder all 0.05 3              # 5% of frames held back up to 3 µs more
//! ```
//!
//! [`parse_faults`] reads that form and checks every line against the plan; [`Fault::check`]
//! is the check itself (the nodes exist, the two ends of a link are neighbours, a flap's
//! times stay on the clock), which every tool that builds faults from user input runs.

mod check;
mod parse;

pub(crate) use check::host_names;
pub use check::{FaultError, are_neighbours};
pub use parse::{FaultParseError, parse_faults};

use mrc_srv6::plan::{NodeId, SwitchId};

use crate::time::SimTime;

/// What happens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FaultKind {
    /// The link between two neighbours fails (both directions; queued and in-flight frames are
    /// lost). A host end sees its port go down.
    LinkDown(NodeId, NodeId),
    /// The link comes back.
    LinkUp(NodeId, NodeId),
    /// Frames on the link (both directions) are lost with this probability; 0 heals it.
    LinkLoss(NodeId, NodeId, f64),
    /// Every link loses frames with this probability.
    LossEverywhere(f64),
    /// The switch stops forwarding (its links stay up: nobody is told).
    SwitchStop(SwitchId),
    /// The switch forwards again.
    SwitchStart(SwitchId),
    /// Port `plane` of a host goes down (as `LinkDown` of its host link).
    HostPortDown(u32, u8),
    /// Port `plane` of a host comes back.
    HostPortUp(u32, u8),
    /// A link (`None`: every link) starts mangling frames; a probability of 0 heals it.
    Impair(Option<(NodeId, NodeId)>, Impairment),
    /// The link goes down now and comes back `down_ps` later, then again every `period_ps`,
    /// `count` times in all. The simulator expands it as it runs (one flap at a time), so any
    /// count costs the same memory.
    LinkFlap {
        a: NodeId,
        b: NodeId,
        period_ps: u64,
        down_ps: u64,
        count: u32,
    },
}

/// How a link mangles frames besides losing them (the faults a soak campaign injects).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Impairment {
    /// Each frame is delivered twice with this probability.
    Duplicate(f64),
    /// Each frame has one byte past its Ethernet header flipped with this probability.
    Corrupt(f64),
    /// Each frame is held back by up to `max_delay_ps` more with probability `prob`, so
    /// frames behind it overtake it.
    Reorder { prob: f64, max_delay_ps: u64 },
}

/// A fault at a time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fault {
    pub at: SimTime,
    pub kind: FaultKind,
}

impl Fault {
    /// A fault at `at_us` microseconds (the end of the clock if it does not reach them).
    pub fn at_us(at_us: u64, kind: FaultKind) -> Self {
        Self {
            at: SimTime::from_micros(at_us).unwrap_or(SimTime::MAX),
            kind,
        }
    }

    /// A link that goes down for `down` out of every `period`, `count` times from `start`, as
    /// one [`FaultKind::LinkFlap`] the simulator expands as it runs. Check it with
    /// [`Fault::check`] when the numbers come from a user.
    pub fn flapping(
        a: NodeId,
        b: NodeId,
        start: SimTime,
        period_ps: u64,
        down_ps: u64,
        count: u32,
    ) -> Self {
        Self {
            at: start,
            kind: FaultKind::LinkFlap {
                a,
                b,
                period_ps,
                down_ps,
                count,
            },
        }
    }

    /// The same flaps as [`Fault::flapping`], every down and up listed (for a few flaps a
    /// program chooses: the list is `2 × count` long).
    pub fn flap(
        a: NodeId,
        b: NodeId,
        start: SimTime,
        period_ps: u64,
        down_ps: u64,
        count: u32,
    ) -> Vec<Self> {
        assert!(
            down_ps < period_ps,
            "a flap must come back before the next one"
        );
        (0..u64::from(count))
            .flat_map(|i| {
                let t = start.plus_ps(i.saturating_mul(period_ps));
                [
                    Self {
                        at: t,
                        kind: FaultKind::LinkDown(a, b),
                    },
                    Self {
                        at: t.plus_ps(down_ps),
                        kind: FaultKind::LinkUp(a, b),
                    },
                ]
            })
            .collect()
    }
}
