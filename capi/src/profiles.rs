//! Controller profiles (`include/mrc_ctl.h`) where applications meet them: the node-wide store
//! the controller API writes (`crate::ctl`) and the engine profiles a QP takes at INIT when it
//! names one by id (`crate::api`).
//!
//! The software device's NIC runs inside the application process while OCP's controller is a
//! separate process, so profiles are node-wide files: one per profile (`ev-<id>`, `cc-<id>`,
//! `key=value` lines, replaced atomically by rename) in [`dir`]. A QP moving to INIT with a
//! profile id reads the file (the profile must be ONLINE), converts it to the engine's
//! [`EvProfile`] / [`CcProfile`], appends it to the NIC's endpoint once per distinct content,
//! and uses the engine index. Id 0 is the endpoint's default profile (index 0).

use core::ffi::{CStr, c_int};
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, Weak};

use mrc_transport::Duration;
use mrc_transport::cc::{CcProfile, NsccConfig};
use mrc_transport::config::{EvProfile, defaults};
use mrc_transport::wire::EntropyOrder;

use crate::device::NicShared;
use crate::evs::{
    Format, Listed, MRC_CTL_EV_FMT_MODE_SRV6, decode_fields, decode_list, engine_value, mrc_ctl_ev,
};
use crate::{Fail, fail, invalid, lock};

pub const MRC_CTL_PROFILE_INIT: c_int = 0;
pub const MRC_CTL_PROFILE_OFFLINE: c_int = 1;
pub const MRC_CTL_PROFILE_ONLINE: c_int = 2;

pub const MRC_CTL_EV_MODE_AUTO: c_int = 1 << 0;
pub const MRC_CTL_EV_MODE_EXP: c_int = 1 << 1;
pub const MRC_CTL_EV_MODE_GEN: c_int = 1 << 2;

/// The one CC algorithm the engine offers through the controller API.
pub(crate) const NSCC: &CStr = c"uet-1.0-nscc";

/// `struct mrc_ctl_cc_nscc_cfg`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct mrc_ctl_cc_nscc_cfg {
    pub disable_qa: u8,
    pub adjust_bytes_threshold: u32,
    pub adjust_period_threshold: u32,
    pub base_rtt: u32,
    pub eta: f32,
    pub fi: f32,
    pub fi_scale: f32,
    pub gamma: f32,
    pub max_md_jump: f32,
    pub max_cwnd: u32,
    pub qa_gate: u8,
    pub qa_threshold: u32,
    pub target_delay: u32,
}

// ---- where profiles live --------------------------------------------------------------------

/// The node's profile directory: `$MRC_CTL_DIR`, else `/run/mrc-rs/ctl` when it can be made
/// and written, else `<tmp>/mrc-rs-ctl`.
pub fn dir() -> PathBuf {
    if let Some(d) = std::env::var_os("MRC_CTL_DIR") {
        return PathBuf::from(d);
    }
    let run = PathBuf::from("/run/mrc-rs/ctl");
    if std::fs::create_dir_all(&run).is_ok() && writable(&run) {
        return run;
    }
    std::env::temp_dir().join("mrc-rs-ctl")
}

fn writable(p: &std::path::Path) -> bool {
    let Ok(c) = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()) else {
        return false;
    };
    // SAFETY: a NUL-terminated path.
    unsafe { libc::access(c.as_ptr(), libc::W_OK) == 0 }
}

/// A profile kind: the file name prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Which {
    Ev,
    Cc,
    /// EV Format profiles.
    Fmt,
}

impl Which {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Ev => "ev",
            Self::Cc => "cc",
            Self::Fmt => "fmt",
        }
    }
}

/// A stored profile: `key=value` pairs (`state` among them; none at all = INIT).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Record(pub(crate) BTreeMap<String, String>);

impl Record {
    pub(crate) fn load(which: Which, id: u64) -> Result<Self, Fail> {
        let path = dir().join(format!("{}-{id}", which.name()));
        match std::fs::read_to_string(&path) {
            Ok(text) => Ok(Self(
                text.lines()
                    .filter_map(|l| l.split_once('='))
                    .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
                    .collect(),
            )),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Self::default()),
            Err(e) => Err(fail(libc::EIO, format!("{}: {e}", path.display()))),
        }
    }

    /// Writes the profile (temp file + rename); an INIT profile without attributes is removed.
    pub(crate) fn store(&self, which: Which, id: u64) -> Result<(), Fail> {
        let d = dir();
        let path = d.join(format!("{}-{id}", which.name()));
        let io = |e: std::io::Error| fail(libc::EIO, format!("{}: {e}", path.display()));
        if self.0.keys().all(|k| k == "state") && self.state() == MRC_CTL_PROFILE_INIT {
            return match std::fs::remove_file(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io(e)),
                _ => Ok(()),
            };
        }
        std::fs::create_dir_all(&d).map_err(io)?;
        let tmp = d.join(format!(
            ".{}-{id}.{}.{:?}",
            which.name(),
            std::process::id(),
            std::thread::current().id()
        ));
        let mut text = String::new();
        for (k, v) in &self.0 {
            let _ = writeln!(text, "{k}={v}");
        }
        std::fs::write(&tmp, text).map_err(io)?;
        std::fs::rename(&tmp, &path).map_err(io)
    }

    pub(crate) fn state(&self) -> c_int {
        match self.0.get("state").map(String::as_str) {
            Some("offline") => MRC_CTL_PROFILE_OFFLINE,
            Some("online") => MRC_CTL_PROFILE_ONLINE,
            _ => MRC_CTL_PROFILE_INIT,
        }
    }

    pub(crate) fn set_state(&mut self, s: c_int) {
        let name = match s {
            MRC_CTL_PROFILE_OFFLINE => "offline",
            MRC_CTL_PROFILE_ONLINE => "online",
            _ => "init",
        };
        self.0.insert("state".into(), name.into());
    }

    pub(crate) fn get<T: std::str::FromStr>(&self, key: &str) -> Option<T> {
        self.0.get(key).and_then(|v| v.parse().ok())
    }

    pub(crate) fn set(&mut self, key: &str, v: impl ToString) {
        self.0.insert(key.into(), v.to_string());
    }

    /// The configuration without what changes on a live profile (its state, denied EVs and
    /// event mask): what decides whether the engine has it already.
    pub(crate) fn content(&self) -> String {
        self.0
            .iter()
            .filter(|(k, _)| !matches!(k.as_str(), "state" | "denied" | "event_mask"))
            .fold(String::new(), |mut s, (k, v)| {
                let _ = write!(s, "{k}={v};");
                s
            })
    }
}

// ---- the profiles an application names at INIT ----------------------------------------------

/// Engine profiles added from controller profiles: (kind, id, NIC) → (the NIC, the content
/// added, its engine index). The `Weak` keeps the NIC's address from being reused, so a
/// reopened device never sees another NIC's indices.
type Added = HashMap<(Which, u64, usize), (Weak<NicShared>, String, u16)>;
static ADDED: Mutex<Option<Added>> = Mutex::new(None);

/// The engine's EV profile for the id an application passed at INIT (0: the default), and for
/// an EXP/GEN profile the engine just took on, its EVs (the caller hands them to
/// `crate::evlive`, which maps the QP's EVs back to the controller's).
pub(crate) fn ev_profile_index(
    nic: &Arc<NicShared>,
    id: u64,
) -> Result<(u16, Option<Listed>), Fail> {
    profile_index(nic, Which::Ev, id)
}

/// The engine's CC profile for the id an application passed at INIT (0: the default).
pub(crate) fn cc_profile_index(nic: &Arc<NicShared>, id: u64) -> Result<u16, Fail> {
    profile_index(nic, Which::Cc, id).map(|(i, _)| i)
}

fn profile_index(
    nic: &Arc<NicShared>,
    which: Which,
    id: u64,
) -> Result<(u16, Option<Listed>), Fail> {
    if id == 0 {
        return Ok((0, None));
    }
    let r = Record::load(which, id)?;
    if r.state() != MRC_CTL_PROFILE_ONLINE {
        return Err(invalid(&format!(
            "{}_profile_id {id}: no such ONLINE profile in {}",
            which.name(),
            dir().display()
        )));
    }
    let content = r.content();
    let key = (which, id, Arc::as_ptr(nic) as usize);
    let mut added = lock(&ADDED);
    let added = added.get_or_insert_with(HashMap::new);
    added.retain(|_, (nic, _, _)| nic.strong_count() > 0);
    if let Some((_, c, index)) = added.get(&key)
        && *c == content
    {
        return Ok((*index, None));
    }
    let handle = nic.handle();
    let mut taken = None;
    let index = match which {
        Which::Ev => {
            let p = match r.get::<c_int>("mode") {
                Some(m) if m != MRC_CTL_EV_MODE_AUTO => {
                    let l = listed(&r, nic.planes, nic.plan.is_some())
                        .map_err(|e| invalid(&format!("ev_profile_id {id}: {}", e.1)))?;
                    let p = engine_profile(&r, &l, nic.planes);
                    taken = Some(l);
                    p
                }
                _ => engine_ev(&r, nic.planes),
            };
            handle.with_endpoint(move |e| e.add_ev_profile(p))?
        }
        Which::Cc | Which::Fmt => {
            let p = engine_cc(&r);
            handle.with_endpoint(move |e| e.add_cc_profile(p))?
        }
    }
    .map_err(|e| invalid(&format!("{}_profile_id {id}: {e}", which.name())))?;
    added.insert(key, (Arc::downgrade(nic), content, index));
    Ok((index, taken))
}

/// An AUTO EV profile for a NIC of `planes` planes: `ev_count` EVs spread evenly over the
/// planes, half of them active (at least `ev_min_active`, which is the floor).
pub(crate) fn engine_ev(r: &Record, planes: u8) -> EvProfile {
    let planes = u32::from(planes.max(1));
    let d = EvProfile::default();
    let count: u32 = r
        .get("count")
        .filter(|&c| c > 0)
        .unwrap_or(u32::from(d.evs_per_plane) * planes);
    let evs = count.div_ceil(planes).clamp(1, u32::from(u16::MAX)) as u16;
    let floor = match r.get::<u32>("min_active").filter(|&m| m > 0) {
        Some(m) => m.div_ceil(planes).min(u32::from(evs)) as u16,
        None => defaults::EV_FLOOR_PER_PLANE.min(evs),
    };
    let active = (evs / 2).max(floor).max(1);
    EvProfile {
        evs_per_plane: evs,
        active_per_plane: active,
        floor_per_plane: floor,
        ..d
    }
}

// ---- EXP and GEN EV profiles ----------------------------------------------------------------

/// EV Format profile `id` (0: the device's own, `srv6` or not); it must be ONLINE.
pub(crate) fn load_format(id: u64, srv6: bool) -> Result<Format, Fail> {
    if id == 0 {
        return Ok(Format::native(srv6));
    }
    let r = Record::load(Which::Fmt, id)?;
    if r.state() != MRC_CTL_PROFILE_ONLINE {
        return Err(invalid(&format!(
            "ev_fmt_profile_id {id}: no such ONLINE EV Format profile"
        )));
    }
    Ok(format_of(&r))
}

/// The format an EV Format profile record holds.
pub(crate) fn format_of(r: &Record) -> Format {
    Format {
        mode: r.get("mode").unwrap_or(0),
        widths: r
            .0
            .get("fields")
            .map(|s| s.split(',').filter_map(|w| w.parse().ok()).collect())
            .unwrap_or_default(),
    }
}

/// The populated EVs of an EXP/GEN profile record as the engine takes them, for a device of
/// `planes` planes in SRv6 mode or not. EINVAL when the profile's format is not the device's
/// (SRv6 on an ECMP device or the reverse), or an EV leaves by a port the device lacks.
pub(crate) fn listed(r: &Record, planes: u8, srv6: bool) -> Result<Listed, Fail> {
    let fmt = load_format(r.get("fmt_id").unwrap_or(0), srv6)?;
    if (fmt.mode == MRC_CTL_EV_FMT_MODE_SRV6) != srv6 {
        return Err(invalid(if srv6 {
            "the EV profile's format is not SRv6, and the device routes by SRv6 (MRC_PLAN)"
        } else {
            "the EV profile's format is SRv6, and the device is in ECMP mode"
        }));
    }
    let fields = decode_fields(r.0.get("fields"));
    let compact: Vec<mrc_ctl_ev> = decode_list(r.0.get("evs"))
        .into_iter()
        .filter(|e| !e.is_unpopulated())
        .collect();
    if compact.is_empty() {
        return Err(invalid("the EV profile has no EVs"));
    }
    if let Some(e) = compact.iter().find(|e| e.port == 0 || e.port > planes) {
        return Err(invalid(&format!(
            "an EV of the profile leaves by port {}: the device has ports 1..={planes}",
            e.port
        )));
    }
    let engine = compact
        .iter()
        .map(|e| engine_value(e, &fields, &fmt, EntropyOrder::default()))
        .collect();
    Ok(Listed { engine, compact })
}

/// The engine profile of an EXP/GEN record: every EV active (the controller chose them), at
/// least `ev_min_active` kept active however many look bad.
pub(crate) fn engine_profile(r: &Record, l: &Listed, planes: u8) -> EvProfile {
    let planes = usize::from(planes.max(1));
    let mut per_plane = vec![0u16; planes];
    for e in &l.engine {
        if let Some(n) = per_plane.get_mut(usize::from(e.plane)) {
            *n += 1;
        }
    }
    let most = per_plane.iter().copied().max().unwrap_or(1).max(1);
    let fewest = per_plane
        .iter()
        .copied()
        .filter(|&n| n > 0)
        .min()
        .unwrap_or(1);
    let d = EvProfile::default();
    let floor = match r.get::<u32>("min_active").filter(|&m| m > 0) {
        Some(m) => m.div_ceil(planes as u32).min(u32::from(fewest)) as u16,
        None => d.floor_per_plane.min(fewest),
    };
    EvProfile {
        evs_per_plane: most,
        active_per_plane: most,
        floor_per_plane: floor,
        explicit: Some(Arc::from(l.engine.as_slice())),
        ..d
    }
}

pub(crate) const NSCC_KEYS: [&str; 13] = [
    "disable_qa",
    "adjust_bytes_threshold",
    "adjust_period_threshold",
    "base_rtt",
    "eta",
    "fi",
    "fi_scale",
    "gamma",
    "max_md_jump",
    "max_cwnd",
    "qa_gate",
    "qa_threshold",
    "target_delay",
];

pub(crate) fn nscc_to_record(c: &mrc_ctl_cc_nscc_cfg, r: &mut Record) {
    r.set("disable_qa", c.disable_qa);
    r.set("adjust_bytes_threshold", c.adjust_bytes_threshold);
    r.set("adjust_period_threshold", c.adjust_period_threshold);
    r.set("base_rtt", c.base_rtt);
    r.set("eta", c.eta);
    r.set("fi", c.fi);
    r.set("fi_scale", c.fi_scale);
    r.set("gamma", c.gamma);
    r.set("max_md_jump", c.max_md_jump);
    r.set("max_cwnd", c.max_cwnd);
    r.set("qa_gate", c.qa_gate);
    r.set("qa_threshold", c.qa_threshold);
    r.set("target_delay", c.target_delay);
}

pub(crate) fn nscc_of_record(r: &Record) -> mrc_ctl_cc_nscc_cfg {
    mrc_ctl_cc_nscc_cfg {
        disable_qa: r.get("disable_qa").unwrap_or(0),
        adjust_bytes_threshold: r.get("adjust_bytes_threshold").unwrap_or(0),
        adjust_period_threshold: r.get("adjust_period_threshold").unwrap_or(0),
        base_rtt: r.get("base_rtt").unwrap_or(0),
        eta: r.get("eta").unwrap_or(0.0),
        fi: r.get("fi").unwrap_or(0.0),
        fi_scale: r.get("fi_scale").unwrap_or(0.0),
        gamma: r.get("gamma").unwrap_or(0.0),
        max_md_jump: r.get("max_md_jump").unwrap_or(0.0),
        max_cwnd: r.get("max_cwnd").unwrap_or(0),
        qa_gate: r.get("qa_gate").unwrap_or(0),
        qa_threshold: r.get("qa_threshold").unwrap_or(0),
        target_delay: r.get("target_delay").unwrap_or(0),
    }
}

/// The engine's CC profile: NSCC with the controller's values (0 = the engine's default), or
/// a fixed window of one BDP when the algorithm is "none".
fn engine_cc(r: &Record) -> CcProfile {
    if r.0.get("algorithm").map(String::as_str) != NSCC.to_str().ok() {
        return CcProfile::Fixed { window_bytes: None };
    }
    let c = nscc_of_record(r);
    let d = NsccConfig::default();
    let ns = |v: u32| (v != 0).then(|| Duration::from_nanos(u64::from(v)));
    let bytes = |v: u32| (v != 0).then_some(u64::from(v));
    let float = |v: f32| (v > 0.0 && v.is_finite()).then_some(f64::from(v));
    CcProfile::Nscc(NsccConfig {
        disable_qa: c.disable_qa != 0,
        adjust_bytes_threshold: bytes(c.adjust_bytes_threshold),
        adjust_period_threshold: ns(c.adjust_period_threshold),
        base_rtt: ns(c.base_rtt),
        eta: float(c.eta),
        fi: float(c.fi),
        fi_scale: float(c.fi_scale),
        gamma: float(c.gamma).unwrap_or(d.gamma),
        max_md_jump: float(c.max_md_jump).unwrap_or(d.max_md_jump),
        max_cwnd: bytes(c.max_cwnd),
        qa_gate: if c.qa_gate == 0 { d.qa_gate } else { c.qa_gate },
        qa_threshold: ns(c.qa_threshold),
        target_delay: ns(c.target_delay),
        ..d
    })
}
