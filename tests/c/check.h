/*
 * The checks of mrc-rs's C test programs (the .c files of tests/c): each check counts, a failed one prints
 * file:line, the check, what the call returned and errno; the program stops at the first
 * failure unless keep_going is set. The includer defines CHECK_PROG, its name in the
 * messages. Written for mrc-rs. SPDX-License-Identifier: Apache-2.0 OR MIT
 */
#ifndef MRC_TESTS_CHECK_H
#define MRC_TESTS_CHECK_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef CHECK_PROG
#error "define CHECK_PROG (the program's name) before including check.h"
#endif

/* ---------------------------------------------------------------------------------------
 * Checks
 * ------------------------------------------------------------------------------------- */

/* How long a completion, an event or a readable fd may take on the in-memory fabric. */
#define WAIT_MS 10000
/* How long to watch for a completion or an event that must not come. */
#define QUIET_MS 50
/* The whole program: a hang (a call that blocks for ever) fails instead. */
#define WATCHDOG_S 240

static const char *group = "setup";
static unsigned checks, failures, group_checks, group_failures;
static int keep_going;

static void failed_line(const char *file, int line, const char *what)
{
	fprintf(stderr, "%s:%d: FAILED [%s] %s", file, line, group, what);
}

static void end_failure(int fatal)
{
	failures++;
	group_failures++;
	fflush(stderr);
	if (fatal || !keep_going) {
		printf("%s: FAILED in %s\n", CHECK_PROG, group);
		exit(1);
	}
}

/* A call's result: ok, and what it returned (a number or a pointer) and errno. */
static int check_ret(int ok, int fatal, const char *file, int line, const char *what,
		     long long ret, int is_ptr, int err)
{
	checks++;
	group_checks++;
	if (ok)
		return 1;
	failed_line(file, line, what);
	if (is_ptr)
		fprintf(stderr, ": returned %p", (void *)(intptr_t)ret);
	else
		fprintf(stderr, ": returned %lld", ret);
	fprintf(stderr, ", errno %d (%s)\n", err, err ? strerror(err) : "not set");
	end_failure(fatal);
	return 0;
}

/* Two values that must be equal. */
static int check_eq(const char *file, int line, const char *what, long long got,
		    long long want)
{
	checks++;
	group_checks++;
	if (got == want)
		return 1;
	failed_line(file, line, what);
	fprintf(stderr, ": got %lld (%#llx), want %lld (%#llx)\n", got, got, want, want);
	end_failure(0);
	return 0;
}

/* A condition, with an optional explanation of what was seen. */
static int check_cond(int ok, const char *file, int line, const char *what, const char *seen)
{
	checks++;
	group_checks++;
	if (ok)
		return 1;
	failed_line(file, line, what);
	fprintf(stderr, "%s%s\n", seen ? ": " : "", seen ? seen : "");
	end_failure(0);
	return 0;
}

#define CHECK(cond) check_cond(!!(cond), __FILE__, __LINE__, #cond, NULL)
#define CHECK_SEEN(cond, seen) check_cond(!!(cond), __FILE__, __LINE__, #cond, (seen))
#define CHECK_EQ(got, want)                                                          \
	check_eq(__FILE__, __LINE__, #got " == " #want, (long long)(got), (long long)(want))
#define CHECK_RANGE(got, lo, hi)                                                     \
	({                                                                           \
		long long g_ = (long long)(got);                                     \
		char seen_[64];                                                      \
		snprintf(seen_, sizeof seen_, "%lld", g_);                           \
		check_cond(g_ >= (long long)(lo) && g_ <= (long long)(hi), __FILE__, __LINE__, \
			   #lo " <= " #got " <= " #hi, seen_);                        \
	})
#define CHECK_PTR_EQ(got, want)                                                      \
	check_eq(__FILE__, __LINE__, #got " == " #want, (long long)(intptr_t)(got),      \
		 (long long)(intptr_t)(want))

/* An int call that must return 0. */
#define OK(call)                                                                     \
	({                                                                           \
		errno = 0;                                                           \
		int rc_ = (call);                                                    \
		int e_ = errno;                                                      \
		check_ret(rc_ == 0, 0, __FILE__, __LINE__, #call " == 0", rc_, 0, e_); \
	})

/* An int call that must return -1 with errno e (or e2); text: the check, for the report. */
#define FAILS_(call, e, e2, text)                                                    \
	({                                                                           \
		errno = 0;                                                           \
		int rc_ = (call);                                                    \
		int e_ = errno;                                                      \
		check_ret(rc_ == -1 && (e_ == (e) || e_ == (e2)), 0, __FILE__, __LINE__, \
			  (text), rc_, 0, e_);                                       \
	})
#define FAILS(call, e) FAILS_(call, e, e, #call " == -1 with errno " #e)
#define FAILS2(call, e, e2) FAILS_(call, e, e2, #call " == -1 with errno " #e " or " #e2)

/* A libibverbs int call that must fail with errno e. rdma-core documents some of these
 * (ibv_dealloc_pd, ibv_dereg_mr, ibv_query_port) as returning the errno value and others
 * as returning -1: either return is accepted, errno must be e. */
#define IBV_FAILS(call, e)                                                           \
	({                                                                           \
		errno = 0;                                                           \
		int rc_ = (call);                                                    \
		int e_ = errno;                                                      \
		check_ret((rc_ == -1 || rc_ == (e)) && e_ == (e), 0, __FILE__, __LINE__, \
			  #call " fails with errno " #e, rc_, 0, e_);                \
	})

/* A pointer call that must succeed. Fatal: what follows uses the object. */
#define MADE(call)                                                                   \
	({                                                                           \
		errno = 0;                                                           \
		__typeof__(call) p_ = (call);                                        \
		int e_ = errno;                                                      \
		check_ret(p_ != NULL, 1, __FILE__, __LINE__, #call " != NULL",       \
			  (long long)(intptr_t)p_, 1, e_);                           \
		p_;                                                                  \
	})

/* A pointer call that must return NULL with errno e (or e2). */
#define NULLS_(call, e, e2, text)                                                    \
	({                                                                           \
		errno = 0;                                                           \
		__typeof__(call) p_ = (call);                                        \
		int e_ = errno;                                                      \
		check_ret(p_ == NULL && (e_ == (e) || e_ == (e2)), 0, __FILE__, __LINE__, \
			  (text), (long long)(intptr_t)p_, 1, e_);                   \
	})
#define NULLS(call, e) NULLS_(call, e, e, #call " == NULL with errno " #e)
#define NULLS2(call, e, e2) NULLS_(call, e, e2, #call " == NULL with errno " #e " or " #e2)

static void begin(const char *name)
{
	group = name;
	group_checks = 0;
	group_failures = 0;
}

static void end(void)
{
	if (group_failures)
		printf("%-22s FAILED (%u of %u checks)\n", group, group_failures, group_checks);
	else
		printf("%-22s ok (%u checks)\n", group, group_checks);
	fflush(stdout);
}

static void on_watchdog(int sig)
{
	static const char msg[] = CHECK_PROG ": FAILED: timed out (a call blocked) in ";
	(void)sig;
	if (write(2, msg, sizeof msg - 1) < 0 || write(2, group, strlen(group)) < 0 ||
	    write(2, "\n", 1) < 0)
		_exit(1);
	_exit(1);
}

static long long now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

#endif /* MRC_TESTS_CHECK_H */
