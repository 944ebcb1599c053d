// SPDX-License-Identifier: MIT
/*
 * bench_rcache: the registration cache's own CPU cost, side by side with
 * UCX's registration cache (ucs_rcache) in the same run, on the same
 * addresses, both over a no-op NIC (so only the caches are measured).
 *
 *     make bench && build/tests/bench/bench_rcache [LIVE]
 *
 * LIVE (default 100000) allocations of 64 KiB, 128 KiB apart, are in the
 * registry, each registered once (so every later registration inside one
 * is a hit).  Per thread count (1, 2, 4, 8, 16) each thread times batches
 * of 8 operations on random allocations and the batch time / 8 goes into
 * its histogram; p50 and p99 over all threads are printed, and the
 * aggregate rate.
 *
 *   hit         gdrhook: what the verbs wrapper does on a hit,
 *               gh_rcache_prefetch + gh_registry_lookup +
 *               gh_rcspan_reg (the BAR1 budget
 *               check, then gh_rcache_reg), then gh_rcache_dereg, of
 *               4 KiB inside the allocation;
 *               UCX: ucs_rcache_get + ucs_rcache_region_put of the same;
 *               "random": any of the LIVE allocations (cache misses in
 *               the CPU's caches dominate), "hot": one of 64 (a library's
 *               working set of buffers).
 *   miss        a registration in an allocation never registered before,
 *               the wrapper's path as for a hit (the pin and NIC calls
 *               are no-ops): 1 thread.
 *               (GH_BENCH_MISS_ONLY=1: only the miss and invalidate rows.)
 *   invalidate  the free of an allocation with one cached registration:
 *               gh_registry_remove + gh_rcache_invalidate; UCX:
 *               ucs_rcache_region_invalidate: 1 thread.
 *
 * UCX runs in the same process through dlopen("libucs.so.0") (its header,
 * from libucx-dev, only gives the types; without it, or without the
 * library at run time, the UCX column says so).  The machine's core count
 * is printed: above it, threads share cores and p99 shows preemption.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "rcache/rcache.h"
#include "bench_util.h"

#if defined(__has_include)
#if __has_include(<ucs/memory/rcache.h>)
#include <ucs/memory/rcache.h>
#define HAVE_UCS_H 1
#endif
#endif

/*
 * The library's objects are linked in, its dlsym interposer included:
 * that one forwards to the real dlsym for libucs' names.
 */
#define BASE0		0x7e0000000000ULL
#define STRIDE		(128 * 1024ULL)
#define ASIZE		(64 * 1024ULL)
#define BATCH		8
#define MAXT		16

/* ------------------------------------------------------ no-op NIC */

static struct ibv_mr *mrs;
static uint32_t mr_next;
#define MR_POOL		(1u << 20)

static int nop_pin(struct gh_pin *p)
{
	p->pin_base = p->base & ~(GH_PIN_ALIGN - 1);
	p->pin_size = ((p->base + p->size + GH_PIN_ALIGN - 1) &
		       ~(GH_PIN_ALIGN - 1)) - p->pin_base;
	return 0;
}

static void nop_unpin(struct gh_pin *p)
{
}

static int nop_reg(const struct gh_pin *p, struct ibv_pd *pd, uint64_t addr,
		   uint64_t len, unsigned int access, struct ibv_mr **mr_p)
{
	uint32_t i = __atomic_fetch_add(&mr_next, 1, __ATOMIC_RELAXED);
	struct ibv_mr *m = &mrs[i % MR_POOL];

	m->pd = pd;
	m->lkey = i;
	m->rkey = i;
	*mr_p = m;
	return 0;
}

static int nop_dereg(struct ibv_mr *mr)
{
	return 0;
}

static const struct gh_pin_ops nop_ops = {
	.name = "nop", .pin = nop_pin, .unpin = nop_unpin, .reg = nop_reg,
	.dereg = nop_dereg,
};

static struct ibv_context ctx;
static struct ibv_pd pd = { .context = &ctx };

/* ------------------------------------------------------------ UCX */

#ifdef HAVE_UCS_H
static struct {
	void *h;
	__typeof__(ucs_rcache_create) *create;
	__typeof__(ucs_rcache_get) *get;
	__typeof__(ucs_rcache_region_put) *put;
	__typeof__(ucs_rcache_region_invalidate) *invalidate;
	ucs_rcache_t *rc;
} ux;

static ucs_status_t ux_reg(void *c, ucs_rcache_t *rc, void *arg,
			   ucs_rcache_region_t *r, uint16_t flags)
{
	return UCS_OK;
}

static void ux_dereg(void *c, ucs_rcache_t *rc, ucs_rcache_region_t *r)
{
}

static void ux_dump(void *c, ucs_rcache_t *rc, ucs_rcache_region_t *r,
		    char *buf, size_t max)
{
	if (max)
		buf[0] = 0;
}

static const ucs_rcache_ops_t ux_ops = { ux_reg, ux_dereg, ux_dump };

static void ux_inv_done(void *arg)
{
}

static const char *ux_open(void)
{
	ucs_rcache_params_t p;

	ux.h = dlopen("libucs.so.0", RTLD_NOW | RTLD_LOCAL);
	if (!ux.h)
		return "libucs.so.0 not found";
	ux.create = (__typeof__(ux.create))dlsym(ux.h, "ucs_rcache_create");
	ux.get = (__typeof__(ux.get))dlsym(ux.h, "ucs_rcache_get");
	ux.put = (__typeof__(ux.put))dlsym(ux.h, "ucs_rcache_region_put");
	ux.invalidate = (__typeof__(ux.invalidate))dlsym(
		ux.h, "ucs_rcache_region_invalidate");
	if (!ux.create || !ux.get || !ux.put || !ux.invalidate)
		return "libucs lacks the ucs_rcache API";
	memset(&p, 0, sizeof(p));
	p.region_struct_size = sizeof(ucs_rcache_region_t);
	p.alignment = 4096;
	p.max_alignment = 4096;
	p.ucm_events = 0;	/* frees come from us, not UCM */
	p.ops = &ux_ops;
	p.flags = UCS_RCACHE_FLAG_NO_PFN_CHECK;
	p.max_regions = (unsigned long)-1;
	p.max_size = (size_t)-1;
	p.max_unreleased = (size_t)-1;
	if (ux.create(&p, "bench", NULL, &ux.rc) != UCS_OK)
		return "ucs_rcache_create failed";
	return NULL;
}
#else
static const char *ux_open(void)
{
	return "built without <ucs/memory/rcache.h> (libucx-dev)";
}
#endif

/* ------------------------------------------------------- measuring */

static int live, span;
static struct gh_range *rng;

struct th {
	pthread_t t;
	int ucx;
	long batches;
	uint64_t x;
	uint32_t *ns;		/* per-op ns of each batch */
	long bad;
};

static pthread_barrier_t bar;

static void *hitter(void *arg)
{
	struct th *t = arg;
	uint64_t addr[BATCH];
	struct gh_range gk[BATCH];

	pthread_barrier_wait(&bar);
	for (long b = 0; b < t->batches; b++) {
		uint64_t t0, t1;

		for (int k = 0; k < BATCH; k++)
			addr[k] = BASE0 + (xs(&t->x) % (uint64_t)span) * STRIDE +
				  (xs(&t->x) % 15) * 4096;
		if (t->ucx == 3)	/* the registry's answers, untimed */
			for (int k = 0; k < BATCH; k++)
				gk[k] = rng[(addr[k] - BASE0) / STRIDE];
		t0 = now_ns();
		for (int k = 0; k < BATCH; k++) {
			if (t->ucx == 3) {	/* the cache's part alone */
				struct ibv_mr *m;
				int hit;

				if (gh_rcache_reg(&gk[k], &pd, addr[k], 4096,
						  IBV_ACCESS_LOCAL_WRITE, &m,
						  &hit) || !hit ||
				    gh_rcache_dereg(m))
					t->bad++;
				continue;
			}
			if (t->ucx == 2) {	/* the registry's part alone */
				struct gh_range g;

				t->bad += gh_registry_lookup(addr[k], 4096,
							     &g) != 0;
				continue;
			}
#ifdef HAVE_UCS_H
			if (t->ucx) {
				ucs_rcache_region_t *r;

				if (ux.get(ux.rc, (void *)(uintptr_t)addr[k],
					   4096, 3, NULL, &r) != UCS_OK) {
					t->bad++;
					continue;
				}
				ux.put(ux.rc, r);
				continue;
			}
#endif
			{
				struct gh_range g;
				struct ibv_mr *m;
				int hit;

				gh_rcache_prefetch(&pd, addr[k], 4096,
						   IBV_ACCESS_LOCAL_WRITE);
				if (gh_registry_lookup(addr[k], 4096, &g) ||
				    gh_rcspan_reg(&g, 0, &pd, addr[k], 4096,
						  IBV_ACCESS_LOCAL_WRITE, &m,
						  &hit) || !hit ||
				    gh_rcache_dereg(m))
					t->bad++;
			}
		}
		t1 = now_ns();
		t->ns[b] = (uint32_t)((t1 - t0) / BATCH);
	}
	return NULL;
}

/*
 * The physical floor of one dependent miss here: a pointer chase over one
 * cache line per live allocation (a random cycle), in huge pages like the
 * cache's arrays.  A random hit that reads the registry's line and then the
 * cache entry's pays about two of these; UCX's region is one.
 */
static int cmp_u32(const void *a, const void *b);

static double miss_floor(void)
{
	size_t n = (size_t)live, bytes = (n * 64 + (2u << 20) - 1) &
					 ~(size_t)((2u << 20) - 1);
	uint64_t *l, x = 7, cur = 0, t0, t1;
	uint32_t *perm = malloc(n * sizeof(*perm));
	const long nb = 200000;
	uint32_t *ns = malloc(sizeof(*ns) * (size_t)nb);
	double med;

	if (!perm || !ns || posix_memalign((void **)&l, 2u << 20, bytes))
		return 0;
#ifdef MADV_HUGEPAGE
	madvise(l, bytes, MADV_HUGEPAGE);
#endif
	for (size_t i = 0; i < n; i++)
		perm[i] = (uint32_t)i;
	for (size_t i = n - 1; i > 0; i--) {
		size_t j = xs(&x) % (i + 1);
		uint32_t t = perm[i];

		perm[i] = perm[j];
		perm[j] = t;
	}
	for (size_t i = 0; i < n; i++)
		l[(size_t)perm[i] * 8] = (uint64_t)perm[(i + 1) % n] * 8;
	free(perm);
	/* timed like the hits: batches of BATCH steps, the median batch (a
	 * preempted batch lands in the tail, not in the figure) */
	for (long b = 0; b < nb; b++) {
		t0 = now_ns();
		for (int k = 0; k < BATCH; k++)
			cur = l[cur];
		t1 = now_ns();
		ns[b] = (uint32_t)((t1 - t0) / BATCH);
	}
	__asm__ volatile("" : : "r"(cur));
	free(l);
	qsort(ns, (size_t)nb, sizeof(*ns), cmp_u32);
	med = ns[nb / 2];
	free(ns);
	return med;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

struct stat {
	double p50, p99, mops;
	long bad;
};

static struct stat run_hits(int nt, int ucx, long ops_per_thread)
{
	static struct th th[MAXT];
	static uint32_t *all;
	long nb = ops_per_thread / BATCH, n = 0;
	struct stat s = { 0 };
	uint64_t t0, t1;

	if (!all)
		all = malloc(sizeof(uint32_t) * (size_t)nb * MAXT);
	pthread_barrier_init(&bar, NULL, (unsigned int)nt + 1);
	for (int i = 0; i < nt; i++) {
		th[i].ucx = ucx;
		th[i].batches = nb;
		th[i].x = 0x9e3779b97f4a7c15ULL * (uint64_t)(i + 1);
		th[i].ns = all + (size_t)i * (size_t)nb;
		th[i].bad = 0;
		pthread_create(&th[i].t, NULL, hitter, &th[i]);
	}
	pthread_barrier_wait(&bar);
	t0 = now_ns();
	for (int i = 0; i < nt; i++) {
		pthread_join(th[i].t, NULL);
		s.bad += th[i].bad;
	}
	t1 = now_ns();
	pthread_barrier_destroy(&bar);
	n = nb * nt;
	qsort(all, (size_t)n, sizeof(uint32_t), cmp_u32);
	s.p50 = all[n / 2];
	s.p99 = all[n * 99 / 100];
	s.mops = (double)(nb * BATCH * nt) / (double)(t1 - t0) * 1e3;
	return s;
}

static double pct(uint32_t *v, long n, int p)
{
	qsort(v, (size_t)n, sizeof(uint32_t), cmp_u32);
	return v[n * p / 100];
}

int main(int argc, char **argv)
{
	const char *why;
	long ops = 400000;
	int nmiss = 20000;
	uint32_t *lat = malloc(sizeof(uint32_t) * (size_t)nmiss);

	live = argc > 1 ? atoi(argv[1]) : 100000;
	rng = calloc((size_t)live + (size_t)nmiss, sizeof(*rng));
	mrs = mmap(NULL, sizeof(*mrs) * MR_POOL, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!rng || !lat || mrs == MAP_FAILED || gh_registry_init() ||
	    gh_rcache_init(&nop_ops, 0, 0, 0)) {
		fprintf(stderr, "bench_rcache: setup failed\n");
		return 1;
	}
	why = ux_open();
	for (int i = 0; i < live; i++) {
		struct gh_range r = { .base = BASE0 + (uint64_t)i * STRIDE,
				      .size = ASIZE, .kind = GDRHOOK_KIND_DEVICE,
				      .dev = 0, .ctx = 1 };
		struct ibv_mr *m;
		int hit;

		if (gh_registry_insert(&r, &r.gen) ||
		    gh_rcache_reg(&r, &pd, r.base, ASIZE,
				  IBV_ACCESS_LOCAL_WRITE, &m, &hit) ||
		    gh_rcache_dereg(m)) {
			fprintf(stderr, "bench_rcache: warm-up failed at %d\n", i);
			return 1;
		}
		rng[i] = r;
#ifdef HAVE_UCS_H
		if (!why) {
			ucs_rcache_region_t *ur;

			if (ux.get(ux.rc, (void *)(uintptr_t)r.base, ASIZE, 3,
				   NULL, &ur) != UCS_OK) {
				why = "ucs_rcache_get failed";
			} else {
				ux.put(ux.rc, ur);
			}
		}
#endif
	}
	printf("bench_rcache: %d live allocations of 64 KiB, no-op NIC, %ld cores; ns per operation (batches of %d), p50 / p99, and Mops/s over all threads\n",
	       live, sysconf(_SC_NPROCESSORS_ONLN), BATCH);
	printf("UCX ucs_rcache: %s\n", why ? why : "libucs.so.0 (dlopen), same addresses");
	/* GH_BENCH_MISS_ONLY=1: the miss and invalidate rows only (profiling) */
	for (int hot = getenv("GH_BENCH_MISS_ONLY") ? 2 : 0; hot < 2; hot++) {
	span = hot ? 64 : live;
	printf("%-8s | %-28s | %-28s\n", hot ? "hot" : "random",
	       "gdrhook hit p50/p99 Mops/s", "UCX hit p50/p99 Mops/s");
	for (int nt = 1; nt <= MAXT; nt *= 2) {
		struct stat g = run_hits(nt, 0, ops / nt > 40000 ? ops / nt : 40000);

		printf("%2d thr   | %7.0f %7.0f %10.2f%s |", nt, g.p50, g.p99, g.mops,
		       g.bad ? " BAD" : "");
		if (!why) {
			struct stat u = run_hits(nt, 1, ops / nt > 40000 ?
						 ops / nt : 40000);

			printf(" %7.0f %7.0f %10.2f%s\n", u.p50, u.p99, u.mops,
			       u.bad ? " BAD" : "");
		} else {
			printf(" %s\n", "-");
		}
	}
	{
		struct stat r = run_hits(1, 2, ops), c = run_hits(1, 3, ops);

		printf("  of which gh_registry_lookup alone (1 thread): p50 %.0f p99 %.0f ns\n",
		       r.p50, r.p99);
		printf("  of which gh_rcache_reg + gh_rcache_dereg alone (1 thread): p50 %.0f p99 %.0f ns\n",
		       c.p50, c.p99);
		if (!hot)
			printf("  one-miss floor (pointer chase, one line per live allocation): %.0f ns\n",
			       miss_floor());
	}
	}
	/* misses: allocations never registered, then their frees */
	{
		uint64_t base = BASE0 + (uint64_t)live * STRIDE;
		uint32_t *inv = malloc(sizeof(uint32_t) * (size_t)nmiss);
		struct ibv_mr *m;
		int hit;

		for (int i = 0; i < nmiss; i++) {
			struct gh_range r = { .base = base + (uint64_t)i * STRIDE,
					      .size = ASIZE,
					      .kind = GDRHOOK_KIND_DEVICE,
					      .dev = 0, .ctx = 1 };
			struct gh_range g, gone;
			uint64_t t0, t1, t2;

			gh_registry_insert(&r, &r.gen);
			t0 = now_ns();
			/* the verbs wrapper's path, as the hit rows */
			gh_rcache_prefetch(&pd, r.base, 4096,
					   IBV_ACCESS_LOCAL_WRITE);
			if (gh_registry_lookup(r.base, 4096, &g) ||
			    gh_rcspan_reg(&g, 0, &pd, r.base, 4096,
					  IBV_ACCESS_LOCAL_WRITE, &m, &hit) ||
			    hit || gh_rcache_dereg(m)) {
				fprintf(stderr, "bench_rcache: miss failed\n");
				return 1;
			}
			t1 = now_ns();
			gh_registry_remove(r.base, &gone);
			gh_rcache_invalidate(&gone);
			t2 = now_ns();
			lat[i] = (uint32_t)(t1 - t0);
			inv[i] = (uint32_t)(t2 - t1);
		}
		printf("gdrhook miss (1 thread): p50 %.0f p99 %.0f ns; invalidate (free with one cached registration): p50 %.0f p99 %.0f ns\n",
		       pct(lat, nmiss, 50), pct(lat, nmiss, 99),
		       pct(inv, nmiss, 50), pct(inv, nmiss, 99));
#ifdef HAVE_UCS_H
		if (!why) {
			for (int i = 0; i < nmiss; i++) {
				ucs_rcache_region_t *ur;
				void *a = (void *)(uintptr_t)(base + STRIDE *
					(uint64_t)(nmiss + i));
				uint64_t t0, t1, t2;

				t0 = now_ns();
				if (ux.get(ux.rc, a, 4096, 3, NULL, &ur) !=
				    UCS_OK)
					return 1;
				ux.put(ux.rc, ur);
				t1 = now_ns();
				if (ux.get(ux.rc, a, 4096, 3, NULL, &ur) !=
				    UCS_OK)
					return 1;
				t2 = now_ns();
				ux.invalidate(ux.rc, ur, ux_inv_done, NULL);
				lat[i] = (uint32_t)(t1 - t0);
				inv[i] = (uint32_t)(now_ns() - t2);
			}
			printf("UCX miss (1 thread): p50 %.0f p99 %.0f ns; invalidate (ucs_rcache_region_invalidate): p50 %.0f p99 %.0f ns\n",
			       pct(lat, nmiss, 50), pct(lat, nmiss, 99),
			       pct(inv, nmiss, 50), pct(inv, nmiss, 99));
		}
#endif
		free(inv);
	}
	return 0;
}
