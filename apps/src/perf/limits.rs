//! What a run needs from the machine, checked before anything is allocated: the registered
//! buffers of every host this process runs, against the memory the machine has available.

use std::path::Path;

use super::backend::layout;
use super::settings::{BackendKind, Settings};
use crate::bail_usage;

/// The share of the available memory a run may register (the rest is the engines', the
/// simulator's and everyone else's).
const MAX_SHARE: f64 = 0.8;

/// Bytes this process registers for the largest size of the run: each host's sources and
/// destinations (under `--check` the destinations keep one bit per byte, not the bytes).
pub fn memory_needed(s: &Settings) -> u64 {
    let hosts: u64 = match s.backend {
        BackendKind::Sim | BackendKind::Mem => 2,
        BackendKind::Dpdk => 1,
    };
    let l = layout(s, s.max_size());
    let per_host = if s.check {
        l.src_bytes() + l.src_bytes() / 8
    } else {
        l.registered_bytes()
    };
    per_host.saturating_mul(hosts)
}

/// `MemAvailable` of `/proc/meminfo`, lowered to the cgroup's limit if it has one.
pub fn memory_available() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib: u64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    let mut avail = kib.saturating_mul(1024);
    for f in [
        "/sys/fs/cgroup/memory.max",
        "/sys/fs/cgroup/memory/memory.limit_in_bytes",
    ] {
        if let Some(limit) = read_u64(Path::new(f)) {
            let used = read_u64(Path::new("/sys/fs/cgroup/memory.current")).unwrap_or(0);
            avail = avail.min(limit.saturating_sub(used));
        }
    }
    Some(avail)
}

fn read_u64(p: &Path) -> Option<u64> {
    std::fs::read_to_string(p).ok()?.trim().parse().ok()
}

fn gib(b: u64) -> String {
    format!("{:.1} GiB", b as f64 / f64::from(1u32 << 30))
}

/// Refuse a run whose buffers do not fit in `available` bytes, naming what to lower.
pub fn check_memory(s: &Settings, available: Option<u64>) -> anyhow::Result<()> {
    let need = memory_needed(s);
    let Some(avail) = available else {
        return Ok(());
    };
    if need as f64 > avail as f64 * MAX_SHARE {
        let hosts = if s.backend == BackendKind::Dpdk { 1 } else { 2 };
        let slots = if s.check {
            format!(" x {} slots (--check: one per -t)", s.tx_depth)
        } else {
            String::new()
        };
        bail_usage!(
            "the buffers need {} ({} host(s) x {} QPs x {} bytes{slots}) and this machine has {} \
             available: use a smaller -s, fewer -q{}",
            gib(need),
            hosts,
            s.qps,
            s.max_size(),
            gib(avail),
            if s.check { ", a smaller -t" } else { "" }
        );
    }
    Ok(())
}

/// [`check_memory`] for a traffic pattern, whose hosts run `host_qps` QPs in all.
pub fn check_pattern_memory(
    s: &Settings,
    host_qps: u64,
    available: Option<u64>,
) -> anyhow::Result<()> {
    let l = layout(s, s.max_size());
    let per_qp = l.src_bytes() / u64::from(l.qps.max(1));
    let need = if s.check {
        per_qp + per_qp / 8
    } else {
        2 * per_qp
    }
    .saturating_mul(host_qps);
    let Some(avail) = available else {
        return Ok(());
    };
    if need as f64 > avail as f64 * MAX_SHARE {
        bail_usage!(
            "the buffers need {} ({host_qps} QPs over every host x {} bytes{}) and this machine \
             has {} available: use a smaller -s, fewer -q, fewer --hosts or a sparser --pattern",
            gib(need),
            s.max_size(),
            if s.check { " x -t slots" } else { "" },
            gib(avail)
        );
    }
    Ok(())
}

/// Make sure `--out_json_file` can be written before the run, not after it.
pub fn check_output(s: &Settings) -> anyhow::Result<()> {
    if let Some(p) = &s.out_json_file
        && let Err(e) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(p)
    {
        bail_usage!(
            "--out_json_file {}: cannot write it ({e}): give a path in a writable folder",
            p.display()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(args: &[&str]) -> Settings {
        super::super::cli::parse(args).unwrap()
    }

    #[test]
    fn a_run_that_does_not_fit_is_refused_by_name() {
        let s = settings(&["-s", "1073741824", "-q", "16", "-n", "1"]);
        assert_eq!(memory_needed(&s), 64 << 30);
        let e = check_memory(&s, Some(24 << 30)).unwrap_err();
        assert!(crate::tool::is_usage(&e));
        let m = e.to_string();
        assert!(
            m.contains("64.0 GiB") && m.contains("-s") && m.contains("-q"),
            "{m}"
        );
        assert!(check_memory(&settings(&[]), Some(24 << 30)).is_ok());
        assert!(check_memory(&s, None).is_ok(), "no figure, no refusal");
    }

    #[test]
    fn check_mode_counts_its_slots() {
        let s = settings(&["--check", "-s", "1048576", "-t", "64"]);
        assert_eq!(memory_needed(&s), 2 * ((64 << 20) + (8 << 20)));
        let e = check_memory(&s, Some(100 << 20)).unwrap_err().to_string();
        assert!(e.contains("-t"), "{e}");
    }

    #[test]
    fn this_machine_reports_its_memory() {
        assert!(memory_available().is_some_and(|m| m > 0));
    }
}
