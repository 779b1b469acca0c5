//! Tests of [`super`] (the capture reader) and of [`crate::fabric::decode`] over whole
//! captures: pcap_file's writers make the files (an implementation other than ours).

use std::borrow::Cow;
use std::time::Duration;

use mrc_transport::wire::WireConfig;
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::pcapng::PcapNgWriter;
use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionBlock;
use pcap_file::pcapng::blocks::section_header::SectionHeaderBlock;
use pcap_file::pcapng::blocks::simple_packet::SimplePacketBlock;
use pcap_file::{DataLink, Endianness, TsResolution};

use super::*;
use crate::fabric::decode::render_record;
use crate::fabric::demo::Demo;

fn pcap_with(frames: &[Vec<u8>], endianness: Endianness, ts: TsResolution) -> Vec<u8> {
    let header = PcapHeader {
        endianness,
        ts_resolution: ts,
        ..PcapHeader::default()
    };
    let mut w = PcapWriter::with_header(Vec::new(), header).unwrap();
    for f in frames {
        w.write_packet(&PcapPacket::new(Duration::ZERO, f.len() as u32, f))
            .unwrap();
    }
    w.into_writer()
}

pub(crate) fn pcap(frames: &[Vec<u8>]) -> Vec<u8> {
    pcap_with(frames, Endianness::Little, TsResolution::MicroSecond)
}

fn idb(linktype: DataLink) -> InterfaceDescriptionBlock<'static> {
    InterfaceDescriptionBlock {
        linktype,
        snaplen: 0,
        options: vec![],
    }
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

fn pcapng_with(frames: &[Vec<u8>], endianness: Endianness) -> Vec<u8> {
    let shb = SectionHeaderBlock {
        endianness,
        ..SectionHeaderBlock::default()
    };
    let mut w = PcapNgWriter::with_section_header(Vec::new(), shb).unwrap();
    w.write_pcapng_block(idb(DataLink::ETHERNET)).unwrap();
    for f in frames {
        w.write_pcapng_block(epb(0, f)).unwrap();
    }
    w.into_inner()
}

pub(crate) fn pcapng(frames: &[Vec<u8>]) -> Vec<u8> {
    pcapng_with(frames, Endianness::Little)
}

/// A little-endian pcapng block, by hand (pcap_file refuses to write some we need).
fn block(kind: u32, body: &[u8]) -> Vec<u8> {
    let total = (12 + body.len().next_multiple_of(4)) as u32;
    let mut b = kind.to_le_bytes().to_vec();
    b.extend_from_slice(&total.to_le_bytes());
    b.extend_from_slice(body);
    b.resize(total as usize - 4, 0);
    b.extend_from_slice(&total.to_le_bytes());
    b
}

fn epb_body(interface: u32, data: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    for v in [interface, 0, 0, data.len() as u32, data.len() as u32] {
        b.extend_from_slice(&v.to_le_bytes());
    }
    b.extend_from_slice(data);
    b
}

/// Every record, and the error that ended the file if one did.
fn read_all(file: &[u8]) -> (Vec<Record>, Option<CaptureError>) {
    let mut r = match Reader::new(file) {
        Ok(r) => r,
        Err(e) => return (vec![], Some(e)),
    };
    let mut recs = Vec::new();
    while let Some(rec) = r.next_record() {
        match rec {
            Ok(rec) => recs.push(rec),
            Err(e) => return (recs, Some(e)),
        }
    }
    (recs, None)
}

fn dump(file: &[u8]) -> String {
    let (recs, err) = read_all(file);
    assert!(err.is_none(), "{err:?}");
    let mut out = String::new();
    for r in &recs {
        render_record(&mut out, r, &WireConfig::default());
    }
    out
}

fn demo_frames() -> Vec<Vec<u8>> {
    let d = Demo::new("small", "h0", "h3").unwrap();
    let mut bad = d.data.clone();
    let n = bad.len();
    bad[n - 5] ^= 0xff;
    vec![
        d.data.clone(),
        d.sack.clone(),
        d.trimmed.clone(),
        bad,
        vec![0u8; 20],
    ]
}

/// `frame` with VLAN tags (TPID, TCI) inserted after its MAC addresses.
pub(crate) fn tagged(frame: &[u8], tags: &[(u16, u16)]) -> Vec<u8> {
    let mut v = frame[..12].to_vec();
    for &(tpid, tci) in tags {
        v.extend_from_slice(&tpid.to_be_bytes());
        v.extend_from_slice(&tci.to_be_bytes());
    }
    v.extend_from_slice(&frame[12..]);
    v
}

#[test]
fn decodes_demo_frames_from_pcap_and_pcapng_in_both_byte_orders() {
    let frames = demo_frames();
    let text = dump(&pcap(&frames));
    for other in [
        pcap_with(&frames, Endianness::Big, TsResolution::NanoSecond),
        pcap_with(&frames, Endianness::Little, TsResolution::NanoSecond),
        pcapng(&frames),
        pcapng_with(&frames, Endianness::Big),
    ] {
        assert_eq!(text, dump(&other));
    }
    let lines: Vec<&str> = text.lines().filter(|l| l.starts_with('#')).collect();
    assert_eq!(lines.len(), 5, "{text}");
    assert!(lines[0].starts_with("#1 "), "{}", lines[0]);
    assert!(lines[0].contains("WRITE_ONLY srv6 icrc ok"), "{}", lines[0]);
    assert!(lines[1].contains("SACK srv6 icrc ok"), "{}", lines[1]);
    assert!(lines[2].contains("TRIMMED (InFabric)"), "{}", lines[2]);
    assert!(lines[3].contains("BAD ICRC (computed 0x"), "{}", lines[3]);
    assert_eq!(lines[3].to_lowercase().matches("bad icrc").count(), 1);
    assert!(lines[4].contains("not decoded: ethertype"), "{}", lines[4]);
    assert!(
        text.contains("uSIDs to go: [1000 2001 1001 8003]"),
        "{text}"
    );
    assert!(text.contains("SETH cack"), "{text}");
    assert!(text.contains("RETH va 0x"), "{text}");
}

#[test]
fn vlan_and_qinq_tagged_mrc_frames_decode_with_their_vlan_ids() {
    let d = Demo::new("small", "h0", "h3").unwrap();
    let frames = vec![
        tagged(&d.data, &[(0x8100, (3 << 13) + 100)]),
        tagged(&d.sack, &[(0x88a8, 200), (0x8100, 100)]),
    ];
    let text = dump(&pcapng(&frames));
    let lines: Vec<&str> = text.lines().collect();
    let n = d.data.len() + 4;
    assert_eq!(
        lines[0],
        format!("#1 {n} bytes vlan 100 WRITE_ONLY srv6 icrc ok")
    );
    assert!(
        lines[1].starts_with("  Ethernet ") && lines[1].contains(" 802.1Q vlan 100 p 3, type "),
        "{}",
        lines[1]
    );
    let untagged = dump(&pcapng(std::slice::from_ref(&d.data)));
    // Past the Ethernet line, the tagged frame decodes as the untagged one.
    assert_eq!(
        text.lines()
            .skip(2)
            .take_while(|l| !l.starts_with('#'))
            .collect::<Vec<_>>(),
        untagged.lines().skip(2).collect::<Vec<_>>()
    );
    let qinq = text.lines().find(|l| l.starts_with("#2 ")).unwrap();
    assert!(
        qinq.contains(" vlan 200 vlan 100 SACK srv6 icrc ok"),
        "{qinq}"
    );
    assert!(
        text.contains(" 802.1ad vlan 200 p 0, 802.1Q vlan 100 p 0, type "),
        "{text}"
    );
}

#[test]
fn a_capture_cut_inside_its_last_record_gives_every_whole_record_then_the_cut() {
    let frames = demo_frames();
    for (file, last_at) in [
        (
            pcap(&frames),
            24 + 16 * 4 + frames[..4].iter().map(Vec::len).sum::<usize>(),
        ),
        (pcapng(&frames[..4]), 0),
    ] {
        let (whole, err) = read_all(&file);
        assert!(err.is_none());
        let last = whole.last().unwrap();
        if last_at != 0 {
            assert_eq!(last.offset as usize, last_at);
        }
        for cut in last.offset as usize + 1..file.len() {
            let (recs, err) = read_all(&file[..cut]);
            assert_eq!(recs, whole[..whole.len() - 1], "cut at {cut}");
            match err {
                Some(CaptureError::Truncated {
                    what, offset, have, ..
                }) => {
                    let in_block_type = cut - (last.offset as usize) < 4 && last_at == 0;
                    if in_block_type {
                        assert_eq!(what, "a block header");
                    } else {
                        assert!(
                            what.starts_with(&format!("record {}", whole.len())),
                            "{what}"
                        );
                    }
                    assert_eq!(offset, last.offset);
                    assert_eq!(have as usize, cut - last.offset as usize);
                }
                other => panic!("cut at {cut}: {other:?}"),
            }
        }
    }
    let e = read_all(&pcap(&frames)[..100]).1.unwrap().to_string();
    assert_eq!(
        e,
        format!(
            "cut short in the middle of record 1 (at byte 24: {} bytes declared, 76 in the file)",
            16 + frames[0].len()
        )
    );
}

#[test]
fn huge_declared_lengths_are_damage_not_allocations() {
    let mut file = pcap(&demo_frames()[..1]);
    file[24 + 8..24 + 12].copy_from_slice(&u32::MAX.to_le_bytes());
    let e = read_all(&file).1.unwrap().to_string();
    assert!(
        e.contains("damaged record 1 at byte 24: 4294967295 captured bytes declared"),
        "{e}"
    );
    let mut file = pcapng(&demo_frames()[..1]);
    let epb_at = 28 + 20;
    file[epb_at + 4..epb_at + 8].copy_from_slice(&0xffff_fff0u32.to_le_bytes());
    let e = read_all(&file).1.unwrap().to_string();
    assert!(e.contains("block length 4294967280, more than"), "{e}");
    // A declared captured length past its block.
    let mut file = pcapng(&demo_frames()[..1]);
    file[epb_at + 20..epb_at + 24].copy_from_slice(&5000u32.to_le_bytes());
    let e = read_all(&file).1.unwrap().to_string();
    assert!(
        e.contains("5000 captured bytes declared, the block holds"),
        "{e}"
    );
}

#[test]
fn pcapng_records_take_their_interfaces_link_type_or_say_it_is_missing() {
    let d = Demo::new("small", "h0", "h3").unwrap();
    let shb = &pcapng(&[])[..28];
    let mut file = shb.to_vec();
    // A packet before any IDB, then two interfaces: Ethernet and raw IPv6.
    file.extend(block(6, &epb_body(0, &d.data)));
    file.extend(block(1, &[1, 0, 0, 0, 0, 0, 0, 0]));
    file.extend(block(1, &[229, 0, 0, 0, 0, 0, 0, 0]));
    file.extend(block(6, &epb_body(1, &d.data[14..])));
    file.extend(block(6, &epb_body(0, &d.data)));
    file.extend(block(6, &epb_body(7, &d.data)));
    // A simple packet block is interface 0's.
    let mut spb = (d.sack.len() as u32).to_le_bytes().to_vec();
    spb.extend_from_slice(&d.sack);
    file.extend(block(3, &spb));
    // An unknown block is skipped; a new section forgets the interfaces.
    file.extend(block(0x0bad_0000, &[1, 2, 3, 4]));
    file.extend_from_slice(shb);
    file.extend(block(3, &spb));
    let (recs, err) = read_all(&file);
    assert!(err.is_none(), "{err:?}");
    let links: Vec<Link> = recs.iter().map(|r| r.link).collect();
    let none = |id, described| Link::NoInterface { id, described };
    assert_eq!(
        links,
        [
            none(0, 0),
            Link::Type(229),
            Link::Type(1),
            none(7, 2),
            Link::Type(1),
            none(0, 0)
        ]
    );
    assert_eq!(
        recs.iter().map(|r| r.number).collect::<Vec<_>>(),
        [1, 2, 3, 4, 5, 6]
    );
    let mut out = String::new();
    for r in &recs {
        render_record(&mut out, r, &WireConfig::default());
    }
    let lines: Vec<&str> = out.lines().filter(|l| l.starts_with('#')).collect();
    assert!(
        lines[0].ends_with(
            "not decoded: interface 0 has no interface description block (its section \
             describes 0)"
        ),
        "{}",
        lines[0]
    );
    assert!(
        lines[1].ends_with("not decoded: link type 229 (raw IPv6), not Ethernet"),
        "{}",
        lines[1]
    );
    assert!(lines[2].contains("WRITE_ONLY srv6 icrc ok"), "{}", lines[2]);
    assert!(lines[4].contains("SACK srv6 icrc ok"), "{}", lines[4]);
    assert!(!out.contains("None"), "{out}");
}

#[test]
fn a_frame_cut_by_the_snap_length_says_how_long_it_was() {
    let d = Demo::new("small", "h0", "h3").unwrap();
    let mut w = PcapNgWriter::new(Vec::new()).unwrap();
    w.write_pcapng_block(idb(DataLink::ETHERNET)).unwrap();
    let mut b = epb(0, &d.data[..128]);
    b.original_len = d.data.len() as u32;
    w.write_pcapng_block(b).unwrap();
    w.write_pcapng_block(SimplePacketBlock {
        original_len: 64,
        data: Cow::Borrowed(&[0u8; 64]),
    })
    .unwrap();
    let text = dump(&w.into_inner());
    assert!(
        text.starts_with(&format!("#1 128 of {} bytes not decoded: ", d.data.len())),
        "{text}"
    );
    assert!(text.contains("#2 64 bytes not decoded"), "{text}");
}

#[test]
fn what_is_not_a_capture_is_refused_by_what_it_is() {
    let cases: [(&[u8], &str); 5] = [
        (b"", "the file is empty"),
        (b"ab", "2 bytes, less than a capture header"),
        (
            b"hello world, this is not pcap",
            "it starts with 68 65 6c 6c",
        ),
        (
            &pcap(&[])[..10],
            "10 bytes, less than the 24-byte pcap header",
        ),
        (
            &[0x0a, 0x0d, 0x0d, 0x0a, 28, 0, 0, 0, 1, 2, 3, 4],
            "byte-order magic 0x04030201",
        ),
    ];
    for (file, says) in cases {
        match Reader::new(file) {
            Err(e @ CaptureError::NotACapture(_)) => {
                let e = e.to_string();
                assert!(e.starts_with("not a pcap or pcapng capture: "), "{e}");
                assert!(e.contains(says), "{e}");
            }
            other => panic!("{says}: {other:?}"),
        }
    }
    let mut v3 = pcap(&[]);
    v3[4] = 3;
    let e = Reader::new(&v3[..]).unwrap_err().to_string();
    assert!(e.contains("pcap version 3.4"), "{e}");
}

/// splitmix64: a reproducible stream of random numbers.
#[derive(Debug)]
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Read and render every record of `file`; the bytes handed back never exceed the file's.
fn survives(file: &[u8]) {
    let (recs, _) = read_all(file);
    let held: usize = recs.iter().map(|r| r.data.len()).sum();
    assert!(
        held <= file.len(),
        "{held} bytes of records from {}",
        file.len()
    );
    let mut out = String::new();
    for r in &recs {
        render_record(&mut out, r, &WireConfig::default());
    }
}

#[test]
fn random_and_mutated_captures_never_panic_nor_outgrow_the_file() {
    let d = Demo::new("small", "h0", "h3").unwrap();
    let mut frames = demo_frames();
    frames.push(tagged(&d.nack, &[(0x88a8, 7), (0x8100, 9)]));
    let bases = [
        pcap(&frames),
        pcap_with(&frames, Endianness::Big, TsResolution::NanoSecond),
        pcapng(&frames),
        pcapng_with(&frames, Endianness::Big),
    ];
    let huge = [
        u32::MAX,
        0x8000_0000,
        0x0100_0000,
        MAX_BLOCK_BYTES,
        0x40_0000,
        0,
    ];
    let mut rng = Rng(0x5eed);
    for case in 0..3000 {
        let mut f = bases[case % bases.len()].clone();
        for _ in 0..=rng.below(4) {
            match rng.below(5) {
                0 => f.truncate(rng.below(f.len() + 1)),
                1 => {
                    let i = rng.below(f.len());
                    if let Some(b) = f.get_mut(i) {
                        *b ^= 1 << rng.below(8);
                    }
                }
                2 => {
                    let at = rng.below(f.len() / 4) * 4;
                    let v = huge[rng.below(huge.len())].to_le_bytes();
                    if let Some(w) = f.get_mut(at..at + 4) {
                        w.copy_from_slice(&v);
                    }
                }
                3 => {
                    let at = rng.below(f.len() + 1);
                    let junk: Vec<u8> = (0..rng.below(64)).map(|_| rng.next() as u8).collect();
                    f.splice(at..at, junk);
                }
                _ => {
                    let keep = rng.below(f.len().min(64) + 1);
                    f.truncate(keep);
                    f.extend((0..rng.below(2048)).map(|_| rng.next() as u8));
                }
            }
        }
        survives(&f);
    }
}
