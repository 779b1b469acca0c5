//! Rendering captured frames as `mrc-fabric dump` prints them, tcpdump-style: a summary line
//! per frame, then one indented line per header (Ethernet with its VLAN tags, outer IPv6 with
//! the uSIDs still to consume, SRH, inner IPv6, UDP, BTH, METH/TSETH/RETH/ImmDt, SETH +
//! CC_STATE, NETH, PETH, ERTH/EETH, AETH), marking trimmed frames and bad ICRCs.
//!
//! Uses only `std`, `mrc-srv6`, `mrc-transport` and [`super::capture`] (the fuzz workspace
//! includes it by path: keep it that way).

use std::fmt::Write as _;

use mrc_srv6::wire::{UsidContainer, UsidFormat};
use mrc_transport::wire::{Frame, WireConfig, WireError, parse_frame};

use super::capture::{LINKTYPE_ETHERNET, Link, Record, link_name};

/// Most VLAN tags stripped from one frame (QinQ is two; more is not a frame we sent).
pub const MAX_VLAN_TAGS: usize = 4;

/// Destination and source MAC addresses: the tags follow them.
const MAC_ADDRS_LEN: usize = 12;
const VLAN_TAG_LEN: usize = 4;

/// One VLAN tag (IEEE 802.1Q §9.6): its TPID, priority and VLAN id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VlanTag {
    /// 0x8100 (802.1Q C-tag), 0x88a8 (802.1ad S-tag) or 0x9100 (pre-standard QinQ).
    pub tpid: u16,
    /// Priority code point (3 bits).
    pub pcp: u8,
    /// VLAN id (12 bits).
    pub vid: u16,
}

impl VlanTag {
    fn kind(self) -> &'static str {
        match self.tpid {
            0x8100 => "802.1Q",
            0x88a8 => "802.1ad",
            _ => "QinQ",
        }
    }
}

fn is_vlan_tpid(ethertype: u16) -> bool {
    matches!(ethertype, 0x8100 | 0x88a8 | 0x9100)
}

/// The VLAN tags after the MAC addresses, outermost first, and the frame without them
/// (`None` if untagged: the frame decodes as it is).
pub fn untag(bytes: &[u8]) -> Result<(Vec<VlanTag>, Option<Vec<u8>>), String> {
    let mut tags = Vec::new();
    let mut at = MAC_ADDRS_LEN;
    while let Some(t) = bytes.get(at..at + 2) {
        let tpid = u16::from_be_bytes([t[0], t[1]]);
        if !is_vlan_tpid(tpid) {
            break;
        }
        let Some(tci) = bytes.get(at + 2..at + VLAN_TAG_LEN) else {
            return Err(format!(
                "the frame ends inside its VLAN tag (TPID 0x{tpid:04x})"
            ));
        };
        if tags.len() == MAX_VLAN_TAGS {
            return Err(format!("more than {MAX_VLAN_TAGS} VLAN tags"));
        }
        let tci = u16::from_be_bytes([tci[0], tci[1]]);
        tags.push(VlanTag {
            tpid,
            pcp: (tci >> 13) as u8,
            vid: tci & 0x0fff,
        });
        at += VLAN_TAG_LEN;
    }
    if tags.is_empty() {
        return Ok((tags, None));
    }
    let mut untagged = Vec::with_capacity(bytes.len() - VLAN_TAG_LEN * tags.len());
    untagged.extend_from_slice(&bytes[..MAC_ADDRS_LEN]);
    untagged.extend_from_slice(&bytes[at..]);
    Ok((tags, Some(untagged)))
}

/// One record of a capture: [`render_frame`] if it is Ethernet, else a line saying why not.
pub fn render_record(out: &mut String, rec: &Record, cfg: &WireConfig) {
    match rec.link {
        Link::Type(LINKTYPE_ETHERNET) => {
            render_frame(out, rec.number, &rec.data, rec.original_len, cfg);
        }
        Link::Type(t) => {
            let _ = writeln!(
                out,
                "#{} {} not decoded: {}, not Ethernet",
                rec.number,
                size(rec.data.len(), rec.original_len),
                link_name(t)
            );
        }
        Link::NoInterface { id, described } => {
            let _ = writeln!(
                out,
                "#{} {} not decoded: interface {id} has no interface description block (its \
                 section describes {described})",
                rec.number,
                size(rec.data.len(), rec.original_len),
            );
        }
    }
}

/// `1100 bytes`, or `128 of 1100 bytes` for a frame the capture cut short (snap length).
fn size(captured: usize, original: u32) -> String {
    if (original as usize) > captured {
        format!("{captured} of {original} bytes")
    } else {
        format!("{captured} bytes")
    }
}

/// One Ethernet frame (`original_len` long on the wire): a summary line, then one indented
/// line per header.
pub fn render_frame(out: &mut String, n: u64, bytes: &[u8], original_len: u32, cfg: &WireConfig) {
    let size = size(bytes.len(), original_len);
    let (tags, untagged) = match untag(bytes) {
        Ok(t) => t,
        Err(e) => {
            let _ = writeln!(out, "#{n} {size} not decoded: {e}");
            return;
        }
    };
    let mut vlans = String::new();
    for t in &tags {
        let _ = write!(vlans, " vlan {}", t.vid);
    }
    let frame_bytes = untagged.as_deref().unwrap_or(bytes);
    let (frame, mark) = match parse_frame(frame_bytes, cfg) {
        Ok(f) => {
            let mark = match f.trimmed {
                Some(t) => format!("TRIMMED ({t:?})"),
                None => "icrc ok".to_owned(),
            };
            (f, mark)
        }
        Err(WireError::BadIcrc { computed, carried }) => {
            let unchecked = WireConfig {
                verify_icrc: false,
                ..*cfg
            };
            match parse_frame(frame_bytes, &unchecked) {
                Ok(f) => (
                    f,
                    format!("BAD ICRC (computed 0x{computed:08x}, frame carries 0x{carried:08x})"),
                ),
                Err(e) => {
                    let _ = writeln!(out, "#{n} {size}{vlans} not decoded: {e}");
                    return;
                }
            }
        }
        Err(e) => {
            let _ = writeln!(out, "#{n} {size}{vlans} not decoded: {e}");
            return;
        }
    };
    let _ = writeln!(
        out,
        "#{n} {size}{vlans} {} {} {mark}",
        frame.bth.opcode,
        if frame.is_srv6() { "srv6" } else { "ecmp" },
    );
    render_tagged_headers(out, &frame, &tags);
}

/// The header lines of a parsed frame, with the outer DA's remaining uSIDs (F3216) after the
/// outer IPv6 line in SRv6 mode.
pub fn render_headers(out: &mut String, frame: &Frame<'_>) {
    render_tagged_headers(out, frame, &[]);
}

fn render_tagged_headers(out: &mut String, frame: &Frame<'_>, tags: &[VlanTag]) {
    for (i, line) in frame.to_string().lines().enumerate() {
        if i == 0 && !tags.is_empty() {
            // The Ethernet line, tags shown where they sit: before the ethertype.
            let mut shown = String::new();
            for t in tags {
                let _ = write!(shown, " {} vlan {} p {},", t.kind(), t.vid, t.pcp);
            }
            match line.find(" type ") {
                Some(at) => {
                    let _ = writeln!(out, "  {}{shown}{}", &line[..at], &line[at..]);
                }
                None => {
                    let _ = writeln!(out, "  {line}{shown}");
                }
            }
            continue;
        }
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
    use super::*;

    fn tagged(frame: &[u8], tags: &[(u16, u16)]) -> Vec<u8> {
        let mut v = frame[..12].to_vec();
        for &(tpid, tci) in tags {
            v.extend_from_slice(&tpid.to_be_bytes());
            v.extend_from_slice(&tci.to_be_bytes());
        }
        v.extend_from_slice(&frame[12..]);
        v
    }

    #[test]
    fn untag_strips_qinq_and_keeps_the_rest() {
        let frame: Vec<u8> = (0..40u8).collect();
        let (tags, untagged) = untag(&frame).unwrap();
        assert!(tags.is_empty() && untagged.is_none());
        let t = tagged(&frame, &[(0x88a8, 200), (0x8100, (5 << 13) + 100)]);
        let (tags, untagged) = untag(&t).unwrap();
        assert_eq!(untagged.as_deref(), Some(&frame[..]));
        assert_eq!(
            tags,
            vec![
                VlanTag {
                    tpid: 0x88a8,
                    pcp: 0,
                    vid: 200
                },
                VlanTag {
                    tpid: 0x8100,
                    pcp: 5,
                    vid: 100
                }
            ]
        );
        let e = untag(&t[..18]).unwrap_err();
        assert!(e.contains("ends inside its VLAN tag"), "{e}");
        let many = tagged(&frame, &[(0x8100, 1); 5]);
        assert!(untag(&many).unwrap_err().contains("more than 4 VLAN tags"));
    }
}
