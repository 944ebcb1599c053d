// SPDX-License-Identifier: MIT
/*
 * The deferred queue (src/hooks/deferred.c): memory calls made while
 * gdrhook's own bookkeeping runs on the same thread (the guarded window),
 * from a subscriber callback, and from a signal handler that interrupts
 * a hook.  They reach the driver at once; the registry must reflect them
 * by the time the outer hook returns, or say it is untrusted.  Never a
 * stale range kept silently.
 */
#include <cuda.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>

/* Not every helper of the shared header is used here. */
#pragma GCC diagnostic ignored "-Wunused-function"
#include "preload_util.h"

#define NFREE 140	/* more than the guarded window queues (128) */

static CUdeviceptr victims[NFREE];
static int nvictims;
static CUdeviceptr born;
static int born_size;
static CUcontext doomed;
static int fired;

/* Free the victims from inside an allocation's hook. */
static void free_victims(const struct gdrhook_event *ev, void *arg)
{
	if (fired++)
		return;
	for (int i = 0; i < nvictims; i++)
		CU_OK(cuMemFree_v2(victims[i]));
	(void)ev;
	(void)arg;
}

static void alloc_one(const struct gdrhook_event *ev, void *arg)
{
	if (fired++)
		return;
	CU_OK(cuMemAlloc_v2(&born, (size_t)born_size));
	(void)ev;
	(void)arg;
}

static void on_usr1(int sig)
{
	(void)sig;
	CU_OK(cuMemFree_v2(victims[0]));
}

/* Stands in for a signal arriving while the hook records. */
static void raise_usr1(const struct gdrhook_event *ev, void *arg)
{
	if (fired++)
		return;
	raise(SIGUSR1);
	(void)ev;
	(void)arg;
}

static void destroy_ctx(const struct gdrhook_event *ev, void *arg)
{
	if (fired++)
		return;
	CU_OK(cuCtxDestroy_v2(doomed));
	(void)ev;
	(void)arg;
}

static CUstream capturing;

static void alloc_captured(const struct gdrhook_event *ev, void *arg)
{
	CUdeviceptr p;

	if (fired++)
		return;
	CU_OK(cuMemAllocAsync(&p, 4096, capturing));
	(void)ev;
	(void)arg;
}

static void make_victims(int n)
{
	nvictims = n;
	for (int i = 0; i < n; i++) {
		CU_OK(cuMemAlloc_v2(&victims[i], 4096 * (size_t)(i + 1)));
		CHECK_EQ(tracked(victims[i], NULL), 0);
	}
}

TEST(subscriber_free_applied_before_hook_returns)
{
	CUdeviceptr p;

	primary_ctx(0);
	make_victims(3);
	CHECK(gdrhook_subscribe(GDRHOOK_EVENT_ALLOC, free_victims, NULL) >= 0);
	CU_OK(cuMemAlloc_v2(&p, 1 << 20));
	CHECK_EQ(fired, 1);
	for (int i = 0; i < 3; i++)
		CHECK_EQ(tracked(victims[i], NULL), -ENOENT);
	CHECK_EQ(tracked(p, NULL), 0);
	CHECK_EQ(gdrhook_trusted(), 1);
}

TEST(subscriber_alloc_registered_before_hook_returns)
{
	struct gdrhook_range r;
	CUdeviceptr p;

	primary_ctx(0);
	born_size = 3 << 20;
	CHECK(gdrhook_subscribe(GDRHOOK_EVENT_FREE, alloc_one, NULL) >= 0);
	CU_OK(cuMemAlloc_v2(&p, 8192));
	CU_OK(cuMemFree_v2(p));
	CHECK_EQ(fired, 1);
	CHECK(born != 0);
	CHECK_EQ(tracked(born, &r), 0);
	CHECK_EQ(r.base, born);
	CHECK_EQ(r.size, 3 << 20);
	CHECK_EQ(r.kind, GDRHOOK_KIND_DEVICE);
	CHECK_EQ(gdrhook_trusted(), 1);
}

/* Free a victim, then allocate its size again: the driver hands the
 * same address back, so the queue must apply the two in that order. */
static CUdeviceptr again;
static struct gdrhook_range victim_before;

static void free_then_realloc(const struct gdrhook_event *ev, void *arg)
{
	if (fired++)
		return;
	CU_OK(cuMemFree_v2(victims[0]));
	CU_OK(cuMemAlloc_v2(&again, 4096));
	(void)ev;
	(void)arg;
}

TEST(subscriber_free_then_realloc_applied_in_order)
{
	struct gdrhook_range r;
	CUdeviceptr p;

	primary_ctx(0);
	make_victims(1);
	CHECK_EQ(tracked(victims[0], &victim_before), 0);
	CHECK(gdrhook_subscribe(GDRHOOK_EVENT_ALLOC, free_then_realloc,
				NULL) >= 0);
	CU_OK(cuMemAlloc_v2(&p, 1 << 20));
	/* the queued allocation, applied, is announced too */
	CHECK_EQ(fired, 2);
	CHECK_EQ(again, victims[0]);	/* the precondition: reused */
	CHECK_EQ(tracked(again, &r), 0);
	CHECK_EQ(r.base, again);
	CHECK_EQ(r.size, 4096);
	CHECK(r.gen != victim_before.gen);
	CHECK_EQ(gdrhook_trusted(), 1);
	CU_OK(cuMemFree_v2(again));
	CHECK_EQ(tracked(again, NULL), -ENOENT);
}

TEST(signal_handler_free_during_hook)
{
	CUdeviceptr p, warm;

	primary_ctx(0);
	/* The driver double's free grows its free lists with realloc, not
	 * signal-safe (TSan says so): make the handler's free find room. */
	CU_OK(cuMemAlloc_v2(&warm, 4096));
	CU_OK(cuMemFree_v2(warm));
	make_victims(1);
	CHECK(signal(SIGUSR1, on_usr1) != SIG_ERR);
	CHECK(gdrhook_subscribe(GDRHOOK_EVENT_ALLOC, raise_usr1, NULL) >= 0);
	CU_OK(cuMemAlloc_v2(&p, 1 << 20));
	CHECK_EQ(fired, 1);
	CHECK_EQ(tracked(victims[0], NULL), -ENOENT);
	CHECK_EQ(tracked(p, NULL), 0);
	CHECK_EQ(gdrhook_trusted(), 1);
	/* The driver really freed it: a second free is an error. */
	CHECK_EQ(cuMemFree_v2(victims[0]), CUDA_ERROR_INVALID_VALUE);
}

TEST(too_many_guarded_frees_mark_untrusted)
{
	CUdeviceptr p;

	primary_ctx(0);
	make_victims(NFREE);
	CHECK(gdrhook_subscribe(GDRHOOK_EVENT_ALLOC, free_victims, NULL) >= 0);
	CU_OK(cuMemAlloc_v2(&p, 1 << 20));
	CHECK_EQ(fired, 1);
	CHECK_EQ(gdrhook_trusted(), 0);
}

TEST(guarded_context_destroy_marks_untrusted)
{
	CUctxCreateParams params;
	CUdeviceptr p, q;

	CU_OK(cuInit(0));
	memset(&params, 0, sizeof(params));
	CU_OK(cuCtxCreate_v4(&doomed, &params, 0, 0));
	CU_OK(cuMemAlloc_v2(&q, 4096));
	primary_ctx(0);
	CHECK(gdrhook_subscribe(GDRHOOK_EVENT_ALLOC, destroy_ctx, NULL) >= 0);
	CU_OK(cuMemAlloc_v2(&p, 4096));
	CHECK_EQ(fired, 1);
	CHECK_EQ(gdrhook_trusted(), 0);
}

/* A graph node made in the window cannot be replayed afterwards. */
TEST(guarded_capture_marks_untrusted)
{
	CUdeviceptr p;
	CUgraph g;

	primary_ctx(0);
	CU_OK(cuStreamCreate(&capturing, CU_STREAM_NON_BLOCKING));
	CU_OK(cuStreamBeginCapture_v2(capturing,
				      CU_STREAM_CAPTURE_MODE_RELAXED));
	CHECK(gdrhook_subscribe(GDRHOOK_EVENT_ALLOC, alloc_captured, NULL) >= 0);
	CU_OK(cuMemAlloc_v2(&p, 4096));
	CHECK_EQ(fired, 1);
	CHECK_EQ(gdrhook_trusted(), 0);
	CU_OK(cuStreamEndCapture(capturing, &g));
}

/*
 * Threads that come and go, each making one memory call from a
 * subscriber callback (queued in a per-thread ring, applied as its hook
 * returns): 300 of them, more than the 256 rings.  Each ended thread's
 * ring goes to the next, so every call is applied and the registry stays
 * trusted (a ring kept for the process's life: the 257th thread's call
 * lost, the registry untrusted).
 */
static __thread int cb_done;
static __thread CUdeviceptr cb_born;
static CUcontext thread_ctx0;

static void alloc_once_per_thread(const struct gdrhook_event *ev, void *arg)
{
	if (cb_done++)
		return;
	CU_OK(cuMemAlloc_v2(&cb_born, 12288));
	(void)ev;
	(void)arg;
}

static void *guarded_thread(void *arg)
{
	CUdeviceptr p;
	struct gdrhook_range r;

	CU_OK(cuCtxSetCurrent(thread_ctx0));
	CU_OK(cuMemAlloc_v2(&p, 4096));
	CHECK(cb_born != 0);
	CHECK_EQ(tracked(cb_born, &r), 0);
	CHECK_EQ(r.size, 12288);
	CU_OK(cuMemFree_v2(cb_born));
	CU_OK(cuMemFree_v2(p));
	CHECK_EQ(tracked(cb_born, NULL), -ENOENT);
	return arg;
}

TEST(guarded_calls_from_threads_that_come_and_go)
{
	thread_ctx0 = primary_ctx(0);
	CHECK(gdrhook_subscribe(GDRHOOK_EVENT_ALLOC, alloc_once_per_thread,
				NULL) >= 0);
	for (int i = 0; i < 300; i++) {
		pthread_t t;

		CHECK_EQ(pthread_create(&t, NULL, guarded_thread, NULL), 0);
		CHECK_EQ(pthread_join(t, NULL), 0);
		if (!gdrhook_trusted())
			TH_FAIL("untrusted after thread %d", i + 1);
	}
	CHECK_EQ(gdrhook_trusted(), 1);
}

TEST_MAIN()
