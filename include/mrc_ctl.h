/*
 * mrc-rs: the OCP MRC controller API, implemented by lib_mrc.so.
 *
 * Written for mrc-rs from the interface OCP publishes (opencomputeproject/
 * OCP-Multipath-Reliable-Connection, mrc_ctl.h, controller API version 1.0.1):
 * the names, types, constants, layouts and return conventions are that
 * interface's, the text is ours. SPDX-License-Identifier: Apache-2.0 OR MIT
 *
 * A network controller configures the EV (entropy value) and CC (congestion
 * control) profiles that applications name by id when they move a QP to INIT
 * (mrc_qp_attr.ev_profile_id / cc_profile_id), and administers ports. It works
 * on an mrc_context like an application.
 *
 * What mrc-rs implements:
 *   - mrc_ctl_query_version, mrc_ctl_query_device(_ex);
 *   - EV Format profiles: STEV and UDP (ECMP devices), SRv6 (SRv6 devices);
 *   - EV profiles in AUTO, EXP and GEN modes, their fields, and the EV
 *     operations REPLACE_EV, MODIFY_EV_STATE (DENIED / GOOD), QUERY_EV_STATE,
 *     QUERY_EV_ARRAY;
 *   - EV event CQs (MRC_CTL_OPT_CAP_EV_EVENT, precise drop counts);
 *   - CC profiles with algorithm "uet-1.0-nscc" (struct mrc_ctl_cc_nscc_cfg);
 *   - port administrative state (in-memory devices only).
 * Endpoint requests (mrc_ctl_ep_batch_send_wait) fail with -1 / EOPNOTSUPP.
 *
 * Where profiles live: the software device's NIC runs inside each application
 * process, so profiles are node-wide files in the directory $MRC_CTL_DIR
 * (default /run/mrc-rs/ctl when writable, else <tmp>/mrc-rs-ctl), one file per
 * profile (fmt-<id>, ev-<id>, cc-<id>), replaced atomically. Every device of
 * the node sees the same profiles. An application's QP reads its profile at
 * INIT: it must then be ONLINE (else EINVAL). The QP keeps the EVs and
 * parameters it got; later changes apply to QPs initialised afterwards, except
 * EV states: a DENIED (or GOOD again) EV of an ONLINE profile reaches the QPs
 * using it within a few milliseconds (each device's watcher thread re-reads
 * the directory when it changes). Id 0 is the device's default profile and
 * cannot be configured (EINVAL).
 *
 * Return conventions: 0 on success, -1 with errno set on failure, unless a
 * function says otherwise.
 */
#ifndef _MRC_CTL_API_H_
#define _MRC_CTL_API_H_

#include <stdint.h>
#include <infiniband/verbs.h>

#include <mrc.h>
#include <mrc_ctl_api_ver.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Size of the opaque per-vendor configuration blobs (ignored by mrc-rs). */
#define MRC_CTL_MAX_VENDOR_CFG_SIZE 128

/* An EV entry nobody filled in. */
#define MRC_CTL_EV_UNPOPULATED ((struct mrc_ctl_ev){ .val = { 0 }, .port = 0 })

/* Bytes of an EV value. */
#define MRC_CTL_EV_MAX_BYTES 32

/* Controller protocol versions (a bitmap in mrc_ctl_device_attr). */
enum mrc_ctl_protocol_version {
	MRC_CTL_PROTOCOL_VERSION_0 = 0,
	MRC_CTL_PROTOCOL_VERSION_1 = 1 << 0,
};

/* The life of every profile: INIT (exists, unconfigured) -> OFFLINE
 * (configured, not usable, modifiable) -> ONLINE (usable by QPs), and back
 * ONLINE -> OFFLINE -> INIT. mrc-rs: every id not configured yet is in INIT;
 * going back to INIT forgets the configuration. */
enum mrc_ctl_profile_state {
	MRC_CTL_PROFILE_INIT,
	MRC_CTL_PROFILE_OFFLINE,
	MRC_CTL_PROFILE_ONLINE,
};

/* ---- Device ------------------------------------------------------------- */

/* Optional features (mrc_ctl_device_attr.opt_attr). */
enum mrc_ctl_attr_opt {
	MRC_CTL_OPT_CAP_EV_PROFILE_MODIFY_ONLINE = 1 << 0,
	MRC_CTL_OPT_CAP_CC_PROFILE_MODIFY_ONLINE = 1 << 1,
	MRC_CTL_OPT_CAP_EV_EVENT = 1 << 2,
	MRC_CTL_OPT_CAP_EV_EXPLICIT_RANGE = 1 << 3,
	MRC_CTL_OPT_CAP_EV_EVENT_PRECISE_DROP_CNT = 1 << 4,
	MRC_CTL_OPT_CAP_EP_OP_EV_PROBE = 1 << 5,
};

/* What the device offers a controller. */
struct mrc_ctl_device_attr {
	/* Bitmap of enum mrc_ctl_protocol_version. */
	uint32_t mrc_ctl_protocol_version;

	struct {
		uint32_t ev_max_fmt_profiles;
		uint32_t ev_max_profiles;
		/* EVs over all profiles, and how many are still free. */
		uint32_t ev_max_count;
		uint32_t ev_free_count;
		/* Largest ev_count of one profile. */
		uint32_t ev_max_count_profile;
		/* ev_count is rounded up to a multiple of this (mrc-rs: the
		 * number of planes; EVs are spread evenly over them). */
		uint32_t ev_count_align;
		/* Valid bits of an EV value. */
		uint32_t ev_max_width;
		/* Bitmaps of enum mrc_ctl_ev_fmt_mode / enum mrc_ctl_ev_mode
		 * (mrc-rs: STEV and UDP on an ECMP device, SRv6 on an SRv6
		 * one / AUTO, EXP and GEN). */
		uint32_t ev_fmt_mode_mask;
		uint32_t ev_mode_mask;
		/* Largest EV operation batch; 0 = no limit. */
		uint32_t ev_op_max_entries;
	} ev;

	struct {
		uint32_t cc_max_profiles;
		/* NULL-terminated list of algorithm names, owned by the
		 * library (mrc-rs: "uet-1.0-nscc"). */
		const char **algorithms;
	} cc;

	/* Bit N set: physical port N (1-based, as ibv_query_port) belongs to
	 * this device. mrc-rs: one port per plane. */
	uint32_t phy_port_mask;

	/* Bitmap of enum mrc_ctl_attr_opt (mrc-rs: EV_EVENT and
	 * EV_EVENT_PRECISE_DROP_CNT). */
	uint32_t opt_attr;
};

/* Whether the device behind `context` is an MRC device (*supported non-zero)
 * and its controller attributes. `mcontext` may be NULL; if given it must
 * have been made from `context`. A verbs device of another provider gives
 * *supported = 0 and zeroed attributes. */
#if MRC_CTL_API_VER_USED >= MRC_CTL_API_VER(1, 0, 1)
int mrc_ctl_query_device_ex(struct ibv_context *context,
			    struct mrc_context *mcontext,
			    struct mrc_ctl_device_attr *ctl_attr,
			    int *supported);
#endif
/* Version 1.0.0 form: fails with ENODEV on a device that is not MRC. */
int mrc_ctl_query_device(struct ibv_context *context,
			 struct mrc_ctl_device_attr *ctl_attr);

/* The controller API versions this library implements (independent of
 * mrc_query_version's). NULL outputs are skipped. Callable before any
 * context exists. */
void mrc_ctl_query_version(uint32_t *current_version,
			   uint32_t *last_supported_version,
			   uint32_t *vendor_version,
			   uint32_t *last_supported_vendor_version);

/* ---- Ports -------------------------------------------------------------- */

enum mrc_ctl_port_admin_state {
	MRC_CTL_PORT_ADMIN_DISABLED = 0,
	MRC_CTL_PORT_ADMIN_ENABLED = 1,
};

enum mrc_ctl_port_attr_mask {
	MRC_CTL_PORT_ADMIN_STATE = 1 << 0,
};

/* A disabled port reads IBV_PORT_DOWN in ibv_query_port. */
struct mrc_ctl_port_attr {
	enum mrc_ctl_port_admin_state port_admin_state;
};

/* The administrative state this process set on `port_num` (1-based;
 * ENABLED unless mrc_ctl_modify_port disabled it). EINVAL: bad context,
 * port, mask or NULL attr. */
int mrc_ctl_query_port(struct mrc_context *context, uint8_t port_num,
		       struct mrc_ctl_port_attr *attr, int attr_mask);

/* Enables or disables a port (its plane's link goes down / up; QPs move
 * their traffic to the other planes). mrc-rs: in-memory devices only,
 * EOPNOTSUPP on DPDK ones. EINVAL: bad context, port, mask or state. */
int mrc_ctl_modify_port(struct mrc_context *context, uint8_t port_num,
			struct mrc_ctl_port_attr *attr, int attr_mask);

/* ---- EV Format profiles ---------------------------------------------------- */

/* Where an EV goes in a packet: IPv6 flow label + UDP source port (STEV),
 * SRv6 uSIDs, or the UDP source port alone. */
enum mrc_ctl_ev_fmt_mode {
	MRC_CTL_EV_FMT_MODE_STEV = 1 << 0,
	MRC_CTL_EV_FMT_MODE_SRV6 = 1 << 1,
	MRC_CTL_EV_FMT_MODE_UDP = 1 << 2,
};

enum mrc_ctl_ev_fmt_op {
	MRC_CTL_EV_FMT_OP_MODIFY_FIELDS,
	MRC_CTL_EV_FMT_OP_QUERY_FIELDS,
};

enum mrc_ctl_ev_fmt_profile_attr_mask {
	MRC_CTL_EV_FMT_PROFILE_STATE = 1 << 0,
	MRC_CTL_EV_FMT_PROFILE_CUR_STATE = 1 << 1,
	MRC_CTL_EV_FMT_PROFILE_MODE = 1 << 2,
	MRC_CTL_EV_FMT_PROFILE_OP = 1 << 3,
	MRC_CTL_EV_FMT_VENDOR_CFG = 1 << 31,
};

struct mrc_ctl_ev_fmt_field {
	uint8_t width; /* bits */
};

struct mrc_ctl_ev_fmt_profile_attr {
	enum mrc_ctl_profile_state profile_state;     /* move to */
	enum mrc_ctl_profile_state cur_profile_state; /* current */
	enum mrc_ctl_ev_fmt_mode ev_fmt_mode;
	struct {
		enum mrc_ctl_ev_fmt_op op;
		struct mrc_ctl_ev_fmt_field *fmt_fields;
		int fmt_field_count; /* in: array length; out: needed */
	} ev_fmt_op;
	uint8_t vendor_cfg[MRC_CTL_MAX_VENDOR_CFG_SIZE];
};

/* Configures EV Format profile `ev_fmt_profile_id` (not 0; id 0 names the
 * device's own format: STEV as two 16-bit fields on an ECMP device, SRv6 as a
 * 32-bit locator and six 16-bit uSIDs on an SRv6 one). Same life as the other
 * profiles: INIT -> OFFLINE needs MODE; OFFLINE -> ONLINE needs the fields
 * (OP with MRC_CTL_EV_FMT_OP_MODIFY_FIELDS: 1 to 32 fields of 1-128 bits,
 * summing to at most 32 bits for STEV, 16 for UDP, 256 for SRv6; E2BIG past
 * that). MODE and MODIFY_FIELDS only in INIT or OFFLINE (EINVAL when ONLINE);
 * QUERY_FIELDS fills the caller's array (E2BIG and the needed count in
 * fmt_field_count when it is short). ONLINE -> OFFLINE: EBUSY while an ONLINE
 * EV profile names it. */
int mrc_ctl_modify_ev_fmt_profile(struct mrc_context *mrc_ctx,
				  uint64_t ev_fmt_profile_id,
				  struct mrc_ctl_ev_fmt_profile_attr *attr,
				  int attr_mask);
/* Reports STATE / CUR_STATE, MODE and, with OP (QUERY_FIELDS only; EINVAL
 * otherwise), the fields. */
int mrc_ctl_query_ev_fmt_profile(struct mrc_context *mrc_ctx,
				 uint64_t ev_fmt_profile_id,
				 struct mrc_ctl_ev_fmt_profile_attr *attr,
				 int attr_mask);

/* ---- EVs ------------------------------------------------------------------ */

/* An EV value: STEV uses the first 4 bytes; SRv6 an address in bytes 0-15
 * and a single-segment SRH address in bytes 16-31.
 * mrc-rs: a compact EV is expanded through the EV profile's fields as OCP's
 * examples/ev_expansion does (bits read from the most significant bit of
 * byte 0, field values packed the same way); a profile without fields uses its
 * EVs as they are. The expanded STEV is a 32-bit EV in network byte order
 * (bytes 0-3: EV[15:0] goes in the UDP source port, EV[31:16] in the flow
 * label); UDP is a 16-bit source port in bytes 0-1 (flow label 0); SRv6 is the
 * outer destination address and, when bytes 16-31 are not zero, the SRH
 * segment (`mrc-fabric paths PLAN --from H --to H --evs` prints a plan's paths
 * in this form). */
typedef uint8_t mrc_ctl_ev_t[MRC_CTL_EV_MAX_BYTES];

/* An EV and the port (1-based) it leaves by. */
struct mrc_ctl_ev {
	mrc_ctl_ev_t val;
	uint8_t port;
};

enum mrc_ctl_ev_state {
	MRC_CTL_EV_GOOD = 1 << 0,
	MRC_CTL_EV_ASSUMED_BAD = 1 << 1,
	MRC_CTL_EV_DENIED = 1 << 2,
	MRC_CTL_EV_UNKNOWN = 1 << 31,
};

/* ---- EV profiles ---------------------------------------------------------- */

/* AUTO: the provider picks the EVs (mrc-rs: its own EV selection over every
 * plane); EXP: the controller lists them; GEN: the provider generates them
 * from the controller's fields (mrc-rs: when the profile goes ONLINE, each
 * field's bits drawn in min_val..max_val, distinct while the fields allow it,
 * EV i leaving by port i % planes + 1). */
enum mrc_ctl_ev_mode {
	MRC_CTL_EV_MODE_AUTO = 1 << 0,
	MRC_CTL_EV_MODE_EXP = 1 << 1,
	MRC_CTL_EV_MODE_GEN = 1 << 2,
};

enum mrc_ctl_ev_op {
	MRC_CTL_EV_OP_REPLACE_EV,
	MRC_CTL_EV_OP_MODIFY_EV_STATE,
	MRC_CTL_EV_OP_QUERY_EV_STATE,
	MRC_CTL_EV_OP_QUERY_EV_ARRAY,
};

enum mrc_ctl_ev_fields_op {
	MRC_CTL_EV_FIELDS_OP_MODIFY_FIELDS,
	MRC_CTL_EV_FIELDS_OP_QUERY_FIELDS,
};

enum mrc_ctl_ev_profile_attr_mask {
	MRC_CTL_EV_PROFILE_STATE = 1 << 0,
	MRC_CTL_EV_PROFILE_CUR_STATE = 1 << 1,
	MRC_CTL_EV_PROFILE_MODE = 1 << 2,
	MRC_CTL_EV_PROFILE_FMT_ID = 1 << 3,
	MRC_CTL_EV_PROFILE_COUNT = 1 << 4,
	MRC_CTL_EV_PROFILE_MIN_ACTIVE = 1 << 5,
	MRC_CTL_EV_PROFILE_EVENT_MASK = 1 << 6,
	MRC_CTL_EV_PROFILE_EV_OP = 1 << 7,
	MRC_CTL_EV_PROFILE_EV_FIELDS_OP = 1 << 8,
	MRC_CTL_EV_PROFILE_VENDOR_CFG = 1 << 31,
};

/* One field of a generated or explicit EV: `width` bits (at most 32 and at
 * most its EV Format field's), `init_val` with the EV's next bits laid over
 * the bits set in `mask`; GEN draws those bits in min_val..max_val. */
struct mrc_ctl_ev_field {
	uint32_t width;    /* bits */
	uint32_t init_val; /* value before the EV bits are laid in */
	uint32_t min_val;  /* range of generated values */
	uint32_t max_val;
	uint32_t mask;     /* where the EV's bits go */
};

enum mrc_ctl_ev_op_flags {
	MRC_CTL_EV_OP_F_ALL_COPIES = 1 << 0,
};

/* One entry of an EV operation:
 *   REPLACE_EV       ev, ev_new and state (GOOD or DENIED) in; flags may
 *                    hold MRC_CTL_EV_OP_F_ALL_COPIES (else the first copy);
 *   MODIFY_EV_STATE  ev and state (DENIED, or GOOD to lift a deny) in;
 *   QUERY_EV_STATE   ev in, state out;
 *   QUERY_EV_ARRAY   ev and state out, for each EV of the array. */
struct mrc_ctl_ev_op_entry {
	struct mrc_ctl_ev ev;
	struct mrc_ctl_ev ev_new;
	enum mrc_ctl_ev_state state;
	uint32_t flags;
};

struct mrc_ctl_ev_profile_attr {
	enum mrc_ctl_profile_state profile_state;     /* move to */
	enum mrc_ctl_profile_state cur_profile_state; /* current */
	enum mrc_ctl_ev_mode ev_mode;
	/* mrc-rs: kept and reported, unused in AUTO mode. */
	uint64_t ev_fmt_profile_id;
	/* EVs of a QP using the profile, over all planes. mrc-rs rounds it up
	 * to a multiple of ev_count_align; 0 = the device's default. */
	uint32_t ev_count;
	/* EVs a QP keeps active however many look bad (at most ev_count);
	 * 0 = the device's default. */
	uint32_t ev_min_active;
	/* EV states to report as events: MRC_CTL_EV_GOOD and/or
	 * MRC_CTL_EV_ASSUMED_BAD (EINVAL for other bits). mrc-rs also takes it
	 * while the profile is ONLINE. */
	int ev_event_mask;
	struct {
		enum mrc_ctl_ev_op op;
		struct mrc_ctl_ev_op_entry *entries;
		int entry_count; /* in: array length; out: needed */
	} ev_op;
	struct {
		enum mrc_ctl_ev_fields_op op;
		struct mrc_ctl_ev_field *fields;
		int field_count; /* in: array length; out: needed */
	} ev_fields_op;
	uint8_t vendor_cfg[MRC_CTL_MAX_VENDOR_CFG_SIZE];
};

/* Configures EV profile `ev_profile_id` (not 0). In this order: the
 * attributes in the mask; EV_FIELDS_OP; a move INIT -> OFFLINE; EV_OP; any
 * other move of MRC_CTL_EV_PROFILE_STATE.
 *   INIT -> OFFLINE needs the mode; EXP and GEN also FMT_ID (0: the device's
 *     own format) and COUNT, GEN also its fields. An EXP profile's array is
 *     then COUNT unpopulated EVs.
 *   OFFLINE -> ONLINE: AUTO needs nothing more (COUNT, MIN_ACTIVE default to
 *     the device's); EXP needs every EV populated (REPLACE_EV); GEN generates
 *     its EVs. ONLINE -> OFFLINE; OFFLINE -> INIT forgets the configuration.
 *     Other moves: EINVAL.
 *   MODE, FMT_ID, COUNT, MIN_ACTIVE and MODIFY_FIELDS change only in INIT or
 *     OFFLINE; REPLACE_EV only in OFFLINE (EINVAL when ONLINE:
 *     MRC_CTL_OPT_CAP_EV_PROFILE_MODIFY_ONLINE is not offered).
 *     MODIFY_EV_STATE works OFFLINE and ONLINE.
 *   EV_OP and EV_FIELDS_OP together: EINVAL. The query operations work here
 *     too. An EV operation stops at the first failing entry (ENOENT: an ev
 *     not in the array; EINVAL: a bad state, port or flag); the entries
 *     before it took effect.
 *   CUR_STATE, if set, must be the current state (EINVAL). VENDOR_CFG:
 *     ignored.
 * An EXP/GEN profile's format must be the device's when a QP takes it (SRv6
 * on an SRv6 device, STEV or UDP on an ECMP one; else EINVAL at INIT), and
 * every EV leaves by a port the device has. Its EVs are all active; at least
 * ev_min_active stay active however many look bad.
 * Errors: EINVAL bad argument or move, E2BIG too many fields, ENOENT, EBUSY,
 * EIO the profile directory cannot be written. */
int mrc_ctl_modify_ev_profile(struct mrc_context *mrc_ctx,
			      uint64_t ev_profile_id,
			      struct mrc_ctl_ev_profile_attr *attr,
			      int attr_mask);

/* Reports the attributes in the mask (STATE and CUR_STATE both give the
 * current state; COUNT of an EXP/GEN profile is its array's length). EV_OP
 * takes QUERY_EV_STATE and QUERY_EV_ARRAY (E2BIG and the needed count in
 * ev_op.entry_count when the array is short; AUTO profiles have no array:
 * EINVAL); EV_FIELDS_OP takes QUERY_FIELDS. An EV's state: DENIED if the
 * controller denied it, ASSUMED_BAD if a QP of a live process holds it so,
 * else GOOD (UNKNOWN for an unpopulated entry). */
int mrc_ctl_query_ev_profile(struct mrc_context *mrc_ctx,
			     uint64_t ev_profile_id,
			     struct mrc_ctl_ev_profile_attr *attr,
			     int attr_mask);

/* ---- CC profiles ---------------------------------------------------------- */

enum mrc_ctl_cc_profile_attr_mask {
	MRC_CTL_CC_PROFILE_STATE = 1 << 0,
	MRC_CTL_CC_PROFILE_CUR_STATE = 1 << 1,
	MRC_CTL_CC_PROFILE_ALGORITHM = 1 << 2,
	MRC_CTL_CC_PROFILE_CONFIG = 1 << 3,
	MRC_CTL_CC_PROFILE_VENDOR_CFG = 1 << 31,
};

struct mrc_ctl_cc_profile_attr {
	enum mrc_ctl_profile_state profile_state;     /* move to */
	enum mrc_ctl_profile_state cur_profile_state; /* current */
	/* One of mrc_ctl_device_attr.cc.algorithms, or NULL: no congestion
	 * control (mrc-rs: a fixed window of one bandwidth-delay product).
	 * Queried: a string owned by the library. */
	const char *algorithm;
	/* The algorithm's configuration: struct mrc_ctl_cc_nscc_cfg for
	 * "uet-1.0-nscc". Queried with MRC_CTL_CC_PROFILE_CONFIG: the caller
	 * points it at a struct mrc_ctl_cc_nscc_cfg, which is filled in. */
	const void *cc_config;
	uint8_t vendor_cfg[MRC_CTL_MAX_VENDOR_CFG_SIZE];
};

/* NSCC (UET 1.0) parameters. mrc-rs: a zero field (other than disable_qa)
 * means "the device's default", derived from the path as the engine does. */
struct mrc_ctl_cc_nscc_cfg {
	uint8_t disable_qa;               /* non-zero: no Quick Adapt */
	uint32_t adjust_bytes_threshold;  /* bytes */
	uint32_t adjust_period_threshold; /* ns */
	uint32_t base_rtt;                /* ns */
	float eta;                        /* bytes per adjust period */
	float fi;                         /* fair increase, bytes */
	float fi_scale;                   /* fast increase fraction */
	float gamma;                      /* multiplicative decrease gain */
	float max_md_jump;                /* largest decrease fraction */
	uint32_t max_cwnd;                /* bytes */
	uint8_t qa_gate;                  /* Quick Adapt gate, shift */
	uint32_t qa_threshold;            /* ns */
	uint32_t target_delay;            /* ns */
};

/* Configures CC profile `cc_profile_id` (not 0). The attributes in the mask
 * are applied, then MRC_CTL_CC_PROFILE_STATE moves the profile:
 *   INIT -> OFFLINE needs the algorithm (ALGORITHM in this call or before;
 *     unknown names: EINVAL); OFFLINE -> ONLINE needs the configuration
 *     (CONFIG, unless the algorithm is NULL); ONLINE -> OFFLINE;
 *     OFFLINE -> INIT forgets the configuration. Other moves: EINVAL.
 *   ALGORITHM and CONFIG change only in INIT or OFFLINE (EINVAL when ONLINE:
 *     MRC_CTL_OPT_CAP_CC_PROFILE_MODIFY_ONLINE is not offered).
 *   CUR_STATE, if set, must be the current state (EINVAL).
 *   VENDOR_CFG: ignored.
 * Errors: EINVAL bad argument or move, EIO the profile directory cannot be
 * written. */
int mrc_ctl_modify_cc_profile(struct mrc_context *mrc_ctx,
			      uint64_t cc_profile_id,
			      struct mrc_ctl_cc_profile_attr *attr,
			      int attr_mask);

/* Reports the attributes in the mask (see struct mrc_ctl_cc_profile_attr for
 * CONFIG). */
int mrc_ctl_query_cc_profile(struct mrc_context *mrc_ctx,
			     uint64_t cc_profile_id,
			     struct mrc_ctl_cc_profile_attr *attr,
			     int attr_mask);

/* ---- EV events ------------------------------------------------------------ */

struct mrc_ctl_ev_event {
	uint64_t profile_id;
	struct mrc_ctl_ev ev;
	/* Events lost before this one (or non-zero if any, without
	 * MRC_CTL_OPT_CAP_EV_EVENT_PRECISE_DROP_CNT). */
	uint32_t drop_count;
#if MRC_CTL_API_VER_USED >= MRC_CTL_API_VER(1, 0, 1)
	enum mrc_ctl_ev_state state;
#endif
};

/* A CQ of EV events: every NIC of the node (any process) that uses an EXP or
 * GEN profile reports to it when one of its EVs goes ASSUMED_BAD (the first
 * QP of that NIC to retire it) or GOOD again (the last), if the profile's
 * ev_event_mask asks for that state. It holds `cqe` events; more are dropped
 * and counted in the next event's drop_count (precise). It is destroyed with
 * mrc_destroy_cq and armed with mrc_req_notify_cq on its channel; mrc_poll_cq
 * refuses it (EINVAL), as QPs do. mrc-rs: a Unix datagram socket evq-<pid>.<n>
 * in the profile directory. The 1.0.1 layout of struct mrc_ctl_ev_event (with
 * `state`) is written: build controllers with MRC_CTL_API_VER_USED >= 1.0.1
 * (the default). */
struct mrc_cq *mrc_ctl_create_ev_event_cq(struct mrc_context *mrc_ctx,
					  int cqe, void *cq_context,
					  struct mrc_comp_channel *channel,
					  int comp_vector);

/* Returns the number of events written (0 when none waits), or a negative
 * errno (-EINVAL: not an EV event CQ, num_entries < 0, NULL ev_event). */
int mrc_ctl_poll_ev_event(struct mrc_cq *ev_cq, int num_entries,
			  struct mrc_ctl_ev_event *ev_event);

/* ---- Endpoint requests: not supported by mrc-rs --------------------------- */
/* (The engine's QPs probe their own EVs and tell their peers their port
 * status; a controller cannot send these requests itself.) */

enum mrc_ctl_ep_op_type {
	MRC_CTL_EP_OP_EV_PROBE,
	MRC_CTL_EP_OP_PORT_STATUS_UPDATE,
};

struct mrc_ctl_ep_req {
	uint16_t req_id;    /* unique among outstanding requests */
	union ibv_gid sgid; /* RoCE v2 GIDs */
	union ibv_gid dgid;
	enum mrc_ctl_ev_fmt_mode ev_fmt_mode;
	struct mrc_ctl_ev req_ev;
	union {
		struct {
			uint32_t port_status; /* bit per port, 1-based */
		} port_status_update;
	} op;
};

struct mrc_ctl_ep_rsp {
	uint16_t req_id;
	uint8_t port;          /* 1-based */
	unsigned int rtt;      /* ns */
	uint8_t adj_svc_time;  /* non-zero: rtt excludes responder time */
};

/* mrc-rs: -1, errno EOPNOTSUPP. */
int mrc_ctl_ep_batch_send_wait(struct mrc_context *mrc_ctx, uint8_t req_tc,
			       enum mrc_ctl_ep_op_type op_type,
			       struct mrc_ctl_ep_req *req, int num_req,
			       uint32_t rsp_timeout,
			       struct mrc_ctl_ep_rsp *rsp, int *num_rsp);

#ifdef __cplusplus
}
#endif

#endif /* _MRC_CTL_API_H_ */
