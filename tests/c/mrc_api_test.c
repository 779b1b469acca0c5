/*
 * mrc_api_test: every function of include/mrc.h, and the libibverbs subset of mrc-rs's
 * software device, on its success and its error paths, with the return conventions the
 * OCP MRC API documents (int: 0, or -1 with errno; pointer: NULL with errno).
 *
 * One process on the default in-memory device: mrc_mem0 and mrc_mem1 are two hosts of one
 * in-process fabric, so a QP on each can be connected and data moved between them. Written
 * for mrc-rs from include/mrc.h and docs/c-api.md. SPDX-License-Identifier: Apache-2.0 OR MIT
 *
 * Output: one line per group of checks, then "mrc_api_test: ok (N checks)". The first
 * failed check prints file:line, the check, what the call returned and errno, and the
 * program exits 1. MRC_API_TEST_CONTINUE=1 keeps going past failed checks (not past a
 * failed object creation that later checks need) and exits 1 at the end.
 *
 * Build (as capi/tests/api_test.rs does):
 *   cc -std=gnu11 -Wall -Wextra -Werror -I include tests/c/mrc_api_test.c \
 *      -L target/debug -Wl,-rpath,target/debug target/debug/lib_mrc.so -libverbs -pthread
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mrc.h"

#define CHECK_PROG "mrc_api_test"
#include "check.h"


/* ---------------------------------------------------------------------------------------
 * The fixture: two hosts of the in-memory fabric, QP pairs between them
 * ------------------------------------------------------------------------------------- */

#define BUF_LEN (1u << 20) /* each host's main registered buffer */
#define BUF2_LEN 4096u     /* a second, separately registered buffer */
#define SRC 0u             /* where a host's outgoing data sits in its buffer */
#define DST (256u << 10)   /* where incoming data lands */
#define CQE 256
#define SEND_WR 64
#define RECV_WR 64
#define SEND_SGE 4

struct host {
	const char *name;
	struct ibv_device *dev;
	struct ibv_context *vctx;
	struct ibv_device_attr dattr;
	struct ibv_port_attr port;
	union ibv_gid gid;
	struct mrc_device_attr mattr;
	struct mrc_context *mctx;
	struct ibv_pd *pd;
	uint8_t *buf, *buf2;
	struct ibv_mr *mr, *mr2;
	struct mrc_comp_channel *chan;
	int chan_fd;
	struct mrc_cq *send_cq, *recv_cq; /* recv_cq is on chan */
	int send_tag, recv_tag;           /* their cq_context points here */
};

/* A connected QP pair: qp[0] on mrc_mem0, qp[1] on mrc_mem1. */
struct pair {
	struct mrc_qp *qp[2];
	uint32_t qpn[2];
	int tag[2]; /* qp_context */
};

static struct host h[2];
static struct ibv_device **dev_list;
static struct mrc_qp_hint *hint0, *hint1;
static struct pair p1; /* the main pair: data, errors of post, events */
static struct pair p2; /* sq_sig_all, a remote access error, flushes, the async event */
static struct pair p3; /* a local (lkey) error */
static int async_stuck; /* a thread is blocked in mrc_get_async_event(h[0].mctx) */

/* A connection's first PSN, sent by side s. */
static uint32_t psn_of(int s)
{
	return s ? 0x00a5a5 : 0x123456;
}

static void fill(uint8_t *p, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)(seed * 131u + i * 7u + (i >> 8) + (i >> 16));
}

/* Whether p holds fill(seed) over len; the first different offset in *at. */
static int same(const uint8_t *p, size_t len, unsigned seed, size_t *at)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != (uint8_t)(seed * 131u + i * 7u + (i >> 8) + (i >> 16))) {
			*at = i;
			return 0;
		}
	return 1;
}

#define CHECK_BYTES(p, len, seed)                                                    \
	({                                                                           \
		size_t at_ = 0;                                                      \
		char seen_[96];                                                      \
		int ok_ = same((p), (len), (seed), &at_);                            \
		snprintf(seen_, sizeof seen_, "first difference at byte %zu of %zu", at_, \
			 (size_t)(len));                                             \
		CHECK_SEEN(ok_, seen_);                                              \
	})

/* Polls cq until n completions are in wc[] or WAIT_MS passed: how many (-1: poll failed). */
static int wait_wcs(struct mrc_cq *cq, struct ibv_wc *wc, int n)
{
	long long deadline = now_ms() + WAIT_MS;
	int got = 0;
	while (got < n) {
		int r = mrc_poll_cq(cq, n - got, wc + got);
		if (r < 0)
			return -1;
		got += r;
		if (got < n) {
			if (now_ms() > deadline)
				break;
			usleep(50);
		}
	}
	return got;
}

#define WAIT_WCS(cq, wc, n) CHECK_EQ(wait_wcs((cq), (wc), (n)), (n))

/* No completion arrives on cq within QUIET_MS. */
#define NO_WC(cq)                                                                    \
	({                                                                           \
		struct ibv_wc w_;                                                    \
		char seen_[128] = "";                                                \
		int n_ = 0;                                                          \
		long long until_ = now_ms() + QUIET_MS;                              \
		do {                                                                 \
			n_ = mrc_poll_cq((cq), 1, &w_);                              \
		} while (n_ == 0 && now_ms() < until_);                              \
		if (n_ > 0)                                                          \
			snprintf(seen_, sizeof seen_,                                \
				 "a completion: wr_id %#llx status %d (%s) qp_num %u",  \
				 (unsigned long long)w_.wr_id, (int)w_.status,          \
				 ibv_wc_status_str(w_.status), w_.qp_num);               \
		else if (n_ < 0)                                                     \
			snprintf(seen_, sizeof seen_, "mrc_poll_cq returned %d, errno %d", \
				 n_, errno);                                         \
		CHECK_SEEN(n_ == 0, seen_);                                          \
	})

/* A completion's fields; opcode < 0: not checked (undefined for a failed work request). */
#define CHECK_WC(wc, id, st, op, qpn)                                                \
	({                                                                           \
		CHECK_EQ((wc).wr_id, (id));                                          \
		CHECK_EQ((wc).status, (st));                                         \
		if ((int)(op) >= 0)                                                  \
			CHECK_EQ((wc).opcode, (op));                                 \
		CHECK_EQ((wc).qp_num, (qpn));                                        \
	})

static struct ibv_sge sge_of(struct ibv_mr *mr, const void *addr, uint32_t len)
{
	struct ibv_sge s = {.addr = (uintptr_t)addr, .length = len, .lkey = mr->lkey};
	return s;
}

/* An RDMA Write (imm_host == 0 and op IBV_WR_RDMA_WRITE) or Write-with-Immediate to the
 * peer's buffer at offset dst. */
static struct ibv_send_wr write_wr(uint64_t wr_id, struct ibv_sge *sge, int num_sge,
				   enum ibv_wr_opcode op, const struct host *peer,
				   size_t dst, unsigned flags, uint32_t imm_host)
{
	struct ibv_send_wr wr;
	memset(&wr, 0, sizeof wr);
	wr.wr_id = wr_id;
	wr.sg_list = sge;
	wr.num_sge = num_sge;
	wr.opcode = op;
	wr.send_flags = flags;
	wr.imm_data = htonl(imm_host);
	wr.wr.rdma.remote_addr = (uintptr_t)(peer->buf + dst);
	wr.wr.rdma.rkey = peer->mr->rkey;
	return wr;
}

static int post_recv_id(struct mrc_qp *qp, uint64_t wr_id)
{
	struct ibv_recv_wr wr, *bad = NULL;
	memset(&wr, 0, sizeof wr);
	wr.wr_id = wr_id;
	return mrc_post_recv(qp, &wr, &bad);
}

static enum ibv_qp_state state_of(struct mrc_qp *qp)
{
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof a);
	a.qp_state = (enum ibv_qp_state)-1;
	OK(mrc_query_qp(qp, &a, IBV_QP_STATE, NULL, 0, NULL));
	return a.qp_state;
}

#define CHECK_STATE(qp, st) CHECK_EQ(state_of(qp), (st))

static struct mrc_qp_init_attr qp_init_attr(int side, int sq_sig_all, void *qp_context)
{
	struct mrc_qp_init_attr a;
	memset(&a, 0, sizeof a);
	a.qp_context = qp_context;
	a.send_cq = h[side].send_cq;
	a.recv_cq = h[side].recv_cq;
	a.cap.max_send_wr = SEND_WR;
	a.cap.max_recv_wr = RECV_WR;
	a.cap.max_send_sge = SEND_SGE;
	a.cap.max_recv_sge = 1;
	a.sq_sig_all = sq_sig_all;
	a.pd = h[side].pd;
	a.protocol_version = MRC_PROTOCOL_VERSION_0;
	return a;
}

static struct ibv_qp_attr init_vattr(int *mask)
{
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = 0;
	a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	*mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_ACCESS_FLAGS;
	return a;
}

/* INIT -> RTR of side s's QP towards the peer's QP dest_qpn. */
static struct ibv_qp_attr rtr_vattr(int s, uint32_t dest_qpn, int *mask)
{
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = h[s].port.active_mtu;
	a.dest_qp_num = dest_qpn;
	a.rq_psn = psn_of(1 - s);
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = h[1 - s].gid;
	a.ah_attr.grh.sgid_index = 0;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = 1;
	*mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
	return a;
}

static struct ibv_qp_attr rts_vattr(int s, int *mask)
{
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = psn_of(s);
	*mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
	return a;
}

/* Creates both QPs of p and moves them RESET -> INIT -> RTR -> RTS, with the MRC attributes
 * rts/rts_mask at RTS (NULL/0: defaults). */
static void connect_pair(struct pair *p, int sq_sig_all, struct mrc_qp_attr *rts,
			 int rts_mask)
{
	for (int s = 0; s < 2; s++) {
		struct mrc_qp_init_attr ia = qp_init_attr(s, sq_sig_all, &p->tag[s]);
		p->qp[s] = MADE(mrc_create_qp(h[s].mctx, &ia));
		OK(mrc_get_qpn(p->qp[s], &p->qpn[s]));
	}
	for (int s = 0; s < 2; s++) {
		int mask;
		struct ibv_qp_attr a = init_vattr(&mask);
		OK(mrc_modify_qp(p->qp[s], &a, mask, NULL, 0));
	}
	for (int s = 0; s < 2; s++) {
		int mask;
		struct ibv_qp_attr a = rtr_vattr(s, p->qpn[1 - s], &mask);
		OK(mrc_modify_qp(p->qp[s], &a, mask, NULL, 0));
	}
	for (int s = 0; s < 2; s++) {
		int mask;
		struct ibv_qp_attr a = rts_vattr(s, &mask);
		OK(mrc_modify_qp(p->qp[s], &a, mask, rts, rts ? rts_mask : 0));
		CHECK_STATE(p->qp[s], IBV_QPS_RTS);
	}
}

/* Side s Writes (or Writes-with-Immediate) len bytes of fill(seed) from its buffer at SRC
 * to the peer's at dst, signaled, and waits for its own completion. */
static void write_and_wait(struct pair *p, int s, size_t dst, uint32_t len, unsigned seed,
			   int with_imm, uint32_t imm_host, uint64_t wr_id)
{
	struct ibv_sge sge = sge_of(h[s].mr, h[s].buf + SRC, len);
	struct ibv_send_wr wr = write_wr(wr_id, &sge, len ? 1 : 0,
					 with_imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE,
					 &h[1 - s], dst, IBV_SEND_SIGNALED, imm_host);
	struct ibv_send_wr *bad = NULL;
	struct ibv_wc wc;
	fill(h[s].buf + SRC, len, seed);
	OK(mrc_post_send(p->qp[s], &wr, &bad));
	memset(&wc, 0, sizeof wc);
	if (WAIT_WCS(h[s].send_cq, &wc, 1))
		CHECK_WC(wc, wr_id, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, p->qpn[s]);
}

/* The receive completion of a Write-with-Immediate from side s (len bytes, imm_host) on the
 * peer, and the bytes it placed. */
static void imm_arrived(struct pair *p, int s, size_t dst, uint32_t len, unsigned seed,
			uint32_t imm_host, uint64_t recv_wr_id)
{
	struct ibv_wc wc;
	memset(&wc, 0, sizeof wc);
	if (WAIT_WCS(h[1 - s].recv_cq, &wc, 1)) {
		CHECK_WC(wc, recv_wr_id, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM, p->qpn[1 - s]);
		CHECK(wc.wc_flags & IBV_WC_WITH_IMM);
		CHECK_EQ(wc.imm_data, htonl(imm_host));
		CHECK_EQ(wc.byte_len, len);
	}
	CHECK_BYTES(h[1 - s].buf + dst, len, seed);
}

/* Both: a Write (with_imm 0) or a Write-with-Immediate whose receive was posted. */
static void transfer(struct pair *p, int s, size_t dst, uint32_t len, unsigned seed,
		     int with_imm, uint32_t imm_host, uint64_t wr_id, uint64_t recv_wr_id)
{
	write_and_wait(p, s, dst, len, seed, with_imm, imm_host, wr_id);
	if (with_imm)
		imm_arrived(p, s, dst, len, seed, imm_host, recv_wr_id);
	else
		CHECK_BYTES(h[1 - s].buf + dst, len, seed);
}

/* ---------------------------------------------------------------------------------------
 * Groups
 * ------------------------------------------------------------------------------------- */

static void versions(void)
{
	uint32_t cur = 0, last = 0xdeadbeef, vcur = 0, vlast = 0xdeadbeef;

	begin("versions");
	mrc_query_version(&cur, &last, &vcur, &vlast);
	CHECK_EQ(cur, MRC_API_CURRENT_VERSION);
	CHECK_EQ(last, MRC_API_LAST_SUPPORTED_VERSION);
	CHECK_EQ(vcur, MRC_VENDOR_API_CURRENT_VERSION);
	CHECK_EQ(vlast, MRC_VENDOR_API_LAST_SUPPORTED_VERSION);
	CHECK(last <= cur);
	CHECK(vlast <= vcur);
	CHECK_EQ(cur, MRC_API_VER(1, 0, 1));
	end();
}

static void verbs_device(void)
{
	int n = -1;

	begin("ibv device");
	dev_list = MADE(ibv_get_device_list(&n));
	CHECK(n >= 2);
	if (n >= 0)
		CHECK_PTR_EQ(dev_list[n], NULL);
	for (int i = 0; i < n; i++) {
		const char *name = ibv_get_device_name(dev_list[i]);
		CHECK(name != NULL);
		if (name && strcmp(name, "mrc_mem0") == 0)
			h[0].dev = dev_list[i];
		if (name && strcmp(name, "mrc_mem1") == 0)
			h[1].dev = dev_list[i];
	}
	h[0].name = "mrc_mem0";
	h[1].name = "mrc_mem1";
	check_ret(h[0].dev && h[1].dev, 1, __FILE__, __LINE__,
		  "mrc_mem0 and mrc_mem1 are in the device list", n, 0, 0);

	/* Without the count argument too. */
	struct ibv_device **again = MADE(ibv_get_device_list(NULL));
	ibv_free_device_list(again);

	__be64 guid0 = ibv_get_device_guid(h[0].dev), guid1 = ibv_get_device_guid(h[1].dev);
	CHECK(guid0 != 0);
	CHECK(guid1 != 0);
	CHECK(guid0 != guid1);

	for (int s = 0; s < 2; s++) {
		struct host *x = &h[s];
		x->vctx = MADE(ibv_open_device(x->dev));
		CHECK_PTR_EQ(x->vctx->device, x->dev);
		NULLS(ibv_open_device(x->dev), EBUSY); /* one open context per device */

		memset(&x->dattr, 0, sizeof x->dattr);
		OK(ibv_query_device(x->vctx, &x->dattr));
		CHECK_EQ(x->dattr.node_guid, ibv_get_device_guid(x->dev));
		CHECK_EQ(x->dattr.phys_port_cnt, 2); /* MRC_MEM_PLANES defaults to 2 */
		CHECK(x->dattr.max_qp > 0);
		CHECK(x->dattr.max_qp_wr >= SEND_WR);
		CHECK(x->dattr.max_sge >= SEND_SGE);
		CHECK(x->dattr.max_cq > 0);
		CHECK(x->dattr.max_cqe >= CQE);
		CHECK(x->dattr.max_mr > 0);
		CHECK(x->dattr.max_pd > 0);
		CHECK(x->dattr.max_mr_size >= BUF_LEN);

		for (int port = 1; port <= x->dattr.phys_port_cnt; port++) {
			struct ibv_port_attr pa;
			union ibv_gid g;
			memset(&pa, 0, sizeof pa);
			OK(ibv_query_port(x->vctx, (uint8_t)port, &pa));
			CHECK_EQ(pa.state, IBV_PORT_ACTIVE);
			CHECK_EQ(pa.link_layer, IBV_LINK_LAYER_ETHERNET);
			CHECK(pa.active_mtu >= IBV_MTU_256 && pa.active_mtu <= IBV_MTU_4096);
			CHECK(pa.max_mtu >= pa.active_mtu && pa.max_mtu <= IBV_MTU_4096);
			CHECK(pa.gid_tbl_len >= 1);
			if (port == 1)
				x->port = pa;
			memset(&g, 0, sizeof g);
			OK(ibv_query_gid(x->vctx, (uint8_t)port, 0, &g));
			if (port == 1)
				x->gid = g;
			/* The NIC's address, the same on every port. */
			CHECK(memcmp(&g, &x->gid, sizeof g) == 0);
		}
		/* Every index of the table holds that address (RoCE NICs list several). */
		for (int i = 1; i < x->port.gid_tbl_len && i < 16; i++) {
			union ibv_gid g;
			memset(&g, 0, sizeof g);
			OK(ibv_query_gid(x->vctx, 1, i, &g));
			CHECK(memcmp(&g, &x->gid, sizeof g) == 0);
		}
		static const union ibv_gid zero_gid;
		CHECK(memcmp(&x->gid, &zero_gid, sizeof zero_gid) != 0);

		struct ibv_port_attr pa;
		union ibv_gid g;
		IBV_FAILS(ibv_query_port(x->vctx, 0, &pa), EINVAL);
		IBV_FAILS(ibv_query_port(x->vctx, (uint8_t)(x->dattr.phys_port_cnt + 1), &pa),
			  EINVAL);
		FAILS(ibv_query_gid(x->vctx, 0, 0, &g), EINVAL);
		FAILS(ibv_query_gid(x->vctx, 1, x->port.gid_tbl_len, &g), EINVAL);
	}
	CHECK(memcmp(&h[0].gid, &h[1].gid, sizeof h[0].gid) != 0);
	end();
}

static void verbs_memory(void)
{
	begin("ibv pd and mr");
	for (int s = 0; s < 2; s++) {
		struct host *x = &h[s];
		x->pd = MADE(ibv_alloc_pd(x->vctx));
		CHECK_PTR_EQ(x->pd->context, x->vctx);

		void *b = NULL;
		check_ret(posix_memalign(&b, 4096, BUF_LEN) == 0, 1, __FILE__, __LINE__,
			  "posix_memalign", 0, 0, errno);
		x->buf = b;
		check_ret(posix_memalign(&b, 4096, BUF2_LEN) == 0, 1, __FILE__, __LINE__,
			  "posix_memalign", 0, 0, errno);
		x->buf2 = b;
		memset(x->buf, 0, BUF_LEN);
		memset(x->buf2, 0, BUF2_LEN);

		int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
		x->mr = MADE(ibv_reg_mr(x->pd, x->buf, BUF_LEN, access));
		CHECK_PTR_EQ(x->mr->addr, x->buf);
		CHECK_EQ(x->mr->length, BUF_LEN);
		CHECK_PTR_EQ(x->mr->pd, x->pd);
		CHECK_PTR_EQ(x->mr->context, x->vctx);
		x->mr2 = MADE(ibv_reg_mr(x->pd, x->buf2, BUF2_LEN, access));
		CHECK(x->mr2->lkey != x->mr->lkey);
		CHECK(x->mr2->rkey != x->mr->rkey);

		/* Refused registrations. */
		NULLS(ibv_reg_mr(x->pd, NULL, 4096, IBV_ACCESS_LOCAL_WRITE), EINVAL);
		NULLS(ibv_reg_mr(x->pd, x->buf, 0, IBV_ACCESS_LOCAL_WRITE), EINVAL);
		/* Remote write needs local write. */
		NULLS(ibv_reg_mr(x->pd, x->buf, 4096, IBV_ACCESS_REMOTE_WRITE), EINVAL);
		/* MRC carries Writes only: no remote reads or atomics. */
		NULLS2(ibv_reg_mr(x->pd, x->buf, 4096,
				  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ),
		       EOPNOTSUPP, EINVAL);
		NULLS2(ibv_reg_mr(x->pd, x->buf, 4096,
				  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC),
		       EOPNOTSUPP, EINVAL);

		/* An optional access flag (rdma-core routes this through ibv_reg_mr_iova2). */
		struct ibv_mr *m = MADE(ibv_reg_mr(x->pd, x->buf, 4096,
						   IBV_ACCESS_LOCAL_WRITE |
							   IBV_ACCESS_RELAXED_ORDERING));
		OK(ibv_dereg_mr(m));
		m = MADE(ibv_reg_mr_iova(x->pd, x->buf + 4096, 8192, (uintptr_t)(x->buf + 4096),
					 IBV_ACCESS_LOCAL_WRITE));
		CHECK_PTR_EQ(m->addr, x->buf + 4096);
		CHECK_EQ(m->length, 8192);
		OK(ibv_dereg_mr(m));
		m = MADE(ibv_reg_mr_iova2(x->pd, x->buf, 4096, (uintptr_t)x->buf,
					  IBV_ACCESS_LOCAL_WRITE));
		OK(ibv_dereg_mr(m));

		/* A PD with a memory region cannot go; a PD without can. */
		IBV_FAILS(ibv_dealloc_pd(x->pd), EBUSY);
		struct ibv_pd *pd = MADE(ibv_alloc_pd(x->vctx));
		CHECK(pd != x->pd);
		m = MADE(ibv_reg_mr(pd, x->buf2, 64, IBV_ACCESS_LOCAL_WRITE));
		IBV_FAILS(ibv_dealloc_pd(pd), EBUSY);
		OK(ibv_dereg_mr(m));
		OK(ibv_dealloc_pd(pd));
	}

	const char *ok = ibv_wc_status_str(IBV_WC_SUCCESS);
	const char *rem = ibv_wc_status_str(IBV_WC_REM_ACCESS_ERR);
	const char *flush = ibv_wc_status_str(IBV_WC_WR_FLUSH_ERR);
	const char *unknown = ibv_wc_status_str((enum ibv_wc_status)999);
	CHECK(ok && strcmp(ok, "success") == 0);
	CHECK(rem && *rem && strcmp(rem, ok) != 0);
	CHECK(flush && *flush && strcmp(flush, ok) != 0 && strcmp(flush, rem) != 0);
	CHECK(unknown && *unknown);
	end();
}

/* A verbs context that is no mrc-rs device (zeroed, with a device of another name). */
static union {
	struct ibv_context ctx;
	uint8_t bytes[4096];
} fake_ctx;
static union {
	struct ibv_device dev;
	uint8_t bytes[4096];
} fake_dev;

static void query_device(void)
{
	begin("mrc_query_device");
	for (int s = 0; s < 2; s++) {
		struct mrc_device_attr a, b;
		int sup = 0;
		memset(&a, 0, sizeof a);
		OK(mrc_query_device(h[s].vctx, &a, &sup));
		CHECK(sup != 0);
		CHECK(a.mrc_protocol_version & MRC_PROTOCOL_VERSION_1);
		CHECK(a.wimm_attr.max_wimm > 0);
		CHECK(a.wimm_attr.max_wimm_dest > 0);
		CHECK(a.mpr_attr.max_mpr > 0);
		CHECK(a.mpr_attr.mpr_resolution > 0);
		CHECK(a.mpr_attr.mpr_resolution <= a.mpr_attr.max_mpr);
		CHECK(a.qp_attr.max_qp_hint > 0);
		CHECK_EQ(a.cap & ~(uint32_t)(MRC_DEVICE_CAP_TRIM_NACK | MRC_DEVICE_CAP_DYNAMIC_MPR |
					     MRC_DEVICE_CAP_SVC_TIME),
			 0);
		h[s].mattr = a;

		memset(&b, 0, sizeof b);
		sup = 0;
		OK(mrc_query_device_ex(h[s].vctx, NULL, &b, &sup));
		CHECK(sup != 0);
		CHECK(memcmp(&a, &b, sizeof a) == 0);

		FAILS(mrc_query_device(NULL, &a, &sup), EINVAL);
		FAILS(mrc_query_device(h[s].vctx, NULL, &sup), EINVAL);
		FAILS(mrc_query_device(h[s].vctx, &a, NULL), EINVAL);
		FAILS(mrc_query_device_ex(NULL, NULL, &a, &sup), EINVAL);
		FAILS(mrc_query_device_ex(h[s].vctx, NULL, NULL, &sup), EINVAL);
		FAILS(mrc_query_device_ex(h[s].vctx, NULL, &a, NULL), EINVAL);
	}
	CHECK(memcmp(&h[0].mattr, &h[1].mattr, sizeof h[0].mattr) == 0);

	/* Not an MRC device: OCP says *supported = 0; ENODEV is the other honest answer. */
	struct mrc_device_attr a;
	int sup = 1;
	strcpy(fake_dev.dev.name, "notmrc0");
	strcpy(fake_dev.dev.dev_name, "uverbs9");
	fake_ctx.ctx.device = &fake_dev.dev;
	errno = 0;
	int rc = mrc_query_device(&fake_ctx.ctx, &a, &sup);
	int e = errno;
	check_ret((rc == 0 && sup == 0) || (rc == -1 && e == ENODEV), 0, __FILE__, __LINE__,
		  "mrc_query_device(not an mrc-rs device): 0 with *supported == 0, or ENODEV",
		  rc, 0, e);
	end();
}

static void context(void)
{
	struct mrc_context_attr now = {MRC_API_CURRENT_VERSION, MRC_VENDOR_API_CURRENT_VERSION};
	struct mrc_context_attr unsaid = {0, 0};
	struct mrc_context_attr older = {MRC_API_VER(1, 0, 0), MRC_VENDOR_API_CURRENT_VERSION};
	struct mrc_context_attr newer = {MRC_API_VER(2, 0, 0), MRC_VENDOR_API_CURRENT_VERSION};
	struct mrc_context_attr vnewer = {MRC_API_CURRENT_VERSION, MRC_API_VER(2, 0, 0)};

	begin("mrc context");
	NULLS(mrc_create_context(NULL, NULL), EINVAL);
	NULLS(mrc_create_context(NULL, &now), EINVAL);
	NULLS(mrc_create_context(&fake_ctx.ctx, NULL), ENODEV);
	NULLS2(mrc_create_context(h[0].vctx, &newer), EINVAL, EOPNOTSUPP);
	NULLS2(mrc_create_context(h[0].vctx, &vnewer), EINVAL, EOPNOTSUPP);

	h[0].mctx = MADE(mrc_create_context(h[0].vctx, &now));
	h[1].mctx = MADE(mrc_create_context(h[1].vctx, NULL));

	/* More contexts on one verbs context (two libraries of one program). */
	struct mrc_context *c2 = MADE(mrc_create_context(h[0].vctx, &unsaid));
	struct mrc_context *c3 = MADE(mrc_create_context(h[0].vctx, &older));
	CHECK(c2 != h[0].mctx && c3 != c2);
	OK(mrc_destroy_context(c3));

	/* mrc_query_device_ex with the context of that device; not of another. */
	struct mrc_device_attr a;
	int sup = 0;
	memset(&a, 0, sizeof a);
	OK(mrc_query_device_ex(h[0].vctx, h[0].mctx, &a, &sup));
	CHECK(sup != 0);
	CHECK(memcmp(&a, &h[0].mattr, sizeof a) == 0);
	FAILS(mrc_query_device_ex(h[0].vctx, h[1].mctx, &a, &sup), EINVAL);

	/* A context with live objects cannot go: each kind in turn. */
	struct mrc_qp_hint_init_attr hi;
	memset(&hi, 0, sizeof hi);
	hi.attr.num_qps_per_peer = 1;
	hi.attr.num_send_peers = 1;
	hi.attr.num_remote_recv_peers = 1;
	struct mrc_qp_hint *hint = MADE(mrc_create_qp_hint(c2, &hi));
	FAILS(mrc_destroy_context(c2), EBUSY);
	OK(mrc_destroy_qp_hint(hint));

	struct mrc_comp_channel *ch = NULL;
	OK(mrc_create_comp_channel(c2, &ch));
	check_ret(ch != NULL, 1, __FILE__, __LINE__, "a channel", 0, 0, 0);
	FAILS(mrc_destroy_context(c2), EBUSY);
	OK(mrc_destroy_comp_channel(ch));

	struct mrc_cq *cq = MADE(mrc_create_cq(c2, 4, NULL, NULL, 0));
	FAILS(mrc_destroy_context(c2), EBUSY);

	/* A QP on a PD of its own: the PD cannot go while the QP uses it either. */
	struct ibv_pd *pd = MADE(ibv_alloc_pd(h[0].vctx));
	struct mrc_qp_init_attr ia;
	memset(&ia, 0, sizeof ia);
	ia.send_cq = cq;
	ia.recv_cq = cq;
	ia.cap.max_send_wr = 4;
	ia.cap.max_recv_wr = 4;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	ia.pd = pd;
	struct mrc_qp *qp = MADE(mrc_create_qp(c2, &ia));
	FAILS(mrc_destroy_cq(cq), EBUSY);
	FAILS(mrc_destroy_context(c2), EBUSY);
	IBV_FAILS(ibv_dealloc_pd(pd), EBUSY);
	OK(mrc_destroy_qp(qp));
	OK(ibv_dealloc_pd(pd));
	OK(mrc_destroy_cq(cq));
	OK(mrc_destroy_context(c2));

	FAILS(mrc_destroy_context(NULL), EINVAL);
	end();
}

static void channel(void)
{
	struct mrc_comp_channel *ch = NULL;
	struct mrc_cq *cq = NULL;
	void *cq_ctx = NULL;
	int fd = -1, fd2 = -1;

	begin("completion channel");
	FAILS(mrc_create_comp_channel(NULL, &ch), EINVAL);
	FAILS(mrc_create_comp_channel(h[0].mctx, NULL), EINVAL);
	OK(mrc_create_comp_channel(h[0].mctx, &ch));
	check_ret(ch != NULL, 1, __FILE__, __LINE__, "a channel", 0, 0, 0);

	FAILS(mrc_get_comp_channel_fd(NULL, &fd), EINVAL);
	FAILS(mrc_get_comp_channel_fd(ch, NULL), EINVAL);
	OK(mrc_get_comp_channel_fd(ch, &fd));
	CHECK(fd > 2);
	CHECK(fcntl(fd, F_GETFD) != -1); /* a real descriptor */
	OK(mrc_get_comp_channel_fd(ch, &fd2));
	CHECK_EQ(fd2, fd);
	struct pollfd pfd = {.fd = fd, .events = POLLIN};
	CHECK_EQ(poll(&pfd, 1, 0), 0); /* nothing to read yet */

	/* Non-blocking: no event is EAGAIN (blocking would wait for one). */
	int fl = fcntl(fd, F_GETFL);
	OK(fcntl(fd, F_SETFL, fl | O_NONBLOCK));
	FAILS(mrc_get_cq_event(ch, &cq, &cq_ctx), EAGAIN);
	FAILS(mrc_get_cq_event(NULL, &cq, &cq_ctx), EINVAL);

	/* Busy while a CQ uses it; a channel of another context is refused. */
	cq = MADE(mrc_create_cq(h[0].mctx, 8, &cq_ctx, ch, 0));
	FAILS(mrc_destroy_comp_channel(ch), EBUSY);
	NULLS(mrc_create_cq(h[1].mctx, 8, NULL, ch, 0), EINVAL);
	OK(mrc_destroy_cq(cq));
	OK(mrc_destroy_comp_channel(ch));
	FAILS(mrc_destroy_comp_channel(NULL), EINVAL);

	/* The channels the rest uses. */
	for (int s = 0; s < 2; s++) {
		OK(mrc_create_comp_channel(h[s].mctx, &h[s].chan));
		check_ret(h[s].chan != NULL, 1, __FILE__, __LINE__, "a channel", 0, 0, 0);
		OK(mrc_get_comp_channel_fd(h[s].chan, &h[s].chan_fd));
		CHECK(h[s].chan_fd >= 0);
	}
	CHECK(h[0].chan_fd != h[1].chan_fd);
	end();
}

static void cq(void)
{
	struct ibv_wc wc[4];

	begin("cq");
	NULLS(mrc_create_cq(NULL, 16, NULL, NULL, 0), EINVAL);
	NULLS(mrc_create_cq(h[0].mctx, 0, NULL, NULL, 0), EINVAL);
	NULLS(mrc_create_cq(h[0].mctx, -1, NULL, NULL, 0), EINVAL);
	NULLS(mrc_create_cq(h[0].mctx, INT_MIN, NULL, NULL, 0), EINVAL);
	if (h[0].dattr.max_cqe < INT_MAX)
		NULLS(mrc_create_cq(h[0].mctx, h[0].dattr.max_cqe + 1, NULL, NULL, 0), EINVAL);

	for (int s = 0; s < 2; s++) {
		h[s].send_cq = MADE(mrc_create_cq(h[s].mctx, CQE, &h[s].send_tag, NULL, 0));
		h[s].recv_cq = MADE(mrc_create_cq(h[s].mctx, CQE, &h[s].recv_tag, h[s].chan, 0));
		CHECK_EQ(mrc_poll_cq(h[s].send_cq, 4, wc), 0);
		CHECK_EQ(mrc_poll_cq(h[s].recv_cq, 4, wc), 0);
		CHECK_EQ(mrc_poll_cq(h[s].send_cq, 0, wc), 0);
		FAILS(mrc_poll_cq(h[s].send_cq, -1, wc), EINVAL);
		FAILS(mrc_poll_cq(h[s].send_cq, 4, NULL), EINVAL);
	}
	FAILS(mrc_poll_cq(NULL, 4, wc), EINVAL);
	FAILS(mrc_req_notify_cq(NULL, 0), EINVAL);
	FAILS(mrc_destroy_cq(NULL), EINVAL);

	/* The smallest CQ. */
	struct mrc_cq *one = MADE(mrc_create_cq(h[0].mctx, 1, NULL, NULL, 0));
	CHECK_EQ(mrc_poll_cq(one, 1, wc), 0);
	OK(mrc_destroy_cq(one));
	end();
}

static void qp_hints(void)
{
	struct mrc_qp_hint_init_attr hi;
	struct mrc_qp_hint_attr q;
	const int all = MRC_QP_HINT_NUM_QPS_PER_PEER | MRC_QP_HINT_NUM_SEND_PEERS |
			MRC_QP_HINT_NUM_REMOTE_RECV_PEERS;

	begin("qp hint");
	memset(&hi, 0, sizeof hi);
	hi.attr.num_qps_per_peer = 2;
	hi.attr.num_send_peers = 4;
	hi.attr.num_remote_recv_peers = 8;
	memset(hi.attr.vendor_cfg, 0xa5, sizeof hi.attr.vendor_cfg);

	NULLS(mrc_create_qp_hint(NULL, &hi), EINVAL);
	NULLS(mrc_create_qp_hint(h[0].mctx, NULL), EINVAL);
	struct mrc_qp_hint_init_attr neg = hi;
	neg.attr.num_send_peers = -1;
	NULLS(mrc_create_qp_hint(h[0].mctx, &neg), EINVAL);

	hint0 = MADE(mrc_create_qp_hint(h[0].mctx, &hi));
	hint1 = MADE(mrc_create_qp_hint(h[1].mctx, &hi));

	memset(&q, 0, sizeof q);
	OK(mrc_query_qp_hint(hint0, &q, all));
	CHECK_EQ(q.num_qps_per_peer, 2);
	CHECK_EQ(q.num_send_peers, 4);
	CHECK_EQ(q.num_remote_recv_peers, 8);
	OK(mrc_query_qp_hint(hint0, &q, all | MRC_QP_HINT_VENDOR_CFG));

	/* One field changed, the others kept. */
	memset(&q, 0, sizeof q);
	q.num_send_peers = 16;
	OK(mrc_modify_qp_hint(hint0, &q, MRC_QP_HINT_NUM_SEND_PEERS));
	memset(&q, 0, sizeof q);
	OK(mrc_query_qp_hint(hint0, &q, all));
	CHECK_EQ(q.num_qps_per_peer, 2);
	CHECK_EQ(q.num_send_peers, 16);
	CHECK_EQ(q.num_remote_recv_peers, 8);
	/* The vendor blob is accepted (mrc-rs has no vendor configuration). */
	memset(q.vendor_cfg, 0x5a, sizeof q.vendor_cfg);
	OK(mrc_modify_qp_hint(hint0, &q, MRC_QP_HINT_VENDOR_CFG));

	/* Bad masks and values are refused and change nothing. */
	q.num_qps_per_peer = 3;
	FAILS(mrc_modify_qp_hint(hint0, &q, 1 << 3), EINVAL);
	FAILS(mrc_modify_qp_hint(hint0, &q, MRC_QP_HINT_NUM_QPS_PER_PEER | 1 << 12), EINVAL);
	FAILS(mrc_query_qp_hint(hint0, &q, 1 << 3), EINVAL);
	q.num_qps_per_peer = -1;
	FAILS(mrc_modify_qp_hint(hint0, &q, MRC_QP_HINT_NUM_QPS_PER_PEER), EINVAL);
	memset(&q, 0, sizeof q);
	OK(mrc_query_qp_hint(hint0, &q, all));
	CHECK_EQ(q.num_qps_per_peer, 2);
	CHECK_EQ(q.num_send_peers, 16);

	FAILS(mrc_query_qp_hint(NULL, &q, all), EINVAL);
	FAILS(mrc_query_qp_hint(hint0, NULL, all), EINVAL);
	FAILS(mrc_modify_qp_hint(NULL, &q, MRC_QP_HINT_NUM_SEND_PEERS), EINVAL);
	FAILS(mrc_modify_qp_hint(hint0, NULL, MRC_QP_HINT_NUM_SEND_PEERS), EINVAL);
	FAILS(mrc_destroy_qp_hint(NULL), EINVAL);

	struct mrc_qp_hint *spare = MADE(mrc_create_qp_hint(h[0].mctx, &hi));
	CHECK(spare != hint0);
	OK(mrc_destroy_qp_hint(spare));
	end();
}

static void qp_create(void)
{
	struct mrc_qp_init_attr ia, bad, got;
	struct ibv_qp_attr va;
	uint32_t qpn = 0;

	begin("qp create and query");
	ia = qp_init_attr(0, 0, &p1.tag[0]);
	NULLS(mrc_create_qp(NULL, &ia), EINVAL);
	NULLS(mrc_create_qp(h[0].mctx, NULL), EINVAL);
	bad = ia;
	bad.send_cq = NULL;
	NULLS(mrc_create_qp(h[0].mctx, &bad), EINVAL);
	bad = ia;
	bad.recv_cq = NULL;
	NULLS(mrc_create_qp(h[0].mctx, &bad), EINVAL);
	bad = ia;
	bad.pd = NULL;
	NULLS(mrc_create_qp(h[0].mctx, &bad), EINVAL);
	bad = ia;
	bad.send_cq = h[1].send_cq; /* another context's CQ */
	NULLS(mrc_create_qp(h[0].mctx, &bad), EINVAL);
	bad = ia;
	bad.pd = h[1].pd; /* another device's PD */
	NULLS(mrc_create_qp(h[0].mctx, &bad), EINVAL);
	bad = ia;
	bad.protocol_version = (enum mrc_protocol_version)(1 << 1); /* a version nobody speaks */
	NULLS2(mrc_create_qp(h[0].mctx, &bad), EINVAL, EOPNOTSUPP);
	bad = ia;
	bad.protocol_version = (enum mrc_protocol_version)(MRC_PROTOCOL_VERSION_1 | 1 << 1);
	NULLS2(mrc_create_qp(h[0].mctx, &bad), EINVAL, EOPNOTSUPP);
	bad = ia;
	bad.cap.max_send_sge = (uint32_t)h[0].dattr.max_sge + 1;
	NULLS2(mrc_create_qp(h[0].mctx, &bad), EINVAL, ENOMEM);
	bad = ia;
	bad.cap.max_send_wr = (uint32_t)h[0].dattr.max_qp_wr + 1;
	NULLS2(mrc_create_qp(h[0].mctx, &bad), EINVAL, ENOMEM);
	bad = ia;
	bad.cap.max_inline_data = 64; /* no inline data */
	NULLS(mrc_create_qp(h[0].mctx, &bad), EINVAL);

	/* The main pair: A (default protocol) on mrc_mem0, B (version 1 asked for) on mrc_mem1. */
	p1.qp[0] = MADE(mrc_create_qp(h[0].mctx, &ia));
	CHECK(ia.cap.max_send_wr >= SEND_WR); /* the actual capacities, written back */
	CHECK(ia.cap.max_recv_wr >= RECV_WR);
	CHECK(ia.cap.max_send_sge >= SEND_SGE);
	struct mrc_qp_init_attr ib = qp_init_attr(1, 0, &p1.tag[1]);
	ib.protocol_version = MRC_PROTOCOL_VERSION_1;
	ib.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM;
	p1.qp[1] = MADE(mrc_create_qp(h[1].mctx, &ib));

	for (int s = 0; s < 2; s++) {
		OK(mrc_get_qpn(p1.qp[s], &p1.qpn[s]));
		CHECK(p1.qpn[s] != 0 && p1.qpn[s] <= 0xffffff);
	}
	FAILS(mrc_get_qpn(NULL, &qpn), EINVAL);
	FAILS(mrc_get_qpn(p1.qp[0], NULL), EINVAL);

	/* What it was made with comes back; it starts in RESET. */
	memset(&va, 0, sizeof va);
	memset(&got, 0, sizeof got);
	va.qp_state = (enum ibv_qp_state)-1;
	OK(mrc_query_qp(p1.qp[0], &va, IBV_QP_STATE | IBV_QP_CAP, NULL, 0, &got));
	CHECK_EQ(va.qp_state, IBV_QPS_RESET);
	CHECK(va.cap.max_send_wr >= SEND_WR);
	CHECK(va.cap.max_recv_wr >= RECV_WR);
	CHECK(va.cap.max_send_sge >= SEND_SGE);
	CHECK_PTR_EQ(got.qp_context, &p1.tag[0]);
	CHECK_PTR_EQ(got.send_cq, h[0].send_cq);
	CHECK_PTR_EQ(got.recv_cq, h[0].recv_cq);
	CHECK_PTR_EQ(got.pd, h[0].pd);
	CHECK_EQ(got.sq_sig_all, 0);
	CHECK(got.cap.max_send_wr >= SEND_WR);
	CHECK(got.cap.max_send_sge >= SEND_SGE);
	CHECK(got.protocol_version == MRC_PROTOCOL_VERSION_0 ||
	      got.protocol_version == MRC_PROTOCOL_VERSION_1);
	memset(&got, 0, sizeof got);
	OK(mrc_query_qp(p1.qp[1], NULL, 0, NULL, 0, &got)); /* init attributes alone */
	CHECK_EQ(got.protocol_version, MRC_PROTOCOL_VERSION_1);
	CHECK_PTR_EQ(got.qp_context, &p1.tag[1]);
	CHECK_EQ(got.send_ops_flags, ib.send_ops_flags);

	struct mrc_qp_attr ma;
	FAILS(mrc_query_qp(NULL, &va, IBV_QP_STATE, NULL, 0, NULL), EINVAL);
	FAILS(mrc_query_qp(p1.qp[0], NULL, IBV_QP_STATE, NULL, 0, NULL), EINVAL);
	FAILS(mrc_query_qp(p1.qp[0], NULL, 0, NULL, MRC_QP_TIMEOUT, NULL), EINVAL);
	FAILS(mrc_query_qp(p1.qp[0], NULL, 0, &ma, 1 << 20, NULL), EINVAL);

	/* A QP that only goes RESET -> INIT (with the vendor blob mrc-rs ignores) -> ERR ->
	 * RESET, then is destroyed. Two QPs of one NIC have different numbers. */
	struct mrc_qp_init_attr ic = qp_init_attr(0, 1, NULL);
	struct mrc_qp *c = MADE(mrc_create_qp(h[0].mctx, &ic));
	OK(mrc_get_qpn(c, &qpn));
	CHECK(qpn != p1.qpn[0]);
	int mask;
	va = init_vattr(&mask);
	memset(&ma, 0, sizeof ma);
	memset(ma.vendor_cfg, 0x11, sizeof ma.vendor_cfg);
	OK(mrc_modify_qp(c, &va, mask, &ma, MRC_QP_VENDOR_CFG));
	CHECK_STATE(c, IBV_QPS_INIT);
	memset(&va, 0, sizeof va);
	va.qp_state = IBV_QPS_ERR;
	OK(mrc_modify_qp(c, &va, IBV_QP_STATE, NULL, 0));
	CHECK_STATE(c, IBV_QPS_ERR);
	va.qp_state = IBV_QPS_RESET;
	OK(mrc_modify_qp(c, &va, IBV_QP_STATE, NULL, 0));
	CHECK_STATE(c, IBV_QPS_RESET);
	va.qp_state = IBV_QPS_ERR; /* RESET -> ERR too */
	OK(mrc_modify_qp(c, &va, IBV_QP_STATE, NULL, 0));
	CHECK_STATE(c, IBV_QPS_ERR);
	OK(mrc_destroy_qp(c));
	FAILS(mrc_destroy_qp(NULL), EINVAL);
	end();
}

/* mrc_modify_qp(qp, v, vmask, m, mmask) is refused with EINVAL and the state is unchanged. */
#define REFUSED(qp, v, vmask, m, mmask, st)                                          \
	({                                                                           \
		FAILS_(mrc_modify_qp((qp), (v), (vmask), (m), (mmask)), EINVAL, EINVAL, \
		       "mrc_modify_qp(" #qp ", " #v ", " #vmask ", " #m ", " #mmask   \
		       ") == -1 with errno EINVAL");                                 \
		CHECK_STATE((qp), (st));                                             \
	})

static void modify_qp(void)
{
	struct mrc_qp *a = p1.qp[0], *b = p1.qp[1];
	struct ibv_qp_attr v, q;
	struct mrc_qp_attr m, mq;
	struct ibv_send_wr *bad = NULL;
	int mask;
	const struct mrc_device_attr *da = &h[0].mattr;

	begin("modify qp");
	/* RESET: only INIT (or ERR/RESET) is next. */
	v = rts_vattr(0, &mask);
	REFUSED(a, &v, mask, NULL, 0, IBV_QPS_RESET);
	v = rtr_vattr(0, p1.qpn[1], &mask);
	REFUSED(a, &v, mask, NULL, 0, IBV_QPS_RESET);
	v = init_vattr(&mask);
	v.cur_qp_state = IBV_QPS_INIT; /* it is RESET */
	REFUSED(a, &v, mask | IBV_QP_CUR_STATE, NULL, 0, IBV_QPS_RESET);
	memset(&m, 0, sizeof m);
	m.timeout = 14; /* an RTS attribute */
	REFUSED(a, &v, mask, &m, MRC_QP_TIMEOUT, IBV_QPS_RESET);
	REFUSED(a, &v, mask, &m, 1 << 20, IBV_QPS_RESET);
	memset(&m, 0, sizeof m);
	m.profile.ev_profile_id = 0x7e57ab1e; /* no controller programmed it */
	REFUSED(a, &v, mask, &m, MRC_QP_EV_PROFILE_ID, IBV_QPS_RESET);
	memset(&m, 0, sizeof m);
	m.profile.cc_profile_id = 0x7e57ab1e;
	REFUSED(a, &v, mask, &m, MRC_QP_CC_PROFILE_ID, IBV_QPS_RESET);
	memset(&m, 0, sizeof m);
	m.qp_hint = hint1; /* another context's hint */
	REFUSED(a, &v, mask, &m, MRC_QP_HINT, IBV_QPS_RESET);
	REFUSED(a, NULL, mask, NULL, 0, IBV_QPS_RESET);
	REFUSED(a, &v, mask, NULL, MRC_QP_HINT, IBV_QPS_RESET);
	FAILS(mrc_modify_qp(NULL, &v, mask, NULL, 0), EINVAL);

	/* Nothing to post in RESET. */
	struct ibv_sge sge = sge_of(h[0].mr, h[0].buf, 64);
	struct ibv_send_wr wr = write_wr(1, &sge, 1, IBV_WR_RDMA_WRITE, &h[1], DST,
					 IBV_SEND_SIGNALED, 0);
	FAILS(mrc_post_send(a, &wr, &bad), EINVAL);
	CHECK_PTR_EQ(bad, &wr);
	FAILS(post_recv_id(a, 1), EINVAL);

	/* RESET -> INIT with the hint and the default profiles; CUR_STATE that matches; the port
	 * as OCP's example gives it (accepted and ignored: MRC has no port per QP). */
	v = init_vattr(&mask);
	v.cur_qp_state = IBV_QPS_RESET;
	v.port_num = 1;
	mask |= IBV_QP_PORT;
	memset(&m, 0, sizeof m);
	m.qp_hint = hint0;
	m.profile.ev_profile_id = 0;
	m.profile.cc_profile_id = 0;
	OK(mrc_modify_qp(a, &v, mask | IBV_QP_CUR_STATE, &m,
			 MRC_QP_HINT | MRC_QP_EV_PROFILE_ID | MRC_QP_CC_PROFILE_ID));
	memset(&q, 0, sizeof q);
	memset(&mq, 0xff, sizeof mq);
	OK(mrc_query_qp(a, &q, IBV_QP_STATE, &mq,
			MRC_QP_HINT | MRC_QP_EV_PROFILE_ID | MRC_QP_CC_PROFILE_ID, NULL));
	CHECK_EQ(q.qp_state, IBV_QPS_INIT);
	CHECK_PTR_EQ(mq.qp_hint, hint0);
	CHECK_EQ(mq.profile.ev_profile_id, 0);
	CHECK_EQ(mq.profile.cc_profile_id, 0);
	FAILS(mrc_destroy_qp_hint(hint0), EBUSY);
	struct mrc_qp_hint_attr hq;
	memset(&hq, 0, sizeof hq);
	hq.num_remote_recv_peers = 4; /* a hint in use may change */
	OK(mrc_modify_qp_hint(hint0, &hq, MRC_QP_HINT_NUM_REMOTE_RECV_PEERS));

	/* B: the minimum (no MRC attributes at all); no hint. */
	v = init_vattr(&mask);
	OK(mrc_modify_qp(b, &v, IBV_QP_STATE, NULL, 0));
	memset(&mq, 0xff, sizeof mq);
	OK(mrc_query_qp(b, NULL, 0, &mq, MRC_QP_HINT, NULL));
	CHECK_PTR_EQ(mq.qp_hint, NULL);
	/* INIT -> RTS skips RTR. */
	v = rts_vattr(1, &mask);
	REFUSED(b, &v, mask, NULL, 0, IBV_QPS_INIT);
	/* Receives may be posted from INIT on (consumed by the Writes-with-Immediate below). */
	OK(post_recv_id(b, 0xb01));
	OK(post_recv_id(b, 0xb02));
	FAILS(mrc_post_send(a, &wr, &bad), EINVAL); /* INIT: no sends */
	CHECK_PTR_EQ(bad, &wr);

	/* INIT -> RTR: a missing required attribute, a wrong current state, out-of-range MRC
	 * attributes. */
	v = rtr_vattr(0, p1.qpn[1], &mask);
	REFUSED(a, &v, mask & ~IBV_QP_AV, NULL, 0, IBV_QPS_INIT);
	REFUSED(a, &v, mask & ~IBV_QP_DEST_QPN, NULL, 0, IBV_QPS_INIT);
	REFUSED(a, &v, mask & ~IBV_QP_RQ_PSN, NULL, 0, IBV_QPS_INIT);
	v.cur_qp_state = IBV_QPS_RTR;
	REFUSED(a, &v, mask | IBV_QP_CUR_STATE, NULL, 0, IBV_QPS_INIT);
	v = rtr_vattr(0, p1.qpn[1], &mask);
	v.ah_attr.is_global = 0; /* the peer is named by its GID */
	REFUSED(a, &v, mask, NULL, 0, IBV_QPS_INIT);
	v = rtr_vattr(0, p1.qpn[1], &mask);
	memset(&m, 0, sizeof m);
	if (da->wimm_attr.max_wimm_dest < UINT16_MAX) {
		m.wimm.max_wimm_dest = (uint16_t)(da->wimm_attr.max_wimm_dest + 1);
		REFUSED(a, &v, mask, &m, MRC_QP_MAX_WIMM_DEST, IBV_QPS_INIT);
	}
	memset(&m, 0, sizeof m);
	if (da->mpr_attr.max_mpr < UINT8_MAX) {
		m.mpr.mpr_dest = (uint8_t)(da->mpr_attr.max_mpr + 1);
		REFUSED(a, &v, mask, &m, MRC_QP_MPR_DEST, IBV_QPS_INIT);
	}
	memset(&m, 0, sizeof m);
	m.wimm.max_wimm = 1; /* an RTS attribute */
	REFUSED(a, &v, mask, &m, MRC_QP_MAX_WIMM, IBV_QPS_INIT);
	memset(&m, 0, sizeof m);
	m.cap = 1u << 5; /* no such capability */
	REFUSED(a, &v, mask, &m, MRC_QP_CAP, IBV_QPS_INIT);
	if (!(da->cap & MRC_DEVICE_CAP_DYNAMIC_MPR)) {
		m.cap = MRC_QP_CAP_DYNAMIC_MPR; /* the device cannot */
		FAILS2(mrc_modify_qp(a, &v, mask, &m, MRC_QP_CAP), EINVAL, EOPNOTSUPP);
		CHECK_STATE(a, IBV_QPS_INIT);
	}

	/* INIT -> RTR, with the responder's MRC attributes. */
	uint8_t res = da->mpr_attr.mpr_resolution ? da->mpr_attr.mpr_resolution : 1;
	uint8_t mpr_dest = (uint8_t)(da->mpr_attr.max_mpr / res * res);
	uint32_t qp_cap = (da->cap & MRC_DEVICE_CAP_DYNAMIC_MPR) ? MRC_QP_CAP_DYNAMIC_MPR : 0;
	v = rtr_vattr(0, p1.qpn[1], &mask);
	v.cur_qp_state = IBV_QPS_INIT;
	memset(&m, 0, sizeof m);
	m.wimm.max_wimm_dest = da->wimm_attr.max_wimm_dest;
	m.mpr.mpr_dest = mpr_dest;
	m.cap = qp_cap;
	OK(mrc_modify_qp(a, &v, mask | IBV_QP_CUR_STATE, &m,
			 MRC_QP_MAX_WIMM_DEST | MRC_QP_MPR_DEST | MRC_QP_CAP));
	memset(&q, 0, sizeof q);
	memset(&mq, 0, sizeof mq);
	OK(mrc_query_qp(a, &q,
			IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				IBV_QP_RQ_PSN,
			&mq, MRC_QP_MAX_WIMM_DEST | MRC_QP_MPR_DEST | MRC_QP_CAP, NULL));
	CHECK_EQ(q.qp_state, IBV_QPS_RTR);
	CHECK_EQ(q.dest_qp_num, p1.qpn[1]);
	CHECK_EQ(q.rq_psn, psn_of(1));
	CHECK_EQ(q.ah_attr.is_global, 1);
	CHECK(memcmp(&q.ah_attr.grh.dgid, &h[1].gid, sizeof h[1].gid) == 0);
	CHECK(q.path_mtu >= IBV_MTU_256 && q.path_mtu <= IBV_MTU_4096);
	CHECK_EQ(mq.wimm.max_wimm_dest, da->wimm_attr.max_wimm_dest);
	CHECK_EQ(mq.mpr.mpr_dest, mpr_dest);
	CHECK_EQ(mq.cap, qp_cap);
	FAILS(mrc_post_send(a, &wr, &bad), EINVAL); /* RTR: still no sends */
	CHECK_PTR_EQ(bad, &wr);

	/* B -> RTR with the verbs attributes alone, among them every one mrc.h lists as not
	 * supported (accepted and ignored, as verbs programs set them): the MRC defaults stay,
	 * within the device's. */
	v = rtr_vattr(1, p1.qpn[0], &mask);
	v.port_num = 1;
	v.timeout = 14;
	v.retry_cnt = 7;
	v.rnr_retry = 7;
	v.min_rnr_timer = 12;
	v.max_rd_atomic = 1;
	v.max_dest_rd_atomic = 1;
	v.alt_ah_attr = v.ah_attr;
	v.alt_port_num = 2;
	v.path_mig_state = IBV_MIG_ARMED;
	OK(mrc_modify_qp(b, &v,
			 mask | IBV_QP_PORT | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				 IBV_QP_MIN_RNR_TIMER | IBV_QP_MAX_QP_RD_ATOMIC |
				 IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE,
			 NULL, 0));
	memset(&mq, 0, sizeof mq);
	OK(mrc_query_qp(b, NULL, 0, &mq, MRC_QP_MAX_WIMM_DEST | MRC_QP_MPR_DEST, NULL));
	CHECK_RANGE(mq.wimm.max_wimm_dest, 1, da->wimm_attr.max_wimm_dest);
	CHECK_RANGE(mq.mpr.mpr_dest, 1, da->mpr_attr.max_mpr);
	uint8_t b_mpr_dest = mq.mpr.mpr_dest ? mq.mpr.mpr_dest : 1;

	/* RTR -> RTS refusals. */
	v = rts_vattr(0, &mask);
	REFUSED(a, &v, mask & ~IBV_QP_SQ_PSN, NULL, 0, IBV_QPS_RTR);
	v = rts_vattr(0, &mask);
	memset(&m, 0, sizeof m);
	m.timeout = 25;
	REFUSED(a, &v, mask, &m, MRC_QP_TIMEOUT, IBV_QPS_RTR);
	memset(&m, 0, sizeof m);
	m.retry.linear_cnt = 8;
	m.retry.exp_cnt = 0;
	REFUSED(a, &v, mask, &m, MRC_QP_RETRY_CNT, IBV_QPS_RTR);
	memset(&m, 0, sizeof m);
	m.retry.linear_cnt = 0;
	m.retry.exp_cnt = 26;
	REFUSED(a, &v, mask, &m, MRC_QP_RETRY_CNT, IBV_QPS_RTR);
	memset(&m, 0, sizeof m);
	if (da->wimm_attr.max_wimm < UINT16_MAX) {
		m.wimm.max_wimm = (uint16_t)(da->wimm_attr.max_wimm + 1);
		REFUSED(a, &v, mask, &m, MRC_QP_MAX_WIMM, IBV_QPS_RTR);
	}
	memset(&m, 0, sizeof m);
	if (da->mpr_attr.max_mpr < UINT8_MAX) {
		m.mpr.mpr = (uint8_t)(da->mpr_attr.max_mpr + 1);
		REFUSED(a, &v, mask, &m, MRC_QP_MPR, IBV_QPS_RTR);
	}
	memset(&m, 0, sizeof m);
	m.mpr.mpr_dest = 1; /* an RTR attribute */
	REFUSED(a, &v, mask, &m, MRC_QP_MPR_DEST, IBV_QPS_RTR);
	v.cur_qp_state = IBV_QPS_INIT;
	REFUSED(a, &v, mask | IBV_QP_CUR_STATE, NULL, 0, IBV_QPS_RTR);
	v = init_vattr(&mask); /* backwards */
	REFUSED(a, &v, IBV_QP_STATE, NULL, 0, IBV_QPS_RTR);

	/* RTR -> RTS with the requester's MRC attributes (its MPR within the peer's). */
	uint8_t mpr = b_mpr_dest;
	v = rts_vattr(0, &mask);
	memset(&m, 0, sizeof m);
	m.wimm.max_wimm = da->wimm_attr.max_wimm;
	m.mpr.mpr = mpr;
	m.retry.linear_cnt = 5;
	m.retry.exp_cnt = 10;
	m.timeout = 14;
	OK(mrc_modify_qp(a, &v, mask, &m,
			 MRC_QP_MAX_WIMM | MRC_QP_MPR | MRC_QP_RETRY_CNT | MRC_QP_TIMEOUT));
	memset(&q, 0, sizeof q);
	memset(&mq, 0, sizeof mq);
	OK(mrc_query_qp(a, &q, IBV_QP_STATE | IBV_QP_SQ_PSN, &mq,
			MRC_QP_MAX_WIMM | MRC_QP_MPR | MRC_QP_RETRY_CNT | MRC_QP_TIMEOUT |
				MRC_QP_MAX_WIMM_DEST | MRC_QP_MPR_DEST | MRC_QP_HINT,
			NULL));
	CHECK_EQ(q.qp_state, IBV_QPS_RTS);
	CHECK_EQ(q.sq_psn, psn_of(0));
	CHECK_EQ(mq.wimm.max_wimm, da->wimm_attr.max_wimm);
	CHECK_EQ(mq.mpr.mpr, mpr);
	CHECK_EQ(mq.retry.linear_cnt, 5);
	CHECK_EQ(mq.retry.exp_cnt, 10);
	CHECK_EQ(mq.timeout, 14);
	/* What earlier transitions set is kept. */
	CHECK_EQ(mq.wimm.max_wimm_dest, da->wimm_attr.max_wimm_dest);
	CHECK_EQ(mq.mpr.mpr_dest, mpr_dest);
	CHECK_PTR_EQ(mq.qp_hint, hint0);

	/* B -> RTS with defaults, within the documented ranges; the verbs timeout and retry
	 * counts OCP's example sets are accepted and change nothing (MRC's are mrc_qp_attr's). */
	v = rts_vattr(1, &mask);
	v.timeout = 3;
	v.retry_cnt = 1;
	v.rnr_retry = 1;
	v.max_rd_atomic = 1;
	OK(mrc_modify_qp(b, &v,
			 mask | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				 IBV_QP_MAX_QP_RD_ATOMIC,
			 NULL, 0));
	memset(&mq, 0xff, sizeof mq);
	OK(mrc_query_qp(b, NULL, 0, &mq,
			MRC_QP_MAX_WIMM | MRC_QP_MPR | MRC_QP_RETRY_CNT | MRC_QP_TIMEOUT, NULL));
	CHECK_RANGE(mq.timeout, 0, 24);
	CHECK(mq.timeout != 3); /* the verbs timeout did not reach the QP */
	CHECK_RANGE(mq.retry.linear_cnt, 0, 7);
	CHECK_RANGE(mq.retry.exp_cnt, 0, 25);
	CHECK_RANGE(mq.wimm.max_wimm, 1, da->wimm_attr.max_wimm);
	CHECK_RANGE(mq.mpr.mpr, 1, da->mpr_attr.max_mpr);
	CHECK_STATE(b, IBV_QPS_RTS);
	v = rtr_vattr(1, p1.qpn[0], &mask); /* backwards */
	REFUSED(b, &v, mask, NULL, 0, IBV_QPS_RTS);
	end();
}

static void data(void)
{
	struct pair *p = &p1;
	struct ibv_send_wr *bad = NULL;
	struct ibv_wc wc[8];

	begin("data");
	/* A multi-packet Write: exactly its bytes land, nothing around them; it consumes no
	 * receive. */
	memset(h[1].buf + DST - 64, 0xee, 200000 + 128);
	transfer(p, 0, DST, 200000, 1, 0, 0, 0x101, 0);
	CHECK_EQ(h[1].buf[DST - 1], 0xee);
	CHECK_EQ(h[1].buf[DST + 200000], 0xee);
	NO_WC(h[1].recv_cq);

	/* Write-with-Immediate both ways: the immediate arrives in network order, unchanged. */
	transfer(p, 0, DST + 4096, 3000, 2, 1, 0x12345678, 0x102, 0xb01);
	OK(post_recv_id(p->qp[0], 0xa01));
	transfer(p, 1, DST, 5000, 3, 1, 0xa1b2c3d4, 0x103, 0xa01);
	/* With no payload (a pure signal). */
	transfer(p, 0, DST, 0, 4, 1, 0x00000001, 0x104, 0xb02);

	/* Four in one post: the receives complete in order, each with its immediate. */
	struct ibv_sge sg[4];
	struct ibv_send_wr w[4];
	fill(h[0].buf + SRC, 4 * 1000, 5);
	for (int i = 0; i < 4; i++) {
		OK(post_recv_id(p->qp[1], 0xc00 + (uint64_t)i));
		sg[i] = sge_of(h[0].mr, h[0].buf + SRC + 1000 * i, 1000);
		w[i] = write_wr(0x200 + (uint64_t)i, &sg[i], 1, IBV_WR_RDMA_WRITE_WITH_IMM, &h[1],
				DST + 8192 + 1000 * (size_t)i, IBV_SEND_SIGNALED, 0x5000u + (uint32_t)i);
		w[i].next = i < 3 ? &w[i + 1] : NULL;
	}
	memset(h[1].buf + DST + 8192, 0, 4000);
	OK(mrc_post_send(p->qp[0], &w[0], &bad));
	if (WAIT_WCS(h[0].send_cq, wc, 4))
		for (int i = 0; i < 4; i++)
			CHECK_WC(wc[i], 0x200 + (uint64_t)i, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE,
				 p->qpn[0]);
	if (WAIT_WCS(h[1].recv_cq, wc, 4))
		for (int i = 0; i < 4; i++) {
			CHECK_WC(wc[i], 0xc00 + (uint64_t)i, IBV_WC_SUCCESS,
				 IBV_WC_RECV_RDMA_WITH_IMM, p->qpn[1]);
			CHECK_EQ(ntohl(wc[i].imm_data), 0x5000u + (uint32_t)i);
			CHECK_EQ(wc[i].byte_len, 1000);
		}
	CHECK_BYTES(h[1].buf + DST + 8192, 4000, 5);

	/* Four gather entries from two memory regions (max_send_sge), one contiguous message. */
	fill(h[0].buf + SRC, 100, 6);
	fill(h[0].buf + SRC + 5000, 2000, 7);
	fill(h[0].buf2, 333, 8);
	fill(h[0].buf + SRC + 9000, 1, 9);
	sg[0] = sge_of(h[0].mr, h[0].buf + SRC, 100);
	sg[1] = sge_of(h[0].mr, h[0].buf + SRC + 5000, 2000);
	sg[2] = sge_of(h[0].mr2, h[0].buf2, 333);
	sg[3] = sge_of(h[0].mr, h[0].buf + SRC + 9000, 1);
	w[0] = write_wr(0x301, sg, 4, IBV_WR_RDMA_WRITE_WITH_IMM, &h[1], DST + 65536,
			IBV_SEND_SIGNALED, 0x301);
	OK(post_recv_id(p->qp[1], 0xd01));
	OK(mrc_post_send(p->qp[0], &w[0], &bad));
	if (WAIT_WCS(h[0].send_cq, wc, 1))
		CHECK_WC(wc[0], 0x301, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, p->qpn[0]);
	if (WAIT_WCS(h[1].recv_cq, wc, 1)) {
		CHECK_WC(wc[0], 0xd01, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM, p->qpn[1]);
		CHECK_EQ(wc[0].byte_len, 100 + 2000 + 333 + 1);
	}
	uint8_t *d = h[1].buf + DST + 65536;
	CHECK_BYTES(d, 100, 6);
	CHECK_BYTES(d + 100, 2000, 7);
	CHECK_BYTES(d + 2100, 333, 8);
	CHECK_BYTES(d + 2433, 1, 9);

	/* sq_sig_all = 0: only the signaled Write of three completes, after the other two. */
	for (int i = 0; i < 3; i++) {
		fill(h[0].buf + SRC + 20000 * (size_t)i, 20000, 10 + (unsigned)i);
		sg[i] = sge_of(h[0].mr, h[0].buf + SRC + 20000 * (size_t)i, 20000);
		w[i] = write_wr(0x401 + (uint64_t)i, &sg[i], 1, IBV_WR_RDMA_WRITE, &h[1],
				DST + 131072 + 20000 * (size_t)i, i == 2 ? IBV_SEND_SIGNALED : 0, 0);
		w[i].next = i < 2 ? &w[i + 1] : NULL;
	}
	OK(mrc_post_send(p->qp[0], &w[0], &bad));
	if (WAIT_WCS(h[0].send_cq, wc, 1))
		CHECK_WC(wc[0], 0x403, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, p->qpn[0]);
	NO_WC(h[0].send_cq);
	for (int i = 0; i < 3; i++)
		CHECK_BYTES(h[1].buf + DST + 131072 + 20000 * (size_t)i, 20000, 10 + (unsigned)i);
	NO_WC(h[1].recv_cq);
	end();
}

static void post_errors(void)
{
	struct pair *p = &p1;
	struct ibv_send_wr *bad = NULL;
	struct ibv_recv_wr *rbad = NULL;
	struct ibv_wc wc;
	struct ibv_qp_attr q;

	begin("post errors");
	memset(&q, 0, sizeof q);
	OK(mrc_query_qp(p->qp[0], &q, IBV_QP_CAP, NULL, 0, NULL));

	/* Every opcode but the two Writes: refused with *bad_wr at it; the WR before it was
	 * posted (and completes), the one after was not. */
	static const struct {
		int op;
		const char *name;
	} ops[] = {
		{IBV_WR_SEND, "IBV_WR_SEND"},
		{IBV_WR_SEND_WITH_IMM, "IBV_WR_SEND_WITH_IMM"},
		{IBV_WR_RDMA_READ, "IBV_WR_RDMA_READ"},
		{IBV_WR_ATOMIC_CMP_AND_SWP, "IBV_WR_ATOMIC_CMP_AND_SWP"},
		{IBV_WR_ATOMIC_FETCH_AND_ADD, "IBV_WR_ATOMIC_FETCH_AND_ADD"},
		{IBV_WR_LOCAL_INV, "IBV_WR_LOCAL_INV"},
		{IBV_WR_BIND_MW, "IBV_WR_BIND_MW"},
		{IBV_WR_SEND_WITH_INV, "IBV_WR_SEND_WITH_INV"},
		{IBV_WR_TSO, "IBV_WR_TSO"},
		{IBV_WR_DRIVER1, "IBV_WR_DRIVER1"},
		{0x7f, "opcode 0x7f"},
	};
	for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
		struct ibv_sge sge[3];
		struct ibv_send_wr w[3];
		fill(h[0].buf + SRC, 3 * 512, 20 + (unsigned)i);
		memset(h[1].buf + DST, 0, 3 * 512);
		for (int k = 0; k < 3; k++) {
			sge[k] = sge_of(h[0].mr, h[0].buf + SRC + 512 * k, 512);
			w[k] = write_wr(0x1000 + 16 * i + (uint64_t)k, &sge[k], 1, IBV_WR_RDMA_WRITE,
					&h[1], DST + 512 * (size_t)k, IBV_SEND_SIGNALED, 0);
			w[k].next = k < 2 ? &w[k + 1] : NULL;
		}
		w[1].opcode = (enum ibv_wr_opcode)ops[i].op;
		w[1].wr.atomic.remote_addr = (uintptr_t)(h[1].buf + DST + 512);
		w[1].wr.atomic.rkey = h[1].mr->rkey;
		bad = NULL;
		errno = 0;
		int rc = mrc_post_send(p->qp[0], &w[0], &bad);
		int e = errno;
		char what[128];
		snprintf(what, sizeof what, "mrc_post_send of %s is refused with EINVAL", ops[i].name);
		check_ret(rc == -1 && e == EINVAL, 0, __FILE__, __LINE__, what, rc, 0, e);
		CHECK_PTR_EQ(bad, &w[1]);
		memset(&wc, 0, sizeof wc);
		if (WAIT_WCS(h[0].send_cq, &wc, 1))
			CHECK_WC(wc, 0x1000 + 16 * i, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, p->qpn[0]);
		CHECK_BYTES(h[1].buf + DST, 512, 20 + (unsigned)i);
	}
	NO_WC(h[0].send_cq); /* none of the WRs after a refused one */

	/* More gather entries than the QP's max_send_sge; a negative count. */
	{
		uint32_t n = q.cap.max_send_sge + 1;
		struct ibv_sge *sge = calloc(n, sizeof *sge);
		check_ret(sge != NULL, 1, __FILE__, __LINE__, "calloc", 0, 0, errno);
		for (uint32_t k = 0; k < n; k++)
			sge[k] = sge_of(h[0].mr, h[0].buf + SRC + 8 * k, 8);
		struct ibv_send_wr w = write_wr(0x2001, sge, (int)n, IBV_WR_RDMA_WRITE, &h[1], DST,
						IBV_SEND_SIGNALED, 0);
		bad = NULL;
		FAILS(mrc_post_send(p->qp[0], &w, &bad), EINVAL);
		CHECK_PTR_EQ(bad, &w);
		w.num_sge = -1;
		bad = NULL;
		FAILS(mrc_post_send(p->qp[0], &w, &bad), EINVAL);
		CHECK_PTR_EQ(bad, &w);
		free(sge);
	}
	NO_WC(h[0].send_cq);

	struct ibv_sge sge = sge_of(h[0].mr, h[0].buf + SRC, 64);
	struct ibv_send_wr w = write_wr(0x2002, &sge, 1, IBV_WR_RDMA_WRITE, &h[1], DST,
					IBV_SEND_SIGNALED, 0);
	FAILS(mrc_post_send(NULL, &w, &bad), EINVAL);
	FAILS(mrc_post_send(p->qp[0], NULL, &bad), EINVAL);
	w.send_flags |= IBV_SEND_INLINE; /* no inline data */
	bad = NULL;
	FAILS(mrc_post_send(p->qp[0], &w, &bad), EINVAL);
	CHECK_PTR_EQ(bad, &w);
	NO_WC(h[0].send_cq);

	/* Receives: NULL arguments; more scatter entries than max_recv_sge (on a QP of its
	 * own in INIT: a receive wrongly taken stays out of the main pair's way). */
	struct ibv_recv_wr r;
	memset(&r, 0, sizeof r);
	r.wr_id = 0x2003;
	FAILS(mrc_post_recv(NULL, &r, &rbad), EINVAL);
	FAILS(mrc_post_recv(p->qp[1], NULL, &rbad), EINVAL);
	{
		struct mrc_qp_init_attr ia = qp_init_attr(1, 0, NULL);
		struct mrc_qp *c = MADE(mrc_create_qp(h[1].mctx, &ia));
		int mask;
		struct ibv_qp_attr v = init_vattr(&mask);
		OK(mrc_modify_qp(c, &v, mask, NULL, 0));
		memset(&q, 0, sizeof q);
		OK(mrc_query_qp(c, &q, IBV_QP_CAP, NULL, 0, NULL));
		uint32_t n = q.cap.max_recv_sge + 1;
		struct ibv_sge *s = calloc(n, sizeof *s);
		check_ret(s != NULL, 1, __FILE__, __LINE__, "calloc", 0, 0, errno);
		for (uint32_t k = 0; k < n; k++)
			s[k] = sge_of(h[1].mr, h[1].buf + 64 * k, 64);
		r.sg_list = s;
		r.num_sge = (int)n;
		rbad = NULL;
		FAILS(mrc_post_recv(c, &r, &rbad), EINVAL);
		CHECK_PTR_EQ(rbad, &r);
		r.num_sge = -1;
		rbad = NULL;
		FAILS(mrc_post_recv(c, &r, &rbad), EINVAL);
		CHECK_PTR_EQ(rbad, &r);
		free(s);
		OK(mrc_destroy_qp(c));
	}
	NO_WC(h[1].recv_cq);
	end();
}

static void events(void)
{
	struct pair *p = &p1;
	struct host *x = &h[1];
	struct pollfd pfd = {.fd = x->chan_fd, .events = POLLIN};
	struct mrc_cq *cq = NULL;
	void *ctx = NULL;
	struct ibv_wc wc;

	begin("completion events");
	int fl = fcntl(x->chan_fd, F_GETFL);
	OK(fcntl(x->chan_fd, F_SETFL, fl | O_NONBLOCK));
	CHECK_EQ(poll(&pfd, 1, 0), 0); /* no CQ armed yet: nothing happened */
	FAILS(mrc_get_cq_event(x->chan, &cq, &ctx), EAGAIN);

	/* Armed: a Write-with-Immediate makes the fd readable and gives one event; then the
	 * completion is polled (the usual order). */
	OK(mrc_req_notify_cq(x->recv_cq, 0));
	CHECK_EQ(poll(&pfd, 1, 0), 0);
	OK(post_recv_id(p->qp[1], 0xe01));
	write_and_wait(p, 0, DST, 100, 30, 1, 0xe01, 0xe01);
	pfd.revents = 0;
	CHECK_EQ(poll(&pfd, 1, WAIT_MS), 1);
	CHECK(pfd.revents & POLLIN);
	OK(mrc_get_cq_event(x->chan, &cq, &ctx));
	CHECK_PTR_EQ(cq, x->recv_cq);
	CHECK_PTR_EQ(ctx, &x->recv_tag);
	mrc_ack_cq_events(cq, 1);
	CHECK_EQ(poll(&pfd, 1, 0), 0); /* the event was consumed */
	FAILS(mrc_get_cq_event(x->chan, &cq, &ctx), EAGAIN);
	imm_arrived(p, 0, DST, 100, 30, 0xe01, 0xe01);

	/* Not re-armed: no event for the next completion. */
	OK(post_recv_id(p->qp[1], 0xe02));
	transfer(p, 0, DST, 100, 31, 1, 0xe02, 0xe02, 0xe02);
	CHECK_EQ(poll(&pfd, 1, QUIET_MS), 0);

	/* Two armed rounds, both events acknowledged at once. */
	for (int i = 0; i < 2; i++) {
		OK(mrc_req_notify_cq(x->recv_cq, 0));
		OK(post_recv_id(p->qp[1], 0xe03 + (uint64_t)i));
		write_and_wait(p, 0, DST, 64, 32 + (unsigned)i, 1, 0xe03 + (uint32_t)i,
			       0xe03 + (uint64_t)i);
		pfd.revents = 0;
		CHECK_EQ(poll(&pfd, 1, WAIT_MS), 1);
		cq = NULL;
		ctx = NULL;
		OK(mrc_get_cq_event(x->chan, &cq, &ctx));
		CHECK_PTR_EQ(cq, x->recv_cq);
		CHECK_PTR_EQ(ctx, &x->recv_tag);
		imm_arrived(p, 0, DST, 64, 32 + (unsigned)i, 0xe03 + (uint32_t)i,
			    0xe03 + (uint64_t)i);
	}
	mrc_ack_cq_events(x->recv_cq, 2);

	/* Armed, and the completion polled at once (a busy-polling program that arms as a
	 * fallback): the event is owed all the same, as libibverbs raises it when the
	 * completion enters the armed CQ, whoever polls first. */
	OK(mrc_req_notify_cq(x->recv_cq, 0));
	OK(post_recv_id(p->qp[1], 0xe05));
	transfer(p, 0, DST, 64, 34, 1, 0xe05, 0xe05, 0xe05);
	pfd.revents = 0;
	if (CHECK_EQ(poll(&pfd, 1, WAIT_MS), 1)) {
		cq = NULL;
		OK(mrc_get_cq_event(x->chan, &cq, &ctx));
		CHECK_PTR_EQ(cq, x->recv_cq);
		mrc_ack_cq_events(x->recv_cq, 1);
	}
	NO_WC(x->recv_cq);

	/* A channel whose CQ is in use is still busy. A CQ armed with no event pending can go. */
	FAILS(mrc_destroy_comp_channel(x->chan), EBUSY);
	struct mrc_cq *scq = MADE(mrc_create_cq(h[0].mctx, 4, &wc, h[0].chan, 0));
	OK(mrc_req_notify_cq(scq, 0));
	OK(mrc_destroy_cq(scq));
	end();
}

struct async_wait {
	struct mrc_context *mctx;
	struct mrc_qp *qp;
	int found, seen, rc, err;
};

static void *async_waiter(void *arg)
{
	struct async_wait *w = arg;
	while (!w->found && w->seen < 32) {
		struct mrc_async_event ev;
		memset(&ev, 0, sizeof ev);
		errno = 0;
		if (mrc_get_async_event(w->mctx, &ev) != 0) {
			w->rc = -1;
			w->err = errno;
			break;
		}
		w->seen++;
		if (ev.event_type == IBV_EVENT_QP_FATAL && ev.element.qp == w->qp)
			w->found = 1;
		mrc_ack_async_event(&ev);
	}
	return NULL;
}

static void remote_error(void)
{
	struct pair *p = &p2;
	struct ibv_send_wr *bad = NULL;
	struct ibv_wc wc[4];
	struct ibv_qp_attr q;
	struct mrc_qp_attr m;

	begin("remote error");
	/* The documented limits are accepted: timeout 24, 7 linear and 25 exponential retries. */
	memset(&m, 0, sizeof m);
	m.timeout = 24;
	m.retry.linear_cnt = 7;
	m.retry.exp_cnt = 25;
	connect_pair(p, 1, &m, MRC_QP_TIMEOUT | MRC_QP_RETRY_CNT);
	CHECK(p->qpn[0] != p1.qpn[0]);
	CHECK(p->qpn[1] != p1.qpn[1]);
	memset(&m, 0, sizeof m);
	OK(mrc_query_qp(p->qp[0], NULL, 0, &m, MRC_QP_TIMEOUT | MRC_QP_RETRY_CNT, NULL));
	CHECK_EQ(m.timeout, 24);
	CHECK_EQ(m.retry.linear_cnt, 7);
	CHECK_EQ(m.retry.exp_cnt, 25);

	/* sq_sig_all = 1: an unsignaled Write completes anyway. */
	{
		struct ibv_sge sge = sge_of(h[0].mr, h[0].buf + SRC, 7000);
		struct ibv_send_wr w = write_wr(0x501, &sge, 1, IBV_WR_RDMA_WRITE, &h[1],
						DST + 300000, 0, 0);
		fill(h[0].buf + SRC, 7000, 40);
		OK(mrc_post_send(p->qp[0], &w, &bad));
		if (WAIT_WCS(h[0].send_cq, wc, 1))
			CHECK_WC(wc[0], 0x501, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, p->qpn[0]);
		CHECK_BYTES(h[1].buf + DST + 300000, 7000, 40);
	}

	/* Fill the receive queue: the one past max_recv_wr is refused with EAGAIN. */
	memset(&q, 0, sizeof q);
	OK(mrc_query_qp(p->qp[0], &q, IBV_QP_CAP, NULL, 0, NULL));
	uint32_t nrecv = q.cap.max_recv_wr;
	int full_tested = nrecv >= 1 && nrecv <= CQE - 16;
	if (full_tested) {
		struct ibv_recv_wr *r = calloc(nrecv + 1, sizeof *r), *rbad = NULL;
		check_ret(r != NULL, 1, __FILE__, __LINE__, "calloc", 0, 0, errno);
		for (uint32_t i = 0; i <= nrecv; i++) {
			r[i].wr_id = 0x5000 + i;
			r[i].next = i < nrecv ? &r[i + 1] : NULL;
		}
		FAILS(mrc_post_recv(p->qp[0], r, &rbad), ENOMEM);
		CHECK_PTR_EQ(rbad, &r[nrecv]);
		free(r);
	} else {
		nrecv = 2;
		OK(post_recv_id(p->qp[0], 0x5000));
		OK(post_recv_id(p->qp[0], 0x5001));
	}

	/* A Write with a bad rkey, two good ones after it: the first completes with a remote
	 * access error, the others flush, the QP is in ERROR. */
	struct async_wait aw = {.mctx = h[0].mctx, .qp = p->qp[0]};
	pthread_t waiter;
	check_ret(pthread_create(&waiter, NULL, async_waiter, &aw) == 0, 1, __FILE__, __LINE__,
		  "pthread_create", 0, 0, errno);
	struct ibv_sge sge[3];
	struct ibv_send_wr w[3];
	for (int k = 0; k < 3; k++) {
		sge[k] = sge_of(h[0].mr, h[0].buf + SRC, 256);
		w[k] = write_wr(0x601 + (uint64_t)k, &sge[k], 1, IBV_WR_RDMA_WRITE, &h[1],
				DST + 400000 + 256 * (size_t)k, 0, 0);
		w[k].next = k < 2 ? &w[k + 1] : NULL;
	}
	w[0].wr.rdma.rkey = h[1].mr->rkey ^ 0x5a5a0000u;
	if (w[0].wr.rdma.rkey == h[1].mr2->rkey)
		w[0].wr.rdma.rkey ^= 0x00a00000u;
	OK(mrc_post_send(p->qp[0], &w[0], &bad));
	memset(wc, 0, sizeof wc);
	if (WAIT_WCS(h[0].send_cq, wc, 3)) {
		CHECK_WC(wc[0], 0x601, IBV_WC_REM_ACCESS_ERR, -1, p->qpn[0]);
		CHECK_WC(wc[1], 0x602, IBV_WC_WR_FLUSH_ERR, -1, p->qpn[0]);
		CHECK_WC(wc[2], 0x603, IBV_WC_WR_FLUSH_ERR, -1, p->qpn[0]);
	}
	CHECK_STATE(p->qp[0], IBV_QPS_ERR);

	/* Its receives flushed, in order. */
	for (uint32_t i = 0; i < nrecv; i++) {
		memset(wc, 0, sizeof wc);
		if (!WAIT_WCS(h[0].recv_cq, wc, 1))
			break;
		CHECK_WC(wc[0], 0x5000 + (uint64_t)i, IBV_WC_WR_FLUSH_ERR, -1, p->qpn[0]);
	}
	NO_WC(h[0].recv_cq);

	/* Work posted to a QP in ERROR completes flushed. */
	w[2].next = NULL;
	w[2].wr_id = 0x604;
	OK(mrc_post_send(p->qp[0], &w[2], &bad));
	if (WAIT_WCS(h[0].send_cq, wc, 1))
		CHECK_WC(wc[0], 0x604, IBV_WC_WR_FLUSH_ERR, -1, p->qpn[0]);
	OK(post_recv_id(p->qp[0], 0x605));
	if (WAIT_WCS(h[0].recv_cq, wc, 1))
		CHECK_WC(wc[0], 0x605, IBV_WC_WR_FLUSH_ERR, -1, p->qpn[0]);
	NO_WC(h[0].send_cq);

	/* The context reports the QP's failure: IBV_EVENT_QP_FATAL for it. */
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += WAIT_MS / 1000;
	int joined = pthread_timedjoin_np(waiter, NULL, &until);
	if (joined != 0) {
		char seen[128];
		snprintf(seen, sizeof seen,
			 "mrc_get_async_event still blocked after %d s (%d other events got)",
			 WAIT_MS / 1000, aw.seen);
		CHECK_SEEN(0, seen);
		pthread_detach(waiter);
		async_stuck = 1;
	} else {
		check_ret(aw.rc == 0, 0, __FILE__, __LINE__, "mrc_get_async_event(h[0].mctx) == 0",
			  aw.rc, 0, aw.err);
		char seen[96];
		snprintf(seen, sizeof seen, "%d events, none IBV_EVENT_QP_FATAL for the QP", aw.seen);
		CHECK_SEEN(aw.found, seen);
	}
	struct mrc_async_event ev;
	FAILS(mrc_get_async_event(NULL, &ev), EINVAL);
	FAILS(mrc_get_async_event(h[1].mctx, NULL), EINVAL);

	/* ERROR -> RESET -> INIT: the QP is usable again. The peer can be moved to ERROR. */
	memset(&q, 0, sizeof q);
	q.qp_state = IBV_QPS_RESET;
	OK(mrc_modify_qp(p->qp[0], &q, IBV_QP_STATE, NULL, 0));
	CHECK_STATE(p->qp[0], IBV_QPS_RESET);
	int mask;
	q = init_vattr(&mask);
	OK(mrc_modify_qp(p->qp[0], &q, mask, NULL, 0));
	CHECK_STATE(p->qp[0], IBV_QPS_INIT);
	memset(&q, 0, sizeof q);
	q.qp_state = IBV_QPS_ERR;
	OK(mrc_modify_qp(p->qp[1], &q, IBV_QP_STATE, NULL, 0));
	CHECK_STATE(p->qp[1], IBV_QPS_ERR);
	end();
}

static void local_error(void)
{
	struct pair *p = &p3;
	struct ibv_send_wr *bad = NULL;
	struct ibv_wc wc;

	begin("local error");
	connect_pair(p, 0, NULL, 0);

	/* A gather entry with an lkey nobody registered: refused at post, or a failed
	 * completion that moves the QP to ERROR. Either way never a success. */
	struct ibv_sge sge = sge_of(h[0].mr, h[0].buf + SRC, 128);
	sge.lkey = h[0].mr->lkey ^ 0x00a50000u;
	if (sge.lkey == h[0].mr2->lkey)
		sge.lkey ^= 0x0a000000u;
	struct ibv_send_wr w = write_wr(0x701, &sge, 1, IBV_WR_RDMA_WRITE, &h[1], DST,
					IBV_SEND_SIGNALED, 0);
	errno = 0;
	int rc = mrc_post_send(p->qp[0], &w, &bad);
	int e = errno;
	int intact = 0;
	if (rc != 0) {
		check_ret(rc == -1 && e == EINVAL, 0, __FILE__, __LINE__,
			  "a bad lkey refused at post: -1 with EINVAL", rc, 0, e);
		CHECK_PTR_EQ(bad, &w);
		CHECK_STATE(p->qp[0], IBV_QPS_RTS);
		/* A good lkey but a range past the region's end: the same. */
		sge = sge_of(h[0].mr2, h[0].buf2 + BUF2_LEN - 64, 128);
		errno = 0;
		rc = mrc_post_send(p->qp[0], &w, &bad);
		e = errno;
		if (rc != 0) {
			check_ret(rc == -1 && e == EINVAL, 0, __FILE__, __LINE__,
				  "a range past the MR refused at post: -1 with EINVAL", rc, 0, e);
			CHECK_STATE(p->qp[0], IBV_QPS_RTS);
			intact = 1;
		} else {
			memset(&wc, 0, sizeof wc);
			if (WAIT_WCS(h[0].send_cq, &wc, 1))
				CHECK(wc.status != IBV_WC_SUCCESS);
			CHECK_STATE(p->qp[0], IBV_QPS_ERR);
		}
	} else {
		/* Then, as in libibverbs, an error completion moves the QP to ERROR. */
		memset(&wc, 0, sizeof wc);
		if (WAIT_WCS(h[0].send_cq, &wc, 1)) {
			CHECK_EQ(wc.wr_id, 0x701);
			CHECK_SEEN(wc.status != IBV_WC_SUCCESS, "a bad lkey completed successfully");
		}
		char seen[96];
		enum ibv_qp_state st = state_of(p->qp[0]);
		snprintf(seen, sizeof seen, "state %d after a completion with status %d (%s)", (int)st,
			 (int)wc.status, ibv_wc_status_str(wc.status));
		CHECK_SEEN(st == IBV_QPS_ERR, seen);
	}

	if (intact) {
		/* The pair still works; then a Write past the end of the peer's region fails
		 * remotely. */
		transfer(p, 0, DST, 1000, 50, 0, 0, 0x702, 0);
		sge = sge_of(h[0].mr, h[0].buf + SRC, 128);
		w = write_wr(0x703, &sge, 1, IBV_WR_RDMA_WRITE, &h[1], BUF_LEN - 64,
			     IBV_SEND_SIGNALED, 0);
		OK(mrc_post_send(p->qp[0], &w, &bad));
		memset(&wc, 0, sizeof wc);
		if (WAIT_WCS(h[0].send_cq, &wc, 1))
			CHECK_WC(wc, 0x703, IBV_WC_REM_ACCESS_ERR, -1, p->qpn[0]);
		CHECK_STATE(p->qp[0], IBV_QPS_ERR);
	}
	NO_WC(h[0].send_cq);
	end();
}

static void teardown(void)
{
	struct pair *pairs[] = {&p1, &p2, &p3};

	begin("teardown");
	/* What is in use cannot go. */
	FAILS(mrc_destroy_cq(h[0].send_cq), EBUSY);
	FAILS(mrc_destroy_cq(h[1].recv_cq), EBUSY);
	FAILS(mrc_destroy_comp_channel(h[1].chan), EBUSY);
	FAILS(mrc_destroy_qp_hint(hint0), EBUSY);
	FAILS(mrc_destroy_context(h[0].mctx), EBUSY);
	FAILS(mrc_destroy_context(h[1].mctx), EBUSY);
	IBV_FAILS(ibv_dealloc_pd(h[0].pd), EBUSY);

	/* Everything in order. */
	for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++)
		for (int s = 0; s < 2; s++)
			if (pairs[i]->qp[s])
				OK(mrc_destroy_qp(pairs[i]->qp[s]));
	OK(mrc_destroy_qp_hint(hint0));
	OK(mrc_destroy_qp_hint(hint1));
	for (int s = 0; s < 2; s++) {
		struct ibv_wc wc;
		/* Whatever the failed QPs left (nothing is expected). */
		while (mrc_poll_cq(h[s].send_cq, 1, &wc) > 0 || mrc_poll_cq(h[s].recv_cq, 1, &wc) > 0)
			;
		FAILS(mrc_destroy_context(h[s].mctx), EBUSY); /* its CQs and channel */
		OK(mrc_destroy_cq(h[s].send_cq));
		OK(mrc_destroy_cq(h[s].recv_cq));
		OK(mrc_destroy_comp_channel(h[s].chan));
		if (s == 0 && async_stuck)
			continue; /* a thread is blocked in mrc_get_async_event on it */
		OK(mrc_destroy_context(h[s].mctx));

		/* The verbs device outlives its MRC contexts. */
		struct mrc_device_attr a;
		int sup = 0;
		OK(mrc_query_device_ex(h[s].vctx, NULL, &a, &sup));
		CHECK(sup != 0);
	}
	for (int s = 0; s < 2; s++) {
		if (s == 0 && async_stuck)
			continue;
		IBV_FAILS(ibv_dealloc_pd(h[s].pd), EBUSY); /* its MRs */
		OK(ibv_dereg_mr(h[s].mr));
		OK(ibv_dereg_mr(h[s].mr2));
		OK(ibv_dealloc_pd(h[s].pd));
		OK(ibv_close_device(h[s].vctx));
		free(h[s].buf);
		free(h[s].buf2);
	}
	ibv_free_device_list(dev_list);
	end();
}

int main(void)
{
	keep_going = getenv("MRC_API_TEST_CONTINUE") &&
		     strcmp(getenv("MRC_API_TEST_CONTINUE"), "1") == 0;
	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGALRM, on_watchdog);
	alarm(WATCHDOG_S);

	versions();
	verbs_device();
	verbs_memory();
	query_device();
	context();
	channel();
	cq();
	qp_hints();
	qp_create();
	modify_qp();
	data();
	post_errors();
	events();
	remote_error();
	local_error();
	teardown();

	if (failures) {
		printf("mrc_api_test: FAILED (%u of %u checks)\n", failures, checks);
		return 1;
	}
	printf("mrc_api_test: ok (%u checks)\n", checks);
	return 0;
}
