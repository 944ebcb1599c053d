// SPDX-License-Identifier: MIT
/*
 * The dmabuf backend against real GPU memory, on a machine with no NIC:
 * the fake libibverbs (build/fakeverbs) stands in for the NIC and imports
 * the dma-buf the real driver exports, checking it is one and covers the
 * range (it cannot touch GPU pages).  Run under the shim:
 *
 *   LD_LIBRARY_PATH=build/fakeverbs LD_PRELOAD=$PWD/build/libgdrhook.so \
 *     GDRHOOK_BACKEND=dmabuf GDRHOOK_TRACE=dmabuf.jsonl build/gpu/dmabuf_proof
 *
 * Exits 0 when the first registration pinned the whole allocation through
 * a dma-buf and the free unpinned it first; with
 * GDRHOOK_REMOTE_EXPOSURE=allocation the later ones were cache hits (one
 * ibv_reg_dmabuf_mr in all), with exact (the default) one dma-buf
 * registration (the parent) and a memory window per remote-access
 * registration; GDRHOOK_WINDOWS=0: each its own ibv_reg_dmabuf_mr of the
 * one exported dma-buf.
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

int main(void)
{
	struct ibv_context *(*fv_open)(void);
	struct ibv_pd *(*alloc_pd)(struct ibv_context *);
	struct ibv_mr *(*reg)(struct ibv_pd *, void *, size_t, int);
	int (*dereg)(struct ibv_mr *);
	unsigned long (*fv_calls)(const char *);
	struct gdrhook_preload gh;
	struct gdrhook_stats st = { .size = sizeof(st) };
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr[3];
	CUcontext cu;
	CUdeviceptr d;
	const size_t size = 64 << 20;
	const char *expo = getenv("GDRHOOK_REMOTE_EXPOSURE");
	const char *win = getenv("GDRHOOK_WINDOWS");
	int exact = !expo || strcmp(expo, "allocation");
	int windows = exact && (!win || strcmp(win, "0"));
	unsigned long want = exact && !windows ? 3 : 1;
	void *h = dlopen("libibverbs.so.1", RTLD_NOW);

	if (!h || gdrhook_preload_open(&gh)) {
		printf("FAIL: needs the fake libibverbs and the shim preloaded\n");
		return 1;
	}
	fv_open = (struct ibv_context *(*)(void))dlsym(h, "fakeverbs_open");
	alloc_pd = (struct ibv_pd *(*)(struct ibv_context *))dlsym(h, "ibv_alloc_pd");
	reg = (struct ibv_mr *(*)(struct ibv_pd *, void *, size_t, int))dlvsym(
		h, "ibv_reg_mr", "IBVERBS_1.1");
	dereg = (int (*)(struct ibv_mr *))dlvsym(h, "ibv_dereg_mr", "IBVERBS_1.1");
	fv_calls = (unsigned long (*)(const char *))dlsym(h, "fakeverbs_calls");
	if (!fv_open || !alloc_pd || !reg || !dereg || !fv_calls) {
		printf("FAIL: fake libibverbs lacks an entry point\n");
		return 1;
	}
	CK(cuInit(0));
	CK(cuDevicePrimaryCtxRetain(&cu, 0));
	CK(cuCtxSetCurrent(cu));
	CK(cuMemAlloc(&d, size));
	ctx = fv_open();
	pd = ctx ? alloc_pd(ctx) : NULL;
	if (!pd) {
		printf("FAIL: no protection domain\n");
		return 1;
	}
	/* Three registrations inside one allocation: one pin, two hits. */
	mr[0] = reg(pd, (void *)(uintptr_t)(d + 4096), 1 << 20,
		    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	mr[1] = reg(pd, (void *)(uintptr_t)(d + (8 << 20)), 4 << 20,
		    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	mr[2] = reg(pd, (void *)(uintptr_t)d, size,
		    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	for (int i = 0; i < 3; i++) {
		if (!mr[i]) {
			printf("FAIL: registration %d\n", i);
			return 1;
		}
		printf("registration %d: lkey %#x rkey %#x addr %p len %zu\n", i,
		       mr[i]->lkey, mr[i]->rkey, mr[i]->addr, mr[i]->length);
	}
	printf("NIC saw %lu ibv_reg_dmabuf_mr, %lu ibv_reg_mr, %lu window binds\n",
	       fv_calls("ibv_reg_dmabuf_mr"), fv_calls("ibv_reg_mr"),
	       fv_calls("bind_mw"));
	for (int i = 0; i < 3; i++)
		dereg(mr[i]);
	CK(cuMemFree(d));
	gh.get_stats(&st);
	printf("NIC saw %lu deregistrations after the free\n",
	       fv_calls("ibv_dereg_mr"));
	if (fv_calls("ibv_reg_dmabuf_mr") != want) {
		printf("FAIL: want exactly %lu dma-buf registration(s) (%s exposure%s)\n",
		       want, exact ? "exact" : "allocation",
		       windows ? ", windows" : "");
		return 1;
	}
	if (windows && fv_calls("bind_mw") < 3) {
		printf("FAIL: want a window bound per registration\n");
		return 1;
	}
	printf("PASS dmabuf backend on real GPU memory\n");
	return 0;
}
