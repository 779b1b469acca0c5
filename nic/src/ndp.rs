//! IPv6 neighbour discovery (RFC 4861) for the NIC's ports, sans-IO like the engine: frames in
//! with [`Ndp::handle_frame`], frames out with [`Ndp::poll_transmit`], resolved next hops out
//! with [`Ndp::poll_resolved`]. Wire types are smoltcp's (`NdiscRepr` in `Icmpv6Repr`).
//!
//! What it does, per port (= plane):
//! - answers Neighbor Solicitations for the NIC's addresses and the port's link-local address
//!   (`fe80::` + the modified EUI-64 of its MAC, RFC 4291 §2.5.1), so a Linux switch reaches
//!   the host without static entries (RFC 4861 §7.2.4);
//! - resolves the port's next hop (the T0 switch's address) by soliciting it until a Neighbor
//!   Advertisement names its MAC (RFC 4861 §7.2.2), or takes a static MAC instead;
//! - learns the next hop's MAC from its own solicitations too (RFC 4861 §7.2.3).
//!
//! A resolved next hop stays resolved; a later advertisement with the Override flag (or a
//! solicitation carrying a new source link-layer address) updates it.

use std::collections::VecDeque;
use std::net::Ipv6Addr;

use mrc_srv6::wire::{
    EthernetAddress, EthernetFrame, EthernetProtocol, Icmpv6Packet, Icmpv6Repr, NdiscNeighborFlags,
    NdiscRepr, RawHardwareAddress,
};
use mrc_transport::{Duration, Instant, PortMask};
use smoltcp::phy::ChecksumCapabilities;
use smoltcp::wire::{IpProtocol, Ipv6Packet, Ipv6Repr};

/// Ethernet + IPv6 + NS/NA (24 bytes) + a link-layer address option (8 bytes).
pub const NDP_FRAME_LEN: usize = 14 + 40 + 32;
/// ICMPv6 types of the two messages handled here (RFC 4861 §4.3, §4.4).
const NEIGHBOR_SOLICIT: u8 = 135;
const NEIGHBOR_ADVERT: u8 = 136;
/// Replies waiting to leave, at most (more solicitations are counted and ignored).
const MAX_PENDING: usize = 64;

/// How a port learns the MAC of its next hop (the switch it is cabled to).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NextHop {
    /// A static entry: no discovery.
    Static(EthernetAddress),
    /// Resolve this IPv6 address (the switch's) with neighbour solicitations.
    Resolve(Ipv6Addr),
}

/// Neighbour discovery settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NdpConfig {
    /// Addresses answered on every port besides the NIC address and the port's link-local one
    /// (e.g. the host's uSID address in a plan with global host uSIDs).
    pub extra_addrs: Vec<Ipv6Addr>,
    /// Time between solicitations of a next hop that has not answered (RFC 4861 RetransTimer;
    /// Linux's default is 1 s, a NIC waiting for its fabric wants it sooner).
    pub retransmit: Duration,
}

impl Default for NdpConfig {
    fn default() -> Self {
        Self {
            extra_addrs: Vec::new(),
            retransmit: Duration::from_millis(200),
        }
    }
}

/// Counters of neighbour discovery.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NdpStats {
    /// Solicitations for one of our addresses.
    pub solicitations_received: u64,
    /// Advertisements sent in answer.
    pub advertisements_sent: u64,
    /// Solicitations sent to resolve next hops.
    pub solicitations_sent: u64,
    /// Advertisements received (for anything).
    pub advertisements_received: u64,
    /// ICMPv6 frames that failed RFC 4861's validity checks or did not parse.
    pub invalid: u64,
    /// Valid frames that were not for us (other targets, other ICMPv6 messages).
    pub ignored: u64,
    /// Answers dropped because too many were waiting.
    pub overflow: u64,
}

/// The link-local address of a port: `fe80::/64` + the modified EUI-64 of its MAC.
pub fn link_local(mac: EthernetAddress) -> Ipv6Addr {
    let m = mac.0;
    Ipv6Addr::from([
        0xfe,
        0x80,
        0,
        0,
        0,
        0,
        0,
        0,
        m[0] ^ 0x02,
        m[1],
        m[2],
        0xff,
        0xfe,
        m[3],
        m[4],
        m[5],
    ])
}

/// The solicited-node multicast address of `target` (RFC 4291 §2.7.1).
pub fn solicited_node(target: Ipv6Addr) -> Ipv6Addr {
    let t = target.octets();
    Ipv6Addr::from([
        0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0xff, t[13], t[14], t[15],
    ])
}

/// The Ethernet address of an IPv6 multicast address (RFC 2464 §7).
fn multicast_mac(group: Ipv6Addr) -> EthernetAddress {
    let g = group.octets();
    EthernetAddress([0x33, 0x33, g[12], g[13], g[14], g[15]])
}

/// Whether `frame` is Ethernet | IPv6 | ICMPv6 (the only frames neighbour discovery wants);
/// two byte compares, for the receive path.
#[inline]
pub fn is_icmpv6(frame: &[u8]) -> bool {
    frame.get(12..14) == Some(&[0x86, 0xdd]) && frame.get(20) == Some(&58)
}

#[derive(Debug)]
struct PortNdp {
    mac: EthernetAddress,
    link_local: Ipv6Addr,
    next_hop: NextHop,
    resolved: Option<EthernetAddress>,
    next_solicit: Instant,
}

/// An advertisement to send.
#[derive(Debug, Clone, Copy)]
struct Answer {
    port: u8,
    dst_mac: EthernetAddress,
    dst: Ipv6Addr,
    target: Ipv6Addr,
    solicited: bool,
}

/// Neighbour discovery for every port of one NIC.
#[derive(Debug)]
pub struct Ndp {
    ports: Vec<PortNdp>,
    addrs: Vec<Ipv6Addr>,
    retransmit: Duration,
    answers: VecDeque<Answer>,
    resolved: VecDeque<(u8, EthernetAddress)>,
    stats: NdpStats,
}

impl Ndp {
    /// Neighbour discovery for ports with these MACs and next hops, answering for `nic_addr`.
    pub fn new(
        nic_addr: Ipv6Addr,
        ports: &[(EthernetAddress, NextHop)],
        config: &NdpConfig,
    ) -> Self {
        let mut addrs = vec![nic_addr];
        addrs.extend(&config.extra_addrs);
        let mut resolved = VecDeque::new();
        let ports = ports
            .iter()
            .enumerate()
            .map(|(i, &(mac, next_hop))| {
                let known = match next_hop {
                    NextHop::Static(m) => {
                        resolved.push_back((i as u8, m));
                        Some(m)
                    }
                    NextHop::Resolve(_) => None,
                };
                PortNdp {
                    mac,
                    link_local: link_local(mac),
                    next_hop,
                    resolved: known,
                    next_solicit: Instant::ZERO,
                }
            })
            .collect();
        Self {
            ports,
            addrs,
            retransmit: config.retransmit,
            answers: VecDeque::with_capacity(MAX_PENDING),
            resolved,
            stats: NdpStats::default(),
        }
    }

    /// The next hop's MAC on `port`, once known.
    pub fn neighbour(&self, port: u8) -> Option<EthernetAddress> {
        self.ports.get(usize::from(port))?.resolved
    }

    /// Counters.
    pub fn stats(&self) -> NdpStats {
        self.stats
    }

    /// A next hop whose MAC became known or changed: tell the engine.
    pub fn poll_resolved(&mut self) -> Option<(u8, EthernetAddress)> {
        self.resolved.pop_front()
    }

    /// An ICMPv6 frame arrived on `port` ([`is_icmpv6`]).
    pub fn handle_frame(&mut self, port: u8, frame: &[u8]) {
        let Some(p) = self.ports.get(usize::from(port)) else {
            return;
        };
        // ICMPv6 type, behind Ethernet and a fixed IPv6 header: other messages (MLD, router
        // discovery, echo) are not ours to judge.
        if !matches!(frame.get(54), Some(&(NEIGHBOR_SOLICIT | NEIGHBOR_ADVERT))) {
            self.stats.ignored += 1;
            return;
        }
        let Some((eth_src, ip, repr)) = parse(frame) else {
            self.stats.invalid += 1;
            return;
        };
        match repr {
            // RFC 4861 §7.1.1, §7.2.3.
            NdiscRepr::NeighborSolicit {
                target_addr,
                lladdr,
            } => {
                let unspecified = ip.src_addr.is_unspecified();
                if target_addr.is_multicast()
                    || (unspecified && (lladdr.is_some() || !is_solicited_node(ip.dst_addr)))
                {
                    self.stats.invalid += 1;
                    return;
                }
                let source_mac = lladdr.and_then(mac_of);
                if let (NextHop::Resolve(hop), Some(mac)) = (p.next_hop, source_mac)
                    && hop == ip.src_addr
                {
                    self.learn(port, mac);
                }
                let p = &self.ports[usize::from(port)];
                if !(target_addr == p.link_local || self.addrs.contains(&target_addr)) {
                    self.stats.ignored += 1;
                    return;
                }
                self.stats.solicitations_received += 1;
                let answer = if unspecified {
                    // Duplicate address detection: defend the address to all nodes.
                    Answer {
                        port,
                        dst_mac: multicast_mac(smoltcp::wire::IPV6_LINK_LOCAL_ALL_NODES),
                        dst: smoltcp::wire::IPV6_LINK_LOCAL_ALL_NODES,
                        target: target_addr,
                        solicited: false,
                    }
                } else {
                    Answer {
                        port,
                        dst_mac: source_mac.unwrap_or(eth_src),
                        dst: ip.src_addr,
                        target: target_addr,
                        solicited: true,
                    }
                };
                if self.answers.len() >= MAX_PENDING {
                    self.stats.overflow += 1;
                } else {
                    self.answers.push_back(answer);
                }
            }
            // RFC 4861 §7.1.2, §7.2.5.
            NdiscRepr::NeighborAdvert {
                flags,
                target_addr,
                lladdr,
            } => {
                if target_addr.is_multicast()
                    || (ip.dst_addr.is_multicast() && flags.contains(NdiscNeighborFlags::SOLICITED))
                {
                    self.stats.invalid += 1;
                    return;
                }
                self.stats.advertisements_received += 1;
                let override_ = flags.contains(NdiscNeighborFlags::OVERRIDE);
                match p.next_hop {
                    NextHop::Resolve(hop) if hop == target_addr => {
                        let mac = lladdr.and_then(mac_of).unwrap_or(eth_src);
                        if p.resolved.is_none() || override_ {
                            self.learn(port, mac);
                        }
                    }
                    _ => self.stats.ignored += 1,
                }
            }
            _ => self.stats.ignored += 1,
        }
    }

    fn learn(&mut self, port: u8, mac: EthernetAddress) {
        let p = &mut self.ports[usize::from(port)];
        if p.resolved != Some(mac) {
            p.resolved = Some(mac);
            self.resolved.push_back((port, mac));
        }
    }

    /// When [`poll_transmit`](Self::poll_transmit) next has a solicitation to send, if any next
    /// hop is unresolved.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.ports
            .iter()
            .filter(|p| p.resolved.is_none())
            .map(|p| p.next_solicit)
            .min()
    }

    /// Whether [`poll_transmit`](Self::poll_transmit) has something at `now` (on a port with
    /// room): the poll loop asks once per iteration before offering buffers.
    pub fn has_output(&self, now: Instant) -> bool {
        !self.answers.is_empty() || self.poll_timeout().is_some_and(|t| t <= now)
    }

    /// Writes the next frame to send into `buf` (at least [`NDP_FRAME_LEN`] bytes): answers
    /// first, then due solicitations, only on ports in `ready`. Returns `(port, len)`.
    pub fn poll_transmit(
        &mut self,
        now: Instant,
        ready: PortMask,
        buf: &mut [u8],
    ) -> Option<(u8, usize)> {
        if buf.len() < NDP_FRAME_LEN {
            return None;
        }
        if let Some(i) = self.answers.iter().position(|a| ready.contains(a.port)) {
            let a = self.answers.remove(i)?;
            let mac = self.ports[usize::from(a.port)].mac;
            let mut flags = NdiscNeighborFlags::OVERRIDE;
            if a.solicited {
                flags |= NdiscNeighborFlags::SOLICITED;
            }
            let repr = NdiscRepr::NeighborAdvert {
                flags,
                target_addr: a.target,
                lladdr: Some(RawHardwareAddress::from(mac)),
            };
            self.stats.advertisements_sent += 1;
            let len = emit(buf, mac, a.dst_mac, a.target, a.dst, repr);
            return Some((a.port, len));
        }
        let retransmit = self.retransmit;
        for (i, p) in self.ports.iter_mut().enumerate() {
            let NextHop::Resolve(hop) = p.next_hop else {
                continue;
            };
            if p.resolved.is_some() || now < p.next_solicit || !ready.contains(i as u8) {
                continue;
            }
            p.next_solicit = now + retransmit;
            let group = solicited_node(hop);
            let repr = NdiscRepr::NeighborSolicit {
                target_addr: hop,
                lladdr: Some(RawHardwareAddress::from(p.mac)),
            };
            self.stats.solicitations_sent += 1;
            let len = emit(buf, p.mac, multicast_mac(group), p.link_local, group, repr);
            return Some((i as u8, len));
        }
        None
    }
}

fn is_solicited_node(a: Ipv6Addr) -> bool {
    a.octets()[..13] == [0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0xff]
}

fn mac_of(raw: RawHardwareAddress) -> Option<EthernetAddress> {
    (raw.len() == 6).then(|| EthernetAddress::from_bytes(raw.as_bytes()))
}

/// Ethernet source, IPv6 header and the NDP message of a valid neighbour-discovery frame
/// (hop limit 255, good checksum, code 0: RFC 4861 §7.1). Public only for the `ndp` fuzz
/// target (`fuzz/`); not part of the crate's API.
#[doc(hidden)]
pub fn parse(frame: &[u8]) -> Option<(EthernetAddress, Ipv6Repr, NdiscRepr<'_>)> {
    let eth = EthernetFrame::new_checked(frame).ok()?;
    if eth.ethertype() != EthernetProtocol::Ipv6 {
        return None;
    }
    let eth_src = eth.src_addr();
    let ip_packet = Ipv6Packet::new_checked(&frame[14..]).ok()?;
    let ip = Ipv6Repr::parse(&ip_packet).ok()?;
    if ip.next_header != IpProtocol::Icmpv6 || ip.hop_limit != 255 {
        return None;
    }
    let payload = &frame[14 + 40..14 + 40 + ip.payload_len];
    let icmp = Icmpv6Packet::new_checked(payload).ok()?;
    match Icmpv6Repr::parse(
        &ip.src_addr,
        &ip.dst_addr,
        &icmp,
        &ChecksumCapabilities::default(),
    )
    .ok()?
    {
        Icmpv6Repr::Ndisc(repr) => Some((eth_src, ip, repr)),
        _ => None,
    }
}

/// Writes Ethernet | IPv6 (hop limit 255) | `repr` into `buf` (at least 54 bytes plus the
/// message's length); returns the frame length. Public only for the `ndp` fuzz target.
#[doc(hidden)]
pub fn emit(
    buf: &mut [u8],
    src_mac: EthernetAddress,
    dst_mac: EthernetAddress,
    src: Ipv6Addr,
    dst: Ipv6Addr,
    repr: NdiscRepr<'_>,
) -> usize {
    let icmp = Icmpv6Repr::Ndisc(repr);
    let icmp_len = icmp.buffer_len();
    let len = 14 + 40 + icmp_len;
    let mut eth = EthernetFrame::new_unchecked(&mut buf[..len]);
    eth.set_src_addr(src_mac);
    eth.set_dst_addr(dst_mac);
    eth.set_ethertype(EthernetProtocol::Ipv6);
    let ip = Ipv6Repr {
        src_addr: src,
        dst_addr: dst,
        next_header: IpProtocol::Icmpv6,
        payload_len: icmp_len,
        hop_limit: 255,
    };
    ip.emit(&mut Ipv6Packet::new_unchecked(&mut buf[14..54]));
    icmp.emit(
        &src,
        &dst,
        &mut Icmpv6Packet::new_unchecked(&mut buf[54..len]),
        &ChecksumCapabilities::default(),
    );
    len
}

#[cfg(test)]
mod tests;
