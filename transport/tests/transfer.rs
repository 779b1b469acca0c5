//! Clean transfers between two endpoints: every byte lands where the RETH says, completions
//! come in order with the right lengths and immediates.

mod common;

use common::{Conn, ConnOpts, NetBuilder, connect, drain_cq, pattern, region};
use mrc_transport::Duration;
use mrc_transport::verbs::{RecvWr, SendOpcode, SendWr, Sge, WcOpcode, WcStatus};

const SRC: u64 = 0x1_0000_0000;
const DST: u64 = 0x7_0000_0000;

/// Write `len` bytes from a to b (with an immediate when `imm`), run to completion, check
/// every byte of b's region and both completions.
fn write_and_check(net: &mut common::Net, c: &Conn, len: usize, imm: Option<u32>, salt: u64) {
    let src = region(net, c.a, c.pd_a, SRC, len.max(1), pattern(salt));
    let dst = region(net, c.b, c.pd_b, DST, len.max(1) + 64, |_| 0xee);
    if imm.is_some() {
        net.eps[c.b]
            .post_recv(c.qp_b, &RecvWr { wr_id: 77 })
            .unwrap();
    }
    let sge = [Sge {
        addr: SRC,
        length: len as u32,
        lkey: src.lkey,
    }];
    net.eps[c.a]
        .post_send(
            c.qp_a,
            &SendWr {
                wr_id: 42,
                opcode: imm.map_or(SendOpcode::Write, SendOpcode::WriteWithImm),
                sg_list: &sge,
                remote_addr: DST + 32,
                rkey: dst.rkey,
                signaled: true,
            },
        )
        .unwrap();
    let mut send_wcs = Vec::new();
    let mut recv_wcs = Vec::new();
    net.run_until(Duration::from_secs(2), |n| {
        send_wcs.extend(drain_cq(n, c.a, c.cq_a));
        recv_wcs.extend(drain_cq(n, c.b, c.cq_b));
        !send_wcs.is_empty() && (imm.is_none() || !recv_wcs.is_empty())
    });
    assert_eq!(send_wcs.len(), 1);
    assert_eq!(send_wcs[0].wr_id, 42);
    assert_eq!(send_wcs[0].status, WcStatus::Success);
    assert_eq!(send_wcs[0].opcode, WcOpcode::RdmaWrite);
    assert_eq!(send_wcs[0].byte_len, len as u32);
    if let Some(v) = imm {
        assert_eq!(recv_wcs.len(), 1);
        assert_eq!(recv_wcs[0].wr_id, 77);
        assert_eq!(recv_wcs[0].opcode, WcOpcode::RecvRdmaWithImm);
        assert_eq!(recv_wcs[0].imm_data, Some(v));
        assert_eq!(recv_wcs[0].byte_len, len as u32);
    } else {
        assert!(recv_wcs.is_empty());
    }
    let got = net.eps[c.b].mr_slice(dst.lkey).unwrap();
    let want = pattern(salt);
    assert!(
        got[..32].iter().all(|&b| b == 0xee),
        "bytes before the target untouched"
    );
    for (i, &b) in got[32..32 + len].iter().enumerate() {
        assert_eq!(b, want(i), "byte {i} of {len}");
    }
    assert!(
        got[32 + len..].iter().all(|&b| b == 0xee),
        "bytes after the target untouched"
    );
    net.eps[c.a].dereg_mr(src.lkey).unwrap();
    net.eps[c.b].dereg_mr(dst.lkey).unwrap();
}

#[test]
fn single_path_writes_of_every_shape_land_byte_for_byte() {
    let mut net = NetBuilder {
        planes: 1,
        paths_per_plane: 1,
        ..NetBuilder::default()
    }
    .build();
    let c = connect(&mut net, 0, 1, ConnOpts::default());
    for (i, len) in [1usize, 0, 4095, 4096, 4097, 3 * 4096, 1 << 20]
        .into_iter()
        .enumerate()
    {
        write_and_check(&mut net, &c, len, None, i as u64);
        write_and_check(&mut net, &c, len, Some(0xabc0 + i as u32), 100 + i as u64);
    }
    let s = net.eps[0].qp_stats(c.qp_a).unwrap();
    assert_eq!(
        s.retransmits.total(),
        0,
        "a clean path needs no retransmission"
    );
    assert_eq!(s.messages_completed, 14);
    let r = net.eps[1].qp_stats(c.qp_b).unwrap();
    assert_eq!(r.imm_delivered, 7);
    assert_eq!(r.duplicates, 0);
    assert_eq!(net.eps[1].stats().drops.total(), 0);
}
