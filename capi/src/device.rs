//! The software verbs device: mrc-rs NICs behind the libibverbs calls MRC programs make
//! (`ibv_get_device_list` .. `ibv_dereg_mr`). `libibverbs.so` (capi/verbs) exports those names
//! and forwards here (`mrc_sw_ibv_*`), so the NICs, their engines and the registered memory
//! live in one library with the MRC API that uses them.
//!
//! The devices come from the configuration (docs/c-api.md): environment variables, or the
//! same keys in the file `MRC_CONFIG` names.
//! - `MRC_DEVICE=mem` (default): `MRC_MEM_HOSTS` hosts (2) on `MRC_MEM_PLANES` planes (2) of
//!   one in-process fabric of in-memory links; device `mrc_memN` is host N.
//! - `MRC_DEVICE=dpdk` (the default when `MRC_EAL` is set): one device, `mrc_dpdk0`, on the
//!   DPDK ports `MRC_EAL` names (one per plane, in plane order). ECMP mode with the NIC
//!   address `MRC_ADDR`, or SRv6 mode on the plan `MRC_PLAN` as its host `MRC_HOST`.

use core::ffi::{c_char, c_int, c_void};
use std::collections::HashMap;
use std::net::Ipv6Addr;
use std::sync::{Arc, LazyLock, Mutex, MutexGuard, OnceLock, PoisonError};

use mrc_nic::io::dpdk::{DpdkIo, DpdkPorts};
use mrc_nic::io::mem::router_mac;
use mrc_nic::{MemFabric, MemIo, NextHop, Nic, NicConfig, NicHandle};
use mrc_srv6::plan::{HostId, Plan};
use mrc_srv6::wire::EthernetAddress;
use mrc_transport::verbs::{Access, Memory, PdHandle, RemoteNic};
use mrc_transport::{Duration, EndpointConfig, PathMode, PortConfig};

use crate::ibv::{
    IBV_ACCESS_KNOWN, IBV_ACCESS_LOCAL_WRITE, IBV_ACCESS_REMOTE_ATOMIC, IBV_ACCESS_REMOTE_READ,
    IBV_ACCESS_REMOTE_WRITE, IBV_LINK_LAYER_ETHERNET, IBV_MTU_1024, IBV_MTU_4096, IBV_NODE_RNIC,
    IBV_PORT_ACTIVE, IBV_PORT_DOWN, IBV_TRANSPORT_IB, PHYS_STATE_DISABLED, PHYS_STATE_LINK_UP,
    SYSFS_NAME_MAX, SYSFS_PATH_MAX, ibv_context, ibv_device, ibv_device_attr, ibv_gid, ibv_mr,
    ibv_pd, ibv_port_attr,
};
use crate::{Fail, Kind, fail, guard_int, guard_ptr, live, lock, set_errno, unregister};

/// Outer IPv6 40 + SRH 24 + inner IPv6 40 + UDP 8 + BTH 12 + METH 4 + TSETH 4 + RETH 16 +
/// ImmDt 4 + ICRC 4 (brief §2.1): the headers a plan's MTU must leave room for.
const SRV6_MRC_HEADER_BYTES: u32 = 156;

/// The configuration keys (docs/c-api.md).
const KEYS: [&str; 8] = [
    "MRC_DEVICE",
    "MRC_MEM_HOSTS",
    "MRC_MEM_PLANES",
    "MRC_EAL",
    "MRC_ADDR",
    "MRC_PLAN",
    "MRC_HOST",
    "MRC_SEED",
];

/// What the configuration asks for.
#[derive(Debug, Clone)]
enum Config {
    Mem { hosts: u16, planes: u8 },
    Dpdk(DpdkConfig),
}

#[derive(Debug, Clone)]
struct DpdkConfig {
    eal: Vec<String>,
    ports: Vec<String>,
    /// ECMP mode's NIC address (`None` in SRv6 mode).
    addr: Option<Ipv6Addr>,
    /// SRv6 mode: the plan and this host.
    plan: Option<(Arc<Plan>, HostId)>,
}

/// The settings: `MRC_CONFIG`'s file, then the environment over it.
fn settings() -> Result<HashMap<String, String>, Fail> {
    let mut s = HashMap::new();
    if let Ok(path) = std::env::var("MRC_CONFIG") {
        let text = std::fs::read_to_string(&path)
            .map_err(|e| fail(libc::EINVAL, format!("MRC_CONFIG={path}: {e}")))?;
        for (n, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let (k, v) = line.split_once('=').ok_or_else(|| {
                fail(
                    libc::EINVAL,
                    format!("{path}:{}: expected KEY=VALUE", n + 1),
                )
            })?;
            let (k, v) = (k.trim(), v.trim().trim_matches('"'));
            if !KEYS.contains(&k) {
                return Err(fail(
                    libc::EINVAL,
                    format!(
                        "{path}:{}: unknown key {k} (known: {})",
                        n + 1,
                        KEYS.join(", ")
                    ),
                ));
            }
            s.insert(k.to_owned(), v.to_owned());
        }
    }
    for k in KEYS {
        if let Ok(v) = std::env::var(k) {
            s.insert(k.to_owned(), v);
        }
    }
    Ok(s)
}

fn parse<T: std::str::FromStr>(
    s: &HashMap<String, String>,
    key: &str,
    default: T,
) -> Result<T, Fail> {
    s.get(key).map_or(Ok(default), |v| {
        v.parse()
            .map_err(|_| fail(libc::EINVAL, format!("{key}={v}: not a valid value")))
    })
}

impl Config {
    fn load() -> Result<Self, Fail> {
        let s = settings()?;
        let kind = s.get("MRC_DEVICE").cloned().unwrap_or_else(|| {
            if s.contains_key("MRC_EAL") {
                "dpdk"
            } else {
                "mem"
            }
            .into()
        });
        match kind.as_str() {
            "mem" => {
                let hosts: u16 = parse(&s, "MRC_MEM_HOSTS", 2)?;
                let planes: u8 = parse(&s, "MRC_MEM_PLANES", 2)?;
                if hosts == 0 || !(1..=8).contains(&planes) {
                    return Err(fail(
                        libc::EINVAL,
                        "MRC_MEM_HOSTS must be 1..=65535 and MRC_MEM_PLANES 1..=8".into(),
                    ));
                }
                Ok(Self::Mem { hosts, planes })
            }
            "dpdk" => {
                let eal: Vec<String> = s
                    .get("MRC_EAL")
                    .map(|e| e.split_whitespace().map(str::to_owned).collect())
                    .unwrap_or_default();
                let ports = mrc_dpdk::eal_port_names(&eal);
                if ports.is_empty() || ports.len() > 8 {
                    return Err(fail(
                        libc::EINVAL,
                        "MRC_EAL must name 1 to 8 ports (--vdev=NAME,... or -a PCI), one per plane"
                            .into(),
                    ));
                }
                let plan = match (s.get("MRC_PLAN"), s.get("MRC_HOST")) {
                    (None, None) => None,
                    (Some(p), Some(h)) => {
                        let plan = Plan::load_or_builtin(p)
                            .map_err(|e| fail(libc::EINVAL, format!("MRC_PLAN={p}: {e}")))?;
                        let id: u32 = h.trim_start_matches('h').parse().map_err(|_| {
                            fail(libc::EINVAL, format!("MRC_HOST={h}: a host like h3 or 3"))
                        })?;
                        if !plan.has_host(HostId(id)) {
                            return Err(fail(
                                libc::EINVAL,
                                format!("MRC_HOST={h}: the plan has {} hosts", plan.host_count()),
                            ));
                        }
                        if usize::from(plan.planes()) != ports.len() {
                            return Err(fail(
                                libc::EINVAL,
                                format!(
                                    "MRC_PLAN has {} planes but MRC_EAL names {} ports: one per plane",
                                    plan.planes(),
                                    ports.len()
                                ),
                            ));
                        }
                        Some((Arc::new(plan), HostId(id)))
                    }
                    _ => {
                        return Err(fail(
                            libc::EINVAL,
                            "MRC_PLAN and MRC_HOST go together".into(),
                        ));
                    }
                };
                let addr = if plan.is_some() {
                    None
                } else {
                    Some(match s.get("MRC_ADDR") {
                        Some(a) => a.parse().map_err(|_| {
                            fail(libc::EINVAL, format!("MRC_ADDR={a}: not an IPv6 address"))
                        })?,
                        None => default_addr(),
                    })
                };
                Ok(Self::Dpdk(DpdkConfig {
                    eal,
                    ports,
                    addr,
                    plan,
                }))
            }
            other => Err(fail(
                libc::EINVAL,
                format!("MRC_DEVICE={other}: mem or dpdk"),
            )),
        }
    }

    fn names(&self) -> Vec<String> {
        match self {
            Self::Mem { hosts, .. } => (0..*hosts).map(|h| format!("mrc_mem{h}")).collect(),
            Self::Dpdk(_) => vec!["mrc_dpdk0".into()],
        }
    }
}

/// ECMP mode without `MRC_ADDR`: an address under fd00:6d72:63::/64 from the host name and
/// the process id, distinct for every process of a run.
fn default_addr() -> Ipv6Addr {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    addr_for(&host, std::process::id())
}

/// fd00:6d72:63:0:HHHH:HHHH:PPPP:PPPP: 32 bits of the host name's hash, the 32 bits of the
/// process id (distinct processes of one host never share an address).
fn addr_for(host: &str, pid: u32) -> Ipv6Addr {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in host.trim().bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
    }
    Ipv6Addr::new(
        0xfd00,
        0x6d72,
        0x63,
        0,
        (h >> 48) as u16,
        (h >> 32) as u16,
        (pid >> 16) as u16,
        pid as u16,
    )
}

/// The address of in-memory host `h`.
fn mem_addr(h: u16) -> Ipv6Addr {
    Ipv6Addr::new(0xfd00, 0x6d72, 0x63, 0xca91, 0, 0, 0, h + 1)
}

/// A running NIC of either kind.
enum Running {
    Mem { nic: Nic<MemIo>, host: u16 },
    Dpdk(Nic<DpdkIo>),
}

impl std::fmt::Debug for Running {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Mem { .. } => "Running::Mem",
            Self::Dpdk(_) => "Running::Dpdk",
        })
    }
}

/// An open device: its NIC, what the MRC API needs of it.
#[derive(Debug)]
pub struct NicShared {
    /// The device index.
    pub index: usize,
    pub handle: Mutex<NicHandle>,
    pub addr: Ipv6Addr,
    pub planes: u8,
    /// SRv6 mode: peers are hosts of this plan.
    pub plan: Option<Arc<Plan>>,
    /// Planes whose link is down (from the NIC's link events; the MRC context's event thread
    /// keeps it).
    pub down: Mutex<Vec<bool>>,
    /// The payload MTU.
    pub mtu: u32,
    /// The engine's bound on a QP's Write-with-Immediates in flight (either role).
    pub max_wimm: u16,
    /// Registered regions by lkey: (first address, length, PD). `mrc_post_send` checks gather
    /// entries against it, as a NIC checks them before it reads (a bad lkey or range fails the
    /// post with EINVAL instead of reaching the engine).
    pub mrs: std::sync::RwLock<HashMap<u32, (u64, u64, u32)>>,
}

impl NicShared {
    /// Whether `len` bytes at `addr` lie in the region `lkey` of PD `pd`.
    pub fn covers(&self, lkey: u32, addr: u64, len: u32, pd: u32) -> bool {
        self.mrs
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&lkey)
            .is_some_and(|&(start, n, p)| {
                p == pd
                    && addr >= start
                    && addr
                        .checked_add(u64::from(len))
                        .is_some_and(|end| end <= start + n)
            })
    }
}

impl NicShared {
    /// A handle of its own for an object (the handle's caches are not shared between threads).
    pub fn handle(&self) -> NicHandle {
        lock(&self.handle).clone()
    }

    /// The remote NIC a peer's GID names.
    pub fn remote(&self, gid: [u8; 16]) -> Result<RemoteNic, Fail> {
        let addr = Ipv6Addr::from(gid);
        let host = match &self.plan {
            None => None,
            Some(p) => Some(
                p.host_of_nic(addr)
                    .ok_or_else(|| {
                        fail(
                            libc::EINVAL,
                            format!("ah_attr.grh.dgid {addr} is no host of the plan"),
                        )
                    })?
                    .0,
            ),
        };
        Ok(RemoteNic { addr, host })
    }
}

/// The process's devices.
#[derive(Debug, Default)]
struct Devices {
    config: Option<Config>,
    /// Allocated once, never freed: device pointers stay valid for the process's life (a
    /// program may keep one after `ibv_free_device_list`).
    list: Vec<usize>,
    /// The in-memory fabric's ports, one per host, taken while a host's device is open.
    mem: Vec<Option<MemIo>>,
    mem_control: Option<mrc_nic::MemControl>,
    /// Open devices: their NIC.
    open: HashMap<usize, Running>,
}

static DEVICES: LazyLock<Mutex<Devices>> = LazyLock::new(Mutex::default);

/// DPDK's EAL: started at the first open of a DPDK device, never stopped (DPDK cannot start
/// it twice in a process).
static EAL: OnceLock<Result<mrc_dpdk::Eal, String>> = OnceLock::new();

/// The software device's context: an `ibv_context` first (programs read `context->device`),
/// then the NIC.
#[repr(C)]
#[derive(Debug)]
pub struct SwContext {
    pub ibv: ibv_context,
    pub nic: Arc<NicShared>,
}

/// A protection domain.
#[repr(C)]
#[derive(Debug)]
pub struct SwPd {
    pub ibv: ibv_pd,
    pub pd: PdHandle,
    pub nic: Arc<NicShared>,
}

/// A memory region: application memory registered in place.
#[repr(C)]
#[derive(Debug)]
struct SwMr {
    ibv: ibv_mr,
    nic: Arc<NicShared>,
}

fn copy_name(dst: &mut [c_char], s: &str) {
    let room = dst.len() - 1;
    for (d, b) in dst.iter_mut().zip(s.bytes().take(room)) {
        *d = b as c_char;
    }
}

fn devices() -> Result<MutexGuard<'static, Devices>, Fail> {
    let mut d = lock(&DEVICES);
    if d.config.is_none() {
        let config = Config::load()?;
        for name in config.names() {
            let mut dev = Box::new(ibv_device {
                ops_obsolete: [core::ptr::null_mut(); 2],
                node_type: IBV_NODE_RNIC,
                transport_type: IBV_TRANSPORT_IB,
                name: [0; SYSFS_NAME_MAX],
                dev_name: [0; SYSFS_NAME_MAX],
                dev_path: [0; SYSFS_PATH_MAX],
                ibdev_path: [0; SYSFS_PATH_MAX],
            });
            copy_name(&mut dev.name, &name);
            copy_name(&mut dev.dev_name, &format!("uverbs-{name}"));
            copy_name(
                &mut dev.dev_path,
                &format!("/sys/class/infiniband_verbs/{name}"),
            );
            copy_name(
                &mut dev.ibdev_path,
                &format!("/sys/class/infiniband/{name}"),
            );
            d.list.push(Box::into_raw(dev) as usize);
        }
        d.config = Some(config);
    }
    Ok(d)
}

/// Device index of `device`.
fn index_of(d: &Devices, device: *mut ibv_device) -> Result<usize, Fail> {
    d.list
        .iter()
        .position(|&p| p == device as usize)
        .ok_or_else(|| fail(libc::ENODEV, "not an mrc-rs device".into()))
}

fn endpoint_config(
    seed: u64,
    addr: Ipv6Addr,
    planes: u8,
    routers: &[EthernetAddress],
) -> EndpointConfig {
    let ports = (0..planes)
        .map(|p| {
            PortConfig::new(
                EthernetAddress([2, 0, 0, 0, 0, 0]),
                routers[usize::from(p) % routers.len()],
            )
        })
        .collect();
    let mut ec = EndpointConfig::new(seed, addr, ports, PathMode::Ecmp);
    // NIC threads share cores with the application: relaxed timers, and planes served by
    // threads the OS schedules may trail each other by a quantum without loss.
    ec.timers.initial_rtt = Duration::from_micros(500);
    ec.timers.pto_min = Duration::from_millis(5);
    ec.timers.reorder_min = Duration::from_millis(1);
    ec
}

fn nic_shared(
    index: usize,
    handle: NicHandle,
    ec: &EndpointConfig,
    plan: Option<Arc<Plan>>,
) -> NicShared {
    NicShared {
        index,
        handle: Mutex::new(handle),
        addr: ec.nic_addr,
        planes: ec.ports.len() as u8,
        plan,
        down: Mutex::new(vec![false; ec.ports.len()]),
        mtu: ec.payload_mtu,
        max_wimm: ec.limits.max_wimm,
        mrs: std::sync::RwLock::default(),
    }
}

/// Starts device `index`'s NIC.
fn start(d: &mut Devices, index: usize) -> Result<NicShared, Fail> {
    if d.open.contains_key(&index) {
        return Err(fail(
            libc::EBUSY,
            "the device is open already (one context per device and process)".into(),
        ));
    }
    let config = d
        .config
        .clone()
        .ok_or_else(|| fail(libc::EIO, "no configuration".into()))?;
    match config {
        Config::Mem { hosts, planes } => {
            if d.mem.is_empty() {
                let mut f = MemFabric::new(usize::from(planes));
                for h in 0..hosts {
                    f.add_host(mem_addr(h));
                }
                let (ios, control) = f.build();
                d.mem = ios.into_iter().map(Some).collect();
                d.mem_control = Some(control);
            }
            let host = index as u16;
            let io = d.mem[index]
                .take()
                .ok_or_else(|| fail(libc::EBUSY, "the device is open already".into()))?;
            let routers: Vec<_> = (0..planes).map(router_mac).collect();
            let ec = endpoint_config(0xca91 ^ u64::from(host), mem_addr(host), planes, &routers);
            let mut cfg = NicConfig::new(ec.clone());
            cfg.next_hops = routers.iter().map(|&m| NextHop::Static(m)).collect();
            cfg.thread_name = format!("mrc-mem{host}");
            match Nic::spawn(cfg, io) {
                Ok((nic, handle)) => {
                    d.open.insert(index, Running::Mem { nic, host });
                    Ok(nic_shared(index, handle, &ec, None))
                }
                Err(e) => Err(fail(libc::EIO, format!("the NIC did not start: {e}"))),
            }
        }
        Config::Dpdk(c) => {
            let eal = EAL
                .get_or_init(|| mrc_dpdk::Eal::init(&c.eal).map_err(|e| e.to_string()))
                .as_ref()
                .map_err(|e| fail(libc::ENODEV, format!("MRC_EAL: DPDK cannot start: {e}")))?;
            let mut ports = DpdkPorts::new(c.ports.clone());
            ports.promiscuous = false;
            let io = ports
                .open(eal)
                .map_err(|e| {
                    fail(
                        libc::ENODEV,
                        format!("MRC_EAL: cannot open the ports {}: {e}", c.ports.join(", ")),
                    )
                })?
                .pop()
                .ok_or_else(|| fail(libc::ENODEV, "no DPDK port opened".into()))?;
            let planes = c.ports.len() as u8;
            let addr = c.addr.unwrap_or(Ipv6Addr::UNSPECIFIED);
            let seed = u64::from(std::process::id()) ^ 0xca91;
            let mut ec =
                endpoint_config(seed, addr, planes, &[EthernetAddress([2, 0, 0, 0, 0, 1])]);
            let mut cfg_next_hops = Vec::new();
            let mut extra = Vec::new();
            let plan = c.plan.as_ref().map(|(plan, me)| {
                ec.path_mode = PathMode::Srv6 {
                    paths: plan.clone(),
                    host: me.0,
                };
                ec.nic_addr = plan.nic_addr(*me);
                let room = plan.mtu().saturating_sub(SRV6_MRC_HEADER_BYTES);
                if room < ec.payload_mtu {
                    ec.payload_mtu = 1 << room.max(64).ilog2();
                }
                cfg_next_hops =
                    vec![NextHop::Resolve(Plan::linux_upper_link_local()); usize::from(planes)];
                extra = vec![plan.host_sid_addr(*me)];
                plan.clone()
            });
            let mut cfg = NicConfig::new(ec.clone());
            cfg.next_hops = cfg_next_hops;
            cfg.ndp.extra_addrs = extra;
            cfg.thread_name = "mrc-dpdk0".into();
            match Nic::spawn(cfg, io) {
                Ok((nic, handle)) => {
                    d.open.insert(index, Running::Dpdk(nic));
                    Ok(nic_shared(index, handle, &ec, plan))
                }
                Err(e) => Err(fail(libc::EIO, format!("the NIC did not start: {e}"))),
            }
        }
    }
}

/// Sets plane `plane` of in-memory host `host` down or up (`mrc_ctl_modify_port`'s admin
/// state on the in-memory device). `false` when the device is not an in-memory one.
pub fn set_mem_link(index: usize, plane: u8, up: bool) -> bool {
    let d = lock(&DEVICES);
    match (&d.mem_control, d.open.get(&index)) {
        (Some(control), Some(Running::Mem { host, .. })) => {
            control.set_link(*host, plane, up);
            true
        }
        _ => false,
    }
}

/// The `ibv_context` behind a pointer a program passed, if it is one of ours.
pub fn context<'a>(ctx: *mut ibv_context) -> Result<&'a SwContext, Fail> {
    live(ctx.cast(), Kind::VerbsContext)?;
    // SAFETY: registered as a live `SwContext` by `open_device`, unregistered before it is
    // freed; the program does not use a context it closed.
    Ok(unsafe { &*ctx.cast::<SwContext>() })
}

fn pd<'a>(pd: *mut ibv_pd) -> Result<&'a SwPd, Fail> {
    live(pd.cast(), Kind::Pd)?;
    // SAFETY: as `context`: registered while the PD lives.
    Ok(unsafe { &*pd.cast::<SwPd>() })
}

/// The PD behind a pointer a program passed (for `mrc_create_qp`).
pub fn sw_pd<'a>(p: *mut ibv_pd) -> Result<&'a SwPd, Fail> {
    pd(p)
}

// ---- the libibverbs entry points (capi/verbs forwards each `ibv_X` to `mrc_sw_ibv_X`) --------

/// `ibv_get_device_list`.
///
/// # Safety
/// `num` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_sw_ibv_get_device_list(num: *mut c_int) -> *mut *mut ibv_device {
    let list = guard_ptr(|| {
        let d = devices()?;
        let mut v: Vec<*mut ibv_device> = d.list.iter().map(|&p| p as *mut ibv_device).collect();
        if !num.is_null() {
            // SAFETY: the caller gives a writable `num`.
            unsafe { *num = v.len() as c_int };
        }
        v.push(core::ptr::null_mut());
        Ok(Box::into_raw(v.into_boxed_slice()).cast::<*mut ibv_device>())
    });
    if list.is_null() && !num.is_null() {
        // SAFETY: as above.
        unsafe { *num = 0 };
    }
    list
}

/// `ibv_free_device_list`.
///
/// # Safety
/// `list` is NULL or from `mrc_sw_ibv_get_device_list`, not freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_sw_ibv_free_device_list(list: *mut *mut ibv_device) {
    if list.is_null() {
        return;
    }
    let mut n = 0;
    // SAFETY: a list we made is NULL-terminated.
    while !unsafe { *list.add(n) }.is_null() {
        n += 1;
    }
    // SAFETY: the boxed slice of n + 1 pointers `mrc_sw_ibv_get_device_list` leaked.
    drop(unsafe { Box::from_raw(core::ptr::slice_from_raw_parts_mut(list, n + 1)) });
}

/// `ibv_get_device_name`.
///
/// # Safety
/// `device` is NULL or a device pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_sw_ibv_get_device_name(device: *mut ibv_device) -> *const c_char {
    let ok = guard_int(|| index_of(&*devices()?, device).map(|_| 0));
    if ok != 0 {
        return core::ptr::null();
    }
    // SAFETY: one of our devices, never freed.
    unsafe { (*device).name.as_ptr() }
}

/// `ibv_get_device_guid` (network byte order): from the NIC address's low 64 bits.
///
/// # Safety
/// `device` is NULL or a device pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_sw_ibv_get_device_guid(device: *mut ibv_device) -> u64 {
    let mut guid = 0;
    guard_int(|| {
        let d = devices()?;
        let i = index_of(&d, device)?;
        guid = (0x6d72_6300_0000_0000_u64 | i as u64).to_be();
        Ok(0)
    });
    guid
}

/// `ibv_open_device`: starts the device's NIC.
///
/// # Safety
/// `device` is NULL or a device pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_sw_ibv_open_device(device: *mut ibv_device) -> *mut ibv_context {
    guard_ptr(|| {
        let mut d = devices()?;
        let i = index_of(&d, device)?;
        let nic = start(&mut d, i)?;
        let ctx = Box::new(SwContext {
            ibv: ibv_context {
                device,
                ops: [core::ptr::null_mut(); 32],
                cmd_fd: -1,
                async_fd: -1,
                num_comp_vectors: 1,
                mutex: [0; 5],
                abi_compat: core::ptr::null_mut(),
            },
            nic: Arc::new(nic),
        });
        let p = Box::into_raw(ctx);
        crate::register(p.cast(), Kind::VerbsContext);
        Ok(p.cast::<ibv_context>())
    })
}

/// `ibv_close_device`: stops the NIC (EBUSY while an MRC context, PD or MR uses it).
///
/// # Safety
/// `ctx` is NULL or an open context.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_sw_ibv_close_device(ctx: *mut ibv_context) -> c_int {
    errno_code(guard_int(|| {
        let c = context(ctx)?;
        if Arc::strong_count(&c.nic) > 1 {
            return Err(fail(
                libc::EBUSY,
                "an MRC context, PD or MR of this device is alive".into(),
            ));
        }
        let index = c.nic.index;
        unregister(ctx.cast());
        // SAFETY: registered by `open_device`, unregistered now; not used again.
        drop(unsafe { Box::from_raw(ctx.cast::<SwContext>()) });
        let mut d = lock(&DEVICES);
        match d.open.remove(&index) {
            Some(Running::Mem { nic, host }) => {
                if let Ok(exit) = nic.shutdown() {
                    d.mem[usize::from(host)] = Some(exit.io);
                }
            }
            Some(Running::Dpdk(nic)) => {
                // The NIC stops polling; the ports stay open until the process exits (DPDK
                // 22.11's memif can crash closing a port its peer still uses, docs/nics.md).
                if let Ok(exit) = nic.shutdown() {
                    std::mem::forget(exit);
                }
            }
            None => {}
        }
        Ok(0)
    }))
}

/// libibverbs's "return the errno value" convention (ibv_close_device, ibv_query_port, ...).
fn errno_code(r: c_int) -> c_int {
    if r == 0 {
        0
    } else {
        std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO)
    }
}

/// `ibv_query_device`.
///
/// # Safety
/// `ctx` is NULL or open; `attr` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_sw_ibv_query_device(
    ctx: *mut ibv_context,
    attr: *mut ibv_device_attr,
) -> c_int {
    errno_code(guard_int(|| {
        let c = context(ctx)?;
        if attr.is_null() {
            return Err(fail(libc::EINVAL, "attr is NULL".into()));
        }
        let mut fw = [0 as c_char; 64];
        copy_name(&mut fw, concat!("mrc-rs ", env!("CARGO_PKG_VERSION")));
        let a = ibv_device_attr {
            fw_ver: fw,
            node_guid: (0x6d72_6300_0000_0000_u64 | c.nic.index as u64).to_be(),
            sys_image_guid: 0x6d72_6300_0000_0000_u64.to_be(),
            max_mr_size: u64::MAX,
            page_size_cap: 0xffff_f000,
            vendor_id: 0,
            vendor_part_id: 0,
            hw_ver: 0,
            max_qp: 65_536,
            max_qp_wr: 65_536,
            device_cap_flags: 0,
            max_sge: 32,
            max_sge_rd: 0,
            max_cq: 65_536,
            max_cqe: 1 << 20,
            max_mr: 1 << 20,
            max_pd: 65_536,
            unused_limits: [0; 20],
            max_pkeys: 1,
            local_ca_ack_delay: 0,
            phys_port_cnt: c.nic.planes,
        };
        // SAFETY: the caller gives a writable `attr`.
        unsafe { attr.write(a) };
        Ok(0)
    }))
}

/// `ibv_query_port` (the compat form rdma-core's inline wrapper calls): one port per plane,
/// numbered from 1.
///
/// # Safety
/// `ctx` is NULL or open; `attr` is NULL or points to a writable `ibv_port_attr`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_sw_ibv_query_port(
    ctx: *mut ibv_context,
    port: u8,
    attr: *mut ibv_port_attr,
) -> c_int {
    errno_code(guard_int(|| {
        let c = context(ctx)?;
        if attr.is_null() || port == 0 || port > c.nic.planes {
            return Err(fail(
                libc::EINVAL,
                format!("port {port}: 1..={}", c.nic.planes),
            ));
        }
        let down = lock(&c.nic.down)[usize::from(port - 1)];
        let a = ibv_port_attr {
            state: if down { IBV_PORT_DOWN } else { IBV_PORT_ACTIVE },
            max_mtu: IBV_MTU_4096,
            active_mtu: if c.nic.mtu >= 4096 {
                IBV_MTU_4096
            } else {
                IBV_MTU_1024
            },
            gid_tbl_len: GIDS,
            port_cap_flags: 0,
            max_msg_sz: u32::MAX,
            bad_pkey_cntr: 0,
            qkey_viol_cntr: 0,
            pkey_tbl_len: 1,
            lid: 0,
            sm_lid: 0,
            lmc: 0,
            max_vl_num: 1,
            sm_sl: 0,
            subnet_timeout: 0,
            init_type_reply: 0,
            active_width: 2,  // 4x
            active_speed: 64, // 100 Gb/s per lane (NDR): the software device has no rate
            phys_state: if down {
                PHYS_STATE_DISABLED
            } else {
                PHYS_STATE_LINK_UP
            },
            link_layer: IBV_LINK_LAYER_ETHERNET,
        };
        // SAFETY: the caller gives a writable port attribute structure.
        unsafe { attr.write(a) };
        Ok(0)
    }))
}

/// GID table entries per port. RoCE devices list several GIDs (link-local, RoCE v1/v2, IPv4-
/// mapped) and programs pick an index (OCP's example defaults to 3); the software device has
/// one address, the NIC's, at every index.
const GIDS: c_int = 4;

/// `ibv_query_gid`: every index of every port is the NIC's IPv6 address.
///
/// # Safety
/// `ctx` is NULL or open; `gid` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_sw_ibv_query_gid(
    ctx: *mut ibv_context,
    port: u8,
    index: c_int,
    gid: *mut ibv_gid,
) -> c_int {
    guard_int(|| {
        let c = context(ctx)?;
        if gid.is_null() || port == 0 || port > c.nic.planes || !(0..GIDS).contains(&index) {
            return Err(fail(
                libc::EINVAL,
                format!(
                    "port {port} GID {index}: ports 1..={}, GID index 0..{GIDS}",
                    c.nic.planes
                ),
            ));
        }
        // SAFETY: the caller gives a writable GID.
        unsafe {
            gid.write(ibv_gid {
                raw: c.nic.addr.octets(),
            });
        }
        Ok(0)
    })
}

/// `ibv_alloc_pd`.
///
/// # Safety
/// `ctx` is NULL or open.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_sw_ibv_alloc_pd(ctx: *mut ibv_context) -> *mut ibv_pd {
    guard_ptr(|| {
        let c = context(ctx)?;
        let handle = c.nic.handle();
        let pd = handle.alloc_pd().map_err(Fail::from)?;
        let p = Box::into_raw(Box::new(SwPd {
            ibv: ibv_pd {
                context: ctx,
                handle: pd.0,
            },
            pd,
            nic: c.nic.clone(),
        }));
        crate::register(p.cast(), Kind::Pd);
        Ok(p.cast::<ibv_pd>())
    })
}

/// `ibv_dealloc_pd` (EBUSY while a region or QP uses it).
///
/// # Safety
/// `p` is NULL or a live PD.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_sw_ibv_dealloc_pd(p: *mut ibv_pd) -> c_int {
    errno_code(guard_int(|| {
        let sw = pd(p)?;
        sw.nic.handle().dealloc_pd(sw.pd).map_err(Fail::from)?;
        unregister(p.cast());
        // SAFETY: registered by `alloc_pd`, unregistered now; not used again.
        drop(unsafe { Box::from_raw(p.cast::<SwPd>()) });
        Ok(0)
    }))
}

/// Application memory registered in place: the NIC thread copies payload out of it (sends)
/// and into it (Writes received), as a NIC's DMA does.
struct AppMemory {
    base: *mut u8,
    len: usize,
}

// SAFETY: the memory is the application's, valid from `ibv_reg_mr` to `ibv_dereg_mr` (the
// verbs contract; the region is deregistered from the engine before `ibv_dereg_mr` returns);
// only the NIC thread uses this handle.
unsafe impl Send for AppMemory {}

impl Memory for AppMemory {
    fn len(&self) -> usize {
        self.len
    }

    fn read(&self, offset: usize, dst: &mut [u8]) {
        assert!(offset.checked_add(dst.len()).is_some_and(|e| e <= self.len));
        // SAFETY: in bounds (checked); the memory is valid while registered (above). The
        // verbs contract forbids the application to change a send buffer before its
        // completion, so a conforming program does not write these bytes meanwhile.
        unsafe {
            core::ptr::copy_nonoverlapping(self.base.add(offset), dst.as_mut_ptr(), dst.len());
        };
    }

    fn write(&mut self, offset: usize, src: &[u8]) {
        assert!(offset.checked_add(src.len()).is_some_and(|e| e <= self.len));
        // SAFETY: in bounds (checked); valid while registered. A conforming program does not
        // read a Write's destination before the completion that covers it (verbs contract).
        unsafe { core::ptr::copy_nonoverlapping(src.as_ptr(), self.base.add(offset), src.len()) };
    }
}

fn access(flags: c_int) -> Result<Access, Fail> {
    if flags & !IBV_ACCESS_KNOWN != 0 {
        return Err(fail(
            libc::EINVAL,
            format!("access {flags:#x}: unknown flags"),
        ));
    }
    if flags & (IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC) != 0 {
        return Err(fail(
            libc::EOPNOTSUPP,
            "MRC carries Writes only: no remote read or atomic access".into(),
        ));
    }
    let mut a = Access::NONE;
    if flags & IBV_ACCESS_LOCAL_WRITE != 0 {
        a = a | Access::LOCAL_WRITE;
    }
    if flags & IBV_ACCESS_REMOTE_WRITE != 0 {
        a = a | Access::REMOTE_WRITE;
    }
    Ok(a)
}

/// `ibv_reg_mr_iova2` (and `ibv_reg_mr`, `ibv_reg_mr_iova`): `length` bytes at `addr`,
/// answering to addresses `iova ..`.
///
/// # Safety
/// `p` is NULL or a live PD; `addr .. addr + length` is memory the program owns until it
/// deregisters the region.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_sw_ibv_reg_mr_iova2(
    p: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    flags: u32,
) -> *mut ibv_mr {
    guard_ptr(|| {
        let sw = pd(p)?;
        if addr.is_null() || length == 0 {
            return Err(fail(libc::EINVAL, "addr is NULL or length 0".into()));
        }
        let acc = access(flags as c_int)?;
        let memory = Box::new(AppMemory {
            base: addr.cast(),
            len: length,
        });
        let keys = sw
            .nic
            .handle()
            .reg_mr_owned(sw.pd, iova, memory, acc)
            .map_err(Fail::from)?;
        sw.nic
            .mrs
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(keys.lkey, (iova, length as u64, sw.pd.0));
        let m = Box::into_raw(Box::new(SwMr {
            ibv: ibv_mr {
                context: sw.ibv.context,
                pd: p,
                addr,
                length,
                handle: keys.lkey,
                lkey: keys.lkey,
                rkey: keys.rkey,
            },
            nic: sw.nic.clone(),
        }));
        crate::register(m.cast(), Kind::Mr);
        Ok(m.cast::<ibv_mr>())
    })
}

/// `ibv_reg_mr`.
///
/// # Safety
/// As [`mrc_sw_ibv_reg_mr_iova2`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_sw_ibv_reg_mr(
    p: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    flags: c_int,
) -> *mut ibv_mr {
    // SAFETY: forwarded caller contract.
    unsafe { mrc_sw_ibv_reg_mr_iova2(p, addr, length, addr as u64, flags as u32) }
}

/// `ibv_reg_mr_iova`.
///
/// # Safety
/// As [`mrc_sw_ibv_reg_mr_iova2`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_sw_ibv_reg_mr_iova(
    p: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    flags: c_int,
) -> *mut ibv_mr {
    // SAFETY: forwarded caller contract.
    unsafe { mrc_sw_ibv_reg_mr_iova2(p, addr, length, iova, flags as u32) }
}

/// `ibv_dereg_mr`: the engine forgets the region before this returns; Writes still in flight
/// towards it complete with an error.
///
/// # Safety
/// `mr` is NULL or a live region.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_sw_ibv_dereg_mr(mr: *mut ibv_mr) -> c_int {
    errno_code(guard_int(|| {
        live(mr.cast(), Kind::Mr)?;
        // SAFETY: registered while the region lives.
        let m = unsafe { &*mr.cast::<SwMr>() };
        drop(m.nic.handle().dereg_mr(m.ibv.lkey).map_err(Fail::from)?);
        m.nic
            .mrs
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&m.ibv.lkey);
        unregister(mr.cast());
        // SAFETY: registered by `reg_mr`, unregistered now; not used again.
        drop(unsafe { Box::from_raw(mr.cast::<SwMr>()) });
        Ok(0)
    }))
}

/// `ibv_wc_status_str`.
#[unsafe(no_mangle)]
pub extern "C" fn mrc_sw_ibv_wc_status_str(status: c_int) -> *const c_char {
    crate::ibv::wc_status_str(status).as_ptr()
}

/// Sets `errno` and returns -1: for the forwarder's functions mrc-rs does not implement.
#[unsafe(no_mangle)]
pub extern "C" fn mrc_sw_ibv_unsupported() -> c_int {
    set_errno(libc::EOPNOTSUPP);
    -1
}

#[cfg(test)]
mod tests {
    use super::addr_for;

    #[test]
    fn processes_of_one_host_get_distinct_addresses() {
        let addrs: std::collections::HashSet<_> =
            (1000..1100).map(|pid| addr_for("node1", pid)).collect();
        assert_eq!(addrs.len(), 100);
        assert_ne!(addr_for("node1", 7), addr_for("node2", 7));
    }
}
