//! Turning a decision to send into a frame in the caller's buffer: the route and entropy come
//! from the EV, addresses and MACs from the configuration, the headers from the wire module.
//! No allocation; the payload is copied once, from registered memory into the frame.

use core::net::Ipv6Addr;

use mrc_srv6::wire::{Dscp, Ecn};

use crate::config::EndpointConfig;
use crate::ev::EvRoute;
use crate::wire::bth::BTH_LEN;
use crate::wire::icrc::ICRC_LEN;
use crate::wire::{
    Body, BthRepr, FrameLayout, FrameRepr, METH_LEN, Opcode, RETH_LEN, Route, TSETH_LEN, WireError,
};

/// Bytes of a data packet's UDP payload that are not payload (BTH, METH, TSETH, RETH, ICRC):
/// what the nominal packet size adds to the payload (brief §3.4, with the 40 B of
/// `cc::nominal_packet_bytes`).
pub(crate) const UDP_PAYLOAD_OVERHEAD: u32 =
    (BTH_LEN + METH_LEN + TSETH_LEN + RETH_LEN + ICRC_LEN) as u32;

/// A frame [`Endpoint::poll_transmit`](crate::Endpoint::poll_transmit) wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub struct Transmit {
    /// Bytes written at the start of the buffer.
    pub len: usize,
    /// The local port (= plane) to send it on.
    pub port: u8,
}

/// The frame description for a packet leaving on `ev` towards the NIC `dst`, and the port
/// (the EV's plane) it leaves on.
pub(crate) fn repr(
    cfg: &EndpointConfig,
    ev: EvRoute,
    dst: Ipv6Addr,
    dscp: Dscp,
    ecn: Ecn,
    bth: BthRepr,
    body: Body,
) -> (FrameRepr, u8) {
    let port = &cfg.ports[usize::from(ev.plane)];
    let route = match ev.path {
        Some(p) => Route::Srv6 {
            path: p.outer_da,
            srh_segment: p.segment,
        },
        None => Route::Ecmp,
    };
    let r = FrameRepr {
        src_mac: port.mac,
        dst_mac: port.next_hop_mac,
        route,
        src_addr: cfg.nic_addr,
        dst_addr: dst,
        dscp,
        ecn,
        entropy: ev.entropy,
        bth,
        body,
    };
    (r, ev.plane)
}

/// A BTH with MRC's fixed fields.
pub(crate) fn bth(opcode: Opcode, dest_qp: u32, psn: u32) -> BthRepr {
    BthRepr {
        opcode,
        solicited: false,
        mig_req: false,
        pad_count: 0,
        tver: 0,
        pkey: BthRepr::DEFAULT_PKEY,
        dest_qp,
        ack_req: false,
        rtx: false,
        ts: false,
        psn,
    }
}

/// A control packet (no payload: SACK, NACK, ACK, probe, endpoint operation) on `ev` towards
/// the NIC `dst`, written into `buf`: not ECN-capable, in the control traffic class (brief
/// §2.14). Every control packet the engine sends is built here.
#[allow(clippy::too_many_arguments)]
#[inline]
pub(crate) fn emit_control(
    cfg: &EndpointConfig,
    ev: EvRoute,
    dst: Ipv6Addr,
    opcode: Opcode,
    dest_qp: u32,
    psn: u32,
    body: Body,
    buf: &mut [u8],
) -> Result<Transmit, WireError> {
    let dscp = cfg.wire.dscp.for_packet(opcode, false, true);
    let (r, port) = repr(
        cfg,
        ev,
        dst,
        dscp,
        Ecn::NotEct,
        bth(opcode, dest_qp, psn),
        body,
    );
    let layout: FrameLayout = r.emit(buf, 0, &cfg.wire)?;
    layout.finish(buf, &cfg.wire);
    Ok(Transmit {
        len: layout.len,
        port,
    })
}

/// The largest frame the engine writes with this configuration (what `poll_transmit`'s
/// buffer must hold).
pub(crate) fn max_frame_len(cfg: &EndpointConfig) -> usize {
    // Ethernet + outer IPv6 + SRH + inner IPv6 + UDP + BTH + the largest body + payload + pad
    // + ICRC.
    14 + 40 + 24 + 40 + 8 + BTH_LEN + 36 + cfg.payload_mtu as usize + 3 + ICRC_LEN
}
