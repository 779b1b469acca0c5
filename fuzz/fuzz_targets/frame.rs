#![no_main]
//! `parse_frame` never panics on any bytes, with or without the ICRC check; a frame that
//! parses (untrimmed) rebuilds into a frame that parses to the same headers and payload; the
//! fixed-offset fast path and the general parser agree on every input (same frame, or the
//! general parser's error).
use libfuzzer_sys::fuzz_target;
use mrc_transport::wire::{Body, WireConfig, parse_frame, parse_frame_general};

fuzz_target!(|data: &[u8]| {
    let strict = WireConfig::default();
    let lenient = WireConfig {
        verify_icrc: false,
        ..strict
    };
    let _ = parse_frame(data, &strict).map(|f| f.to_string());
    for cfg in [&strict, &lenient] {
        assert_eq!(parse_frame(data, cfg), parse_frame_general(data, cfg));
    }
    let Ok(f) = parse_frame(data, &lenient) else {
        return;
    };
    let _ = f.to_string();
    let Some(mut repr) = f.to_repr() else {
        assert!(f.trimmed.is_some(), "only a trimmed frame may lose its body");
        return;
    };
    if f.trimmed.is_some() {
        return;
    }
    let payload = if matches!(repr.body, Body::Write(_)) { f.payload } else { &[] };
    let mut buf = vec![0u8; repr.buffer_len(payload.len())];
    repr.build(&mut buf, payload, &strict).expect("sized buffer");
    let g = parse_frame(&buf, &strict).expect("a rebuilt frame parses, ICRC included");
    // Derived on emit: the pad count from the payload length, `ts` from the body.
    repr.bth.pad_count = ((4 - payload.len() % 4) % 4) as u8;
    repr.bth.ts = repr.body.ts_flag();
    assert_eq!(g.to_repr(), Some(repr));
    assert_eq!(g.payload, payload);
});
