// SPDX-License-Identifier: MIT
/*
 * Pointer-query cost, gdrhook vs the driver, side by side in one run.
 *
 * Run it under LD_PRELOAD=libgdrhook.so: it measures the shim's answers
 * itself and the driver's in a copy of itself started without the
 * preload (same binary, same allocations, same pointer sequence), then
 * prints one table.  Per call kind, random pointers among L live device
 * allocations (GH_QB_LIVE, default 1000,100000,1000000):
 *
 *   attr BUFFER_ID      cuPointerGetAttribute (the libfabric tag check)
 *   attr MEMORY_TYPE    cuPointerGetAttribute
 *   attrs x3            cuPointerGetAttributes MEMORY_TYPE, BUFFER_ID,
 *                       DEVICE_ORDINAL
 *   address range       cuMemGetAddressRange
 *   cudaPointerGetAttr  the runtime call
 *   classify 50/50      the Open MPI-like loop: attrs x3 on a 50/50 mix
 *                       of host (malloc) and device pointers
 *
 * and the BUFFER_ID check and the classification loop on 1 and
 * GH_QB_THREADS (default 16) threads at once (total calls per second,
 * and the scaling over one thread).  GH_QB_SECS (default 0.3) per figure.
 *
 * Then the same calls paired in this process: through the driver's own
 * entry points (read from libcuda's symbol table, so the shim cannot
 * stand in) and through the shim, in GH_QB_ROUNDS (default 9) pairs of
 * blocks of GH_QB_BLOCK_MS (default 20) each, one of each in turns: the
 * median of each and the spread of the pairs' speed-ups.  A pair shares
 * whatever the process and the machine did at that moment (frequency,
 * other tenants, the scheduler), which separate processes do not.  Not
 * the runtime call: the runtime's own entry point reaches the driver
 * through the shim's wrappers.
 *
 * bench_queries --count K N: N calls of kind K (0-5, in the order above)
 * among the first GH_QB_LIVE count, after 1000 more, and nothing else
 * measured: for instruction counts, e.g. under
 * valgrind --tool=callgrind, count_calls()'s cost / N.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cuda.h>
#include <cuda_runtime_api.h>

#include "drvsym.h"
#include "bench_util.h"

#define MAXLIVE		8
#define NKIND		6

static const char *const kind_name[NKIND] = {
	"attr BUFFER_ID", "attr MEMORY_TYPE", "attrs x3", "address range",
	"cudaPointerGetAttr", "classify 50/50",
};

static CUcontext ctx;
static CUdeviceptr *dptr;	/* random interior pointers, one per alloc */
static char **hptr;		/* host pointers for the mix */
static size_t nlive;
static double secs = 0.3;
static cudaError_t (*rt_attrs)(struct cudaPointerAttributes *, const void *);

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

typedef CUresult (*attr_fn)(void *, CUpointer_attribute, CUdeviceptr);
typedef CUresult (*attrs_fn)(unsigned int, CUpointer_attribute *, void **,
			     CUdeviceptr);
typedef CUresult (*range_fn)(CUdeviceptr *, size_t *, CUdeviceptr);

/* The entry points a figure goes through. */
struct calls {
	attr_fn attr;
	attrs_fn attrs;
	range_fn range;
};

/* This program's: the driver, or the shim's wrappers when preloaded. */
static const struct calls linked = {
	cuPointerGetAttribute, cuPointerGetAttributes, cuMemGetAddressRange,
};

static CUpointer_attribute at3[3] = {
	CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_BUFFER_ID,
	CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
};

/* One call of kind k on a random pointer; returns something to sink. */
static inline uint64_t one(int k, const struct calls *c, uint64_t *s)
{
	uint64_t r = xs(s);
	CUdeviceptr p = dptr[r % nlive];
	unsigned long long id = 0;
	unsigned int mt = 0;
	int ord = 0;
	void *d3[3] = { &mt, &id, &ord };
	CUdeviceptr b = 0;
	size_t sz = 0;
	struct cudaPointerAttributes pa;

	switch (k) {
	case 0:
		c->attr(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID, p);
		return id;
	case 1:
		c->attr(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p);
		return mt;
	case 2:
		c->attrs(3, at3, d3, p);
		return id + mt;
	case 3:
		c->range(&b, &sz, p);
		return b + sz;
	case 4:
		rt_attrs(&pa, (void *)(uintptr_t)p);
		return (uint64_t)pa.type;
	default:
		if (r & (1ull << 40))
			p = (CUdeviceptr)(uintptr_t)hptr[(r >> 20) % nlive];
		c->attrs(3, at3, d3, p);
		return id + mt + (unsigned int)ord;
	}
}

struct worker {
	pthread_t t;
	int kind;
	uint64_t seed;
	uint64_t calls;
	uint64_t sink;
	volatile int *stop;
};

static void *work(void *arg)
{
	struct worker *w = arg;
	uint64_t s = w->seed, n = 0, sink = 0;

	cuCtxSetCurrent(ctx);
	while (!*w->stop) {
		for (int i = 0; i < 256; i++)
			sink += one(w->kind, &linked, &s);
		n += 256;
	}
	w->calls = n;
	w->sink = sink;
	return NULL;
}

/* Total calls per second of kind k on nthreads threads. */
static double rate(int k, int nthreads)
{
	struct worker w[64];
	volatile int stop = 0;
	uint64_t total = 0;
	double t0, t1;
	int i;

	if (k == 4 && !rt_attrs)
		return 0;
	for (i = 0; i < nthreads; i++) {
		w[i].kind = k;
		w[i].seed = 0x9e3779b97f4a7c15ull * (i + 1);
		w[i].stop = &stop;
	}
	t0 = now();
	for (i = 0; i < nthreads; i++)
		pthread_create(&w[i].t, NULL, work, &w[i]);
	while (now() - t0 < secs)
		usleep(1000);
	stop = 1;
	for (i = 0; i < nthreads; i++) {
		pthread_join(w[i].t, NULL);
		total += w[i].calls;
	}
	t1 = now();
	return total / (t1 - t0);
}

static int setup(size_t n)
{
	uint64_t s = 12345;

	dptr = calloc(n, sizeof(*dptr));
	hptr = calloc(n, sizeof(*hptr));
	if (!dptr || !hptr)
		return -1;
	for (size_t i = 0; i < n; i++) {
		size_t sz = 256 + xs(&s) % 1793;
		CUdeviceptr d;

		if (cuMemAlloc(&d, sz))
			return -1;
		dptr[i] = d + xs(&s) % sz;
		hptr[i] = malloc(64);
	}
	nlive = n;
	return 0;
}

#define MAXFIG		64

/* The paired figures (shim process only). */
static struct calls own;	/* the driver's own entry points */
static int rounds = 9;
static double block_s = 0.02;
static struct ipfig {
	size_t live;
	int kind;
	double drv_ns, shim_ns, r10, r50, r90;
} ipf[MAXFIG];
static int nipf;

/* ns per call of kind k over one block through @c, from seed @seed. */
static double block_ns(int k, const struct calls *c, uint64_t seed,
		       uint64_t *sink)
{
	uint64_t s = seed, n = 0;
	double t0 = now(), t;

	do {
		for (int i = 0; i < 64; i++)
			*sink += one(k, c, &s);
		n += 64;
		t = now() - t0;
	} while (t < block_s);
	return t * 1e9 / (double)n;
}

/*
 * Kind k through the driver's own entry points and through the shim in
 * alternating pairs of blocks (DH HD DH ...), each block on pointers of
 * its own: neither warms the other's lines.
 */
static void paired(int k)
{
	double d[256], h[256], r[256];
	uint64_t sink = 0;
	int n = rounds;
	struct ipfig *f;

	if (nipf == MAXFIG)
		return;
	for (int b = -1; b < n; b++) {
		uint64_t seed = 0x9e3779b97f4a7c15ull * (uint64_t)(2 * b + 5);
		double x, y;

		if (b & 1) {
			y = block_ns(k, &linked, seed + 1, &sink);
			x = block_ns(k, &own, seed, &sink);
		} else {
			x = block_ns(k, &own, seed, &sink);
			y = block_ns(k, &linked, seed + 1, &sink);
		}
		if (b < 0)
			continue;	/* warm-up pair */
		d[b] = x;
		h[b] = y;
		r[b] = x / y;
	}
	qsort(d, n, sizeof(d[0]), cmp_double);
	qsort(h, n, sizeof(h[0]), cmp_double);
	qsort(r, n, sizeof(r[0]), cmp_double);
	f = &ipf[nipf++];
	f->live = nlive;
	f->kind = k;
	f->drv_ns = rank(d, n, 0.5);
	f->shim_ns = rank(h, n, 0.5);
	f->r10 = rank(r, n, 0.1);
	f->r50 = rank(r, n, 0.5);
	f->r90 = rank(r, n, 0.9);
	if (sink == 42)
		fputc(' ', stderr);	/* keeps the calls */
}

/* N calls of kind k: the one function to read under callgrind. */
static __attribute__((noinline)) uint64_t count_calls(int k, long n)
{
	uint64_t s = 7, sink = 0;

	for (long i = 0; i < n; i++)
		sink += one(k, &linked, &s);
	return sink;
}

/* --count K N */
static int count_mode(const char *ks, const char *ns, size_t live)
{
	int k = atoi(ks);
	long n = atol(ns);

	if (k < 0 || k >= NKIND || n < 1) {
		fprintf(stderr, "bench_queries: --count K N: K 0-%d, N >= 1\n",
			NKIND - 1);
		return 2;
	}
	if (k == 4 && !rt_attrs) {
		fprintf(stderr, "bench_queries: no cudaPointerGetAttributes\n");
		return 2;
	}
	if (setup(live))
		return 1;
	count_calls(k, 1000);	/* the first answers may come from the driver */
	printf("%llu\n", (unsigned long long)count_calls(k, n));
	return 0;
}

/* Lines "L k threads calls_per_s" for every figure, on stdout. */
static int measure(size_t *live, int nl, int nthreads)
{
	size_t have = 0;

	for (int li = 0; li < nl; li++) {
		/* Grow the live set: earlier allocations stay live. */
		CUdeviceptr *old = dptr;
		char **oldh = hptr;

		dptr = NULL;
		if (setup(live[li] - have))
			return -1;
		if (old) {
			CUdeviceptr *all = calloc(live[li], sizeof(*all));
			char **allh = calloc(live[li], sizeof(*allh));

			memcpy(all, old, have * sizeof(*all));
			memcpy(all + have, dptr, (live[li] - have) * sizeof(*all));
			memcpy(allh, oldh, have * sizeof(*allh));
			memcpy(allh + have, hptr, (live[li] - have) * sizeof(*allh));
			free(dptr);
			free(hptr);
			free(old);
			free(oldh);
			dptr = all;
			hptr = allh;
		}
		have = nlive = live[li];
		for (int k = 0; k < NKIND; k++)
			printf("%zu %d 1 %.0f\n", nlive, k, rate(k, 1));
		if (nthreads > 1) {
			printf("%zu 0 %d %.0f\n", nlive, nthreads, rate(0, nthreads));
			printf("%zu 5 %d %.0f\n", nlive, nthreads, rate(5, nthreads));
		}
		for (int k = 0; own.attr && k < NKIND; k++)
			if (k != 4)
				paired(k);
		fflush(stdout);
	}
	return 0;
}

struct fig {
	size_t live;
	int kind, threads;
	double rate;
};

static int parse(FILE *f, struct fig *v, int max)
{
	int n = 0;

	while (n < max && fscanf(f, "%zu %d %d %lf", &v[n].live, &v[n].kind,
				 &v[n].threads, &v[n].rate) == 4)
		n++;
	return n;
}

static double find(const struct fig *v, int n, size_t live, int k, int t)
{
	for (int i = 0; i < n; i++)
		if (v[i].live == live && v[i].kind == k && v[i].threads == t)
			return v[i].rate;
	return 0;
}

int main(int argc, char **argv)
{
	size_t live[MAXLIVE];
	int nl = 0, nthreads = 16, child = argc > 1 && !strcmp(argv[1], "--child");
	const char *e;
	char *list, *tok;
	static struct fig drv[256], shim[256];
	int nd, ns;

	if ((e = getenv("GH_QB_SECS")))
		secs = atof(e);
	if ((e = getenv("GH_QB_THREADS")))
		nthreads = atoi(e);
	if ((e = getenv("GH_QB_ROUNDS")))
		rounds = atoi(e);
	if ((e = getenv("GH_QB_BLOCK_MS")))
		block_s = atof(e) / 1e3;
	if (!(block_s > 0 && block_s <= 10)) {
		fprintf(stderr, "bench_queries: GH_QB_BLOCK_MS must be above 0 "
			"and at most 10000 (ms)\n");
		return 2;
	}
	if (rounds < 1 || rounds > 256) {
		fprintf(stderr, "bench_queries: GH_QB_ROUNDS must be 1-256\n");
		return 2;
	}
	if (nthreads > 64)
		nthreads = 64;
	list = strdup((e = getenv("GH_QB_LIVE")) ? e : "1000,100000,1000000");
	for (tok = strtok(list, ","); tok && nl < MAXLIVE; tok = strtok(NULL, ","))
		live[nl++] = strtoull(tok, NULL, 0);
	if (cuInit(0) || cuDevicePrimaryCtxRetain(&ctx, 0) ||
	    cuCtxSetCurrent(ctx)) {
		fprintf(stderr, "bench_queries: no CUDA device\n");
		return 77;
	}
	rt_attrs = (void *)dlsym(RTLD_DEFAULT, "cudaPointerGetAttributes");
	if (child)
		return measure(live, nl, nthreads) ? 1 : 0;
	if (argc > 1 && !strcmp(argv[1], "--count")) {
		if (argc != 4 || !nl)
			return count_mode("-1", "0", 0);
		return count_mode(argv[2], argv[3], live[0]);
	}

	if (!getenv("LD_PRELOAD") || !strstr(getenv("LD_PRELOAD"), "gdrhook")) {
		fprintf(stderr, "bench_queries: run me under LD_PRELOAD=libgdrhook.so\n");
		return 2;
	}
	{
		/* The driver's figures: this program without the preload. */
		char cmd[4096];
		FILE *f;

		snprintf(cmd, sizeof(cmd), "env -u LD_PRELOAD /proc/%d/exe --child",
			 (int)getpid());
		f = popen(cmd, "r");
		if (!f)
			return 1;
		nd = parse(f, drv, 256);
		if (pclose(f)) {
			fprintf(stderr, "bench_queries: driver run failed\n");
			return 1;
		}
	}
	own.attr = (attr_fn)driver_sym("cuPointerGetAttribute");
	own.attrs = (attrs_fn)driver_sym("cuPointerGetAttributes");
	own.range = (range_fn)driver_sym("cuMemGetAddressRange_v2");
	if (!own.attr || !own.attrs || !own.range ||
	    (void *)own.attr == (void *)linked.attr)
		own.attr = NULL;	/* no paired figures */
	{
		char *buf = NULL;
		size_t len = 0;
		FILE *m = open_memstream(&buf, &len), *saved = stdout;

		stdout = m;
		if (measure(live, nl, nthreads))
			return 1;
		stdout = saved;
		fclose(m);
		m = fmemopen(buf, len, "r");
		ns = parse(m, shim, 256);
		fclose(m);
	}
	printf("pointer queries, random pointers among L live allocations "
	       "(%.2f s per figure)\n", secs);
	printf("%-20s %9s %12s %12s %9s\n", "call", "live", "driver ns",
	       "gdrhook ns", "speedup");
	for (int li = 0; li < nl; li++)
		for (int k = 0; k < NKIND; k++) {
			double d = find(drv, nd, live[li], k, 1);
			double s = find(shim, ns, live[li], k, 1);

			if (!d || !s)
				continue;
			printf("%-20s %9zu %12.1f %12.1f %8.1fx\n", kind_name[k],
			       live[li], 1e9 / d, 1e9 / s, s / d);
		}
	if (nthreads > 1) {
		printf("\nthreads: total calls/s (scaling over 1 thread)\n");
		printf("%-20s %9s %7s %22s %22s %9s\n", "call", "live", "threads",
		       "driver Mcalls/s", "gdrhook Mcalls/s", "speedup");
		for (int li = 0; li < nl; li++)
			for (int k = 0; k < NKIND; k += 5) {
				double d1 = find(drv, nd, live[li], k, 1);
				double dn = find(drv, nd, live[li], k, nthreads);
				double s1 = find(shim, ns, live[li], k, 1);
				double sn = find(shim, ns, live[li], k, nthreads);

				if (!d1 || !s1 || !dn || !sn)
					continue;
				printf("%-20s %9zu %7d %12.2f (%5.2fx) %12.2f (%5.2fx) %8.1fx\n",
				       kind_name[k], live[li], nthreads, dn / 1e6,
				       dn / d1, sn / 1e6, sn / s1, sn / dn);
			}
	}
	if (!own.attr) {
		printf("\npaired: the driver's own entry points not found\n");
		return 0;
	}
	printf("\npaired in one process: %d pairs of %.0f ms blocks, the "
	       "driver's own entry points and the shim in turns\n", rounds,
	       block_s * 1e3);
	printf("%-20s %9s %12s %12s %9s %17s\n", "call", "live", "driver ns",
	       "gdrhook ns", "speedup", "pairs p10 .. p90");
	for (int i = 0; i < nipf; i++)
		printf("%-20s %9zu %12.1f %12.1f %8.1fx %7.1fx .. %5.1fx\n",
		       kind_name[ipf[i].kind], ipf[i].live, ipf[i].drv_ns,
		       ipf[i].shim_ns, ipf[i].r50, ipf[i].r10, ipf[i].r90);
	return 0;
}
