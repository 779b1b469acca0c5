//! Traffic: messages with a source, destination, start time and size; a text format in the
//! spirit of htsim's connection matrices; and the standard matrices (permutation, incast,
//! all-to-all).
//!
//! Text form, one message per line (`#` starts a comment; htsim's `id K` tokens are ignored;
//! the header lines `Nodes N` and `Connections N` are checked: the plan must have N hosts, every
//! host be below N, and the file hold N messages):
//!
//! ```text
//! 0->5 start 10 size 2000000     # htsim style: start in µs, size in bytes
//! 3->1 0 65536                   # short form: src->dst start_us size
//! ```

use core::fmt::Write as _;

use mrc_srv6::plan::Plan;

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

/// A traffic file that cannot be used: the line (1-based; `None` for the file as a whole) and
/// what to change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct TrafficParseError {
    pub line: Option<usize>,
    pub message: String,
}

impl core::fmt::Display for TrafficParseError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self.line {
            Some(l) => write!(f, "line {l}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

/// The largest message a traffic file may ask for: 2^62 bytes (4 EiB), so every region's
/// addresses stay within 64 bits.
pub const MAX_MESSAGE_BYTES: u64 = 1 << 62;

/// The form of a line, for refusals.
const FORM: &str = "`SRC->DST start US size BYTES` or `SRC->DST US BYTES`";

/// A header line (`Nodes N`, `Connections N`): its value and line.
#[derive(Debug, Clone, Copy)]
struct Header {
    value: u64,
    line: usize,
}

/// Parse a traffic file for `plan`: every host must be one of the plan's, a `Nodes N` header
/// at most the plan's hosts (and every host below N), a `Connections N` header the number of
/// messages, and the file must hold at least one message.
pub fn parse_traffic(text: &str, plan: &Plan) -> Result<Vec<Message>, TrafficParseError> {
    let mut out = Vec::new();
    let mut nodes: Option<Header> = None;
    let mut connections: Option<Header> = None;
    let hosts = plan.host_count();
    for (i, raw) in text.lines().enumerate() {
        let at = |message: String| TrafficParseError {
            line: Some(i + 1),
            message,
        };
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let mut words = line.split_whitespace();
        let first = words.next().unwrap_or("");
        if first == "Nodes" || first == "Connections" {
            let value = match (words.next(), words.next()) {
                (Some(v), None) => v.parse::<u64>().ok(),
                _ => None,
            }
            .ok_or_else(|| at(format!("expected `{first} N` (N a whole number)")))?;
            let slot = if first == "Nodes" {
                &mut nodes
            } else {
                &mut connections
            };
            if let Some(h) = slot {
                return Err(at(format!(
                    "a second `{first}` line (the first is line {}): keep one",
                    h.line
                )));
            }
            *slot = Some(Header { value, line: i + 1 });
            if first == "Nodes" && value > u64::from(hosts) {
                return Err(at(format!(
                    "Nodes {value}: plan {:?} has {hosts} hosts ({}): use a plan with {value} \
                     hosts or fix the count",
                    plan.name(),
                    crate::fault::host_names(plan)
                )));
            }
            continue;
        }
        let m = parse_message(first, words).map_err(at)?;
        for h in [m.src, m.dst] {
            if !plan.has_host(mrc_srv6::plan::HostId(h)) {
                return Err(at(format!(
                    "host {h} is not in the plan (hosts 0-{}, plan {:?})",
                    hosts - 1,
                    plan.name()
                )));
            }
            if let Some(n) = nodes
                && u64::from(h) >= n.value
            {
                return Err(at(format!(
                    "host {h} is past `Nodes {}` (line {}): raise the count to {} or more",
                    n.value,
                    n.line,
                    u64::from(h) + 1
                )));
            }
        }
        out.push(m);
    }
    if let Some(c) = connections
        && c.value != out.len() as u64
    {
        return Err(TrafficParseError {
            line: Some(c.line),
            message: format!(
                "Connections {}, but the file has {} messages: fix the count",
                c.value,
                out.len()
            ),
        });
    }
    if out.is_empty() {
        return Err(TrafficParseError {
            line: None,
            message: format!("no messages: give one a line, {FORM}"),
        });
    }
    Ok(out)
}

/// One message line: `first` is its `src->dst`, `words` the rest.
fn parse_message<'a>(first: &str, words: impl Iterator<Item = &'a str>) -> Result<Message, String> {
    let (s, d) = first
        .split_once("->")
        .ok_or_else(|| format!("{first:?} is not SRC->DST: a line is {FORM}"))?;
    let host = |s: &str| {
        s.strip_prefix('h')
            .unwrap_or(s)
            .parse::<u32>()
            .map_err(|_| format!("{s:?} is not a host (a number, or hN)"))
    };
    let (src, dst) = (host(s)?, host(d)?);
    if src == dst {
        return Err(format!(
            "{first}: the source and destination are the same host"
        ));
    }
    let rest: Vec<&str> = words.collect();
    let mut start = None;
    let mut size = None;
    let mut positional = Vec::new();
    let mut k = 0;
    while k < rest.len() {
        match rest[k] {
            key @ ("start" | "size" | "id") => {
                let v = *rest
                    .get(k + 1)
                    .ok_or_else(|| format!("`{key}` without a value"))?;
                let slot = match key {
                    "start" => &mut start,
                    "size" => &mut size,
                    _ => &mut None,
                };
                if slot.replace(v).is_some() {
                    return Err(format!("`{key}` given twice"));
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
            start = Some(st);
            size = Some(sz);
        }
        _ => return Err(format!("expected {FORM}")),
    }
    let start = start.ok_or_else(|| format!("no start time: a line is {FORM}"))?;
    let size = size.ok_or_else(|| format!("no size: a line is {FORM}"))?;
    Ok(Message {
        src,
        dst,
        start: start_time(start)?,
        size: message_size(size)?,
    })
}

/// A start time in µs (fractions allowed) on the simulator's clock.
fn start_time(s: &str) -> Result<SimTime, String> {
    let us: f64 = s
        .parse()
        .map_err(|_| format!("start {s:?} is not a time in µs"))?;
    if !(us >= 0.0 && us.is_finite()) {
        return Err(format!("start {s}: a start time is 0 µs or later"));
    }
    let ps = (us * 1e6).round();
    if ps > SimTime::MAX.0 as f64 {
        return Err(format!(
            "start {s} µs is past the end of the simulator's clock ({} µs, about 213 days)",
            SimTime::MAX_MICROS
        ));
    }
    Ok(SimTime(ps as u64))
}

fn message_size(s: &str) -> Result<u64, String> {
    let size: u64 = s.parse().map_err(|_| {
        if s.parse::<u128>().is_ok() {
            format!("size {s}: at most {MAX_MESSAGE_BYTES} bytes (2^62)")
        } else {
            format!("size {s:?} is not a whole number of bytes")
        }
    })?;
    if size > MAX_MESSAGE_BYTES {
        return Err(format!(
            "size {size}: at most {MAX_MESSAGE_BYTES} bytes (2^62)"
        ));
    }
    Ok(size)
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
    // Shuffle until no host sends to itself (expected e tries).
    shuffled_until(hosts, size, start, seed, |src, dst| src != dst)
}

/// A random permutation in which nobody sends inside its own rack (of `hosts_per_rack`
/// consecutive hosts): every flow crosses the T1 tier, where the path-failure experiments put
/// their faults. Drawn from `seed` by rejection (a random derangement until none stays home).
pub fn cross_rack_permutation(
    hosts: u32,
    hosts_per_rack: u32,
    size: u64,
    start: SimTime,
    seed: u64,
) -> Vec<Message> {
    assert!(
        hosts_per_rack > 0 && hosts >= 2 * hosts_per_rack,
        "a cross-rack permutation needs two racks"
    );
    shuffled_until(hosts, size, start, seed, |src, dst| {
        src / hosts_per_rack != dst / hosts_per_rack
    })
}

/// Every host sends `size` bytes to one other and receives from one: the destinations are
/// shuffled (from `seed`) until every pair passes `ok(src, dst)`.
fn shuffled_until(
    hosts: u32,
    size: u64,
    start: SimTime,
    seed: u64,
    ok: impl Fn(u32, u32) -> bool,
) -> Vec<Message> {
    let mut rng = SimRng::new(seed);
    let mut dst: Vec<u32> = (0..hosts).collect();
    loop {
        rng.shuffle(&mut dst);
        if dst.iter().enumerate().all(|(i, &d)| ok(i as u32, d)) {
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

    fn plan() -> Plan {
        Plan::builtin("small").unwrap()
    }

    fn refusal(text: &str) -> String {
        parse_traffic(text, &plan()).unwrap_err().to_string()
    }

    #[test]
    fn both_line_forms_parse_and_round_trip() {
        let p = plan();
        let m = parse_traffic(
            "Nodes 4\nConnections 2\n0->3 id 1 start 10 size 2000000\nh3->h1 2.5 65536 # short\n",
            &p,
        )
        .unwrap();
        assert_eq!(m.len(), 2);
        assert_eq!(
            m[0],
            Message {
                src: 0,
                dst: 3,
                start: SimTime(10_000_000),
                size: 2_000_000
            }
        );
        assert_eq!(m[1].start, SimTime(2_500_000));
        assert_eq!(parse_traffic(&format_traffic(&m), &p).unwrap(), m);
        let big = parse_traffic("0->1 0 5000000000", &p).unwrap();
        assert_eq!(big[0].size, 5_000_000_000, "sizes are 64-bit");
    }

    #[test]
    fn refusals_name_the_line_and_what_to_change() {
        assert!(refusal("1->1 0 5").contains("line 1: 1->1: the source and destination"));
        assert!(refusal("1-2 0 5").contains("\"1-2\" is not SRC->DST"));
        assert!(refusal("\n0->1 0\n").starts_with("line 2: expected"));
        let e = refusal("0->1 0 5\n0->1 0 5\n9->1 0 5\n");
        assert_eq!(
            e,
            "line 3: host 9 is not in the plan (hosts 0-3, plan \"small\")"
        );
        assert!(
            refusal("Nodes 16\n0->1 0 5").contains("line 1: Nodes 16: plan \"small\" has 4 hosts")
        );
        assert!(refusal("Nodes 2\n0->3 0 5").contains("line 2: host 3 is past `Nodes 2` (line 1)"));
        assert!(
            refusal("Connections 3\n0->1 0 5")
                .contains("line 1: Connections 3, but the file has 1")
        );
        assert!(refusal("Nodes\n0->1 0 5").contains("expected `Nodes N`"));
        assert!(refusal("Nodes 2\nNodes 2\n0->1 0 5").contains("a second `Nodes` line"));
        assert_eq!(
            refusal("# nothing\n\n"),
            format!("no messages: give one a line, {FORM}")
        );
        assert_eq!(refusal(""), format!("no messages: give one a line, {FORM}"));
        assert!(refusal("0->1 start 1 start 2 size 3").contains("`start` given twice"));
        assert!(
            refusal("0->1 0 18446744073709551616").contains("at most 4611686018427387904 bytes")
        );
        assert!(refusal("0->1 0 4611686018427387905").contains("at most"));
        assert!(refusal("0->1 1e30 5").contains("past the end of the simulator's clock"));
        assert!(refusal("0->1 -1 5").contains("0 µs or later"));
        assert!(refusal("0->1 nan 5").contains("0 µs or later"));
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
        // Cross-rack: a permutation still, nobody inside its own rack of 8.
        let x = cross_rack_permutation(32, 8, 100, SimTime::ZERO, 5);
        let mut seen = [false; 32];
        for m in &x {
            assert_ne!(m.src / 8, m.dst / 8, "{m:?} stays in its rack");
            assert!(!seen[m.dst as usize], "each host receives once");
            seen[m.dst as usize] = true;
        }
        assert_eq!(x.len(), 32);
        assert_eq!(x, cross_rack_permutation(32, 8, 100, SimTime::ZERO, 5));
    }
}
