use super::*;

fn addr(i: u16) -> Ipv6Addr {
    Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, i)
}

/// Ethernet to `dst_mac` | IPv6 to `dst` (next header UDP) | `tag`.
fn frame(dst_mac: EthernetAddress, dst: Ipv6Addr, tag: u8) -> Vec<u8> {
    let mut f = vec![0_u8; 14 + 40 + 1];
    f[..6].copy_from_slice(&dst_mac.0);
    f[12..14].copy_from_slice(&[0x86, 0xdd]);
    f[14] = 0x60;
    f[14 + 6] = 17;
    f[14 + 24..14 + 40].copy_from_slice(&dst.octets());
    f[54] = tag;
    f
}

fn send(io: &mut MemIo, port: u8, bytes: &[u8]) {
    let buf = io.tx_buffer().expect("a buffer");
    buf[..bytes.len()].copy_from_slice(bytes);
    io.tx_commit(port, bytes.len());
}

fn received(io: &mut MemIo, port: u8) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    while io.rx_burst(port, |f| out.push(f.to_vec())) > 0 {}
    out
}

#[test]
fn frames_are_routed_by_address_mac_or_flooded() {
    let mut fab = MemFabric::new(2);
    for i in 0..3 {
        fab.add_host(addr(i));
    }
    let (mut io, control) = fab.build();
    // Routed on the IPv6 destination through the plane's router MAC.
    let f = frame(router_mac(1), addr(2), 7);
    send(&mut io[0], 1, &f);
    assert_eq!(received(&mut io[2], 1), vec![f.clone()]);
    assert!(received(&mut io[1], 1).is_empty() && received(&mut io[2], 0).is_empty());
    // Switched on a host's MAC, whatever the IPv6 destination.
    let g = frame(host_mac(1, 0), addr(2), 8);
    send(&mut io[0], 0, &g);
    assert_eq!(received(&mut io[1], 0), vec![g]);
    // Multicast reaches every other host.
    let m = frame(EthernetAddress([0x33, 0x33, 0xff, 0, 0, 1]), addr(9), 9);
    send(&mut io[1], 0, &m);
    assert_eq!(received(&mut io[0], 0), vec![m.clone()]);
    assert_eq!(received(&mut io[2], 0), vec![m]);
    assert!(received(&mut io[1], 0).is_empty(), "not back to the sender");
    // No such host: dropped and counted.
    send(&mut io[0], 0, &frame(router_mac(0), addr(99), 1));
    let s = control.port_stats(0, 0);
    assert_eq!((s.sent, s.delivered, s.dropped), (2, 1, 1));
}

#[test]
fn srv6_frames_go_to_the_inner_destination() {
    let (mut a, mut b, _) = MemFabric::pair(1, addr(1), addr(2));
    // Outer IPv6 (next header 43: an 8-byte-unit SRH of 24 bytes) | SRH | inner IPv6.
    let mut f = vec![0_u8; 14 + 40 + 24 + 40];
    f[12..14].copy_from_slice(&[0x86, 0xdd]);
    f[14 + 6] = 43;
    f[14 + 24..14 + 40].copy_from_slice(&Ipv6Addr::new(0xfcbb, 0xbb00, 1, 2, 0, 0, 0, 0).octets());
    f[54] = 41;
    f[55] = 2;
    f[78 + 24..78 + 40].copy_from_slice(&addr(2).octets());
    send(&mut a, 0, &f);
    assert_eq!(received(&mut b, 0), vec![f]);
}

#[test]
fn a_link_down_loses_frames_both_ways_and_shows_in_the_port_state() {
    let (mut a, mut b, control) = MemFabric::pair(2, addr(1), addr(2));
    control.set_link(1, 0, false);
    assert!(!b.link_up(0) && b.link_up(1) && a.link_up(0));
    assert_eq!(b.tx_ready(), PortMask(0b10));
    send(&mut a, 0, &frame(router_mac(0), addr(2), 1));
    send(&mut a, 1, &frame(router_mac(1), addr(2), 2));
    assert!(received(&mut b, 0).is_empty());
    assert_eq!(received(&mut b, 1).len(), 1);
    control.set_link(1, 0, true);
    send(&mut a, 0, &frame(router_mac(0), addr(2), 3));
    assert_eq!(received(&mut b, 0).len(), 1);
}

#[test]
fn drop_every_nth_frame_and_buffers_are_recycled() {
    let mut fab = MemFabric::new(1).ring_depth(8).frame_room(128);
    fab.add_host(addr(1));
    fab.add_host(addr(2));
    let (mut io, control) = fab.build();
    control.drop_every(0, 0, 3);
    let (mut got, mut sent) = (0, 0);
    // Far more frames than buffers exist: only recycling keeps this going.
    for i in 0..1000_u32 {
        send(&mut io[0], 0, &frame(router_mac(0), addr(2), i as u8));
        sent += 1;
        got += received(&mut io[1], 0).len();
    }
    assert_eq!(got, sent - sent / 3);
    assert_eq!(control.port_stats(0, 0).dropped, sent as u64 / 3);
    assert_eq!(io[0].stats().tx_no_buffer, 0);
}

#[test]
fn a_full_ring_drops_and_counts() {
    let mut fab = MemFabric::new(1).ring_depth(4);
    fab.add_host(addr(1));
    fab.add_host(addr(2));
    let (mut io, control) = fab.build();
    for i in 0..6 {
        send(&mut io[0], 0, &frame(router_mac(0), addr(2), i));
    }
    assert_eq!(control.port_stats(1, 0).queued, 4);
    assert_eq!(control.port_stats(0, 0).dropped, 2);
    let tags: Vec<u8> = received(&mut io[1], 0).iter().map(|f| f[54]).collect();
    assert_eq!(tags, [0, 1, 2, 3], "in order, the overflow lost");
}
