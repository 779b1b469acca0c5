//! The `mrc_*` functions of OCP's `mrc.h` (API 1.0.1), over the engine's verbs.
//!
//! Objects are boxed Rust values handed to C as opaque pointers and registered as live
//! (`crate::live`), so a NULL, stale or wrong-kind pointer fails with EINVAL. Parents count
//! their children: a context, CQ, channel or hint in use cannot be destroyed (EBUSY).
//!
//! One thread per open device (`Watch`) turns the NIC's events into async events (a plane's
//! link, a QP moved to ERROR) and makes completion channels readable: it looks at the armed
//! CQs every 50 µs (every millisecond while none is armed; arming wakes it) and writes the
//! channel's eventfd when one has a completion.

use core::ffi::{c_int, c_uint, c_void};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;

use mrc_nic::{NicEvent, NicHandle};
use mrc_transport::Event;
use mrc_transport::verbs::{
    CqHandle, InitAttr, QpCap, QpInitAttr, QpState, QpTransition, Qpn, RecvWr, RtrAttr, RtsAttr,
    SendOpcode, SendWr, Sge, WcOpcode, WcStatus, WorkCompletion,
};

use crate::device::{NicShared, SwContext, context, sw_pd};
use crate::evlive::EvQueue;
use crate::ibv::{
    IBV_EVENT_PORT_ACTIVE, IBV_EVENT_PORT_ERR, IBV_EVENT_QP_FATAL, IBV_QP_ACCESS_FLAGS,
    IBV_QP_ALT_PATH, IBV_QP_AV, IBV_QP_CUR_STATE, IBV_QP_DEST_QPN, IBV_QP_MAX_DEST_RD_ATOMIC,
    IBV_QP_MAX_QP_RD_ATOMIC, IBV_QP_MIN_RNR_TIMER, IBV_QP_PATH_MIG_STATE, IBV_QP_PATH_MTU,
    IBV_QP_PKEY_INDEX, IBV_QP_PORT, IBV_QP_RETRY_CNT, IBV_QP_RNR_RETRY, IBV_QP_RQ_PSN,
    IBV_QP_SQ_PSN, IBV_QP_STATE, IBV_QP_TIMEOUT, IBV_QPS_ERR, IBV_QPS_INIT, IBV_QPS_RESET,
    IBV_QPS_RTR, IBV_QPS_RTS, IBV_SEND_INLINE, IBV_SEND_SIGNALED, IBV_WC_LOC_LEN_ERR,
    IBV_WC_LOC_PROT_ERR, IBV_WC_RDMA_WRITE, IBV_WC_RECV_RDMA_WITH_IMM, IBV_WC_REM_ACCESS_ERR,
    IBV_WC_REM_INV_REQ_ERR, IBV_WC_REM_OP_ERR, IBV_WC_RETRY_EXC_ERR, IBV_WC_SUCCESS,
    IBV_WC_WITH_IMM, IBV_WC_WR_FLUSH_ERR, IBV_WR_RDMA_WRITE, IBV_WR_RDMA_WRITE_WITH_IMM,
    ibv_ah_attr, ibv_context, ibv_gid, ibv_global_route, ibv_pd, ibv_qp_attr, ibv_qp_cap,
    ibv_recv_wr, ibv_send_wr, ibv_wc,
};
use crate::{
    Fail, Kind, fail, guard_int, guard_ptr, input, invalid, live, lock, out, register, unregister,
};

// ---- constants of mrc.h / mrc_api_ver.h ----------------------------------------------------

const fn ver(major: u32, minor: u32, sub: u32) -> u32 {
    (major << 24) | (minor << 16) | sub
}
pub const MRC_API_CURRENT_VERSION: u32 = ver(1, 0, 1);
pub const MRC_API_LAST_SUPPORTED_VERSION: u32 = ver(0, 0, 0);
pub const MRC_VENDOR_API_CURRENT_VERSION: u32 = ver(1, 0, 0);
pub const MRC_VENDOR_API_LAST_SUPPORTED_VERSION: u32 = ver(0, 0, 0);

pub const MRC_PROTOCOL_VERSION_1: u32 = 1;
pub const MRC_DEVICE_CAP_TRIM_NACK: u32 = 1 << 0;
pub const MRC_DEVICE_CAP_DYNAMIC_MPR: u32 = 1 << 1;

pub const MRC_QP_HINT_NUM_QPS_PER_PEER: c_int = 1 << 0;
pub const MRC_QP_HINT_NUM_SEND_PEERS: c_int = 1 << 1;
pub const MRC_QP_HINT_NUM_REMOTE_RECV_PEERS: c_int = 1 << 2;
pub const MRC_QP_HINT_VENDOR_CFG: c_int = 1 << 31;
const HINT_MASK: c_int = MRC_QP_HINT_NUM_QPS_PER_PEER
    | MRC_QP_HINT_NUM_SEND_PEERS
    | MRC_QP_HINT_NUM_REMOTE_RECV_PEERS
    | MRC_QP_HINT_VENDOR_CFG;

pub const MRC_QP_MAX_WIMM: c_int = 1 << 0;
pub const MRC_QP_MAX_WIMM_DEST: c_int = 1 << 1;
pub const MRC_QP_MPR: c_int = 1 << 2;
pub const MRC_QP_MPR_DEST: c_int = 1 << 3;
pub const MRC_QP_TIMEOUT: c_int = 1 << 4;
pub const MRC_QP_EV_PROFILE_ID: c_int = 1 << 5;
pub const MRC_QP_CC_PROFILE_ID: c_int = 1 << 6;
pub const MRC_QP_HINT: c_int = 1 << 7;
pub const MRC_QP_RETRY_CNT: c_int = 1 << 8;
pub const MRC_QP_CAP: c_int = 1 << 9;
pub const MRC_QP_VENDOR_CFG: c_int = 1 << 31;
const QP_ATTR_MASK: c_int = 0x3ff | MRC_QP_VENDOR_CFG;

pub const MRC_QP_CAP_TRIM_NACK_DEST_UNSUPPORTED: u32 = 1 << 0;
pub const MRC_QP_CAP_DYNAMIC_MPR: u32 = 1 << 1;
pub const MRC_QP_CAP_SVC_TIME_DEST_UNSUPPORTED: u32 = 1 << 2;
const QP_CAP_MASK: u32 = 0x7;

/// PSNs per MPR unit.
const MPR_UNIT: u32 = 128;
/// `ibv_qp_create_send_ops_flags` MRC carries: Write, Write-with-Immediate.
const SEND_OPS_MRC: u64 = 0b11;
/// How often the device's watcher looks at armed CQs (while there are some) and at the NIC's
/// events (otherwise: it shares cores with the NIC threads and the application).
const WATCH_EVERY: std::time::Duration = std::time::Duration::from_micros(50);
const WATCH_IDLE: std::time::Duration = std::time::Duration::from_millis(1);

// ---- the C structures -----------------------------------------------------------------------

/// `struct mrc_device_attr`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct mrc_device_attr {
    pub mrc_protocol_version: u32,
    pub max_wimm: u16,
    pub max_wimm_dest: u16,
    pub max_mpr: u8,
    pub mpr_resolution: u8,
    pub max_qp_hint: u32,
    pub cap: u32,
}

/// `struct mrc_context_attr`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mrc_context_attr {
    pub mrc_api_version_used: u32,
    pub mrc_vendor_api_version_used: u32,
}

/// `struct mrc_qp_hint_attr`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mrc_qp_hint_attr {
    pub num_qps_per_peer: c_int,
    pub num_send_peers: c_int,
    pub num_remote_recv_peers: c_int,
    pub vendor_cfg: [u8; 128],
}

/// `struct mrc_qp_hint_init_attr`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mrc_qp_hint_init_attr {
    pub attr: mrc_qp_hint_attr,
}

/// `struct mrc_qp_init_attr`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mrc_qp_init_attr {
    pub qp_context: *mut c_void,
    pub send_cq: *mut mrc_cq,
    pub recv_cq: *mut mrc_cq,
    pub cap: ibv_qp_cap,
    pub sq_sig_all: c_int,
    pub pd: *mut ibv_pd,
    pub send_ops_flags: u64,
    pub protocol_version: u32,
}

/// `struct mrc_qp_attr`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mrc_qp_attr {
    pub mpr: u8,
    pub mpr_dest: u8,
    pub max_wimm: u16,
    pub max_wimm_dest: u16,
    pub timeout: u8,
    pub ev_profile_id: u64,
    pub cc_profile_id: u64,
    pub retry_linear_cnt: u8,
    pub retry_exp_cnt: u8,
    pub qp_hint: *mut mrc_qp_hint,
    pub cap: u32,
    pub vendor_cfg: [u8; 128],
}

impl mrc_qp_attr {
    const ZERO: Self = Self {
        mpr: 0,
        mpr_dest: 0,
        max_wimm: 0,
        max_wimm_dest: 0,
        timeout: 0,
        ev_profile_id: 0,
        cc_profile_id: 0,
        retry_linear_cnt: 0,
        retry_exp_cnt: 0,
        qp_hint: core::ptr::null_mut(),
        cap: 0,
        vendor_cfg: [0; 128],
    };
}

/// `struct mrc_async_event`: `element` is a union of a CQ pointer, a QP pointer and a port
/// number (an int in its first four bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mrc_async_event {
    pub element: usize,
    pub event_type: c_int,
}

// ---- the objects ---------------------------------------------------------------------------

/// What the watcher and the API share about one MRC context.
#[derive(Debug, Default)]
pub(crate) struct CtxShared {
    /// CQs armed by `mrc_req_notify_cq`: (the CQ, its engine handle, its channel, its armed
    /// flag).
    armed: Mutex<Vec<Armed>>,
    /// QPN → the `mrc_qp` (for QP events).
    qps: Mutex<HashMap<u32, usize>>,
    /// QPs the engine moved to ERROR.
    failed: Mutex<Vec<u32>>,
    events: Mutex<VecDeque<mrc_async_event>>,
    event_ready: Condvar,
}

/// An armed CQ: (the CQ, its engine handle, its channel, its armed flag, its EV event queue
/// when it is an EV event CQ).
type Armed = (
    usize,
    CqHandle,
    Arc<ChannelShared>,
    Arc<AtomicBool>,
    Option<Arc<EvQueue>>,
);

/// The per-device thread that dispatches the NIC's events and watches armed CQs.
#[derive(Debug)]
pub(crate) struct Watch {
    contexts: Arc<Mutex<Vec<Arc<CtxShared>>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Watch {
    fn start(nic: &Arc<NicShared>) -> Self {
        let contexts: Arc<Mutex<Vec<Arc<CtxShared>>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let (c, s, n) = (contexts.clone(), stop.clone(), nic.clone());
        let handle = nic.handle();
        let thread = std::thread::Builder::new()
            .name(format!("mrc-watch{}", nic.index))
            .spawn(move || watch(&handle, &n, &c, &s))
            .ok();
        Self {
            contexts,
            stop,
            thread,
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn push_event(c: &CtxShared, element: usize, event_type: c_int) {
    lock(&c.events).push_back(mrc_async_event {
        element,
        event_type,
    });
    c.event_ready.notify_all();
}

fn watch(
    handle: &NicHandle,
    nic: &Arc<NicShared>,
    contexts: &Mutex<Vec<Arc<CtxShared>>>,
    stop: &AtomicBool,
) {
    let mut ev_changes = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        ev_changes.clear();
        while let Some(e) = handle.poll_event() {
            let ctxs = lock(contexts).clone();
            match e {
                NicEvent::Engine(e @ Event::EvState { .. }) => ev_changes.push(e),
                NicEvent::Link { port, up } => {
                    if let Some(d) = lock(&nic.down).get_mut(usize::from(port)) {
                        *d = !up;
                    }
                    let t = if up {
                        IBV_EVENT_PORT_ACTIVE
                    } else {
                        IBV_EVENT_PORT_ERR
                    };
                    for c in &ctxs {
                        push_event(c, usize::from(port) + 1, t);
                    }
                }
                NicEvent::Engine(Event::QpFatal { qpn, .. }) => {
                    for c in &ctxs {
                        let qp = lock(&c.qps).get(&qpn.0).copied();
                        if let Some(qp) = qp {
                            lock(&c.failed).push(qpn.0);
                            push_event(c, qp, IBV_EVENT_QP_FATAL);
                        }
                    }
                }
                _ => {}
            }
        }
        crate::evlive::tick(nic, handle, &ev_changes);
        let mut any_armed = false;
        for c in lock(contexts).iter() {
            let mut armed = lock(&c.armed);
            armed.retain(|(cq, h, channel, flag, evq)| {
                let ready = match evq {
                    Some(q) => q.ready(),
                    None => handle.cq_has_completions(*h).unwrap_or(false),
                };
                if !flag.load(Ordering::Acquire) {
                    false // fired by mrc_poll_cq
                } else if ready {
                    if flag.swap(false, Ordering::AcqRel) {
                        channel.signal(*cq);
                    }
                    false
                } else {
                    true
                }
            });
            any_armed |= !armed.is_empty();
        }
        // `mrc_req_notify_cq` unparks the thread, so a CQ armed while it idles is watched at
        // once.
        std::thread::park_timeout(if any_armed { WATCH_EVERY } else { WATCH_IDLE });
    }
}

/// Watchers of the open devices, by device index.
static WATCHES: Mutex<Option<HashMap<usize, Watch>>> = Mutex::new(None);

/// `struct mrc_context`.
#[derive(Debug)]
pub struct mrc_context {
    pub(crate) vctx: *mut ibv_context,
    pub(crate) nic: Arc<NicShared>,
    pub(crate) shared: Arc<CtxShared>,
    /// Channels, CQs, hints and QPs made from it and alive.
    children: AtomicUsize,
}

/// `struct mrc_comp_channel`.
#[derive(Debug)]
pub struct mrc_comp_channel {
    ctx: *mut mrc_context,
    shared: Arc<ChannelShared>,
    /// CQs that report to it.
    users: AtomicUsize,
}

#[derive(Debug)]
struct ChannelShared {
    /// An eventfd in semaphore mode: one count per CQ event.
    fd: c_int,
    /// The CQs whose events were counted and not got yet.
    ready: Mutex<VecDeque<usize>>,
}

impl ChannelShared {
    /// One event of CQ `cq`: counted on the eventfd, the CQ queued for `mrc_get_cq_event`.
    fn signal(&self, cq: usize) {
        lock(&self.ready).push_back(cq);
        let one: u64 = 1;
        // SAFETY: our eventfd, open while the channel lives (a channel outlives its CQs, and
        // the watcher holds this `ChannelShared`); 8 readable bytes.
        let _ = unsafe { libc::write(self.fd, (&raw const one).cast::<c_void>(), 8) };
    }
}

impl Drop for ChannelShared {
    fn drop(&mut self) {
        // SAFETY: our own eventfd, closed once.
        unsafe { libc::close(self.fd) };
    }
}

/// `struct mrc_cq`.
#[derive(Debug)]
pub struct mrc_cq {
    ctx: *mut mrc_context,
    cq: CqHandle,
    poll: Mutex<(NicHandle, Vec<WorkCompletion>)>,
    cq_context: *mut c_void,
    channel: *mut mrc_comp_channel,
    /// QPs that complete into it.
    users: AtomicUsize,
    /// Armed by `mrc_req_notify_cq`, until an event fires (from the watcher, or from
    /// `mrc_poll_cq` when it takes a completion first).
    armed: Arc<AtomicBool>,
    events_got: AtomicU32,
    events_acked: AtomicU32,
    /// An EV event CQ (`mrc_ctl_create_ev_event_cq`): its queue. Its engine CQ is never used.
    pub(crate) ev_queue: Option<Arc<EvQueue>>,
}

/// `struct mrc_qp_hint`.
#[derive(Debug)]
pub struct mrc_qp_hint {
    ctx: *mut mrc_context,
    attr: Mutex<mrc_qp_hint_attr>,
    users: AtomicUsize,
}

/// `struct mrc_qp`.
#[derive(Debug)]
pub struct mrc_qp {
    ctx: *mut mrc_context,
    qpn: Qpn,
    init: mrc_qp_init_attr,
    /// Receives posted and not completed yet (at most `cap.max_recv_wr`).
    recv_posted: AtomicU32,
    /// The PD's engine handle (gather entries must name its regions).
    pd: u32,
    post: Mutex<PostState>,
    local: Mutex<QpLocal>,
}

#[derive(Debug)]
struct PostState {
    handle: NicHandle,
    sges: Vec<Sge>,
}

/// What the QP was told (the engine checks transitions again; this answers queries and
/// refuses posts before RTS without a round trip to the NIC thread).
#[derive(Debug, Clone, Copy)]
struct QpLocal {
    state: c_int,
    mrc: mrc_qp_attr,
    dest_qpn: u32,
    dgid: [u8; 16],
    rq_psn: u32,
    sq_psn: u32,
    path_mtu: c_int,
}

// ---- helpers -------------------------------------------------------------------------------

fn obj<'a, T>(p: *mut T, kind: Kind) -> Result<&'a T, Fail> {
    live(p.cast(), kind)?;
    // SAFETY: registered as a live object of this kind when made, unregistered before it is
    // freed.
    Ok(unsafe { &*p })
}

fn new_obj<T>(v: T, kind: Kind) -> *mut T {
    let p = Box::into_raw(Box::new(v));
    register(p.cast(), kind);
    p
}

/// Frees an object (unregistered first).
///
/// # Safety
/// `p` is a live object of its kind, not used again.
unsafe fn free_obj<T>(p: *mut T) {
    unregister(p.cast());
    // SAFETY: the caller's contract.
    drop(unsafe { Box::from_raw(p) });
}

pub(crate) fn ctx_of<'a>(c: *mut mrc_context) -> Result<&'a mrc_context, Fail> {
    obj(c, Kind::Context)
}

// ---- device, version, context --------------------------------------------------------------

/// `mrc_query_device_ex`.
///
/// # Safety
/// Pointers NULL or valid as the header says.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_query_device_ex(
    vctx: *mut ibv_context,
    mctx: *mut mrc_context,
    attr: *mut mrc_device_attr,
    supported: *mut c_int,
) -> c_int {
    guard_int(|| {
        let sup = out(supported, "supported")?;
        let a = out(attr, "attr")?;
        if !mctx.is_null() && ctx_of(mctx)?.vctx != vctx {
            return Err(invalid("mcontext was made from another verbs context"));
        }
        if vctx.is_null() {
            return Err(invalid("context is NULL"));
        }
        if context(vctx).is_err() {
            // A verbs context of another provider: not an MRC device.
            *sup = 0;
            *a = mrc_device_attr::default();
            return Ok(0);
        }
        *sup = 1;
        *a = mrc_device_attr {
            mrc_protocol_version: MRC_PROTOCOL_VERSION_1,
            max_wimm: sw_nic_max_wimm(vctx)?,
            max_wimm_dest: sw_nic_max_wimm(vctx)?,
            max_mpr: u8::MAX,
            mpr_resolution: 1,
            max_qp_hint: 1 << 16,
            cap: MRC_DEVICE_CAP_TRIM_NACK | MRC_DEVICE_CAP_DYNAMIC_MPR,
        };
        Ok(0)
    })
}

fn sw_nic_max_wimm(vctx: *mut ibv_context) -> Result<u16, Fail> {
    Ok(context(vctx)?.nic.max_wimm)
}

/// `mrc_query_device` (1.0.0 semantics: the same answer).
///
/// # Safety
/// As [`mrc_query_device_ex`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_query_device(
    vctx: *mut ibv_context,
    attr: *mut mrc_device_attr,
    supported: *mut c_int,
) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe { mrc_query_device_ex(vctx, core::ptr::null_mut(), attr, supported) }
}

/// `mrc_query_version`: NULL outputs are skipped.
///
/// # Safety
/// Each pointer NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_query_version(
    current: *mut u32,
    last: *mut u32,
    vendor: *mut u32,
    last_vendor: *mut u32,
) {
    for (p, v) in [
        (current, MRC_API_CURRENT_VERSION),
        (last, MRC_API_LAST_SUPPORTED_VERSION),
        (vendor, MRC_VENDOR_API_CURRENT_VERSION),
        (last_vendor, MRC_VENDOR_API_LAST_SUPPORTED_VERSION),
    ] {
        if !p.is_null() {
            // SAFETY: non-null and writable (caller contract).
            unsafe { *p = v };
        }
    }
}

/// `mrc_create_context`: versions newer than this library are refused (EOPNOTSUPP).
///
/// # Safety
/// `vctx` NULL or an open verbs context; `attr` NULL or readable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_create_context(
    vctx: *mut ibv_context,
    attr: *mut mrc_context_attr,
) -> *mut mrc_context {
    guard_ptr(|| {
        if vctx.is_null() {
            return Err(invalid("vcontext is NULL"));
        }
        let sw: &SwContext = context(vctx).map_err(|_| {
            fail(
                libc::ENODEV,
                "not a context of mrc-rs's software verbs device (real RDMA NICs are not supported)".into(),
            )
        })?;
        // The versions an application uses change nothing yet: 1.0.0 and 1.0.1 differ only by
        // mrc_query_device_ex, which is always there.
        if !attr.is_null() {
            let a = input(attr, "context_attr")?;
            if a.mrc_api_version_used > MRC_API_CURRENT_VERSION
                || a.mrc_vendor_api_version_used > MRC_VENDOR_API_CURRENT_VERSION
            {
                return Err(fail(
                    libc::EOPNOTSUPP,
                    format!(
                        "API version {:#x} / vendor {:#x}: this library implements up to {:#x} / {:#x}",
                        a.mrc_api_version_used,
                        a.mrc_vendor_api_version_used,
                        MRC_API_CURRENT_VERSION,
                        MRC_VENDOR_API_CURRENT_VERSION
                    ),
                ));
            }
        }
        let shared = Arc::new(CtxShared::default());
        {
            let mut w = lock(&WATCHES);
            let w = w.get_or_insert_with(HashMap::new);
            let watch = w
                .entry(sw.nic.index)
                .or_insert_with(|| Watch::start(&sw.nic));
            lock(&watch.contexts).push(shared.clone());
        }
        Ok(new_obj(
            mrc_context {
                vctx,
                nic: sw.nic.clone(),
                shared,
                children: AtomicUsize::new(0),
            },
            Kind::Context,
        ))
    })
}

/// `mrc_destroy_context`: EBUSY while a channel, CQ, hint or QP made from it lives.
///
/// # Safety
/// `c` NULL or a live context.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_destroy_context(c: *mut mrc_context) -> c_int {
    guard_int(|| {
        let ctx = ctx_of(c)?;
        if ctx.children.load(Ordering::Acquire) > 0 {
            return Err(fail(
                libc::EBUSY,
                "objects made from this context are alive".into(),
            ));
        }
        let mut w = lock(&WATCHES);
        if let Some(map) = w.as_mut()
            && let Some(watch) = map.get(&ctx.nic.index)
        {
            let mut cs = lock(&watch.contexts);
            cs.retain(|s| !Arc::ptr_eq(s, &ctx.shared));
            if cs.is_empty() {
                drop(cs);
                map.remove(&ctx.nic.index);
            }
        }
        drop(w);
        // SAFETY: live (checked), not used again.
        unsafe { free_obj(c) };
        Ok(0)
    })
}

// ---- completion channels and CQs -----------------------------------------------------------

/// `mrc_create_comp_channel`.
///
/// # Safety
/// `c` NULL or live; `channel` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_create_comp_channel(
    c: *mut mrc_context,
    channel: *mut *mut mrc_comp_channel,
) -> c_int {
    guard_int(|| {
        let ctx = ctx_of(c)?;
        let slot = out(channel, "channel")?;
        // SAFETY: plain syscall.
        let fd = unsafe { libc::eventfd(0, libc::EFD_SEMAPHORE | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(fail(
                std::io::Error::last_os_error()
                    .raw_os_error()
                    .unwrap_or(libc::EMFILE),
                "eventfd".into(),
            ));
        }
        ctx.children.fetch_add(1, Ordering::AcqRel);
        *slot = new_obj(
            mrc_comp_channel {
                ctx: c,
                shared: Arc::new(ChannelShared {
                    fd,
                    ready: Mutex::default(),
                }),
                users: AtomicUsize::new(0),
            },
            Kind::Channel,
        );
        Ok(0)
    })
}

/// `mrc_get_comp_channel_fd`.
///
/// # Safety
/// `channel` NULL or live; `fd` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_get_comp_channel_fd(
    channel: *mut mrc_comp_channel,
    fd: *mut c_int,
) -> c_int {
    guard_int(|| {
        let ch = obj(channel, Kind::Channel)?;
        *out(fd, "fd")? = ch.shared.fd;
        Ok(0)
    })
}

/// `mrc_destroy_comp_channel`: EBUSY while a CQ reports to it.
///
/// # Safety
/// `channel` NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_destroy_comp_channel(channel: *mut mrc_comp_channel) -> c_int {
    guard_int(|| {
        let ch = obj(channel, Kind::Channel)?;
        if ch.users.load(Ordering::Acquire) > 0 {
            return Err(fail(libc::EBUSY, "a CQ uses this channel".into()));
        }
        // SAFETY: the parent outlives its children (destroy_context refuses while they live).
        let ctx = unsafe { &*ch.ctx };
        ctx.children.fetch_sub(1, Ordering::AcqRel);
        // SAFETY: live, not used again.
        unsafe { free_obj(channel) };
        Ok(0)
    })
}

/// `mrc_create_cq`.
///
/// # Safety
/// `c` NULL or live; `channel` NULL or a live channel of the same context.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_create_cq(
    c: *mut mrc_context,
    cqe: c_int,
    cq_context: *mut c_void,
    channel: *mut mrc_comp_channel,
    comp_vector: c_int,
) -> *mut mrc_cq {
    guard_ptr(|| new_cq(c, cqe, cq_context, channel, comp_vector, false))
}

/// A CQ of context `c`: a work CQ, or an EV event CQ (`ev_events`, `mrc_ctl.h`).
pub(crate) fn new_cq(
    c: *mut mrc_context,
    cqe: c_int,
    cq_context: *mut c_void,
    channel: *mut mrc_comp_channel,
    comp_vector: c_int,
    ev_events: bool,
) -> Result<*mut mrc_cq, Fail> {
    {
        let ctx = ctx_of(c)?;
        if cqe <= 0 || cqe > 1 << 20 {
            return Err(invalid("cqe must be 1..=1048576"));
        }
        if comp_vector != 0 {
            return Err(invalid(
                "comp_vector: the device has one completion vector (0)",
            ));
        }
        if !channel.is_null() {
            let ch = obj(channel, Kind::Channel)?;
            if ch.ctx != c {
                return Err(invalid("the channel belongs to another context"));
            }
        }
        let ev_queue = if ev_events {
            Some(Arc::new(EvQueue::new(cqe as usize)?))
        } else {
            None
        };
        let handle = ctx.nic.handle();
        let cq = handle
            .create_cq(if ev_events { 1 } else { cqe as u32 })
            .map_err(Fail::from)?;
        if !channel.is_null() {
            // SAFETY: live (checked above).
            unsafe { &*channel }.users.fetch_add(1, Ordering::AcqRel);
        }
        ctx.children.fetch_add(1, Ordering::AcqRel);
        Ok(new_obj(
            mrc_cq {
                ctx: c,
                cq,
                poll: Mutex::new((handle, Vec::new())),
                cq_context,
                channel,
                users: AtomicUsize::new(0),
                armed: Arc::new(AtomicBool::new(false)),
                events_got: AtomicU32::new(0),
                events_acked: AtomicU32::new(0),
                ev_queue,
            },
            Kind::Cq,
        ))
    }
}

fn wc_status(s: WcStatus) -> c_int {
    match s {
        WcStatus::Success => IBV_WC_SUCCESS,
        WcStatus::LocalLengthError => IBV_WC_LOC_LEN_ERR,
        WcStatus::LocalProtectionError => IBV_WC_LOC_PROT_ERR,
        WcStatus::WrFlushError => IBV_WC_WR_FLUSH_ERR,
        WcStatus::RemoteAccessError => IBV_WC_REM_ACCESS_ERR,
        WcStatus::RemoteOperationalError => IBV_WC_REM_OP_ERR,
        WcStatus::RetryExceeded => IBV_WC_RETRY_EXC_ERR,
        WcStatus::RemoteInvalidRequest => IBV_WC_REM_INV_REQ_ERR,
    }
}

fn to_ibv_wc(w: &WorkCompletion) -> ibv_wc {
    ibv_wc {
        wr_id: w.wr_id,
        status: wc_status(w.status),
        opcode: match w.opcode {
            WcOpcode::RdmaWrite => IBV_WC_RDMA_WRITE,
            WcOpcode::RecvRdmaWithImm => IBV_WC_RECV_RDMA_WITH_IMM,
        },
        vendor_err: 0,
        byte_len: w.byte_len,
        imm_data: w.imm_data.map_or(0, u32::to_be),
        qp_num: w.qpn.0,
        src_qp: 0,
        wc_flags: if w.imm_data.is_some() {
            IBV_WC_WITH_IMM
        } else {
            0
        },
        pkey_index: 0,
        slid: 0,
        sl: 0,
        dlid_path_bits: 0,
    }
}

/// `mrc_poll_cq`.
///
/// # Safety
/// `cq` NULL or live; `wc` NULL or `num_entries` writable entries.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_poll_cq(
    cq: *mut mrc_cq,
    num_entries: c_int,
    wc: *mut ibv_wc,
) -> c_int {
    guard_int(|| {
        let q = obj(cq, Kind::Cq)?;
        if q.ev_queue.is_some() {
            return Err(invalid(
                "an EV event CQ is polled with mrc_ctl_poll_ev_event",
            ));
        }
        let n = usize::try_from(num_entries).map_err(|_| invalid("num_entries < 0"))?;
        if n == 0 {
            return Ok(0);
        }
        if wc.is_null() {
            return Err(invalid("wc is NULL"));
        }
        let mut p = lock(&q.poll);
        let (handle, buf) = &mut *p;
        if buf.len() < n {
            buf.resize(n, WorkCompletion::EMPTY);
        }
        let got = handle.poll_cq(q.cq, &mut buf[..n]).map_err(Fail::from)?;
        // SAFETY: the caller gives `num_entries` writable entries; got <= n.
        let dst = unsafe { core::slice::from_raw_parts_mut(wc, got) };
        let mut recvs = 0;
        for (d, w) in dst.iter_mut().zip(&buf[..got]) {
            *d = to_ibv_wc(w);
            recvs += usize::from(w.opcode == WcOpcode::RecvRdmaWithImm);
        }
        drop(p);
        if recvs > 0 {
            // Receives completed (or flushed) leave their QP's receive queue.
            // SAFETY: the parent outlives its children.
            let ctx = unsafe { &*q.ctx };
            let qps = lock(&ctx.shared.qps);
            for w in buf_recvs(dst) {
                if let Some(&qp) = qps.get(&w)
                    && let Ok(qp) = obj(qp as *mut mrc_qp, Kind::Qp)
                {
                    let _ = qp
                        .recv_posted
                        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |v| v.checked_sub(1));
                }
            }
        }
        // A completion taken while the CQ was armed is the event the program asked for, also
        // when the watcher has not seen it yet.
        if got > 0 && !q.channel.is_null() && q.armed.swap(false, Ordering::AcqRel) {
            // SAFETY: a channel outlives its CQs.
            unsafe { &*q.channel }.shared.signal(cq as usize);
        }
        Ok(got as c_int)
    })
}

/// `mrc_ctl_poll_ev_event` on CQ `cq`: EINVAL unless it is a live EV event CQ.
pub(crate) fn poll_ev_events(
    cq: *mut mrc_cq,
    out: &mut [crate::evlive::mrc_ctl_ev_event],
) -> Result<usize, Fail> {
    let q = obj(cq, Kind::Cq)?;
    let Some(queue) = &q.ev_queue else {
        return Err(invalid("not an EV event CQ (mrc_ctl_create_ev_event_cq)"));
    };
    let got = queue.poll(out);
    if got > 0 && !q.channel.is_null() && q.armed.swap(false, Ordering::AcqRel) {
        // SAFETY: a channel outlives its CQs.
        unsafe { &*q.channel }.shared.signal(cq as usize);
    }
    Ok(got)
}

/// The QPNs of the receive completions among `wcs`.
fn buf_recvs(wcs: &[ibv_wc]) -> impl Iterator<Item = u32> + '_ {
    wcs.iter()
        .filter(|w| w.opcode == IBV_WC_RECV_RDMA_WITH_IMM)
        .map(|w| w.qp_num)
}

/// `mrc_destroy_cq`: EBUSY while a QP uses it; waits until every event got was acked.
///
/// # Safety
/// `cq` NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_destroy_cq(cq: *mut mrc_cq) -> c_int {
    guard_int(|| {
        let q = obj(cq, Kind::Cq)?;
        if q.users.load(Ordering::Acquire) > 0 {
            return Err(fail(libc::EBUSY, "a QP uses this CQ".into()));
        }
        while q.events_acked.load(Ordering::Acquire) < q.events_got.load(Ordering::Acquire) {
            std::thread::sleep(WATCH_EVERY);
        }
        // SAFETY: the parent outlives its children.
        let ctx = unsafe { &*q.ctx };
        lock(&ctx.shared.armed).retain(|(c, ..)| *c != cq as usize);
        let handle = lock(&q.poll).0.clone();
        handle.destroy_cq(q.cq).map_err(Fail::from)?;
        if !q.channel.is_null() {
            // SAFETY: a channel outlives its CQs (its destroy refuses while they live).
            let ch = unsafe { &*q.channel };
            lock(&ch.shared.ready).retain(|&c| c != cq as usize);
            ch.users.fetch_sub(1, Ordering::AcqRel);
        }
        ctx.children.fetch_sub(1, Ordering::AcqRel);
        // SAFETY: live, not used again.
        unsafe { free_obj(cq) };
        Ok(0)
    })
}

/// `mrc_req_notify_cq`: the CQ's channel becomes readable when the CQ holds a completion
/// (one not polled yet: a completion already waiting fires at once, as a notification
/// requested just before it came would).
///
/// # Safety
/// `cq` NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_req_notify_cq(cq: *mut mrc_cq, _solicited_only: c_int) -> c_int {
    guard_int(|| {
        let q = obj(cq, Kind::Cq)?;
        if q.channel.is_null() {
            return Err(invalid("the CQ has no completion channel"));
        }
        // SAFETY: a channel outlives its CQs; the context outlives both.
        let (ch, ctx) = unsafe { (&*q.channel, &*q.ctx) };
        let mut armed = lock(&ctx.shared.armed);
        if !q.armed.swap(true, Ordering::AcqRel) {
            armed.retain(|(c, ..)| *c != cq as usize);
            armed.push((
                cq as usize,
                q.cq,
                ch.shared.clone(),
                q.armed.clone(),
                q.ev_queue.clone(),
            ));
        }
        drop(armed);
        if let Some(w) = lock(&WATCHES).as_ref().and_then(|m| m.get(&ctx.nic.index))
            && let Some(t) = &w.thread
        {
            t.thread().unpark();
        }
        Ok(0)
    })
}

/// `mrc_get_cq_event`: blocks on the channel's fd (EAGAIN when the program made it
/// non-blocking and no event is there).
///
/// # Safety
/// `channel` NULL or live; `cq`, `cq_context` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_get_cq_event(
    channel: *mut mrc_comp_channel,
    cq: *mut *mut mrc_cq,
    cq_context: *mut *mut c_void,
) -> c_int {
    guard_int(|| {
        let ch = obj(channel, Kind::Channel)?;
        let (cq_out, ctx_out) = (out(cq, "cq")?, out(cq_context, "cq_context")?);
        let mut count = 0_u64;
        // SAFETY: our eventfd; 8 writable bytes.
        let r = unsafe { libc::read(ch.shared.fd, (&raw mut count).cast::<c_void>(), 8) };
        if r != 8 {
            let e = std::io::Error::last_os_error();
            return Err(fail(
                e.raw_os_error().unwrap_or(libc::EIO),
                format!("read: {e}"),
            ));
        }
        let p = lock(&ch.shared.ready)
            .pop_front()
            .ok_or_else(|| fail(libc::EIO, "an event without its CQ".into()))?;
        let q = obj(p as *mut mrc_cq, Kind::Cq)?;
        q.events_got.fetch_add(1, Ordering::AcqRel);
        *cq_out = p as *mut mrc_cq;
        *ctx_out = q.cq_context;
        Ok(0)
    })
}

/// `mrc_ack_cq_events`.
///
/// # Safety
/// `cq` NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_ack_cq_events(cq: *mut mrc_cq, nevents: c_uint) {
    guard_int(|| {
        obj(cq, Kind::Cq)?
            .events_acked
            .fetch_add(nevents, Ordering::AcqRel);
        Ok(0)
    });
}

// ---- QP hints ------------------------------------------------------------------------------

fn check_hint(a: &mrc_qp_hint_attr, mask: c_int) -> Result<(), Fail> {
    if mask & !HINT_MASK != 0 {
        return Err(invalid("unknown qp_hint_attr_mask bits"));
    }
    let bad = |bit: c_int, v: c_int| mask & bit != 0 && v < 0;
    if bad(MRC_QP_HINT_NUM_QPS_PER_PEER, a.num_qps_per_peer)
        || bad(MRC_QP_HINT_NUM_SEND_PEERS, a.num_send_peers)
        || bad(MRC_QP_HINT_NUM_REMOTE_RECV_PEERS, a.num_remote_recv_peers)
    {
        return Err(invalid("hint counts must not be negative"));
    }
    Ok(())
}

/// `mrc_create_qp_hint`.
///
/// # Safety
/// `c` NULL or live; `init` NULL or readable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_create_qp_hint(
    c: *mut mrc_context,
    init: *mut mrc_qp_hint_init_attr,
) -> *mut mrc_qp_hint {
    guard_ptr(|| {
        let ctx = ctx_of(c)?;
        let a = input(init, "init_attr")?.attr;
        check_hint(&a, HINT_MASK)?;
        ctx.children.fetch_add(1, Ordering::AcqRel);
        Ok(new_obj(
            mrc_qp_hint {
                ctx: c,
                attr: Mutex::new(a),
                users: AtomicUsize::new(0),
            },
            Kind::Hint,
        ))
    })
}

/// `mrc_destroy_qp_hint`: EBUSY while a QP uses it.
///
/// # Safety
/// `h` NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_destroy_qp_hint(h: *mut mrc_qp_hint) -> c_int {
    guard_int(|| {
        let hint = obj(h, Kind::Hint)?;
        if hint.users.load(Ordering::Acquire) > 0 {
            return Err(fail(libc::EBUSY, "a QP uses this hint".into()));
        }
        // SAFETY: the parent outlives its children.
        unsafe { &*hint.ctx }
            .children
            .fetch_sub(1, Ordering::AcqRel);
        // SAFETY: live, not used again.
        unsafe { free_obj(h) };
        Ok(0)
    })
}

/// `mrc_query_qp_hint`.
///
/// # Safety
/// `h` NULL or live; `attr` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_query_qp_hint(
    h: *mut mrc_qp_hint,
    attr: *mut mrc_qp_hint_attr,
    mask: c_int,
) -> c_int {
    guard_int(|| {
        let hint = obj(h, Kind::Hint)?;
        if mask & !HINT_MASK != 0 {
            return Err(invalid("unknown qp_hint_attr_mask bits"));
        }
        let o = out(attr, "qp_hint_attr")?;
        let a = *lock(&hint.attr);
        if mask & MRC_QP_HINT_NUM_QPS_PER_PEER != 0 {
            o.num_qps_per_peer = a.num_qps_per_peer;
        }
        if mask & MRC_QP_HINT_NUM_SEND_PEERS != 0 {
            o.num_send_peers = a.num_send_peers;
        }
        if mask & MRC_QP_HINT_NUM_REMOTE_RECV_PEERS != 0 {
            o.num_remote_recv_peers = a.num_remote_recv_peers;
        }
        if mask & MRC_QP_HINT_VENDOR_CFG != 0 {
            o.vendor_cfg = a.vendor_cfg;
        }
        Ok(0)
    })
}

/// `mrc_modify_qp_hint`.
///
/// # Safety
/// `h` NULL or live; `attr` NULL or readable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_modify_qp_hint(
    h: *mut mrc_qp_hint,
    attr: *mut mrc_qp_hint_attr,
    mask: c_int,
) -> c_int {
    guard_int(|| {
        let hint = obj(h, Kind::Hint)?;
        let a = input(attr, "qp_hint_attr")?;
        check_hint(&a, mask)?;
        let mut cur = lock(&hint.attr);
        if mask & MRC_QP_HINT_NUM_QPS_PER_PEER != 0 {
            cur.num_qps_per_peer = a.num_qps_per_peer;
        }
        if mask & MRC_QP_HINT_NUM_SEND_PEERS != 0 {
            cur.num_send_peers = a.num_send_peers;
        }
        if mask & MRC_QP_HINT_NUM_REMOTE_RECV_PEERS != 0 {
            cur.num_remote_recv_peers = a.num_remote_recv_peers;
        }
        if mask & MRC_QP_HINT_VENDOR_CFG != 0 {
            cur.vendor_cfg = a.vendor_cfg;
        }
        Ok(0)
    })
}

// ---- QPs -----------------------------------------------------------------------------------

fn cq_of<'a>(cq: *mut mrc_cq, c: *mut mrc_context, what: &str) -> Result<&'a mrc_cq, Fail> {
    let q = obj(cq, Kind::Cq).map_err(|_| invalid(&format!("{what} is not a live CQ")))?;
    if q.ev_queue.is_some() {
        return Err(invalid(&format!("{what} is an EV event CQ")));
    }
    if q.ctx != c {
        return Err(invalid(&format!("{what} belongs to another context")));
    }
    Ok(q)
}

/// `mrc_create_qp`: a QP in RESET.
///
/// # Safety
/// `c` NULL or live; `attr` NULL or readable, its CQs and PD live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_create_qp(
    c: *mut mrc_context,
    attr: *mut mrc_qp_init_attr,
) -> *mut mrc_qp {
    guard_ptr(|| {
        let ctx = ctx_of(c)?;
        let a = input(attr, "mrc_qp_attr")?;
        let (send, recv) = (
            cq_of(a.send_cq, c, "send_cq")?,
            cq_of(a.recv_cq, c, "recv_cq")?,
        );
        let pd = sw_pd(a.pd).map_err(|_| invalid("pd is not a live PD of mrc-rs's device"))?;
        if pd.nic.index != ctx.nic.index {
            return Err(invalid("pd belongs to another device"));
        }
        if a.protocol_version != 0 && a.protocol_version != MRC_PROTOCOL_VERSION_1 {
            return Err(fail(
                libc::EOPNOTSUPP,
                format!(
                    "protocol_version {:#x}: the device speaks MRC_PROTOCOL_VERSION_1",
                    a.protocol_version
                ),
            ));
        }
        if a.send_ops_flags & !SEND_OPS_MRC != 0 {
            return Err(fail(
                libc::EOPNOTSUPP,
                "send_ops_flags: MRC carries Write and Write-with-Immediate only".into(),
            ));
        }
        if a.cap.max_inline_data > 0 {
            return Err(fail(
                libc::EINVAL,
                "max_inline_data: the device has no inline data".into(),
            ));
        }
        if a.cap.max_send_wr == 0 {
            return Err(invalid("cap.max_send_wr must be at least 1"));
        }
        let handle = ctx.nic.handle();
        let qpn = handle
            .create_qp(&QpInitAttr {
                pd: pd.pd,
                send_cq: send.cq,
                recv_cq: recv.cq,
                cap: QpCap {
                    max_send_wr: a.cap.max_send_wr,
                    max_recv_wr: a.cap.max_recv_wr,
                    max_send_sge: a.cap.max_send_sge.max(1),
                },
                sq_sig_all: a.sq_sig_all != 0,
            })
            .map_err(Fail::from)?;
        send.users.fetch_add(1, Ordering::AcqRel);
        recv.users.fetch_add(1, Ordering::AcqRel);
        ctx.children.fetch_add(1, Ordering::AcqRel);
        let mut init = a;
        init.cap.max_send_sge = init.cap.max_send_sge.max(1);
        let p = new_obj(
            mrc_qp {
                ctx: c,
                qpn,
                init,
                recv_posted: AtomicU32::new(0),
                pd: pd.pd.0,
                post: Mutex::new(PostState {
                    handle,
                    sges: Vec::new(),
                }),
                local: Mutex::new(QpLocal {
                    state: IBV_QPS_RESET,
                    mrc: mrc_qp_attr::ZERO,
                    dest_qpn: 0,
                    dgid: [0; 16],
                    rq_psn: 0,
                    sq_psn: 0,
                    path_mtu: crate::ibv::IBV_MTU_4096,
                }),
            },
            Kind::Qp,
        );
        lock(&ctx.shared.qps).insert(qpn.0, p as usize);
        Ok(p)
    })
}

/// `mrc_destroy_qp`.
///
/// # Safety
/// `qp` NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_destroy_qp(qp: *mut mrc_qp) -> c_int {
    guard_int(|| {
        let q = obj(qp, Kind::Qp)?;
        lock(&q.post).handle.destroy_qp(q.qpn).map_err(Fail::from)?;
        // SAFETY: the parent outlives its children.
        crate::evlive::qp_gone(&unsafe { &*q.ctx }.nic, q.qpn.0);
        // SAFETY: parents outlive their children.
        let ctx = unsafe { &*q.ctx };
        lock(&ctx.shared.qps).remove(&q.qpn.0);
        lock(&ctx.shared.failed).retain(|&n| n != q.qpn.0);
        // SAFETY: as above.
        unsafe {
            (*q.init.send_cq).users.fetch_sub(1, Ordering::AcqRel);
            (*q.init.recv_cq).users.fetch_sub(1, Ordering::AcqRel);
        }
        let hint = lock(&q.local).mrc.qp_hint;
        if !hint.is_null() {
            // SAFETY: a hint outlives the QPs using it.
            unsafe { &*hint }.users.fetch_sub(1, Ordering::AcqRel);
        }
        ctx.children.fetch_sub(1, Ordering::AcqRel);
        // SAFETY: live, not used again.
        unsafe { free_obj(qp) };
        Ok(0)
    })
}

/// `mrc_get_qpn`.
///
/// # Safety
/// `qp` NULL or live; `qpn` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_get_qpn(qp: *mut mrc_qp, qpn: *mut u32) -> c_int {
    guard_int(|| {
        let q = obj(qp, Kind::Qp)?;
        *out(qpn, "qpn")? = q.qpn.0;
        Ok(0)
    })
}

/// The ibverbs attributes mrc.h lists as not supported (MRC replaces them, e.g. timeout and
/// retry counts by `mrc_qp_attr`'s, or has no such thing). mrc-rs accepts and ignores them in
/// any transition: OCP's own example sets IBV_QP_PORT at INIT and IBV_QP_TIMEOUT,
/// IBV_QP_RETRY_CNT and IBV_QP_RNR_RETRY at RTS, as a verbs program would (docs/c-api.md).
const IBV_IGNORED: c_int = IBV_QP_PORT
    | IBV_QP_TIMEOUT
    | IBV_QP_RETRY_CNT
    | IBV_QP_RNR_RETRY
    | IBV_QP_MIN_RNR_TIMER
    | IBV_QP_MAX_QP_RD_ATOMIC
    | IBV_QP_MAX_DEST_RD_ATOMIC
    | IBV_QP_ALT_PATH
    | IBV_QP_PATH_MIG_STATE;

/// What each transition may carry: (ibverbs, MRC).
fn allowed(from: c_int, to: c_int) -> Option<(c_int, c_int)> {
    let common_ibv = IBV_QP_STATE | IBV_QP_CUR_STATE;
    match (from, to) {
        (IBV_QPS_RESET, IBV_QPS_INIT) => Some((
            common_ibv | IBV_QP_PKEY_INDEX | IBV_QP_ACCESS_FLAGS,
            MRC_QP_HINT | MRC_QP_EV_PROFILE_ID | MRC_QP_CC_PROFILE_ID | MRC_QP_VENDOR_CFG,
        )),
        (IBV_QPS_INIT, IBV_QPS_RTR) => Some((
            common_ibv
                | IBV_QP_AV
                | IBV_QP_DEST_QPN
                | IBV_QP_RQ_PSN
                | IBV_QP_PATH_MTU
                | IBV_QP_ACCESS_FLAGS
                | IBV_QP_PKEY_INDEX,
            MRC_QP_MAX_WIMM_DEST | MRC_QP_MPR_DEST | MRC_QP_CAP | MRC_QP_VENDOR_CFG,
        )),
        (IBV_QPS_RTR, IBV_QPS_RTS) => Some((
            common_ibv | IBV_QP_SQ_PSN | IBV_QP_ACCESS_FLAGS,
            MRC_QP_MAX_WIMM
                | MRC_QP_MPR
                | MRC_QP_RETRY_CNT
                | MRC_QP_TIMEOUT
                | MRC_QP_CAP
                | MRC_QP_VENDOR_CFG,
        )),
        (_, IBV_QPS_ERR | IBV_QPS_RESET) => Some((common_ibv, MRC_QP_VENDOR_CFG)),
        _ => None,
    }
}

fn state_name(s: c_int) -> &'static str {
    match s {
        IBV_QPS_RESET => "RESET",
        IBV_QPS_INIT => "INIT",
        IBV_QPS_RTR => "RTR",
        IBV_QPS_RTS => "RTS",
        IBV_QPS_ERR => "ERR",
        _ => "an unknown state",
    }
}

fn engine_state(s: QpState) -> c_int {
    match s {
        QpState::Reset => IBV_QPS_RESET,
        QpState::Init => IBV_QPS_INIT,
        QpState::Rtr => IBV_QPS_RTR,
        QpState::Rts => IBV_QPS_RTS,
        QpState::Error => IBV_QPS_ERR,
    }
}

/// The QP's state: what it was told, or ERROR when the engine moved it there.
fn current_state(q: &mrc_qp, told: c_int) -> c_int {
    // SAFETY: the parent outlives its children.
    let ctx = unsafe { &*q.ctx };
    if lock(&ctx.shared.failed).contains(&q.qpn.0) {
        IBV_QPS_ERR
    } else {
        told
    }
}

/// `mrc_modify_qp`.
///
/// # Safety
/// `qp` NULL or live; `vattr`, `mrc_attr` NULL or readable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_modify_qp(
    qp: *mut mrc_qp,
    vattr: *mut ibv_qp_attr,
    vmask: c_int,
    mattr: *mut mrc_qp_attr,
    mmask: c_int,
) -> c_int {
    guard_int(|| {
        let q = obj(qp, Kind::Qp)?;
        // SAFETY: the parent outlives its children.
        let ctx = unsafe { &*q.ctx };
        if mmask & !QP_ATTR_MASK != 0 {
            return Err(invalid("unknown mrc_qp_attr_mask bits"));
        }
        let m = if mmask != 0 {
            input(mattr, "mrc_attr")?
        } else {
            mrc_qp_attr::ZERO
        };
        let v = input(vattr, "vattr")?;
        let mut local = lock(&q.local);
        let cur = current_state(q, local.state);
        if vmask & IBV_QP_STATE == 0 {
            return Err(invalid(
                "vattr_mask needs IBV_QP_STATE (mrc-rs changes attributes with a transition)",
            ));
        }
        if vmask & IBV_QP_CUR_STATE != 0 && v.cur_qp_state != cur {
            return Err(invalid(&format!(
                "cur_qp_state is {} but the QP is in {}",
                state_name(v.cur_qp_state),
                state_name(cur)
            )));
        }
        let to = v.qp_state;
        let (ibv_ok, mrc_ok) = allowed(cur, to).ok_or_else(|| {
            invalid(&format!(
                "no transition {} -> {}",
                state_name(cur),
                state_name(to)
            ))
        })?;
        if vmask & !(ibv_ok | IBV_IGNORED) != 0 || mmask & !mrc_ok != 0 {
            return Err(invalid(&format!(
                "attributes the {} -> {} transition does not take",
                state_name(cur),
                state_name(to)
            )));
        }
        let has = |bit: c_int| mmask & bit != 0;
        if has(MRC_QP_TIMEOUT) && m.timeout > 24 {
            return Err(invalid("timeout: at most 24"));
        }
        if has(MRC_QP_RETRY_CNT) && (m.retry_linear_cnt > 7 || m.retry_exp_cnt > 25) {
            return Err(invalid("retry: linear at most 7, exponential at most 25"));
        }
        let wimm_max = ctx.nic.max_wimm;
        if has(MRC_QP_MAX_WIMM) && !(1..=wimm_max).contains(&m.max_wimm)
            || has(MRC_QP_MAX_WIMM_DEST) && !(1..=wimm_max).contains(&m.max_wimm_dest)
        {
            return Err(invalid(&format!(
                "max_wimm / max_wimm_dest: 1..={wimm_max} (mrc_device_attr.wimm_attr)"
            )));
        }
        if has(MRC_QP_CAP) && m.cap & !QP_CAP_MASK != 0 {
            return Err(invalid("unknown mrc_qp_cap bits"));
        }
        let mut new = *local;
        let transition = match to {
            IBV_QPS_INIT => {
                let mut i = InitAttr::default();
                if has(MRC_QP_EV_PROFILE_ID) {
                    let (index, listed) =
                        crate::profiles::ev_profile_index(&ctx.nic, m.ev_profile_id)?;
                    if let Some(l) = listed {
                        crate::evlive::listed(&ctx.nic, m.ev_profile_id, l);
                    }
                    i.ev_profile = index;
                    new.mrc.ev_profile_id = m.ev_profile_id;
                }
                if has(MRC_QP_CC_PROFILE_ID) {
                    i.cc_profile = crate::profiles::cc_profile_index(&ctx.nic, m.cc_profile_id)?;
                    new.mrc.cc_profile_id = m.cc_profile_id;
                }
                if has(MRC_QP_HINT) && !m.qp_hint.is_null() {
                    let h = obj(m.qp_hint, Kind::Hint)?;
                    if h.ctx != q.ctx {
                        return Err(invalid("the hint belongs to another context"));
                    }
                }
                if has(MRC_QP_HINT) {
                    new.mrc.qp_hint = m.qp_hint;
                }
                QpTransition::Init(i)
            }
            IBV_QPS_RTR => {
                if vmask & (IBV_QP_AV | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN)
                    != IBV_QP_AV | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN
                {
                    return Err(invalid(
                        "INIT -> RTR needs IBV_QP_AV, IBV_QP_DEST_QPN and IBV_QP_RQ_PSN",
                    ));
                }
                if v.ah_attr.is_global == 0 {
                    return Err(invalid(
                        "ah_attr.is_global must be 1: peers are addressed by GID (their NIC's IPv6 address)",
                    ));
                }
                let remote = ctx.nic.remote(v.ah_attr.grh.dgid.raw)?;
                let psn = v.rq_psn;
                let mut r = RtrAttr::new(remote, Qpn(v.dest_qp_num), psn & 0xff_ffff);
                if has(MRC_QP_MAX_WIMM_DEST) {
                    r.wimm_limit = m.max_wimm_dest;
                    new.mrc.max_wimm_dest = m.max_wimm_dest;
                }
                if has(MRC_QP_MPR_DEST) {
                    if m.mpr_dest == 0 {
                        return Err(invalid("mpr_dest: at least 1 (128 PSNs)"));
                    }
                    r.mpr = u32::from(m.mpr_dest) * MPR_UNIT;
                    new.mrc.mpr_dest = m.mpr_dest;
                }
                if has(MRC_QP_CAP) {
                    r.dynamic_mpr = m.cap & MRC_QP_CAP_DYNAMIC_MPR != 0;
                    new.mrc.cap = m.cap;
                }
                new.dest_qpn = v.dest_qp_num;
                new.dgid = v.ah_attr.grh.dgid.raw;
                new.rq_psn = psn;
                if vmask & IBV_QP_PATH_MTU != 0 {
                    new.path_mtu = v.path_mtu;
                }
                QpTransition::Rtr(r)
            }
            IBV_QPS_RTS => {
                if vmask & IBV_QP_SQ_PSN == 0 {
                    return Err(invalid("RTR -> RTS needs IBV_QP_SQ_PSN"));
                }
                let psn = v.sq_psn;
                let mut r = RtsAttr::new(psn & 0xff_ffff);
                if has(MRC_QP_MAX_WIMM) {
                    r.wimm_limit = m.max_wimm;
                    new.mrc.max_wimm = m.max_wimm;
                }
                if has(MRC_QP_MPR) {
                    if m.mpr == 0 {
                        return Err(invalid("mpr: at least 1 (128 PSNs)"));
                    }
                    r.mpr = u32::from(m.mpr) * MPR_UNIT;
                    new.mrc.mpr = m.mpr;
                }
                if has(MRC_QP_TIMEOUT) {
                    r.timeout = m.timeout;
                    new.mrc.timeout = m.timeout;
                }
                if has(MRC_QP_RETRY_CNT) {
                    r.retry_linear = m.retry_linear_cnt;
                    r.retry_exp = m.retry_exp_cnt;
                    new.mrc.retry_linear_cnt = m.retry_linear_cnt;
                    new.mrc.retry_exp_cnt = m.retry_exp_cnt;
                }
                if has(MRC_QP_CAP) {
                    r.dynamic_mpr = m.cap & MRC_QP_CAP_DYNAMIC_MPR != 0;
                    new.mrc.cap = m.cap;
                }
                new.sq_psn = psn;
                QpTransition::Rts(r)
            }
            IBV_QPS_ERR => QpTransition::Error,
            _ => QpTransition::Reset,
        };
        let handle = lock(&q.post).handle.clone();
        handle.modify_qp(q.qpn, transition).map_err(Fail::from)?;
        if to == IBV_QPS_RTR && local.mrc.ev_profile_id != 0 {
            crate::evlive::qp_connected(&ctx.nic, &handle, q.qpn.0, local.mrc.ev_profile_id);
        } else if to == IBV_QPS_RESET {
            crate::evlive::qp_gone(&ctx.nic, q.qpn.0);
        }
        // The hint's user count follows the QP's hint.
        if new.mrc.qp_hint != local.mrc.qp_hint {
            if !local.mrc.qp_hint.is_null() {
                // SAFETY: a hint outlives the QPs using it.
                unsafe { &*local.mrc.qp_hint }
                    .users
                    .fetch_sub(1, Ordering::AcqRel);
            }
            if !new.mrc.qp_hint.is_null() {
                // SAFETY: live (checked above).
                unsafe { &*new.mrc.qp_hint }
                    .users
                    .fetch_add(1, Ordering::AcqRel);
            }
        }
        new.state = to;
        if to == IBV_QPS_RESET {
            // RESET empties the queues (no completions).
            lock(&ctx.shared.failed).retain(|&n| n != q.qpn.0);
            q.recv_posted.store(0, Ordering::Release);
        }
        *local = new;
        Ok(0)
    })
}

/// `mrc_query_qp`: the state comes from the engine.
///
/// # Safety
/// `qp` NULL or live; outputs NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_query_qp(
    qp: *mut mrc_qp,
    vattr: *mut ibv_qp_attr,
    vmask: c_int,
    mattr: *mut mrc_qp_attr,
    mmask: c_int,
    init: *mut mrc_qp_init_attr,
) -> c_int {
    guard_int(|| {
        let q = obj(qp, Kind::Qp)?;
        if mmask & !QP_ATTR_MASK != 0 {
            return Err(invalid("unknown mrc_qp_attr_mask bits"));
        }
        let mut local = *lock(&q.local);
        let handle = lock(&q.post).handle.clone();
        let info = handle.query_qp(q.qpn).map_err(Fail::from)?;
        let state = engine_state(info.state);
        // The values the QP uses, also those it was not given (the engine's defaults).
        let units = |psns: u32| (psns / MPR_UNIT).min(u32::from(u8::MAX)) as u8;
        if let Some(r) = info.rtr {
            local.mrc.mpr_dest = units(r.mpr);
            local.mrc.max_wimm_dest = r.wimm_limit;
        }
        if let Some(r) = info.rts {
            local.mrc.mpr = units(r.mpr);
            local.mrc.max_wimm = r.wimm_limit;
            local.mrc.timeout = r.timeout;
            local.mrc.retry_linear_cnt = r.retry_linear;
            local.mrc.retry_exp_cnt = r.retry_exp;
        }
        if vmask != 0 || !vattr.is_null() {
            let v = out(vattr, "vattr")?;
            // SAFETY: every field of `ibv_qp_attr` is an integer: all zeroes is a value.
            *v = unsafe { core::mem::zeroed() };
            v.qp_state = state;
            v.cur_qp_state = state;
            v.path_mtu = local.path_mtu;
            v.rq_psn = local.rq_psn;
            v.sq_psn = local.sq_psn;
            v.dest_qp_num = local.dest_qpn;
            v.qp_access_flags = 0;
            v.cap = q.init.cap;
            v.ah_attr = ibv_ah_attr {
                grh: ibv_global_route {
                    dgid: ibv_gid { raw: local.dgid },
                    flow_label: 0,
                    sgid_index: 0,
                    hop_limit: 64,
                    traffic_class: 0,
                },
                dlid: 0,
                sl: 0,
                src_path_bits: 0,
                static_rate: 0,
                is_global: 1,
                port_num: 1,
            };
            v.timeout = local.mrc.timeout;
        }
        if mmask != 0 {
            *out(mattr, "mrc_attr")? = local.mrc;
        }
        if !init.is_null() {
            *out(init, "init_attr")? = q.init;
        }
        Ok(0)
    })
}

/// `mrc_post_send`: Writes and Write-with-Immediates; on failure `*bad_wr` is the first WR
/// not posted (those before it were).
///
/// # Safety
/// `qp` NULL or live; `wr` a readable list whose `sg_list`s hold `num_sge` entries; `bad_wr`
/// NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_post_send(
    qp: *mut mrc_qp,
    wr: *mut ibv_send_wr,
    bad_wr: *mut *mut ibv_send_wr,
) -> c_int {
    let mut failed: *mut ibv_send_wr = wr;
    let r = guard_int(|| {
        let q = obj(qp, Kind::Qp)?;
        let state = current_state(q, lock(&q.local).state);
        if state != IBV_QPS_RTS && state != IBV_QPS_ERR {
            return Err(invalid(&format!(
                "the QP is in {}: posting sends needs RTS",
                state_name(state)
            )));
        }
        let mut p = lock(&q.post);
        let PostState { handle, sges } = &mut *p;
        let mut cur = wr;
        if cur.is_null() {
            return Err(invalid("wr is NULL"));
        }
        while !cur.is_null() {
            failed = cur;
            // SAFETY: a non-null element of the list the caller gives as readable.
            let w = unsafe { &*cur };
            let opcode = match w.opcode {
                IBV_WR_RDMA_WRITE => SendOpcode::Write,
                IBV_WR_RDMA_WRITE_WITH_IMM => SendOpcode::WriteWithImm(u32::from_be(w.imm_data)),
                _ => {
                    return Err(invalid(
                        "opcode: MRC carries IBV_WR_RDMA_WRITE and IBV_WR_RDMA_WRITE_WITH_IMM only",
                    ));
                }
            };
            if w.send_flags & IBV_SEND_INLINE != 0 {
                return Err(invalid("IBV_SEND_INLINE: the device has no inline data"));
            }
            let n = usize::try_from(w.num_sge).map_err(|_| invalid("num_sge < 0"))?;
            if n > q.init.cap.max_send_sge as usize {
                return Err(invalid(&format!(
                    "num_sge {n} > the QP's max_send_sge {}",
                    q.init.cap.max_send_sge
                )));
            }
            sges.clear();
            if n > 0 {
                if w.sg_list.is_null() {
                    return Err(invalid("sg_list is NULL"));
                }
                // SAFETY: the caller gives `num_sge` readable entries at `sg_list`.
                let list = unsafe { core::slice::from_raw_parts(w.sg_list, n) };
                // SAFETY: the parent outlives its children.
                let nic = &unsafe { &*q.ctx }.nic;
                if let Some(s) = list
                    .iter()
                    .find(|s| !nic.covers(s.lkey, s.addr, s.length, q.pd))
                {
                    return Err(invalid(&format!(
                        "gather entry {:#x}+{} is not inside a region of the QP's PD with lkey {:#x}",
                        s.addr, s.length, s.lkey
                    )));
                }
                sges.extend(list.iter().map(|s| Sge {
                    addr: s.addr,
                    length: s.length,
                    lkey: s.lkey,
                }));
            }
            handle
                .post_send(
                    q.qpn,
                    &SendWr {
                        wr_id: w.wr_id,
                        opcode,
                        sg_list: sges,
                        remote_addr: w.remote_addr,
                        rkey: w.rkey,
                        signaled: w.send_flags & IBV_SEND_SIGNALED != 0 || q.init.sq_sig_all != 0,
                    },
                )
                .map_err(Fail::from)?;
            cur = w.next;
        }
        Ok(0)
    });
    if r != 0 && !bad_wr.is_null() {
        // SAFETY: the caller gives a writable `bad_wr`.
        unsafe { *bad_wr = failed };
    }
    r
}

/// `mrc_post_recv`: each receive is consumed by one incoming Write-with-Immediate.
///
/// # Safety
/// `qp` NULL or live; `wr` a readable list; `bad_wr` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_post_recv(
    qp: *mut mrc_qp,
    wr: *mut ibv_recv_wr,
    bad_wr: *mut *mut ibv_recv_wr,
) -> c_int {
    let mut failed: *mut ibv_recv_wr = wr;
    let r = guard_int(|| {
        let q = obj(qp, Kind::Qp)?;
        if lock(&q.local).state == IBV_QPS_RESET {
            return Err(invalid("the QP is in RESET: post receives from INIT on"));
        }
        if wr.is_null() {
            return Err(invalid("wr is NULL"));
        }
        let p = lock(&q.post);
        let mut cur = wr;
        while !cur.is_null() {
            failed = cur;
            // SAFETY: a non-null element of the list the caller gives as readable.
            let w = unsafe { &*cur };
            if w.num_sge < 0 || w.num_sge as u32 > q.init.cap.max_recv_sge {
                return Err(invalid(&format!(
                    "num_sge {}: 0..={} (the QP's max_recv_sge)",
                    w.num_sge, q.init.cap.max_recv_sge
                )));
            }
            if q.recv_posted
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |v| {
                    (v < q.init.cap.max_recv_wr).then_some(v + 1)
                })
                .is_err()
            {
                return Err(fail(
                    libc::ENOMEM,
                    format!(
                        "the receive queue is full ({} receives posted and not completed)",
                        q.init.cap.max_recv_wr
                    ),
                ));
            }
            if let Err(e) = p.handle.post_recv(q.qpn, &RecvWr { wr_id: w.wr_id }) {
                q.recv_posted.fetch_sub(1, Ordering::AcqRel);
                return Err(e.into());
            }
            cur = w.next;
        }
        Ok(0)
    });
    if r != 0 && !bad_wr.is_null() {
        // SAFETY: the caller gives a writable `bad_wr`.
        unsafe { *bad_wr = failed };
    }
    r
}

// ---- async events --------------------------------------------------------------------------

/// `mrc_get_async_event`: blocks until the context has one.
///
/// # Safety
/// `c` NULL or live; `event` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_get_async_event(
    c: *mut mrc_context,
    event: *mut mrc_async_event,
) -> c_int {
    guard_int(|| {
        let ctx = ctx_of(c)?;
        let o = out(event, "event")?;
        let mut q = lock(&ctx.shared.events);
        loop {
            if let Some(e) = q.pop_front() {
                *o = e;
                return Ok(0);
            }
            q = ctx
                .shared
                .event_ready
                .wait(q)
                .unwrap_or_else(PoisonError::into_inner);
        }
    })
}

/// `mrc_ack_async_event`.
///
/// # Safety
/// `event` NULL or readable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_ack_async_event(_event: *mut mrc_async_event) {}

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::{offset_of, size_of};

    #[test]
    fn layouts_match_the_header() {
        assert_eq!(size_of::<mrc_device_attr>(), 20);
        assert_eq!(size_of::<mrc_qp_hint_attr>(), 140);
        assert_eq!(size_of::<mrc_qp_init_attr>(), 72);
        assert_eq!(offset_of!(mrc_qp_init_attr, pd), 48);
        assert_eq!(offset_of!(mrc_qp_init_attr, protocol_version), 64);
        assert_eq!(offset_of!(mrc_qp_attr, ev_profile_id), 8);
        assert_eq!(offset_of!(mrc_qp_attr, qp_hint), 32);
        assert_eq!(offset_of!(mrc_qp_attr, vendor_cfg), 44);
        assert_eq!(size_of::<mrc_qp_attr>(), 176);
        assert_eq!(size_of::<mrc_async_event>(), 16);
    }
}
