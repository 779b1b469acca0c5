//! EV tables from a controller's list (OCP mrc_ctl.h EXP and GEN EV profiles, brief §3.1):
//! the QP takes exactly the EVs listed, in list order per plane, duplicates included (copies
//! of one value weight the spray). In ECMP mode a listed entropy is sent as it is, so it does
//! not carry its table index: feedback is matched by search ([`EvTable::lookup`]).

use super::{EvTable, new_ev};
use crate::config::{EvProfile, ExplicitEv, ExplicitValue, MAX_EVS_PER_QP, TimerConfig};
use crate::ev::{EvId, EvKind};
use crate::rng::Rng;
use crate::verbs::VerbsError;
use crate::wire::EntropyOrder;
use crate::wire::entropy::srv6_ev;

impl EvTable {
    /// The EVs of `list` on `planes` planes (OCP mrc_ctl.h EV profiles, brief §3.1): plane 0's
    /// entries in list order, then plane 1's, ... (a plane with none has an empty range); the
    /// first `active_per_plane` of each plane are active, the rest backup, as in generated
    /// tables.
    ///
    /// - [`EvKind::Ecmp`]: every entry is an [`ExplicitValue::Entropy`], sent exactly.
    /// - [`EvKind::Srv6`]: every entry is an [`ExplicitValue::Route`], the EV's path whatever
    ///   the destination (the controller chose it); its entropy carries its index as
    ///   [`EvTable::srv6`]'s do.
    ///
    /// `profile.evs_per_plane` is ignored. An entry of the other mode, on a plane at or above
    /// `planes`, or more than [`MAX_EVS_PER_QP`] entries: `VerbsError::InvalidAttr`.
    pub fn explicit(
        kind: EvKind,
        profile: &EvProfile,
        timers: &TimerConfig,
        planes: u8,
        list: &[ExplicitEv],
        order: EntropyOrder,
        rng: &mut Rng,
    ) -> Result<Self, VerbsError> {
        if list.len() > MAX_EVS_PER_QP {
            return Err(VerbsError::InvalidAttr("more than 4096 EVs in the EV list"));
        }
        if list.iter().any(|e| e.plane >= planes) {
            return Err(VerbsError::InvalidAttr(
                "an EV on a plane the endpoint does not have",
            ));
        }
        let mut evs = Vec::with_capacity(list.len());
        let mut ranges = Vec::with_capacity(usize::from(planes));
        for plane in 0..planes {
            let start = evs.len() as EvId;
            for e in list.iter().filter(|e| e.plane == plane) {
                let id = evs.len() as EvId;
                let (entropy, path) = match (kind, e.value) {
                    (EvKind::Ecmp, ExplicitValue::Entropy(v)) => (v, None),
                    (EvKind::Srv6, ExplicitValue::Route(p)) => {
                        (srv6_ev(order, id, rng.next_u32() as u16), Some(p))
                    }
                    (EvKind::Ecmp, ExplicitValue::Route(_)) => {
                        return Err(VerbsError::InvalidAttr("SRv6 EVs on an ECMP endpoint"));
                    }
                    (EvKind::Srv6, ExplicitValue::Entropy(_)) => {
                        return Err(VerbsError::InvalidAttr("STEV EVs on an SRv6 endpoint"));
                    }
                };
                evs.push(new_ev(plane, entropy, path));
            }
            ranges.push(start..evs.len() as EvId);
        }
        let mut t = Self::from_parts(kind, order, profile, timers, evs, ranges);
        t.explicit = true;
        if kind == EvKind::Ecmp {
            // Sorted by entropy, then id: a search lands on the first of equal entropies.
            let mut by: Vec<(u32, EvId)> = t
                .hot
                .iter()
                .zip(0..)
                .map(|(h, id)| (h.entropy, id))
                .collect();
            by.sort_unstable();
            t.by_entropy = by;
        }
        Ok(t)
    }

    /// [`Self::lookup`] in an explicit ECMP table: the first EV whose entropy is `entropy`.
    pub(super) fn lookup_listed(&self, entropy: u32) -> Option<EvId> {
        let i = self.by_entropy.partition_point(|&(e, _)| e < entropy);
        match self.by_entropy.get(i) {
            Some(&(e, id)) if e == entropy => Some(id),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests;
