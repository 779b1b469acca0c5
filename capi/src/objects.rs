//! Protection domains, memory regions, completion queues, QPs and the datapath calls.

use core::ffi::c_int;
use core::ffi::c_void;

use super::{
    Access, CqHandle, Fail, InitAttr, Ipv6Addr, MemoryRegion, MrKeys, NicHandle, PdHandle, QpCap,
    QpInitAttr, QpTransition, Qpn, RecvWr, RemoteNic, RtrAttr, RtsAttr, SendOpcode, SendWr, Sge,
    WcOpcode, WcStatus, WorkCompletion, guard, guard_new, invalid, mrc_context, obj, take,
};
#[allow(clippy::wildcard_imports)] // the C constants, all of them
use crate::types::*;

/// A protection domain.
#[derive(Debug)]
pub struct mrc_pd {
    handle: NicHandle,
    pd: PdHandle,
}

/// A registered region of library-owned memory.
#[derive(Debug)]
pub struct mrc_mr {
    handle: NicHandle,
    region: MemoryRegion,
    attr: mrc_mr_attr,
}

/// A completion queue.
#[derive(Debug)]
pub struct mrc_cq {
    handle: NicHandle,
    cq: CqHandle,
    buf: Vec<WorkCompletion>,
}

/// A queue pair (MRC: sprayed over every plane, selective retransmission).
#[derive(Debug)]
pub struct mrc_qp {
    handle: NicHandle,
    qpn: Qpn,
}

/// Allocates a protection domain.
///
/// # Safety
/// `ctx` is NULL or a live context.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_alloc_pd(ctx: *mut mrc_context) -> *mut mrc_pd {
    guard_new(|| {
        // SAFETY: forwarded caller contract.
        let c = unsafe { obj(ctx, "context") }?;
        let pd = c.handle.alloc_pd()?;
        Ok(mrc_pd {
            handle: c.handle.clone(),
            pd,
        })
    })
}

/// Frees a protection domain no region or QP uses.
///
/// # Safety
/// `pd` is NULL or a live PD.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_dealloc_pd(pd: *mut mrc_pd) -> c_int {
    guard(|| {
        // SAFETY: forwarded caller contract (the PD is only freed when the NIC agrees).
        let p = unsafe { obj(pd, "pd") }?;
        p.handle.dealloc_pd(p.pd)?;
        // SAFETY: as above; not used again.
        drop(unsafe { take(pd, "pd") }?);
        Ok(MRC_OK)
    })
}

/// Registers `length` zeroed bytes of library-owned memory that answer to IOVAs `iova ..
/// iova + length` (the addresses of scatter/gather entries and of peers' Writes).
///
/// # Safety
/// `pd` is NULL or a live PD.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_alloc_mr(
    pd: *mut mrc_pd,
    iova: u64,
    length: usize,
    access: c_int,
) -> *mut mrc_mr {
    guard_new(|| {
        // SAFETY: forwarded caller contract.
        let p = unsafe { obj(pd, "pd") }?;
        let mut acc = Access::NONE;
        if access & MRC_ACCESS_LOCAL_WRITE != 0 {
            acc = acc | Access::LOCAL_WRITE;
        }
        if access & MRC_ACCESS_REMOTE_WRITE != 0 {
            acc = acc | Access::REMOTE_WRITE;
        }
        let region = MemoryRegion::new(length);
        let MrKeys { lkey, rkey } = p.handle.reg_mr(p.pd, iova, &region, acc)?;
        Ok(mrc_mr {
            handle: p.handle.clone(),
            region,
            attr: mrc_mr_attr {
                iova,
                length: length as u64,
                lkey,
                rkey,
            },
        })
    })
}

/// The region's IOVA, length and keys into `*attr`.
///
/// # Safety
/// `mr` is NULL or live; `attr` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_query_mr(mr: *mut mrc_mr, attr: *mut mrc_mr_attr) -> c_int {
    guard(|| {
        // SAFETY: forwarded caller contract.
        let m = unsafe { obj(mr, "mr") }?;
        // SAFETY: forwarded caller contract.
        let out = unsafe { obj(attr, "attr") }?;
        *out = m.attr;
        Ok(MRC_OK)
    })
}

fn range(m: &mrc_mr, offset: u64, len: usize) -> Result<usize, Fail> {
    offset
        .checked_add(len as u64)
        .filter(|&end| end <= m.attr.length)
        .map(|_| offset as usize)
        .ok_or_else(|| Fail(MRC_ERANGE, "range outside the memory region".into()))
}

/// Copies `len` bytes from `src` into the region at byte `offset`.
///
/// # Safety
/// `mr` is NULL or live; `src` is NULL or points to `len` readable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_mr_write(
    mr: *mut mrc_mr,
    offset: u64,
    src: *const c_void,
    len: usize,
) -> c_int {
    guard(|| {
        // SAFETY: forwarded caller contract.
        let m = unsafe { obj(mr, "mr") }?;
        let at = range(m, offset, len)?;
        if len == 0 {
            return Ok(MRC_OK);
        }
        if src.is_null() {
            return Err(invalid("src is NULL"));
        }
        // SAFETY: the caller gives `len` readable bytes at `src`, which we only read here.
        let bytes = unsafe { core::slice::from_raw_parts(src.cast::<u8>(), len) };
        m.region.write(at, bytes);
        Ok(MRC_OK)
    })
}

/// Copies `len` bytes of the region at byte `offset` into `dst`.
///
/// # Safety
/// `mr` is NULL or live; `dst` is NULL or points to `len` writable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_mr_read(
    mr: *mut mrc_mr,
    offset: u64,
    dst: *mut c_void,
    len: usize,
) -> c_int {
    guard(|| {
        // SAFETY: forwarded caller contract.
        let m = unsafe { obj(mr, "mr") }?;
        let at = range(m, offset, len)?;
        if len == 0 {
            return Ok(MRC_OK);
        }
        if dst.is_null() {
            return Err(invalid("dst is NULL"));
        }
        // SAFETY: the caller gives `len` writable bytes at `dst`, not aliased during the call.
        let bytes = unsafe { core::slice::from_raw_parts_mut(dst.cast::<u8>(), len) };
        m.region.read(at, bytes);
        Ok(MRC_OK)
    })
}

/// Deregisters a region and frees its memory.
///
/// # Safety
/// `mr` is NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_dereg_mr(mr: *mut mrc_mr) -> c_int {
    guard(|| {
        // SAFETY: forwarded caller contract.
        let m = unsafe { obj(mr, "mr") }?;
        m.handle.dereg_mr(m.attr.lkey)?;
        // SAFETY: as above; not used again.
        drop(unsafe { take(mr, "mr") }?);
        Ok(MRC_OK)
    })
}

/// Creates a completion queue of at least `cqe` entries.
///
/// # Safety
/// `ctx` is NULL or a live context.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_create_cq(ctx: *mut mrc_context, cqe: c_int) -> *mut mrc_cq {
    guard_new(|| {
        // SAFETY: forwarded caller contract.
        let c = unsafe { obj(ctx, "context") }?;
        let depth = u32::try_from(cqe).map_err(|_| invalid("cqe < 0"))?;
        let cq = c.handle.create_cq(depth.max(1))?;
        Ok(mrc_cq {
            handle: c.handle.clone(),
            cq,
            buf: Vec::new(),
        })
    })
}

/// Destroys a completion queue no QP uses.
///
/// # Safety
/// `cq` is NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_destroy_cq(cq: *mut mrc_cq) -> c_int {
    guard(|| {
        // SAFETY: forwarded caller contract.
        let q = unsafe { obj(cq, "cq") }?;
        q.handle.destroy_cq(q.cq)?;
        // SAFETY: as above; not used again.
        drop(unsafe { take(cq, "cq") }?);
        Ok(MRC_OK)
    })
}

fn wc_to_c(wc: &WorkCompletion) -> mrc_wc {
    let status = match wc.status {
        WcStatus::Success => MRC_WC_SUCCESS,
        WcStatus::LocalLengthError => MRC_WC_LOC_LEN_ERR,
        WcStatus::LocalProtectionError => MRC_WC_LOC_PROT_ERR,
        WcStatus::WrFlushError => MRC_WC_WR_FLUSH_ERR,
        WcStatus::RemoteAccessError => MRC_WC_REM_ACCESS_ERR,
        WcStatus::RemoteOperationalError => MRC_WC_REM_OP_ERR,
        WcStatus::RetryExceeded => MRC_WC_RETRY_EXC_ERR,
        WcStatus::RemoteInvalidRequest => MRC_WC_REM_INV_REQ_ERR,
    };
    mrc_wc {
        wr_id: wc.wr_id,
        status,
        opcode: match wc.opcode {
            WcOpcode::RdmaWrite => MRC_WC_RDMA_WRITE,
            WcOpcode::RecvRdmaWithImm => MRC_WC_RECV_RDMA_WITH_IMM,
        },
        qp_num: wc.qpn.0,
        byte_len: wc.byte_len,
        imm_data: wc.imm_data.unwrap_or(0),
        wc_flags: if wc.imm_data.is_some() {
            MRC_WC_WITH_IMM
        } else {
            0
        },
    }
}

/// Moves up to `num_entries` completions into `wc[]`; returns how many, or a negative code.
///
/// # Safety
/// `cq` is NULL or live; `wc` is NULL or points to `num_entries` writable entries.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_poll_cq(
    cq: *mut mrc_cq,
    num_entries: c_int,
    wc: *mut mrc_wc,
) -> c_int {
    guard(|| {
        // SAFETY: forwarded caller contract.
        let q = unsafe { obj(cq, "cq") }?;
        let n = usize::try_from(num_entries).map_err(|_| invalid("num_entries < 0"))?;
        if n == 0 {
            return Ok(0);
        }
        if wc.is_null() {
            return Err(invalid("wc is NULL"));
        }
        q.buf.resize(n, WorkCompletion::EMPTY);
        let got = q.handle.poll_cq(q.cq, &mut q.buf[..n])?;
        // SAFETY: the caller gives `num_entries` writable entries at `wc`; got <= n.
        let out = unsafe { core::slice::from_raw_parts_mut(wc, got) };
        for (o, w) in out.iter_mut().zip(&q.buf[..got]) {
            *o = wc_to_c(w);
        }
        Ok(got as c_int)
    })
}

/// Creates a QP (RESET) in a protection domain.
///
/// # Safety
/// `pd` is NULL or live; `attr` is NULL or readable, its CQs NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_create_qp(
    pd: *mut mrc_pd,
    attr: *mut mrc_qp_init_attr,
) -> *mut mrc_qp {
    guard_new(|| {
        // SAFETY: forwarded caller contract.
        let p = unsafe { obj(pd, "pd") }?;
        // SAFETY: forwarded caller contract.
        let a = unsafe { obj(attr, "attr") }?;
        // SAFETY: forwarded caller contract.
        let send_cq = unsafe { obj(a.send_cq, "send_cq") }?.cq;
        // SAFETY: forwarded caller contract.
        let recv_cq = unsafe { obj(a.recv_cq, "recv_cq") }?.cq;
        let qpn = p.handle.create_qp(&QpInitAttr {
            pd: p.pd,
            send_cq,
            recv_cq,
            cap: QpCap {
                max_send_wr: a.cap.max_send_wr,
                max_recv_wr: a.cap.max_recv_wr,
                max_send_sge: a.cap.max_send_sge,
            },
            sq_sig_all: a.sq_sig_all != 0,
        })?;
        Ok(mrc_qp {
            handle: p.handle.clone(),
            qpn,
        })
    })
}

/// The QP's number (what the peer puts in `dest_qp_num`).
///
/// # Safety
/// `qp` is NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_get_qpn(qp: *mut mrc_qp) -> u32 {
    // SAFETY: forwarded caller contract.
    catch(|| unsafe { obj(qp, "qp") }.map(|q| q.qpn.0)).unwrap_or_default()
}

fn catch<T>(f: impl FnOnce() -> Result<T, Fail>) -> Option<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
        .ok()
        .and_then(Result::ok)
}

/// Moves a QP to `attr->qp_state` with the attributes of that transition; fields whose
/// `attr_mask` bit is clear take the engine's defaults.
///
/// # Safety
/// `qp` is NULL or live; `attr` is NULL or readable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_modify_qp(
    qp: *mut mrc_qp,
    attr: *mut mrc_qp_attr,
    attr_mask: c_int,
) -> c_int {
    guard(|| {
        // SAFETY: forwarded caller contract.
        let q = unsafe { obj(qp, "qp") }?;
        // SAFETY: forwarded caller contract.
        let a = *unsafe { obj(attr, "attr") }?;
        if attr_mask & MRC_QP_STATE == 0 {
            return Err(invalid("attr_mask needs MRC_QP_STATE"));
        }
        let has = |bit: c_int| attr_mask & bit != 0;
        let t = match a.qp_state {
            MRC_QPS_INIT => {
                let mut i = InitAttr::default();
                if has(MRC_QP_EV_PROFILE) {
                    i.ev_profile = a.ev_profile;
                }
                if has(MRC_QP_CC_PROFILE) {
                    i.cc_profile = a.cc_profile;
                }
                QpTransition::Init(i)
            }
            MRC_QPS_RTR => {
                if !has(MRC_QP_AV) || !has(MRC_QP_DEST_QPN) {
                    return Err(invalid("RTR needs MRC_QP_AV and MRC_QP_DEST_QPN"));
                }
                let remote = RemoteNic {
                    addr: Ipv6Addr::from(a.dest_gid),
                    host: None,
                };
                let psn = if has(MRC_QP_RQ_PSN) { a.rq_psn } else { 0 };
                let mut r = RtrAttr::new(remote, Qpn(a.dest_qp_num), psn);
                if has(MRC_QP_MPR) {
                    r.mpr = a.mpr;
                }
                if has(MRC_QP_WIMM_LIMIT) {
                    r.wimm_limit = a.wimm_limit;
                }
                if has(MRC_QP_DYNAMIC_MPR) {
                    r.dynamic_mpr = a.dynamic_mpr != 0;
                }
                QpTransition::Rtr(r)
            }
            MRC_QPS_RTS => {
                let psn = if has(MRC_QP_SQ_PSN) { a.sq_psn } else { 0 };
                let mut r = RtsAttr::new(psn);
                if has(MRC_QP_MPR) {
                    r.mpr = a.mpr;
                }
                if has(MRC_QP_WIMM_LIMIT) {
                    r.wimm_limit = a.wimm_limit;
                }
                if has(MRC_QP_TIMEOUT) {
                    r.timeout = a.timeout;
                }
                if has(MRC_QP_RETRY_CNT) {
                    r.retry_linear = a.retry_cnt_linear;
                    r.retry_exp = a.retry_cnt_exp;
                }
                if has(MRC_QP_DYNAMIC_MPR) {
                    r.dynamic_mpr = a.dynamic_mpr != 0;
                }
                QpTransition::Rts(r)
            }
            MRC_QPS_ERR => QpTransition::Error,
            MRC_QPS_RESET => QpTransition::Reset,
            _ => return Err(invalid("unknown qp_state")),
        };
        q.handle.modify_qp(q.qpn, t)?;
        Ok(MRC_OK)
    })
}

/// Dynamic MPR (brief §3.5): the MPR, in PSNs, the QP's responder accepts and advertises in
/// its SACKs from now on: 128 up to its RTR MPR, the QP in RTR or RTS with dynamic MPR set at
/// RTR.
///
/// # Safety
/// `qp` is NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_set_qp_mpr(qp: *mut mrc_qp, psns: u32) -> c_int {
    guard(|| {
        // SAFETY: forwarded caller contract.
        let q = unsafe { obj(qp, "qp") }?;
        q.handle.set_qp_mpr(q.qpn, psns)?;
        Ok(MRC_OK)
    })
}

/// Destroys a QP.
///
/// # Safety
/// `qp` is NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_destroy_qp(qp: *mut mrc_qp) -> c_int {
    guard(|| {
        // SAFETY: forwarded caller contract.
        let q = unsafe { obj(qp, "qp") }?;
        q.handle.destroy_qp(q.qpn)?;
        // SAFETY: as above; not used again.
        drop(unsafe { take(qp, "qp") }?);
        Ok(MRC_OK)
    })
}

/// Posts a list of Writes / Write-with-Immediates; on failure `*bad_wr` names the first not
/// posted.
///
/// # Safety
/// `qp` is NULL or live; `wr` is NULL or a readable list whose `sg_list`s hold `num_sge`
/// readable entries; `bad_wr` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_post_send(
    qp: *mut mrc_qp,
    wr: *mut mrc_send_wr,
    bad_wr: *mut *mut mrc_send_wr,
) -> c_int {
    guard(|| {
        // SAFETY: forwarded caller contract.
        let q = unsafe { obj(qp, "qp") }?;
        let mut cur = wr;
        let mut sges = Vec::new();
        while !cur.is_null() {
            // SAFETY: non-null list element the caller gives as readable.
            let w = unsafe { &*cur };
            let r = (|| {
                let n = usize::try_from(w.num_sge).map_err(|_| invalid("num_sge < 0"))?;
                sges.clear();
                if n > 0 {
                    if w.sg_list.is_null() {
                        return Err(invalid("sg_list is NULL"));
                    }
                    // SAFETY: the caller gives `num_sge` readable entries at `sg_list`.
                    let list = unsafe { core::slice::from_raw_parts(w.sg_list, n) };
                    sges.extend(list.iter().map(|s| Sge {
                        addr: s.addr,
                        length: s.length,
                        lkey: s.lkey,
                    }));
                }
                let opcode = match w.opcode {
                    MRC_WR_RDMA_WRITE => SendOpcode::Write,
                    MRC_WR_RDMA_WRITE_WITH_IMM => SendOpcode::WriteWithImm(w.imm_data),
                    _ => {
                        return Err(invalid(
                            "opcode: MRC carries Write and Write-with-Immediate only",
                        ));
                    }
                };
                q.handle.post_send(
                    q.qpn,
                    &SendWr {
                        wr_id: w.wr_id,
                        opcode,
                        sg_list: &sges,
                        remote_addr: w.remote_addr,
                        rkey: w.rkey,
                        signaled: w.send_flags & MRC_SEND_SIGNALED != 0,
                    },
                )?;
                Ok(())
            })();
            if let Err(e) = r {
                if !bad_wr.is_null() {
                    // SAFETY: the caller gives a writable `bad_wr`.
                    unsafe { *bad_wr = cur };
                }
                return Err(e);
            }
            cur = w.next;
        }
        Ok(MRC_OK)
    })
}

/// Posts a list of receives (each consumed by one incoming Write-with-Immediate).
///
/// # Safety
/// `qp` is NULL or live; `wr` is NULL or a readable list; `bad_wr` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_post_recv(
    qp: *mut mrc_qp,
    wr: *mut mrc_recv_wr,
    bad_wr: *mut *mut mrc_recv_wr,
) -> c_int {
    guard(|| {
        // SAFETY: forwarded caller contract.
        let q = unsafe { obj(qp, "qp") }?;
        let mut cur = wr;
        while !cur.is_null() {
            // SAFETY: non-null list element the caller gives as readable.
            let w = unsafe { &*cur };
            if let Err(e) = q.handle.post_recv(q.qpn, &RecvWr { wr_id: w.wr_id }) {
                if !bad_wr.is_null() {
                    // SAFETY: the caller gives a writable `bad_wr`.
                    unsafe { *bad_wr = cur };
                }
                return Err(e.into());
            }
            cur = w.next;
        }
        Ok(MRC_OK)
    })
}
