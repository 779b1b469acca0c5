//! Values the tools' options share: durations with their units (`2ms`, `500us`, `1.5s`),
//! parsed and printed for people.

use mrc_transport::Duration;

/// A duration for people: `750 ns`, `12.5 us`, `3 ms`, `2 s`.
pub fn fmt_duration(d: Duration) -> String {
    let ns = d.0;
    if ns < 1_000 {
        format!("{ns} ns")
    } else if ns < 1_000_000 {
        format!("{} us", ns as f64 / 1e3)
    } else if ns < 1_000_000_000 {
        format!("{} ms", ns as f64 / 1e6)
    } else {
        format!("{} s", ns as f64 / 1e9)
    }
}

/// Parse `2ms`, `500us`, `1.5s`, `100ns`; a bare number is in `bare_unit_ns`.
pub fn parse_duration(s: &str, bare_unit_ns: f64) -> Result<Duration, String> {
    let s = s.trim();
    let (num, unit) = match s.find(|c: char| c.is_ascii_alphabetic()) {
        Some(i) => (&s[..i], &s[i..]),
        None => (s, ""),
    };
    let scale = match unit {
        "" => bare_unit_ns,
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        _ => return Err(format!("{s:?}: unknown time unit {unit:?} (ns, us, ms, s)")),
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a duration (try 2ms, 500us, 1.5s)"))?;
    if !v.is_finite() || v < 0.0 {
        return Err(format!("{s:?}: a duration must be a positive number"));
    }
    Ok(Duration((v * scale).round() as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("2ms", 1e3), Ok(Duration(2_000_000)));
        assert_eq!(parse_duration("1.5 us", 1e3), Ok(Duration(1_500)));
        assert_eq!(parse_duration("40", 1e3), Ok(Duration(40_000)));
        assert_eq!(parse_duration("3", 1e9), Ok(Duration(3_000_000_000)));
        assert!(parse_duration("3 fortnights", 1.0).is_err());
        assert!(parse_duration("-1ms", 1.0).is_err());
        assert_eq!(fmt_duration(Duration(2_500_000)), "2.5 ms");
    }
}
