//! QPs by peer NIC (issue #13, "control frames reach their QP by index, not a scan of all
//! QPs"): an endpoint operation from a peer (an EV probe, a port status update, brief §2.12,
//! §3.10) and a local port status reach the QPs connected to that peer without visiting every
//! QP slot.
//!
//! The index holds exactly the QPs whose [`Qp::peer_addr`](crate::qp::Qp::peer_addr) is set,
//! from RTR until RESET or destroy (a QP in ERROR keeps its peer), each peer's slots in
//! ascending order: the order in which a scan of the slots met them, so every caller visits
//! QPs in the order it did before the index.

use core::net::Ipv6Addr;
use std::collections::BTreeMap;

/// Slot indices of the QPs connected to each peer, ascending.
#[derive(Debug, Default)]
pub(super) struct PeerIndex {
    by_peer: BTreeMap<Ipv6Addr, Vec<u32>>,
}

impl PeerIndex {
    /// The slots connected to `peer`, ascending (empty for a stranger).
    pub fn slots(&self, peer: Ipv6Addr) -> &[u32] {
        self.by_peer.get(&peer).map_or(&[], Vec::as_slice)
    }

    /// Every peer with its slots (peers by address, slots ascending).
    pub fn iter(&self) -> impl Iterator<Item = (Ipv6Addr, &[u32])> {
        self.by_peer.iter().map(|(a, s)| (*a, s.as_slice()))
    }

    /// Slot `slot`'s peer went from `from` to `to` (a modify or destroy changed it).
    pub fn repeer(&mut self, slot: u32, from: Option<Ipv6Addr>, to: Option<Ipv6Addr>) {
        if from == to {
            return;
        }
        if let Some(peer) = from
            && let Some(slots) = self.by_peer.get_mut(&peer)
        {
            if let Ok(i) = slots.binary_search(&slot) {
                slots.remove(i);
            }
            if slots.is_empty() {
                self.by_peer.remove(&peer);
            }
        }
        if let Some(peer) = to {
            let slots = self.by_peer.entry(peer).or_default();
            if let Err(i) = slots.binary_search(&slot) {
                slots.insert(i, slot);
            }
        }
    }

    /// Bytes of heap held (approximate: the slot lists and one tree node per peer).
    pub fn heap_bytes(&self) -> usize {
        self.by_peer
            .values()
            .map(|s| s.capacity() * 4 + size_of::<(Ipv6Addr, Vec<u32>)>())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(i: u16) -> Ipv6Addr {
        Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, i)
    }

    #[test]
    fn slots_stay_ascending_and_empty_peers_go() {
        let mut p = PeerIndex::default();
        for s in [5, 1, 3] {
            p.repeer(s, None, Some(a(1)));
        }
        p.repeer(2, None, Some(a(2)));
        assert_eq!(p.slots(a(1)), &[1, 3, 5]);
        p.repeer(3, Some(a(1)), Some(a(2)));
        assert_eq!(p.slots(a(1)), &[1, 5]);
        assert_eq!(p.slots(a(2)), &[2, 3]);
        p.repeer(2, Some(a(2)), None);
        p.repeer(3, Some(a(2)), None);
        assert!(p.slots(a(2)).is_empty());
        assert_eq!(p.iter().count(), 1, "a peer without QPs leaves the index");
        p.repeer(1, Some(a(1)), Some(a(1)));
        assert_eq!(p.slots(a(1)), &[1, 5]);
    }
}
