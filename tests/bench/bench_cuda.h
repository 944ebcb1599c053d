/* SPDX-License-Identifier: MIT */
/*
 * For the benchmarks that link the CUDA runtime and driver: a failed
 * call ends the program (exit 2) with its name and error, so that no
 * figure is printed of calls that failed.
 */
#ifndef GH_BENCH_CUDA_H
#define GH_BENCH_CUDA_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "bench_util.h"

static inline void die_cu(const char *what, CUresult rc)
{
	const char *name = NULL;

	cuGetErrorName(rc, &name);
	fprintf(stderr, "%s: %s: %s (%d)\n", program_invocation_short_name,
		what, name ? name : "?", (int)rc);
	exit(2);
}

static inline void die_rt(const char *what, cudaError_t e)
{
	fprintf(stderr, "%s: %s: %s (%d)\n", program_invocation_short_name,
		what, cudaGetErrorName(e), (int)e);
	exit(2);
}

#define CK(call) do { CUresult rc_ = (call); \
		if (rc_ != CUDA_SUCCESS) die_cu(#call, rc_); } while (0)
#define CKRT(call) do { cudaError_t e_ = (call); \
		if (e_ != cudaSuccess) die_rt(#call, e_); } while (0)

/* The device's name and the driver's and runtime's versions, as R lines. */
static inline void print_versions(CUdevice dev)
{
	char name[256] = "";
	int dv = 0, rv = 0;

	CK(cuDeviceGetName(name, sizeof(name), dev));
	CK(cuDriverGetVersion(&dv));
	CKRT(cudaRuntimeGetVersion(&rv));
	printf("R device %s\nR cuda_driver_api %d.%d\nR cuda_runtime %d.%d\n",
	       name, dv / 1000, dv % 1000 / 10, rv / 1000, rv % 1000 / 10);
}

#endif /* GH_BENCH_CUDA_H */
