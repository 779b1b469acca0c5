#![no_main]
//! What a trimming switch does to peer bytes (brief §2.15, `wire::trim_frame`) never panics,
//! never grows a frame, and a trimmed frame is classified as trimmed before anything else:
//! the parser bounds its lengths by what survived and never reads its ICRC.
use libfuzzer_sys::fuzz_target;
use mrc_transport::wire::{Trimmed, WireConfig, parse_frame, trim_frame};

fuzz_target!(|data: &[u8]| {
    let Some((&how, rest)) = data.split_first() else {
        return;
    };
    let mut cfg = WireConfig::default();
    // Trim sizes around the headers' end, where a cut loses RETH or the BTH.
    cfg.trim_size = 64 + u16::from(how >> 1);
    let at = if how & 1 == 0 {
        Trimmed::InFabric
    } else {
        Trimmed::LastHop
    };
    let mut f = rest.to_vec();
    let Ok(n) = trim_frame(&mut f, &cfg, at) else {
        return;
    };
    assert!(n <= rest.len());
    if let Ok(p) = parse_frame(&f[..n], &cfg) {
        let _ = p.to_string();
        assert_eq!(p.trimmed, Some(at), "a trimmed frame is seen as trimmed");
        assert!(p.icrc.is_none(), "a trimmed frame's ICRC is never read");
    }
});
