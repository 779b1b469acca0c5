//! Reading a plan from TOML (feature `toml`): the built-in plans, the file schema, and checks
//! that say what to fix (file, line, field) for both syntax errors (toml's spans) and semantic
//! ones (limits, block, MTU).

use core::fmt;
use core::net::Ipv6Addr;
use core::ops::Range;
use std::path::Path as FsPath;

use serde::Deserialize;
use toml::Spanned;

use super::alloc::{
    MAX_GLOBAL_HOSTS, MAX_HOSTS_PER_T0, MAX_PLANES, MAX_T0_PER_PLANE, MAX_T1_PER_PLANE,
};
use super::{HostMode, LinkParams, Plan, QueueParams, SwitchMode};

/// The built-in default plan (`plans/small.toml`): 2 planes × 2 T0 × 2 T1 × 2 hosts per T0,
/// global host uSIDs, so the Linux fabric works.
pub const SMALL_PLAN_TOML: &str = include_str!("small.toml");

/// Bytes of headers in front of the payload of the largest MRC frame in SRv6 mode, without
/// Ethernet: outer IPv6 40 + SRH 24 + inner IPv6 40 + UDP 8 + BTH 12 + METH 4 + TSETH 4 +
/// RETH 16 + ImmDt 4 + ICRC 4 (brief §2.1).
pub const MRC_SRV6_HEADER_BYTES: u32 = 156;
/// IPv6 minimum link MTU (RFC 8200 §5).
pub const IPV6_MIN_MTU: u32 = 1280;
/// The longest link latency a plan may give: one second (the simulator counts picoseconds
/// in 64 bits, and no fabric link is slower).
pub const MAX_LATENCY_NS: u64 = 1_000_000_000;

/// A plan file that cannot be used: where (file, line, field) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct PlanError {
    /// The file (or `<builtin NAME>`).
    pub path: String,
    /// 1-based line of the offending value, when known.
    pub line: Option<usize>,
    /// The field, e.g. `links.fabric.speed_gbps`, when known.
    pub field: Option<String>,
    pub message: String,
}

impl fmt::Display for PlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.path)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        if let Some(field) = &self.field {
            write!(f, ": {field}")?;
        }
        write!(f, ": {}", self.message)
    }
}

fn default_mtu() -> Spanned<u32> {
    Spanned::new(0..0, 9000)
}

fn default_nic_prefix() -> Spanned<String> {
    Spanned::new(0..0, "fd00:6d72:6300::/64".to_owned())
}

/// The file schema. Unknown keys are errors (typos are caught), except under `[sim]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPlan {
    name: Option<String>,
    planes: Spanned<u32>,
    t0_per_plane: Spanned<u32>,
    t1_per_plane: Spanned<u32>,
    hosts_per_t0: Spanned<u32>,
    usid_block: Spanned<String>,
    host_usids: Spanned<HostMode>,
    #[serde(default)]
    switch_usids: SwitchMode,
    #[serde(default = "default_nic_prefix")]
    nic_prefix: Spanned<String>,
    #[serde(default = "default_mtu")]
    mtu: Spanned<u32>,
    links: RawLinks,
    #[serde(default)]
    sim: toml::Table,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLinks {
    host: RawLink,
    fabric: RawLink,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLink {
    speed_gbps: Spanned<u32>,
    latency_ns: Spanned<u64>,
    buffer_bytes: Option<Spanned<u64>>,
    ecn_min_bytes: Option<Spanned<u64>>,
    ecn_max_bytes: Option<Spanned<u64>>,
    ecn_max_prob: Option<Spanned<f64>>,
}

/// Builds errors that point into one source text.
struct Source<'a> {
    path: &'a str,
    text: &'a str,
}

impl Source<'_> {
    fn line_of(&self, span: &Range<usize>) -> Option<usize> {
        if span.start == 0 && span.end == 0 {
            return None; // a default, not in the file
        }
        let start = span.start.min(self.text.len());
        let line = self.text[..start].bytes().filter(|&b| b == b'\n').count() + 1;
        // An error at the very end (an unclosed string) is on the last line, not past it.
        Some(line.min(self.text.lines().count().max(1)))
    }

    /// The dotted key written on the line holding `offset` (`links.host.speed_gbps`), if that
    /// line is a `key = value` line, with the table header above it.
    fn field_at(&self, offset: usize) -> Option<String> {
        let upto = &self.text[..offset.min(self.text.len())];
        let line_start = upto.rfind('\n').map_or(0, |i| i + 1);
        let line = self.text[line_start..].lines().next().unwrap_or("");
        let (key, _) = line.split_once('=')?;
        let key = key.trim();
        if key.is_empty() || key.starts_with('[') || key.starts_with('#') {
            return None;
        }
        let table = upto[..line_start].lines().rev().find_map(|l| {
            let l = l.trim();
            l.strip_prefix('[')
                .and_then(|t| t.split(']').next())
                .map(str::trim)
        });
        Some(match table {
            Some(t) if !t.is_empty() => format!("{t}.{key}"),
            _ => key.to_owned(),
        })
    }

    fn error<T>(&self, field: &str, value: &Spanned<T>, message: impl Into<String>) -> PlanError {
        PlanError {
            path: self.path.to_owned(),
            line: self.line_of(&value.span()),
            field: Some(field.to_owned()),
            message: message.into(),
        }
    }
}

/// Parse `a:b::/len`.
fn parse_prefix(text: &str) -> Option<(Ipv6Addr, u8)> {
    let (addr, len) = text.split_once('/')?;
    let addr: Ipv6Addr = addr.trim().parse().ok()?;
    let len: u8 = len.trim().parse().ok()?;
    (len <= 128).then_some((addr, len))
}

fn host_bits_zero(addr: Ipv6Addr, len: u8) -> bool {
    len == 128 || u128::from(addr) << len == 0
}

fn check_range(
    src: &Source<'_>,
    field: &str,
    value: &Spanned<u32>,
    max: u32,
) -> Result<(), PlanError> {
    let v = *value.get_ref();
    if v == 0 || v > max {
        return Err(src.error(
            field,
            value,
            format!("{v} is out of range: use 1 to {max} (the uSID allocation's limit)"),
        ));
    }
    Ok(())
}

fn link_params(src: &Source<'_>, tier: &str, raw: &RawLink) -> Result<LinkParams, PlanError> {
    let field = |name: &str| format!("links.{tier}.{name}");
    if *raw.speed_gbps.get_ref() == 0 {
        return Err(src.error(&field("speed_gbps"), &raw.speed_gbps, "must be positive"));
    }
    if *raw.latency_ns.get_ref() > MAX_LATENCY_NS {
        return Err(src.error(
            &field("latency_ns"),
            &raw.latency_ns,
            format!(
                "{} is out of range: use 0 to {MAX_LATENCY_NS} (1 s)",
                raw.latency_ns.get_ref()
            ),
        ));
    }
    let queue = QueueParams {
        buffer_bytes: raw.buffer_bytes.as_ref().map(|v| *v.get_ref()),
        ecn_min_bytes: raw.ecn_min_bytes.as_ref().map(|v| *v.get_ref()),
        ecn_max_bytes: raw.ecn_max_bytes.as_ref().map(|v| *v.get_ref()),
        ecn_max_prob: raw.ecn_max_prob.as_ref().map(|v| *v.get_ref()),
    };
    if let Some(p) = &raw.ecn_max_prob
        && !(*p.get_ref() > 0.0 && *p.get_ref() <= 1.0)
    {
        return Err(src.error(
            &field("ecn_max_prob"),
            p,
            "is a probability: use a value in (0, 1]",
        ));
    }
    if let (Some(min), Some(max)) = (&raw.ecn_min_bytes, &raw.ecn_max_bytes)
        && min.get_ref() > max.get_ref()
    {
        return Err(src.error(
            &field("ecn_min_bytes"),
            min,
            format!(
                "{} is above ecn_max_bytes ({})",
                min.get_ref(),
                max.get_ref()
            ),
        ));
    }
    if let (Some(max), Some(buf)) = (&raw.ecn_max_bytes, &raw.buffer_bytes)
        && max.get_ref() > buf.get_ref()
    {
        return Err(src.error(
            &field("ecn_max_bytes"),
            max,
            format!(
                "{} is above buffer_bytes ({})",
                max.get_ref(),
                buf.get_ref()
            ),
        ));
    }
    Ok(LinkParams {
        speed_gbps: *raw.speed_gbps.get_ref(),
        latency_ns: *raw.latency_ns.get_ref(),
        queue,
    })
}

impl Plan {
    /// A built-in plan by name (`small`).
    pub fn builtin(name: &str) -> Option<Self> {
        match name {
            "small" => Some(
                Self::from_toml(SMALL_PLAN_TOML, "<builtin small>")
                    .expect("the built-in plan is valid"),
            ),
            _ => None,
        }
    }

    /// Names of the built-in plans.
    pub const BUILTINS: &'static [&'static str] = &["small"];

    /// Parse and check a plan. `path` names the source in errors (a file name, or
    /// `<builtin small>`); the plan's name defaults to the file stem.
    pub fn from_toml(text: &str, path: &str) -> Result<Self, PlanError> {
        let src = Source { path, text };
        let raw: RawPlan = toml::from_str(text).map_err(|e| {
            // One line: a value quoted in the message may span lines (a multi-line string).
            let message = e.message().trim().replace('\r', "\\r").replace('\n', "\\n");
            // A missing key has the span of its whole table: no line or field of its own.
            if let Some(key) = message
                .strip_prefix("missing field `")
                .and_then(|m| m.strip_suffix('`'))
            {
                return PlanError {
                    path: path.to_owned(),
                    line: None,
                    field: None,
                    message: format!(
                        "missing field `{key}`: add it (plans/small.toml has every field)"
                    ),
                };
            }
            PlanError {
                path: path.to_owned(),
                line: e.span().and_then(|s| src.line_of(&(s.start..s.end.max(1)))),
                field: e.span().and_then(|s| src.field_at(s.start)),
                message,
            }
        })?;

        check_range(&src, "planes", &raw.planes, MAX_PLANES)?;
        check_range(&src, "t0_per_plane", &raw.t0_per_plane, MAX_T0_PER_PLANE)?;
        check_range(&src, "t1_per_plane", &raw.t1_per_plane, MAX_T1_PER_PLANE)?;
        check_range(&src, "hosts_per_t0", &raw.hosts_per_t0, MAX_HOSTS_PER_T0)?;
        let hosts = raw.t0_per_plane.get_ref() * raw.hosts_per_t0.get_ref();
        let host_mode = *raw.host_usids.get_ref();
        if host_mode == HostMode::Global && hosts > MAX_GLOBAL_HOSTS {
            return Err(src.error(
                "host_usids",
                &raw.host_usids,
                format!(
                    "\"global\" host uSIDs address at most {MAX_GLOBAL_HOSTS} hosts, this plan \
                     has {hosts}: use \"downlink\""
                ),
            ));
        }

        let Some((block, block_len)) = parse_prefix(raw.usid_block.get_ref()) else {
            return Err(src.error(
                "usid_block",
                &raw.usid_block,
                "is not an IPv6 prefix like \"fcbb:bb00::/32\"",
            ));
        };
        if block_len != 32 {
            return Err(src.error(
                "usid_block",
                &raw.usid_block,
                format!("must be a /32 (F3216: 32-bit block, 16-bit uSIDs), not a /{block_len}"),
            ));
        }
        if !host_bits_zero(block, block_len) {
            return Err(src.error(
                "usid_block",
                &raw.usid_block,
                "has bits set after the /32: write the block with zeros after it",
            ));
        }

        let Some((nic_prefix, nic_len)) = parse_prefix(raw.nic_prefix.get_ref()) else {
            return Err(src.error(
                "nic_prefix",
                &raw.nic_prefix,
                "is not an IPv6 prefix like \"fd00:6d72:6300::/64\"",
            ));
        };
        if !(8..=110).contains(&nic_len) || !host_bits_zero(nic_prefix, nic_len) {
            return Err(src.error(
                "nic_prefix",
                &raw.nic_prefix,
                "must be a prefix of length 8 to 110 with zero host bits",
            ));
        }
        if u128::from(nic_prefix) >> 96 == u128::from(block) >> 96 {
            return Err(src.error(
                "nic_prefix",
                &raw.nic_prefix,
                "overlaps the uSID block: NIC addresses must be outside it",
            ));
        }

        let mtu = *raw.mtu.get_ref();
        if !(IPV6_MIN_MTU..=65535).contains(&mtu) {
            return Err(src.error(
                "mtu",
                &raw.mtu,
                format!(
                    "{mtu} cannot carry MRC: use {IPV6_MIN_MTU} (IPv6 minimum, room for the \
                     {MRC_SRV6_HEADER_BYTES} bytes of SRv6 MRC headers) to 65535"
                ),
            ));
        }

        let name = raw.name.clone().unwrap_or_else(|| {
            FsPath::new(path)
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or("plan")
                .to_owned()
        });
        Ok(Self {
            name,
            planes: *raw.planes.get_ref() as u8,
            t0_per_plane: *raw.t0_per_plane.get_ref() as u16,
            t1_per_plane: *raw.t1_per_plane.get_ref() as u16,
            hosts_per_t0: *raw.hosts_per_t0.get_ref() as u16,
            block,
            host_mode,
            switch_mode: raw.switch_usids,
            nic_prefix,
            nic_prefix_len: nic_len,
            mtu,
            host_link: link_params(&src, "host", &raw.links.host)?,
            fabric_link: link_params(&src, "fabric", &raw.links.fabric)?,
            sim: raw.sim,
        })
    }

    /// Read and check a plan file.
    pub fn load(path: &FsPath) -> Result<Self, PlanError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| PlanError {
            path: shown.clone(),
            line: None,
            field: None,
            message: format!("cannot read: {e}"),
        })?;
        Self::from_toml(&text, &shown)
    }

    /// A built-in plan name (`small`) or a file path.
    pub fn load_or_builtin(name_or_path: &str) -> Result<Self, PlanError> {
        if let Some(plan) = Self::builtin(name_or_path) {
            return Ok(plan);
        }
        let path = FsPath::new(name_or_path);
        if !path.exists() {
            return Err(PlanError {
                path: name_or_path.to_owned(),
                line: None,
                field: None,
                message: format!(
                    "no such file, and not a built-in plan (built-ins: {})",
                    Self::BUILTINS.join(", ")
                ),
            });
        }
        Self::load(path)
    }
}
