// SPDX-License-Identifier: MIT
/*
 * Memory windows (src/pin/mwin.c) against the fake NIC, which models
 * windows, queue pairs and a peer's RDMA by rkey per provider profile
 * (tests/fakeverbs): whether a NIC binds type-1 windows (probed once,
 * said once when it cannot), the route each exact registration takes,
 * a window bound to exactly a range and access of its parent and dead at
 * its invalidation, rkeys that come back no sooner than natively, a
 * first bind the NIC refuses turning windows off for that NIC, a later
 * one failing alone, and what gdrhook made in a PD or a device context
 * torn down.  The end-to-end behaviour through the cache and the hooks
 * is tests/preload/test_windows.c's.
 */
#include <pthread.h>
#include <stdlib.h>

#include "harness.h"
#include "capture.h"
#include "doubles_linked.h"
#include "pin/pin.h"

#define KiB	(1ULL << 10)
#define GiB	(1ULL << 30)
#define LW	IBV_ACCESS_LOCAL_WRITE
#define RWR	IBV_ACCESS_REMOTE_WRITE
#define RRD	IBV_ACCESS_REMOTE_READ

static char mem[256 * KiB] __attribute__((aligned(64 * KiB)));
static uint64_t base = 0;

/* The fake NIC's PD, windows on, with a parent over mem. */
static struct ibv_pd *setup(const char *profile, struct ibv_mr **parent_p)
{
	struct ibv_pd *pd;

	if (profile)
		setenv("FAKEVERBS_PROVIDER", profile, 1);
	gh_pin_cfg.windows = 1;
	gh_log_level = GH_LOG_NONE;
	base = (uint64_t)(uintptr_t)mem;
	pd = nic_pd();
	if (parent_p) {
		*parent_p = ibv_reg_mr(pd, mem, sizeof(mem),
				       LW | IBV_ACCESS_MW_BIND);
		CHECK(*parent_p != NULL);
	}
	return pd;
}

static struct gh_mw_counters counters(void)
{
	struct gh_mw_counters c;

	gh_mw_counters(&c);
	return c;
}

/* --------------------------------------------------------- supported */

TEST(supported_where_the_nic_binds_type1_windows)
{
	const char *profiles[] = { "mlx5", "rxe" };

	for (int i = 0; i < 2; i++) {
		pid_t pid = fork();
		int status = 0;

		if (!pid) {
			const char *why = "unset", *out;
			struct ibv_pd *pd;

			pd = setup(profiles[i], NULL);
			gh_log_level = GH_LOG_INFO;
			capture_begin();
			CHECK_EQ(gh_mw_supported(pd, &why), 1);
			CHECK_EQ(gh_mw_supported(pd, NULL), 1);
			out = capture_end();
			CHECK_STR(why, "");
			CHECK_EQ(capture_count(out, "memory windows: NIC fakenic0: windows on port 1"), 1);
			/* probed once per device context */
			CHECK_EQ(fakeverbs_calls("ibv_query_device"), 1);
			_exit(0);
		}
		CHECK_EQ(waitpid(pid, &status, 0), pid);
		CHECK(WIFEXITED(status) && !WEXITSTATUS(status));
	}
}

TEST(not_supported_without_windows_said_once)
{
	struct ibv_pd *pd = setup("nomw", NULL);
	const char *why = NULL, *out;

	gh_log_level = GH_LOG_WARN;
	capture_begin();
	CHECK_EQ(gh_mw_supported(pd, &why), 0);
	CHECK_EQ(gh_mw_supported(pd, NULL), 0);
	CHECK_EQ(gh_mw_supported(ibv_alloc_pd(pd->context), NULL), 0);
	out = capture_end();
	CHECK_STR(why, "no type-1 memory windows (ibv_query_device)");
	CHECK_EQ(capture_count(out, "memory windows: NIC fakenic0: no type-1 "
			       "memory windows"), 1);
	CHECK_EQ(gh_mw_supported(NULL, NULL), 0);
}

TEST(not_supported_with_windows_off)
{
	struct ibv_pd *pd = setup(NULL, NULL);
	const char *why = NULL, *out;

	gh_pin_cfg.windows = 0;
	gh_log_level = GH_LOG_WARN;
	capture_begin();
	CHECK_EQ(gh_mw_supported(pd, &why), 0);
	out = capture_end();
	CHECK_STR(why, "GDRHOOK_WINDOWS=0");
	CHECK_STR(out, "");
	CHECK_EQ(fakeverbs_calls("ibv_query_device"), 0);
}

/* ------------------------------------------------------------- routes */

TEST(route_of_each_exact_registration)
{
	struct ibv_pd *pd = setup(NULL, NULL);
	const char *out;

	gh_log_level = GH_LOG_INFO;
	capture_begin();
	CHECK_EQ(gh_mw_supported(pd, NULL), 1);
	CHECK_EQ(gh_mw_route(pd, 0, 4096, RWR), 1);
	CHECK_EQ(gh_mw_route(pd, 0, 2 * GiB, RWR | RRD), 1);
	CHECK_EQ(gh_mw_route(pd, 0, 2 * GiB + 1, RWR), 0);
	CHECK_EQ(gh_mw_route(pd, 0, 3 * GiB, RWR), 0);
	CHECK_EQ(gh_mw_route(pd, 1, 4096, RWR), 0);
	CHECK_EQ(gh_mw_route(pd, 1, 4096, RWR), 0);
	CHECK_EQ(gh_mw_route(pd, 0, 4096, RWR | IBV_ACCESS_ZERO_BASED), 0);
	CHECK_EQ(gh_mw_route(pd, 0, 4096, RWR | IBV_ACCESS_ZERO_BASED), 0);
	out = capture_end();
	/* each reason said once per NIC */
	CHECK_EQ(capture_count(out, "over 2 GiB: mlx5 binds no window longer"), 1);
	CHECK_EQ(capture_count(out, "DMA-BUF parent: mlx5"), 1);
	CHECK_EQ(capture_count(out, "zero-based: no provider binds"), 1);
}

TEST(route_on_a_nic_without_windows)
{
	struct ibv_pd *pd = setup("nomw", NULL);

	CHECK_EQ(gh_mw_route(pd, 0, 4096, RWR), 0);
	CHECK_EQ(gh_mw_route(pd, 0, 4096, 0), 0);
}

TEST(route_text_for_gdrhook_info)
{
	char buf[256];

	gh_mw_route_text(0, "peermem", buf, sizeof(buf));
	CHECK_STR(buf, "a NIC registration per MR, the pin cached (no type-1 windows)");
	gh_mw_route_text(1, "dmabuf", buf, sizeof(buf));
	CHECK_STR(buf, "a dmabuf registration per MR (DMA-BUF parent: mlx5 binds no type-1 window)");
	gh_mw_route_text(1, "peermem", buf, sizeof(buf));
	CHECK_STR(buf, "a type-1 window per MR: bind + unbind, no registration (over 2 GiB: one)");
	gh_mw_route_text(1, NULL, buf, 16);	/* truncated, terminated */
	CHECK_EQ(strlen(buf), 15);
}

/* ---------------------------------------------------- bind, invalidate */

TEST(bind_reaches_exactly_its_range_access_and_pd)
{
	struct ibv_mr *parent;
	struct ibv_pd *pd = setup(NULL, &parent), *pd2;
	struct gh_mw *w = NULL;
	uint32_t rkey = 0;
	char got[4];

	pd2 = ibv_alloc_pd(pd->context);
	CHECK_EQ(gh_mw_bind(pd, parent, base + 4096, 512, RWR, &w, &rkey), 0);
	CHECK(w != NULL);
	CHECK(rkey != parent->rkey);
	CHECK_EQ(fakeverbs_bound_mws(), 1);
	CHECK_EQ(fakeverbs_live_qps(pd->context), 1);	/* gdrhook's own */
	CHECK_EQ(counters().binds, 1);
	CHECK_EQ(fakeverbs_write(pd, rkey, base + 4096 + 10, "win", 3), 0);
	CHECK(!memcmp(mem + 4096 + 10, "win", 3));
	CHECK_EQ(fakeverbs_write(pd, rkey, base + 4096 + 510, "xyz", 3),
		 -ERANGE);
	CHECK_EQ(fakeverbs_write(pd, rkey, base + 4095, "x", 1), -ERANGE);
	CHECK_EQ(fakeverbs_read(pd, rkey, base + 4096, got, 1), -EACCES);
	CHECK_EQ(fakeverbs_write(pd2, rkey, base + 4096, "x", 1), -EPERM);

	gh_mw_invalidate(w);
	CHECK_EQ(fakeverbs_write(pd, rkey, base + 4096, "x", 1), -ENOENT);
	CHECK_EQ(fakeverbs_bound_mws(), 0);
	CHECK_EQ(fakeverbs_live_mws(), 1);	/* kept for the next bind */
	CHECK_EQ(counters().invalidations, 1);
	gh_mw_invalidate(NULL);
	CHECK_EQ(ibv_dereg_mr(parent), 0);
}

/* A window comes back to the same rkey no sooner than after 256 binds
 * (two windows in turn, each tag moving on at bind and unbind). */
TEST(rkeys_come_back_no_sooner_than_natively)
{
	enum { N = 700 };
	static uint32_t keys[N];
	struct ibv_mr *parent;
	struct ibv_pd *pd = setup(NULL, &parent);
	int repeats = 0;

	for (int i = 0; i < N; i++) {
		struct gh_mw *w;

		CHECK_EQ(gh_mw_bind(pd, parent, base, 4096, RWR, &w,
				    &keys[i]), 0);
		gh_mw_invalidate(w);
		for (int j = i - 1; j >= 0; j--) {
			if (keys[j] != keys[i])
				continue;
			CHECK(i - j >= 256);
			repeats++;
			break;
		}
	}
	CHECK(repeats > 0);	/* they do come back, after that */
	CHECK_EQ(fakeverbs_live_mws(), 2);
	CHECK_EQ(counters().binds, N);
	CHECK_EQ(counters().invalidations, N);
}

TEST(bound_windows_each_their_own)
{
	struct ibv_mr *parent;
	struct ibv_pd *pd = setup(NULL, &parent);
	struct gh_mw *w[8];
	uint32_t k[8];

	for (int i = 0; i < 8; i++)
		CHECK_EQ(gh_mw_bind(pd, parent, base + i * 4096ULL, 4096,
				    i & 1 ? RRD : RWR, &w[i], &k[i]), 0);
	CHECK_EQ(fakeverbs_bound_mws(), 8);
	for (int i = 0; i < 8; i++) {
		char c;
		int wr = fakeverbs_write(pd, k[i], base + i * 4096ULL, "w", 1);
		int rd = fakeverbs_read(pd, k[i], base + i * 4096ULL, &c, 1);

		CHECK_EQ(wr, i & 1 ? -EACCES : 0);
		CHECK_EQ(rd, i & 1 ? 0 : -EACCES);
		/* not its neighbour's range */
		CHECK_EQ(fakeverbs_write(pd, k[i], base + (i + 1) * 4096ULL,
					 "w", 1), i & 1 ? -EACCES : -ERANGE);
	}
	for (int i = 0; i < 8; i += 2)
		gh_mw_invalidate(w[i]);
	CHECK_EQ(fakeverbs_bound_mws(), 4);
	CHECK_EQ(fakeverbs_write(pd, k[0], base, "w", 1), -ENOENT);
	CHECK_EQ(fakeverbs_read(pd, k[1], base + 4096, mem, 1), 0);
}

/* -------------------------------------------------------- refusals */

TEST(bind_on_a_nic_without_windows)
{
	struct ibv_mr *parent;
	struct ibv_pd *pd = setup("nomw", &parent);
	struct gh_mw *w = NULL;
	uint32_t k = 0;

	CHECK_EQ(gh_mw_bind(pd, parent, base, 4096, RWR, &w, &k), -EOPNOTSUPP);
	CHECK(w == NULL);
	CHECK_EQ(fakeverbs_live_qps(NULL), 0);
	CHECK_EQ(counters().binds, 0);
}

/* The NIC refuses the first bind (a parent without MW_BIND: the HCA
 * completes it in error): windows are off for that NIC, said once. */
TEST(first_bind_refused_turns_windows_off)
{
	struct ibv_pd *pd = setup(NULL, NULL);
	struct ibv_mr *bad = ibv_reg_mr(pd, mem, sizeof(mem), LW);
	struct gh_mw *w = NULL;
	const char *why = NULL, *out;
	uint32_t k;

	CHECK(bad != NULL);
	gh_log_level = GH_LOG_WARN;
	capture_begin();
	CHECK_EQ(gh_mw_bind(pd, bad, base, 4096, RWR, &w, &k), -EOPNOTSUPP);
	out = capture_end();
	CHECK_EQ(capture_count(out, "the NIC refused gdrhook's first bind"), 1);
	CHECK_EQ(gh_mw_supported(pd, &why), 0);
	CHECK_STR(why, "the NIC refused gdrhook's first bind");
	CHECK_EQ(gh_mw_route(pd, 0, 4096, RWR), 0);
	CHECK_EQ(counters().fallbacks, 1);
	CHECK_EQ(fakeverbs_bound_mws(), 0);
	CHECK_EQ(fakeverbs_live_mws(), 0);	/* its state unknown: gone */
}

/* After a good bind, one that fails fails alone: the QP is rebuilt and
 * windows stay on. */
TEST(later_bind_refused_fails_alone)
{
	struct ibv_mr *parent;
	struct ibv_pd *pd = setup(NULL, &parent);
	struct ibv_mr *bad = ibv_reg_mr(pd, mem, 4096, LW);
	struct gh_mw *w;
	uint32_t k;
	int err;

	CHECK_EQ(gh_mw_bind(pd, parent, base, 4096, RWR, &w, &k), 0);
	gh_mw_invalidate(w);
	err = gh_mw_bind(pd, bad, base, 4096, RWR, &w, &k);
	CHECK(err < 0 && err != -EOPNOTSUPP);
	CHECK_EQ(counters().fallbacks, 1);
	CHECK_EQ(gh_mw_supported(pd, NULL), 1);
	CHECK_EQ(gh_mw_bind(pd, parent, base + 8192, 4096, RWR, &w, &k), 0);
	CHECK_EQ(fakeverbs_write(pd, k, base + 8192, "ok", 2), 0);
	CHECK_EQ(fakeverbs_live_qps(pd->context), 1);
	gh_mw_invalidate(w);
}

/* ---------------------------------------------------------- teardown */

TEST(drop_pd_tears_down_its_engine)
{
	struct ibv_mr *parent;
	struct ibv_pd *pd = setup(NULL, &parent);
	struct gh_mw *w;
	uint32_t k;

	CHECK_EQ(gh_mw_bind(pd, parent, base, 4096, RWR, &w, &k), 0);
	gh_mw_invalidate(w);
	CHECK_EQ(fakeverbs_live_qps(pd->context), 1);
	gh_mw_drop_pd(pd);
	CHECK_EQ(fakeverbs_live_qps(NULL), 0);
	CHECK_EQ(fakeverbs_live_cqs(), 0);
	CHECK_EQ(fakeverbs_live_mws(), 0);
	CHECK_EQ(ibv_dereg_mr(parent), 0);
	CHECK_EQ(ibv_dealloc_pd(pd), 0);	/* nothing of ours left in it */
	gh_mw_drop_pd(NULL);
}

TEST(drop_context_takes_bound_windows_too)
{
	struct ibv_mr *parent, *parent2;
	struct ibv_pd *pd = setup(NULL, &parent), *pd2;
	struct gh_mw *w, *w2;
	uint32_t k, k2;

	pd2 = ibv_alloc_pd(pd->context);
	parent2 = ibv_reg_mr(pd2, mem, 4096, LW | IBV_ACCESS_MW_BIND);
	CHECK_EQ(gh_mw_bind(pd, parent, base, 4096, RWR, &w, &k), 0);
	CHECK_EQ(gh_mw_bind(pd2, parent2, base, 4096, RWR, &w2, &k2), 0);
	CHECK_EQ(fakeverbs_live_qps(pd->context), 2);	/* one per PD */
	CHECK_EQ(fakeverbs_bound_mws(), 2);
	gh_mw_drop_context(pd->context);
	CHECK_EQ(fakeverbs_live_qps(NULL), 0);
	CHECK_EQ(fakeverbs_live_mws(), 0);
	CHECK_EQ(fakeverbs_write(pd, k, base, "x", 1), -ENOENT);
	/* forgotten: probed again at the next question */
	CHECK_EQ(gh_mw_supported(pd, NULL), 1);
	CHECK_EQ(fakeverbs_calls("ibv_query_device"), 2);
}

/* A forked child forgets the parent's windows without a NIC call. */
TEST(forget_makes_no_nic_call)
{
	struct ibv_mr *parent;
	struct ibv_pd *pd = setup(NULL, &parent);
	unsigned long posts;
	struct gh_mw *w;
	uint32_t k;

	CHECK_EQ(gh_mw_bind(pd, parent, base, 4096, RWR, &w, &k), 0);
	posts = fakeverbs_calls("ibv_post_send") +
		fakeverbs_calls("ibv_bind_mw");
	gh_mw_forget(w);
	gh_mw_invalidate(w);	/* forgotten: nothing to do */
	gh_mw_forget(NULL);
	CHECK_EQ(fakeverbs_calls("ibv_post_send") +
		 fakeverbs_calls("ibv_bind_mw"), posts);
	CHECK_EQ(fakeverbs_bound_mws(), 1);	/* still the NIC's */
	CHECK_EQ(counters().invalidations, 0);
}

/* ----------------------------------------------------------- threads */

#define THREADS	4
#define ROUNDS	100

static struct ibv_pd *t_pd;
static struct ibv_mr *t_parent;

static void *binder(void *arg)
{
	uint64_t off = (uint64_t)(uintptr_t)arg * 16 * KiB;

	for (int i = 0; i < ROUNDS; i++) {
		struct gh_mw *w;
		uint32_t k;

		if (gh_mw_bind(t_pd, t_parent, base + off, 4096, RWR, &w, &k) ||
		    fakeverbs_write(t_pd, k, base + off, "t", 1))
			return (void *)1;
		gh_mw_invalidate(w);
	}
	return NULL;
}

TEST(threads_bind_at_once)
{
	pthread_t t[THREADS];
	void *bad;
	int failed = 0;

	t_pd = setup(NULL, &t_parent);
	for (int i = 0; i < THREADS; i++)
		CHECK_EQ(pthread_create(&t[i], NULL, binder,
					(void *)(uintptr_t)i), 0);
	for (int i = 0; i < THREADS; i++) {
		pthread_join(t[i], &bad);
		failed += bad != NULL;
	}
	CHECK_EQ(failed, 0);
	CHECK_EQ(counters().binds, THREADS * ROUNDS);
	CHECK_EQ(counters().invalidations, THREADS * ROUNDS);
	CHECK_EQ(fakeverbs_bound_mws(), 0);
	CHECK_EQ(fakeverbs_live_qps(NULL), 1);
}

TEST_MAIN()
