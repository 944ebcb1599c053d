// SPDX-License-Identifier: MIT
/* src/base/tslot.c: per-thread slots given back at thread end. */
#include <pthread.h>
#include <sched.h>
#include <stdint.h>

#include "harness.h"

#include "base/base.h"

static struct gh_tslot_set ts = GH_TSLOT_SET(70);
static int ts_owner[GH_TSLOT_MAX];	/* live thread's mark per slot */
static int ts_shared;			/* two live threads in one slot */

static void ts_end(void *v)
{
	unsigned int i = (unsigned int)(uintptr_t)v - 1;

	__atomic_store_n(&ts_owner[i], 0, __ATOMIC_RELAXED);
	gh_tslot_give(&ts, i);
}

TEST(tslot_take_give_and_run_out)
{
	for (int i = 0; i < 70; i++)
		CHECK_EQ(gh_tslot_take(&ts), i);
	CHECK_EQ(gh_tslot_take(&ts), -1);
	CHECK_EQ(gh_tslot_count(&ts), 70);
	gh_tslot_give(&ts, 66);
	gh_tslot_give(&ts, 5);
	gh_tslot_give(&ts, 500);	/* out of range: ignored */
	CHECK_EQ(gh_tslot_count(&ts), 68);
	CHECK_EQ(gh_tslot_take(&ts), 5);
	CHECK_EQ(gh_tslot_take(&ts), 66);
	CHECK_EQ(gh_tslot_take(&ts), -1);
	gh_tslot_reset(&ts, 64);
	CHECK_EQ(gh_tslot_count(&ts), 1);
	CHECK_EQ(gh_tslot_take(&ts), 0);
}

/* A thread that takes a slot, holds it a moment and ends. */
static void *ts_thread(void *arg)
{
	int i = gh_tslot_take(&ts), zero = 0;

	(void)arg;
	if (i < 0)
		return (void *)1;
	if (!__atomic_compare_exchange_n(&ts_owner[i], &zero, 1, 0,
					 __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		__atomic_store_n(&ts_shared, 1, __ATOMIC_RELAXED);
	sched_yield();
	return NULL;
}

/*
 * 4000 threads over the process's life, 8 alive at a time, in a table of
 * 8 slots: each finds a slot (the ended threads gave theirs back), no
 * two live threads share one, and none is held at the end.
 */
TEST(tslot_given_back_when_threads_end)
{
	pthread_t t[8];

	ts.n = 8;
	gh_tslot_init(&ts, ts_end);
	CHECK(ts.key_ok);
	for (int round = 0; round < 500; round++) {
		void *rv;

		for (int k = 0; k < 8; k++)
			CHECK_EQ(pthread_create(&t[k], NULL, ts_thread, NULL),
				 0);
		for (int k = 0; k < 8; k++) {
			CHECK_EQ(pthread_join(t[k], &rv), 0);
			CHECK(rv == NULL);
		}
	}
	CHECK(!ts_shared);
	CHECK_EQ(gh_tslot_count(&ts), 0);
}

/*
 * A table asked larger than GH_TSLOT_MAX is GH_TSLOT_MAX; a fork child's
 * reset keeping no slot frees them all, keeping one frees the others.
 */
TEST(tslot_clamped_and_reset)
{
	static struct gh_tslot_set big = GH_TSLOT_SET(GH_TSLOT_MAX + 100);

	gh_tslot_init(&big, NULL);
	CHECK_EQ(big.n, GH_TSLOT_MAX);
	for (int i = 0; i < GH_TSLOT_MAX; i++)
		CHECK_EQ(gh_tslot_take(&big), i);
	CHECK_EQ(gh_tslot_take(&big), -1);
	CHECK_EQ(gh_tslot_count(&big), GH_TSLOT_MAX);
	gh_tslot_reset(&big, 700);
	CHECK_EQ(gh_tslot_count(&big), 1);
	CHECK_EQ(gh_tslot_take(&big), 0);
	gh_tslot_reset(&big, -1);
	CHECK_EQ(gh_tslot_count(&big), 0);
	CHECK_EQ(gh_tslot_take(&big), 0);
}

TEST_MAIN()
