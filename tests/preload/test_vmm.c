// SPDX-License-Identifier: MIT
/*
 * Issue 10 on the doubles (LD_PRELOAD=libgdrhook.so, build/fake,
 * build/fakeverbs): registrations across VMM mappings served as one
 * cached span, revoked before any of its mappings is unmapped; the BAR1
 * budget (partial pins of large allocations); SYNC_MEMOPS after the first
 * registration, per context or per pointer; the DMA-BUF mapping type.
 * Each case runs in a fresh process with its own GDRHOOK_* settings.
 */
#include <cuda.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

#include "preload_util.h"

#undef ibv_reg_mr

#define MiB (1ULL << 20)
#define KiB (1ULL << 10)
#define CHUNK (2 * MiB)		/* the double's VMM granularity */
#define LW IBV_ACCESS_LOCAL_WRITE
#define RW IBV_ACCESS_REMOTE_WRITE

typedef struct ibv_mr *(*reg_fn)(struct ibv_pd *, void *, size_t, int);
typedef int (*dereg_fn)(struct ibv_mr *);

static struct verbs {
	reg_fn reg;
	dereg_fn dereg;
	struct ibv_pd *(*alloc_pd)(struct ibv_context *);
	struct ibv_context *(*open)(void);
	unsigned long (*calls)(const char *);
	int (*live)(void);
	int (*stale)(void);
	int (*is_mr)(const struct ibv_mr *);
	int (*write)(struct ibv_pd *, uint32_t, uint64_t, const void *, size_t);
} v;

static void *need(void *p, const char *what)
{
	if (!p)
		TH_FAIL("fake libibverbs lacks %s", what);
	return p;
}

static struct ibv_pd *verbs_pd(void)
{
	void *h = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);

	if (!h)
		TH_FAIL("dlopen libibverbs.so.1: %s", dlerror());
	v.reg = need(dlvsym(h, "ibv_reg_mr", "IBVERBS_1.1"), "ibv_reg_mr");
	v.dereg = need(dlvsym(h, "ibv_dereg_mr", "IBVERBS_1.1"), "dereg");
	v.alloc_pd = need(dlvsym(h, "ibv_alloc_pd", "IBVERBS_1.1"), "pd");
	v.open = need(dlsym(h, "fakeverbs_open"), "open");
	v.calls = need(dlsym(h, "fakeverbs_calls"), "calls");
	v.live = need(dlsym(h, "fakeverbs_live_mrs"), "live");
	v.stale = need(dlsym(h, "fakeverbs_stale_mrs"), "stale");
	v.write = need(dlsym(h, "fakeverbs_write"), "write");
	v.is_mr = need(dlsym(h, "fakeverbs_is_mr"), "is_mr");
	return v.alloc_pd(v.open());
}

static CUmemGenericAllocationHandle vmm_create(size_t size)
{
	CUmemAllocationProp prop;
	CUmemGenericAllocationHandle h = 0;

	memset(&prop, 0, sizeof(prop));
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = 0;
	prop.allocFlags.gpuDirectRDMACapable = 1;
	CU_OK(cuMemCreate(&h, size, &prop, 0));
	return h;
}

static void vmm_map(CUdeviceptr va, CUmemGenericAllocationHandle h)
{
	CUmemAccessDesc a;

	memset(&a, 0, sizeof(a));
	a.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	a.location.id = 0;
	a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	CU_OK(cuMemMap(va, CHUNK, 0, h, 0));
	CU_OK(cuMemSetAccess(va, CHUNK, &a, 1));
}

/* A PyTorch-style expandable segment: 3 chunks, 3 physical allocations. */
static CUdeviceptr segment(CUmemGenericAllocationHandle h[3])
{
	CUdeviceptr va = 0;

	CU_OK(cuMemAddressReserve(&va, 3 * CHUNK, 0, 0, 0));
	for (int i = 0; i < 3; i++) {
		h[i] = vmm_create(CHUNK);
		vmm_map(va + i * CHUNK, h[i]);
	}
	return va;
}

static const char *reg_ep(void)
{
	const char *b = getenv("GDRHOOK_BACKEND");

	return b && !strcmp(b, "dmabuf") ? "ibv_reg_dmabuf_mr" :
	       "ibv_reg_mr_iova2";
}

/* ---------------------------------------------------------- scenarios */

/* Spans crossing 0, 1 and 2 chunk boundaries; unmap; remap. */
static int scenario_span(void)
{
	CUmemGenericAllocationHandle h[3];
	struct ibv_pd *pd, *pd2;
	struct ibv_mr *m0, *m1, *m1b, *m2, *held, *m;
	unsigned long r0;
	CUdeviceptr va;
	const char *ep = reg_ep();

	primary_ctx(0);
	pd = verbs_pd();
	pd2 = v.alloc_pd(v.open());
	va = segment(h);
	r0 = v.calls(ep);
	for (int i = 0; i < 3; i++)
		CHECK_EQ(tracked(va + i * CHUNK, NULL), 0);

	/* 0 boundaries: the mapping, as any allocation. */
	m0 = v.reg(pd, (void *)(va + 4096), 64 * KiB, LW | RW);
	CHECK(m0);
	CHECK_EQ(v.calls(ep), r0 + 1);

	/* 1 boundary: one registration of chunks 0 and 1, exactly. */
	m1 = v.reg(pd, (void *)(va + CHUNK - 4096), 8192, LW | RW);
	CHECK(m1);
	CHECK_EQ(v.calls(ep), r0 + 2);
	CHECK_EQ((uintptr_t)m1->addr, va + CHUNK - 4096);
	CHECK_EQ(m1->length, 8192);
	CHECK(m1->lkey != m0->lkey);
	CHECK_EQ(v.write(pd, m1->rkey, va, "lo", 2), 0);
	CHECK_EQ(v.write(pd, m1->rkey, va + 2 * CHUNK - 4, "hi", 2), 0);
	CHECK(!memcmp((void *)(va + 2 * CHUNK - 4), "hi", 2));
	/* never the third chunk, never another PD */
	CHECK_EQ(v.write(pd, m1->rkey, va + 2 * CHUNK, "x", 1), -ERANGE);
	CHECK_EQ(v.write(pd, m1->rkey, va + 2 * CHUNK - 1, "xy", 2), -ERANGE);
	CHECK_EQ(v.write(pd2, m1->rkey, va + CHUNK, "x", 1), -EPERM);
	/* Another range over the same boundary: a hit. */
	m1b = v.reg(pd, (void *)(va + 4096), CHUNK, LW);
	CHECK(m1b && m1b->lkey == m1->lkey);
	CHECK_EQ(v.calls(ep), r0 + 2);

	/* 2 boundaries: a new span of all three chunks. */
	m2 = v.reg(pd, (void *)(va + CHUNK - 4096), CHUNK + 8192, LW | RW);
	CHECK(m2 && m2->lkey != m1->lkey);
	CHECK_EQ(v.calls(ep), r0 + 3);
	CHECK_EQ(v.write(pd, m2->rkey, va + 3 * CHUNK - 1, "z", 1), 0);
	held = v.reg(pd, (void *)va, 3 * CHUNK, LW | RW);	/* a hit */
	CHECK(held && held->lkey == m2->lkey);
	CHECK_EQ(v.calls(ep), r0 + 3);
	/* chunks 1-2: inside the 3-chunk span, a hit on it */
	m = v.reg(pd, (void *)(va + 2 * CHUNK - 4096), 8192, LW);
	CHECK(m && m->lkey == m2->lkey);
	CHECK_EQ(v.calls(ep), r0 + 3);
	CHECK_EQ(v.dereg(m), 0);
	CHECK_EQ(v.dereg(m0), 0);
	CHECK_EQ(v.dereg(m1), 0);
	CHECK_EQ(v.dereg(m1b), 0);
	CHECK_EQ(v.dereg(m2), 0);
	CHECK_EQ(v.live(), 3);		/* lazy */

	/* Unmap the middle: both spans go first; the held MR is revoked. */
	CU_OK(cuMemUnmap(va + CHUNK, CHUNK));
	CHECK_EQ(v.live(), 1);		/* chunk 0's own registration */
	CHECK_EQ(v.stale(), 0);
	CHECK_EQ(v.calls("ibv_dereg_mr"), 2);
	CHECK_EQ(v.dereg(held), 0);	/* revoked: a no-op that succeeds */
	/* A registration across the hole is not cached (nothing to span). */
	m1 = v.reg(pd, (void *)(va + CHUNK - 4096), 4096, LW);
	CHECK(m1);
	CHECK_EQ(v.calls(ep), r0 + 3);	/* inside chunk 0: a hit */
	CHECK_EQ(v.dereg(m1), 0);

	/* Remap with a new physical allocation: a new generation, a miss. */
	CU_OK(cuMemRelease(h[1]));
	h[1] = vmm_create(CHUNK);
	vmm_map(va + CHUNK, h[1]);
	m1 = v.reg(pd, (void *)(va + CHUNK - 4096), 8192, LW | RW);
	CHECK(m1);
	CHECK_EQ(v.calls(ep), r0 + 4);
	CHECK_EQ(v.write(pd, m1->rkey, va + CHUNK + 8, "new", 4), 0);
	CHECK(!memcmp((void *)(va + CHUNK + 8), "new", 4));
	CHECK_EQ(v.dereg(m1), 0);

	/* Unmapping the first chunk revokes the span and its own entry. */
	CU_OK(cuMemUnmap(va, CHUNK));
	CHECK_EQ(v.live(), 0);
	CHECK_EQ(v.stale(), 0);
	CU_OK(cuMemUnmap(va + CHUNK, 2 * CHUNK));
	for (int i = 0; i < 3; i++)
		CU_OK(cuMemRelease(h[i]));
	CU_OK(cuMemAddressFree(va, 3 * CHUNK));
	return 0;
}

/* Threads racing on the same spans (misses, claims, hits), rounds
 * separated by an unmap + remap of the middle chunk. */
static struct {
	struct ibv_pd *pd;
	CUdeviceptr va;
	int bad;
} race;

static void *span_worker(void *arg)
{
	unsigned int seed = (unsigned int)(uintptr_t)arg;

	for (int i = 0; i < 300; i++) {
		uint64_t off = (rand_r(&seed) % (3 * CHUNK / 4096)) * 4096;
		uint64_t len = 4096 + (rand_r(&seed) % (CHUNK / 4096)) * 4096;
		struct ibv_mr *m;

		if (off + len > 3 * CHUNK)
			len = 3 * CHUNK - off;
		m = v.reg(race.pd, (void *)(race.va + off), len, LW | RW);
		if (!m || v.is_mr(m)) {	/* every shape here is cacheable */
			__atomic_add_fetch(&race.bad, 1, __ATOMIC_RELAXED);
			if (m)
				v.dereg(m);
			continue;
		}
		if (v.write(race.pd, m->rkey, race.va + off + len - 1, "w", 1))
			__atomic_add_fetch(&race.bad, 1, __ATOMIC_RELAXED);
		v.dereg(m);
	}
	return NULL;
}

static int scenario_span_threads(void)
{
	CUmemGenericAllocationHandle h[3];
	pthread_t t[4];

	primary_ctx(0);
	race.pd = verbs_pd();
	race.va = segment(h);
	for (int round = 0; round < 4; round++) {
		for (int i = 0; i < 4; i++)
			CHECK_EQ(pthread_create(&t[i], NULL, span_worker,
						(void *)(uintptr_t)(round * 4 + i + 1)),
				 0);
		for (int i = 0; i < 4; i++)
			CHECK_EQ(pthread_join(t[i], NULL), 0);
		CHECK_EQ(race.bad, 0);
		/* at most: 3 chunks' own, spans 0-1, 1-2, 0-2 */
		CHECK(v.live() <= 6);
		CU_OK(cuMemUnmap(race.va + CHUNK, CHUNK));
		CHECK(v.live() <= 2);	/* chunks 0 and 2 alone */
		CHECK_EQ(v.stale(), 0);
		CU_OK(cuMemRelease(h[1]));
		h[1] = vmm_create(CHUNK);
		vmm_map(race.va + CHUNK, h[1]);
	}
	for (int i = 0; i < 3; i++)
		CU_OK(cuMemUnmap(race.va + i * CHUNK, CHUNK));
	CHECK_EQ(v.live(), 0);
	return 0;
}

/* Mappings that are not adjacent, or not VMM: passed through. */
static int scenario_span_gaps(void)
{
	CUmemGenericAllocationHandle h[2];
	struct ibv_pd *pd;
	struct ibv_mr *m;
	unsigned long r;
	CUdeviceptr va, d, d2;

	primary_ctx(0);
	pd = verbs_pd();
	CU_OK(cuMemAddressReserve(&va, 3 * CHUNK, 0, 0, 0));
	h[0] = vmm_create(CHUNK);
	h[1] = vmm_create(CHUNK);
	vmm_map(va, h[0]);
	vmm_map(va + 2 * CHUNK, h[1]);		/* a hole in the middle */
	r = v.calls("ibv_reg_mr");
	errno = 0;
	m = v.reg(pd, (void *)(va + CHUNK - 4096), 8192, LW);
	/* not a span: the program's own call reached libibverbs, whose NIC
	 * refuses the unmapped page as the kernel's ib_umem_get does */
	CHECK_EQ(v.calls("ibv_reg_mr"), r + 1);
	CHECK(m == NULL && errno == EFAULT);
	/* device memory followed by more (the next allocation: every page
	 * mapped, as a NIC needs): not a span */
	CU_OK(cuMemAlloc(&d, 2 * MiB));
	CU_OK(cuMemAlloc(&d2, 2 * MiB));
	CHECK_EQ(d2, d + 2 * MiB);
	m = v.reg(pd, (void *)(d + MiB), 2 * MiB, LW);
	CHECK_EQ(v.calls("ibv_reg_mr"), r + 2);
	CHECK(m && !v.is_mr(m));
	CHECK_EQ(v.dereg(m), 0);
	CU_OK(cuMemFree(d2));
	CU_OK(cuMemFree(d));
	return 0;
}

/* BAR1 budget: GDRHOOK_PIN_WHOLE_MAX=1m. */
static int scenario_budget(void)
{
	struct ibv_pd *pd;
	struct ibv_mr *a, *b, *c, *s;
	unsigned long r0;
	CUdeviceptr small, big;
	const char *ep = reg_ep();

	primary_ctx(0);
	pd = verbs_pd();
	CU_OK(cuMemAlloc(&small, 512 * KiB));
	CU_OK(cuMemAlloc(&big, 8 * MiB));
	r0 = v.calls(ep);

	/* Within budget: whole, as before. */
	s = v.reg(pd, (void *)(small + 4096), 4096, LW | RW);
	CHECK(s);
	CHECK_EQ(v.write(pd, s->rkey, small, "s", 1), 0);
	CHECK_EQ(v.write(pd, s->rkey, small + 512 * KiB - 1, "s", 1), 0);
	CHECK_EQ(v.calls(ep), r0 + 1);

	/* Over budget: the registered range rounded out to 64 KiB. */
	a = v.reg(pd, (void *)(big + 3 * MiB + 100), 4000, LW | RW);
	CHECK(a);
	CHECK_EQ(v.calls(ep), r0 + 2);
	CHECK_EQ((uintptr_t)a->addr, big + 3 * MiB + 100);
	CHECK_EQ(v.write(pd, a->rkey, big + 3 * MiB, "a", 1), 0);
	CHECK_EQ(v.write(pd, a->rkey, big + 3 * MiB + 64 * KiB - 1, "a", 1), 0);
	CHECK(!memcmp((void *)(big + 3 * MiB + 64 * KiB - 1), "a", 1));
	CHECK_EQ(v.write(pd, a->rkey, big + 3 * MiB + 64 * KiB, "a", 1),
		 -ERANGE);
	CHECK_EQ(v.write(pd, a->rkey, big, "a", 1), -ERANGE);
	/* Inside the same 64 KiB: a hit; elsewhere: another partial pin. */
	b = v.reg(pd, (void *)(big + 3 * MiB + 8192), 8192, LW);
	CHECK(b && b->lkey == a->lkey);
	CHECK_EQ(v.calls(ep), r0 + 2);
	c = v.reg(pd, (void *)(big + 5 * MiB), 128 * KiB, LW);
	CHECK(c && c->lkey != a->lkey);
	CHECK_EQ(v.calls(ep), r0 + 3);
	CHECK_EQ(v.dereg(a), 0);
	CHECK_EQ(v.dereg(b), 0);
	CHECK_EQ(v.live(), 3);

	/* The free drops both partial pins first; c was held: revoked. */
	CU_OK(cuMemFree(big));
	CHECK_EQ(v.live(), 1);
	CHECK_EQ(v.stale(), 0);
	CHECK_EQ(v.dereg(c), 0);
	CHECK_EQ(v.dereg(s), 0);
	CU_OK(cuMemFree(small));
	CHECK_EQ(v.live(), 0);
	return 0;
}

static unsigned int ctx_flags(void)
{
	unsigned int fl = 0;

	CU_OK(cuCtxGetFlags(&fl));
	return fl;
}

static int ptr_sync(CUdeviceptr p)
{
	int val = -1;

	CU_OK(cuPointerGetAttribute(&val, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, p));
	return val;
}

/* Per context: set once, by the first registration, read back. */
static int scenario_sync_ctx(void)
{
	CUmemGenericAllocationHandle h[3];
	struct ibv_pd *pd;
	struct ibv_mr *m, *n, *x;
	CUdeviceptr d, d2, va;
	unsigned long set0;

	primary_ctx(0);
	pd = verbs_pd();
	CU_OK(cuMemAlloc(&d, MiB));
	CU_OK(cuMemAlloc(&d2, MiB));
	va = segment(h);
	CHECK(!(ctx_flags() & CU_CTX_SYNC_MEMOPS));
	set0 = fake_calls("cuCtxSetFlags");
	m = v.reg(pd, (void *)d, 4096, LW);
	CHECK(m);
	CHECK(ctx_flags() & CU_CTX_SYNC_MEMOPS);
	CHECK_EQ(fake_calls("cuCtxSetFlags"), set0 + 1);
	n = v.reg(pd, (void *)d2, 4096, LW);	/* another miss: no set */
	x = v.reg(pd, (void *)(va + CHUNK - 64), 128, LW);	/* a span */
	CHECK(n && x);
	CHECK_EQ(fake_calls("cuCtxSetFlags"), set0 + 1);
	CHECK(ctx_flags() & CU_CTX_SYNC_MEMOPS);
	/* The context flag does not show per pointer (as on the H100). */
	CHECK_EQ(ptr_sync(d), 0);
	CHECK_EQ(v.dereg(m), 0);
	CHECK_EQ(v.dereg(n), 0);
	CHECK_EQ(v.dereg(x), 0);
	return 0;
}

/* A context that is not current: pushed for the call, popped after. */
static int scenario_sync_other_ctx(void)
{
	CUcontext mine = NULL, cur = NULL;
	struct ibv_pd *pd;
	struct ibv_mr *m;
	CUdeviceptr d;
	CUdevice dev;
	unsigned int fl = 0;

	CU_OK(cuInit(0));
	CU_OK(cuDeviceGet(&dev, 0));
	CU_OK(cuCtxCreate(&mine, NULL, 0, dev));	/* current now */
	pd = verbs_pd();
	CU_OK(cuMemAlloc(&d, MiB));
	CU_OK(cuCtxSetCurrent(NULL));
	m = v.reg(pd, (void *)d, 4096, LW);
	CHECK(m);
	CU_OK(cuCtxGetCurrent(&cur));
	CHECK(cur == NULL);			/* left as it was */
	CU_OK(cuCtxSetCurrent(mine));
	CU_OK(cuCtxGetFlags(&fl));
	CHECK(fl & CU_CTX_SYNC_MEMOPS);
	CHECK_EQ(v.dereg(m), 0);
	return 0;
}

/* No cuCtxSetFlags: per pointer; the driver refuses VMM. */
static int scenario_sync_ptr(void)
{
	CUmemGenericAllocationHandle h[3];
	struct ibv_pd *pd;
	struct ibv_mr *m, *x;
	CUdeviceptr d, va;

	primary_ctx(0);
	pd = verbs_pd();
	CU_OK(cuMemAlloc(&d, MiB));
	va = segment(h);
	fake_fail_next("cuCtxSetFlags", CUDA_ERROR_NOT_SUPPORTED, 1000);
	CHECK_EQ(ptr_sync(d), 0);
	m = v.reg(pd, (void *)(d + 4096), 4096, LW);
	CHECK(m);
	CHECK_EQ(ptr_sync(d), 1);
	CHECK(!(ctx_flags() & CU_CTX_SYNC_MEMOPS));
	x = v.reg(pd, (void *)(va + CHUNK - 64), 128, LW);
	CHECK(x);			/* registered anyway */
	CHECK_EQ(v.dereg(m), 0);
	CHECK_EQ(v.dereg(x), 0);
	return 0;
}

/* GDRHOOK_SYNC_MEMOPS=0: nothing set. */
static int scenario_sync_off(void)
{
	struct ibv_pd *pd;
	struct ibv_mr *m;
	CUdeviceptr d;

	primary_ctx(0);
	pd = verbs_pd();
	CU_OK(cuMemAlloc(&d, MiB));
	m = v.reg(pd, (void *)d, 4096, LW);
	CHECK(m);
	CHECK_EQ(fake_calls("cuCtxSetFlags"), 0);
	CHECK_EQ(fake_calls("cuPointerSetAttribute"), 0);
	CHECK(!(ctx_flags() & CU_CTX_SYNC_MEMOPS));
	CHECK_EQ(ptr_sync(d), 0);
	CHECK_EQ(v.dereg(m), 0);
	return 0;
}

/*
 * DMA-BUF mapping type.  argv-free: the expectation comes from the
 * environment the case set (GDRHOOK_DMABUF_MAPPING, FAKECUDA_C2C, and
 * VMM_TEST_EXPECT: "pcie" the export used the PCIe flag, "default" it did
 * not, "refused" nothing was cached).
 */
static int scenario_mapping(void)
{
	const char *want = getenv("VMM_TEST_EXPECT");
	struct ibv_pd *pd;
	struct ibv_mr *m;
	unsigned long dm0;
	CUdeviceptr d;

	primary_ctx(0);
	pd = verbs_pd();
	CU_OK(cuMemAlloc(&d, 4 * MiB));
	if (getenv("VMM_TEST_FAIL_FIRST"))
		fake_fail_next("cuMemGetHandleForAddressRange",
			       CUDA_ERROR_NOT_SUPPORTED, 1);
	dm0 = v.calls("ibv_reg_dmabuf_mr");
	m = v.reg(pd, (void *)(d + 4096), 4096, LW | RW);
	CHECK(m);
	if (!strcmp(want, "refused")) {
		CHECK_EQ(v.calls("ibv_reg_dmabuf_mr"), dm0);
	} else {
		CHECK_EQ(v.calls("ibv_reg_dmabuf_mr"), dm0 + 1);
		CHECK_EQ(fake_calls("cuMemGetHandleForAddressRange:pcie"),
			 !strcmp(want, "pcie"));
		CHECK_EQ(v.write(pd, m->rkey, d + 4 * MiB - 3, "ok", 3), 0);
		CHECK(!memcmp((void *)(d + 4 * MiB - 3), "ok", 3));
	}
	CHECK_EQ(v.dereg(m), 0);
	CU_OK(cuMemFree(d));
	CHECK_EQ(v.live(), 0);
	return 0;
}

static const struct scenario scenarios[] = {
	{ "mapping", scenario_mapping },
	{ "span", scenario_span },
	{ "span_gaps", scenario_span_gaps },
	{ "span_threads", scenario_span_threads },
	{ "budget", scenario_budget },
	{ "sync_ctx", scenario_sync_ctx },
	{ "sync_other_ctx", scenario_sync_other_ctx },
	{ "sync_ptr", scenario_sync_ptr },
	{ "sync_off", scenario_sync_off },
};

/*
 * The scenarios check what a span's or a partial pin's rkey reaches (the
 * whole pinned extent, never further): that is the allocation exposure
 * policy.  Under exact (the default) an rkey reaches only the range asked,
 * which tests/preload/test_verbs.c proves for every shape.
 */
__attribute__((constructor)) static void exposure_allocation(void)
{
	setenv("GDRHOOK_REMOTE_EXPOSURE", "allocation", 0);
}

/* ------------------------------------------------------------- cases */

TEST(vmm_span_peermem)
{
	const char *env[] = { "GDRHOOK_BACKEND=peermem", NULL };

	CHECK_EQ(run_scenario("span", env), 0);
}

TEST(vmm_span_event_log)
{
	char path[512], envlog[600];
	const char *env[] = { "GDRHOOK_BACKEND=peermem", envlog, NULL };

	log_path(path, sizeof(path), "vmm");
	snprintf(envlog, sizeof(envlog), "GDRHOOK_TRACE=%s", path);
	CHECK_EQ(run_scenario("span", env), 0);
	/* pins: chunk 0, the 2-chunk span, the 3-chunk span, the remapped
	 * 2-chunk span */
	CHECK_EQ(LOG_COUNT(path, "\"ev\":\"pin\"", "\"size\":2097152,"), 1);
	CHECK_EQ(LOG_COUNT(path, "\"ev\":\"pin\"", "\"size\":4194304,"), 2);
	CHECK_EQ(LOG_COUNT(path, "\"ev\":\"pin\"", "\"size\":6291456,"), 1);
	CHECK_EQ(LOG_COUNT(path, "\"ev\":\"unpin\""), 4);
	CHECK(LOG_COUNT(path, "\"ev\":\"revoke\"") >= 1);
	unlink(path);
}

TEST(vmm_span_threads)
{
	const char *env[] = { "GDRHOOK_BACKEND=peermem", NULL };

	CHECK_EQ(run_scenario("span_threads", env), 0);
}

TEST(vmm_span_gaps_wrapped)
{
	const char *env[] = { "GDRHOOK_BACKEND=peermem", NULL };

	CHECK_EQ(run_scenario("span_gaps", env), 0);
}

TEST(bar_budget_peermem)
{
	const char *env[] = { "GDRHOOK_BACKEND=peermem",
			      "GDRHOOK_PIN_WHOLE_MAX=1m", NULL };

	CHECK_EQ(run_scenario("budget", env), 0);
}

TEST(bar_budget_dmabuf)
{
	const char *env[] = { "GDRHOOK_BACKEND=dmabuf",
			      "GDRHOOK_PIN_WHOLE_MAX=1m", NULL };

	CHECK_EQ(run_scenario("budget", env), 0);
}

TEST(sync_memops_per_context)
{
	const char *env[] = { "GDRHOOK_BACKEND=peermem", NULL };

	CHECK_EQ(run_scenario("sync_ctx", env), 0);
}

TEST(sync_memops_context_not_current)
{
	const char *env[] = { "GDRHOOK_BACKEND=dmabuf", NULL };

	CHECK_EQ(run_scenario("sync_other_ctx", env), 0);
}

TEST(sync_memops_per_pointer)
{
	const char *env[] = { "GDRHOOK_BACKEND=peermem", NULL };

	CHECK_EQ(run_scenario("sync_ptr", env), 0);
}

TEST(sync_memops_off)
{
	const char *env[] = { "GDRHOOK_BACKEND=peermem",
			      "GDRHOOK_SYNC_MEMOPS=0", NULL };

	CHECK_EQ(run_scenario("sync_off", env), 0);
}

#define MAPPING_CASE(name, ...)						\
	TEST(name)							\
	{								\
		const char *env[] = { "GDRHOOK_BACKEND=dmabuf",		\
				      __VA_ARGS__, NULL };		\
									\
		CHECK_EQ(run_scenario("mapping", env), 0);		\
	}

/* auto: the driver's choice on PCIe hosts, the PCIe type on C2C ones */
MAPPING_CASE(dmabuf_mapping_auto_pcie_host, "VMM_TEST_EXPECT=default")
MAPPING_CASE(dmabuf_mapping_auto_c2c_host, "FAKECUDA_C2C=1",
	     "VMM_TEST_EXPECT=pcie")
MAPPING_CASE(dmabuf_mapping_auto_c2c_refused_falls_back, "FAKECUDA_C2C=1",
	     "VMM_TEST_FAIL_FIRST=1", "VMM_TEST_EXPECT=default")
/* explicit choices are kept, even when refused */
MAPPING_CASE(dmabuf_mapping_pcie_refused, "GDRHOOK_DMABUF_MAPPING=pcie",
	     "VMM_TEST_EXPECT=refused")
MAPPING_CASE(dmabuf_mapping_pcie_c2c, "GDRHOOK_DMABUF_MAPPING=pcie",
	     "FAKECUDA_C2C=1", "VMM_TEST_EXPECT=pcie")
MAPPING_CASE(dmabuf_mapping_default_c2c, "GDRHOOK_DMABUF_MAPPING=default",
	     "FAKECUDA_C2C=1", "VMM_TEST_EXPECT=default")

SCENARIO_MAIN(scenarios)
