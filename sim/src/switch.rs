//! What a switch does with a frame: read the Ethernet and outer IPv6 headers only, then
//! either uSID shift-and-lookup on the plan's static table (brief §5.1, RFC 9800 §4.1) or, in
//! ECMP mode, a hash of addresses, flow label and UDP source port over the uplinks (brief §8).

use mrc_srv6::plan::{Forward, Plan, SwitchId, Tier};
use mrc_srv6::wire::ipv6::next_header;
use mrc_srv6::wire::{ETHERNET_HEADER_LEN, IPV6_HEADER_LEN, Ipv6Packet};

use crate::config::Routing;

/// Where a switch sends a frame, having rewritten its destination address when it shifted.
/// `None`: no route, the frame is dropped.
pub fn forward(plan: &Plan, switch: SwitchId, routing: Routing, frame: &mut [u8]) -> Option<u16> {
    let ip_bytes = frame.get_mut(ETHERNET_HEADER_LEN..)?;
    match routing {
        Routing::Srv6 => {
            let mut ip = Ipv6Packet::new_checked(ip_bytes).ok()?;
            match plan.lookup(switch, ip.dst_addr()) {
                Forward::Out { port, da } => {
                    ip.set_dst_addr(da);
                    Some(port)
                }
                Forward::Exhausted { .. } | Forward::Drop(_) => None,
            }
        }
        Routing::Ecmp => {
            let ip = Ipv6Packet::new_checked(&*ip_bytes).ok()?;
            let dst = plan.host_of_nic(ip.dst_addr())?;
            let rack = plan.rack_of(dst);
            match switch.tier {
                Tier::T0 if rack == switch.index => Some(plan.downlink_of(dst)),
                Tier::T0 => {
                    let sport = if ip.next_header() == next_header::UDP {
                        ip_bytes
                            .get(IPV6_HEADER_LEN..IPV6_HEADER_LEN + 2)
                            .map_or(0, |b| u16::from_be_bytes([b[0], b[1]]))
                    } else {
                        0
                    };
                    let key = EcmpKey {
                        src: u128::from(ip.src_addr()),
                        dst: u128::from(ip.dst_addr()),
                        flow_label: ip.flow_label(),
                        sport,
                    };
                    let h = key.hash(switch);
                    Some(plan.hosts_per_t0() + (h % u64::from(plan.t1_per_plane())) as u16)
                }
                Tier::T1 => Some(rack),
            }
        }
    }
}

/// The fields an ECMP switch hashes: addresses, flow label and UDP source port (where the EV
/// lives, brief §2.4).
#[derive(Debug, Clone, Copy)]
struct EcmpKey {
    src: u128,
    dst: u128,
    flow_label: u32,
    sport: u16,
}

impl EcmpKey {
    /// Hash salted per switch, as real switches seed their hash (no polarisation).
    fn hash(&self, switch: SwitchId) -> u64 {
        let mut h =
            0xcbf2_9ce4_8422_2325u64 ^ (u64::from(switch.plane) << 32 | u64::from(switch.index));
        for x in [
            self.src as u64,
            (self.src >> 64) as u64,
            self.dst as u64,
            (self.dst >> 64) as u64,
            u64::from(self.flow_label) << 16 | u64::from(self.sport),
        ] {
            h = (h ^ x).wrapping_mul(0x0100_0000_01b3);
            h ^= h >> 29;
        }
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^ (h >> 33)
    }
}
