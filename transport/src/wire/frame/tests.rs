//! Whole-frame tests: build/parse round trips in both modes, trimmed frames, typed errors,
//! never-panics.

use core::net::Ipv6Addr;

use mrc_srv6::wire::{Dscp, Ecn, EthernetAddress};
use proptest::prelude::*;

use super::super::aeth::AethRepr;
use super::super::cc_state::CcStateRepr;
use super::super::config::{Trimmed, WireConfig};
use super::super::eeth::EethRepr;
use super::super::erth::{EndpointOp, ErthRepr};
use super::super::immdt::ImmDtRepr;
use super::super::meth::MethRepr;
use super::super::neth::{NackReason, NethRepr};
use super::super::opcode::Opcode;
use super::super::peth::PethRepr;
use super::super::reth::RethRepr;
use super::super::seth::{MultipathVerdict, SethRepr};
use super::super::tseth::TsethRepr;
use super::super::{BthRepr, WireError};
use super::*;

fn addr(s: &str) -> Ipv6Addr {
    s.parse().unwrap()
}

fn bth(opcode: Opcode, psn: u32) -> BthRepr {
    BthRepr {
        opcode,
        solicited: false,
        mig_req: false,
        pad_count: 0,
        tver: 0,
        pkey: 0xffff,
        dest_qp: 0x42,
        ack_req: true,
        rtx: false,
        ts: false,
        psn,
    }
}

fn write_repr(route: Route, payload_len: usize) -> FrameRepr {
    FrameRepr {
        src_mac: EthernetAddress([2, 0, 0, 0, 0, 1]),
        dst_mac: EthernetAddress([2, 0, 0, 0, 0, 2]),
        route,
        src_addr: addr("fcbb:bb00:e000::"),
        dst_addr: addr("fcbb:bb00:e001::"),
        dscp: Dscp(4),
        ecn: Ecn::Ect0,
        entropy: 0x0001_0007,
        bth: BthRepr {
            ts: true,
            pad_count: ((4 - payload_len % 4) % 4) as u8,
            ..bth(Opcode::WriteOnlyImm, 1000)
        },
        body: Body::Write(WriteHeaders {
            meth: MethRepr { rqmsn: 3, msn: 9 },
            tseth: Some(TsethRepr::at_nanos(1_000_000)),
            reth: RethRepr {
                va: 0x1000,
                rkey: 0xabcd,
                dma_len: 4096,
            },
            immdt: Some(ImmDtRepr { imm: 0x55aa }),
        }),
    }
}

fn srv6(srh: bool) -> Route {
    Route::Srv6 {
        path: addr("fcbb:bb00:1000:2001:1001:e001::"),
        srh_segment: srh.then(|| addr("fcbb:bb00:2002:1003::")),
    }
}

/// An SRv6 Write frame (no SRH) with `payload_len` bytes of payload, for other modules' tests.
pub(super) fn srv6_write_frame(payload_len: usize) -> Vec<u8> {
    build(
        &write_repr(srv6(false), payload_len),
        &vec![5u8; payload_len],
    )
}

fn build(repr: &FrameRepr, payload: &[u8]) -> Vec<u8> {
    let cfg = WireConfig::default();
    let mut buf = vec![0u8; repr.buffer_len(payload.len())];
    let len = repr.build(&mut buf, payload, &cfg).unwrap();
    assert_eq!(len, buf.len());
    buf
}

#[test]
fn srv6_write_with_srh_round_trips() {
    let payload: Vec<u8> = (0..1001u32).map(|i| i as u8).collect();
    let repr = write_repr(srv6(true), payload.len());
    let buf = build(&repr, &payload);
    // 14 + 40 + 24 + 40 + 8 + 12 + 4 + 4 + 16 + 4 + 1001 + 3 pad + 4 ICRC.
    assert_eq!(buf.len(), 1174);
    let f = parse_frame(&buf, &WireConfig::default()).unwrap();
    assert_eq!(f.payload, &payload[..]);
    assert_eq!(f.trimmed, None);
    assert!(f.is_srv6());
    assert_eq!(f.entropy, 0x0001_0007);
    assert_eq!(f.udp.src_port, 7);
    assert_eq!(f.outer.flow_label, 1);
    assert_eq!(f.inner.unwrap().flow_label, 1);
    assert_eq!(f.outer.next_header, 43);
    assert_eq!(f.srh.unwrap().segments_left, 1);
    assert_eq!(f.bth.pad_count, 3);
    assert!(f.bth.ts);
    assert_eq!(f.to_repr().unwrap(), repr);
    assert_eq!(build(&f.to_repr().unwrap(), f.payload), buf);
}

/// One body of every control kind (ACK, SACK, NACK, probe, both endpoint operations).
fn control_bodies() -> [(Opcode, Body); 6] {
    let seth = SethRepr {
        verdict: MultipathVerdict::SkipOnce,
        cack_psn: 77,
        sack_bitmap: 0b1011,
        entropy: 0x0001_0007,
        ..SethRepr::default()
    };
    [
        (Opcode::Ack, Body::Ack(AethRepr::ack(5))),
        (
            Opcode::Sack,
            Body::Sack {
                seth,
                cc: CcStateRepr {
                    rcvd_bytes: 12,
                    ..CcStateRepr::default()
                },
            },
        ),
        (
            Opcode::Nack,
            Body::Nack(NethRepr {
                hdr_type: 0,
                next: 0,
                reason: NackReason::TrimmedLastHop,
                vendor_info: 0,
                entropy: 9,
                spdcid: 1,
                dpdcid: 2,
                nack_psn: 1000,
                cc_type: 0,
                cc_flags: 0,
                tx_timestamp: 3,
            }),
        ),
        (
            Opcode::Probe,
            Body::Probe(PethRepr {
                hdr_type: 0,
                next: 0,
                vendor_info: 0,
                probe_id: 4,
                spdcid: 1,
                dpdcid: 2,
                tx_timestamp: 5,
                tsr: false,
                format_type: 1,
            }),
        ),
        (
            Opcode::EndpointRequest,
            Body::EndpointRequest(ErthRepr {
                op: EndpointOp::PortStatusUpdate,
                port_status_mask: 0xfe,
                tx_timestamp: 1,
                tsr: false,
                format_type: 1,
            }),
        ),
        (
            Opcode::EndpointResponse,
            Body::EndpointResponse(EethRepr {
                op: EndpointOp::EvProbe,
                port_status_mask: 0xff,
                tx_timestamp: 1,
                tsr: false,
                format_type: 1,
                service_time_ns: 300,
            }),
        ),
    ]
}

#[test]
fn ecmp_and_srv6_without_srh_round_trip_every_control_body() {
    let bodies = control_bodies();
    for route in [Route::Ecmp, srv6(false)] {
        for (op, body) in bodies {
            let repr = FrameRepr {
                bth: bth(op, 77),
                body,
                dscp: Dscp(46),
                ..write_repr(route, 0)
            };
            let buf = build(&repr, &[]);
            let f = parse_frame(&buf, &WireConfig::default()).unwrap();
            assert_eq!(f.to_repr().unwrap(), repr, "{op}");
            assert!(f.payload.is_empty());
            assert_eq!(f.is_srv6(), route != Route::Ecmp);
        }
    }
}

#[test]
fn trimmed_frames_are_classified_first_and_still_name_psn_qpn_ev() {
    let cfg = WireConfig::default();
    let payload = [7u8; 4000];
    let mut buf = build(&write_repr(srv6(false), payload.len()), &payload);
    // A switch trims to trim_size and rewrites the outer DSCP; the lengths keep their values.
    buf.truncate(usize::from(cfg.trim_size));
    let tc_byte = |dscp: u8| (6 << 4) | (dscp >> 2);
    buf[14] = tc_byte(12);
    let f = parse_frame(&buf, &cfg).unwrap();
    assert_eq!(f.trimmed, Some(Trimmed::InFabric));
    assert_eq!((f.bth.psn, f.bth.dest_qp), (1000, 0x42));
    assert_eq!(f.entropy, 0x0001_0007);
    assert!(matches!(f.body, Some(Body::Write(w)) if w.reth.va == 0x1000));
    assert_eq!(f.icrc, None);
    assert!(f.to_string().contains("TRIMMED (in fabric)"));

    // Trimmed to the BTH only (as the lab's tc-BPF trimmer does), at the last hop.
    let bth_end = 14 + 40 + 40 + 8 + 12;
    buf.truncate(bth_end);
    buf[14] = tc_byte(16);
    let f = parse_frame(&buf, &cfg).unwrap();
    assert_eq!(f.trimmed, Some(Trimmed::LastHop));
    assert_eq!(f.body, None);
    assert_eq!(f.bth.psn, 1000);

    // The same cut without the DSCP rewrite is a length error, not a trim.
    buf[14] = tc_byte(4);
    assert!(matches!(
        parse_frame(&buf, &cfg),
        Err(WireError::LengthMismatch { .. })
    ));
}

#[test]
fn corrupt_frames_yield_distinct_typed_errors() {
    let cfg = WireConfig::default();
    let payload = [1u8; 64];
    let good = build(&write_repr(Route::Ecmp, payload.len()), &payload);
    assert!(parse_frame(&good, &cfg).is_ok());

    let mut bad = good.clone();
    bad[good.len() - 10] ^= 0x01;
    assert!(matches!(
        parse_frame(&bad, &cfg),
        Err(WireError::BadIcrc { .. })
    ));
    let no_check = WireConfig {
        verify_icrc: false,
        ..cfg
    };
    assert!(parse_frame(&bad, &no_check).is_ok());

    // Fields the ICRC masks may change in flight: hop limit, DSCP/ECN, UDP checksum.
    let mut hop = good.clone();
    hop[14 + 7] = 3;
    hop[14 + 1] |= 0x30; // ECN CE
    assert_eq!(parse_frame(&hop, &cfg).unwrap().ecn(), Ecn::Ce);

    let mut port = good.clone();
    port[14 + 40 + 3] = 0x00;
    assert!(matches!(
        parse_frame(&port, &cfg),
        Err(WireError::NotMrcPort(_))
    ));

    let mut op = good.clone();
    op[14 + 40 + 8] = 0x04;
    assert_eq!(parse_frame(&op, &cfg), Err(WireError::UnknownOpcode(0x04)));

    let mut v4 = good.clone();
    v4[12..14].copy_from_slice(&[0x08, 0x00]);
    assert_eq!(parse_frame(&v4, &cfg), Err(WireError::NotIpv6(0x0800)));

    let mut nh = good.clone();
    nh[14 + 6] = 6;
    assert_eq!(
        parse_frame(&nh, &cfg),
        Err(WireError::UnexpectedNextHeader(6))
    );

    let mut udp_len = good.clone();
    udp_len[14 + 40 + 5] ^= 0x01;
    assert!(matches!(
        parse_frame(&udp_len, &cfg),
        Err(WireError::LengthMismatch {
            what: "UDP length",
            ..
        })
    ));

    assert!(matches!(
        parse_frame(&good[..20], &cfg),
        Err(WireError::Truncated { .. })
    ));
    // Trailing bytes (an FCS) are ignored.
    let mut fcs = good.clone();
    fcs.extend_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
    assert_eq!(parse_frame(&fcs, &cfg).unwrap().payload, &payload[..]);
}

#[test]
fn small_buffers_are_refused() {
    let repr = write_repr(Route::Ecmp, 100);
    let mut buf = [0u8; 100];
    assert_eq!(
        repr.emit(&mut buf, 100, &WireConfig::default()),
        Err(WireError::BufferTooSmall {
            need: repr.buffer_len(100),
            have: 100
        })
    );
}

#[test]
fn payloads_beyond_the_ipv6_length_field_are_refused() {
    let repr = write_repr(srv6(true), 0);
    let too_long = 65_535 - (repr.header_len() - 14 - 40) - 4 + 1;
    let mut buf = vec![0u8; repr.buffer_len(too_long)];
    assert!(matches!(
        repr.emit(&mut buf, too_long, &WireConfig::default()),
        Err(WireError::Malformed { .. })
    ));
    assert!(
        repr.emit(&mut buf, too_long - 4, &WireConfig::default())
            .is_ok()
    );
}

#[test]
fn udp_checksum_when_configured_is_valid() {
    let cfg = WireConfig {
        udp_checksum: true,
        ..WireConfig::default()
    };
    let repr = write_repr(srv6(false), 10);
    let mut buf = vec![0u8; repr.buffer_len(10)];
    repr.build(&mut buf, &[3u8; 10], &cfg).unwrap();
    let udp_at = 14 + 80;
    let carried = u16::from_be_bytes([buf[udp_at + 6], buf[udp_at + 7]]);
    assert_ne!(carried, 0);
    let mut zeroed = buf[udp_at..].to_vec();
    zeroed[6..8].fill(0);
    assert_eq!(
        super::super::udp::checksum_ipv6(&repr.src_addr, &repr.dst_addr, &zeroed),
        carried
    );
    assert!(parse_frame(&buf, &cfg).is_ok());
}

fn arb_repr() -> impl Strategy<Value = (FrameRepr, usize)> {
    (
        0u8..3,
        any::<u32>(),
        0u32..0x0100_0000,
        any::<bool>(),
        any::<u64>(),
        0usize..300,
        0u8..64,
        0u8..4,
    )
        .prop_map(|(mode, ev, psn, ts, va, len, dscp, ecn)| {
            let route = match mode {
                0 => Route::Ecmp,
                1 => srv6(false),
                _ => srv6(true),
            };
            let mut r = write_repr(route, len);
            r.entropy = ev;
            r.bth.psn = psn;
            r.bth.ts = ts;
            r.dscp = Dscp(if dscp == 12 || dscp == 16 { 4 } else { dscp });
            r.ecn = Ecn::from_bits(ecn);
            if let Body::Write(w) = &mut r.body {
                w.reth.va = va;
                w.tseth = ts.then_some(TsethRepr::at_nanos(va));
            }
            (r, len)
        })
}

proptest! {
    #[test]
    fn emit_parse_emit_is_identity((repr, len) in arb_repr(), seed in any::<u8>()) {
        let payload: Vec<u8> = (0..len).map(|i| (i as u8) ^ seed).collect();
        let buf = build(&repr, &payload);
        let f = parse_frame(&buf, &WireConfig::default()).unwrap();
        prop_assert_eq!(f.payload, &payload[..]);
        prop_assert_eq!(f.to_repr().unwrap(), repr);
        prop_assert_eq!(build(&f.to_repr().unwrap(), f.payload), buf);
    }

    #[test]
    fn never_panics_on_random_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = parse_frame(&bytes, &WireConfig::default()).map(|f| f.to_string());
    }

    #[test]
    fn never_panics_on_mutated_frames((repr, len) in arb_repr(), edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..6), cut in any::<usize>()) {
        let mut buf = build(&repr, &vec![9u8; len]);
        for (at, v) in edits {
            let n = buf.len();
            buf[at % n] = v;
        }
        let n = buf.len();
        buf.truncate(cut % (n + 1));
        let _ = parse_frame(&buf, &WireConfig::default()).map(|f| f.to_string());
    }
}

#[test]
fn a_bad_srh_is_malformed_not_a_panic() {
    let buf = build(&write_repr(srv6(true), 8), &[0u8; 8]);
    let srh_at = 14 + 40;
    let mut sl = buf.clone();
    sl[srh_at + 3] = 5; // segments left beyond the one-entry list
    assert!(matches!(
        parse_frame(&sl, &WireConfig::default()),
        Err(WireError::Malformed { .. })
    ));
    let mut ty = buf.clone();
    ty[srh_at + 2] = 2; // not routing type 4
    assert!(matches!(
        parse_frame(&ty, &WireConfig::default()),
        Err(WireError::Malformed { .. })
    ));
}

/// A SACK in the given route, as the engine sends it (control class, not ECN-capable).
fn sack_repr(route: Route) -> FrameRepr {
    FrameRepr {
        bth: bth(Opcode::Sack, 77),
        body: Body::Sack {
            seth: SethRepr {
                verdict: MultipathVerdict::SkipOnce,
                cack_psn: 77,
                sack_bitmap: 0b1011,
                entropy: 0x0001_0007,
                ..SethRepr::default()
            },
            cc: CcStateRepr {
                rcvd_bytes: 12,
                ..CcStateRepr::default()
            },
        },
        ecn: Ecn::NotEct,
        ..write_repr(route, 0)
    }
}

/// The fast parser and the general one give the same frame whenever the fast one answers;
/// the fast one answers for every untrimmed frame the engine builds (else it would be a
/// fast path nobody takes); trimmed frames go to the general parser.
fn fast_agrees(buf: &[u8], cfg: &WireConfig) -> Result<bool, TestCaseError> {
    let general = parse_frame_general(buf, cfg);
    if let Some(f) = fast::parse(buf, cfg) {
        prop_assert_eq!(f, general, "fast and general parsers differ");
        Ok(true)
    } else {
        prop_assert_eq!(parse_frame(buf, cfg), general);
        Ok(false)
    }
}

/// The frames [`parse_lean`] must take: those the general parser, ICRC check aside, reads as
/// an untrimmed data, SACK or ACK frame in one of the engine's own layouts (no SRH, or a
/// one-segment one of exactly 24 bytes).
fn lean_must_take(buf: &[u8], cfg: &WireConfig) -> bool {
    let lenient = WireConfig {
        verify_icrc: false,
        ..*cfg
    };
    let Ok(f) = parse_frame_general(buf, &lenient) else {
        return false;
    };
    // The SRH, when there is one, follows the outer IPv6 header: Hdr Ext Len 2 is 24 bytes.
    let srh_len_ok = f.srh.is_none() || buf.get(14 + 40 + 1) == Some(&2);
    f.to_lean().is_some() && srh_len_ok
}

/// The lean view takes exactly the frames it must ([`lean_must_take`]) and then gives the
/// general parse's fields ([`Frame::to_lean`]), or its error (a bad ICRC); it refuses every
/// other frame, which then goes to the general parser. `Ok(true)` when it took the frame.
fn lean_agrees(buf: &[u8], cfg: &WireConfig) -> Result<bool, TestCaseError> {
    let general = parse_frame_general(buf, cfg);
    let must = lean_must_take(buf, cfg);
    match parse_lean(buf, cfg) {
        None => {
            prop_assert!(
                !must,
                "the lean view refused a frame it must take: {:?}",
                general
            );
            Ok(false)
        }
        Some(lean) => {
            prop_assert!(
                must,
                "the lean view took a frame it must refuse: {:?}",
                lean
            );
            match (lean, general) {
                (Ok(v), Ok(f)) => prop_assert_eq!(Some(v), f.to_lean(), "lean and general differ"),
                (l, g) => prop_assert_eq!(l.err(), g.err(), "lean and general errors differ"),
            }
            Ok(true)
        }
    }
}

/// The wire configurations the fast paths must read as the general parser does: the default,
/// the inner flow label with UDP checksums, and no ICRC check.
fn fast_path_configs() -> [WireConfig; 3] {
    [
        WireConfig::default(),
        WireConfig {
            flow_label: super::super::config::FlowLabelPlacement::Inner,
            udp_checksum: true,
            ..WireConfig::default()
        },
        WireConfig {
            verify_icrc: false,
            ..WireConfig::default()
        },
    ]
}

#[test]
fn the_fast_parser_reads_every_layout_the_engine_sends() {
    let cfgs = fast_path_configs();
    for cfg in &cfgs {
        for route in [Route::Ecmp, srv6(false), srv6(true)] {
            for len in [0, 1, 3, 64, 257] {
                let w = write_repr(route, len);
                let mut buf = vec![0u8; w.buffer_len(len) + 4];
                let n = w.build(&mut buf, &vec![5u8; len], cfg).unwrap();
                // An FCS after the frame is ignored by both.
                assert!(fast_agrees(&buf[..n + 4], cfg).unwrap(), "{route:?} {len}");
                assert!(fast_agrees(&buf[..n], cfg).unwrap(), "{route:?} {len}");
            }
            let s = sack_repr(route);
            let mut buf = vec![0u8; s.buffer_len(0)];
            s.build(&mut buf, &[], cfg).unwrap();
            assert!(fast_agrees(&buf, cfg).unwrap(), "{route:?} SACK");
            // Trimmed: the general parser's.
            let t = FrameRepr {
                dscp: cfg.dscp.trimmed,
                ..write_repr(route, 64)
            };
            let mut buf = vec![0u8; t.buffer_len(64)];
            t.build(&mut buf, &[1u8; 64], cfg).unwrap();
            assert!(!fast_agrees(&buf[..buf.len() - 40], cfg).unwrap());
        }
    }
}

/// The lean path reads every data, SACK and transport ACK frame the engine sends, in every
/// layout and configuration (every Write opcode, with and without TSETH, every pad count), so
/// it cannot be silently unused; it refuses every other kind (NACK, probe, endpoint
/// operations), trimmed frames, and an SRH of another length, which the general parser reads.
#[test]
fn the_lean_path_reads_every_data_sack_and_ack_layout_the_engine_sends() {
    let cfgs = fast_path_configs();
    let takes = |buf: &[u8], cfg: &WireConfig| lean_agrees(buf, cfg).unwrap();
    for cfg in &cfgs {
        for route in [Route::Ecmp, srv6(false), srv6(true)] {
            for op in Opcode::WRITES {
                for ts in [false, true] {
                    for len in [0, 1, 2, 3, 64, 257] {
                        let mut w = write_repr(route, len);
                        w.bth.opcode = op;
                        w.bth.ts = ts;
                        if let Body::Write(h) = &mut w.body {
                            h.tseth = ts.then_some(TsethRepr::at_nanos(7));
                            h.immdt = op.has_immediate().then_some(ImmDtRepr { imm: 3 });
                        }
                        let mut buf = vec![0u8; w.buffer_len(len) + 4];
                        let n = w.build(&mut buf, &vec![5u8; len], cfg).unwrap();
                        assert!(
                            takes(&buf[..n + 4], cfg),
                            "{route:?} {op} ts {ts} {len} + FCS"
                        );
                        assert!(takes(&buf[..n], cfg), "{route:?} {op} ts {ts} {len}");
                        let Some(Ok(v)) = parse_lean(&buf[..n], cfg) else {
                            unreachable!()
                        };
                        let LeanBody::Data(d) = v.body else {
                            panic!("{route:?} {op}: not data")
                        };
                        assert_eq!(d.payload, &vec![5u8; len][..]);
                        // A switch marks CE on the outer header (outside the ICRC in SRv6
                        // mode): the lean view reads the outer ECN, as the general parser.
                        let mut ce = buf[..n].to_vec();
                        ce[15] |= 0x30;
                        if route != Route::Ecmp || !cfg.verify_icrc {
                            assert!(takes(&ce, cfg), "{route:?} {op} CE");
                            let Some(Ok(v)) = parse_lean(&ce, cfg) else {
                                unreachable!()
                            };
                            assert!(matches!(v.body, LeanBody::Data(d) if d.ecn == Ecn::Ce));
                        }
                    }
                }
            }
            let s = sack_repr(route);
            let mut buf = vec![0u8; s.buffer_len(0)];
            s.build(&mut buf, &[], cfg).unwrap();
            assert!(takes(&buf, cfg), "{route:?} SACK");
            for (op, body) in control_bodies() {
                if op == Opcode::Sack {
                    continue;
                }
                let c = FrameRepr {
                    bth: bth(op, 77),
                    body,
                    ..sack_repr(route)
                };
                let mut buf = vec![0u8; c.buffer_len(0)];
                c.build(&mut buf, &[], cfg).unwrap();
                assert!(parse_frame(&buf, cfg).is_ok());
                if op == Opcode::Ack {
                    assert!(takes(&buf, cfg), "{route:?} ACK");
                    let Some(Ok(v)) = parse_lean(&buf, cfg) else {
                        unreachable!()
                    };
                    assert!(matches!(v.body, LeanBody::Ack(a) if Body::Ack(a) == body));
                } else {
                    assert!(!takes(&buf, cfg), "{route:?} {op}: the general parser's");
                }
            }
            // Trimmed: the general parser's, whole or cut.
            let t = FrameRepr {
                dscp: cfg.dscp.trimmed,
                ..write_repr(route, 64)
            };
            let mut buf = vec![0u8; t.buffer_len(64)];
            t.build(&mut buf, &[1u8; 64], cfg).unwrap();
            assert!(!takes(&buf, cfg));
            assert!(!takes(&buf[..buf.len() - 40], cfg));
        }
        // A two-segment SRH (32 bytes): a layout the engine does not send, so the general
        // parser's, though it reads it as a Write.
        let w = write_repr(srv6(true), 8);
        let buf = build(&w, &[5u8; 8]);
        let srh_at = 14 + 40;
        let mut two = buf[..srh_at].to_vec();
        two.extend_from_slice(&buf[srh_at..srh_at + 8]);
        two[srh_at + 1] = 4; // Hdr Ext Len: 8 + 32 bytes
        two[srh_at + 4] = 1; // Last Entry: two segments
        two.extend_from_slice(&buf[srh_at + 8..srh_at + 24]);
        two.extend_from_slice(&buf[srh_at + 8..srh_at + 24]);
        two.extend_from_slice(&buf[srh_at + 24..]);
        let plen = u16::from_be_bytes([two[18], two[19]]) + 16;
        two[18..20].copy_from_slice(&plen.to_be_bytes());
        let lenient = WireConfig {
            verify_icrc: false,
            ..*cfg
        };
        let f = parse_frame(&two, &lenient).unwrap();
        assert_eq!(f.srh.map(|s| s.len()), Some(2));
        assert!(f.to_lean().is_some());
        assert!(!takes(&two, cfg));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]
    #[test]
    fn fast_and_general_parsers_agree_on_mutated_and_cut_frames(
        (repr, len) in arb_repr(),
        kind in 0u8..8,
        edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..4),
        cut in any::<usize>(),
        verify in any::<bool>(),
    ) {
        let cfg = WireConfig { verify_icrc: verify, ..WireConfig::default() };
        // Half Writes, a quarter SACKs, then every other control body and trimmed Writes.
        let (repr, len) = match kind {
            0..=3 => (repr, len),
            4 | 5 => (sack_repr(repr.route), 0),
            6 => {
                let (op, body) = control_bodies()[repr.bth.psn as usize % 6];
                (FrameRepr { bth: bth(op, repr.bth.psn), body, ..sack_repr(repr.route) }, 0)
            }
            _ => (FrameRepr { dscp: cfg.dscp.trimmed, ..repr }, len),
        };
        let mut buf = build(&repr, &vec![9u8; len]);
        for (at, v) in edits {
            let n = buf.len();
            buf[at % n] = v;
        }
        let n = buf.len();
        if cut % 3 == 0 {
            buf.truncate(cut % (n + 1));
        }
        fast_agrees(&buf, &cfg)?;
        lean_agrees(&buf, &cfg)?;
    }

    #[test]
    fn the_lean_view_agrees_with_the_general_parser_on_random_bytes(
        bytes in proptest::collection::vec(any::<u8>(), 0..300),
        verify in any::<bool>(),
    ) {
        let cfg = WireConfig { verify_icrc: verify, ..WireConfig::default() };
        lean_agrees(&bytes, &cfg)?;
    }
}

/// The emitter before the fast path (one typed repr per header, through mrc-srv6's views),
/// kept as the reference the fixed-offset emitter must match byte for byte.
fn reference_emit(r: &FrameRepr, payload: &[u8], cfg: &WireConfig) -> Vec<u8> {
    use mrc_srv6::wire::ipv6::next_header;
    use mrc_srv6::wire::{EthernetFrame, EthernetProtocol, EthernetRepr, Ipv6Packet, Ipv6Repr};

    use super::super::bth::BthPacket;
    use super::super::config::FlowLabelPlacement;
    use super::super::udp::{UdpPacket, UdpRepr};

    let len = r.buffer_len(payload.len());
    let pad = (4 - payload.len() % 4) % 4;
    let mut buf = vec![0xeeu8; len];
    EthernetRepr {
        src_addr: r.src_mac,
        dst_addr: r.dst_mac,
        ethertype: EthernetProtocol::Ipv6,
    }
    .emit(&mut EthernetFrame::new_unchecked(&mut buf[..]));
    let ev = cfg.entropy_order.split(r.entropy);
    let udp_len = 8 + 12 + r.body.buffer_len() + payload.len() + pad + 4;
    let ip = |payload_len: usize, nh: u8, flow_label: u32, dst| Ipv6Repr {
        dscp: r.dscp,
        ecn: r.ecn,
        flow_label,
        payload_len: payload_len as u16,
        next_header: nh,
        hop_limit: cfg.hop_limit,
        src_addr: r.src_addr,
        dst_addr: dst,
    };
    let mut at = 14;
    match r.route {
        Route::Ecmp => {
            ip(udp_len, next_header::UDP, ev.flow_label, r.dst_addr)
                .emit(&mut Ipv6Packet::new_unchecked(&mut buf[at..]));
            at += 40;
        }
        Route::Srv6 { path, srh_segment } => {
            let (o, i) = match cfg.flow_label {
                FlowLabelPlacement::Outer => (ev.flow_label, 0),
                FlowLabelPlacement::Inner => (0, ev.flow_label),
                FlowLabelPlacement::Both => (ev.flow_label, ev.flow_label),
            };
            let srh = if srh_segment.is_some() { 24 } else { 0 };
            let nh = if srh_segment.is_some() {
                next_header::ROUTING
            } else {
                next_header::IPV6
            };
            ip(srh + 40 + udp_len, nh, o, path)
                .emit(&mut Ipv6Packet::new_unchecked(&mut buf[at..]));
            at += 40;
            if let Some(seg) = srh_segment {
                let b = &mut buf[at..at + 24];
                b[..8].copy_from_slice(&[next_header::IPV6, 2, 4, 1, 0, 0, 0, 0]);
                b[8..].copy_from_slice(&seg.octets());
                at += 24;
            }
            ip(udp_len, next_header::UDP, i, r.dst_addr)
                .emit(&mut Ipv6Packet::new_unchecked(&mut buf[at..]));
            at += 40;
        }
    }
    UdpRepr {
        src_port: ev.udp_sport,
        dst_port: cfg.udp_dport,
        length: udp_len as u16,
        checksum: 0,
    }
    .emit(&mut UdpPacket::new_unchecked(&mut buf[at..]));
    at += 8;
    BthRepr {
        ts: r.body.ts_flag(),
        pad_count: pad as u8,
        ..r.bth
    }
    .emit(&mut BthPacket::new_unchecked(&mut buf[at..]));
    at += 12;
    r.body.emit(&mut buf[at..]);
    at += r.body.buffer_len();
    buf[at..at + payload.len()].copy_from_slice(payload);
    buf[at + payload.len()..at + payload.len() + pad].fill(0);
    let layout = FrameLayout {
        len,
        payload: at..at + payload.len(),
        icrc_from: if matches!(r.route, Route::Ecmp) {
            14
        } else {
            at - r.body.buffer_len() - 12 - 8 - 40
        },
    };
    layout.finish(&mut buf, cfg);
    buf
}

proptest! {
    #[test]
    fn the_fixed_offset_emitter_matches_the_reference_byte_for_byte(
        (repr, len) in arb_repr(),
        sack in any::<bool>(),
        inner in any::<bool>(),
        csum in any::<bool>(),
    ) {
        let cfg = WireConfig {
            flow_label: if inner { super::super::config::FlowLabelPlacement::Both } else { WireConfig::default().flow_label },
            udp_checksum: csum,
            ..WireConfig::default()
        };
        let repr = if sack { sack_repr(repr.route) } else { repr };
        let payload = vec![0x5au8; if sack { 0 } else { len }];
        let mut buf = vec![0xeeu8; repr.buffer_len(payload.len())];
        let n = repr.build(&mut buf, &payload, &cfg).unwrap();
        prop_assert_eq!(&buf[..n], &reference_emit(&repr, &payload, &cfg)[..]);
    }
}
