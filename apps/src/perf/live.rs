//! Live per-plane bandwidth on stderr while a test runs: the payload each plane delivered
//! (placed at the receiving hosts, duplicates excluded) over the last sample, so a failed
//! path shows as a dip on its plane; then the retransmissions so far and the EVs out of
//! service. Stdout keeps perftest's tables for scripts.

use std::fmt::Write as _;
use std::io::Write as _;

use crate::metrics::counters::Snapshot;

/// Live per-plane bandwidth on stderr, one line per sample.
#[derive(Debug)]
pub struct Live {
    last_ns: u64,
    last_rx: Vec<u64>,
    /// Samples closer than this to the previous one (the end of a run) are not printed.
    min_ns: u64,
    /// Whose NIC the line is (under mpirun every rank prints its own host's line).
    label: Option<String>,
}

impl Live {
    pub fn new(planes: u8, min_ns: u64) -> Self {
        Self {
            last_ns: 0,
            last_rx: vec![0; usize::from(planes)],
            min_ns: min_ns.max(1),
            label: None,
        }
    }

    /// Lines start with `label` (`h3`: host 3's NIC alone).
    pub fn labelled(mut self, label: Option<String>) -> Self {
        self.label = label;
        self
    }

    pub fn print(&mut self, snap: &Snapshot) {
        let dt = snap.at_ns.saturating_sub(self.last_ns);
        if dt < self.min_ns {
            return;
        }
        let rows = snap.planes();
        let mut line = format!("[{:>9.3} ms]", snap.at_ns as f64 / 1e6);
        if let Some(l) = &self.label {
            let _ = write!(line, " {l}");
        }
        let mut retx = 0;
        let mut bad = 0;
        for r in &rows {
            let p = usize::from(r.plane);
            let prev = self.last_rx.get(p).copied().unwrap_or(0);
            let gbps = (r.rx_bytes - prev) as f64 * 8.0 / dt as f64;
            let _ = write!(line, " plane{} {gbps:6.1}", r.plane);
            if let Some(x) = self.last_rx.get_mut(p) {
                *x = r.rx_bytes;
            }
            retx += r.retransmits;
            bad += r.evs_retired.saturating_sub(r.evs_restored);
        }
        let _ = write!(line, " Gb/s delivered | retx {retx} | EVs out {bad}");
        self.last_ns = snap.at_ns;
        let _ = writeln!(std::io::stderr(), "{line}");
    }
}
