// SPDX-License-Identifier: MIT
/*
 * src/base/guard.c: the per-thread guard; what it does coming down (the
 * ops the hooks layer hands down: is anything queued, apply it, the
 * first use) and errno kept.
 */
#include <errno.h>
#include <pthread.h>

#include "harness.h"

#include "base/base.h"

static int queued;		/* effects waiting (the deferred queue) */
static int drained, drains, firsts;
static int busy_in_drain = -1;
static int requeue;		/* drain queues this many more once */

static int ops_pending(void)
{
	return queued > 0;
}

static void ops_drain(void)
{
	busy_in_drain = gh_guard_busy();
	drains++;
	drained += queued;
	queued = 0;
	if (requeue) {
		/* applying one effect queued another (a signal, a call) */
		queued = requeue;
		requeue = 0;
	}
	errno = EIO;	/* the drain's own calls may change errno */
}

static void ops_first_use(void)
{
	firsts++;
}

/* Without ops (before init): a flag up and down, nothing else. */
TEST(guard_without_ops)
{
	int was;

	CHECK_EQ(gh_guard_busy(), 0);
	was = gh_guard_enter();
	CHECK_EQ(was, 0);
	CHECK_EQ(gh_guard_busy(), 1);
	CHECK_EQ(gh_guard_enter(), 1);	/* nested */
	gh_guard_leave(1);
	CHECK_EQ(gh_guard_busy(), 1);
	gh_guard_leave(was);
	CHECK_EQ(gh_guard_busy(), 0);
}

/*
 * The outermost enter applies what was queued and says first use; a
 * nested one does neither.  Each leave applies what the guarded window
 * queued, with the guard up, and keeps the caller's errno.
 */
TEST(guard_enter_and_leave_apply_what_is_queued)
{
	int was, inner;

	gh_guard_set_ops(ops_pending, ops_drain, ops_first_use);
	queued = 2;
	was = gh_guard_enter();
	CHECK_EQ(was, 0);
	CHECK_EQ(drained, 2);
	CHECK_EQ(busy_in_drain, 1);
	CHECK_EQ(firsts, 1);
	inner = gh_guard_enter();
	CHECK_EQ(inner, 1);
	CHECK_EQ(firsts, 1);
	queued = 3;			/* a call in the guarded window */
	errno = ENOENT;
	gh_guard_leave(inner);
	CHECK_EQ(errno, ENOENT);
	CHECK_EQ(drained, 5);
	CHECK_EQ(gh_guard_busy(), 1);
	queued = 1;
	errno = EAGAIN;
	gh_guard_leave(was);
	CHECK_EQ(errno, EAGAIN);
	CHECK_EQ(drained, 6);
	CHECK_EQ(queued, 0);
	CHECK_EQ(gh_guard_busy(), 0);
	/* each outermost use says first use (the ops decide what it means) */
	gh_guard_leave(gh_guard_enter());
	CHECK_EQ(firsts, 2);
	CHECK_EQ(drains, 3);		/* nothing queued: no drain */
}

/* What applying queues is applied too before the guard comes down. */
TEST(guard_down_drains_until_nothing_is_queued)
{
	gh_guard_set_ops(ops_pending, ops_drain, NULL);
	gh_tls.busy = 1;
	queued = 1;
	requeue = 4;
	gh_guard_down(0);
	CHECK_EQ(drained, 5);
	CHECK_EQ(drains, 2);
	CHECK_EQ(queued, 0);
	CHECK_EQ(gh_guard_busy(), 0);
	/* down to a guarded level: applied too, the guard stays up */
	gh_tls.busy = 1;
	queued = 1;
	gh_guard_down(1);
	CHECK_EQ(drained, 6);
	CHECK_EQ(gh_guard_busy(), 1);
}

static void *other_thread(void *arg)
{
	(void)arg;
	return (void *)(intptr_t)gh_guard_busy();
}

/* The guard is this thread's: another thread's calls are not guarded. */
TEST(guard_is_per_thread)
{
	pthread_t t;
	void *rv;
	int was = gh_guard_enter();

	CHECK_EQ(pthread_create(&t, NULL, other_thread, NULL), 0);
	CHECK_EQ(pthread_join(t, &rv), 0);
	CHECK(rv == NULL);
	CHECK_EQ(gh_guard_busy(), 1);
	gh_guard_leave(was);
}

TEST_MAIN()
