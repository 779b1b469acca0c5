//! EXP and GEN EV profiles while QPs use them (`include/mrc_ctl.h`): the controller's denials
//! reach the QPs, the EVs' states reach the controller's queries, and their changes reach its
//! EV event CQs.
//!
//! The controller runs in another process than the NICs it configures, so everything crosses
//! the node's profile directory ([`crate::profiles::dir`]):
//! - denials: the controller writes them in the profile file; each device's watcher thread
//!   sees the directory change (its modification time) and denies or allows the EVs of the QPs
//!   that use the profile ([`tick`]);
//! - states: each NIC keeps, per profile, the EVs some QP of it holds ASSUMED_BAD, in a file
//!   `evstate-<profile>.<pid>.<device>` the controller's `QUERY_EV_STATE` reads ([`bad_evs`]);
//! - events: an EV event CQ is a Unix datagram socket `evq-<pid>.<n>` in the directory
//!   ([`EvQueue`]); a NIC whose EV goes ASSUMED_BAD (the first of its QPs) or GOOD again (the
//!   last) sends the event to every such socket, when the profile's event mask asks for it.

use core::ffi::c_int;
use std::collections::{HashMap, HashSet, VecDeque};
use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant, SystemTime};

use mrc_nic::NicHandle;
use mrc_transport::Event;
use mrc_transport::config::{ExplicitEv, ExplicitValue};
use mrc_transport::ev::{EvId, EvInfo, EvState};
use mrc_transport::verbs::Qpn;

use crate::device::NicShared;
use crate::evs::{
    Listed, MRC_CTL_EV_ASSUMED_BAD, MRC_CTL_EV_GOOD, decode_list, encode_list, mrc_ctl_ev,
};
use crate::profiles::{Record, Which, dir};
use crate::{Fail, fail, lock};

/// `struct mrc_ctl_ev_event` (controller API 1.0.1).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct mrc_ctl_ev_event {
    pub profile_id: u64,
    pub ev: mrc_ctl_ev,
    pub drop_count: u32,
    pub state: c_int,
}

const EVENT_BYTES: usize = size_of::<mrc_ctl_ev_event>();
/// Events in one datagram at most.
const BATCH: usize = 1024;

/// What one NIC knows of the EXP/GEN profiles its QPs use.
#[derive(Debug, Default)]
struct NicLive {
    nic: Weak<NicShared>,
    /// Per profile id: the engine's EVs → the controller's (every version QPs took).
    names: HashMap<u64, HashMap<ExplicitEv, mrc_ctl_ev>>,
    qps: HashMap<u32, QpLive>,
    /// The profile directory's modification time when the denials were last applied.
    seen: Option<SystemTime>,
    /// When the directory was last looked at, and its profiles last read whatever its time.
    looked: Option<Instant>,
    read: Option<Instant>,
    /// Per profile: (denied EVs, event mask), as last read.
    config: HashMap<u64, (HashSet<mrc_ctl_ev>, c_int)>,
    /// Per profile: the EVs some QP holds ASSUMED_BAD, as last published.
    bad: HashMap<u64, HashSet<mrc_ctl_ev>>,
    /// Events each event socket could not take yet (carried as the next event's drop count).
    dropped: HashMap<PathBuf, u32>,
}

#[derive(Debug)]
struct QpLive {
    profile: u64,
    evs: HashMap<EvId, (mrc_ctl_ev, EvState)>,
}

static LIVE: Mutex<Option<HashMap<usize, NicLive>>> = Mutex::new(None);

fn with<R>(nic: &Arc<NicShared>, f: impl FnOnce(&mut NicLive) -> R) -> R {
    let mut all = lock(&LIVE);
    let all = all.get_or_insert_with(HashMap::new);
    let key = Arc::as_ptr(nic) as usize;
    // A NIC seen first (or at the address of one that is gone): the dead ones go.
    if all.get(&key).is_none_or(|l| l.nic.strong_count() == 0) {
        all.retain(|_, l| l.nic.strong_count() > 0);
        all.insert(
            key,
            NicLive {
                nic: Arc::downgrade(nic),
                ..NicLive::default()
            },
        );
    }
    f(all.get_mut(&key).expect("inserted above"))
}

/// A QP of `nic` may take the EXP/GEN profile `id` whose EVs are `l`.
pub(crate) fn listed(nic: &Arc<NicShared>, id: u64, l: Listed) {
    with(nic, |live| {
        let names = live.names.entry(id).or_default();
        for (e, c) in l.engine.into_iter().zip(l.compact) {
            names.entry(e).or_insert(c);
        }
    });
}

fn engine_ev(i: &EvInfo) -> ExplicitEv {
    ExplicitEv {
        plane: i.plane,
        value: match i.path {
            Some(p) => ExplicitValue::Route(p),
            None => ExplicitValue::Entropy(i.entropy),
        },
    }
}

/// QP `qpn` of `nic` entered RTR with EV profile `id` (not 0): its EVs are now known; the
/// profile's denials apply to them at once.
pub(crate) fn qp_connected(nic: &Arc<NicShared>, handle: &NicHandle, qpn: u32, id: u64) {
    let Ok(infos) = handle.ev_stats(Qpn(qpn)) else {
        return;
    };
    let fresh = with(nic, |live| {
        let Some(names) = live.names.get(&id) else {
            return false;
        };
        let evs = infos
            .iter()
            .filter_map(|i| names.get(&engine_ev(i)).map(|c| (i.id, (*c, i.state))))
            .collect();
        live.qps.insert(qpn, QpLive { profile: id, evs });
        !live.config.contains_key(&id)
    });
    if fresh {
        reload(nic, &[id]);
    }
    apply_denials(nic, handle, Some(qpn));
    publish(nic);
}

/// QP `qpn` of `nic` is gone.
pub(crate) fn qp_gone(nic: &Arc<NicShared>, qpn: u32) {
    if with(nic, |live| live.qps.remove(&qpn).is_some()) {
        publish(nic);
    }
}

/// Reads the denials and event masks of `ids`.
fn reload(nic: &Arc<NicShared>, ids: &[u64]) {
    let read: Vec<_> = ids
        .iter()
        .map(|&id| {
            let r = Record::load(Which::Ev, id).unwrap_or_default();
            let denied = decode_list(r.0.get("denied")).into_iter().collect();
            (id, (denied, r.get("event_mask").unwrap_or(0)))
        })
        .collect();
    with(nic, |live| live.config.extend(read));
}

/// Denies the EVs their profile denies and allows the others, on QP `only` or on every QP.
fn apply_denials(nic: &Arc<NicShared>, handle: &NicHandle, only: Option<u32>) {
    let todo: Vec<(u32, EvId, bool)> = with(nic, |live| {
        let mut todo = Vec::new();
        for (&qpn, qp) in &live.qps {
            if only.is_some_and(|o| o != qpn) {
                continue;
            }
            let Some((denied, _)) = live.config.get(&qp.profile) else {
                continue;
            };
            for (&id, (ev, state)) in &qp.evs {
                let deny = denied.contains(ev);
                if deny != (*state == EvState::Denied) {
                    todo.push((qpn, id, deny));
                }
            }
        }
        todo
    });
    for (qpn, id, deny) in todo {
        let r = if deny {
            handle.with_endpoint(move |e| e.deny_ev(Qpn(qpn), id))
        } else {
            handle.with_endpoint(move |e| e.allow_ev(Qpn(qpn), id))
        };
        if matches!(r, Ok(Ok(()))) {
            with(nic, |live| {
                if let Some((_, s)) = live.qps.get_mut(&qpn).and_then(|q| q.evs.get_mut(&id)) {
                    *s = if deny { EvState::Denied } else { EvState::Good };
                }
            });
        }
    }
}

/// How often the watcher looks at the profile directory's modification time.
const LOOK_EVERY: Duration = Duration::from_millis(1);
/// A directory changed this recently may change again within its clock's granularity (file
/// times advance by the kernel's coarse clock, a few milliseconds): its profiles are read at
/// every look until it has been still this long.
const SETTLED: Duration = Duration::from_millis(50);
/// The profiles in use are read at least this often, whatever the directory's time says.
const READ_EVERY: Duration = Duration::from_secs(1);

/// The device watcher's turn: `events` are the EV state changes the NIC reported since the
/// last call. Applies new denials when the profile directory changed, and publishes states
/// and sends events when an EV of a profile changed.
pub(crate) fn tick(nic: &Arc<NicShared>, handle: &NicHandle, events: &[Event]) {
    let now = Instant::now();
    let due = |t: Option<Instant>, every: Duration| t.is_none_or(|t| now - t >= every);
    // The watcher turns every 50 us while a CQ is armed: most turns stop here.
    let look = with(nic, |live| {
        !live.qps.is_empty() && due(live.looked, LOOK_EVERY)
    });
    if look {
        let in_use: Vec<u64> = with(nic, |live| {
            let mut ids: Vec<u64> = live.qps.values().map(|q| q.profile).collect();
            ids.sort_unstable();
            ids.dedup();
            ids
        });
        let stamp = std::fs::metadata(dir()).and_then(|m| m.modified()).ok();
        let recent = stamp
            .and_then(|t| SystemTime::now().duration_since(t).ok())
            .is_none_or(|age| age < SETTLED);
        let read = with(nic, |live| {
            live.looked = Some(now);
            live.seen != stamp || recent || due(live.read, READ_EVERY)
        });
        if read {
            reload(nic, &in_use);
            with(nic, |live| {
                live.seen = stamp;
                live.read = Some(now);
            });
            apply_denials(nic, handle, None);
        }
    }
    if events.is_empty() {
        return;
    }
    let mut changed = false;
    with(nic, |live| {
        for e in events {
            if let Event::EvState { qpn, ev, to, .. } = *e
                && let Some((_, s)) = live.qps.get_mut(&qpn.0).and_then(|q| q.evs.get_mut(&ev))
            {
                *s = to;
                changed = true;
            }
        }
    });
    if changed {
        publish(nic);
    }
}

/// The EVs some QP holds ASSUMED_BAD, per profile in use.
fn bad_now(live: &NicLive) -> HashMap<u64, HashSet<mrc_ctl_ev>> {
    let mut bad: HashMap<u64, HashSet<mrc_ctl_ev>> = HashMap::new();
    for q in live.qps.values() {
        let set = bad.entry(q.profile).or_default();
        for (ev, s) in q.evs.values() {
            if *s == EvState::AssumedBad {
                set.insert(*ev);
            }
        }
    }
    bad
}

fn state_file(id: u64, nic: &NicShared) -> PathBuf {
    dir().join(format!("evstate-{id}.{}.{}", std::process::id(), nic.index))
}

/// Writes the states that changed and sends their events.
fn publish(nic: &Arc<NicShared>) {
    let (changes, events) = with(nic, |live| {
        let now = bad_now(live);
        let mut changes = Vec::new();
        let mut events = Vec::new();
        let ids: HashSet<u64> = now.keys().chain(live.bad.keys()).copied().collect();
        for id in ids {
            let before = live.bad.get(&id).cloned().unwrap_or_default();
            let after = now.get(&id).cloned();
            if after.as_ref() == Some(&before) {
                continue;
            }
            let (denied, mask) = live.config.get(&id).cloned().unwrap_or_default();
            let after_set = after.clone().unwrap_or_default();
            for ev in after_set.difference(&before) {
                if mask & MRC_CTL_EV_ASSUMED_BAD != 0 {
                    events.push(event(id, *ev, MRC_CTL_EV_ASSUMED_BAD));
                }
            }
            if after.is_some() {
                for ev in before.difference(&after_set) {
                    if mask & MRC_CTL_EV_GOOD != 0 && !denied.contains(ev) {
                        events.push(event(id, *ev, MRC_CTL_EV_GOOD));
                    }
                }
            }
            changes.push((id, after.clone()));
            match after {
                Some(s) => live.bad.insert(id, s),
                None => live.bad.remove(&id),
            };
        }
        (changes, events)
    });
    for (id, bad) in changes {
        let path = state_file(id, nic);
        match bad {
            Some(set) => {
                let list: Vec<_> = set.into_iter().collect();
                // A hidden name no reader takes for a state file.
                let tmp = dir().join(format!(
                    ".{}.tmp",
                    path.file_name().unwrap_or_default().to_string_lossy()
                ));
                if std::fs::create_dir_all(dir()).is_ok()
                    && std::fs::write(&tmp, encode_list(&list)).is_ok()
                {
                    let _ = std::fs::rename(&tmp, &path);
                }
            }
            None => {
                let _ = std::fs::remove_file(&path);
            }
        }
    }
    if !events.is_empty() {
        send_events(nic, &events);
    }
}

fn event(profile_id: u64, ev: mrc_ctl_ev, state: c_int) -> mrc_ctl_ev_event {
    mrc_ctl_ev_event {
        profile_id,
        ev,
        drop_count: 0,
        state,
    }
}

fn pid_alive(pid: u32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    let r = unsafe { libc::kill(pid as libc::pid_t, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// The pid in a file name `evstate-<id>.<pid>.<n>` or `evq-<pid>.<n>`.
fn pid_of(name: &str) -> Option<u32> {
    let (head, _) = name.rsplit_once('.')?;
    head.rsplit(['.', '-']).next()?.parse().ok()
}

/// Sends `events` to every EV event queue of the node.
fn send_events(nic: &Arc<NicShared>, events: &[mrc_ctl_ev_event]) {
    let Ok(sock) = UnixDatagram::unbound() else {
        return;
    };
    let _ = sock.set_nonblocking(true);
    let Ok(entries) = std::fs::read_dir(dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.starts_with("evq-") {
            continue;
        }
        let path = entry.path();
        let carried = with(nic, |l| l.dropped.get(&path).copied().unwrap_or(0));
        let mut batch = events.to_vec();
        batch[0].drop_count = batch[0].drop_count.saturating_add(carried);
        let mut lost = 0u32;
        for chunk in batch.chunks(BATCH) {
            // SAFETY: plain-old-data structs viewed as bytes for the datagram.
            let bytes = unsafe {
                core::slice::from_raw_parts(chunk.as_ptr().cast::<u8>(), chunk.len() * EVENT_BYTES)
            };
            match sock.send_to(bytes, &path) {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::ECONNREFUSED) => {
                    if pid_of(&name).is_some_and(|p| !pid_alive(p)) {
                        let _ = std::fs::remove_file(&path);
                    }
                    lost = 0;
                    break;
                }
                Err(_) => lost = lost.saturating_add(chunk.len() as u32),
            }
        }
        with(nic, |l| {
            if lost > 0 {
                *l.dropped.entry(path).or_default() = carried.saturating_add(lost);
            } else {
                l.dropped.remove(&path);
            }
        });
    }
}

/// The EVs of profile `id` that a QP of a live NIC of the node holds ASSUMED_BAD.
pub(crate) fn bad_evs(id: u64) -> HashSet<mrc_ctl_ev> {
    let mut bad = HashSet::new();
    let prefix = format!("evstate-{id}.");
    let Ok(entries) = std::fs::read_dir(dir()) else {
        return bad;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.starts_with(&prefix) {
            continue;
        }
        if pid_of(&name).is_some_and(|p| !pid_alive(p)) {
            let _ = std::fs::remove_file(entry.path());
            continue;
        }
        if let Ok(text) = std::fs::read_to_string(entry.path()) {
            bad.extend(decode_list(Some(&text)));
        }
    }
    bad
}

/// An EV event CQ: a Unix datagram socket in the profile directory, and the events taken from
/// it that the controller has not polled yet (at most `cqe`; more are counted as dropped, as
/// EV event CQs do not overrun).
#[derive(Debug)]
pub(crate) struct EvQueue {
    sock: UnixDatagram,
    path: PathBuf,
    cap: usize,
    ring: Mutex<(VecDeque<mrc_ctl_ev_event>, u32)>,
}

static QUEUES: AtomicU32 = AtomicU32::new(0);

impl EvQueue {
    pub(crate) fn new(cqe: usize) -> Result<Self, Fail> {
        let d = dir();
        let io = |e: std::io::Error| fail(libc::EIO, format!("{}: {e}", d.display()));
        std::fs::create_dir_all(&d).map_err(io)?;
        let n = QUEUES.fetch_add(1, Ordering::Relaxed);
        let path = d.join(format!("evq-{}.{n}", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let sock = UnixDatagram::bind(&path).map_err(io)?;
        sock.set_nonblocking(true).map_err(io)?;
        Ok(Self {
            sock,
            path,
            cap: cqe,
            ring: Mutex::new((VecDeque::with_capacity(cqe.min(4096)), 0)),
        })
    }

    /// Takes what arrived into the ring.
    fn drain(&self) {
        let mut buf = vec![0u8; BATCH * EVENT_BYTES];
        let mut ring = lock(&self.ring);
        while let Ok(n) = self.sock.recv(&mut buf) {
            for chunk in buf[..n].chunks_exact(EVENT_BYTES) {
                // SAFETY: EVENT_BYTES bytes of a datagram our senders built from this struct.
                let mut e: mrc_ctl_ev_event =
                    unsafe { core::ptr::read_unaligned(chunk.as_ptr().cast()) };
                if ring.0.len() >= self.cap {
                    ring.1 = ring.1.saturating_add(1).saturating_add(e.drop_count);
                    continue;
                }
                e.drop_count = e.drop_count.saturating_add(ring.1);
                ring.1 = 0;
                ring.0.push_back(e);
            }
        }
    }

    /// Whether an event waits (what arms a completion channel).
    pub(crate) fn ready(&self) -> bool {
        self.drain();
        !lock(&self.ring).0.is_empty()
    }

    /// Up to `out.len()` events, oldest first.
    pub(crate) fn poll(&self, out: &mut [mrc_ctl_ev_event]) -> usize {
        self.drain();
        let mut ring = lock(&self.ring);
        let n = out.len().min(ring.0.len());
        for (o, e) in out.iter_mut().zip(ring.0.drain(..n)) {
            *o = e;
        }
        n
    }
}

impl Drop for EvQueue {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_layout_is_ocps() {
        assert_eq!(core::mem::offset_of!(mrc_ctl_ev_event, ev), 8);
        assert_eq!(core::mem::offset_of!(mrc_ctl_ev_event, drop_count), 44);
        assert_eq!(core::mem::offset_of!(mrc_ctl_ev_event, state), 48);
        assert_eq!(size_of::<mrc_ctl_ev_event>(), 56);
    }

    #[test]
    fn a_full_queue_counts_what_it_dropped_in_the_next_event() {
        let d = std::env::temp_dir().join(format!("mrc-evq-test-{}", std::process::id()));
        // SAFETY: the only test of this binary that reads the profile directory.
        unsafe { std::env::set_var("MRC_CTL_DIR", &d) };
        let q = EvQueue::new(2).unwrap();
        let send = |evs: &[mrc_ctl_ev_event]| {
            // SAFETY: plain-old-data structs viewed as bytes.
            let bytes =
                unsafe { core::slice::from_raw_parts(evs.as_ptr().cast::<u8>(), size_of_val(evs)) };
            UnixDatagram::unbound()
                .unwrap()
                .send_to(bytes, &q.path)
                .unwrap();
        };
        let evs: Vec<_> = (0..5u64)
            .map(|i| event(i, mrc_ctl_ev::UNPOPULATED, 1))
            .collect();
        send(&evs);
        let mut out = [mrc_ctl_ev_event::default(); 8];
        assert_eq!(q.poll(&mut out), 2);
        assert_eq!((out[0].profile_id, out[1].profile_id), (0, 1));
        assert_eq!(out[0].drop_count + out[1].drop_count, 0);
        // The 3 that did not fit, and 4 a sender could not deliver, counted on the next one.
        let mut next = event(9, mrc_ctl_ev::UNPOPULATED, 2);
        next.drop_count = 4;
        send(&[next]);
        assert_eq!(q.poll(&mut out), 1);
        assert_eq!((out[0].profile_id, out[0].drop_count), (9, 7));
        assert_eq!(q.poll(&mut out), 0);
        let path = q.path.clone();
        drop(q);
        assert!(!path.exists());
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn pids_are_read_from_file_names() {
        assert_eq!(pid_of("evq-1234.0"), Some(1234));
        assert_eq!(pid_of("evstate-7.99.1"), Some(99));
        assert_eq!(pid_of("evq"), None);
    }
}
