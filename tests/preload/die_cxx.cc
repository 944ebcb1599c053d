// SPDX-License-Identifier: MIT
// A CUDA program that dies of an uncaught C++ exception after 5
// allocation/free pairs (tests/preload/test_evlog_proc.c: a crash keeps
// the record).
#include <cuda.h>
#include <stdexcept>

int main()
{
	CUcontext ctx;
	CUdeviceptr p;

	if (cuInit(0) || cuDevicePrimaryCtxRetain(&ctx, 0) ||
	    cuCtxSetCurrent(ctx))
		return 2;
	for (int i = 0; i < 5; i++) {
		if (cuMemAlloc(&p, 4096) || cuMemFree(p))
			return 3;
	}
	throw std::runtime_error("nobody catches this");
}
