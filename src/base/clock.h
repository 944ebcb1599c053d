/* SPDX-License-Identifier: MIT */
/*
 * Cheap time and thread id for hook paths.
 *
 * gh_now_ns() is CLOCK_MONOTONIC through the vDSO (no syscall).
 * gh_gettid() does one gettid syscall per thread and caches it in
 * initial-exec TLS (the library is preloaded, so static TLS is fine).
 * A forked child inherits the forking thread's cache, which holds the
 * parent's tid: the atfork child handler must call gh_clock_atfork_child()
 * (gh_evlog_atfork_child() does).  The cache variable is defined in log.c.
 */
#ifndef GH_CLOCK_H
#define GH_CLOCK_H

#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

extern __thread int32_t gh_tid_cache_;

static inline uint64_t gh_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline uint64_t gh_wall_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* gettid cannot fail, so errno is untouched. */
static inline int32_t gh_gettid(void)
{
	int32_t tid = gh_tid_cache_;

	if (__builtin_expect(tid == 0, 0)) {
		tid = (int32_t)syscall(SYS_gettid);
		gh_tid_cache_ = tid;
	}
	return tid;
}

/* In a fork child: the only thread's tid is now the child's pid. */
static inline void gh_clock_atfork_child(void)
{
	gh_tid_cache_ = 0;
}

#endif
