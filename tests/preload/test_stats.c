// SPDX-License-Identifier: MIT
/*
 * The counters (src/face/stats.c): gdrhook_get_stats with bad and good
 * input and the caller's size honoured; the counts after real
 * allocations, frees, failed calls and registrations; the GDRHOOK_STATS
 * block at exit (after the program's output, zero counters folded,
 * sizes in units, nothing from a process that never used CUDA).
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>

#pragma GCC diagnostic ignored "-Wunused-function"
#include "verbs_load.h"

static struct gdrhook_stats stats(void)
{
	struct gdrhook_stats s = { .size = sizeof(s) };

	CHECK_EQ(gdrhook_get_stats(&s), 0);
	return s;
}

TEST(get_stats_refuses_bad_input)
{
	struct gdrhook_stats s;

	CHECK_EQ(gdrhook_get_stats(NULL), -EINVAL);
	memset(&s, 0xcc, sizeof(s));
	s.size = 0;
	CHECK_EQ(gdrhook_get_stats(&s), -EINVAL);
	s.size = sizeof(uint64_t) - 1;
	CHECK_EQ(gdrhook_get_stats(&s), -EINVAL);
	CHECK_EQ(s.size, sizeof(uint64_t) - 1);
	CHECK_EQ(s.allocs, 0xccccccccccccccccull);
}

/*
 * An older caller's struct (size and allocs only) gets those two; a
 * newer caller's larger one gets what this library has, its size
 * saying so, and nothing past it.
 */
TEST(get_stats_honours_the_callers_size)
{
	uint64_t w[sizeof(struct gdrhook_stats) / 8 + 4];
	const size_t n = sizeof(struct gdrhook_stats) / 8;
	CUdeviceptr p;

	primary_ctx(0);
	CU_OK(cuMemAlloc_v2(&p, 4096));
	memset(w, 0xcc, sizeof(w));
	w[0] = 2 * sizeof(uint64_t);
	CHECK_EQ(gdrhook_get_stats((struct gdrhook_stats *)w), 0);
	CHECK_EQ(w[0], 2 * sizeof(uint64_t));
	CHECK_EQ(w[1], stats().allocs);
	CHECK(w[1] >= 1);
	CHECK_EQ(w[2], 0xccccccccccccccccull);
	memset(w, 0xcc, sizeof(w));
	w[0] = sizeof(w);
	CHECK_EQ(gdrhook_get_stats((struct gdrhook_stats *)w), 0);
	CHECK_EQ(w[0], sizeof(struct gdrhook_stats));
	CHECK_EQ(w[offsetof(struct gdrhook_stats, live) / 8], stats().live);
	for (size_t i = n; i < sizeof(w) / 8; i++)
		CHECK_EQ(w[i], 0xccccccccccccccccull);
	CU_OK(cuMemFree_v2(p));
}

/* Allocations, frees, live bytes, failed calls, as the program made them. */
TEST(counts_follow_allocations_frees_and_failures)
{
	struct gdrhook_stats a, b;
	CUdeviceptr p, q;

	primary_ctx(0);
	a = stats();
	CU_OK(cuMemAlloc_v2(&p, 1 << 20));
	CU_OK(cuMemAlloc_v2(&q, 3 << 20));
	b = stats();
	CHECK_EQ(b.allocs, a.allocs + 2);
	CHECK_EQ(b.live, a.live + 2);
	CHECK_EQ(b.live_bytes, a.live_bytes + (4 << 20));
	CHECK(b.peak_live_bytes >= b.live_bytes);
	CU_OK(cuMemFree_v2(p));
	fake_fail_next("cuMemAlloc_v2", CUDA_ERROR_OUT_OF_MEMORY, 1);
	CHECK_EQ(cuMemAlloc_v2(&p, 4096), CUDA_ERROR_OUT_OF_MEMORY);
	b = stats();
	CHECK_EQ(b.allocs, a.allocs + 2);
	CHECK_EQ(b.frees, a.frees + 1);
	CHECK_EQ(b.failed_calls, a.failed_calls + 1);
	CHECK_EQ(b.live, a.live + 1);
	CHECK_EQ(b.live_bytes, a.live_bytes + (3 << 20));
	CHECK(b.peak_live_bytes >= a.live_bytes + (4 << 20));
	CHECK_EQ(b.untrusted, 0);
	CU_OK(cuMemFree_v2(q));
	CHECK_EQ(stats().live, a.live);
}

enum { THREADS = 4, PAIRS = 500 };

static void *pairs(void *arg)
{
	CUdeviceptr p;

	CU_OK(cuCtxSetCurrent((CUcontext)arg));
	for (int i = 0; i < PAIRS; i++) {
		CU_OK(cuMemAlloc_v2(&p, 4096));
		CU_OK(cuMemFree_v2(p));
	}
	return NULL;
}

/* Threads count on stripes of their own: the sum is every call. */
TEST(counts_from_threads_add_up)
{
	CUcontext ctx = primary_ctx(0);
	struct gdrhook_stats a = stats(), b;
	pthread_t t[THREADS];

	for (int i = 0; i < THREADS; i++)
		CHECK_EQ(pthread_create(&t[i], NULL, pairs, ctx), 0);
	for (int i = 0; i < THREADS; i++)
		CHECK_EQ(pthread_join(t[i], NULL), 0);
	b = stats();
	CHECK_EQ(b.allocs, a.allocs + THREADS * PAIRS);
	CHECK_EQ(b.frees, a.frees + THREADS * PAIRS);
	CHECK_EQ(b.live, a.live);
}

/* The peak counts what was live at once, however it went (a free, or a
 * context destroy dropping it); live bytes count what is live now. */
TEST(stats_peak_and_live_bytes_across_a_context_destroy)
{
	struct gdrhook_stats before = { .size = sizeof(before) };
	struct gdrhook_stats after = { .size = sizeof(after) };
	CUctxCreateParams params;
	CUdeviceptr a, b, c;
	CUcontext ctx;

	primary_ctx(0);
	CHECK_EQ(gdrhook_get_stats(&before), 0);
	memset(&params, 0, sizeof(params));
	CU_OK(cuCtxCreate_v4(&ctx, &params, 0, 0));
	CU_OK(cuMemAlloc(&a, 3 << 20));
	CU_OK(cuMemAlloc(&b, 1 << 20));
	CU_OK(cuMemAlloc(&c, 1 << 20));
	CU_OK(cuMemFree(c));
	CU_OK(cuCtxDestroy(ctx));	/* a and b go with it */
	CHECK_EQ(tracked(a, NULL), -ENOENT);
	CHECK_EQ(gdrhook_get_stats(&after), 0);
	CHECK(after.peak_live_bytes >= before.live_bytes + (5u << 20));
	CHECK_EQ(after.live_bytes, before.live_bytes);
	CHECK_EQ(after.implicit_frees, before.implicit_frees + 2);
}

/* ---- scenarios ---- */

static int scenario_alloc(void)
{
	CUdeviceptr p;

	if (cuInit(0))
		return 3;
	primary_ctx(0);
	for (int i = 0; i < 5; i++) {
		CU_OK(cuMemAlloc(&p, 4096));
		CU_OK(cuMemFree(p));
	}
	printf("stdout-intact\n");	/* buffered: lost if we are killed */
	return 7;
}

/* 3.5 MiB left live at exit. */
static int scenario_leave_live(void)
{
	CUdeviceptr p, q;

	primary_ctx(0);
	CU_OK(cuMemAlloc_v2(&p, 3 << 20));
	CU_OK(cuMemAlloc_v2(&q, 512 << 10));
	return 0;
}

static int scenario_nocuda(void)
{
	printf("no cuda\n");
	return 0;
}

/*
 * GPU memory registered through the cache (dmabuf backend): the first
 * registration a miss and one NIC registration, the second a hit; the
 * whole allocation pinned; host memory seen and passed through.
 */
static int scenario_verbs(void)
{
	struct gdrhook_stats s;
	struct ibv_pd *pd;
	struct ibv_mr *a, *b, *h;
	CUdeviceptr d;
	char host[64];

	primary_ctx(0);
	verbs_load();
	pd = v.alloc_pd(v.open());
	d = dev_alloc(4 * MiB);
	a = v.reg(pd, (void *)(d + 4096), 65536, LW);
	b = v.reg(pd, (void *)d, 4096, LW);
	h = v.reg(pd, host, sizeof(host), LW);
	if (!a || !b || !h)
		return 2;
	s = stats();
	if (s.regs_seen != 3 || s.regs_passed != 1)
		return 3;
	if (s.rcache_misses != 1 || s.rcache_hits != 1 || s.nic_regs != 1)
		return 4;
	if (s.pinned_bytes < 4 * MiB)
		return 5;
	if (v.dereg(a) || v.dereg(b) || v.dereg(h))
		return 6;
	CU_OK(cuMemFree_v2(d));
	s = stats();
	if (s.nic_deregs != 1 || s.pinned_bytes != 0)
		return 7;
	return 0;
}

static const struct scenario scenarios[] = {
	{ "alloc", scenario_alloc },
	{ "leave_live", scenario_leave_live },
	{ "nocuda", scenario_nocuda },
	{ "verbs", scenario_verbs },
};

#define ENV(...) ((const char *const[]){ __VA_ARGS__, NULL })

/* Run a scenario with env, its stdout and stderr both into path. */
static int run_both(const char *name, const char *const *env,
		    const char *path)
{
	pid_t pid;
	int st;

	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		char self[4096];
		ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

		if (n < 0 || fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
			_exit(120);
		self[n] = 0;
		close(fd);
		for (const char *const *e = env; e && *e; e++)
			putenv((char *)*e);
		execl(self, self, "--scenario", name, (char *)NULL);
		_exit(121);
	}
	CHECK(waitpid(pid, &st, 0) == pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static char *slurp(const char *path)
{
	static char buf[1 << 16];
	int fd = open(path, O_RDONLY);
	ssize_t n;

	buf[0] = 0;
	if (fd < 0)
		return buf;
	n = read(fd, buf, sizeof(buf) - 1);
	buf[n > 0 ? n : 0] = 0;
	close(fd);
	return buf;
}

TEST(registrations_counted_through_the_cache)
{
	CHECK_EQ(run_scenario("verbs", ENV("GDRHOOK_BACKEND=dmabuf",
		"GDRHOOK_REMOTE_EXPOSURE=allocation")), 0);
}

TEST(stats_follow_the_output_zeros_folded_sizes_in_units)
{
	char both[256];
	const char *e, *at, *out;
	unsigned zeros = 0;

	log_path(both, sizeof(both), "both");
	/* stdout and stderr one file: stdio flushes the program's buffered
	 * line only after the exit handlers, the one that prints included */
	CHECK_EQ(run_both("alloc", ENV("GDRHOOK_STATS=yes"), both), 7);
	e = slurp(both);
	at = strstr(e, "]: stats\n");
	out = strstr(e, "stdout-intact\n");
	if (!at || !out || out > at)
		TH_FAIL("not the output, then the counters: %s", e);
	CHECK(strstr(at, "  allocations             5\n") != NULL);
	CHECK(strstr(at, "  frees                   5\n") != NULL);
	CHECK(strstr(at, "  peak live bytes         4.0 KiB\n") != NULL);
	/* a zero counter has no row: one line counts them */
	CHECK(strstr(at, "rcache hits") == NULL);
	CHECK(strstr(at, "live at exit") == NULL);
	at = strstr(at, "  the other ");
	CHECK(at && sscanf(at, "  the other %u counters are 0\n", &zeros) == 1);
	CHECK(zeros >= 20);
	unlink(both);
}

/* What is live at exit, in MiB with one decimal; the prefix names the
 * process. */
TEST(stats_show_what_is_live_at_exit)
{
	char both[256];
	const char *e;

	log_path(both, sizeof(both), "live");
	CHECK_EQ(run_both("leave_live", ENV("GDRHOOK_STATS=1"), both), 0);
	e = slurp(both);
	CHECK(strstr(e, "  allocations             2\n") != NULL);
	CHECK(strstr(e, "  live at exit            2\n") != NULL);
	CHECK(strstr(e, "  live bytes at exit      3.5 MiB\n") != NULL);
	CHECK(strstr(e, "  peak live bytes         3.5 MiB\n") != NULL);
	CHECK(strstr(e, "frees") == NULL);
	CHECK(strstr(e, "gdrhook[") &&
	      strstr(e, "gdrhook[") < strstr(e, "]: stats\n"));
	unlink(both);
}

/* GDRHOOK_STATS=1: a process that never used CUDA or verbs says
 * nothing; =all: every process, all zeros on one line; with
 * GDRHOOK_VALIDATE the audit's zero is a verdict and has its row. */
TEST(stats_only_from_processes_that_used_cuda_unless_all)
{
	char both[256];
	const char *e;
	unsigned n = 0;

	log_path(both, sizeof(both), "nocuda");
	CHECK_EQ(run_both("nocuda", ENV("GDRHOOK_STATS=1"), both), 0);
	CHECK_STR(slurp(both), "no cuda\n");
	CHECK_EQ(run_both("nocuda", ENV("GDRHOOK_STATS=all"), both), 0);
	e = slurp(both);
	CHECK(!strncmp(e, "no cuda\n", 8));
	e = strstr(e, "]: stats\n  all ");
	CHECK(e && sscanf(e, "]: stats\n  all %u counters are 0\n", &n) == 1);
	CHECK_EQ(n, sizeof(struct gdrhook_stats) / 8 - 1);
	CHECK_EQ(run_both("alloc", ENV("GDRHOOK_STATS=1", "GDRHOOK_VALIDATE=1"),
			  both), 7);
	e = slurp(both);
	CHECK(strstr(e, "  audit disagreements     0\n") != NULL);
	unlink(both);
}

SCENARIO_MAIN(scenarios)
