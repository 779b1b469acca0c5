//! One direction of one path: a switch egress queue in front of a link. What a frame meets on
//! its way, in order:
//!
//! 1. admission: a down path drops it; control and trimmed frames go to a strict-priority queue;
//!    data that does not fit the queue is trimmed to the trim size with the trimmed DSCP
//!    ([`crate::wire::trim_frame`], what a trimming switch does, brief §5.3) or tail-dropped; data that fits may be ECN-marked,
//!    RED-style between two thresholds (RFC 3168: only ECN-capable frames get CE);
//! 2. serialisation at the path's rate;
//! 3. the link: random loss, propagation latency, random extra delay (reordering), random
//!    duplication.
//!
//! Frames are read, never reparsed by hand: the outer headers through `mrc_srv6::wire`, the rest
//! through [`crate::wire::parse_frame`].

use core::net::Ipv6Addr;
use std::collections::VecDeque;

use mrc_srv6::wire::{ETHERNET_HEADER_LEN, Ecn, EthernetFrame, EthernetProtocol, Ipv6Packet};

use crate::rng::Rng;
use crate::time::Duration;
use crate::wire::{Trimmed, WireConfig, parse_frame, trim_frame};

/// How a full queue treats data that does not fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TrimMode {
    /// Drop it (tail drop).
    Off,
    /// Trim it and rewrite the DSCP to the trimmed code point (NACK TRIMMED).
    #[default]
    InFabric,
    /// Trim it with the last-hop code point (NACK TRIMMED_LASTHOP).
    LastHop,
}

/// RED-style ECN marking: never at or below `min_bytes` queued, always at or above `max_bytes`,
/// with a probability rising linearly in between.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EcnMarking {
    pub min_bytes: u64,
    pub max_bytes: u64,
}

/// Everything about one direction of a path. Probabilities are in `[0, 1]`.
#[derive(Debug, Clone, PartialEq)]
pub struct PathModel {
    /// Serialisation rate, bits per second; 0 = infinitely fast.
    pub rate_bps: u64,
    /// Propagation latency.
    pub latency: Duration,
    /// Capacity of the data queue, bytes (the priority queue has the same capacity).
    pub queue_bytes: u64,
    /// ECN marking on the data queue, or none.
    pub ecn: Option<EcnMarking>,
    /// What happens to data that finds the queue full.
    pub trim: TrimMode,
    /// A frame is lost on the link.
    pub loss: f64,
    /// A frame is delayed by an extra uniform `0..=reorder_delay`, so later frames overtake it.
    pub reorder: f64,
    pub reorder_delay: Duration,
    /// A frame is delivered twice.
    pub duplicate: f64,
}

impl Default for PathModel {
    /// 100 Gb/s, 2 µs, a 128 KB queue marking from 32 KB to 96 KB, trimming, no impairments.
    fn default() -> Self {
        Self {
            rate_bps: 100_000_000_000,
            latency: Duration::from_micros(2),
            queue_bytes: 128 * 1024,
            ecn: Some(EcnMarking {
                min_bytes: 32 * 1024,
                max_bytes: 96 * 1024,
            }),
            trim: TrimMode::InFabric,
            loss: 0.0,
            reorder: 0.0,
            reorder_delay: Duration::ZERO,
            duplicate: 0.0,
        }
    }
}

/// Counters of one path direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PathStats {
    pub enqueued: u64,
    pub enqueued_bytes: u64,
    pub delivered: u64,
    pub delivered_bytes: u64,
    pub ecn_marked: u64,
    pub trimmed: u64,
    pub tail_dropped: u64,
    pub lost: u64,
    pub reordered: u64,
    pub duplicated: u64,
    /// Dropped because the path was down (at admission, queued, or on the wire).
    pub dropped_down: u64,
}

/// The fields of a frame the network looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameInfo {
    /// The outer (SRv6 mode) or only (ECMP mode) IPv6 header's addresses.
    pub outer_src: Ipv6Addr,
    pub outer_dst: Ipv6Addr,
    pub flow_label: u32,
    pub dscp: u8,
    pub ecn: Ecn,
    /// The destination NIC: the inner DA in SRv6 mode, else the outer DA.
    pub final_dst: Ipv6Addr,
    /// The UDP source port, when the MRC headers could be read.
    pub udp_sport: Option<u16>,
}

impl FrameInfo {
    /// Read `frame`; `None` if it is not Ethernet + IPv6.
    pub fn read(frame: &[u8], wire: &WireConfig) -> Option<Self> {
        let eth = EthernetFrame::new_checked(frame).ok()?;
        if eth.ethertype() != EthernetProtocol::Ipv6 {
            return None;
        }
        let ip = Ipv6Packet::new_checked(frame.get(ETHERNET_HEADER_LEN..)?).ok()?;
        let lenient = WireConfig {
            verify_icrc: false,
            ..*wire
        };
        let parsed = parse_frame(frame, &lenient).ok();
        Some(Self {
            outer_src: ip.src_addr(),
            outer_dst: ip.dst_addr(),
            flow_label: ip.flow_label(),
            dscp: ip.dscp().0,
            ecn: ip.ecn(),
            final_dst: parsed
                .and_then(|f| f.inner.map(|i| i.dst_addr))
                .unwrap_or(ip.dst_addr()),
            udp_sport: parsed.map(|f| f.udp.src_port),
        })
    }
}

/// How a sender's frames are spread over the paths between two ports.
#[derive(Clone)]
pub enum PathSelect {
    /// Hash of addresses, flow label and UDP source port, as an ECMP switch does (brief §8).
    EcmpHash,
    /// Hash of the outer destination address: in SRv6 mode the DA names the path (brief §2.16).
    OuterDaHash,
    /// The caller's choice; the result is taken modulo the number of paths.
    Custom(std::sync::Arc<dyn Fn(&FrameInfo) -> usize + Send + Sync>),
}

impl core::fmt::Debug for PathSelect {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::EcmpHash => f.write_str("EcmpHash"),
            Self::OuterDaHash => f.write_str("OuterDaHash"),
            Self::Custom(_) => f.write_str("Custom(..)"),
        }
    }
}

/// FNV-1a over `bytes`, then a final mix: a stable hash (no per-process random state).
fn stable_hash(bytes: &[u8]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for &b in bytes {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^ (h >> 33)
}

impl PathSelect {
    /// Index of the path, among `n`, that carries a frame with these fields.
    pub fn select(&self, info: &FrameInfo, n: usize) -> usize {
        if n <= 1 {
            return 0;
        }
        let h = match self {
            Self::EcmpHash => {
                let mut key = [0u8; 38];
                key[..16].copy_from_slice(&info.outer_src.octets());
                key[16..32].copy_from_slice(&info.outer_dst.octets());
                key[32..36].copy_from_slice(&info.flow_label.to_be_bytes());
                key[36..].copy_from_slice(&info.udp_sport.unwrap_or(0).to_be_bytes());
                stable_hash(&key)
            }
            Self::OuterDaHash => stable_hash(&info.outer_dst.octets()),
            Self::Custom(f) => return f(info) % n,
        };
        (h % n as u64) as usize
    }
}

/// Draw `true` with probability `p`.
pub(super) fn chance(rng: &mut Rng, p: f64) -> bool {
    p > 0.0 && ((rng.next_u64() >> 11) as f64) < p * (1u64 << 53) as f64
}

/// A uniform draw from `0..=max`.
pub(super) fn uniform(rng: &mut Rng, max: u64) -> u64 {
    if max == u64::MAX {
        rng.next_u64()
    } else {
        rng.next_u64() % (max + 1)
    }
}

/// Time to serialise `len` bytes at `rate_bps` (0 = instant), rounded up.
pub(super) fn serialisation(len: usize, rate_bps: u64) -> Duration {
    if rate_bps == 0 {
        return Duration::ZERO;
    }
    let bits = len as u128 * 8 * 1_000_000_000;
    Duration(
        bits.div_ceil(u128::from(rate_bps))
            .min(u128::from(u64::MAX)) as u64,
    )
}

/// What admission did with a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Admission {
    /// Queued as `len` bytes (less than offered if trimmed).
    Queued {
        len: usize,
        marked: bool,
        trimmed: bool,
    },
    TailDropped,
    Down,
}

/// The state of one path direction.
#[derive(Debug)]
pub(super) struct Path {
    pub model: PathModel,
    pub up: bool,
    /// Bumped when the path goes down: frames on the wire from an earlier epoch are lost.
    pub epoch: u64,
    prio: VecDeque<Vec<u8>>,
    prio_bytes: u64,
    data: VecDeque<Vec<u8>>,
    data_bytes: u64,
    /// A frame is being serialised (the queues hold what waits behind it).
    pub busy: bool,
    pub stats: PathStats,
}

impl Path {
    pub fn new(model: PathModel) -> Self {
        Self {
            model,
            up: true,
            epoch: 0,
            prio: VecDeque::new(),
            prio_bytes: 0,
            data: VecDeque::new(),
            data_bytes: 0,
            busy: false,
            stats: PathStats::default(),
        }
    }

    /// Bytes waiting in both queues.
    pub fn queued_bytes(&self) -> u64 {
        self.prio_bytes + self.data_bytes
    }

    /// Offer a frame to the queues (brief §5.2, §5.3).
    pub fn admit(&mut self, mut frame: Vec<u8>, wire: &WireConfig, rng: &mut Rng) -> Admission {
        if !self.up {
            self.stats.dropped_down += 1;
            return Admission::Down;
        }
        let len = frame.len() as u64;
        let cuttable = frame.len() > usize::from(wire.trim_size);
        let Ok(mut ip) =
            Ipv6Packet::new_checked(frame.get_mut(ETHERNET_HEADER_LEN..).unwrap_or(&mut []))
        else {
            return self.push_data(frame, false);
        };
        let dscp = ip.dscp();
        let priority = dscp == wire.dscp.control || wire.dscp.trimmed(dscp).is_some();
        if priority {
            if self.prio_bytes + len > self.model.queue_bytes {
                self.stats.tail_dropped += 1;
                return Admission::TailDropped;
            }
            return self.push_prio(frame, false);
        }
        if self.data_bytes + len > self.model.queue_bytes {
            let trimmable = dscp == wire.dscp.trimmable || dscp == wire.dscp.retransmission;
            let at = match self.model.trim {
                TrimMode::Off => None,
                TrimMode::InFabric => Some(Trimmed::InFabric),
                TrimMode::LastHop => Some(Trimmed::LastHop),
            };
            return match at {
                Some(at) if trimmable && cuttable => match trim_frame(&mut frame, wire, at) {
                    Ok(keep) if self.prio_bytes + keep as u64 <= self.model.queue_bytes => {
                        frame.truncate(keep);
                        self.stats.trimmed += 1;
                        self.push_prio(frame, true)
                    }
                    _ => {
                        self.stats.tail_dropped += 1;
                        Admission::TailDropped
                    }
                },
                _ => {
                    self.stats.tail_dropped += 1;
                    Admission::TailDropped
                }
            };
        }
        let marked = self.model.ecn.is_some_and(|m| {
            let q = self.data_bytes;
            q >= m.max_bytes
                || (q > m.min_bytes
                    && uniform(rng, m.max_bytes - m.min_bytes - 1) < q - m.min_bytes)
        }) && matches!(ip.ecn(), Ecn::Ect0 | Ecn::Ect1);
        if marked {
            ip.set_ecn(Ecn::Ce);
            self.stats.ecn_marked += 1;
        }
        self.push_data(frame, marked)
    }

    fn push_prio(&mut self, frame: Vec<u8>, trimmed: bool) -> Admission {
        self.count(frame.len());
        self.prio_bytes += frame.len() as u64;
        let len = frame.len();
        self.prio.push_back(frame);
        Admission::Queued {
            len,
            marked: false,
            trimmed,
        }
    }

    fn push_data(&mut self, frame: Vec<u8>, marked: bool) -> Admission {
        self.count(frame.len());
        self.data_bytes += frame.len() as u64;
        let len = frame.len();
        self.data.push_back(frame);
        Admission::Queued {
            len,
            marked,
            trimmed: false,
        }
    }

    fn count(&mut self, len: usize) {
        self.stats.enqueued += 1;
        self.stats.enqueued_bytes += len as u64;
    }

    /// The next frame to serialise: priority first.
    pub fn dequeue(&mut self) -> Option<Vec<u8>> {
        if let Some(f) = self.prio.pop_front() {
            self.prio_bytes -= f.len() as u64;
            return Some(f);
        }
        let f = self.data.pop_front()?;
        self.data_bytes -= f.len() as u64;
        Some(f)
    }

    /// The path goes down: what was queued is lost, and so is what is on the wire.
    pub fn go_down(&mut self) {
        self.stats.dropped_down += (self.prio.len() + self.data.len()) as u64;
        self.prio.clear();
        self.data.clear();
        self.prio_bytes = 0;
        self.data_bytes = 0;
        self.up = false;
        self.epoch += 1;
    }
}
