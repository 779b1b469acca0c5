//! Shared by the EAL tests (each a `harness = false` binary: `rte_eal_init` runs once per
//! process). EAL arguments for CI, test frames, cleanup guards.
#![allow(dead_code)] // each test binary uses a different part

use std::path::PathBuf;
use std::time::{Duration, Instant};

use mrc_dpdk::{Eal, Error, Mbuf, Mempool};

/// A `--file-prefix` no other process uses.
pub fn unique_prefix(tag: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("mrc-{tag}-{}-{nanos}", std::process::id())
}

/// EAL arguments for tests: no hugepages, no PCI scan, no shared config, one lcore, quiet.
pub fn eal_args(prefix: &str, lcores: &str, vdevs: &[String]) -> Vec<String> {
    let mut args: Vec<String> = [
        "--no-huge",
        "--no-pci",
        "--no-shconf",
        "--no-telemetry",
        "-m",
        "256",
        "-l",
        lcores,
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
pub fn init_eal(args: &[String]) -> Result<Eal, String> {
    match Eal::init(args) {
        Ok(eal) => Ok(eal),
        Err(e @ Error::NotBuilt { .. }) => Err(e.to_string()),
        Err(e) => panic!("Eal::init failed: {e}"),
    }
}

/// Removes this process's DPDK runtime directory (EAL creates it even with `--no-shconf`).
pub struct RuntimeDirGuard(pub PathBuf);

impl RuntimeDirGuard {
    pub fn new(eal: &Eal) -> Self {
        Self(eal.runtime_dir())
    }
}

impl Drop for RuntimeDirGuard {
    fn drop(&mut self) {
        // Only our own unique prefix: `.../dpdk/mrc-<tag>-<pid>-<nanos>`.
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
pub struct ChildGuard(pub Option<std::process::Child>);

impl ChildGuard {
    /// Waits up to `limit` for the child; kills it after that. `None` if it had to be killed.
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

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Some(child) = self.0.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

// ---- test frames ----------------------------------------------------------------------------
//
// | dst MAC 6 | src MAC 6 | EtherType 0x88b5 (local experimental) | seq u64 | body ... | FNV-1a u32 |
// The body is a pattern of the sequence number; the checksum covers everything before it.

pub const ETHERTYPE: u16 = 0x88b5;
const HEADER: usize = 14 + 8;
pub const MIN_FRAME: usize = HEADER + 4;

pub fn fnv1a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5_u32, |h, &b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

/// A deterministic frame size in `min..=max` for sequence number `seq`.
pub fn frame_len(seq: u64, min: usize, max: usize) -> usize {
    let span = (max - min + 1) as u64;
    min + (seq.wrapping_mul(2_654_435_761) % span) as usize
}

/// Writes test frame `seq` of `len` bytes into `buf`.
pub fn fill_frame(buf: &mut [u8], seq: u64) {
    let len = buf.len();
    assert!(len >= MIN_FRAME);
    buf[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x02]);
    buf[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x01]);
    buf[12..14].copy_from_slice(&ETHERTYPE.to_be_bytes());
    buf[14..22].copy_from_slice(&seq.to_be_bytes());
    for (i, b) in buf[HEADER..len - 4].iter_mut().enumerate() {
        *b = (seq as u8).wrapping_add(i as u8).wrapping_mul(31);
    }
    let sum = fnv1a(&buf[..len - 4]);
    buf[len - 4..].copy_from_slice(&sum.to_be_bytes());
}

/// A test frame in a fresh mbuf.
pub fn frame_mbuf(pool: &Mempool, seq: u64, len: usize) -> Mbuf {
    let mut m = pool.alloc().expect("mbuf");
    fill_frame(m.append(len).expect("room for the frame"), seq);
    m
}

/// Checks a received test frame; returns its sequence number. `None` for a frame that is not
/// ours (other EtherType); `Err` for one of ours that is damaged.
pub fn check_frame(frame: &[u8]) -> Option<Result<u64, String>> {
    if frame.len() < 14 || frame[12..14] != ETHERTYPE.to_be_bytes() {
        return None;
    }
    if frame.len() < MIN_FRAME {
        return Some(Err(format!("short frame of {} bytes", frame.len())));
    }
    let (body, sum) = frame.split_at(frame.len() - 4);
    if fnv1a(body).to_be_bytes() != sum {
        return Some(Err(format!("bad checksum on a {}-byte frame", frame.len())));
    }
    Some(Ok(u64::from_be_bytes(
        frame[14..22].try_into().expect("8 bytes"),
    )))
}
