// SPDX-License-Identifier: MIT
/*
 * The bookkeeping every wrapper shares (src/hooks/call.c), under
 * LD_PRELOAD against the driver test double: a runtime call and the
 * driver call it makes are one allocation, labelled with the runtime
 * call; the program's errno is what the real call left, whatever
 * gdrhook's own work (the event log included) did; a hook left without
 * returning (siglongjmp out of a subscriber callback) is ended as if it
 * had returned, said once, and the thread's next calls are hooked as
 * before.
 */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>

/* Not every helper of the shared header is used here. */
#pragma GCC diagnostic ignored "-Wunused-function"
#include "preload_util.h"

TEST(runtime_calls_are_labelled_and_tracked_once)
{
	void *p = NULL;
	struct gdrhook_stats s = { .size = sizeof(s) };

	CHECK_EQ(cudaSetDevice(0), cudaSuccess);
	CHECK_EQ(cudaMalloc(&p, 3 << 20), cudaSuccess);
	CHECK_EQ(tracked((uintptr_t)p, NULL), 0);
	CHECK_EQ(cudaFree(p), cudaSuccess);
	CHECK_EQ(tracked((uintptr_t)p, NULL), -ENOENT);
	CHECK_EQ(gdrhook_get_stats(&s), 0);
	CHECK_EQ(s.allocs, 1);
	CHECK_EQ(s.frees, 1);
	CHECK_EQ(s.frees_untracked, 0);
	CHECK_EQ(s.untrusted, 0);
}

/* What the subscriber heard: the events' count and the last api. */
static int heard;
static char heard_api[128];

static void on_alloc(const struct gdrhook_event *ev, void *arg)
{
	heard++;
	snprintf(heard_api, sizeof(heard_api), "%s", ev->api);
	(void)arg;
}

TEST(runtime_call_is_one_event_named_after_it)
{
	void *p = NULL;

	CHECK_EQ(cudaSetDevice(0), cudaSuccess);
	CHECK(gdrhook_subscribe(GDRHOOK_EVENT_ALLOC, on_alloc, NULL) >= 0);
	CHECK_EQ(cudaMalloc(&p, 4096), cudaSuccess);
	CHECK_EQ(heard, 1);
	CHECK_STR(heard_api, "cudaMalloc");
	CHECK_EQ(cudaFree(p), cudaSuccess);
	/* the driver's own call, alone, is named as itself */
	{
		CUdeviceptr d;

		CU_OK(cuMemAlloc_v2(&d, 4096));
		CHECK_EQ(heard, 2);
		CHECK_STR(heard_api, "cuMemAlloc_v2");
		CU_OK(cuMemFree_v2(d));
	}
}

/* errno across hooked calls: the real call's, never gdrhook's. */
static int errno_kept(void)
{
	CUdeviceptr d;
	void *p = NULL;

	primary_ctx(0);
	errno = 4242;
	if (cuMemAlloc_v2(&d, 4096) || errno != 4242)
		return 2;
	if (cuMemFree_v2(d) || errno != 4242)
		return 3;
	if (cudaMalloc(&p, 8192) || errno != 4242)
		return 4;
	if (cudaFree(p) || errno != 4242)
		return 5;
	/* a failed call: the driver's answer, errno as it was */
	if (cuMemFree_v2((CUdeviceptr)0x1000) == CUDA_SUCCESS ||
	    errno != 4242)
		return 6;
	return 0;
}

static int scenario_errno(void)
{
	return errno_kept();
}

static const struct scenario scenarios[] = {
	{ "errno", scenario_errno },
};

TEST(errno_is_the_programs_without_and_with_the_event_log)
{
	char path[256], var[300];
	const char *env[] = { var, NULL };

	CHECK_EQ(errno_kept(), 0);
	snprintf(var, sizeof(var), "GDRHOOK_TRACE=%s",
		 log_path(path, sizeof(path), "call-errno"));
	CHECK_EQ(run_scenario("errno", env), 0);
	CHECK(LOG_COUNT(path, "\"ev\":\"alloc\"") >= 2);
	unlink(path);
}

/* A callback that leaves the hook it runs in for good, once. */
static sigjmp_buf back;
static int jumps;

static void jump_out(const struct gdrhook_event *ev, void *arg)
{
	if (jumps++)
		return;
	siglongjmp(back, 1);
	(void)ev;
	(void)arg;
}

TEST(hook_left_by_siglongjmp_is_ended)
{
	char err[256];
	void *volatile p = NULL;
	void *q = NULL;
	int fd, h;

	snprintf(err, sizeof(err), "%s/gdrhook-test-%d-call-jump",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid());
	fd = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	CHECK(fd >= 0 && dup2(fd, 2) == 2);
	close(fd);
	CHECK_EQ(cudaSetDevice(0), cudaSuccess);
	h = gdrhook_subscribe(GDRHOOK_EVENT_ALLOC, jump_out, NULL);
	CHECK(h >= 0);
	if (!sigsetjmp(back, 1)) {
		CHECK_EQ(cudaMalloc((void **)&p, 4096), cudaSuccess);
		TH_FAIL("the callback did not jump");
	}
	CHECK_EQ(jumps, 1);
	CHECK_EQ(count_in_file(err, "a hook was left without returning"), 1);
	CHECK_EQ(gdrhook_unsubscribe(h), 0);
	/* the next runtime call on this thread is hooked, as its own call */
	CHECK(gdrhook_subscribe(GDRHOOK_EVENT_ALLOC, on_alloc, NULL) >= 0);
	CHECK_EQ(cudaMalloc(&q, 8192), cudaSuccess);
	CHECK_EQ(heard, 1);
	CHECK_STR(heard_api, "cudaMalloc");
	CHECK_EQ(tracked((uintptr_t)q, NULL), 0);
	CHECK_EQ(cudaFree(q), cudaSuccess);
	CHECK_EQ(tracked((uintptr_t)q, NULL), -ENOENT);
	CHECK_EQ(count_in_file(err, "a hook was left without returning"), 1);
	unlink(err);
}

SCENARIO_MAIN(scenarios)
