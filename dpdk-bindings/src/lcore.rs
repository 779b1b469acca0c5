//! Running Rust closures on worker lcores (`rte_eal_remote_launch` / `rte_eal_wait_lcore`).

use std::cell::UnsafeCell;
use std::ffi::{c_int, c_void};
use std::marker::PhantomData;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, Ordering};

use crate::eal::Eal;
use crate::error::{Error, Result, check};
use crate::sys;

/// What a job shares with its worker lcore. The worker writes `result` and then sets `done`; the
/// main lcore reads `result` only after `rte_eal_wait_lcore` returned.
struct Slot<T> {
    job: UnsafeCell<Option<Box<dyn FnOnce() -> T + Send>>>,
    result: UnsafeCell<Option<std::thread::Result<T>>>,
    done: AtomicBool,
}

/// A closure running on a worker lcore ([`Eal::launch`]). [`LcoreJob::wait`] returns its
/// result; dropping the handle waits too. Not `Send`: DPDK waits for lcores on the main lcore.
pub struct LcoreJob<T> {
    lcore: u32,
    slot: *mut Slot<T>,
    waited: bool,
    _eal: Eal,
    _main_lcore: PhantomData<*const ()>,
}

impl<T> std::fmt::Debug for LcoreJob<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LcoreJob")
            .field("lcore", &self.lcore)
            .field("finished", &self.is_finished())
            .finish()
    }
}

extern "C" fn trampoline<T>(arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the `Slot<T>` that `launch` leaked into a raw pointer; the LcoreJob frees
    // it only after `rte_eal_wait_lcore` saw this function return.
    let slot = unsafe { &*arg.cast::<Slot<T>>() };
    // SAFETY: the worker is the only one touching `job`/`result` until `done` is set and the
    // lcore is back in WAIT.
    let job = unsafe { (*slot.job.get()).take() };
    if let Some(job) = job {
        // A panic must not unwind into C; it is reported by `wait` instead.
        let result = catch_unwind(AssertUnwindSafe(job));
        // SAFETY: as above: exclusive access until `done`.
        unsafe { *slot.result.get() = Some(result) };
    }
    slot.done.store(true, Ordering::Release);
    0
}

impl Eal {
    /// Runs `job` on worker lcore `lcore` (one of [`Eal::worker_lcores`]). Call it from the main
    /// lcore. The closure runs as an EAL thread: mempool caches work there, and it is where a
    /// poll loop belongs.
    pub fn launch<F, T>(&self, lcore: u32, job: F) -> Result<LcoreJob<T>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        if Self::current_lcore() != Some(self.main_lcore()) {
            return Err(Error::NotMainLcore);
        }
        if !self.worker_lcores().contains(&lcore) {
            return Err(Error::NotWorkerLcore(lcore));
        }
        let slot = Box::into_raw(Box::new(Slot::<T> {
            job: UnsafeCell::new(Some(Box::new(job))),
            result: UnsafeCell::new(None),
            done: AtomicBool::new(false),
        }));
        // SAFETY: `lcore` is an enabled worker; `trampoline::<T>` matches `lcore_function_t` and
        // treats `slot` as described on `Slot`; we are on the main lcore.
        let ret = unsafe { sys::rte_eal_remote_launch(Some(trampoline::<T>), slot.cast(), lcore) };
        if let Err(err) = check("rte_eal_remote_launch", ret) {
            // SAFETY: the launch failed, so the worker never saw `slot`; take it back.
            drop(unsafe { Box::from_raw(slot) });
            return Err(if ret == -libc::EBUSY {
                Error::LcoreBusy(lcore)
            } else {
                err
            });
        }
        Ok(LcoreJob {
            lcore,
            slot,
            waited: false,
            _eal: self.clone(),
            _main_lcore: PhantomData,
        })
    }
}

impl<T> LcoreJob<T> {
    /// The worker lcore running the job.
    pub fn lcore(&self) -> u32 {
        self.lcore
    }

    /// Whether the closure has returned (then [`LcoreJob::wait`] does not block).
    pub fn is_finished(&self) -> bool {
        // SAFETY: `slot` stays allocated while the handle lives; `done` is atomic.
        unsafe { &(*self.slot).done }.load(Ordering::Acquire)
    }

    /// Waits for the closure and returns its value ([`Error::LcorePanicked`] if it panicked).
    pub fn wait(mut self) -> Result<T> {
        self.join();
        // SAFETY: joined: the worker is done with the slot; we are its only user now.
        match unsafe { (*(*self.slot).result.get()).take() } {
            Some(Ok(value)) => Ok(value),
            _ => Err(Error::LcorePanicked(self.lcore)),
        }
    }

    fn join(&mut self) {
        if !self.waited {
            // SAFETY: the handle is not Send, so this is the main lcore that launched the job.
            unsafe { sys::rte_eal_wait_lcore(self.lcore) };
            self.waited = true;
        }
    }
}

impl<T> Drop for LcoreJob<T> {
    fn drop(&mut self) {
        self.join();
        // SAFETY: joined, so the worker no longer uses the slot; it came from Box::into_raw.
        drop(unsafe { Box::from_raw(self.slot) });
    }
}
