//! The requester half of a QP (brief §3): packets of posted Writes leave with consecutive
//! PSNs, each on an EV the selector picks; SACKs release them and clock congestion control;
//! trims, inferred losses and timeouts resend them on other EVs; silent losses retire EVs and
//! probes bring them back; the long retry budget finally fails the QP.

use mrc_srv6::wire::Ecn;

use super::frames::{self, Transmit};
use super::{Qp, TxOutcome};
use crate::config::{EndpointConfig, TimerConfig};
use crate::ctx::{CcSlot, Ctx};
use crate::ev::EvTable;
use crate::reliability::psn::psn_of;
use crate::reliability::{Flight, FlightEntry, RetryBudget, RetryVerdict, RttEstimator};
use crate::time::{Duration, Instant};
use crate::verbs::{QpState, RtsAttr, TransportMode, VerbsError, WcStatus};
use crate::wire::tseth::timestamp_from_nanos;
use crate::wire::{Body, ImmDtRepr, MethRepr, Opcode, PethRepr, RethRepr, TsethRepr, WriteHeaders};

/// Vendor info of a NACK UNEXP_EVENT caused by the memory checks (bad rkey, bounds, access):
/// the requester completes the work request with a remote access error.
pub(crate) const VENDOR_REMOTE_ACCESS: u8 = 1;

/// Echoed timestamps older than this are ignored (the 16-bit, 128 ns field wraps at 8.4 ms).
pub(super) const MAX_RTT_SAMPLE: Duration = Duration::from_millis(8);

/// The requester state of a QP in RTS.
#[derive(Debug)]
pub(crate) struct Requester {
    pub(super) sq_psn: u32,
    pub(super) flight: Flight,
    pub(super) retry: RetryBudget,
    pub(super) rtt: RttEstimator,
    pub(super) timers: TimerConfig,
    pub(super) gbn: bool,
    pub(super) wimm_limit: u16,
    pub(super) imm_outstanding: u16,
    pub(super) last_rcvd_bytes: Option<u32>,
    /// Nominal bytes of this QP's flight already counted in its controller.
    pub(super) reported_inflight: u64,
    /// Losses found by one pass of the loss rules, handled after it (preallocated).
    pub(super) lost: Vec<(u64, FlightEntry)>,
}

impl Requester {
    pub fn new(a: &RtsAttr, mode: TransportMode, cfg: &EndpointConfig) -> Self {
        Self {
            sq_psn: a.sq_psn & crate::reliability::psn::PSN_MASK,
            flight: Flight::new(a.mpr, frames::UDP_PAYLOAD_OVERHEAD + 40),
            retry: RetryBudget::new(a.timeout, a.retry_linear, a.retry_exp),
            rtt: RttEstimator::new(cfg.timers.initial_rtt),
            timers: cfg.timers,
            gbn: mode == TransportMode::RoceLike,
            wimm_limit: a.wimm_limit,
            imm_outstanding: 0,
            last_rcvd_bytes: None,
            reported_inflight: 0,
            lost: Vec::with_capacity(a.mpr as usize),
        }
    }

    pub fn inflight_bytes(&self) -> u64 {
        self.flight.inflight_bytes()
    }

    pub fn has_retransmit(&mut self) -> bool {
        self.flight.has_retransmit()
    }

    /// The reordering window of loss inference: a quarter RTT or four RTT deviations, whichever
    /// is longer, never below the configured minimum (brief §3.6 [I]). Sprayed paths differ by
    /// their queues: where the RTT varies, so does the order of arrival, and a hole is not a
    /// loss until it outlasts that variation.
    pub(super) fn reorder_window(&self) -> Duration {
        Duration((self.rtt.srtt().as_nanos() / 4).max(4 * self.rtt.rttvar().as_nanos()))
            .max(self.timers.reorder_min)
    }

    /// The least a packet on an EV waits before its timeout: as many of its own path's smoothed
    /// RTTs as the QP's timeout counts of the QP's (a path with a queue is slow, not dead).
    pub(super) fn path_pto<'t>(&self, table: &'t EvTable) -> impl Fn(u16) -> Duration + 't {
        let multiplier = u64::from(self.timers.pto_srtt_multiplier);
        move |ev| table.path_srtt(ev).saturating_mul(multiplier)
    }

    pub(super) fn pto(&self) -> Duration {
        self.rtt
            .pto(self.timers.pto_srtt_multiplier, self.timers.pto_min)
    }

    /// How long a probe may go unanswered.
    pub(super) fn probe_timeout(&self) -> Duration {
        self.pto()
    }

    pub fn deadline(&mut self, table: &EvTable, now: Instant) -> Option<Instant> {
        let (pto, reo) = (self.pto(), self.reorder_window());
        let path_pto = self.path_pto(table);
        let mut d = self.flight.pto_deadline(pto, &path_pto);
        if !self.gbn && d.is_some() {
            let path_rtt = |ev| table.path_srtt(ev);
            d = super::min_opt(d, self.flight.loss_deadline(reo, &path_rtt));
        }
        d = super::min_opt(d, self.retry.deadline());
        // A probe already due waits for a port, not for a timer.
        let probe = table
            .probe_deadline(self.probe_timeout())
            .filter(|&t| t > now);
        super::min_opt(d, probe)
    }

    /// Bring the controller's in-flight count in line with this QP's flight.
    pub(super) fn sync_cc(&mut self, slot: &mut CcSlot) {
        let now = self.flight.inflight_bytes();
        slot.inflight = (slot.inflight + now).saturating_sub(self.reported_inflight);
        self.reported_inflight = now;
    }

    pub fn lose_on_plane(&mut self, table: &EvTable, port: u8) -> u32 {
        self.flight
            .lose_where(|ev| table.get(ev).is_some_and(|e| e.plane == port))
    }

    pub fn heap_bytes(&self) -> usize {
        self.flight.heap_bytes() + self.lost.capacity() * size_of::<(u64, FlightEntry)>()
    }
}

impl Qp {
    /// The next data-class packet of this QP: a due probe, a retransmission, or new data.
    pub(crate) fn poll_data(
        &mut self,
        now: Instant,
        ready: u32,
        buf: &mut [u8],
        ctx: &mut Ctx<'_>,
    ) -> TxOutcome {
        if self.state != QpState::Rts {
            return TxOutcome::Idle;
        }
        let planes = self.planes(ready, ctx);
        if let Some(t) = self.send_probe(now, planes, buf, ctx) {
            return TxOutcome::Sent(t);
        }
        let (Some(req), Some(slot)) = (self.req.as_mut(), self.cc.and_then(|i| ctx.ccs.get_mut(i)))
        else {
            return TxOutcome::Idle;
        };
        if slot.ctrl.next_send_time(now).is_some_and(|t| t > now) {
            self.paced = true;
            self.timers_dirty = true;
            return TxOutcome::Idle;
        }
        if let Some(seq) = req.flight.next_retransmit() {
            let e = *req
                .flight
                .entry(seq)
                .expect("queued retransmissions are in flight");
            if !slot.window_allows(req.flight.nominal(e.len)) {
                return TxOutcome::Window;
            }
            return self.send_data(now, planes, Some((seq, e)), buf, ctx);
        }
        let Some((abs, wr, pkt)) = self.sq.next_packet() else {
            return TxOutcome::Idle;
        };
        let len = packet_len(wr.len, pkt, ctx.cfg.payload_mtu);
        let starts_imm = pkt == 0 && wr.imm.is_some();
        if !req.flight.has_room() || (starts_imm && req.imm_outstanding >= req.wimm_limit) {
            return TxOutcome::Idle;
        }
        if !slot.window_allows(req.flight.nominal(len)) {
            return TxOutcome::Window;
        }
        let _ = abs;
        self.send_data(now, planes, None, buf, ctx)
    }

    /// Send a first transmission (`retx` None) or the retransmission of `retx`.
    fn send_data(
        &mut self,
        now: Instant,
        planes: u32,
        retx: Option<(u64, FlightEntry)>,
        buf: &mut [u8],
        ctx: &mut Ctx<'_>,
    ) -> TxOutcome {
        let cfg = ctx.cfg;
        let (Some(req), Some(paths), Some(rtr)) =
            (self.req.as_mut(), self.paths.as_mut(), self.rtr)
        else {
            return TxOutcome::Idle;
        };
        // MRC resends on another EV; a RoCE-like QP keeps its one path. With no other EV
        // usable (one path, or every other plane down) the same EV beats never resending.
        let avoid = retx.filter(|_| !req.gbn).map(|(_, e)| e.ev);
        let mut ev = paths
            .selector
            .select(&mut paths.table, planes, avoid, &mut self.rng);
        if ev.is_none() && avoid.is_some() {
            ev = paths
                .selector
                .select(&mut paths.table, planes, None, &mut self.rng);
        }
        let Some(ev) = ev else {
            return TxOutcome::Blocked;
        };
        let (seq, abs, pkt) = if let Some((seq, e)) = retx {
            (seq, e.wr, e.pkt)
        } else {
            let (abs, _, pkt) = self.sq.next_packet().expect("checked by the caller");
            (req.flight.nxt(), abs, pkt)
        };
        let wr = *self.sq.slot(abs);
        let mtu = cfg.payload_mtu;
        let offset = u64::from(pkt) * u64::from(mtu);
        let len = packet_len(wr.len, pkt, mtu);
        let last = pkt + 1 == wr.packets;
        let opcode = match (wr.packets == 1, pkt == 0, last, wr.imm.is_some()) {
            (true, _, _, false) => Opcode::WriteOnly,
            (true, _, _, true) => Opcode::WriteOnlyImm,
            (false, true, _, _) => Opcode::WriteFirst,
            (false, false, true, false) => Opcode::WriteLast,
            (false, false, true, true) => Opcode::WriteLastImm,
            (false, false, false, _) => Opcode::WriteMiddle,
        };
        let rtx = retx.is_some();
        // Ask for a SACK when this is the last packet we can send for now (brief §4.2).
        let ack_req = rtx
            || (last && abs + 1 == self.sq.tail())
            || req.flight.nxt() + 1 - req.flight.una() >= u64::from(self.rts.map_or(0, |a| a.mpr));
        let mut bth = frames::bth(opcode, rtr.dest_qpn.0, psn_of(req.sq_psn, seq));
        bth.ack_req = ack_req;
        bth.rtx = rtx;
        let body = Body::Write(WriteHeaders {
            meth: MethRepr {
                rqmsn: wr.rqmsn,
                msn: wr.msn,
            },
            tseth: cfg.tseth.then(|| TsethRepr::at_nanos(now.as_nanos())),
            reth: RethRepr {
                va: wr.remote_addr.wrapping_add(offset),
                rkey: wr.rkey,
                dma_len: wr.len,
            },
            immdt: if last {
                wr.imm.map(|imm| ImmDtRepr { imm })
            } else {
                None
            },
        });
        let dscp = cfg.wire.dscp.for_packet(opcode, rtx, true);
        let (repr, port) = frames::repr(
            cfg,
            paths.table.ev(ev),
            rtr.remote.addr,
            dscp,
            Ecn::Ect0,
            bth,
            body,
        );
        let Ok(layout) = repr.emit(buf, len as usize, &cfg.wire) else {
            debug_assert!(false, "poll_transmit buffer smaller than max_frame_len");
            return TxOutcome::Idle;
        };
        if let Err(e) = self
            .sq
            .gather(abs, offset, &mut buf[layout.payload.clone()], ctx.mrs)
        {
            let status = match e {
                VerbsError::OutOfBounds => WcStatus::LocalLengthError,
                _ => WcStatus::LocalProtectionError,
            };
            self.fail(status, Some(abs), ctx);
            return TxOutcome::Idle;
        }
        layout.finish(buf, &cfg.wire);
        let (Some(req), Some(paths)) = (self.req.as_mut(), self.paths.as_mut()) else {
            return TxOutcome::Idle;
        };

        // Commit. A first packet into an empty flight starts its timers; so does a
        // retransmission (its per-packet timeout may come before what is armed: after every
        // packet in flight was declared lost, only the long retry deadline is).
        self.timers_dirty |= req.flight.is_empty() || retx.is_some();
        if retx.is_some() {
            req.flight.retransmit(now, seq, ev);
            // Go-back-N resends are counted as they leave (one rewind resends many).
            self.stats.retransmits.rewind += u64::from(req.gbn);
        } else {
            req.flight.send_new(now, abs, pkt, len, ev);
            self.sq.advance(seq);
            if pkt == 0 && wr.imm.is_some() {
                req.imm_outstanding += 1;
            }
            self.stats.data_packets_sent += 1;
            self.stats.data_bytes_sent += u64::from(len);
        }
        req.retry.arm(now);
        let nominal = req.flight.nominal(len);
        let s = paths.table.stats_mut(ev);
        s.packets += 1;
        s.bytes += u64::from(len);
        s.retransmits += u64::from(rtx);
        if let Some(p) = ctx.plane(port) {
            p.packets_sent += 1;
            p.bytes_sent += u64::from(len);
            p.retransmits += u64::from(rtx);
        }
        if let Some(slot) = self.cc.and_then(|i| ctx.ccs.get_mut(i)) {
            slot.ctrl.on_packet_sent(now, nominal as u32);
            req.sync_cc(slot);
        }
        TxOutcome::Sent(Transmit {
            len: layout.len,
            port,
        })
    }

    /// A reliability probe on a retired EV whose turn has come (brief §2.11, §3.3).
    fn send_probe(
        &mut self,
        now: Instant,
        planes: u32,
        buf: &mut [u8],
        ctx: &mut Ctx<'_>,
    ) -> Option<Transmit> {
        let cfg = ctx.cfg;
        let (Some(paths), Some(rtr), Some(req)) =
            (self.paths.as_mut(), self.rtr, self.req.as_ref())
        else {
            return None;
        };
        let ev = paths.table.probe_due(now, planes)?;
        let peth = PethRepr {
            hdr_type: 0,
            next: 0,
            vendor_info: 0,
            probe_id: ev,
            spdcid: self.qpn.0 as u16,
            dpdcid: rtr.dest_qpn.0 as u16,
            tx_timestamp: timestamp_from_nanos(now.as_nanos()),
            tsr: false,
            format_type: TsethRepr::DEFAULT_FORMAT,
        };
        let bth = frames::bth(
            Opcode::Probe,
            rtr.dest_qpn.0,
            psn_of(req.sq_psn, req.flight.nxt()),
        );
        let dscp = cfg.wire.dscp.for_packet(Opcode::Probe, false, true);
        let r = frames::repr(
            cfg,
            paths.table.ev(ev),
            rtr.remote.addr,
            dscp,
            Ecn::NotEct,
            bth,
            Body::Probe(peth),
        );
        let t = frames::emit_control(cfg, r, buf).ok()?;
        paths.table.on_probe_sent(ev, now);
        self.stats.probes_sent += 1;
        self.timers_dirty = true;
        Some(t)
    }

    /// Requester timers: probe answers overdue, RACK, per-packet timeouts, the retry budget.
    pub(crate) fn requester_timeout(&mut self, now: Instant, ctx: &mut Ctx<'_>) {
        let (Some(req), Some(paths)) = (self.req.as_mut(), self.paths.as_mut()) else {
            return;
        };
        let failed = paths.table.on_probe_timeouts(now, req.probe_timeout());
        self.stats.probes_failed += u64::from(failed);
        req.lost.clear();
        if !req.gbn {
            let reo = req.reorder_window();
            let lost = &mut req.lost;
            let table = &paths.table;
            req.flight
                .detect_losses(now, reo, &|ev| table.path_srtt(ev), &mut |seq, e| {
                    lost.push((seq, *e));
                });
            self.stats.retransmits.inferred += req.lost.len() as u64;
            self.handle_losses(now, false, ctx);
        }
        let Some(req) = self.req.as_mut() else {
            return;
        };
        let pto = req.pto();
        let Some(paths) = self.paths.as_ref() else {
            return;
        };
        {
            let path_pto = req.path_pto(&paths.table);
            let lost = &mut req.lost;
            req.flight
                .on_pto(now, pto, &path_pto, &mut |seq, e| lost.push((seq, *e)));
        }
        if !req.lost.is_empty() {
            if req.gbn {
                let una = req.flight.una();
                req.flight.rewind(una);
            } else {
                self.stats.retransmits.timeout += req.lost.len() as u64;
            }
            self.handle_losses(now, true, ctx);
        }
        let Some(req) = self.req.as_mut() else {
            return;
        };
        if req.retry.deadline().is_some_and(|d| d <= now) {
            self.stats.retry_timeouts += 1;
            match req.retry.on_expiry(now) {
                RetryVerdict::Exhausted => {
                    self.fail(WcStatus::RetryExceeded, None, ctx);
                    return;
                }
                RetryVerdict::Retry => {
                    if let Some(seq) = req.flight.oldest_in_flight() {
                        req.flight.mark_lost(seq);
                        self.stats.retransmits.retry += 1;
                    }
                }
            }
        }
        if let Some(slot) = self.cc.and_then(|i| ctx.ccs.get_mut(i)) {
            req.sync_cc(slot);
        }
    }
}

/// Payload bytes of packet `pkt` of a `len`-byte message.
fn packet_len(len: u32, pkt: u32, mtu: u32) -> u16 {
    len.saturating_sub(pkt.saturating_mul(mtu)).min(mtu) as u16
}
