//! `mrc-fabric dump FILE`: decode the MRC frames of a pcap or pcapng capture, tcpdump-style,
//! one line per header ([`super::decode`]), printing each record as it is read.
//!
//! Exit status: 0 once the whole file is read (frames that are not MRC get a `not decoded`
//! line, they are not errors); 2 with one line on stderr for a file that is missing, unreadable,
//! not a capture, or a pcap of another link type than Ethernet; and 2 for a capture cut short
//! or damaged, after every whole record before the damage is printed (as tshark does with
//! "appears to have been cut short in the middle of a packet"). A pcapng packet block naming
//! an interface no block described is printed as `not decoded` and counted: the file is
//! damaged, exit status 2 once the rest is printed (tshark stops there).

use std::fs::File;
use std::io::BufReader;
use std::path::PathBuf;

use mrc_transport::wire::WireConfig;

use super::capture::{LINKTYPE_ETHERNET, Link, Reader, link_name};
use super::decode::render_record;
use crate::{outln, tool, usage};

/// Arguments of `mrc-fabric dump`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// A pcap or pcapng capture (Ethernet link type; 802.1Q/802.1ad tags are decoded).
    pub file: PathBuf,
    /// UDP destination port of MRC.
    #[arg(long, default_value_t = 4791)]
    pub udp_port: u16,
    /// Decode at most this many frames.
    #[arg(long, value_parser = at_least_one)]
    pub count: Option<u64>,
}

fn at_least_one(text: &str) -> Result<u64, String> {
    match text.parse::<u64>() {
        Ok(0) => Err("give at least 1 frame".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

/// Print the decoded capture, record by record.
pub fn run(args: &Args) -> anyhow::Result<()> {
    let shown = args.file.display();
    let file = File::open(&args.file)
        .map_err(|e| usage!("{shown}: {e}: give a pcap or pcapng capture"))?;
    let mut reader = Reader::new(BufReader::new(file))
        .map_err(|e| usage!("{shown}: {e}: give a pcap or pcapng capture"))?;
    if let Some(link) = reader.pcap_link()
        && link != LINKTYPE_ETHERNET
    {
        return Err(usage!(
            "{shown}: {}, not Ethernet: capture on an Ethernet interface (not tcpdump -i any)",
            link_name(link)
        ));
    }
    let cfg = WireConfig {
        udp_dport: args.udp_port,
        ..WireConfig::default()
    };
    let mut out = String::new();
    let mut left = args.count.unwrap_or(u64::MAX);
    let mut orphans = 0u64;
    while left > 0 && tool::out_open() {
        match reader.next_record() {
            None => break,
            Some(Ok(rec)) => {
                if matches!(rec.link, Link::NoInterface { .. }) {
                    orphans += 1;
                }
                out.clear();
                render_record(&mut out, &rec, &cfg);
                outln!("{}", out.trim_end_matches('\n'));
                left -= 1;
            }
            Some(Err(e)) => {
                let done = reader.packets();
                return Err(usage!(
                    "{shown}: {e}; {done} record{} printed before it",
                    if done == 1 { "" } else { "s" }
                ));
            }
        }
    }
    if orphans > 0 {
        return Err(usage!(
            "{shown}: damaged: {orphans} record{} named an interface that no interface              description block describes (printed as not decoded)",
            if orphans == 1 { "" } else { "s" }
        ));
    }
    Ok(())
}
