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
use crate::evlive::mrc_ctl_ev_event;
use crate::evs::{
    Format, Gen, MAX_FIELDS, MRC_CTL_EV_ASSUMED_BAD, MRC_CTL_EV_DENIED, MRC_CTL_EV_FMT_MODE_SRV6,
    MRC_CTL_EV_FMT_MODE_STEV, MRC_CTL_EV_FMT_MODE_UDP, MRC_CTL_EV_GOOD, MRC_CTL_EV_UNKNOWN,
    check_fields, check_format, decode_fields, decode_list, encode_fields, encode_list, generate,
    mrc_ctl_ev, mrc_ctl_ev_field, mrc_ctl_ev_fmt_field,
};
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

pub use crate::profiles::{MRC_CTL_EV_MODE_AUTO, MRC_CTL_EV_MODE_EXP, MRC_CTL_EV_MODE_GEN};

pub const MRC_CTL_EV_OP_REPLACE_EV: c_int = 0;
pub const MRC_CTL_EV_OP_MODIFY_EV_STATE: c_int = 1;
pub const MRC_CTL_EV_OP_QUERY_EV_STATE: c_int = 2;
pub const MRC_CTL_EV_OP_QUERY_EV_ARRAY: c_int = 3;
pub const MRC_CTL_EV_FIELDS_OP_MODIFY_FIELDS: c_int = 0;
pub const MRC_CTL_EV_FIELDS_OP_QUERY_FIELDS: c_int = 1;
pub const MRC_CTL_EV_OP_F_ALL_COPIES: u32 = 1 << 0;

pub const MRC_CTL_EV_FMT_PROFILE_STATE: c_int = 1 << 0;
pub const MRC_CTL_EV_FMT_PROFILE_CUR_STATE: c_int = 1 << 1;
pub const MRC_CTL_EV_FMT_PROFILE_MODE: c_int = 1 << 2;
pub const MRC_CTL_EV_FMT_PROFILE_OP: c_int = 1 << 3;
pub const MRC_CTL_EV_FMT_VENDOR_CFG: c_int = 1 << 31;
const FMT_MASK: c_int = 0xf | MRC_CTL_EV_FMT_VENDOR_CFG;
pub const MRC_CTL_EV_FMT_OP_MODIFY_FIELDS: c_int = 0;
pub const MRC_CTL_EV_FMT_OP_QUERY_FIELDS: c_int = 1;

pub const MRC_CTL_OPT_CAP_EV_EVENT: u32 = 1 << 2;
pub const MRC_CTL_OPT_CAP_EV_EVENT_PRECISE_DROP_CNT: u32 = 1 << 4;

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

/// `mrc_ctl_ev_profile_attr.ev_op` / `.ev_fields_op`, `mrc_ctl_ev_fmt_profile_attr.ev_fmt_op`
/// (an op, an array, its length).
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

/// `struct mrc_ctl_ev_fmt_profile_attr`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mrc_ctl_ev_fmt_profile_attr {
    pub profile_state: c_int,
    pub cur_profile_state: c_int,
    pub ev_fmt_mode: c_int,
    pub ev_fmt_op: mrc_ctl_ev_array_op,
    pub vendor_cfg: [u8; MRC_CTL_MAX_VENDOR_CFG_SIZE],
}

/// `struct mrc_ctl_ev_op_entry`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct mrc_ctl_ev_op_entry {
    pub ev: mrc_ctl_ev,
    pub ev_new: mrc_ctl_ev,
    pub state: c_int,
    pub flags: u32,
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

/// The start of every profile call: the context, the id (not 0), the mask (bits of `known`
/// only) and the stored profile of kind `which`.
fn profile<'a>(
    c: *mut mrc_context,
    id: u64,
    mask: c_int,
    known: c_int,
    which: Which,
) -> Result<(&'a mrc_context, Record), Fail> {
    let ctx = ctx_of(c)?;
    check_id(id)?;
    if mask & !known != 0 {
        let name = match which {
            Which::Ev => "ev_profile",
            Which::Cc => "cc_profile",
            Which::Fmt => "ev_fmt_profile",
        };
        return Err(invalid(&format!("unknown mrc_ctl_{name}_attr_mask bits")));
    }
    Ok((ctx, Record::load(which, id)?))
}

/// Bit 1 of every profile mask (`..._CUR_STATE`): in a modify, the state the caller believes
/// the profile is in.
const CUR_STATE: c_int = 1 << 1;

fn check_cur_state(r: &Record, mask: c_int, cur: c_int) -> Result<(), Fail> {
    if mask & CUR_STATE != 0 && cur != r.state() {
        return Err(invalid("cur_profile_state is not the profile's state"));
    }
    Ok(())
}

/// A query's STATE / CUR_STATE (bits 0 and 1 of every profile mask): both the current state.
fn report_state(r: &Record, mask: c_int, state: &mut c_int, cur: &mut c_int) {
    if mask & (1 | CUR_STATE) != 0 {
        *state = r.state();
        *cur = r.state();
    }
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
    let srv6 = nic.plan.is_some();
    mrc_ctl_device_attr {
        mrc_ctl_protocol_version: MRC_CTL_PROTOCOL_VERSION_1,
        ev: mrc_ctl_device_attr_ev {
            ev_max_fmt_profiles: MAX_PROFILES,
            ev_max_profiles: MAX_PROFILES,
            ev_max_count: MAX_PROFILES * MAX_EVS_PER_QP,
            ev_free_count: MAX_PROFILES * MAX_EVS_PER_QP,
            ev_max_count_profile: MAX_EVS_PER_QP,
            ev_count_align: planes.max(1),
            ev_max_width: if srv6 { 256 } else { 32 },
            ev_fmt_mode_mask: if srv6 {
                MRC_CTL_EV_FMT_MODE_SRV6 as u32
            } else {
                (MRC_CTL_EV_FMT_MODE_STEV | MRC_CTL_EV_FMT_MODE_UDP) as u32
            },
            ev_mode_mask: (MRC_CTL_EV_MODE_AUTO | MRC_CTL_EV_MODE_EXP | MRC_CTL_EV_MODE_GEN) as u32,
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
        opt_attr: MRC_CTL_OPT_CAP_EV_EVENT | MRC_CTL_OPT_CAP_EV_EVENT_PRECISE_DROP_CNT,
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

// ---- EV Format profiles ---------------------------------------------------------------------

/// The array of an op (`entries`, `count`) as a slice of `T`; EINVAL for a negative count or a
/// NULL array with a positive count.
fn op_slice<'a, T>(op: &mrc_ctl_ev_array_op) -> Result<&'a mut [T], Fail> {
    let n = usize::try_from(op.count).map_err(|_| invalid("array length < 0"))?;
    if n == 0 {
        return Ok(&mut []);
    }
    if op.entries.is_null() {
        return Err(invalid("array is NULL"));
    }
    // SAFETY: the caller gives `count` entries of the op's type (header contract).
    Ok(unsafe { core::slice::from_raw_parts_mut(op.entries.cast::<T>(), n) })
}

/// Fills `op`'s array with `items` (E2BIG and the needed length when it is too short).
fn fill<T: Copy>(op: &mut mrc_ctl_ev_array_op, items: &[T]) -> Result<(), Fail> {
    let dst = op_slice::<T>(op)?;
    if dst.len() < items.len() {
        op.count = items.len() as c_int;
        return Err(fail(
            libc::E2BIG,
            format!("the array holds {}, {} needed", dst.len(), items.len()),
        ));
    }
    dst[..items.len()].copy_from_slice(items);
    op.count = items.len() as c_int;
    Ok(())
}

fn fmt_widths(r: &Record) -> Vec<mrc_ctl_ev_fmt_field> {
    crate::profiles::format_of(r)
        .widths
        .iter()
        .map(|&w| mrc_ctl_ev_fmt_field { width: w as u8 })
        .collect()
}

/// Whether an ONLINE EV profile uses EV Format profile `fmt_id`.
fn fmt_in_use(fmt_id: u64) -> bool {
    let Ok(entries) = std::fs::read_dir(crate::profiles::dir()) else {
        return false;
    };
    entries.flatten().any(|e| {
        let name = e.file_name().to_string_lossy().into_owned();
        name.strip_prefix("ev-")
            .and_then(|id| id.parse::<u64>().ok())
            .and_then(|id| Record::load(Which::Ev, id).ok())
            .is_some_and(|r| {
                r.state() == MRC_CTL_PROFILE_ONLINE && r.get::<u64>("fmt_id") == Some(fmt_id)
            })
    })
}

/// `mrc_ctl_modify_ev_fmt_profile`: STEV and UDP formats (ECMP devices), SRv6 (SRv6 devices).
///
/// # Safety
/// `c` NULL or live; `attr` NULL or valid, its field array as its length says.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_ctl_modify_ev_fmt_profile(
    c: *mut mrc_context,
    id: u64,
    attr: *mut mrc_ctl_ev_fmt_profile_attr,
    mask: c_int,
) -> c_int {
    guard_int(|| {
        let (_, mut r) = profile(c, id, mask, FMT_MASK, Which::Fmt)?;
        let a = out(attr, "attr")?;
        let has = |bit: c_int| mask & bit != 0;
        check_cur_state(&r, mask, a.cur_profile_state)?;
        let online = r.state() == MRC_CTL_PROFILE_ONLINE;
        let modifies_fields =
            has(MRC_CTL_EV_FMT_PROFILE_OP) && a.ev_fmt_op.op == MRC_CTL_EV_FMT_OP_MODIFY_FIELDS;
        if online && (has(MRC_CTL_EV_FMT_PROFILE_MODE) || modifies_fields) {
            return Err(invalid(
                "an ONLINE EV Format profile changes only its state",
            ));
        }
        if has(MRC_CTL_EV_FMT_PROFILE_MODE) {
            match a.ev_fmt_mode {
                MRC_CTL_EV_FMT_MODE_STEV | MRC_CTL_EV_FMT_MODE_SRV6 | MRC_CTL_EV_FMT_MODE_UDP => {
                    if r.get::<c_int>("mode") != Some(a.ev_fmt_mode) {
                        r.0.remove("fields");
                    }
                    r.set("mode", a.ev_fmt_mode);
                }
                m => return Err(invalid(&format!("ev_fmt_mode {m}"))),
            }
        }
        if has(MRC_CTL_EV_FMT_PROFILE_OP) {
            match a.ev_fmt_op.op {
                MRC_CTL_EV_FMT_OP_MODIFY_FIELDS => {
                    let Some(mode) = r.get::<c_int>("mode") else {
                        return Err(invalid("set the EV Format mode before its fields"));
                    };
                    let f = op_slice::<mrc_ctl_ev_fmt_field>(&a.ev_fmt_op)?;
                    let widths: Vec<u32> = f.iter().map(|f| u32::from(f.width)).collect();
                    check_format(mode, &widths)?;
                    let text: Vec<String> = widths.iter().map(u32::to_string).collect();
                    r.set("fields", text.join(","));
                }
                MRC_CTL_EV_FMT_OP_QUERY_FIELDS => fill(&mut a.ev_fmt_op, &fmt_widths(&r))?,
                o => return Err(invalid(&format!("ev_fmt_op.op {o}"))),
            }
        }
        if has(MRC_CTL_EV_FMT_PROFILE_STATE) {
            if online && a.profile_state != MRC_CTL_PROFILE_ONLINE && fmt_in_use(id) {
                return Err(fail(
                    libc::EBUSY,
                    "an ONLINE EV profile uses this EV Format profile".into(),
                ));
            }
            let (moded, fielded) = (r.0.contains_key("mode"), r.0.contains_key("fields"));
            move_state(&mut r, a.profile_state, moded, fielded)?;
        }
        r.store(Which::Fmt, id)?;
        Ok(0)
    })
}

/// `mrc_ctl_query_ev_fmt_profile`.
///
/// # Safety
/// `c` NULL or live; `attr` NULL or valid, its field array as its length says.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_ctl_query_ev_fmt_profile(
    c: *mut mrc_context,
    id: u64,
    attr: *mut mrc_ctl_ev_fmt_profile_attr,
    mask: c_int,
) -> c_int {
    guard_int(|| {
        let (_, r) = profile(c, id, mask, FMT_MASK, Which::Fmt)?;
        let a = out(attr, "attr")?;
        let has = |bit: c_int| mask & bit != 0;
        report_state(&r, mask, &mut a.profile_state, &mut a.cur_profile_state);
        if has(MRC_CTL_EV_FMT_PROFILE_MODE) {
            a.ev_fmt_mode = r.get("mode").unwrap_or(0);
        }
        if has(MRC_CTL_EV_FMT_PROFILE_OP) {
            if a.ev_fmt_op.op != MRC_CTL_EV_FMT_OP_QUERY_FIELDS {
                return Err(invalid("a query takes MRC_CTL_EV_FMT_OP_QUERY_FIELDS only"));
            }
            fill(&mut a.ev_fmt_op, &fmt_widths(&r))?;
        }
        Ok(0)
    })
}

// ---- EV profiles ----------------------------------------------------------------------------

fn ev_mode(r: &Record) -> c_int {
    r.get("mode").unwrap_or(0)
}

/// The format of an EXP/GEN profile (its EV Format profile, or the device's own for 0).
fn format_of(r: &Record, ctx: &mrc_context) -> Result<Format, Fail> {
    crate::profiles::load_format(r.get("fmt_id").unwrap_or(0), ctx.nic.plan.is_some())
}

/// The state of EV `ev` of profile `id` (`bad`: the EVs a live QP holds ASSUMED_BAD).
fn ev_state(ev: &mrc_ctl_ev, denied: &[mrc_ctl_ev], bad: &HashSet<mrc_ctl_ev>) -> c_int {
    if ev.is_unpopulated() {
        MRC_CTL_EV_UNKNOWN
    } else if denied.contains(ev) {
        MRC_CTL_EV_DENIED
    } else if bad.contains(ev) {
        MRC_CTL_EV_ASSUMED_BAD
    } else {
        MRC_CTL_EV_GOOD
    }
}

/// QUERY_EV_STATE and QUERY_EV_ARRAY of profile `id`.
fn query_evs(r: &Record, id: u64, op: &mut mrc_ctl_ev_array_op) -> Result<(), Fail> {
    let mode = ev_mode(r);
    if mode != MRC_CTL_EV_MODE_EXP && mode != MRC_CTL_EV_MODE_GEN {
        return Err(invalid("only EXP and GEN EV profiles have an EV array"));
    }
    let evs = decode_list(r.0.get("evs"));
    let denied = decode_list(r.0.get("denied"));
    let bad = if r.state() == MRC_CTL_PROFILE_ONLINE {
        crate::evlive::bad_evs(id)
    } else {
        HashSet::new()
    };
    match op.op {
        MRC_CTL_EV_OP_QUERY_EV_STATE => {
            for e in op_slice::<mrc_ctl_ev_op_entry>(op)? {
                if !evs.contains(&e.ev) {
                    return Err(fail(libc::ENOENT, "an EV is not in the profile".into()));
                }
                e.state = ev_state(&e.ev, &denied, &bad);
            }
            Ok(())
        }
        MRC_CTL_EV_OP_QUERY_EV_ARRAY => {
            let items: Vec<mrc_ctl_ev_op_entry> = evs
                .iter()
                .map(|e| mrc_ctl_ev_op_entry {
                    ev: *e,
                    state: ev_state(e, &denied, &bad),
                    ..mrc_ctl_ev_op_entry::default()
                })
                .collect();
            fill(op, &items)
        }
        o => Err(invalid(&format!("ev_op.op {o} is not a query"))),
    }
}

/// REPLACE_EV and MODIFY_EV_STATE on profile record `r` (stored by the caller, also after a
/// failing entry: the entries before it took effect).
fn modify_evs(r: &mut Record, op: &mrc_ctl_ev_array_op, planes: u8) -> Result<(), Fail> {
    let mode = ev_mode(r);
    if mode != MRC_CTL_EV_MODE_EXP && mode != MRC_CTL_EV_MODE_GEN {
        return Err(invalid("only EXP and GEN EV profiles have an EV array"));
    }
    let entries = op_slice::<mrc_ctl_ev_op_entry>(op)?;
    let mut evs = decode_list(r.0.get("evs"));
    let mut denied = decode_list(r.0.get("denied"));
    let mut result = Ok(());
    for e in entries.iter() {
        if e.flags & !MRC_CTL_EV_OP_F_ALL_COPIES != 0 {
            result = Err(invalid("unknown mrc_ctl_ev_op_flags bits"));
            break;
        }
        let deny = match e.state {
            MRC_CTL_EV_DENIED => true,
            0 | MRC_CTL_EV_GOOD => false,
            s => {
                result = Err(invalid(&format!(
                    "EV state {s:#x}: a controller sets GOOD or DENIED"
                )));
                break;
            }
        };
        if op.op == MRC_CTL_EV_OP_REPLACE_EV {
            if mode != MRC_CTL_EV_MODE_EXP {
                result = Err(invalid("REPLACE_EV is for EXP profiles"));
                break;
            }
            if r.state() != MRC_CTL_PROFILE_OFFLINE {
                result = Err(invalid(
                    "REPLACE_EV needs an OFFLINE profile (MRC_CTL_OPT_CAP_EV_PROFILE_MODIFY_ONLINE is not offered)",
                ));
                break;
            }
            if e.ev_new.is_unpopulated() || e.ev_new.port == 0 || e.ev_new.port > planes {
                result = Err(invalid(&format!(
                    "ev_new: a value, and a port in 1..={planes}"
                )));
                break;
            }
            let all = e.flags & MRC_CTL_EV_OP_F_ALL_COPIES != 0;
            let mut hit = false;
            for slot in evs.iter_mut().filter(|s| **s == e.ev) {
                *slot = e.ev_new;
                hit = true;
                if !all {
                    break;
                }
            }
            if !hit {
                result = Err(fail(libc::ENOENT, "ev is not in the profile".into()));
                break;
            }
            if !evs.contains(&e.ev) {
                denied.retain(|d| *d != e.ev);
            }
            denied.retain(|d| *d != e.ev_new);
            if deny {
                denied.push(e.ev_new);
            }
        } else {
            if e.ev.is_unpopulated() || !evs.contains(&e.ev) {
                result = Err(fail(libc::ENOENT, "ev is not in the profile".into()));
                break;
            }
            denied.retain(|d| *d != e.ev);
            if deny {
                denied.push(e.ev);
            }
        }
    }
    r.set("evs", encode_list(&evs));
    if denied.is_empty() {
        r.0.remove("denied");
    } else {
        r.set("denied", encode_list(&denied));
    }
    result
}

/// Whether `r` may go INIT -> OFFLINE (AUTO: a mode; EXP/GEN: also a format, a count and, for
/// GEN, fields).
fn ready_offline(r: &Record) -> bool {
    match ev_mode(r) {
        MRC_CTL_EV_MODE_AUTO => true,
        MRC_CTL_EV_MODE_EXP => r.0.contains_key("fmt_id") && r.get::<u32>("count").unwrap_or(0) > 0,
        MRC_CTL_EV_MODE_GEN => {
            r.0.contains_key("fmt_id")
                && r.get::<u32>("count").unwrap_or(0) > 0
                && r.0.contains_key("fields")
        }
        _ => false,
    }
}

/// `mrc_ctl_modify_ev_profile`: AUTO, EXP and GEN modes; EV and EV field operations.
///
/// # Safety
/// `c` NULL or live; `attr` NULL or valid, its arrays as their lengths say.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_ctl_modify_ev_profile(
    c: *mut mrc_context,
    id: u64,
    attr: *mut mrc_ctl_ev_profile_attr,
    mask: c_int,
) -> c_int {
    guard_int(|| {
        let (ctx, mut r) = profile(c, id, mask, EV_MASK, Which::Ev)?;
        let has = |bit: c_int| mask & bit != 0;
        if has(MRC_CTL_EV_PROFILE_EV_OP) && has(MRC_CTL_EV_PROFILE_EV_FIELDS_OP) {
            return Err(invalid("EV_OP and EV_FIELDS_OP exclude each other"));
        }
        let a = out(attr, "attr")?;
        check_cur_state(&r, mask, a.cur_profile_state)?;
        let online = r.state() == MRC_CTL_PROFILE_ONLINE;
        let config = MRC_CTL_EV_PROFILE_MODE
            | MRC_CTL_EV_PROFILE_FMT_ID
            | MRC_CTL_EV_PROFILE_COUNT
            | MRC_CTL_EV_PROFILE_MIN_ACTIVE;
        let modifies_fields = has(MRC_CTL_EV_PROFILE_EV_FIELDS_OP)
            && a.ev_fields_op.op == MRC_CTL_EV_FIELDS_OP_MODIFY_FIELDS;
        if online && (mask & config != 0 || modifies_fields) {
            return Err(invalid(
                "an ONLINE EV profile changes only its state, event mask and EV states",
            ));
        }
        if has(MRC_CTL_EV_PROFILE_MODE) {
            match a.ev_mode {
                MRC_CTL_EV_MODE_AUTO | MRC_CTL_EV_MODE_EXP | MRC_CTL_EV_MODE_GEN => {
                    if ev_mode(&r) != a.ev_mode {
                        for k in ["evs", "fields", "denied"] {
                            r.0.remove(k);
                        }
                    }
                    r.set("mode", a.ev_mode);
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
            let count = a.ev_count.div_ceil(align) * align;
            r.set("count", count);
            if ev_mode(&r) == MRC_CTL_EV_MODE_EXP && r.0.contains_key("evs") {
                let mut evs = decode_list(r.0.get("evs"));
                evs.resize(count as usize, mrc_ctl_ev::UNPOPULATED);
                r.set("evs", encode_list(&evs));
            }
        }
        if has(MRC_CTL_EV_PROFILE_MIN_ACTIVE) {
            r.set("min_active", a.ev_min_active);
        }
        if has(MRC_CTL_EV_PROFILE_EVENT_MASK) {
            if a.ev_event_mask & !(MRC_CTL_EV_GOOD | MRC_CTL_EV_ASSUMED_BAD) != 0 {
                return Err(invalid(
                    "ev_event_mask: MRC_CTL_EV_GOOD and MRC_CTL_EV_ASSUMED_BAD only",
                ));
            }
            r.set("event_mask", a.ev_event_mask);
        }
        let count: u32 = r.get("count").unwrap_or(0);
        let min_active: u32 = r.get("min_active").unwrap_or(0);
        if count != 0 && min_active > count {
            return Err(invalid(&format!(
                "ev_min_active {min_active} > ev_count {count}"
            )));
        }
        if has(MRC_CTL_EV_PROFILE_EV_FIELDS_OP) {
            let mode = ev_mode(&r);
            if mode != MRC_CTL_EV_MODE_EXP && mode != MRC_CTL_EV_MODE_GEN {
                return Err(invalid("EV fields belong to EXP and GEN profiles"));
            }
            match a.ev_fields_op.op {
                MRC_CTL_EV_FIELDS_OP_MODIFY_FIELDS => {
                    if !r.0.contains_key("fmt_id") {
                        return Err(invalid("set the EV Format profile id before the fields"));
                    }
                    let f = op_slice::<mrc_ctl_ev_field>(&a.ev_fields_op)?;
                    if f.len() > MAX_FIELDS {
                        return Err(fail(
                            libc::E2BIG,
                            format!("{} EV fields: at most {MAX_FIELDS}", f.len()),
                        ));
                    }
                    check_fields(f, &format_of(&r, ctx)?)?;
                    if f.is_empty() {
                        r.0.remove("fields");
                    } else {
                        r.set("fields", encode_fields(f));
                    }
                }
                MRC_CTL_EV_FIELDS_OP_QUERY_FIELDS => {
                    fill(&mut a.ev_fields_op, &decode_fields(r.0.get("fields")))?;
                }
                o => return Err(invalid(&format!("ev_fields_op.op {o}"))),
            }
        }
        let to = has(MRC_CTL_EV_PROFILE_STATE).then_some(a.profile_state);
        // INIT -> OFFLINE comes before the EV operations (it makes the EXP array).
        if to == Some(MRC_CTL_PROFILE_OFFLINE) && r.state() == MRC_CTL_PROFILE_INIT {
            let ready = ready_offline(&r);
            if ready && ev_mode(&r) != MRC_CTL_EV_MODE_AUTO {
                format_of(&r, ctx)?;
            }
            move_state(&mut r, MRC_CTL_PROFILE_OFFLINE, ready, false)?;
            if ev_mode(&r) == MRC_CTL_EV_MODE_EXP {
                let evs = vec![mrc_ctl_ev::UNPOPULATED; count as usize];
                r.set("evs", encode_list(&evs));
            }
        }
        if has(MRC_CTL_EV_PROFILE_EV_OP) {
            match a.ev_op.op {
                MRC_CTL_EV_OP_REPLACE_EV | MRC_CTL_EV_OP_MODIFY_EV_STATE => {
                    if r.state() == MRC_CTL_PROFILE_INIT {
                        return Err(invalid("EV operations need an OFFLINE or ONLINE profile"));
                    }
                    let done = modify_evs(&mut r, &a.ev_op, ctx.nic.planes);
                    r.store(Which::Ev, id)?;
                    done?;
                }
                _ => query_evs(&r, id, &mut a.ev_op)?,
            }
        }
        if let Some(to) = to {
            let ready_online = match ev_mode(&r) {
                MRC_CTL_EV_MODE_AUTO => true,
                MRC_CTL_EV_MODE_EXP => {
                    let evs = decode_list(r.0.get("evs"));
                    !evs.is_empty() && evs.iter().all(|e| !e.is_unpopulated())
                }
                MRC_CTL_EV_MODE_GEN => r.0.contains_key("fields"),
                _ => false,
            };
            let going_online = to == MRC_CTL_PROFILE_ONLINE && r.state() != MRC_CTL_PROFILE_ONLINE;
            if going_online && ready_online && ev_mode(&r) != MRC_CTL_EV_MODE_AUTO {
                let fmt = format_of(&r, ctx)?;
                let fields = decode_fields(r.0.get("fields"));
                check_fields(&fields, &fmt)?;
                if ev_mode(&r) == MRC_CTL_EV_MODE_GEN {
                    let evs = generate(&fields, count as usize, ctx.nic.planes, &mut Gen::new());
                    r.set("evs", encode_list(&evs));
                }
            }
            let ready_offline = ready_offline(&r);
            move_state(&mut r, to, ready_offline, ready_online)?;
            if to == MRC_CTL_PROFILE_OFFLINE && ev_mode(&r) == MRC_CTL_EV_MODE_GEN && !online {
                r.0.remove("evs");
            }
        }
        r.store(Which::Ev, id)?;
        Ok(0)
    })
}

/// `mrc_ctl_query_ev_profile`.
///
/// # Safety
/// `c` NULL or live; `attr` NULL or valid, its arrays as their lengths say.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_ctl_query_ev_profile(
    c: *mut mrc_context,
    id: u64,
    attr: *mut mrc_ctl_ev_profile_attr,
    mask: c_int,
) -> c_int {
    guard_int(|| {
        let (ctx, r) = profile(c, id, mask, EV_MASK, Which::Ev)?;
        let has = |bit: c_int| mask & bit != 0;
        if has(MRC_CTL_EV_PROFILE_EV_OP) && has(MRC_CTL_EV_PROFILE_EV_FIELDS_OP) {
            return Err(invalid("EV_OP and EV_FIELDS_OP exclude each other"));
        }
        let a = out(attr, "attr")?;
        report_state(&r, mask, &mut a.profile_state, &mut a.cur_profile_state);
        if has(MRC_CTL_EV_PROFILE_MODE) {
            a.ev_mode = ev_mode(&r);
        }
        if has(MRC_CTL_EV_PROFILE_FMT_ID) {
            a.ev_fmt_profile_id = r.get("fmt_id").unwrap_or(0);
        }
        let planes = u32::from(ctx.nic.planes.max(1));
        let auto = ev_mode(&r) == MRC_CTL_EV_MODE_AUTO || ev_mode(&r) == 0;
        let engine = engine_ev(&r, ctx.nic.planes);
        if has(MRC_CTL_EV_PROFILE_COUNT) {
            a.ev_count = if auto {
                u32::from(engine.evs_per_plane) * planes
            } else {
                r.get("count").unwrap_or(0)
            };
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
        if has(MRC_CTL_EV_PROFILE_EV_OP) {
            query_evs(&r, id, &mut a.ev_op)?;
        }
        if has(MRC_CTL_EV_PROFILE_EV_FIELDS_OP) {
            if a.ev_fields_op.op != MRC_CTL_EV_FIELDS_OP_QUERY_FIELDS {
                return Err(invalid(
                    "a query takes MRC_CTL_EV_FIELDS_OP_QUERY_FIELDS only",
                ));
            }
            fill(&mut a.ev_fields_op, &decode_fields(r.0.get("fields")))?;
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
        let (_, mut r) = profile(c, id, mask, CC_MASK, Which::Cc)?;
        let a = input(attr, "attr")?;
        let has = |bit: c_int| mask & bit != 0;
        check_cur_state(&r, mask, a.cur_profile_state)?;
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
        let (_, r) = profile(c, id, mask, CC_MASK, Which::Cc)?;
        let a = out(attr, "attr")?;
        let has = |bit: c_int| mask & bit != 0;
        report_state(&r, mask, &mut a.profile_state, &mut a.cur_profile_state);
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

// ---- EV events ------------------------------------------------------------------------------

/// `mrc_ctl_create_ev_event_cq`: a CQ the node's NICs send EV state changes to (see
/// `crate::evlive`); destroyed with `mrc_destroy_cq`, armed with `mrc_req_notify_cq`.
///
/// # Safety
/// `c` NULL or live; `channel` NULL or a live channel of the same context.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_ctl_create_ev_event_cq(
    c: *mut mrc_context,
    cqe: c_int,
    cq_context: *mut c_void,
    channel: *mut mrc_comp_channel,
    comp_vector: c_int,
) -> *mut mrc_cq {
    guard_ptr(|| crate::api::new_cq(c, cqe, cq_context, channel, comp_vector, true))
}

/// `mrc_ctl_poll_ev_event`: the number of events written, or a negative errno.
///
/// # Safety
/// `cq` NULL or live; `events` NULL or `num_entries` writable entries.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_ctl_poll_ev_event(
    cq: *mut mrc_cq,
    num_entries: c_int,
    events: *mut mrc_ctl_ev_event,
) -> c_int {
    let r = guard_int(|| {
        let n = usize::try_from(num_entries).map_err(|_| invalid("num_entries < 0"))?;
        if n > 0 && events.is_null() {
            return Err(invalid("ev_event is NULL"));
        }
        let out: &mut [mrc_ctl_ev_event] = if n == 0 {
            &mut []
        } else {
            // SAFETY: `num_entries` writable entries (caller contract).
            unsafe { core::slice::from_raw_parts_mut(events, n) }
        };
        crate::api::poll_ev_events(cq, out).map(|got| got as c_int)
    });
    if r < 0 { -crate::errno() } else { r }
}

// ---- refused --------------------------------------------------------------------------------

/// `mrc_ctl_ep_batch_send_wait`: EOPNOTSUPP (endpoint requests from a controller are not
/// built; the engine's own QPs probe their EVs and exchange port status).
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
