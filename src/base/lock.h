/* SPDX-License-Identifier: MIT */
/*
 * A mutex whose lock rules can be asserted.  struct gh_mutex is a
 * pthread mutex; in debug builds (GH_DEBUG: the sanitizer builds of
 * make test-asan and test-tsan) it also records its holder's thread id,
 * and GH_ASSERT_LOCKED(m) aborts with a message on stderr when the
 * calling thread does not hold m.  Without GH_DEBUG the owner is not
 * kept and the assertion is nothing.  No malloc, no stdio (the message
 * goes through log.h): safe on hook paths.
 *
 * A child of fork whose atfork handler took the lock in the parent gives
 * it back with gh_mutex_unlock as usual: the owner is cleared whatever
 * thread id it holds.
 */
#ifndef GH_LOCK_H
#define GH_LOCK_H

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "clock.h"
#include "compiler.h"
#include "log.h"

struct gh_mutex {
	pthread_mutex_t m;
#ifdef GH_DEBUG
	int32_t owner;		/* gh_gettid() of the holder, 0: none (atomic) */
#endif
};

#define GH_MUTEX_INIT	{ .m = PTHREAD_MUTEX_INITIALIZER }

static inline void gh_mutex_lock(struct gh_mutex *l)
{
	pthread_mutex_lock(&l->m);
#ifdef GH_DEBUG
	__atomic_store_n(&l->owner, gh_gettid(), __ATOMIC_RELAXED);
#endif
}

/* pthread_mutex_timedlock (CLOCK_REALTIME): 0, or its error number. */
static inline int gh_mutex_timedlock(struct gh_mutex *l,
				     const struct timespec *until)
{
	int err = pthread_mutex_timedlock(&l->m, until);

#ifdef GH_DEBUG
	if (!err)
		__atomic_store_n(&l->owner, gh_gettid(), __ATOMIC_RELAXED);
#endif
	return err;
}

static inline void gh_mutex_unlock(struct gh_mutex *l)
{
#ifdef GH_DEBUG
	__atomic_store_n(&l->owner, 0, __ATOMIC_RELAXED);
#endif
	pthread_mutex_unlock(&l->m);
}

#ifdef GH_DEBUG
/* Does the calling thread hold l? */
static inline int gh_mutex_held(const struct gh_mutex *l)
{
	return __atomic_load_n(&l->owner, __ATOMIC_RELAXED) == gh_gettid();
}

__attribute__((noreturn, cold))
static inline void gh_mutex_not_held(const char *what, const char *func,
				     const char *file, int line)
{
	gh_log_emit(GH_LOG_ERR, "%s:%d: %s: lock rule broken: %s not held by this thread",
		    file, line, func, what);
	abort();
}

#define GH_ASSERT_LOCKED(l)						\
	do {								\
		if (GH_UNLIKELY(!gh_mutex_held(l)))			\
			gh_mutex_not_held(#l, __func__, __FILE__,	\
					  __LINE__);			\
	} while (0)
#else
#define GH_ASSERT_LOCKED(l)	do { } while (0)
#endif

#endif
