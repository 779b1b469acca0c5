/*
 * mrc-rs: the OCP MRC application API, implemented by lib_mrc.so.
 *
 * Written for mrc-rs from the interface OCP publishes (opencomputeproject/
 * OCP-Multipath-Reliable-Connection, mrc.h, API version 1.0.1): the names, types,
 * constants, layouts and return conventions are that interface's, the text is ours.
 * What mrc-rs does where the interface leaves a choice to the provider is said here
 * and in docs/c-api.md. SPDX-License-Identifier: Apache-2.0 OR MIT
 *
 * Devices, protection domains and memory regions come from libibverbs
 * (ibv_get_device_list, ibv_open_device, ibv_alloc_pd, ibv_reg_mr). On a machine
 * without an RDMA NIC, mrc-rs's software verbs device (libibverbs.so next to
 * lib_mrc.so) provides them: its devices are mrc-rs NICs (docs/c-api.md).
 *
 * Return conventions: functions returning int give 0 on success and -1 with errno
 * set on failure; functions returning a pointer give NULL with errno set.
 */
#ifndef _MRC_API_H_
#define _MRC_API_H_

#include <stdint.h>
#include <infiniband/verbs.h>
#include <mrc_api_ver.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Size of the opaque per-vendor configuration blobs (ignored by mrc-rs). */
#define MRC_MAX_VENDOR_CFG_SIZE 128

/* Wire protocol versions: a device advertises a bitmap, a QP asks for one bit or 0
 * (the provider's default). mrc-rs speaks version 1. */
enum mrc_protocol_version {
	MRC_PROTOCOL_VERSION_0 = 0,
	MRC_PROTOCOL_VERSION_1 = 1 << 0,
};

struct mrc_context;
struct mrc_qp_hint;
struct mrc_qp;
struct mrc_cq;
struct mrc_comp_channel;

/* Device capabilities (mrc_device_attr.cap). */
enum mrc_device_cap {
	MRC_DEVICE_CAP_TRIM_NACK = 1 << 0,   /* NACKs trimmed packets */
	MRC_DEVICE_CAP_DYNAMIC_MPR = 1 << 1, /* responder can shrink its MPR */
	MRC_DEVICE_CAP_SVC_TIME = 1 << 2,    /* responder reports service time */
};

struct mrc_device_attr {
	uint32_t mrc_protocol_version; /* bitmap of enum mrc_protocol_version */
	struct {
		uint16_t max_wimm;      /* Write-with-Immediates in flight, requester */
		uint16_t max_wimm_dest; /* the same as responder */
	} wimm_attr;
	struct {
		uint8_t max_mpr;        /* largest MPR, in units of 128 PSNs */
		uint8_t mpr_resolution; /* MPR granularity, in units of 128 PSNs */
	} mpr_attr;
	struct {
		uint32_t max_qp_hint;
	} qp_attr;
	uint32_t cap; /* bitmap of enum mrc_device_cap */
};

/* Whether the verbs device is an MRC device (*supported != 0) and what it can do.
 * The _ex form (API 1.0.1) takes the MRC context too; it may be NULL. */
#if MRC_API_VER_USED >= MRC_API_VER(1, 0, 1)
int mrc_query_device_ex(struct ibv_context *context, struct mrc_context *mcontext,
			struct mrc_device_attr *attr, int *supported);
#endif
int mrc_query_device(struct ibv_context *context, struct mrc_device_attr *attr,
		     int *supported);

/* The API versions lib_mrc.so implements (callable before any context). */
void mrc_query_version(uint32_t *current_version, uint32_t *last_supported_version,
		       uint32_t *vendor_version,
		       uint32_t *last_supported_vendor_version);

/* Versions the application uses; 0 means "not said" (the latest is assumed). */
struct mrc_context_attr {
	uint32_t mrc_api_version_used;
	uint32_t mrc_vendor_api_version_used;
};

/* The parent of every MRC object made on a verbs context. context_attr may be NULL. */
struct mrc_context *mrc_create_context(struct ibv_context *vcontext,
				       struct mrc_context_attr *context_attr);
/* EBUSY while objects made from it are alive. */
int mrc_destroy_context(struct mrc_context *mrc_ctx);

/* Completion channels: a pollable file descriptor that becomes readable when a CQ
 * armed with mrc_req_notify_cq() gets a completion. */
int mrc_create_comp_channel(struct mrc_context *mrc_ctx,
			    struct mrc_comp_channel **channel);
int mrc_get_comp_channel_fd(struct mrc_comp_channel *channel, int *fd);
/* EBUSY while a CQ uses it. */
int mrc_destroy_comp_channel(struct mrc_comp_channel *channel);

/* Completion queues of at least cqe entries; channel may be NULL. */
struct mrc_cq *mrc_create_cq(struct mrc_context *mrc_ctx, int cqe, void *cq_context,
			     struct mrc_comp_channel *channel, int comp_vector);
/* Up to num_entries completions into wc[]: how many, or -1 (errno set). */
int mrc_poll_cq(struct mrc_cq *cq, int num_entries, struct ibv_wc *wc);
/* EBUSY while a QP uses it. */
int mrc_destroy_cq(struct mrc_cq *cq);

/* QP hints: the traffic a set of QPs expects. */
struct mrc_qp_hint_attr {
	int num_qps_per_peer;      /* QPs of this hint sending to one destination at once */
	int num_send_peers;        /* destinations they send to at once */
	int num_remote_recv_peers; /* remote QPs sending to this QP's destination (incast) */
	uint8_t vendor_cfg[MRC_MAX_VENDOR_CFG_SIZE];
};

enum mrc_qp_hint_attr_mask {
	MRC_QP_HINT_NUM_QPS_PER_PEER = 1 << 0,
	MRC_QP_HINT_NUM_SEND_PEERS = 1 << 1,
	MRC_QP_HINT_NUM_REMOTE_RECV_PEERS = 1 << 2,
	MRC_QP_HINT_VENDOR_CFG = 1 << 31
};

struct mrc_qp_hint_init_attr {
	struct mrc_qp_hint_attr attr;
};

struct mrc_qp_hint *mrc_create_qp_hint(struct mrc_context *mrc_ctx,
				       struct mrc_qp_hint_init_attr *init_attr);
/* EBUSY while a QP uses it. */
int mrc_destroy_qp_hint(struct mrc_qp_hint *qp_hint);
int mrc_query_qp_hint(struct mrc_qp_hint *qp_hint, struct mrc_qp_hint_attr *qp_hint_attr,
		      int qp_hint_attr_mask);
int mrc_modify_qp_hint(struct mrc_qp_hint *qp_hint, struct mrc_qp_hint_attr *qp_hint_attr,
		       int qp_hint_attr_mask);

struct mrc_qp_init_attr {
	void *qp_context;
	struct mrc_cq *send_cq;
	struct mrc_cq *recv_cq;
	struct ibv_qp_cap cap;
	int sq_sig_all;
	struct ibv_pd *pd;
	uint64_t send_ops_flags; /* enum ibv_qp_create_send_ops_flags */
	enum mrc_protocol_version protocol_version; /* one bit, or 0 for the default */
};

/* A QP in RESET. */
struct mrc_qp *mrc_create_qp(struct mrc_context *mrc_ctx,
			     struct mrc_qp_init_attr *mrc_qp_attr);
int mrc_destroy_qp(struct mrc_qp *qp);

/* MRC QP attributes (mrc_qp_attr_mask). What each transition takes:
 *   RESET -> INIT  MRC_QP_HINT, MRC_QP_EV_PROFILE_ID, MRC_QP_CC_PROFILE_ID
 *   INIT  -> RTR   MRC_QP_MAX_WIMM_DEST, MRC_QP_MPR_DEST, MRC_QP_CAP (dynamic MPR)
 *   RTR   -> RTS   MRC_QP_MAX_WIMM, MRC_QP_MPR, MRC_QP_RETRY_CNT, MRC_QP_TIMEOUT
 */
enum mrc_qp_attr_mask {
	MRC_QP_MAX_WIMM = 1 << 0,
	MRC_QP_MAX_WIMM_DEST = 1 << 1,
	MRC_QP_MPR = 1 << 2,
	MRC_QP_MPR_DEST = 1 << 3,
	MRC_QP_TIMEOUT = 1 << 4,
	MRC_QP_EV_PROFILE_ID = 1 << 5,
	MRC_QP_CC_PROFILE_ID = 1 << 6,
	MRC_QP_HINT = 1 << 7,
	MRC_QP_RETRY_CNT = 1 << 8,
	MRC_QP_CAP = 1 << 9,
	MRC_QP_VENDOR_CFG = 1 << 31
};

/* mrc_qp_attr.cap */
enum mrc_qp_cap {
	MRC_QP_CAP_TRIM_NACK_DEST_UNSUPPORTED = 1 << 0,
	MRC_QP_CAP_DYNAMIC_MPR = 1 << 1,
	MRC_QP_CAP_SVC_TIME_DEST_UNSUPPORTED = 1 << 2
};

struct mrc_qp_attr {
	struct {
		uint8_t mpr;      /* requester MPR, units of 128 PSNs */
		uint8_t mpr_dest; /* responder MPR, units of 128 PSNs */
	} mpr;
	struct {
		uint16_t max_wimm;      /* Write-with-Immediates in flight, requester */
		uint16_t max_wimm_dest; /* the same, responder */
	} wimm;
	uint8_t timeout; /* ACK timeout: 1.024 us * 2^timeout, at most 24 (17.2 s) */
	struct {
		uint64_t ev_profile_id; /* set by the controller (mrc_ctl.h), 0: default */
		uint64_t cc_profile_id;
	} profile;
	struct {
		uint8_t linear_cnt; /* fixed-interval retries, at most 7 */
		uint8_t exp_cnt;    /* exponential-backoff retries, at most 25 (25: forever) */
	} retry;
	struct mrc_qp_hint *qp_hint; /* NULL: none */
	uint32_t cap;                /* bitmap of enum mrc_qp_cap */
	uint8_t vendor_cfg[MRC_MAX_VENDOR_CFG_SIZE];
};

/* The QP's verbs attributes (vattr_mask), MRC attributes (mrc_attr_mask) and creation
 * attributes (init_attr, may be NULL). */
int mrc_query_qp(struct mrc_qp *qp, struct ibv_qp_attr *vattr, int vattr_mask,
		 struct mrc_qp_attr *mrc_attr, int mrc_attr_mask,
		 struct mrc_qp_init_attr *init_attr);

/* Moves the QP (IBV_QP_STATE; IBV_QP_CUR_STATE asserts the current state) with the
 * verbs and MRC attributes of that transition. The ibverbs attributes MRC replaces or
 * does not have (IBV_QP_PORT, IBV_QP_TIMEOUT, IBV_QP_RETRY_CNT, IBV_QP_RNR_RETRY,
 * IBV_QP_MIN_RNR_TIMER, IBV_QP_MAX_QP_RD_ATOMIC, IBV_QP_MAX_DEST_RD_ATOMIC,
 * IBV_QP_ALT_PATH, IBV_QP_PATH_MIG_STATE) are not supported: mrc-rs accepts and ignores
 * them, as verbs programs (OCP's example among them) set them. IBV_QP_AV: the destination
 * GID (the peer NIC's IPv6 address) is what counts; the source GID is the context's.
 * RTR needs IBV_QP_AV, IBV_QP_DEST_QPN and IBV_QP_RQ_PSN; RTS needs IBV_QP_SQ_PSN. */
int mrc_modify_qp(struct mrc_qp *qp, struct ibv_qp_attr *vattr, int vattr_mask,
		  struct mrc_qp_attr *mrc_attr, int mrc_attr_mask);

int mrc_get_qpn(struct mrc_qp *qp, uint32_t *qpn);

/* Receives, each consumed by one incoming Write-with-Immediate (MRC has no RNR: post
 * them ahead). Their scatter lists are not used (a Write places its own payload). */
int mrc_post_recv(struct mrc_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr);

/* IBV_WR_RDMA_WRITE and IBV_WR_RDMA_WRITE_WITH_IMM; any other opcode is refused with
 * EINVAL and *bad_wr pointing at it. */
int mrc_post_send(struct mrc_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr);

struct mrc_async_event {
	union {
		struct mrc_cq *cq;
		struct mrc_qp *qp;
		int port_num;
	} element;
	enum ibv_event_type event_type;
};

/* Blocks until the context has an event (IBV_EVENT_PORT_ERR / IBV_EVENT_PORT_ACTIVE for
 * a plane's link, IBV_EVENT_QP_FATAL for a QP that moved to ERROR). */
int mrc_get_async_event(struct mrc_context *mrc_ctx, struct mrc_async_event *event);
void mrc_ack_async_event(struct mrc_async_event *event);

/* Arms the CQ: its channel becomes readable at the next completion. */
int mrc_req_notify_cq(struct mrc_cq *cq, int solicited_only);
/* Blocks (or fails with EAGAIN on a non-blocking fd) until an armed CQ of the channel
 * had a completion. */
int mrc_get_cq_event(struct mrc_comp_channel *channel, struct mrc_cq **cq,
		     void **cq_context);
/* mrc_destroy_cq() waits until every event got was acknowledged. */
void mrc_ack_cq_events(struct mrc_cq *cq, unsigned int nevents);

#ifdef __cplusplus
}
#endif

#endif /* _MRC_API_H_ */
