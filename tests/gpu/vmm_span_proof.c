// SPDX-License-Identifier: MIT
/*
 * Issue 10 on real GPU memory, with the fake libibverbs (build/fakeverbs)
 * standing in for a NIC that imports the dma-buf the real driver exports
 * (it checks the fd is a dma-buf that covers the registration; it cannot
 * touch GPU pages).  Run under the shim:
 *
 *   LD_LIBRARY_PATH=build/fakeverbs LD_PRELOAD=$PWD/build/libgdrhook.so \
 *     GDRHOOK_BACKEND=dmabuf GDRHOOK_VALIDATE=1 build/gpu/vmm_span_proof
 *
 * 1. A segment of 3 chunks (20 MiB each, 3 physical allocations): spans
 *    crossing 0, 1 and 2 boundaries are one dma-buf registration each,
 *    hits after; unmapping the middle chunk deregisters both spans first;
 *    a remap of it is a miss.
 * 2. SYNC_MEMOPS after the first registration: cuCtxGetFlags, and the
 *    pointer attribute, for device, pool and VMM memory.
 * 3. The BAR1 budget: what is pinned for 1 MiB, 1 GiB and 40 GiB
 *    allocations (the stand-in NIC prints each import's size).
 * Prints PASS or FAIL lines; exit 0 when everything held.
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

#include "gdrhook_preload.h"

#define CK(c) do { CUresult r_ = (c); if (r_) { printf("FAIL %s: %d\n", #c, r_); return 1; } } while (0)
#define EXPECT(c, ...) do { if (!(c)) { printf("FAIL %s: ", #c); printf(__VA_ARGS__); printf("\n"); bad++; } else { printf("ok   %s\n", #c); } } while (0)

#define MiB (1ULL << 20)
#define GiB (1ULL << 30)
#define CHUNK (20 * MiB)
#define ACC (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)

static struct ibv_mr *(*reg)(struct ibv_pd *, void *, size_t, int);
static int (*dereg)(struct ibv_mr *);
static unsigned long (*fv_calls)(const char *);
static int (*fv_live)(void);
static int (*fv_is_mr)(const struct ibv_mr *);

static CUmemGenericAllocationHandle create(size_t sz)
{
	CUmemAllocationProp prop;
	CUmemGenericAllocationHandle h = 0;

	memset(&prop, 0, sizeof(prop));
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = 0;
	prop.allocFlags.gpuDirectRDMACapable = 1;
	if (cuMemCreate(&h, sz, &prop, 0))
		printf("FAIL cuMemCreate\n");
	return h;
}

static void map(CUdeviceptr va, CUmemGenericAllocationHandle h)
{
	CUmemAccessDesc a;

	memset(&a, 0, sizeof(a));
	a.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	a.location.id = 0;
	a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	if (cuMemMap(va, CHUNK, 0, h, 0) || cuMemSetAccess(va, CHUNK, &a, 1))
		printf("FAIL map\n");
}

static int sync_attr(CUdeviceptr p)
{
	int v = -1;
	CUresult rc = cuPointerGetAttribute(&v, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, p);

	return rc ? -(int)rc : v;
}

int main(void)
{
	struct ibv_context *(*fv_open)(void);
	struct ibv_pd *(*alloc_pd)(struct ibv_context *);
	struct gdrhook_preload gh;
	struct gdrhook_stats st = { .size = sizeof(st) };
	struct ibv_pd *pd;
	struct ibv_mr *m0, *m1, *m2, *h1, *h2, *mr;
	CUmemGenericAllocationHandle h[3];
	CUcontext cu;
	CUdeviceptr va, d, pool, big[3];
	CUstream s;
	unsigned long dm;
	unsigned int fl = 0;
	int bad = 0, live;
	void *lib = dlopen("libibverbs.so.1", RTLD_NOW);
	static const size_t sizes[3] = { MiB, GiB, 40 * GiB };

	if (!lib || gdrhook_preload_open(&gh)) {
		printf("FAIL: needs the fake libibverbs and the shim preloaded\n");
		return 1;
	}
	fv_open = (struct ibv_context *(*)(void))dlsym(lib, "fakeverbs_open");
	alloc_pd = (struct ibv_pd *(*)(struct ibv_context *))dlsym(lib, "ibv_alloc_pd");
	reg = (struct ibv_mr *(*)(struct ibv_pd *, void *, size_t, int))dlvsym(
		lib, "ibv_reg_mr", "IBVERBS_1.1");
	dereg = (int (*)(struct ibv_mr *))dlvsym(lib, "ibv_dereg_mr", "IBVERBS_1.1");
	fv_calls = (unsigned long (*)(const char *))dlsym(lib, "fakeverbs_calls");
	fv_live = (int (*)(void))dlsym(lib, "fakeverbs_live_mrs");
	fv_is_mr = (int (*)(const struct ibv_mr *))dlsym(lib, "fakeverbs_is_mr");
	if (!fv_open || !alloc_pd || !reg || !dereg || !fv_calls || !fv_live ||
	    !fv_is_mr) {
		printf("FAIL: fake libibverbs lacks an entry point\n");
		return 1;
	}
	CK(cuInit(0));
	CK(cuDevicePrimaryCtxRetain(&cu, 0));
	CK(cuCtxSetCurrent(cu));
	pd = alloc_pd(fv_open());
	if (!pd) {
		printf("FAIL: no protection domain\n");
		return 1;
	}

	printf("== 1. spans of VMM mappings (3 chunks of 20 MiB)\n");
	CK(cuMemAddressReserve(&va, 3 * CHUNK, 0, 0, 0));
	for (int i = 0; i < 3; i++) {
		h[i] = create(CHUNK);
		map(va + i * CHUNK, h[i]);
	}
	CK(cuCtxGetFlags(&fl));
	printf("ctx flags before any registration: %#x\n", fl);
	dm = fv_calls("ibv_reg_dmabuf_mr");
	m0 = reg(pd, (void *)(va + CHUNK + 4096), MiB, ACC);
	m1 = reg(pd, (void *)(va + CHUNK - MiB), 2 * MiB, ACC);
	m2 = reg(pd, (void *)(va + CHUNK - MiB), CHUNK + 2 * MiB, ACC);
	EXPECT(m0 && m1 && m2, "registrations");
	if (!m0 || !m1 || !m2)
		return 1;
	EXPECT(!fv_is_mr(m0) && !fv_is_mr(m1) && !fv_is_mr(m2),
	       "all three served by the cache");
	EXPECT(fv_calls("ibv_reg_dmabuf_mr") == dm + 3,
	       "dma-buf registrations %lu", fv_calls("ibv_reg_dmabuf_mr") - dm);
	h1 = reg(pd, (void *)(va + CHUNK - 4096), 8192, ACC);
	h2 = reg(pd, (void *)va, 3 * CHUNK, ACC);
	EXPECT(h1 && h2 && h1->lkey == m1->lkey && h2->lkey == m2->lkey,
	       "hits on the 2- and 3-chunk spans");
	EXPECT(fv_calls("ibv_reg_dmabuf_mr") == dm + 3, "no new registration");
	CK(cuCtxGetFlags(&fl));
	EXPECT(fl & CU_CTX_SYNC_MEMOPS, "flags %#x", fl);
	printf("VMM pointer attribute after: %d\n", sync_attr(va));
	live = fv_live();
	CK(cuMemUnmap(va + CHUNK, CHUNK));
	printf("NIC registrations live: %d before the unmap, %d after\n", live,
	       fv_live());
	EXPECT(fv_live() == live - 3, "all three (each touches the middle) gone");
	EXPECT(dereg(m0) == 0 && dereg(m1) == 0 && dereg(m2) == 0 &&
	       dereg(h1) == 0 && dereg(h2) == 0, "revoked MRs deregister");
	CK(cuMemRelease(h[1]));
	h[1] = create(CHUNK);
	map(va + CHUNK, h[1]);
	dm = fv_calls("ibv_reg_dmabuf_mr");
	m1 = reg(pd, (void *)(va + CHUNK - MiB), 2 * MiB, ACC);
	EXPECT(m1 && !fv_is_mr(m1) && fv_calls("ibv_reg_dmabuf_mr") == dm + 1,
	       "remap: a miss");
	if (m1)
		dereg(m1);

	printf("== 2. SYNC_MEMOPS: device and pool memory\n");
	CK(cuMemAlloc(&d, 4 * MiB));
	CK(cuStreamCreate(&s, 0));
	CK(cuMemAllocAsync(&pool, 4 * MiB, s));
	CK(cuStreamSynchronize(s));
	mr = reg(pd, (void *)d, 4096, ACC);
	EXPECT(mr != NULL, "device registration");
	CK(cuCtxGetFlags(&fl));
	printf("after device registration: ctx flags %#x, pointer attribute %d\n",
	       fl, sync_attr(d));
	dereg(mr);
	mr = reg(pd, (void *)pool, 4096, ACC);
	EXPECT(mr != NULL, "pool registration (wrapped, not cached)");
	printf("after pool registration: ctx flags %#x, pointer attribute %d\n",
	       fl, sync_attr(pool));
	EXPECT(fl & CU_CTX_SYNC_MEMOPS, "context has SYNC_MEMOPS");
	if (mr)
		dereg(mr);
	CK(cuMemFreeAsync(pool, s));
	CK(cuStreamSynchronize(s));
	CK(cuMemFree(d));

	printf("== 3. BAR1 budget: 1 MiB, 1 GiB, 40 GiB (the NIC prints the import size)\n");
	for (int i = 0; i < 3; i++) {
		CK(cuMemAlloc(&big[i], sizes[i]));
		fflush(stdout);
		mr = reg(pd, (void *)(big[i] + 4096), 4096, ACC);
		fflush(stderr);
		EXPECT(mr && !fv_is_mr(mr), "%zu-byte allocation registered",
		       sizes[i]);
		if (mr)
			dereg(mr);
		CK(cuMemFree(big[i]));
	}
	EXPECT(fv_live() == 1, "only the remapped span is cached, live %d", fv_live());
	for (int i = 0; i < 3; i++)
		cuMemUnmap(va + i * CHUNK, CHUNK);
	EXPECT(fv_live() == 0, "everything deregistered, live %d", fv_live());
	gh.get_stats(&st);
	printf("audit checks %llu, disagreements %llu\n",
	       (unsigned long long)st.audit_checks,
	       (unsigned long long)st.audit_disagreements);
	EXPECT(st.audit_disagreements == 0, "no audit disagreement");
	printf("%s vmm_span_proof (%d failed)\n", bad ? "FAIL" : "PASS", bad);
	return bad ? 1 : 0;
}
