//! What a QP borrows from its endpoint while it handles an input or produces an output: the
//! configuration, memory regions, completion queues, congestion controllers, events and
//! endpoint counters. The endpoint splits its fields into a `Ctx` and the QP, so QP code never
//! reaches into other QPs.

use core::net::Ipv6Addr;

use crate::cc::Controller;
use crate::config::EndpointConfig;
use crate::event::{Event, EventQueue};
use crate::slab::Slab;
use crate::stats::{DropReason, EndpointStats, PlaneStats};
use crate::time::Instant;
use crate::verbs::{Cq, CqHandle, MrTable, WorkCompletion};

/// A congestion controller and the QPs it governs (the spec's QPCC, one per destination).
#[derive(Debug)]
pub(crate) struct CcSlot {
    pub remote: Ipv6Addr,
    pub profile: u16,
    /// Shared by every QP towards `remote` with this profile (MRC); private for RoCE-like QPs.
    pub shared: bool,
    /// Statically dispatched (issue #13).
    pub ctrl: Controller,
    /// Nominal bytes in flight over all its QPs.
    pub inflight: u64,
    pub refs: u32,
    /// QPs (endpoint slot indices) with data that waits for room in this window: another
    /// QP's acknowledgements make the room, so they wake these ([`Self::take_waiting`]).
    pub waiting: Vec<u32>,
}

impl CcSlot {
    /// QP `idx` waits for room in this window.
    pub fn wait(&mut self, idx: u32) {
        if !self.waiting.contains(&idx) {
            self.waiting.push(idx);
        }
    }

    /// The waiting QPs, if the window has room again (they go back to the transmit queue;
    /// one still short of room waits again).
    pub fn take_waiting(&mut self, into: &mut Vec<u32>) {
        if !self.waiting.is_empty() && self.inflight < self.ctrl.window() {
            into.append(&mut self.waiting);
        }
    }

    /// Whether a packet of `nominal` bytes fits the window now (one packet always may leave
    /// when nothing is in flight).
    pub fn window_allows(&self, nominal: u64) -> bool {
        self.inflight == 0 || self.inflight + nominal <= self.ctrl.window()
    }
}

/// Every congestion controller of an endpoint.
#[derive(Debug, Default)]
pub(crate) struct CcTable {
    slots: Vec<Option<CcSlot>>,
}

impl CcTable {
    /// The controller for `remote` with `profile`: an existing shared one, or a new one.
    pub fn attach(
        &mut self,
        remote: Ipv6Addr,
        profile: u16,
        shared: bool,
        build: impl FnOnce() -> Controller,
    ) -> usize {
        if shared
            && let Some(i) = self.slots.iter().position(|s| {
                s.as_ref()
                    .is_some_and(|s| s.shared && s.remote == remote && s.profile == profile)
            })
        {
            if let Some(s) = self.slots[i].as_mut() {
                s.refs += 1;
                // Room for every sharer to wait, so the datapath never grows it.
                s.waiting.reserve(s.refs as usize);
            }
            return i;
        }
        let slot = CcSlot {
            remote,
            profile,
            shared,
            ctrl: build(),
            inflight: 0,
            refs: 1,
            waiting: Vec::with_capacity(1),
        };
        if let Some(i) = self.slots.iter().position(Option::is_none) {
            self.slots[i] = Some(slot);
            i
        } else {
            self.slots.push(Some(slot));
            self.slots.len() - 1
        }
    }

    /// A QP stops using controller `i`, taking `inflight` nominal bytes with it.
    pub fn detach(&mut self, i: usize, inflight: u64) {
        if let Some(Some(s)) = self.slots.get_mut(i) {
            s.inflight = s.inflight.saturating_sub(inflight);
            s.refs -= 1;
            if s.refs == 0 {
                self.slots[i] = None;
            }
        }
    }

    pub fn get(&self, i: usize) -> Option<&CcSlot> {
        self.slots.get(i)?.as_ref()
    }

    pub fn get_mut(&mut self, i: usize) -> Option<&mut CcSlot> {
        self.slots.get_mut(i)?.as_mut()
    }

    pub fn heap_bytes(&self) -> usize {
        self.slots.capacity() * size_of::<Option<CcSlot>>()
    }
}

/// The endpoint state a QP may touch.
pub(crate) struct Ctx<'a> {
    pub cfg: &'a EndpointConfig,
    pub mrs: &'a mut MrTable,
    pub cqs: &'a mut Slab<Cq>,
    /// CQs given a completion since the owner last took the list.
    pub ready_cqs: &'a mut Vec<CqHandle>,
    pub ccs: &'a mut CcTable,
    pub events: &'a mut EventQueue,
    pub stats: &'a mut EndpointStats,
    pub planes: &'a mut [PlaneStats],
    /// Local ports up (bit i = port i).
    pub ports_up: u32,
    /// The latest time the endpoint was given (the verbs carry none).
    pub now: Instant,
}

impl Ctx<'_> {
    /// Count a dropped input.
    pub fn drop_frame(&mut self, reason: DropReason) {
        self.stats.drops.add(reason);
    }

    /// Post a completion to a CQ (an overrun is counted and reported). Inlined: a completion
    /// passed by pointer was built piecewise and read back whole, a store-forwarding stall per
    /// signalled work request (issue #13).
    #[inline(always)]
    pub fn complete(&mut self, cq: CqHandle, wc: WorkCompletion) {
        let Some(q) = self.cqs.get_mut(cq.0) else {
            return;
        };
        if !q.push(wc) {
            self.stats.cq_overruns += 1;
            self.events.push(Event::CqOverrun { cq });
        } else if !q.listed {
            q.listed = true;
            self.ready_cqs.push(cq);
        }
    }

    pub fn plane(&mut self, port: u8) -> Option<&mut PlaneStats> {
        self.planes.get_mut(usize::from(port))
    }
}
