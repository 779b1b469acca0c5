use super::*;
use crate::wire::ipv6::next_header;
use crate::wire::{IPV6_HEADER_LEN, Ipv6Packet, Ipv6Repr};
use proptest::prelude::*;

/// RFC 8754 §2 layout, typed in by hand: next header 41 (IPv6), hdr ext len 5 (48 bytes),
/// routing type 4, segments left 1, last entry 1, flags 0, tag 0x1234,
/// Segment List[0] = fcbb:bb00:e003::, Segment List[1] = fcbb:bb00:1000:2001:1001:8003::,
/// then a Pad1 TLV and a PadN TLV with 5 bytes of padding (RFC 8754 §2.1.1).
const VECTOR: [u8; 48] = [
    41, 5, 4, 1, 1, 0, 0x12, 0x34, //
    0xfc, 0xbb, 0xbb, 0x00, 0xe0, 0x03, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, //
    0xfc, 0xbb, 0xbb, 0x00, 0x10, 0x00, 0x20, 0x01, 0x10, 0x01, 0x80, 0x03, 0, 0, 0, 0, //
    0x00, 0x04, 0x05, 0, 0, 0, 0, 0,
];

fn addr(s: &str) -> Ipv6Addr {
    s.parse().unwrap()
}

#[test]
fn parses_hand_written_vector() {
    let p = SrhPacket::new_checked(&VECTOR[..]).unwrap();
    assert_eq!(p.header_len(), 48);
    assert_eq!(p.segment_count(), 2);
    assert_eq!(
        p.active_segment(),
        Some(addr("fcbb:bb00:1000:2001:1001:8003::"))
    );
    let segs: Vec<_> = p.segments().collect();
    assert_eq!(
        segs,
        [
            addr("fcbb:bb00:e003::"),
            addr("fcbb:bb00:1000:2001:1001:8003::")
        ]
    );
    let tlvs: Vec<_> = p.tlvs().collect();
    assert_eq!(
        tlvs,
        [
            Tlv {
                kind: TlvType::Pad1,
                data: &[]
            },
            Tlv {
                kind: TlvType::PadN,
                data: &[0; 5]
            }
        ]
    );
    let r = SrhRepr::parse(&p).unwrap();
    assert_eq!(r.next_header, next_header::IPV6);
    assert_eq!((r.segments_left, r.flags, r.tag), (1, 0, 0x1234));
    let mut out = [0u8; 48];
    r.emit(&mut SrhPacket::new_unchecked(&mut out[..]));
    assert_eq!(out, VECTOR);
    assert_eq!(
        r.to_string(),
        "SRH nh 41 sl 1 le 1 flags 0x00 tag 4660 segs [fcbb:bb00:e003::, \
         fcbb:bb00:1000:2001:1001:8003::] tlvs 8B"
    );
}

#[test]
fn one_segment_srh_is_24_bytes() {
    let seg = addr("fcbb:bb00:1001:8003::");
    let r = SrhRepr::one_segment(next_header::IPV6, &seg);
    assert_eq!(r.buffer_len(), 24);
    let mut out = [0u8; 24];
    r.emit(&mut SrhPacket::new_unchecked(&mut out[..]));
    assert_eq!(&out[..8], &[41, 2, 4, 1, 0, 0, 0, 0]);
    let p = SrhPacket::new_checked(&out[..]).unwrap();
    assert_eq!(
        p.active_segment(),
        None,
        "segments left 1 points past a 1-list"
    );
    assert_eq!(p.segment(0), Some(seg));
    assert_eq!(SrhRepr::parse(&p).unwrap(), r);
}

#[test]
fn rejects_inconsistent_headers() {
    let malformed = |bytes: &[u8]| SrhPacket::new_checked(bytes).unwrap_err();
    assert!(matches!(
        malformed(&VECTOR[..7]),
        WireError::Truncated { need: 8, .. }
    ));
    assert!(matches!(
        malformed(&VECTOR[..47]),
        WireError::Truncated { need: 48, .. }
    ));
    let mut v = VECTOR;
    v[2] = 0; // routing type 0 (deprecated RH0)
    assert_eq!(
        malformed(&v),
        WireError::Malformed {
            what: "SRH routing type"
        }
    );
    let mut v = VECTOR;
    v[4] = 2; // last entry 2 needs 3 * 16 + 8 = 56 bytes > 48
    assert_eq!(
        malformed(&v),
        WireError::Malformed {
            what: "SRH last entry beyond header"
        }
    );
    let mut v = VECTOR;
    v[3] = 3; // segments left 3 > last entry + 1
    assert_eq!(
        malformed(&v),
        WireError::Malformed {
            what: "SRH segments left beyond last entry"
        }
    );
    let mut v = VECTOR;
    v[42] = 6; // PadN claims 6 bytes, only 5 are left
    assert_eq!(
        malformed(&v),
        WireError::Malformed {
            what: "SRH TLV length"
        }
    );
    let mut v = VECTOR;
    v[40..].copy_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0x05]); // HMAC type, no length byte
    assert_eq!(
        malformed(&v),
        WireError::Malformed {
            what: "SRH TLV header"
        }
    );
}

#[test]
fn hmac_and_unknown_tlvs_are_skipped_by_length() {
    // 1 segment + HMAC TLV (type 5, len 14: D/reserved 2 + key id 4 + 8-byte HMAC) = 8+16+16.
    let mut v = [0u8; 40];
    v[..8].copy_from_slice(&[17, 4, 4, 0, 0, 0, 0, 0]);
    v[8..10].copy_from_slice(&[0xfc, 0xbb]);
    v[24..26].copy_from_slice(&[5, 14]);
    v[26..40].copy_from_slice(&[0x80, 0, 0, 0, 0, 7, 1, 2, 3, 4, 5, 6, 7, 8]);
    let p = SrhPacket::new_checked(&v[..]).unwrap();
    let tlvs: Vec<_> = p.tlvs().collect();
    assert_eq!(tlvs.len(), 1);
    assert_eq!(tlvs[0].kind, TlvType::Hmac);
    assert_eq!(tlvs[0].data.len(), 14);
    v[24] = 0x99;
    let p = SrhPacket::new_checked(&v[..]).unwrap();
    assert_eq!(p.tlvs().next().unwrap().kind, TlvType::Unknown(0x99));
    assert_eq!(u8::from(TlvType::Unknown(0x99)), 0x99);
}

/// etherparse (an independent IPv6 parser) agrees on where the SRH ends and what follows.
#[test]
fn etherparse_agrees_on_extension_length() {
    let segs = [addr("fcbb:bb00:e003::"), addr("fcbb:bb00:2001:1001::")];
    let srh = SrhRepr {
        next_header: next_header::UDP,
        segments_left: 1,
        flags: 0,
        tag: 7,
        segments: SegmentList::Addrs(&segs),
        tlvs: &[0, 0, 0, 0, 0, 0, 0, 0],
    };
    let udp = [0x12, 0x34, 0x12, 0xb7, 0, 12, 0, 0, 1, 2, 3, 4];
    let ip = Ipv6Repr {
        dscp: crate::wire::Dscp(4),
        ecn: crate::wire::Ecn::Ect0,
        flow_label: 9,
        payload_len: (srh.buffer_len() + udp.len()) as u16,
        next_header: next_header::ROUTING,
        hop_limit: 64,
        src_addr: addr("2001:db8::1"),
        dst_addr: addr("fcbb:bb00:1000:2001:1001::"),
    };
    let mut frame = vec![0u8; IPV6_HEADER_LEN + srh.buffer_len() + udp.len()];
    ip.emit(&mut Ipv6Packet::new_unchecked(&mut frame[..]));
    srh.emit(&mut SrhPacket::new_unchecked(&mut frame[IPV6_HEADER_LEN..]));
    frame[IPV6_HEADER_LEN + srh.buffer_len()..].copy_from_slice(&udp);
    let sliced = etherparse::Ipv6Slice::from_slice(&frame).unwrap();
    assert_eq!(sliced.payload().ip_number, etherparse::IpNumber::UDP);
    assert_eq!(sliced.payload().payload, &udp);
    let raw = etherparse::Ipv6RawExtHeaderSlice::from_slice(&frame[IPV6_HEADER_LEN..]).unwrap();
    assert_eq!(raw.slice().len(), srh.buffer_len());
}

fn arb_tlvs() -> impl Strategy<Value = Vec<u8>> {
    // Whole TLVs (Pad1, or type + len + data), then Pad1s up to a multiple of 8.
    prop::collection::vec(
        prop_oneof![
            Just(vec![0u8]),
            (1u8.., prop::collection::vec(any::<u8>(), 0..20)).prop_map(|(t, d)| {
                let t = if t == 0 { 4 } else { t };
                let mut v = vec![t, d.len() as u8];
                v.extend(d);
                v
            }),
        ],
        0..4,
    )
    .prop_map(|parts| {
        let mut v: Vec<u8> = parts.concat();
        while !v.len().is_multiple_of(8) {
            v.push(0);
        }
        v
    })
}

proptest! {
    #[test]
    fn roundtrip(
        nh in any::<u8>(),
        flags in any::<u8>(),
        tag in any::<u16>(),
        segs in prop::collection::vec(any::<[u8; 16]>().prop_map(Ipv6Addr::from), 1..8),
        sl_seed in any::<u8>(),
        tlvs in arb_tlvs(),
    ) {
        let sl = sl_seed % (segs.len() as u8 + 1);
        let r = SrhRepr { next_header: nh, segments_left: sl, flags, tag, segments: SegmentList::Addrs(&segs), tlvs: &tlvs };
        let mut buf = vec![0u8; r.buffer_len()];
        r.emit(&mut SrhPacket::new_unchecked(&mut buf[..]));
        let p = SrhPacket::new_checked(&buf[..]).unwrap();
        let parsed = SrhRepr::parse(&p).unwrap();
        prop_assert_eq!(parsed, r);
        let mut again = vec![0u8; parsed.buffer_len()];
        parsed.emit(&mut SrhPacket::new_unchecked(&mut again[..]));
        prop_assert_eq!(&again, &buf);
        let raw = etherparse::Ipv6RawExtHeaderSlice::from_slice(&buf).unwrap();
        prop_assert_eq!(raw.slice().len(), buf.len());
    }

    #[test]
    fn never_panics_and_reemits(bytes in prop::collection::vec(any::<u8>(), 0..96), tweak in any::<bool>()) {
        let mut bytes = bytes;
        if tweak && bytes.len() >= 8 {
            // Make the interesting path likely: routing type 4 and a length that fits.
            bytes[2] = 4;
            bytes[1] = ((bytes.len() / 8) as u8).saturating_sub(1);
            bytes[4] %= 3;
        }
        if let Ok(p) = SrhPacket::new_checked(&bytes[..]) {
            let r = SrhRepr::parse(&p).unwrap();
            prop_assert_eq!(p.segments().count(), p.segment_count());
            let _ = p.tlvs().count();
            let _ = p.active_segment();
            let mut out = vec![0u8; r.buffer_len()];
            r.emit(&mut SrhPacket::new_unchecked(&mut out[..]));
            prop_assert_eq!(&out[..], &bytes[..p.header_len()]);
        }
    }
}
