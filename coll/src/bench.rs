//! The nccl-tests side of the benchmark (peers.md §5.2): which operations a command line asks
//! for (`-b -e -f -i -n -w -c -d -o`), how the ranks' measurements fold into one line (time
//! averaged over ranks, wrong elements summed), and the table nccl-tests prints: a header,
//! `size count type redop root` and for out-of-place then in-place `time algbw busbw #wrong`,
//! then "Out of bounds values" and "Avg bus bandwidth". GB/s are 10^9 bytes per second.

use std::fmt::Write as _;

use crate::dtype::{DataType, RedOp};
use crate::program::{Measure, RankReport, Row};
use crate::spec::{Collective, DEFAULT_SLICE_BYTES, OpSpec, SpecError};

/// The command line's choices.
#[derive(Debug, Clone, PartialEq)]
pub struct BenchOpts {
    pub coll: Collective,
    /// `-b`: smallest size in bytes.
    pub min_bytes: u64,
    /// `-e`: largest size in bytes.
    pub max_bytes: u64,
    /// `-f`: multiply the size by this (0: add `step_bytes`).
    pub step_factor: u64,
    /// `-i`: add this to the size when `step_factor` is 0.
    pub step_bytes: u64,
    /// `-n`.
    pub iters: u32,
    /// `-w`.
    pub warmup: u32,
    /// `-c`.
    pub check: bool,
    /// `-d` (several with `all`).
    pub dtypes: Vec<DataType>,
    /// `-o` (several with `all`).
    pub ops: Vec<RedOp>,
    /// `-r` (printed; none of these collectives has a root).
    pub root: i32,
    /// Bytes per Write-with-Immediate.
    pub slice_bytes: u64,
}

impl BenchOpts {
    /// nccl-tests' defaults: 32 MB, 20 iterations, 1 warm-up, check on, float, sum.
    pub fn new(coll: Collective) -> Self {
        Self {
            coll,
            min_bytes: 32 << 20,
            max_bytes: 32 << 20,
            step_factor: 1,
            step_bytes: 1 << 20,
            iters: 20,
            warmup: 1,
            check: true,
            dtypes: vec![DataType::Float],
            ops: vec![RedOp::Sum],
            root: -1,
            slice_bytes: DEFAULT_SLICE_BYTES,
        }
    }

    /// The sizes of the sweep, as nccl-tests walks them.
    pub fn sizes(&self) -> Vec<u64> {
        let mut out = Vec::new();
        let mut size = self.min_bytes;
        while size <= self.max_bytes && out.len() < 10_000 {
            out.push(size);
            let next = if self.step_factor > 1 {
                size.saturating_mul(self.step_factor)
            } else {
                size + self.step_bytes.max(1)
            };
            if next == size {
                break;
            }
            size = next;
        }
        out
    }

    /// Every operation of the run, in nccl-tests' order (type, then operator, then size).
    pub fn rows(&self, nranks: usize) -> Result<Vec<Row>, SpecError> {
        let ops: Vec<RedOp> = if self.coll.reduces() {
            self.ops.clone()
        } else {
            vec![RedOp::Sum]
        };
        let mut rows = Vec::new();
        for &dtype in &self.dtypes {
            for &op in &ops {
                for size in self.sizes() {
                    let spec =
                        OpSpec::for_size(self.coll, dtype, op, size, nranks, self.slice_bytes)?;
                    rows.push(Row { spec });
                }
            }
        }
        Ok(rows)
    }
}

/// Parses a size with nccl-tests' suffixes: `8`, `1K`, `256M`, `1G` (powers of 1024).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (digits, mult) = match s.chars().last() {
        Some('k' | 'K') => (&s[..s.len() - 1], 1u64 << 10),
        Some('m' | 'M') => (&s[..s.len() - 1], 1 << 20),
        Some('g' | 'G') => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|v| v.checked_mul(mult))
        .ok_or_else(|| format!("bad size {s:?} (a number with an optional K, M or G)"))
}

/// One table line: the ranks' measurements folded.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct LineResult {
    /// Microseconds per operation, averaged over the ranks.
    pub time_us: f64,
    pub algbw: f64,
    pub busbw: f64,
    /// Wrong elements over every rank (`None`: not checked).
    pub wrong: Option<u64>,
}

/// Folds the ranks' measurements of row `row` (placement `p`: 0 out-of-place, 1 in-place).
pub fn fold_line(spec: &OpSpec, ranks: &[RankReport], row: usize, p: usize) -> Option<LineResult> {
    let measures: Vec<Measure> = ranks.iter().map(|r| r.rows[row][p]).collect();
    let times: Vec<f64> = measures.iter().filter_map(|m| m.time_ns).collect();
    if times.len() != ranks.len() || times.is_empty() {
        return None;
    }
    let secs = times.iter().sum::<f64>() / times.len() as f64 / 1e9;
    let wrong = measures
        .iter()
        .map(|m| m.wrong)
        .try_fold(0_u64, |acc, w| w.map(|w| acc + w));
    Some(LineResult {
        time_us: secs * 1e6,
        algbw: spec.algbw(secs),
        busbw: spec.busbw(secs),
        wrong,
    })
}

/// The table header (after the `#` preamble).
pub fn header() -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}           out-of-place                       in-place          ",
        "", "", "", "", ""
    );
    let _ = writeln!(
        s,
        "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6} {:>6}  {:>7}  {:>6}  {:>6} {:>6}",
        "size",
        "count",
        "type",
        "redop",
        "root",
        "time",
        "algbw",
        "busbw",
        "#wrong",
        "time",
        "algbw",
        "busbw",
        "#wrong"
    );
    let _ = writeln!(
        s,
        "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>5}  {:>7}  {:>6}  {:>6}  {:>5}",
        "(B)",
        "(elements)",
        "",
        "",
        "",
        "(us)",
        "(GB/s)",
        "(GB/s)",
        "",
        "(us)",
        "(GB/s)",
        "(GB/s)",
        ""
    );
    s
}

/// One line of the table.
pub fn line(spec: &OpSpec, root: i32, results: [Option<LineResult>; 2]) -> String {
    let redop = spec.op.map_or("none", RedOp::name);
    let mut s = format!(
        "{:>12}  {:>12}  {:>8}  {:>6}  {:>6}",
        spec.size_bytes(),
        spec.count,
        spec.dtype.name(),
        redop,
        root
    );
    for r in results {
        match r {
            Some(r) => {
                let time = if r.time_us < 10_000.0 {
                    format!("{:.2}", r.time_us)
                } else {
                    format!("{:.0}", r.time_us)
                };
                let wrong = r.wrong.map_or_else(|| "N/A".to_owned(), |w| w.to_string());
                let _ = write!(
                    s,
                    "  {time:>7}  {:>6.2}  {:>6.2}  {wrong:>5}",
                    r.algbw, r.busbw
                );
            }
            None => s.push_str("  (failed)"),
        }
    }
    s
}

/// The footer: the wrong elements of the whole run and the average bus bandwidth.
pub fn footer(lines: &[[Option<LineResult>; 2]]) -> String {
    let all: Vec<&LineResult> = lines.iter().flatten().flatten().collect();
    let wrong: u64 = all.iter().filter_map(|r| r.wrong).sum();
    let failed = lines.iter().flatten().any(Option::is_none);
    let avg = if all.is_empty() {
        0.0
    } else {
        all.iter().map(|r| r.busbw).sum::<f64>() / all.len() as f64
    };
    format!(
        "# Out of bounds values : {wrong} {}\n# Avg bus bandwidth    : {} \n#\n",
        if wrong > 0 || failed { "FAILED" } else { "OK" },
        fmt_g(avg)
    )
}

/// C's `%g`: six significant digits, no trailing zeros.
pub fn fmt_g(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    let exp = v.abs().log10().floor() as i32;
    if !(-5..6).contains(&exp) {
        let s = format!("{v:.5e}");
        return s;
    }
    let decimals = (5 - exp).max(0) as usize;
    let s = format!("{v:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sweeps_walk_like_nccl_tests() {
        let mut o = BenchOpts::new(Collective::AllReduce);
        o.min_bytes = 8;
        o.max_bytes = 256 << 20;
        o.step_factor = 2;
        let s = o.sizes();
        assert_eq!((s.len(), s[0], *s.last().unwrap()), (26, 8, 256 << 20));
        o.step_factor = 0;
        o.min_bytes = 1000;
        o.max_bytes = 4000;
        o.step_bytes = 1000;
        assert_eq!(o.sizes(), [1000, 2000, 3000, 4000]);
        assert_eq!(parse_size("256M"), Ok(256 << 20));
        assert_eq!(parse_size("8"), Ok(8));
        assert!(parse_size("x").is_err());
        o.dtypes = vec![DataType::Float, DataType::Int8];
        o.ops = RedOp::ALL.to_vec();
        assert_eq!(o.rows(4).unwrap().len(), 2 * 5 * 4);
    }

    #[test]
    fn lines_fold_ranks_and_print_like_nccl_tests() {
        let spec = OpSpec::for_size(
            Collective::AllReduce,
            DataType::Float,
            RedOp::Sum,
            1 << 20,
            2,
            1 << 18,
        )
        .unwrap();
        let rank = |t: f64, w: u64| RankReport {
            rows: vec![[
                Measure {
                    time_ns: Some(t),
                    wrong: Some(w),
                    timed_start_ns: None,
                },
                Measure {
                    time_ns: Some(t),
                    wrong: None,
                    timed_start_ns: None,
                },
            ]],
            ..RankReport::default()
        };
        let ranks = [rank(1000.0, 0), rank(3000.0, 2)];
        let oop = fold_line(&spec, &ranks, 0, 0).unwrap();
        assert_eq!((oop.time_us, oop.wrong), (2.0, Some(2)));
        assert!((oop.algbw - 524.288).abs() < 1e-9 && (oop.busbw - 524.288).abs() < 1e-9);
        let ip = fold_line(&spec, &ranks, 0, 1).unwrap();
        assert_eq!(ip.wrong, None);
        let text = line(&spec, -1, [Some(oop), Some(ip)]);
        assert_eq!(
            text,
            "     1048576        262144     float     sum      -1     2.00  524.29  524.29      2     2.00  524.29  524.29    N/A"
        );
        let f = footer(&[[Some(oop), Some(ip)]]);
        assert!(
            f.starts_with("# Out of bounds values : 2 FAILED\n# Avg bus bandwidth    : 524.288 \n")
        );
        assert_eq!(fmt_g(0.5), "0.5");
        assert_eq!(fmt_g(123.456789), "123.457");
    }
}
