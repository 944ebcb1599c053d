/* SPDX-License-Identifier: MIT */
/*
 * Fake CUDA driver: copies and sets.
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

/* --------------------------------------------------------- copies, sets */

/* [p, p + n) is inside one tracked allocation that the device may touch. */
static int dev_range_ok(CUdeviceptr p, size_t n)
{
	struct fc_alloc *a;
	int ok;

	if (!n)
		return 1;
	fc_lock();
	a = fc_find(p);
	ok = a && p + n <= a->base + a->size;
	fc_unlock();
	return ok;
}

static CUresult copy(void *dst, const void *src, size_t n, CUdeviceptr dchk,
		     CUdeviceptr schk)
{
	if (fc_check_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	if ((dchk && !dev_range_ok(dchk, n)) || (schk && !dev_range_ok(schk, n)))
		return CUDA_ERROR_INVALID_VALUE;
	if (n)
		memmove(dst, src, n);
	return CUDA_SUCCESS;
}

FC_FORWARD(FC_ENTER, cuMemcpy, (CUdeviceptr dst, CUdeviceptr src, size_t n),
	   copy((void *)dst, (const void *)src, n, 0, 0))
FC_FORWARD(FC_ENTER, cuMemcpy_ptds,
	   (CUdeviceptr dst, CUdeviceptr src, size_t n),
	   copy((void *)dst, (const void *)src, n, 0, 0))

FC_API CUresult CUDAAPI cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n,
				      CUstream hStream)
{
	FC_ENTER();
	if (!fc_stream_ok(hStream))
		return CUDA_ERROR_INVALID_HANDLE;
	return copy((void *)dst, (const void *)src, n, 0, 0);
}

FC_API CUresult CUDAAPI cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src,
					   size_t n, CUstream hStream)
{
	FC_ENTER();
	if (!fc_stream_ok(hStream))
		return CUDA_ERROR_INVALID_HANDLE;
	return copy((void *)dst, (const void *)src, n, 0, 0);
}

FC_FORWARD(FC_ENTER, cuMemcpyHtoD_v2,
	   (CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount),
	   copy((void *)dstDevice, srcHost, ByteCount, dstDevice, 0))
FC_FORWARD(FC_ENTER, cuMemcpyHtoD_v2_ptds,
	   (CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount),
	   copy((void *)dstDevice, srcHost, ByteCount, dstDevice, 0))

FC_FORWARD(FC_ENTER, cuMemcpyDtoH_v2,
	   (void *dstHost, CUdeviceptr srcDevice, size_t ByteCount),
	   copy(dstHost, (const void *)srcDevice, ByteCount, 0, srcDevice))
FC_FORWARD(FC_ENTER, cuMemcpyDtoH_v2_ptds,
	   (void *dstHost, CUdeviceptr srcDevice, size_t ByteCount),
	   copy(dstHost, (const void *)srcDevice, ByteCount, 0, srcDevice))

FC_FORWARD(FC_ENTER, cuMemcpyDtoD_v2,
	   (CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount),
	   copy((void *)dstDevice, (const void *)srcDevice, ByteCount,
		dstDevice, srcDevice))
FC_FORWARD(FC_ENTER, cuMemcpyDtoD_v2_ptds,
	   (CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount),
	   copy((void *)dstDevice, (const void *)srcDevice, ByteCount,
		dstDevice, srcDevice))

FC_API CUresult CUDAAPI cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice,
					    const void *srcHost,
					    size_t ByteCount, CUstream hStream)
{
	FC_ENTER();
	if (!fc_stream_ok(hStream))
		return CUDA_ERROR_INVALID_HANDLE;
	return copy((void *)dstDevice, srcHost, ByteCount, dstDevice, 0);
}

FC_API CUresult CUDAAPI cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dstDevice,
						 const void *srcHost,
						 size_t ByteCount,
						 CUstream hStream)
{
	FC_ENTER();
	if (!fc_stream_ok(hStream))
		return CUDA_ERROR_INVALID_HANDLE;
	return copy((void *)dstDevice, srcHost, ByteCount, dstDevice, 0);
}

FC_API CUresult CUDAAPI cuMemcpyDtoHAsync_v2(void *dstHost,
					    CUdeviceptr srcDevice,
					    size_t ByteCount, CUstream hStream)
{
	FC_ENTER();
	if (!fc_stream_ok(hStream))
		return CUDA_ERROR_INVALID_HANDLE;
	return copy(dstHost, (const void *)srcDevice, ByteCount, 0, srcDevice);
}

FC_API CUresult CUDAAPI cuMemcpyDtoHAsync_v2_ptsz(void *dstHost,
						 CUdeviceptr srcDevice,
						 size_t ByteCount,
						 CUstream hStream)
{
	FC_ENTER();
	if (!fc_stream_ok(hStream))
		return CUDA_ERROR_INVALID_HANDLE;
	return copy(dstHost, (const void *)srcDevice, ByteCount, 0, srcDevice);
}

static CUresult memset8(CUdeviceptr dst, unsigned char v, size_t n)
{
	if (fc_check_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!dev_range_ok(dst, n))
		return CUDA_ERROR_INVALID_VALUE;
	memset((void *)dst, v, n);
	return CUDA_SUCCESS;
}

static CUresult memset32(CUdeviceptr dst, unsigned int v, size_t n)
{
	if (fc_check_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (dst % 4 || !dev_range_ok(dst, n * 4))
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < n; i++)
		((unsigned int *)dst)[i] = v;
	return CUDA_SUCCESS;
}

FC_FORWARD(FC_ENTER, cuMemsetD8_v2,
	   (CUdeviceptr dstDevice, unsigned char uc, size_t N),
	   memset8(dstDevice, uc, N))
FC_FORWARD(FC_ENTER, cuMemsetD8_v2_ptds,
	   (CUdeviceptr dstDevice, unsigned char uc, size_t N),
	   memset8(dstDevice, uc, N))

FC_API CUresult CUDAAPI cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc,
					size_t N, CUstream hStream)
{
	FC_ENTER();
	if (!fc_stream_ok(hStream))
		return CUDA_ERROR_INVALID_HANDLE;
	return memset8(dstDevice, uc, N);
}

FC_API CUresult CUDAAPI cuMemsetD8Async_ptsz(CUdeviceptr dstDevice,
					     unsigned char uc, size_t N,
					     CUstream hStream)
{
	FC_ENTER();
	if (!fc_stream_ok(hStream))
		return CUDA_ERROR_INVALID_HANDLE;
	return memset8(dstDevice, uc, N);
}

FC_FORWARD(FC_ENTER, cuMemsetD32_v2,
	   (CUdeviceptr dstDevice, unsigned int ui, size_t N),
	   memset32(dstDevice, ui, N))
FC_FORWARD(FC_ENTER, cuMemsetD32_v2_ptds,
	   (CUdeviceptr dstDevice, unsigned int ui, size_t N),
	   memset32(dstDevice, ui, N))

FC_API CUresult CUDAAPI cuMemGetInfo_v2(size_t *free_b, size_t *total)
{
	CUcontext ctx;
	CUresult rc;

	FC_ENTER_INIT();
	fc_lock();
	rc = fc_current_ctx(&ctx);
	if (!rc) {
		struct fc_dev *D = &fc.dev[ctx->dev];

		if (free_b)
			*free_b = D->hi - D->bump;
		if (total)
			*total = FC_DEV_SPAN;
	}
	fc_unlock();
	return rc;
}
