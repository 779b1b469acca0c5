use super::*;

const NIC: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 0x10);
const HOP: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 0xfe);
const OUR_MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0x01]);
const SWITCH_MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0xee, 0x01]);

fn ndp(next_hop: NextHop) -> Ndp {
    Ndp::new(NIC, &[(OUR_MAC, next_hop)], &NdpConfig::default())
}

/// A frame from the switch, as a Linux neighbour would send it.
fn from_switch(src: Ipv6Addr, dst: Ipv6Addr, hop_limit: u8, repr: NdiscRepr<'_>) -> Vec<u8> {
    let mut buf = vec![0; NDP_FRAME_LEN];
    let len = emit(&mut buf, SWITCH_MAC, OUR_MAC, src, dst, repr);
    buf.truncate(len);
    buf[14 + 7] = hop_limit;
    buf
}

fn solicit(target: Ipv6Addr, src: Ipv6Addr) -> Vec<u8> {
    from_switch(
        src,
        solicited_node(target),
        255,
        NdiscRepr::NeighborSolicit {
            target_addr: target,
            lladdr: (!src.is_unspecified()).then(|| SWITCH_MAC.into()),
        },
    )
}

fn advert(target: Ipv6Addr, mac: EthernetAddress, flags: NdiscNeighborFlags) -> Vec<u8> {
    from_switch(
        HOP,
        link_local(OUR_MAC),
        255,
        NdiscRepr::NeighborAdvert {
            flags,
            target_addr: target,
            lladdr: Some(mac.into()),
        },
    )
}

/// Everything `ndp` sends at `now` on every port.
fn sent(ndp: &mut Ndp, now: Instant) -> Vec<(u8, Vec<u8>)> {
    let mut out = Vec::new();
    let mut buf = [0_u8; 128];
    while let Some((port, len)) = ndp.poll_transmit(now, PortMask::ALL, &mut buf) {
        out.push((port, buf[..len].to_vec()));
    }
    out
}

/// Our frame, checked as a receiver would (hop limit, checksum), broken into its parts.
fn decode(frame: &[u8]) -> (EthernetAddress, Ipv6Repr, NdiscRepr<'_>) {
    assert!(is_icmpv6(frame));
    let (src, ip, repr) = parse(frame).expect("a valid NDP frame");
    assert_eq!(src, OUR_MAC);
    (
        EthernetFrame::new_checked(frame).unwrap().dst_addr(),
        ip,
        repr,
    )
}

#[test]
fn link_local_and_solicited_node_addresses() {
    assert_eq!(
        link_local(EthernetAddress([0x00, 0x1b, 0x21, 0x3c, 0x4d, 0x5e])),
        "fe80::21b:21ff:fe3c:4d5e".parse::<Ipv6Addr>().unwrap()
    );
    assert_eq!(
        solicited_node("2001:db8::1:800:200e:8c6c".parse().unwrap()),
        "ff02::1:ff0e:8c6c".parse::<Ipv6Addr>().unwrap()
    );
    assert_eq!(
        multicast_mac("ff02::1:ff0e:8c6c".parse().unwrap()),
        EthernetAddress([0x33, 0x33, 0xff, 0x0e, 0x8c, 0x6c])
    );
}

#[test]
fn a_solicitation_for_our_address_is_answered_with_our_mac() {
    let mut n = ndp(NextHop::Static(SWITCH_MAC));
    let switch_ll = link_local(SWITCH_MAC);
    n.handle_frame(0, &solicit(NIC, switch_ll));
    let out = sent(&mut n, Instant::ZERO);
    assert_eq!(out.len(), 1);
    let (port, frame) = &out[0];
    assert_eq!(*port, 0);
    let (dst_mac, ip, repr) = decode(frame);
    assert_eq!(
        dst_mac, SWITCH_MAC,
        "unicast to the solicitor's link-layer address"
    );
    assert_eq!(
        (ip.src_addr, ip.dst_addr, ip.hop_limit),
        (NIC, switch_ll, 255)
    );
    assert_eq!(
        repr,
        NdiscRepr::NeighborAdvert {
            flags: NdiscNeighborFlags::SOLICITED | NdiscNeighborFlags::OVERRIDE,
            target_addr: NIC,
            lladdr: Some(OUR_MAC.into()),
        }
    );
    // The link-local address of the port is answered as well; other targets are not.
    n.handle_frame(0, &solicit(link_local(OUR_MAC), switch_ll));
    n.handle_frame(0, &solicit(HOP, switch_ll));
    let out = sent(&mut n, Instant::ZERO);
    assert_eq!(out.len(), 1);
    assert!(matches!(
        decode(&out[0].1).2,
        NdiscRepr::NeighborAdvert { target_addr, .. } if target_addr == link_local(OUR_MAC)
    ));
    let s = n.stats();
    assert_eq!(
        (s.solicitations_received, s.advertisements_sent, s.ignored),
        (2, 2, 1)
    );
}

#[test]
fn duplicate_address_detection_is_answered_to_all_nodes() {
    let mut n = ndp(NextHop::Static(SWITCH_MAC));
    n.handle_frame(0, &solicit(NIC, Ipv6Addr::UNSPECIFIED));
    let out = sent(&mut n, Instant::ZERO);
    let (dst_mac, ip, repr) = decode(&out[0].1);
    assert_eq!(dst_mac, EthernetAddress([0x33, 0x33, 0, 0, 0, 1]));
    assert_eq!(ip.dst_addr, smoltcp::wire::IPV6_LINK_LOCAL_ALL_NODES);
    assert!(matches!(repr, NdiscRepr::NeighborAdvert { flags, .. }
        if flags == NdiscNeighborFlags::OVERRIDE));
}

#[test]
fn frames_failing_rfc_4861_checks_are_dropped() {
    let mut n = ndp(NextHop::Static(SWITCH_MAC));
    let ll = link_local(SWITCH_MAC);
    let mut routed = solicit(NIC, ll);
    routed[14 + 7] = 64; // crossed a router: hop limit below 255
    let mut corrupt = solicit(NIC, ll);
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0xff; // bad checksum
    let multicast_target = solicit("ff02::1".parse().unwrap(), ll);
    let mut truncated = solicit(NIC, ll);
    truncated.truncate(60);
    for frame in [&routed, &corrupt, &multicast_target, &truncated] {
        n.handle_frame(0, frame);
    }
    // Other ICMPv6 messages (an MLD report here) are left alone.
    let mut mld = solicit(NIC, ll);
    mld[54] = 143;
    n.handle_frame(0, &mld);
    assert!(sent(&mut n, Instant::ZERO).is_empty());
    assert_eq!(n.stats().invalid, 4);
    assert_eq!(n.stats().ignored, 1);
    assert_eq!(n.stats().solicitations_received, 0);
}

#[test]
fn the_next_hop_is_solicited_until_it_answers() {
    let mut n = ndp(NextHop::Resolve(HOP));
    assert_eq!(n.neighbour(0), None);
    assert_eq!(n.poll_resolved(), None);
    let t0 = Instant::ZERO;
    let out = sent(&mut n, t0);
    assert_eq!(out.len(), 1, "one solicitation per retransmit interval");
    let (dst_mac, ip, repr) = decode(&out[0].1);
    assert_eq!(dst_mac, EthernetAddress([0x33, 0x33, 0xff, 0, 0, 0xfe]));
    assert_eq!(ip.src_addr, link_local(OUR_MAC));
    assert_eq!(ip.dst_addr, solicited_node(HOP));
    assert_eq!(
        repr,
        NdiscRepr::NeighborSolicit {
            target_addr: HOP,
            lladdr: Some(OUR_MAC.into())
        }
    );
    let again = t0 + NdpConfig::default().retransmit;
    assert_eq!(n.poll_timeout(), Some(again));
    assert!(sent(&mut n, Instant(again.0 - 1)).is_empty());
    assert_eq!(sent(&mut n, again).len(), 1);

    // An advertisement for another address teaches nothing; the hop's own does.
    n.handle_frame(0, &advert(NIC, SWITCH_MAC, NdiscNeighborFlags::SOLICITED));
    assert_eq!(n.neighbour(0), None);
    n.handle_frame(0, &advert(HOP, SWITCH_MAC, NdiscNeighborFlags::SOLICITED));
    assert_eq!(n.neighbour(0), Some(SWITCH_MAC));
    assert_eq!(n.poll_resolved(), Some((0, SWITCH_MAC)));
    assert_eq!(n.poll_resolved(), None);
    assert_eq!(n.poll_timeout(), None);
    assert!(
        sent(&mut n, Instant(u64::MAX / 2)).is_empty(),
        "resolved: no more solicitations"
    );

    // A new MAC replaces the old one only with the Override flag.
    let moved = EthernetAddress([0x02, 0, 0, 0, 0xee, 0x02]);
    n.handle_frame(0, &advert(HOP, moved, NdiscNeighborFlags::SOLICITED));
    assert_eq!(n.neighbour(0), Some(SWITCH_MAC));
    n.handle_frame(0, &advert(HOP, moved, NdiscNeighborFlags::OVERRIDE));
    assert_eq!(n.neighbour(0), Some(moved));
    assert_eq!(n.poll_resolved(), Some((0, moved)));
}

#[test]
fn the_next_hop_is_learnt_from_its_own_solicitation() {
    let mut n = ndp(NextHop::Resolve(HOP));
    n.handle_frame(0, &solicit(NIC, HOP));
    assert_eq!(n.poll_resolved(), Some((0, SWITCH_MAC)));
    let out = sent(&mut n, Instant::ZERO);
    assert_eq!(out.len(), 1, "the answer, and no solicitation");
    assert!(matches!(
        decode(&out[0].1).2,
        NdiscRepr::NeighborAdvert { .. }
    ));
}

#[test]
fn static_entries_and_ready_ports() {
    let ports = [
        (OUR_MAC, NextHop::Static(SWITCH_MAC)),
        (
            EthernetAddress([0x02, 0, 0, 0, 0, 0x02]),
            NextHop::Resolve(HOP),
        ),
    ];
    let mut n = Ndp::new(NIC, &ports, &NdpConfig::default());
    assert_eq!(n.poll_resolved(), Some((0, SWITCH_MAC)));
    let mut buf = [0_u8; 128];
    assert_eq!(
        n.poll_transmit(Instant::ZERO, PortMask::only(0), &mut buf),
        None
    );
    assert_eq!(
        n.poll_transmit(Instant::ZERO, PortMask::ALL, &mut buf)
            .map(|(p, _)| p),
        Some(1)
    );
    assert_eq!(
        n.poll_transmit(Instant::ZERO, PortMask::ALL, &mut [0; 20]),
        None
    );
}
