// SPDX-License-Identifier: MIT
/*
 * The public API of src/face/api.c (include/gdrhook.h) under the preload:
 * gdrhook_lookup with good and bad input, gdrhook_trusted,
 * gdrhook_api_version, gdrhook_subscribe's checks and gdrhook_flush_log;
 * each as a disabled shim (GDRHOOK_ENABLE=0) answers.
 */
#include <errno.h>
#include <stdint.h>

#pragma GCC diagnostic ignored "-Wunused-function"
#include "preload_util.h"

static void poison(struct gdrhook_range *r)
{
	memset(r, 0xcc, sizeof(*r));
}

static int poisoned(const struct gdrhook_range *r)
{
	const unsigned char *p = (const unsigned char *)r;

	for (size_t i = 0; i < sizeof(*r); i++)
		if (p[i] != 0xcc)
			return 0;
	return 1;
}

static void noop(const struct gdrhook_event *ev, void *arg)
{
	(void)ev;
	(void)arg;
}

TEST(api_version_is_the_headers)
{
	CHECK_EQ(gdrhook_api_version(), GDRHOOK_API_VERSION);
}

/* Pointers in no allocation: -ENOENT, the range untouched. */
TEST(lookup_of_untracked_pointers)
{
	struct gdrhook_range r;
	int local;
	CUdeviceptr p;

	primary_ctx(0);
	poison(&r);
	CHECK_EQ(gdrhook_lookup(NULL, 1, &r), -ENOENT);
	CHECK_EQ(gdrhook_lookup(NULL, 0, NULL), -ENOENT);
	CHECK_EQ(gdrhook_lookup(&local, sizeof(local), &r), -ENOENT);
	CHECK_EQ(gdrhook_lookup((void *)UINTPTR_MAX, 1, &r), -ENOENT);
	CHECK(poisoned(&r));
	/* just past an allocation, and after its free */
	CU_OK(cuMemAlloc_v2(&p, 1 << 20));
	CHECK_EQ(gdrhook_lookup((void *)(uintptr_t)(p + (1 << 20)), 1, &r),
		 -ENOENT);
	CHECK(poisoned(&r));
	CU_OK(cuMemFree_v2(p));
	CHECK_EQ(gdrhook_lookup((void *)(uintptr_t)p, 1, &r), -ENOENT);
	CHECK(poisoned(&r));
}

/*
 * Inside one allocation: the whole allocation, whatever the offset; len
 * 0 is one byte; a range running past its end is -ERANGE with the
 * allocation filled in; no range asked: only the answer.
 */
TEST(lookup_of_a_tracked_allocation)
{
	const size_t sz = 3 << 20;
	struct gdrhook_range r, r2;
	CUcontext ctx = primary_ctx(0);
	CUdeviceptr p;

	CU_OK(cuMemAlloc_v2(&p, sz));
	poison(&r);
	CHECK_EQ(gdrhook_lookup((void *)(uintptr_t)(p + 12345), 100, &r), 0);
	CHECK_EQ(r.base, p);
	CHECK_EQ(r.size, sz);
	CHECK(r.gen != 0);
	CHECK_EQ(r.ctx, (uintptr_t)ctx);
	CHECK_EQ(r.pool, 0);
	CHECK_EQ(r.dev, 0);
	CHECK_EQ(r.kind, GDRHOOK_KIND_DEVICE);
	CHECK_EQ(r.flags, 0);
	CHECK_EQ(r.reserved, 0);
	poison(&r2);
	CHECK_EQ(gdrhook_lookup((void *)(uintptr_t)(p + sz - 1), 0, &r2), 0);
	CHECK(!memcmp(&r, &r2, sizeof(r)));
	CHECK_EQ(gdrhook_lookup((void *)(uintptr_t)p, sz, &r2), 0);
	poison(&r2);
	CHECK_EQ(gdrhook_lookup((void *)(uintptr_t)(p + 1), sz, &r2), -ERANGE);
	CHECK(!memcmp(&r, &r2, sizeof(r)));
	CHECK_EQ(gdrhook_lookup((void *)(uintptr_t)p, SIZE_MAX, &r2), -ERANGE);
	CHECK_EQ(gdrhook_lookup((void *)(uintptr_t)p, 1, NULL), 0);
	CHECK_EQ(gdrhook_lookup((void *)(uintptr_t)(p + 1), sz, NULL),
		 -ERANGE);
	CU_OK(cuMemFree_v2(p));
}

/* Bad subscriptions are refused before anything else; a good one gets
 * a handle, its events, and goes. */
static int allocs_heard;
static uint64_t heard_base;

static void on_alloc(const struct gdrhook_event *ev, void *arg)
{
	if (ev->type == GDRHOOK_EVENT_ALLOC && arg == &allocs_heard) {
		allocs_heard++;
		heard_base = ev->range.base;
	}
}

TEST(subscribe_checks_its_input)
{
	CUdeviceptr p;
	int h;

	primary_ctx(0);
	CHECK_EQ(gdrhook_subscribe(GDRHOOK_EVENT_ALLOC, NULL, NULL), -EINVAL);
	CHECK_EQ(gdrhook_subscribe(0, noop, NULL), -EINVAL);
	CHECK_EQ(gdrhook_subscribe(1u << 3, noop, NULL), -EINVAL);
	CHECK_EQ(gdrhook_subscribe(GDRHOOK_EVENT_ALLOC | (1u << 31), noop,
				   NULL), -EINVAL);
	h = gdrhook_subscribe(GDRHOOK_EVENT_ALLOC | GDRHOOK_EVENT_FREE |
			      GDRHOOK_EVENT_UNTRUSTED, on_alloc,
			      &allocs_heard);
	CHECK(h >= 0);
	CU_OK(cuMemAlloc_v2(&p, 4096));
	CHECK_EQ(allocs_heard, 1);
	CHECK_EQ(heard_base, p);
	CHECK_EQ(gdrhook_unsubscribe(h), 0);
	CU_OK(cuMemFree_v2(p));
	CU_OK(cuMemAlloc_v2(&p, 4096));
	CHECK_EQ(allocs_heard, 1);
	CU_OK(cuMemFree_v2(p));
}

/*
 * Untrusted (a context destroyed inside the guarded window cannot be
 * replayed): every lookup is -ESTALE, even of a live allocation, and
 * gdrhook_trusted says 0 from then on.
 */
static CUcontext doomed;
static int fired;

static void destroy_ctx(const struct gdrhook_event *ev, void *arg)
{
	(void)ev;
	(void)arg;
	if (!fired++)
		CU_OK(cuCtxDestroy_v2(doomed));
}

TEST(untrusted_lookups_are_stale)
{
	CUctxCreateParams params;
	struct gdrhook_range r;
	CUdeviceptr p;

	CU_OK(cuInit(0));
	memset(&params, 0, sizeof(params));
	CU_OK(cuCtxCreate_v4(&doomed, &params, 0, 0));
	primary_ctx(0);
	CHECK_EQ(gdrhook_trusted(), 1);
	CHECK(gdrhook_subscribe(GDRHOOK_EVENT_ALLOC, destroy_ctx, NULL) >= 0);
	CU_OK(cuMemAlloc_v2(&p, 4096));
	CHECK_EQ(fired, 1);
	CHECK_EQ(gdrhook_trusted(), 0);
	poison(&r);
	CHECK_EQ(gdrhook_lookup((void *)(uintptr_t)p, 1, &r), -ESTALE);
	CHECK(poisoned(&r));
	CHECK_EQ(gdrhook_lookup(NULL, 1, &r), -ESTALE);
	CU_OK(cuMemFree_v2(p));
	CHECK_EQ(gdrhook_trusted(), 0);
}

/* ---- scenarios: GDRHOOK_ENABLE=0, an event log ---- */

static int scenario_disabled(void)
{
	struct gdrhook_range r;
	CUdeviceptr p;

	primary_ctx(0);
	if (cuMemAlloc_v2(&p, 4096))
		return 2;
	if (gdrhook_lookup((void *)(uintptr_t)p, 1, &r) != -ENODEV)
		return 3;
	if (gdrhook_lookup(NULL, 0, NULL) != -ENODEV)
		return 4;
	if (gdrhook_trusted() != 0)
		return 5;
	if (gdrhook_subscribe(GDRHOOK_EVENT_ALLOC, noop, NULL) != -ENODEV)
		return 6;
	/* input is checked first */
	if (gdrhook_subscribe(0, noop, NULL) != -EINVAL)
		return 7;
	if (gdrhook_api_version() != GDRHOOK_API_VERSION)
		return 8;
	gdrhook_flush_log();		/* nothing to write: harmless */
	return cuMemFree_v2(p) ? 9 : 0;
}

/* The records are in the file once gdrhook_flush_log returns, before
 * the process ends (the scenario checks its own log). */
static int scenario_flush(void)
{
	const char *path = getenv("API_LOG");
	CUdeviceptr p;

	primary_ctx(0);
	for (int i = 0; i < 3; i++) {
		if (cuMemAlloc_v2(&p, 4096) || cuMemFree_v2(p))
			return 2;
	}
	gdrhook_flush_log();
	if (LOG_COUNT(path, "\"ev\":\"alloc\"") != 3)
		return 3;
	if (LOG_COUNT(path, "\"ev\":\"free\"") != 3)
		return 4;
	return 0;
}

static const struct scenario scenarios[] = {
	{ "disabled", scenario_disabled },
	{ "flush", scenario_flush },
};

TEST(disabled_shim_answers_enodev)
{
	CHECK_EQ(run_scenario("disabled", (const char *const[]){
		"GDRHOOK_ENABLE=0", NULL }), 0);
}

TEST(flush_log_writes_the_records_now)
{
	char path[256], var[300], var2[300];

	log_path(path, sizeof(path), "api-flush");
	snprintf(var, sizeof(var), "GDRHOOK_TRACE=%s", path);
	snprintf(var2, sizeof(var2), "API_LOG=%s", path);
	CHECK_EQ(run_scenario("flush", (const char *const[]){ var, var2,
							    NULL }), 0);
	unlink(path);
}

SCENARIO_MAIN(scenarios)
