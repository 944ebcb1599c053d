/* SPDX-License-Identifier: MIT */
/*
 * Driver-side benchmark: prints figures, checks nothing (beyond refusing
 * to report figures of calls that failed).  tests/bench/bench-gpu runs it
 * natively and under LD_PRELOAD=libgdrhook.so and makes one table.
 *
 *   bench_driver info       device, driver and runtime versions
 *   bench_driver alloc      N pairs of cuMemAlloc(1 MiB) + cuMemFree, then
 *                           N pairs of cudaMalloc(1 MiB) + cudaFree
 *   bench_driver churn      N pairs of cuMemAlloc(4 KiB) + cuMemFree with
 *                           GH_BENCH_LIVE (first count, default 1000)
 *                           live 4 KiB allocations; under the shim
 *                           also N pairs alternating, in blocks, between
 *                           the shim and libcuda's own entry points
 *                           (churn.inproc); with
 *                           GH_BENCH_CHURN_THREADS=T, T threads at once
 *   bench_driver rchurn     GH_BENCH_RCHURN_THREADS (16) threads at once,
 *                           each GH_BENCH_RCHURN_N (1000) pairs of a
 *                           random size, 1 B .. 8 MiB uniform, through
 *                           cuMemAlloc+cuMemFree or cudaMalloc+cudaFree
 *                           (a coin per pair); pairs/s of all threads
 *   bench_driver tagcheck [L1,L2,...]
 *                           with L live 4 KiB cuMemAlloc allocations: the
 *                           driver's tag check (cuPointerGetAttribute
 *                           BUFFER_ID; cuPointerGetAttributes with BUFFER_ID,
 *                           CONTEXT, DEVICE_ORDINAL) and, when libgdrhook is
 *                           preloaded, gdrhook_lookup(), on the same
 *                           addresses; latency and multi-thread throughput
 *
 * Environment (GH_BENCH_*, not GDRHOOK_*: the shim warns about names it
 * does not know):
 *   GH_BENCH_N=2000          alloc: timed pairs per API
 *   GH_BENCH_WARMUP=200      alloc: untimed pairs first
 *   GH_BENCH_LIVE=1000,20000,100000,200000   tagcheck: live counts
 *                            (capped to a quarter of free device memory)
 *   GH_BENCH_THREADS=1,2,4,8,16              tagcheck: thread counts
 *   GH_BENCH_SECS=0.5        tagcheck: seconds per multi-thread run
 *   GH_BENCH_QUICK=1         tagcheck: 1/8 of the latency samples
 *   GH_BENCH_CHURN_THREADS=1 churn: threads churning at once
 *   GH_BENCH_RCHURN_THREADS=16, GH_BENCH_RCHURN_N=1000,
 *   GH_BENCH_RCHURN_WARMUP=50  rchurn: threads, timed and untimed pairs
 *
 * Every figure is one line "R <key> <value>" on stdout (the runner parses
 * these); other lines start with '#'.
 *
 * Latency method: CLOCK_MONOTONIC (vDSO) is read around a batch of 64
 * calls; the per-call figure of a batch is (batch time - timer cost) / 64,
 * where the timer cost is the median of 20000 back-to-back clock_gettime
 * pairs.  p50 and p99 are taken over the batches (4096 of them for random
 * addresses: 262144 calls, each address of the table once), after an
 * untimed warm-up pass over a quarter of them.  A batch figure is the mean
 * of 64 calls, so p99 is the tail of 64-call means, not of single calls.
 * "hot" repeats one pointer; "rand" walks a table of 2^18 pointers, each a
 * random 8-byte-aligned offset inside a uniformly chosen live allocation;
 * the driver and gdrhook_lookup walk the same table in the same process.
 * The calls of a batch are independent (the CPU may overlap them), as a
 * communication library's validity checks on its cache hits are.
 *
 * Throughput method: T threads, each pinned to its own CPU (of the
 * process's affinity set) and with the primary context current, wait on a
 * barrier and then call in batches of 64 from their own starting point in
 * the same table until a stop flag (set by the main thread after
 * GH_BENCH_SECS) is seen; calls/s = sum over threads of calls / own time.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/resource.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "gdrhook_preload.h"
#include "bench_cuda.h"
#include "drvsym.h"

#define KiB (1ull << 10)
#define MiB (1ull << 20)
#define BATCH 64
#define NADDR (1u << 18)
#define SMALL (4 * KiB)
#define MAX_THREADS 256

enum kind { K_DRV, K_DRV3, K_GH };
static const char *const kind_name[] = { "drv", "drv3", "gh" };

static struct gdrhook_preload gh;
static int have_gh;
static CUcontext ctx;
static double timer_ns;
static volatile uint64_t sink;

/* "1,2,4" -> array; returns the count. */
static int parse_list(const char *s, long *v, int max)
{
	int n = 0;

	while (s && *s && n < max) {
		char *end;
		long x = strtol(s, &end, 0);

		if (end == s)
			break;
		if (x > 0)
			v[n++] = x;
		s = *end ? end + 1 : end;
	}
	return n;
}

/* Nearest-rank percentile of a sorted array. */
static double pct(const double *s, size_t n, double p)
{
	size_t i = (size_t)(p / 100.0 * (double)n);

	return s[i >= n ? n - 1 : i];
}

static void calibrate_timer(void)
{
	enum { NS = 20000 };
	static double s[NS];

	for (int i = 0; i < NS; i++) {
		uint64_t a = now_ns(), b = now_ns();

		s[i] = (double)(b - a);
	}
	qsort(s, NS, sizeof(s[0]), cmp_double);
	timer_ns = s[NS / 2];
	printf("R timer_ns %.1f\n", timer_ns);
}

/* Sets up the primary context of device 0 (through the runtime when
 * with_rt, so that both APIs share it) and reports whether gdrhook is in. */
static void setup(int with_rt)
{
	if (with_rt) {
		CKRT(cudaSetDevice(0));
		CKRT(cudaFree(NULL));
		CK(cuCtxGetCurrent(&ctx));
	}
	if (!ctx) {
		CUdevice dev;

		CK(cuInit(0));
		CK(cuDeviceGet(&dev, 0));
		CK(cuDevicePrimaryCtxRetain(&ctx, dev));
		CK(cuCtxSetCurrent(ctx));
	}
	have_gh = gdrhook_preload_open(&gh) == 0;
	printf("R gdrhook %d\n", have_gh);
	if (have_gh)
		printf("R gh.trusted %d\n", gh.trusted());
}

/* Page faults and context switches of the process so far. */
static void report_rusage(const char *pfx)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru))
		return;
	printf("R %s.minflt %ld\nR %s.nvcsw %ld\nR %s.nivcsw %ld\n",
	       pfx, ru.ru_minflt, pfx, ru.ru_nvcsw, pfx, ru.ru_nivcsw);
}

static void report_gh_stats(const char *pfx)
{
	struct gdrhook_stats st;

	if (!have_gh)
		return;
	gh.flush_log();		/* so that log_events counts every record */
	memset(&st, 0, sizeof(st));
	st.size = sizeof(st);
	if (gh.get_stats(&st) != 0)
		return;
	printf("R %s.allocs %llu\nR %s.frees %llu\nR %s.live %llu\n"
	       "R %s.untrusted %llu\nR %s.log_events %llu\n"
	       "R %s.log_dropped %llu\n",
	       pfx, (unsigned long long)st.allocs,
	       pfx, (unsigned long long)st.frees,
	       pfx, (unsigned long long)st.live,
	       pfx, (unsigned long long)st.untrusted,
	       pfx, (unsigned long long)st.log_events,
	       pfx, (unsigned long long)st.log_dropped);
	printf("R %s.trusted %d\n", pfx, gh.trusted());
}

/* ---- info ---- */

static int mode_info(void)
{
	CUdevice dev;

	CK(cuInit(0));
	CK(cuDeviceGet(&dev, 0));
	print_versions(dev);
	have_gh = gdrhook_preload_open(&gh) == 0;
	printf("R gdrhook %d\n", have_gh);
	if (have_gh)
		printf("R gh.api_version %u\n", gh.api_version());
	return 0;
}

/* ---- alloc ---- */

static void summarize(const char *key, double *v, size_t n)
{
	double sum = 0;

	for (size_t i = 0; i < n; i++)
		sum += v[i];
	qsort(v, n, sizeof(v[0]), cmp_double);
	printf("R %s.mean_us %.3f\nR %s.p50_us %.3f\nR %s.p99_us %.3f\n",
	       key, sum / (double)n / 1e3, key, pct(v, n, 50) / 1e3,
	       key, pct(v, n, 99) / 1e3);
}

/* n timed cuMemAlloc + cuMemFree pairs of size bytes (after warm untimed). */
static void time_cu_pairs(const char *key, unsigned long long size, long n,
			  long warm, double *ta, double *tf, double *tp)
{
	char k[64];

	for (long i = -warm; i < n; i++) {
		CUdeviceptr p;
		uint64_t t0 = now_ns(), t1, t2;

		CK(cuMemAlloc(&p, size));
		t1 = now_ns();
		CK(cuMemFree(p));
		t2 = now_ns();
		if (i >= 0) {
			ta[i] = (double)(t1 - t0);
			tf[i] = (double)(t2 - t1);
			tp[i] = (double)(t2 - t0);
		}
	}
	snprintf(k, sizeof(k), "%s.pair", key);
	summarize(k, tp, (size_t)n);
	snprintf(k, sizeof(k), "%s.alloc", key);
	summarize(k, ta, (size_t)n);
	snprintf(k, sizeof(k), "%s.free", key);
	summarize(k, tf, (size_t)n);
}

static int mode_alloc(void)
{
	long n = env_long("GH_BENCH_N", 2000);
	long warm = env_long("GH_BENCH_WARMUP", 200);
	double *ta, *tf, *tp;

	if (n < 1)
		n = 1;
	if (warm < 0)
		warm = 0;
	setup(1);
	ta = calloc((size_t)n, sizeof(*ta));
	tf = calloc((size_t)n, sizeof(*tf));
	tp = calloc((size_t)n, sizeof(*tp));
	if (!ta || !tf || !tp)
		return 1;
	printf("R alloc.n %ld\nR alloc.size %llu\n", n, MiB);

	/* Driver API. */
	time_cu_pairs("alloc.cu", MiB, n, warm, ta, tf, tp);

	/* Runtime API. */
	for (long i = -warm; i < n; i++) {
		void *p;
		uint64_t t0 = now_ns(), t1, t2;

		CKRT(cudaMalloc(&p, MiB));
		t1 = now_ns();
		CKRT(cudaFree(p));
		t2 = now_ns();
		if (i >= 0) {
			ta[i] = (double)(t1 - t0);
			tf[i] = (double)(t2 - t1);
			tp[i] = (double)(t2 - t0);
		}
	}
	summarize("alloc.rt.pair", tp, (size_t)n);
	summarize("alloc.rt.alloc", ta, (size_t)n);
	summarize("alloc.rt.free", tf, (size_t)n);
	report_gh_stats("gh");
	free(ta);
	free(tf);
	free(tp);
	return 0;
}

static int mode_churn_mt(long threads, long n, long warm, long live);

/*
 * With the shim preloaded: 4 KiB pairs through the shim and through the
 * driver's own entry points (driver_sym) in the same process, in
 * alternating blocks of 64 pairs, so that both see the same process
 * (the H100's per-process modes cancel).  Per block, the median pair of
 * each; reported: the medians over blocks and the median of the blocks'
 * ratios.
 */
static void churn_inproc(long n)
{
	typedef CUresult (*alloc_fn)(CUdeviceptr *, size_t);
	typedef CUresult (*free_fn)(CUdeviceptr);
	alloc_fn ra = (alloc_fn)driver_sym("cuMemAlloc_v2");
	free_fn rf = (free_fn)driver_sym("cuMemFree_v2");
	long blocks = n / BATCH;
	double *bh, *bd, *br, t[BATCH];

	if (!ra || !rf || (void *)ra == (void *)cuMemAlloc) {
		printf("# churn.inproc: the driver's own entry points not found\n");
		return;
	}
	if (blocks < 4)
		blocks = 4;
	bh = calloc((size_t)blocks, sizeof(*bh));
	bd = calloc((size_t)blocks, sizeof(*bd));
	br = calloc((size_t)blocks, sizeof(*br));
	if (!bh || !bd || !br)
		exit(2);
	for (long b = -2; b < 2 * blocks; b++) {
		/* Blocks 2k and 2k+1: one of each, in turns (HD DH HD ...). */
		int real = (b & 1) ^ ((b >> 1) & 1);

		for (int i = 0; i < BATCH; i++) {
			CUdeviceptr p;
			uint64_t t0 = now_ns();

			if (real) {
				CK(ra(&p, SMALL));
				CK(rf(p));
			} else {
				CK(cuMemAlloc(&p, SMALL));
				CK(cuMemFree(p));
			}
			t[i] = (double)(now_ns() - t0);
		}
		if (b < 0)
			continue;	/* warm-up blocks */
		qsort(t, BATCH, sizeof(t[0]), cmp_double);
		(real ? bd : bh)[b / 2] = t[BATCH / 2];
	}
	for (long b = 0; b < blocks; b++)
		br[b] = bh[b] / bd[b];
	qsort(bh, (size_t)blocks, sizeof(*bh), cmp_double);
	qsort(bd, (size_t)blocks, sizeof(*bd), cmp_double);
	qsort(br, (size_t)blocks, sizeof(*br), cmp_double);
	printf("R churn.inproc.blocks %ld\nR churn.inproc.driver.p50_us %.3f\n"
	       "R churn.inproc.hooked.p50_us %.3f\nR churn.inproc.ratio %.4f\n",
	       blocks, pct(bd, (size_t)blocks, 50) / 1e3,
	       pct(bh, (size_t)blocks, 50) / 1e3, pct(br, (size_t)blocks, 50));
	free(bh);
	free(bd);
	free(br);
}

/*
 * churn: the 4 KiB pair under a live set, as allocators that keep many
 * small buffers see it (GH_BENCH_LIVE's first count live 4 KiB
 * allocations, default 1000).  Against the CUDA double (build/fake),
 * whose calls cost little, the hooked minus the native figure is the
 * shim's own cost per pair.
 */
static int mode_churn(void)
{
	const char *ls = getenv("GH_BENCH_LIVE");
	long n = env_long("GH_BENCH_N", 2000);
	long warm = env_long("GH_BENCH_WARMUP", 200);
	long live = 1000, threads;
	CUdeviceptr *keep;
	double *ta, *tf, *tp;

	if (ls && *ls)
		parse_list(ls, &live, 1);
	if (n < 1)
		n = 1;
	if (warm < 0)
		warm = 0;
	setup(0);
	threads = env_long("GH_BENCH_CHURN_THREADS", 1);
	if (threads > MAX_THREADS)
		threads = MAX_THREADS;
	if (threads > 1)
		return mode_churn_mt(threads, n, warm, live);
	keep = calloc((size_t)live, sizeof(*keep));
	ta = calloc((size_t)n, sizeof(*ta));
	tf = calloc((size_t)n, sizeof(*tf));
	tp = calloc((size_t)n, sizeof(*tp));
	if (!keep || !ta || !tf || !tp)
		return 1;
	for (long i = 0; i < live; i++)
		CK(cuMemAlloc(&keep[i], SMALL));
	printf("R churn.n %ld\nR churn.live %ld\nR churn.size %llu\n", n, live,
	       SMALL);
	time_cu_pairs("churn.cu", SMALL, n, warm, ta, tf, tp);
	if (have_gh)
		churn_inproc(n);
	report_gh_stats("gh");
	for (long i = 0; i < live; i++)
		CK(cuMemFree(keep[i]));
	free(keep);
	free(ta);
	free(tf);
	free(tp);
	return 0;
}

/*
 * churn with GH_BENCH_CHURN_THREADS=T (> 1): T threads, each with the
 * primary context current and its own live set (the first count of
 * GH_BENCH_LIVE divided among them), wait on a barrier and run their
 * GH_BENCH_N timed pairs at once (after the warm-up, also at once).
 * Reported: the percentiles of every pair of every thread, and pairs/s
 * over the wall time from the first thread's start to the last one's end.
 */
struct mt_churn {
	pthread_barrier_t *bar;
	long n, warm, live;
	double *tp;
	uint64_t t_start, t_end;
};

static void *mt_churn_thread(void *arg)
{
	struct mt_churn *m = arg;
	CUdeviceptr *keep = calloc((size_t)m->live + 1, sizeof(*keep));

	if (!keep)
		exit(2);
	CK(cuCtxSetCurrent(ctx));
	for (long i = 0; i < m->live; i++)
		CK(cuMemAlloc(&keep[i], SMALL));
	pthread_barrier_wait(m->bar);
	for (long i = -m->warm; i < m->n; i++) {
		CUdeviceptr p;
		uint64_t t0 = now_ns();

		CK(cuMemAlloc(&p, SMALL));
		CK(cuMemFree(p));
		if (i >= 0)
			m->tp[i] = (double)(now_ns() - t0);
		if (i == -1) {
			pthread_barrier_wait(m->bar);	/* warm-up done */
			m->t_start = now_ns();
		}
	}
	m->t_end = now_ns();
	pthread_barrier_wait(m->bar);		/* keep live sets until all end */
	for (long i = 0; i < m->live; i++)
		CK(cuMemFree(keep[i]));
	free(keep);
	return NULL;
}

static int mode_churn_mt(long threads, long n, long warm, long live)
{
	pthread_t th[MAX_THREADS];
	struct mt_churn m[MAX_THREADS];
	pthread_barrier_t bar;
	double *all = calloc((size_t)(threads * n), sizeof(*all));
	uint64_t t0 = 0, t1 = 0;

	if (!all || pthread_barrier_init(&bar, NULL, (unsigned)threads + 1))
		return 1;
	for (long t = 0; t < threads; t++) {
		m[t] = (struct mt_churn){ .bar = &bar, .n = n,
			.warm = warm > 0 ? warm : 1, .live = live / threads,
			.tp = all + t * n };
		if (pthread_create(&th[t], NULL, mt_churn_thread, &m[t]))
			return 1;
	}
	pthread_barrier_wait(&bar);		/* live sets made */
	pthread_barrier_wait(&bar);		/* warm-up done: timed from here */
	pthread_barrier_wait(&bar);		/* every thread ended */
	for (long t = 0; t < threads; t++) {
		pthread_join(th[t], NULL);
		if (!t || m[t].t_start < t0)
			t0 = m[t].t_start;
		if (m[t].t_end > t1)
			t1 = m[t].t_end;
	}
	printf("R churn.n %ld\nR churn.live %ld\nR churn.size %llu\n"
	       "R churn.threads %ld\n", n, live, SMALL, threads);
	printf("R churn.mt.pairs_per_s %.0f\n",
	       (double)(threads * n) / ((double)(t1 - t0) / 1e9));
	summarize("churn.mt.pair", all, (size_t)(threads * n));
	report_rusage("churn.mt");
	report_gh_stats("gh");
	free(all);
	pthread_barrier_destroy(&bar);
	return 0;
}

/*
 * rchurn: the program.  T threads with the primary context
 * current wait on a barrier, then each runs n pairs whose size is drawn
 * uniformly from 1 B .. 8 MiB and whose API (driver or runtime) is a
 * coin toss, from its own seeded generator (the same sequence in every
 * run).  Reported: wall time from the first start to the last end,
 * pairs/s, and the p50/p99 of every pair.
 */
struct rchurn {
	pthread_barrier_t *bar;
	long n, warm;
	uint64_t seed;
	double *tp;
	uint64_t t_start, t_end;
};

static void *rchurn_thread(void *arg)
{
	struct rchurn *m = arg;
	uint64_t s = m->seed;

	CK(cuCtxSetCurrent(ctx));
	for (long i = -m->warm; i < m->n; i++) {
		uint64_t r = xs(&s);
		size_t size = (size_t)(r % (8 * MiB)) + 1;
		uint64_t t0;

		if (i == 0) {
			pthread_barrier_wait(m->bar);	/* warm-up done */
			m->t_start = now_ns();
		}
		t0 = now_ns();
		if (r >> 63) {
			CUdeviceptr p;

			CK(cuMemAlloc(&p, size));
			CK(cuMemFree(p));
		} else {
			void *p;

			CKRT(cudaMalloc(&p, size));
			CKRT(cudaFree(p));
		}
		if (i >= 0)
			m->tp[i] = (double)(now_ns() - t0);
	}
	m->t_end = now_ns();
	return NULL;
}

static int mode_rchurn(void)
{
	long threads = env_long("GH_BENCH_RCHURN_THREADS", 16);
	long n = env_long("GH_BENCH_RCHURN_N", 1000);
	long warm = env_long("GH_BENCH_RCHURN_WARMUP", 50);
	pthread_t th[MAX_THREADS];
	struct rchurn m[MAX_THREADS];
	pthread_barrier_t bar;
	double *all;
	uint64_t t0 = 0, t1 = 0;

	if (threads < 1 || threads > MAX_THREADS || n < 1 || warm < 1)
		return 2;
	all = calloc((size_t)(threads * n), sizeof(*all));
	setup(1);
	if (!all || pthread_barrier_init(&bar, NULL, (unsigned)threads))
		return 1;
	for (long t = 0; t < threads; t++) {
		m[t] = (struct rchurn){ .bar = &bar, .n = n, .warm = warm,
			.seed = 0x9e3779b97f4a7c15ull * (uint64_t)(t + 1),
			.tp = all + t * n };
		if (pthread_create(&th[t], NULL, rchurn_thread, &m[t]))
			return 1;
	}
	for (long t = 0; t < threads; t++) {
		pthread_join(th[t], NULL);
		if (!t || m[t].t_start < t0)
			t0 = m[t].t_start;
		if (m[t].t_end > t1)
			t1 = m[t].t_end;
	}
	printf("R rchurn.n %ld\nR rchurn.threads %ld\n", n, threads);
	printf("R rchurn.wall_s %.4f\nR rchurn.pairs_per_s %.0f\n",
	       (double)(t1 - t0) / 1e9,
	       (double)(threads * n) / ((double)(t1 - t0) / 1e9));
	summarize("rchurn.pair", all, (size_t)(threads * n));
	report_rusage("rchurn");
	report_gh_stats("gh");
	free(all);
	pthread_barrier_destroy(&bar);
	return 0;
}

/* ---- tagcheck ---- */

struct calls_out {
	uint64_t acc;
	uint64_t bad;
};

/*
 * n calls of one kind on a[(i0 + j) & mask], j < n (mask 0: one hot
 * pointer).  The switch is outside the loops so that each loop is just
 * the call.
 */
static void run_calls(enum kind k, const CUdeviceptr *a, size_t i0,
		      size_t mask, int n, struct calls_out *o)
{
	uint64_t acc = 0, bad = 0;

	switch (k) {
	case K_DRV:
		for (int j = 0; j < n; j++) {
			unsigned long long id = 0;
			CUresult rc = cuPointerGetAttribute(&id,
				CU_POINTER_ATTRIBUTE_BUFFER_ID,
				a[(i0 + (size_t)j) & mask]);

			acc += id;
			bad += rc != CUDA_SUCCESS;
		}
		break;
	case K_DRV3:
		for (int j = 0; j < n; j++) {
			static CUpointer_attribute at[3] = {
				CU_POINTER_ATTRIBUTE_BUFFER_ID,
				CU_POINTER_ATTRIBUTE_CONTEXT,
				CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
			};
			unsigned long long id = 0;
			CUcontext c = NULL;
			int ord = -1;
			void *data[3] = { &id, &c, &ord };
			CUresult rc = cuPointerGetAttributes(3, at, data,
				a[(i0 + (size_t)j) & mask]);

			acc += id + (uintptr_t)c + (uint64_t)ord;
			bad += rc != CUDA_SUCCESS;
		}
		break;
	case K_GH:
		for (int j = 0; j < n; j++) {
			struct gdrhook_range r;
			int rc;

			r.gen = 0;
			rc = gh.lookup((const void *)(uintptr_t)
				       a[(i0 + (size_t)j) & mask], 8, &r);

			acc += r.gen;
			bad += rc != 0;
		}
		break;
	}
	o->acc += acc;
	o->bad += bad;
}

static void latency(const char *key, enum kind k, const CUdeviceptr *a,
		    size_t mask, size_t nbatch)
{
	struct calls_out o = { 0, 0 };
	double *s = calloc(nbatch, sizeof(*s)), sum = 0;

	if (!s)
		exit(1);
	for (size_t b = 0; b < nbatch / 4; b++)
		run_calls(k, a, b * BATCH, mask, BATCH, &o);
	for (size_t b = 0; b < nbatch; b++) {
		uint64_t t0 = now_ns();
		double d;

		run_calls(k, a, b * BATCH, mask, BATCH, &o);
		d = (double)(now_ns() - t0) - timer_ns;
		s[b] = (d < 0 ? 0 : d) / BATCH;
		sum += s[b];
	}
	qsort(s, nbatch, sizeof(s[0]), cmp_double);
	printf("R %s.p50_ns %.1f\nR %s.p99_ns %.1f\nR %s.mean_ns %.1f\n",
	       key, pct(s, nbatch, 50), key, pct(s, nbatch, 99),
	       key, sum / (double)nbatch);
	if (o.bad)
		printf("R %s.failed_calls %llu\n", key,
		       (unsigned long long)o.bad);
	sink += o.acc;
	free(s);
}

struct tp_arg {
	enum kind k;
	const CUdeviceptr *a;
	size_t start, mask;
	int cpu;
	pthread_barrier_t *bar;
	volatile int *stop;
	/* out */
	uint64_t calls, ns;
	struct calls_out o;
} __attribute__((aligned(64)));

static void *tp_thread(void *p)
{
	struct tp_arg *t = p;
	size_t i = t->start;
	uint64_t calls = 0, t0;

	if (t->cpu >= 0)
		pin_cpu(t->cpu);
	if (t->k != K_GH)
		cuCtxSetCurrent(ctx);
	pthread_barrier_wait(t->bar);
	t0 = now_ns();
	while (!__atomic_load_n(t->stop, __ATOMIC_RELAXED)) {
		run_calls(t->k, t->a, i, t->mask, BATCH, &t->o);
		i += BATCH;
		calls += BATCH;
	}
	t->ns = now_ns() - t0;
	t->calls = calls;
	return NULL;
}

static int cpus[MAX_THREADS];
static int ncpus;

static void throughput(const char *key, enum kind k, const CUdeviceptr *a,
		       int nthr, double secs)
{
	static struct tp_arg t[MAX_THREADS];
	pthread_t th[MAX_THREADS];
	pthread_barrier_t bar;
	volatile int stop = 0;
	double rate = 0;
	uint64_t bad = 0;

	pthread_barrier_init(&bar, NULL, (unsigned)nthr + 1);
	for (int i = 0; i < nthr; i++) {
		memset(&t[i], 0, sizeof(t[i]));
		t[i].k = k;
		t[i].a = a;
		t[i].mask = NADDR - 1;
		t[i].start = (size_t)i * (NADDR / (size_t)nthr);
		t[i].cpu = ncpus ? cpus[i % ncpus] : -1;
		t[i].bar = &bar;
		t[i].stop = &stop;
		if (pthread_create(&th[i], NULL, tp_thread, &t[i])) {
			fprintf(stderr, "bench_driver: pthread_create\n");
			exit(1);
		}
	}
	pthread_barrier_wait(&bar);
	usleep((useconds_t)(secs * 1e6));
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < nthr; i++) {
		pthread_join(th[i], NULL);
		if (t[i].ns)
			rate += (double)t[i].calls * 1e9 / (double)t[i].ns;
		bad += t[i].o.bad;
		sink += t[i].o.acc;
	}
	pthread_barrier_destroy(&bar);
	printf("R %s.T%d.calls_per_s %.0f\n", key, nthr, rate);
	if (bad)
		printf("R %s.T%d.failed_calls %llu\n", key, nthr,
		       (unsigned long long)bad);
	fflush(stdout);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng(void)
{
	/* xorshift64* */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dull;
}

/* Both must answer for every address of the table, and gdrhook must name
 * the allocation the address was drawn from. */
static void validate(long live, const CUdeviceptr *a, const uint32_t *idx,
		     const CUdeviceptr *base)
{
	size_t drv_bad = 0, gh_bad = 0, gh_wrong = 0;
	size_t step = NADDR / 4096;

	for (size_t i = 0; i < NADDR; i += step) {
		unsigned long long id;

		if (cuPointerGetAttribute(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID,
					  a[i]) != CUDA_SUCCESS)
			drv_bad++;
	}
	if (drv_bad)
		printf("R tag.%ld.drv.check_failed %zu\n", live, drv_bad);
	if (!have_gh)
		return;
	for (size_t i = 0; i < NADDR; i++) {
		struct gdrhook_range r;
		int rc = gh.lookup((const void *)(uintptr_t)a[i], 8, &r);

		if (rc != 0)
			gh_bad++;
		else if (r.base != base[idx[i]] || r.size < SMALL)
			gh_wrong++;
	}
	if (gh_bad || gh_wrong) {
		struct gdrhook_range r;

		printf("R tag.%ld.gh.check_failed %zu\n"
		       "R tag.%ld.gh.check_wrong %zu\n",
		       live, gh_bad, live, gh_wrong);
		printf("# gdrhook_lookup(first address) = %d, trusted %d\n",
		       gh.lookup((const void *)(uintptr_t)a[0], 8, &r),
		       gh.trusted());
	}
}

static int mode_tagcheck(int argc, char **argv)
{
	long lv[16], th[16];
	int nl, nt, quick = (int)env_long("GH_BENCH_QUICK", 0);
	double secs = env_double("GH_BENCH_SECS", 0.5);
	const char *ls = argc > 2 ? argv[2] : getenv("GH_BENCH_LIVE");
	const char *ts = getenv("GH_BENCH_THREADS");
	size_t nbatch = NADDR / BATCH / (quick ? 8 : 1);
	size_t freeb = 0, totalb = 0;
	long maxlive, maxl = 1, have = 0;
	CUdeviceptr *base, *a;
	uint32_t *idx;
	uint64_t talloc = 0, tfree;

	nl = parse_list(ls && *ls ? ls : "1000,20000,100000,200000", lv, 16);
	nt = parse_list(ts && *ts ? ts : "1,2,4,8,16", th, 16);
	if (nl < 1) {
		fprintf(stderr, "bench_driver: no live counts\n");
		return 2;
	}
	setup(0);

	ncpus = allowed_cpus(cpus, MAX_THREADS);
	printf("R cpus %d\n", ncpus);

	CK(cuMemGetInfo(&freeb, &totalb));
	maxlive = (long)(freeb / 4 / SMALL);
	for (int i = 0; i < nl; i++)
		if (lv[i] > maxlive) {
			printf("# %ld live allocations do not fit; capped to %ld\n",
			       lv[i], maxlive);
			lv[i] = maxlive;
		}
	for (int i = 0; i < nl; i++)
		if (lv[i] > maxl)
			maxl = lv[i];
	base = calloc((size_t)maxl, sizeof(*base));
	a = calloc(NADDR, sizeof(*a));
	idx = calloc(NADDR, sizeof(*idx));
	if (!base || !a || !idx)
		return 1;

	for (int li = 0; li < nl; li++) {
		long live = lv[li];
		char key[64];

		if (live < have) {
			printf("# live counts must ascend; %ld skipped\n", live);
			continue;
		}
		if (live < 1)
			continue;
		while (have < live) {
			uint64_t t0 = now_ns();

			CK(cuMemAlloc(&base[have], SMALL));
			talloc += now_ns() - t0;
			have++;
		}
		printf("R tag.%ld.alloc_us %.3f\n", live,
		       (double)talloc / 1e3 / (double)have);
		for (size_t i = 0; i < NADDR; i++) {
			idx[i] = (uint32_t)(rng() % (uint64_t)live);
			a[i] = base[idx[i]] + (rng() % (SMALL / 8)) * 8;
		}
		validate(live, a, idx, base);

		calibrate_timer();
		for (int k = K_DRV; k <= K_GH; k++) {
			if (k == K_GH && !have_gh)
				continue;
			snprintf(key, sizeof(key), "tag.%ld.%s_hot", live,
				 kind_name[k]);
			latency(key, (enum kind)k, a, 0, nbatch);
			snprintf(key, sizeof(key), "tag.%ld.%s_rand", live,
				 kind_name[k]);
			latency(key, (enum kind)k, a, NADDR - 1, nbatch);
			fflush(stdout);
		}
		for (int m = 0; m < 2; m++) {
			enum kind k = m ? K_GH : K_DRV;

			if (k == K_GH && !have_gh)
				continue;
			snprintf(key, sizeof(key), "tag.%ld.%s_mt", live,
				 kind_name[k]);
			for (int i = 0; i < nt; i++)
				throughput(key, k, a,
					   th[i] > MAX_THREADS ? MAX_THREADS :
					   (int)th[i], secs);
		}
	}
	report_gh_stats("gh");
	tfree = now_ns();
	for (long i = 0; i < have; i++)
		CK(cuMemFree(base[i]));
	if (have)
		printf("R tag.free_us %.3f\n",
		       (double)(now_ns() - tfree) / 1e3 / (double)have);
	free(base);
	free(a);
	free(idx);
	return 0;
}

int main(int argc, char **argv)
{
	int rc;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 2) {
		fprintf(stderr,
			"usage: %s info | alloc | churn | rchurn | tagcheck [L1,L2,...]\n",
			argv[0]);
		return 2;
	}
	if (!strcmp(argv[1], "info"))
		rc = mode_info();
	else if (!strcmp(argv[1], "alloc"))
		rc = mode_alloc();
	else if (!strcmp(argv[1], "churn"))
		rc = mode_churn();
	else if (!strcmp(argv[1], "rchurn"))
		rc = mode_rchurn();
	else if (!strcmp(argv[1], "tagcheck"))
		rc = mode_tagcheck(argc, argv);
	else {
		fprintf(stderr, "bench_driver: unknown mode %s\n", argv[1]);
		return 2;
	}
	return rc;
}
