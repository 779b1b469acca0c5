/*
 * mrc_ctl_test: the controller API of include/mrc_ctl.h as OCP's controller examples use it,
 * with a controller and an application in two processes, as on a real node.
 *
 * The controller (a child process, its own mrc_mem0) configures EV Format profiles and EXP,
 * GEN and SRv6 EV profiles (success and error paths), opens an EV event CQ on a completion
 * channel and waits on its fd. The application (the parent, mrc_mem0 and mrc_mem1 of its own
 * in-memory fabric) connects a QP pair with the controller's EXP profile and moves data over
 * it, then disables port 1: the controller must get an ASSUMED_BAD event for each of the
 * profile's EVs on port 1 and read them ASSUMED_BAD with QUERY_EV_STATE; the application
 * enables the port again: GOOD events for the same EVs. Then the controller denies an EV and
 * lifts the deny, and both tear down. The profile directory ($MRC_CTL_DIR) is the test's.
 *
 * Output: one line per group of checks, each event as it comes, then
 * "mrc_ctl_test: ok (N checks)" (both processes' checks). Written for mrc-rs from
 * include/mrc_ctl.h and docs/c-api.md. SPDX-License-Identifier: Apache-2.0 OR MIT
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mrc_ctl.h"

#define CHECK_PROG "mrc_ctl_test"
#include "check.h"

#define FMT_STEV 13
#define FMT_UDP 14
#define FMT_SRV6 15
#define EV_EXP 1
#define EV_GEN 2
#define EV_SRV6 3
#define EXP_COUNT 8 /* 4 EVs on each of the 2 ports */
#define GEN_COUNT 16
#define LEN 65536

/* The controller's and the application's pipes: to_app[1] -> app, to_ctl[1] -> controller. */
static int to_app[2], to_ctl[2];

static void say(int fd, char c)
{
	if (write(fd, &c, 1) != 1)
		_exit(3);
}

/* The next message, or 0 after `ms` (or a closed pipe). */
static char hear(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	char c = 0;
	if (poll(&p, 1, ms) == 1 && read(fd, &c, 1) == 1)
		return c;
	return 0;
}

/* The STEV value i of the EXP profile: 0x00c0ffNN in network byte order, on port i % 2 + 1. */
static struct mrc_ctl_ev exp_ev(unsigned i)
{
	struct mrc_ctl_ev e;
	uint32_t v = htonl(0x00c0ff00u + i);
	memset(&e, 0, sizeof e);
	memcpy(e.val, &v, sizeof v);
	e.port = i % 2 + 1;
	return e;
}

static int same_ev(const struct mrc_ctl_ev *a, const struct mrc_ctl_ev *b)
{
	return a->port == b->port && memcmp(a->val, b->val, sizeof a->val) == 0;
}

static const char *state_name(enum mrc_ctl_ev_state s)
{
	switch (s) {
	case MRC_CTL_EV_GOOD:
		return "GOOD";
	case MRC_CTL_EV_ASSUMED_BAD:
		return "ASSUMED_BAD";
	case MRC_CTL_EV_DENIED:
		return "DENIED";
	default:
		return "UNKNOWN";
	}
}

/* ---------------------------------------------------------------------------------------
 * The controller
 * ------------------------------------------------------------------------------------- */

static struct mrc_context *mctx;

static int modify_fmt(uint64_t id, enum mrc_ctl_profile_state to, enum mrc_ctl_ev_fmt_mode mode,
		      struct mrc_ctl_ev_fmt_field *f, int n)
{
	struct mrc_ctl_ev_fmt_profile_attr a;
	memset(&a, 0, sizeof a);
	a.profile_state = to;
	a.ev_fmt_mode = mode;
	a.ev_fmt_op.op = MRC_CTL_EV_FMT_OP_MODIFY_FIELDS;
	a.ev_fmt_op.fmt_fields = f;
	a.ev_fmt_op.fmt_field_count = n;
	return mrc_ctl_modify_ev_fmt_profile(mctx, id, &a,
					     MRC_CTL_EV_FMT_PROFILE_STATE |
						     MRC_CTL_EV_FMT_PROFILE_MODE |
						     MRC_CTL_EV_FMT_PROFILE_OP);
}

static int move_ev(uint64_t id, enum mrc_ctl_profile_state to)
{
	struct mrc_ctl_ev_profile_attr a;
	memset(&a, 0, sizeof a);
	a.profile_state = to;
	return mrc_ctl_modify_ev_profile(mctx, id, &a, MRC_CTL_EV_PROFILE_STATE);
}

static int move_fmt(uint64_t id, enum mrc_ctl_profile_state to)
{
	struct mrc_ctl_ev_fmt_profile_attr a;
	memset(&a, 0, sizeof a);
	a.profile_state = to;
	return mrc_ctl_modify_ev_fmt_profile(mctx, id, &a, MRC_CTL_EV_FMT_PROFILE_STATE);
}

/* One EV operation of `n` entries on profile id (query: mrc_ctl_query_ev_profile). */
static int ev_op(uint64_t id, int query, enum mrc_ctl_ev_op op, struct mrc_ctl_ev_op_entry *e,
		 int *n)
{
	struct mrc_ctl_ev_profile_attr a;
	memset(&a, 0, sizeof a);
	a.ev_op.op = op;
	a.ev_op.entries = e;
	a.ev_op.entry_count = *n;
	int rc = query ? mrc_ctl_query_ev_profile(mctx, id, &a, MRC_CTL_EV_PROFILE_EV_OP)
		       : mrc_ctl_modify_ev_profile(mctx, id, &a, MRC_CTL_EV_PROFILE_EV_OP);
	*n = a.ev_op.entry_count;
	return rc;
}

static enum mrc_ctl_ev_state state_of(uint64_t id, struct mrc_ctl_ev ev)
{
	struct mrc_ctl_ev_op_entry e;
	int n = 1;
	memset(&e, 0, sizeof e);
	e.ev = ev;
	if (ev_op(id, 1, MRC_CTL_EV_OP_QUERY_EV_STATE, &e, &n) != 0)
		return 0;
	return e.state;
}

static void ctl_device(void)
{
	begin("ctl device");
	int n = 0;
	struct ibv_device **list = MADE(ibv_get_device_list(&n));
	struct ibv_context *vctx = MADE(ibv_open_device(list[0]));
	ibv_free_device_list(list);
	struct mrc_ctl_device_attr d;
	OK(mrc_ctl_query_device(vctx, &d));
	CHECK_EQ(d.ev.ev_mode_mask, MRC_CTL_EV_MODE_AUTO | MRC_CTL_EV_MODE_EXP | MRC_CTL_EV_MODE_GEN);
	CHECK_EQ(d.ev.ev_fmt_mode_mask, MRC_CTL_EV_FMT_MODE_STEV | MRC_CTL_EV_FMT_MODE_UDP);
	CHECK(d.opt_attr & MRC_CTL_OPT_CAP_EV_EVENT);
	CHECK(d.opt_attr & MRC_CTL_OPT_CAP_EV_EVENT_PRECISE_DROP_CNT);
	CHECK(!(d.opt_attr & MRC_CTL_OPT_CAP_EV_PROFILE_MODIFY_ONLINE));
	CHECK_EQ(d.ev.ev_count_align, 2);
	struct mrc_context_attr ca = { .mrc_api_version_used = MRC_API_CURRENT_VERSION };
	mctx = MADE(mrc_create_context(vctx, &ca));
	end();
}

static void ctl_formats(void)
{
	begin("ev format profiles");
	struct mrc_ctl_ev_fmt_field two16[2] = { { 16 }, { 16 } }, wide[2] = { { 16 }, { 17 } };
	struct mrc_ctl_ev_fmt_field udp[1] = { { 16 } };
	struct mrc_ctl_ev_fmt_field srv6[7] = { { 32 }, { 16 }, { 16 }, { 16 }, { 16 }, { 16 },
						{ 16 } };
	FAILS(modify_fmt(0, MRC_CTL_PROFILE_OFFLINE, MRC_CTL_EV_FMT_MODE_STEV, two16, 2), EINVAL);
	FAILS(modify_fmt(FMT_STEV, MRC_CTL_PROFILE_OFFLINE, MRC_CTL_EV_FMT_MODE_STEV, wide, 2),
	      E2BIG);
	FAILS(modify_fmt(FMT_STEV, MRC_CTL_PROFILE_OFFLINE, 3, two16, 2), EINVAL);
	/* OFFLINE with a mode only; ONLINE needs the fields. */
	struct mrc_ctl_ev_fmt_profile_attr m;
	memset(&m, 0, sizeof m);
	m.profile_state = MRC_CTL_PROFILE_OFFLINE;
	m.ev_fmt_mode = MRC_CTL_EV_FMT_MODE_STEV;
	OK(mrc_ctl_modify_ev_fmt_profile(mctx, FMT_STEV, &m,
					 MRC_CTL_EV_FMT_PROFILE_STATE | MRC_CTL_EV_FMT_PROFILE_MODE));
	FAILS(move_fmt(FMT_STEV, MRC_CTL_PROFILE_ONLINE), EINVAL);
	OK(modify_fmt(FMT_STEV, MRC_CTL_PROFILE_OFFLINE, MRC_CTL_EV_FMT_MODE_STEV, two16, 2));
	OK(move_fmt(FMT_STEV, MRC_CTL_PROFILE_ONLINE));
	FAILS(modify_fmt(FMT_STEV, MRC_CTL_PROFILE_ONLINE, MRC_CTL_EV_FMT_MODE_UDP, udp, 1), EINVAL);
	/* Its fields, into an array too short, then into one long enough. */
	struct mrc_ctl_ev_fmt_field got[2] = { { 0 }, { 0 } };
	struct mrc_ctl_ev_fmt_profile_attr q;
	memset(&q, 0, sizeof q);
	q.ev_fmt_op.op = MRC_CTL_EV_FMT_OP_QUERY_FIELDS;
	q.ev_fmt_op.fmt_fields = got;
	q.ev_fmt_op.fmt_field_count = 1;
	int qm = MRC_CTL_EV_FMT_PROFILE_STATE | MRC_CTL_EV_FMT_PROFILE_MODE |
		 MRC_CTL_EV_FMT_PROFILE_OP;
	FAILS(mrc_ctl_query_ev_fmt_profile(mctx, FMT_STEV, &q, qm), E2BIG);
	CHECK_EQ(q.ev_fmt_op.fmt_field_count, 2);
	OK(mrc_ctl_query_ev_fmt_profile(mctx, FMT_STEV, &q, qm));
	CHECK_EQ(q.profile_state, MRC_CTL_PROFILE_ONLINE);
	CHECK_EQ(q.ev_fmt_mode, MRC_CTL_EV_FMT_MODE_STEV);
	CHECK_EQ(got[0].width + got[1].width, 32);
	q.ev_fmt_op.op = MRC_CTL_EV_FMT_OP_MODIFY_FIELDS;
	FAILS(mrc_ctl_query_ev_fmt_profile(mctx, FMT_STEV, &q, qm), EINVAL);
	OK(modify_fmt(FMT_UDP, MRC_CTL_PROFILE_OFFLINE, MRC_CTL_EV_FMT_MODE_UDP, udp, 1));
	OK(move_fmt(FMT_UDP, MRC_CTL_PROFILE_ONLINE));
	OK(modify_fmt(FMT_SRV6, MRC_CTL_PROFILE_OFFLINE, MRC_CTL_EV_FMT_MODE_SRV6, srv6, 7));
	OK(move_fmt(FMT_SRV6, MRC_CTL_PROFILE_ONLINE));
	end();
}

static void ctl_exp(void)
{
	begin("exp ev profile");
	struct mrc_ctl_ev_profile_attr a;
	memset(&a, 0, sizeof a);
	a.profile_state = MRC_CTL_PROFILE_OFFLINE;
	a.ev_mode = MRC_CTL_EV_MODE_EXP;
	a.ev_fmt_profile_id = FMT_STEV;
	a.ev_count = EXP_COUNT - 1; /* rounded up to the 2 ports */
	a.ev_min_active = 2;
	a.ev_event_mask = MRC_CTL_EV_GOOD | MRC_CTL_EV_ASSUMED_BAD;
	int m = MRC_CTL_EV_PROFILE_STATE | MRC_CTL_EV_PROFILE_MODE | MRC_CTL_EV_PROFILE_FMT_ID |
		MRC_CTL_EV_PROFILE_COUNT | MRC_CTL_EV_PROFILE_MIN_ACTIVE |
		MRC_CTL_EV_PROFILE_EVENT_MASK;
	/* No count yet: not ready for OFFLINE. */
	FAILS(mrc_ctl_modify_ev_profile(mctx, EV_EXP, &a, m & ~MRC_CTL_EV_PROFILE_COUNT), EINVAL);
	a.ev_event_mask = MRC_CTL_EV_DENIED;
	FAILS(mrc_ctl_modify_ev_profile(mctx, EV_EXP, &a, m), EINVAL);
	a.ev_event_mask = MRC_CTL_EV_GOOD | MRC_CTL_EV_ASSUMED_BAD;
	OK(mrc_ctl_modify_ev_profile(mctx, EV_EXP, &a, m));
	struct mrc_ctl_ev_profile_attr q;
	memset(&q, 0, sizeof q);
	OK(mrc_ctl_query_ev_profile(mctx, EV_EXP, &q, m | MRC_CTL_EV_PROFILE_CUR_STATE));
	CHECK_EQ(q.cur_profile_state, MRC_CTL_PROFILE_OFFLINE);
	CHECK_EQ(q.ev_mode, MRC_CTL_EV_MODE_EXP);
	CHECK_EQ(q.ev_fmt_profile_id, FMT_STEV);
	CHECK_EQ(q.ev_count, EXP_COUNT);
	CHECK_EQ(q.ev_min_active, 2);

	/* The array: EXP_COUNT unpopulated EVs; ONLINE must wait for them. */
	struct mrc_ctl_ev_op_entry e[EXP_COUNT + 1];
	int n = 3;
	memset(e, 0, sizeof e);
	FAILS(ev_op(EV_EXP, 1, MRC_CTL_EV_OP_QUERY_EV_ARRAY, e, &n), E2BIG);
	CHECK_EQ(n, EXP_COUNT);
	OK(ev_op(EV_EXP, 1, MRC_CTL_EV_OP_QUERY_EV_ARRAY, e, &n));
	CHECK(e[0].ev.port == 0 && e[EXP_COUNT - 1].state == MRC_CTL_EV_UNKNOWN);
	FAILS(move_ev(EV_EXP, MRC_CTL_PROFILE_ONLINE), EINVAL);

	/* Populate: each entry replaces the first unpopulated EV (one batch). */
	for (unsigned i = 0; i < EXP_COUNT; i++) {
		memset(&e[i], 0, sizeof e[i]);
		e[i].ev_new = exp_ev(i);
		e[i].state = MRC_CTL_EV_GOOD;
	}
	n = EXP_COUNT;
	OK(ev_op(EV_EXP, 0, MRC_CTL_EV_OP_REPLACE_EV, e, &n));
	/* Nothing unpopulated is left; a port the device lacks; an unknown flag. */
	memset(&e[0], 0, sizeof e[0]);
	e[0].ev_new = exp_ev(99);
	n = 1;
	FAILS(ev_op(EV_EXP, 0, MRC_CTL_EV_OP_REPLACE_EV, e, &n), ENOENT);
	e[0].ev = exp_ev(0);
	e[0].ev_new.port = 3;
	FAILS(ev_op(EV_EXP, 0, MRC_CTL_EV_OP_REPLACE_EV, e, &n), EINVAL);
	e[0].ev_new = exp_ev(0);
	e[0].flags = 1u << 7;
	FAILS(ev_op(EV_EXP, 0, MRC_CTL_EV_OP_REPLACE_EV, e, &n), EINVAL);
	/* Replace every copy of EV 0 by itself (a no-op that must find it). */
	e[0].flags = MRC_CTL_EV_OP_F_ALL_COPIES;
	OK(ev_op(EV_EXP, 0, MRC_CTL_EV_OP_REPLACE_EV, e, &n));
	n = EXP_COUNT + 1;
	OK(ev_op(EV_EXP, 1, MRC_CTL_EV_OP_QUERY_EV_ARRAY, e, &n));
	CHECK_EQ(n, EXP_COUNT);
	for (unsigned i = 0; i < EXP_COUNT; i++) {
		struct mrc_ctl_ev want = exp_ev(i);
		CHECK(same_ev(&e[i].ev, &want));
		CHECK_EQ(e[i].state, MRC_CTL_EV_GOOD);
	}
	/* EV_OP and EV_FIELDS_OP exclude each other. */
	memset(&a, 0, sizeof a);
	FAILS(mrc_ctl_modify_ev_profile(mctx, EV_EXP, &a,
					MRC_CTL_EV_PROFILE_EV_OP | MRC_CTL_EV_PROFILE_EV_FIELDS_OP),
	      EINVAL);
	OK(move_ev(EV_EXP, MRC_CTL_PROFILE_ONLINE));
	/* ONLINE: no REPLACE_EV, no COUNT (MODIFY_ONLINE is not offered). */
	memset(&e[0], 0, sizeof e[0]);
	e[0].ev = exp_ev(0);
	e[0].ev_new = exp_ev(50);
	n = 1;
	FAILS(ev_op(EV_EXP, 0, MRC_CTL_EV_OP_REPLACE_EV, e, &n), EINVAL);
	a.ev_count = 4;
	FAILS(mrc_ctl_modify_ev_profile(mctx, EV_EXP, &a, MRC_CTL_EV_PROFILE_COUNT), EINVAL);
	/* The format cannot go OFFLINE under an ONLINE profile. */
	FAILS(move_fmt(FMT_STEV, MRC_CTL_PROFILE_OFFLINE), EBUSY);
	end();
}

static void ctl_gen(void)
{
	begin("gen ev profile");
	/* Field 0: fixed 0xc1c1; field 1: 11 generated bits in 100..1123. */
	struct mrc_ctl_ev_field f[2] = {
		{ .width = 16, .init_val = 0xc1c1 },
		{ .width = 16, .min_val = 100, .max_val = 1123, .mask = 0x07ff },
	};
	struct mrc_ctl_ev_profile_attr a;
	memset(&a, 0, sizeof a);
	a.profile_state = MRC_CTL_PROFILE_OFFLINE;
	a.ev_mode = MRC_CTL_EV_MODE_GEN;
	a.ev_fmt_profile_id = FMT_STEV;
	a.ev_count = GEN_COUNT;
	a.ev_fields_op.op = MRC_CTL_EV_FIELDS_OP_MODIFY_FIELDS;
	a.ev_fields_op.fields = f;
	a.ev_fields_op.field_count = 2;
	int m = MRC_CTL_EV_PROFILE_STATE | MRC_CTL_EV_PROFILE_MODE | MRC_CTL_EV_PROFILE_FMT_ID |
		MRC_CTL_EV_PROFILE_COUNT | MRC_CTL_EV_PROFILE_EV_FIELDS_OP;
	/* A max_val wider than the mask's bits; more fields than the format has. */
	f[1].max_val = 4096;
	FAILS(mrc_ctl_modify_ev_profile(mctx, EV_GEN, &a, m), EINVAL);
	f[1].max_val = 1123;
	struct mrc_ctl_ev_field three[3] = { f[0], f[1], f[1] };
	a.ev_fields_op.fields = three;
	a.ev_fields_op.field_count = 3;
	FAILS(mrc_ctl_modify_ev_profile(mctx, EV_GEN, &a, m), E2BIG);
	a.ev_fields_op.fields = f;
	a.ev_fields_op.field_count = 2;
	OK(mrc_ctl_modify_ev_profile(mctx, EV_GEN, &a, m));
	OK(move_ev(EV_GEN, MRC_CTL_PROFILE_ONLINE));
	struct mrc_ctl_ev_field got[2];
	struct mrc_ctl_ev_profile_attr q;
	memset(&q, 0, sizeof q);
	q.ev_fields_op.op = MRC_CTL_EV_FIELDS_OP_QUERY_FIELDS;
	q.ev_fields_op.fields = got;
	q.ev_fields_op.field_count = 2;
	OK(mrc_ctl_query_ev_profile(mctx, EV_GEN, &q, MRC_CTL_EV_PROFILE_EV_FIELDS_OP));
	CHECK_EQ(q.ev_fields_op.field_count, 2);
	CHECK(memcmp(got, f, sizeof f) == 0);
	struct mrc_ctl_ev_op_entry e[GEN_COUNT];
	int n = GEN_COUNT;
	OK(ev_op(EV_GEN, 1, MRC_CTL_EV_OP_QUERY_EV_ARRAY, e, &n));
	CHECK_EQ(n, GEN_COUNT);
	unsigned ok = 0;
	for (int i = 0; i < n; i++) {
		/* Compact: 11 bits from the most significant bit of byte 0. */
		unsigned v = ((unsigned)e[i].ev.val[0] << 3) | (e[i].ev.val[1] >> 5);
		int distinct = 1;
		for (int j = 0; j < i; j++)
			distinct &= !same_ev(&e[i].ev, &e[j].ev);
		ok += v >= 100 && v <= 1123 && e[i].ev.port == i % 2 + 1 && distinct;
	}
	CHECK_EQ(ok, GEN_COUNT);
	end();
}

static void ctl_srv6(void)
{
	begin("srv6 ev profile");
	struct mrc_ctl_ev_profile_attr a;
	memset(&a, 0, sizeof a);
	a.profile_state = MRC_CTL_PROFILE_OFFLINE;
	a.ev_mode = MRC_CTL_EV_MODE_EXP;
	a.ev_fmt_profile_id = FMT_SRV6;
	a.ev_count = 2;
	int m = MRC_CTL_EV_PROFILE_STATE | MRC_CTL_EV_PROFILE_MODE | MRC_CTL_EV_PROFILE_FMT_ID |
		MRC_CTL_EV_PROFILE_COUNT;
	OK(mrc_ctl_modify_ev_profile(mctx, EV_SRV6, &a, m));
	struct mrc_ctl_ev_op_entry e[2];
	memset(e, 0, sizeof e);
	for (int i = 0; i < 2; i++) {
		inet_pton(AF_INET6, i ? "fcbb:bb00:1000:2001:1001:8003::" : "fcbb:bb00:1000:1001::",
			  e[i].ev_new.val);
		e[i].ev_new.port = i + 1;
	}
	int n = 2;
	OK(ev_op(EV_SRV6, 0, MRC_CTL_EV_OP_REPLACE_EV, e, &n));
	OK(move_ev(EV_SRV6, MRC_CTL_PROFILE_ONLINE));
	end();
}

static struct mrc_comp_channel *channel;
static int channel_fd = -1;
static struct mrc_cq *evcq;

/* Takes events until each of the EXP profile's EVs on port 1 came with `state`, re-arming
 * the CQ after each channel event. */
static void await_port1(enum mrc_ctl_ev_state state)
{
	int seen[EXP_COUNT] = { 0 }, left = EXP_COUNT / 2;
	long long deadline = now_ms() + 2 * WAIT_MS;
	while (left > 0 && now_ms() < deadline) {
		struct pollfd p = { .fd = channel_fd, .events = POLLIN };
		if (poll(&p, 1, 100) == 1) {
			struct mrc_cq *cq = NULL;
			void *cq_ctx = NULL;
			if (!OK(mrc_get_cq_event(channel, &cq, &cq_ctx)))
				break;
			CHECK_PTR_EQ(cq, evcq);
			mrc_ack_cq_events(cq, 1);
			OK(mrc_req_notify_cq(evcq, 0));
		}
		struct mrc_ctl_ev_event ev[8];
		int got;
		while ((got = mrc_ctl_poll_ev_event(evcq, 8, ev)) > 0) {
			for (int i = 0; i < got; i++) {
				uint32_t v;
				memcpy(&v, ev[i].ev.val, sizeof v);
				printf("  event: profile %llu ev 0x%08x port %u %s drops %u\n",
				       (unsigned long long)ev[i].profile_id, ntohl(v), ev[i].ev.port,
				       state_name(ev[i].state), ev[i].drop_count);
				unsigned k = ntohl(v) - 0x00c0ff00u;
				if (ev[i].profile_id == EV_EXP && ev[i].state == state &&
				    k < EXP_COUNT && !seen[k]) {
					seen[k] = 1;
					left -= ev[i].ev.port == 1;
				}
			}
		}
		CHECK(got >= 0);
	}
	CHECK_EQ(left, 0);
	fflush(stdout);
}

static void ctl_events_ready(void)
{
	begin("ev event cq");
	OK(mrc_create_comp_channel(mctx, &channel));
	OK(mrc_get_comp_channel_fd(channel, &channel_fd));
	NULLS(mrc_ctl_create_ev_event_cq(NULL, 64, NULL, NULL, 0), EINVAL);
	evcq = MADE(mrc_ctl_create_ev_event_cq(mctx, 64, NULL, channel, 0));
	struct ibv_wc wc;
	FAILS(mrc_poll_cq(evcq, 1, &wc), EINVAL);
	struct mrc_ctl_ev_event ev[1];
	CHECK_EQ(mrc_ctl_poll_ev_event(NULL, 1, ev), -EINVAL);
	CHECK_EQ(mrc_ctl_poll_ev_event(evcq, -1, ev), -EINVAL);
	CHECK_EQ(mrc_ctl_poll_ev_event(evcq, 1, NULL), -EINVAL);
	CHECK_EQ(mrc_ctl_poll_ev_event(evcq, 1, ev), 0);
	OK(mrc_req_notify_cq(evcq, 0));
	end();
}

static void ctl_events(void)
{
	begin("events: port 1 down");
	await_port1(MRC_CTL_EV_ASSUMED_BAD);
	/* The application's NIC publishes what its QPs hold. */
	struct mrc_ctl_ev e0 = exp_ev(0), e1 = exp_ev(1);
	CHECK_EQ(state_of(EV_EXP, e0), MRC_CTL_EV_ASSUMED_BAD);
	CHECK_EQ(state_of(EV_EXP, e1), MRC_CTL_EV_GOOD);
	end();
	say(to_app[1], 'B');
	begin("events: port 1 up");
	await_port1(MRC_CTL_EV_GOOD);
	CHECK_EQ(state_of(EV_EXP, e0), MRC_CTL_EV_GOOD);
	end();
}

static void ctl_deny(void)
{
	begin("deny");
	struct mrc_ctl_ev_op_entry e;
	memset(&e, 0, sizeof e);
	e.ev = exp_ev(3);
	e.state = MRC_CTL_EV_DENIED;
	int n = 1;
	OK(ev_op(EV_EXP, 0, MRC_CTL_EV_OP_MODIFY_EV_STATE, &e, &n));
	CHECK_EQ(state_of(EV_EXP, exp_ev(3)), MRC_CTL_EV_DENIED);
	e.state = MRC_CTL_EV_ASSUMED_BAD; /* not a state a controller sets */
	FAILS(ev_op(EV_EXP, 0, MRC_CTL_EV_OP_MODIFY_EV_STATE, &e, &n), EINVAL);
	e.ev = exp_ev(42);
	e.state = MRC_CTL_EV_DENIED;
	FAILS(ev_op(EV_EXP, 0, MRC_CTL_EV_OP_MODIFY_EV_STATE, &e, &n), ENOENT);
	FAILS(ev_op(EV_EXP, 1, MRC_CTL_EV_OP_QUERY_EV_STATE, &e, &n), ENOENT);
	e.ev = exp_ev(3);
	e.state = MRC_CTL_EV_GOOD;
	OK(ev_op(EV_EXP, 0, MRC_CTL_EV_OP_MODIFY_EV_STATE, &e, &n));
	CHECK_EQ(state_of(EV_EXP, exp_ev(3)), MRC_CTL_EV_GOOD);
	/* AUTO profiles have no EV array. */
	struct mrc_ctl_ev_profile_attr a;
	memset(&a, 0, sizeof a);
	a.profile_state = MRC_CTL_PROFILE_OFFLINE;
	a.ev_mode = MRC_CTL_EV_MODE_AUTO;
	OK(mrc_ctl_modify_ev_profile(mctx, 4, &a,
				     MRC_CTL_EV_PROFILE_STATE | MRC_CTL_EV_PROFILE_MODE));
	FAILS(ev_op(4, 1, MRC_CTL_EV_OP_QUERY_EV_ARRAY, &e, &n), EINVAL);
	OK(move_ev(4, MRC_CTL_PROFILE_INIT));
	end();
}

static void ctl_teardown(void)
{
	begin("ctl teardown");
	OK(mrc_destroy_cq(evcq));
	OK(mrc_destroy_comp_channel(channel));
	for (uint64_t id = EV_EXP; id <= EV_SRV6; id++) {
		OK(move_ev(id, MRC_CTL_PROFILE_OFFLINE));
		OK(move_ev(id, MRC_CTL_PROFILE_INIT));
	}
	for (uint64_t id = FMT_STEV; id <= FMT_SRV6; id++) {
		OK(move_fmt(id, MRC_CTL_PROFILE_OFFLINE));
		OK(move_fmt(id, MRC_CTL_PROFILE_INIT));
	}
	OK(mrc_destroy_context(mctx));
	end();
}

static int controller(void)
{
	ctl_device();
	ctl_formats();
	ctl_exp();
	ctl_gen();
	ctl_srv6();
	ctl_events_ready();
	say(to_app[1], 'R');
	if (hear(to_ctl[0], 3 * WAIT_MS) != 'D') {
		printf("mrc_ctl_test: FAILED: the application did not disable port 1\n");
		return 1;
	}
	ctl_events();
	say(to_app[1], 'G');
	ctl_deny();
	if (hear(to_ctl[0], 6 * WAIT_MS) != 'X') {
		printf("mrc_ctl_test: FAILED: the application did not finish\n");
		return 1;
	}
	ctl_teardown();
	dprintf(to_app[1], "C%u\n", checks);
	return failures ? 1 : 0;
}

/* ---------------------------------------------------------------------------------------
 * The application
 * ------------------------------------------------------------------------------------- */

struct side {
	struct ibv_context *vctx;
	struct mrc_context *mctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct mrc_cq *cq;
	struct mrc_qp *qp;
	uint32_t qpn;
	union ibv_gid gid;
	uint8_t *buf;
};

static struct side s[2];

static int to_init(struct side *x, uint64_t ev_profile)
{
	struct ibv_qp_attr v;
	struct mrc_qp_attr m;
	memset(&v, 0, sizeof v);
	memset(&m, 0, sizeof m);
	v.qp_state = IBV_QPS_INIT;
	m.profile.ev_profile_id = ev_profile;
	return mrc_modify_qp(x->qp, &v, IBV_QP_STATE, &m, MRC_QP_EV_PROFILE_ID);
}

static void connect_to(struct side *x, struct side *peer)
{
	struct ibv_qp_attr v;
	memset(&v, 0, sizeof v);
	v.qp_state = IBV_QPS_RTR;
	v.dest_qp_num = peer->qpn;
	v.ah_attr.is_global = 1;
	v.ah_attr.grh.dgid = peer->gid;
	v.ah_attr.port_num = 1;
	OK(mrc_modify_qp(x->qp, &v, IBV_QP_STATE | IBV_QP_AV | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN,
			 NULL, 0));
	memset(&v, 0, sizeof v);
	v.qp_state = IBV_QPS_RTS;
	OK(mrc_modify_qp(x->qp, &v, IBV_QP_STATE | IBV_QP_SQ_PSN, NULL, 0));
}

/* Writes LEN bytes of pattern `seed` from side 0 to side 1, waits, checks every byte. */
static void write_checked(unsigned seed)
{
	for (unsigned i = 0; i < LEN; i++)
		s[0].buf[i] = (uint8_t)(i * 7 + seed);
	struct ibv_sge sge = { (uintptr_t)s[0].buf, LEN, s[0].mr->lkey };
	struct ibv_send_wr wr, *bad = NULL;
	memset(&wr, 0, sizeof wr);
	wr.wr_id = seed;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = (uintptr_t)s[1].buf;
	wr.wr.rdma.rkey = s[1].mr->rkey;
	OK(mrc_post_send(s[0].qp, &wr, &bad));
	struct ibv_wc wc;
	int got = 0;
	long long deadline = now_ms() + WAIT_MS;
	while (got == 0 && now_ms() < deadline) {
		got = mrc_poll_cq(s[0].cq, 1, &wc);
		if (got == 0)
			usleep(100);
	}
	CHECK_EQ(got, 1);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	unsigned wrong = 0;
	for (unsigned i = 0; i < LEN; i++)
		wrong += s[1].buf[i] != (uint8_t)(i * 7 + seed);
	CHECK_EQ(wrong, 0);
}

static int set_port1(int up)
{
	struct mrc_ctl_port_attr p = { up ? MRC_CTL_PORT_ADMIN_ENABLED
					   : MRC_CTL_PORT_ADMIN_DISABLED };
	return mrc_ctl_modify_port(s[0].mctx, 1, &p, MRC_CTL_PORT_ADMIN_STATE);
}

static int application(pid_t child)
{
	if (hear(to_app[0], 3 * WAIT_MS) != 'R') {
		printf("mrc_ctl_test: FAILED: the controller did not get ready\n");
		return 1;
	}
	begin("app: exp profile");
	int n = 0;
	struct ibv_device **list = MADE(ibv_get_device_list(&n));
	for (int i = 0; i < 2; i++) {
		struct side *x = &s[i];
		x->vctx = MADE(ibv_open_device(list[i]));
		x->mctx = MADE(mrc_create_context(x->vctx, NULL));
		x->pd = MADE(ibv_alloc_pd(x->vctx));
		x->buf = MADE(calloc(1, LEN));
		x->mr = MADE(ibv_reg_mr(x->pd, x->buf, LEN,
					IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE));
		x->cq = MADE(mrc_create_cq(x->mctx, 64, NULL, NULL, 0));
		struct mrc_qp_init_attr ia;
		memset(&ia, 0, sizeof ia);
		ia.send_cq = ia.recv_cq = x->cq;
		ia.cap.max_send_wr = ia.cap.max_recv_wr = 16;
		ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
		ia.sq_sig_all = 1;
		ia.pd = x->pd;
		x->qp = MADE(mrc_create_qp(x->mctx, &ia));
		OK(mrc_get_qpn(x->qp, &x->qpn));
		OK(ibv_query_gid(x->vctx, 1, 0, &x->gid));
	}
	ibv_free_device_list(list);
	/* SRv6 EVs on an ECMP device, and an OFFLINE profile, are refused at INIT. */
	FAILS(to_init(&s[0], EV_SRV6), EINVAL);
	FAILS(to_init(&s[0], 4), EINVAL);
	OK(to_init(&s[0], EV_EXP));
	OK(to_init(&s[1], EV_EXP));
	connect_to(&s[0], &s[1]);
	connect_to(&s[1], &s[0]);
	write_checked(1);
	end();

	begin("app: port 1 down, up");
	OK(set_port1(0));
	write_checked(2);
	say(to_ctl[1], 'D');
	CHECK_EQ(hear(to_app[0], 3 * WAIT_MS), 'B');
	OK(set_port1(1));
	write_checked(3);
	/* Traffic until the controller saw the EVs come back. */
	char c = 0;
	for (int i = 0; i < 200 && c != 'G'; i++) {
		struct pollfd p = { .fd = to_app[0], .events = POLLIN };
		if (poll(&p, 1, 50) == 1 && read(to_app[0], &c, 1) != 1)
			break;
		if (c != 'G')
			write_checked(4 + i % 200);
	}
	CHECK_EQ(c, 'G');
	end();

	begin("app teardown");
	for (int i = 0; i < 2; i++) {
		OK(mrc_destroy_qp(s[i].qp));
		OK(mrc_destroy_cq(s[i].cq));
		OK(ibv_dereg_mr(s[i].mr));
		OK(ibv_dealloc_pd(s[i].pd));
		OK(mrc_destroy_context(s[i].mctx));
		OK(ibv_close_device(s[i].vctx));
		free(s[i].buf);
	}
	end();
	say(to_ctl[1], 'X');

	/* The controller's count, then its exit status. */
	char line[32] = { 0 };
	unsigned theirs = 0;
	struct pollfd p = { .fd = to_app[0], .events = POLLIN };
	if (poll(&p, 1, 2 * WAIT_MS) == 1 && read(to_app[0], line, sizeof line - 1) > 0)
		sscanf(line, "C%u", &theirs);
	int status = 0;
	waitpid(child, &status, 0);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || theirs == 0) {
		printf("mrc_ctl_test: FAILED: the controller exited with status %d\n", status);
		return 1;
	}
	if (failures)
		return 1;
	printf("mrc_ctl_test: ok (%u checks)\n", checks + theirs);
	return 0;
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	keep_going = getenv("MRC_CTL_TEST_CONTINUE") != NULL;
	if (pipe(to_app) != 0 || pipe(to_ctl) != 0)
		return 2;
	pid_t child = fork();
	if (child < 0)
		return 2;
	signal(SIGALRM, on_watchdog);
	alarm(WATCHDOG_S);
	if (child == 0)
		return controller();
	return application(child);
}
