//! The API without DPDK: compiled when the build script found no libdpdk or libclang (or
//! `MRC_DPDK_DISABLE=1`), so that crates using `mrc-dpdk` still build and can report why.
//!
//! [`Eal::init`] returns [`Error::NotBuilt`]. Every other handle needs an `Eal` to exist, so
//! each one carries an uninhabited field: its methods cannot run and need no body. Only the
//! raw-pointer methods (`as_ptr`, `into_raw`, `from_raw`, and the `sys` module) are missing.
//! The `api` test module below checks that this file keeps the real API's shape.

// Empty bodies of methods that keep the real API's receivers.
#![allow(clippy::unused_self)]

use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::path::PathBuf;

use crate::{Error, LinkStatus, MacAddr, MempoolConfig, PortConfig, PortInfo, PortStats, Result};

/// Uninhabited: no value of a handle type exists without DPDK.
#[derive(Debug, Clone, Copy)]
enum Void {}

/// See the DPDK build of this crate.
pub const BURST_SIZE: usize = 32;

/// The real handles free something on drop; so do these, in type (they cannot exist).
macro_rules! drop_like_the_real_one {
    ($($ty:ident$(<$($g:tt),*>)?),*) => {$(
        impl$(<$($g),*>)? Drop for $ty$(<$($g),*>)? {
            fn drop(&mut self) {
                match self.void {}
            }
        }
    )*};
}
drop_like_the_real_one!(
    Eal,
    ThreadRegistration,
    LcoreJob<T>,
    Mempool,
    Mbuf,
    Port,
    RxQueue,
    TxQueue
);

// Never hold an mbuf without DPDK: nothing to free.
impl<const N: usize> Drop for MbufBurst<N> {
    fn drop(&mut self) {}
}

impl<const N: usize> Drop for Drain<'_, N> {
    fn drop(&mut self) {}
}

/// Why this build has no DPDK (set by the build script).
const REASON: &str = match option_env!("MRC_DPDK_ABSENT_REASON") {
    Some(reason) => reason,
    None => "built without DPDK",
};

/// The EAL; without DPDK, [`Eal::init`] always fails with [`Error::NotBuilt`].
#[derive(Debug, Clone)]
pub struct Eal {
    void: Void,
}

impl Eal {
    /// Fails: this build has no DPDK.
    pub fn init<I, S>(_args: I) -> Result<Self>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        Err(Error::NotBuilt { reason: REASON })
    }
    pub fn cleanup(self) -> Result<()> {
        match self.void {}
    }
    pub fn app_args(&self) -> &[String] {
        match self.void {}
    }
    pub fn main_lcore(&self) -> u32 {
        match self.void {}
    }
    pub fn worker_lcores(&self) -> Vec<u32> {
        match self.void {}
    }
    pub fn lcore_count(&self) -> u32 {
        match self.void {}
    }
    /// Always `None` without DPDK.
    pub fn current_lcore() -> Option<u32> {
        None
    }
    /// Always `None` without DPDK.
    pub fn current_socket() -> Option<u32> {
        None
    }
    pub fn runtime_dir(&self) -> PathBuf {
        match self.void {}
    }
    pub fn register_thread(&self) -> Result<ThreadRegistration> {
        match self.void {}
    }
    pub fn launch<F, T>(&self, _lcore: u32, _job: F) -> Result<LcoreJob<T>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        match self.void {}
    }
}

/// See the DPDK build of this crate.
#[derive(Debug)]
pub struct ThreadRegistration {
    void: Void,
}

impl ThreadRegistration {
    pub fn lcore(&self) -> u32 {
        match self.void {}
    }
}

/// See the DPDK build of this crate.
#[derive(Debug)]
pub struct LcoreJob<T> {
    void: Void,
    _result: PhantomData<T>,
}

impl<T> LcoreJob<T> {
    pub fn lcore(&self) -> u32 {
        match self.void {}
    }
    pub fn is_finished(&self) -> bool {
        match self.void {}
    }
    pub fn wait(self) -> Result<T> {
        match self.void {}
    }
}

/// See the DPDK build of this crate.
#[derive(Debug, Clone)]
pub struct Mempool {
    void: Void,
}

impl Mempool {
    pub fn create(eal: &Eal, _config: &MempoolConfig) -> Result<Self> {
        match eal.void {}
    }
    pub fn alloc(&self) -> Result<Mbuf> {
        match self.void {}
    }
    pub fn alloc_bulk<const N: usize>(
        &self,
        _burst: &mut MbufBurst<N>,
        _count: usize,
    ) -> Result<()> {
        match self.void {}
    }
    pub fn available(&self) -> u32 {
        match self.void {}
    }
    pub fn in_use(&self) -> u32 {
        match self.void {}
    }
    pub fn capacity(&self) -> u32 {
        match self.void {}
    }
    pub fn data_room(&self) -> u16 {
        match self.void {}
    }
    pub fn name(&self) -> &str {
        match self.void {}
    }
}

/// See the DPDK build of this crate.
#[derive(Debug)]
pub struct Mbuf {
    void: Void,
}

impl Mbuf {
    pub fn len(&self) -> usize {
        match self.void {}
    }
    pub fn is_empty(&self) -> bool {
        match self.void {}
    }
    pub fn data_len(&self) -> usize {
        match self.void {}
    }
    pub fn segment_count(&self) -> u16 {
        match self.void {}
    }
    pub fn is_contiguous(&self) -> bool {
        match self.void {}
    }
    pub fn data(&self) -> &[u8] {
        match self.void {}
    }
    pub fn data_mut(&mut self) -> &mut [u8] {
        match self.void {}
    }
    pub fn segments(&self) -> impl Iterator<Item = &[u8]> + '_ {
        match self.void {}
        #[allow(unreachable_code)]
        std::iter::empty()
    }
    pub fn headroom(&self) -> usize {
        match self.void {}
    }
    pub fn tailroom(&self) -> usize {
        match self.void {}
    }
    pub fn append(&mut self, _n: usize) -> Result<&mut [u8]> {
        match self.void {}
    }
    pub fn extend_from_slice(&mut self, _bytes: &[u8]) -> Result<()> {
        match self.void {}
    }
    pub fn prepend(&mut self, _n: usize) -> Result<&mut [u8]> {
        match self.void {}
    }
    pub fn adj(&mut self, _n: usize) -> Result<()> {
        match self.void {}
    }
    pub fn trim(&mut self, _n: usize) -> Result<()> {
        match self.void {}
    }
    pub fn truncate(&mut self, _len: usize) -> Result<()> {
        match self.void {}
    }
    pub fn set_len(&mut self, _len: usize) -> Result<()> {
        match self.void {}
    }
    pub fn reset(&mut self) {
        match self.void {}
    }
    pub fn chain(&mut self, _tail: Mbuf) -> Result<(), Mbuf> {
        match self.void {}
    }
    pub fn linearize(&mut self) -> Result<()> {
        match self.void {}
    }
    pub fn port(&self) -> u16 {
        match self.void {}
    }
}

/// See the DPDK build of this crate. Without DPDK it can only ever be empty.
#[derive(Debug)]
pub struct MbufBurst<const N: usize = BURST_SIZE> {
    _mbufs: PhantomData<[Mbuf; N]>,
}

impl AsMut<[u8]> for Mbuf {
    fn as_mut(&mut self) -> &mut [u8] {
        match self.void {}
    }
}

impl<const N: usize> MbufBurst<N> {
    pub const fn new() -> Self {
        Self {
            _mbufs: PhantomData,
        }
    }
    pub fn drain_front(&mut self, _n: usize) -> Drain<'_, N> {
        Drain {
            _burst: PhantomData,
        }
    }
    pub fn len(&self) -> usize {
        0
    }
    pub fn is_empty(&self) -> bool {
        true
    }
    pub fn is_full(&self) -> bool {
        false
    }
    pub const fn capacity(&self) -> usize {
        N
    }
    pub fn push(&mut self, mbuf: Mbuf) -> Result<(), Mbuf> {
        match mbuf.void {}
    }
    pub fn pop(&mut self) -> Option<Mbuf> {
        None
    }
    pub fn clear(&mut self) {}
    pub fn drain(&mut self) -> Drain<'_, N> {
        Drain {
            _burst: PhantomData,
        }
    }
}

impl<const N: usize> Default for MbufBurst<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> Deref for MbufBurst<N> {
    type Target = [Mbuf];
    fn deref(&self) -> &[Mbuf] {
        &[]
    }
}

impl<const N: usize> DerefMut for MbufBurst<N> {
    fn deref_mut(&mut self) -> &mut [Mbuf] {
        &mut []
    }
}

/// See the DPDK build of this crate.
#[derive(Debug)]
pub struct Drain<'a, const N: usize> {
    _burst: PhantomData<&'a mut MbufBurst<N>>,
}

impl<const N: usize> Iterator for Drain<'_, N> {
    type Item = Mbuf;
    fn next(&mut self) -> Option<Mbuf> {
        None
    }
}

impl<const N: usize> ExactSizeIterator for Drain<'_, N> {}

/// See the DPDK build of this crate.
#[derive(Debug)]
pub struct Port {
    void: Void,
}

/// See the DPDK build of this crate.
#[derive(Debug)]
pub struct Queues {
    pub rx: Vec<RxQueue>,
    pub tx: Vec<TxQueue>,
}

impl Port {
    pub fn ids(eal: &Eal) -> Vec<u16> {
        match eal.void {}
    }
    pub fn by_id(eal: &Eal, _id: u16) -> Result<Self> {
        match eal.void {}
    }
    pub fn by_name(eal: &Eal, _name: &str) -> Result<Self> {
        match eal.void {}
    }
    pub fn id(&self) -> u16 {
        match self.void {}
    }
    pub fn is_started(&self) -> bool {
        match self.void {}
    }
    pub fn info(&self) -> Result<PortInfo> {
        match self.void {}
    }
    pub fn mac(&self) -> Result<MacAddr> {
        match self.void {}
    }
    pub fn configure(&mut self, _config: &PortConfig, _pool: &Mempool) -> Result<Queues> {
        match self.void {}
    }
    pub fn start(&mut self) -> Result<()> {
        match self.void {}
    }
    pub fn stop(&mut self) -> Result<()> {
        match self.void {}
    }
    pub fn link(&self) -> Result<LinkStatus> {
        match self.void {}
    }
    pub fn stats(&self) -> Result<PortStats> {
        match self.void {}
    }
    pub fn reset_stats(&mut self) -> Result<()> {
        match self.void {}
    }
    pub fn set_promiscuous(&mut self, _on: bool) -> Result<()> {
        match self.void {}
    }
    pub fn is_promiscuous(&self) -> Result<bool> {
        match self.void {}
    }
    pub fn mtu(&self) -> Result<u16> {
        match self.void {}
    }
    pub fn set_mtu(&mut self, _mtu: u16) -> Result<()> {
        match self.void {}
    }
}

/// See the DPDK build of this crate.
#[derive(Debug)]
pub struct RxQueue {
    void: Void,
}

impl RxQueue {
    pub fn port_id(&self) -> u16 {
        match self.void {}
    }
    pub fn queue_id(&self) -> u16 {
        match self.void {}
    }
    pub fn rx_burst<const N: usize>(&mut self, _burst: &mut MbufBurst<N>) -> usize {
        match self.void {}
    }
}

/// See the DPDK build of this crate.
#[derive(Debug)]
pub struct TxQueue {
    void: Void,
}

impl TxQueue {
    pub fn port_id(&self) -> u16 {
        match self.void {}
    }
    pub fn queue_id(&self) -> u16 {
        match self.void {}
    }
    pub fn tx_burst<const N: usize>(&mut self, _burst: &mut MbufBurst<N>) -> usize {
        match self.void {}
    }
    pub fn tx_burst_or_free<const N: usize>(&mut self, _burst: &mut MbufBurst<N>) -> usize {
        match self.void {}
    }
}

/// Compile-time check that the real API and this fallback have the same shape: the same code is
/// type-checked against both (in test builds with DPDK, where both exist).
#[cfg(test)]
mod api {
    macro_rules! uses_the_whole_api {
        ($name:ident, $($api:tt)+) => {
            #[allow(dead_code, unused_variables, unused_mut, clippy::all, clippy::pedantic)]
            fn $name() -> crate::Result<()> {
                use $($api)+::{Eal, LcoreJob, Mbuf, MbufBurst, Mempool, Port, Queues, RxQueue, ThreadRegistration, TxQueue};
                let eal: Eal = Eal::init(["-l", "0"])?;
                let args: &[String] = eal.app_args();
                let (main, workers, count): (u32, Vec<u32>, u32) = (eal.main_lcore(), eal.worker_lcores(), eal.lcore_count());
                let (lcore, socket): (Option<u32>, Option<u32>) = (Eal::current_lcore(), Eal::current_socket());
                let dir: std::path::PathBuf = eal.runtime_dir();
                let reg: ThreadRegistration = eal.register_thread()?;
                let _: u32 = reg.lcore();
                let job: LcoreJob<u8> = eal.launch(1, || 7_u8)?;
                let _: (u32, bool) = (job.lcore(), job.is_finished());
                let _: u8 = job.wait()?;
                let pool: Mempool = Mempool::create(&eal, &crate::MempoolConfig::new("p", 63))?;
                let _: (u32, u32, u32, u16, &str) = (pool.available(), pool.in_use(), pool.capacity(), pool.data_room(), pool.name());
                let mut m: Mbuf = pool.alloc()?;
                let _: (usize, bool, usize, u16, bool) = (m.len(), m.is_empty(), m.data_len(), m.segment_count(), m.is_contiguous());
                let _: (&[u8], usize, usize, u16) = (m.data(), m.headroom(), m.tailroom(), m.port());
                let _: Vec<&[u8]> = m.segments().collect();
                let _: &mut [u8] = m.data_mut();
                let _: &mut [u8] = m.append(1)?;
                let _: &mut [u8] = m.prepend(1)?;
                m.extend_from_slice(&[1])?;
                m.adj(1)?;
                m.trim(1)?;
                m.truncate(0)?;
                m.set_len(0)?;
                let _: &mut [u8] = m.as_mut();
                let tail: Mbuf = pool.alloc()?;
                let _: Result<(), Mbuf> = m.chain(tail);
                m.linearize()?;
                m.reset();
                let mut burst: MbufBurst = MbufBurst::new();
                let mut burst64 = MbufBurst::<64>::default();
                pool.alloc_bulk(&mut burst, 2)?;
                let _: (usize, bool, bool, usize) = (burst.len(), burst.is_empty(), burst.is_full(), burst.capacity());
                let _: Result<(), Mbuf> = burst.push(m);
                let _: Option<Mbuf> = burst.pop();
                let _: Option<&Mbuf> = burst.first();
                let _: Vec<Mbuf> = burst.drain_front(1).collect();
                let drained: Vec<Mbuf> = burst.drain().collect();
                burst.clear();
                let ids: Vec<u16> = Port::ids(&eal);
                let mut port: Port = Port::by_name(&eal, "net_null0")?;
                let mut port2: Port = Port::by_id(&eal, 1)?;
                let _: (u16, bool) = (port.id(), port.is_started());
                let _: crate::PortInfo = port.info()?;
                let _: crate::MacAddr = port.mac()?;
                let queues: Queues = port.configure(&crate::PortConfig::default(), &pool)?;
                let (mut rx, mut tx): (Vec<RxQueue>, Vec<TxQueue>) = (queues.rx, queues.tx);
                port.start()?;
                let _: crate::LinkStatus = port.link()?;
                let _: crate::PortStats = port.stats()?;
                port.reset_stats()?;
                port.set_promiscuous(true)?;
                let _: bool = port.is_promiscuous()?;
                let _: u16 = port.mtu()?;
                port.set_mtu(9000)?;
                let _: (u16, u16, usize) = (rx[0].port_id(), rx[0].queue_id(), rx[0].rx_burst(&mut burst64));
                let _: (u16, u16, usize, usize) =
                    (tx[0].port_id(), tx[0].queue_id(), tx[0].tx_burst(&mut burst), tx[0].tx_burst_or_free(&mut burst64));
                port.stop()?;
                eal.cleanup()
            }
        };
    }

    uses_the_whole_api!(with_dpdk, crate);
    uses_the_whole_api!(without_dpdk, crate::absent);

    #[test]
    fn fallback_init_says_not_built() {
        let err = super::Eal::init(["-l", "0"]).unwrap_err();
        assert!(matches!(err, crate::Error::NotBuilt { .. }), "{err:?}");
        assert!(
            err.to_string()
                .contains("apt-get install libdpdk-dev pkg-config libclang-dev"),
            "{err}"
        );
        assert!(super::MbufBurst::<8>::new().drain().next().is_none());
    }
}
