/*
 * mrc_ctl_evs: a small network controller over OCP's controller API (include/mrc_ctl.h). It
 * gives an EV profile an explicit list of EVs (MRC_CTL_EV_MODE_EXP), shows a profile's EVs
 * with their states, denies and allows EVs, removes a profile, and prints EV state events.
 * Applications name the profile by id when their QPs go to INIT (mrc_qp_attr.profile.
 * ev_profile_id; mrc_bench -e ID).
 *
 *   mrc_ctl_evs [-d DEV] set ID < EVS       EXP profile ID from lines "PORT HEX" (see below)
 *   mrc_ctl_evs [-d DEV] show ID            its EVs: index, port, value, state
 *   mrc_ctl_evs [-d DEV] deny ID PORT HEX   deny one EV (QPs using the profile stop using it)
 *   mrc_ctl_evs [-d DEV] allow ID PORT HEX  lift the deny
 *   mrc_ctl_evs [-d DEV] clear ID           ONLINE -> OFFLINE -> INIT: the profile is gone
 *   mrc_ctl_evs [-d DEV] events [SECONDS]   EV events of every profile (default 10 s)
 *
 * An EV line is a port (1-based) and up to 64 hex digits, the bytes of the EV value from the
 * first: 8 for a 32-bit STEV in network byte order, 32 or 64 for an SRv6 path (what
 * `mrc-fabric paths PLAN --from H --to H --evs` prints). The profile uses EV Format profile 0,
 * the application device's own format, so one list works for the device it is meant for
 * (SRv6 values on an SRv6 device, STEV on an ECMP one). Lines starting with '#' are skipped.
 *
 * Exit status: 0 done, 1 the API refused (the message says what errno), 2 bad usage.
 * Written for mrc-rs. SPDX-License-Identifier: Apache-2.0 OR MIT
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mrc_ctl.h>

#define MAX_EVS 4096

static void usage(FILE *f)
{
	fprintf(f, "usage: mrc_ctl_evs [-d DEV] set ID < EVS | show ID | deny ID PORT HEX |\n"
		   "                   allow ID PORT HEX | clear ID | events [SECONDS]\n");
}

static void refuse(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("mrc_ctl_evs: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputs("\n", stderr);
	va_end(ap);
	usage(stderr);
	exit(2);
}

static void failed(const char *what)
{
	fprintf(stderr, "mrc_ctl_evs: %s: %s\n", what, strerror(errno));
	exit(1);
}

static uint64_t profile_id(const char *s)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 0);
	if (errno || *end || v == 0)
		refuse("profile id %s: a number from 1", s);
	return v;
}

/* "PORT HEX" (or PORT and HEX as two arguments) into an EV; 0 when it is not one. */
static int parse_ev(const char *port, const char *hex, struct mrc_ctl_ev *ev)
{
	char *end;
	long p = strtol(port, &end, 10);
	size_t n = strlen(hex);
	memset(ev, 0, sizeof *ev);
	if (*end || p < 1 || p > 255 || n == 0 || n % 2 || n > 2 * MRC_CTL_EV_MAX_BYTES)
		return 0;
	for (size_t i = 0; i < n / 2; i++) {
		unsigned b;
		if (sscanf(hex + 2 * i, "%2x", &b) != 1)
			return 0;
		ev->val[i] = (uint8_t)b;
	}
	ev->port = (uint8_t)p;
	return 1;
}

static void print_ev(unsigned i, const struct mrc_ctl_ev *ev, const char *state)
{
	int last = MRC_CTL_EV_MAX_BYTES;
	while (last > 4 && ev->val[last - 1] == 0)
		last--;
	printf("%4u %4u ", i, ev->port);
	for (int b = 0; b < last; b++)
		printf("%02x", ev->val[b]);
	printf(" %s\n", state);
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

static int move(struct mrc_context *c, uint64_t id, enum mrc_ctl_profile_state to)
{
	struct mrc_ctl_ev_profile_attr a;
	memset(&a, 0, sizeof a);
	a.profile_state = to;
	return mrc_ctl_modify_ev_profile(c, id, &a, MRC_CTL_EV_PROFILE_STATE);
}

static int set(struct mrc_context *c, uint32_t align, uint64_t id)
{
	static struct mrc_ctl_ev_op_entry e[MAX_EVS];
	char line[256], port[16], hex[160];
	unsigned n = 0, at = 0;
	while (fgets(line, sizeof line, stdin)) {
		at++;
		if (line[0] == '#' || strspn(line, " \t\r\n") == strlen(line))
			continue;
		if (n == MAX_EVS)
			refuse("more than %d EVs", MAX_EVS);
		memset(&e[n], 0, sizeof e[n]);
		if (sscanf(line, "%15s %159s", port, hex) != 2 || !parse_ev(port, hex, &e[n].ev_new))
			refuse("line %u: not \"PORT HEX\": %s", at, line);
		e[n].state = MRC_CTL_EV_GOOD;
		n++;
	}
	if (n == 0 || n % align)
		refuse("%u EVs: the device takes a multiple of %u (its planes)", n, align);
	struct mrc_ctl_ev_profile_attr a;
	memset(&a, 0, sizeof a);
	a.profile_state = MRC_CTL_PROFILE_OFFLINE;
	a.ev_mode = MRC_CTL_EV_MODE_EXP;
	a.ev_fmt_profile_id = 0;
	a.ev_count = n;
	if (mrc_ctl_modify_ev_profile(c, id, &a,
				      MRC_CTL_EV_PROFILE_STATE | MRC_CTL_EV_PROFILE_MODE |
					      MRC_CTL_EV_PROFILE_FMT_ID |
					      MRC_CTL_EV_PROFILE_COUNT))
		failed("EV profile to OFFLINE (is it in use? clear it first)");
	memset(&a, 0, sizeof a);
	a.profile_state = MRC_CTL_PROFILE_ONLINE;
	a.ev_op.op = MRC_CTL_EV_OP_REPLACE_EV;
	a.ev_op.entries = e;
	a.ev_op.entry_count = (int)n;
	if (mrc_ctl_modify_ev_profile(c, id, &a, MRC_CTL_EV_PROFILE_EV_OP | MRC_CTL_EV_PROFILE_STATE))
		failed("REPLACE_EV and ONLINE");
	printf("EV profile %llu: %u EVs, ONLINE\n", (unsigned long long)id, n);
	return 0;
}

static int show(struct mrc_context *c, uint64_t id)
{
	static struct mrc_ctl_ev_op_entry e[MAX_EVS];
	static const char *states[] = { "INIT", "OFFLINE", "ONLINE" };
	struct mrc_ctl_ev_profile_attr a;
	memset(&a, 0, sizeof a);
	if (mrc_ctl_query_ev_profile(c, id, &a, MRC_CTL_EV_PROFILE_STATE | MRC_CTL_EV_PROFILE_MODE))
		failed("mrc_ctl_query_ev_profile");
	if (a.ev_mode != MRC_CTL_EV_MODE_EXP && a.ev_mode != MRC_CTL_EV_MODE_GEN) {
		printf("EV profile %llu: %s, %s\n", (unsigned long long)id,
		       a.profile_state <= MRC_CTL_PROFILE_ONLINE ? states[a.profile_state] : "?",
		       a.ev_mode == MRC_CTL_EV_MODE_AUTO ? "AUTO (no EV list)" : "not configured");
		return 0;
	}
	a.ev_op.op = MRC_CTL_EV_OP_QUERY_EV_ARRAY;
	a.ev_op.entries = e;
	a.ev_op.entry_count = MAX_EVS;
	int m = MRC_CTL_EV_PROFILE_STATE | MRC_CTL_EV_PROFILE_MODE | MRC_CTL_EV_PROFILE_EV_OP;
	if (mrc_ctl_query_ev_profile(c, id, &a, m))
		failed("QUERY_EV_ARRAY");
	printf("EV profile %llu: %s, %d EVs\n", (unsigned long long)id,
	       a.profile_state <= MRC_CTL_PROFILE_ONLINE ? states[a.profile_state] : "?",
	       a.ev_op.entry_count);
	for (int i = 0; i < a.ev_op.entry_count; i++)
		print_ev((unsigned)i, &e[i].ev, state_name(e[i].state));
	return 0;
}

static int deny(struct mrc_context *c, uint64_t id, const char *port, const char *hex, int on)
{
	struct mrc_ctl_ev_op_entry e;
	memset(&e, 0, sizeof e);
	if (!parse_ev(port, hex, &e.ev))
		refuse("%s %s: not an EV (PORT HEX)", port, hex);
	e.state = on ? MRC_CTL_EV_DENIED : MRC_CTL_EV_GOOD;
	struct mrc_ctl_ev_profile_attr a;
	memset(&a, 0, sizeof a);
	a.ev_op.op = MRC_CTL_EV_OP_MODIFY_EV_STATE;
	a.ev_op.entries = &e;
	a.ev_op.entry_count = 1;
	if (mrc_ctl_modify_ev_profile(c, id, &a, MRC_CTL_EV_PROFILE_EV_OP))
		failed("MODIFY_EV_STATE");
	return 0;
}

static int clear(struct mrc_context *c, uint64_t id)
{
	if (move(c, id, MRC_CTL_PROFILE_OFFLINE) || move(c, id, MRC_CTL_PROFILE_INIT))
		failed("EV profile to INIT");
	return 0;
}

static int events(struct mrc_context *c, const char *secs)
{
	double limit = secs ? atof(secs) : 10;
	if (limit <= 0)
		refuse("events %s: a number of seconds", secs);
	struct mrc_comp_channel *ch;
	int fd;
	if (mrc_create_comp_channel(c, &ch) || mrc_get_comp_channel_fd(ch, &fd))
		failed("completion channel");
	struct mrc_cq *cq = mrc_ctl_create_ev_event_cq(c, 1024, NULL, ch, 0);
	if (!cq || mrc_req_notify_cq(cq, 0))
		failed("EV event CQ");
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	printf("waiting %.1f s for EV events\n", limit);
	fflush(stdout);
	for (;;) {
		clock_gettime(CLOCK_MONOTONIC, &t);
		double left = limit - (double)(t.tv_sec - t0.tv_sec) -
			      (double)(t.tv_nsec - t0.tv_nsec) / 1e9;
		if (left <= 0)
			break;
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (poll(&p, 1, (int)(left * 1000) + 1) != 1)
			continue;
		struct mrc_cq *got;
		void *ctx;
		if (mrc_get_cq_event(ch, &got, &ctx))
			failed("mrc_get_cq_event");
		mrc_ack_cq_events(got, 1);
		if (mrc_req_notify_cq(cq, 0))
			failed("mrc_req_notify_cq");
		struct mrc_ctl_ev_event ev[64];
		int n;
		while ((n = mrc_ctl_poll_ev_event(cq, 64, ev)) > 0) {
			for (int i = 0; i < n; i++) {
				char what[64];
				snprintf(what, sizeof what, "%s profile %llu drops %u",
					 state_name(ev[i].state),
					 (unsigned long long)ev[i].profile_id, ev[i].drop_count);
				print_ev((unsigned)i, &ev[i].ev, what);
			}
			fflush(stdout);
		}
		if (n < 0) {
			errno = -n;
			failed("mrc_ctl_poll_ev_event");
		}
	}
	mrc_destroy_cq(cq);
	mrc_destroy_comp_channel(ch);
	return 0;
}

int main(int argc, char **argv)
{
	const char *dev = NULL;
	int i = 1;
	if (i + 1 < argc && strcmp(argv[i], "-d") == 0) {
		dev = argv[i + 1];
		i += 2;
	}
	if (i >= argc) {
		usage(stderr);
		return 2;
	}
	const char *cmd = argv[i++];
	int args = argc - i;
	if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help")) {
		usage(stdout);
		return 0;
	}
	int want = !strcmp(cmd, "deny") || !strcmp(cmd, "allow")	? 3
		   : !strcmp(cmd, "events")				? -1
		   : !strcmp(cmd, "set") || !strcmp(cmd, "show") || !strcmp(cmd, "clear") ? 1
		   : -2;
	if (want == -2)
		refuse("unknown command %s", cmd);
	if ((want >= 0 && args != want) || (want == -1 && args > 1))
		refuse("%s: wrong number of arguments", cmd);

	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	if (!list || n == 0)
		failed("no RDMA device");
	struct ibv_device *d = list[0];
	for (int k = 0; dev && k < n; k++)
		if (!strcmp(ibv_get_device_name(list[k]), dev))
			d = list[k];
	if (dev && strcmp(ibv_get_device_name(d), dev))
		refuse("no device %s", dev);
	struct ibv_context *vctx = ibv_open_device(d);
	ibv_free_device_list(list);
	if (!vctx)
		failed("ibv_open_device");
	struct mrc_ctl_device_attr attr;
	if (mrc_ctl_query_device(vctx, &attr))
		failed("mrc_ctl_query_device (not an MRC device?)");
	if (!(attr.ev.ev_mode_mask & MRC_CTL_EV_MODE_EXP)) {
		errno = EOPNOTSUPP;
		failed("explicit EV profiles");
	}
	struct mrc_context_attr ca = { .mrc_api_version_used = MRC_API_CURRENT_VERSION };
	struct mrc_context *c = mrc_create_context(vctx, &ca);
	if (!c)
		failed("mrc_create_context");

	int rc;
	if (!strcmp(cmd, "set"))
		rc = set(c, attr.ev.ev_count_align ? attr.ev.ev_count_align : 1, profile_id(argv[i]));
	else if (!strcmp(cmd, "show"))
		rc = show(c, profile_id(argv[i]));
	else if (!strcmp(cmd, "deny") || !strcmp(cmd, "allow"))
		rc = deny(c, profile_id(argv[i]), argv[i + 1], argv[i + 2], cmd[0] == 'd');
	else if (!strcmp(cmd, "clear"))
		rc = clear(c, profile_id(argv[i]));
	else
		rc = events(c, args ? argv[i] : NULL);
	mrc_destroy_context(c);
	ibv_close_device(vctx);
	return rc;
}
