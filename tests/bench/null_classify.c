// SPDX-License-Identifier: MIT
/*
 * null_classify: the floor of any LD_PRELOAD answer to an MPI's buffer
 * classification.  It wraps the three entry points Open MPI 5.0 asks of
 * every message's buffer (cuMemRetainAllocationHandle,
 * cuPointerGetAttribute, cuPointerGetAttributes) and answers each with
 * what the driver says of host memory, without looking at the pointer:
 * no lookup, no check, nothing shared.  So it is wrong for GPU memory
 * and only ever runs where every buffer is host memory
 * (tests/gpu/mpi-check --small, host buffers): there it gives the same
 * answers as the driver, and its cost is the call itself.  The gap
 * between Open MPI with CUDA support on under this library and with it
 * off is what a classification answered by any preloaded library costs
 * at least; gdrhook's figure is read against it.
 *
 * Values: those the driver gives for a pointer it does not know
 * (H200, driver 580; src/hooks/ptrattr.c, negative_value()).
 */
#include <stdint.h>
#include <string.h>

#include <cuda.h>

#define NC_EXPORT __attribute__((visibility("default")))

NC_EXPORT CUresult cuMemRetainAllocationHandle(
	CUmemGenericAllocationHandle *handle, void *addr)
{
	(void)handle;
	(void)addr;
	return CUDA_ERROR_INVALID_VALUE;
}

NC_EXPORT CUresult cuPointerGetAttribute(void *data, CUpointer_attribute a,
					 CUdeviceptr ptr)
{
	(void)data;
	(void)a;
	(void)ptr;
	return CUDA_ERROR_INVALID_VALUE;
}

NC_EXPORT CUresult cuPointerGetAttributes(unsigned int n,
					  CUpointer_attribute *at,
					  void **data, CUdeviceptr ptr)
{
	uint64_t v;
	uint32_t w;

	for (unsigned int i = 0; i < n; i++) {
		switch (at[i]) {
		case CU_POINTER_ATTRIBUTE_HOST_POINTER:
			v = ptr;
			memcpy(data[i], &v, 8);
			break;
		case CU_POINTER_ATTRIBUTE_CONTEXT:
		case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
		case CU_POINTER_ATTRIBUTE_BUFFER_ID:
		case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
			v = 0;
			memcpy(data[i], &v, 8);
			break;
		case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
			w = (uint32_t)-2;
			memcpy(data[i], &w, 4);
			break;
		default:
			w = 0;
			memcpy(data[i], &w, 4);
			break;
		}
	}
	return CUDA_SUCCESS;
}
