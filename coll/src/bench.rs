//! The nccl-tests side of the benchmark (peers.md §5.2): which operations a command line asks
//! for (`-b -e -f -i -n -m -w -c -d -o -r -N`), how the ranks' measurements fold into one line
//! (time averaged over ranks or as `-a` says, wrong elements summed), and the table
//! nccl-tests prints: a header, `size count type redop root` and for out-of-place then
//! in-place `time algbw busbw #wrong`, then "Out of bounds values" and "Avg bus bandwidth"
//! (nccl-tests' strings and number formats). GB/s are 10^9 bytes per second.

use std::fmt::Write as _;

use crate::dtype::{DataType, RedOp};
use crate::program::{Blocking, Measure, RankReport, Row};
use crate::spec::{Collective, DEFAULT_SLICE_BYTES, OpSpec, SpecError};

/// Sizes a sweep may have (`-b`..`-e` by `-i` or `-f`).
pub const MAX_SIZES: usize = 10_000;

/// nccl-tests' `-a`: how the ranks' times fold into a line's time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Average {
    /// 0: rank 0's.
    Rank0,
    /// 1: the mean over the ranks (nccl-tests' default).
    #[default]
    Mean,
    /// 2: the smallest.
    Min,
    /// 3: the largest.
    Max,
}

impl Average {
    /// The mode of nccl-tests' number.
    pub const fn from_code(code: u8) -> Option<Self> {
        match code {
            0 => Some(Self::Rank0),
            1 => Some(Self::Mean),
            2 => Some(Self::Min),
            3 => Some(Self::Max),
            _ => None,
        }
    }

    /// Folds the ranks' times (in rank order; not empty).
    pub fn fold(self, times: &[f64]) -> f64 {
        match self {
            Self::Rank0 => times[0],
            Self::Mean => times.iter().sum::<f64>() / times.len() as f64,
            Self::Min => times.iter().copied().fold(f64::INFINITY, f64::min),
            Self::Max => times.iter().copied().fold(0.0, f64::max),
        }
    }
}

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
    /// `-m`: operations per timed iteration.
    pub agg_iters: u32,
    /// `-w`.
    pub warmup: u32,
    /// `-c`: checked operations per line (0: none).
    pub checks: u32,
    /// `-d` (several with `all`).
    pub dtypes: Vec<DataType>,
    /// `-o` (several with `all`).
    pub ops: Vec<RedOp>,
    /// `-r` of a rooted collective (`None`: nccl-tests' `-1`, every root in turn).
    pub root: Option<usize>,
    /// `-z`.
    pub blocking: Blocking,
    /// `-a`.
    pub average: Average,
    /// `-N`: the sweep this many times.
    pub run_cycles: u32,
    /// `-T` (`None`: no limit).
    pub timeout_secs: Option<u64>,
    /// Bytes per Write-with-Immediate.
    pub slice_bytes: u64,
}

impl BenchOpts {
    /// nccl-tests' defaults: 32 MB, 20 iterations, 1 warm-up, check on, float, sum, every
    /// root.
    pub fn new(coll: Collective) -> Self {
        Self {
            coll,
            min_bytes: 32 << 20,
            max_bytes: 32 << 20,
            step_factor: 1,
            step_bytes: 1 << 20,
            iters: 20,
            agg_iters: 1,
            warmup: 1,
            checks: 1,
            dtypes: vec![DataType::Float],
            ops: vec![RedOp::Sum],
            root: None,
            blocking: Blocking::No,
            average: Average::Mean,
            run_cycles: 1,
            timeout_secs: None,
            slice_bytes: DEFAULT_SLICE_BYTES,
        }
    }

    /// The sizes of the sweep, as nccl-tests walks them (at most [`MAX_SIZES`]).
    pub fn sizes(&self) -> Vec<u64> {
        self.sizes_upto(MAX_SIZES)
    }

    /// The sweep has more than [`MAX_SIZES`] sizes (a command line to refuse).
    pub fn too_many_sizes(&self) -> bool {
        self.sizes_upto(MAX_SIZES + 1).len() > MAX_SIZES
    }

    fn sizes_upto(&self, limit: usize) -> Vec<u64> {
        let mut out = Vec::new();
        let mut size = self.min_bytes;
        while size <= self.max_bytes && out.len() < limit {
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

    /// Every operation of the run, in nccl-tests' order (type, operator, root, cycle, size).
    pub fn rows(&self, nranks: usize) -> Result<Vec<Row>, SpecError> {
        let ops: Vec<RedOp> = if self.coll.reduces() {
            self.ops.clone()
        } else {
            vec![RedOp::Sum]
        };
        let roots: Vec<Option<usize>> = match (self.coll.rooted(), self.root) {
            (false, None) => vec![None],
            (true, None) => (0..nranks).map(Some).collect(),
            (_, Some(r)) => vec![Some(r)],
        };
        let sizes = self.sizes();
        let mut rows = Vec::new();
        for &dtype in &self.dtypes {
            for &op in &ops {
                for &root in &roots {
                    for _ in 0..self.run_cycles.max(1) {
                        for &size in &sizes {
                            let spec = OpSpec::for_size(
                                self.coll,
                                dtype,
                                op,
                                size,
                                nranks,
                                root,
                                self.slice_bytes,
                            )?;
                            rows.push(Row { spec });
                        }
                    }
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

/// Folds the ranks' measurements of row `row` (placement `p`: 0 out-of-place, 1 in-place),
/// their times as `average` says. `None` unless every rank measured a time above zero.
pub fn fold_line(
    spec: &OpSpec,
    ranks: &[RankReport],
    row: usize,
    p: usize,
    average: Average,
) -> Option<LineResult> {
    let measures: Vec<Measure> = ranks.iter().map(|r| r.rows[row][p]).collect();
    let times: Vec<f64> = measures.iter().filter_map(|m| m.time_ns).collect();
    if times.len() != ranks.len() || times.is_empty() || times.iter().any(|&t| t <= 0.0) {
        return None;
    }
    let secs = average.fold(&times) / 1e9;
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

/// The `root` column: the root, or nccl-tests' -1 for a collective without one.
pub fn root_column(spec: &OpSpec) -> i64 {
    spec.root.map_or(-1, |r| r as i64)
}

/// One line of the table.
pub fn line(spec: &OpSpec, results: [Option<LineResult>; 2]) -> String {
    let redop = spec.op.map_or("none", RedOp::name);
    let mut s = format!(
        "{:>12}  {:>12}  {:>8}  {:>6}  {:>6}",
        spec.size_bytes(),
        spec.count,
        spec.dtype.name(),
        redop,
        root_column(spec)
    );
    for r in results {
        match r {
            Some(r) => {
                let time = if r.time_us >= 10_000.0 {
                    format!("{:.0}", r.time_us)
                } else if r.time_us >= 100.0 {
                    format!("{:.1}", r.time_us)
                } else {
                    format!("{:.2}", r.time_us)
                };
                let wrong = r
                    .wrong
                    .map_or_else(|| "N/A".to_owned(), |w| fmt_g(w as f64));
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

/// C's `%g`: six significant digits, no trailing zeros, `1e+06` past them.
pub fn fmt_g(v: f64) -> String {
    fn trim(s: &str) -> &str {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.')
        } else {
            s
        }
    }
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    // The exponent after rounding to six significant digits.
    let sci = format!("{v:.5e}");
    let (mantissa, exp) = sci.split_once('e').expect("an exponent");
    let exp: i32 = exp.parse().expect("a number");
    if !(-4..6).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        return format!("{}e{sign}{:02}", trim(mantissa), exp.abs());
    }
    let decimals = (5 - exp).max(0) as usize;
    trim(&format!("{v:.decimals$}")).to_owned()
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
        o.run_cycles = 2;
        assert_eq!(o.rows(4).unwrap().len(), 2 * 5 * 2 * 4);
        // Rooted: every root in turn (type, operator, root, size), or the one asked for.
        let mut o = BenchOpts::new(Collective::Reduce);
        o.min_bytes = 64;
        o.max_bytes = 128;
        o.step_factor = 2;
        o.ops = vec![RedOp::Sum, RedOp::Max];
        let roots: Vec<usize> = o
            .rows(3)
            .unwrap()
            .iter()
            .map(|r| r.spec.root.unwrap())
            .collect();
        assert_eq!(roots, [0, 0, 1, 1, 2, 2, 0, 0, 1, 1, 2, 2]);
        o.root = Some(2);
        assert_eq!(o.rows(3).unwrap().len(), 2 * 2);
        assert_eq!(
            o.rows(2).unwrap_err(),
            SpecError::BadRoot { root: 2, nranks: 2 }
        );
        // The sweep's length is bounded, and a longer one is said to be so.
        o.min_bytes = 1;
        o.max_bytes = 1 << 20;
        o.step_factor = 0;
        o.step_bytes = 1;
        assert!(o.too_many_sizes());
        assert_eq!(o.sizes().len(), MAX_SIZES);
        o.step_bytes = 1 << 10;
        assert!(!o.too_many_sizes());
    }

    #[test]
    fn lines_fold_ranks_and_print_like_nccl_tests() {
        let spec = OpSpec::for_size(
            Collective::AllReduce,
            DataType::Float,
            RedOp::Sum,
            1 << 20,
            2,
            None,
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
        let oop = fold_line(&spec, &ranks, 0, 0, Average::Mean).unwrap();
        assert_eq!((oop.time_us, oop.wrong), (2.0, Some(2)));
        assert!((oop.algbw - 524.288).abs() < 1e-9 && (oop.busbw - 524.288).abs() < 1e-9);
        let ip = fold_line(&spec, &ranks, 0, 1, Average::Mean).unwrap();
        assert_eq!(ip.wrong, None);
        for (a, us) in [
            (Average::Rank0, 1.0),
            (Average::Min, 1.0),
            (Average::Max, 3.0),
        ] {
            assert_eq!(
                fold_line(&spec, &ranks, 0, 0, a).unwrap().time_us,
                us,
                "{a:?}"
            );
        }
        // A rank that measured no time (or none at all) leaves the line unmeasured.
        let zero = [rank(0.0, 0), rank(3000.0, 0)];
        assert_eq!(fold_line(&spec, &zero, 0, 0, Average::Mean), None);
        let text = line(&spec, [Some(oop), Some(ip)]);
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
        assert_eq!(fmt_g(2.0), "2");
        assert_eq!(fmt_g(1_234_567.0), "1.23457e+06");
        assert_eq!(fmt_g(999_999.5), "1e+06");
        assert_eq!(fmt_g(0.000_012_5), "1.25e-05");
        assert_eq!(fmt_g(0.000_125), "0.000125");
    }
}
