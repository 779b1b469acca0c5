//! `mrc-fabric demo`: the first thing to run. Lists the paths between two hosts of a plan
//! (built-in `small` by default), then builds and decodes, on one of them, a Write (data), the
//! SACK the responder answers with (on the reverse path, reflecting the EV), a copy of the
//! Write trimmed by a switch, and the NACK it triggers.

use std::fmt::Write as _;

use anyhow::Context as _;
use mrc_srv6::plan::{HostId, NodeId, Path, Plan};
use mrc_srv6::wire::{Ecn, EthernetAddress, Ipv6Packet};
use mrc_transport::wire::entropy::srv6_ev;
use mrc_transport::wire::{
    Body, BthRepr, CcStateRepr, FrameRepr, MethRepr, MultipathVerdict, NackReason, NethRepr,
    Opcode, RethRepr, Route, SethRepr, Trimmed, TsethRepr, WireConfig, WriteHeaders, parse_frame,
};

use super::decode::render_headers;
use super::{load_plan, parse_host, refused};

/// Arguments of `mrc-fabric demo`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Plan file, or the name of a built-in plan.
    #[arg(default_value = "small")]
    pub plan: String,
    /// Source host.
    #[arg(long, default_value = "h0")]
    pub from: String,
    /// Destination host.
    #[arg(long, default_value = "h3")]
    pub to: String,
}

/// Print the demo.
pub fn run(args: &Args) -> anyhow::Result<()> {
    crate::out!("{}", Demo::new(&args.plan, &args.from, &args.to)?.text);
    Ok(())
}

/// Payload bytes of the demo Write.
const PAYLOAD_LEN: usize = 1024;

/// What the demo built, and its printout.
#[derive(Debug)]
pub struct Demo {
    pub text: String,
    /// The Write, SRv6 over the chosen path.
    pub data: Vec<u8>,
    /// The responder's SACK, on the reverse path.
    pub sack: Vec<u8>,
    /// The Write as a switch trimmed it.
    pub trimmed: Vec<u8>,
    /// The responder's NACK for the trimmed Write.
    pub nack: Vec<u8>,
}

fn host_macs(
    plan: &Plan,
    host: HostId,
    plane: u8,
) -> anyhow::Result<(EthernetAddress, EthernetAddress)> {
    let port = u16::from(plane);
    let link = plan
        .link(NodeId::Host(host), port)
        .with_context(|| format!("{host} has no port {port}"))?;
    Ok((
        EthernetAddress(plan.mac(NodeId::Host(host), port)),
        EthernetAddress(plan.mac(link.peer, link.peer_port)),
    ))
}

fn frame_repr(
    plan: &Plan,
    path: &Path,
    ev: u32,
    bth: BthRepr,
    body: Body,
    cfg: &WireConfig,
) -> anyhow::Result<FrameRepr> {
    let (src_mac, dst_mac) = host_macs(plan, path.src, path.plane)?;
    Ok(FrameRepr {
        src_mac,
        dst_mac,
        route: Route::Srv6 {
            path: path.da,
            srh_segment: None,
        },
        src_addr: plan.nic_addr(path.src),
        dst_addr: plan.nic_addr(path.dst),
        dscp: cfg.dscp.for_packet(bth.opcode, bth.rtx, true),
        ecn: Ecn::Ect0,
        entropy: ev,
        bth,
        body,
    })
}

fn build(repr: &FrameRepr, payload: &[u8], cfg: &WireConfig) -> anyhow::Result<Vec<u8>> {
    let mut buf = vec![0u8; repr.buffer_len(payload.len())];
    repr.build(&mut buf, payload, cfg)?;
    Ok(buf)
}

fn section(text: &mut String, title: &str, frame: &[u8], cfg: &WireConfig) -> anyhow::Result<()> {
    let f = parse_frame(frame, cfg).with_context(|| format!("decoding the {title}"))?;
    let _ = writeln!(text, "\n{title} ({} bytes):", frame.len());
    render_headers(text, &f);
    Ok(())
}

impl Demo {
    /// Build the demo frames for `from -> to` on `plan`, and the printout.
    pub fn new(plan: &str, from: &str, to: &str) -> anyhow::Result<Self> {
        let cfg = WireConfig::default();
        let plan = load_plan(plan)?;
        let (src, dst) = (parse_host(&plan, from)?, parse_host(&plan, to)?);
        let mut text = format!("plan {}: paths {src} -> {dst}\n", plan.name());
        let mut chosen = None;
        for p in 0..plan.planes() {
            // The pair is the user's choice (the same host twice, say): a refusal.
            for path in plan.paths(src, dst, p).map_err(|e| refused(e.into()))? {
                let _ = writeln!(text, "  {path}");
                if p == 0 && path.index == 1 || chosen.is_none() {
                    chosen = Some(path);
                }
            }
        }
        let path = chosen.context("no path")?;
        let back = plan.path(dst, src, path.plane, u32::from(path.index))?;
        // EV: the path's index in the QP's EV table rides in the UDP source port.
        let ev_index = (u16::from(path.plane) << 8) | path.index;
        let ev = srv6_ev(cfg.entropy_order, ev_index, 0x05a5);
        let _ = writeln!(
            text,
            "\nusing plane {} path {} (EV 0x{ev:08x}: index {ev_index} in the UDP source port)",
            path.plane, path.index
        );

        let bth = |opcode, qpn, psn| BthRepr {
            opcode,
            solicited: false,
            mig_req: false,
            pad_count: 0,
            tver: 0,
            pkey: BthRepr::DEFAULT_PKEY,
            dest_qp: qpn,
            ack_req: true,
            rtx: false,
            ts: false,
            psn,
        };
        let write = Body::Write(WriteHeaders {
            meth: MethRepr { rqmsn: 0, msn: 1 },
            tseth: Some(TsethRepr::at_nanos(5_000)),
            reth: RethRepr {
                va: 0x7f00_0000_0000,
                rkey: 0x1234,
                dma_len: PAYLOAD_LEN as u32,
            },
            immdt: None,
        });
        let payload: Vec<u8> = (0..PAYLOAD_LEN).map(|i| i as u8).collect();
        let data_repr = frame_repr(
            &plan,
            &path,
            ev,
            bth(Opcode::WriteOnly, 0x11, 100),
            write,
            &cfg,
        )?;
        let data = build(&data_repr, &payload, &cfg)?;
        let received = parse_frame(&data, &cfg)?;

        let sack_body = Body::Sack {
            seth: SethRepr {
                verdict: MultipathVerdict::None,
                entropy: received.entropy,
                cack_psn: received.bth.psn + 1,
                sack_bitmap: 0,
                ..SethRepr::default()
            },
            cc: CcStateRepr {
                tx_timestamp: TsethRepr::at_nanos(5_000).tx_timestamp,
                rcvd_bytes: (PAYLOAD_LEN / 256) as u32,
                ..CcStateRepr::default()
            },
        };
        let back_ev = srv6_ev(
            cfg.entropy_order,
            (u16::from(back.plane) << 8) | back.index,
            0x05a5,
        );
        let sack = build(
            &frame_repr(
                &plan,
                &back,
                back_ev,
                bth(Opcode::Sack, 0x22, 0),
                sack_body,
                &cfg,
            )?,
            &[],
            &cfg,
        )?;

        // A switch trims the Write to trim_size bytes and rewrites its outer DSCP.
        let mut trimmed = data.clone();
        trimmed.truncate(usize::from(cfg.trim_size));
        Ipv6Packet::new_unchecked(&mut trimmed[14..]).set_dscp(cfg.dscp.trimmed);
        let cut = parse_frame(&trimmed, &cfg)?;
        let reason = match cut.trimmed {
            Some(Trimmed::InFabric) => NackReason::Trimmed,
            Some(Trimmed::LastHop) => NackReason::TrimmedLastHop,
            None => anyhow::bail!("the trimmed copy was not recognised as trimmed"),
        };
        let nack_body = Body::Nack(NethRepr {
            hdr_type: 0,
            next: 0,
            reason,
            vendor_info: 0,
            entropy: cut.entropy,
            spdcid: 0,
            dpdcid: 0,
            nack_psn: cut.bth.psn,
            cc_type: 0,
            cc_flags: 0,
            tx_timestamp: TsethRepr::at_nanos(5_000).tx_timestamp,
        });
        let nack = build(
            &frame_repr(
                &plan,
                &back,
                back_ev,
                bth(Opcode::Nack, 0x22, 0),
                nack_body,
                &cfg,
            )?,
            &[],
            &cfg,
        )?;

        section(&mut text, &format!("Write {src} -> {dst}"), &data, &cfg)?;
        section(&mut text, &format!("SACK {dst} -> {src}"), &sack, &cfg)?;
        section(&mut text, "the Write trimmed by a switch", &trimmed, &cfg)?;
        section(&mut text, &format!("NACK {dst} -> {src}"), &nack, &cfg)?;
        Ok(Self {
            text,
            data,
            sack,
            trimmed,
            nack,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demo_builds_and_decodes_data_sack_trimmed_and_nack() {
        let d = Demo::new("small", "h0", "h3").unwrap();
        let cfg = WireConfig::default();
        assert!(
            d.text.starts_with("plan small: paths h0 -> h3\n"),
            "{}",
            d.text
        );
        assert_eq!(d.text.matches(" da fcbb:").count(), 4, "{}", d.text);
        let data = parse_frame(&d.data, &cfg).unwrap();
        let sack = parse_frame(&d.sack, &cfg).unwrap();
        let trimmed = parse_frame(&d.trimmed, &cfg).unwrap();
        let nack = parse_frame(&d.nack, &cfg).unwrap();
        assert_eq!(data.payload.len(), PAYLOAD_LEN);
        assert_eq!(
            data.outer.dst_addr.to_string(),
            "fcbb:bb00:1000:2001:1001:8003::"
        );
        match sack.body {
            Some(Body::Sack { seth, .. }) => {
                assert_eq!(seth.entropy, data.entropy);
                assert_eq!(seth.cack_psn, data.bth.psn + 1);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(trimmed.trimmed, Some(Trimmed::InFabric));
        assert_eq!(trimmed.bth.psn, data.bth.psn);
        match nack.body {
            Some(Body::Nack(n)) => {
                assert_eq!(n.reason, NackReason::Trimmed);
                assert_eq!((n.nack_psn, n.entropy), (data.bth.psn, data.entropy));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(sack.dst_addr(), data.src_addr());
        assert!(d.text.contains("TRIMMED (in fabric)"), "{}", d.text);
        assert!(d.text.contains("NETH TRIMMED"), "{}", d.text);
    }
}
