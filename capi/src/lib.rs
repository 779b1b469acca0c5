//! OCP's MRC application API (`include/mrc.h`, API 1.0.1) on mrc-rs: `lib_mrc.so`.
//!
//! - [`api`]: every `mrc_*` function of the header: contexts, completion channels, CQs, QP
//!   hints, QPs and their RESET → INIT → RTR → RTS transitions with `ibv_qp_attr` +
//!   `mrc_qp_attr`, posting Writes and receives, polling, async events.
//! - [`device`]: the software verbs device the libibverbs half of an MRC program talks to
//!   (`libibverbs.so`, capi/verbs, forwards there): mrc-rs NICs on DPDK ports or in-memory
//!   links, application memory registered in place.
//! - [`ctl`]: the controller API (`include/mrc_ctl.h`) where it shapes what applications see.
//!
//! Every entry point catches panics (none reaches C) and reports failures as OCP documents
//! them: -1 (or NULL) with `errno` set. docs/c-api.md has the commands, the device
//! configuration and what is refused.

#![allow(non_camel_case_types)]

pub mod api;
pub mod ctl;
pub mod device;
pub mod evlive;
pub mod evs;
pub mod ibv;
pub mod profiles;

use core::ffi::c_int;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Mutex, MutexGuard, PoisonError, RwLock};

use mrc_nic::NicError;
use mrc_transport::verbs::VerbsError;

/// A failure: the `errno` value and what went wrong (kept for `MRC_DEBUG=1`).
#[derive(Debug)]
pub struct Fail(pub c_int, pub String);

pub(crate) fn fail(errno: c_int, what: String) -> Fail {
    Fail(errno, what)
}

pub(crate) fn invalid(what: &str) -> Fail {
    Fail(libc::EINVAL, what.to_owned())
}

impl From<VerbsError> for Fail {
    fn from(e: VerbsError) -> Self {
        let code = match e {
            VerbsError::SendQueueFull | VerbsError::RecvQueueFull => libc::EAGAIN,
            VerbsError::LimitReached { .. } => libc::ENOMEM,
            VerbsError::Busy { .. } => libc::EBUSY,
            VerbsError::InvalidState(mrc_transport::verbs::QpState::Error) => libc::EIO,
            _ => libc::EINVAL,
        };
        Self(code, e.to_string())
    }
}

impl From<NicError> for Fail {
    fn from(e: NicError) -> Self {
        match e {
            NicError::Verbs(v) => v.into(),
            other => Self(libc::EIO, other.to_string()),
        }
    }
}

/// A mutex's guard; a panic while it was held (caught at the API's edge) does not make the
/// data unusable.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// An output parameter from C: EINVAL when NULL.
pub(crate) fn out<T>(p: *mut T, what: &str) -> Result<&'static mut T, Fail> {
    if p.is_null() {
        return Err(invalid(&format!("{what} is NULL")));
    }
    // SAFETY: non-null; the caller gives a writable `T` (the header's contract).
    Ok(unsafe { &mut *p })
}

/// An input parameter from C, copied: EINVAL when NULL.
pub(crate) fn input<T: Copy>(p: *const T, what: &str) -> Result<T, Fail> {
    if p.is_null() {
        return Err(invalid(&format!("{what} is NULL")));
    }
    // SAFETY: non-null; the caller gives a readable `T`.
    Ok(unsafe { *p })
}

pub(crate) fn set_errno(e: c_int) {
    // SAFETY: `__errno_location` returns this thread's errno, always valid to write.
    unsafe { *libc::__errno_location() = e };
}

/// This thread's errno.
pub(crate) fn errno() -> c_int {
    // SAFETY: `__errno_location` returns this thread's errno, always valid to read.
    unsafe { *libc::__errno_location() }
}

fn report(f: &Fail) {
    set_errno(f.0);
    if std::env::var_os("MRC_DEBUG").is_some_and(|v| v == "1") {
        eprintln!("mrc: {} (errno {})", f.1, f.0);
    }
}

/// Runs an entry point returning an int: its value, or -1 with `errno` set.
pub(crate) fn guard_int(f: impl FnOnce() -> Result<c_int, Fail>) -> c_int {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => {
            report(&e);
            -1
        }
        Err(_) => {
            report(&Fail(libc::EIO, "internal error (caught panic)".into()));
            -1
        }
    }
}

/// Runs an entry point returning a pointer: it, or NULL with `errno` set.
pub(crate) fn guard_ptr<T>(f: impl FnOnce() -> Result<*mut T, Fail>) -> *mut T {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => {
            report(&e);
            core::ptr::null_mut()
        }
        Err(_) => {
            report(&Fail(libc::EIO, "internal error (caught panic)".into()));
            core::ptr::null_mut()
        }
    }
}

/// What a live object pointer is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    VerbsContext,
    Pd,
    Mr,
    Context,
    Channel,
    Cq,
    Hint,
    Qp,
}

/// Every object this library handed out and has not freed: a pointer from C is used only
/// when it is one of them, of the kind expected (NULL and stale pointers fail with EINVAL
/// instead of being dereferenced). Read on every call (poll, post): a read lock and a
/// multiplicative hash of the address.
static LIVE: RwLock<Option<Objects>> = RwLock::new(None);

type Objects = HashMap<usize, Kind, BuildHasherDefault<AddrHasher>>;

/// Hashes an address: one multiplication (Fibonacci hashing) instead of SipHash.
#[derive(Debug, Default)]
pub(crate) struct AddrHasher(u64);

impl Hasher for AddrHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_usize(&mut self, n: usize) {
        self.0 = (n as u64)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            .rotate_left(29);
    }
}

pub(crate) fn register(p: *mut core::ffi::c_void, kind: Kind) {
    LIVE.write()
        .unwrap_or_else(PoisonError::into_inner)
        .get_or_insert_with(Objects::default)
        .insert(p as usize, kind);
}

pub(crate) fn unregister(p: *mut core::ffi::c_void) {
    if let Some(m) = LIVE
        .write()
        .unwrap_or_else(PoisonError::into_inner)
        .as_mut()
    {
        m.remove(&(p as usize));
    }
}

pub(crate) fn live(p: *mut core::ffi::c_void, kind: Kind) -> Result<(), Fail> {
    let ok = LIVE
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .as_ref()
        .and_then(|m| m.get(&(p as usize)))
        == Some(&kind);
    if ok {
        Ok(())
    } else {
        Err(Fail(
            libc::EINVAL,
            format!("{p:?} is not a live {kind:?} of this library"),
        ))
    }
}
