//! The controller API (`include/mrc_ctl.h`, controller API 1.0.1) where it shapes what
//! applications see: the EV and CC profiles an application names by id at INIT, and the
//! administrative state of ports.
//!
//! Profiles are node-wide files (the controller runs in another process than the NICs it
//! configures): `crate::profiles` keeps them and turns them into engine profiles at INIT.
//!
//! Implemented: versions, device query, CC profiles (`"uet-1.0-nscc"` or none), EV profiles in
//! AUTO mode, port admin state on in-memory devices. Refused with EOPNOTSUPP: EV Format
//! profiles, EXP/GEN EV modes, EV and EV field operations, EV events, endpoint requests.

use core::ffi::{CStr, c_char, c_int, c_void};
use std::collections::HashSet;
use std::sync::Mutex;

use crate::api::{ctx_of, mrc_comp_channel, mrc_context, mrc_cq};
use crate::device::{NicShared, context, set_mem_link};
pub use crate::profiles::{
    MRC_CTL_PROFILE_INIT, MRC_CTL_PROFILE_OFFLINE, MRC_CTL_PROFILE_ONLINE, mrc_ctl_cc_nscc_cfg,
};
use crate::profiles::{NSCC, NSCC_KEYS, Record, Which, engine_ev, nscc_of_record, nscc_to_record};
use crate::{Fail, fail, guard_int, guard_ptr, input, invalid, lock, out};

// ---- constants of mrc_ctl.h / mrc_ctl_api_ver.h ---------------------------------------------

const fn ver(major: u32, minor: u32, sub: u32) -> u32 {
    (major << 24) | (minor << 16) | sub
}
pub const MRC_CTL_API_CURRENT_VERSION: u32 = ver(1, 0, 1);
pub const MRC_CTL_API_LAST_SUPPORTED_VERSION: u32 = ver(0, 0, 0);
pub const MRC_CTL_VENDOR_API_CURRENT_VERSION: u32 = ver(1, 0, 0);
pub const MRC_CTL_VENDOR_API_LAST_SUPPORTED_VERSION: u32 = ver(0, 0, 0);

pub const MRC_CTL_PROTOCOL_VERSION_1: u32 = 1;

pub const MRC_CTL_PORT_ADMIN_DISABLED: c_int = 0;
pub const MRC_CTL_PORT_ADMIN_ENABLED: c_int = 1;
pub const MRC_CTL_PORT_ADMIN_STATE: c_int = 1 << 0;

pub const MRC_CTL_EV_MODE_AUTO: c_int = 1 << 0;
pub const MRC_CTL_EV_MODE_EXP: c_int = 1 << 1;
pub const MRC_CTL_EV_MODE_GEN: c_int = 1 << 2;

pub const MRC_CTL_EV_PROFILE_STATE: c_int = 1 << 0;
pub const MRC_CTL_EV_PROFILE_CUR_STATE: c_int = 1 << 1;
pub const MRC_CTL_EV_PROFILE_MODE: c_int = 1 << 2;
pub const MRC_CTL_EV_PROFILE_FMT_ID: c_int = 1 << 3;
pub const MRC_CTL_EV_PROFILE_COUNT: c_int = 1 << 4;
pub const MRC_CTL_EV_PROFILE_MIN_ACTIVE: c_int = 1 << 5;
pub const MRC_CTL_EV_PROFILE_EVENT_MASK: c_int = 1 << 6;
pub const MRC_CTL_EV_PROFILE_EV_OP: c_int = 1 << 7;
pub const MRC_CTL_EV_PROFILE_EV_FIELDS_OP: c_int = 1 << 8;
pub const MRC_CTL_EV_PROFILE_VENDOR_CFG: c_int = 1 << 31;
const EV_MASK: c_int = 0x1ff | MRC_CTL_EV_PROFILE_VENDOR_CFG;

pub const MRC_CTL_CC_PROFILE_STATE: c_int = 1 << 0;
pub const MRC_CTL_CC_PROFILE_CUR_STATE: c_int = 1 << 1;
pub const MRC_CTL_CC_PROFILE_ALGORITHM: c_int = 1 << 2;
pub const MRC_CTL_CC_PROFILE_CONFIG: c_int = 1 << 3;
pub const MRC_CTL_CC_PROFILE_VENDOR_CFG: c_int = 1 << 31;
const CC_MASK: c_int = 0xf | MRC_CTL_CC_PROFILE_VENDOR_CFG;

pub const MRC_CTL_MAX_VENDOR_CFG_SIZE: usize = 128;

/// Profiles of each kind a node may hold (a bound for `mrc_ctl_query_device`).
const MAX_PROFILES: u32 = 1024;
/// EVs of one QP: the engine's bound over all planes.
const MAX_EVS_PER_QP: u32 = 1 << 12;

// ---- the C structures -----------------------------------------------------------------------

/// `mrc_ctl_device_attr.ev`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct mrc_ctl_device_attr_ev {
    pub ev_max_fmt_profiles: u32,
    pub ev_max_profiles: u32,
    pub ev_max_count: u32,
    pub ev_free_count: u32,
    pub ev_max_count_profile: u32,
    pub ev_count_align: u32,
    pub ev_max_width: u32,
    pub ev_fmt_mode_mask: u32,
    pub ev_mode_mask: u32,
    pub ev_op_max_entries: u32,
}

/// `mrc_ctl_device_attr.cc`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mrc_ctl_device_attr_cc {
    pub cc_max_profiles: u32,
    pub algorithms: *const *const c_char,
}

/// `struct mrc_ctl_device_attr`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mrc_ctl_device_attr {
    pub mrc_ctl_protocol_version: u32,
    pub ev: mrc_ctl_device_attr_ev,
    pub cc: mrc_ctl_device_attr_cc,
    pub phy_port_mask: u32,
    pub opt_attr: u32,
}

impl mrc_ctl_device_attr {
    const ZERO: Self = Self {
        mrc_ctl_protocol_version: 0,
        ev: mrc_ctl_device_attr_ev {
            ev_max_fmt_profiles: 0,
            ev_max_profiles: 0,
            ev_max_count: 0,
            ev_free_count: 0,
            ev_max_count_profile: 0,
            ev_count_align: 0,
            ev_max_width: 0,
            ev_fmt_mode_mask: 0,
            ev_mode_mask: 0,
            ev_op_max_entries: 0,
        },
        cc: mrc_ctl_device_attr_cc {
            cc_max_profiles: 0,
            algorithms: core::ptr::null(),
        },
        phy_port_mask: 0,
        opt_attr: 0,
    };
}

/// `struct mrc_ctl_port_attr`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mrc_ctl_port_attr {
    pub port_admin_state: c_int,
}

/// `mrc_ctl_ev_profile_attr.ev_op` / `.ev_fields_op` (an op, an array, its length).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mrc_ctl_ev_array_op {
    pub op: c_int,
    pub entries: *mut c_void,
    pub count: c_int,
}

/// `struct mrc_ctl_ev_profile_attr`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mrc_ctl_ev_profile_attr {
    pub profile_state: c_int,
    pub cur_profile_state: c_int,
    pub ev_mode: c_int,
    pub ev_fmt_profile_id: u64,
    pub ev_count: u32,
    pub ev_min_active: u32,
    pub ev_event_mask: c_int,
    pub ev_op: mrc_ctl_ev_array_op,
    pub ev_fields_op: mrc_ctl_ev_array_op,
    pub vendor_cfg: [u8; MRC_CTL_MAX_VENDOR_CFG_SIZE],
}

/// `struct mrc_ctl_cc_profile_attr`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mrc_ctl_cc_profile_attr {
    pub profile_state: c_int,
    pub cur_profile_state: c_int,
    pub algorithm: *const c_char,
    pub cc_config: *const c_void,
    pub vendor_cfg: [u8; MRC_CTL_MAX_VENDOR_CFG_SIZE],
}

/// Checks the profile id and the requested state move; applies it to `r`.
fn move_state(
    r: &mut Record,
    to: c_int,
    ready_offline: bool,
    ready_online: bool,
) -> Result<(), Fail> {
    let cur = r.state();
    let ok = match (cur, to) {
        (a, b) if a == b => true,
        (MRC_CTL_PROFILE_INIT, MRC_CTL_PROFILE_OFFLINE) => ready_offline,
        (MRC_CTL_PROFILE_OFFLINE, MRC_CTL_PROFILE_ONLINE) => ready_online,
        (MRC_CTL_PROFILE_ONLINE, MRC_CTL_PROFILE_OFFLINE) => true,
        (MRC_CTL_PROFILE_OFFLINE, MRC_CTL_PROFILE_INIT) => true,
        _ => false,
    };
    if !ok {
        return Err(invalid(&format!(
            "profile state {cur} -> {to}: not a move the profile can make (missing attributes?)"
        )));
    }
    if to == MRC_CTL_PROFILE_INIT {
        r.0.clear();
    }
    r.set_state(to);
    Ok(())
}

fn check_id(id: u64) -> Result<(), Fail> {
    if id == 0 {
        return Err(invalid("profile id 0 is the device's default profile"));
    }
    Ok(())
}

fn unsupported(what: &str) -> Fail {
    fail(libc::EOPNOTSUPP, format!("{what}: not supported by mrc-rs"))
}

// ---- versions and device --------------------------------------------------------------------

/// `mrc_ctl_query_version`: NULL outputs are skipped.
///
/// # Safety
/// Each pointer NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_ctl_query_version(
    current: *mut u32,
    last: *mut u32,
    vendor: *mut u32,
    last_vendor: *mut u32,
) {
    for (p, v) in [
        (current, MRC_CTL_API_CURRENT_VERSION),
        (last, MRC_CTL_API_LAST_SUPPORTED_VERSION),
        (vendor, MRC_CTL_VENDOR_API_CURRENT_VERSION),
        (last_vendor, MRC_CTL_VENDOR_API_LAST_SUPPORTED_VERSION),
    ] {
        if !p.is_null() {
            // SAFETY: non-null and writable (caller contract).
            unsafe { *p = v };
        }
    }
}

/// The NULL-terminated algorithm list `mrc_ctl_device_attr.cc.algorithms` points at.
struct Algorithms([*const c_char; 2]);
// SAFETY: pointers to static, immutable C strings; never written.
unsafe impl Sync for Algorithms {}
static ALGORITHMS: Algorithms = Algorithms([NSCC.as_ptr(), core::ptr::null()]);

fn device_attr(nic: &NicShared) -> mrc_ctl_device_attr {
    let planes = u32::from(nic.planes);
    mrc_ctl_device_attr {
        mrc_ctl_protocol_version: MRC_CTL_PROTOCOL_VERSION_1,
        ev: mrc_ctl_device_attr_ev {
            ev_max_fmt_profiles: 0,
            ev_max_profiles: MAX_PROFILES,
            ev_max_count: MAX_PROFILES * MAX_EVS_PER_QP,
            ev_free_count: MAX_PROFILES * MAX_EVS_PER_QP,
            ev_max_count_profile: MAX_EVS_PER_QP,
            ev_count_align: planes.max(1),
            ev_max_width: 32,
            ev_fmt_mode_mask: 0,
            ev_mode_mask: MRC_CTL_EV_MODE_AUTO as u32,
            ev_op_max_entries: 0,
        },
        cc: mrc_ctl_device_attr_cc {
            cc_max_profiles: MAX_PROFILES,
            algorithms: ALGORITHMS.0.as_ptr(),
        },
        phy_port_mask: if planes >= 31 {
            u32::MAX - 1
        } else {
            ((1u32 << planes) - 1) << 1
        },
        opt_attr: 0,
    }
}

/// `mrc_ctl_query_device_ex`.
///
/// # Safety
/// Pointers NULL or valid as the header says.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_ctl_query_device_ex(
    vctx: *mut crate::ibv::ibv_context,
    mctx: *mut mrc_context,
    attr: *mut mrc_ctl_device_attr,
    supported: *mut c_int,
) -> c_int {
    guard_int(|| {
        let sup = out(supported, "supported")?;
        let a = out(attr, "ctl_attr")?;
        if vctx.is_null() {
            return Err(invalid("context is NULL"));
        }
        if !mctx.is_null() && ctx_of(mctx)?.vctx != vctx {
            return Err(invalid("mcontext was made from another verbs context"));
        }
        if let Ok(c) = context(vctx) {
            *sup = 1;
            *a = device_attr(&c.nic);
        } else {
            *sup = 0;
            *a = mrc_ctl_device_attr::ZERO;
        }
        Ok(0)
    })
}

/// `mrc_ctl_query_device` (1.0.0): ENODEV for a device that is not MRC.
///
/// # Safety
/// As [`mrc_ctl_query_device_ex`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_ctl_query_device(
    vctx: *mut crate::ibv::ibv_context,
    attr: *mut mrc_ctl_device_attr,
) -> c_int {
    guard_int(|| {
        let a = out(attr, "ctl_attr")?;
        let c = context(vctx).map_err(|_| fail(libc::ENODEV, "not an mrc-rs device".into()))?;
        *a = device_attr(&c.nic);
        Ok(0)
    })
}

// ---- ports ----------------------------------------------------------------------------------

/// Ports this process disabled: (NIC, port).
static DISABLED: Mutex<Option<HashSet<(usize, u8)>>> = Mutex::new(None);

fn port_of(ctx: &mrc_context, port: u8, mask: c_int) -> Result<(), Fail> {
    if port == 0 || port > ctx.nic.planes {
        return Err(invalid(&format!("port {port}: 1..={}", ctx.nic.planes)));
    }
    if mask & !MRC_CTL_PORT_ADMIN_STATE != 0 {
        return Err(invalid("unknown mrc_ctl_port_attr_mask bits"));
    }
    Ok(())
}

/// `mrc_ctl_query_port`.
///
/// # Safety
/// `c` NULL or live; `attr` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_ctl_query_port(
    c: *mut mrc_context,
    port: u8,
    attr: *mut mrc_ctl_port_attr,
    mask: c_int,
) -> c_int {
    guard_int(|| {
        let ctx = ctx_of(c)?;
        port_of(ctx, port, mask)?;
        let a = out(attr, "attr")?;
        if mask & MRC_CTL_PORT_ADMIN_STATE != 0 {
            let off = lock(&DISABLED)
                .as_ref()
                .is_some_and(|d| d.contains(&(ctx.nic.index, port)));
            a.port_admin_state = if off {
                MRC_CTL_PORT_ADMIN_DISABLED
            } else {
                MRC_CTL_PORT_ADMIN_ENABLED
            };
        }
        Ok(0)
    })
}

/// `mrc_ctl_modify_port`: the plane's link on the in-memory fabric (EOPNOTSUPP elsewhere).
///
/// # Safety
/// `c` NULL or live; `attr` NULL or readable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_ctl_modify_port(
    c: *mut mrc_context,
    port: u8,
    attr: *mut mrc_ctl_port_attr,
    mask: c_int,
) -> c_int {
    guard_int(|| {
        let ctx = ctx_of(c)?;
        port_of(ctx, port, mask)?;
        if mask & MRC_CTL_PORT_ADMIN_STATE == 0 {
            return Ok(0);
        }
        let a = input(attr, "attr")?;
        let up = match a.port_admin_state {
            MRC_CTL_PORT_ADMIN_ENABLED => true,
            MRC_CTL_PORT_ADMIN_DISABLED => false,
            s => return Err(invalid(&format!("port_admin_state {s}"))),
        };
        if !set_mem_link(ctx.nic.index, port - 1, up) {
            return Err(unsupported("port admin state on a DPDK device"));
        }
        // ibv_query_port answers at once; the NIC's link event says the same a moment later.
        if let Some(d) = lock(&ctx.nic.down).get_mut(usize::from(port - 1)) {
            *d = !up;
        }
        let mut disabled = lock(&DISABLED);
        let disabled = disabled.get_or_insert_with(HashSet::new);
        if up {
            disabled.remove(&(ctx.nic.index, port));
        } else {
            disabled.insert((ctx.nic.index, port));
        }
        Ok(0)
    })
}

// ---- EV profiles ----------------------------------------------------------------------------

/// `mrc_ctl_modify_ev_profile`: AUTO mode only.
///
/// # Safety
/// `c` NULL or live; `attr` NULL or readable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_ctl_modify_ev_profile(
    c: *mut mrc_context,
    id: u64,
    attr: *mut mrc_ctl_ev_profile_attr,
    mask: c_int,
) -> c_int {
    guard_int(|| {
        let ctx = ctx_of(c)?;
        check_id(id)?;
        if mask & !EV_MASK != 0 {
            return Err(invalid("unknown mrc_ctl_ev_profile_attr_mask bits"));
        }
        if mask & (MRC_CTL_EV_PROFILE_EV_OP | MRC_CTL_EV_PROFILE_EV_FIELDS_OP) != 0 {
            return Err(unsupported("EV and EV field operations"));
        }
        let a = input(attr, "attr")?;
        let mut r = Record::load(Which::Ev, id)?;
        let has = |bit: c_int| mask & bit != 0;
        if has(MRC_CTL_EV_PROFILE_CUR_STATE) && a.cur_profile_state != r.state() {
            return Err(invalid("cur_profile_state is not the profile's state"));
        }
        let config = MRC_CTL_EV_PROFILE_MODE
            | MRC_CTL_EV_PROFILE_FMT_ID
            | MRC_CTL_EV_PROFILE_COUNT
            | MRC_CTL_EV_PROFILE_MIN_ACTIVE
            | MRC_CTL_EV_PROFILE_EVENT_MASK;
        if mask & config != 0 && r.state() == MRC_CTL_PROFILE_ONLINE {
            return Err(invalid("an ONLINE EV profile changes only its state"));
        }
        if has(MRC_CTL_EV_PROFILE_MODE) {
            match a.ev_mode {
                MRC_CTL_EV_MODE_AUTO => r.set("mode", a.ev_mode),
                MRC_CTL_EV_MODE_EXP | MRC_CTL_EV_MODE_GEN => {
                    return Err(unsupported("EV modes EXP and GEN"));
                }
                m => return Err(invalid(&format!("ev_mode {m}"))),
            }
        }
        if has(MRC_CTL_EV_PROFILE_FMT_ID) {
            r.set("fmt_id", a.ev_fmt_profile_id);
        }
        if has(MRC_CTL_EV_PROFILE_COUNT) {
            if a.ev_count > MAX_EVS_PER_QP {
                return Err(invalid(&format!(
                    "ev_count {}: at most {MAX_EVS_PER_QP}",
                    a.ev_count
                )));
            }
            let align = u32::from(ctx.nic.planes.max(1));
            r.set("count", a.ev_count.div_ceil(align) * align);
        }
        if has(MRC_CTL_EV_PROFILE_MIN_ACTIVE) {
            r.set("min_active", a.ev_min_active);
        }
        if has(MRC_CTL_EV_PROFILE_EVENT_MASK) {
            r.set("event_mask", a.ev_event_mask);
        }
        let count: u32 = r.get("count").unwrap_or(0);
        let min_active: u32 = r.get("min_active").unwrap_or(0);
        if count != 0 && min_active > count {
            return Err(invalid(&format!(
                "ev_min_active {min_active} > ev_count {count}"
            )));
        }
        if has(MRC_CTL_EV_PROFILE_STATE) {
            let moded = r.0.contains_key("mode");
            move_state(&mut r, a.profile_state, moded, moded)?;
        }
        r.store(Which::Ev, id)?;
        Ok(0)
    })
}

/// `mrc_ctl_query_ev_profile`.
///
/// # Safety
/// `c` NULL or live; `attr` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_ctl_query_ev_profile(
    c: *mut mrc_context,
    id: u64,
    attr: *mut mrc_ctl_ev_profile_attr,
    mask: c_int,
) -> c_int {
    guard_int(|| {
        let ctx = ctx_of(c)?;
        check_id(id)?;
        if mask & !EV_MASK != 0 {
            return Err(invalid("unknown mrc_ctl_ev_profile_attr_mask bits"));
        }
        if mask & (MRC_CTL_EV_PROFILE_EV_OP | MRC_CTL_EV_PROFILE_EV_FIELDS_OP) != 0 {
            return Err(unsupported("EV and EV field operations"));
        }
        let a = out(attr, "attr")?;
        let r = Record::load(Which::Ev, id)?;
        let has = |bit: c_int| mask & bit != 0;
        if has(MRC_CTL_EV_PROFILE_STATE | MRC_CTL_EV_PROFILE_CUR_STATE) {
            a.profile_state = r.state();
            a.cur_profile_state = r.state();
        }
        if has(MRC_CTL_EV_PROFILE_MODE) {
            a.ev_mode = r.get("mode").unwrap_or(0);
        }
        if has(MRC_CTL_EV_PROFILE_FMT_ID) {
            a.ev_fmt_profile_id = r.get("fmt_id").unwrap_or(0);
        }
        let engine = engine_ev(&r, ctx.nic.planes);
        let planes = u32::from(ctx.nic.planes.max(1));
        if has(MRC_CTL_EV_PROFILE_COUNT) {
            a.ev_count = u32::from(engine.evs_per_plane) * planes;
        }
        if has(MRC_CTL_EV_PROFILE_MIN_ACTIVE) {
            a.ev_min_active = r
                .get("min_active")
                .filter(|&m: &u32| m > 0)
                .unwrap_or(u32::from(engine.floor_per_plane) * planes);
        }
        if has(MRC_CTL_EV_PROFILE_EVENT_MASK) {
            a.ev_event_mask = r.get("event_mask").unwrap_or(0);
        }
        Ok(0)
    })
}

// ---- CC profiles ----------------------------------------------------------------------------

/// `mrc_ctl_modify_cc_profile`: `"uet-1.0-nscc"` or NULL (no congestion control).
///
/// # Safety
/// `c` NULL or live; `attr` NULL or readable, its `algorithm` NULL or a C string, its
/// `cc_config` NULL or a readable `mrc_ctl_cc_nscc_cfg`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_ctl_modify_cc_profile(
    c: *mut mrc_context,
    id: u64,
    attr: *mut mrc_ctl_cc_profile_attr,
    mask: c_int,
) -> c_int {
    guard_int(|| {
        ctx_of(c)?;
        check_id(id)?;
        if mask & !CC_MASK != 0 {
            return Err(invalid("unknown mrc_ctl_cc_profile_attr_mask bits"));
        }
        let a = input(attr, "attr")?;
        let mut r = Record::load(Which::Cc, id)?;
        let has = |bit: c_int| mask & bit != 0;
        if has(MRC_CTL_CC_PROFILE_CUR_STATE) && a.cur_profile_state != r.state() {
            return Err(invalid("cur_profile_state is not the profile's state"));
        }
        if has(MRC_CTL_CC_PROFILE_ALGORITHM | MRC_CTL_CC_PROFILE_CONFIG)
            && r.state() == MRC_CTL_PROFILE_ONLINE
        {
            return Err(invalid("an ONLINE CC profile changes only its state"));
        }
        if has(MRC_CTL_CC_PROFILE_ALGORITHM) {
            if a.algorithm.is_null() {
                r.set("algorithm", "none");
            } else {
                // SAFETY: a C string (caller contract).
                let name = unsafe { CStr::from_ptr(a.algorithm) };
                if name != NSCC {
                    return Err(invalid(&format!(
                        "CC algorithm {name:?}: mrc-rs offers {NSCC:?}"
                    )));
                }
                r.set("algorithm", NSCC.to_string_lossy());
            }
        }
        if has(MRC_CTL_CC_PROFILE_CONFIG) {
            let cfg = input(a.cc_config.cast::<mrc_ctl_cc_nscc_cfg>(), "cc_config")?;
            nscc_to_record(&cfg, &mut r);
        }
        if has(MRC_CTL_CC_PROFILE_STATE) {
            let algorithm = r.0.get("algorithm").cloned();
            let configured = algorithm.as_deref() == Some("none")
                || NSCC_KEYS.iter().all(|k| r.0.contains_key(*k));
            move_state(&mut r, a.profile_state, algorithm.is_some(), configured)?;
        }
        r.store(Which::Cc, id)?;
        Ok(0)
    })
}

/// `mrc_ctl_query_cc_profile`: with CONFIG, `attr.cc_config` points at the caller's
/// `mrc_ctl_cc_nscc_cfg`, which is filled in.
///
/// # Safety
/// `c` NULL or live; `attr` NULL or writable, its `cc_config` (with CONFIG) NULL or a writable
/// `mrc_ctl_cc_nscc_cfg`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_ctl_query_cc_profile(
    c: *mut mrc_context,
    id: u64,
    attr: *mut mrc_ctl_cc_profile_attr,
    mask: c_int,
) -> c_int {
    guard_int(|| {
        ctx_of(c)?;
        check_id(id)?;
        if mask & !CC_MASK != 0 {
            return Err(invalid("unknown mrc_ctl_cc_profile_attr_mask bits"));
        }
        let a = out(attr, "attr")?;
        let r = Record::load(Which::Cc, id)?;
        let has = |bit: c_int| mask & bit != 0;
        if has(MRC_CTL_CC_PROFILE_STATE | MRC_CTL_CC_PROFILE_CUR_STATE) {
            a.profile_state = r.state();
            a.cur_profile_state = r.state();
        }
        if has(MRC_CTL_CC_PROFILE_ALGORITHM) {
            a.algorithm = match r.0.get("algorithm").map(String::as_str) {
                Some("uet-1.0-nscc") => NSCC.as_ptr(),
                _ => core::ptr::null(),
            };
        }
        if has(MRC_CTL_CC_PROFILE_CONFIG) {
            *out(
                a.cc_config.cast::<mrc_ctl_cc_nscc_cfg>().cast_mut(),
                "cc_config",
            )? = nscc_of_record(&r);
        }
        Ok(0)
    })
}

// ---- refused --------------------------------------------------------------------------------

/// `mrc_ctl_modify_ev_fmt_profile`: EOPNOTSUPP.
#[unsafe(no_mangle)]
pub extern "C" fn mrc_ctl_modify_ev_fmt_profile(
    _c: *mut mrc_context,
    _id: u64,
    _attr: *mut c_void,
    _mask: c_int,
) -> c_int {
    guard_int(|| Err(unsupported("EV Format profiles")))
}

/// `mrc_ctl_query_ev_fmt_profile`: EOPNOTSUPP.
#[unsafe(no_mangle)]
pub extern "C" fn mrc_ctl_query_ev_fmt_profile(
    _c: *mut mrc_context,
    _id: u64,
    _attr: *mut c_void,
    _mask: c_int,
) -> c_int {
    guard_int(|| Err(unsupported("EV Format profiles")))
}

/// `mrc_ctl_create_ev_event_cq`: NULL, EOPNOTSUPP.
#[unsafe(no_mangle)]
pub extern "C" fn mrc_ctl_create_ev_event_cq(
    _c: *mut mrc_context,
    _cqe: c_int,
    _cq_context: *mut c_void,
    _channel: *mut mrc_comp_channel,
    _comp_vector: c_int,
) -> *mut mrc_cq {
    guard_ptr(|| Err(unsupported("EV events")))
}

/// `mrc_ctl_poll_ev_event`: -EOPNOTSUPP (this function returns a negative errno).
#[unsafe(no_mangle)]
pub extern "C" fn mrc_ctl_poll_ev_event(
    _cq: *mut mrc_cq,
    _num_entries: c_int,
    _events: *mut c_void,
) -> c_int {
    crate::set_errno(libc::EOPNOTSUPP);
    -libc::EOPNOTSUPP
}

/// `mrc_ctl_ep_batch_send_wait`: EOPNOTSUPP.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub extern "C" fn mrc_ctl_ep_batch_send_wait(
    _c: *mut mrc_context,
    _req_tc: u8,
    _op_type: c_int,
    _req: *mut c_void,
    _num_req: c_int,
    _rsp_timeout: u32,
    _rsp: *mut c_void,
    _num_rsp: *mut c_int,
) -> c_int {
    guard_int(|| Err(unsupported("endpoint requests")))
}
