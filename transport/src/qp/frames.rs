//! Turning a decision to send into a frame in the caller's buffer: the route and entropy come
//! from the EV, addresses and MACs from the configuration, the headers from the wire module.
//! No allocation; the payload is copied once, from registered memory into the frame. A
//! connection's frames go through its [`Templates`] (issue #13, header templates): the fixed
//! headers prebuilt per (plane, layout), per packet only what differs patched.

use core::net::Ipv6Addr;

use mrc_srv6::wire::{Dscp, Ecn};

use crate::config::EndpointConfig;
use crate::ev::{EvRoute, EvRouteRef, SrPath};
use crate::wire::bth::BTH_LEN;
use crate::wire::icrc::ICRC_LEN;
use crate::wire::{
    Body, BthRepr, FrameLayout, FrameRepr, HeaderTemplate, METH_LEN, Opcode, PacketFields,
    RETH_LEN, Route, RouteRef, TSETH_LEN, TemplateLayout, WireError,
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
    let route = route_of(&ev);
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

/// The route `ev` takes.
#[inline]
fn route_of(ev: &EvRoute) -> Route {
    route_ref(ev.path.as_ref()).to_route()
}

/// What a frame of a connection's carries beside its EV and its peer: every per-packet field
/// the [`Templates`] patch (the BTH's other fields are [`bth`]'s constants).
pub(crate) type Packet = PacketFields;

/// The route `path` takes, borrowed.
#[inline]
fn route_ref(path: Option<&SrPath>) -> RouteRef<'_> {
    match path {
        Some(p) => RouteRef::Srv6 {
            path: &p.outer_da,
            srh_segment: p.segment.as_ref(),
        },
        None => RouteRef::Ecmp,
    }
}

/// The general emitter's description of packet `p` on `ev` towards `dst`.
fn repr_of(p: &Packet, cfg: &EndpointConfig, ev: EvRouteRef<'_>, dst: Ipv6Addr) -> FrameRepr {
    let port = &cfg.ports[usize::from(ev.plane)];
    FrameRepr {
        src_mac: port.mac,
        dst_mac: port.next_hop_mac,
        route: route_ref(ev.path).to_route(),
        src_addr: cfg.nic_addr,
        dst_addr: dst,
        dscp: p.dscp,
        ecn: p.ecn,
        entropy: ev.entropy,
        bth: BthRepr {
            ack_req: p.ack_req,
            rtx: p.rtx,
            ..bth(p.opcode, p.dest_qp, p.psn)
        },
        body: p.body,
    }
}

/// A connection's header templates (issue #13, header templates), one per (plane, route
/// layout), built on first use by the general emitter and rebuilt whenever the packet's
/// [`TemplateKey`](crate::wire::TemplateKey) differs from the one it was built for: a port's next-hop MAC changed
/// (`Endpoint::set_next_hop_mac`), or another peer address or QP. Everything else a template
/// holds is the endpoint's configuration, fixed for its life; what an EV gives (route,
/// entropy) is patched per packet, so an EV re-drawn or recycled needs no invalidation. The
/// cache lives in the [`Connection`](super::Connection), so a reconnect (RESET, RTR) starts
/// with none.
#[derive(Debug)]
pub(crate) struct Templates {
    slots: Vec<Option<HeaderTemplate>>,
}

impl Templates {
    /// Every slot of `ports` planes, empty: allocated here, so the datapath never does.
    pub fn new(ports: usize) -> Self {
        Self {
            slots: vec![None; ports * TemplateLayout::COUNT],
        }
    }

    /// Write `p`'s frame on `ev` towards the NIC `dst` into `buf`, with room for
    /// `payload_len` bytes of payload (byte for byte [`repr`] + [`FrameRepr::emit`]). Returns
    /// its layout and the port it leaves on.
    #[inline]
    pub fn emit(
        &mut self,
        cfg: &EndpointConfig,
        ev: EvRouteRef<'_>,
        dst: Ipv6Addr,
        p: &Packet,
        buf: &mut [u8],
        payload_len: usize,
    ) -> Result<(FrameLayout, u8), WireError> {
        let route = route_ref(ev.path);
        let i =
            usize::from(ev.plane) * TemplateLayout::COUNT + TemplateLayout::of_ref(route) as usize;
        let fresh = match (self.slots.get(i), cfg.ports.get(usize::from(ev.plane))) {
            (Some(Some(t)), Some(port)) => {
                t.key()
                    .is(port.mac, port.next_hop_mac, cfg.nic_addr, dst, p.dest_qp)
            }
            _ => false,
        };
        if !fresh {
            self.build(i, cfg, ev, dst, p)?;
        }
        let Some(Some(t)) = self.slots.get(i) else {
            return Err(WireError::Malformed {
                what: "header template missing",
            });
        };
        let layout = t.emit(route, ev.entropy, p, buf, payload_len, &cfg.wire)?;
        Ok((layout, ev.plane))
    }

    /// (Re)build slot `i` from `p`'s frame, with the general emitter.
    #[cold]
    #[inline(never)]
    fn build(
        &mut self,
        i: usize,
        cfg: &EndpointConfig,
        ev: EvRouteRef<'_>,
        dst: Ipv6Addr,
        p: &Packet,
    ) -> Result<(), WireError> {
        if cfg.ports.get(usize::from(ev.plane)).is_none() {
            return Err(WireError::Malformed {
                what: "EV on a plane without a port",
            });
        }
        let t = HeaderTemplate::new(&repr_of(p, cfg, ev, dst), &cfg.wire)?;
        let Some(slot) = self.slots.get_mut(i) else {
            return Err(WireError::Malformed {
                what: "plane without a header template slot",
            });
        };
        *slot = Some(t);
        Ok(())
    }

    /// Bytes it holds on the heap.
    pub fn heap_bytes(&self) -> usize {
        self.slots.capacity() * size_of::<Option<HeaderTemplate>>()
    }
}

/// A control packet of a connection (SACK, NACK, ACK, probe) through its [`Templates`]: what
/// [`emit_control`] writes, byte for byte.
#[allow(clippy::too_many_arguments)]
#[inline]
pub(crate) fn emit_control_templated(
    tmpl: &mut Templates,
    cfg: &EndpointConfig,
    ev: EvRouteRef<'_>,
    dst: Ipv6Addr,
    opcode: Opcode,
    dest_qp: u32,
    psn: u32,
    body: Body,
    buf: &mut [u8],
) -> Result<Transmit, WireError> {
    let p = Packet {
        dscp: cfg.wire.dscp.for_packet(opcode, false, true),
        ecn: Ecn::NotEct,
        opcode,
        dest_qp,
        psn,
        ack_req: false,
        rtx: false,
        body,
    };
    let (layout, port) = tmpl.emit(cfg, ev, dst, &p, buf, 0)?;
    layout.finish(buf, &cfg.wire);
    Ok(Transmit {
        len: layout.len,
        port,
    })
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

#[cfg(test)]
mod tests {
    use mrc_srv6::wire::EthernetAddress;
    use proptest::prelude::*;

    use super::*;
    use crate::config::{PathMode, PortConfig};
    use crate::wire::{
        AethRepr, CcStateRepr, EntropyOrder, FlowLabelPlacement, ImmDtRepr, MethRepr,
        MultipathVerdict, NackReason, NethRepr, PethRepr, RethRepr, SethRepr, TsethRepr,
        WriteHeaders,
    };

    /// The Writes, then the control frames a connection sends.
    const CONTROLS: [Opcode; 4] = [Opcode::Sack, Opcode::Ack, Opcode::Nack, Opcode::Probe];
    const OPCODES: usize = Opcode::WRITES.len() + CONTROLS.len();

    fn nth_opcode(i: usize) -> Opcode {
        Opcode::WRITES
            .get(i)
            .copied()
            .unwrap_or_else(|| CONTROLS[i - Opcode::WRITES.len()])
    }

    fn mac(b: u8) -> EthernetAddress {
        EthernetAddress([2, 0, 0, 0, b >> 4, b])
    }

    fn addr(a: u16, b: u16) -> Ipv6Addr {
        Ipv6Addr::new(0xfcbb, 0xbb00, a, b, 0, 0, 0, 0)
    }

    /// The body `opcode` carries, its fields from `x`.
    fn body(opcode: Opcode, x: u64, ts: bool) -> Body {
        let w = |imm: bool| {
            Body::Write(WriteHeaders {
                meth: MethRepr {
                    rqmsn: x as u16,
                    msn: (x >> 16) as u16,
                },
                tseth: ts.then(|| TsethRepr::at_nanos(x)),
                reth: RethRepr {
                    va: x.rotate_left(17),
                    rkey: (x >> 8) as u32,
                    dma_len: (x >> 24) as u32,
                },
                immdt: imm.then_some(ImmDtRepr { imm: x as u32 }),
            })
        };
        match opcode {
            Opcode::WriteLastImm | Opcode::WriteOnlyImm => w(true),
            Opcode::Sack => Body::Sack {
                seth: SethRepr {
                    verdict: MultipathVerdict::SkipOnce,
                    cack_psn: x as u32 & 0x00ff_ffff,
                    sack_bitmap: x,
                    entropy: (x >> 3) as u32,
                    ..SethRepr::default()
                },
                cc: CcStateRepr {
                    rcvd_bytes: (x >> 5) as u32,
                    ..CcStateRepr::default()
                },
            },
            Opcode::Ack => Body::Ack(AethRepr::ack(x as u32 & 0xffff)),
            Opcode::Nack => Body::Nack(NethRepr {
                hdr_type: 0,
                next: 0,
                reason: NackReason::Trimmed,
                vendor_info: x as u8,
                entropy: (x >> 7) as u32,
                spdcid: x as u16,
                dpdcid: (x >> 16) as u16,
                nack_psn: x as u32 & 0x00ff_ffff,
                cc_type: 0,
                cc_flags: 0,
                tx_timestamp: (x >> 40) as u16,
            }),
            Opcode::Probe => Body::Probe(PethRepr {
                hdr_type: 0,
                next: 0,
                vendor_info: 0,
                probe_id: x as u16,
                spdcid: (x >> 16) as u16,
                dpdcid: (x >> 32) as u16,
                tx_timestamp: (x >> 48) as u16,
                tsr: false,
                format_type: TsethRepr::DEFAULT_FORMAT,
            }),
            _ => w(false),
        }
    }

    /// One step of a connection's life: a frame, or a port's next hop changing.
    #[derive(Debug, Clone)]
    enum Step {
        Send {
            /// Which of the QPs (peer address and DestQP) it belongs to.
            qp: u8,
            plane: u8,
            /// 0 ECMP, 1 SRv6, 2 SRv6 + SRH; `path` picks the route (an EV's path changing).
            mode: u8,
            path: u16,
            entropy: u32,
            opcode: usize,
            payload: usize,
            dscp: u8,
            ecn: u8,
            ts: bool,
            ack_req: bool,
            rtx: bool,
            psn: u32,
            x: u64,
        },
        SetNextHopMac {
            port: u8,
            mac: u8,
        },
    }

    fn step() -> impl Strategy<Value = Step> {
        let send = (
            (0u8..3, 0u8..3, 0u8..3, 0u16..4, any::<u32>(), 0..OPCODES),
            (
                prop_oneof![0usize..300, Just(4096usize)],
                0u8..64,
                0u8..4,
                any::<bool>(),
                any::<bool>(),
                any::<bool>(),
                any::<u32>(),
                any::<u64>(),
            ),
        )
            .prop_map(
                |(
                    (qp, plane, mode, path, entropy, opcode),
                    (payload, dscp, ecn, ts, ack_req, rtx, psn, x),
                )| Step::Send {
                    qp,
                    plane,
                    mode,
                    path,
                    entropy,
                    opcode,
                    payload,
                    dscp,
                    ecn,
                    ts,
                    ack_req,
                    rtx,
                    psn,
                    x,
                },
            );
        prop_oneof![
            6 => send,
            1 => (0u8..3, any::<u8>()).prop_map(|(port, mac)| Step::SetNextHopMac { port, mac }),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        /// Issue #13 (header templates): every frame a connection's templates write is the
        /// general emitter's, byte for byte, for every header combination (QP, EV plane,
        /// route and entropy, opcode, payload size, SRH or not, ECMP, DSCP/ECN, TSETH,
        /// AckReq/rtx, PSN) and configuration (flow-label placement, entropy order, UDP
        /// checksum), across next-hop MAC changes and EV route changes.
        #[test]
        fn templated_frames_match_the_general_emitter_byte_for_byte(
            steps in prop::collection::vec(step(), 1..24),
            flow_label in 0u8..3,
            sport_high in any::<bool>(),
            udp_checksum in any::<bool>(),
        ) {
            let ports = (0..3).map(|i| PortConfig::new(mac(0x10 + i), mac(0x20 + i))).collect();
            let mut cfg = EndpointConfig::new(1, addr(0xe000, 0), ports, PathMode::Ecmp);
            cfg.wire.flow_label = match flow_label {
                0 => FlowLabelPlacement::Outer,
                1 => FlowLabelPlacement::Inner,
                _ => FlowLabelPlacement::Both,
            };
            cfg.wire.entropy_order =
                if sport_high { EntropyOrder::SportHigh } else { EntropyOrder::SportLow };
            cfg.wire.udp_checksum = udp_checksum;
            let mut tmpl = [Templates::new(3), Templates::new(3), Templates::new(3)];
            let mut got = vec![0u8; cfg.max_frame_len() + 4096];
            let mut want = vec![0u8; cfg.max_frame_len() + 4096];
            for s in steps {
                let Step::Send {
                    qp, plane, mode, path, entropy, opcode, payload, dscp, ecn, ts, ack_req,
                    rtx, psn, x,
                } = s else {
                    if let Step::SetNextHopMac { port, mac: m } = s {
                        cfg.ports[usize::from(port)].next_hop_mac = mac(m);
                    }
                    continue;
                };
                let opcode = nth_opcode(opcode);
                let payload = if opcode.is_write() { payload } else { 0 };
                let sr = match mode {
                    0 => None,
                    1 => Some(SrPath { outer_da: addr(0x1000, path), segment: None }),
                    _ => Some(SrPath {
                        outer_da: addr(0x1000, path),
                        segment: Some(addr(0x2000, path ^ 5)),
                    }),
                };
                let ev = EvRouteRef { plane, entropy, path: sr.as_ref() };
                let p = Packet {
                    dscp: Dscp(dscp),
                    ecn: Ecn::from_bits(ecn),
                    opcode,
                    dest_qp: 0x100 + u32::from(qp),
                    psn,
                    ack_req,
                    rtx,
                    body: body(opcode, x, ts),
                };
                let dst = addr(0xe001, u16::from(qp));
                let data: Vec<u8> = (0..payload).map(|i| (i as u8) ^ (x as u8)).collect();
                got.fill(0xee);
                let (layout, port) = tmpl[usize::from(qp)]
                    .emit(&cfg, ev, dst, &p, &mut got, payload)
                    .unwrap();
                prop_assert_eq!(port, plane);
                got[layout.payload.clone()].copy_from_slice(&data);
                layout.finish(&mut got, &cfg.wire);
                want.fill(0xee);
                let n = repr_of(&p, &cfg, ev, dst).build(&mut want, &data, &cfg.wire).unwrap();
                prop_assert_eq!(layout.len, n);
                prop_assert_eq!(&got[..n], &want[..n], "opcode {:?} mode {} payload {}", opcode, mode, payload);
            }
        }
    }
}
