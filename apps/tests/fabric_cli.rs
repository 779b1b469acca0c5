//! `mrc-fabric` as a user runs it: every refusal is one line and exit status 2 (no panic, no
//! backtrace, also with RUST_BACKTRACE=1); `dump` prints a capture as it reads it, a capture
//! cut short after its whole records; VLAN tags, missing interface blocks and bad ICRCs show
//! as what they are; every subcommand survives `| head -1` and `>/dev/full`.

use std::borrow::Cow;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::Duration;

use mrc_apps::fabric::demo::Demo;
use mrc_tests::{assert_full_stdout, assert_head_one, assert_refused, text, unique};
use pcap_file::DataLink;
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::pcapng::PcapNgWriter;
use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionBlock;

const BIN: &str = env!("CARGO_BIN_EXE_mrc-fabric");

/// A scratch directory removed when the test ends.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Self {
        let dir = std::env::temp_dir().join(unique("fabric-cli-"));
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    fn file(&self, name: &str, bytes: &[u8]) -> String {
        let p = self.0.join(name);
        std::fs::write(&p, bytes).unwrap();
        p.to_str().unwrap().to_owned()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn pcap(frames: &[Vec<u8>], datalink: DataLink) -> Vec<u8> {
    let header = PcapHeader {
        datalink,
        ..PcapHeader::default()
    };
    let mut w = PcapWriter::with_header(Vec::new(), header).unwrap();
    for f in frames {
        w.write_packet(&PcapPacket::new(Duration::ZERO, f.len() as u32, f))
            .unwrap();
    }
    w.into_writer()
}

fn epb(interface_id: u32, f: &[u8]) -> EnhancedPacketBlock<'_> {
    EnhancedPacketBlock {
        interface_id,
        timestamp: Duration::ZERO,
        original_len: f.len() as u32,
        data: Cow::Borrowed(f),
        options: vec![],
    }
}

fn pcapng(frames: &[Vec<u8>]) -> Vec<u8> {
    let mut w = PcapNgWriter::new(Vec::new()).unwrap();
    w.write_pcapng_block(InterfaceDescriptionBlock {
        linktype: DataLink::ETHERNET,
        snaplen: 0,
        options: vec![],
    })
    .unwrap();
    for f in frames {
        w.write_pcapng_block(epb(0, f)).unwrap();
    }
    w.into_inner()
}

fn demo() -> Demo {
    Demo::new("small", "h0", "h3").unwrap()
}

fn frames() -> Vec<Vec<u8>> {
    let d = demo();
    vec![d.data, d.sack, d.trimmed, d.nack]
}

fn run(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .env("RUST_BACKTRACE", "1")
        .output()
        .unwrap()
}

fn no_panic(stderr: &str) {
    for bad in ["panicked", "stack backtrace", "Error: "] {
        assert!(!stderr.contains(bad), "{bad:?} on stderr:\n{stderr}");
    }
}

#[test]
fn every_refusal_is_one_line_naming_what_to_change() {
    let s = Scratch::new();
    let not_capture = s.file("notes.txt", b"hello, this is not a capture\n");
    let empty = s.file("empty.pcap", b"");
    let raw_ip = s.file("raw.pcap", &pcap(&frames(), DataLink::IPV6));
    let dir = s.0.to_str().unwrap().to_owned();
    let missing = s.0.join("missing.pcap");
    let missing = missing.to_str().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["frobnicate"], "frobnicate"),
        (
            &["paths", "nope.toml", "--from", "h0", "--to", "h1"],
            "nope.toml: no such file",
        ),
        (
            &["paths", "small", "--from", "h0", "--to", "h9"],
            "host h9 is not in plan",
        ),
        (
            &["paths", "small", "--from", "hx", "--to", "h1"],
            "host \"hx\"",
        ),
        (
            &["paths", "small", "--from", "t0-0-0", "--to", "h1"],
            "is a switch",
        ),
        (
            &["paths", "small", "--from", "h1", "--to", "h1"],
            "same host",
        ),
        (
            &[
                "paths", "small", "--from", "h0", "--to", "h1", "--plane", "5",
            ],
            "plane 5",
        ),
        (
            &[
                "paths", "small", "--from", "h0", "--to", "h1", "--plane", "x",
            ],
            "'x'",
        ),
        (&["linux", "nope"], "nope: no such file"),
        (&["linux", "small", "--prefix", "a b"], "prefix"),
        (&["linux", "small", "--teardown", "--routes"], "--routes"),
        (&["demo", "nope"], "nope: no such file"),
        (&["demo", "--from", "h0", "--to", "h0"], "same host"),
        (&["demo", "--to", "h7"], "host h7"),
        (&["dump", missing], "missing.pcap: No such file"),
        (&["dump", &dir], "directory"),
        (
            &["dump", &not_capture],
            "notes.txt: not a pcap or pcapng capture",
        ),
        (
            &["dump", &empty],
            "empty.pcap: not a pcap or pcapng capture: the file is empty",
        ),
        (&["dump", &raw_ip], "link type 229 (raw IPv6), not Ethernet"),
        (&["dump", "--count", "0", &raw_ip], "--count"),
        (&["dump", "--udp-port", "70000", &raw_ip], "70000"),
    ];
    for (args, names) in cases {
        assert_refused(BIN, args, names);
    }
}

#[test]
fn dump_cut_short_prints_every_whole_record_then_one_line_and_exit_2() {
    let s = Scratch::new();
    let frames = frames();
    for (name, whole) in [
        ("cut.pcap", pcap(&frames, DataLink::ETHERNET)),
        ("cut.pcapng", pcapng(&frames)),
    ] {
        let cut = s.file(name, &whole[..whole.len() - 7]);
        let out = run(&["dump", &cut]);
        let (stdout, stderr) = text(&out);
        no_panic(&stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {stderr}");
        let heads: Vec<&str> = stdout.lines().filter(|l| l.starts_with('#')).collect();
        assert_eq!(heads.len(), 3, "{name}: records 1 to 3 printed:\n{stdout}");
        assert!(
            heads[2].starts_with("#3 ") && heads[2].contains("TRIMMED"),
            "{}",
            heads[2]
        );
        let lines: Vec<&str> = stderr.lines().collect();
        assert_eq!(lines.len(), 1, "{name}: one line:\n{stderr}");
        assert!(
            lines[0].starts_with(&format!(
                "mrc-fabric: {cut}: cut short in the middle of record 4"
            )),
            "{}",
            lines[0]
        );
        assert!(lines[0].contains(" (at byte "), "{}", lines[0]);
        assert!(
            lines[0].ends_with("; 3 records printed before it"),
            "{}",
            lines[0]
        );
        // The whole file decodes to the same lines and one more record.
        let out = run(&["dump", &s.file("whole", &whole)]);
        assert_eq!(out.status.code(), Some(0));
        let (full, _) = text(&out);
        assert!(full.starts_with(&stdout), "{name}");
        assert_eq!(full.lines().filter(|l| l.starts_with("#4 ")).count(), 1);
    }
}

#[test]
fn dump_shows_vlans_missing_interfaces_and_bad_icrcs_as_they_are() {
    let s = Scratch::new();
    let d = demo();
    let mut tagged = d.data[..12].to_vec();
    tagged.extend_from_slice(&[0x81, 0x00, 0x00, 100]);
    tagged.extend_from_slice(&d.data[12..]);
    let mut bad = d.sack.clone();
    let n = bad.len();
    bad[n - 1] ^= 1;
    let file = s.file("mixed.pcapng", &pcapng(&[tagged.clone(), bad]));
    let out = run(&["dump", &file]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let heads: Vec<&str> = stdout.lines().filter(|l| l.starts_with('#')).collect();
    assert_eq!(
        heads[0],
        format!("#1 {} bytes vlan 100 WRITE_ONLY srv6 icrc ok", tagged.len())
    );
    assert!(
        heads[1].contains("SACK srv6 BAD ICRC (computed 0x"),
        "{}",
        heads[1]
    );
    assert_eq!(
        stdout.to_lowercase().matches("bad icrc").count(),
        1,
        "{stdout}"
    );

    // An enhanced packet block naming an interface no block described.
    let mut w = PcapNgWriter::new(Vec::new()).unwrap();
    w.write_pcapng_block(InterfaceDescriptionBlock {
        linktype: DataLink::ETHERNET,
        snaplen: 0,
        options: vec![],
    })
    .unwrap();
    w.write_pcapng_block(epb(0, &d.data)).unwrap();
    let mut file = w.into_inner();
    let idb_at = 28;
    file.drain(idb_at..idb_at + 20);
    let no_idb = s.file("no-idb.pcapng", &file);
    let out = run(&["dump", &no_idb]);
    let (stdout, stderr) = text(&out);
    no_panic(&stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(
        stderr.trim_end(),
        format!(
            "mrc-fabric: {no_idb}: damaged: 1 record named an interface that no interface \
             description block describes (printed as not decoded)"
        )
    );
    assert_eq!(
        stdout.trim_end(),
        format!(
            "#1 {} bytes not decoded: interface 0 has no interface description block (its \
             section describes 0)",
            d.data.len()
        )
    );
    assert!(!stdout.contains("None"));
}

#[test]
fn dump_count_stops_after_that_many_frames() {
    let s = Scratch::new();
    let file = s.file("four.pcap", &pcap(&frames(), DataLink::ETHERNET));
    let out = run(&["dump", "--count", "2", &file]);
    let (stdout, _) = text(&out);
    assert_eq!(out.status.code(), Some(0));
    let heads: Vec<&str> = stdout.lines().filter(|l| l.starts_with('#')).collect();
    assert_eq!(heads.len(), 2, "{stdout}");
}

/// A capture whose printout is far more than a pipe holds.
fn big_capture(s: &Scratch) -> String {
    let frames = frames();
    let many: Vec<Vec<u8>> = frames.iter().cycle().take(2000).cloned().collect();
    s.file("big.pcapng", &pcapng(&many))
}

#[test]
fn every_subcommand_survives_head_one() {
    let s = Scratch::new();
    let big = big_capture(&s);
    let first = assert_head_one(BIN, &["dump", &big], 0);
    assert!(first.starts_with("#1 "), "{first}");
    let first = assert_head_one(BIN, &["demo"], 0);
    assert!(first.starts_with("plan small"), "{first}");
    let first = assert_head_one(BIN, &["paths", "small", "--from", "h0", "--to", "h3"], 0);
    assert!(first.starts_with("plan small"), "{first}");
    assert_head_one(BIN, &["linux", "small"], 0);
}

#[test]
fn every_subcommand_reports_a_full_stdout() {
    let s = Scratch::new();
    let big = big_capture(&s);
    let small = s.file("small.pcap", &pcap(&frames(), DataLink::ETHERNET));
    for args in [
        &["dump", big.as_str()][..],
        &["dump", small.as_str()],
        &["demo"],
        &["paths", "small", "--from", "h0", "--to", "h3"],
        &["linux", "small"],
    ] {
        assert_full_stdout(BIN, args);
    }
}

#[test]
fn help_and_version_exit_0() {
    for args in [&["--help"][..], &["--version"], &["dump", "--help"]] {
        let out = run(args);
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        assert!(!out.stdout.is_empty());
    }
}
