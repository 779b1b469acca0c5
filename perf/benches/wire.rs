//! `mrc_transport::wire` per-packet costs: parse of every header (IPv6, UDP and each MRC
//! header), whole-frame build and parse (SRv6 and
//! ECMP, 4 KiB Write and a SACK), and the ICRC alone. Criterion reports ns per frame; compare
//! build/parse against the ICRC line measured in the same run (the floor for a 4 KiB frame).
//!
//! `cargo bench -p mrc-perf-bench --bench wire -- --quick`

use std::hint::black_box;
use std::net::Ipv6Addr;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use mrc_srv6::wire::{Dscp, Ecn, EthernetAddress, Ipv6Packet, Ipv6Repr};
use mrc_transport::wire::icrc;
use mrc_transport::wire::{
    AethPacket, AethRepr, BTH_LEN, Body, BthPacket, BthRepr, CC_STATE_LEN, CcStatePacket,
    CcStateRepr, EETH_LEN, ERTH_LEN, EethPacket, EethRepr, ErthPacket, ErthRepr, FrameRepr,
    ImmDtPacket, ImmDtRepr, MethPacket, MethRepr, NETH_LEN, NethPacket, NethRepr, Opcode, PETH_LEN,
    PethPacket, PethRepr, RETH_LEN, RethPacket, RethRepr, Route, SETH_LEN, SethPacket, SethRepr,
    TsethPacket, TsethRepr, UdpPacket, UdpRepr, WireConfig, WriteHeaders, parse_frame,
};

const PAYLOAD: usize = 4096;

fn repr(route: Route, opcode: Opcode, body: Body) -> FrameRepr {
    FrameRepr {
        src_mac: EthernetAddress([2, 0, 0, 0, 0, 1]),
        dst_mac: EthernetAddress([2, 0, 0, 0, 0, 2]),
        route,
        src_addr: "fcbb:bb00:e000::".parse::<Ipv6Addr>().unwrap(),
        dst_addr: "fcbb:bb00:e001::".parse::<Ipv6Addr>().unwrap(),
        dscp: Dscp(4),
        ecn: Ecn::Ect0,
        entropy: 0x0005_0001,
        bth: BthRepr {
            opcode,
            solicited: false,
            mig_req: false,
            pad_count: 0,
            tver: 0,
            pkey: 0xffff,
            dest_qp: 0x11,
            ack_req: true,
            rtx: false,
            ts: false,
            psn: 100,
        },
        body,
    }
}

fn write_body() -> Body {
    Body::Write(WriteHeaders {
        meth: MethRepr { rqmsn: 0, msn: 1 },
        tseth: Some(TsethRepr::at_nanos(5000)),
        reth: RethRepr {
            va: 0x7f00_0000_0000,
            rkey: 0x1234,
            dma_len: 1 << 20,
        },
        immdt: None,
    })
}

fn sack_body() -> Body {
    Body::Sack {
        seth: SethRepr {
            cack_psn: 100,
            sack_bitmap: 0xf0f0,
            entropy: 0x0005_0001,
            ..SethRepr::default()
        },
        cc: CcStateRepr::default(),
    }
}

fn srv6() -> Route {
    Route::Srv6 {
        path: "fcbb:bb00:1000:2001:1001:e001::".parse().unwrap(),
        srh_segment: None,
    }
}

fn built(r: &FrameRepr, payload: &[u8]) -> Vec<u8> {
    let mut buf = vec![0u8; r.buffer_len(payload.len())];
    r.build(&mut buf, payload, &WireConfig::default()).unwrap();
    buf
}

/// One `view + parse` benchmark per header, on bytes that parse (checked before timing).
macro_rules! header {
    ($g:expr, $name:literal, $packet:ident, $repr:ident, $bytes:expr) => {{
        let bytes: Vec<u8> = $bytes;
        let parse = |b: &[u8]| $repr::parse(&$packet::new_checked(b).unwrap());
        assert!(parse(&bytes).is_ok(), "{} bench bytes must parse", $name);
        $g.bench_function($name, |b| b.iter(|| parse(black_box(&bytes[..]))));
    }};
}

fn headers(c: &mut Criterion) {
    let mut g = c.benchmark_group("wire/header_parse");
    g.throughput(Throughput::Elements(1));
    let ipv6 = {
        let mut h = vec![0u8; 40];
        h[0] = 0x60;
        h[6] = 41;
        h[7] = 64;
        h
    };
    header!(g, "ipv6", Ipv6Packet, Ipv6Repr, ipv6);
    header!(
        g,
        "udp",
        UdpPacket,
        UdpRepr,
        vec![0x12, 0x34, 0x12, 0xb7, 0, 8, 0, 0]
    );
    header!(
        g,
        "bth",
        BthPacket,
        BthRepr,
        vec![0xC7, 0, 0xff, 0xff, 0, 0, 0, 0x11, 0x80, 0, 0, 100]
    );
    header!(g, "meth", MethPacket, MethRepr, vec![0, 1, 0, 2]);
    header!(g, "tseth", TsethPacket, TsethRepr, vec![0, 0, 0x12, 0x34]);
    header!(g, "reth", RethPacket, RethRepr, vec![0x11; RETH_LEN]);
    header!(g, "immdt", ImmDtPacket, ImmDtRepr, vec![0xca, 0xfe, 0, 1]);
    header!(g, "seth", SethPacket, SethRepr, vec![0x5a; SETH_LEN]);
    header!(
        g,
        "cc_state",
        CcStatePacket,
        CcStateRepr,
        vec![0x22; CC_STATE_LEN]
    );
    header!(g, "neth", NethPacket, NethRepr, {
        let mut h = vec![0u8; NETH_LEN];
        h[0] = 0x02;
        h
    });
    header!(g, "peth", PethPacket, PethRepr, vec![0; PETH_LEN]);
    header!(g, "erth", ErthPacket, ErthRepr, {
        let mut h = vec![0u8; ERTH_LEN];
        h[0] = 1;
        h
    });
    header!(g, "eeth", EethPacket, EethRepr, vec![0; EETH_LEN]);
    header!(g, "aeth", AethPacket, AethRepr, vec![0, 0, 0, 77]);
    g.finish();
    let _ = BTH_LEN;
}

fn frames(c: &mut Criterion) {
    let cfg = WireConfig::default();
    let no_icrc = WireConfig {
        verify_icrc: false,
        ..cfg
    };
    let payload = vec![0xabu8; PAYLOAD];
    let write_srv6 = repr(srv6(), Opcode::WriteMiddle, write_body());
    let write_ecmp = repr(Route::Ecmp, Opcode::WriteMiddle, write_body());
    let sack = repr(srv6(), Opcode::Sack, sack_body());

    let mut g = c.benchmark_group("wire/frame");
    g.throughput(Throughput::Elements(1));
    let mut buf = vec![0u8; write_srv6.buffer_len(PAYLOAD)];
    g.bench_function("build_srv6_write_4k", |b| {
        b.iter(|| {
            write_srv6
                .build(black_box(&mut buf), black_box(&payload), &cfg)
                .unwrap()
        });
    });
    g.bench_function("emit_headers_only_srv6_write", |b| {
        b.iter(|| write_srv6.emit(black_box(&mut buf), PAYLOAD, &cfg).unwrap());
    });
    let mut sbuf = vec![0u8; sack.buffer_len(0)];
    g.bench_function("build_srv6_sack", |b| {
        b.iter(|| sack.build(black_box(&mut sbuf), &[], &cfg).unwrap());
    });
    let f_srv6 = built(&write_srv6, &payload);
    let f_ecmp = built(&write_ecmp, &payload);
    let f_sack = built(&sack, &[]);
    g.bench_function("parse_srv6_write_4k", |b| {
        b.iter(|| parse_frame(black_box(&f_srv6), &cfg).unwrap().bth.psn);
    });
    g.bench_function("parse_srv6_write_4k_no_icrc", |b| {
        b.iter(|| parse_frame(black_box(&f_srv6), &no_icrc).unwrap().bth.psn);
    });
    g.bench_function("parse_ecmp_write_4k", |b| {
        b.iter(|| parse_frame(black_box(&f_ecmp), &cfg).unwrap().bth.psn);
    });
    g.bench_function("parse_srv6_sack", |b| {
        b.iter(|| parse_frame(black_box(&f_sack), &cfg).unwrap().bth.psn);
    });
    let covered = &f_srv6[14 + 40..f_srv6.len() - 4];
    g.bench_function("icrc_only_4k", |b| {
        b.iter(|| icrc::compute(black_box(covered)).unwrap());
    });
    g.finish();
}

criterion_group!(benches, headers, frames);
criterion_main!(benches);
