//! Packet-mbuf pools (`rte_pktmbuf_pool_create`).

use std::ffi::CString;
use std::ptr::NonNull;
use std::sync::Arc;

use crate::burst::MbufBurst;
use crate::config::MempoolConfig;
use crate::eal::{Eal, note_mbufs_outstanding};
use crate::error::{Error, Result, last_error};
use crate::mbuf::Mbuf;
use crate::sys;

/// A pool of packet mbufs. Cheap to clone (shared handle); `Send + Sync`: DPDK's default pool
/// ops (`ring_mp_mc`) are multi-producer/multi-consumer, and each lcore has its own cache.
///
/// The pool is freed when the last handle drops, but only if every mbuf is back; otherwise it
/// is left allocated (mbufs still out keep pointing into it) and the EAL is not cleaned up.
#[derive(Clone)]
pub struct Mempool {
    inner: Arc<PoolInner>,
}

struct PoolInner {
    raw: NonNull<sys::rte_mempool>,
    name: String,
    capacity: u32,
    data_room: u16,
    _eal: Eal,
}

// SAFETY: the pool is a DPDK object usable from any thread (MP/MC ring ops); the handle only
// reads immutable metadata besides calling DPDK.
unsafe impl Send for PoolInner {}
// SAFETY: as above; no method mutates Rust-side state.
unsafe impl Sync for PoolInner {}

impl std::fmt::Debug for Mempool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mempool")
            .field("name", &self.inner.name)
            .field("capacity", &self.inner.capacity)
            .field("data_room", &self.inner.data_room)
            .finish()
    }
}

impl Mempool {
    /// Creates a packet-mbuf pool.
    pub fn create(eal: &Eal, config: &MempoolConfig) -> Result<Self> {
        let name = CString::new(config.name.as_str())
            .map_err(|_| Error::InvalidArgument("pool name contains NUL"))?;
        if config.data_room <= crate::HEADROOM {
            return Err(Error::InvalidArgument(
                "pool data room must exceed the mbuf headroom",
            ));
        }
        let socket = config.socket.map_or(sys::SOCKET_ID_ANY, |s| s as i32);
        // SAFETY: the EAL is initialised (we hold it); `name` is NUL-terminated and copied.
        let raw = unsafe {
            sys::rte_pktmbuf_pool_create(
                name.as_ptr(),
                config.mbufs,
                config.cache,
                0,
                config.data_room,
                socket,
            )
        };
        let raw = NonNull::new(raw).ok_or_else(|| last_error("rte_pktmbuf_pool_create"))?;
        Ok(Self {
            inner: Arc::new(PoolInner {
                raw,
                name: config.name.clone(),
                capacity: config.mbufs,
                data_room: config.data_room,
                _eal: eal.clone(),
            }),
        })
    }

    /// Takes one mbuf (length 0, default headroom). [`Error::PoolEmpty`] when exhausted.
    #[inline]
    pub fn alloc(&self) -> Result<Mbuf> {
        // SAFETY: the pool is alive; rte_pktmbuf_alloc returns NULL or a reset mbuf we now own.
        let m = unsafe { sys::rte_pktmbuf_alloc(self.as_ptr()) };
        NonNull::new(m)
            .map(Mbuf::from_non_null)
            .ok_or(Error::PoolEmpty)
    }

    /// Appends `count` fresh mbufs to `burst`, all or none ([`Error::PoolEmpty`]).
    pub fn alloc_bulk<const N: usize>(&self, burst: &mut MbufBurst<N>, count: usize) -> Result<()> {
        if count > burst.capacity() - burst.len() {
            return Err(Error::InvalidArgument(
                "alloc_bulk: more mbufs than free slots in the burst",
            ));
        }
        // SAFETY: the spare slots of `burst` hold room for `count` mbuf pointers; on success
        // DPDK wrote `count` owned mbufs there and we commit them; on failure it wrote none.
        let ret =
            unsafe { sys::rte_pktmbuf_alloc_bulk(self.as_ptr(), burst.spare_ptr(), count as u32) };
        if ret != 0 {
            return Err(Error::PoolEmpty);
        }
        // SAFETY: the `count` slots after `len` are initialised (see above).
        unsafe { burst.commit(count) };
        Ok(())
    }

    /// Free mbufs (in the pool and in the per-lcore caches).
    pub fn available(&self) -> u32 {
        // SAFETY: the pool is alive; read-only count.
        unsafe { sys::rte_mempool_avail_count(self.as_ptr()) }
    }

    /// Mbufs taken out of the pool (held by the application or by a port's rings).
    pub fn in_use(&self) -> u32 {
        // SAFETY: the pool is alive; read-only count.
        unsafe { sys::rte_mempool_in_use_count(self.as_ptr()) }
    }

    /// Number of mbufs the pool was created with.
    pub fn capacity(&self) -> u32 {
        self.inner.capacity
    }

    /// Buffer size of each mbuf, headroom included.
    pub fn data_room(&self) -> u16 {
        self.inner.data_room
    }

    /// The pool's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The raw pool, for DPDK calls this crate does not wrap.
    pub fn as_ptr(&self) -> *mut sys::rte_mempool {
        self.inner.raw.as_ptr()
    }
}

impl Drop for PoolInner {
    fn drop(&mut self) {
        // Last handle: nobody can allocate any more (ports hold a handle while they may).
        // SAFETY: the pool is alive; read-only count.
        if unsafe { sys::rte_mempool_in_use_count(self.raw.as_ptr()) } == 0 {
            // SAFETY: no mbuf of the pool is out and no handle is left.
            unsafe { sys::rte_mempool_free(self.raw.as_ptr()) };
        } else {
            note_mbufs_outstanding();
        }
    }
}
