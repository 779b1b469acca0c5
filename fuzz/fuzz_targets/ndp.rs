#![no_main]
//! The NIC's neighbour discovery (`mrc_nic::ndp`, RFC 4861) fed a sequence of frames: raw
//! bytes (optionally with the ICMPv6 checksum made valid, so the fuzzer gets past it), and
//! Neighbor Solicitations / Advertisements built from fuzzed fields (targets, addresses, flags,
//! hop limit, link-layer option) with bytes flipped afterwards.
//!
//! Asserts: no panic; a frame the parser accepts is one `is_icmpv6` lets through, and
//! parse ∘ emit ∘ parse = parse; every frame handled on a port of the NIC moves one or two of
//! the counters that judge it (invalid, ignored, solicitations or advertisements received);
//! every frame `Ndp` sends parses as a valid NS or NA from the port's MAC, an advertisement
//! names one of the NIC's addresses; at most 64 answers wait (the rest are counted as
//! overflow); a next hop reported resolved is the one `neighbour` returns.
use std::net::Ipv6Addr;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use mrc_nic::ndp::{self, Ndp, NdpConfig, NextHop, link_local, solicited_node};
use mrc_srv6::wire::{
    EthernetAddress, Icmpv6Packet, NdiscNeighborFlags, NdiscRepr, RawHardwareAddress,
};
use mrc_transport::{Duration, Instant, PortMask};

const NIC: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1);
const EXTRA: Ipv6Addr = Ipv6Addr::new(0xfc00, 0, 1, 0, 0, 0, 0, 0);
const HOP: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0xaa);
const MACS: [EthernetAddress; 2] = [
    EthernetAddress([2, 0, 0, 0, 0, 1]),
    EthernetAddress([2, 0, 0, 0, 0, 2]),
];
const STATIC: EthernetAddress = EthernetAddress([2, 0, 0, 0xff, 0, 2]);

#[derive(Arbitrary, Debug)]
enum Addr {
    Nic,
    Extra,
    NextHop,
    LinkLocal(bool),
    SolicitedNode(Box<Addr>),
    AllNodes,
    Unspecified,
    Any([u8; 16]),
}

impl Addr {
    fn get(&self) -> Ipv6Addr {
        match self {
            Addr::Nic => NIC,
            Addr::Extra => EXTRA,
            Addr::NextHop => HOP,
            Addr::LinkLocal(p) => link_local(MACS[usize::from(*p)]),
            Addr::SolicitedNode(a) => solicited_node(a.get()),
            Addr::AllNodes => Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1),
            Addr::Unspecified => Ipv6Addr::UNSPECIFIED,
            Addr::Any(b) => Ipv6Addr::from(*b),
        }
    }
}

#[derive(Arbitrary, Debug)]
enum Input {
    /// Bytes as they come, the ICMPv6 checksum fixed or not.
    Raw { bytes: Vec<u8>, fix_checksum: bool },
    /// A solicitation or advertisement built from these fields, then bytes flipped.
    Built {
        advert: bool,
        target: Addr,
        src: Addr,
        dst: Addr,
        src_mac: [u8; 6],
        lladdr: Option<[u8; 6]>,
        flags: u8,
        hop_limit: Option<u8>,
        flips: Vec<(u8, u8)>,
        fix_checksum: bool,
    },
}

#[derive(Arbitrary, Debug)]
struct Step {
    port: u8,
    input: Input,
    /// Milliseconds passing before the frame (solicitations fall due).
    advance_ms: u8,
    /// Ports ready to send afterwards.
    ready: u8,
}

/// Makes the ICMPv6 checksum of an Ethernet | IPv6 | ICMPv6 frame right, if it is one.
fn fix_checksum(f: &mut [u8]) {
    if f.len() < 14 + 40 + 4 || f[12..14] != [0x86, 0xdd] {
        return;
    }
    let src = Ipv6Addr::from(<[u8; 16]>::try_from(&f[22..38]).unwrap());
    let dst = Ipv6Addr::from(<[u8; 16]>::try_from(&f[38..54]).unwrap());
    let payload_len = usize::from(u16::from_be_bytes([f[18], f[19]]));
    let end = (54 + payload_len).min(f.len());
    if end < 54 + 4 {
        return;
    }
    Icmpv6Packet::new_unchecked(&mut f[54..end]).fill_checksum(&src, &dst);
}

fn build(input: Input) -> Vec<u8> {
    match input {
        Input::Raw {
            mut bytes,
            fix_checksum: fix,
        } => {
            if fix {
                fix_checksum(&mut bytes);
            }
            bytes
        }
        Input::Built {
            advert,
            target,
            src,
            dst,
            src_mac,
            lladdr,
            flags,
            hop_limit,
            flips,
            fix_checksum: fix,
        } => {
            let lladdr = lladdr.map(|m| RawHardwareAddress::from(EthernetAddress(m)));
            let target_addr = target.get();
            let repr = if advert {
                NdiscRepr::NeighborAdvert {
                    flags: NdiscNeighborFlags::from_bits_truncate(flags),
                    target_addr,
                    lladdr,
                }
            } else {
                NdiscRepr::NeighborSolicit {
                    target_addr,
                    lladdr,
                }
            };
            let mut buf = vec![0u8; ndp::NDP_FRAME_LEN];
            let len = ndp::emit(
                &mut buf,
                EthernetAddress(src_mac),
                MACS[0],
                src.get(),
                dst.get(),
                repr,
            );
            buf.truncate(len);
            if let Some(h) = hop_limit {
                buf[14 + 7] = h;
            }
            for (at, x) in flips {
                let at = usize::from(at) % buf.len();
                buf[at] ^= x;
            }
            if fix {
                fix_checksum(&mut buf);
            }
            buf
        }
    }
}

/// The parser alone: an accepted frame is ICMPv6 and survives a re-emit unchanged.
fn check_parse(frame: &[u8]) {
    let Some((eth_src, ip, repr)) = ndp::parse(frame) else {
        return;
    };
    assert!(
        ndp::is_icmpv6(frame),
        "parsed a frame the receive path filters out"
    );
    assert_eq!(ip.hop_limit, 255);
    let icmp_len = mrc_srv6::wire::Icmpv6Repr::Ndisc(repr).buffer_len();
    let mut buf = vec![0u8; 14 + 40 + icmp_len];
    let len = ndp::emit(&mut buf, eth_src, MACS[0], ip.src_addr, ip.dst_addr, repr);
    assert_eq!(len, buf.len());
    let again = ndp::parse(&buf[..len]).expect("a re-emitted frame parses");
    // Options the parser skips (unknown ones, padding) are not re-emitted: only the length
    // may differ.
    let mut ip = ip;
    ip.payload_len = icmp_len;
    assert_eq!(again, (eth_src, ip, repr), "parse ∘ emit ∘ parse ≠ parse");
}

fn judged(s: &ndp::NdpStats) -> u64 {
    s.invalid + s.ignored + s.solicitations_received + s.advertisements_received
}

fuzz_target!(|steps: Vec<Step>| {
    let config = NdpConfig {
        extra_addrs: vec![EXTRA],
        retransmit: Duration::from_millis(200),
    };
    let ports = [
        (MACS[0], NextHop::Resolve(HOP)),
        (MACS[1], NextHop::Static(STATIC)),
    ];
    let mut n = Ndp::new(NIC, &ports, &config);
    let mut now = Instant::ZERO;
    let mut buf = vec![0u8; ndp::NDP_FRAME_LEN];
    // A static next hop is reported resolved at once.
    assert_eq!(n.poll_resolved(), Some((1, STATIC)));
    assert_eq!(n.poll_resolved(), None);
    let mut last = [None, Some(STATIC)];
    for step in steps.into_iter().take(64) {
        now += Duration::from_millis(u64::from(step.advance_ms));
        let frame = build(step.input);
        check_parse(&frame);
        let port = step.port % 3;
        let before = n.stats();
        n.handle_frame(port, &frame);
        let after = n.stats();
        let moved = judged(&after) - judged(&before);
        if usize::from(port) < ports.len() {
            assert!(
                (1..=2).contains(&moved),
                "a frame moved {moved} counters: {before:?} → {after:?}"
            );
        } else {
            assert_eq!(moved, 0, "a frame on no port was judged");
        }
        while let Some((p, mac)) = n.poll_resolved() {
            assert_eq!(p, 0, "only port 0 resolves");
            last[0] = Some(mac);
        }
        for (p, l) in last.iter().enumerate() {
            assert_eq!(n.neighbour(p as u8), *l);
        }
        let ready = PortMask(u32::from(step.ready & 3));
        let mut sent = 0;
        while let Some((p, len)) = n.poll_transmit(now, ready, &mut buf) {
            sent += 1;
            assert!(sent <= 64 + ports.len(), "sends without end");
            assert!(ready.contains(p), "sent on a port not ready");
            let (src, ip, repr) = ndp::parse(&buf[..len]).expect("what we send is valid");
            assert_eq!(src, MACS[usize::from(p)]);
            match repr {
                NdiscRepr::NeighborAdvert { target_addr, .. } => assert!(
                    [NIC, EXTRA, link_local(MACS[usize::from(p)])].contains(&target_addr),
                    "advertised an address not ours: {target_addr}"
                ),
                NdiscRepr::NeighborSolicit { target_addr, .. } => {
                    assert_eq!((p, target_addr), (0, HOP));
                    assert_eq!(ip.dst_addr, solicited_node(HOP));
                }
                other => panic!("sent {other:?}"),
            }
        }
    }
});
