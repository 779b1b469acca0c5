//! The CPU time a NIC thread used, read from Linux's `/proc` (no `unsafe`, no libc): the
//! thread learns its own id from `/proc/thread-self` when it starts; anyone may then read
//! `/proc/self/task/<tid>/schedstat` (nanoseconds on CPU), or `stat` (utime + stime in clock
//! ticks) where schedstat is not built in.

use std::time::Duration;

/// `/proc`'s clock tick: `USER_HZ`, 100 on every Linux architecture (proc(5)).
const USER_HZ: u64 = 100;

/// The calling thread's id, or `None` off Linux.
pub(crate) fn current_tid() -> Option<u32> {
    let link = std::fs::read_link("/proc/thread-self").ok()?;
    link.file_name()?.to_str()?.parse().ok()
}

/// CPU time of thread `tid` of this process so far; `None` once it exited, or off Linux.
pub(crate) fn thread_cpu_time(tid: u32) -> Option<Duration> {
    let task = format!("/proc/self/task/{tid}");
    if let Ok(s) = std::fs::read_to_string(format!("{task}/schedstat"))
        && let Some(ns) = parse_schedstat(&s)
    {
        return Some(Duration::from_nanos(ns));
    }
    let stat = std::fs::read_to_string(format!("{task}/stat")).ok()?;
    parse_stat_ticks(&stat).map(|t| Duration::from_millis(t * 1000 / USER_HZ))
}

/// The first field of `schedstat`: nanoseconds spent on a CPU.
fn parse_schedstat(s: &str) -> Option<u64> {
    s.split_whitespace().next()?.parse().ok()
}

/// utime + stime (fields 14 and 15 of `stat`), in clock ticks. The command name (field 2)
/// is in parentheses and may hold spaces, so fields are counted after its closing one.
fn parse_stat_ticks(s: &str) -> Option<u64> {
    let rest = &s[s.rfind(')')? + 1..];
    let mut f = rest.split_whitespace().skip(11);
    let utime: u64 = f.next()?.parse().ok()?;
    let stime: u64 = f.next()?.parse().ok()?;
    Some(utime + stime)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_formats_parse() {
        assert_eq!(parse_schedstat("123456789 4242 17\n"), Some(123_456_789));
        assert_eq!(parse_schedstat(""), None);
        // pid (comm with spaces) state ppid pgrp session tty tpgid flags minflt cminflt
        // majflt cmajflt utime stime ...
        let stat = "4321 (mrc nic (0)) R 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0 1 0";
        assert_eq!(parse_stat_ticks(stat), Some(300));
        assert_eq!(parse_stat_ticks("garbage"), None);
    }

    #[test]
    fn a_busy_thread_has_cpu_time() {
        let Some(tid) = current_tid() else {
            return; // not Linux
        };
        let before = thread_cpu_time(tid).expect("this thread's CPU time");
        // Spin until the kernel has counted some of it (at a scheduler tick, however long the
        // machine's load keeps this thread off a CPU), a minute at most.
        let mut x = 0u64;
        let deadline = std::time::Instant::now() + Duration::from_mins(1);
        loop {
            for _ in 0..100_000 {
                x = std::hint::black_box(x.wrapping_add(1));
            }
            let after = thread_cpu_time(tid).expect("this thread's CPU time");
            if after > before {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{before:?} -> {after:?}"
            );
        }
    }
}
