//! The NSCC CC profile (OCP `mrc_ctl.h`, `struct mrc_ctl_cc_nscc_cfg`; brief §3.4) and its
//! resolution into the integer parameters the controller runs on.
//!
//! Every default lives here and nowhere else. Defaults that depend on the network (gains, window
//! bounds, thresholds) are `None` in [`NsccConfig`] and derived from [`PathFacts`] by
//! [`NsccConfig::resolve`], the way the UEC reference simulator (htsim `uec.cpp`,
//! `initNsccParams`) scales its constants from a 100 Gb/s × 12 µs reference network.

use super::super::PathFacts;
use crate::time::Duration;

/// Bandwidth-delay product of the reference network the NSCC gains are tuned for:
/// 100 Gb/s × 12 µs = 150 KB (UET NSCC, "scaling factor a").
const REFERENCE_BDP_BYTES: f64 = 150_000.0;
/// Round-trip time of the reference network (UET NSCC, "scaling factor b").
const REFERENCE_RTT_NS: f64 = 12_000.0;
/// One in Q16 fixed point.
pub(super) const Q16: u64 = 1 << 16;

/// NSCC parameters: the fields of the OCP CC profile for `"uet-1.0-nscc"`, plus the few knobs
/// the profile leaves implicit (trimming, initial window, proportional gain, fast-increase
/// threshold). `None` means "derive from the path" (see each field).
#[derive(Debug, Clone, PartialEq)]
pub struct NsccConfig {
    /// `disable_qa`: turn Quick Adapt off. Default `false`.
    pub disable_qa: bool,
    /// `adjust_bytes_threshold`: apply accumulated increases after this many delivered bytes.
    /// Default 8 MTU.
    pub adjust_bytes_threshold: Option<u64>,
    /// `adjust_period_threshold`: ... or after this long since the last adjustment; `eta` is
    /// added at most once per period. Default one base RTT.
    pub adjust_period_threshold: Option<Duration>,
    /// `base_rtt`: unloaded round-trip time; queueing delay = RTT sample − base RTT. Default
    /// [`PathFacts::base_rtt`].
    pub base_rtt: Option<Duration>,
    /// `eta`: bytes added to the window once per adjust period, so a window always creeps up.
    /// Default 0.15 MTU × scale (scale = BDP / 150 KB).
    pub eta: Option<f64>,
    /// `fi`: fair increase, bytes added per window of delivered bytes while the delay is above
    /// target but nothing is ECN-marked. Default 5 MTU × scale.
    pub fi: Option<f64>,
    /// `fi_scale`: fast increase, the fraction of each delivery added straight to the window
    /// once a whole window saw (almost) no queueing. Default 0.25 × scale.
    pub fi_scale: Option<f64>,
    /// `gamma`: multiplicative-decrease gain; one decrease is
    /// `cwnd × max(1 − gamma·(avg − target)/avg, 1 − max_md_jump)`. Default 0.8.
    pub gamma: f64,
    /// `max_md_jump`: the largest fraction of the window one multiplicative decrease removes.
    /// Default 0.5 (the reference's `max(…, 0.5)`).
    pub max_md_jump: f64,
    /// `max_cwnd`: window ceiling in bytes. Default one BDP plus the target delay's worth of
    /// bytes at line rate (1.75 BDP with trimming, 2 BDP without): the window a lone flow
    /// needs to fill its link at its own target delay. htsim's 1.5 BDP is below that, so the
    /// ceiling, not the delay, bounded every flow: where a full frame's serialisation is a
    /// large part of the RTT (50 Gb/s planes: half of it), one frame of collision queueing per
    /// hop already took the RTT past 1.5 base RTTs and a 128-host permutation reached 82 % of
    /// the NIC, 86 % with this ceiling (issue #14).
    pub max_cwnd: Option<u64>,
    /// `qa_gate`: Quick Adapt fires only if the bytes delivered in its period are below
    /// `max_cwnd >> qa_gate`. Default 3 (1/8 of the ceiling).
    pub qa_gate: u8,
    /// `qa_threshold`: a delay above this triggers Quick Adapt. Default 4 × target delay.
    pub qa_threshold: Option<Duration>,
    /// `target_delay`: queueing delay NSCC aims for. Default 0.75 base RTT when the fabric
    /// trims, 1.0 base RTT when it does not.
    pub target_delay: Option<Duration>,
    /// The fabric trims instead of dropping: the default target delay is 0.75 base RTT instead
    /// of 1, and a silent loss is a path's failure, not congestion (it leaves the window
    /// alone). Default `true` (MRC fabrics trim, brief §5.3).
    pub trimming: bool,
    /// Window at start, in bytes. Default one BDP (brief §3.4, our inference). Starting at the
    /// ceiling gains about 1 % of a 128-host permutation's goodput but overflows shallow
    /// paths behind fast ports at once (`harness::scenario_tests`), so it stays one BDP.
    pub initial_cwnd: Option<u64>,
    /// Proportional increase: bytes added per window of delivered bytes at zero queueing delay,
    /// scaled down linearly to zero at the target (htsim's `alpha × target`). Default
    /// 4 MTU × scale × target / 12 µs.
    pub proportional_gain: Option<f64>,
    /// A delay below this counts as "no queue" for fast increase. Default 1 µs (htsim).
    pub fast_increase_delay: Duration,
}

impl Default for NsccConfig {
    fn default() -> Self {
        Self {
            disable_qa: false,
            adjust_bytes_threshold: None,
            adjust_period_threshold: None,
            base_rtt: None,
            eta: None,
            fi: None,
            fi_scale: None,
            gamma: 0.8,
            max_md_jump: 0.5,
            max_cwnd: None,
            qa_gate: 3,
            qa_threshold: None,
            target_delay: None,
            trimming: true,
            initial_cwnd: None,
            proportional_gain: None,
            fast_increase_delay: Duration::from_micros(1),
        }
    }
}

/// [`NsccConfig`] resolved against a path: integers only (bytes, nanoseconds, Q16 fractions).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NsccParams {
    /// Nominal bytes of a full packet; also the window floor.
    pub mtu: u64,
    pub base_rtt_ns: u64,
    pub target_ns: u64,
    pub qa_threshold_ns: u64,
    pub fast_increase_delay_ns: u64,
    pub adjust_bytes: u64,
    pub adjust_period_ns: u64,
    pub min_cwnd: u64,
    pub max_cwnd: u64,
    pub initial_cwnd: u64,
    /// Fair increase per window of delivered bytes.
    pub fi_bytes: u64,
    /// Proportional increase per window of delivered bytes at zero delay.
    pub proportional_bytes: u64,
    pub eta_bytes: u64,
    pub fi_scale_q16: u64,
    pub gamma_q16: u64,
    pub max_md_jump_q16: u64,
    pub qa_gate: u8,
    pub disable_qa: bool,
    /// The fabric trims (see [`NsccConfig::trimming`]).
    pub trimming: bool,
}

/// `x` bytes as an integer, treating NaN and negatives as zero (float → int casts saturate).
fn bytes(x: f64) -> u64 {
    x.max(0.0) as u64
}

/// A fraction in `[0, max]` as Q16.
fn q16(x: f64, max: f64) -> u64 {
    (x.clamp(0.0, max) * Q16 as f64) as u64
}

impl NsccConfig {
    /// Resolve the profile against the path it will run on. Total: out-of-range values are
    /// clamped (a window ceiling below one packet becomes one packet, fractions are kept in
    /// `[0, 1]`), never a panic.
    pub fn resolve(&self, facts: &PathFacts) -> NsccParams {
        let mtu = u64::from(facts.mtu_bytes).max(1);
        let base_rtt = self.base_rtt.unwrap_or(facts.base_rtt);
        let bdp = PathFacts { base_rtt, ..*facts }.bdp_bytes();
        let base_rtt_ns = base_rtt.as_nanos();
        // MRC 1.0 §8 / UET NSCC: target 0.75 RTT with trimming, 1 RTT without.
        let target_ns = self.target_delay.map_or_else(
            || {
                if self.trimming {
                    (u128::from(base_rtt_ns) * 3 / 4) as u64
                } else {
                    base_rtt_ns
                }
            },
            Duration::as_nanos,
        );
        let scale = bdp as f64 / REFERENCE_BDP_BYTES;
        let mtu_f = mtu as f64;
        let min_cwnd = mtu;
        // Bytes the target delay holds at line rate.
        let target_bytes = PathFacts {
            base_rtt: Duration(target_ns),
            ..*facts
        }
        .bdp_bytes();
        let max_cwnd = self
            .max_cwnd
            .unwrap_or(bdp.saturating_add(target_bytes))
            .max(min_cwnd);
        let initial_cwnd = self.initial_cwnd.unwrap_or(bdp).clamp(min_cwnd, max_cwnd);
        NsccParams {
            mtu,
            base_rtt_ns,
            target_ns,
            qa_threshold_ns: self
                .qa_threshold
                .map_or(target_ns.saturating_mul(4), Duration::as_nanos),
            fast_increase_delay_ns: self.fast_increase_delay.as_nanos(),
            adjust_bytes: self.adjust_bytes_threshold.unwrap_or(8 * mtu),
            adjust_period_ns: self
                .adjust_period_threshold
                .map_or(base_rtt_ns, Duration::as_nanos),
            min_cwnd,
            max_cwnd,
            initial_cwnd,
            fi_bytes: bytes(self.fi.unwrap_or(5.0 * mtu_f * scale)),
            proportional_bytes: bytes(
                self.proportional_gain
                    .unwrap_or(4.0 * mtu_f * scale * target_ns as f64 / REFERENCE_RTT_NS),
            ),
            eta_bytes: bytes(self.eta.unwrap_or(0.15 * mtu_f * scale)),
            // Fast increase may add at most the whole delivery again (doubling per window).
            fi_scale_q16: q16(self.fi_scale.unwrap_or(0.25 * scale), 64.0),
            gamma_q16: q16(self.gamma, 1.0),
            max_md_jump_q16: q16(self.max_md_jump, 1.0),
            qa_gate: self.qa_gate.min(63),
            disable_qa: self.disable_qa,
            trimming: self.trimming,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_scale_from_the_reference_network() {
        // 100 Gb/s × 12 µs is the reference itself: scale 1.
        let facts = PathFacts {
            line_rate_bps: 100_000_000_000,
            base_rtt: Duration::from_micros(12),
            mtu_bytes: 4_000,
        };
        let p = NsccConfig::default().resolve(&facts);
        // One BDP (150 KB) and the target's 9 µs at 100 Gb/s (112.5 KB).
        assert_eq!(p.max_cwnd, 262_500);
        assert_eq!(p.initial_cwnd, 150_000);
        assert_eq!(p.min_cwnd, 4_000);
        assert_eq!(p.target_ns, 9_000);
        assert_eq!(p.qa_threshold_ns, 36_000);
        assert_eq!(p.adjust_bytes, 32_000);
        assert_eq!(p.adjust_period_ns, 12_000);
        assert_eq!(p.fi_bytes, 20_000);
        assert_eq!(p.eta_bytes, 600);
        assert_eq!(p.fi_scale_q16, Q16 / 4);
        assert_eq!(p.proportional_bytes, 12_000);
        assert_eq!(p.gamma_q16, (0.8 * Q16 as f64) as u64);
        assert_eq!(p.max_md_jump_q16, Q16 / 2);

        let no_trim = NsccConfig {
            trimming: false,
            ..NsccConfig::default()
        };
        assert_eq!(no_trim.resolve(&facts).target_ns, 12_000);
    }

    #[test]
    fn nonsense_is_clamped_not_panicking() {
        let facts = PathFacts {
            line_rate_bps: 0,
            base_rtt: Duration::ZERO,
            mtu_bytes: 0,
        };
        let cfg = NsccConfig {
            gamma: f64::NAN,
            max_md_jump: 7.0,
            fi: Some(-3.0),
            max_cwnd: Some(0),
            ..NsccConfig::default()
        };
        let p = cfg.resolve(&facts);
        assert_eq!((p.min_cwnd, p.max_cwnd, p.initial_cwnd), (1, 1, 1));
        assert_eq!(p.gamma_q16, 0);
        assert_eq!(p.max_md_jump_q16, Q16);
        assert_eq!(p.fi_bytes, 0);
    }
}
