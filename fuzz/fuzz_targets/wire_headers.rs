#![no_main]
//! Every MRC header decoder of `mrc_transport::wire` never panics, and what parses re-emits to
//! bytes that parse to the same repr. The first byte picks the header.
use libfuzzer_sys::fuzz_target;
use mrc_transport::wire::*;

macro_rules! check {
    ($data:expr, $packet:ident, $repr:ident, $len:expr) => {{
        if let Ok(p) = $packet::new_checked($data) {
            let r = $repr::parse(&p).expect("a checked view parses");
            let _ = r.to_string();
            let mut out = [0u8; $len];
            r.emit(&mut $packet::new_unchecked(&mut out[..]));
            let again = $repr::parse(&$packet::new_checked(&out[..]).unwrap()).unwrap();
            assert_eq!(again, r);
        }
    }};
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    match which % 13 {
        0 => check!(rest, BthPacket, BthRepr, BTH_LEN),
        1 => check!(rest, MethPacket, MethRepr, METH_LEN),
        2 => check!(rest, TsethPacket, TsethRepr, TSETH_LEN),
        3 => check!(rest, RethPacket, RethRepr, RETH_LEN),
        4 => check!(rest, ImmDtPacket, ImmDtRepr, IMMDT_LEN),
        5 => check!(rest, SethPacket, SethRepr, SETH_LEN),
        6 => check!(rest, CcStatePacket, CcStateRepr, CC_STATE_LEN),
        7 => check!(rest, NethPacket, NethRepr, NETH_LEN),
        8 => check!(rest, PethPacket, PethRepr, PETH_LEN),
        9 => check!(rest, ErthPacket, ErthRepr, ERTH_LEN),
        10 => check!(rest, EethPacket, EethRepr, EETH_LEN),
        11 => check!(rest, AethPacket, AethRepr, AETH_LEN),
        _ => check!(rest, UdpPacket, UdpRepr, UDP_HEADER_LEN),
    }
});
