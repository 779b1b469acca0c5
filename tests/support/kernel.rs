//! Where the kernel-switch tests find Linux SRv6 (docs/interop.md "Running them"): this
//! machine's kernel when it has what a test needs, else Debian's kernel in a VM
//! ([`crate::vm`]), booted once per test binary. `MRC_KERNEL_VM=1` forces the VM where the
//! kernel has it all (to try both ways on one machine); `MRC_KERNEL_VM=0` never boots one.
//!
//! Two ways to use the VM: a test whose hosts are kernel hosts (scapy, kernel UDP sockets,
//! End.DT6) runs whole in the guest ([`run_in_vm`]); a test whose hosts are DPDK NICs keeps them
//! here and puts only the switches in the guest (`tests/interop/harness.rs`), so only the
//! kernel's forwarding is emulated. Every deadline of these tests comes from [`deadline`], which
//! scales when the kernel doing the work runs emulated.

use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use crate::vm::Vm;
use crate::{is_root, runs, skip, unique};

/// `1`: the kernel-switch tests use the VM even where this kernel has what they need; `0`:
/// never (they skip where it lacks it).
pub const VM_VAR: &str = "MRC_KERNEL_VM";
/// Set in the guest for a test run there: the kernel and the test run emulated.
pub const EMULATED_VAR: &str = "MRC_KERNEL_EMULATED";
/// How much longer than on real hardware a deadline is when the kernel runs emulated
/// (default [`SLOWDOWN`]).
pub const SLOWDOWN_VAR: &str = "MRC_VM_SLOWDOWN";
/// Guest user space runs ~35× slower than the host, the kernel's forwarding much less so.
const SLOWDOWN: u32 = 10;

/// What a kernel-switch test needs of the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Feature {
    /// SRv6 lightweight tunnels (CONFIG_IPV6_SEG6_LWTUNNEL): seg6 encap, seg6local End
    /// next-csid (uN), End.DT6.
    Srv6,
    /// uA: seg6local End.X with the next-csid flavor, kept (6.1 accepts it and drops the
    /// flavor; 6.12 has it).
    Ua,
}

/// Where a kernel-switch test runs its switches.
#[derive(Debug, Clone, Copy)]
pub enum Kernel {
    /// This machine's kernel.
    Here,
    /// The VM's.
    Vm(&'static Vm),
}

/// True if this process runs in the VM's guest (a test [`run_in_vm`] started).
pub fn in_guest() -> bool {
    std::env::var(EMULATED_VAR).as_deref() == Ok("1")
}

/// True if the kernel-switch tests' switches run emulated: in the VM, or this test runs in its
/// guest.
pub fn emulated() -> bool {
    in_guest() || VM_USED.get().is_some()
}

/// `base` as a deadline for work done by an emulated kernel when the switches are in the VM
/// (or this test runs in its guest): `base × MRC_VM_SLOWDOWN` (default 10). Unchanged on real
/// hardware.
pub fn deadline(base: Duration) -> Duration {
    if emulated() { base * slowdown() } else { base }
}

fn slowdown() -> u32 {
    std::env::var(SLOWDOWN_VAR)
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|v| *v >= 1)
        .unwrap_or(SLOWDOWN)
}

static VM_USED: OnceLock<()> = OnceLock::new();

/// Where `test` finds the kernel `needs`: here if this kernel has it (and `MRC_KERNEL_VM` is
/// not `1`), else the VM. `None` if it is nowhere: the test is skipped (recorded), or fails
/// under `MRC_REQUIRE_ALL=1` with one line naming what is missing. Call after the test's own
/// prerequisites (root, iproute2).
pub fn kernel_for(test: &str, needs: Feature) -> Option<Kernel> {
    let forced = std::env::var(VM_VAR).ok();
    let lacking = lacking(needs);
    if in_guest() || forced.as_deref() == Some("0") {
        return match lacking {
            None => Some(Kernel::Here),
            Some(what) => {
                skip(
                    test,
                    &format!("this machine's kernel lacks {what} (and {VM_VAR}=0)"),
                );
                None
            }
        };
    }
    if lacking.is_none() && forced.as_deref() != Some("1") {
        return Some(Kernel::Here);
    }
    match Vm::get() {
        Ok(vm) => {
            let _ = VM_USED.set(());
            Some(Kernel::Vm(vm))
        }
        Err(why) => {
            let because = lacking.map_or_else(
                || format!("{VM_VAR}=1"),
                |what| format!("this machine's kernel lacks {what}"),
            );
            skip(test, &format!("{because}, and {why}"));
            None
        }
    }
}

/// Runs `test` (a test of the calling binary, by its exact name) in the VM's guest, where the
/// kernel has SRv6; prints what it printed; panics if it failed. Nothing there may skip
/// (`MRC_REQUIRE_ALL=1`): the guest has every tool this machine has.
pub fn run_in_vm(vm: &Vm, test: &str) {
    let exe = std::env::current_exe().expect("the test binary");
    let exe = exe.to_str().expect("a UTF-8 path");
    let backtrace = std::env::var("RUST_BACKTRACE").unwrap_or_default();
    let env = [
        (EMULATED_VAR, "1"),
        (VM_VAR, "0"),
        ("MRC_REQUIRE_ALL", "1"),
        ("RUST_BACKTRACE", backtrace.as_str()),
    ];
    let limit = Duration::from_mins(30);
    let out = vm
        .run(
            &[exe, "--exact", test, "--nocapture", "--test-threads", "1"],
            &env,
            None,
            limit,
        )
        .unwrap_or_else(|e| panic!("{test} in the kernel VM: {e}"));
    println!(
        "{test}: ran in the kernel VM (Linux {}, emulated):\n{}{}",
        vm.kernel, out.stdout, out.stderr
    );
    assert!(
        out.success(),
        "{test} failed in the kernel VM ({:?}):\n{}\n{}",
        out.rc,
        out.stdout,
        out.stderr
    );
    assert!(
        out.stdout.contains("1 passed"),
        "{test} did not run in the kernel VM:\n{}",
        out.stdout
    );
}

/// What this machine's kernel lacks of `needs`, `None` when it has it or cannot tell (not
/// root, no iproute2: the tests' own checks say so). Probed once per feature and test binary,
/// in a namespace of its own that is deleted at once.
pub fn lacking(needs: Feature) -> Option<&'static str> {
    static SRV6: OnceLock<Option<String>> = OnceLock::new();
    static UA: OnceLock<Option<String>> = OnceLock::new();
    let srv6 = SRV6.get_or_init(probe_srv6).as_deref();
    match needs {
        Feature::Srv6 => srv6,
        Feature::Ua => srv6.or_else(|| UA.get_or_init(probe_ua).as_deref()),
    }
}

/// `ip -n NS ARGS`: (success, stderr).
fn ip(ns: &str, args: &[&str]) -> (bool, String) {
    let out = Command::new("ip")
        .args(["-n", ns])
        .args(args)
        .stdin(Stdio::null())
        .output();
    match out {
        Ok(o) => (
            o.status.success(),
            String::from_utf8_lossy(&o.stderr).trim().to_owned(),
        ),
        Err(e) => (false, e.to_string()),
    }
}

fn release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .unwrap_or_default()
        .trim()
        .to_owned()
}

/// Runs `probe` in a fresh namespace (with `lo` up), deleted after; `None` if one cannot be
/// made here.
fn in_scratch_ns<T>(probe: impl FnOnce(&str) -> T) -> Option<T> {
    let ns = unique("mrcseg6");
    if !is_root() || !runs("ip", &["netns", "add", &ns]) {
        return None;
    }
    let up = ip(&ns, &["link", "set", "lo", "up"]).0;
    let got = up.then(|| probe(&ns));
    let _ = runs("ip", &["netns", "del", &ns]);
    got
}

/// An `encap seg6` route, which a kernel built without CONFIG_IPV6_SEG6_LWTUNNEL refuses ("lwt
/// encapsulation type not supported").
fn probe_srv6() -> Option<String> {
    in_scratch_ns(|ns| {
        let (ok, err) = ip(
            ns,
            &[
                "-6",
                "route",
                "add",
                "fc00:5e6::/64",
                "encap",
                "seg6",
                "mode",
                "encap",
                "segs",
                "fc00::1",
                "dev",
                "lo",
            ],
        );
        (!ok && err.contains("not supported")).then(|| {
            format!(
                "SRv6 ({} says \"{err}\": CONFIG_IPV6_SEG6_LWTUNNEL is off)",
                release()
            )
        })
    })
    .flatten()
}

/// An End.X route with the next-csid flavor, read back: 6.1 accepts it and drops the flavor.
fn probe_ua() -> Option<String> {
    in_scratch_ns(|ns| {
        let _ = ip(ns, &["link", "add", "sr0", "type", "ifb"]);
        let _ = ip(ns, &["link", "set", "sr0", "up"]);
        let (ok, err) = ip(
            ns,
            &[
                "-6",
                "route",
                "add",
                "fcbb:bb00:e800::/48",
                "encap",
                "seg6local",
                "action",
                "End.X",
                "nh6",
                "fe80::2",
                "oif",
                "sr0",
                "flavors",
                "next-csid",
                "lblen",
                "32",
                "nflen",
                "16",
                "dev",
                "sr0",
            ],
        );
        let shown = Command::new("ip")
            .args(["-n", ns, "-6", "route", "show", "fcbb:bb00:e800::/48"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        let kept = ok && shown.contains("next-csid");
        (!kept).then(|| {
            format!(
                "uA (End.X with the next-csid flavor: {} {})",
                release(),
                if ok {
                    "accepted the route and dropped the flavor".to_owned()
                } else {
                    format!("says \"{err}\"")
                }
            )
        })
    })
    .flatten()
}
