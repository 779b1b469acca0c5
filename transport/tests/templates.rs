//! Header templates (issue #13): a QP's frames are built from per-plane templates of their
//! fixed headers, so a change of a port's next hop (`Endpoint::set_next_hop_mac`) in the middle
//! of a transfer must reach every frame sent after it, data and SACKs alike, in both path
//! modes.

mod common;

use common::{ConnOpts, NetBuilder, connect, finish_write, start_write};
use mrc_srv6::wire::EthernetAddress;
use mrc_transport::Duration;

/// The next hop host `h`'s port `p` is moved to.
fn moved(h: usize, p: usize) -> EthernetAddress {
    EthernetAddress([2, 0xaa, 0, 0, h as u8, p as u8])
}

/// Every frame of `frames` sent by host `h` went to `next_hop(port)`, its port told by its
/// source MAC.
fn check(
    net: &common::Net,
    h: usize,
    frames: &[Vec<u8>],
    next_hop: impl Fn(usize) -> EthernetAddress,
    when: &str,
) {
    let ports = &net.ep_ref(h).config().ports;
    for f in frames {
        let port = ports
            .iter()
            .position(|p| p.mac.0 == f[6..12])
            .expect("a source MAC of the host's ports");
        assert_eq!(
            &f[0..6],
            &next_hop(port).0,
            "host {h} {when} the change, port {port}"
        );
    }
}

#[test]
fn frames_sent_after_a_next_hop_change_carry_the_new_mac() {
    for srv6 in [true, false] {
        let mut net = NetBuilder {
            srv6,
            ..NetBuilder::default()
        }
        .build();
        let c = connect(&mut net, 0, 1, ConnOpts::default());
        let old: Vec<Vec<EthernetAddress>> = (0..2)
            .map(|h| {
                let ports = &net.ep_ref(h).config().ports;
                ports.iter().map(|p| p.next_hop_mac).collect()
            })
            .collect();
        net.capture(0, true);
        net.capture(1, true);
        let job = start_write(&mut net, &c, 4 << 20, Some(9), 3);
        net.run_for(Duration::from_micros(30));
        for (h, old) in old.iter().enumerate() {
            let before = net.captured(h);
            assert!(before.len() > 16, "host {h} sent {} frames", before.len());
            check(&net, h, &before, |p| old[p], "before");
            for p in 0..net.planes {
                assert!(net.ep(h).set_next_hop_mac(p as u8, moved(h, p)));
            }
            net.capture(h, true);
        }
        finish_write(&mut net, &c, job);
        for h in 0..2 {
            let after = net.captured(h);
            assert!(after.len() > 16, "host {h} sent {} frames", after.len());
            check(&net, h, &after, |p| moved(h, p), "after");
            for p in 0..net.planes {
                let mac = net.ep_ref(h).config().ports[p].mac.0;
                assert!(
                    after.iter().any(|f| f[6..12] == mac),
                    "srv6 {srv6}: host {h} sent on port {p} after the change"
                );
            }
        }
    }
}
