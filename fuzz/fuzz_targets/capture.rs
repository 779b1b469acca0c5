#![no_main]
//! `mrc-fabric dump`'s capture reader and frame rendering (the apps' modules, included by
//! path: they use only std, mrc-srv6 and mrc-transport) never panic on any bytes, and the
//! records they hand back never hold more bytes than the file (nothing allocated past it).
use libfuzzer_sys::fuzz_target;
use mrc_transport::wire::WireConfig;

#[allow(dead_code)]
#[path = "../../apps/src/fabric/capture.rs"]
mod capture;
#[allow(dead_code)]
#[path = "../../apps/src/fabric/decode.rs"]
mod decode;

fuzz_target!(|data: &[u8]| {
    let Ok(mut reader) = capture::Reader::new(data) else {
        return;
    };
    let cfg = WireConfig::default();
    let mut held = 0usize;
    let mut out = String::new();
    while let Some(rec) = reader.next_record() {
        let Ok(rec) = rec else {
            assert!(reader.next_record().is_none(), "nothing after an error");
            break;
        };
        held += rec.data.len();
        assert!(
            held <= data.len(),
            "{held} record bytes from a {}-byte file",
            data.len()
        );
        assert_eq!(rec.number, reader.packets());
        out.clear();
        decode::render_record(&mut out, &rec, &cfg);
    }
});
