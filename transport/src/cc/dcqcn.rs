//! DCQCN (Zhu et al., "Congestion Control for Large-Scale RDMA Deployments", SIGCOMM 2015): the
//! reaction-point rate controller of RoCEv2 NICs, used by the RoCE-like baseline (one path per
//! QP, go-back-N) that MRC is compared against.
//!
//! - A congestion notification (an ECN echo in a SACK, standing for RoCE's CNP; at most one per
//!   `cnp_interval`, as the notification point paces CNPs) cuts the rate:
//!   `target = current; current ×= 1 − α/2; α = (1 − g)·α + g`.
//! - Without notifications, α decays every `alpha_update_period`: `α = (1 − g)·α`.
//! - The rate climbs back on two clocks, a timer (`rate_increase_period`) and a byte counter
//!   (`byte_counter` bytes sent); each tick is one increase event. While both counters are at
//!   most F: fast recovery, `current = (target + current) / 2`. Once one passes F: additive
//!   increase, `target += R_AI` first. Once both pass F: hyper increase, `target += i·R_HAI`.
//! - Packets are paced at the current rate: [`CongestionController::next_send_time`].
//!
//! Timers are driven by the `now` of every call (no clock of its own): elapsed periods are
//! replayed in order when the controller is next touched.

use super::{AckSample, CongestionController, NackSample, PathFacts};
use crate::time::{Duration, Instant};

/// One in Q16 fixed point.
const Q16: u64 = 1 << 16;
/// At most this many elapsed timer periods are replayed one by one; by then α has decayed to
/// zero and the rate is back at line rate, so the rest change nothing.
const MAX_REPLAYED_PERIODS: u64 = 4_096;

/// DCQCN parameters. Defaults are the paper's (timers, byte counter, g, F); the increase steps
/// scale with the line rate (R_AI = 40 Mb/s at 40 Gb/s in the paper).
#[derive(Debug, Clone, PartialEq)]
pub struct DcqcnConfig {
    /// Rate ceiling; `None` = [`PathFacts::line_rate_bps`].
    pub line_rate_bps: Option<u64>,
    /// Rate floor; `None` = line rate / 1000.
    pub min_rate_bps: Option<u64>,
    /// α gain `g`. Default 1/256.
    pub g: f64,
    /// α decays once per this period without a notification (K). Default 55 µs.
    pub alpha_update_period: Duration,
    /// The rate-increase timer (T). Default 55 µs.
    pub rate_increase_period: Duration,
    /// The byte counter (B): one increase event per this many bytes sent. Default 10 MB.
    pub byte_counter: u64,
    /// Fast-recovery steps (F). Default 5.
    pub fast_recovery_steps: u32,
    /// Additive increase step (R_AI); `None` = line rate / 1000.
    pub ai_rate_bps: Option<u64>,
    /// Hyper increase step (R_HAI); `None` = line rate / 100.
    pub hai_rate_bps: Option<u64>,
    /// Notifications closer together than this count once (CNP pacing). Default 50 µs.
    pub cnp_interval: Duration,
    /// Bytes in flight allowed; `None` = no window, rate only (as RoCE NICs).
    pub window_bytes: Option<u64>,
}

impl Default for DcqcnConfig {
    fn default() -> Self {
        Self {
            line_rate_bps: None,
            min_rate_bps: None,
            g: 1.0 / 256.0,
            alpha_update_period: Duration::from_micros(55),
            rate_increase_period: Duration::from_micros(55),
            byte_counter: 10_000_000,
            fast_recovery_steps: 5,
            ai_rate_bps: None,
            hai_rate_bps: None,
            cnp_interval: Duration::from_micros(50),
            window_bytes: None,
        }
    }
}

/// Where the rate is in its recovery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DcqcnStage {
    /// At line rate: nothing to recover.
    LineRate,
    /// Cut, and halving the distance to the target on each increase event.
    FastRecovery,
    /// Raising the target by R_AI per event.
    AdditiveIncrease,
    /// Raising the target by multiples of R_HAI per event.
    HyperIncrease,
}

/// 8e9 / rate: nanoseconds per byte, Q32.
fn ns_per_byte_q32(rate_bps: u64) -> u64 {
    ((8_000_000_000u128 << 32) / u128::from(rate_bps.max(1))).min(u128::from(u64::MAX)) as u64
}

/// One DCQCN reaction point.
#[derive(Debug, Clone)]
pub struct Dcqcn {
    line_bps: u64,
    min_bps: u64,
    ai_bps: u64,
    hai_bps: u64,
    g_q16: u64,
    alpha_period_ns: u64,
    increase_period_ns: u64,
    byte_counter: u64,
    f: u32,
    cnp_interval_ns: u64,
    window: u64,
    /// Current rate (RC) and target rate (RT).
    rc_bps: u64,
    rt_bps: u64,
    alpha_q16: u64,
    /// Increase events since the last cut, from the timer and from the byte counter.
    t_count: u32,
    bc_count: u32,
    bytes_since_event: u64,
    next_alpha_update: Option<Instant>,
    next_increase: Option<Instant>,
    last_cut: Option<Instant>,
    next_tx: Instant,
    /// Serialisation time of one byte at the current rate, ns in Q32 (kept with the rate, so
    /// pacing a packet is a multiply, not a division).
    ns_per_byte_q32: u64,
    stage: DcqcnStage,
    cuts: u64,
}

impl Dcqcn {
    /// A reaction point at line rate, for `config` on the path `facts` describes.
    pub fn new(config: &DcqcnConfig, facts: &PathFacts) -> Self {
        let line_bps = config.line_rate_bps.unwrap_or(facts.line_rate_bps).max(1);
        let min_bps = config
            .min_rate_bps
            .unwrap_or(line_bps / 1000)
            .clamp(1, line_bps);
        Self {
            line_bps,
            min_bps,
            ai_bps: config.ai_rate_bps.unwrap_or(line_bps / 1000),
            hai_bps: config.hai_rate_bps.unwrap_or(line_bps / 100),
            g_q16: (config.g.clamp(0.0, 1.0) * Q16 as f64) as u64,
            alpha_period_ns: config.alpha_update_period.as_nanos().max(1),
            increase_period_ns: config.rate_increase_period.as_nanos().max(1),
            byte_counter: config.byte_counter.max(1),
            f: config.fast_recovery_steps,
            cnp_interval_ns: config.cnp_interval.as_nanos(),
            window: config.window_bytes.unwrap_or(u64::MAX),
            rc_bps: line_bps,
            rt_bps: line_bps,
            alpha_q16: Q16,
            t_count: 0,
            bc_count: 0,
            bytes_since_event: 0,
            next_alpha_update: None,
            next_increase: None,
            last_cut: None,
            next_tx: Instant::ZERO,
            ns_per_byte_q32: ns_per_byte_q32(line_bps),
            stage: DcqcnStage::LineRate,
            cuts: 0,
        }
    }

    fn set_rate(&mut self, rc_bps: u64) {
        self.rc_bps = rc_bps.clamp(self.min_bps, self.line_bps);
        self.ns_per_byte_q32 = ns_per_byte_q32(self.rc_bps);
    }

    /// The current sending rate (RC), bits per second.
    pub fn rate_bps(&self) -> u64 {
        self.rc_bps
    }

    /// The target rate (RT), bits per second.
    pub fn target_rate_bps(&self) -> u64 {
        self.rt_bps
    }

    /// α, as a fraction (reports only).
    pub fn alpha(&self) -> f64 {
        self.alpha_q16 as f64 / Q16 as f64
    }

    /// The recovery stage.
    pub fn stage(&self) -> DcqcnStage {
        self.stage
    }

    /// Rate cuts so far.
    pub fn cuts(&self) -> u64 {
        self.cuts
    }

    /// Replay every timer period that ended by `now`.
    fn advance(&mut self, now: Instant) {
        if let Some(next) = self.next_alpha_update
            && now >= next
        {
            let periods = (now - next).as_nanos() / self.alpha_period_ns + 1;
            for _ in 0..periods.min(MAX_REPLAYED_PERIODS) {
                self.alpha_q16 -= (self.alpha_q16 * self.g_q16) >> 16;
            }
            self.next_alpha_update =
                Some(next + Duration(periods.saturating_mul(self.alpha_period_ns)));
        }
        if let Some(next) = self.next_increase
            && now >= next
        {
            let periods = (now - next).as_nanos() / self.increase_period_ns + 1;
            for _ in 0..periods.min(MAX_REPLAYED_PERIODS) {
                self.t_count = self.t_count.saturating_add(1);
                self.increase_event();
            }
            self.next_increase =
                Some(next + Duration(periods.saturating_mul(self.increase_period_ns)));
        }
    }

    /// One tick of the timer or the byte counter.
    fn increase_event(&mut self) {
        if self.stage == DcqcnStage::LineRate {
            return;
        }
        let (t, bc) = (self.t_count, self.bc_count);
        if t.max(bc) <= self.f {
            self.stage = DcqcnStage::FastRecovery;
        } else if t.min(bc) > self.f {
            self.stage = DcqcnStage::HyperIncrease;
            let steps = u64::from(t.min(bc) - self.f);
            self.rt_bps = self
                .rt_bps
                .saturating_add(steps.saturating_mul(self.hai_bps));
        } else {
            self.stage = DcqcnStage::AdditiveIncrease;
            self.rt_bps = self.rt_bps.saturating_add(self.ai_bps);
        }
        self.rt_bps = self.rt_bps.min(self.line_bps);
        // Halfway to the target, rounding up so that the rate does reach it.
        let mid = (u128::from(self.rt_bps) + u128::from(self.rc_bps)).div_ceil(2) as u64;
        self.set_rate(mid);
        if self.rc_bps == self.line_bps {
            self.stage = DcqcnStage::LineRate;
        }
    }

    /// A congestion notification (CNP): cut the rate and restart the recovery clocks.
    fn on_congestion_notification(&mut self, now: Instant) {
        if self
            .last_cut
            .is_some_and(|t| now.saturating_since(t).as_nanos() < self.cnp_interval_ns)
        {
            return;
        }
        self.rt_bps = self.rc_bps;
        let cut = ((u128::from(self.rc_bps) * u128::from(self.alpha_q16)) >> 17) as u64;
        self.set_rate(self.rc_bps.saturating_sub(cut));
        self.alpha_q16 = ((self.alpha_q16 * (Q16 - self.g_q16)) >> 16) + self.g_q16;
        self.alpha_q16 = self.alpha_q16.min(Q16);
        self.t_count = 0;
        self.bc_count = 0;
        self.bytes_since_event = 0;
        self.next_alpha_update = Some(now + Duration(self.alpha_period_ns));
        self.next_increase = Some(now + Duration(self.increase_period_ns));
        self.last_cut = Some(now);
        self.stage = DcqcnStage::FastRecovery;
        self.cuts += 1;
    }
}

impl CongestionController for Dcqcn {
    fn name(&self) -> &'static str {
        "dcqcn"
    }

    fn window(&self) -> u64 {
        self.window
    }

    fn next_send_time(&self, now: Instant) -> Option<Instant> {
        Some(self.next_tx.max(now))
    }

    fn on_packet_sent(&mut self, now: Instant, bytes: u32) {
        self.advance(now);
        // Pacing: the next packet leaves one serialisation time (at the current rate) later.
        let gap_ns = (u128::from(bytes) * u128::from(self.ns_per_byte_q32)).div_ceil(1 << 32);
        self.next_tx = self.next_tx.max(now) + Duration(gap_ns.min(u128::from(u64::MAX)) as u64);
        self.bytes_since_event = self.bytes_since_event.saturating_add(u64::from(bytes));
        if self.bytes_since_event >= self.byte_counter {
            let events = self.bytes_since_event / self.byte_counter;
            self.bytes_since_event %= self.byte_counter;
            for _ in 0..events.min(MAX_REPLAYED_PERIODS) {
                self.bc_count = self.bc_count.saturating_add(1);
                self.increase_event();
            }
        }
    }

    fn on_ack(&mut self, now: Instant, ack: &AckSample) {
        self.advance(now);
        if ack.ecn {
            self.on_congestion_notification(now);
        }
    }

    // RoCE's DCQCN reacts to CNPs only; NACKs and losses are go-back-N's business.
    fn on_nack(&mut self, now: Instant, _nack: &NackSample) {
        self.advance(now);
    }

    fn on_loss(&mut self, now: Instant, _bytes: u64) {
        self.advance(now);
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const LINE: u64 = 100_000_000_000;
    const G: u64 = 1_000_000_000;

    fn facts() -> PathFacts {
        PathFacts {
            line_rate_bps: LINE,
            base_rtt: Duration::from_micros(10),
            mtu_bytes: 4_000,
        }
    }

    fn cnp(ecn: bool) -> AckSample {
        AckSample {
            ecn,
            ..AckSample::default()
        }
    }

    fn us(t: u64) -> Instant {
        Instant(t * 1_000)
    }

    #[test]
    fn cuts_on_cnp_and_recovers_through_fast_recovery_additive_and_hyper_increase() {
        let mut cc = Dcqcn::new(
            &DcqcnConfig {
                byte_counter: 64_000,
                ..DcqcnConfig::default()
            },
            &facts(),
        );
        assert_eq!((cc.rate_bps(), cc.stage()), (LINE, DcqcnStage::LineRate));

        // α starts at 1: the first CNP halves the rate.
        cc.on_ack(us(0), &cnp(true));
        assert_eq!((cc.rate_bps(), cc.target_rate_bps()), (50 * G, LINE));
        assert_eq!(cc.stage(), DcqcnStage::FastRecovery);
        // A second CNP one CNP interval later: the target drops to the current rate.
        cc.on_ack(us(50), &cnp(true));
        assert_eq!(cc.target_rate_bps(), 50 * G);
        assert_eq!(cc.rate_bps(), 25 * G);
        assert_eq!(cc.cuts(), 2);

        // Five timer ticks of fast recovery: halfway to the unchanged target each time.
        let mut expected = 25 * G;
        for k in 1..=5 {
            cc.on_ack(us(50 + 55 * k), &cnp(false));
            expected = (50 * G + expected).div_ceil(2);
            assert_eq!(cc.stage(), DcqcnStage::FastRecovery, "tick {k}");
            assert_eq!(cc.rate_bps(), expected);
            assert_eq!(cc.target_rate_bps(), 50 * G);
        }
        // The sixth tick: additive increase raises the target by R_AI (line / 1000).
        cc.on_ack(us(50 + 55 * 6), &cnp(false));
        assert_eq!(cc.stage(), DcqcnStage::AdditiveIncrease);
        assert_eq!(cc.target_rate_bps(), 50 * G + LINE / 1000);

        // Byte-counter ticks: additive while that counter is at most F, then hyper increase
        // once both counters are past F.
        for _ in 0..5 {
            cc.on_packet_sent(us(50 + 55 * 6), 64_000);
            assert_eq!(cc.stage(), DcqcnStage::AdditiveIncrease);
        }
        assert_eq!(cc.target_rate_bps(), 50 * G + 6 * LINE / 1000);
        cc.on_packet_sent(us(50 + 55 * 6), 64_000);
        assert_eq!(cc.stage(), DcqcnStage::HyperIncrease);
        assert_eq!(cc.target_rate_bps(), 50 * G + 6 * LINE / 1000 + LINE / 100);

        // Left alone long enough, the rate is back at line rate and α has decayed.
        cc.on_ack(us(1_000_000), &cnp(false));
        assert_eq!((cc.rate_bps(), cc.stage()), (LINE, DcqcnStage::LineRate));
        assert!(cc.alpha() < 0.01, "alpha {}", cc.alpha());
    }

    #[test]
    fn alpha_remembers_congestion_and_decays_without_it() {
        let mut cc = Dcqcn::new(&DcqcnConfig::default(), &facts());
        cc.on_ack(us(0), &cnp(true));
        assert_eq!(cc.alpha(), 1.0);
        // Two alpha periods without a CNP: α ·= (1 − g)².
        cc.on_ack(us(111), &cnp(false));
        let decayed = cc.alpha();
        assert!(
            (decayed - (255.0f64 / 256.0).powi(2)).abs() < 1e-3,
            "{decayed}"
        );
        // The next cut is α/2 of the current rate, and α rises by g.
        let before = cc.rate_bps();
        cc.on_ack(us(120), &cnp(true));
        let cut = before - cc.rate_bps();
        assert!((cut as f64 / before as f64 - decayed / 2.0).abs() < 1e-3);
        assert!(cc.alpha() > decayed);
    }

    #[test]
    fn notifications_inside_the_cnp_interval_count_once() {
        let mut cc = Dcqcn::new(&DcqcnConfig::default(), &facts());
        for t in 0..49 {
            cc.on_ack(us(t), &cnp(true));
        }
        assert_eq!(cc.cuts(), 1);
        assert_eq!(cc.rate_bps(), 50 * G);
        cc.on_ack(us(50), &cnp(true));
        assert_eq!(cc.cuts(), 2);
    }

    #[test]
    fn packets_are_paced_at_the_current_rate() {
        let mut cc = Dcqcn::new(&DcqcnConfig::default(), &facts());
        assert_eq!(cc.window(), u64::MAX);
        assert_eq!(cc.next_send_time(Instant(7)), Some(Instant(7)));
        // 1250 bytes at 100 Gb/s: 100 ns apart.
        cc.on_packet_sent(Instant(1_000), 1_250);
        cc.on_packet_sent(Instant(1_000), 1_250);
        assert_eq!(cc.next_send_time(Instant(1_000)), Some(Instant(1_200)));
        // After a cut to 50 Gb/s: 200 ns apart.
        cc.on_ack(Instant(1_200), &cnp(true));
        cc.on_packet_sent(Instant(1_200), 1_250);
        assert_eq!(cc.next_send_time(Instant(1_200)), Some(Instant(1_400)));
        // Idle time is not banked: after a pause the next gap starts from now.
        cc.on_packet_sent(Instant(9_000), 1_250);
        assert_eq!(cc.next_send_time(Instant(9_000)), Some(Instant(9_200)));

        let windowed = Dcqcn::new(
            &DcqcnConfig {
                window_bytes: Some(64_000),
                ..DcqcnConfig::default()
            },
            &facts(),
        );
        assert_eq!(windowed.window(), 64_000);
    }

    proptest! {
        #[test]
        fn rate_stays_between_floor_and_target_and_target_below_line_rate(
            events in prop::collection::vec((0..200_000u64, 0..3u8, any::<u32>()), 0..300)
        ) {
            let mut cc = Dcqcn::new(
                &DcqcnConfig { byte_counter: 100_000, ..DcqcnConfig::default() },
                &facts(),
            );
            let mut now = Instant::ZERO;
            for (dt, kind, bytes) in events {
                now += Duration(dt);
                match kind {
                    0 => cc.on_ack(now, &cnp(true)),
                    1 => cc.on_ack(now, &cnp(false)),
                    _ => cc.on_packet_sent(now, bytes),
                }
                prop_assert!((LINE / 1000..=LINE).contains(&cc.rate_bps()));
                // A cut sets the target to the rate before it, recovery climbs towards the
                // target and the target never passes the line rate: the rate stays at or
                // below the target.
                prop_assert!(cc.target_rate_bps() <= LINE);
                prop_assert!(
                    cc.rate_bps() <= cc.target_rate_bps(),
                    "rate {} above target {}",
                    cc.rate_bps(),
                    cc.target_rate_bps()
                );
                prop_assert!(cc.next_send_time(now).is_some_and(|t| t >= now));
            }
        }
    }
}
