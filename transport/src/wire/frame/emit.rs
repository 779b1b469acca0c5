//! Building frames into a caller-provided buffer, without allocating.

use core::net::Ipv6Addr;
use mrc_srv6::wire::ipv6::next_header;

use mrc_srv6::wire::{ETHERNET_HEADER_LEN, EthernetProtocol, IPV6_HEADER_LEN, Ipv6Packet};

use super::super::bth::{BTH_LEN, BthPacket, BthRepr};
use super::super::config::{FlowLabelPlacement, WireConfig};
use super::super::icrc::{self, ICRC_LEN};
use super::super::udp::{self, UDP_HEADER_LEN};
use super::super::{Result, WireError, be};
use super::{FrameLayout, FrameRepr, Route, SRH_ONE_SEGMENT_LEN};

/// RFC 8754 routing type of the SRH.
const ROUTING_TYPE_SRH: u8 = 4;

impl FrameRepr {
    /// Bytes of every header before the payload.
    pub const fn header_len(&self) -> usize {
        let ip = match self.route {
            Route::Ecmp => IPV6_HEADER_LEN,
            Route::Srv6 {
                srh_segment: None, ..
            } => 2 * IPV6_HEADER_LEN,
            Route::Srv6 {
                srh_segment: Some(_),
                ..
            } => 2 * IPV6_HEADER_LEN + SRH_ONE_SEGMENT_LEN,
        };
        ETHERNET_HEADER_LEN + ip + UDP_HEADER_LEN + BTH_LEN + self.body.buffer_len()
    }

    /// Total frame length with `payload_len` bytes of payload (pad and ICRC included).
    pub const fn buffer_len(&self, payload_len: usize) -> usize {
        self.header_len() + payload_len + pad_for(payload_len) + ICRC_LEN
    }

    /// Write every header into `buf` for a payload of `payload_len` bytes, and zero the pad.
    /// The caller then fills `buf[layout.payload]` and calls [`FrameLayout::finish`].
    ///
    /// Panics if the body does not fit the BTH opcode (caller misuse) or if a control packet
    /// is given a payload.
    pub fn emit(
        &self,
        buf: &mut [u8],
        payload_len: usize,
        cfg: &WireConfig,
    ) -> Result<FrameLayout> {
        assert!(
            self.body.matches(self.bth.opcode),
            "body does not match opcode {}",
            self.bth.opcode
        );
        assert!(
            payload_len == 0 || self.bth.opcode.is_write(),
            "only Writes carry payload"
        );
        let len = self.buffer_len(payload_len);
        check_frame_len(len, buf.len())?;
        let pad = pad_for(payload_len);
        let ev = cfg.entropy_order.split(self.entropy);
        let body_len = self.body.buffer_len();
        let udp_len = UDP_HEADER_LEN + BTH_LEN + body_len + payload_len + pad + ICRC_LEN;
        // Every header at its fixed offset (MRC 1.0 §5.1): one bounds check for the whole
        // header block, then plain stores.
        let hdr = &mut buf[..len];
        hdr[0..6].copy_from_slice(&self.dst_mac.0);
        hdr[6..12].copy_from_slice(&self.src_mac.0);
        hdr[12..14].copy_from_slice(&u16::from(EthernetProtocol::Ipv6).to_be_bytes());
        let tc = (self.dscp.0 << 2) | self.ecn.bits();
        let ip = |h: &mut [u8], payload_len: usize, nh: u8, flow_label: u32, dst: &Ipv6Addr| {
            let word0 = (6u32 << 28) | (u32::from(tc) << 20) | (flow_label & 0x000f_ffff);
            h[0..4].copy_from_slice(&word0.to_be_bytes());
            h[4..6].copy_from_slice(&(payload_len as u16).to_be_bytes());
            h[6] = nh;
            h[7] = cfg.hop_limit;
            h[8..24].copy_from_slice(&self.src_addr.octets());
            h[24..40].copy_from_slice(&dst.octets());
        };
        let mut at = ETHERNET_HEADER_LEN;
        let icrc_from = match self.route {
            Route::Ecmp => {
                ip(
                    &mut hdr[at..at + IPV6_HEADER_LEN],
                    udp_len,
                    next_header::UDP,
                    ev.flow_label,
                    &self.dst_addr,
                );
                at += IPV6_HEADER_LEN;
                ETHERNET_HEADER_LEN
            }
            Route::Srv6 { path, srh_segment } => {
                let (outer_fl, inner_fl) = match cfg.flow_label {
                    FlowLabelPlacement::Outer => (ev.flow_label, 0),
                    FlowLabelPlacement::Inner => (0, ev.flow_label),
                    FlowLabelPlacement::Both => (ev.flow_label, ev.flow_label),
                };
                let (srh_len, outer_nh) = match srh_segment {
                    Some(_) => (SRH_ONE_SEGMENT_LEN, next_header::ROUTING),
                    None => (0, next_header::IPV6),
                };
                ip(
                    &mut hdr[at..at + IPV6_HEADER_LEN],
                    srh_len + IPV6_HEADER_LEN + udp_len,
                    outer_nh,
                    outer_fl,
                    &path,
                );
                at += IPV6_HEADER_LEN;
                if let Some(segment) = srh_segment {
                    emit_srh(&mut hdr[at..at + SRH_ONE_SEGMENT_LEN], segment);
                    at += SRH_ONE_SEGMENT_LEN;
                }
                ip(
                    &mut hdr[at..at + IPV6_HEADER_LEN],
                    udp_len,
                    next_header::UDP,
                    inner_fl,
                    &self.dst_addr,
                );
                at += IPV6_HEADER_LEN;
                at - IPV6_HEADER_LEN
            }
        };

        let u = &mut hdr[at..at + UDP_HEADER_LEN];
        u[0..2].copy_from_slice(&ev.udp_sport.to_be_bytes());
        u[2..4].copy_from_slice(&cfg.udp_dport.to_be_bytes());
        u[4..6].copy_from_slice(&(udp_len as u16).to_be_bytes());
        u[6..8].fill(0);
        at += UDP_HEADER_LEN;

        BthRepr {
            ts: self.body.ts_flag(),
            pad_count: pad as u8,
            ..self.bth
        }
        .emit(&mut BthPacket::new_unchecked(&mut hdr[at..at + BTH_LEN]));
        at += BTH_LEN;

        self.body.emit(&mut hdr[at..at + body_len]);
        at += body_len;

        let payload = at..at + payload_len;
        // The pad (at most 3 bytes, usually none) as one 4-byte store, not a call to memset:
        // the ICRC trailer follows it, so 4 bytes are always there, and `finish` writes the
        // trailer over the rest.
        hdr[payload.end..payload.end + ICRC_LEN].copy_from_slice(&[0; ICRC_LEN]);
        Ok(FrameLayout {
            len,
            payload,
            icrc_from,
        })
    }

    /// Emit, copy `payload`, finish: the whole frame in one call. Returns its length.
    pub fn build(&self, buf: &mut [u8], payload: &[u8], cfg: &WireConfig) -> Result<usize> {
        let layout = self.emit(buf, payload.len(), cfg)?;
        buf[layout.payload.clone()].copy_from_slice(payload);
        layout.finish(buf, cfg);
        Ok(layout.len)
    }
}

impl FrameLayout {
    /// After the payload is in place: write the ICRC trailer, then the UDP checksum if
    /// configured (it covers the ICRC; the ICRC masks it).
    pub fn finish(&self, buf: &mut [u8], cfg: &WireConfig) {
        // Headers and payload are in place: one pass over them as they are.
        let covered = &buf[self.icrc_from..self.payload.end];
        let mut crc = icrc::start(covered);
        crc.update(covered);
        self.finish_from(buf, cfg, crc);
    }

    /// The ICRC over every header of the frame `emit` wrote into `buf` (which holds at least
    /// the headers), before the payload: a sender that copies the payload in continues it
    /// over the bytes it copies, the headers and the first piece in one pass
    /// ([`icrc::Running`]), then calls [`finish_from`](Self::finish_from) with what
    /// [`finish`](icrc::Running::finish) returns.
    #[inline]
    pub fn icrc_before_payload<'b>(&self, buf: &'b [u8]) -> icrc::Running<'b> {
        let covered = &buf[self.icrc_from..self.payload.start];
        icrc::Running::new(icrc::start(covered), covered)
    }

    /// [`finish`](Self::finish) with the ICRC already run over the headers and the payload
    /// (`crc`): the pad, the trailer, the UDP checksum.
    #[inline]
    pub fn finish_from(&self, buf: &mut [u8], cfg: &WireConfig, mut crc: icrc::Crc) {
        let end = self.len - ICRC_LEN;
        crc.update(&buf[self.payload.end..end]);
        let mut trailer = [0u8; ICRC_LEN];
        icrc::write(crc.finalize(), &mut trailer);
        buf[end..self.len].copy_from_slice(&trailer);
        if cfg.udp_checksum {
            let ip = Ipv6Packet::new_unchecked(&buf[self.icrc_from..]);
            let (src, dst) = (ip.src_addr(), ip.dst_addr());
            let udp_at = self.icrc_from + IPV6_HEADER_LEN;
            be::set_u16(buf, udp_at + 6, 0);
            let sum = udp::checksum_ipv6(&src, &dst, &buf[udp_at..self.len]);
            be::set_u16(buf, udp_at + 6, sum);
        }
    }
}

/// IBTA pads the payload to a multiple of 4 bytes (BTH PadCnt).
const fn pad_for(payload_len: usize) -> usize {
    (4 - payload_len % 4) % 4
}

/// A one-segment SRH carrying the second uSID container (RFC 8754 §2, §4.1.1).
fn emit_srh(b: &mut [u8], segment: Ipv6Addr) {
    b[0] = next_header::IPV6;
    b[1] = (SRH_ONE_SEGMENT_LEN / 8 - 1) as u8; // Hdr Ext Len, 8-octet units after the first 8
    b[2] = ROUTING_TYPE_SRH;
    b[3] = 1; // Segments Left: the DA holds the omitted first segment
    b[4] = 0; // Last Entry
    b[5] = 0; // Flags
    b[6..8].fill(0); // Tag
    b[8..24].copy_from_slice(&segment.octets());
}

/// A frame of `len` bytes (Ethernet to ICRC) fits the outer IPv6 payload length and a buffer of
/// `have` bytes: what every emitter checks before it writes a byte.
#[inline]
pub(super) fn check_frame_len(len: usize, have: usize) -> Result<()> {
    if len - ETHERNET_HEADER_LEN - IPV6_HEADER_LEN > usize::from(u16::MAX) {
        return Err(WireError::Malformed {
            what: "frame too long for the IPv6 payload length",
        });
    }
    if have < len {
        return Err(WireError::BufferTooSmall { need: len, have });
    }
    Ok(())
}
