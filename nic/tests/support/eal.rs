//! EAL helpers of the DPDK tests (each a `harness = false` binary: `rte_eal_init` runs once per
//! process): arguments for CI, unique names, cleanup guards.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use mrc_dpdk::{Eal, Error};

/// A name no other process uses (file prefixes, memif sockets, namespaces).
pub fn unique(tag: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("mrc-{tag}-{}-{}", std::process::id(), nanos % 1_000_000)
}

/// The EAL's cores: lcore 0 floating over the first two CPUs when there are two (threads the
/// test starts inherit that set), else CPU 0.
pub fn lcores() -> String {
    if std::thread::available_parallelism().map_or(1, usize::from) >= 2 {
        "--lcores=0@(0-1)".to_owned()
    } else {
        "--lcores=0@0".to_owned()
    }
}

/// EAL arguments for tests: no hugepages, no PCI scan, no shared config, quiet.
pub fn eal_args(prefix: &str, cores: &str, vdevs: &[String]) -> Vec<String> {
    let mut args: Vec<String> = [
        "--no-huge",
        "--no-pci",
        "--no-shconf",
        "--no-telemetry",
        "-m",
        "512",
        cores,
        "--log-level=lib.eal:error",
        "--file-prefix",
        prefix,
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    args.extend(vdevs.iter().map(|v| format!("--vdev={v}")));
    args
}

/// Initialises the EAL, or says why the test must skip (DPDK not built in).
pub fn init(args: &[String]) -> Result<Eal, String> {
    match Eal::init(args) {
        Ok(eal) => Ok(eal),
        Err(e @ Error::NotBuilt { .. }) => Err(e.to_string()),
        Err(e) => panic!("Eal::init failed: {e}"),
    }
}

/// Removes this process's DPDK runtime directory (EAL creates it even with `--no-shconf`).
pub struct RuntimeDir(pub PathBuf);

impl RuntimeDir {
    pub fn of(eal: &Eal) -> Self {
        Self(eal.runtime_dir())
    }
}

impl Drop for RuntimeDir {
    fn drop(&mut self) {
        // Only our own unique prefix.
        if self
            .0
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("mrc-"))
        {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// Kills and reaps a child process if the test ends before it did.
pub struct Child(pub Option<std::process::Child>);

impl Child {
    /// Waits up to `limit` for the child; `None` if it had to be killed.
    pub fn wait_for(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let child = self.0.as_mut()?;
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = child.try_wait() {
                self.0 = None;
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        if let Some(child) = self.0.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
