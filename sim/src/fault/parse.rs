//! The fault-file text form (module docs of [`crate::fault`]): one fault a line, each checked
//! against the plan, every refusal naming its line and what to change.

use mrc_srv6::plan::{NodeId, Plan, SwitchId};

use super::{Fault, FaultError, FaultKind, Impairment};
use crate::time::SimTime;

/// A fault line that cannot be used: its line (1-based) and what to change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct FaultParseError {
    pub line: usize,
    pub message: String,
}

/// The forms of a line, for refusals.
const FORMS: &[(&str, &str)] = &[
    ("link-down", "TIME link-down A B"),
    ("link-up", "TIME link-up A B"),
    ("loss", "TIME loss all P, or TIME loss A B P"),
    ("switch-stop", "TIME switch-stop SWITCH"),
    ("switch-start", "TIME switch-start SWITCH"),
    ("port-down", "TIME port-down HOST PLANE"),
    ("port-up", "TIME port-up HOST PLANE"),
    ("dup", "TIME dup all P, or TIME dup A B P"),
    ("corrupt", "TIME corrupt all P, or TIME corrupt A B P"),
    ("reorder", "TIME reorder all P US, or TIME reorder A B P US"),
];

const FLAP_FORM: &str = "flap A B start US period US down US count N";

fn err(m: impl Into<String>) -> FaultError {
    FaultError(m.into())
}

/// Parse a fault schedule in the text form of the module docs, checking every fault against
/// `plan` ([`Fault::check`]). An empty schedule (only comments) is no fault at all.
pub fn parse_faults(text: &str, plan: &Plan) -> Result<Vec<Fault>, FaultParseError> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let fault = parse_line(line)
            .and_then(|f| f.check(plan).map(|()| f))
            .map_err(|e| FaultParseError {
                line: i + 1,
                message: e.0,
            })?;
        out.push(fault);
    }
    Ok(out)
}

fn node(s: &str) -> Result<NodeId, FaultError> {
    s.parse::<NodeId>().map_err(|e| err(e.to_string()))
}

fn whole(what: &str, s: &str) -> Result<u64, FaultError> {
    s.parse::<u64>()
        .map_err(|_| err(format!("{what} {s:?} is not a whole number")))
}

/// Microseconds on the simulator's clock.
fn micros(what: &str, s: &str) -> Result<SimTime, FaultError> {
    let us = whole(what, s)?;
    SimTime::from_micros(us).ok_or_else(|| {
        err(format!(
            "{what} {us} µs is past the end of the simulator's clock ({} µs, about 213 days)",
            SimTime::MAX_MICROS
        ))
    })
}

fn prob(s: &str) -> Result<f64, FaultError> {
    s.parse::<f64>()
        .ok()
        .filter(|p| (0.0..=1.0).contains(p))
        .ok_or_else(|| err(format!("{s:?} is not a probability: use 0 to 1")))
}

fn switch(s: &str) -> Result<SwitchId, FaultError> {
    match node(s)? {
        NodeId::Switch(s) => Ok(s),
        NodeId::Host(h) => Err(err(format!(
            "{h} is a host: name a switch (t0-PLANE-RACK or t1-PLANE-SPINE)"
        ))),
    }
}

fn host(s: &str) -> Result<u32, FaultError> {
    match node(s)? {
        NodeId::Host(h) => Ok(h.0),
        NodeId::Switch(s) => Err(err(format!("{s} is a switch: name a host (hN)"))),
    }
}

fn plane(s: &str) -> Result<u8, FaultError> {
    let p = whole("plane", s)?;
    u8::try_from(p).map_err(|_| err(format!("plane {p}: a plan has at most 8 planes")))
}

fn parse_flap(w: &[&str]) -> Result<Fault, FaultError> {
    let [_, a, b, "start", s, "period", p, "down", d, "count", c] = w[..] else {
        return Err(err(format!("expected `{FLAP_FORM}`")));
    };
    let start = micros("start", s)?;
    let period = micros("period", p)?;
    let down = micros("down", d)?;
    let count = whole("count", c)?;
    let count = u32::try_from(count)
        .map_err(|_| err(format!("count {count}: at most {} flaps", u32::MAX)))?;
    Ok(Fault::flapping(
        node(a)?,
        node(b)?,
        start,
        period.0,
        down.0,
        count,
    ))
}

/// One line, not yet checked against a plan.
fn parse_line(line: &str) -> Result<Fault, FaultError> {
    let w: Vec<&str> = line.split_whitespace().collect();
    if w[0] == "flap" {
        return parse_flap(&w);
    }
    if w[0].parse::<u64>().is_err() && w.get(1).is_none_or(|k| FORMS.iter().all(|f| f.0 != *k)) {
        return Err(err(format!(
            "{:?} is not a fault: a line is `TIME KIND ...` (time in µs) or `{FLAP_FORM}`",
            w[0]
        )));
    }
    let at = micros("time", w[0])?;
    let link = |a: &str, b: &str| Ok::<_, FaultError>((node(a)?, node(b)?));
    let kind = match (w.get(1).copied(), w.get(2..).unwrap_or(&[])) {
        (Some("link-down"), [a, b]) => FaultKind::LinkDown(node(a)?, node(b)?),
        (Some("link-up"), [a, b]) => FaultKind::LinkUp(node(a)?, node(b)?),
        (Some("loss"), ["all", p]) => FaultKind::LossEverywhere(prob(p)?),
        (Some("loss"), [a, b, p]) => FaultKind::LinkLoss(node(a)?, node(b)?, prob(p)?),
        (Some("switch-stop"), [s]) => FaultKind::SwitchStop(switch(s)?),
        (Some("switch-start"), [s]) => FaultKind::SwitchStart(switch(s)?),
        (Some("port-down"), [h, p]) => FaultKind::HostPortDown(host(h)?, plane(p)?),
        (Some("port-up"), [h, p]) => FaultKind::HostPortUp(host(h)?, plane(p)?),
        (Some("dup"), ["all", p]) => FaultKind::Impair(None, Impairment::Duplicate(prob(p)?)),
        (Some("dup"), [a, b, p]) => {
            FaultKind::Impair(Some(link(a, b)?), Impairment::Duplicate(prob(p)?))
        }
        (Some("corrupt"), ["all", p]) => FaultKind::Impair(None, Impairment::Corrupt(prob(p)?)),
        (Some("corrupt"), [a, b, p]) => {
            FaultKind::Impair(Some(link(a, b)?), Impairment::Corrupt(prob(p)?))
        }
        (Some("reorder"), ["all", p, d]) => FaultKind::Impair(
            None,
            Impairment::Reorder {
                prob: prob(p)?,
                max_delay_ps: micros("delay", d)?.0,
            },
        ),
        (Some("reorder"), [a, b, p, d]) => FaultKind::Impair(
            Some(link(a, b)?),
            Impairment::Reorder {
                prob: prob(p)?,
                max_delay_ps: micros("delay", d)?.0,
            },
        ),
        (Some(k), _) => {
            return Err(match FORMS.iter().find(|f| f.0 == k) {
                Some((_, form)) => err(format!("expected `{form}`")),
                None => err(format!(
                    "unknown fault {k:?}: the kinds are {}, and `{FLAP_FORM}`",
                    FORMS.iter().map(|f| f.0).collect::<Vec<_>>().join(", ")
                )),
            });
        }
        (None, _) => {
            return Err(err(
                "a time alone: add what happens (e.g. `100 link-down A B`)",
            ));
        }
    };
    Ok(Fault { at, kind })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> Plan {
        Plan::builtin("small").unwrap()
    }

    fn parse(text: &str) -> Result<Vec<Fault>, FaultParseError> {
        parse_faults(text, &plan())
    }

    fn refusal(text: &str) -> String {
        parse(text).unwrap_err().to_string()
    }

    #[test]
    fn every_fault_kind_parses() {
        let f = parse(
            "# a schedule\n100 link-down t0-0-0 t1-0-0\n0 loss all 0.001\n\
             5 loss t0-1-0 t1-1-1 0.2\n50 switch-stop t1-0-1\n60 port-down h3 1\n\
             flap t0-0-0 t1-0-1 start 10 period 20 down 5 count 2\n",
        )
        .unwrap();
        assert_eq!(f.len(), 6);
        assert_eq!(f[0].at, SimTime(100_000_000));
        assert_eq!(
            f[4].kind,
            FaultKind::HostPortDown(3, 1),
            "hosts are named h<N>"
        );
        assert_eq!(f[5].at, SimTime(10_000_000));
        assert!(matches!(
            f[5].kind,
            FaultKind::LinkFlap {
                period_ps: 20_000_000,
                down_ps: 5_000_000,
                count: 2,
                ..
            }
        ));
        let i =
            parse("0 dup all 0.01\n0 corrupt t0-0-0 t1-0-1 0.5\n0 reorder all 0.1 3\n").unwrap();
        assert_eq!(
            i[0].kind,
            FaultKind::Impair(None, Impairment::Duplicate(0.01))
        );
        assert!(
            matches!(i[1].kind, FaultKind::Impair(Some(_), Impairment::Corrupt(p)) if p == 0.5)
        );
        assert_eq!(
            i[2].kind,
            FaultKind::Impair(
                None,
                Impairment::Reorder {
                    prob: 0.1,
                    max_delay_ps: 3_000_000
                }
            )
        );
        assert_eq!(parse("# nothing\n\n").unwrap(), Vec::new());
    }

    #[test]
    fn refusals_name_the_line_and_what_to_change() {
        assert!(refusal("1 loss all 2").contains("line 1: \"2\" is not a probability"));
        assert!(refusal("1 port-down t0-0-0 1").contains("t0-0-0 is a switch"));
        assert!(refusal("0 reorder all 0.1").contains("expected `TIME reorder all P US"));
        let e = refusal("\n\n1 explode h1");
        assert!(e.starts_with("line 3: unknown fault \"explode\""), "{e}");
        assert!(refusal("100").contains("a time alone"));
        assert!(refusal("soon link-down t0-0-0 t1-0-0").contains("\"soon\" is not a whole number"));
        assert!(refusal("later").contains("\"later\" is not a fault"));
        let e = refusal("0 link-down t0-0-0 t1-0-9");
        assert!(e.contains("line 1: t1-0-9 is not in the plan"), "{e}");
        let e = refusal("0 link-down t0-0-0 t0-0-1");
        assert!(e.contains("not neighbours"), "{e}");
        let e = refusal("0 switch-stop t1-5-0");
        assert!(e.contains("t1-5-0 is not in the plan"), "{e}");
        let e = refusal("0 port-down h7 0");
        assert!(e.contains("h7 is not in the plan"), "{e}");
    }

    #[test]
    fn huge_numbers_are_refused_not_wrapped() {
        let e = refusal("18446744073709551615 link-down t0-0-0 t1-0-0");
        assert!(e.contains("past the end of the simulator's clock"), "{e}");
        let e = refusal("0 reorder all 0.1 99999999999999999");
        assert!(e.contains("past the end"), "{e}");
        let e = refusal("flap t0-0-0 t1-0-0 start 0 period 2000 down 500 count 40000000000");
        assert!(e.contains("at most 4294967295 flaps"), "{e}");
        // Four billion flaps cost one fault: the simulator expands them as it runs.
        let f = parse("flap t0-0-0 t1-0-0 start 0 period 2 down 1 count 4000000000").unwrap();
        assert_eq!(f.len(), 1);
        let e = refusal("flap t0-0-0 t1-0-0 start 0 period 2000000000 down 500 count 4000000000");
        assert!(e.contains("the last flap is past the end"), "{e}");
        assert!(refusal("flap t0-0-0 t1-0-0 start 0 period 5 down 5 count 1").contains("shorter"));
    }
}
