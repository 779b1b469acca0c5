//! Traffic patterns over many hosts (`--pattern`, `--hosts`, `--victim`, `--pairs FILE`):
//! which host sends to which, and how every host's QPs are wired to their peers. Written
//! once for every backend: a backend builds the hosts and connects one set of `-q` QPs per
//! [`Flow`], in the order [`Wiring`] gives.
//!
//! - `pair`: the two ends of a one-pair run (today's test, host 0 and the first host of the
//!   next rack).
//! - `pairs`: host 2i → host 2i+1.
//! - `permutation`: a seeded derangement (Sattolo's algorithm: one cycle, no host sends to
//!   itself, every host sends and receives exactly once).
//! - `incast:K`: K senders → host 0, taken from the other racks first; with `--victim`, one
//!   more flow from a host outside the incast to a rack mate of the receiver, so it shares
//!   the receiver's T0 (and the spines' downlinks into it) but not its host link.
//! - `all2all`: every host to every other.
//! - `ring`: host i → host i+1 (mod N).
//! - `--pairs FILE`: one `SRC DST` per line (host numbers, or `h3` as the reports name them),
//!   `#` comments.

use std::path::{Path, PathBuf};

use mrc_srv6::plan::{HostId, Plan};

/// The two ends: host 0 and the first host of the next rack (or host 1 in a one-rack plan).
pub fn ends(plan: &Plan) -> (u32, u32) {
    let server = if plan.t0_per_plane() > 1 {
        plan.host_at(1, 0).0
    } else {
        1
    };
    (0, server)
}

/// A traffic pattern by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Traffic {
    Pair,
    Pairs,
    Permutation,
    Incast(u32),
    All2All,
    Ring,
    /// `--pairs FILE`.
    File(PathBuf),
}

impl Traffic {
    /// `--pattern NAME`.
    pub fn parse(name: &str) -> anyhow::Result<Self> {
        Ok(match name {
            "pair" => Self::Pair,
            "pairs" => Self::Pairs,
            "permutation" => Self::Permutation,
            "all2all" => Self::All2All,
            "ring" => Self::Ring,
            n if n.starts_with("incast") => {
                let k = n
                    .strip_prefix("incast:")
                    .and_then(|k| k.parse::<u32>().ok())
                    .filter(|&k| k >= 1)
                    .ok_or_else(|| {
                        anyhow::anyhow!("--pattern {n}: incast:K, K senders (at least 1)")
                    })?;
                Self::Incast(k)
            }
            n => anyhow::bail!(
                "--pattern {n:?}: pair, pairs, permutation, incast:K, all2all or ring (or \
                 --pairs FILE)"
            ),
        })
    }

    /// The name the reports print.
    pub fn name(&self) -> String {
        match self {
            Self::Pair => "pair".into(),
            Self::Pairs => "pairs".into(),
            Self::Permutation => "permutation".into(),
            Self::Incast(k) => format!("incast:{k}"),
            Self::All2All => "all2all".into(),
            Self::Ring => "ring".into(),
            Self::File(p) => format!("pairs file {}", p.display()),
        }
    }
}

/// What the command line asked for: the pattern, over how many hosts, with a victim flow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrafficSpec {
    pub pattern: Traffic,
    /// `--hosts N`: the first N hosts of the plan (default: every host).
    pub hosts: Option<u32>,
    /// `--victim` (incast only).
    pub victim: bool,
}

/// `-q` QPs from host `src` to host `dst`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Flow {
    pub src: u32,
    pub dst: u32,
    /// The incast's victim flow.
    pub victim: bool,
}

/// A seeded derangement of `0..n` (n ≥ 2): Sattolo's shuffle, a single cycle.
fn derangement(n: u32, seed: u64) -> Vec<u32> {
    let mut p: Vec<u32> = (0..n).collect();
    let mut x = seed ^ 0x6d72_632d_7065_7266;
    let mut next = || {
        // splitmix64
        x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    for i in (1..n as usize).rev() {
        let j = (next() % i as u64) as usize;
        p.swap(i, j);
    }
    p
}

/// A host named on a line of a pairs file: `3` or `h3`.
fn host_number(word: &str) -> Option<u32> {
    word.strip_prefix('h').unwrap_or(word).parse().ok()
}

/// The flows of a pairs file over hosts `0..n`.
fn read_pairs(path: &Path, n: u32) -> anyhow::Result<Vec<Flow>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| crate::usage!("--pairs {}: cannot read it ({e})", path.display()))?;
    let mut flows = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or_default().trim();
        if line.is_empty() {
            continue;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        let at = || format!("--pairs {} line {}", path.display(), i + 1);
        let [a, b] = words[..] else {
            crate::bail_usage!("{}: want `SRC DST` (two host numbers), got {line:?}", at());
        };
        let (Some(src), Some(dst)) = (host_number(a), host_number(b)) else {
            crate::bail_usage!("{}: {line:?} is not two host numbers (3 or h3)", at());
        };
        if src >= n || dst >= n {
            crate::bail_usage!(
                "{}: host {} is not in the run, which has hosts 0 to {} (--hosts or --plan)",
                at(),
                src.max(dst),
                n - 1
            );
        }
        if src == dst {
            crate::bail_usage!("{}: host {src} sends to itself", at());
        }
        flows.push(Flow {
            src,
            dst,
            victim: false,
        });
    }
    if flows.is_empty() {
        crate::bail_usage!("--pairs {}: no `SRC DST` line in it", path.display());
    }
    Ok(flows)
}

/// The flows of `spec` on `plan`.
pub fn flows(spec: &TrafficSpec, plan: &Plan, seed: u64) -> anyhow::Result<Vec<Flow>> {
    let total = plan.host_count();
    let n = spec.hosts.unwrap_or(total);
    if n > total {
        crate::bail_usage!(
            "--hosts {n}: plan {:?} has {total} hosts (a larger --plan, or fewer --hosts)",
            plan.name()
        );
    }
    if n < 2 {
        crate::bail_usage!("--hosts {n}: a pattern needs at least two hosts");
    }
    if spec.victim && !matches!(spec.pattern, Traffic::Incast(_)) {
        crate::bail_usage!("--victim is a flow beside an incast: use it with --pattern incast:K");
    }
    let flow = |src, dst| Flow {
        src,
        dst,
        victim: false,
    };
    Ok(match &spec.pattern {
        Traffic::Pair => {
            let (c, v) = ends(plan);
            if spec.hosts.is_some() && v >= n {
                vec![flow(0, 1)]
            } else {
                vec![flow(c, v)]
            }
        }
        Traffic::Pairs => (0..n / 2).map(|i| flow(2 * i, 2 * i + 1)).collect(),
        Traffic::Permutation => derangement(n, seed)
            .iter()
            .enumerate()
            .map(|(i, &d)| flow(i as u32, d))
            .collect(),
        Traffic::All2All => (0..n)
            .flat_map(|a| (0..n).filter(move |&b| b != a).map(move |b| flow(a, b)))
            .collect(),
        Traffic::Ring => (0..n).map(|i| flow(i, (i + 1) % n)).collect(),
        Traffic::File(p) => read_pairs(p, n)?,
        &Traffic::Incast(k) => incast(plan, n, k, spec.victim)?,
    })
}

/// `incast:K` (and its victim) over hosts `0..n` of `plan`: the receiver is host 0.
fn incast(plan: &Plan, n: u32, k: u32, victim: bool) -> anyhow::Result<Vec<Flow>> {
    let rack = |h: u32| plan.rack_of(HostId(h));
    let receiver = 0;
    let mut victim_flow = None;
    let mut used = vec![receiver];
    if victim {
        // The victim's receiver shares host 0's T0; its sender is the last host of the
        // other racks, kept out of the incast.
        let mate = (1..n).find(|&h| rack(h) == rack(receiver));
        let far = (1..n).rev().find(|&h| rack(h) != rack(receiver));
        let (Some(mate), Some(far)) = (mate, far) else {
            crate::bail_usage!(
                "--victim needs a rack mate of host 0 and a host in another rack among the \
                 {n} hosts (a plan with at least two hosts per rack and two racks)"
            );
        };
        used.extend([mate, far]);
        victim_flow = Some(Flow {
            src: far,
            dst: mate,
            victim: true,
        });
    }
    // Senders from the other racks first (their traffic crosses the spines), then rack mates.
    let mut candidates: Vec<u32> = (1..n)
        .filter(|h| !used.contains(h) && rack(*h) != rack(receiver))
        .collect();
    candidates.extend((1..n).filter(|h| !used.contains(h) && rack(*h) == rack(receiver)));
    if (k as usize) > candidates.len() {
        crate::bail_usage!(
            "--pattern incast:{k}: {} hosts can send to host 0 here{} (fewer senders, or more \
             --hosts)",
            candidates.len(),
            if victim { " beside the victim" } else { "" }
        );
    }
    let mut flows: Vec<Flow> = candidates[..k as usize]
        .iter()
        .map(|&src| Flow {
            src,
            dst: receiver,
            victim: false,
        })
        .collect();
    flows.extend(victim_flow);
    Ok(flows)
}

/// One QP of a host, as the wiring sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalQp {
    /// Its flow, and which of the flow's `-q` QPs it is.
    pub flow: usize,
    pub index: u32,
    /// This host is the flow's source (else its destination).
    pub src_side: bool,
    /// The other end: its host (an index into [`Wiring::hosts`]) and its QP there (an index
    /// into that host's [`Wiring::local`]).
    pub peer_host: usize,
    pub peer_qp: usize,
}

/// Every host of a run and its QPs, in the order they are connected: flow by flow, `-q`
/// QPs each; a host's local QPs in the order its flows come.
#[derive(Debug, Clone)]
pub struct Wiring {
    /// The hosts taking part (plan host numbers), ascending; for a `pair` run the client
    /// then the server, as the one-pair reports have them.
    pub hosts: Vec<u32>,
    pub flows: Vec<Flow>,
    pub qps_per_flow: u32,
    /// Per host (as `hosts`): its QPs.
    pub local: Vec<Vec<LocalQp>>,
}

impl Wiring {
    /// The wiring of `flows`, `qps_per_flow` QPs each. A single flow keeps its two ends in
    /// flow order (client first).
    pub fn new(flows: Vec<Flow>, qps_per_flow: u32) -> Self {
        let mut hosts: Vec<u32> = flows.iter().flat_map(|f| [f.src, f.dst]).collect();
        if flows.len() > 1 {
            hosts.sort_unstable();
        }
        hosts.dedup();
        let index = |h: u32| hosts.iter().position(|&x| x == h).unwrap_or_default();
        let mut local: Vec<Vec<LocalQp>> = vec![Vec::new(); hosts.len()];
        for (fi, f) in flows.iter().enumerate() {
            let (s, d) = (index(f.src), index(f.dst));
            for q in 0..qps_per_flow {
                let (sq, dq) = (local[s].len(), local[d].len());
                local[s].push(LocalQp {
                    flow: fi,
                    index: q,
                    src_side: true,
                    peer_host: d,
                    peer_qp: dq,
                });
                local[d].push(LocalQp {
                    flow: fi,
                    index: q,
                    src_side: false,
                    peer_host: s,
                    peer_qp: sq,
                });
            }
        }
        Self {
            hosts,
            flows,
            qps_per_flow,
            local,
        }
    }

    /// `PATTERN over N hosts, F flows`, for the settings block.
    pub fn describe(&self, pattern: &Traffic) -> String {
        format!(
            "{} over {} hosts, {} flows",
            pattern.name(),
            self.hosts.len(),
            self.flows.len()
        )
    }

    /// The index of plan host `h` in [`Self::hosts`].
    pub fn host_index(&self, h: u32) -> Option<usize> {
        self.hosts.iter().position(|&x| x == h)
    }

    /// Per host: the most flows it sends or receives (the load on its link, in flows).
    pub fn max_flows_per_host(&self) -> u32 {
        let mut out = vec![0u32; self.hosts.len()];
        let mut inn = vec![0u32; self.hosts.len()];
        for f in &self.flows {
            if let (Some(s), Some(d)) = (self.host_index(f.src), self.host_index(f.dst)) {
                out[s] += 1;
                inn[d] += 1;
            }
        }
        out.into_iter().chain(inn).max().unwrap_or(1).max(1)
    }

    /// Flows host `h` (an index) sends.
    pub fn flows_out(&self, h: usize) -> u32 {
        self.local[h].iter().filter(|q| q.src_side).count() as u32 / self.qps_per_flow.max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(hosts_per_t0: u32, racks: u32) -> Plan {
        Plan::from_toml(
            &format!(
                "name = \"t\"\nplanes = 1\nt0_per_plane = {racks}\nt1_per_plane = 2\n\
                 hosts_per_t0 = {hosts_per_t0}\nusid_block = \"fcbb:bb00::/32\"\n\
                 host_usids = \"downlink\"\nmtu = 9000\n\n[links.host]\nspeed_gbps = 100\n\
                 latency_ns = 200\n\n[links.fabric]\nspeed_gbps = 100\nlatency_ns = 500\n"
            ),
            "t",
        )
        .unwrap()
    }

    fn spec(p: Traffic) -> TrafficSpec {
        TrafficSpec {
            pattern: p,
            hosts: None,
            victim: false,
        }
    }

    #[test]
    fn permutation_is_a_seeded_derangement() {
        let p = plan(8, 4);
        let f = flows(&spec(Traffic::Permutation), &p, 7).unwrap();
        assert_eq!(f.len(), 32);
        let mut dsts: Vec<u32> = f.iter().map(|x| x.dst).collect();
        assert!(f.iter().all(|x| x.src != x.dst), "no host sends to itself");
        dsts.sort_unstable();
        assert_eq!(
            dsts,
            (0..32).collect::<Vec<_>>(),
            "every host receives once"
        );
        assert_eq!(f, flows(&spec(Traffic::Permutation), &p, 7).unwrap());
        assert_ne!(f, flows(&spec(Traffic::Permutation), &p, 8).unwrap());
    }

    #[test]
    fn incast_senders_come_from_other_racks_and_the_victim_shares_the_t0() {
        let p = plan(8, 4);
        let mut s = spec(Traffic::Incast(7));
        s.victim = true;
        let f = flows(&s, &p, 1).unwrap();
        assert_eq!(f.len(), 8);
        let rack = |h: u32| p.rack_of(HostId(h));
        for x in &f[..7] {
            assert_eq!(x.dst, 0);
            assert_ne!(rack(x.src), rack(0));
            assert!(!x.victim);
        }
        let v = f[7];
        assert!(v.victim);
        assert_eq!(rack(v.dst), rack(0));
        assert_ne!(v.dst, 0);
        assert!(f[..7].iter().all(|x| x.src != v.src && x.src != v.dst));
        s.pattern = Traffic::Incast(40);
        let e = flows(&s, &p, 1).unwrap_err();
        assert!(
            crate::tool::is_usage(&e) && e.to_string().contains("29 hosts"),
            "{e}"
        );
    }

    #[test]
    fn all2all_ring_and_pairs() {
        let p = plan(2, 2);
        assert_eq!(flows(&spec(Traffic::All2All), &p, 1).unwrap().len(), 12);
        let r = flows(&spec(Traffic::Ring), &p, 1).unwrap();
        assert_eq!(r.last().map(|f| (f.src, f.dst)), Some((3, 0)));
        let mut s = spec(Traffic::Pairs);
        s.hosts = Some(3);
        let pr = flows(&s, &p, 1).unwrap();
        assert_eq!(
            pr.iter().map(|f| (f.src, f.dst)).collect::<Vec<_>>(),
            [(0, 1)]
        );
        s.hosts = Some(5);
        assert!(
            flows(&s, &p, 1)
                .unwrap_err()
                .to_string()
                .contains("4 hosts")
        );
    }

    #[test]
    fn pairs_file_lines_and_refusals() {
        let dir = std::env::temp_dir().join(format!("mrc-pairs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let good = dir.join("good");
        std::fs::write(&good, "# a matrix\n0 3\nh1 h2  # comment\n\n").unwrap();
        let p = plan(2, 2);
        let f = flows(&spec(Traffic::File(good.clone())), &p, 1).unwrap();
        assert_eq!(
            f.iter().map(|f| (f.src, f.dst)).collect::<Vec<_>>(),
            [(0, 3), (1, 2)]
        );
        for (text, want) in [
            ("0 9\n", "line 1: host 9 is not in the run"),
            ("0\n", "want `SRC DST`"),
            ("1 1\n", "sends to itself"),
            ("a b\n", "not two host numbers"),
            ("# nothing\n", "no `SRC DST` line"),
        ] {
            std::fs::write(&good, text).unwrap();
            let e = flows(&spec(Traffic::File(good.clone())), &p, 1).unwrap_err();
            assert!(crate::tool::is_usage(&e), "{e}");
            assert!(e.to_string().contains(want), "{text:?}: {e}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn wiring_pairs_every_qp_with_its_peer() {
        let p = plan(2, 2);
        let f = flows(&spec(Traffic::All2All), &p, 1).unwrap();
        let w = Wiring::new(f, 2);
        assert_eq!(w.hosts, [0, 1, 2, 3]);
        for (h, qps) in w.local.iter().enumerate() {
            assert_eq!(qps.len(), 12, "3 flows out, 3 in, 2 QPs each");
            for (i, q) in qps.iter().enumerate() {
                let back = w.local[q.peer_host][q.peer_qp];
                assert_eq!((back.peer_host, back.peer_qp), (h, i));
                assert_eq!((back.flow, back.index), (q.flow, q.index));
                assert_ne!(back.src_side, q.src_side);
            }
        }
        assert_eq!(w.max_flows_per_host(), 3);
        assert_eq!(w.flows_out(0), 3);
        let pair = Wiring::new(
            vec![Flow {
                src: 2,
                dst: 0,
                victim: false,
            }],
            1,
        );
        assert_eq!(pair.hosts, [2, 0], "a pair keeps client then server");
    }

    #[test]
    fn pattern_names() {
        assert_eq!(Traffic::parse("incast:7").unwrap(), Traffic::Incast(7));
        for bad in ["incast", "incast:0", "incast:x", "mesh"] {
            assert!(Traffic::parse(bad).is_err(), "{bad}");
        }
    }
}
