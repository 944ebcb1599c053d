// SPDX-License-Identifier: MIT
/*
 * Registration-cache churn over verbs: why a pin-down cache must see
 * frees.  Each round allocates GPU memory, registers it with ibv_reg_mr
 * (twice: the second is what a cache hit looks like) and frees it while
 * the first registration is still held, as a library's own registration
 * cache does; the next round allocates again: the CUDA driver hands out
 * the same address with different physical pages.  A cache keyed on the
 * address would hand back the old registration; gdrhook revokes it before
 * the free (a stale registration averted: the program's later
 * ibv_dereg_mr is a no-op), and the registry generation printed each
 * round changes on every free and reallocation, which is what a cache
 * checks instead of asking the driver.  Without gdrhook the example
 * deregisters before the free instead.
 *
 *   make examples
 *   LD_PRELOAD=build/libgdrhook.so GDRHOOK_TRACE=trace.jsonl \
 *       build/examples/regcache_churn [ROUNDS [RDMA-DEVICE]]
 *   scripts/tools/gdrhook-trace summary trace.jsonl
 *
 * ROUNDS defaults to 4; RDMA-DEVICE (e.g. mlx5_0) to the first device.
 * With gdrhook preloaded, ibv_reg_mr of GPU memory is served by its
 * registration cache (GDRHOOK_BACKEND, GDRHOOK_CACHE_MAX_*); the log then
 * holds pin/reg/hit/miss/revoke records.  On a machine with no RDMA device
 * (or on the CUDA driver test double: add LD_LIBRARY_PATH=build/fake) it
 * says so and shows the free/reallocate/generation part only.  Without
 * gdrhook it prints the driver's buffer ID instead of the generation.
 */
#include <cuda.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gdrhook_preload.h"

#define BUF_SIZE	(2u << 20)
/*
 * Local access: the cache serves such registrations from one cached
 * registration of the allocation, so the second is a hit.  With remote
 * access, GDRHOOK_REMOTE_EXPOSURE=exact (the default) makes each its own
 * NIC registration over the cached pin.
 */
#define ACCESS		IBV_ACCESS_LOCAL_WRITE

#define CK(call)							\
	do {								\
		CUresult rc_ = (call);					\
		if (rc_ != CUDA_SUCCESS) {				\
			const char *s_ = NULL;				\
			cuGetErrorName(rc_, &s_);			\
			fprintf(stderr, "%s: %s\n", #call, s_ ? s_ : "?"); \
			return 1;					\
		}							\
	} while (0)

static struct gdrhook_preload gh;
static int have_gh;

/* The generation gdrhook's registry gives the buffer (0: not tracked). */
static unsigned long long registry_gen(CUdeviceptr p)
{
	struct gdrhook_range r;

	if (have_gh && gh.lookup((void *)(uintptr_t)p, BUF_SIZE, &r) == 0)
		return (unsigned long long)r.gen;
	return 0;
}

/* What a cache without gdrhook would check on every hit: a driver call. */
static unsigned long long buffer_id(CUdeviceptr p)
{
	unsigned long long id = 0;

	if (cuPointerGetAttribute(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID, p) !=
	    CUDA_SUCCESS)
		return 0;
	return id;
}

static struct ibv_mr *reg(struct ibv_pd *pd, CUdeviceptr p, const char *what)
{
	struct ibv_mr *mr = ibv_reg_mr(pd, (void *)(uintptr_t)p, BUF_SIZE,
				       ACCESS);

	if (mr)
		printf("  %-26s lkey %#x rkey %#x\n", what, mr->lkey,
		       mr->rkey);
	else
		printf("  %-26s failed: %s%s\n", what, strerror(errno),
		       errno == EFAULT || errno == EINVAL ?
		       " (GPU memory needs nvidia-peermem or dma-buf)" : "");
	return mr;
}

/* The first RDMA device, or the one named; NULL (and why) when none. */
static struct ibv_context *open_rdma(const char *name)
{
	struct ibv_device **list;
	struct ibv_context *ctx = NULL;
	int n = 0;

	list = ibv_get_device_list(&n);
	if (!list || n == 0) {
		printf("no RDMA device here (ibv_get_device_list: %s): "
		       "registration skipped, showing the free/reallocate/"
		       "generation part only\n",
		       list ? "no devices" : strerror(errno));
		if (list)
			ibv_free_device_list(list);
		return NULL;
	}
	for (int i = 0; i < n; i++) {
		if (name && strcmp(ibv_get_device_name(list[i]), name))
			continue;
		ctx = ibv_open_device(list[i]);
		if (ctx)
			printf("RDMA device %s\n", ibv_get_device_name(list[i]));
		else
			printf("RDMA device %s: cannot open it: %s\n",
			       ibv_get_device_name(list[i]), strerror(errno));
		break;
	}
	if (!ctx && name)
		printf("RDMA device %s not found or not usable: registration "
		       "skipped\n", name);
	ibv_free_device_list(list);
	return ctx;
}

/* The cache's counters, each with what it means. */
static void print_cache(const struct gdrhook_stats *st)
{
	printf("registration cache (gdrhook's counters):\n"
	       "  hits                        %4llu  served from the cache: no pin, no driver call\n"
	       "  misses                      %4llu  had to pin and register\n"
	       "  stale registrations averted %4llu  dropped before the memory under them was freed\n"
	       "  revoked while held          %4llu  of those, still held by the program then\n",
	       (unsigned long long)st->rcache_hits,
	       (unsigned long long)st->rcache_misses,
	       (unsigned long long)st->stale_averted,
	       (unsigned long long)st->revoked);
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 4;
	struct ibv_context *ibv = NULL;
	struct ibv_pd *pd = NULL;
	unsigned long long prev_gen = 0;
	CUdeviceptr prev = 0;
	CUcontext ctx;

	if (rounds < 1) {
		fprintf(stderr, "usage: %s [ROUNDS [RDMA-DEVICE]]\n", argv[0]);
		return 2;
	}
	have_gh = gdrhook_preload_open(&gh) == 0;
	printf("gdrhook %s\n", have_gh ? "is preloaded" :
	       "is not loaded (showing the driver's buffer ID instead)");
	CK(cuInit(0));
	CK(cuDevicePrimaryCtxRetain(&ctx, 0));
	CK(cuCtxSetCurrent(ctx));

	ibv = open_rdma(argc > 2 ? argv[2] : NULL);
	if (ibv) {
		pd = ibv_alloc_pd(ibv);
		if (!pd) {
			printf("ibv_alloc_pd: %s: registration skipped\n",
			       strerror(errno));
			ibv_close_device(ibv);
			ibv = NULL;
		}
	}

	for (int i = 1; i <= rounds; i++) {
		struct ibv_mr *mr1;
		unsigned long long gen;
		CUdeviceptr p;

		CK(cuMemAlloc(&p, BUF_SIZE));
		gen = have_gh ? registry_gen(p) : buffer_id(p);
		printf("round %d: cuMemAlloc 2 MiB at %#llx%s\n", i,
		       (unsigned long long)p,
		       p == prev ? " (the address just freed)" : "");
		printf("  %-26s %llu%s\n", have_gh ? "registry generation" :
		       "driver buffer ID", gen, p == prev && gen != prev_gen ?
		       " (changed: a registration made before is stale)" : "");
		mr1 = pd ? reg(pd, p, "ibv_reg_mr") : NULL;
		if (mr1) {
			struct ibv_mr *mr2 = reg(pd, p, "ibv_reg_mr again (a hit)");

			if (mr2)
				ibv_dereg_mr(mr2);
			/* Held across the free only where gdrhook revokes it. */
			if (!have_gh) {
				ibv_dereg_mr(mr1);
				mr1 = NULL;
			}
		}
		CK(cuMemFree(p));
		if (have_gh)
			printf("  cuMemFree%s; the registry %s\n",
			       mr1 ? " with the registration held" : "",
			       registry_gen(p) ? "still tracks it (BUG)" :
			       "no longer tracks it");
		else
			printf("  cuMemFree\n");
		if (mr1)
			printf("  ibv_dereg_mr afterwards    %s\n",
			       ibv_dereg_mr(mr1) ? "failed (BUG)" :
			       "0 (revoked before the free: nothing left to undo)");
		prev = p;
		prev_gen = gen;
	}

	if (pd)
		ibv_dealloc_pd(pd);
	if (ibv)
		ibv_close_device(ibv);
	if (have_gh) {
		struct gdrhook_stats st;

		memset(&st, 0, sizeof(st));
		st.size = sizeof(st);
		if (gh.get_stats(&st) == 0) {
			printf("gdrhook saw %llu allocations and %llu frees; "
			       "%llu live; registry %s\n",
			       (unsigned long long)st.allocs,
			       (unsigned long long)st.frees,
			       (unsigned long long)st.live,
			       gh.trusted() ? "trusted" : "UNTRUSTED");
			if (pd)
				print_cache(&st);
		}
	}
	CK(cuDevicePrimaryCtxRelease(0));
	return 0;
}
