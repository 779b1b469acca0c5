//! The NIC thread: one engine on one poll loop over a [`PacketIo`].
//!
//! Each iteration reads the clock once, then, never blocking:
//! 1. takes doorbells (post_send / post_recv) from the lock-free ring into the engine;
//! 2. runs waiting control commands;
//! 3. receives a burst per port: neighbour-discovery frames to [`Ndp`], the rest to the engine
//!    in one `Endpoint::handle_packets` call per burst, as views into the receive buffers,
//!    the next frame's headers prefetched while one is handled (DPDK's l2fwd shape, issue #13);
//! 4. tells the engine about resolved next hops, and (once per link-poll interval) about links
//!    that went up or down: a port is up for the engine when its link is up *and* its next
//!    hop's MAC is known;
//! 5. fires the engine's timers when due;
//! 6. drains the engine (neighbour discovery first) into the ports' buffers, up to a budget,
//!    on the ports with room: a burst of staged buffers (DPDK: mbufs allocated in bulk) filled
//!    by one `Endpoint::poll_transmit_burst` and committed together, no larger than every
//!    ready port takes; then flushes partial bursts (the drain timer: one iteration);
//! 7. forwards the engine's events, and moves completions to the application's CQ rings.

mod cpu;
mod state;

use std::sync::Arc;
use std::sync::atomic::Ordering;

use mrc_transport::{Endpoint, Instant, PortMask, Transmit};

use state::NicState;

use crate::config::{IdlePolicy, NicConfig};
use crate::error::NicError;
use crate::handle::NicHandle;
use crate::io::{PacketIo, TX_BURST, prefetch0};
use crate::ndp::{self, Ndp, NextHop};
use crate::shared::{NicControl, NicEvent, Shared};
use crate::status::NicStats;

/// An engine and its ports, ready to be polled: run it with [`NicRunner::run`] on the thread
/// (or DPDK lcore) of your choice, or let [`Nic::spawn`] start a thread for it.
pub struct NicRunner<P: PacketIo> {
    io: P,
    state: NicState,
    shared: Arc<Shared>,
    ports: usize,
    next_link_poll: Instant,
    idle_iterations: u32,
    tx_budget: usize,
    doorbell_budget: usize,
    link_poll_interval: mrc_transport::Duration,
    idle: IdlePolicy,
    /// Clears `running` when the runner goes (returned from `run`, dropped, or unwound).
    _running: RunningFlag,
}

impl<P: PacketIo> std::fmt::Debug for NicRunner<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NicRunner")
            .field("ports", &self.ports)
            .field("link_up", &self.state.link_up)
            .field("engine_up", &self.state.engine_up)
            .finish()
    }
}

/// What a NIC thread hands back when it stops: its ports (to close them in the right order)
/// and its final counters.
#[derive(Debug)]
pub struct NicExit<P> {
    pub io: P,
    pub stats: NicStats,
}

impl<P: PacketIo> NicRunner<P> {
    /// Builds the engine over `io`'s ports. The endpoint's port MACs are the ports' own; its
    /// next-hop MACs come from `config.next_hops` (static entries) or from neighbour discovery.
    pub fn new(config: NicConfig, mut io: P) -> Result<(Self, NicHandle), NicError> {
        let mut ep_cfg = config.endpoint;
        let ports = io.port_count();
        if ep_cfg.ports.len() != ports {
            return Err(NicError::Setup(format!(
                "the engine has {} ports, the I/O {ports}",
                ep_cfg.ports.len()
            )));
        }
        let next_hops: Vec<NextHop> = if config.next_hops.is_empty() {
            ep_cfg
                .ports
                .iter()
                .map(|p| NextHop::Static(p.next_hop_mac))
                .collect()
        } else if config.next_hops.len() == ports {
            config.next_hops
        } else {
            return Err(NicError::Setup(format!(
                "{} next hops for {ports} ports",
                config.next_hops.len()
            )));
        };
        let mut ndp_ports = Vec::with_capacity(ports);
        for (p, (port, hop)) in ep_cfg.ports.iter_mut().zip(&next_hops).enumerate() {
            port.mac = io.mac(p as u8);
            if let NextHop::Static(mac) = hop {
                port.next_hop_mac = *mac;
            }
            ndp_ports.push((port.mac, *hop));
        }
        let nic_addr = ep_cfg.nic_addr;
        let endpoint = Endpoint::new(ep_cfg)?;
        if endpoint.max_frame_len() > io.frame_room() {
            return Err(NicError::Setup(format!(
                "frames of up to {} bytes do not fit the ports' {}-byte buffers",
                endpoint.max_frame_len(),
                io.frame_room()
            )));
        }
        let shared = Arc::new(Shared::new(
            config.doorbell_depth,
            config.command_depth,
            config.event_depth,
            config.control_timeout,
        ));
        let ndp = Ndp::new(nic_addr, &ndp_ports, &config.ndp);
        let link_up = (0..ports).map(|p| io.link_up(p as u8)).collect();
        let state = NicState::new(
            endpoint,
            ndp,
            link_up,
            Arc::clone(&shared),
            config.doorbell_depth,
        );
        let mut runner = Self {
            io,
            state,
            shared: Arc::clone(&shared),
            ports,
            next_link_poll: Instant::ZERO,
            idle_iterations: 0,
            tx_budget: config.tx_budget.max(1),
            doorbell_budget: config.doorbell_budget.max(1),
            link_poll_interval: config.link_poll_interval,
            idle: config.idle,
            _running: RunningFlag(Arc::clone(&shared)),
        };
        runner.learn_neighbours(Instant::ZERO);
        for p in 0..ports as u8 {
            runner.update_port(Instant::ZERO, p);
        }
        Ok((runner, NicHandle::new(shared)))
    }

    /// Polls until [`NicHandle::request_stop`] (or [`Nic::shutdown`]); returns the ports and
    /// the final counters. Call it on the thread that owns the ports from now on.
    pub fn run(mut self) -> Result<NicExit<P>, NicError> {
        let _thread = self.io.enter_thread()?;
        while !self.shared.stop.load(Ordering::Relaxed) {
            if self.poll_once() {
                self.idle_iterations = 0;
            } else {
                self.idle_iterations = self.idle_iterations.saturating_add(1);
                let until = self.state.endpoint.poll_timeout().map(|t| {
                    std::time::Duration::from_nanos(t.0.saturating_sub(self.shared.now().0))
                });
                self.idle.pause(self.idle_iterations, until);
            }
        }
        let stats = self.stats();
        Ok(NicExit { io: self.io, stats })
    }

    /// Runs `f` on a helper thread while this thread polls, until `f` returns; for control
    /// calls (which wait for the poll loop) from a program that polls on its own thread, e.g.
    /// an application running the NIC loop and its own work on one lcore.
    pub fn poll_while<R: Send, F: FnOnce() -> R + Send>(&mut self, f: F) -> R {
        std::thread::scope(|s| {
            let helper = s.spawn(f);
            while !helper.is_finished() {
                if !self.poll_once() {
                    std::hint::spin_loop();
                }
            }
            match helper.join() {
                Ok(r) => r,
                Err(panic) => std::panic::resume_unwind(panic),
            }
        })
    }

    /// The ports (e.g. to read link state while the loop does not run).
    pub fn io(&self) -> &P {
        &self.io
    }

    /// Counters, the ports' included.
    pub fn stats(&self) -> NicStats {
        let mut s = self.state.stats();
        s.io = self.io.stats();
        s
    }

    /// One iteration of the poll loop (see the module docs); `true` if it found work.
    pub fn poll_once(&mut self) -> bool {
        let now = self.shared.now();
        self.state.stats.iterations += 1;
        let mut work = self.state.ring_doorbells(self.doorbell_budget);
        work += self.run_commands();
        work += self.receive(now);
        self.learn_neighbours(now);
        if now >= self.next_link_poll {
            self.next_link_poll = now + self.link_poll_interval;
            self.poll_links(now);
        }
        if self.state.endpoint.poll_timeout().is_some_and(|t| t <= now) {
            self.state.endpoint.handle_timeout(now);
        }
        work += self.transmit(now);
        self.io.tx_flush();
        self.forward_events();
        work += self.state.move_completions();
        if work > 0 {
            self.state.stats.busy_iterations += 1;
        }
        work > 0
    }

    fn run_commands(&mut self) -> usize {
        let mut n = 0;
        // `is_empty` first: a `pop` that finds nothing costs a full fence (issue #13).
        while n < 16 && !self.shared.commands.is_empty() {
            let Some(cmd) = self.shared.commands.pop() else {
                break;
            };
            self.state.stats.io = self.io.stats();
            cmd(&mut self.state);
            n += 1;
        }
        self.state.stats.commands += n as u64;
        n
    }

    fn receive(&mut self, now: Instant) -> usize {
        let NicState {
            endpoint,
            ndp,
            stats,
            ..
        } = &mut self.state;
        let mut n = 0;
        for p in 0..self.ports as u8 {
            n += self.io.rx_frames(p, |frames| {
                let mut to_engine = frames
                    .iter()
                    .enumerate()
                    .filter_map(|(i, &frame)| {
                        if let Some(next) = frames.get(i + 1) {
                            prefetch0(next);
                        }
                        if ndp::is_icmpv6(frame) {
                            stats.ndp_frames_in += 1;
                            ndp.handle_frame(p, frame);
                            None
                        } else {
                            stats.frames_to_engine += 1;
                            Some(frame)
                        }
                    })
                    .peekable();
                // A burst of neighbour discovery alone does not reach the engine.
                if to_engine.peek().is_some() {
                    endpoint.handle_packets(now, p, &mut to_engine);
                    stats.rx_bursts_to_engine += 1;
                }
            });
        }
        n
    }

    /// Next hops neighbour discovery resolved: into the engine's frames, and the port may be
    /// up for the engine now.
    fn learn_neighbours(&mut self, now: Instant) {
        while let Some((port, mac)) = self.state.ndp.poll_resolved() {
            tracing::debug!(port, %mac, "next hop resolved");
            self.state.endpoint.set_next_hop_mac(port, mac);
            self.shared
                .push_event(NicEvent::NeighbourResolved { port, mac });
            self.update_port(now, port);
        }
    }

    fn poll_links(&mut self, now: Instant) {
        for p in 0..self.ports {
            let up = self.io.link_up(p as u8);
            if up != self.state.link_up[p] {
                tracing::debug!(port = p, up, "link");
                self.state.link_up[p] = up;
                self.state.stats.link_changes += 1;
                self.shared.push_event(NicEvent::Link { port: p as u8, up });
                self.update_port(now, p as u8);
            }
        }
    }

    /// Tells the engine when a port's usability changed (link up and next hop known).
    fn update_port(&mut self, now: Instant, port: u8) {
        let p = usize::from(port);
        let up = self.state.link_up[p] && self.state.ndp.neighbour(port).is_some();
        if up != self.state.engine_up[p] {
            tracing::debug!(port, up, "port usable for the engine");
            self.state.engine_up[p] = up;
            self.state.endpoint.handle_port_status(now, port, up);
        }
    }

    fn transmit(&mut self, now: Instant) -> usize {
        let engine_ports = self
            .state
            .engine_up
            .iter()
            .enumerate()
            .fold(0_u32, |m, (p, &up)| if up { m | 1 << p } else { m });
        let mut ndp_due = self.state.ndp.has_output(now);
        let mut out = [Transmit { len: 0, port: 0 }; TX_BURST];
        let mut sent = 0;
        while sent < self.tx_budget {
            let (ready, room) = self.io.tx_room();
            if ready.0 == 0 {
                break;
            }
            if ndp_due {
                let Some(buf) = self.io.tx_buffers(1).first_mut() else {
                    break;
                };
                if let Some((port, len)) = self.state.ndp.poll_transmit(now, ready, buf.as_mut()) {
                    self.io.tx_commit_burst(&[Transmit { len, port }]);
                    self.state.stats.ndp_frames_out += 1;
                    sent += 1;
                    continue;
                }
                ndp_due = false;
            }
            let ready = PortMask(ready.0 & engine_ports);
            if ready.0 == 0 {
                break;
            }
            // No more than every ready port takes: the engine may put the whole burst on one.
            let want = room.min(self.tx_budget - sent).min(TX_BURST);
            let bufs = self.io.tx_buffers(want);
            let staged = bufs.len();
            if staged == 0 {
                break;
            }
            let n = self
                .state
                .endpoint
                .poll_transmit_burst(now, ready, bufs, &mut out);
            self.io.tx_commit_burst(&out[..n]);
            self.state.stats.frames_from_engine += n as u64;
            self.state.stats.tx_bursts_from_engine += u64::from(n > 0);
            sent += n;
            // Nothing more due, or no more buffers.
            if n < staged || staged < want {
                break;
            }
        }
        sent
    }

    fn forward_events(&mut self) {
        while let Some(e) = self.state.endpoint.poll_event() {
            self.shared.push_event(NicEvent::Engine(e));
        }
    }
}

/// Clears `running` when the runner ends (its loop returned, it was dropped, or a panic
/// unwound it), and drops the control commands still queued so that their callers get
/// [`NicError::Stopped`] at once.
struct RunningFlag(Arc<Shared>);

impl Drop for RunningFlag {
    fn drop(&mut self) {
        self.0.running.store(false, Ordering::Release);
        while self.0.commands.pop().is_some() {}
    }
}

/// A NIC thread started by the runtime: one engine polling its ports on a `std` thread.
/// Stopped and joined on [`shutdown`](Self::shutdown) or drop.
#[derive(Debug)]
pub struct Nic<P: PacketIo + 'static> {
    thread: Option<std::thread::JoinHandle<Result<NicExit<P>, NicError>>>,
    shared: Arc<Shared>,
    /// The thread's id in `/proc` (Linux), for [`cpu_time`](Self::cpu_time).
    tid: Option<u32>,
}

impl<P: PacketIo + 'static> Nic<P> {
    /// Starts a NIC thread over `io` and returns it with a handle for the application.
    pub fn spawn(config: NicConfig, io: P) -> Result<(Self, NicHandle), NicError> {
        let name = config.thread_name.clone();
        let (runner, handle) = NicRunner::new(config, io)?;
        let shared = Arc::clone(&runner.shared);
        let (tid_tx, tid_rx) = std::sync::mpsc::sync_channel(1);
        let thread = std::thread::Builder::new().name(name).spawn(move || {
            let _ = tid_tx.send(cpu::current_tid());
            runner.run()
        })?;
        let tid = tid_rx.recv().ok().flatten();
        Ok((
            Self {
                thread: Some(thread),
                shared,
                tid,
            },
            handle,
        ))
    }

    /// Whether the NIC thread is still polling.
    pub fn is_running(&self) -> bool {
        self.shared.is_running()
    }

    /// CPU time the NIC thread has used since it started (Linux; `None` elsewhere or once
    /// it ended). Over a run, its growth ÷ the wall time is the share of a core the NIC took.
    pub fn cpu_time(&self) -> Option<std::time::Duration> {
        self.tid.and_then(cpu::thread_cpu_time)
    }

    /// Stops the NIC thread and waits for it; returns its ports and final counters.
    pub fn shutdown(mut self) -> Result<NicExit<P>, NicError> {
        self.shared.stop.store(true, Ordering::Relaxed);
        let thread = self.thread.take().ok_or(NicError::Stopped)?;
        thread.join().map_err(|_| NicError::Panicked)?
    }
}

impl<P: PacketIo + 'static> Drop for Nic<P> {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
