//! The paths of one connected QP: its EV table, the selector that picks among them per packet,
//! ECMP mode's remap detector, and the reverse EVs its control packets leave on (brief §3.1,
//! §3.2, §3.9, §8.2). Built when the QP enters RTR; what happens to an EV's health is
//! [`Paths::react`] (`health.rs`).

use super::{
    EvId, EvKind, EvRole, EvSelector, EvState, EvTable, RemapDetector, Selector, build_selector,
};
use crate::config::{EndpointConfig, PathMode, SelectorKind};
use crate::rng::Rng;
use crate::verbs::{InitAttr, Qpn, RtrAttr, TransportMode, VerbsError};

/// The EVs of a QP and how it picks among them.
#[derive(Debug)]
pub(crate) struct Paths {
    pub table: EvTable,
    /// Per-packet choice, statically dispatched (issue #13).
    pub selector: Selector,
    /// ECMP mode only.
    pub remap: Option<RemapDetector>,
    /// RoCE-like (go-back-N) QP: one path and no path health; feedback reaches congestion
    /// control only.
    pub gbn: bool,
    /// The QP they belong to (named in the events they raise).
    pub qpn: Qpn,
    /// An ECMP remap redrew every EV, not reported yet.
    pub(super) remapped: bool,
}

impl Paths {
    /// The paths of QP `qpn` towards the peer `a` names: from the plan in SRv6 mode, drawn at
    /// random in ECMP mode (brief §3.1), or exactly the EV profile's explicit list (OCP
    /// mrc_ctl.h EV profiles; an entry of the other mode fails with `InvalidAttr`).
    pub fn new(
        qpn: Qpn,
        init: &InitAttr,
        a: &RtrAttr,
        cfg: &EndpointConfig,
        rng: &mut Rng,
    ) -> Result<Self, VerbsError> {
        let profile = &cfg.ev_profiles[usize::from(init.ev_profile)];
        let planes = cfg.ports.len() as u8;
        let order = cfg.wire.entropy_order;
        let (table, ecmp) = match (&cfg.path_mode, profile.explicit.as_deref()) {
            // OCP mrc_ctl.h EXP and GEN EV profiles (brief §3.1): the controller's EVs, whatever
            // the destination.
            (mode, Some(list)) => {
                let kind = match mode {
                    PathMode::Srv6 { .. } => EvKind::Srv6,
                    PathMode::Ecmp => EvKind::Ecmp,
                };
                let t = EvTable::explicit(kind, profile, &cfg.timers, planes, list, order, rng)?;
                (t, kind == EvKind::Ecmp)
            }
            (PathMode::Srv6 { paths, host }, None) => {
                let dst = a.remote.host.ok_or(VerbsError::InvalidAttr(
                    "SRv6 mode needs the remote plan host",
                ))?;
                let t = EvTable::srv6(
                    profile,
                    &cfg.timers,
                    planes,
                    &**paths,
                    *host,
                    dst,
                    order,
                    rng,
                );
                (t, false)
            }
            (PathMode::Ecmp, None) => (
                EvTable::ecmp(profile, &cfg.timers, planes, order, rng),
                true,
            ),
        };
        if table.is_empty() {
            return Err(VerbsError::InvalidAttr("no path towards the remote host"));
        }
        let gbn = init.mode == TransportMode::RoceLike;
        let kind = if gbn {
            SelectorKind::SinglePath
        } else {
            profile.selector
        };
        let selector = build_selector(kind, ecmp, &table, profile.reshuffle_rounds);
        Ok(Self {
            table,
            selector,
            remap: ecmp.then(|| RemapDetector::new(profile.remap_burst, profile.remap_window)),
            gbn,
            qpn,
            remapped: false,
        })
    }

    /// The EV of a packet leaving now on one of `planes`; a retransmission `avoid`s the EV it
    /// was lost on (MRC resends elsewhere, brief §3.4), unless no other is usable: the same EV
    /// beats never resending.
    pub fn select(&mut self, planes: u32, avoid: Option<EvId>, rng: &mut Rng) -> Option<EvId> {
        let avoid = avoid.filter(|_| !self.gbn);
        let ev = self.selector.select(&mut self.table, planes, avoid, rng);
        if ev.is_none() && avoid.is_some() {
            return self.selector.select(&mut self.table, planes, None, rng);
        }
        ev
    }

    /// [`Self::select`] near EV `near` (a tail loss probe's choice: the EV whose SACK last came
    /// back, RFC 8985 §7): `near` itself when it may carry the packet (in service, where a
    /// SKIP for congestion does not stop a probe; on a plane in `planes`; not `avoid`), else an
    /// EV of its plane, whose way back just worked, else any.
    pub fn select_near(
        &mut self,
        near: EvId,
        planes: u32,
        avoid: Option<EvId>,
        rng: &mut Rng,
    ) -> Option<EvId> {
        let Some(e) = self.table.get_hot(near) else {
            return self.select(planes, avoid, rng);
        };
        let bit = 1u32.checked_shl(u32::from(e.plane)).unwrap_or(0) & planes;
        if bit == 0 {
            return self.select(planes, avoid, rng);
        }
        let in_service =
            e.role == EvRole::Active && matches!(e.state, EvState::Good | EvState::Skip);
        if in_service && Some(near) != avoid {
            return Some(near);
        }
        let ev = self.select(bit, avoid, rng);
        if ev.is_some() || bit == planes {
            return ev;
        }
        self.select(planes, avoid, rng)
    }

    /// The reverse EV a control packet leaves on (brief §3.9): through `preferred` (the plane
    /// its trigger arrived on) when it is in `planes`, else through the first of `planes` that
    /// has one.
    pub fn reverse_ev(&mut self, planes: u32, preferred: u8) -> Option<EvId> {
        let bit = 1u32.checked_shl(u32::from(preferred)).unwrap_or(0);
        let mut ev = None;
        if planes & bit != 0 {
            ev = self.table.reverse(usize::from(preferred));
        }
        let mut rest = planes & !bit;
        while ev.is_none() && rest != 0 {
            let p = rest.trailing_zeros();
            rest &= rest - 1;
            ev = self.table.reverse(p as usize);
        }
        ev
    }
}
