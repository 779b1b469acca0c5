//! The C structures lib_mrc.so reads and writes have the layouts C compilers give them: a C
//! program built against rdma-core's `<infiniband/verbs.h>` (Debian libibverbs-dev) and our
//! `include/mrc.h` and `include/mrc_ctl.h` prints every size and offset the Rust side relies
//! on, and they must match.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::mem::{offset_of, size_of};
use std::path::{Path, PathBuf};
use std::process::Command;

use _mrc::api::{
    mrc_async_event, mrc_context_attr, mrc_device_attr, mrc_qp_attr, mrc_qp_hint_attr,
    mrc_qp_init_attr,
};
use _mrc::ctl::{
    mrc_ctl_cc_nscc_cfg, mrc_ctl_cc_profile_attr, mrc_ctl_device_attr, mrc_ctl_ev_profile_attr,
    mrc_ctl_port_attr,
};
use _mrc::ibv::{
    ibv_ah_attr, ibv_context, ibv_device, ibv_device_attr, ibv_global_route, ibv_mr, ibv_pd,
    ibv_qp_attr, ibv_qp_cap, ibv_recv_wr, ibv_send_wr, ibv_sge, ibv_wc,
};

const TEST: &str = "layout";

/// (C expression, the Rust value).
fn rust_side() -> Vec<(&'static str, usize)> {
    macro_rules! s {
        ($t:ident) => {
            (
                concat!("sizeof(struct ", stringify!($t), ")"),
                size_of::<$t>(),
            )
        };
    }
    macro_rules! o {
        ($t:ident, $rf:ident, $cf:expr) => {
            (
                concat!("offsetof(struct ", stringify!($t), ", ", $cf, ")"),
                offset_of!($t, $rf),
            )
        };
    }
    vec![
        s!(ibv_device),
        o!(ibv_device, name, "name"),
        s!(ibv_context),
        o!(ibv_context, cmd_fd, "cmd_fd"),
        o!(ibv_context, abi_compat, "abi_compat"),
        s!(ibv_pd),
        s!(ibv_mr),
        o!(ibv_mr, lkey, "lkey"),
        o!(ibv_mr, rkey, "rkey"),
        s!(ibv_device_attr),
        o!(ibv_device_attr, max_qp, "max_qp"),
        o!(ibv_device_attr, max_pd, "max_pd"),
        o!(ibv_device_attr, max_pkeys, "max_pkeys"),
        o!(ibv_device_attr, phys_port_cnt, "phys_port_cnt"),
        o!(ibv_port_attr_c, link_layer, "link_layer"),
        o!(ibv_port_attr_c, gid_tbl_len, "gid_tbl_len"),
        o!(ibv_port_attr_c, phys_state, "phys_state"),
        s!(ibv_sge),
        s!(ibv_send_wr),
        o!(ibv_send_wr, opcode, "opcode"),
        o!(ibv_send_wr, send_flags, "send_flags"),
        o!(ibv_send_wr, imm_data, "imm_data"),
        o!(ibv_send_wr, remote_addr, "wr.rdma.remote_addr"),
        o!(ibv_send_wr, rkey, "wr.rdma.rkey"),
        s!(ibv_recv_wr),
        s!(ibv_wc),
        o!(ibv_wc, byte_len, "byte_len"),
        o!(ibv_wc, imm_data, "imm_data"),
        o!(ibv_wc, qp_num, "qp_num"),
        o!(ibv_wc, wc_flags, "wc_flags"),
        s!(ibv_qp_cap),
        s!(ibv_global_route),
        s!(ibv_ah_attr),
        o!(ibv_ah_attr, is_global, "is_global"),
        s!(ibv_qp_attr),
        o!(ibv_qp_attr, rq_psn, "rq_psn"),
        o!(ibv_qp_attr, sq_psn, "sq_psn"),
        o!(ibv_qp_attr, dest_qp_num, "dest_qp_num"),
        o!(ibv_qp_attr, cap, "cap"),
        o!(ibv_qp_attr, ah_attr, "ah_attr"),
        o!(ibv_qp_attr, timeout, "timeout"),
        o!(ibv_qp_attr, rate_limit, "rate_limit"),
        s!(mrc_device_attr),
        o!(mrc_device_attr, max_wimm_dest, "wimm_attr.max_wimm_dest"),
        o!(mrc_device_attr, max_mpr, "mpr_attr.max_mpr"),
        o!(mrc_device_attr, max_qp_hint, "qp_attr.max_qp_hint"),
        o!(mrc_device_attr, cap, "cap"),
        s!(mrc_context_attr),
        s!(mrc_qp_hint_attr),
        o!(mrc_qp_hint_attr, vendor_cfg, "vendor_cfg"),
        s!(mrc_qp_init_attr),
        o!(mrc_qp_init_attr, cap, "cap"),
        o!(mrc_qp_init_attr, sq_sig_all, "sq_sig_all"),
        o!(mrc_qp_init_attr, pd, "pd"),
        o!(mrc_qp_init_attr, send_ops_flags, "send_ops_flags"),
        o!(mrc_qp_init_attr, protocol_version, "protocol_version"),
        s!(mrc_qp_attr),
        o!(mrc_qp_attr, mpr_dest, "mpr.mpr_dest"),
        o!(mrc_qp_attr, max_wimm, "wimm.max_wimm"),
        o!(mrc_qp_attr, max_wimm_dest, "wimm.max_wimm_dest"),
        o!(mrc_qp_attr, timeout, "timeout"),
        o!(mrc_qp_attr, ev_profile_id, "profile.ev_profile_id"),
        o!(mrc_qp_attr, cc_profile_id, "profile.cc_profile_id"),
        o!(mrc_qp_attr, retry_linear_cnt, "retry.linear_cnt"),
        o!(mrc_qp_attr, retry_exp_cnt, "retry.exp_cnt"),
        o!(mrc_qp_attr, qp_hint, "qp_hint"),
        o!(mrc_qp_attr, cap, "cap"),
        o!(mrc_qp_attr, vendor_cfg, "vendor_cfg"),
        s!(mrc_async_event),
        o!(mrc_async_event, event_type, "event_type"),
        s!(mrc_ctl_device_attr),
        o!(mrc_ctl_device_attr, cc, "cc"),
        o!(mrc_ctl_device_attr, phy_port_mask, "phy_port_mask"),
        o!(mrc_ctl_device_attr, opt_attr, "opt_attr"),
        s!(mrc_ctl_port_attr),
        s!(mrc_ctl_ev_profile_attr),
        o!(
            mrc_ctl_ev_profile_attr,
            ev_fmt_profile_id,
            "ev_fmt_profile_id"
        ),
        o!(mrc_ctl_ev_profile_attr, ev_event_mask, "ev_event_mask"),
        o!(mrc_ctl_ev_profile_attr, ev_op, "ev_op"),
        o!(mrc_ctl_ev_profile_attr, ev_fields_op, "ev_fields_op"),
        o!(mrc_ctl_ev_profile_attr, vendor_cfg, "vendor_cfg"),
        s!(mrc_ctl_cc_profile_attr),
        o!(mrc_ctl_cc_profile_attr, cc_config, "cc_config"),
        o!(mrc_ctl_cc_profile_attr, vendor_cfg, "vendor_cfg"),
        s!(mrc_ctl_cc_nscc_cfg),
        o!(mrc_ctl_cc_nscc_cfg, eta, "eta"),
        o!(mrc_ctl_cc_nscc_cfg, max_cwnd, "max_cwnd"),
        o!(mrc_ctl_cc_nscc_cfg, qa_threshold, "qa_threshold"),
        o!(mrc_ctl_cc_nscc_cfg, target_delay, "target_delay"),
    ]
}

/// `ibv_port_attr` under the C name the program uses.
#[allow(non_camel_case_types)]
type ibv_port_attr_c = _mrc::ibv::ibv_port_attr;

/// Removes the scratch directory on every exit path.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn the_c_structures_match_rdma_core_and_mrc_h() {
    if !mrc_skip::runs("cc", &["--version"]) {
        mrc_skip::skip(TEST, "needs a C compiler (install gcc)");
        return;
    }
    if !Path::new("/usr/include/infiniband/verbs.h").exists() {
        mrc_skip::skip(TEST, "needs rdma-core's verbs.h (install libibverbs-dev)");
        return;
    }
    let include = Path::new(env!("CARGO_MANIFEST_DIR")).join("../include");
    let scratch = Scratch(std::env::temp_dir().join(format!("mrc-layout-{}", std::process::id())));
    std::fs::create_dir_all(&scratch.0).expect("scratch dir");
    let rust = rust_side();
    let mut c = String::from(
        "#include <stdio.h>\n#include <stddef.h>\n#include \"mrc.h\"\n#include \"mrc_ctl.h\"\n\
         #define ibv_port_attr_c ibv_port_attr\nint main(void) {\n",
    );
    for (expr, _) in &rust {
        let _ = writeln!(c, "  printf(\"%s %zu\\n\", \"{expr}\", (size_t)({expr}));");
    }
    c.push_str("  return 0;\n}\n");
    let src = scratch.0.join("layout.c");
    let exe = scratch.0.join("layout");
    std::fs::write(&src, c).expect("write the C program");
    let built = Command::new("cc")
        .args(["-std=gnu11", "-Wall", "-Werror", "-I"])
        .arg(&include)
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .output()
        .expect("cc");
    assert!(
        built.status.success(),
        "the layout program does not build:\n{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let out = Command::new(&exe).output().expect("run the layout program");
    let text = String::from_utf8_lossy(&out.stdout);
    let c_side: HashMap<&str, usize> = text
        .lines()
        .filter_map(|l| {
            let (k, v) = l.rsplit_once(' ')?;
            Some((k, v.parse().ok()?))
        })
        .collect();
    let mut wrong = Vec::new();
    for (expr, r) in &rust {
        match c_side.get(expr) {
            Some(c) if c == r => {}
            other => wrong.push(format!("{expr}: C {other:?}, Rust {r}")),
        }
    }
    assert!(wrong.is_empty(), "layouts differ:\n{}", wrong.join("\n"));
    println!("{TEST}: {} sizes and offsets match", rust.len());
}
