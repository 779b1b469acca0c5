//! The one mapping between the 32-bit entropy value (EV) echoed in SETH/NETH and the bits on
//! the wire: UDP source port (16 bits) and IPv6 flow label (20 bits, of which 16 are used)
//! (brief §2.4, PROTOCOL.md "Entropy values and paths").
//!
//! In SRv6 mode the EV's low 16 bits are the EV's index in the QP's EV table, so SACK/NACK
//! can name the path compactly; in ECMP mode they are whatever the switches hash. The two
//! transcriptions disagree on the order, so it is a knob ([`EntropyOrder`]); the default
//! follows \[T-mani\]: EV\[15:0\] in the UDP source port, EV\[31:16\] in flow label\[15:0\]. The top
//! four flow-label bits are written as 0 and ignored on parse.

/// How the 32-bit EV is split between UDP source port and flow label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum EntropyOrder {
    /// EV\[15:0\] = UDP source port, EV\[31:16\] = flow label\[15:0\] \[T-mani\] (default).
    #[default]
    SportLow,
    /// EV\[31:16\] = UDP source port, EV\[15:0\] = flow label\[15:0\] [T-py STEV builder].
    SportHigh,
}

/// The wire fields that carry an EV.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Entropy {
    /// UDP source port.
    pub udp_sport: u16,
    /// IPv6 flow label (20 bits; the top 4 are 0).
    pub flow_label: u32,
}

impl EntropyOrder {
    /// The wire fields of `ev`.
    pub const fn split(self, ev: u32) -> Entropy {
        let (sport, label) = match self {
            Self::SportLow => (ev as u16, (ev >> 16) as u16),
            Self::SportHigh => ((ev >> 16) as u16, ev as u16),
        };
        Entropy {
            udp_sport: sport,
            flow_label: label as u32,
        }
    }

    /// The EV carried by `udp_sport` and `flow_label` (flow-label bits 19..16 ignored).
    pub const fn join(self, udp_sport: u16, flow_label: u32) -> u32 {
        let label = flow_label & 0xffff;
        match self {
            Self::SportLow => (label << 16) | udp_sport as u32,
            Self::SportHigh => ((udp_sport as u32) << 16) | label,
        }
    }
}

/// In SRv6 mode: the EV of entry `index` of a QP's EV table, with `label` as the flow-label
/// bits (PROTOCOL.md: the source port carries the index), in the order `order`.
pub const fn srv6_ev(order: EntropyOrder, index: u16, label: u16) -> u32 {
    order.join(index, label as u32)
}

/// The EV-table index an SRv6-mode EV carries.
pub const fn srv6_index(order: EntropyOrder, ev: u32) -> u16 {
    order.split(ev).udp_sport
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn default_order_puts_low_bits_in_the_source_port() {
        let e = EntropyOrder::default().split(0x1234_abcd);
        assert_eq!(
            e,
            Entropy {
                udp_sport: 0xabcd,
                flow_label: 0x1234
            }
        );
        let e = EntropyOrder::SportHigh.split(0x1234_abcd);
        assert_eq!((e.udp_sport, e.flow_label), (0x1234, 0xabcd));
    }

    #[test]
    fn top_flow_label_bits_are_ignored() {
        assert_eq!(EntropyOrder::SportLow.join(1, 0xf_0002), 0x0002_0001);
    }

    #[test]
    fn srv6_index_rides_in_the_source_port() {
        for order in [EntropyOrder::SportLow, EntropyOrder::SportHigh] {
            let ev = srv6_ev(order, 200, 0x5555);
            assert_eq!(srv6_index(order, ev), 200);
            assert_eq!(order.split(ev).udp_sport, 200);
        }
    }

    proptest! {
        #[test]
        fn split_join_roundtrip(ev in any::<u32>(), high in any::<bool>()) {
            let order = if high { EntropyOrder::SportHigh } else { EntropyOrder::SportLow };
            let e = order.split(ev);
            prop_assert!(e.flow_label <= 0xffff);
            prop_assert_eq!(order.join(e.udp_sport, e.flow_label), ev);
        }
    }
}
