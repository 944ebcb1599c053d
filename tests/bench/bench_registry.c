/* SPDX-License-Identifier: MIT */
/*
 * Registry benchmark: prints figures, checks nothing.
 *
 *   bench_registry [seconds-per-thread-run]    (default 0.3)
 *   bench_registry writers [seconds-per-run]   only the writers' scaling
 *
 * "writers": 1..16 threads each insert and remove a 4 KiB range of its
 * own in a loop, for a fixed time; pairs per second of all threads, with
 * the threads' ranges in one granule 4 KiB apart (how cuMemAlloc places
 * 4 KiB allocations), one 2 MiB region (a granule each) or a 2 MiB region
 * each.  Threads above the CPU count oversubscribe.
 *
 * Allocations are laid out like a GPU allocator's: power-of-two sizes from
 * 4 KiB to 4 MiB (uniform over the 11 sizes), each aligned to min(size,
 * 2 MiB), packed upwards from a CUDA-like base with an occasional 2..32 MiB
 * hole.  Queries are random pointers inside random live allocations,
 * precomputed into an array so that generating them costs nothing.
 *
 * Single-thread timing method: the time stamp counter (rdtsc; elsewhere
 * clock_gettime) is read around batches of 32 lookups, and the TSC rate
 * is calibrated against CLOCK_MONOTONIC for 100 ms first.  The per-lookup
 * figure of a batch is (batch ticks - empty-batch ticks) / 32, where the
 * empty batch runs the same loop without the lookup (median of 20000).
 * p50/p99 are over 20000 batches.  Two kinds of batch:
 *   "indep":  the 32 lookups are independent, so the CPU may overlap
 *             their cache misses (cost per lookup in a loop: throughput);
 *   "chain":  each lookup's pointer depends on the previous result, so
 *             nothing overlaps (true latency of one lookup);
 *   "hot":    chained lookups of one pointer (all in L1);
 *   "floor":  not a lookup: a pointer chase of one cache line per step
 *             over one line per live allocation (the cost of one miss
 *             over that working set), so chain/floor counts the misses
 *             a lookup costs.  Chain and floor are timed in 5 alternating
 *             rounds and the row gives the medians (the ratio is the
 *             median of the rounds' ratios), with the share of the floor
 *             and of the whole process (mostly the registry) that the
 *             kernel put in transparent huge pages: without them a chase
 *             pays page walks too, and machines differ in granting them.
 * At 1 M live the chained lookups are also timed one size class at a
 * time, and the floor's chase over arrays of 1-64 MB shows what stays
 * cached for random reads in that run (these hosts share the last-level
 * cache with other tenants).
 * UCX's page table (ucs_pgtable_lookup, plus reading the region found, as
 * rcache does) runs on the same addresses in the same process when
 * libucs is available.  Multi-thread rows count all lookups done by N
 * threads in a fixed time; "1% churn" makes every 100th operation of each
 * thread a remove or re-insert of one of its own allocations (for UCX,
 * under a pthread rwlock, as rcache protects its page table).
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

#include "registry/registry.h"
#include "bench_util.h"

#ifdef GH_BENCH_HAVE_UCX
#include <ucs/datastruct/pgtable.h>
#endif

#define KiB (1ull << 10)
#define MiB (1ull << 20)
#define GiB (1ull << 30)
#define BATCH 32
#define NBATCH 20000
#define NQ (1u << 20)
#define FLOOR_ROUNDS 5

struct alloc {
#ifdef GH_BENCH_HAVE_UCX
	ucs_pgt_region_t region;	/* first: pgtable hands it back */
#endif
	uint64_t base, size, gen;
	int live;
};

static struct alloc *allocs;
static size_t nallocs;
static uint64_t *queries;
static double tsc_per_ns = 1.0;
static double run_seconds = 0.3;

static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static inline uint64_t ticks(void)
{
#if defined(__x86_64__) || defined(__i386__)
	_mm_lfence();
	return __rdtsc();
#else
	return now_ns();
#endif
}

static void calibrate(void)
{
	double t0 = now_ns(), t1;
	uint64_t c0 = ticks(), c1;

	do {
		t1 = now_ns();
	} while (t1 - t0 < 100e6);
	c1 = ticks();
	tsc_per_ns = (double)(c1 - c0) / (t1 - t0);
}

/* ------------------------------------------------------------------ */
/* UCX page table                                                      */

#ifdef GH_BENCH_HAVE_UCX
static ucs_pgtable_t ucx_pgt;
static pthread_rwlock_t ucx_lock = PTHREAD_RWLOCK_INITIALIZER;

static ucs_pgt_dir_t *ucx_dir_alloc(const ucs_pgtable_t *pgt)
{
	void *p = NULL;

	if (posix_memalign(&p, 64, sizeof(ucs_pgt_dir_t)))
		return NULL;
	return p;
}

static void ucx_dir_free(const ucs_pgtable_t *pgt, ucs_pgt_dir_t *dir)
{
	free(dir);
}

static int ucx_insert(struct alloc *a)
{
	a->region.start = a->base;
	a->region.end = a->base + a->size;
	return ucs_pgtable_insert(&ucx_pgt, &a->region) == UCS_OK ? 0 : -1;
}

static void ucx_remove(struct alloc *a)
{
	ucs_pgtable_remove(&ucx_pgt, &a->region);
}
#endif

/* ------------------------------------------------------------------ */
/* Workload                                                            */

/* 1: small buffers (256 B..2 KiB at 512-byte steps, as cudaMalloc packs
 * them, so dozens share a 64 KiB granule) instead of 4 KiB..4 MiB. */
static int layout_small;
#ifdef GH_BENCH_HAVE_UCX
static int ucx_built;		/* the live set is in UCX's page table */
#endif

/*
 * The queries: random pointers in random live allocations, of size
 * @size only when not 0 (there must be some).
 */
static void queries_fill(uint64_t size, uint64_t seed)
{
	for (size_t i = 0; i < NQ;) {
		struct alloc *a = &allocs[rng_next(&seed) % nallocs];

		if (size && a->size != size)
			continue;
		queries[i++] = a->base + rng_next(&seed) % a->size;
	}
}

static void build(size_t n, uint64_t seed)
{
	uint64_t cur = 0x7f0000000000ull;	/* where CUDA puts device VA */

	gh_registry_reset();
#ifdef GH_BENCH_HAVE_UCX
	for (size_t i = 0; i < nallocs && ucx_built; i++)
		if (allocs[i].live)
			ucx_remove(&allocs[i]);
	/* UCX's page table takes only page-aligned regions. */
	ucx_built = !layout_small;
#endif
	free(allocs);
	allocs = calloc(n, sizeof(*allocs));
	if (!allocs)
		abort();
	nallocs = n;
	for (size_t i = 0; i < n; i++) {
		struct alloc *a = &allocs[i];
		uint64_t size = 4 * KiB << (rng_next(&seed) % 11);
		uint64_t align = size < 2 * MiB ? size : 2 * MiB;
		struct gh_range r;

		if (layout_small) {
			size = 256 + rng_next(&seed) % 1793;
			align = 512;
		}

		if (rng_next(&seed) % (layout_small ? 2000 : 20) == 0)
			cur += (1 + rng_next(&seed) % 16) * 2 * MiB;
		cur = (cur + align - 1) & ~(align - 1);
		a->base = cur;
		a->size = size;
		cur += size;
		memset(&r, 0, sizeof(r));
		r.base = a->base;
		r.size = a->size;
		r.kind = 1;
		if (gh_registry_insert(&r, &a->gen))
			abort();
#ifdef GH_BENCH_HAVE_UCX
		if (ucx_built && ucx_insert(a))
			abort();
#endif
		a->live = 1;
	}
	queries_fill(0, seed);
}

/* ------------------------------------------------------------------ */
/* Single-thread latency                                               */

enum mode { M_INDEP, M_CHAIN, M_HOT };

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static uint64_t samples[NBATCH];
static volatile uint64_t sink;

/* Median ticks of a batch with everything but the lookup. */
static uint64_t empty_batch(void)
{
	uint64_t acc = 0;

	for (int b = 0; b < NBATCH; b++) {
		const uint64_t *q = &queries[(b * BATCH) % NQ];
		uint64_t t0 = ticks();

		for (int i = 0; i < BATCH; i++) {
			uint64_t p = q[i] + (acc >> 63);

			__asm__ volatile("" : "+r"(p));
			acc += p;
		}
		samples[b] = ticks() - t0;
	}
	sink = acc;
	qsort(samples, NBATCH, sizeof(samples[0]), cmp_u64);
	return samples[NBATCH / 2];
}

#define BATCH_LOOP(LOOKUP)						\
	do {								\
		uint64_t acc = 0, base = empty_batch();		\
		for (int b = 0; b < NBATCH; b++) {			\
			const uint64_t *q = &queries[(b * BATCH) % NQ];	\
			uint64_t t0, t1;				\
			t0 = ticks();					\
			for (int i = 0; i < BATCH; i++) {		\
				uint64_t p = mode == M_HOT ? q[0] : q[i]; \
				uint64_t v;				\
				if (mode != M_INDEP)			\
					p += acc >> 63;			\
				LOOKUP;					\
				acc += v;				\
			}						\
			t1 = ticks();					\
			samples[b] = t1 - t0 > base ? t1 - t0 - base : 0; \
		}							\
		sink = acc;						\
	} while (0)

static void pct(double *p50, double *p99)
{
	qsort(samples, NBATCH, sizeof(samples[0]), cmp_u64);
	*p50 = samples[NBATCH / 2] / tsc_per_ns / BATCH;
	*p99 = samples[NBATCH * 99 / 100] / tsc_per_ns / BATCH;
}

static void lat_gdrhook(enum mode mode, double *p50, double *p99)
{
	BATCH_LOOP({
		struct gh_range r;

		if (gh_registry_lookup(p, 1, &r))
			abort();
		v = r.gen + r.size;
	});
	pct(p50, p99);
}

/*
 * The floor: a pointer chase of one cache line per step (each line holds
 * the index of the next, a random cycle) over one line per live
 * allocation, in huge pages like the registry's, timed like the chained
 * lookups.  A lookup can do no better than one such miss.
 */
struct chase_line {
	uint64_t next;
	uint64_t pad[7];
};

static struct chase_line *floor_lines;
static size_t floor_n, floor_bytes;

/*
 * Huge-page share (0..1) of the mapping holding @p, or of the whole
 * process (NULL: mostly the registry), from smaps.
 */
static double thp_share(const void *p)
{
	FILE *f = fopen(p ? "/proc/self/smaps" : "/proc/self/smaps_rollup",
			"r");
	char line[256];
	unsigned long lo, hi, kib, size = 0, huge = 0;
	int in = 0;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) {
			in = !p || ((uintptr_t)p >= lo && (uintptr_t)p < hi);
			continue;
		}
		if (!in)
			continue;
		if (sscanf(line, "Rss: %lu kB", &kib) == 1)
			size = kib;
		else if (sscanf(line, "AnonHugePages: %lu kB", &kib) == 1)
			huge = kib;
	}
	fclose(f);
	return size ? (double)huge / size : 0;
}

/* The floor's chase for @n lines: a random cycle, in huge pages. */
static void floor_build(size_t n)
{
	uint64_t *perm, seed = 99;

	free(floor_lines);
	floor_n = n;
	floor_bytes = (n * sizeof(struct chase_line) + 2 * MiB - 1) &
		      ~(2 * MiB - 1);
	if (posix_memalign((void **)&floor_lines, 2 * MiB, floor_bytes))
		abort();
#ifdef MADV_HUGEPAGE
	madvise(floor_lines, floor_bytes, MADV_HUGEPAGE);
#endif
	perm = malloc(n * sizeof(*perm));
	if (!perm)
		abort();
	for (size_t i = 0; i < n; i++)
		perm[i] = i;
	for (size_t i = n - 1; i > 0; i--) {
		size_t j = rng_next(&seed) % (i + 1);
		uint64_t t = perm[i];

		perm[i] = perm[j];
		perm[j] = t;
	}
	for (size_t i = 0; i < n; i++)
		floor_lines[perm[i]].next = perm[(i + 1) % n];
	free(perm);
}

static void lat_floor(double *p50, double *p99)
{
	const struct chase_line *l = floor_lines;
	uint64_t cur = 0, base = empty_batch();

	for (int b = 0; b < NBATCH; b++) {
		uint64_t t0 = ticks(), t1;

		for (int i = 0; i < BATCH; i++)
			cur = l[cur].next;
		t1 = ticks();
		samples[b] = t1 - t0 > base ? t1 - t0 - base : 0;
	}
	sink = cur;
	pct(p50, p99);
}

static double median(double *v, int n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

#ifdef GH_BENCH_HAVE_UCX
static void lat_ucx(enum mode mode, double *p50, double *p99)
{
	BATCH_LOOP({
		ucs_pgt_region_t *rg = ucs_pgtable_lookup(&ucx_pgt, p);
		struct alloc *a = (struct alloc *)rg;

		if (!rg)
			abort();
		v = a->gen + a->size;
	});
	pct(p50, p99);
}
#endif

/* ------------------------------------------------------------------ */
/* Threads                                                             */

struct targ {
	int id, nthreads, churn, ucx;
	uint64_t ops;
	pthread_t th;
};

static volatile int go, stop;

static void churn_one(struct targ *t, uint64_t *seed)
{
	/* Allocations whose index is id mod nthreads belong to thread id. */
	size_t mine = (nallocs - t->id + t->nthreads - 1) / t->nthreads;
	struct alloc *a = &allocs[t->id + (rng_next(seed) % mine) * t->nthreads];
	struct gh_range r;

	if (!t->ucx) {
		if (a->live) {
			gh_registry_remove(a->base, NULL);
		} else {
			memset(&r, 0, sizeof(r));
			r.base = a->base;
			r.size = a->size;
			gh_registry_insert(&r, NULL);
		}
	}
#ifdef GH_BENCH_HAVE_UCX
	else {
		pthread_rwlock_wrlock(&ucx_lock);
		if (a->live)
			ucx_remove(a);
		else
			ucx_insert(a);
		pthread_rwlock_unlock(&ucx_lock);
	}
#endif
	a->live = !a->live;
}

static void *thread_main(void *arg)
{
	struct targ *t = arg;
	uint64_t seed = 1234 + t->id, i = (uint64_t)t->id * 7919, ops = 0;
	uint64_t acc = 0;

	while (!go)
		;
	while (!stop) {
		for (int k = 0; k < 100; k++, i++) {
			uint64_t p = queries[i & (NQ - 1)];

			if (!t->ucx) {
				struct gh_range r;

				if (!gh_registry_lookup(p, 1, &r))
					acc += r.gen;
			}
#ifdef GH_BENCH_HAVE_UCX
			else if (!t->churn) {
				ucs_pgt_region_t *rg =
					ucs_pgtable_lookup(&ucx_pgt, p);

				if (rg)
					acc += ((struct alloc *)rg)->gen;
			} else {
				ucs_pgt_region_t *rg;

				pthread_rwlock_rdlock(&ucx_lock);
				rg = ucs_pgtable_lookup(&ucx_pgt, p);
				if (rg)
					acc += ((struct alloc *)rg)->gen;
				pthread_rwlock_unlock(&ucx_lock);
			}
#endif
		}
		ops += 100;
		if (t->churn) {
			churn_one(t, &seed);
			ops++;
		}
	}
	t->ops = ops;
	sink = acc;
	return NULL;
}

static double run_threads(int n, int churn, int ucx)
{
	struct targ t[64];
	uint64_t total = 0;
	double t0, t1;

	go = 0;
	stop = 0;
	for (int i = 0; i < n; i++) {
		t[i] = (struct targ){ .id = i, .nthreads = n, .churn = churn,
				      .ucx = ucx };
		pthread_create(&t[i].th, NULL, thread_main, &t[i]);
	}
	t0 = now_ns();
	go = 1;
	usleep((useconds_t)(run_seconds * 1e6));
	stop = 1;
	for (int i = 0; i < n; i++) {
		pthread_join(t[i].th, NULL);
		total += t[i].ops;
	}
	t1 = now_ns();
	/* Put back what churn removed so later runs see the same set. */
	for (size_t i = 0; i < nallocs; i++) {
		struct alloc *a = &allocs[i];

		if (a->live)
			continue;
		if (!ucx) {
			struct gh_range r;

			memset(&r, 0, sizeof(r));
			r.base = a->base;
			r.size = a->size;
			gh_registry_insert(&r, &a->gen);
		}
#ifdef GH_BENCH_HAVE_UCX
		else {
			ucx_insert(a);
		}
#endif
		a->live = 1;
	}
	return total / ((t1 - t0) / 1e9) / 1e6;
}

/* ------------------------------------------------------------------ */
/* Writers' scaling                                                    */

struct wtarg {
	pthread_t th;
	uint64_t base, pairs;
	int *go;
};

static void *writer_main(void *arg)
{
	struct wtarg *t = arg;
	struct gh_range r;
	uint64_t n = 0;

	memset(&r, 0, sizeof(r));
	r.base = t->base;
	r.size = 4 * KiB;
	while (!__atomic_load_n(t->go, __ATOMIC_ACQUIRE))
		;
	while (__atomic_load_n(t->go, __ATOMIC_RELAXED) == 1) {
		if (gh_registry_insert(&r, NULL) ||
		    gh_registry_remove(r.base, NULL))
			abort();
		n++;
	}
	t->pairs = n;
	return NULL;
}

/* M insert+remove pairs/s of @n threads, thread i at base + i * step. */
static double run_writers(int n, uint64_t base, uint64_t step)
{
	struct wtarg t[16];
	int go = 0;
	uint64_t total = 0;
	double t0, t1;

	for (int i = 0; i < n; i++) {
		t[i] = (struct wtarg){ .base = base + i * step, .go = &go };
		if (pthread_create(&t[i].th, NULL, writer_main, &t[i]))
			abort();
	}
	t0 = now_ns();
	__atomic_store_n(&go, 1, __ATOMIC_RELEASE);
	usleep((useconds_t)(run_seconds * 1e6));
	__atomic_store_n(&go, 2, __ATOMIC_RELAXED);
	for (int i = 0; i < n; i++) {
		pthread_join(t[i].th, NULL);
		total += t[i].pairs;
	}
	t1 = now_ns();
	return total / ((t1 - t0) / 1e9) / 1e6;
}

static void bench_writers(void)
{
	static const int nthr[] = { 1, 2, 4, 8, 16 };
	static const struct {
		const char *what;
		uint64_t base, step;
	} lay[] = {
		{ "one granule, 4 KiB apart", 0x7e0000000000ull, 4 * KiB },
		{ "one 2 MiB region, a granule each", 0x7e0000200000ull,
		  64 * KiB },
		{ "a 2 MiB region each", 0x7e0040000000ull, 2 * MiB },
	};

	printf("\nWriters: 4 KiB insert+remove pairs, M pairs/s of all "
	       "threads (%.2f s per run)\n", run_seconds);
	printf("  %-34s", "layout \\ threads");
	for (size_t i = 0; i < sizeof(nthr) / sizeof(nthr[0]); i++)
		printf(" %8d", nthr[i]);
	printf("\n");
	for (size_t l = 0; l < sizeof(lay) / sizeof(lay[0]); l++) {
		printf("  %-34s", lay[l].what);
		for (size_t i = 0; i < sizeof(nthr) / sizeof(nthr[0]); i++)
			printf(" %8.2f", run_writers(nthr[i], lay[l].base,
						     lay[l].step));
		printf("\n");
	}
}

/* ------------------------------------------------------------------ */
/* Insert/remove cost                                                  */

static void bench_write(const char *what, uint64_t base, uint64_t size,
			int reps)
{
	double ti = 0, tr = 0;

	for (int i = 0; i < reps; i++) {
		struct gh_range r;
		double t0, t1, t2;

		memset(&r, 0, sizeof(r));
		r.base = base;
		r.size = size;
		t0 = now_ns();
		if (gh_registry_insert(&r, NULL))
			abort();
		t1 = now_ns();
		if (gh_registry_remove(base, NULL))
			abort();
		t2 = now_ns();
		ti += t1 - t0;
		tr += t2 - t1;
	}
	printf("  %-34s insert %10.1f us   remove %10.1f us\n", what,
	       ti / reps / 1e3, tr / reps / 1e3);
}

static double rss_mib(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	long pages = 0, res = 0;

	if (f) {
		if (fscanf(f, "%ld %ld", &pages, &res) != 2)
			res = 0;
		fclose(f);
	}
	return res * (double)sysconf(_SC_PAGESIZE) / MiB;
}

int main(int argc, char **argv)
{
	static const size_t sizes[] = { 1000, 100000, 1000000 };
	static const int nthr[] = { 1, 2, 4, 8, 16 };
	static const char *mname[] = { "indep", "chain", "hot" };
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	int have_ucx = 0;

	if (argc > 1 && !strcmp(argv[1], "writers")) {
		if (argc > 2)
			run_seconds = atof(argv[2]);
		gh_registry_init();
		bench_writers();
		return 0;
	}
	if (argc > 1)
		run_seconds = atof(argv[1]);
#ifdef GH_BENCH_HAVE_UCX
	have_ucx = 1;
	if (ucs_pgtable_init(&ucx_pgt, ucx_dir_alloc, ucx_dir_free) != UCS_OK)
		have_ucx = 0;
#endif
	gh_registry_init();
	queries = malloc(NQ * sizeof(*queries));
	if (!queries)
		abort();
	calibrate();
	printf("bench_registry: %ld CPUs online, TSC %.3f GHz, %d lookups per "
	       "batch, %d batches\n", ncpu, tsc_per_ns, BATCH, NBATCH);
	if (!have_ucx)
		printf("ucx: not available\n");

	printf("\nSingle-thread lookup, ns per lookup (random pointer in a "
	       "random live allocation)\n");
	printf("  %-8s %-6s %12s %12s %12s %12s\n", "live", "mode",
	       "gdrhook p50", "gdrhook p99", "ucx p50", "ucx p99");
	printf("  (floor: a chase of one cache line per step over one line "
	       "per live allocation; chain/floor is the lookup's latency in "
	       "misses)\n");
	for (size_t s = 0; s < 2 * sizeof(sizes) / sizeof(sizes[0]); s++) {
		double t0 = now_ns();
		size_t ns = sizeof(sizes) / sizeof(sizes[0]), si;

		layout_small = s >= ns;
		if (s == ns)
			printf("  small buffers: 256 B..2 KiB at 512-byte steps "
			       "(cudaMalloc-like packing)\n");
		si = s % ns;

		build(sizes[si], 42 + s);
		printf("  (built %zu allocations in %.0f ms, span %.1f GiB, "
		       "RSS %.0f MiB)\n", sizes[si], (now_ns() - t0) / 1e6,
		       (allocs[nallocs - 1].base + allocs[nallocs - 1].size -
			allocs[0].base) / (double)GiB, rss_mib());
		for (int m = 0; m < 3; m++) {
			double g50, g99, u50 = 0, u99 = 0;

			lat_gdrhook((enum mode)m, &g50, &g99);
#ifdef GH_BENCH_HAVE_UCX
			if (have_ucx && !layout_small)
				lat_ucx((enum mode)m, &u50, &u99);
#endif
			if (have_ucx && !layout_small)
				printf("  %-8zu %-6s %12.1f %12.1f %12.1f %12.1f\n",
				       sizes[si], mname[m], g50, g99, u50, u99);
			else
				printf("  %-8zu %-6s %12.1f %12.1f %12s %12s\n",
				       sizes[si], mname[m], g50, g99, "-", "-");
		}
		/*
		 * Chained lookups and the floor alternate, so that the
		 * machine's drift (other tenants, the cache and TLB state)
		 * falls on both alike; the ratio is the median of the rounds'.
		 */
		floor_build(sizes[si]);
		{
			double c[FLOOR_ROUNDS], f[FLOOR_ROUNDS], q[FLOOR_ROUNDS];
			double x99;

			for (int k = 0; k < FLOOR_ROUNDS; k++) {
				lat_gdrhook(M_CHAIN, &c[k], &x99);
				lat_floor(&f[k], &x99);
				q[k] = c[k] / f[k];
			}
			printf("  %-8zu %-6s %12.1f %12s   chain/floor %.2fx "
			       "(chain %.1f; medians of %d alternating rounds; "
			       "in huge pages: floor %.0f%%, process %.0f%%)\n",
			       sizes[si], "floor", median(f, FLOOR_ROUNDS), "",
			       median(q, FLOOR_ROUNDS), median(c, FLOOR_ROUNDS),
			       FLOOR_ROUNDS, 100 * thp_share(floor_lines),
			       100 * thp_share(NULL));
		}
		/*
		 * One size class at a time: fewer table lines are touched
		 * than by the mix, which shows what the mix pays for its
		 * tables being larger than the cache.
		 */
		if (!layout_small && sizes[si] == 1000000) {
			printf("  %-8zu chained lookups in one size class only, "
			       "p50 ns:", sizes[si]);
			for (int k = 0; k < 11; k++) {
				double c50, c99;

				queries_fill(4 * KiB << k, 5 + k);
				lat_gdrhook(M_CHAIN, &c50, &c99);
				printf(" %llu KiB %.0f%s", 4ull << k, c50,
				       k < 10 ? "," : "\n");
			}
		}
	}

	printf("  random-read latency by working set (the floor's chase over "
	       "an array of that size), ns:");
	for (int mb = 1; mb <= 64; mb *= 2) {
		double f50, f99;

		floor_build((size_t)mb * MiB / sizeof(struct chase_line));
		lat_floor(&f50, &f99);
		printf(" %d MB %.0f%s", mb, f50, mb < 64 ? "," : "\n");
	}

	layout_small = 0;
	build(100000, 7);
	printf("\nAggregate lookups, 100 k live, M ops/s (%.2f s per run; "
	       "%ld CPUs here, so rows above %ld threads oversubscribe)\n",
	       run_seconds, ncpu, ncpu);
	printf("  %-8s %14s %9s %14s %9s %14s %14s\n", "threads", "gdrhook",
	       "scaling", "gdrhook 1%", "scaling", "ucx", "ucx+rwlock 1%");
	{
		double base0 = 0, base1 = 0;

		for (size_t i = 0; i < sizeof(nthr) / sizeof(nthr[0]); i++) {
			double a = run_threads(nthr[i], 0, 0);
			double b = run_threads(nthr[i], 1, 0);
			double c = 0, d = 0;

			if (i == 0) {
				base0 = a;
				base1 = b;
			}
#ifdef GH_BENCH_HAVE_UCX
			if (have_ucx) {
				c = run_threads(nthr[i], 0, 1);
				d = run_threads(nthr[i], 1, 1);
			}
#endif
			printf("  %-8d %14.1f %8.2fx %14.1f %8.2fx", nthr[i], a,
			       a / base0, b, b / base1);
			if (have_ucx)
				printf(" %14.1f %14.1f\n", c, d);
			else
				printf(" %14s %14s\n", "-", "-");
		}
	}

	printf("\nInsert + remove cost (100 k other allocations live)\n");
	bench_write("4 KiB, alone in its granule", 0x7e0000000000ull + 4096,
		    4 * KiB, 2000);
	{
		/* Make the granule shared first: 100 neighbours. */
		for (int i = 0; i < 100; i++) {
			struct gh_range r;

			memset(&r, 0, sizeof(r));
			r.base = 0x7d0000000000ull + 8192 + i * 512ull;
			r.size = 512;
			gh_registry_insert(&r, NULL);
		}
		bench_write("512 B next to 100 in its granule",
			    0x7d0000000000ull + 4096, 512, 2000);
	}
	bench_write("1 MiB", 0x7e0000200000ull, MiB, 2000);
	bench_write("1 GiB", 0x7e0040000000ull, GiB, 50);
	bench_write("64 GiB (4 GiB aligned)", 0x7c0000000000ull, 64 * GiB, 50);
	bench_write("64 GiB (2 MiB aligned, not 4 GiB)",
		    0x7c0000000000ull + 2 * MiB, 64 * GiB, 20);
	bench_write("80 GiB (2 MiB aligned)", 0x7b0000000000ull + 2 * MiB,
		    80 * GiB, 20);
	printf("  RSS now %.0f MiB\n", rss_mib());
	return 0;
}
