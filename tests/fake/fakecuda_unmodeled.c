// SPDX-License-Identifier: MIT
/*
 * Entry points that create GPU-accessible memory which the double does not
 * model (array mapping, graphics interop, multicast).  They exist so the shim's wrappers for them can be
 * reached through every route and tested for call-through, result and
 * errno; calling them answers CUDA_ERROR_NOT_SUPPORTED with no effect.
 */
#include "fakecuda_internal.h"

FC_API CUresult CUDAAPI cuMemMapArrayAsync(CUarrayMapInfo *mapInfoList,
					   unsigned int count, CUstream hStream)
{
	FC_ENTER();
	return CUDA_ERROR_NOT_SUPPORTED;
}

FC_API CUresult CUDAAPI cuMemMapArrayAsync_ptsz(CUarrayMapInfo *mapInfoList,
						unsigned int count,
						CUstream hStream)
{
	FC_ENTER();
	return CUDA_ERROR_NOT_SUPPORTED;
}

FC_API CUresult CUDAAPI cuGraphicsResourceGetMappedPointer_v2(
	CUdeviceptr *pDevPtr, size_t *pSize, CUgraphicsResource resource)
{
	FC_ENTER();
	return CUDA_ERROR_NOT_SUPPORTED;
}

FC_API CUresult CUDAAPI cuMulticastBindMem(CUmemGenericAllocationHandle mcHandle,
					   size_t mcOffset,
					   CUmemGenericAllocationHandle memHandle,
					   size_t memOffset, size_t size,
					   unsigned long long flags)
{
	FC_ENTER();
	return CUDA_ERROR_NOT_SUPPORTED;
}

FC_API CUresult CUDAAPI cuMulticastBindAddr(CUmemGenericAllocationHandle mcHandle,
					    size_t mcOffset, CUdeviceptr memptr,
					    size_t size,
					    unsigned long long flags)
{
	FC_ENTER();
	return CUDA_ERROR_NOT_SUPPORTED;
}
