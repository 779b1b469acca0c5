//! `mrc_write_latency_seconds{host}`: write_lat's one-way latencies (half of each round trip,
//! as the table's t_typical and friends), every sample observed (docs/metrics.md).

use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// The agreed buckets, seconds (`+Inf` is implied).
pub const BUCKETS: [f64; 13] = [
    1e-6, 2e-6, 5e-6, 1e-5, 2e-5, 5e-5, 1e-4, 2e-4, 5e-4, 1e-3, 2e-3, 5e-3, 1e-2,
];

fn histogram() -> Histogram {
    Histogram::new(BUCKETS)
}

type Labels = Vec<(String, String)>;

/// The histogram family: cumulative over the run; rendered once anything was observed.
#[derive(Debug)]
pub struct Latency {
    family: Family<Labels, Histogram, fn() -> Histogram>,
    used: std::sync::atomic::AtomicBool,
}

impl Default for Latency {
    fn default() -> Self {
        Self {
            family: Family::new_with_constructor(histogram),
            used: std::sync::atomic::AtomicBool::new(false),
        }
    }
}

impl Latency {
    /// Observe one-way latencies (seconds) measured by `host`.
    /// A host without samples (the ponging side) gets no series.
    pub fn observe(&self, host: &str, seconds: impl IntoIterator<Item = f64>) {
        let mut seconds = seconds.into_iter().peekable();
        if seconds.peek().is_none() {
            return;
        }
        let h = self
            .family
            .get_or_create(&vec![("host".to_owned(), host.to_owned())])
            .clone();
        for s in seconds {
            h.observe(s);
        }
        self.used.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Observe round trips (ns) measured by host `host` as one-way latencies: half of each,
    /// as the table's t_typical.
    pub fn observe_round_trips(&self, host: u32, rtts_ns: &[u64]) {
        self.observe(
            &format!("h{host}"),
            rtts_ns.iter().map(|&ns| ns as f64 / 2e9),
        );
    }

    pub fn register(&self, reg: &mut Registry) {
        if self.used.load(std::sync::atomic::Ordering::Relaxed) {
            reg.register(
                "mrc_write_latency_seconds",
                "One-way write latency (half the round trip), seconds, every sample",
                self.family.clone(),
            );
        }
    }
}
