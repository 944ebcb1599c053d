// SPDX-License-Identifier: MIT
/*
 * SYNC_MEMOPS for memory the cache pins (src/pin/syncmemops.c) against
 * the driver double: the context's flag set once (read first, so a
 * context that has it costs one read), on the allocation's context
 * whichever is current (left current after), on the device's primary
 * one when the range names none; per pointer once the driver refuses
 * cuCtxSetFlags, for good; VMM memory refused per pointer is said once;
 * GDRHOOK_SYNC_MEMOPS=0 asks the driver nothing.
 */
#include <pthread.h>

#include "harness.h"
#include "capture.h"
#include "doubles_linked.h"
#include "pin/pin.h"

#define MiB	(1ULL << 20)

static struct gh_range range_of(CUdeviceptr d, CUcontext ctx)
{
	struct gh_range r = { .base = d, .size = MiB, .dev = 0, .gen = 1,
			      .kind = GDRHOOK_KIND_DEVICE };

	r.ctx = (uint64_t)(uintptr_t)ctx;
	return r;
}

/* ctx's flags, read with ctx pushed (the current one left as it is). */
static unsigned int flags_of(CUcontext ctx)
{
	unsigned int fl = 0;
	CUcontext popped;

	CU_OK(cuCtxPushCurrent(ctx));
	CU_OK(cuCtxGetFlags(&fl));
	CU_OK(cuCtxPopCurrent(&popped));
	return fl;
}

static int ptr_syncmemops(CUdeviceptr d)
{
	int v = -1;

	CU_OK(cuPointerGetAttribute(&v, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, d));
	return v;
}

static void setup(void)
{
	gh_pin_cfg.sync_memops = 1;
	gh_log_level = GH_LOG_NONE;
}

TEST(context_flag_set_once)
{
	struct gh_range r;
	CUcontext ctx;
	const char *out;

	setup();
	ctx = cu_primary(0);
	r = range_of(cu_alloc(MiB), ctx);
	CHECK(!(flags_of(ctx) & CU_CTX_SYNC_MEMOPS));
	gh_log_level = GH_LOG_INFO;
	capture_begin();
	gh_syncmemops_ensure(&r);
	gh_syncmemops_ensure(&r);
	gh_syncmemops_ensure(&r);
	out = capture_end();
	CHECK(flags_of(ctx) & CU_CTX_SYNC_MEMOPS);
	CHECK_EQ(fakecuda_calls("cuCtxSetFlags"), 1);
	CHECK_EQ(capture_count(out, "SYNC_MEMOPS set on context"), 1);
	/* per context: the pointer attribute is left alone */
	CHECK_EQ(fakecuda_calls("cuPointerSetAttribute"), 0);
	CHECK_EQ(ptr_syncmemops(r.base), 0);
}

TEST(off_asks_the_driver_nothing)
{
	struct gh_range r;
	CUcontext ctx;

	setup();
	gh_pin_cfg.sync_memops = 0;
	ctx = cu_primary(0);
	r = range_of(cu_alloc(MiB), ctx);
	fakecuda_reset_calls();
	gh_syncmemops_ensure(&r);
	CHECK_EQ(fakecuda_calls("cuCtxGetFlags") +
		 fakecuda_calls("cuCtxSetFlags") +
		 fakecuda_calls("cuPointerSetAttribute") +
		 fakecuda_calls("cuCtxPushCurrent_v2"), 0);
	CHECK(!(flags_of(ctx) & CU_CTX_SYNC_MEMOPS));
}

TEST(the_allocations_context_whichever_is_current)
{
	CUcontext prim, other = NULL, cur = NULL;
	struct gh_range r;
	CUdeviceptr d;

	setup();
	prim = cu_primary(0);
	CU_OK(cuCtxCreate(&other, NULL, 0, 0));	/* current now */
	d = cu_alloc(MiB);
	CU_OK(cuCtxSetCurrent(prim));
	r = range_of(d, other);
	gh_syncmemops_ensure(&r);
	CHECK(flags_of(other) & CU_CTX_SYNC_MEMOPS);
	CHECK(!(flags_of(prim) & CU_CTX_SYNC_MEMOPS));
	CU_OK(cuCtxGetCurrent(&cur));
	CHECK(cur == prim);

	/* no context recorded: the device's primary one */
	r = range_of(d, NULL);
	gh_syncmemops_ensure(&r);
	CHECK(flags_of(prim) & CU_CTX_SYNC_MEMOPS);
	CU_OK(cuCtxSetCurrent(NULL));
	CHECK_EQ(fakecuda_calls("cuCtxSetFlags"), 2);
	CU_OK(cuCtxDestroy(other));
}

TEST(refused_per_context_then_per_pointer_for_good)
{
	CUdeviceptr d1, d2;
	struct gh_range r;
	CUcontext ctx;

	setup();
	ctx = cu_primary(0);
	d1 = cu_alloc(MiB);
	d2 = cu_alloc(MiB);
	fakecuda_fail_next("cuCtxSetFlags", CUDA_ERROR_NOT_SUPPORTED, 1);
	r = range_of(d1, ctx);
	gh_syncmemops_ensure(&r);
	CHECK_EQ(ptr_syncmemops(d1), 1);
	CHECK_EQ(ptr_syncmemops(d2), 0);
	CHECK(!(flags_of(ctx) & CU_CTX_SYNC_MEMOPS));
	/* the context route is not tried again */
	r = range_of(d2, ctx);
	gh_syncmemops_ensure(&r);
	CHECK_EQ(ptr_syncmemops(d2), 1);
	CHECK_EQ(fakecuda_calls("cuCtxSetFlags"), 1);
	CHECK_EQ(fakecuda_calls("cuPointerSetAttribute"), 2);
}

TEST(other_refusal_falls_back_once_only)
{
	CUdeviceptr d1, d2;
	struct gh_range r;
	CUcontext ctx;

	setup();
	ctx = cu_primary(0);
	d1 = cu_alloc(MiB);
	d2 = cu_alloc(MiB);
	fakecuda_fail_next("cuCtxSetFlags", CUDA_ERROR_UNKNOWN, 1);
	r = range_of(d1, ctx);
	gh_syncmemops_ensure(&r);
	CHECK_EQ(ptr_syncmemops(d1), 1);	/* this one per pointer */
	r = range_of(d2, ctx);
	gh_syncmemops_ensure(&r);		/* the context again */
	CHECK(flags_of(ctx) & CU_CTX_SYNC_MEMOPS);
	CHECK_EQ(ptr_syncmemops(d2), 0);
	CHECK_EQ(fakecuda_calls("cuCtxSetFlags"), 2);
}

TEST(vmm_refused_per_pointer_said_once)
{
	CUmemAllocationProp prop = {
		.type = CU_MEM_ALLOCATION_TYPE_PINNED,
		.location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 },
	};
	CUmemGenericAllocationHandle h;
	struct gh_range r;
	size_t gran = 0;
	CUdeviceptr va;
	const char *out;

	setup();
	cu_primary(0);
	CU_OK(cuMemGetAllocationGranularity(&gran, &prop,
					    CU_MEM_ALLOC_GRANULARITY_MINIMUM));
	CU_OK(cuMemAddressReserve(&va, gran, 0, 0, 0));
	CU_OK(cuMemCreate(&h, gran, &prop, 0));
	CU_OK(cuMemMap(va, gran, 0, h, 0));
	/* a VMM range has no context: the device's primary one, refused */
	r = range_of(va, NULL);
	r.kind = GDRHOOK_KIND_VMM;
	fakecuda_fail_next("cuCtxSetFlags", CUDA_ERROR_NOT_SUPPORTED, 1);
	gh_log_level = GH_LOG_WARN;
	capture_begin();
	gh_syncmemops_ensure(&r);
	gh_syncmemops_ensure(&r);
	out = capture_end();
	CHECK_EQ(fakecuda_calls("cuPointerSetAttribute"), 2);
	CHECK_EQ(capture_count(out, "SYNC_MEMOPS: the driver refuses it per "
			       "pointer for VMM memory"), 1);
}

TEST(no_context_at_all_per_pointer)
{
	struct gh_range r;

	setup();
	cu_primary(0);
	r = range_of(cu_alloc(MiB), NULL);
	r.dev = -1;
	gh_syncmemops_ensure(&r);
	CHECK_EQ(fakecuda_calls("cuCtxSetFlags"), 0);
	CHECK_EQ(ptr_syncmemops(r.base), 1);
}

/* Threads asking at once (the entry points published by one of them). */
#define THREADS	4

static CUcontext shared_ctx;

static void *asker(void *arg)
{
	struct gh_range r = range_of((CUdeviceptr)(uintptr_t)arg, shared_ctx);

	for (int i = 0; i < 50; i++)
		gh_syncmemops_ensure(&r);
	return NULL;
}

TEST(threads_at_once)
{
	pthread_t t[THREADS];

	setup();
	shared_ctx = cu_primary(0);
	for (int i = 0; i < THREADS; i++)
		CHECK_EQ(pthread_create(&t[i], NULL, asker,
					(void *)(uintptr_t)cu_alloc(MiB)), 0);
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	CHECK(flags_of(shared_ctx) & CU_CTX_SYNC_MEMOPS);
	CHECK(fakecuda_calls("cuCtxSetFlags") >= 1);
	CHECK(fakecuda_calls("cuCtxSetFlags") <= THREADS);
	CHECK_EQ(fakecuda_calls("cuPointerSetAttribute"), 0);
}

TEST_MAIN()
