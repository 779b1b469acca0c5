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
    /// A fault at `at_us` microseconds.
    pub fn at_us(at_us: u64, kind: FaultKind) -> Self {
        Self {
            at: SimTime(at_us * 1_000_000),
            kind,
        }
    }

    /// A link that goes down for `down` out of every `period`, `count` times from `start`.
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
                let t = start.plus_ps(i * period_ps);
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

/// A fault line that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("fault line {line}: {message}")]
pub struct FaultParseError {
    pub line: usize,
    pub message: String,
}

/// Parse a fault schedule in the text form of the module docs.
pub fn parse_faults(text: &str) -> Result<Vec<Fault>, FaultParseError> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let err = |m: &str| FaultParseError {
            line: i + 1,
            message: format!("{m}: {raw:?}"),
        };
        let w: Vec<&str> = line.split_whitespace().collect();
        let node = |s: &str| s.parse::<NodeId>().map_err(|e| err(&e.to_string()));
        let num = |s: &str| s.parse::<u64>().map_err(|_| err("expected an integer"));
        let prob = |s: &str| {
            s.parse::<f64>()
                .ok()
                .filter(|p| (0.0..=1.0).contains(p))
                .ok_or_else(|| err("expected a probability in [0, 1]"))
        };
        let switch = |s: &str| match node(s)? {
            NodeId::Switch(s) => Ok(s),
            NodeId::Host(_) => Err(err("expected a switch")),
        };
        let host = |s: &str| match node(s)? {
            NodeId::Host(h) => Ok(h.0),
            NodeId::Switch(_) => Err(err("expected a host")),
        };
        if w[0] == "flap" {
            let [_, a, b, "start", s, "period", p, "down", d, "count", c] = w[..] else {
                return Err(err("expected: flap A B start US period US down US count N"));
            };
            let (s, p, d) = (num(s)?, num(p)?, num(d)?);
            if d >= p {
                return Err(err("down must be shorter than period"));
            }
            let c = u32::try_from(num(c)?).map_err(|_| err("count too large"))?;
            out.extend(Fault::flap(
                node(a)?,
                node(b)?,
                SimTime(s * 1_000_000),
                p * 1_000_000,
                d * 1_000_000,
                c,
            ));
            continue;
        }
        let at = num(w[0])?;
        let kind = match (w.get(1).copied(), &w[2..]) {
            (Some("link-down"), [a, b]) => FaultKind::LinkDown(node(a)?, node(b)?),
            (Some("link-up"), [a, b]) => FaultKind::LinkUp(node(a)?, node(b)?),
            (Some("loss"), ["all", p]) => FaultKind::LossEverywhere(prob(p)?),
            (Some("loss"), [a, b, p]) => FaultKind::LinkLoss(node(a)?, node(b)?, prob(p)?),
            (Some("switch-stop"), [s]) => FaultKind::SwitchStop(switch(s)?),
            (Some("switch-start"), [s]) => FaultKind::SwitchStart(switch(s)?),
            (Some("port-down"), [h, p]) => FaultKind::HostPortDown(
                host(h)?,
                u8::try_from(num(p)?).map_err(|_| err("bad port"))?,
            ),
            (Some("port-up"), [h, p]) => FaultKind::HostPortUp(
                host(h)?,
                u8::try_from(num(p)?).map_err(|_| err("bad port"))?,
            ),
            (Some("dup"), ["all", p]) => FaultKind::Impair(None, Impairment::Duplicate(prob(p)?)),
            (Some("dup"), [a, b, p]) => {
                FaultKind::Impair(Some((node(a)?, node(b)?)), Impairment::Duplicate(prob(p)?))
            }
            (Some("corrupt"), ["all", p]) => FaultKind::Impair(None, Impairment::Corrupt(prob(p)?)),
            (Some("corrupt"), [a, b, p]) => {
                FaultKind::Impair(Some((node(a)?, node(b)?)), Impairment::Corrupt(prob(p)?))
            }
            (Some("reorder"), ["all", p, d]) => FaultKind::Impair(
                None,
                Impairment::Reorder {
                    prob: prob(p)?,
                    max_delay_ps: num(d)? * 1_000_000,
                },
            ),
            (Some("reorder"), [a, b, p, d]) => FaultKind::Impair(
                Some((node(a)?, node(b)?)),
                Impairment::Reorder {
                    prob: prob(p)?,
                    max_delay_ps: num(d)? * 1_000_000,
                },
            ),
            _ => return Err(err("unknown fault")),
        };
        out.push(Fault::at_us(at, kind));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mrc_srv6::plan::HostId;

    #[test]
    fn every_fault_kind_parses() {
        let f = parse_faults(
            "# a schedule\n100 link-down t0-0-0 t1-0-0\n0 loss all 0.001\n\
             5 loss t0-1-0 t1-1-1 0.2\n50 switch-stop t1-0-1\n60 port-down h3 1\n\
             flap t0-0-0 t1-0-1 start 10 period 20 down 5 count 2\n",
        )
        .unwrap();
        assert_eq!(f.len(), 9);
        assert_eq!(f[0].at, SimTime(100_000_000));
        assert_eq!(
            f[4].kind,
            FaultKind::HostPortDown(3, 1),
            "hosts are named h<N>"
        );
        assert_eq!(f[5].at, SimTime(10_000_000));
        assert_eq!(f[6].at, SimTime(15_000_000));
        assert!(matches!(f[6].kind, FaultKind::LinkUp(..)));
        assert_eq!(f[8].at, SimTime(35_000_000));
        assert!(parse_faults("1 loss all 2").is_err());
        assert!(parse_faults("1 port-down t0-0-0 1").is_err());
        let i = parse_faults("0 dup all 0.01\n0 corrupt t0-0-0 t1-0-1 0.5\n0 reorder all 0.1 3\n")
            .unwrap();
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
        assert!(parse_faults("0 reorder all 0.1").is_err());
        let e = parse_faults("\n\n1 explode h1").unwrap_err();
        assert_eq!(e.line, 3);
        let _ = HostId(0);
    }
}
