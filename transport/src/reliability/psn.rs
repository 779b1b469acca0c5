//! 24-bit PSNs on the wire, 64-bit sequence numbers inside: each side counts packets from the
//! QP's initial PSN (`seq` 0 is the initial PSN), so comparisons never wrap.

/// PSNs are 24 bits (brief §2.5).
pub const PSN_MASK: u32 = 0x00ff_ffff;
const HALF: u32 = 1 << 23;

/// The PSN of sequence number `seq` for a QP whose first PSN is `initial`.
#[inline]
pub fn psn_of(initial: u32, seq: u64) -> u32 {
    initial.wrapping_add(seq as u32) & PSN_MASK
}

/// The sequence number a wire `psn` names, taken as the one nearest `reference` (within ±2^23).
/// `None` when that would be before sequence 0 (a PSN from before the QP started).
#[inline]
pub fn seq_of(initial: u32, psn: u32, reference: u64) -> Option<u64> {
    let ref_psn = psn_of(initial, reference);
    let delta = psn.wrapping_sub(ref_psn) & PSN_MASK;
    if delta < HALF {
        reference.checked_add(u64::from(delta))
    } else {
        reference.checked_sub(u64::from((1 << 24) - delta))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unwraps_across_the_24_bit_boundary() {
        let initial = PSN_MASK - 2;
        assert_eq!(psn_of(initial, 0), PSN_MASK - 2);
        assert_eq!(psn_of(initial, 3), 0);
        assert_eq!(seq_of(initial, 0, 2), Some(3));
        assert_eq!(seq_of(initial, 1, 1_000), Some(4));
        assert_eq!(seq_of(initial, PSN_MASK - 2, 5), Some(0));
        assert_eq!(seq_of(initial, PSN_MASK - 3, 5), None, "before the start");
        let far = (1u64 << 24) * 3 + 17;
        assert_eq!(
            seq_of(initial, psn_of(initial, far + 100), far),
            Some(far + 100)
        );
        assert_eq!(
            seq_of(initial, psn_of(initial, far - 100), far),
            Some(far - 100)
        );
    }
}
