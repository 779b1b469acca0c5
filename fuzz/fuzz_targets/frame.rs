#![no_main]
//! `parse_frame` never panics on any bytes, with or without the ICRC check; a frame that
//! parses (untrimmed) rebuilds into a frame that parses to the same headers and payload; the
//! fixed-offset fast path and the general parser agree on every input (same frame, or the
//! general parser's error); the lean receive view (issue #13) takes exactly the untrimmed
//! data, SACK and ACK frames in the engine's own layouts (no SRH, or one of 24 bytes) and gives
//! the general parse's fields there, or its error (a bad ICRC), and refuses every other input.
use libfuzzer_sys::fuzz_target;
use mrc_transport::wire::frame::parse_lean;
use mrc_transport::wire::{Body, WireConfig, parse_frame, parse_frame_general};

/// Whether the lean view must take `data` under `cfg`: the general parser, ICRC check aside,
/// reads an untrimmed data, SACK or ACK frame whose SRH, if any, is 24 bytes (Hdr Ext Len 2, right
/// after the outer IPv6 header).
fn lean_must_take(data: &[u8], cfg: &WireConfig) -> bool {
    let lenient = WireConfig {
        verify_icrc: false,
        ..*cfg
    };
    parse_frame_general(data, &lenient).is_ok_and(|f| {
        f.to_lean().is_some() && (f.srh.is_none() || data.get(14 + 40 + 1) == Some(&2))
    })
}

fuzz_target!(|data: &[u8]| {
    let strict = WireConfig::default();
    let lenient = WireConfig {
        verify_icrc: false,
        ..strict
    };
    let _ = parse_frame(data, &strict).map(|f| f.to_string());
    for cfg in [&strict, &lenient] {
        let general = parse_frame_general(data, cfg);
        assert_eq!(parse_frame(data, cfg), general);
        match parse_lean(data, cfg) {
            None => assert!(!lean_must_take(data, cfg), "lean view refused {general:?}"),
            Some(lean) => {
                assert!(lean_must_take(data, cfg), "lean view took {lean:?}");
                match (lean, general) {
                    (Ok(v), Ok(f)) => assert_eq!(Some(v), f.to_lean()),
                    (l, g) => assert_eq!(l.err(), g.err()),
                }
            }
        }
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
