//! Clean transfers between two endpoints: every byte lands where the RETH says, completions
//! come in order with the right lengths and immediates.

mod common;

use common::{ConnOpts, NetBuilder, connect, write_and_check};

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
    let s = net.ep(0).qp_stats(c.qp_a).unwrap();
    assert_eq!(
        s.retransmits.total(),
        0,
        "a clean path needs no retransmission"
    );
    assert_eq!(s.messages_completed, 14);
    let r = net.ep(1).qp_stats(c.qp_b).unwrap();
    assert_eq!(r.imm_delivered, 7);
    assert_eq!(r.duplicates, 0);
    assert_eq!(net.ep(1).stats().drops.total(), 0);
}
