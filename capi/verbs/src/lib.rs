//! `libibverbs.so` of mrc-rs's software verbs device: the libibverbs calls MRC programs make
//! (OCP's `examples/` and `test/` use no others), with rdma-core's names and ABI, each
//! forwarded to its `mrc_sw_ibv_*` implementation in lib_mrc.so (capi/src/device.rs), where
//! the NICs and the MRC API live. A program compiled against rdma-core's
//! `<infiniband/verbs.h>` links against this library unchanged when the directory holding it
//! comes first on the library path (docs/c-api.md).

#![allow(unsafe_code)] // the C ABI: raw pointers from C, passed on unread
#![allow(clippy::missing_safety_doc)] // each function's contract is libibverbs's own

use core::ffi::{c_char, c_int, c_void};

type Device = c_void;
type Context = c_void;
type Pd = c_void;
type Mr = c_void;

unsafe extern "C" {
    fn mrc_sw_ibv_get_device_list(num: *mut c_int) -> *mut *mut Device;
    fn mrc_sw_ibv_free_device_list(list: *mut *mut Device);
    fn mrc_sw_ibv_get_device_name(device: *mut Device) -> *const c_char;
    fn mrc_sw_ibv_get_device_guid(device: *mut Device) -> u64;
    fn mrc_sw_ibv_open_device(device: *mut Device) -> *mut Context;
    fn mrc_sw_ibv_close_device(ctx: *mut Context) -> c_int;
    fn mrc_sw_ibv_query_device(ctx: *mut Context, attr: *mut c_void) -> c_int;
    fn mrc_sw_ibv_query_port(ctx: *mut Context, port: u8, attr: *mut c_void) -> c_int;
    fn mrc_sw_ibv_query_gid(ctx: *mut Context, port: u8, index: c_int, gid: *mut c_void) -> c_int;
    fn mrc_sw_ibv_alloc_pd(ctx: *mut Context) -> *mut Pd;
    fn mrc_sw_ibv_dealloc_pd(pd: *mut Pd) -> c_int;
    fn mrc_sw_ibv_reg_mr(pd: *mut Pd, addr: *mut c_void, length: usize, access: c_int) -> *mut Mr;
    fn mrc_sw_ibv_reg_mr_iova(
        pd: *mut Pd,
        addr: *mut c_void,
        length: usize,
        iova: u64,
        access: c_int,
    ) -> *mut Mr;
    fn mrc_sw_ibv_reg_mr_iova2(
        pd: *mut Pd,
        addr: *mut c_void,
        length: usize,
        iova: u64,
        access: u32,
    ) -> *mut Mr;
    fn mrc_sw_ibv_dereg_mr(mr: *mut Mr) -> c_int;
    fn mrc_sw_ibv_wc_status_str(status: c_int) -> *const c_char;
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_get_device_list(num: *mut c_int) -> *mut *mut Device {
    // SAFETY: forwarded as given.
    unsafe { mrc_sw_ibv_get_device_list(num) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_free_device_list(list: *mut *mut Device) {
    // SAFETY: forwarded as given.
    unsafe { mrc_sw_ibv_free_device_list(list) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_get_device_name(device: *mut Device) -> *const c_char {
    // SAFETY: forwarded as given.
    unsafe { mrc_sw_ibv_get_device_name(device) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_get_device_guid(device: *mut Device) -> u64 {
    // SAFETY: forwarded as given.
    unsafe { mrc_sw_ibv_get_device_guid(device) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_open_device(device: *mut Device) -> *mut Context {
    // SAFETY: forwarded as given.
    unsafe { mrc_sw_ibv_open_device(device) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_close_device(ctx: *mut Context) -> c_int {
    // SAFETY: forwarded as given.
    unsafe { mrc_sw_ibv_close_device(ctx) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_query_device(ctx: *mut Context, attr: *mut c_void) -> c_int {
    // SAFETY: forwarded as given.
    unsafe { mrc_sw_ibv_query_device(ctx, attr) }
}

/// The exported `ibv_query_port` rdma-core's inline wrapper of the same name calls for a
/// context that is not extended (ours).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_query_port(ctx: *mut Context, port: u8, attr: *mut c_void) -> c_int {
    // SAFETY: forwarded as given.
    unsafe { mrc_sw_ibv_query_port(ctx, port, attr) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_query_gid(
    ctx: *mut Context,
    port: u8,
    index: c_int,
    gid: *mut c_void,
) -> c_int {
    // SAFETY: forwarded as given.
    unsafe { mrc_sw_ibv_query_gid(ctx, port, index, gid) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_alloc_pd(ctx: *mut Context) -> *mut Pd {
    // SAFETY: forwarded as given.
    unsafe { mrc_sw_ibv_alloc_pd(ctx) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_dealloc_pd(pd: *mut Pd) -> c_int {
    // SAFETY: forwarded as given.
    unsafe { mrc_sw_ibv_dealloc_pd(pd) }
}

/// What rdma-core's `ibv_reg_mr` macro calls when the access flags are a constant without
/// `IBV_ACCESS_OPTIONAL_RANGE`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_reg_mr(
    pd: *mut Pd,
    addr: *mut c_void,
    length: usize,
    access: c_int,
) -> *mut Mr {
    // SAFETY: forwarded as given.
    unsafe { mrc_sw_ibv_reg_mr(pd, addr, length, access) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_reg_mr_iova(
    pd: *mut Pd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access: c_int,
) -> *mut Mr {
    // SAFETY: forwarded as given.
    unsafe { mrc_sw_ibv_reg_mr_iova(pd, addr, length, iova, access) }
}

/// What rdma-core's `ibv_reg_mr` / `ibv_reg_mr_iova` macros call otherwise.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_reg_mr_iova2(
    pd: *mut Pd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access: u32,
) -> *mut Mr {
    // SAFETY: forwarded as given.
    unsafe { mrc_sw_ibv_reg_mr_iova2(pd, addr, length, iova, access) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_dereg_mr(mr: *mut Mr) -> c_int {
    // SAFETY: forwarded as given.
    unsafe { mrc_sw_ibv_dereg_mr(mr) }
}

#[unsafe(no_mangle)]
pub extern "C" fn ibv_wc_status_str(status: c_int) -> *const c_char {
    // SAFETY: takes any value.
    unsafe { mrc_sw_ibv_wc_status_str(status) }
}

/// Fork protection is a kernel-driver matter; the software device needs none.
#[unsafe(no_mangle)]
pub extern "C" fn ibv_fork_init() -> c_int {
    0
}
