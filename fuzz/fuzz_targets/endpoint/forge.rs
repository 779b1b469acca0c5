//! Frames of the `endpoint` target re-forged with changed header fields (a valid ICRC, so
//! the engine's own checks are what refuse them), or with their ICRC recomputed after bytes
//! were flipped.
use arbitrary::Arbitrary;
use mrc_srv6::wire::Dscp;
use mrc_transport::wire::{
    Body, MultipathVerdict, NackReason, NethRepr, Opcode, WireConfig, icrc, parse_frame,
};

use super::nic;

#[derive(Arbitrary, Debug)]
pub enum Edit {
    PsnDelta(i16),
    Psn(u32),
    DestQp(u32),
    Opcode(u8),
    RkeyXor(u32),
    VaDelta(i32),
    Va(u64),
    DmaLen(u32),
    PayloadLen(u16),
    Rqmsn(u16),
    Imm(Option<u32>),
    CackDelta(i16),
    Bitmap(u64),
    SackOffset(i16),
    SackEntropy(u32),
    Verdict(u8),
    NackReason(u8),
    NackPsnDelta(i16),
    AckMsn(u32),
    Dscp(u8),
    SrcAddr(u8),
    DstAddr(u8),
    Flags { rtx: bool, ack_req: bool },
    FrameEntropy(u32),
}

/// Recompute the ICRC of an MRC frame after its bytes changed, if it still looks like one:
/// in SRv6 mode it covers the inner IPv6 header on (past an optional SRH), in ECMP mode (UDP
/// right behind the only IPv6 header) the IPv6 header on.
pub fn refresh_icrc(f: &mut [u8]) {
    let mut from = 14 + 40;
    match f.get(14 + 6) {
        Some(43) => {
            let Some(&ext) = f.get(from + 1) else { return };
            from += (usize::from(ext) + 1) * 8;
        }
        Some(41) => {}
        _ => from = 14,
    }
    if f.len() < from + 4 {
        return;
    }
    let end = f.len() - 4;
    if let Ok(c) = icrc::compute(&f[from..end]) {
        let mut t = [0u8; 4];
        icrc::write(c, &mut t);
        f[end..].copy_from_slice(&t);
    }
}

/// Rebuild `frame` with `edits` applied to its headers (a valid ICRC).
pub fn forge(frame: &[u8], edits: &[Edit], extend: u8) -> Option<Vec<u8>> {
    let wire = WireConfig::default();
    let p = parse_frame(frame, &wire).ok()?;
    let mut r = p.to_repr()?;
    let mut payload = p.payload.to_vec();
    payload.resize(payload.len() + usize::from(extend) * 8, 0x66);
    for e in edits {
        match (e, &mut r.body) {
            (Edit::PsnDelta(d), _) => {
                r.bth.psn = r.bth.psn.wrapping_add_signed(i32::from(*d)) & 0xff_ffff
            }
            (Edit::Psn(v), _) => r.bth.psn = v & 0xff_ffff,
            (Edit::DestQp(v), _) => r.bth.dest_qp = v & 0xff_ffff,
            (Edit::Opcode(v), _) => r.bth.opcode = Opcode::from_u8(*v),
            (Edit::Dscp(v), _) => r.dscp = Dscp(v & 0x3f),
            (Edit::SrcAddr(v), _) => r.src_addr = nic(usize::from(v % 4)),
            (Edit::DstAddr(v), _) => r.dst_addr = nic(usize::from(v % 4)),
            (Edit::Flags { rtx, ack_req }, _) => {
                r.bth.rtx = *rtx;
                r.bth.ack_req = *ack_req;
            }
            (Edit::FrameEntropy(v), _) => r.entropy = *v,
            (Edit::PayloadLen(n), _) => payload.resize(usize::from(*n) % 2048, 0x77),
            (Edit::RkeyXor(x), Body::Write(w)) => w.reth.rkey ^= x,
            (Edit::VaDelta(d), Body::Write(w)) => {
                w.reth.va = w.reth.va.wrapping_add_signed(i64::from(*d))
            }
            (Edit::Va(v), Body::Write(w)) => w.reth.va = *v,
            (Edit::DmaLen(v), Body::Write(w)) => w.reth.dma_len = *v,
            (Edit::Rqmsn(v), Body::Write(w)) => w.meth.rqmsn = *v,
            (Edit::Imm(v), Body::Write(w)) => {
                w.immdt = v.map(|imm| mrc_transport::wire::ImmDtRepr { imm });
            }
            (Edit::CackDelta(d), Body::Sack { seth, .. }) => {
                seth.cack_psn = seth.cack_psn.wrapping_add_signed(i32::from(*d)) & 0xff_ffff;
            }
            (Edit::Bitmap(b), Body::Sack { seth, .. }) => seth.sack_bitmap = *b,
            (Edit::SackOffset(o), Body::Sack { seth, .. }) => seth.sack_offset = *o,
            (Edit::SackEntropy(v), Body::Sack { seth, .. }) => seth.entropy = *v,
            (Edit::Verdict(v), Body::Sack { seth, .. }) => {
                seth.verdict = MultipathVerdict::from_bits(*v)
            }
            (Edit::NackReason(v), Body::Sack { seth, .. }) => {
                // Turn the SACK into a NACK about the same PSNs.
                r.bth.opcode = Opcode::Nack;
                let psn = seth.cack_psn;
                let entropy = seth.entropy;
                r.body = Body::Nack(NethRepr {
                    hdr_type: 0,
                    next: 0,
                    reason: NackReason::from_u8(*v),
                    vendor_info: 0,
                    entropy,
                    spdcid: 0,
                    dpdcid: 0,
                    nack_psn: psn,
                    cc_type: 0,
                    cc_flags: 0,
                    tx_timestamp: 0,
                });
            }
            (Edit::NackReason(v), Body::Nack(n)) => n.reason = NackReason::from_u8(*v),
            (Edit::NackPsnDelta(d), Body::Nack(n)) => {
                n.nack_psn = n.nack_psn.wrapping_add_signed(i32::from(*d)) & 0xff_ffff;
            }
            (Edit::AckMsn(v), Body::Ack(a)) => a.msn = v & 0xff_ffff,
            _ => {}
        }
    }
    // An opcode that does not announce the body is the caller's error (an assert in
    // `emit`); as bytes on the wire it is what `Mutate` sends.
    if !r.body.matches(r.bth.opcode) {
        return None;
    }
    if !matches!(r.body, Body::Write(_)) {
        payload.clear();
    }
    let mut buf = vec![0u8; 16 * 1024];
    let n = r.build(&mut buf, &payload, &wire).ok()?;
    buf.truncate(n);
    Some(buf)
}
