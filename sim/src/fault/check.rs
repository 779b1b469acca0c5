//! The one check of a fault against a plan, shared by every tool that builds faults from what
//! a user wrote (`mrc-experiments run --faults`, `mrc-perf --fail-link`): a fault that names a
//! node outside the plan, or a link between two nodes that are not neighbours, would be
//! silently ignored by the simulator, so it is refused here with what to change.

use mrc_srv6::plan::{HostId, NodeId, Plan, SwitchId, Tier};

use super::{Fault, FaultKind, Impairment};
use crate::time::SimTime;

/// Why a fault cannot be injected into a plan: one sentence that says what to change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct FaultError(pub String);

fn err(m: impl Into<String>) -> FaultError {
    FaultError(m.into())
}

/// The names `first` to `last`, `a..b` (or one name).
fn names(first: impl core::fmt::Display, last: impl core::fmt::Display) -> String {
    let (a, b) = (first.to_string(), last.to_string());
    if a == b { a } else { format!("{a}..{b}") }
}

/// The hosts of a plan, `h0..h3`.
pub(crate) fn host_names(plan: &Plan) -> String {
    names(HostId(0), HostId(plan.host_count().saturating_sub(1)))
}

/// What the plan has, for a refusal:
/// `plan "small" has planes 0..1, T0s t0-0-0..t0-1-1, T1s t1-0-0..t1-1-1, hosts h0..h3`.
pub(crate) fn plan_shape(plan: &Plan) -> String {
    let last = plan.planes() - 1;
    format!(
        "plan {:?} has planes {}, T0s {}, T1s {}, hosts {}",
        plan.name(),
        names(0, last),
        names(
            SwitchId::t0(0, 0),
            SwitchId::t0(last, plan.t0_per_plane() - 1)
        ),
        names(
            SwitchId::t1(0, 0),
            SwitchId::t1(last, plan.t1_per_plane() - 1)
        ),
        host_names(plan),
    )
}

fn exists(plan: &Plan, n: NodeId) -> bool {
    match n {
        NodeId::Host(h) => plan.has_host(h),
        NodeId::Switch(s) => plan.has_switch(s),
    }
}

fn check_node(plan: &Plan, n: NodeId) -> Result<(), FaultError> {
    if exists(plan, n) {
        Ok(())
    } else {
        Err(err(format!(
            "{n} is not in the plan ({})",
            plan_shape(plan)
        )))
    }
}

fn check_switch(plan: &Plan, s: SwitchId) -> Result<(), FaultError> {
    check_node(plan, NodeId::Switch(s))
}

/// The neighbours of an existing node, as a short list for a refusal.
fn neighbours_of(plan: &Plan, n: NodeId) -> String {
    match n {
        NodeId::Host(h) => {
            let rack = plan.rack_of(h);
            let t0s: Vec<String> = (0..plan.planes())
                .map(|p| SwitchId::t0(p, rack).to_string())
                .collect();
            format!("{h} links to {}", t0s.join(", "))
        }
        NodeId::Switch(s) => match s.tier {
            Tier::T0 => {
                let first = plan.host_at(s.index, 0);
                let last = plan.host_at(s.index, plan.hosts_per_t0() - 1);
                format!(
                    "{s} links to {} and {}",
                    names(first, last),
                    names(
                        SwitchId::t1(s.plane, 0),
                        SwitchId::t1(s.plane, plan.t1_per_plane() - 1)
                    )
                )
            }
            Tier::T1 => format!(
                "{s} links to {}",
                names(
                    SwitchId::t0(s.plane, 0),
                    SwitchId::t0(s.plane, plan.t0_per_plane() - 1)
                )
            ),
        },
    }
}

/// Whether a link joins `a` and `b` in the plan.
pub fn are_neighbours(plan: &Plan, a: NodeId, b: NodeId) -> bool {
    (0..plan.port_count(a)).any(|p| plan.link(a, p).is_some_and(|l| l.peer == b))
}

/// Both ends exist and a link joins them.
pub fn check_link(plan: &Plan, a: NodeId, b: NodeId) -> Result<(), FaultError> {
    check_node(plan, a)?;
    check_node(plan, b)?;
    if are_neighbours(plan, a, b) {
        Ok(())
    } else {
        Err(err(format!(
            "{a} and {b} are not neighbours, no link joins them ({})",
            neighbours_of(plan, a)
        )))
    }
}

fn check_prob(p: f64) -> Result<(), FaultError> {
    if (0.0..=1.0).contains(&p) {
        Ok(())
    } else {
        Err(err(format!("{p} is not a probability: use 0 to 1")))
    }
}

/// `at + ps`, or a refusal naming the clock's end.
pub(crate) fn later(at: SimTime, ps: Option<u64>, what: &str) -> Result<SimTime, FaultError> {
    ps.and_then(|ps| at.0.checked_add(ps))
        .map(SimTime)
        .ok_or_else(|| {
            err(format!(
                "{what} is past the end of the simulator's clock ({} µs, about 213 days)",
                SimTime::MAX_MICROS
            ))
        })
}

impl Fault {
    /// Check this fault against `plan`: every node it names exists, the two ends of a link are
    /// neighbours, a host port is one of the plan's planes, probabilities are in [0, 1], and a
    /// flap comes back before the next one and ends on the clock.
    pub fn check(&self, plan: &Plan) -> Result<(), FaultError> {
        match self.kind {
            FaultKind::LinkDown(a, b) | FaultKind::LinkUp(a, b) => check_link(plan, a, b),
            FaultKind::LinkLoss(a, b, p) => {
                check_link(plan, a, b)?;
                check_prob(p)
            }
            FaultKind::LossEverywhere(p) => check_prob(p),
            FaultKind::SwitchStop(s) | FaultKind::SwitchStart(s) => check_switch(plan, s),
            FaultKind::HostPortDown(h, port) | FaultKind::HostPortUp(h, port) => {
                check_node(plan, NodeId::Host(HostId(h)))?;
                if port < plan.planes() {
                    Ok(())
                } else {
                    Err(err(format!(
                        "h{h} has no port {port}: one port per plane, {} ({})",
                        names(0, plan.planes() - 1),
                        plan_shape(plan)
                    )))
                }
            }
            FaultKind::Impair(link, how) => {
                if let Some((a, b)) = link {
                    check_link(plan, a, b)?;
                }
                match how {
                    Impairment::Duplicate(p) | Impairment::Corrupt(p) => check_prob(p),
                    Impairment::Reorder { prob, .. } => check_prob(prob),
                }
            }
            FaultKind::LinkFlap {
                a,
                b,
                period_ps,
                down_ps,
                count,
            } => {
                check_link(plan, a, b)?;
                if count == 0 {
                    return Err(err("a flap needs a count of at least 1"));
                }
                if down_ps == 0 || down_ps >= period_ps {
                    return Err(err(
                        "a flap's down time must be longer than 0 and shorter than its period",
                    ));
                }
                let last = later(
                    self.at,
                    period_ps.checked_mul(u64::from(count - 1)),
                    "the last flap",
                )?;
                later(last, Some(down_ps), "the last flap").map(drop)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> Plan {
        Plan::builtin("small").unwrap()
    }

    fn node(s: &str) -> NodeId {
        s.parse().unwrap()
    }

    #[test]
    fn links_must_exist_and_join_neighbours() {
        let p = plan();
        let down = |a: &str, b: &str| Fault::at_us(1, FaultKind::LinkDown(node(a), node(b)));
        assert_eq!(down("t0-0-0", "t1-0-1").check(&p), Ok(()));
        assert_eq!(down("h3", "t0-1-1").check(&p), Ok(()));
        let e = down("t0-0-0", "t1-0-9").check(&p).unwrap_err().0;
        assert!(
            e.contains("t1-0-9 is not in the plan") && e.contains("T1s t1-0-0..t1-1-1"),
            "{e}"
        );
        let e = down("t0-0-0", "t0-0-1").check(&p).unwrap_err().0;
        assert!(
            e.contains("not neighbours") && e.contains("t0-0-0 links to h0..h1 and t1-0-0..t1-0-1"),
            "{e}"
        );
        let e = down("t0-0-0", "t1-1-0").check(&p).unwrap_err().0;
        assert!(e.contains("not neighbours"), "{e}");
        let e = down("h3", "t0-0-0").check(&p).unwrap_err().0;
        assert!(e.contains("h3 links to t0-0-1, t0-1-1"), "{e}");
        let e = down("h9", "t0-0-0").check(&p).unwrap_err().0;
        assert!(
            e.contains("h9 is not in the plan") && e.contains("hosts h0..h3"),
            "{e}"
        );
    }

    #[test]
    fn switches_ports_and_probabilities_are_checked() {
        let p = plan();
        let t1 = SwitchId::t1(0, 2);
        assert!(
            Fault::at_us(0, FaultKind::SwitchStop(t1))
                .check(&p)
                .is_err()
        );
        assert!(
            Fault::at_us(0, FaultKind::HostPortDown(3, 1))
                .check(&p)
                .is_ok()
        );
        let e = Fault::at_us(0, FaultKind::HostPortDown(3, 2))
            .check(&p)
            .unwrap_err()
            .0;
        assert!(e.contains("no port 2"), "{e}");
        assert!(
            Fault::at_us(0, FaultKind::HostPortUp(4, 0))
                .check(&p)
                .is_err()
        );
        assert!(
            Fault::at_us(0, FaultKind::LossEverywhere(f64::NAN))
                .check(&p)
                .is_err()
        );
        assert!(
            Fault::at_us(0, FaultKind::Impair(None, Impairment::Corrupt(1.5)))
                .check(&p)
                .is_err()
        );
    }

    #[test]
    fn flaps_come_back_and_end_on_the_clock() {
        let p = plan();
        let (a, b) = (node("t0-0-0"), node("t1-0-0"));
        let flap = |start: u64, period, down, count| {
            Fault::flapping(a, b, SimTime(start), period, down, count).check(&p)
        };
        assert_eq!(flap(0, 10, 5, 4_000_000_000), Ok(()));
        assert!(flap(0, 10, 10, 1).is_err());
        assert!(flap(0, 10, 0, 1).is_err());
        assert!(flap(0, 10, 5, 0).is_err());
        assert!(
            flap(0, u64::MAX / 2, 1, 3).is_ok(),
            "ends on the last picosecond"
        );
        let e = flap(0, u64::MAX / 2, 1, 4).unwrap_err().0;
        assert!(e.contains("past the end of the simulator's clock"), "{e}");
        assert!(flap(u64::MAX - 4, 10, 5, 1).is_err());
        assert!(flap(u64::MAX - 5, 10, 5, 1).is_ok());
    }
}
