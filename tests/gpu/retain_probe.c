// SPDX-License-Identifier: MIT
/*
 * What the real driver answers to cuMemRetainAllocationHandle for each
 * kind of memory, with a context current and with none: the codes
 * gdrhook answers from its registry (src/hooks/ptrattr.c) must match.
 * Build and run on a GPU host: cc -I/usr/local/cuda/include
 * tests/gpu/retain_probe.c -o retain_probe -lcuda && ./retain_probe
 */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>

static void probe(const char *what, void *p)
{
	CUmemGenericAllocationHandle h = 0;
	CUresult rc = cuMemRetainAllocationHandle(&h, p);

	printf("retain %-24s rc=%d\n", what, (int)rc);
	if (rc == CUDA_SUCCESS)
		cuMemRelease(h);
}

int main(void)
{
	CUcontext ctx;
	CUdeviceptr d, m;
	CUstream s;
	void *hostalloc, *reg = aligned_alloc(4096, 1 << 20);
	static char bss[4096];
	char *heap = malloc(4096);
	CUdeviceptr pool;

	if (cuInit(0) || cuDevicePrimaryCtxRetain(&ctx, 0) ||
	    cuCtxSetCurrent(ctx) || cuMemAlloc(&d, 4096) ||
	    cuMemAllocManaged(&m, 4096, CU_MEM_ATTACH_GLOBAL) ||
	    cuMemHostAlloc(&hostalloc, 4096, 0) ||
	    cuMemHostRegister(reg, 1 << 20, 0) ||
	    cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) ||
	    cuMemAllocAsync(&pool, 4096, s) || cuStreamSynchronize(s)) {
		fprintf(stderr, "retain_probe: CUDA set-up failed\n");
		return 1;
	}
	for (int pass = 0; pass < 2; pass++) {
		printf("# %s\n", pass ? "no context current" : "context current");
		probe("malloc", heap);
		probe("static", bss);
		probe("cuMemAlloc", (void *)(uintptr_t)d);
		probe("cuMemAllocManaged", (void *)(uintptr_t)m);
		probe("cuMemHostAlloc", hostalloc);
		probe("cuMemHostRegister", reg);
		probe("cuMemAllocAsync", (void *)(uintptr_t)pool);
		probe("NULL", NULL);
		cuCtxSetCurrent(NULL);
	}
	return 0;
}
