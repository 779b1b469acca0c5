/*
 * mrc_bench: what its files share. mrc_bench.c reads the options and sets up the device and
 * the QP; bench_run.c runs the sweep on either end (the rounds of Writes, the client's posting
 * and timing, the server's waiting and checking); bench_net.c carries the TCP side (connection,
 * the hello both ends exchange, the status the server returns per round) and the data pattern
 * of --check.
 *
 * Written for mrc-rs. SPDX-License-Identifier: Apache-2.0 OR MIT
 */
#ifndef MRC_BENCH_H
#define MRC_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>
#include <mrc.h>

#define BENCH_NAME "mrc_bench"

/* Prints "mrc_bench: <message>" on stderr, releases what bench_cleanup was given and exits 1. */
void bench_fail(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
/* What bench_fail releases before it exits (mrc_bench.c registers it once set up). */
void bench_on_fail(void (*cleanup)(void));

/* ---- TCP ---- */

/* The server's listening socket on `port` (IPv6 and IPv4 where the system allows both). */
int net_listen(int port);
/* The one client of a listening socket; the listening socket is closed. */
int net_accept(int listen_fd);
/* A connection to host:port, retried while refused for up to `patience_s` seconds. */
int net_connect(const char *host, int port, int patience_s);
/* Exactly len bytes, or bench_fail naming `what` (the peer going away included). */
void net_send(int fd, const void *buf, size_t len, const char *what);
void net_recv(int fd, void *buf, size_t len, const char *what);
/* True when the peer closed the connection or it broke (a message waiting is not that). */
bool net_peer_gone(int fd);

/* ---- the hello: what each end tells the other before its QP moves to RTR ---- */

struct hello {
	uint32_t role; /* 0 server, 1 client */
	uint32_t qpn;
	uint32_t psn;
	uint32_t rkey;
	union ibv_gid gid;
	uint64_t addr;    /* the buffer's virtual address: the remote address of a Write */
	uint64_t buf_len; /* the buffer's length (the same on both ends) */
	uint32_t mtu;     /* enum ibv_mtu */
	/* The options that must agree. */
	uint64_t min_size;
	uint64_t max_size;
	uint32_t step;
	uint32_t iters;
	uint32_t warmup;
	uint32_t check;
};

/* Sends ours and reads the peer's (in that order on both ends: small enough not to block). */
void hello_exchange(int fd, const struct hello *mine, struct hello *peer);
/* Fails (one line naming the first option that differs) unless the peer runs like us. */
void hello_agree(const struct hello *mine, const struct hello *peer);

/* ---- the status the server returns after each round ---- */

enum round_result {
	ROUND_OK = 0,
	ROUND_BAD_DATA = 1, /* --check found a wrong byte */
};

struct round_status {
	uint32_t seq;    /* the round's number in the run */
	uint32_t result; /* enum round_result */
};

void status_send(int fd, const struct round_status *st);
void status_recv(int fd, struct round_status *st);

/* ---- the data of --check ---- */

/*
 * Write `iter` of size `size_idx` carries, at byte j, the byte j of a sequence made from the
 * pair: no two Writes of a run carry the same bytes (but by chance for tiny sizes).
 * `invert` fills the bitwise complement instead: what the server leaves in a slot before the
 * Write that must overwrite it, so a byte the Write misses can never pass.
 */
void pattern_fill(void *buf, size_t len, unsigned size_idx, uint32_t iter, bool invert);
/* The first byte of buf that differs from the pattern, or len when every byte is right. */
size_t pattern_check(const void *buf, size_t len, unsigned size_idx, uint32_t iter);
/* The byte the pattern has at `off`. */
uint8_t pattern_byte(unsigned size_idx, uint32_t iter, size_t off);

/* ---- the run (mrc_bench.c sets it up, bench_run.c runs it) ---- */

/* Writes in flight: the send queue's depth; every SIGNAL_EVERY-th Write asks for a completion. */
#define SEND_DEPTH 128
#define SIGNAL_EVERY 16
/* Receives the server keeps posted for the Write-with-Immediates (one per round in flight). */
#define RECV_DEPTH 16
/* No completion (nor word from the peer) for this long: the run failed. */
#define STALL_SECONDS 30
#define MAX_SIZES 64

struct options {
	const char *server; /* NULL: this is the server */
	int tcp_port;
	const char *ib_dev; /* NULL: the first device */
	int ib_port;
	int gid_index;
	int mtu; /* bytes; 0: the port's active MTU */
	uint32_t iters;
	uint64_t max_size;
	uint64_t min_size;
	uint32_t step;
	uint32_t warmup;
	bool check;
	uint64_t ev_profile; /* mrc_ctl.h profile ids a controller set; 0: the device's */
	uint64_t cc_profile;
};

struct bench {
	struct options opt;
	size_t sizes[MAX_SIZES];
	unsigned nsizes;

	struct ibv_device **devices;
	struct ibv_context *vctx;
	struct mrc_context *mctx;
	struct ibv_pd *pd;
	struct mrc_comp_channel *channel; /* the receive CQ's: the server sleeps on it */
	int channel_fd;
	struct mrc_cq *send_cq;
	struct mrc_cq *recv_cq;
	struct mrc_qp *qp;
	void *buf;
	size_t buf_len;
	struct ibv_mr *mr;
	int listen_fd;
	int fd;

	struct hello me;
	struct hello peer;
	enum ibv_mtu path_mtu;
	/* Writes posted and Writes known complete (a signaled completion covers those before). */
	uint64_t posted;
	uint64_t completed;
};

/* The sweep of the client: every round of Writes, a result row per size. */
void run_client(struct bench *b);
/* The sweep of the server: every round received (and with --check verified) and answered. */
void run_server(struct bench *b);

#endif /* MRC_BENCH_H */
