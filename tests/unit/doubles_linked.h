/* SPDX-License-Identifier: MIT */
/*
 * For the unit tests linked with the CUDA driver double and the
 * libibverbs double (tests/unit/rules.mk): the test calls them directly,
 * as a program linked with libcuda and libibverbs would, and the module
 * under test reaches the same libraries through the platform layer.
 */
#ifndef GH_TEST_DOUBLES_LINKED_H
#define GH_TEST_DOUBLES_LINKED_H

#include <cuda.h>
#include <stdint.h>
#include <infiniband/verbs.h>

#include "harness.h"
#include "fakecuda.h"
#include "fakeverbs.h"

#define CU_OK(call) CHECK_EQ((call), CUDA_SUCCESS)

/* Device dev's primary context, made current on this thread. */
static inline CUcontext cu_primary(int dev)
{
	CUcontext ctx = NULL;

	CU_OK(cuInit(0));
	CU_OK(cuDevicePrimaryCtxRetain(&ctx, dev));
	CU_OK(cuCtxSetCurrent(ctx));
	return ctx;
}

static inline CUdeviceptr cu_alloc(size_t n)
{
	CUdeviceptr d = 0;

	CU_OK(cuMemAlloc(&d, n));
	return d;
}

static inline uint64_t cu_buffer_id(CUdeviceptr d)
{
	unsigned long long id = 0;

	CU_OK(cuPointerGetAttribute(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID, d));
	return id;
}

/* A PD of the fake NIC (fakenic0). */
static inline struct ibv_pd *nic_pd(void)
{
	struct ibv_context *c = fakeverbs_open();
	struct ibv_pd *pd = c ? ibv_alloc_pd(c) : NULL;

	if (!pd)
		TH_FAIL("no PD on the fake NIC (profile %s)",
			fakeverbs_provider() ? fakeverbs_provider() : "?");
	return pd;
}

#endif
