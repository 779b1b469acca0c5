//! The Environment Abstraction Layer: initialised once per process, cleaned up when the last
//! handle that needs it is gone.

use std::ffi::{CStr, CString, c_char};
use std::marker::PhantomData;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

use crate::error::{Errno, Error, Result, last_error, rte_errno};
use crate::sys;

/// Process-wide EAL state: DPDK allows one `rte_eal_init` per process, even after a cleanup.
static STATE: AtomicU8 = AtomicU8::new(NEVER);
const NEVER: u8 = 0;
const USED: u8 = 1;

/// Set when a mempool was dropped with mbufs still out: its memory must stay mapped, so the EAL
/// is never cleaned up (the process exit reclaims it).
static MBUFS_OUTSTANDING: AtomicBool = AtomicBool::new(false);

pub(crate) fn note_mbufs_outstanding() {
    MBUFS_OUTSTANDING.store(true, Ordering::SeqCst);
}

/// The initialised EAL. Cheap to clone; pools, ports, queues and lcore jobs hold a clone, so the
/// EAL outlives them all. `rte_eal_cleanup` runs when the last clone drops, or on
/// [`Eal::cleanup`].
#[derive(Clone)]
pub struct Eal {
    inner: Arc<EalInner>,
}

struct EalInner {
    /// Arguments `rte_eal_init` did not consume (after `--`).
    app_args: Vec<String>,
    main_lcore: u32,
    /// The argv strings, kept alive for as long as DPDK may look at them.
    _argv: Vec<CString>,
    cleaned: bool,
}

impl std::fmt::Debug for Eal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Eal")
            .field("main_lcore", &self.inner.main_lcore)
            .field("app_args", &self.inner.app_args)
            .finish()
    }
}

impl Eal {
    /// Runs `rte_eal_init` with `args` passed straight through (a program name is put in front),
    /// e.g. `["-l", "0", "--no-huge", "-m", "256", "--no-pci", "--vdev=net_null0"]` in a test,
    /// or `["-l", "2-3", "-a", "0000:3b:00.0"]` on a real NIC. Arguments after `--` are not
    /// parsed by DPDK and come back from [`Eal::app_args`].
    ///
    /// Once per process: a second call fails with [`Error::AlreadyInitialized`]. The calling
    /// thread becomes the main lcore.
    pub fn init<I, S>(args: I) -> Result<Self>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut argv = vec![CString::new("mrc-dpdk").expect("no NUL")];
        for arg in args {
            argv.push(
                CString::new(arg.as_ref())
                    .map_err(|_| Error::InvalidArgument("EAL argument contains NUL"))?,
            );
        }
        if STATE
            .compare_exchange(NEVER, USED, Ordering::SeqCst, Ordering::SeqCst)
            .is_err()
        {
            return Err(Error::AlreadyInitialized);
        }
        // getopt permutes this pointer array, not the strings.
        let mut ptrs: Vec<*mut c_char> = argv.iter().map(|s| s.as_ptr().cast_mut()).collect();
        ptrs.push(std::ptr::null_mut());
        let argc = argv.len() as i32;
        // SAFETY: `ptrs` holds `argc` valid NUL-terminated strings plus a NULL terminator; the
        // strings live in `argv`, which the Eal keeps; DPDK only reorders the pointer array.
        let parsed = unsafe { sys::rte_eal_init(argc, ptrs.as_mut_ptr()) };
        if parsed < 0 {
            return Err(Error::EalInit(rte_errno()));
        }
        // DPDK leaves the program name at argv[parsed]; what follows is the application's.
        let app_args = ptrs[parsed as usize + 1..argv.len()]
            .iter()
            // SAFETY: every entry still points into one of the strings of `argv`.
            .map(|&p| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
            .collect();
        // SAFETY: the EAL is initialised; plain getter.
        let main_lcore = unsafe { sys::rte_get_main_lcore() };
        Ok(Self {
            inner: Arc::new(EalInner {
                app_args,
                main_lcore,
                _argv: argv,
                cleaned: false,
            }),
        })
    }

    /// Cleans the EAL up now (`rte_eal_cleanup`). Fails with [`Error::EalInUse`] when other
    /// handles are alive (the cleanup then happens when the last one drops), and with
    /// [`Error::MbufsOutstanding`] when a pool was dropped with mbufs still out.
    pub fn cleanup(self) -> Result<()> {
        match Arc::try_unwrap(self.inner) {
            Ok(mut inner) => inner.cleanup(),
            Err(shared) => Err(Error::EalInUse {
                handles: Arc::strong_count(&shared) - 1,
            }),
        }
    }

    /// Arguments after `--`, which DPDK did not parse.
    pub fn app_args(&self) -> &[String] {
        &self.inner.app_args
    }

    /// The main lcore: the thread that called [`Eal::init`].
    pub fn main_lcore(&self) -> u32 {
        self.inner.main_lcore
    }

    /// The enabled worker lcores (from `-l`/`--lcores`), in order; targets of [`Eal::launch`].
    pub fn worker_lcores(&self) -> Vec<u32> {
        let mut lcores = Vec::new();
        let mut i = u32::MAX; // rte_get_next_lcore starts after `i`; -1 means "from the start"
        loop {
            // SAFETY: the EAL is initialised; iterates the lcore table, skipping the main lcore.
            i = unsafe { sys::rte_get_next_lcore(i, 1, 0) };
            if i >= sys::RTE_MAX_LCORE {
                return lcores;
            }
            lcores.push(i);
        }
    }

    /// Number of lcores (main, workers and registered threads).
    pub fn lcore_count(&self) -> u32 {
        // SAFETY: the EAL is initialised; plain getter.
        unsafe { sys::rte_lcore_count() }
    }

    /// The lcore id of the calling thread: `None` for a thread that is neither an EAL lcore nor
    /// registered (such threads bypass the mempool caches).
    pub fn current_lcore() -> Option<u32> {
        // SAFETY: reads a thread-local; valid on any thread, before or after init.
        let id = unsafe { sys::rte_lcore_id() };
        (id != sys::LCORE_ID_ANY).then_some(id)
    }

    /// The NUMA socket of the calling thread, when known.
    pub fn current_socket() -> Option<u32> {
        // SAFETY: reads a thread-local; valid on any thread.
        let socket = unsafe { sys::rte_socket_id() };
        (socket as i32 != sys::SOCKET_ID_ANY).then_some(socket)
    }

    /// DPDK's runtime directory of this process (`/var/run/dpdk/<file-prefix>` as root). EAL
    /// creates it even with `--no-shconf`; delete it after the cleanup if the prefix was unique.
    pub fn runtime_dir(&self) -> PathBuf {
        // SAFETY: returns a pointer to a static NUL-terminated string owned by the EAL.
        let dir = unsafe { CStr::from_ptr(sys::rte_eal_get_runtime_dir()) };
        PathBuf::from(dir.to_string_lossy().into_owned())
    }

    /// Registers the calling (non-EAL) thread as an lcore (`rte_thread_register`), so it gets
    /// an lcore id and mempool caches. Unregistered when the guard drops.
    pub fn register_thread(&self) -> Result<ThreadRegistration> {
        if let Some(id) = Self::current_lcore() {
            return Err(Error::AlreadyLcore(id));
        }
        // SAFETY: the EAL is initialised and this thread has no lcore id (checked above).
        if unsafe { sys::rte_thread_register() } != 0 {
            return Err(last_error("rte_thread_register"));
        }
        let lcore = Self::current_lcore().ok_or(Error::Dpdk {
            op: "rte_thread_register",
            errno: Errno(libc::ENOMEM),
        })?;
        Ok(ThreadRegistration {
            lcore,
            _eal: self.clone(),
            _this_thread: PhantomData,
        })
    }
}

impl EalInner {
    fn cleanup(&mut self) -> Result<()> {
        if std::mem::replace(&mut self.cleaned, true) {
            return Ok(());
        }
        // No lcore job can be running: each holds an Eal clone until it was waited for.
        if MBUFS_OUTSTANDING.load(Ordering::SeqCst) {
            return Err(Error::MbufsOutstanding);
        }
        // SAFETY: this is the last handle: no pool, port, queue or job is left, and no mbuf is
        // out (pools only free themselves when all their mbufs are back).
        let ret = unsafe { sys::rte_eal_cleanup() };
        crate::error::check("rte_eal_cleanup", ret).map(drop)
    }
}

impl Drop for EalInner {
    fn drop(&mut self) {
        let _ = self.cleanup();
    }
}

/// A non-EAL thread registered as an lcore ([`Eal::register_thread`]); unregisters on drop.
/// Not `Send`: it belongs to the thread it registered.
#[derive(Debug)]
pub struct ThreadRegistration {
    lcore: u32,
    _eal: Eal,
    _this_thread: PhantomData<*const ()>,
}

impl ThreadRegistration {
    /// The lcore id this thread received.
    pub fn lcore(&self) -> u32 {
        self.lcore
    }
}

impl Drop for ThreadRegistration {
    fn drop(&mut self) {
        // SAFETY: runs on the registered thread (the guard is not Send), after registration.
        unsafe { sys::rte_thread_unregister() };
    }
}
