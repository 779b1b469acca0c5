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

use mrc_sim::{Fault, FaultKind, SimTime};
use mrc_srv6::plan::{HostId, NodeId, Plan, SwitchId};
use mrc_transport::Duration;

use super::settings::parse_duration;

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

fn parse_link(s: &str) -> Result<LinkName, String> {
    let (a, b) = s
        .split_once(':')
        .ok_or_else(|| format!("{s:?}: a link is NODE:NODE, e.g. t0-0-0:t1-0-0"))?;
    let node = |n: &str| {
        n.parse::<NodeId>()
            .map_err(|_| format!("{n:?} is not a node name (t0-PLANE-I, t1-PLANE-I, hN)"))
    };
    Ok((node(a)?, node(b)?))
}

/// A time in a fault option: a bare number is microseconds, as in the simulator's fault files.
fn time(s: &str) -> Result<Duration, String> {
    parse_duration(s, 1e3)
}

/// `[A:B][@T][,up@T]`, empty or `auto` for the automatic link and time.
pub fn parse_fail_link(s: &str) -> Result<FaultSpec, String> {
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
                    link = Some(parse_link(l)?);
                }
                at = t.map(time).transpose()?;
            } else {
                return Err(format!(
                    "--fail-link: unknown part {part:?} (expected up@TIME)"
                ));
            }
        }
    }
    if let (Some(a), Some(u)) = (at, up_at)
        && u <= a
    {
        return Err("--fail-link: the link must come back after it fails".into());
    }
    Ok(FaultSpec::FailLink { link, at, up_at })
}

/// `[A:B][@START][,period=T][,down=T][,count=N]`.
pub fn parse_flap_link(s: &str) -> Result<FaultSpec, String> {
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
                    count = v
                        .parse()
                        .map_err(|_| format!("--flap-link: count {v:?} is not a number"))?;
                }
                _ => {
                    return Err(format!(
                        "--flap-link: unknown key {k:?} (period, down, count)"
                    ));
                }
            }
        } else if i == 0 {
            let (l, t) = match part.split_once('@') {
                Some((l, t)) => (l, Some(t)),
                None => (part, None),
            };
            if !l.is_empty() && l != "auto" {
                link = Some(parse_link(l)?);
            }
            start = t.map(time).transpose()?;
        } else {
            return Err(format!("--flap-link: unknown part {part:?}"));
        }
    }
    if down >= period || down.0 == 0 || count == 0 {
        return Err("--flap-link: need 0 < down < period and count > 0".into());
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
pub fn parse_loss(s: &str) -> Result<FaultSpec, String> {
    let (body, at) = match s.trim().split_once('@') {
        Some((b, t)) => (b, time(t)?),
        None => (s.trim(), Duration::ZERO),
    };
    let (link, p) = match body.rsplit_once('=') {
        Some((l, p)) => (Some(parse_link(l)?), p),
        None => (None, body),
    };
    let prob: f64 = p
        .parse()
        .ok()
        .filter(|p: &f64| (0.0..=1.0).contains(p))
        .ok_or_else(|| format!("--loss: {p:?} is not a probability in [0, 1]"))?;
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

fn check_link(plan: &Plan, (a, b): LinkName) -> Result<LinkName, String> {
    let neighbours = (0..plan.port_count(a)).any(|p| plan.link(a, p).is_some_and(|l| l.peer == b));
    if neighbours {
        Ok((a, b))
    } else {
        Err(format!(
            "{a} and {b} are not neighbours in plan {:?} ({} planes, {} T0 and {} T1 per plane)",
            plan.name(),
            plan.planes(),
            plan.t0_per_plane(),
            plan.t1_per_plane()
        ))
    }
}

fn at(d: Duration) -> SimTime {
    SimTime(d.0 * 1000)
}

/// The simulator's schedule for these options; `mid` is when "mid-run" is.
pub fn schedule(
    specs: &[FaultSpec],
    plan: &Plan,
    client: u32,
    mid: Duration,
) -> Result<Vec<Fault>, String> {
    let pick = |l: Option<LinkName>| check_link(plan, l.unwrap_or_else(|| auto_link(plan, client)));
    let mut out = Vec::new();
    for s in specs {
        match *s {
            FaultSpec::FailLink { link, at: t, up_at } => {
                let (a, b) = pick(link)?;
                let t = t.unwrap_or(mid);
                out.push(Fault {
                    at: at(t),
                    kind: FaultKind::LinkDown(a, b),
                });
                if let Some(u) = up_at {
                    if u <= t {
                        return Err("--fail-link: the link must come back after it fails".into());
                    }
                    out.push(Fault {
                        at: at(u),
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
                let (a, b) = pick(link)?;
                out.extend(Fault::flap(
                    a,
                    b,
                    at(start.unwrap_or(mid)),
                    period.0 * 1000,
                    down.0 * 1000,
                    count,
                ));
            }
            FaultSpec::Loss { link, prob, at: t } => {
                let kind = match link {
                    Some(l) => {
                        let (a, b) = check_link(plan, l)?;
                        FaultKind::LinkLoss(a, b, prob)
                    }
                    None => FaultKind::LossEverywhere(prob),
                };
                out.push(Fault { at: at(t), kind });
            }
        }
    }
    Ok(out)
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
                other => format!("{t:.1} us {other:?}"),
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
            parse_fail_link("auto"),
            Ok(FaultSpec::FailLink {
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
        let far = parse_fail_link("t0-0-0:t1-0-9").unwrap();
        let e = schedule(&[far], &p, 0, Duration::ZERO).unwrap_err();
        assert!(e.contains("not neighbours"), "{e}");
        let flap = parse_flap_link("@10us,period=100us,down=20us,count=3").unwrap();
        assert_eq!(schedule(&[flap], &p, 0, Duration::ZERO).unwrap().len(), 6);
        assert!(parse_flap_link("period=10us,down=20us").is_err());
    }

    #[test]
    fn loss_forms() {
        assert_eq!(
            parse_loss("0.01"),
            Ok(FaultSpec::Loss {
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
