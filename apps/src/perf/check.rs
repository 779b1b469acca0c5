//! `--check`: every message carries its own bytes, and every byte is checked where it lands.
//!
//! - Each message of each QP of each host has its own pattern ([`message_salt`]: host, QP and
//!   message number), written into the message's source slot just before it is posted. A QP
//!   cycles through `slots` source and destination slots (its TX depth): a slot is reused
//!   only once the message in it completed (the sender never has more than the depth
//!   outstanding), so every message in flight has bytes of its own.
//! - The receiver's destination is a [`CheckedDest`]: the engine places each packet through
//!   it, and it compares the bytes with the pattern of the message that owns the slot (or of
//!   the next one, which starts a new generation of the slot). A packet at the wrong offset,
//!   from another QP or from an older message (stale data over newer) differs; bytes a
//!   completed message never received show when its slot moves on, or at the end. One
//!   misplaced packet fails the run.
//!
//! Placement happens in the receiving engine (the simulator, or the NIC thread on the mem and
//! dpdk backends), so the check sees every write as it happens, on every backend.

use std::sync::{Arc, Mutex, PoisonError};

use mrc_sim::memory::fill_pattern;
use mrc_transport::verbs::Memory;

/// Where every host's buffers start (the same on every host).
pub const BUFFER_IOVA: u64 = 0x1000_0000;

/// Result of `--check`: every message verified where it landed ([`check`](super::check)).
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct CheckResult {
    pub bytes_checked: u64,
    pub bytes_wrong: u64,
    pub messages_checked: u64,
    pub messages_wrong: u64,
    /// The first thing found wrong.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_error: Option<String>,
}

impl CheckResult {
    /// Fold in another host's (or size's) result.
    pub fn add(&mut self, o: &CheckResult) {
        self.bytes_checked += o.bytes_checked;
        self.bytes_wrong += o.bytes_wrong;
        self.messages_checked += o.messages_checked;
        self.messages_wrong += o.messages_wrong;
        if self.first_error.is_none() {
            self.first_error.clone_from(&o.first_error);
        }
    }
}

/// One line: what was verified and the first thing wrong.
impl std::fmt::Display for CheckResult {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} of {} messages wrong ({} of {} bytes)",
            self.messages_wrong, self.messages_checked, self.bytes_wrong, self.bytes_checked
        )?;
        if let Some(e) = &self.first_error {
            write!(f, "; first: {e}")?;
        }
        Ok(())
    }
}

/// The pattern of host `host`'s QP `qp`.
pub fn qp_salt(host: u32, qp: u32) -> u64 {
    (u64::from(host) << 32 | u64::from(qp)).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1
}

/// The pattern of message `k` of a QP whose salt is `qp_salt`.
pub fn message_salt(qp_salt: u64, k: u64) -> u64 {
    let z = (qp_salt ^ (k.wrapping_add(1)).wrapping_mul(0xbf58_476d_1ce4_e5b9)).rotate_left(17);
    z.wrapping_mul(0x94d0_49bb_1331_11eb) | 1
}

/// Where the buffers of one host are: per QP, `slots` source slots then (after every QP's
/// sources) `slots` destination slots, each `size` bytes, from [`BUFFER_IOVA`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub qps: u32,
    pub slots: u32,
    pub size: u64,
}

impl Layout {
    /// Bytes of one QP's slots.
    fn qp_bytes(&self) -> u64 {
        u64::from(self.slots) * self.size
    }

    /// Bytes of every source (the destinations follow).
    pub fn src_bytes(&self) -> u64 {
        u64::from(self.qps) * self.qp_bytes()
    }

    /// Bytes each host registers.
    pub fn registered_bytes(&self) -> u64 {
        (2 * self.src_bytes()).max(64)
    }

    /// The first source slot of QP `i`.
    pub fn src(&self, i: u32) -> u64 {
        BUFFER_IOVA + u64::from(i) * self.qp_bytes()
    }

    /// The first destination slot of QP `i`.
    pub fn dst(&self, i: u32) -> u64 {
        BUFFER_IOVA + self.src_bytes() + u64::from(i) * self.qp_bytes()
    }
}

impl CheckResult {
    /// `bytes` found wrong; the first thing wrong is remembered in words.
    fn wrong(&mut self, bytes: u64, what: impl FnOnce() -> String) {
        self.bytes_wrong += bytes;
        if self.first_error.is_none() {
            self.first_error = Some(what());
        }
    }
}

/// One destination slot: the message it holds and which of its bytes arrived.
#[derive(Debug, Clone)]
struct Slot {
    /// Message number of the current generation (none before the first packet).
    message: Option<u64>,
    /// One bit per byte of the message: placed.
    placed: Vec<u64>,
    /// The current generation was already found wrong (counted once).
    wrong: bool,
}

/// The destination slots of every QP of one receiving host.
#[derive(Debug)]
pub struct DestState {
    layout: Layout,
    /// Per local QP: the [`qp_salt`] of the sending QP at the other end (its host and its
    /// index there).
    salts: Vec<u64>,
    slots: Vec<Slot>,
    report: CheckResult,
    want: Vec<u8>,
}

impl DestState {
    fn new(layout: Layout, sender: u32) -> Self {
        Self::with_salts(
            layout,
            (0..layout.qps).map(|i| qp_salt(sender, i)).collect(),
        )
    }

    /// Destinations whose QP `i` is written by the sending QP of salt `salts[i]`.
    fn with_salts(layout: Layout, salts: Vec<u64>) -> Self {
        let words = layout.size.div_ceil(64) as usize;
        Self {
            layout,
            salts,
            slots: vec![
                Slot {
                    message: None,
                    placed: vec![0; words],
                    wrong: false,
                };
                (layout.qps * layout.slots) as usize
            ],
            report: CheckResult::default(),
            want: Vec::new(),
        }
    }

    /// Whether `src` equals message `k` of QP `qp` from byte `off` on.
    fn matches(&mut self, qp: u32, k: u64, off: u64, src: &[u8]) -> bool {
        self.want.resize(src.len(), 0);
        fill_pattern(
            message_salt(self.salts.get(qp as usize).copied().unwrap_or(0), k),
            off as usize,
            &mut self.want,
        );
        self.want == src
    }

    fn differing(&mut self, qp: u32, k: u64, off: u64, src: &[u8]) -> u64 {
        self.matches(qp, k, off, src);
        self.want.iter().zip(src).filter(|(a, b)| a != b).count() as u64
    }

    /// Close the current generation of slot `idx`: its message must have arrived whole.
    fn close(&mut self, idx: usize) {
        let size = self.layout.size;
        let slot = &mut self.slots[idx];
        let Some(k) = slot.message else { return };
        let placed: u64 = slot.placed.iter().map(|w| u64::from(w.count_ones())).sum();
        let missing = size - placed.min(size);
        self.report.messages_checked += 1;
        self.report.bytes_checked += size;
        if missing > 0 {
            let qp = idx as u32 / self.layout.slots;
            self.report.wrong(missing, || {
                format!(
                    "QP {qp} message {k}: completed with {missing} of its {size} bytes never placed"
                )
            });
        }
        if missing > 0 || slot.wrong {
            self.report.messages_wrong += 1;
        }
        slot.placed.fill(0);
        slot.wrong = false;
    }

    /// Bytes `off .. off + len` of slot `idx` arrived: their bits set, a word at a time.
    fn mark(&mut self, idx: usize, off: u64, len: u64) {
        let placed = &mut self.slots[idx].placed;
        let (mut b, end) = (off, off + len);
        while b < end {
            let (word, bit) = ((b / 64) as usize, b % 64);
            let n = (64 - bit).min(end - b);
            let ones = if n == 64 {
                u64::MAX
            } else {
                ((1 << n) - 1) << bit
            };
            placed[word] |= ones;
            b += n;
        }
    }

    /// A write of `src` at byte `offset` of the destination area.
    fn place(&mut self, offset: u64, src: &[u8]) {
        let size = self.layout.size;
        let slots = u64::from(self.layout.slots);
        let mut offset = offset;
        let mut src = src;
        while !src.is_empty() {
            let idx = (offset / size) as usize;
            let off = offset % size;
            let n = ((size - off) as usize).min(src.len());
            let (part, rest) = src.split_at(n);
            if idx < self.slots.len() {
                self.place_in_slot(idx, off, part, slots);
            } else {
                self.report.wrong(n as u64, || {
                    format!("{n} bytes written past the destination slots (offset {offset})")
                });
            }
            offset += n as u64;
            src = rest;
        }
    }

    fn place_in_slot(&mut self, idx: usize, off: u64, part: &[u8], slots: u64) {
        let qp = idx as u32 / self.layout.slots;
        let first = (idx as u64) % slots;
        let current = self.slots[idx].message;
        if let Some(k) = current
            && self.matches(qp, k, off, part)
        {
            self.mark(idx, off, part.len() as u64);
            return;
        }
        let next = current.map_or(first, |k| k + slots);
        if self.matches(qp, next, off, part) {
            self.close(idx);
            self.slots[idx].message = Some(next);
            self.mark(idx, off, part.len() as u64);
            return;
        }
        // Neither the slot's message nor the next one: misplaced, from another QP, or stale.
        let k = current.unwrap_or(first);
        let bad = self.differing(qp, k, off, part);
        let len = part.len();
        self.report.wrong(bad, || {
            format!(
                "QP {qp} message {k}: {len} bytes placed at offset {off} are not that message's \
                 (misplaced, another QP's, or stale)"
            )
        });
        if current.is_some() {
            self.slots[idx].wrong = true;
            self.mark(idx, off, len as u64);
        } else {
            self.report.messages_wrong += 1;
        }
    }

    /// The run is over and QP `i`'s first `done[i]` messages are known complete (by the
    /// sender's completions or the receiver's): each must be here whole. Call once.
    pub fn finish(&mut self, done: &[u64]) -> CheckResult {
        let slots = u64::from(self.layout.slots);
        for (qp, &n) in done.iter().enumerate().take(self.layout.qps as usize) {
            for k in n.saturating_sub(slots)..n {
                let idx = qp * slots as usize + (k % slots) as usize;
                match self.slots[idx].message {
                    Some(m) if m == k => self.close(idx),
                    Some(m) if m > k => {}
                    _ => {
                        let size = self.layout.size;
                        self.report.messages_checked += 1;
                        self.report.messages_wrong += 1;
                        self.report.bytes_checked += size;
                        self.report.wrong(size, || {
                            format!("QP {qp} message {k}: completed, but none of its bytes arrived")
                        });
                    }
                }
                self.slots[idx].message = None;
            }
        }
        self.report.clone()
    }
}

/// The check's state, shared between the memory the engine writes and the backend.
pub type SharedDest = Arc<Mutex<DestState>>;

/// Lock a shared destination state.
pub fn lock_dest(d: &SharedDest) -> std::sync::MutexGuard<'_, DestState> {
    d.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A host's registered memory under `--check`: plain source slots (the application writes
/// each message's pattern before posting it), and destination slots that check every byte
/// placed and keep none.
#[derive(Debug)]
pub struct CheckedMemory {
    src: Vec<u8>,
    dst: SharedDest,
    len: usize,
}

impl CheckedMemory {
    /// The memory of a host whose peer is host `sender`, and the check's state.
    pub fn new(layout: Layout, sender: u32) -> (Self, SharedDest) {
        Self::with_state(layout, DestState::new(layout, sender))
    }

    /// The memory of a host whose QP `i` receives from the sending QP `senders[i]` (a host
    /// and that host's QP index), as the traffic patterns wire many peers to one host.
    pub fn with_senders(layout: Layout, senders: &[(u32, u32)]) -> (Self, SharedDest) {
        let salts = senders.iter().map(|&(h, q)| qp_salt(h, q)).collect();
        Self::with_state(layout, DestState::with_salts(layout, salts))
    }

    fn with_state(layout: Layout, state: DestState) -> (Self, SharedDest) {
        let dst = Arc::new(Mutex::new(state));
        let mem = Self {
            src: vec![0; layout.src_bytes() as usize],
            dst: dst.clone(),
            len: layout.registered_bytes() as usize,
        };
        (mem, dst)
    }
}

impl Memory for CheckedMemory {
    fn len(&self) -> usize {
        self.len
    }

    fn read(&self, offset: usize, dst: &mut [u8]) {
        let n = self.src.len().saturating_sub(offset).min(dst.len());
        if n > 0 {
            dst[..n].copy_from_slice(&self.src[offset..offset + n]);
        }
        // The destination area keeps no bytes: it reads as zeros.
        dst[n..].fill(0);
    }

    fn write(&mut self, offset: usize, src: &[u8]) {
        let n = self.src.len().saturating_sub(offset).min(src.len());
        if n > 0 {
            self.src[offset..offset + n].copy_from_slice(&src[..n]);
        }
        if n < src.len() {
            let at = (offset + n - self.src.len()) as u64;
            lock_dest(&self.dst).place(at, &src[n..]);
        }
    }
}

/// Message `k`'s bytes (for its source slot).
pub fn message_bytes(host: u32, qp: u32, k: u64, size: u64, out: &mut Vec<u8>) {
    out.resize(size as usize, 0);
    fill_pattern(message_salt(qp_salt(host, qp), k), 0, out);
}

#[cfg(test)]
mod tests {
    use super::*;

    const L: Layout = Layout {
        qps: 2,
        slots: 4,
        size: 10_000,
    };

    fn bytes(qp: u32, k: u64) -> Vec<u8> {
        let mut v = Vec::new();
        message_bytes(7, qp, k, L.size, &mut v);
        v
    }

    /// Place message `k` of `qp` in packets of `mtu` bytes, in the given packet order.
    fn place(d: &mut DestState, qp: u32, k: u64, mtu: usize, order: &[usize]) {
        let m = bytes(qp, k);
        let base = (L.dst(qp) - L.src(0) - L.src_bytes()) + (k % 4) * L.size;
        let chunks: Vec<_> = m.chunks(mtu).enumerate().collect();
        for &i in order {
            let (j, c) = chunks[i];
            d.place(base + (j * mtu) as u64, c);
        }
    }

    fn all(n: usize) -> Vec<usize> {
        (0..n).collect()
    }

    #[test]
    fn messages_differ_by_host_qp_and_number() {
        assert_ne!(bytes(0, 0), bytes(0, 1));
        assert_ne!(bytes(0, 0), bytes(1, 0));
        let mut other = Vec::new();
        message_bytes(8, 0, 0, L.size, &mut other);
        assert_ne!(bytes(0, 0), other);
    }

    #[test]
    fn every_message_in_any_order_passes() {
        let mut d = DestState::new(L, 7);
        for k in 0..10 {
            let order: Vec<usize> = (0..3).rev().collect();
            place(&mut d, 0, k, 4096, &order);
            place(&mut d, 1, k, 4096, &all(3));
        }
        let r = d.finish(&[10, 10]);
        assert_eq!(r.bytes_wrong, 0, "{r}");
        assert_eq!(r.messages_checked, 20);
        assert_eq!(r.bytes_checked, 20 * L.size);
    }

    #[test]
    fn one_misplaced_packet_fails() {
        let mut d = DestState::new(L, 7);
        for k in 0..6 {
            place(&mut d, 0, k, 4096, &all(3));
        }
        // Message 6's second packet lands one packet early (over its first).
        let m = bytes(0, 6);
        let base = L.dst(0) - L.src(0) - L.src_bytes() + 2 * L.size;
        d.place(base, &m[..4096]);
        d.place(base, &m[4096..8192]);
        d.place(base + 8192, &m[8192..]);
        let r = d.finish(&[7, 0]);
        assert!(r.bytes_wrong >= 4096, "{r}");
        assert_eq!(r.messages_wrong, 1, "{r}");
        assert!(r.first_error.unwrap().contains("message 6"));
    }

    #[test]
    fn a_stale_packet_over_a_newer_message_fails() {
        let mut d = DestState::new(L, 7);
        for k in 0..8 {
            place(&mut d, 0, k, 4096, &all(3));
        }
        // A packet of message 3 arrives after message 7 took its slot.
        place(&mut d, 0, 3, 4096, &[1]);
        let r = d.finish(&[8, 0]);
        // Random bytes agree one time in 256.
        assert!(r.bytes_wrong > 4000 && r.bytes_wrong <= 4096, "{r}");
        assert!(r.first_error.unwrap().contains("stale"));
    }

    #[test]
    fn a_packet_that_never_arrived_fails_when_its_slot_moves_on_or_at_the_end() {
        let mut d = DestState::new(L, 7);
        place(&mut d, 0, 0, 4096, &[0, 2]);
        for k in 1..6 {
            place(&mut d, 0, k, 4096, &all(3));
        }
        place(&mut d, 0, 6, 4096, &[0, 1]);
        let r = d.finish(&[7, 0]);
        assert_eq!(r.bytes_wrong, 4096 + 10_000 - 8192, "{r}");
        assert_eq!(r.messages_wrong, 2);
        // A completed message with nothing placed at all.
        let mut d = DestState::new(L, 7);
        let r = d.finish(&[1, 0]);
        assert_eq!(r.bytes_wrong, L.size);
    }

    #[test]
    fn another_qps_bytes_fail() {
        let mut d = DestState::new(L, 7);
        let m = bytes(1, 0);
        let base = L.dst(0) - L.src(0) - L.src_bytes();
        d.place(base, &m);
        assert_eq!(d.finish(&[1, 0]).messages_wrong, 2);
    }

    #[test]
    fn memory_keeps_sources_and_checks_destinations() {
        let (mut mem, dst) = CheckedMemory::new(L, 7);
        let src = bytes(0, 0);
        mem.write(0, &src);
        let mut back = vec![0; src.len()];
        mem.read(0, &mut back);
        assert_eq!(back, src);
        let at = L.src_bytes() as usize;
        mem.write(at, &bytes(0, 0));
        assert_eq!(lock_dest(&dst).finish(&[1, 0]).bytes_wrong, 0);
    }
}
