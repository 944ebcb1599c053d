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

static inline uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static CUpointer_attribute at3[3] = {
	CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_BUFFER_ID,
	CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
};

/* One call of kind k on a random pointer; returns something to sink. */
static inline uint64_t one(int k, uint64_t *s)
{
	uint64_t r = rnd(s);
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
		cuPointerGetAttribute(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID, p);
		return id;
	case 1:
		cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p);
		return mt;
	case 2:
		cuPointerGetAttributes(3, at3, d3, p);
		return id + mt;
	case 3:
		cuMemGetAddressRange(&b, &sz, p);
		return b + sz;
	case 4:
		rt_attrs(&pa, (void *)(uintptr_t)p);
		return (uint64_t)pa.type;
	default:
		if (r & (1ull << 40))
			p = (CUdeviceptr)(uintptr_t)hptr[(r >> 20) % nlive];
		cuPointerGetAttributes(3, at3, d3, p);
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
			sink += one(w->kind, &s);
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
		size_t sz = 256 + rnd(&s) % 1793;
		CUdeviceptr d;

		if (cuMemAlloc(&d, sz))
			return -1;
		dptr[i] = d + rnd(&s) % sz;
		hptr[i] = malloc(64);
	}
	nlive = n;
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
	return 0;
}
