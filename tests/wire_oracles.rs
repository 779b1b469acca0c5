//! Third-party oracles for `mrc_transport::wire`:
//! - scapy builds frames (header bytes packed from the brief's layout tables, ICRC by zlib)
//!   and our parser must read the same fields;
//! - our frames go into a pcap that tshark decodes, with the stock IPv6/SRH/UDP/InfiniBand
//!   dissectors and with our Lua dissector (`tools/wireshark/mrc.lua`), field by field.
//!
//! A missing tool skips the test with a message, or fails it when `MRC_REQUIRE_ALL=1`.

use std::collections::HashMap;
use std::net::Ipv6Addr;
use std::path::{Path, PathBuf};
use std::process::Command;

use mrc_srv6::wire::{Dscp, Ecn, EthernetAddress};
use mrc_transport::wire::{
    AethRepr, Body, BthRepr, CcStateRepr, EethRepr, EndpointOp, ErthRepr, Frame, FrameRepr,
    ImmDtRepr, MethRepr, MultipathVerdict, NackReason, NethRepr, Opcode, PethRepr, RethRepr, Route,
    SethRepr, TsethRepr, WireConfig, WireError, WriteHeaders, parse_frame,
};

const PYTHON: &str = "/usr/bin/python3";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// `true` if `cmd args` runs; otherwise skip `test` because `why` (or fail under
/// MRC_REQUIRE_ALL=1).
fn have(test: &str, why: &str, cmd: &str, args: &[&str]) -> bool {
    let ok = mrc_tests::runs(cmd, args);
    if !ok {
        mrc_tests::skip(test, why);
    }
    ok
}

/// A temporary file removed on drop, also when the test fails.
struct TempFile(PathBuf);

impl TempFile {
    fn new(tag: &str) -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        Self(std::env::temp_dir().join(format!(
            "mrc-wire-oracle-{}-{nanos}-{tag}",
            std::process::id()
        )))
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex from the script"))
        .collect()
}

/// The value our parser gives for one of the script's keys.
fn ours(f: &Frame<'_>, key: &str) -> String {
    let write = || match f.body {
        Some(Body::Write(w)) => w,
        other => panic!("expected Write headers, got {other:?}"),
    };
    let sack = || match f.body {
        Some(Body::Sack { seth, cc }) => (seth, cc),
        other => panic!("expected SACK headers, got {other:?}"),
    };
    let nack = || match f.body {
        Some(Body::Nack(n)) => n,
        other => panic!("expected NACK header, got {other:?}"),
    };
    let ep = |req: bool| match (f.body, req) {
        (Some(Body::EndpointRequest(e)), true) => (e.op, e.port_status_mask),
        (Some(Body::EndpointResponse(e)), false) => (e.op, e.port_status_mask),
        other => panic!("expected endpoint header, got {other:?}"),
    };
    let is_req = f.bth.opcode == Opcode::EndpointRequest;
    match key {
        "opcode" => f.bth.opcode.to_u8().to_string(),
        "qpn" => f.bth.dest_qp.to_string(),
        "psn" => f.bth.psn.to_string(),
        "ev" => f.entropy.to_string(),
        "dscp" => f.dscp().0.to_string(),
        "srh_sl" => f.srh.expect("SRH").segments_left.to_string(),
        "srh_seg" => f.srh.expect("SRH").segment(0).expect("segment").to_string(),
        "outer_dst" => f.outer.dst_addr.to_string(),
        "dst" => f.dst_addr().to_string(),
        "rqmsn" => write().meth.rqmsn.to_string(),
        "msn" => write().meth.msn.to_string(),
        "tseth" => write().tseth.expect("TSETH").tx_timestamp.to_string(),
        "va" => write().reth.va.to_string(),
        "rkey" => write().reth.rkey.to_string(),
        "dmalen" => write().reth.dma_len.to_string(),
        "imm" => write().immdt.expect("ImmDt").imm.to_string(),
        "payload" => f.payload.len().to_string(),
        "trimmed" => f.trimmed.map_or("no".into(), |t| format!("{t:?}")),
        "body" => f.body.map_or("none".into(), |_| "some".into()),
        "verdict" => sack().0.verdict.to_string(),
        "pr" => u8::from(sack().0.probe_response).to_string(),
        "cack" => sack().0.cack_psn.to_string(),
        "ack_psn" => sack().0.ack_psn().to_string(),
        "bitmap" => sack().0.sack_bitmap.to_string(),
        "bitmap_base" => sack().0.bitmap_base().to_string(),
        "spdcid" => sack().0.spdcid.to_string(),
        "dpdcid" => sack().0.dpdcid.to_string(),
        "mpr" => sack().0.mpr.to_string(),
        "cc_ts" => sack().1.tx_timestamp.to_string(),
        "ooo" => sack().1.ooo_count.to_string(),
        "pen" => sack().1.rcv_cwnd_pen.to_string(),
        "restore" => u8::from(sack().1.restore_cwnd).to_string(),
        "rcvd" => sack().1.rcvd_bytes.to_string(),
        "reason" => nack().reason.to_string(),
        "nack_psn" => nack().nack_psn.to_string(),
        "nack_ev" => nack().entropy.to_string(),
        "nack_ts" => nack().tx_timestamp.to_string(),
        "syndrome" => match f.body {
            Some(Body::Ack(a)) => a.syndrome.to_string(),
            other => panic!("expected AETH, got {other:?}"),
        },
        "aeth_msn" => match f.body {
            Some(Body::Ack(a)) => a.msn.to_string(),
            other => panic!("expected AETH, got {other:?}"),
        },
        "probe_id" => match f.body {
            Some(Body::Probe(p)) => p.probe_id.to_string(),
            other => panic!("expected PETH, got {other:?}"),
        },
        "ep_op" => ep(is_req).0.to_string(),
        "ports" => ep(is_req).1.to_string(),
        "svc" => match f.body {
            Some(Body::EndpointResponse(e)) => e.service_time_ns.to_string(),
            other => panic!("expected EETH, got {other:?}"),
        },
        other => panic!("the script sent a key the test does not know: {other}"),
    }
}

#[test]
fn scapy_built_frames_parse_to_the_same_fields() {
    if !have(
        "scapy_built_frames_parse_to_the_same_fields",
        "needs scapy for /usr/bin/python3 (install python3-scapy)",
        PYTHON,
        &["-c", "import scapy.all"],
    ) {
        return;
    }
    let script = repo().join("tests/oracles/scapy_frames.py");
    let out = Command::new(PYTHON)
        .arg(&script)
        .output()
        .expect("run scapy");
    assert!(
        out.status.success(),
        "scapy script failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cfg = WireConfig::default();
    let text = String::from_utf8(out.stdout).expect("utf-8");
    let mut frames = 0;
    for line in text.lines() {
        let mut words = line.split_whitespace();
        let bytes = hex(words.next().expect("hex"));
        let expect: HashMap<&str, &str> = words
            .map(|kv| kv.split_once('=').expect("key=value"))
            .collect();
        if let Some(&err) = expect.get("error") {
            let got = parse_frame(&bytes, &cfg).expect_err("scapy frame must not parse");
            assert!(
                format!("{got:?}").starts_with(err),
                "expected {err}, got {got:?}"
            );
            continue;
        }
        let f = parse_frame(&bytes, &cfg).unwrap_or_else(|e| panic!("scapy frame {line:.60}: {e}"));
        for (key, want) in &expect {
            let want = match want.parse::<u64>() {
                Ok(n) => n.to_string(),
                Err(_) => (*want).to_string(),
            };
            assert_eq!(ours(&f, key), want, "field {key} of\n{f}");
        }
        frames += 1;
    }
    assert_eq!(frames, 9, "the script makes 9 good frames");
}

/// A classic libpcap file (LINKTYPE_ETHERNET), written by hand: 24-byte global header, then a
/// 16-byte record header per frame.
fn write_pcap(path: &Path, frames: &[Vec<u8>]) {
    let mut out = Vec::new();
    out.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&4u16.to_le_bytes());
    out.extend_from_slice(&0i32.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(&65535u32.to_le_bytes());
    out.extend_from_slice(&1u32.to_le_bytes());
    for (i, f) in frames.iter().enumerate() {
        out.extend_from_slice(&(i as u32).to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&(f.len() as u32).to_le_bytes());
        out.extend_from_slice(&(f.len() as u32).to_le_bytes());
        out.extend_from_slice(f);
    }
    std::fs::write(path, out).expect("write pcap");
}

fn addr(s: &str) -> Ipv6Addr {
    s.parse().expect("address")
}

const PATH: &str = "fcbb:bb00:1000:2001:1001:e001::";
const SEG: &str = "fcbb:bb00:2002:1003::";

fn bth(opcode: Opcode, qpn: u32, psn: u32) -> BthRepr {
    BthRepr {
        opcode,
        solicited: false,
        mig_req: false,
        pad_count: 0,
        tver: 0,
        pkey: 0xffff,
        dest_qp: qpn,
        ack_req: true,
        rtx: false,
        ts: false,
        psn,
    }
}

/// The frames of the tshark test, built by us. Entropy source ports stay in the ephemeral
/// range so the stock UDP dissector does not pick a well-known low port.
fn our_frames() -> Vec<(FrameRepr, usize)> {
    let base = |route, op, body| FrameRepr {
        src_mac: EthernetAddress([2, 0, 0, 0, 0, 1]),
        dst_mac: EthernetAddress([2, 0, 0, 0, 0, 2]),
        route,
        src_addr: addr("fcbb:bb00:e000::"),
        dst_addr: addr("fcbb:bb00:e001::"),
        dscp: Dscp(4),
        ecn: Ecn::Ect0,
        entropy: 0x0003_c005,
        bth: bth(op, 0x123, 1000),
        body,
    };
    let srv6 = |srh: bool| Route::Srv6 {
        path: addr(PATH),
        srh_segment: srh.then(|| addr(SEG)),
    };
    let write = Body::Write(WriteHeaders {
        meth: MethRepr { rqmsn: 7, msn: 8 },
        tseth: Some(TsethRepr {
            tx_timestamp: 0x1234,
            tsr: false,
            format_type: 1,
        }),
        reth: RethRepr {
            va: 0x7f00_0000_1000,
            rkey: 0xbeef,
            dma_len: 4096,
        },
        immdt: Some(ImmDtRepr { imm: 0xcafe_0001 }),
    });
    let sack = Body::Sack {
        seth: SethRepr {
            verdict: MultipathVerdict::SkipOnce,
            probe_response: true,
            ack_psn_offset: 3,
            entropy: 0x0003_c005,
            spdcid: 11,
            dpdcid: 12,
            cack_psn: 1000,
            mpr: 4,
            sack_offset: -1,
            sack_bitmap: 0x8000_0000_0000_0003,
            ..SethRepr::default()
        },
        cc: CcStateRepr {
            tx_timestamp: 0x0102,
            ooo_count: 5,
            restore_cwnd: true,
            rcv_cwnd_pen: 9,
            rcvd_bytes: 0x0a0b0c,
        },
    };
    let nack = Body::Nack(NethRepr {
        hdr_type: 0,
        next: 0,
        reason: NackReason::TrimmedLastHop,
        vendor_info: 0,
        entropy: 0xdead_beef,
        spdcid: 1,
        dpdcid: 2,
        nack_psn: 0x123456,
        cc_type: 0,
        cc_flags: 0,
        tx_timestamp: 0x0708,
    });
    let probe = Body::Probe(PethRepr {
        hdr_type: 0,
        next: 0,
        vendor_info: 0,
        probe_id: 321,
        spdcid: 1,
        dpdcid: 2,
        tx_timestamp: 0x1111,
        tsr: false,
        format_type: 1,
    });
    let ereq = Body::EndpointRequest(ErthRepr {
        op: EndpointOp::EvProbe,
        port_status_mask: 0xfd,
        tx_timestamp: 0x2222,
        tsr: false,
        format_type: 1,
    });
    let eresp = Body::EndpointResponse(EethRepr {
        op: EndpointOp::PortStatusUpdate,
        port_status_mask: 0x0f,
        tx_timestamp: 0x2222,
        tsr: false,
        format_type: 1,
        service_time_ns: 500,
    });
    vec![
        (base(srv6(true), Opcode::WriteOnlyImm, write), 33),
        (base(srv6(false), Opcode::Sack, sack), 0),
        (base(Route::Ecmp, Opcode::Nack, nack), 0),
        (
            base(Route::Ecmp, Opcode::Ack, Body::Ack(AethRepr::ack(77))),
            0,
        ),
        (base(Route::Ecmp, Opcode::Probe, probe), 0),
        (base(Route::Ecmp, Opcode::EndpointRequest, ereq), 0),
        (base(srv6(false), Opcode::EndpointResponse, eresp), 0),
    ]
}

fn build_all() -> Vec<Vec<u8>> {
    let cfg = WireConfig::default();
    our_frames()
        .iter()
        .map(|(repr, len)| {
            let payload: Vec<u8> = (0..*len).map(|i| i as u8).collect();
            let mut buf = vec![0u8; repr.buffer_len(*len)];
            repr.build(&mut buf, &payload, &cfg).expect("build");
            buf
        })
        .collect()
}

/// Run tshark on `pcap` and return, per frame, the requested fields.
fn tshark(pcap: &Path, extra: &[&str], fields: &[&str]) -> Vec<Vec<String>> {
    let mut cmd = Command::new("tshark");
    cmd.args(extra)
        .arg("-r")
        .arg(pcap)
        .args(["-T", "fields", "-E", "separator=|"]);
    for f in fields {
        cmd.args(["-e", f]);
    }
    let out = cmd.output().expect("run tshark");
    assert!(
        out.status.success(),
        "tshark failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("utf-8")
        .lines()
        .map(|l| l.split('|').map(str::to_string).collect())
        .collect()
}

/// The stock RoCEv2 dissector ("infiniband" on UDP 4791, Wireshark 4.0) decodes the BTH of
/// MRC opcodes (shown as "Unknown (202)" etc.) but stops there: everything after the BTH is a
/// "Vendor Specific or Unknown Header Sequence". So the stock oracle covers Ethernet, both IPv6
/// headers, the SRH, UDP and BTH; the Lua dissector covers the rest.
#[test]
fn stock_tshark_dissectors_read_our_ip_udp_and_bth() {
    if !have(
        "stock_tshark_dissectors_read_our_ip_udp_and_bth",
        "needs tshark (install tshark)",
        "tshark",
        &["--version"],
    ) {
        return;
    }
    let pcap = TempFile::new("stock.pcap");
    write_pcap(&pcap.0, &build_all());
    let rows = tshark(
        &pcap.0,
        &[],
        &[
            "ipv6.dst",
            "ipv6.routing.segleft",
            "ipv6.routing.srh.addr",
            "ipv6.flow",
            "udp.srcport",
            "udp.dstport",
            "infiniband.bth.opcode",
            "infiniband.bth.destqp",
            "infiniband.bth.psn",
            "infiniband.bth.a",
        ],
    );
    assert_eq!(rows.len(), 7);
    let inner = "fcbb:bb00:e001::";
    let expect_dst = [
        format!("{PATH},{inner}"),
        format!("{PATH},{inner}"),
        inner.into(),
        inner.into(),
        inner.into(),
        inner.into(),
        format!("{PATH},{inner}"),
    ];
    for (i, (row, (repr, _))) in rows.iter().zip(our_frames()).enumerate() {
        assert_eq!(row[0], expect_dst[i], "frame {i} IPv6 destinations");
        if i == 0 {
            assert_eq!((row[1].as_str(), row[2].as_str()), ("1", SEG));
        }
        // EV 0x0003c005: flow label 3 in every IPv6 header, source port 0xc005.
        assert!(row[3].split(',').all(|fl| fl == "0x000003"), "{}", row[3]);
        assert_eq!((row[4].as_str(), row[5].as_str()), ("49157", "4791"));
        assert_eq!(
            row[6],
            repr.bth.opcode.to_u8().to_string(),
            "frame {i} opcode"
        );
        assert_eq!(row[7], "0x000123");
        assert_eq!(row[8], "1000");
        assert!(row[9] == "1" || row[9] == "True", "ackreq {}", row[9]);
    }
}

#[test]
fn lua_dissector_names_every_mrc_field() {
    if !have(
        "lua_dissector_names_every_mrc_field",
        "needs tshark (install tshark)",
        "tshark",
        &["--version"],
    ) {
        return;
    }
    let lua = repo().join("tools/wireshark/mrc.lua");
    let lua_arg = format!("lua_script:{}", lua.display());
    let pcap = TempFile::new("lua.pcap");
    let mut frames = build_all();
    // A trimmed copy of the Write: cut to the trim size, DSCP rewritten to 12.
    let mut trimmed = frames[0].clone();
    trimmed.truncate(usize::from(WireConfig::default().trim_size).min(trimmed.len() - 20));
    trimmed[14] = 0x60 | (12 >> 2);
    trimmed[15] &= 0x3f;
    frames.push(trimmed);
    write_pcap(&pcap.0, &frames);
    let fields = [
        "mrc.bth.opcode",
        "mrc.bth.destqp",
        "mrc.bth.psn",
        "mrc.bth.ts",
        "mrc.meth.msn",
        "mrc.tseth.timestamp",
        "mrc.reth.va",
        "mrc.immdt",
        "mrc.seth.cack_psn",
        "mrc.seth.sack_bitmap",
        "mrc.seth.m",
        "mrc.seth.sack_offset",
        "mrc.cc_state.rcvd_bytes",
        "mrc.cc_state.rcv_cwnd_pen",
        "mrc.neth.reason",
        "mrc.neth.nack_psn",
        "mrc.aeth.msn",
        "mrc.peth.probe_id",
        "mrc.erth.op",
        "mrc.erth.port_status_mask",
        "mrc.eeth.service_time",
        "mrc.icrc",
        "mrc.trimmed",
        "mrc.payload_len",
    ];
    let rows = tshark(&pcap.0, &["-X", &lua_arg], &fields);
    assert_eq!(rows.len(), 8);
    let get = |row: usize, field: &str| -> &str {
        let i = fields.iter().position(|f| *f == field).expect("field");
        rows[row][i].as_str()
    };
    let icrc = |frame: &[u8]| {
        let n = frame.len();
        format!(
            "0x{:08x}",
            u32::from_le_bytes([frame[n - 4], frame[n - 3], frame[n - 2], frame[n - 1]])
        )
    };
    // Write Only with Immediate over SRv6 + SRH.
    assert_eq!(get(0, "mrc.bth.opcode"), "0xcb");
    assert_eq!(get(0, "mrc.bth.destqp"), "0x000123");
    assert_eq!(get(0, "mrc.bth.psn"), "1000");
    assert!(matches!(get(0, "mrc.bth.ts"), "1" | "True"));
    assert_eq!(get(0, "mrc.meth.msn"), "8");
    assert_eq!(get(0, "mrc.tseth.timestamp"), "4660");
    assert_eq!(get(0, "mrc.reth.va"), "0x00007f0000001000");
    assert_eq!(get(0, "mrc.immdt"), "0xcafe0001");
    assert_eq!(get(0, "mrc.payload_len"), "33");
    assert_eq!(get(0, "mrc.icrc"), icrc(&frames[0]));
    // SACK + CC_STATE.
    assert_eq!(get(1, "mrc.seth.cack_psn"), "1000");
    assert_eq!(get(1, "mrc.seth.sack_bitmap"), "0x8000000000000003");
    assert_eq!(get(1, "mrc.seth.m"), "1");
    assert_eq!(get(1, "mrc.seth.sack_offset"), "-1");
    assert_eq!(get(1, "mrc.cc_state.rcvd_bytes"), "658188");
    assert_eq!(get(1, "mrc.cc_state.rcv_cwnd_pen"), "9");
    assert_eq!(get(1, "mrc.icrc"), icrc(&frames[1]));
    // NACK, ACK, probe, endpoint request/response.
    assert_eq!(get(2, "mrc.neth.reason"), "0x02");
    assert_eq!(get(2, "mrc.neth.nack_psn"), "1193046");
    assert_eq!(get(3, "mrc.aeth.msn"), "77");
    assert_eq!(get(4, "mrc.peth.probe_id"), "321");
    assert_eq!(get(5, "mrc.erth.op"), "1");
    assert_eq!(get(5, "mrc.erth.port_status_mask"), "0x000000fd");
    assert_eq!(get(6, "mrc.eeth.service_time"), "500");
    // The trimmed Write: headers still named, marked, no ICRC claimed.
    assert_eq!(get(7, "mrc.bth.psn"), "1000");
    assert_eq!(get(7, "mrc.reth.va"), "0x00007f0000001000");
    assert_eq!(get(7, "mrc.trimmed"), "in fabric");
    assert_eq!(get(7, "mrc.icrc"), "");
}

#[test]
fn lua_dissector_takes_low_entropy_ports_heuristically() {
    if !have(
        "lua_dissector_takes_low_entropy_ports_heuristically",
        "needs tshark (install tshark)",
        "tshark",
        &["--version"],
    ) {
        return;
    }
    // SRv6 mode puts a small EV index (here 7, the echo port) in the UDP source port.
    let (mut repr, _) = our_frames().swap_remove(3);
    repr.entropy = 0x0003_0007;
    let mut buf = vec![0u8; repr.buffer_len(0)];
    repr.build(&mut buf, &[], &WireConfig::default())
        .expect("build");
    let pcap = TempFile::new("lowport.pcap");
    write_pcap(&pcap.0, &[buf]);
    let lua_arg = format!(
        "lua_script:{}",
        repo().join("tools/wireshark/mrc.lua").display()
    );
    let rows = tshark(
        &pcap.0,
        &["-X", &lua_arg, "-o", "udp.try_heuristic_first:TRUE"],
        &["udp.srcport", "mrc.bth.opcode", "mrc.aeth.msn"],
    );
    assert_eq!(
        rows,
        vec![vec!["7".to_string(), "0xd1".into(), "77".into()]]
    );
}

#[test]
fn parse_errors_from_the_oracle_frames_are_typed() {
    // Not an oracle, but the wire error the scapy bad-ICRC frame must produce, checked on a
    // frame of ours so it runs without python.
    let mut frame = build_all().swap_remove(0);
    let n = frame.len();
    frame[n - 6] ^= 1;
    assert!(matches!(
        parse_frame(&frame, &WireConfig::default()),
        Err(WireError::BadIcrc { .. })
    ));
}
