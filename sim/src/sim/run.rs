//! The event loop: frames finishing serialisation, frames arriving at switches and hosts,
//! engine and application timers, faults, observer samples.

use mrc_srv6::plan::NodeId;
use mrc_srv6::wire::ETHERNET_HEADER_LEN;

use super::{Sim, SimError};
use crate::fabric::Owner;
use crate::fault::{Fault, FaultKind, Impairment};
use crate::pool::PacketId;
use crate::port::{Admission, is_data_class};
use crate::queue::{Event, PortId};
use crate::switch;
use crate::time::{SimTime, serialisation_ps};

/// When a run must stop even if applications are not done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunLimit {
    /// Virtual time.
    pub until: SimTime,
    /// Events processed in this run.
    pub max_events: u64,
}

impl RunLimit {
    /// Stop at `until` (and after a billion events).
    pub const fn until(until: SimTime) -> Self {
        Self {
            until,
            max_events: 1_000_000_000,
        }
    }
}

/// What a run did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunSummary {
    /// Events processed in this run.
    pub events: u64,
    /// Virtual time at the end.
    pub end: SimTime,
    /// Every application is done.
    pub apps_done: bool,
    /// Wall-clock seconds the run took (the only wall-clock reading of the simulator).
    pub wall_secs: f64,
}

impl RunSummary {
    /// Events per wall-clock second.
    pub fn events_per_sec(&self) -> f64 {
        self.events as f64 / self.wall_secs.max(1e-9)
    }
}

impl core::fmt::Display for RunSummary {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "{} events in {:.3} s wall ({:.2} M events/s), virtual end {:.3} µs, apps {}",
            self.events,
            self.wall_secs,
            self.events_per_sec() / 1e6,
            self.end.as_micros_f64(),
            if self.apps_done { "done" } else { "NOT done" }
        )
    }
}

impl Sim {
    /// Run until every application is done (or, with no application, until nothing is left
    /// to happen), or until `limit`. `observer` is called every
    /// [`SimConfig::sample_every`](crate::SimConfig::sample_every) of virtual time.
    pub fn run(&mut self, limit: RunLimit, observer: &mut dyn FnMut(&Sim)) -> RunSummary {
        let wall = std::time::Instant::now();
        let first = self.events;
        if let Some(every) = self.cfg.sample_every {
            self.queue.push(self.now.plus(every), Event::Sample);
        }
        for h in 0..self.host_count() {
            self.start_app(h);
        }
        for h in 0..self.host_count() {
            self.service(h);
        }
        let has_apps = self.hosts.iter().any(|h| h.app.is_some());
        loop {
            if has_apps && self.apps_running == 0 {
                break;
            }
            if self.events - first >= limit.max_events {
                break;
            }
            let Some(at) = self.queue.peek_time() else {
                break;
            };
            if at > limit.until {
                self.now = limit.until;
                break;
            }
            let Some((at, ev)) = self.queue.pop() else {
                break;
            };
            self.now = at;
            self.events += 1;
            match ev {
                Event::TxDone { port } => self.tx_done(port),
                Event::Arrive { from, pkt, epoch } => self.arrive(from, pkt, epoch),
                Event::EngineTimer { host } => self.engine_timer(host, at),
                Event::AppTimer { host } => self.app_timer(host, at),
                Event::Fault { index } => self.apply_fault(index as usize),
                Event::FlapUp { index } => {
                    if let FaultKind::LinkFlap { a, b, .. } = self.faults[index as usize].kind {
                        self.set_link(a, b, true);
                    }
                }
                Event::Sample => {
                    observer(self);
                    if let Some(every) = self.cfg.sample_every
                        && (!has_apps || self.apps_running > 0)
                    {
                        self.queue.push(at.plus(every), Event::Sample);
                    }
                }
            }
        }
        observer(self);
        RunSummary {
            events: self.events - first,
            end: self.now,
            apps_done: has_apps && self.apps_running == 0,
            wall_secs: wall.elapsed().as_secs_f64(),
        }
    }

    /// [`run`](Self::run), failing if the applications are not all done by `limit`.
    pub fn run_to_completion(
        &mut self,
        limit: RunLimit,
        observer: &mut dyn FnMut(&Sim),
    ) -> Result<RunSummary, SimError> {
        let s = self.run(limit, observer);
        if s.apps_done {
            Ok(s)
        } else {
            Err(SimError::NotDone {
                now_us: s.end.as_micros_f64(),
                events: s.events,
            })
        }
    }

    /// Put a frame on an egress port's queues and start the port if it is idle.
    pub(super) fn enqueue(&mut self, port: PortId, pkt: PacketId) {
        let p = &mut self.fabric.ports[port as usize];
        if matches!(
            p.admit(pkt, &mut self.pool, &self.cfg.wire, &mut self.rng),
            Admission::Dropped
        ) {
            return;
        }
        self.start_next(port);
    }

    fn start_next(&mut self, port: PortId) {
        let p = &mut self.fabric.ports[port as usize];
        if p.busy.is_some() || !p.up {
            return;
        }
        let Some((pkt, len, data)) = p.dequeue() else {
            return;
        };
        p.busy = Some(pkt);
        p.stats.tx_frames += 1;
        p.stats.tx_bytes += len as u64;
        p.stats.tx_data_frames += u64::from(data);
        let done = self.now.plus_ps(serialisation_ps(len, p.model.rate_gbps));
        self.queue.push(done, Event::TxDone { port });
    }

    fn tx_done(&mut self, port: PortId) {
        let p = &mut self.fabric.ports[port as usize];
        let Some(pkt) = p.busy.take() else {
            return;
        };
        let up = p.up;
        if !up || self.rng.chance(p.loss) {
            let ip = self
                .pool
                .head(pkt)
                .get(ETHERNET_HEADER_LEN..)
                .unwrap_or(&[]);
            let data = u64::from(is_data_class(ip, &self.cfg.wire));
            let p = &mut self.fabric.ports[port as usize].stats;
            if up {
                p.lost += 1;
                p.lost_data += data;
            } else {
                p.down_dropped += 1;
                p.down_dropped_data += data;
            }
            self.pool.free(pkt);
        } else {
            let mut at = self.now.plus_ps(p.model.latency_ps);
            let epoch = p.epoch;
            let imp = p.impair;
            // Impairments draw from the RNG only when set: runs without them are unchanged.
            if self.rng.chance(imp.corrupt) {
                let len = self.pool.len(pkt);
                if len > ETHERNET_HEADER_LEN {
                    let at = ETHERNET_HEADER_LEN
                        + self.rng.below((len - ETHERNET_HEADER_LEN) as u64) as usize;
                    let flip = 1 + self.rng.below(255) as u8;
                    let _ = self.pool.edit(pkt, |f| {
                        f[at] ^= flip;
                        Ok::<_, ()>(f.len())
                    });
                    self.fabric.ports[port as usize].stats.corrupted += 1;
                }
            }
            if self.rng.chance(imp.reorder) {
                at = at.plus_ps(1 + self.rng.below(imp.reorder_max_ps.max(1)));
                self.fabric.ports[port as usize].stats.reordered += 1;
            }
            if self.rng.chance(imp.duplicate) {
                let copy = self.pool.frame(pkt).to_vec();
                let twin = self.pool.alloc_copy(&copy);
                self.fabric.ports[port as usize].stats.duplicated += 1;
                self.queue.push(
                    at.plus_ps(1),
                    Event::Arrive {
                        from: port,
                        pkt: twin,
                        epoch,
                    },
                );
            }
            self.queue.push(
                at,
                Event::Arrive {
                    from: port,
                    pkt,
                    epoch,
                },
            );
        }
        self.start_next(port);
        // A host port that was full has room again: its engine may send.
        if let (Owner::Host(h), _) = self.fabric.owner[port as usize] {
            let p = &self.fabric.ports[port as usize];
            if p.queued_frames() + usize::from(p.busy.is_some()) + 1 == self.cfg.host_tx_ring {
                self.service(h);
            }
        }
    }

    fn arrive(&mut self, from: PortId, pkt: PacketId, epoch: u32) {
        let src = &self.fabric.ports[from as usize];
        if src.epoch != epoch || !src.up {
            self.lost_in_flight += 1;
            let ip = self
                .pool
                .head(pkt)
                .get(ETHERNET_HEADER_LEN..)
                .unwrap_or(&[]);
            self.lost_in_flight_data += u64::from(is_data_class(ip, &self.cfg.wire));
            self.pool.free(pkt);
            return;
        }
        let to = src.peer;
        match self.fabric.owner[to as usize] {
            (Owner::Host(h), plane) => {
                let frame = self.pool.frame(pkt);
                if is_data_class(&frame[ETHERNET_HEADER_LEN..], &self.cfg.wire) {
                    self.plane_delivered[usize::from(plane)] += frame.len() as u64;
                    self.host_delivered[h as usize] += frame.len() as u64;
                }
                if let Some(c) = self.captured.as_mut() {
                    c.push(super::Delivery {
                        at: self.now,
                        host: h,
                        plane: plane as u8,
                        frame: frame.to_vec(),
                    });
                }
                let now = self.now.instant();
                self.hosts[h as usize]
                    .ep
                    .handle_packet(now, plane as u8, frame);
                self.pool.free(pkt);
                self.service(h);
            }
            (Owner::Switch(i), _) => {
                let sw = &mut self.fabric.switches[i as usize];
                if sw.dead {
                    sw.stats.dead_dropped += 1;
                    self.pool.free(pkt);
                    return;
                }
                let id = sw.id;
                let base = sw.base;
                if let Some(out) =
                    switch::forward(&self.plan, id, self.cfg.routing, self.pool.head_mut(pkt))
                {
                    self.fabric.switches[i as usize].stats.forwarded += 1;
                    self.enqueue(base + PortId::from(out), pkt);
                } else {
                    self.fabric.switches[i as usize].stats.no_route += 1;
                    self.pool.free(pkt);
                }
            }
        }
    }

    fn link_ports(&self, a: NodeId, b: NodeId) -> Option<(PortId, PortId)> {
        let pa = self.fabric.port_towards(&self.plan, a, b)?;
        Some((pa, self.fabric.ports[pa as usize].peer))
    }

    fn set_link(&mut self, a: NodeId, b: NodeId, up: bool) {
        let Some((pa, pb)) = self.link_ports(a, b) else {
            return;
        };
        for p in [pa, pb] {
            let port = &mut self.fabric.ports[p as usize];
            if port.up == up {
                continue;
            }
            if up {
                port.up = true;
            } else {
                port.go_down(&mut self.pool);
            }
        }
        // A host sees its carrier go (or come back) and its engine reacts (brief §3.10).
        for p in [pa, pb] {
            if let (Owner::Host(h), plane) = self.fabric.owner[p as usize] {
                let now = self.now.instant();
                self.hosts[h as usize]
                    .ep
                    .handle_port_status(now, plane as u8, up);
                self.service(h);
            }
        }
    }

    fn apply_fault(&mut self, index: usize) {
        let kind = self.faults[index].kind;
        match kind {
            FaultKind::LinkDown(a, b) => self.set_link(a, b, false),
            FaultKind::LinkUp(a, b) => self.set_link(a, b, true),
            FaultKind::LinkFlap {
                a,
                b,
                period_ps,
                down_ps,
                count,
            } => {
                // One flap now; its end and the next flap are queued as it happens, the next
                // in this fault's own slot: a flap of any count costs one fault.
                self.set_link(a, b, false);
                let now = self.now;
                let i = index as u32;
                self.queue
                    .push(now.plus_ps(down_ps), Event::FlapUp { index: i });
                if count > 1 {
                    let next = now.plus_ps(period_ps);
                    self.faults[index] = Fault {
                        at: next,
                        kind: FaultKind::LinkFlap {
                            a,
                            b,
                            period_ps,
                            down_ps,
                            count: count - 1,
                        },
                    };
                    self.queue.push(next, Event::Fault { index: i });
                }
            }
            FaultKind::LinkLoss(a, b, p) => {
                if let Some((pa, pb)) = self.link_ports(a, b) {
                    self.fabric.ports[pa as usize].loss = p;
                    self.fabric.ports[pb as usize].loss = p;
                }
            }
            FaultKind::LossEverywhere(p) => {
                for port in &mut self.fabric.ports {
                    port.loss = p;
                }
            }
            FaultKind::SwitchStop(s) | FaultKind::SwitchStart(s) => {
                if self.plan.has_switch(s) {
                    let i = self.fabric.switch_index(s) as usize;
                    self.fabric.switches[i].dead = matches!(kind, FaultKind::SwitchStop(_));
                }
            }
            FaultKind::HostPortDown(h, p) | FaultKind::HostPortUp(h, p) => {
                let host = mrc_srv6::plan::HostId(h);
                if self.plan.has_host(host) && p < self.plan.planes() {
                    let a = NodeId::Host(host);
                    let t0 = self
                        .fabric
                        .node_of(self.fabric.ports[self.host_port_id(h, p) as usize].peer);
                    self.set_link(a, t0, matches!(kind, FaultKind::HostPortUp(..)));
                }
            }
            FaultKind::Impair(link, how) => {
                let ports: Vec<PortId> = match link {
                    Some((a, b)) => self
                        .link_ports(a, b)
                        .map(|(pa, pb)| vec![pa, pb])
                        .unwrap_or_default(),
                    None => (0..self.fabric.ports.len() as PortId).collect(),
                };
                for p in ports {
                    let i = &mut self.fabric.ports[p as usize].impair;
                    match how {
                        Impairment::Duplicate(x) => i.duplicate = x,
                        Impairment::Corrupt(x) => i.corrupt = x,
                        Impairment::Reorder { prob, max_delay_ps } => {
                            i.reorder = prob;
                            i.reorder_max_ps = max_delay_ps;
                        }
                    }
                }
            }
        }
    }

    fn host_port_id(&self, h: u32, plane: u8) -> PortId {
        h * u32::from(self.fabric.planes) + u32::from(plane)
    }
}
