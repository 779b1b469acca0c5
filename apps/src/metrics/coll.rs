//! mrc-coll's series (docs/metrics.md, "mrc-coll"): one per line of the nccl-tests table and
//! placement, labelled `op`, `size`, `type`, `redop`, `place` (`out`/`in`: nccl-tests'
//! out-of-place and in-place columns), with the table's values in SI units.

use mrc_coll::Row;
use mrc_coll::bench::LineResult;
use prometheus_client::registry::Registry;

use super::{counters, float_gauges, l};

/// One placement of one measured line of the table.
#[derive(Debug, Clone, PartialEq)]
pub struct CollLine {
    pub op: &'static str,
    pub size: u64,
    pub dtype: &'static str,
    pub redop: &'static str,
    /// `out` (out-of-place) or `in` (in-place).
    pub place: &'static str,
    /// Per operation, as the table's time column.
    pub time_seconds: f64,
    pub algbw_bytes_per_second: f64,
    pub busbw_bytes_per_second: f64,
    /// Wrong elements over every rank (`None`: not checked, no series).
    pub wrong: Option<u64>,
    /// Operations timed per rank (iterations x operations per iteration).
    pub operations: u64,
}

/// The table's measured lines (`lines[i]` of `rows[i]`) as series; a line not measured (yet)
/// has none. `operations`: timed operations per line and rank.
pub fn lines(rows: &[Row], lines: &[[Option<LineResult>; 2]], operations: u64) -> Vec<CollLine> {
    let mut out = Vec::new();
    for (r, l) in rows.iter().zip(lines) {
        for (place, m) in ["out", "in"].into_iter().zip(l) {
            if let Some(m) = m {
                out.push(CollLine {
                    op: r.spec.coll.name(),
                    size: r.spec.size_bytes(),
                    dtype: r.spec.dtype.name(),
                    redop: r.spec.op.map_or("none", |o| o.name()),
                    place,
                    time_seconds: m.time_us * 1e-6,
                    // The table's GB/s are 10^9 bytes per second.
                    algbw_bytes_per_second: m.algbw * 1e9,
                    busbw_bytes_per_second: m.busbw * 1e9,
                    wrong: m.wrong,
                    operations,
                });
            }
        }
    }
    out
}

/// Register the collective families and set them from `lines`.
pub fn fill(reg: &mut Registry, lines: &[CollLine]) {
    if lines.is_empty() {
        return;
    }
    let time = float_gauges(
        reg,
        "mrc_coll_time_seconds",
        "Time per operation, seconds (nccl-tests' time column)",
    );
    let algbw = float_gauges(
        reg,
        "mrc_coll_algbw_bytes_per_second",
        "Algorithm bandwidth: size / time, bytes per second (nccl-tests' algbw)",
    );
    let busbw = float_gauges(
        reg,
        "mrc_coll_busbw_bytes_per_second",
        "Bus bandwidth: algbw x the collective's bus factor, bytes per second (nccl-tests' busbw)",
    );
    let wrong = counters(
        reg,
        "mrc_coll_wrong_elements",
        "Wrong elements found by the check, over every rank (nccl-tests' #wrong)",
    );
    let ops = counters(
        reg,
        "mrc_coll_operations",
        "Operations timed per rank (iterations x operations per iteration)",
    );
    for c in lines {
        let lb = l(&[
            ("op", c.op.to_owned()),
            ("size", c.size.to_string()),
            ("type", c.dtype.to_owned()),
            ("redop", c.redop.to_owned()),
            ("place", c.place.to_owned()),
        ]);
        time.get_or_create(&lb).set(c.time_seconds);
        algbw.get_or_create(&lb).set(c.algbw_bytes_per_second);
        busbw.get_or_create(&lb).set(c.busbw_bytes_per_second);
        if let Some(w) = c.wrong {
            wrong.get_or_create(&lb).inc_by(w);
        }
        ops.get_or_create(&lb).inc_by(c.operations);
    }
}

#[cfg(test)]
mod tests {
    use super::super::Exporter;
    use super::*;

    fn line(place: &'static str, busbw: f64, wrong: Option<u64>) -> CollLine {
        CollLine {
            op: "all_reduce",
            size: 1024,
            dtype: "float",
            redop: "sum",
            place,
            time_seconds: 12.5e-6,
            algbw_bytes_per_second: busbw / 2.0,
            busbw_bytes_per_second: busbw,
            wrong,
            operations: 20,
        }
    }

    #[test]
    fn every_collective_family_has_its_labels_and_si_values() {
        let e = Exporter::new(&[("test", "all_reduce")]);
        assert!(!e.render().contains("mrc_coll_"), "no line, no series");
        e.publish_coll(vec![line("out", 3.5e9, Some(0)), line("in", 4.25e9, None)]);
        let text = e.render();
        let find = |name: &str, place: &str| {
            text.lines()
                .find(|l| {
                    l.starts_with(&format!("{name}{{")) && l.contains(&format!("place=\"{place}\""))
                })
                .unwrap_or_else(|| panic!("{name} {place}: {text}"))
                .to_owned()
        };
        let val = |name: &str, place: &str| -> f64 {
            find(name, place)
                .rsplit(' ')
                .next()
                .unwrap()
                .parse()
                .unwrap()
        };
        let out = find("mrc_coll_busbw_bytes_per_second", "out");
        for lb in [
            "op=\"all_reduce\"",
            "size=\"1024\"",
            "type=\"float\"",
            "redop=\"sum\"",
            "test=\"all_reduce\"",
        ] {
            assert!(out.contains(lb), "{lb}: {out}");
        }
        assert_eq!(val("mrc_coll_busbw_bytes_per_second", "out"), 3.5e9);
        assert_eq!(val("mrc_coll_busbw_bytes_per_second", "in"), 4.25e9);
        assert_eq!(val("mrc_coll_algbw_bytes_per_second", "out"), 1.75e9);
        assert_eq!(val("mrc_coll_time_seconds", "out"), 12.5e-6);
        assert_eq!(val("mrc_coll_operations_total", "in"), 20.0);
        assert_eq!(val("mrc_coll_wrong_elements_total", "out"), 0.0);
        assert!(
            !text
                .lines()
                .any(|l| l.starts_with("mrc_coll_wrong_elements_total{")
                    && l.contains("place=\"in\"")),
            "an unchecked line has no #wrong: {text}"
        );
        assert!(text.contains("# TYPE mrc_coll_busbw_bytes_per_second gauge"));
        assert!(text.contains("# TYPE mrc_coll_wrong_elements_total counter"));
    }
}
