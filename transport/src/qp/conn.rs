//! A QP's connection to its peer, from RTR on: the paths, the requester, the responder, the
//! control packets waiting to leave and the named deadlines. Its parts exist together (no
//! `Option` per part): the requester is idle until RTS gives it its send-side attributes.

use core::net::Ipv6Addr;

use super::check_mpr;
use super::control::ControlQueue;
use super::frames;
use super::requester::Requester;
use super::responder::Responder;
use super::timers::{Timer, TimerTable};
use crate::cc::{self, PathFacts};
use crate::ctx::{CcTable, Ctx};
use crate::ev::Paths;
use crate::rng::Rng;
use crate::time::Instant;
use crate::verbs::{InitAttr, QpState, Qpn, RtrAttr, TransportMode, VerbsError};
use crate::wire::seth::{MAX_ADVERTISED_MPR, MPR_UNIT_PSNS};

/// The QP at the other end.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Peer {
    pub qpn: Qpn,
    pub addr: Ipv6Addr,
}

/// A connected QP's reliability state.
#[derive(Debug)]
pub(crate) struct Connection {
    pub peer: Peer,
    pub paths: Paths,
    pub req: Requester,
    pub resp: Responder,
    pub ctrl: ControlQueue,
    /// The peer's ports up (PORT_STATUS_UPDATE), bit i = its port i.
    pub remote_up: u32,
    pub timers: TimerTable,
    /// The fixed headers of its frames, per plane (issue #13, header templates).
    pub tmpl: frames::Templates,
}

impl Connection {
    /// RTR (brief §3.1, §4): the paths towards the peer `a` names, the responder, and the
    /// congestion controller the requester will send under (shared by every MRC QP towards the
    /// same peer with the same profile, brief §3.4).
    pub fn new(
        qpn: Qpn,
        init: &InitAttr,
        a: &RtrAttr,
        ctx: &mut Ctx<'_>,
        rng: &mut Rng,
    ) -> Result<Self, VerbsError> {
        let cfg = ctx.cfg;
        check_mpr(a.mpr, cfg)?;
        // Dynamic MPR advertises the window in the SETH's 8-bit field of 128-PSN units
        // (brief §2.9, §3.5): its RTR MPR must be one it can say.
        if a.dynamic_mpr && !(MPR_UNIT_PSNS..=MAX_ADVERTISED_MPR).contains(&a.mpr) {
            return Err(VerbsError::InvalidAttr(
                "dynamic MPR needs an MPR of 128 to 32640 PSNs",
            ));
        }
        if a.wimm_limit == 0 || a.wimm_limit > cfg.limits.max_wimm {
            return Err(VerbsError::InvalidAttr("WIMM limit"));
        }
        if a.dest_qpn.0 > 0x00ff_ffff || a.dest_qpn.0 <= Qpn::ENDPOINT.0 {
            return Err(VerbsError::InvalidAttr("destination QPN"));
        }
        let paths = Paths::new(qpn, init, a, cfg, rng)?;
        let resp = Responder::new(a, init.mode, cfg);
        // One control packet per PSN of the window at most waits (a burst of trimmed
        // headers), plus a few SACKs and ACKs.
        let ctrl_limit = (a.mpr as usize + 16).min(cfg.limits.max_control_backlog as usize);
        let profile = cfg.cc_profiles[usize::from(init.cc_profile)].clone();
        let facts = PathFacts {
            line_rate_bps: cfg.ports.iter().map(|p| p.line_rate_bps).sum(),
            base_rtt: cfg.timers.initial_rtt,
            mtu_bytes: cc::nominal_packet_bytes(cfg.payload_mtu + frames::UDP_PAYLOAD_OVERHEAD),
        };
        let shared = init.mode == TransportMode::Mrc;
        let cc = ctx.ccs.attach(a.remote.addr, init.cc_profile, shared, || {
            cc::Controller::new(&profile, &facts)
        });
        Ok(Self {
            peer: Peer {
                qpn: a.dest_qpn,
                addr: a.remote.addr,
            },
            paths,
            req: Requester::new(cc, init.mode, cfg),
            resp,
            ctrl: ControlQueue::new(ctrl_limit),
            remote_up: u32::MAX,
            timers: TimerTable::default(),
            tmpl: frames::Templates::new(cfg.ports.len()),
        })
    }

    /// The QP leaves RTR/RTS (`connected`) or is reset: the congestion controller is released
    /// with this QP's bytes in flight, control packets dropped, deadlines stopped but the
    /// recheck of the peer's ports (its paths stay in use for reads and endpoint operations).
    pub fn stop(&mut self, connected: bool, ctx: &mut Ctx<'_>) {
        if connected {
            ctx.ccs.detach(self.req.cc, self.req.inflight_bytes());
        }
        self.ctrl.clear();
        self.timers.stop_all_but(Timer::RemotePorts);
    }

    /// Re-read the deadlines derived from this state: the responder's coalesced SACK (RTR,
    /// RTS), the requester's loss rules, retry budget, probes and pacing (RTS).
    pub fn refresh_timers(&mut self, state: QpState, now: Instant, ccs: &CcTable) {
        let receiving = matches!(state, QpState::Rtr | QpState::Rts);
        let t = &mut self.timers;
        t.set(Timer::Sack, self.resp.deadline().filter(|_| receiving));
        if state != QpState::Rts {
            for timer in [
                Timer::Loss,
                Timer::PacketTimeout,
                Timer::Retry,
                Timer::Probe,
                Timer::Pace,
                Timer::TailProbe,
            ] {
                t.set(timer, None);
            }
            return;
        }
        let d = self.req.deadlines(&self.paths.table, now);
        t.set(Timer::PacketTimeout, d.loss.timeout);
        t.set(Timer::Loss, d.loss.inference);
        t.set(Timer::Retry, d.retry);
        t.set(Timer::Probe, d.probe);
        t.set(Timer::TailProbe, d.tail_probe);
        let pace = self
            .req
            .paced
            .then(|| ccs.get(self.req.cc))
            .flatten()
            .and_then(|s| s.ctrl.next_send_time(Instant::ZERO))
            .filter(|&t| t > now);
        t.set(Timer::Pace, pace);
    }

    pub fn heap_bytes(&self) -> usize {
        self.ctrl.heap_bytes()
            + self.paths.table.heap_bytes()
            + self.req.heap_bytes()
            + self.resp.heap_bytes()
            + self.tmpl.heap_bytes()
    }
}
