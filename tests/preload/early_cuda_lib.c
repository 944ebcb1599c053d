// SPDX-License-Identifier: MIT
/*
 * A library whose constructor makes the program's first CUDA calls, as a
 * framework or plugin that sets the GPU up at load does (EARLY_CUDA=lib;
 * test_init runs it through early_cuda).  The loader runs a
 * program's libraries' constructors before a preloaded library's, so
 * gdrhook's hooks meet these calls before any constructor of
 * libgdrhook.so ran.
 */
#include <cuda.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int early_cuda_alloc(void);

/* A context and one device allocation, kept: 0, else -1. */
__attribute__((visibility("default"))) int early_cuda_alloc(void)
{
	CUdeviceptr p;
	CUcontext ctx;
	CUdevice dev;

	if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&dev, 0) != CUDA_SUCCESS ||
	    cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS ||
	    cuCtxSetCurrent(ctx) != CUDA_SUCCESS ||
	    cuMemAlloc(&p, 1 << 20) != CUDA_SUCCESS)
		return -1;
	return 0;
}

__attribute__((constructor)) static void early_lib(void)
{
	const char *when = getenv("EARLY_CUDA");

	if (when && !strcmp(when, "lib") && early_cuda_alloc())
		_exit(3);
}
