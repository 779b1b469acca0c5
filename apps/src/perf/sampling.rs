//! When a backend reads the counters (docs/metrics.md, "Resolution"): every `tick` (the finer
//! of the live lines' period and `--sample-every`), a live line at its period, a telemetry
//! sample once per `--sample-every`.
//!
//! The schedule is a grid on the backend's own clock (nanoseconds since the run of a size
//! started: simulated in the simulator, real on NIC threads), and that clock is its only
//! input: the simulator calls it at every tick of virtual time, the real-time loop sleeps
//! until the next tick it names. Telemetry period `k` (from `k × T` to `(k + 1) × T`) has one
//! sample, taken at the first tick in it; a period the clock jumped over (a sampling thread
//! that woke late on a loaded machine) has none and is counted missed, so the samples and the
//! missed periods always add up to the periods elapsed, whatever the machine's load.

use super::settings::Settings;
use mrc_transport::Duration;

/// The sampling schedule of one run (one message size).
#[derive(Debug, Clone, Copy)]
pub struct Sampling {
    /// How often the backend reads the counters.
    pub tick: Duration,
    /// How often a live line prints.
    pub live: Duration,
    /// How often the telemetry takes a sample.
    pub telemetry: Duration,
    /// The telemetry period of the last sample (0: none yet; period 0 has none).
    last_period: u64,
    /// Periods that ended without a sample.
    missed: u64,
}

impl Sampling {
    /// From the backend's live period (`live`) and the settings: `--sample-every` sets the
    /// telemetry's period (default: `live`); `--run_infinitely` keeps its one period.
    pub fn new(s: &Settings, live: Duration) -> Self {
        let sample_every = if s.run_infinitely {
            None
        } else {
            s.telemetry.sample_every
        };
        Self::with_periods(live, sample_every)
    }

    /// Live lines every `live`, telemetry samples every `sample_every` (default: `live`).
    pub fn with_periods(live: Duration, sample_every: Option<Duration>) -> Self {
        // The command line refuses less than 1 us; never a zero period (a sampling loop that
        // would not advance).
        let floor = Duration::from_micros(1);
        let live = live.max(floor);
        let telemetry = sample_every.unwrap_or(live).max(floor);
        Self {
            tick: telemetry.min(live),
            live,
            telemetry,
            last_period: 0,
            missed: 0,
        }
    }

    /// The live lines' minimum gap: the live period, less half a tick of jitter.
    pub fn live_min_ns(&self) -> u64 {
        self.live.0.saturating_sub(self.tick.0 / 2)
    }

    /// From `now_ns` to the next tick (the next multiple of `tick`): a real-time loop sleeps
    /// this long, so a late wakeup does not push back the ones after it.
    pub fn until_next_tick_ns(&self, now_ns: u64) -> u64 {
        self.tick.0 - now_ns % self.tick.0
    }

    /// The telemetry sample of the period `now_ns` is in is due (then it counts as taken):
    /// `Some(missed)`, the periods before it since the last sample that ended without one;
    /// `None` when this period has its sample already (or is period 0, which ends at the
    /// first sample).
    pub fn telemetry_due(&mut self, now_ns: u64) -> Option<u64> {
        let period = now_ns / self.telemetry.0;
        if period <= self.last_period {
            return None;
        }
        let missed = period - self.last_period - 1;
        self.last_period = period;
        self.missed += missed;
        Some(missed)
    }

    /// The telemetry periods that ended without a sample so far.
    pub fn missed(&self) -> u64 {
        self.missed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// A real-time sampling loop on a clock of our own: it sleeps until the next tick and
    /// wakes `late(i)` ns after it (the load of the machine). Returns the times of the
    /// telemetry samples and the periods missed, after `run_ns`.
    fn run(s: &mut Sampling, run_ns: u64, late: impl Fn(u64) -> u64) -> (Vec<u64>, u64) {
        let mut now = 0;
        let mut taken = Vec::new();
        let mut i = 0;
        while now < run_ns {
            now += s.until_next_tick_ns(now) + late(i);
            i += 1;
            if s.telemetry_due(now).is_some() {
                taken.push(now);
            }
        }
        (taken, s.missed())
    }

    /// A reproducible load: wakeups late by 0 to 4.5 ms, most of them by little.
    fn loaded(i: u64) -> u64 {
        let x = i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40;
        match x % 10 {
            0 => 4_500_000,
            1 | 2 => 1_700_000,
            _ => x % 300_000,
        }
    }

    #[test]
    fn an_idle_clock_samples_every_period_of_sample_every() {
        let mut s =
            Sampling::with_periods(Duration::from_millis(200), Some(Duration::from_millis(1)));
        assert_eq!((s.tick, s.telemetry), (Duration(MS), Duration(MS)));
        let (taken, missed) = run(&mut s, 300 * MS, |_| 0);
        assert_eq!(missed, 0);
        assert_eq!(taken, (1..=300).map(|k| k * MS).collect::<Vec<_>>());
    }

    #[test]
    fn a_late_clock_counts_the_periods_it_slept_through() {
        let mut s =
            Sampling::with_periods(Duration::from_millis(200), Some(Duration::from_millis(1)));
        let (taken, missed) = run(&mut s, 300 * MS, loaded);
        let last = *taken.last().unwrap();
        assert!(missed > 0 && taken.len() > 50, "{missed} {taken:?}");
        // One sample per period at most, and every period up to the last sample has its
        // sample or is counted missed.
        let periods: Vec<u64> = taken.iter().map(|t| t / MS).collect();
        assert!(periods.windows(2).all(|w| w[0] < w[1]), "{taken:?}");
        assert_eq!(taken.len() as u64 + missed, last / MS);
        // Late wakeups do not push back the ones after: the loop catches up at the next tick.
        assert!((300 * MS..305 * MS).contains(&last), "{last}");
    }

    #[test]
    fn the_default_period_is_the_live_lines() {
        let mut s = Sampling::with_periods(Duration::from_millis(200), None);
        assert_eq!(
            (s.tick, s.telemetry),
            (Duration(200 * MS), Duration(200 * MS))
        );
        let (taken, missed) = run(&mut s, 1000 * MS, |_| 0);
        assert_eq!((taken.len(), missed), (5, 0));
    }

    #[test]
    fn a_coarser_sample_every_samples_at_its_own_period_on_the_live_ticks() {
        let mut s =
            Sampling::with_periods(Duration::from_millis(200), Some(Duration::from_millis(300)));
        assert_eq!(s.tick, Duration(200 * MS));
        let (taken, missed) = run(&mut s, 1200 * MS, |_| 0);
        // Ticks at 200, 400, ... ms: the first tick of each 300 ms period.
        assert_eq!(missed, 0);
        assert_eq!(
            taken,
            [400, 600, 1000, 1200]
                .iter()
                .map(|t| t * MS)
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn the_simulators_ticks_sample_every_period() {
        // The simulator calls at every tick of virtual time, from 0, and once at the end.
        let mut s =
            Sampling::with_periods(Duration::from_micros(100), Some(Duration::from_micros(10)));
        let mut taken = Vec::new();
        for t in (0..=1230).step_by(10).chain([1236]) {
            if s.telemetry_due(t * 1000).is_some() {
                taken.push(t);
            }
        }
        assert_eq!(taken, (1..=123).map(|k| k * 10).collect::<Vec<_>>());
        assert_eq!(s.missed(), 0);
    }
}
