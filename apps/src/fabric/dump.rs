//! `mrc-fabric dump FILE`: decode the MRC frames of a pcap or pcapng capture, tcpdump-style,
//! one line per header (Ethernet, outer IPv6 with the uSIDs still to consume, SRH, inner IPv6,
//! UDP, BTH, METH/TSETH/RETH/ImmDt, SETH + CC_STATE, NETH, PETH, ERTH/EETH, AETH), marking
//! trimmed frames and bad ICRCs.

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::Context as _;
use mrc_srv6::wire::{UsidContainer, UsidFormat};
use mrc_transport::wire::{Frame, WireConfig, WireError, parse_frame};
use pcap_file::DataLink;
use pcap_file::pcap::PcapReader;
use pcap_file::pcapng::{Block, PcapNgReader};

/// Arguments of `mrc-fabric dump`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// A pcap or pcapng capture (Ethernet link type).
    pub file: PathBuf,
    /// UDP destination port of MRC.
    #[arg(long, default_value_t = 4791)]
    pub udp_port: u16,
    /// Decode at most this many frames.
    #[arg(long)]
    pub count: Option<usize>,
}

/// Print the decoded capture.
pub fn run(args: &Args) -> anyhow::Result<()> {
    let bytes =
        std::fs::read(&args.file).with_context(|| format!("reading {}", args.file.display()))?;
    let cfg = WireConfig {
        udp_dport: args.udp_port,
        ..WireConfig::default()
    };
    let mut out = String::new();
    for (i, frame) in frames(&bytes)
        .with_context(|| format!("{}", args.file.display()))?
        .iter()
        .take(args.count.unwrap_or(usize::MAX))
        .enumerate()
    {
        render_frame(&mut out, i + 1, frame, &cfg);
        print!("{out}");
        out.clear();
    }
    Ok(())
}

/// The Ethernet frames of a pcap or pcapng file (told apart by their magic number).
pub fn frames(file: &[u8]) -> anyhow::Result<Vec<Vec<u8>>> {
    const PCAPNG_MAGIC: [u8; 4] = [0x0a, 0x0d, 0x0d, 0x0a];
    let mut out = Vec::new();
    if file.starts_with(&PCAPNG_MAGIC) {
        let mut r = PcapNgReader::new(file).context("not a valid pcapng file")?;
        while let Some(block) = r.next_block() {
            let (interface, data) = match block.context("bad pcapng block")? {
                Block::EnhancedPacket(p) => (Some(p.interface_id), p.data.into_owned()),
                Block::Packet(p) => (Some(u32::from(p.interface_id)), p.data.into_owned()),
                Block::SimplePacket(p) => (Some(0), p.data.into_owned()),
                _ => continue,
            };
            if let Some(id) = interface {
                let link = r.interfaces().get(id as usize).map(|i| i.linktype);
                anyhow::ensure!(
                    link == Some(DataLink::ETHERNET),
                    "interface {id} is {link:?}, not Ethernet"
                );
            }
            out.push(data);
        }
    } else {
        let mut r = PcapReader::new(file).context("neither pcap nor pcapng")?;
        let link = r.header().datalink;
        anyhow::ensure!(
            link == DataLink::ETHERNET,
            "link type {link:?}, not Ethernet"
        );
        while let Some(p) = r.next_packet() {
            out.push(p.context("bad pcap record")?.data.into_owned());
        }
    }
    Ok(out)
}

/// One frame: a summary line, then one indented line per header.
pub fn render_frame(out: &mut String, n: usize, bytes: &[u8], cfg: &WireConfig) {
    let (frame, mark) = match parse_frame(bytes, cfg) {
        Ok(f) => {
            let mark = match f.trimmed {
                Some(t) => format!("TRIMMED ({t:?})"),
                None => "icrc ok".to_owned(),
            };
            (f, mark)
        }
        Err(e @ WireError::BadIcrc { .. }) => {
            let unchecked = WireConfig {
                verify_icrc: false,
                ..*cfg
            };
            match parse_frame(bytes, &unchecked) {
                Ok(f) => (f, format!("BAD ICRC: {e}")),
                Err(e) => return not_mrc(out, n, bytes, &e),
            }
        }
        Err(e) => return not_mrc(out, n, bytes, &e),
    };
    let _ = writeln!(
        out,
        "#{n} {} bytes {} {} {}",
        bytes.len(),
        frame.bth.opcode,
        if frame.is_srv6() { "srv6" } else { "ecmp" },
        mark
    );
    render_headers(out, &frame);
}

fn not_mrc(out: &mut String, n: usize, bytes: &[u8], e: &WireError) {
    let _ = writeln!(out, "#{n} {} bytes not decoded: {e}", bytes.len());
}

/// The header lines of a parsed frame, with the outer DA's remaining uSIDs (F3216) after the
/// outer IPv6 line in SRv6 mode.
pub fn render_headers(out: &mut String, frame: &Frame<'_>) {
    for (i, line) in frame.to_string().lines().enumerate() {
        let _ = writeln!(out, "  {line}");
        if i == 1 && frame.is_srv6() {
            let c = UsidContainer::from_addr(UsidFormat::F3216, frame.outer.dst_addr);
            let usids: Vec<String> = c.remaining().map(|u| u.to_string()).collect();
            let _ = writeln!(
                out,
                "    uSIDs to go: [{}] block {}",
                usids.join(" "),
                c.block()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;
    use std::time::Duration;

    use pcap_file::pcap::{PcapPacket, PcapWriter};
    use pcap_file::pcapng::PcapNgWriter;
    use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
    use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionBlock;

    use super::*;
    use crate::fabric::demo;

    fn pcap(frames: &[Vec<u8>]) -> Vec<u8> {
        let mut w = PcapWriter::new(Vec::new()).unwrap();
        for f in frames {
            w.write_packet(&PcapPacket::new(Duration::ZERO, f.len() as u32, f))
                .unwrap();
        }
        w.into_writer()
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
            w.write_pcapng_block(EnhancedPacketBlock {
                interface_id: 0,
                timestamp: Duration::ZERO,
                original_len: f.len() as u32,
                data: Cow::Borrowed(f),
                options: vec![],
            })
            .unwrap();
        }
        w.into_inner()
    }

    fn dump(file: &[u8]) -> String {
        let mut out = String::new();
        for (i, f) in frames(file).unwrap().iter().enumerate() {
            render_frame(&mut out, i + 1, f, &WireConfig::default());
        }
        out
    }

    #[test]
    fn decodes_demo_frames_from_pcap_and_pcapng_alike() {
        let d = demo::Demo::new("small", "h0", "h3").unwrap();
        let mut frames = vec![d.data.clone(), d.sack.clone(), d.trimmed.clone()];
        let mut bad = d.data.clone();
        let n = bad.len();
        bad[n - 5] ^= 0xff;
        frames.push(bad);
        frames.push(vec![0u8; 20]);
        let text = dump(&pcap(&frames));
        assert_eq!(text, dump(&pcapng(&frames)));
        let lines: Vec<&str> = text.lines().filter(|l| l.starts_with('#')).collect();
        assert_eq!(lines.len(), 5, "{text}");
        assert!(lines[0].contains("WRITE_ONLY srv6 icrc ok"), "{}", lines[0]);
        assert!(lines[1].contains("SACK srv6 icrc ok"), "{}", lines[1]);
        assert!(lines[2].contains("TRIMMED (InFabric)"), "{}", lines[2]);
        assert!(lines[3].contains("BAD ICRC"), "{}", lines[3]);
        assert!(lines[4].contains("not decoded: ethertype"), "{}", lines[4]);
        assert!(
            text.contains("uSIDs to go: [1000 2001 1001 8003]"),
            "{text}"
        );
        assert!(text.contains("SETH cack"), "{text}");
        assert!(text.contains("RETH va 0x"), "{text}");
    }

    #[test]
    fn refuses_what_is_not_a_capture() {
        let e = frames(b"hello world, this is not pcap").unwrap_err();
        assert!(
            format!("{e:#}").contains("neither pcap nor pcapng"),
            "{e:#}"
        );
    }
}
