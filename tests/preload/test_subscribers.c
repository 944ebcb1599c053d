// SPDX-License-Identifier: MIT
/*
 * The subscriber API under churn: threads allocate and free (every event
 * runs the callbacks) while another thread subscribes and unsubscribes
 * the same slots over and over.  A callback must always get the arg it
 * was subscribed with, and once gdrhook_unsubscribe() has returned no
 * callback of that subscription may still run or start; from inside its
 * own callback a subscription unsubscribes itself without waiting for
 * itself.
 */
#include <cuda.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <time.h>

/* Not every helper of the shared header is used here. */
#pragma GCC diagnostic ignored "-Wunused-function"
#include "preload_util.h"

#define NTOKENS 4

/* What a subscription's arg points at; each fn knows its own tag. */
struct token {
	int tag;
	int inside;		/* callbacks of it running now */
	int dead;		/* its unsubscribe returned */
};

static struct token tokens[NTOKENS];
static int stop;
static unsigned long wrong_arg, after_unsub, calls;

static void cb_body(int tag, void *arg)
{
	struct token *t = arg;

	__atomic_fetch_add(&calls, 1, __ATOMIC_RELAXED);
	if (t->tag != tag)
		__atomic_fetch_add(&wrong_arg, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&t->inside, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&t->dead, __ATOMIC_SEQ_CST))
		__atomic_fetch_add(&after_unsub, 1, __ATOMIC_RELAXED);
	/* Long enough for an unsubscribe to land inside it. */
	for (int i = 0; i < 200; i++)
		sched_yield();
	if (__atomic_load_n(&t->dead, __ATOMIC_SEQ_CST))
		__atomic_fetch_add(&after_unsub, 1, __ATOMIC_RELAXED);
	__atomic_fetch_sub(&t->inside, 1, __ATOMIC_SEQ_CST);
}

static void cb0(const struct gdrhook_event *ev, void *arg) { cb_body(0, arg); }
static void cb1(const struct gdrhook_event *ev, void *arg) { cb_body(1, arg); }
static void cb2(const struct gdrhook_event *ev, void *arg) { cb_body(2, arg); }
static void cb3(const struct gdrhook_event *ev, void *arg) { cb_body(3, arg); }

static gdrhook_event_fn const cbs[NTOKENS] = { cb0, cb1, cb2, cb3 };

static void *allocator(void *ctx)
{
	CU_OK(cuCtxSetCurrent(ctx));
	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		CUdeviceptr p;

		CU_OK(cuMemAlloc_v2(&p, 4096));
		CU_OK(cuMemFree_v2(p));
	}
	return NULL;
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

TEST_TIMEOUT(churn_keeps_fn_arg_and_waits_for_callbacks, 240)
{
	CUcontext ctx = primary_ctx(0);
	pthread_t th[2];
	int rounds = 3000;
	/* a busy machine (ASan beside other jobs) runs fewer rounds, not
	 * past the case's timeout: each round checks the same things */
	uint64_t end = mono_ns() + 90ull * 1000000000ull;

	for (int i = 0; i < NTOKENS; i++)
		tokens[i].tag = i;
	for (int i = 0; i < 2; i++)
		CHECK_EQ(pthread_create(&th[i], NULL, allocator, ctx), 0);
	for (int r = 0; r < rounds; r++) {
		/* Tokens alternate between two slots, so a slot is reused
		 * by another fn and arg right after it is freed. */
		int a = r % NTOKENS, b = (r + 1) % NTOKENS;
		int ha, hb;

		tokens[a].dead = 0;
		tokens[b].dead = 0;
		ha = gdrhook_subscribe(GDRHOOK_EVENT_ALLOC | GDRHOOK_EVENT_FREE,
				       cbs[a], &tokens[a]);
		hb = gdrhook_subscribe(GDRHOOK_EVENT_ALLOC | GDRHOOK_EVENT_FREE,
				       cbs[b], &tokens[b]);
		CHECK(ha >= 0 && hb >= 0);
		/* Unsubscribe while a callback of a runs, where possible. */
		for (int i = 0; i < 100000 &&
		     !__atomic_load_n(&tokens[a].inside, __ATOMIC_SEQ_CST) &&
		     (i & 63 || mono_ns() < end); i++)
			sched_yield();
		CHECK_EQ(gdrhook_unsubscribe(ha), 0);
		if (__atomic_load_n(&tokens[a].inside, __ATOMIC_SEQ_CST))
			__atomic_fetch_add(&after_unsub, 1, __ATOMIC_RELAXED);
		__atomic_store_n(&tokens[a].dead, 1, __ATOMIC_SEQ_CST);
		CHECK_EQ(gdrhook_unsubscribe(hb), 0);
		if (__atomic_load_n(&tokens[b].inside, __ATOMIC_SEQ_CST))
			__atomic_fetch_add(&after_unsub, 1, __ATOMIC_RELAXED);
		__atomic_store_n(&tokens[b].dead, 1, __ATOMIC_SEQ_CST);
		/* A handle of a subscription that is gone stays gone, even
		 * with its slot taken again. */
		CHECK_EQ(gdrhook_unsubscribe(ha), -EINVAL);
		if (__atomic_load_n(&wrong_arg, __ATOMIC_RELAXED) ||
		    __atomic_load_n(&after_unsub, __ATOMIC_RELAXED) ||
		    (r >= 100 && mono_ns() >= end))
			break;
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < 2; i++)
		CHECK_EQ(pthread_join(th[i], NULL), 0);
	printf("  %lu callbacks\n", calls);
	CHECK(calls > 0);
	CHECK_EQ(wrong_arg, 0);
	CHECK_EQ(after_unsub, 0);
}

/* A stale handle must not remove the slot's next subscription. */
TEST(stale_handle_leaves_the_new_subscription)
{
	int h1, h2;

	primary_ctx(0);
	h1 = gdrhook_subscribe(GDRHOOK_EVENT_ALLOC, cb0, &tokens[0]);
	CHECK(h1 >= 0);
	CHECK_EQ(gdrhook_unsubscribe(h1), 0);
	h2 = gdrhook_subscribe(GDRHOOK_EVENT_ALLOC, cb1, &tokens[1]);
	CHECK(h2 >= 0);
	CHECK(h2 != h1);
	CHECK_EQ(gdrhook_unsubscribe(h1), -EINVAL);
	CHECK_EQ(gdrhook_unsubscribe(h2), 0);
}

static int self_handle, self_rc = 1, self_calls;

static void unsub_self(const struct gdrhook_event *ev, void *arg)
{
	self_calls++;
	self_rc = gdrhook_unsubscribe(self_handle);
}

/* Returns at once (it does not wait for itself), and no later event. */
TEST(unsubscribe_from_own_callback)
{
	CUdeviceptr p;

	primary_ctx(0);
	self_handle = gdrhook_subscribe(GDRHOOK_EVENT_ALLOC, unsub_self, NULL);
	CHECK(self_handle >= 0);
	CU_OK(cuMemAlloc_v2(&p, 4096));
	CHECK_EQ(self_calls, 1);
	CHECK_EQ(self_rc, 0);
	CU_OK(cuMemFree_v2(p));
	CU_OK(cuMemAlloc_v2(&p, 4096));
	CU_OK(cuMemFree_v2(p));
	CHECK_EQ(self_calls, 1);
	CHECK_EQ(gdrhook_unsubscribe(self_handle), -EINVAL);
}

TEST_MAIN()
