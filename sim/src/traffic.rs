//! Traffic: messages with a source, destination, start time and size; a text format in the
//! spirit of htsim's connection matrices; and the standard matrices (permutation, incast,
//! all-to-all).
//!
//! Text form, one message per line (`#` starts a comment; header lines `Nodes N` and
//! `Connections N` are accepted and ignored, as are htsim's `id K` tokens):
//!
//! ```text
//! 0->5 start 10 size 2000000     # htsim style: start in µs, size in bytes
//! 3->1 0 65536                   # short form: src->dst start_us size
//! ```

use core::fmt::Write as _;

use crate::rng::SimRng;
use crate::time::SimTime;

/// One message: `size` bytes written from `src` to `dst`, posted at `start`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Message {
    pub src: u32,
    pub dst: u32,
    pub start: SimTime,
    pub size: u64,
}

/// A line that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("traffic line {line}: {message}")]
pub struct TrafficParseError {
    pub line: usize,
    pub message: String,
}

fn us(x: f64) -> SimTime {
    SimTime((x * 1e6).round() as u64)
}

/// Parse a traffic file.
pub fn parse_traffic(text: &str) -> Result<Vec<Message>, TrafficParseError> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        let err = |m: &str| TrafficParseError {
            line: i + 1,
            message: format!("{m}: {raw:?}"),
        };
        if line.is_empty() || line.starts_with("Nodes") || line.starts_with("Connections") {
            continue;
        }
        let mut words = line.split_whitespace();
        let pair = words.next().unwrap_or("");
        let (s, d) = pair
            .split_once("->")
            .ok_or_else(|| err("expected src->dst"))?;
        let host = |s: &str| {
            s.trim_start_matches('h')
                .parse::<u32>()
                .map_err(|_| err("bad host"))
        };
        let (src, dst) = (host(s)?, host(d)?);
        if src == dst {
            return Err(err("source and destination are the same host"));
        }
        let rest: Vec<&str> = words.collect();
        let mut start = None;
        let mut size = None;
        let mut positional = Vec::new();
        let mut k = 0;
        while k < rest.len() {
            match rest[k] {
                "start" | "size" | "id" => {
                    let v = rest.get(k + 1).ok_or_else(|| err("missing value"))?;
                    match rest[k] {
                        "start" => start = Some(v.parse::<f64>().map_err(|_| err("bad start"))?),
                        "size" => size = Some(v.parse::<u64>().map_err(|_| err("bad size"))?),
                        _ => {}
                    }
                    k += 2;
                }
                w => {
                    positional.push(w);
                    k += 1;
                }
            }
        }
        match positional[..] {
            [] => {}
            [st, sz] if start.is_none() && size.is_none() => {
                start = Some(st.parse::<f64>().map_err(|_| err("bad start"))?);
                size = Some(sz.parse::<u64>().map_err(|_| err("bad size"))?);
            }
            _ => return Err(err("expected `start US size BYTES` or `US BYTES`")),
        }
        let start = start.ok_or_else(|| err("missing start"))?;
        if !(start >= 0.0 && start.is_finite()) {
            return Err(err("start must be a non-negative time"));
        }
        out.push(Message {
            src,
            dst,
            start: us(start),
            size: size.ok_or_else(|| err("missing size"))?,
        });
    }
    Ok(out)
}

/// Write messages in the htsim-style text form (`src->dst start US size BYTES`).
pub fn format_traffic(msgs: &[Message]) -> String {
    let mut s = format!("Nodes {}\nConnections {}\n", node_count(msgs), msgs.len());
    for m in msgs {
        let _ = writeln!(
            s,
            "{}->{} start {} size {}",
            m.src,
            m.dst,
            m.start.0 as f64 / 1e6,
            m.size
        );
    }
    s
}

fn node_count(msgs: &[Message]) -> u32 {
    msgs.iter().map(|m| m.src.max(m.dst) + 1).max().unwrap_or(0)
}

/// A random permutation: every host sends `size` bytes to one other host and receives from
/// one (a derangement drawn from `seed`), all starting at `start`.
pub fn permutation(hosts: u32, size: u64, start: SimTime, seed: u64) -> Vec<Message> {
    assert!(hosts >= 2, "a permutation needs two hosts");
    let mut rng = SimRng::new(seed);
    let mut dst: Vec<u32> = (0..hosts).collect();
    // Shuffle until no host sends to itself (expected e tries).
    loop {
        rng.shuffle(&mut dst);
        if dst.iter().enumerate().all(|(i, &d)| i as u32 != d) {
            break;
        }
    }
    (0..hosts)
        .map(|src| Message {
            src,
            dst: dst[src as usize],
            start,
            size,
        })
        .collect()
}

/// `senders` each send `size` bytes to `dst`, all at `start`.
pub fn incast(senders: &[u32], dst: u32, size: u64, start: SimTime) -> Vec<Message> {
    senders
        .iter()
        .map(|&src| Message {
            src,
            dst,
            start,
            size,
        })
        .collect()
}

/// Every host sends `size` bytes to every other host, all at `start`.
pub fn all_to_all(hosts: u32, size: u64, start: SimTime) -> Vec<Message> {
    (0..hosts)
        .flat_map(|src| {
            (0..hosts)
                .filter(move |&d| d != src)
                .map(move |dst| Message {
                    src,
                    dst,
                    start,
                    size,
                })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_line_forms_parse_and_round_trip() {
        let m = parse_traffic(
            "Nodes 8\nConnections 2\n0->5 id 1 start 10 size 2000000\nh3->h1 2.5 65536 # short\n",
        )
        .unwrap();
        assert_eq!(m.len(), 2);
        assert_eq!(
            m[0],
            Message {
                src: 0,
                dst: 5,
                start: SimTime(10_000_000),
                size: 2_000_000
            }
        );
        assert_eq!(m[1].start, SimTime(2_500_000));
        assert_eq!(parse_traffic(&format_traffic(&m)).unwrap(), m);
        assert!(parse_traffic("1->1 0 5").is_err());
        assert!(parse_traffic("1-2 0 5").is_err());
        assert_eq!(parse_traffic("\n0->1 0\n").unwrap_err().line, 2);
    }

    #[test]
    fn matrices_have_the_promised_shape() {
        let p = permutation(16, 100, SimTime::ZERO, 3);
        let mut seen = [false; 16];
        for m in &p {
            assert_ne!(m.src, m.dst);
            assert!(!seen[m.dst as usize], "each host receives once");
            seen[m.dst as usize] = true;
        }
        assert_eq!(p, permutation(16, 100, SimTime::ZERO, 3));
        assert_eq!(all_to_all(4, 1, SimTime::ZERO).len(), 12);
        assert_eq!(incast(&[1, 2, 3], 0, 9, SimTime::ZERO).len(), 3);
    }
}
