/* SPDX-License-Identifier: MIT */
/*
 * Fake CUDA driver: linear device memory and host memory.
 */
#include "fakecuda_internal.h"
#include "fakecuda.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------ linear memory */

static CUresult mem_alloc(CUdeviceptr *dptr, size_t size, enum fc_kind kind)
{
	struct fc_alloc *a;
	CUcontext ctx;
	uintptr_t va;
	size_t span;
	int small;
	CUresult rc;

	if (fc_check_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	fc_lock();
	rc = fc_current_ctx(&ctx);
	if (rc)
		goto out;
	if (!dptr || !size) {
		rc = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	rc = fc_dev_block_alloc(ctx->dev, size, &va, &span, &small);
	if (rc)
		goto out;
	a = fc_reg_add(kind, va, size, ctx->dev, ctx);
	if (!a) {
		fc_dev_block_free(ctx->dev, va, span, small);
		rc = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	a->span_base = va;
	a->span = span;
	a->small = small;
	*dptr = va;
	fc_hold();
	fc_log("alloc %zu -> %#lx id %llu", size, (unsigned long)va,
	       a->buffer_id);
out:
	fc_unlock();
	return rc;
}

FC_API CUresult CUDAAPI cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
	FC_ENTER();
	return mem_alloc(dptr, bytesize, FC_K_DEVICE);
}

FC_API CUresult CUDAAPI cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch,
					   size_t WidthInBytes, size_t Height,
					   unsigned int ElementSizeBytes)
{
	size_t pitch;
	CUresult rc;

	FC_ENTER_INIT();
	if (!pPitch || !WidthInBytes || !Height ||
	    (ElementSizeBytes != 4 && ElementSizeBytes != 8 &&
	     ElementSizeBytes != 16))
		return CUDA_ERROR_INVALID_VALUE;
	pitch = fc_round_up(WidthInBytes, 512);
	rc = mem_alloc(dptr, pitch * Height, FC_K_DEVICE);
	if (!rc)
		*pPitch = pitch;
	return rc;
}

FC_API CUresult CUDAAPI cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize,
					  unsigned int flags)
{
	FC_ENTER();
	if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST)
		return fc_check_init() ? CUDA_ERROR_NOT_INITIALIZED :
			CUDA_ERROR_INVALID_VALUE;
	return mem_alloc(dptr, bytesize, FC_K_MANAGED);
}

CUresult fc_mem_free(CUdeviceptr dptr, int async)
{
	struct fc_alloc *a;
	CUresult rc = CUDA_SUCCESS;

	if (fc_check_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!dptr)
		return CUDA_SUCCESS;
	fc_lock();
	a = fc_find(dptr);
	if (!a || a->base != dptr ||
	    (a->kind != FC_K_DEVICE && a->kind != FC_K_POOL &&
	     a->kind != FC_K_GRAPH && a->kind != FC_K_EXTERNAL &&
	     a->kind != FC_K_POOL_IMPORT &&
	     (async || a->kind != FC_K_MANAGED))) {
		rc = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	fc_log("free %#lx id %llu", (unsigned long)dptr, a->buffer_id);
	fc_release_alloc(a);
	fc_hold();
out:
	fc_unlock();
	return rc;
}

FC_API CUresult CUDAAPI cuMemFree_v2(CUdeviceptr dptr)
{
	FC_ENTER();
	return fc_mem_free(dptr, 0);
}

/* ------------------------------------------- legacy 32-bit ABI entries */

/*
 * CUdeviceptr_v1 is 32 bits wide; every fake device address is above
 * 4 GiB, so these can only refuse.  They exist so that resolvers and
 * interposers find the real set of names.
 */
FC_API CUresult CUDAAPI cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize)
{
	FC_ENTER();
	return CUDA_ERROR_NOT_SUPPORTED;
}

FC_API CUresult CUDAAPI cuMemAllocPitch(CUdeviceptr_v1 *dptr,
					unsigned int *pPitch,
					unsigned int WidthInBytes,
					unsigned int Height,
					unsigned int ElementSizeBytes)
{
	FC_ENTER();
	return CUDA_ERROR_NOT_SUPPORTED;
}

FC_API CUresult CUDAAPI cuMemFree(CUdeviceptr_v1 dptr)
{
	FC_ENTER();
	return dptr ? CUDA_ERROR_NOT_SUPPORTED : CUDA_SUCCESS;
}

FC_API CUresult CUDAAPI cuMemGetAddressRange(CUdeviceptr_v1 *pbase,
					     unsigned int *psize,
					     CUdeviceptr_v1 dptr)
{
	FC_ENTER();
	return CUDA_ERROR_NOT_SUPPORTED;
}

FC_API CUresult CUDAAPI cuMemHostGetDevicePointer(CUdeviceptr_v1 *pdptr,
						  void *p, unsigned int Flags)
{
	FC_ENTER();
	return CUDA_ERROR_NOT_SUPPORTED;
}

/* ----------------------------------------------------------- host memory */

static CUresult host_alloc(void **pp, size_t size, unsigned int flags)
{
	struct fc_alloc *a;
	CUcontext ctx;
	size_t span;
	void *p;
	CUresult rc;

	if (fc_check_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	fc_lock();
	rc = fc_current_ctx(&ctx);
	if (rc)
		goto out;
	if (!pp || !size || (flags & ~(CU_MEMHOSTALLOC_PORTABLE |
				      CU_MEMHOSTALLOC_DEVICEMAP |
				      CU_MEMHOSTALLOC_WRITECOMBINED))) {
		rc = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	span = fc_round_up(size, (size_t)sysconf(_SC_PAGESIZE));
	p = mmap(NULL, span, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		rc = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	a = fc_reg_add(FC_K_HOST_ALLOC, (uintptr_t)p, size, ctx->dev, ctx);
	if (!a) {
		munmap(p, span);
		rc = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	a->span_base = (uintptr_t)p;
	a->span = span;
	a->host_flags = flags;
	*pp = p;
out:
	fc_unlock();
	return rc;
}

FC_FORWARD(FC_ENTER, cuMemAllocHost_v2, (void **pp, size_t bytesize),
	   host_alloc(pp, bytesize, 0))
FC_FORWARD(FC_ENTER, cuMemAllocHost, (void **pp, unsigned int bytesize),
	   host_alloc(pp, bytesize, 0))

FC_API CUresult CUDAAPI cuMemHostAlloc(void **pp, size_t bytesize,
				       unsigned int Flags)
{
	FC_ENTER();
	return host_alloc(pp, bytesize, Flags);
}

FC_API CUresult CUDAAPI cuMemFreeHost(void *p)
{
	struct fc_alloc *a;
	CUresult rc = CUDA_SUCCESS;

	FC_ENTER_INIT();
	fc_lock();
	a = fc_find((uintptr_t)p);
	if (!p || !a || a->base != (uintptr_t)p || a->kind != FC_K_HOST_ALLOC)
		rc = CUDA_ERROR_INVALID_VALUE;
	else
		fc_release_alloc(a);
	fc_unlock();
	return rc;
}

static CUresult host_register(void *p, size_t size, unsigned int flags)
{
	struct fc_alloc *a;
	CUcontext ctx;
	CUresult rc;

	if (fc_check_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	fc_lock();
	rc = fc_current_ctx(&ctx);
	if (rc)
		goto out;
	if (!p || !size || (flags & ~0xfu)) {
		rc = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	a = fc_reg_overlap((uintptr_t)p, size);
	if (a) {
		rc = a->kind == FC_K_HOST_REG ?
			CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED :
			CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	a = fc_reg_add(FC_K_HOST_REG, (uintptr_t)p, size, ctx->dev, ctx);
	if (!a) {
		rc = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	a->host_flags = flags;
out:
	fc_unlock();
	return rc;
}

FC_FORWARD(FC_ENTER, cuMemHostRegister_v2,
	   (void *p, size_t bytesize, unsigned int Flags),
	   host_register(p, bytesize, Flags))
FC_FORWARD(FC_ENTER, cuMemHostRegister,
	   (void *p, size_t bytesize, unsigned int Flags),
	   host_register(p, bytesize, Flags))

FC_API CUresult CUDAAPI cuMemHostUnregister(void *p)
{
	struct fc_alloc *a;
	CUresult rc = CUDA_SUCCESS;

	FC_ENTER_INIT();
	fc_lock();
	a = fc_find((uintptr_t)p);
	if (!a || a->kind != FC_K_HOST_REG)
		rc = CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
	else if (a->base != (uintptr_t)p)
		rc = CUDA_ERROR_INVALID_VALUE;
	else
		fc_release_alloc(a);
	fc_unlock();
	return rc;
}

FC_API CUresult CUDAAPI cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p,
						     unsigned int Flags)
{
	struct fc_alloc *a;
	CUresult rc = CUDA_SUCCESS;

	FC_ENTER_INIT();
	if (!pdptr || Flags)
		return CUDA_ERROR_INVALID_VALUE;
	fc_lock();
	a = fc_find((uintptr_t)p);
	if (!a || (a->kind != FC_K_HOST_ALLOC && a->kind != FC_K_HOST_REG))
		rc = CUDA_ERROR_INVALID_VALUE;
	else
		*pdptr = (CUdeviceptr)p;
	fc_unlock();
	return rc;
}

FC_API CUresult CUDAAPI cuMemHostGetFlags(unsigned int *pFlags, void *p)
{
	struct fc_alloc *a;
	CUresult rc = CUDA_SUCCESS;

	FC_ENTER_INIT();
	if (!pFlags)
		return CUDA_ERROR_INVALID_VALUE;
	fc_lock();
	a = fc_find((uintptr_t)p);
	if (!a || a->kind != FC_K_HOST_ALLOC)
		rc = CUDA_ERROR_INVALID_VALUE;
	else
		*pFlags = a->host_flags;
	fc_unlock();
	return rc;
}
