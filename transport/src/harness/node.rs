//! What the harness drives: anything with the engine's sans-IO contract (docs/ARCHITECTURE.md,
//! "The engine's contract"), and a raw node that sends scripted frames and records what it
//! receives, for testing the network model (and for feeding hand-made frames to an engine).

use core::fmt;
use std::collections::VecDeque;

use crate::time::Instant;
use crate::{Endpoint, Event, PortMask, Transmit};

/// The sans-IO contract, as the harness uses it: the [`Endpoint`]'s own signatures. Ports are
/// numbered from 0; `ready` holds the ports that are up and have TX room.
pub trait Node {
    /// Asynchronous events the node reports (port changes, QP errors, EV state changes).
    type Event: fmt::Debug;

    /// A frame arrived on `port`.
    fn handle_packet(&mut self, now: Instant, port: u8, frame: &[u8]);
    /// Write the next frame to send into `buf`, on one of the `ready` ports.
    fn poll_transmit(&mut self, now: Instant, ready: PortMask, buf: &mut [u8]) -> Option<Transmit>;
    /// When the node next wants [`Node::handle_timeout`].
    fn poll_timeout(&mut self) -> Option<Instant>;
    /// The time asked for by [`Node::poll_timeout`] has come.
    fn handle_timeout(&mut self, now: Instant);
    /// A port went up or down.
    fn handle_port_status(&mut self, now: Instant, port: u8, up: bool);
    /// The next asynchronous event, if any.
    fn poll_event(&mut self) -> Option<Self::Event>;
}

/// What a [`RawNode`] reports as events: nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoEvent {}

/// A node that sends the frames it is given, at the times it is given, and keeps every frame it
/// receives. It has no timers of its own beyond its send schedule.
#[derive(Debug, Default)]
pub struct RawNode {
    /// Frames waiting to leave: (not before, port, bytes), in order.
    outbox: VecDeque<(Instant, u8, Vec<u8>)>,
    /// Every frame received: (when, port, bytes).
    pub received: Vec<(Instant, u8, Vec<u8>)>,
    /// Port status changes seen: (when, port, up).
    pub port_changes: Vec<(Instant, u8, bool)>,
    /// The latest time the harness told this node about.
    now: Instant,
}

impl RawNode {
    /// A node with nothing to send.
    pub fn new() -> Self {
        Self::default()
    }

    /// Queue `frame` to leave on `port` as soon as possible.
    pub fn send(&mut self, port: u8, frame: Vec<u8>) {
        self.send_at(Instant::ZERO, port, frame);
    }

    /// Queue `frame` to leave on `port` at `at` or later (frames leave in the order queued).
    pub fn send_at(&mut self, at: Instant, port: u8, frame: Vec<u8>) {
        self.outbox.push_back((at, port, frame));
    }

    /// Frames still waiting to leave.
    pub fn pending(&self) -> usize {
        self.outbox.len()
    }
}

impl Node for RawNode {
    type Event = NoEvent;

    fn handle_packet(&mut self, now: Instant, port: u8, frame: &[u8]) {
        self.now = now;
        self.received.push((now, port, frame.to_vec()));
    }

    fn poll_transmit(&mut self, now: Instant, ready: PortMask, buf: &mut [u8]) -> Option<Transmit> {
        self.now = now;
        let &(at, port, ref frame) = self.outbox.front()?;
        if at > now || !ready.contains(port) {
            return None;
        }
        let len = frame.len().min(buf.len());
        buf[..len].copy_from_slice(&frame[..len]);
        self.outbox.pop_front();
        Some(Transmit { len, port })
    }

    // Only a future send time is a timer; a frame that is due but blocked on its port waits for
    // the port to become ready, which the harness signals by polling again.
    fn poll_timeout(&mut self) -> Option<Instant> {
        self.outbox
            .front()
            .map(|&(at, _, _)| at)
            .filter(|&at| at > self.now)
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.now = now;
    }

    fn handle_port_status(&mut self, now: Instant, port: u8, up: bool) {
        self.now = now;
        self.port_changes.push((now, port, up));
    }

    fn poll_event(&mut self) -> Option<NoEvent> {
        None
    }
}

impl Node for Endpoint {
    type Event = Event;

    fn handle_packet(&mut self, now: Instant, port: u8, frame: &[u8]) {
        Endpoint::handle_packet(self, now, port, frame);
    }

    fn poll_transmit(&mut self, now: Instant, ready: PortMask, buf: &mut [u8]) -> Option<Transmit> {
        Endpoint::poll_transmit(self, now, ready, buf)
    }

    fn poll_timeout(&mut self) -> Option<Instant> {
        Endpoint::poll_timeout(self)
    }

    fn handle_timeout(&mut self, now: Instant) {
        Endpoint::handle_timeout(self, now);
    }

    fn handle_port_status(&mut self, now: Instant, port: u8, up: bool) {
        Endpoint::handle_port_status(self, now, port, up);
    }

    fn poll_event(&mut self) -> Option<Event> {
        Endpoint::poll_event(self)
    }
}
