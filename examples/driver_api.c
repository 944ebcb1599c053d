// SPDX-License-Identifier: MIT
/*
 * A small CUDA driver-API program that allocates and frees GPU memory
 * every way an RDMA application might: linear, pitched, managed, pinned
 * host, stream-ordered, and a VMM mapping.  It knows nothing of gdrhook:
 *
 *   LD_PRELOAD=build/libgdrhook.so GDRHOOK_TRACE=trace.jsonl build/examples/driver_api
 *   scripts/tools/gdrhook-trace summary trace.jsonl
 *
 * or just `make run`.  On a machine without a GPU add
 * LD_LIBRARY_PATH=build/fake (the CUDA driver test double).
 *
 * With gdrhook preloaded it also shows the registry answering the
 * question a registration cache asks on every hit ("is this buffer still
 * the one I registered?") without a driver call.
 */
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "gdrhook_preload.h"

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

static void show(const char *what, CUdeviceptr p)
{
	struct gdrhook_range r;

	if (!have_gh) {
		printf("%-28s %#llx\n", what, (unsigned long long)p);
		return;
	}
	if (gh.lookup((void *)(uintptr_t)p, 1, &r) == 0)
		printf("%-28s %#llx  registry: %llu bytes, gen %llu, dev %d\n",
		       what, (unsigned long long)p,
		       (unsigned long long)r.size, (unsigned long long)r.gen,
		       r.dev);
	else
		printf("%-28s %#llx  registry: not tracked\n", what,
		       (unsigned long long)p);
}

int main(void)
{
	CUmemAllocationProp prop;
	CUmemGenericAllocationHandle handle;
	CUdeviceptr lin, lin2, pitched, managed, async, va;
	CUcontext ctx;
	size_t pitch, gran;
	void *host;

	have_gh = gdrhook_preload_open(&gh) == 0;
	printf("gdrhook %s\n", have_gh ? "is preloaded" : "is not loaded");
	CK(cuInit(0));
	CK(cuDevicePrimaryCtxRetain(&ctx, 0));
	CK(cuCtxSetCurrent(ctx));

	CK(cuMemAlloc(&lin, 1 << 20));
	show("cuMemAlloc 1 MiB", lin);
	CK(cuMemFree(lin));
	CK(cuMemAlloc(&lin2, 1 << 20));
	show("again (same address?)", lin2);
	CK(cuMemAllocPitch(&pitched, &pitch, 1000, 100, 4));
	show("cuMemAllocPitch", pitched);
	CK(cuMemAllocManaged(&managed, 1 << 16, CU_MEM_ATTACH_GLOBAL));
	show("cuMemAllocManaged", managed);
	CK(cuMemHostAlloc(&host, 1 << 16, 0));
	show("cuMemHostAlloc", (CUdeviceptr)(uintptr_t)host);
	CK(cuMemAllocAsync(&async, 1 << 20, NULL));
	show("cuMemAllocAsync", async);

	memset(&prop, 0, sizeof(prop));
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = 0;
	CK(cuMemGetAllocationGranularity(&gran, &prop,
					 CU_MEM_ALLOC_GRANULARITY_MINIMUM));
	CK(cuMemAddressReserve(&va, gran, 0, 0, 0));
	CK(cuMemCreate(&handle, gran, &prop, 0));
	CK(cuMemMap(va, gran, 0, handle, 0));
	show("cuMemMap", va);

	CK(cuMemUnmap(va, gran));
	CK(cuMemRelease(handle));
	CK(cuMemAddressFree(va, gran));
	CK(cuMemFreeAsync(async, NULL));
	CK(cuStreamSynchronize(NULL));
	CK(cuMemFreeHost(host));
	CK(cuMemFree(managed));
	CK(cuMemFree(pitched));
	show("before the last free", lin2);
	CK(cuMemFree(lin2));
	show("after the last free", lin2);
	CK(cuDevicePrimaryCtxRelease(0));
	return 0;
}
