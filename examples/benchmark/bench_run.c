/*
 * mrc_bench: the sweep on either end. Both walk the same plan of rounds: per size a warm-up
 * phase (-w Writes) and a timed phase (-n Writes), each cut into rounds (the whole phase, or
 * with --check as many Writes as the buffer has slots of the size). A round's last Write is a
 * Write-with-Immediate carrying (size index << 24 | round number). MRC places Writes in any
 * order but hands over a Write-with-Immediate's completion only once it and every earlier Write
 * of the QP have landed (docs/mrc-brief.md §3.8): then the server may read the round's slots.
 * It checks them (--check), fills the next round's slots with the complement of what must
 * arrive there and answers over TCP; the client waits for the answer before the next round.
 *
 * Written for mrc-rs. SPDX-License-Identifier: Apache-2.0 OR MIT
 */
#define _GNU_SOURCE
#include "bench.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* ---- rounds: the plan both ends walk in step ---- */

enum phase { PHASE_WARMUP, PHASE_TIMED };

struct round {
	uint32_t seq; /* rounds before it in the run */
	unsigned size_idx;
	size_t size;
	enum phase phase;
	uint32_t first; /* its first Write's iteration: warm-up 0..w-1, timed w..w+n-1 */
	uint32_t count; /* its Writes (the last one with immediate) */
	bool phase_start;
	bool phase_end;
};

/* Writes of one round: the slots of the buffer with --check, else the whole phase. */
static uint32_t round_slots(const struct bench *b, size_t size)
{
	size_t slots = b->buf_len / size;

	if (!b->opt.check)
		return UINT32_MAX;
	return slots > UINT32_MAX ? UINT32_MAX : (uint32_t)slots;
}

static void round_at(const struct bench *b, struct round *r, unsigned size_idx,
		     enum phase phase, uint32_t offset)
{
	uint32_t len = phase == PHASE_WARMUP ? b->opt.warmup : b->opt.iters;
	uint32_t base = phase == PHASE_WARMUP ? 0 : b->opt.warmup;
	uint32_t slots = round_slots(b, b->sizes[size_idx]);

	r->size_idx = size_idx;
	r->size = b->sizes[size_idx];
	r->phase = phase;
	r->first = base + offset;
	r->count = len - offset < slots ? len - offset : slots;
	r->phase_start = offset == 0;
	r->phase_end = offset + r->count == len;
}

static enum phase first_phase(const struct bench *b)
{
	return b->opt.warmup ? PHASE_WARMUP : PHASE_TIMED;
}

static void round_first(const struct bench *b, struct round *r)
{
	r->seq = 0;
	round_at(b, r, 0, first_phase(b), 0);
}

/* Moves r to the next round; false after the last. */
static bool round_next(const struct bench *b, struct round *r)
{
	uint32_t base = r->phase == PHASE_WARMUP ? 0 : b->opt.warmup;

	r->seq++;
	if (!r->phase_end)
		round_at(b, r, r->size_idx, r->phase, r->first - base + r->count);
	else if (r->phase == PHASE_WARMUP)
		round_at(b, r, r->size_idx, PHASE_TIMED, 0);
	else if (r->size_idx + 1 < b->nsizes)
		round_at(b, r, r->size_idx + 1, first_phase(b), 0);
	else
		return false;
	return true;
}

static uint32_t round_imm(const struct round *r)
{
	return (uint32_t)r->size_idx << 24 | (r->seq & 0xffffff);
}

/* Where Write `j` of a round goes (and, at the client, what it sends from). */
static size_t slot_offset(const struct bench *b, const struct round *r, uint32_t j)
{
	return b->opt.check ? (size_t)j * r->size : 0;
}

/* ---- completions ---- */

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The client's guard while it waits for send completions: fails once the server's connection
 * closes, or after STALL_SECONDS without a completion. Cheap: looks at the socket and the
 * clock every 1024 empty polls. (The server sleeps on its channel and its socket instead.) */
struct stall {
	unsigned empty;
	double since;
};

static void stall_reset(struct stall *s)
{
	s->empty = 0;
	s->since = now_s();
}

/* Nothing to reap: give the CPU away (the NIC threads of both ends may share it with this
 * one) and watch for a stall. */
static void idle(struct bench *b, struct stall *s, const struct round *r)
{
	sched_yield();
	if (++s->empty % 1024)
		return;
	if (net_peer_gone(b->fd))
		bench_fail("the server went away during size %zu (see its output)", r->size);
	if (now_s() - s->since > STALL_SECONDS)
		bench_fail("no send completion for %d s during size %zu (round %u)", STALL_SECONDS,
			   r->size, r->seq);
}

/* Polls the send CQ once: the completions reaped (failing on an error completion). */
static int reap_sends(struct bench *b, const struct round *r)
{
	struct ibv_wc wc[16];
	int n = mrc_poll_cq(b->send_cq, 16, wc);

	if (n < 0)
		bench_fail("mrc_poll_cq (send): %s", strerror(errno));
	for (int i = 0; i < n; i++) {
		if (wc[i].status != IBV_WC_SUCCESS)
			bench_fail("Write %llu of the run (size %zu) completed with %s (vendor "
				   "error 0x%x)",
				   (unsigned long long)wc[i].wr_id, r->size,
				   ibv_wc_status_str(wc[i].status), wc[i].vendor_err);
		if (wc[i].opcode != IBV_WC_RDMA_WRITE)
			bench_fail("a send completion with opcode %d, not a Write", wc[i].opcode);
		/* Send completions come in order: this one's Write and every one before it. */
		b->completed = wc[i].wr_id + 1;
	}
	return n;
}

/* One look at the send CQ: a completion resets the stall guard, none idles. */
static void progress(struct bench *b, struct stall *st, const struct round *r)
{
	if (reap_sends(b, r))
		stall_reset(st);
	else
		idle(b, st, r);
}

/* ---- client ---- */

/* Posts Write j of the round; false when the send queue is full for now (EAGAIN). */
static bool post_write(struct bench *b, const struct round *r, uint32_t j)
{
	bool last = j + 1 == r->count;
	size_t off = slot_offset(b, r, j);
	struct ibv_sge sge = {.addr = (uintptr_t)b->buf + off,
			      .length = (uint32_t)r->size,
			      .lkey = b->mr->lkey};
	struct ibv_send_wr wr, *bad = NULL;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = b->posted;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = last ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
	wr.send_flags = last || (b->posted + 1) % SIGNAL_EVERY == 0 ? IBV_SEND_SIGNALED : 0;
	wr.imm_data = htonl(round_imm(r));
	wr.wr.rdma.remote_addr = b->peer.addr + off;
	wr.wr.rdma.rkey = b->peer.rkey;
	if (mrc_post_send(b->qp, &wr, &bad)) {
		if (errno == EAGAIN)
			return false;
		bench_fail("mrc_post_send (Write %u of size %zu): %s", r->first + j, r->size,
			   strerror(errno));
	}
	b->posted++;
	return true;
}

/* Posts the round's Writes, at most SEND_DEPTH in flight, and waits until all completed. */
static void client_round(struct bench *b, const struct round *r)
{
	struct stall st;

	stall_reset(&st);
	for (uint32_t j = 0; j < r->count; j++) {
		while (b->posted - b->completed >= SEND_DEPTH)
			progress(b, &st, r);
		if (b->opt.check)
			pattern_fill((uint8_t *)b->buf + slot_offset(b, r, j), r->size, r->size_idx,
				     r->first + j, false);
		while (!post_write(b, r, j))
			progress(b, &st, r);
	}
	while (b->completed < b->posted)
		progress(b, &st, r);
}

static void print_row(const struct round *r, uint32_t iters, double seconds)
{
	double bytes = (double)r->size * iters;

	printf(" %12zu %12u %14.3f %14.2f %14.6f\n", r->size, iters, bytes * 8 / seconds / 1e9,
	       bytes / seconds / 1e6, iters / seconds / 1e6);
	fflush(stdout);
}

void run_client(struct bench *b)
{
	struct round r;
	struct round_status st;
	double t0 = 0;

	/* The server has posted its receives and prepared the first round. */
	status_recv(b->fd, &st);
	if (st.seq != UINT32_MAX || st.result != ROUND_OK)
		bench_fail("the server is not ready (status %u/%u)", st.seq, st.result);
	printf(" %12s %12s %14s %14s %14s\n", "#bytes", "#iterations", "BW [Gb/s]", "BW [MB/s]",
	       "MsgRate [Mpps]");
	round_first(b, &r);
	do {
		if (r.phase == PHASE_TIMED && r.phase_start)
			t0 = now_s();
		client_round(b, &r);
		double t1 = now_s();
		status_recv(b->fd, &st);
		if (st.seq != r.seq)
			bench_fail("the server answered round %u, expected %u", st.seq, r.seq);
		if (st.result == ROUND_BAD_DATA)
			bench_fail("the server found wrong bytes in size %zu, Writes %u..%u (see its "
				   "output)",
				   r.size, r.first, r.first + r.count - 1);
		if (st.result != ROUND_OK)
			bench_fail("the server failed round %u (status %u)", r.seq, st.result);
		if (r.phase == PHASE_TIMED && r.phase_end)
			print_row(&r, b->opt.iters, t1 - t0);
	} while (round_next(b, &r));
}

/* ---- server ---- */

static void post_recvs(struct bench *b, int n)
{
	for (int i = 0; i < n; i++) {
		struct ibv_recv_wr wr, *bad = NULL;

		/* No scatter list: a Write-with-Immediate places its own payload. */
		memset(&wr, 0, sizeof(wr));
		wr.wr_id = (uint64_t)i;
		if (mrc_post_recv(b->qp, &wr, &bad))
			bench_fail("mrc_post_recv: %s", strerror(errno));
	}
}

/* Fills the round's slots with the complement of what its Writes must bring. */
static void prepare_round(struct bench *b, const struct round *r)
{
	if (!b->opt.check)
		return;
	for (uint32_t j = 0; j < r->count; j++)
		pattern_fill((uint8_t *)b->buf + slot_offset(b, r, j), r->size, r->size_idx,
			     r->first + j, true);
}

/* Sleeps on the completion channel until the receive CQ has a completion (armed, then polled
 * once more: one that came in between fires at once), or fails when the client's connection
 * ends (the client sends nothing after its hello). */
static void sleep_on_channel(struct bench *b, const struct round *r)
{
	struct pollfd fds[2] = {{.fd = b->channel_fd, .events = POLLIN},
				{.fd = b->fd, .events = POLLIN}};
	struct mrc_cq *cq;
	void *cq_context;

	if (poll(fds, 2, -1) < 0) {
		if (errno == EINTR)
			return;
		bench_fail("poll: %s", strerror(errno));
	}
	if (fds[1].revents) {
		if (net_peer_gone(b->fd))
			bench_fail("the client went away during size %zu (see its output)", r->size);
		bench_fail("the client sent data in the middle of size %zu", r->size);
	}
	if (fds[0].revents & POLLIN) {
		if (mrc_get_cq_event(b->channel, &cq, &cq_context))
			bench_fail("mrc_get_cq_event: %s", strerror(errno));
		mrc_ack_cq_events(cq, 1);
	}
}

static void wait_round(struct bench *b, const struct round *r)
{
	struct ibv_wc wc;
	int n;

	while ((n = mrc_poll_cq(b->recv_cq, 1, &wc)) == 0) {
		if (mrc_req_notify_cq(b->recv_cq, 0))
			bench_fail("mrc_req_notify_cq: %s", strerror(errno));
		n = mrc_poll_cq(b->recv_cq, 1, &wc);
		if (n != 0)
			break;
		sleep_on_channel(b, r);
	}
	if (n < 0)
		bench_fail("mrc_poll_cq (receive): %s", strerror(errno));
	if (wc.status != IBV_WC_SUCCESS)
		bench_fail("receive completion of size %zu: %s (vendor error 0x%x)", r->size,
			   ibv_wc_status_str(wc.status), wc.vendor_err);
	if (wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM || !(wc.wc_flags & IBV_WC_WITH_IMM))
		bench_fail("receive completion with opcode %d flags 0x%x, not a Write-with-Immediate",
			   wc.opcode, wc.wc_flags);
	if (ntohl(wc.imm_data) != round_imm(r))
		bench_fail("immediate 0x%08x, expected 0x%08x (size index %u, round %u)",
			   ntohl(wc.imm_data), round_imm(r), r->size_idx, r->seq);
	if (wc.byte_len != r->size)
		bench_fail("the Write-with-Immediate of size %zu says %u bytes", r->size,
			   wc.byte_len);
}

/* Every byte of every Write of the round (--check); at the first wrong one, tells the client
 * and fails. */
static void check_round(struct bench *b, const struct round *r)
{
	for (uint32_t j = 0; b->opt.check && j < r->count; j++) {
		const uint8_t *slot = (const uint8_t *)b->buf + slot_offset(b, r, j);
		size_t bad = pattern_check(slot, r->size, r->size_idx, r->first + j);

		if (bad < r->size) {
			struct round_status st = {.seq = r->seq, .result = ROUND_BAD_DATA};

			status_send(b->fd, &st);
			bench_fail("size %zu, Write %u: byte %zu is 0x%02x, expected 0x%02x", r->size,
				   r->first + j, bad, slot[bad],
				   pattern_byte(r->size_idx, r->first + j, bad));
		}
	}
}

void run_server(struct bench *b)
{
	struct round r, next;
	struct round_status st = {.seq = UINT32_MAX, .result = ROUND_OK};
	uint64_t writes = 0, bytes = 0;

	post_recvs(b, RECV_DEPTH);
	round_first(b, &r);
	prepare_round(b, &r);
	status_send(b->fd, &st); /* ready */
	for (;;) {
		wait_round(b, &r);
		check_round(b, &r);
		st.seq = r.seq;
		writes += r.count;
		bytes += (uint64_t)r.count * r.size;
		post_recvs(b, 1);
		next = r;
		bool more = round_next(b, &next);
		if (more)
			prepare_round(b, &next);
		status_send(b->fd, &st);
		if (r.phase == PHASE_TIMED && r.phase_end)
			printf(BENCH_NAME ": size %zu: %u Writes received%s\n", r.size,
			       b->opt.iters, b->opt.check ? ", every byte checked" : "");
		if (!more)
			break;
		r = next;
	}
	printf(BENCH_NAME ": %llu Writes, %llu bytes received\n", (unsigned long long)writes,
	       (unsigned long long)bytes);
}
