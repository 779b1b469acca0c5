//! Build script of `mrc-dpdk`: bindings to the system's DPDK (>= 22.11) or, when DPDK or libclang
//! is missing, a build without it.
//!
//! With DPDK: `pkg-config` finds libdpdk; bindgen generates `bindings.rs` from `csrc/wrapper.h`
//! with a narrow allowlist, and C wrappers for every allowlisted `static inline` function
//! (`wrap_static_fns`); `cc` compiles those wrappers plus `csrc/shim.c` (the macros); the crate
//! links dynamically to Debian's `librte_*` (the EAL loads the virtual PMDs by itself).
//! Both bindgen's clang and `cc` get ALL of `pkg-config --cflags libdpdk`: without the forced
//! `-include rte_config.h` the headers parse with the wrong configuration.
//!
//! Without DPDK (or with `MRC_DPDK_DISABLE=1`): emits `cfg(mrc_dpdk_absent)`; the crate then
//! compiles its fallback, whose `Eal::init` returns `Error::NotBuilt` with the reason below.
//!
//! When it reruns: besides this file, `csrc/` and the environment it reads, cargo watches
//! pkg-config's search directories that exist (`pkg-config --variable pc_path pkg-config`, or
//! `PKG_CONFIG_LIBDIR`, and `PKG_CONFIG_PATH`'s entries; [`watch_pkg_config_dirs`]). Cargo
//! rescans a watched directory for anything newer than the last run, the directory's own time
//! included, so `apt-get install libdpdk-dev` (or its removal, or an upgrade) reruns the script
//! at the next build and the crate is rebuilt with (without) DPDK; a build with nothing changed
//! stays fresh. Installing any other package with a `.pc` file there reruns it, and rebuilds
//! the crates above, once. A search directory that does not exist yet is not watched (cargo
//! would rerun a script that names a missing path at every build): when DPDK's install
//! creates it (a first `meson install` under /usr/local), `touch dpdk-bindings/build.rs`.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

const MIN_VERSION: &str = "22.11";

fn main() {
    println!("cargo::rustc-check-cfg=cfg(mrc_dpdk_absent)");
    println!("cargo::rerun-if-env-changed=MRC_DPDK_DISABLE");
    println!("cargo::rerun-if-env-changed=LIBCLANG_PATH");
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-changed=csrc");
    watch_pkg_config_dirs();

    match build_with_dpdk() {
        Ok(version) => {
            println!("cargo::rustc-env=MRC_DPDK_VERSION={version}");
            // Seen by dependents' build scripts as DEP_DPDK_VERSION (links = "dpdk").
            println!("cargo::metadata=version={version}");
        }
        Err(reason) => {
            println!("cargo::warning=mrc-dpdk: building WITHOUT DPDK: {reason}");
            println!("cargo::rustc-cfg=mrc_dpdk_absent");
            println!("cargo::rustc-env=MRC_DPDK_ABSENT_REASON={reason}");
            println!("cargo::metadata=absent=1");
        }
    }
}

/// Rerun when a `.pc` file appears in, leaves or changes in a directory pkg-config searches
/// (libdpdk installed, removed or upgraded), or when the variables that move them change.
/// Only directories that exist are named: cargo reruns a script that names a missing path at
/// every build.
fn watch_pkg_config_dirs() {
    for var in ["PKG_CONFIG", "PKG_CONFIG_PATH", "PKG_CONFIG_LIBDIR"] {
        println!("cargo::rerun-if-env-changed={var}");
    }
    let list = |var: &str| {
        env::var_os(var)
            .map(|v| env::split_paths(&v).collect::<Vec<_>>())
            .unwrap_or_default()
    };
    let mut dirs = list("PKG_CONFIG_PATH");
    // PKG_CONFIG_LIBDIR replaces the default path; else the default pkg-config was built with
    // (Debian's when pkg-config itself is not installed yet).
    let libdir = list("PKG_CONFIG_LIBDIR");
    if libdir.is_empty() {
        let pkg_config = env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".into());
        let default = Command::new(pkg_config)
            .args(["--variable", "pc_path", "pkg-config"])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .filter(|s| !s.trim().is_empty())
            .unwrap_or_else(|| {
                let arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
                format!(
                    "/usr/local/lib/{arch}-linux-gnu/pkgconfig:/usr/local/lib/pkgconfig:\
                     /usr/local/share/pkgconfig:/usr/lib/{arch}-linux-gnu/pkgconfig:\
                     /usr/lib/pkgconfig:/usr/share/pkgconfig"
                )
            });
        dirs.extend(env::split_paths(default.trim()));
    } else {
        dirs.extend(libdir);
    }
    let mut seen = Vec::new();
    for dir in dirs {
        if dir.is_dir() && !seen.contains(&dir) {
            println!("cargo::rerun-if-changed={}", dir.display());
            seen.push(dir);
        }
    }
}

/// Generates the bindings and compiles the C side; returns the DPDK version, or why not.
fn build_with_dpdk() -> Result<String, String> {
    if env::var_os("MRC_DPDK_DISABLE").is_some_and(|v| !v.is_empty() && v != "0") {
        return Err("disabled by MRC_DPDK_DISABLE".into());
    }
    // Probe without emitting link flags: if a later step fails, nothing may be linked.
    let lib = pkg_config::Config::new()
        .atleast_version(MIN_VERSION)
        .cargo_metadata(false)
        .probe("libdpdk")
        .map_err(|e| {
            format!(
                "libdpdk >= {MIN_VERSION} not found by pkg-config ({})",
                first_line(&e.to_string())
            )
        })?;
    let cflags = pkg_config_cflags()?;

    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").map_err(|e| e.to_string())?);
    let out = PathBuf::from(env::var("OUT_DIR").map_err(|e| e.to_string())?);
    let csrc = manifest.join("csrc");

    generate_bindings(&csrc, &out, &cflags)?;

    let mut cc = cc::Build::new();
    cc.file(csrc.join("shim.c"))
        .file(out.join("static_fns.c"))
        .include(&csrc);
    for path in &lib.include_paths {
        cc.include(path);
    }
    for flag in cflags.iter().filter(|f| !f.starts_with("-I")) {
        cc.flag(flag);
    }
    cc.define("ALLOW_EXPERIMENTAL_API", None)
        .opt_level(3)
        .warnings(false)
        .try_compile("mrc_dpdk_shim")
        .map_err(|e| {
            format!(
                "compiling the C shim failed: {}",
                first_line(&e.to_string())
            )
        })?;

    // Only now emit the link lines (after the shim's, so the static shim resolves against them).
    pkg_config::Config::new()
        .atleast_version(MIN_VERSION)
        .probe("libdpdk")
        .map_err(|e| first_line(&e.to_string()))?;
    Ok(lib.version)
}

/// `pkg-config --cflags libdpdk`, split into arguments (Debian's paths hold no spaces).
fn pkg_config_cflags() -> Result<Vec<String>, String> {
    let pkg_config = env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".into());
    let output = Command::new(&pkg_config)
        .args(["--cflags", "libdpdk"])
        .output()
        .map_err(|e| format!("running {pkg_config}: {e}"))?;
    if !output.status.success() {
        return Err(format!("{pkg_config} --cflags libdpdk failed"));
    }
    let text = String::from_utf8(output.stdout).map_err(|e| e.to_string())?;
    // `-include rte_config.h` is two words; keep the pair together for bindgen and cc alike.
    let mut flags = Vec::new();
    let mut words = text.split_whitespace();
    while let Some(word) = words.next() {
        if word == "-include" {
            let file = words
                .next()
                .ok_or("dangling -include in pkg-config output")?;
            flags.push(format!("-include{file}"));
        } else {
            flags.push(word.to_owned());
        }
    }
    Ok(flags)
}

fn generate_bindings(csrc: &Path, out: &Path, cflags: &[String]) -> Result<(), String> {
    let header = csrc.join("wrapper.h");
    let builder = bindgen::Builder::default()
        .header(header.to_string_lossy())
        .clang_args(cflags)
        .clang_arg(format!("-I{}", csrc.display()))
        .clang_arg("-DALLOW_EXPERIMENTAL_API")
        .allowlist_function(
            [
                // EAL, lcores, launch, errors
                "rte_eal_init|rte_eal_cleanup|rte_eal_get_runtime_dir|rte_eal_process_type",
                "rte_eal_remote_launch|rte_eal_wait_lcore|rte_eal_mp_wait_lcore|rte_eal_get_lcore_state",
                "rte_lcore_id|rte_lcore_count|rte_get_main_lcore|rte_get_next_lcore|rte_socket_id",
                "rte_thread_register|rte_thread_unregister|rte_strerror",
                // mempool and mbuf
                "rte_pktmbuf_pool_create|rte_mempool_free|rte_mempool_avail_count|rte_mempool_in_use_count",
                "rte_pktmbuf_alloc|rte_pktmbuf_alloc_bulk|rte_pktmbuf_free|rte_pktmbuf_free_bulk",
                "rte_pktmbuf_append|rte_pktmbuf_prepend|rte_pktmbuf_adj|rte_pktmbuf_trim",
                "rte_pktmbuf_reset|rte_pktmbuf_linearize|rte_pktmbuf_chain|rte_pktmbuf_headroom|rte_pktmbuf_tailroom",
                "rte_pktmbuf_data_room_size|rte_mbuf_refcnt_read",
                // ethdev
                "rte_eth_dev_count_avail|rte_eth_find_next_owned_by|rte_eth_dev_is_valid_port",
                "rte_eth_dev_get_port_by_name|rte_eth_dev_get_name_by_port|rte_eth_dev_info_get",
                "rte_eth_dev_configure|rte_eth_dev_adjust_nb_rx_tx_desc|rte_eth_dev_socket_id",
                "rte_eth_rx_queue_setup|rte_eth_tx_queue_setup|rte_eth_dev_start|rte_eth_dev_stop",
                "rte_eth_dev_close|rte_eth_dev_set_mtu|rte_eth_dev_get_mtu|rte_eth_macaddr_get",
                "rte_eth_link_get_nowait|rte_eth_stats_get|rte_eth_stats_reset",
                "rte_eth_promiscuous_enable|rte_eth_promiscuous_disable|rte_eth_promiscuous_get",
                "rte_eth_rx_burst|rte_eth_tx_burst",
                // ours
                "mrc_shim_.*",
            ]
            .join("|"),
        )
        .allowlist_type("rte_lcore_state_t")
        .allowlist_var(
            "RTE_PKTMBUF_HEADROOM|RTE_MBUF_DEFAULT_BUF_SIZE|RTE_MAX_ETHPORTS|RTE_MAX_LCORE|LCORE_ID_ANY\
             |SOCKET_ID_ANY|RTE_ETH_NAME_MAX_LEN|RTE_ETH_DEV_NO_OWNER\
             |RTE_ETH_LINK_(UP|DOWN|FULL_DUPLEX|HALF_DUPLEX|AUTONEG|FIXED)|RTE_ETH_SPEED_NUM_(NONE|UNKNOWN)\
             |RTE_ETHER_(HDR_LEN|CRC_LEN)",
        )
        // Packed structs that embed the aligned `rte_ether_addr` cannot be expressed in Rust
        // (E0588); none of them is needed, so keep them opaque if the allowlist reaches them.
        .opaque_type("rte_arp_ipv4|rte_arp_hdr|rte_l2tpv2_combined_msg_hdr|rte_gtp_psc_generic_hdr")
        .derive_default(true)
        .generate_comments(false)
        .wrap_static_fns(true)
        .wrap_static_fns_path(out.join("static_fns"))
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()));
    // bindgen panics when it cannot load libclang; treat that like any other missing tool.
    let generated =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || builder.generate()))
            .map_err(|_| "bindgen could not load libclang (install libclang-dev)".to_owned())?
            .map_err(|e| format!("bindgen failed: {}", first_line(&e.to_string())))?;
    generated
        .write_to_file(out.join("bindings.rs"))
        .map_err(|e| format!("writing bindings.rs: {e}"))
}

fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or_default().to_owned()
}
