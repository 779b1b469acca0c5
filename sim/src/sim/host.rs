//! A host: its engine, its NIC ports (in the fabric's port table), its application, and how
//! the simulator drains them after every input (docs/ARCHITECTURE.md, the engine's contract):
//! `poll_transmit` while a port has TX room, then `poll_event`, then the completion queue into
//! the application (which may post more work: back to the top), then `poll_timeout`.

use mrc_transport::verbs::{CqHandle, PdHandle, WorkCompletion};
use mrc_transport::{Endpoint, Event as EngineEvent, PortMask};

use super::{EvChange, Sim};
use crate::app::Application;
use crate::queue::{Event, PortId};
use crate::time::SimTime;

/// Completions moved from the CQ per poll.
const WC_BATCH: usize = 64;

pub(super) struct Host {
    pub ep: Endpoint,
    pub pd: PdHandle,
    pub cq: CqHandle,
    pub app: Option<Box<dyn Application>>,
    pub app_started: bool,
    pub app_done: bool,
    /// The engine wake-up scheduled in the event queue.
    pub engine_timer: Option<SimTime>,
    /// The application wake-up scheduled.
    pub app_timer: Option<SimTime>,
    wcs: Vec<WorkCompletion>,
}

impl Host {
    pub fn new(ep: Endpoint, pd: PdHandle, cq: CqHandle) -> Self {
        Self {
            ep,
            pd,
            cq,
            app: None,
            app_started: false,
            app_done: false,
            engine_timer: None,
            app_timer: None,
            wcs: vec![WorkCompletion::EMPTY; WC_BATCH],
        }
    }
}

impl Sim {
    /// First port id of host `h`.
    fn host_port(&self, h: u32, plane: u8) -> PortId {
        h * u32::from(self.fabric.planes) + u32::from(plane)
    }

    /// The ports of host `h` that are up and have TX room.
    fn ready_mask(&self, h: u32) -> PortMask {
        let mut m = 0;
        for p in 0..self.fabric.planes {
            let port = &self.fabric.ports[self.host_port(h, p) as usize];
            let used = port.queued_frames() + usize::from(port.busy.is_some());
            if port.up && used < self.cfg.host_tx_ring {
                m |= 1 << p;
            }
        }
        PortMask(m)
    }

    /// Drain host `h` after an input, in the contract's order, and re-arm its timers.
    pub(super) fn service(&mut self, h: u32) {
        let now = self.now.instant();
        loop {
            self.pump_transmit(h);
            let host = &mut self.hosts[h as usize];
            while let Some(e) = host.ep.poll_event() {
                if let EngineEvent::EvState {
                    qpn,
                    ev,
                    plane,
                    from,
                    to,
                } = e
                {
                    self.ev_changes.push(EvChange {
                        at: self.now,
                        host: h,
                        qpn,
                        ev,
                        plane,
                        from,
                        to,
                    });
                }
            }
            let n = host.ep.poll_cq(host.cq, &mut host.wcs).unwrap_or(0);
            let Some(app) = host.app.as_mut().filter(|_| host.app_started) else {
                break;
            };
            for wc in &host.wcs[..n] {
                app.on_completion(now, wc, &mut host.ep);
            }
            if n == 0 {
                break;
            }
        }
        self.note_app_done(h);
        self.arm_timers(h);
    }

    /// `poll_transmit` into the pool's scratch buffer while a port has room, each frame
    /// sealed into the pool with the pattern read its engine did for it (if any).
    fn pump_transmit(&mut self, h: u32) {
        let now = self.now.instant();
        loop {
            let ready = self.ready_mask(h);
            if ready == PortMask::NONE {
                return;
            }
            let host = &mut self.hosts[h as usize];
            crate::memory::take_pattern_read();
            let Some(t) = host.ep.poll_transmit(now, ready, self.pool.scratch_mut()) else {
                return;
            };
            let pkt = self.pool.seal(t.len, crate::memory::take_pattern_read());
            let port = self.host_port(h, t.port);
            self.enqueue(port, pkt);
        }
    }

    /// Start host `h`'s application if it has not started.
    pub(super) fn start_app(&mut self, h: u32) {
        let now = self.now.instant();
        let host = &mut self.hosts[h as usize];
        if host.app_started {
            return;
        }
        let Some(app) = host.app.as_mut() else {
            return;
        };
        host.app_started = true;
        host.app_done = false;
        self.apps_running += 1;
        app.start(now, &mut host.ep);
        self.service(h);
    }

    /// The application's timer fired.
    pub(super) fn app_timer(&mut self, h: u32, at: SimTime) {
        let now = self.now.instant();
        let host = &mut self.hosts[h as usize];
        if host.app_timer != Some(at) {
            return;
        }
        host.app_timer = None;
        if let Some(app) = host.app.as_mut() {
            app.on_timer(now, &mut host.ep);
        }
        self.service(h);
    }

    /// The engine's timer fired.
    pub(super) fn engine_timer(&mut self, h: u32, at: SimTime) {
        let host = &mut self.hosts[h as usize];
        if host.engine_timer != Some(at) {
            return;
        }
        host.engine_timer = None;
        host.ep.handle_timeout(self.now.instant());
        self.service(h);
    }

    fn note_app_done(&mut self, h: u32) {
        let host = &mut self.hosts[h as usize];
        if host.app_started && !host.app_done && host.app.as_ref().is_some_and(|a| a.is_done()) {
            host.app_done = true;
            self.apps_running -= 1;
        }
    }

    /// Schedule the engine's and the application's next wake-ups when they moved earlier. A
    /// deadline already due runs one nanosecond later, so a timer that cannot make progress
    /// yet cannot spin at one instant.
    fn arm_timers(&mut self, h: u32) {
        let now = self.now;
        let soonest = now.plus_ps(1000);
        let host = &mut self.hosts[h as usize];
        if let Some(t) = host.ep.poll_timeout() {
            let at = SimTime::from_instant(t).max(soonest);
            if host.engine_timer.is_none_or(|s| at < s) {
                host.engine_timer = Some(at);
                self.queue.push(at, Event::EngineTimer { host: h });
            }
        }
        if let Some(t) = host.app.as_ref().and_then(|a| a.next_timer()) {
            let at = SimTime::from_instant(t).max(now);
            if host.app_timer.is_none_or(|s| at < s) {
                host.app_timer = Some(at);
                self.queue.push(at, Event::AppTimer { host: h });
            }
        }
    }
}
