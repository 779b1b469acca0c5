//! The telemetry sinks of a tool, from one set of flags ([`TelemetryArgs`], flattened into
//! mrc-perf's and mrc-coll's command lines; docs/metrics.md): the `--metrics` scrape server,
//! the Pushgateway pusher (`--push`), the node_exporter textfile (`--metrics-textfile`), the
//! rate gauges and the sample series (`--sample-every`).
//!
//! A tool checks the flags at startup ([`TelemetryArgs::config`]: a bad value is one line,
//! exit 2), builds a [`Telemetry`] with its constant labels, calls [`Telemetry::sample`] at
//! every counter sample of its backend and [`Telemetry::finish`] once at the end. A sink that
//! fails during the run (the gateway down, the directory gone) is one stderr line per kind of
//! failure; the run goes on.

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use mrc_transport::Duration;

use super::Exporter;
use super::counters::Snapshot;
use super::push::{PushUrl, Pusher};
use super::server::MetricsServer;
use super::textfile::Textfile;
use crate::units::parse_duration;

/// The telemetry flags, the same in every tool.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct TelemetryArgs {
    /// Serve Prometheus metrics on this address (e.g. 127.0.0.1:9464, localhost:0) during
    /// the run.
    #[arg(long)]
    pub metrics: Option<String>,
    /// With --metrics: keep the endpoint up this long after the run (e.g. 5s), so a
    /// scraper sees the final values.
    #[arg(long = "metrics-linger")]
    pub metrics_linger: Option<String>,
    /// Push the metrics to this Prometheus Pushgateway (http://HOST:PORT[/PATH]) at the end
    /// (and every --push-every).
    #[arg(long)]
    pub push: Option<String>,
    /// Push this often during the run too (wall time, e.g. 1s, 500ms; default: only at the end).
    #[arg(long = "push-every", requires = "push")]
    pub push_every: Option<String>,
    /// The Pushgateway job (default: the tool's name).
    #[arg(long = "push-job", requires = "push")]
    pub push_job: Option<String>,
    /// The Pushgateway instance (default: the host name; mrc-coll: HOSTNAME-rRANK).
    #[arg(long = "push-instance", requires = "push")]
    pub push_instance: Option<String>,
    /// Delete the pushed group at the end (default: keep it, so Prometheus sees the final
    /// counters).
    #[arg(long = "push-delete", requires = "push")]
    pub push_delete: bool,
    /// Write DIR/mrc.prom (node_exporter's textfile collector) at every sample, atomically.
    #[arg(long = "metrics-textfile", value_name = "DIR")]
    pub metrics_textfile: Option<PathBuf>,
    /// Sample the counters this often (>= 1ms real, >= 1us simulated): the rate gauges, the
    /// textfile and the JSON samples (default: the live lines' period).
    #[arg(long = "sample-every")]
    pub sample_every: Option<String>,
}

/// The floor of `--sample-every`: a simulated microsecond, or a real millisecond.
pub fn sample_floor(simulated: bool) -> Duration {
    if simulated {
        Duration::from_micros(1)
    } else {
        Duration::from_millis(1)
    }
}

/// The checked telemetry flags.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TelemetryConfig {
    pub metrics: Option<SocketAddr>,
    /// `--metrics-linger`: how long the endpoint stays up after the run.
    pub metrics_linger: Option<std::time::Duration>,
    pub push: Option<PushUrl>,
    pub push_every: Option<std::time::Duration>,
    pub push_job: String,
    pub push_instance: String,
    pub push_delete: bool,
    pub textfile: Option<PathBuf>,
    /// The file written in `textfile` (mrc-perf: `mrc.prom`; mrc-coll: `mrc-coll-rRANK.prom`).
    pub textfile_name: String,
    /// `--sample-every` (`None`: the tool's default period).
    pub sample_every: Option<Duration>,
    /// The counters advance in simulated time.
    pub simulated: bool,
}

impl TelemetryConfig {
    /// A sink is on: the backend must sample.
    pub fn any_sink(&self) -> bool {
        self.metrics.is_some() || self.push.is_some() || self.textfile.is_some()
    }
}

/// The machine's host name (`/proc/sys/kernel/hostname`, else `$HOSTNAME`, else `localhost`).
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".to_owned())
}

impl TelemetryArgs {
    /// Check the flags. `tool` is the default job, `instance` the default instance
    /// (mrc-perf: the host name; mrc-coll: `HOSTNAME-rRANK`); `simulated` picks the floor of
    /// `--sample-every`. The error is one line (the caller turns it into exit 2).
    pub fn config(
        &self,
        tool: &str,
        instance: &str,
        simulated: bool,
    ) -> anyhow::Result<TelemetryConfig> {
        let metrics = self.metrics.as_deref().map(resolve_metrics).transpose()?;
        if let (None, Some(t)) = (&self.metrics, &self.metrics_linger) {
            anyhow::bail!("--metrics-linger {t}: give --metrics ADDR too, or leave it out");
        }
        let metrics_linger = self
            .metrics_linger
            .as_deref()
            .map(|t| {
                parse_duration(t, 1e9)
                    .map(|d| std::time::Duration::from_nanos(d.0))
                    .map_err(|e| {
                        anyhow::anyhow!("--metrics-linger {t}: {e}: give a duration such as 5s")
                    })
            })
            .transpose()?;
        let push = self
            .push
            .as_deref()
            .map(PushUrl::parse)
            .transpose()
            .map_err(|e| anyhow::anyhow!(e))?;
        let push_every = self
            .push_every
            .as_deref()
            .map(|d| {
                let v = parse_duration(d, 1e9).map_err(|e| anyhow::anyhow!("--push-every {e}"))?;
                if v < Duration::from_millis(10) {
                    anyhow::bail!("--push-every {d}: at most one push per 10ms (e.g. 1s)");
                }
                Ok(std::time::Duration::from_nanos(v.0))
            })
            .transpose()?;
        for (flag, v) in [
            ("--push-job", &self.push_job),
            ("--push-instance", &self.push_instance),
        ] {
            if v.as_deref()
                .is_some_and(|s| s.is_empty() || s.contains('\n'))
            {
                anyhow::bail!("{flag}: give a non-empty name on one line");
            }
        }
        let textfile = match &self.metrics_textfile {
            Some(d) => {
                Textfile::new(d, super::textfile::FILE).map_err(|e| anyhow::anyhow!(e))?;
                Some(d.clone())
            }
            None => None,
        };
        let sample_every = self
            .sample_every
            .as_deref()
            .map(|d| {
                let v =
                    parse_duration(d, 1e9).map_err(|e| anyhow::anyhow!("--sample-every {e}"))?;
                let floor = sample_floor(simulated);
                if v < floor {
                    anyhow::bail!(
                        "--sample-every {d}: the finest is {} on this backend ({} time)",
                        if simulated { "1us" } else { "1ms" },
                        if simulated { "simulated" } else { "real" }
                    );
                }
                Ok(v)
            })
            .transpose()?;
        Ok(TelemetryConfig {
            metrics,
            metrics_linger,
            push,
            push_every,
            push_job: self.push_job.clone().unwrap_or_else(|| tool.to_owned()),
            push_instance: self
                .push_instance
                .clone()
                .unwrap_or_else(|| instance.to_owned()),
            push_delete: self.push_delete,
            textfile,
            textfile_name: super::textfile::FILE.to_owned(),
            sample_every,
            simulated,
        })
    }
}

/// `--metrics HOST:PORT`: a socket address or a name to resolve (`localhost:0`).
pub fn resolve_metrics(a: &str) -> anyhow::Result<SocketAddr> {
    use std::net::ToSocketAddrs as _;
    let mut addrs = a.to_socket_addrs().map_err(|e| {
        anyhow::anyhow!("--metrics {a}: not an address ({e}): give HOST:PORT, e.g. 127.0.0.1:9464")
    })?;
    addrs
        .next()
        .ok_or_else(|| anyhow::anyhow!("--metrics {a}: resolves to no address"))
}

/// One plane's delivered payload at one sample (the JSON `samples` series).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PlaneSample {
    pub plane: u8,
    /// Payload placed on the plane since the start, all hosts.
    pub bytes: u64,
    /// Over the sample before: Gb/s (10^9 bits per second).
    pub gbps: f64,
}

/// One sample of the JSON `samples` series.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Sample {
    /// Seconds since the run (of this message size) started; simulated in the simulator.
    pub t_s: f64,
    pub planes: Vec<PlaneSample>,
}

/// The most samples the JSON keeps (the first ones; `samples_dropped` counts the rest).
pub const MAX_SAMPLES: usize = 100_000;

/// The JSON sample series of a run (docs/metrics.md, "Resolution").
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SampleSeries {
    /// The first [`MAX_SAMPLES`] samples.
    pub samples: Vec<Sample>,
    /// The samples after those.
    pub dropped: u64,
    /// The sampling periods that ended without a sample (the sampler woke after their end).
    pub missed: u64,
}

/// The window of the peak rate gauge: one second.
const PEAK_WINDOW_NS: u64 = 1_000_000_000;

/// One (host, plane)'s rate state.
#[derive(Debug, Default)]
struct PlaneRate {
    /// Bytes placed at the last sample.
    last: u64,
    /// (sample time, rate) over the last second.
    window: VecDeque<(u64, f64)>,
}

/// The rate gauges' state: the last sample's counters, and per (host, plane) the rates of
/// the last second.
#[derive(Debug, Default)]
struct Rates {
    last_ns: u64,
    /// Per (host, plane).
    planes: BTreeMap<(u32, u8), PlaneRate>,
    /// Per plane, all hosts, at the last sample (the JSON series).
    last_plane: Vec<u64>,
}

/// One rate row: (host, plane, rate over the last sample, peak over the last second), B/s.
pub type RateRow = (u32, u8, f64, f64);

impl Rates {
    /// Take a sample; the rows for the gauges, and the JSON sample.
    fn update(&mut self, snap: &Snapshot) -> (Vec<RateRow>, Option<Sample>) {
        // A new message size restarts the clock and the counters: start over.
        if snap.at_ns < self.last_ns {
            *self = Self::default();
        }
        let dt = snap.at_ns - self.last_ns;
        let mut rows = Vec::new();
        for h in &snap.hosts {
            for p in &h.planes {
                let r = self.planes.entry((h.host, p.plane)).or_default();
                let rate = if dt > 0 {
                    p.rx_bytes.saturating_sub(r.last) as f64 * 1e9 / dt as f64
                } else {
                    0.0
                };
                r.last = p.rx_bytes;
                if dt > 0 {
                    r.window.push_back((snap.at_ns, rate));
                }
                while r
                    .window
                    .front()
                    .is_some_and(|&(t, _)| t + PEAK_WINDOW_NS < snap.at_ns)
                {
                    r.window.pop_front();
                }
                let peak = r.window.iter().map(|&(_, x)| x).fold(0.0, f64::max);
                rows.push((h.host, p.plane, rate, peak));
            }
        }
        let sample = (dt > 0).then(|| {
            let planes = snap.planes();
            let s = Sample {
                t_s: snap.at_ns as f64 / 1e9,
                planes: planes
                    .iter()
                    .map(|r| {
                        let prev = self
                            .last_plane
                            .get(usize::from(r.plane))
                            .copied()
                            .unwrap_or(0);
                        PlaneSample {
                            plane: r.plane,
                            bytes: r.rx_bytes,
                            gbps: r.rx_bytes.saturating_sub(prev) as f64 * 8.0 / dt as f64,
                        }
                    })
                    .collect(),
            };
            self.last_plane = planes.iter().map(|r| r.rx_bytes).collect();
            s
        });
        self.last_ns = snap.at_ns;
        (rows, sample)
    }
}

#[derive(Debug)]
struct State {
    rates: Rates,
    series: SampleSeries,
    pusher: Option<Pusher>,
    last_push: Instant,
    textfile: Option<Textfile>,
}

/// The sinks of one run.
#[derive(Debug)]
pub struct Telemetry {
    config: TelemetryConfig,
    exporter: Arc<Exporter>,
    server: Option<MetricsServer>,
    state: Mutex<State>,
}

impl Telemetry {
    /// Start the sinks with these constant labels on every series. Listening on `--metrics`
    /// may fail (the address is taken): a usage error. The scrape address goes to stderr as
    /// `metrics: http://ADDR/metrics`.
    pub fn start(config: &TelemetryConfig, labels: &[(&str, &str)]) -> anyhow::Result<Self> {
        let exporter = Arc::new(Exporter::new(labels).simulated(config.simulated));
        let server = match config.metrics {
            Some(addr) => {
                let srv = MetricsServer::start(addr, exporter.clone()).map_err(|err| {
                    crate::usage!(
                        "--metrics {addr}: cannot listen ({err}): give a free address, or port 0"
                    )
                })?;
                eprintln!("metrics: http://{}/metrics", srv.addr());
                Some(srv)
            }
            None => None,
        };
        let textfile = match &config.textfile {
            Some(d) => {
                Some(Textfile::new(d, &config.textfile_name).map_err(|e| crate::usage!("{e}"))?)
            }
            None => None,
        };
        let pusher = config
            .push
            .as_ref()
            .map(|u| Pusher::new(u, &config.push_job, &config.push_instance));
        Ok(Self {
            config: config.clone(),
            exporter,
            server,
            state: Mutex::new(State {
                rates: Rates::default(),
                series: SampleSeries::default(),
                pusher,
                last_push: Instant::now(),
                textfile,
            }),
        })
    }

    /// The flags it was built from.
    pub fn config(&self) -> &TelemetryConfig {
        &self.config
    }

    /// The exporter the sinks render.
    pub fn exporter(&self) -> &Arc<Exporter> {
        &self.exporter
    }

    /// Where the scrape server listens.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.server.as_ref().map(MetricsServer::addr)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A counter sample: publish it (and the rate gauges), record the JSON sample, write the
    /// textfile, push when `--push-every` is due.
    pub fn sample(&self, snap: &Snapshot) {
        self.sample_after(snap, 0);
    }

    /// [`sample`](Self::sample), the first after `missed` sampling periods that ended without
    /// one (the backend's [`Sampling`](crate::perf::sampling::Sampling) says how many).
    pub fn sample_after(&self, snap: &Snapshot, missed: u64) {
        let mut st = self.lock();
        let (rows, sample) = st.rates.update(snap);
        self.exporter.publish_with_rates(snap, rows);
        let series = &mut st.series;
        series.missed += missed;
        if let Some(s) = sample {
            if series.samples.len() < MAX_SAMPLES {
                series.samples.push(s);
            } else {
                series.dropped += 1;
            }
        }
        self.write_sinks(&mut st, false);
    }

    /// Publish `snap` without taking a sample (e.g. the sum of a sweep's sizes).
    pub fn publish(&self, snap: &Snapshot) {
        self.exporter.publish(snap);
    }

    fn write_sinks(&self, st: &mut State, last: bool) {
        let push_due = st.pusher.is_some()
            && (last
                || self
                    .config
                    .push_every
                    .is_some_and(|e| st.last_push.elapsed() >= e));
        if st.textfile.is_none() && !push_due {
            return;
        }
        let text = self.exporter.render();
        if let Some(t) = &mut st.textfile {
            let _ = t.write(&text);
        }
        if push_due && let Some(p) = &mut st.pusher {
            let _ = p.put(&text, last);
            st.last_push = Instant::now();
        }
    }

    /// The end of the run: publish the final counters, write the textfile, push the last
    /// time, and delete the group with `--push-delete`. Returns the failures (already on
    /// stderr).
    pub fn finish(&self, snap: &Snapshot) -> Vec<String> {
        self.publish(snap);
        let mut st = self.lock();
        self.write_sinks(&mut st, true);
        let mut failed = Vec::new();
        if self.config.push_delete
            && let Some(p) = &mut st.pusher
            && let Err(e) = p.delete()
        {
            failed.push(e);
        }
        if let Some(p) = &st.pusher
            && p.failures > 0
        {
            failed.push(format!("{} pushes to {} failed", p.failures, p.url()));
        }
        failed
    }

    /// Keep the scrape endpoint up for `--metrics-linger` (after [`finish`](Self::finish)).
    pub fn linger(&self) {
        if let (Some(_), Some(d)) = (&self.server, self.config.metrics_linger) {
            std::thread::sleep(d);
        }
    }

    /// The sample series so far.
    pub fn samples(&self) -> SampleSeries {
        self.lock().series.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::super::counters::HostCounters;
    use super::*;
    use mrc_transport::stats::{EndpointStats, PlaneStats};

    fn snap(at_ns: u64, rx: u64) -> Snapshot {
        let planes = [PlaneStats {
            bytes_received: rx,
            ..PlaneStats::default()
        }];
        Snapshot {
            at_ns,
            hosts: vec![HostCounters::new(1, &planes, &[], EndpointStats::default())],
        }
    }

    #[test]
    fn the_peak_gauge_keeps_a_2ms_burst_for_a_second() {
        let mut r = Rates::default();
        // 1 ms samples: idle, a 2 ms burst of 1 MB per ms, then idle.
        let mut rx = 0;
        let mut rows = Vec::new();
        for ms in 1..=500u64 {
            if (100..102).contains(&ms) {
                rx += 1_000_000;
            }
            rows = r.update(&snap(ms * 1_000_000, rx)).0;
            if ms == 101 {
                assert!((rows[0].2 - 1e9).abs() < 1.0, "{rows:?}");
            }
        }
        assert_eq!(rows[0].2, 0.0, "the last sample is idle");
        assert!(
            (rows[0].3 - 1e9).abs() < 1.0,
            "the burst is the peak: {rows:?}"
        );
        for ms in 501..=1200u64 {
            rows = r.update(&snap(ms * 1_000_000, rx)).0;
        }
        assert_eq!(rows[0].3, 0.0, "a second later the burst is gone: {rows:?}");
    }

    #[test]
    fn samples_carry_per_plane_gbps() {
        let mut r = Rates::default();
        assert!(r.update(&snap(0, 0)).1.is_none());
        let s = r.update(&snap(1_000_000, 125_000)).1.unwrap();
        assert_eq!(s.t_s, 0.001);
        assert_eq!(s.planes[0].bytes, 125_000);
        assert!((s.planes[0].gbps - 1.0).abs() < 1e-9, "{s:?}");
    }
}
