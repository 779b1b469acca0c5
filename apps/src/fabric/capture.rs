//! Reading pcap and pcapng captures record by record, as `mrc-fabric dump` prints them.
//!
//! - pcap (libpcap format, draft-ietf-opsawg-pcap): either byte order, microsecond or
//!   nanosecond magic; one link type for the whole file.
//! - pcapng (draft-ietf-opsawg-pcapng): sections in either byte order; the link type of each
//!   record is that of the interface description block (IDB) it names, counted from its
//!   section's header block. Enhanced, simple and (obsolete) packet blocks are records; other
//!   blocks are skipped.
//!
//! Records come one at a time from any `Read`, so a caller prints every whole record before
//! it learns that the file was cut short. Nothing is allocated past what the file holds: a
//! record is read through `Read::take` of its declared length, a declared length past
//! [`MAX_RECORD_BYTES`] (pcap) or [`MAX_BLOCK_BYTES`] (pcapng) is refused as damage, and a
//! section declares at most [`MAX_INTERFACES`] interfaces.
//!
//! This module uses only `std` (the fuzz workspace includes it by path: keep it that way).

use std::fmt;
use std::io::{self, Read};

/// Largest captured length of a pcap record (Wireshark's `WTAP_MAX_PACKET_SIZE_STANDARD`; a
/// larger one means the file is damaged).
pub const MAX_RECORD_BYTES: u32 = 262_144;
/// Largest pcapng block (Wireshark's limit is 16 MiB too).
pub const MAX_BLOCK_BYTES: u32 = 16 * 1024 * 1024;
/// Most interface description blocks one pcapng section may hold.
pub const MAX_INTERFACES: usize = 65_536;
/// Link type of Ethernet (LINKTYPE_ETHERNET).
pub const LINKTYPE_ETHERNET: u16 = 1;

const PCAPNG_SHB: u32 = 0x0A0D_0D0A;
const PCAPNG_BYTE_ORDER: u32 = 0x1A2B_3C4D;
const PCAPNG_IDB: u32 = 1;
const PCAPNG_PB: u32 = 2;
const PCAPNG_SPB: u32 = 3;
const PCAPNG_EPB: u32 = 6;
const PCAP_HEADER_LEN: u64 = 24;
const PCAP_RECORD_HEADER_LEN: u64 = 16;

/// Which format the file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Pcap,
    PcapNg,
}

/// What a record's bytes are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Link {
    /// A LINKTYPE_* value (1 is Ethernet).
    Type(u16),
    /// A pcapng packet block naming an interface its section never described.
    NoInterface {
        /// The interface id the block carries.
        id: u32,
        /// How many interfaces the section described before it.
        described: usize,
    },
}

/// One captured packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// 1 for the first packet of the file, as tshark numbers frames.
    pub number: u64,
    /// Byte offset of the record (pcap) or block (pcapng) in the file.
    pub offset: u64,
    pub link: Link,
    /// The captured bytes.
    pub data: Vec<u8>,
    /// The packet's length on the wire (more than `data` if the capture cut it).
    pub original_len: u32,
}

/// Why a capture cannot be read (further).
#[derive(Debug)]
pub enum CaptureError {
    /// The file does not start as a pcap or pcapng file does.
    NotACapture(String),
    /// The file ends inside a record or block.
    Truncated {
        /// What was being read: `record 3`, `an interface description block`.
        what: String,
        /// Where it starts.
        offset: u64,
        /// Bytes it declares (or needs, for a header).
        need: u64,
        /// Bytes the file still had.
        have: u64,
    },
    /// A record or block that cannot be what it claims.
    Damaged {
        /// What was being read.
        what: String,
        offset: u64,
        message: String,
    },
    /// Reading failed.
    Io(io::Error),
}

impl fmt::Display for CaptureError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotACapture(why) => write!(f, "not a pcap or pcapng capture: {why}"),
            Self::Truncated {
                what,
                offset,
                need,
                have,
            } => write!(
                f,
                "cut short in the middle of {what} (at byte {offset}: {need} bytes declared, \
                 {have} in the file)"
            ),
            Self::Damaged {
                what,
                offset,
                message,
            } => write!(f, "damaged {what} at byte {offset}: {message}"),
            Self::Io(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for CaptureError {}

/// Byte order of a pcap file or pcapng section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Order {
    Little,
    Big,
}

impl Order {
    fn u16(self, b: &[u8], at: usize) -> u16 {
        let a = [b[at], b[at + 1]];
        match self {
            Self::Little => u16::from_le_bytes(a),
            Self::Big => u16::from_be_bytes(a),
        }
    }

    fn u32(self, b: &[u8], at: usize) -> u32 {
        let a = [b[at], b[at + 1], b[at + 2], b[at + 3]];
        match self {
            Self::Little => u32::from_le_bytes(a),
            Self::Big => u32::from_be_bytes(a),
        }
    }
}

#[derive(Debug)]
enum State {
    Pcap {
        order: Order,
        link: u16,
    },
    PcapNg {
        order: Order,
        links: Vec<u16>,
    },
    /// An error was returned: nothing more comes.
    Done,
}

/// Reads the records of a capture one at a time.
#[derive(Debug)]
pub struct Reader<R> {
    r: R,
    /// Bytes consumed so far.
    offset: u64,
    /// Packets returned so far.
    packets: u64,
    state: State,
}

/// What a block type is called in messages.
fn block_name(kind: u32) -> &'static str {
    match kind {
        PCAPNG_SHB => "a section header block",
        PCAPNG_IDB => "an interface description block",
        PCAPNG_PB | PCAPNG_SPB | PCAPNG_EPB => "a packet block",
        _ => "a block",
    }
}

impl<R: Read> Reader<R> {
    /// Read the file header (pcap) or first section header (pcapng).
    pub fn new(r: R) -> Result<Self, CaptureError> {
        let mut this = Self {
            r,
            offset: 0,
            packets: 0,
            state: State::Done,
        };
        let magic = this.read_up_to(4)?;
        if magic.is_empty() {
            return Err(CaptureError::NotACapture("the file is empty".into()));
        }
        if magic.len() < 4 {
            return Err(CaptureError::NotACapture(format!(
                "{} bytes, less than a capture header",
                magic.len()
            )));
        }
        let m = [magic[0], magic[1], magic[2], magic[3]];
        if u32::from_be_bytes(m) == PCAPNG_SHB {
            let order = this.section_header(0)?;
            this.state = State::PcapNg {
                order,
                links: Vec::new(),
            };
            return Ok(this);
        }
        let order = match u32::from_le_bytes(m) {
            0xA1B2_C3D4 | 0xA1B2_3C4D => Order::Little,
            0xD4C3_B2A1 | 0x4D3C_B2A1 => Order::Big,
            _ => {
                return Err(CaptureError::NotACapture(format!(
                    "it starts with {:02x} {:02x} {:02x} {:02x}, not a pcap or pcapng magic \
                     number",
                    m[0], m[1], m[2], m[3]
                )));
            }
        };
        let rest = this.read_up_to(PCAP_HEADER_LEN - 4)?;
        if rest.len() as u64 != PCAP_HEADER_LEN - 4 {
            return Err(CaptureError::NotACapture(format!(
                "{} bytes, less than the {PCAP_HEADER_LEN}-byte pcap header",
                4 + rest.len()
            )));
        }
        let (major, minor) = (order.u16(&rest, 0), order.u16(&rest, 2));
        if major != 2 {
            return Err(CaptureError::NotACapture(format!(
                "pcap version {major}.{minor}, only 2.x exists"
            )));
        }
        // The link type is the low 16 bits; the FCS flags sit in the top bits.
        let link = (order.u32(&rest, 16) & 0xffff) as u16;
        this.state = State::Pcap { order, link };
        Ok(this)
    }

    /// Which format the file is.
    pub fn format(&self) -> Option<Format> {
        match self.state {
            State::Pcap { .. } => Some(Format::Pcap),
            State::PcapNg { .. } => Some(Format::PcapNg),
            State::Done => None,
        }
    }

    /// The link type of a pcap file (every record's); `None` for pcapng.
    pub fn pcap_link(&self) -> Option<u16> {
        match self.state {
            State::Pcap { link, .. } => Some(link),
            _ => None,
        }
    }

    /// Packets returned so far.
    pub fn packets(&self) -> u64 {
        self.packets
    }

    /// The next packet, `None` at the end of the file. After an error, `None`.
    pub fn next_record(&mut self) -> Option<Result<Record, CaptureError>> {
        let r = match self.state {
            State::Pcap { order, link } => self.pcap_record(order, link),
            State::PcapNg { .. } => self.pcapng_record(),
            State::Done => return None,
        };
        match r {
            Ok(Some(rec)) => Some(Ok(rec)),
            Ok(None) => {
                self.state = State::Done;
                None
            }
            Err(e) => {
                self.state = State::Done;
                Some(Err(e))
            }
        }
    }

    /// Up to `n` bytes: fewer only at the end of the file. Allocates no more than it reads.
    fn read_up_to(&mut self, n: u64) -> Result<Vec<u8>, CaptureError> {
        let mut buf = Vec::with_capacity(n.min(64 * 1024) as usize);
        (&mut self.r)
            .take(n)
            .read_to_end(&mut buf)
            .map_err(CaptureError::Io)?;
        self.offset += buf.len() as u64;
        Ok(buf)
    }

    /// Exactly `n` bytes of `what` (starting at `start`), or a truncation.
    fn read_exact(&mut self, n: u64, what: &str, start: u64) -> Result<Vec<u8>, CaptureError> {
        let buf = self.read_up_to(n)?;
        if (buf.len() as u64) < n {
            return Err(CaptureError::Truncated {
                what: what.to_owned(),
                offset: start,
                need: (self.offset - start) + (n - buf.len() as u64),
                have: self.offset - start,
            });
        }
        Ok(buf)
    }

    fn pcap_record(&mut self, order: Order, link: u16) -> Result<Option<Record>, CaptureError> {
        let start = self.offset;
        let number = self.packets + 1;
        let what = format!("record {number}");
        let header = self.read_up_to(PCAP_RECORD_HEADER_LEN)?;
        if header.is_empty() {
            return Ok(None);
        }
        if (header.len() as u64) < PCAP_RECORD_HEADER_LEN {
            return Err(CaptureError::Truncated {
                what: format!("{what}'s header"),
                offset: start,
                need: PCAP_RECORD_HEADER_LEN,
                have: header.len() as u64,
            });
        }
        let captured = order.u32(&header, 8);
        let original_len = order.u32(&header, 12);
        if captured > MAX_RECORD_BYTES {
            return Err(CaptureError::Damaged {
                what,
                offset: start,
                message: format!(
                    "{captured} captured bytes declared, more than the {MAX_RECORD_BYTES} a \
                     record may hold"
                ),
            });
        }
        let data = self.read_exact(u64::from(captured), &what, start)?;
        self.packets = number;
        Ok(Some(Record {
            number,
            offset: start,
            link: Link::Type(link),
            data,
            original_len,
        }))
    }

    /// The rest of a section header block whose type (4 bytes) was read at `start`: its byte
    /// order.
    fn section_header(&mut self, start: u64) -> Result<Order, CaptureError> {
        let what = block_name(PCAPNG_SHB);
        let head = self.read_exact(8, what, start)?;
        let order = match u32::from_le_bytes([head[4], head[5], head[6], head[7]]) {
            PCAPNG_BYTE_ORDER => Order::Little,
            0x4D3C_2B1A => Order::Big,
            other => {
                let message = format!("byte-order magic 0x{other:08x}, not 0x1a2b3c4d");
                return Err(if start == 0 {
                    CaptureError::NotACapture(message)
                } else {
                    CaptureError::Damaged {
                        what: what.to_owned(),
                        offset: start,
                        message,
                    }
                });
            }
        };
        let total = order.u32(&head, 0);
        Self::check_block_len(PCAPNG_SHB, total, 28, start)?;
        // Version, section length, options: nothing we need.
        let body = self.read_exact(u64::from(total) - 12, what, start)?;
        Self::check_trailer(order, PCAPNG_SHB, total, &body, start)?;
        Ok(order)
    }

    fn check_block_len(kind: u32, total: u32, min: u32, start: u64) -> Result<(), CaptureError> {
        let message = if total < min {
            format!("block length {total}, less than the {min} bytes of its fixed fields")
        } else if !total.is_multiple_of(4) {
            format!("block length {total}, not a multiple of 4")
        } else if total > MAX_BLOCK_BYTES {
            format!("block length {total}, more than the {MAX_BLOCK_BYTES} a block may hold")
        } else {
            return Ok(());
        };
        Err(CaptureError::Damaged {
            what: block_name(kind).to_owned(),
            offset: start,
            message,
        })
    }

    /// The last 4 bytes of a block repeat its length.
    fn check_trailer(
        order: Order,
        kind: u32,
        total: u32,
        body_and_trailer: &[u8],
        start: u64,
    ) -> Result<(), CaptureError> {
        let at = body_and_trailer.len() - 4;
        let trailer = order.u32(body_and_trailer, at);
        if trailer == total {
            return Ok(());
        }
        Err(CaptureError::Damaged {
            what: block_name(kind).to_owned(),
            offset: start,
            message: format!("block length {total} at its start, {trailer} at its end"),
        })
    }

    fn pcapng_record(&mut self) -> Result<Option<Record>, CaptureError> {
        loop {
            let start = self.offset;
            let kind_bytes = self.read_up_to(4)?;
            if kind_bytes.is_empty() {
                return Ok(None);
            }
            let State::PcapNg { order, .. } = self.state else {
                return Ok(None);
            };
            if kind_bytes.len() < 4 {
                return Err(CaptureError::Truncated {
                    what: "a block header".into(),
                    offset: start,
                    need: 8,
                    have: kind_bytes.len() as u64,
                });
            }
            let kind = order.u32(&kind_bytes, 0);
            if kind == PCAPNG_SHB {
                let order = self.section_header(start)?;
                self.state = State::PcapNg {
                    order,
                    links: Vec::new(),
                };
                continue;
            }
            let number = self.packets + 1;
            let what = if matches!(kind, PCAPNG_PB | PCAPNG_SPB | PCAPNG_EPB) {
                format!("record {number} ({})", block_name(kind))
            } else {
                block_name(kind).to_owned()
            };
            let len_bytes = self.read_exact(4, &what, start)?;
            let total = order.u32(&len_bytes, 0);
            let min = match kind {
                PCAPNG_IDB => 20,
                PCAPNG_SPB => 16,
                PCAPNG_PB | PCAPNG_EPB => 32,
                _ => 12,
            };
            Self::check_block_len(kind, total, min, start)?;
            let body = self.read_exact(u64::from(total) - 8, &what, start)?;
            Self::check_trailer(order, kind, total, &body, start)?;
            let body = &body[..body.len() - 4];
            let damaged = |message: String| CaptureError::Damaged {
                what: what.clone(),
                offset: start,
                message,
            };
            let (interface, data, original_len) = match kind {
                PCAPNG_IDB => {
                    let link = order.u16(body, 0);
                    if let State::PcapNg { links, .. } = &mut self.state {
                        if links.len() == MAX_INTERFACES {
                            return Err(damaged(format!(
                                "more than {MAX_INTERFACES} interfaces in one section"
                            )));
                        }
                        links.push(link);
                    }
                    continue;
                }
                PCAPNG_EPB | PCAPNG_PB => {
                    let interface = if kind == PCAPNG_EPB {
                        order.u32(body, 0)
                    } else {
                        u32::from(order.u16(body, 0))
                    };
                    let captured = order.u32(body, 12);
                    let original_len = order.u32(body, 16);
                    let room = body.len() - 20;
                    if captured as usize > room {
                        return Err(damaged(format!(
                            "{captured} captured bytes declared, the block holds {room}"
                        )));
                    }
                    (interface, &body[20..20 + captured as usize], original_len)
                }
                PCAPNG_SPB => {
                    let original_len = order.u32(body, 0);
                    let captured = (body.len() - 4).min(original_len as usize);
                    (0, &body[4..4 + captured], original_len)
                }
                _ => continue,
            };
            let links: &[u16] = match &self.state {
                State::PcapNg { links, .. } => links,
                _ => &[],
            };
            let link = match links.get(interface as usize) {
                Some(&t) => Link::Type(t),
                None => Link::NoInterface {
                    id: interface,
                    described: links.len(),
                },
            };
            self.packets = number;
            return Ok(Some(Record {
                number,
                offset: start,
                link,
                data: data.to_vec(),
                original_len,
            }));
        }
    }
}

/// A link type's name, for messages.
pub fn link_name(link: u16) -> String {
    let name = match link {
        0 => "null/loopback",
        1 => "Ethernet",
        101 => "raw IP",
        105 => "802.11",
        113 => "Linux cooked",
        127 => "802.11 radiotap",
        228 => "raw IPv4",
        229 => "raw IPv6",
        276 => "Linux cooked v2",
        _ => return format!("link type {link}"),
    };
    format!("link type {link} ({name})")
}

#[cfg(test)]
#[path = "capture_tests.rs"]
mod tests;
