#![no_main]
//! The IPv6 fixed-header view and repr never panic, and what parses re-emits identically.
use libfuzzer_sys::fuzz_target;
use mrc_srv6::wire::{Ipv6Packet, Ipv6Repr};

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = Ipv6Packet::new_checked(data) {
        let repr = Ipv6Repr::parse(&p).expect("checked view parses");
        let mut out = [0u8; 40];
        repr.emit(&mut Ipv6Packet::new_unchecked(&mut out[..]));
        assert_eq!(&out[..], &data[..40]);
        std::hint::black_box(p.payload());
    }
});
