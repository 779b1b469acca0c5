//! How a NIC thread is set up: the engine's configuration plus the runtime's own knobs.

use mrc_transport::{Duration, EndpointConfig};

use crate::ndp::{NdpConfig, NextHop};

/// What the NIC thread does when an iteration found nothing to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdlePolicy {
    /// Poll without pause (a dedicated core: DPDK's way, and the benchmark's).
    Spin,
    /// After `after` idle iterations in a row, yield the CPU once per idle iteration (cores
    /// shared with other threads: tests, laptops).
    Yield { after: u32 },
    /// After `after` idle iterations in a row, sleep up to `max` (or until the engine's next
    /// timer, if sooner) per idle iteration.
    Sleep {
        after: u32,
        max: std::time::Duration,
    },
}

impl Default for IdlePolicy {
    fn default() -> Self {
        Self::Yield { after: 64 }
    }
}

impl IdlePolicy {
    /// Pause, if the policy says so, after `idle` idle iterations in a row; `until` is how
    /// long until something is due (the engine's next timer), if known.
    pub(crate) fn pause(self, idle: u32, until: Option<std::time::Duration>) {
        match self {
            Self::Spin => std::hint::spin_loop(),
            Self::Yield { after } if idle >= after => std::thread::yield_now(),
            Self::Sleep { after, max } if idle >= after => {
                let d = until.map_or(max, |u| u.min(max));
                if d.is_zero() {
                    std::thread::yield_now();
                } else {
                    std::thread::sleep(d);
                }
            }
            _ => std::hint::spin_loop(),
        }
    }
}

/// Everything a NIC thread is built from.
#[derive(Debug, Clone)]
pub struct NicConfig {
    /// The engine. Its ports' MAC addresses are taken from the [`PacketIo`](crate::PacketIo)
    /// (the port knows its own); the next-hop MACs come from [`next_hops`](Self::next_hops).
    pub endpoint: EndpointConfig,
    /// How each port learns its next hop's MAC. Empty: static, from the endpoint's
    /// `next_hop_mac` of each port.
    pub next_hops: Vec<NextHop>,
    /// Neighbour discovery.
    pub ndp: NdpConfig,
    /// Doorbells (post_send/post_recv) waiting for the NIC thread, at most; a full ring makes
    /// `post_send` fail with `SendQueueFull` (retry later).
    pub doorbell_depth: usize,
    /// Control calls waiting, at most.
    pub command_depth: usize,
    /// Events waiting for the application, at most (more are counted and dropped).
    pub event_depth: usize,
    /// Frames sent per iteration at most, so receiving keeps up.
    pub tx_budget: usize,
    /// Doorbells taken per iteration at most.
    pub doorbell_budget: usize,
    /// How often the ports' link state is read (a link going down is seen within this).
    pub link_poll_interval: Duration,
    /// What the thread does when idle.
    pub idle: IdlePolicy,
    /// How long a control call waits for the NIC thread.
    pub control_timeout: std::time::Duration,
    /// Name of the NIC thread (when the runtime starts it).
    pub thread_name: String,
}

impl NicConfig {
    /// Defaults around `endpoint`.
    pub fn new(endpoint: EndpointConfig) -> Self {
        Self {
            endpoint,
            next_hops: Vec::new(),
            ndp: NdpConfig::default(),
            doorbell_depth: 4096,
            command_depth: 64,
            event_depth: 1024,
            tx_budget: 64,
            doorbell_budget: 256,
            link_poll_interval: Duration::from_millis(1),
            idle: IdlePolicy::default(),
            control_timeout: std::time::Duration::from_secs(10),
            thread_name: "mrc-nic".to_owned(),
        }
    }
}
