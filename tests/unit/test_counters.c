// SPDX-License-Identifier: MIT
/*
 * src/base/counters.c: the hook path's striped counters (each thread on
 * its own stripe, the sum over all of them) and the shared gh_ctr.
 */
#include <pthread.h>
#include <stdint.h>

#include "harness.h"

#include "base/base.h"

enum { THREADS = 8, ALLOCS = 10000, FREES = 7000 };

static int stripe_of[THREADS];

static void *counting(void *arg)
{
	int me = (int)(intptr_t)arg;

	for (int i = 0; i < ALLOCS; i++)
		gh_hot_count(GH_HC_ALLOCS);
	for (int i = 0; i < FREES; i++)
		gh_hot_count(GH_HC_FREES);
	for (int i = 0; i < 100; i++)
		GH_COUNT(regs_seen, 3);
	stripe_of[me] = gh_stripe_ix;
	return NULL;
}

/* Every count lands, whichever stripe took it; each thread picked its
 * stripe once, and up to GH_STRIPES threads share none. */
TEST(hot_counts_summed_over_threads)
{
	pthread_t t[THREADS];

	CHECK_EQ(gh_hot_sum(GH_HC_ALLOCS), 0);
	CHECK_EQ(gh_stripe_ix, 0);
	for (int i = 0; i < THREADS; i++)
		CHECK_EQ(pthread_create(&t[i], NULL, counting,
					(void *)(intptr_t)i), 0);
	for (int i = 0; i < THREADS; i++)
		CHECK_EQ(pthread_join(t[i], NULL), 0);
	CHECK_EQ(gh_hot_sum(GH_HC_ALLOCS), THREADS * ALLOCS);
	CHECK_EQ(gh_hot_sum(GH_HC_FREES), THREADS * FREES);
	CHECK_EQ(gh_ctr.regs_seen, THREADS * 100 * 3);
	CHECK_EQ(gh_ctr.allocs, 0);	/* the striped ones are not in gh_ctr */
	for (int i = 0; i < THREADS; i++) {
		CHECK(stripe_of[i] >= 1 && stripe_of[i] <= GH_STRIPES);
		for (int j = 0; j < i; j++)
			CHECK(stripe_of[i] != stripe_of[j]);
		/* the count of thread i is on its stripe alone */
		CHECK_EQ(gh_stripes[stripe_of[i] - 1].v[GH_HC_ALLOCS], ALLOCS);
	}
	/* this thread never counted: no stripe */
	CHECK_EQ(gh_stripe_ix, 0);
}

/* Picks go round the stripes: the one after the last is the first. */
TEST(stripe_pick_wraps)
{
	for (int i = 1; i <= GH_STRIPES; i++)
		CHECK_EQ(gh_stripe_pick(), i);
	CHECK_EQ(gh_stripe_pick(), 1);
	CHECK_EQ(gh_stripe_ix, 1);
	gh_hot_count(GH_HC_FREES);
	CHECK_EQ(gh_stripes[0].v[GH_HC_FREES], 1);
	CHECK_EQ(gh_hot_sum(GH_HC_FREES), 1);
	CHECK_EQ(gh_hot_sum(GH_HC_ALLOCS), 0);
}

TEST_MAIN()
