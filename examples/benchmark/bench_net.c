/*
 * mrc_bench: the TCP side (the connection, the hello, the per-round status) and the data
 * pattern of --check. Integers go big-endian on the wire.
 *
 * Written for mrc-rs. SPDX-License-Identifier: Apache-2.0 OR MIT
 */
#define _GNU_SOURCE
#include "bench.h"

#include <endian.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

/* A read from the peer waits at most this long (a peer stuck mid-run ends the run). */
#define NET_PATIENCE_SECONDS 120

static void (*fail_cleanup)(void);

void bench_on_fail(void (*cleanup)(void))
{
	fail_cleanup = cleanup;
}

void bench_fail(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fputs(BENCH_NAME ": ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	if (fail_cleanup) {
		void (*cleanup)(void) = fail_cleanup;

		fail_cleanup = NULL; /* a failure inside the cleanup does not loop */
		cleanup();
	}
	exit(1);
}

/* ---- TCP ---- */

/* A connected socket: no Nagle wait behind the few bytes of a status, and a read that waits
 * longer than NET_PATIENCE_SECONDS fails instead of hanging the run. */
static void tune(int fd)
{
	int one = 1;
	struct timeval patience = {.tv_sec = NET_PATIENCE_SECONDS};

	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	(void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &patience, sizeof(patience));
}

int net_listen(int port)
{
	struct sockaddr_in6 a6 = {.sin6_family = AF_INET6,
				  .sin6_port = htons((uint16_t)port),
				  .sin6_addr = IN6ADDR_ANY_INIT};
	struct sockaddr_in a4 = {.sin_family = AF_INET,
				 .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_ANY)};
	int one = 1, zero = 0;
	/* IPv6 with IPv4-mapped addresses where the system has IPv6, else IPv4 alone. */
	int fd = socket(AF_INET6, SOCK_STREAM, 0);

	if (fd >= 0) {
		(void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
		(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, (struct sockaddr *)&a6, sizeof(a6)) == 0 && listen(fd, 1) == 0)
			return fd;
		close(fd);
	}
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		bench_fail("socket: %s", strerror(errno));
	(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&a4, sizeof(a4)) || listen(fd, 1)) {
		int e = errno;

		close(fd);
		bench_fail("cannot listen on TCP port %d: %s", port, strerror(e));
	}
	return fd;
}

int net_accept(int listen_fd)
{
	int fd;

	do
		fd = accept(listen_fd, NULL, NULL);
	while (fd < 0 && errno == EINTR);
	if (fd < 0)
		bench_fail("accept: %s", strerror(errno));
	close(listen_fd);
	tune(fd);
	return fd;
}

int net_connect(const char *host, int port, int patience_s)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
	struct addrinfo *res, *ai;
	char service[16];
	struct timespec start, now;
	int err = 0;

	snprintf(service, sizeof(service), "%d", port);
	int rc = getaddrinfo(host, service, &hints, &res);
	if (rc)
		bench_fail("%s: %s", host, gai_strerror(rc));
	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) {
		for (ai = res; ai; ai = ai->ai_next) {
			int fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);

			if (fd < 0) {
				err = errno;
				continue;
			}
			if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
				freeaddrinfo(res);
				tune(fd);
				return fd;
			}
			err = errno;
			close(fd);
		}
		clock_gettime(CLOCK_MONOTONIC, &now);
		/* A server still starting its device is not listening yet: try again. */
		bool waiting = err == ECONNREFUSED || err == ENETUNREACH || err == EHOSTUNREACH;
		if (!waiting || now.tv_sec - start.tv_sec >= patience_s)
			break;
		usleep(100 * 1000);
	}
	freeaddrinfo(res);
	bench_fail("cannot connect to %s port %d: %s", host, port, strerror(err));
}

void net_send(int fd, const void *buf, size_t len, const char *what)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			bench_fail("sending the %s to the peer: %s", what,
				   n < 0 ? strerror(errno) : "connection closed");
		p += n;
		len -= (size_t)n;
	}
}

void net_recv(int fd, void *buf, size_t len, const char *what)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t n = recv(fd, p, len, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			bench_fail("no %s from the peer for %d s", what, NET_PATIENCE_SECONDS);
		if (n < 0)
			bench_fail("reading the %s from the peer: %s", what, strerror(errno));
		if (n == 0)
			bench_fail("the peer closed the connection before the %s (see its output)",
				   what);
		p += n;
		len -= (size_t)n;
	}
}

bool net_peer_gone(int fd)
{
	uint8_t byte;
	ssize_t n = recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);

	if (n > 0)
		return false;
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return false;
	return true;
}

/* ---- big-endian fields ---- */

static uint8_t *put32(uint8_t *p, uint32_t v)
{
	uint32_t be = htobe32(v);

	memcpy(p, &be, 4);
	return p + 4;
}

static uint8_t *put64(uint8_t *p, uint64_t v)
{
	uint64_t be = htobe64(v);

	memcpy(p, &be, 8);
	return p + 8;
}

static const uint8_t *get32(const uint8_t *p, uint32_t *v)
{
	uint32_t be;

	memcpy(&be, p, 4);
	*v = be32toh(be);
	return p + 4;
}

static const uint8_t *get64(const uint8_t *p, uint64_t *v)
{
	uint64_t be;

	memcpy(&be, p, 8);
	*v = be64toh(be);
	return p + 8;
}

/* ---- the hello ---- */

#define HELLO_MAGIC 0x4d524342u /* "MRCB" */
#define HELLO_VERSION 1u
/* magic, version, role, qpn, psn, rkey, gid, addr, buf_len, mtu, min, max, step, iters,
 * warmup, check */
#define HELLO_LEN (4 * 6 + 16 + 8 + 8 + 4 + 8 + 8 + 4 * 4)

void hello_exchange(int fd, const struct hello *mine, struct hello *peer)
{
	uint8_t out[HELLO_LEN], in[HELLO_LEN];
	uint8_t *w = out;
	const uint8_t *r = in;
	uint32_t magic, version;

	w = put32(w, HELLO_MAGIC);
	w = put32(w, HELLO_VERSION);
	w = put32(w, mine->role);
	w = put32(w, mine->qpn);
	w = put32(w, mine->psn);
	w = put32(w, mine->rkey);
	memcpy(w, mine->gid.raw, 16);
	w += 16;
	w = put64(w, mine->addr);
	w = put64(w, mine->buf_len);
	w = put32(w, mine->mtu);
	w = put64(w, mine->min_size);
	w = put64(w, mine->max_size);
	w = put32(w, mine->step);
	w = put32(w, mine->iters);
	w = put32(w, mine->warmup);
	w = put32(w, mine->check);
	net_send(fd, out, sizeof(out), "hello");
	net_recv(fd, in, sizeof(in), "hello");

	r = get32(r, &magic);
	r = get32(r, &version);
	if (magic != HELLO_MAGIC)
		bench_fail("the peer is not an mrc_bench (hello 0x%08x)", magic);
	if (version != HELLO_VERSION)
		bench_fail("the peer speaks hello version %u, this mrc_bench %u", version,
			   HELLO_VERSION);
	r = get32(r, &peer->role);
	r = get32(r, &peer->qpn);
	r = get32(r, &peer->psn);
	r = get32(r, &peer->rkey);
	memcpy(peer->gid.raw, r, 16);
	r += 16;
	r = get64(r, &peer->addr);
	r = get64(r, &peer->buf_len);
	r = get32(r, &peer->mtu);
	r = get64(r, &peer->min_size);
	r = get64(r, &peer->max_size);
	r = get32(r, &peer->step);
	r = get32(r, &peer->iters);
	r = get32(r, &peer->warmup);
	(void)get32(r, &peer->check);
}

void hello_agree(const struct hello *mine, const struct hello *peer)
{
	if (mine->role == peer->role)
		bench_fail("the peer is a %s too", mine->role ? "client" : "server");
#define AGREE(field, option)                                                             \
	do {                                                                             \
		if (mine->field != peer->field)                                          \
			bench_fail("the peer runs with other options: " option             \
				   " %llu here, %llu there",                               \
				   (unsigned long long)mine->field,                        \
				   (unsigned long long)peer->field);                       \
	} while (0)
	AGREE(min_size, "--min-size");
	AGREE(max_size, "-s/--size");
	AGREE(step, "--step-factor");
	AGREE(iters, "-n/--iters");
	AGREE(warmup, "-w/--warmup-iters");
	AGREE(check, "-c/--check (1 on, 0 off)");
	AGREE(buf_len, "buffer length");
#undef AGREE
}

/* ---- the status ---- */

void status_send(int fd, const struct round_status *st)
{
	uint8_t out[8];

	put32(put32(out, st->seq), st->result);
	net_send(fd, out, sizeof(out), "round status");
}

void status_recv(int fd, struct round_status *st)
{
	uint8_t in[8];

	net_recv(fd, in, sizeof(in), "round status");
	get32(get32(in, &st->seq), &st->result);
}

/* ---- the pattern ---- */

/* splitmix64's finaliser: a seed per (size, iteration) that shares no run with another. */
static uint64_t mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static uint64_t pattern_seed(unsigned size_idx, uint32_t iter)
{
	return mix64(((uint64_t)size_idx << 32) | iter);
}

/* The pattern's 8 bytes at offset 8 * word, as a little-endian integer. */
static uint64_t pattern_word(uint64_t seed, uint64_t word)
{
	return seed + word * 0xd6e8feb86659fd93ull;
}

uint8_t pattern_byte(unsigned size_idx, uint32_t iter, size_t off)
{
	uint64_t v = pattern_word(pattern_seed(size_idx, iter), off / 8);

	return (uint8_t)(v >> (8 * (off % 8)));
}

void pattern_fill(void *buf, size_t len, unsigned size_idx, uint32_t iter, bool invert)
{
	uint64_t seed = pattern_seed(size_idx, iter);
	uint64_t flip = invert ? ~0ull : 0;
	uint8_t *p = buf;
	size_t words = len / 8;

	for (size_t w = 0; w < words; w++) {
		uint64_t le = htole64(pattern_word(seed, w) ^ flip);

		memcpy(p + 8 * w, &le, 8);
	}
	for (size_t off = 8 * words; off < len; off++)
		p[off] = (uint8_t)((pattern_word(seed, words) ^ flip) >> (8 * (off % 8)));
}

size_t pattern_check(const void *buf, size_t len, unsigned size_idx, uint32_t iter)
{
	uint64_t seed = pattern_seed(size_idx, iter);
	const uint8_t *p = buf;
	size_t words = len / 8, off = 8 * words;

	for (size_t w = 0; w < words; w++) {
		uint64_t le = htole64(pattern_word(seed, w));

		if (memcmp(p + 8 * w, &le, 8) != 0) {
			off = 8 * w; /* the wrong byte is in this word */
			break;
		}
	}
	for (; off < len; off++)
		if (p[off] != pattern_byte(size_idx, iter, off))
			return off;
	return len;
}
