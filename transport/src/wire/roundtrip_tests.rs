//! `emit(parse(x)) == x` for every header, over arbitrary bytes `x` whose reserved bits are
//! zero (reserved bits are dropped on parse and written as zero, as in smoltcp). The masks
//! below are the reserved bits of each layout table, so a field the repr forgot would show.

use proptest::prelude::*;

use super::*;

/// Set bits = reserved.
const BTH_RESERVED: [u8; BTH_LEN] = [0, 0, 0, 0, 0xff, 0, 0, 0, 0x1f, 0, 0, 0];
const TSETH_RESERVED: [u8; TSETH_LEN] = [0, 0, 0x7f, 0xf0];
const SETH_RESERVED: [u8; SETH_LEN] = {
    let mut m = [0u8; SETH_LEN];
    m[1] = 0x1e;
    m[12] = 0xff;
    m
};
const CC_STATE_RESERVED: [u8; CC_STATE_LEN] = [0, 0, 0x80, 0, 0, 0, 0, 0];
const NETH_RESERVED: [u8; NETH_LEN] = {
    let mut m = [0u8; NETH_LEN];
    m[1] = 0x7f;
    m[12] = 0xff;
    m[17] = 0xff;
    m
};
const PETH_RESERVED: [u8; PETH_LEN] = [
    0, 0x7f, 0xff, 0, 0, 0, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0x7f, 0xf0,
];
const ERTH_RESERVED: [u8; ERTH_LEN] = [
    0x3f, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0x7f, 0xf0,
];
const EETH_RESERVED: [u8; EETH_LEN] = {
    let mut m = [0xffu8; EETH_LEN];
    m[0] = 0x3f;
    let mut i = 4;
    while i < 16 {
        m[i] = 0;
        i += 1;
    }
    m[10] = 0x7f;
    m[11] = 0xf0;
    m
};

fn clear<const N: usize>(mut x: [u8; N], reserved: &[u8; N]) -> [u8; N] {
    for (b, m) in x.iter_mut().zip(reserved) {
        *b &= !m;
    }
    x
}

macro_rules! identity {
    ($name:ident, $packet:ident, $repr:ident, $len:expr, $reserved:expr) => {
        proptest! {
            #[test]
            fn $name(raw in any::<[u8; $len]>()) {
                let x = clear(raw, $reserved);
                let r = $repr::parse(&$packet::new_checked(&x[..]).unwrap()).unwrap();
                let mut out = [0xa5u8; $len];
                r.emit(&mut $packet::new_unchecked(&mut out[..]));
                prop_assert_eq!(out, x);
            }
        }
    };
}

identity!(bth, BthPacket, BthRepr, BTH_LEN, &BTH_RESERVED);
identity!(meth, MethPacket, MethRepr, METH_LEN, &[0; METH_LEN]);
identity!(tseth, TsethPacket, TsethRepr, TSETH_LEN, &TSETH_RESERVED);
identity!(reth, RethPacket, RethRepr, RETH_LEN, &[0; RETH_LEN]);
identity!(immdt, ImmDtPacket, ImmDtRepr, IMMDT_LEN, &[0; IMMDT_LEN]);
identity!(seth, SethPacket, SethRepr, SETH_LEN, &SETH_RESERVED);
identity!(
    cc_state,
    CcStatePacket,
    CcStateRepr,
    CC_STATE_LEN,
    &CC_STATE_RESERVED
);
identity!(neth, NethPacket, NethRepr, NETH_LEN, &NETH_RESERVED);
identity!(peth, PethPacket, PethRepr, PETH_LEN, &PETH_RESERVED);
identity!(erth, ErthPacket, ErthRepr, ERTH_LEN, &ERTH_RESERVED);
identity!(eeth, EethPacket, EethRepr, EETH_LEN, &EETH_RESERVED);
identity!(aeth, AethPacket, AethRepr, AETH_LEN, &[0; AETH_LEN]);
identity!(
    udp,
    UdpPacket,
    UdpRepr,
    UDP_HEADER_LEN,
    &[0; UDP_HEADER_LEN]
);
