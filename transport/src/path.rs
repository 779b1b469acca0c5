//! Where SRv6-mode EVs come from: the paths of the fabric plan, behind a small trait so the
//! engine does not depend on how the plan is stored (`mrc_srv6::plan` implements it; tests use
//! tiny tables).

use core::fmt;
use core::net::Ipv6Addr;

/// One source route through one plane (MRC 1.0 §6, brief §2.16): the outer destination address
/// (a uSID container, RFC 9800) and, when the route is longer than one container, the single
/// SRH segment that follows it (RFC 8754).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SrPath {
    pub outer_da: Ipv6Addr,
    pub segment: Option<Ipv6Addr>,
}

/// The paths between two hosts of a fabric plan, per plane.
pub trait PathSource: fmt::Debug + Send + Sync {
    /// Number of distinct paths from host `src` to host `dst` through `plane`.
    fn path_count(&self, src: u32, dst: u32, plane: u8) -> usize;

    /// Path `index` (< `path_count`) from `src` to `dst` through `plane`.
    fn path(&self, src: u32, dst: u32, plane: u8, index: usize) -> Option<SrPath>;
}

/// The fabric plan names the paths in SRv6 mode (one per spine, plus the direct one inside a
/// rack; PROTOCOL.md "uSID addressing").
impl PathSource for mrc_srv6::plan::Plan {
    fn path_count(&self, src: u32, dst: u32, plane: u8) -> usize {
        use mrc_srv6::plan::HostId;
        Self::path_count(self, HostId(src), HostId(dst), plane).map_or(0, |n| n as usize)
    }

    fn path(&self, src: u32, dst: u32, plane: u8, index: usize) -> Option<SrPath> {
        use mrc_srv6::plan::HostId;
        let index = u32::try_from(index).ok()?;
        Self::path(self, HostId(src), HostId(dst), plane, index)
            .ok()
            .map(|p| SrPath {
                outer_da: p.da,
                segment: None,
            })
    }
}
