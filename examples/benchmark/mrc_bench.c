/*
 * mrc_bench: RDMA Write bandwidth over OCP's MRC application API (include/mrc.h), in the
 * shape of OCP's examples/benchmark. Run it without arguments for the server and with the
 * server's address for the client; the client sweeps message sizes and prints one
 * perftest-like row per size. With -c/--check the server verifies every byte of every Write.
 *
 *   server$ ./mrc_bench [options]
 *   client$ ./mrc_bench [options] SERVER
 *
 * The client writes into the server's buffer in rounds, each ending with a Write-with-Immediate
 * the server answers over TCP (bench_run.c); README.md says how to build and run it.
 *
 * This file: the options, the device, context, queues, memory and QP transitions, the exchange
 * of QP attributes, and the teardown (children first).
 *
 * Written for mrc-rs. SPDX-License-Identifier: Apache-2.0 OR MIT
 */
#define _GNU_SOURCE
#include "bench.h"

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- defaults and limits ---- */

#define DEF_TCP_PORT 18515
#define DEF_IB_PORT 1
#define DEF_GID_INDEX 0
#define DEF_ITERS 1000
#define DEF_WARMUP 16
#define DEF_MIN_SIZE 1
#define DEF_MAX_SIZE (64ull << 20)
#define DEF_STEP 2
#define MAX_SIZE_LIMIT (1ull << 30)
#define MAX_ITERS 100000000u
/* --check: the buffer holds at least this many bytes of slots, so small sizes get many. */
#define CHECK_SPAN (1ull << 20)
#define CONNECT_PATIENCE_SECONDS 30

/* ---- options ---- */

static void usage(FILE *to)
{
	fprintf(to,
		"Usage:\n"
		"  mrc_bench [options]          server: wait for a client\n"
		"  mrc_bench [options] SERVER   client: connect to SERVER and run the sweep\n"
		"\n"
		"Options (both ends must agree on -n, -s, --min-size, --step-factor, -w, -c):\n"
		"  -p, --port=PORT          TCP port of the exchange (default %d)\n"
		"  -d, --ib-dev=NAME        verbs device (default: the first one)\n"
		"  -i, --ib-port=PORT       port of the device (default %d)\n"
		"  -g, --gid-idx=INDEX      GID index (default %d)\n"
		"  -m, --mtu=BYTES          path MTU: 256, 512, 1024, 2048 or 4096\n"
		"                           (default: the port's active MTU)\n"
		"  -n, --iters=N            timed Writes per size (default %d)\n"
		"  -s, --size=BYTES         largest size of the sweep (default %llu; K, M, G suffixes)\n"
		"      --min-size=BYTES     smallest size (default %d)\n"
		"      --step-factor=F      each size is F times the last (default %d)\n"
		"  -w, --warmup-iters=N     untimed Writes before each size (default %d)\n"
		"  -c, --check              the server verifies every byte of every Write\n"
		"  -e, --ev-profile=ID      the QP's EV profile, set by a controller (mrc_ctl.h;\n"
		"                           examples/controller); default 0, the device's\n"
		"      --cc-profile=ID      the QP's congestion-control profile (default 0)\n"
		"  -h, --help               this text\n"
		"\n"
		"The device is configured by the environment (MRC_EAL, MRC_PLAN, MRC_HOST, MRC_ADDR,\n"
		"MRC_CONFIG; see README.md). MRC_DEBUG=1 makes lib_mrc.so say why a call failed.\n",
		DEF_TCP_PORT, DEF_IB_PORT, DEF_GID_INDEX, DEF_ITERS,
		(unsigned long long)DEF_MAX_SIZE, DEF_MIN_SIZE, DEF_STEP, DEF_WARMUP);
}

/* A bad command line: one line on stderr, exit 2. */
__attribute__((noreturn, format(printf, 1, 2))) static void refuse(const char *fmt, ...)
{
	va_list ap;

	fputs(BENCH_NAME ": ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs(" (-h for help)\n", stderr);
	exit(2);
}

/* An unsigned number in [lo, hi]; with `sized`, a K/M/G suffix multiplies by 2^10/2^20/2^30. */
static uint64_t number(const char *opt, const char *s, uint64_t lo, uint64_t hi, bool sized)
{
	char *end;
	uint64_t v, unit = 1;

	errno = 0;
	if (*s == '-' || *s == '\0')
		refuse("%s %s: not a number", opt, s);
	v = strtoull(s, &end, 0);
	if (sized && *end) {
		switch (*end) {
		case 'k': case 'K': unit = 1ull << 10; end++; break;
		case 'm': case 'M': unit = 1ull << 20; end++; break;
		case 'g': case 'G': unit = 1ull << 30; end++; break;
		default: break;
		}
	}
	if (errno || *end)
		refuse("%s %s: not a number", opt, s);
	if (v > hi / unit || v * unit < lo || v * unit > hi)
		refuse("%s %s: out of range [%llu, %llu]", opt, s, (unsigned long long)lo,
		       (unsigned long long)hi);
	return v * unit;
}

static void parse(int argc, char **argv, struct options *o)
{
	enum { OPT_MIN_SIZE = 256, OPT_STEP, OPT_CC_PROFILE };
	static const struct option longs[] = {
		{"port", required_argument, NULL, 'p'},
		{"ib-dev", required_argument, NULL, 'd'},
		{"ib-port", required_argument, NULL, 'i'},
		{"gid-idx", required_argument, NULL, 'g'},
		{"mtu", required_argument, NULL, 'm'},
		{"iters", required_argument, NULL, 'n'},
		{"size", required_argument, NULL, 's'},
		{"min-size", required_argument, NULL, OPT_MIN_SIZE},
		{"step-factor", required_argument, NULL, OPT_STEP},
		{"warmup-iters", required_argument, NULL, 'w'},
		{"check", no_argument, NULL, 'c'},
		{"ev-profile", required_argument, NULL, 'e'},
		{"cc-profile", required_argument, NULL, OPT_CC_PROFILE},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	int c;

	*o = (struct options){.tcp_port = DEF_TCP_PORT,
			      .ib_port = DEF_IB_PORT,
			      .gid_index = DEF_GID_INDEX,
			      .iters = DEF_ITERS,
			      .max_size = DEF_MAX_SIZE,
			      .min_size = DEF_MIN_SIZE,
			      .step = DEF_STEP,
			      .warmup = DEF_WARMUP};
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":p:d:i:g:m:n:s:w:ce:h", longs, NULL)) != -1) {
		switch (c) {
		case 'p': o->tcp_port = (int)number("-p", optarg, 1, 65535, false); break;
		case 'd': o->ib_dev = optarg; break;
		case 'i': o->ib_port = (int)number("-i", optarg, 1, 255, false); break;
		case 'g': o->gid_index = (int)number("-g", optarg, 0, 255, false); break;
		case 'm':
			o->mtu = (int)number("-m", optarg, 256, 4096, false);
			if (o->mtu & (o->mtu - 1))
				refuse("-m %s: an MTU is 256, 512, 1024, 2048 or 4096", optarg);
			break;
		case 'n': o->iters = (uint32_t)number("-n", optarg, 1, MAX_ITERS, false); break;
		case 's': o->max_size = number("-s", optarg, 1, MAX_SIZE_LIMIT, true); break;
		case OPT_MIN_SIZE:
			o->min_size = number("--min-size", optarg, 1, MAX_SIZE_LIMIT, true);
			break;
		case OPT_STEP:
			o->step = (uint32_t)number("--step-factor", optarg, 2, 1u << 20, false);
			break;
		case 'w': o->warmup = (uint32_t)number("-w", optarg, 0, MAX_ITERS, false); break;
		case 'c': o->check = true; break;
		case 'e': o->ev_profile = number("-e", optarg, 0, UINT64_MAX, false); break;
		case OPT_CC_PROFILE:
			o->cc_profile = number("--cc-profile", optarg, 0, UINT64_MAX, false);
			break;
		case 'h': usage(stdout); exit(0);
		case ':': refuse("%s needs a value", argv[optind - 1]);
		default:
			if (optopt)
				refuse("-%c: no such option", optopt);
			refuse("%s: no such option", argv[optind - 1]);
		}
	}
	if (optind < argc)
		o->server = argv[optind++];
	if (optind < argc)
		refuse("%s: one server address at most", argv[optind]);
	if (o->min_size > o->max_size)
		refuse("--min-size %llu is above -s %llu", (unsigned long long)o->min_size,
		       (unsigned long long)o->max_size);
}

/* ---- the run's objects ---- */

static struct bench bench;

/* Destroys what exists, children first; false if a destroy call failed (said on stderr). */
static bool teardown(struct bench *b)
{
	bool ok = true;

#define RELEASE(obj, call, what)                                                         \
	do {                                                                             \
		if (obj) {                                                               \
			if (call) {                                                      \
				fprintf(stderr, BENCH_NAME ": " what ": %s\n", strerror(errno)); \
				ok = false;                                              \
			}                                                                \
			obj = NULL;                                                      \
		}                                                                        \
	} while (0)
	RELEASE(b->qp, mrc_destroy_qp(b->qp), "mrc_destroy_qp");
	RELEASE(b->send_cq, mrc_destroy_cq(b->send_cq), "mrc_destroy_cq (send)");
	RELEASE(b->recv_cq, mrc_destroy_cq(b->recv_cq), "mrc_destroy_cq (receive)");
	RELEASE(b->channel, mrc_destroy_comp_channel(b->channel), "mrc_destroy_comp_channel");
	RELEASE(b->mr, ibv_dereg_mr(b->mr), "ibv_dereg_mr");
	RELEASE(b->pd, ibv_dealloc_pd(b->pd), "ibv_dealloc_pd");
	RELEASE(b->mctx, mrc_destroy_context(b->mctx), "mrc_destroy_context");
	RELEASE(b->vctx, ibv_close_device(b->vctx), "ibv_close_device");
#undef RELEASE
	if (b->devices) {
		ibv_free_device_list(b->devices);
		b->devices = NULL;
	}
	free(b->buf);
	b->buf = NULL;
	if (b->fd >= 0)
		close(b->fd);
	if (b->listen_fd >= 0)
		close(b->listen_fd);
	b->fd = b->listen_fd = -1;
	return ok;
}

static void teardown_on_fail(void)
{
	(void)teardown(&bench);
}

/* The sweep: min, min * step, ... and max itself last. */
static void plan_sizes(struct bench *b)
{
	uint64_t s = b->opt.min_size;

	b->nsizes = 0;
	for (;;) {
		b->sizes[b->nsizes++] = (size_t)s;
		if (s >= b->opt.max_size)
			break;
		s = s > b->opt.max_size / b->opt.step ? b->opt.max_size : s * b->opt.step;
	}
}

/* ---- device, context, queues ---- */

static int mtu_bytes(enum ibv_mtu m)
{
	return m >= IBV_MTU_256 && m <= IBV_MTU_4096 ? 128 << m : 0;
}

static enum ibv_mtu mtu_enum(int bytes)
{
	for (enum ibv_mtu m = IBV_MTU_256; m <= IBV_MTU_4096; m++)
		if (mtu_bytes(m) == bytes)
			return m;
	return 0;
}

static void open_device(struct bench *b)
{
	struct ibv_device *dev = NULL;
	int n = 0;

	b->devices = ibv_get_device_list(&n);
	if (!b->devices)
		bench_fail("ibv_get_device_list: %s", strerror(errno));
	if (n == 0)
		bench_fail("no verbs device (is the libibverbs.so next to lib_mrc.so found first?)");
	for (int i = 0; i < n && !dev; i++)
		if (!b->opt.ib_dev || !strcmp(ibv_get_device_name(b->devices[i]), b->opt.ib_dev))
			dev = b->devices[i];
	if (!dev) {
		char names[256] = "";

		for (int i = 0; i < n; i++)
			snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s%s",
				 i ? ", " : "", ibv_get_device_name(b->devices[i]));
		bench_fail("no device %s (there are: %s)", b->opt.ib_dev, names);
	}
	b->vctx = ibv_open_device(dev);
	if (!b->vctx)
		bench_fail("ibv_open_device %s: %s (MRC_DEBUG=1 says why)",
			   ibv_get_device_name(dev), strerror(errno));
	printf(BENCH_NAME ": device %s, port %d\n", ibv_get_device_name(dev), b->opt.ib_port);
}

static void query_port(struct bench *b)
{
	struct ibv_port_attr pa;
	enum ibv_mtu want;

	memset(&pa, 0, sizeof(pa));
	if (ibv_query_port(b->vctx, (uint8_t)b->opt.ib_port, &pa))
		bench_fail("ibv_query_port %d: %s", b->opt.ib_port, strerror(errno));
	if (pa.state != IBV_PORT_ACTIVE)
		bench_fail("port %d is not active (state %d)", b->opt.ib_port, (int)pa.state);
	want = b->opt.mtu ? mtu_enum(b->opt.mtu) : pa.active_mtu;
	if (want > pa.active_mtu)
		bench_fail("-m %d is above port %d's active MTU %d", b->opt.mtu, b->opt.ib_port,
			   mtu_bytes(pa.active_mtu));
	b->path_mtu = want;
	if (ibv_query_gid(b->vctx, (uint8_t)b->opt.ib_port, b->opt.gid_index, &b->me.gid))
		bench_fail("ibv_query_gid port %d index %d: %s", b->opt.ib_port, b->opt.gid_index,
			   strerror(errno));
	static const uint8_t zero[16];
	if (!memcmp(b->me.gid.raw, zero, sizeof(zero)))
		bench_fail("GID %d of port %d is empty (-g picks another)", b->opt.gid_index,
			   b->opt.ib_port);
}

static void open_mrc(struct bench *b)
{
	uint32_t cur, oldest, vendor, vendor_oldest;
	struct mrc_context_attr ca = {.mrc_api_version_used = MRC_API_VER_USED,
				      .mrc_vendor_api_version_used = MRC_VENDOR_API_VER_USED};
	struct mrc_device_attr da;
	int supported = 0;

	mrc_query_version(&cur, &oldest, &vendor, &vendor_oldest);
	if (MRC_API_VER_USED > cur || MRC_API_VER_USED < oldest)
		bench_fail("lib_mrc.so implements MRC API 0x%08x (down to 0x%08x), this program "
			   "was built for 0x%08x",
			   cur, oldest, (unsigned)MRC_API_VER_USED);
	b->mctx = mrc_create_context(b->vctx, &ca);
	if (!b->mctx)
		bench_fail("mrc_create_context: %s", strerror(errno));
	memset(&da, 0, sizeof(da));
	if (mrc_query_device_ex(b->vctx, b->mctx, &da, &supported))
		bench_fail("mrc_query_device_ex: %s", strerror(errno));
	if (!supported)
		bench_fail("the device is no MRC device");
	if (!(da.mrc_protocol_version & MRC_PROTOCOL_VERSION_1))
		bench_fail("the device does not speak MRC protocol version 1 (bitmap 0x%x)",
			   da.mrc_protocol_version);
	printf(BENCH_NAME ": MRC API %u.%u.%u, max Write-with-Immediates %u/%u, max MPR %u\n",
	       cur >> MRC_API_VER_MAJOR_OFFSET, (cur >> MRC_API_VER_MINOR_OFFSET) & 0xff,
	       cur & 0xffff, da.wimm_attr.max_wimm, da.wimm_attr.max_wimm_dest,
	       da.mpr_attr.max_mpr);
}

static void create_queues(struct bench *b)
{
	struct mrc_qp_init_attr qa;

	b->pd = ibv_alloc_pd(b->vctx);
	if (!b->pd)
		bench_fail("ibv_alloc_pd: %s", strerror(errno));
	b->send_cq = mrc_create_cq(b->mctx, SEND_DEPTH, NULL, NULL, 0);
	if (!b->send_cq)
		bench_fail("mrc_create_cq (send): %s", strerror(errno));
	if (mrc_create_comp_channel(b->mctx, &b->channel))
		bench_fail("mrc_create_comp_channel: %s", strerror(errno));
	if (mrc_get_comp_channel_fd(b->channel, &b->channel_fd))
		bench_fail("mrc_get_comp_channel_fd: %s", strerror(errno));
	b->recv_cq = mrc_create_cq(b->mctx, RECV_DEPTH, NULL, b->channel, 0);
	if (!b->recv_cq)
		bench_fail("mrc_create_cq (receive): %s", strerror(errno));
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = b->send_cq;
	qa.recv_cq = b->recv_cq;
	qa.pd = b->pd;
	qa.cap.max_send_wr = SEND_DEPTH;
	qa.cap.max_recv_wr = RECV_DEPTH;
	qa.cap.max_send_sge = 1;
	qa.cap.max_recv_sge = 1;
	qa.sq_sig_all = 0;
	qa.protocol_version = MRC_PROTOCOL_VERSION_1;
	b->qp = mrc_create_qp(b->mctx, &qa);
	if (!b->qp)
		bench_fail("mrc_create_qp: %s", strerror(errno));
	if (mrc_get_qpn(b->qp, &b->me.qpn))
		bench_fail("mrc_get_qpn: %s", strerror(errno));
}

static void register_buffer(struct bench *b)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	/* --check gives each Write of a round its own slot of the buffer (the client's as the
	 * source, the server's as the target). */
	b->buf_len = b->opt.max_size;
	if (b->opt.check && b->buf_len < CHECK_SPAN)
		b->buf_len = CHECK_SPAN;
	b->buf_len = (b->buf_len + page - 1) / page * page;
	if (posix_memalign(&b->buf, page, b->buf_len))
		bench_fail("no memory for a %zu-byte buffer", b->buf_len);
	memset(b->buf, 0, b->buf_len);
	b->mr = ibv_reg_mr(b->pd, b->buf, b->buf_len,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!b->mr)
		bench_fail("ibv_reg_mr of %zu bytes: %s", b->buf_len, strerror(errno));
}

/* ---- QP transitions (design: RESET -> INIT -> RTR -> RTS, the masks each takes) ---- */

static void modify(struct bench *b, struct ibv_qp_attr *v, int vmask, struct mrc_qp_attr *m,
		   int mmask, const char *to)
{
	if (mrc_modify_qp(b->qp, v, vmask, m, mmask))
		bench_fail("mrc_modify_qp to %s: %s (MRC_DEBUG=1 says why)", to, strerror(errno));
}

static void qp_to_init(struct bench *b)
{
	struct ibv_qp_attr v;
	struct mrc_qp_attr m;

	memset(&v, 0, sizeof(v));
	memset(&m, 0, sizeof(m));
	v.qp_state = IBV_QPS_INIT;
	v.pkey_index = 0;
	v.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	/* Profile 0 is the device's default; others a controller set (mrc_ctl.h). */
	m.profile.ev_profile_id = b->opt.ev_profile;
	m.profile.cc_profile_id = b->opt.cc_profile;
	modify(b, &v, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_ACCESS_FLAGS, &m,
	       MRC_QP_EV_PROFILE_ID | MRC_QP_CC_PROFILE_ID, "INIT");
}

static void qp_to_rtr(struct bench *b)
{
	struct ibv_qp_attr v;
	struct mrc_qp_attr m;

	memset(&v, 0, sizeof(v));
	memset(&m, 0, sizeof(m));
	v.qp_state = IBV_QPS_RTR;
	v.path_mtu = b->path_mtu;
	v.dest_qp_num = b->peer.qpn;
	v.rq_psn = b->peer.psn;
	v.ah_attr.is_global = 1;
	v.ah_attr.grh.dgid = b->peer.gid;
	v.ah_attr.grh.sgid_index = (uint8_t)b->opt.gid_index;
	v.ah_attr.grh.hop_limit = 64;
	v.ah_attr.port_num = (uint8_t)b->opt.ib_port;
	modify(b, &v, IBV_QP_STATE | IBV_QP_AV | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_PATH_MTU,
	       &m, 0, "RTR");
}

static void qp_to_rts(struct bench *b)
{
	struct ibv_qp_attr v;
	struct mrc_qp_attr m;

	memset(&v, 0, sizeof(v));
	memset(&m, 0, sizeof(m));
	v.qp_state = IBV_QPS_RTS;
	v.sq_psn = b->me.psn;
	modify(b, &v, IBV_QP_STATE | IBV_QP_SQ_PSN, &m, 0, "RTS");
}

/* ---- main ---- */

static void print_gid(const char *who, const struct hello *h)
{
	char text[INET6_ADDRSTRLEN];

	if (!inet_ntop(AF_INET6, h->gid.raw, text, sizeof(text)))
		snprintf(text, sizeof(text), "?");
	printf(BENCH_NAME ": %-6s QPN 0x%06x PSN 0x%06x GID %s\n", who, h->qpn, h->psn, text);
}

static uint32_t random_psn(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	srand48(ts.tv_nsec ^ ((long)getpid() << 16));
	return (uint32_t)lrand48() & 0xffffff;
}

int main(int argc, char **argv)
{
	struct bench *b = &bench;
	bool client;

	parse(argc, argv, &b->opt);
	client = b->opt.server != NULL;
	b->fd = b->listen_fd = -1;
	plan_sizes(b);
	setvbuf(stdout, NULL, _IOLBF, 0);
	bench_on_fail(teardown_on_fail);

	open_device(b);
	query_port(b);
	open_mrc(b);
	create_queues(b);
	register_buffer(b);
	qp_to_init(b);

	b->me.role = client;
	b->me.psn = random_psn();
	b->me.rkey = b->mr->rkey;
	b->me.addr = (uintptr_t)b->buf;
	b->me.buf_len = b->buf_len;
	b->me.mtu = b->path_mtu;
	b->me.min_size = b->opt.min_size;
	b->me.max_size = b->opt.max_size;
	b->me.step = b->opt.step;
	b->me.iters = b->opt.iters;
	b->me.warmup = b->opt.warmup;
	b->me.check = b->opt.check;

	if (client) {
		b->fd = net_connect(b->opt.server, b->opt.tcp_port, CONNECT_PATIENCE_SECONDS);
	} else {
		b->listen_fd = net_listen(b->opt.tcp_port);
		printf(BENCH_NAME ": server waiting on TCP port %d\n", b->opt.tcp_port);
		b->fd = net_accept(b->listen_fd);
		b->listen_fd = -1;
	}
	hello_exchange(b->fd, &b->me, &b->peer);
	hello_agree(&b->me, &b->peer);
	/* Both ends use the smaller of their MTUs. */
	if (b->peer.mtu >= IBV_MTU_256 && b->peer.mtu < (uint32_t)b->path_mtu)
		b->path_mtu = (enum ibv_mtu)b->peer.mtu;
	print_gid("local", &b->me);
	print_gid("remote", &b->peer);
	/* Fine for one NIC looping back; two NICs with one address cannot reach each other. */
	if (!memcmp(b->me.gid.raw, b->peer.gid.raw, sizeof(b->me.gid.raw)))
		fprintf(stderr, BENCH_NAME ": warning: both ends have GID %d's address: unless they "
				"share one NIC, give each its own (mrc-rs: MRC_ADDR)\n",
			b->opt.gid_index);
	printf(BENCH_NAME ": sizes %zu..%zu (x%u, %u sizes), %u iterations + %u warm-up, MTU %d, "
	       "check %s\n",
	       b->sizes[0], b->sizes[b->nsizes - 1], b->opt.step, b->nsizes, b->opt.iters,
	       b->opt.warmup, mtu_bytes(b->path_mtu), b->opt.check ? "on" : "off");

	qp_to_rtr(b);
	qp_to_rts(b);

	if (client)
		run_client(b);
	else
		run_server(b);

	if (!teardown(b))
		bench_fail("the teardown failed");
	bench_on_fail(NULL);
	if (b->opt.check)
		printf(BENCH_NAME ": ok, every byte checked\n");
	else
		printf(BENCH_NAME ": ok\n");
	return 0;
}
