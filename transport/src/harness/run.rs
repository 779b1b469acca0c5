//! The harness's event loop: draining nodes, NIC ports, routing, path queues and links.

use core::hash::{Hash, Hasher};

use super::event::{DropReason, Event, TraceEvent};
use super::path::{Admission, FrameInfo, chance, serialisation, uniform};
use super::{Bound, Harness, HarnessError, MAX_BURST, Node, NodeId, PathId};
use crate::PortMask;
use crate::time::Duration;

/// FNV-1a as a [`Hasher`]: stable across runs and platforms, unlike std's default.
struct Fnv(u64);

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

impl<N: Node> Harness<N> {
    /// Run until nothing is left to happen (no frame anywhere, no timer pending).
    pub fn run_until_idle(&mut self, bound: Bound) -> Result<(), HarnessError> {
        self.run(bound, |_| false).map(|_| ())
    }

    /// Run until `done` holds. It is checked before every event and may call the nodes (to
    /// drain completion queues, say). Fails if the bound is reached first, or if the network
    /// goes idle with `done` still false.
    pub fn run_until(
        &mut self,
        bound: Bound,
        done: impl FnMut(&mut Self) -> bool,
    ) -> Result<(), HarnessError> {
        if self.run(bound, done)? {
            Ok(())
        } else {
            Err(HarnessError::IdleBeforeDone { now: self.now })
        }
    }

    /// The loop of both: `Ok(true)` when `done`, `Ok(false)` when idle.
    fn run(
        &mut self,
        bound: Bound,
        mut done: impl FnMut(&mut Self) -> bool,
    ) -> Result<bool, HarnessError> {
        let deadline = self.now + bound.time;
        self.drain_all();
        let mut processed = 0u64;
        loop {
            if done(self) {
                return Ok(true);
            }
            let Some(at) = self.queue.peek_time() else {
                return Ok(false);
            };
            if at > deadline || processed >= bound.events {
                return Err(HarnessError::BoundReached {
                    now: self.now,
                    events: processed,
                    pending: self.queue.len(),
                });
            }
            self.step();
            processed += 1;
        }
    }

    /// Run every event up to `now + d`, then move the clock there. Never fails: the time is the
    /// bound.
    pub fn run_for(&mut self, d: Duration) {
        let end = self.now + d;
        self.drain_all();
        while self.queue.peek_time().is_some_and(|at| at <= end) {
            self.step();
        }
        self.now = end;
    }

    /// Process the next event. Returns `false` if there was none.
    pub fn step(&mut self) -> bool {
        let Some((at, event)) = self.queue.pop() else {
            return false;
        };
        self.now = self.now.max(at);
        match event {
            Event::Poll { node } => self.drain(node),
            Event::Timeout { node, generation } => {
                let slot = &mut self.nodes[node.0];
                if slot.timer_generation == generation {
                    slot.timer = None;
                    self.record(TraceEvent::Timeout { node });
                    self.nodes[node.0].node.handle_timeout(self.now);
                    self.drain(node);
                }
            }
            Event::PortTxDone { node, port } => self.port_tx_done(node, port),
            Event::PathTxDone { path } => self.path_tx_done(path),
            Event::Deliver { path, epoch, frame } => {
                if epoch == self.paths[path.0].epoch {
                    let p = &mut self.paths[path.0];
                    p.stats.delivered += 1;
                    p.stats.delivered_bytes += frame.len() as u64;
                    let ends = self.ends[path.0];
                    self.receive(ends.to, ends.port, &frame);
                } else {
                    self.paths[path.0].stats.dropped_down += 1;
                    self.record(TraceEvent::Drop {
                        path: Some(path),
                        reason: DropReason::Down,
                    });
                }
            }
            Event::Inject { node, port, frame } => self.receive(node, port, &frame),
            Event::PathState { path, up } => {
                self.record(TraceEvent::Path { path, up });
                if up {
                    self.paths[path.0].up = true;
                } else {
                    self.paths[path.0].go_down();
                }
            }
            Event::PortState { node, port, up } => self.port_state(node, port, up),
        }
        true
    }

    /// Drain every node (a run may start after verbs calls made work).
    fn drain_all(&mut self) {
        for i in 0..self.nodes.len() {
            self.drain(NodeId(i));
        }
    }

    /// The contract's drain order: transmissions, then events, then the timer.
    fn drain(&mut self, id: NodeId) {
        let now = self.now;
        let mut sent = 0;
        loop {
            let ready = self.ready_mask(id);
            if ready == PortMask::NONE {
                break;
            }
            if sent == MAX_BURST {
                // Come back after what is already due, so bounds are checked in between.
                self.queue.push(now, Event::Poll { node: id });
                break;
            }
            let Some(t) = self.nodes[id.0]
                .node
                .poll_transmit(now, ready, &mut self.buf)
            else {
                break;
            };
            let frame = self.buf[..t.len.min(self.buf.len())].to_vec();
            self.transmit(id, t.port, frame);
            sent += 1;
        }
        while let Some(e) = self.nodes[id.0].node.poll_event() {
            self.events.push((now, id, e));
        }
        let slot = &mut self.nodes[id.0];
        let timer = slot.node.poll_timeout();
        if timer != slot.timer {
            slot.timer = timer;
            slot.timer_generation += 1;
            if let Some(at) = timer {
                let generation = slot.timer_generation;
                self.queue.push(
                    at.max(now),
                    Event::Timeout {
                        node: id,
                        generation,
                    },
                );
            }
        }
    }

    fn ready_mask(&self, id: NodeId) -> PortMask {
        let bits = self.nodes[id.0]
            .ports
            .iter()
            .enumerate()
            .take(32)
            .filter(|(_, p)| p.up && p.ring.len() < p.model.tx_ring)
            .fold(0, |m, (i, _)| m | 1 << i);
        PortMask(bits)
    }

    /// A node handed a frame to its NIC port.
    fn transmit(&mut self, id: NodeId, port: u8, frame: Vec<u8>) {
        self.record(TraceEvent::Transmit {
            node: id,
            port,
            len: frame.len(),
        });
        let Some(p) = self.nodes[id.0].ports.get_mut(usize::from(port)) else {
            self.record(TraceEvent::Drop {
                path: None,
                reason: DropReason::Down,
            });
            return;
        };
        p.stats.tx_frames += 1;
        p.stats.tx_bytes += frame.len() as u64;
        if !p.up {
            p.stats.dropped += 1;
            self.record(TraceEvent::Drop {
                path: None,
                reason: DropReason::Down,
            });
            return;
        }
        if p.model.rate_bps == 0 {
            self.route(id, port, frame);
            return;
        }
        p.ring.push_back(frame);
        self.start_port(id, port);
    }

    fn start_port(&mut self, id: NodeId, port: u8) {
        let p = &mut self.nodes[id.0].ports[usize::from(port)];
        if p.busy {
            return;
        }
        if let Some(len) = p.ring.front().map(Vec::len) {
            p.busy = true;
            let at = self.now + serialisation(len, p.model.rate_bps);
            self.queue.push(at, Event::PortTxDone { node: id, port });
        }
    }

    fn port_tx_done(&mut self, id: NodeId, port: u8) {
        let p = &mut self.nodes[id.0].ports[usize::from(port)];
        p.busy = false;
        let was_full = p.ring.len() >= p.model.tx_ring;
        let Some(frame) = p.ring.pop_front() else {
            return;
        };
        self.route(id, port, frame);
        self.start_port(id, port);
        if was_full {
            self.drain(id);
        }
    }

    /// Pick the path a frame leaving `from` on `port` takes, and offer it to that path.
    fn route(&mut self, from: NodeId, port: u8, frame: Vec<u8>) {
        let Some(path) = self.pick_path(from, port, &frame) else {
            self.unroutable += 1;
            self.record(TraceEvent::Drop {
                path: None,
                reason: DropReason::Unroutable,
            });
            return;
        };
        let admission = self.paths[path.0].admit(frame, &self.cfg.wire, &mut self.rng);
        match admission {
            Admission::Queued {
                len,
                marked,
                trimmed,
            } => {
                self.record(TraceEvent::Enqueue {
                    path,
                    len,
                    marked,
                    trimmed,
                });
                self.start_path(path);
            }
            Admission::TailDropped => self.record(TraceEvent::Drop {
                path: Some(path),
                reason: DropReason::TailDrop,
            }),
            Admission::Down => self.record(TraceEvent::Drop {
                path: Some(path),
                reason: DropReason::Down,
            }),
        }
    }

    fn pick_path(&self, from: NodeId, port: u8, frame: &[u8]) -> Option<PathId> {
        let routes = self.routes.get(&(from, port))?;
        let info = FrameInfo::read(frame, &self.cfg.wire)?;
        let route = if let [only] = routes.as_slice() {
            only
        } else {
            routes
                .iter()
                .find(|r| self.nodes[r.to.0].addr == Some(info.final_dst))?
        };
        Some(route.paths[route.select.select(&info, route.paths.len())])
    }

    fn start_path(&mut self, path: PathId) {
        let p = &mut self.paths[path.0];
        if p.busy {
            return;
        }
        if let Some(frame) = p.dequeue() {
            p.busy = true;
            let at = self.now + serialisation(frame.len(), p.model.rate_bps);
            self.serving[path.0] = Some((frame, p.epoch));
            self.queue.push(at, Event::PathTxDone { path });
        }
    }

    /// The link: loss, latency, reordering, duplication (in that order of draws).
    fn path_tx_done(&mut self, path: PathId) {
        self.paths[path.0].busy = false;
        if let Some((frame, epoch)) = self.serving[path.0].take() {
            let p = &mut self.paths[path.0];
            if epoch != p.epoch {
                p.stats.dropped_down += 1;
                self.record(TraceEvent::Drop {
                    path: Some(path),
                    reason: DropReason::Down,
                });
            } else if chance(&mut self.rng, p.model.loss) {
                p.stats.lost += 1;
                self.record(TraceEvent::Drop {
                    path: Some(path),
                    reason: DropReason::Lost,
                });
            } else {
                let mut at = self.now + p.model.latency;
                if chance(&mut self.rng, p.model.reorder) {
                    p.stats.reordered += 1;
                    at += Duration(uniform(&mut self.rng, p.model.reorder_delay.as_nanos()));
                    self.record(TraceEvent::Reorder { path });
                }
                let p = &mut self.paths[path.0];
                if chance(&mut self.rng, p.model.duplicate) {
                    p.stats.duplicated += 1;
                    let copy = Event::Deliver {
                        path,
                        epoch,
                        frame: frame.clone(),
                    };
                    self.queue.push(at, copy);
                    self.record(TraceEvent::Duplicate { path });
                }
                self.queue.push(at, Event::Deliver { path, epoch, frame });
            }
        }
        self.start_path(path);
    }

    /// A frame reaches `node` on `port`.
    fn receive(&mut self, node: NodeId, port: u8, frame: &[u8]) {
        let Some(p) = self.nodes[node.0].ports.get_mut(usize::from(port)) else {
            return;
        };
        if !p.up {
            p.stats.dropped += 1;
            self.record(TraceEvent::Drop {
                path: None,
                reason: DropReason::Down,
            });
            return;
        }
        p.stats.rx_frames += 1;
        p.stats.rx_bytes += frame.len() as u64;
        self.record(TraceEvent::Deliver {
            node,
            port,
            len: frame.len(),
        });
        self.nodes[node.0].node.handle_packet(self.now, port, frame);
        self.drain(node);
    }

    fn port_state(&mut self, node: NodeId, port: u8, up: bool) {
        self.record(TraceEvent::Port { node, port, up });
        let Some(p) = self.nodes[node.0].ports.get_mut(usize::from(port)) else {
            return;
        };
        p.up = up;
        if !up {
            // What waited in the ring is lost; a frame being serialised still leaves.
            let keep = usize::from(p.busy);
            let lost = p.ring.len().saturating_sub(keep);
            p.ring.truncate(keep);
            p.stats.dropped += lost as u64;
        }
        self.nodes[node.0]
            .node
            .handle_port_status(self.now, port, up);
        self.drain(node);
    }

    fn record(&mut self, event: TraceEvent) {
        let mut h = Fnv(self.digest);
        self.now.hash(&mut h);
        event.hash(&mut h);
        self.digest = h.finish();
        if self.cfg.trace {
            self.trace.push((self.now, event));
        }
    }
}
