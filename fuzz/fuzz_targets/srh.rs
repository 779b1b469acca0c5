#![no_main]
//! The SRH view and repr (RFC 8754) never panic on peer bytes, never read past the header, and
//! what parses re-emits identically.
use libfuzzer_sys::fuzz_target;
use mrc_srv6::wire::{SrhPacket, SrhRepr, TlvType};

fuzz_target!(|data: &[u8]| {
    let Ok(p) = SrhPacket::new_checked(data) else {
        return;
    };
    let repr = SrhRepr::parse(&p).expect("checked view parses");
    assert_eq!(p.segments().count(), p.segment_count());
    // Every TLV byte is accounted for: Pad1 is one byte, the others type + length + data.
    let tlv_bytes: usize = p
        .tlvs()
        .map(|t| match t.kind {
            TlvType::Pad1 => 1,
            _ => 2 + t.data.len(),
        })
        .sum();
    assert_eq!(tlv_bytes, p.tlv_bytes().len());
    std::hint::black_box((p.active_segment(), p.payload()));
    let mut out = vec![0u8; repr.buffer_len()];
    repr.emit(&mut SrhPacket::new_unchecked(&mut out[..]));
    assert_eq!(&out[..], &data[..p.header_len()]);
    let _ = repr.to_string();
});
