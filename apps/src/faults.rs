//! Faults injected into the simulated fabric while a test runs (`--fail-link`, `--flap-link`,
//! `--loss`), turned into the simulator's fault schedule (brief §6: link failures, flaps and
//! loss are what MRC rides through).
//!
//! ```text
//! --fail-link                       the client's plane-0 T0 uplink to spine 0, mid-run
//! --fail-link=t0-0-0:t1-0-1@2ms     that link at 2 ms of virtual time (a bare number is µs)
//! --fail-link=t0-0-0:t1-0-1@2ms,up@3ms   ... and back at 3 ms
//! --flap-link=@1ms,period=200us,down=50us,count=5
//! --loss=0.001                      every link drops 0.1 % of frames from the start
//! --loss=t0-1-0:t1-1-0=0.05@1ms     one gray link from 1 ms
//! ```
//!
//! Every refusal is a [`Usage`] error (exit status 2 once it reaches a tool's `main` as an
//! `anyhow::Error` through `?`). The faults built are checked against the plan by the
//! simulator's own check ([`Fault::check`]), the one `mrc-experiments` runs on fault files.

use mrc_sim::{Fault, FaultKind, Impairment, SimTime};
use mrc_srv6::plan::{HostId, NodeId, Plan, SwitchId};
use mrc_transport::Duration;

use crate::tool::Usage;
use crate::units::parse_duration;

fn usage(m: impl Into<String>) -> Usage {
    Usage(m.into())
}

/// Two neighbours in the plan, by name (`t0-0-0`, `t1-0-1`, `h3`).
pub type LinkName = (NodeId, NodeId);

/// One fault option as given; times `None` are chosen from the run's expected length.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FaultSpec {
    FailLink {
        link: Option<LinkName>,
        at: Option<Duration>,
        up_at: Option<Duration>,
    },
    FlapLink {
        link: Option<LinkName>,
        start: Option<Duration>,
        period: Duration,
        down: Duration,
        count: u32,
    },
    Loss {
        link: Option<LinkName>,
        prob: f64,
        at: Duration,
    },
}

fn parse_link(opt: &str, s: &str) -> Result<LinkName, Usage> {
    let (a, b) = s.split_once(':').ok_or_else(|| {
        usage(format!(
            "{opt} {s:?}: a link is NODE:NODE, e.g. t0-0-0:t1-0-0"
        ))
    })?;
    let node = |n: &str| {
        n.parse::<NodeId>().map_err(|_| {
            usage(format!(
                "{opt}: {n:?} is not a node name (t0-PLANE-I, t1-PLANE-I, hN)"
            ))
        })
    };
    Ok((node(a)?, node(b)?))
}

/// A time in a fault option: a bare number is microseconds, as in the simulator's fault files.
fn time(opt: &str, s: &str) -> Result<Duration, Usage> {
    parse_duration(s, 1e3).map_err(|e| usage(format!("{opt}: {e}")))
}

/// `[A:B][@T][,up@T]`, empty or `auto` for the automatic link and time.
pub fn parse_fail_link(s: &str) -> Result<FaultSpec, Usage> {
    const OPT: &str = "--fail-link";
    let time = |t: &str| time(OPT, t);
    let s = s.trim();
    let mut link = None;
    let mut at = None;
    let mut up_at = None;
    if !(s.is_empty() || s == "auto") {
        for (i, part) in s.split(',').enumerate() {
            if let Some(t) = part.strip_prefix("up@") {
                up_at = Some(time(t)?);
            } else if i == 0 {
                let (l, t) = match part.split_once('@') {
                    Some((l, t)) => (l, Some(t)),
                    None => (part, None),
                };
                if !l.is_empty() {
                    link = Some(parse_link(OPT, l)?);
                }
                at = t.map(time).transpose()?;
            } else {
                return Err(usage(format!(
                    "{OPT}: unknown part {part:?} (expected up@TIME)"
                )));
            }
        }
    }
    if let (Some(a), Some(u)) = (at, up_at)
        && u <= a
    {
        return Err(usage(format!(
            "{OPT}: the link must come back after it fails (up@ later than @)"
        )));
    }
    Ok(FaultSpec::FailLink { link, at, up_at })
}

/// `[A:B][@START][,period=T][,down=T][,count=N]`.
pub fn parse_flap_link(s: &str) -> Result<FaultSpec, Usage> {
    const OPT: &str = "--flap-link";
    let time = |t: &str| time(OPT, t);
    let mut link = None;
    let mut start = None;
    let mut period = Duration::from_micros(200);
    let mut down = Duration::from_micros(50);
    let mut count = 5;
    for (i, part) in s.trim().split(',').enumerate() {
        if let Some((k, v)) = part.split_once('=') {
            match k {
                "period" => period = time(v)?,
                "down" => down = time(v)?,
                "count" => {
                    count = v.parse().map_err(|_| {
                        usage(format!(
                            "{OPT}: count {v:?}: a whole number from 1 to {}",
                            u32::MAX
                        ))
                    })?;
                }
                _ => {
                    return Err(usage(format!(
                        "{OPT}: unknown key {k:?} (period, down, count)"
                    )));
                }
            }
        } else if i == 0 {
            let (l, t) = match part.split_once('@') {
                Some((l, t)) => (l, Some(t)),
                None => (part, None),
            };
            if !l.is_empty() && l != "auto" {
                link = Some(parse_link(OPT, l)?);
            }
            start = t.map(time).transpose()?;
        } else {
            return Err(usage(format!(
                "{OPT}: unknown part {part:?} (A:B@START, period=, down=, count=)"
            )));
        }
    }
    if down >= period || down.0 == 0 || count == 0 {
        return Err(usage(format!(
            "{OPT}: need 0 < down < period and count > 0"
        )));
    }
    Ok(FaultSpec::FlapLink {
        link,
        start,
        period,
        down,
        count,
    })
}

/// `P[@T]` for every link, or `A:B=P[@T]` for one.
pub fn parse_loss(s: &str) -> Result<FaultSpec, Usage> {
    const OPT: &str = "--loss";
    let (body, at) = match s.trim().split_once('@') {
        Some((b, t)) => (b, time(OPT, t)?),
        None => (s.trim(), Duration::ZERO),
    };
    let (link, p) = match body.rsplit_once('=') {
        Some((l, p)) => (Some(parse_link(OPT, l)?), p),
        None => (None, body),
    };
    let prob: f64 = p
        .parse()
        .ok()
        .filter(|p: &f64| (0.0..=1.0).contains(p))
        .ok_or_else(|| usage(format!("{OPT}: {p:?} is not a probability in [0, 1]")))?;
    Ok(FaultSpec::Loss { link, prob, at })
}

/// The link `--fail-link` picks by itself: the client's plane-0 T0 to the first spine.
pub fn auto_link(plan: &Plan, client: u32) -> LinkName {
    let rack = plan.rack_of(HostId(client));
    (
        NodeId::Switch(SwitchId::t0(0, rack)),
        NodeId::Switch(SwitchId::t1(0, 0)),
    )
}

/// A time of a fault option on the simulator's clock.
fn at(opt: &str, d: Duration) -> Result<SimTime, Usage> {
    SimTime::from_nanos(d.0).ok_or_else(|| {
        usage(format!(
            "{opt}: {} µs is past the end of the simulator's clock ({} µs, about 213 days)",
            d.0 / 1000,
            SimTime::MAX_MICROS
        ))
    })
}

/// The option a spec came from, for refusals.
fn option(s: &FaultSpec) -> &'static str {
    match s {
        FaultSpec::FailLink { .. } => "--fail-link",
        FaultSpec::FlapLink { .. } => "--flap-link",
        FaultSpec::Loss { .. } => "--loss",
    }
}

/// The simulator's schedule for these options; `mid` is when "mid-run" is. Every fault is
/// checked against the plan ([`Fault::check`]: the nodes exist, the link joins neighbours).
pub fn schedule(
    specs: &[FaultSpec],
    plan: &Plan,
    client: u32,
    mid: Duration,
) -> Result<Vec<Fault>, Usage> {
    let pick = |l: Option<LinkName>| l.unwrap_or_else(|| auto_link(plan, client));
    let mut out = Vec::new();
    for s in specs {
        let opt = option(s);
        let first = out.len();
        match *s {
            FaultSpec::FailLink { link, at: t, up_at } => {
                let (a, b) = pick(link);
                let t = t.unwrap_or(mid);
                out.push(Fault {
                    at: at(opt, t)?,
                    kind: FaultKind::LinkDown(a, b),
                });
                if let Some(u) = up_at {
                    if u <= t {
                        return Err(usage(format!(
                            "{opt}: the link must come back after it fails (up@ later than @)"
                        )));
                    }
                    out.push(Fault {
                        at: at(opt, u)?,
                        kind: FaultKind::LinkUp(a, b),
                    });
                }
            }
            FaultSpec::FlapLink {
                link,
                start,
                period,
                down,
                count,
            } => {
                let (a, b) = pick(link);
                let ps = |d: Duration| at(opt, d).map(|t| t.0);
                out.push(Fault::flapping(
                    a,
                    b,
                    at(opt, start.unwrap_or(mid))?,
                    ps(period)?,
                    ps(down)?,
                    count,
                ));
            }
            FaultSpec::Loss { link, prob, at: t } => {
                let kind = match link {
                    Some((a, b)) => FaultKind::LinkLoss(a, b, prob),
                    None => FaultKind::LossEverywhere(prob),
                };
                out.push(Fault {
                    at: at(opt, t)?,
                    kind,
                });
            }
        }
        for f in &out[first..] {
            f.check(plan).map_err(|e| usage(format!("{opt}: {e}")))?;
        }
    }
    Ok(out)
}

fn us(ps: u64) -> f64 {
    ps as f64 / 1e6
}

/// One line per fault for the settings block.
pub fn describe(faults: &[Fault]) -> Vec<String> {
    faults
        .iter()
        .map(|f| {
            let t = f.at.as_micros_f64();
            match f.kind {
                FaultKind::LinkDown(a, b) => format!("{t:.1} us link down {a}:{b}"),
                FaultKind::LinkUp(a, b) => format!("{t:.1} us link up {a}:{b}"),
                FaultKind::LinkLoss(a, b, p) => format!("{t:.1} us loss {p} on {a}:{b}"),
                FaultKind::LossEverywhere(p) => format!("{t:.1} us loss {p} on every link"),
                FaultKind::LinkFlap {
                    a,
                    b,
                    period_ps,
                    down_ps,
                    count,
                } => format!(
                    "{t:.1} us link flap {a}:{b}: down {:.1} us every {:.1} us, {count} times",
                    us(down_ps),
                    us(period_ps)
                ),
                FaultKind::SwitchStop(s) => format!("{t:.1} us switch {s} stops forwarding"),
                FaultKind::SwitchStart(s) => format!("{t:.1} us switch {s} forwards again"),
                FaultKind::HostPortDown(h, p) => format!("{t:.1} us port down h{h} plane {p}"),
                FaultKind::HostPortUp(h, p) => format!("{t:.1} us port up h{h} plane {p}"),
                FaultKind::Impair(link, how) => {
                    let on = link.map_or("every link".to_owned(), |(a, b)| format!("{a}:{b}"));
                    match how {
                        Impairment::Duplicate(p) => format!("{t:.1} us duplicate {p} on {on}"),
                        Impairment::Corrupt(p) => format!("{t:.1} us corrupt {p} on {on}"),
                        Impairment::Reorder { prob, max_delay_ps } => format!(
                            "{t:.1} us reorder {prob} by up to {:.1} us on {on}",
                            us(max_delay_ps)
                        ),
                    }
                }
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> Plan {
        Plan::builtin("small").unwrap()
    }

    #[test]
    fn fail_link_forms() {
        assert_eq!(
            parse_fail_link("auto").unwrap(),
            (FaultSpec::FailLink {
                link: None,
                at: None,
                up_at: None
            })
        );
        let FaultSpec::FailLink { link, at, up_at } =
            parse_fail_link("t0-0-0:t1-0-1@2ms,up@3ms").unwrap()
        else {
            panic!("not a link failure");
        };
        assert_eq!(link.unwrap().1.to_string(), "t1-0-1");
        assert_eq!(at, Some(Duration::from_millis(2)));
        assert_eq!(up_at, Some(Duration::from_millis(3)));
        assert!(
            parse_fail_link("t0-0-0@2ms").is_err(),
            "one node is not a link"
        );
        assert!(parse_fail_link("@3ms,up@2ms").is_err());
    }

    #[test]
    fn schedule_checks_links_against_the_plan() {
        let p = plan();
        let f = schedule(
            &[parse_fail_link("").unwrap()],
            &p,
            0,
            Duration::from_micros(100),
        )
        .unwrap();
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].at, SimTime(100_000_000));
        let refusal = |opt: FaultSpec| schedule(&[opt], &p, 0, Duration::ZERO).unwrap_err().0;
        let e = refusal(parse_fail_link("t0-0-0:t1-0-9").unwrap());
        assert!(
            e.starts_with("--fail-link: t1-0-9 is not in the plan"),
            "{e}"
        );
        let e = refusal(parse_fail_link("t0-0-0:t0-0-1").unwrap());
        assert!(
            e.starts_with("--fail-link: t0-0-0 and t0-0-1 are not neighbours"),
            "{e}"
        );
        let e = refusal(parse_loss("h1:t0-0-1=0.1").unwrap());
        assert!(
            e.starts_with("--loss: h1 and t0-0-1 are not neighbours"),
            "{e}"
        );
        let e = refusal(parse_flap_link("h0:h1@1us").unwrap());
        assert!(
            e.starts_with("--flap-link: h0 and h1 are not neighbours"),
            "{e}"
        );
        let e = refusal(parse_fail_link("@99999999999999s").unwrap());
        assert!(e.contains("past the end of the simulator's clock"), "{e}");
        // A flap is one fault whatever its count: the simulator expands it as it runs.
        let flap = parse_flap_link("@10us,period=100us,down=20us,count=4000000000").unwrap();
        let f = schedule(&[flap], &p, 0, Duration::ZERO).unwrap();
        assert_eq!(f.len(), 1);
        assert!(parse_flap_link("period=10us,down=20us").is_err());
    }

    #[test]
    fn refusals_are_usage_errors() {
        for e in [
            parse_fail_link("t0-0-0@2ms").unwrap_err(),
            parse_flap_link("count=x").unwrap_err(),
            parse_loss("2").unwrap_err(),
            schedule(
                &[parse_fail_link("t0-0-0:t0-0-1").unwrap()],
                &plan(),
                0,
                Duration::ZERO,
            )
            .unwrap_err(),
        ] {
            let e: anyhow::Error = e.into();
            assert!(crate::tool::is_usage(&e), "{e}");
            assert!(!crate::tool::one_line(&e).contains('\n'));
        }
    }

    #[test]
    fn the_banner_says_what_each_fault_is() {
        let p = plan();
        let specs = [
            parse_flap_link("@1ms,period=200us,down=50us,count=5").unwrap(),
            parse_fail_link("@2ms,up@3ms").unwrap(),
            parse_loss("0.01").unwrap(),
        ];
        let d = describe(&schedule(&specs, &p, 0, Duration::ZERO).unwrap());
        assert_eq!(
            d,
            [
                "1000.0 us link flap t0-0-0:t1-0-0: down 50.0 us every 200.0 us, 5 times",
                "2000.0 us link down t0-0-0:t1-0-0",
                "3000.0 us link up t0-0-0:t1-0-0",
                "0.0 us loss 0.01 on every link",
            ]
        );
    }

    #[test]
    fn loss_forms() {
        assert_eq!(
            parse_loss("0.01").unwrap(),
            (FaultSpec::Loss {
                link: None,
                prob: 0.01,
                at: Duration::ZERO
            })
        );
        let FaultSpec::Loss { link, prob, at } = parse_loss("t0-1-0:t1-1-0=0.5@20").unwrap() else {
            panic!("not a loss");
        };
        assert!(link.is_some());
        assert_eq!((prob, at), (0.5, Duration::from_micros(20)));
        assert!(parse_loss("1.5").is_err());
    }
}
