//! The requester half of a QP (brief §3): packets of posted Writes leave with consecutive
//! PSNs, each on an EV the selector picks; SACKs release them and clock congestion control
//! (`feedback.rs`); trims, inferred losses and timeouts resend them on other EVs; silent losses
//! retire EVs (`ev/health.rs`) and probes bring them back; the long retry budget finally fails
//! the QP.

use mrc_srv6::wire::Ecn;

use super::check_mpr;
use super::frames::{self, Transmit};
use super::{Parts, Qp, TxOutcome};
use crate::config::EndpointConfig;
use crate::ctx::{CcSlot, Ctx};
use crate::ev::{EvEvent, EvId, EvTable};
use crate::event::Event;
use crate::reliability::loss::{LossDeadlines, LossDetection};
use crate::reliability::psn::psn_of;
use crate::reliability::{Flight, FlightEntry, RetryBudget, RetryVerdict};
use crate::stats::QpStats;
use crate::time::{Duration, Instant};
use crate::verbs::{QpState, RtsAttr, TransportMode, VerbsError, WcStatus};
use crate::wire::seth::MPR_UNIT_PSNS;
use crate::wire::tseth::timestamp_from_nanos;
use crate::wire::{Body, ImmDtRepr, MethRepr, Opcode, PethRepr, RethRepr, TsethRepr, WriteHeaders};

/// Vendor info of a NACK UNEXP_EVENT caused by the memory checks (bad rkey, bounds, access):
/// the requester completes the work request with a remote access error.
pub(crate) const VENDOR_REMOTE_ACCESS: u8 = 1;

/// Echoed timestamps older than this are ignored (the 16-bit, 128 ns field wraps at 8.4 ms).
pub(super) const MAX_RTT_SAMPLE: Duration = Duration::from_millis(8);

/// Nominal bytes a packet adds to its payload in flight (UDP payload overhead and 40 B).
const PER_PACKET_OVERHEAD: u32 = frames::UDP_PAYLOAD_OVERHEAD + 40;

/// The requester state of a connected QP.
#[derive(Debug)]
pub(crate) struct Requester {
    pub(super) sq_psn: u32,
    /// Packets the flight may hold (RTS MPR).
    pub(super) mpr: u32,
    /// Dynamic MPR enabled at RTS (brief §3.5): the window follows the peer's advertisement.
    pub(super) dynamic_mpr: bool,
    /// The MPR the peer's SACKs advertise, in PSNs (`None`: none heard, or 0 = off).
    pub(super) peer_mpr: Option<u32>,
    /// New data waits for room in the MPR window (one pause counted per wait).
    pub(super) mpr_paused: bool,
    pub(super) flight: Flight,
    pub(super) retry: RetryBudget,
    /// The reordering window, RACK and the per-packet timeout, with the QP's RTT.
    pub(super) loss: LossDetection,
    pub(super) gbn: bool,
    pub(super) wimm_limit: u16,
    pub(super) imm_outstanding: u16,
    pub(super) last_rcvd_bytes: Option<u32>,
    /// The congestion controller slot it sends under.
    pub(super) cc: usize,
    /// Nominal bytes of this QP's flight already counted in its controller.
    pub(super) reported_inflight: u64,
    /// Data waits for the congestion controller's pacing.
    pub(super) paced: bool,
    /// Losses found by one pass of the loss rules, handled after it (preallocated).
    pub(super) lost: Vec<(u64, FlightEntry)>,
    /// The tail loss probe's state.
    pub(super) tail: TailProbe,
}

/// The tail loss probe (RFC 8985 §7, brief §3.6, §3.9): a flight that stops moving with
/// packets unacknowledged has lost its tail, or the SACKs that would have said it arrived
/// (the peer's way back on one plane may be dead while nothing of ours is: its SACKs then
/// vanish, and only the last ones matter). An RTT and the reordering window after the flight
/// last moved, its oldest packet is resent on the EV the latest SACK echoed, a path whose both
/// directions just worked: its SACK brings the whole picture back, and RACK then finds what
/// was really lost. The answer can vanish too (a sprayed SACK on a dead way back): the probe
/// goes again after twice the wait, up to [`MAX_TAIL_PROBES`] per quiet spell. Nothing is
/// declared lost and no EV is blamed: the per-packet timeout, later, still does that.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct TailProbe {
    /// The last time the flight moved: a packet sent, or a SACK acknowledged one.
    since: Instant,
    /// Probes sent since the flight last moved.
    probes: u8,
    /// The latest new packet was the last one posted: the flight is a tail (while more waits
    /// to be sent, the SACKs it clocks keep the flight moving, and a stall is the per-packet
    /// timeout's; no probe timer runs through a bulk transfer).
    at_end: bool,
    /// The EV the latest SACK echoed.
    good_ev: Option<EvId>,
    /// The packet the probe resends, until it leaves.
    seq: Option<u64>,
}

/// Tail loss probes per quiet spell (see [`TailProbe`]).
const MAX_TAIL_PROBES: u8 = 3;

/// When the requester next needs its timers.
pub(super) struct RequesterDeadlines {
    pub loss: LossDeadlines,
    pub retry: Option<Instant>,
    pub probe: Option<Instant>,
    pub tail_probe: Option<Instant>,
}

impl Requester {
    /// An idle requester (RTR): it sends nothing until [`Self::start`].
    pub fn new(cc: usize, mode: TransportMode, cfg: &EndpointConfig) -> Self {
        Self {
            sq_psn: 0,
            mpr: 0,
            dynamic_mpr: false,
            peer_mpr: None,
            mpr_paused: false,
            flight: Flight::new(0, PER_PACKET_OVERHEAD),
            retry: RetryBudget::new(0, 0, 0),
            loss: LossDetection::new(&cfg.timers),
            gbn: mode == TransportMode::RoceLike,
            wimm_limit: 0,
            imm_outstanding: 0,
            last_rcvd_bytes: None,
            cc,
            reported_inflight: 0,
            paced: false,
            lost: Vec::new(),
            tail: TailProbe::default(),
        }
    }

    /// RTS: the send side's attributes (first PSN, window, retry budget, WIMM limit).
    pub fn start(&mut self, a: &RtsAttr, cfg: &EndpointConfig) -> Result<(), VerbsError> {
        check_mpr(a.mpr, cfg)?;
        if a.wimm_limit == 0 || a.timeout > 31 || a.retry_linear > 7 || a.retry_exp > 25 {
            return Err(VerbsError::InvalidAttr(
                "RTS timeout, retry counts or WIMM limit",
            ));
        }
        self.sq_psn = a.sq_psn & crate::reliability::psn::PSN_MASK;
        self.mpr = a.mpr;
        self.dynamic_mpr = a.dynamic_mpr;
        self.peer_mpr = None;
        self.mpr_paused = false;
        self.flight = Flight::new(a.mpr, PER_PACKET_OVERHEAD);
        self.retry = RetryBudget::new(a.timeout, a.retry_linear, a.retry_exp);
        self.wimm_limit = a.wimm_limit;
        // Grown as losses come, to the window at most (a flight holds no more): reserving
        // the window cost 49 KB per simulated QP that never lost a packet (issue #14).
        self.lost = Vec::new();
        self.tail = TailProbe::default();
        Ok(())
    }

    pub fn inflight_bytes(&self) -> u64 {
        self.flight.inflight_bytes()
    }

    /// The PSN window new data is sent in (brief §3.5): the RTS MPR, or the MPR the peer
    /// advertises when that is smaller and dynamic MPR is on at both ends. A PSN at or beyond
    /// `una + window` is never sent for the first time.
    pub(super) fn window(&self) -> u64 {
        let advertised = self.peer_mpr.filter(|_| self.dynamic_mpr);
        u64::from(advertised.map_or(self.mpr, |m| m.min(self.mpr)))
    }

    /// Room in the window for one more new packet.
    fn window_has_room(&self) -> bool {
        self.flight.nxt() - self.flight.una() < self.window()
    }

    /// A SACK's MPR field (dynamic MPR, brief §3.5): the responder's current MPR in units of
    /// 128 PSNs, 0 when it has dynamic MPR off. Only a SACK whose cumulative ACK is not behind
    /// the flight's (`fresh`) speaks for the responder now: an older one overtaken on the
    /// way back would undo a later change. A shrink below what is in flight only stops new
    /// packets (see [`Self::window_has_room`]); what was sent stays in flight, and may be
    /// resent: the responder's tracker keeps its RTR window.
    pub(super) fn on_mpr_advertised(&mut self, field: u8, fresh: bool, stats: &mut QpStats) {
        if !fresh {
            return;
        }
        let before = self.window();
        self.peer_mpr = (field != 0).then(|| u32::from(field) * MPR_UNIT_PSNS);
        let after = self.window();
        stats.mpr_peer = u64::from(self.peer_mpr.unwrap_or(0));
        stats.mpr_window = after;
        stats.mpr_shrinks += u64::from(after < before);
        stats.mpr_grows += u64::from(after > before);
    }

    pub fn has_retransmit(&mut self) -> bool {
        self.flight.has_retransmit()
    }

    /// How long a probe may go unanswered.
    pub(super) fn probe_timeout(&self) -> Duration {
        self.loss.pto()
    }

    pub(super) fn deadlines(&mut self, table: &EvTable, now: Instant) -> RequesterDeadlines {
        RequesterDeadlines {
            loss: self.loss.deadlines(&mut self.flight, self.gbn, table),
            retry: self.retry.deadline(),
            // A probe already due waits for a port, not for a timer.
            probe: table
                .probe_deadline(self.probe_timeout())
                .filter(|&t| t > now),
            tail_probe: self.tail_probe_deadline(),
        }
    }

    /// When the tail loss probe goes (see [`TailProbe`]): none in go-back-N mode, while more
    /// waits to be sent, after the last probe of a quiet spell, or with nothing in flight;
    /// each probe of a spell waits twice as long as the one before.
    fn tail_probe_deadline(&self) -> Option<Instant> {
        if self.gbn
            || !self.tail.at_end
            || self.tail.probes >= MAX_TAIL_PROBES
            || self.flight.inflight_bytes() == 0
        {
            return None;
        }
        let wait = self.loss.rtt.srtt() + self.loss.reorder_window();
        Some(self.tail.since + wait.saturating_mul(1 << self.tail.probes))
    }

    /// A SACK acknowledged new packets (`progress`) and echoed `ev`.
    pub(super) fn tail_on_sack(&mut self, now: Instant, progress: bool, ev: Option<EvId>) {
        if progress {
            self.tail.since = now;
            self.tail.probes = 0;
        }
        if ev.is_some() {
            self.tail.good_ev = ev;
        }
    }

    /// If the retransmission of `seq` is the tail probe, the EV it should go near: the one the
    /// latest SACK echoed (see [`Paths::select_near`](crate::ev::Paths)).
    fn take_tail_probe(&mut self, seq: u64) -> Option<EvId> {
        if self.tail.seq != Some(seq) {
            return None;
        }
        self.tail.seq = None;
        self.tail.good_ev
    }

    /// Bring the controller's in-flight count in line with this QP's flight.
    pub(super) fn sync_cc(&mut self, slot: &mut CcSlot) {
        let now = self.flight.inflight_bytes();
        slot.inflight = (slot.inflight + now).saturating_sub(self.reported_inflight);
        self.reported_inflight = now;
    }

    pub fn lose_on_plane(&mut self, table: &EvTable, port: u8) -> u32 {
        self.flight
            .lose_where(|ev| table.get_hot(ev).is_some_and(|e| e.plane == port))
    }

    pub fn heap_bytes(&self) -> usize {
        // The lost list holds at most the window's packets.
        self.flight.heap_bytes()
            + (self.mpr as usize).max(self.lost.capacity()) * size_of::<(u64, FlightEntry)>()
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
        let Some(Parts { c, sq, stats, .. }) = self.parts() else {
            return TxOutcome::Idle;
        };
        let req = &mut c.req;
        let Some(slot) = ctx.ccs.get_mut(req.cc) else {
            return TxOutcome::Idle;
        };
        if slot.ctrl.next_send_time(now).is_some_and(|t| t > now) {
            req.paced = true;
            self.refresh_timers(ctx);
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
        let Some((_, wr, pkt)) = sq.next_packet() else {
            return TxOutcome::Idle;
        };
        let len = packet_len(wr.len, pkt, ctx.cfg.payload_mtu);
        let starts_imm = pkt == 0 && wr.imm.is_some();
        if !req.window_has_room() {
            // Woken by the SACK that slides or grows the window (brief §3.5).
            stats.mpr_pauses += u64::from(!req.mpr_paused);
            req.mpr_paused = true;
            return TxOutcome::Idle;
        }
        if !req.flight.has_room() || (starts_imm && req.imm_outstanding >= req.wimm_limit) {
            return TxOutcome::Idle;
        }
        if !slot.window_allows(req.flight.nominal(len)) {
            return TxOutcome::Window;
        }
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
        let Some(Parts {
            c, sq, rng, stats, ..
        }) = self.parts()
        else {
            return TxOutcome::Idle;
        };
        let req = &mut c.req;
        let avoid = retx.map(|(_, e)| e.ev);
        let chosen = match retx.and_then(|(seq, _)| req.take_tail_probe(seq)) {
            Some(near) => c.paths.select_near(near, planes, avoid, rng),
            None => c.paths.select(planes, avoid, rng),
        };
        let Some(ev) = chosen else {
            // Work waits and no EV may carry it (every one assumed bad or denied, or no port
            // up on either side): the retry budget runs as for a lost packet, so paths that
            // never come back end the work in RetryExceeded (MRC brief §3.7) instead of
            // leaving it posted for ever. A packet that leaves later keeps this clock.
            req.retry.arm(now);
            self.refresh_timers(ctx);
            return TxOutcome::Blocked;
        };
        let (seq, abs, pkt) = if let Some((seq, e)) = retx {
            (seq, e.wr, e.pkt)
        } else {
            let (abs, _, pkt) = sq.next_packet().expect("checked by the caller");
            (req.flight.nxt(), abs, pkt)
        };
        let wr = *sq.slot(abs);
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
        let ends_queue = last && abs + 1 == sq.tail();
        // Ask for a SACK when this is the last packet we can send for now (brief §4.2).
        let ack_req = rtx || ends_queue || req.flight.nxt() + 1 - req.flight.una() >= req.window();
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
        let packet = frames::Packet {
            dscp: cfg.wire.dscp.for_packet(opcode, rtx, true),
            ecn: Ecn::Ect0,
            opcode,
            dest_qp: c.peer.qpn.0,
            psn: psn_of(req.sq_psn, seq),
            ack_req,
            rtx,
            body,
        };
        let emitted = c.tmpl.emit(
            cfg,
            c.paths.table.route_ref(ev),
            c.peer.addr,
            &packet,
            buf,
            len as usize,
        );
        let Ok((layout, port)) = emitted else {
            debug_assert!(false, "poll_transmit buffer smaller than max_frame_len");
            return TxOutcome::Idle;
        };
        // The payload is copied from registered memory and checksummed in the same pass.
        let (head, rest) = buf.split_at_mut(layout.payload.start);
        let mut crc = layout.icrc_before_payload(head);
        let payload = &mut rest[..layout.payload.len()];
        if let Err(e) = sq.gather(abs, offset, payload, ctx.mrs, &mut crc) {
            let status = match e {
                VerbsError::OutOfBounds => WcStatus::LocalLengthError,
                _ => WcStatus::LocalProtectionError,
            };
            self.fail(status, Some(abs), ctx);
            return TxOutcome::Idle;
        }
        let crc = crc.finish();
        layout.finish_from(buf, &cfg.wire, crc);

        // Commit. A first packet into an empty flight starts its timers; so does a
        // retransmission (its per-packet timeout may come before what is armed: after every
        // packet in flight was declared lost, only the long retry deadline is).
        let starts_timers = req.flight.is_empty() || rtx;
        if let Some((seq, _)) = retx {
            req.flight.retransmit(now, seq, ev);
            // Go-back-N resends are counted as they leave (one rewind resends many).
            stats.retransmits.rewind += u64::from(req.gbn);
        } else {
            req.flight.send_new(now, abs, pkt, len, ev);
            req.tail.probes = 0;
            req.tail.at_end = ends_queue;
            req.mpr_paused = false;
            sq.advance(seq);
            if pkt == 0 && wr.imm.is_some() {
                req.imm_outstanding += 1;
            }
            stats.data_packets_sent += 1;
            stats.data_bytes_sent += u64::from(len);
        }
        req.retry.arm(now);
        req.tail.since = now;
        let nominal = req.flight.nominal(len);
        let s = c.paths.table.stats_mut(ev);
        s.packets += 1;
        s.bytes += u64::from(len);
        s.retransmits += u64::from(rtx);
        if let Some(p) = ctx.plane(port) {
            p.packets_sent += 1;
            p.bytes_sent += u64::from(len);
            p.retransmits += u64::from(rtx);
        }
        if let Some(slot) = ctx.ccs.get_mut(req.cc) {
            slot.ctrl.on_packet_sent(now, nominal as u32);
            req.sync_cc(slot);
        }
        if starts_timers {
            self.refresh_timers(ctx);
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
        let Parts { c, stats, qpn, .. } = self.parts()?;
        let ev = c.paths.table.probe_due(now, planes)?;
        let peth = PethRepr {
            hdr_type: 0,
            next: 0,
            vendor_info: 0,
            probe_id: ev,
            spdcid: qpn.0 as u16,
            dpdcid: c.peer.qpn.0 as u16,
            tx_timestamp: timestamp_from_nanos(now.as_nanos()),
            tsr: false,
            format_type: TsethRepr::DEFAULT_FORMAT,
        };
        let psn = psn_of(c.req.sq_psn, c.req.flight.nxt());
        let t = frames::emit_control_templated(
            &mut c.tmpl,
            ctx.cfg,
            c.paths.table.route_ref(ev),
            c.peer.addr,
            Opcode::Probe,
            c.peer.qpn.0,
            psn,
            Body::Probe(peth),
            buf,
        )
        .ok()?;
        c.paths.table.on_probe_sent(ev, now);
        stats.probes_sent += 1;
        self.refresh_timers(ctx);
        Some(t)
    }

    /// Requester timers: probe answers overdue, RACK, per-packet timeouts, the retry budget.
    pub(super) fn requester_timeout(&mut self, now: Instant, ctx: &mut Ctx<'_>) {
        let Some(Parts { c, stats, rng, .. }) = self.parts() else {
            return;
        };
        let timeout = c.req.probe_timeout();
        let e = EvEvent::ProbesOverdue { timeout };
        c.paths.react(e, now, rng, stats, ctx.planes);
        self.infer_losses(now, ctx);
        self.time_out_packets(now, ctx);
        let Some(Parts { c, stats, .. }) = self.parts() else {
            return;
        };
        let req = &mut c.req;
        if req.tail_probe_deadline().is_some_and(|d| d <= now)
            && let Some(seq) = req.flight.oldest_in_flight()
            && req.flight.mark_lost(seq)
        {
            req.tail.probes += 1;
            req.tail.seq = Some(seq);
            stats.retransmits.tail_probe += 1;
        }
        if req.retry.deadline().is_some_and(|d| d <= now) {
            stats.retry_timeouts += 1;
            match req.retry.on_expiry(now) {
                RetryVerdict::Exhausted => {
                    self.fail(WcStatus::RetryExceeded, None, ctx);
                    return;
                }
                RetryVerdict::Retry => {
                    if let Some(seq) = req.flight.oldest_in_flight() {
                        req.flight.mark_lost(seq);
                        stats.retransmits.retry += 1;
                    }
                }
            }
        }
        if let Some(slot) = ctx.ccs.get_mut(req.cc) {
            req.sync_cc(slot);
        }
    }

    /// RACK inference (brief §3.6, `reliability/loss.rs`), after a SACK and on the timer: the
    /// losses go to the EV health table and congestion control. Go-back-N infers nothing.
    pub(super) fn infer_losses(&mut self, now: Instant, ctx: &mut Ctx<'_>) {
        let Some(Parts { c, stats, .. }) = self.parts() else {
            return;
        };
        let req = &mut c.req;
        req.lost.clear();
        if req.gbn {
            return;
        }
        let table = &c.paths.table;
        req.loss.infer(&mut req.flight, now, table, &mut req.lost);
        stats.retransmits.inferred += req.lost.len() as u64;
        self.on_losses(now, false, ctx);
    }

    /// The per-packet path-failure timeout (brief §3.7): a go-back-N QP resends from its oldest
    /// unacknowledged packet.
    fn time_out_packets(&mut self, now: Instant, ctx: &mut Ctx<'_>) {
        let Some(Parts { c, stats, .. }) = self.parts() else {
            return;
        };
        let req = &mut c.req;
        let table = &c.paths.table;
        req.loss
            .time_out(&mut req.flight, now, table, &mut req.lost);
        if req.lost.is_empty() {
            return;
        }
        if req.gbn {
            let una = req.flight.una();
            req.flight.rewind(una);
        } else {
            stats.retransmits.timeout += req.lost.len() as u64;
        }
        self.on_losses(now, true, ctx);
    }

    /// Packets in `req.lost` were lost without a trim (inferred from holes, or `timeout`):
    /// each is an event of its EV's health (`ev/health.rs`: brief §3.3, untrimmed loss is a
    /// path failure) and a loss for congestion control.
    fn on_losses(&mut self, now: Instant, timeout: bool, ctx: &mut Ctx<'_>) {
        let Some(Parts { c, stats, rng, .. }) = self.parts() else {
            return;
        };
        let req = &mut c.req;
        for &(_, e) in &req.lost {
            let event = if timeout {
                EvEvent::Timeout { ev: e.ev }
            } else {
                EvEvent::InferredLoss {
                    ev: e.ev,
                    tx_id: e.tx_id,
                    first: e.tx_count == 1,
                }
            };
            c.paths.react(event, now, rng, stats, ctx.planes);
            if c.paths.take_remap() {
                ctx.events.push(Event::EcmpRemap { qpn: c.paths.qpn });
            }
            if let Some(slot) = ctx.ccs.get_mut(req.cc) {
                slot.ctrl.on_loss(now, req.flight.nominal(e.len));
            }
        }
        req.lost.clear();
        if let Some(slot) = ctx.ccs.get_mut(req.cc) {
            req.sync_cc(slot);
        }
    }
}

/// Payload bytes of packet `pkt` of a `len`-byte message.
fn packet_len(len: u32, pkt: u32, mtu: u32) -> u16 {
    len.saturating_sub(pkt.saturating_mul(mtu)).min(mtu) as u16
}
