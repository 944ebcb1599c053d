/* SPDX-License-Identifier: MIT */
/*
 * Fake CUDA driver: memory pools and stream-ordered allocation.
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

/* --------------------------------------------------------------- pools */

void fc_pool_init(struct CUmemPoolHandle_st *p, int dev, int is_default)
{
	memset(p, 0, sizeof(*p));
	p->magic = FC_POOL_MAGIC;
	p->dev = dev;
	p->alive = 1;
	p->import_fd = -1;
	p->is_default = is_default;
	p->reuse_follow_event = 1;
	p->reuse_opportunistic = 1;
	p->reuse_internal = 1;
	p->next = fc.pools;
	fc.pools = p;
}

static int pool_valid(CUmemoryPool p)
{
	return p && p->magic == FC_POOL_MAGIC && p->alive;
}

/* Give cached blocks back to the device until @keep bytes remain. */
static void pool_trim(CUmemoryPool p, size_t keep)
{
	for (size_t i = 0; i < p->cache.n && p->cached_bytes > keep; i++) {
		struct fc_freelist *l = &p->cache.l[i];

		while (l->n && p->cached_bytes > keep) {
			uintptr_t va = l->v[--l->n];

			fc_dev_block_free(p->dev, va, l->size, l->size < FC_GRAN);
			p->cached_bytes -= l->size;
		}
	}
}

void fc_pool_release_to_threshold(int dev)
{
	for (CUmemoryPool p = fc.pools; p; p = p->next)
		if (p->dev == dev && p->alive &&
		    p->cached_bytes > p->release_threshold)
			pool_trim(p, p->release_threshold);
}

static CUresult pool_alloc(CUmemoryPool p, size_t size, CUcontext ctx,
			   CUdeviceptr *dptr)
{
	size_t rs = fc_round_up(size, FC_SMALL_ALIGN);
	struct fc_alloc *a;
	uintptr_t va;
	size_t span;
	int small;
	CUresult rc;

	if (rs >= FC_GRAN)
		rs = fc_round_up(size, FC_GRAN);
	if (fc_fl_pop(&p->cache, rs, &va)) {
		p->cached_bytes -= rs;
		span = rs;
		small = rs < FC_GRAN;
	} else {
		rc = fc_dev_block_alloc(p->dev, size, &va, &span, &small);
		if (rc)
			return rc;
	}
	a = fc_reg_add(FC_K_POOL, va, size, p->dev, ctx);
	if (!a) {
		fc_dev_block_free(p->dev, va, span, small);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	a->span_base = va;
	a->span = span;
	a->small = small;
	a->pool = p;
	p->used_bytes += span;
	if (p->used_bytes > p->high_used)
		p->high_used = p->used_bytes;
	if (p->used_bytes + p->cached_bytes > p->high_reserved)
		p->high_reserved = p->used_bytes + p->cached_bytes;
	*dptr = va;
	return CUDA_SUCCESS;
}

/* --------------------------------------------------- common entry checks */

static CUresult stream_ctx(CUstream s, CUcontext *ctx)
{
	CUresult rc = fc_check_init();

	if (rc)
		return rc;
	if (!fc_stream_ok(s))
		return CUDA_ERROR_INVALID_HANDLE;
	if (s && s != CU_STREAM_LEGACY && s != CU_STREAM_PER_THREAD) {
		if (!fc_alive(s->ctx))
			return CUDA_ERROR_CONTEXT_IS_DESTROYED;
		*ctx = s->ctx;
		return CUDA_SUCCESS;
	}
	return fc_current_ctx(ctx);
}

/* ------------------------------------------------- stream-ordered memory */

static CUresult alloc_async(CUdeviceptr *dptr, size_t size, CUmemoryPool pool,
			    CUstream s)
{
	CUcontext ctx = NULL;
	CUresult rc;

	if (fc_check_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	fc_lock();
	rc = stream_ctx(s, &ctx);
	if (rc)
		goto out;
	if (!dptr || !size) {
		rc = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	if (fc_capturing(s)) {
		/* A graph alloc node: the address is fixed, nothing backed. */
		rc = fc_graph_capture_alloc(fc_capturing(s), ctx, size, dptr);
		goto out;
	}
	if (!pool)
		pool = fc.dev[ctx->dev].cur_pool;
	else if (!pool_valid(pool) || pool->import_fd >= 0) {
		rc = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	rc = pool_alloc(pool, size, ctx, dptr);
out:
	fc_unlock();
	return rc;
}

FC_FORWARD(FC_ENTER, cuMemAllocAsync,
	   (CUdeviceptr *dptr, size_t bytesize, CUstream hStream),
	   alloc_async(dptr, bytesize, NULL, hStream))
FC_FORWARD(FC_ENTER, cuMemAllocAsync_ptsz,
	   (CUdeviceptr *dptr, size_t bytesize, CUstream hStream),
	   alloc_async(dptr, bytesize, NULL, hStream))

static CUresult from_pool(CUdeviceptr *dptr, size_t size, CUmemoryPool pool,
			  CUstream s)
{
	if (!pool)
		return fc_check_init() ? CUDA_ERROR_NOT_INITIALIZED :
			CUDA_ERROR_INVALID_VALUE;
	return alloc_async(dptr, size, pool, s);
}

FC_FORWARD(FC_ENTER, cuMemAllocFromPoolAsync,
	   (CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
	    CUstream hStream),
	   from_pool(dptr, bytesize, pool, hStream))
FC_FORWARD(FC_ENTER, cuMemAllocFromPoolAsync_ptsz,
	   (CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
	    CUstream hStream),
	   from_pool(dptr, bytesize, pool, hStream))

static CUresult free_async(CUdeviceptr dptr, CUstream s)
{
	if (fc_check_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!fc_stream_ok(s))
		return CUDA_ERROR_INVALID_HANDLE;
	if (!dptr)
		return CUDA_ERROR_INVALID_VALUE;
	fc_lock();
	if (fc_capturing(s)) {
		CUresult rc = fc_graph_capture_free(fc_capturing(s), dptr);

		fc_unlock();
		return rc;
	}
	fc_unlock();
	return fc_mem_free(dptr, 1);
}

FC_FORWARD(FC_ENTER, cuMemFreeAsync, (CUdeviceptr dptr, CUstream hStream),
	   free_async(dptr, hStream))
FC_FORWARD(FC_ENTER, cuMemFreeAsync_ptsz, (CUdeviceptr dptr, CUstream hStream),
	   free_async(dptr, hStream))

FC_API CUresult CUDAAPI cuMemPoolCreate(CUmemoryPool *pool,
					const CUmemPoolProps *poolProps)
{
	CUmemoryPool p;

	FC_ENTER_INIT();
	if (!pool || !poolProps ||
	    poolProps->allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
	    poolProps->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
	    poolProps->location.id < 0 || poolProps->location.id >= fc.ndev)
		return CUDA_ERROR_INVALID_VALUE;
	p = malloc(sizeof(*p));
	if (!p)
		return CUDA_ERROR_OUT_OF_MEMORY;
	fc_lock();
	fc_pool_init(p, poolProps->location.id, 0);
	p->handle_types = poolProps->handleTypes;
	fc_unlock();
	*pool = p;
	return CUDA_SUCCESS;
}

/*
 * Like the real driver, destroying a pool with live allocations succeeds;
 * they stay valid and go straight back to the device when freed.
 */
FC_API CUresult CUDAAPI cuMemPoolDestroy(CUmemoryPool pool)
{
	CUresult rc = CUDA_SUCCESS;

	FC_ENTER_INIT();
	fc_lock();
	if (!pool_valid(pool) || pool->is_default) {
		rc = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	pool_trim(pool, 0);
	pool->alive = 0;	/* never freed: stale handles stay detectable */
	if (pool->import_fd >= 0) {
		close(pool->import_fd);
		pool->import_fd = -1;
		goto out;
	}
	if (fc.dev[pool->dev].cur_pool == pool)
		fc.dev[pool->dev].cur_pool = &fc.dev[pool->dev].default_pool;
out:
	fc_unlock();
	return rc;
}

FC_API CUresult CUDAAPI cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
	CUresult rc = CUDA_SUCCESS;

	FC_ENTER_INIT();
	fc_lock();
	if (!pool_valid(pool))
		rc = CUDA_ERROR_INVALID_VALUE;
	else
		pool_trim(pool, minBytesToKeep);
	fc_unlock();
	return rc;
}

FC_API CUresult CUDAAPI cuMemPoolSetAttribute(CUmemoryPool pool,
					      CUmemPool_attribute attr,
					      void *value)
{
	CUresult rc = CUDA_SUCCESS;

	FC_ENTER_INIT();
	if (!value)
		return CUDA_ERROR_INVALID_VALUE;
	fc_lock();
	if (!pool_valid(pool)) {
		rc = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	switch (attr) {
	case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
		pool->reuse_follow_event = *(int *)value;
		break;
	case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
		pool->reuse_opportunistic = *(int *)value;
		break;
	case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
		pool->reuse_internal = *(int *)value;
		break;
	case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
		pool->release_threshold = *(cuuint64_t *)value;
		break;
	case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
		if (*(cuuint64_t *)value)
			rc = CUDA_ERROR_INVALID_VALUE;
		else
			pool->high_reserved = pool->used_bytes +
					      pool->cached_bytes;
		break;
	case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
		if (*(cuuint64_t *)value)
			rc = CUDA_ERROR_INVALID_VALUE;
		else
			pool->high_used = pool->used_bytes;
		break;
	default:
		rc = CUDA_ERROR_INVALID_VALUE;
	}
out:
	fc_unlock();
	return rc;
}

FC_API CUresult CUDAAPI cuMemPoolGetAttribute(CUmemoryPool pool,
					      CUmemPool_attribute attr,
					      void *value)
{
	CUresult rc = CUDA_SUCCESS;

	FC_ENTER_INIT();
	if (!value)
		return CUDA_ERROR_INVALID_VALUE;
	fc_lock();
	if (!pool_valid(pool)) {
		rc = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	switch (attr) {
	case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
		*(int *)value = pool->reuse_follow_event;
		break;
	case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
		*(int *)value = pool->reuse_opportunistic;
		break;
	case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
		*(int *)value = pool->reuse_internal;
		break;
	case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
		*(cuuint64_t *)value = pool->release_threshold;
		break;
	case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT:
		*(cuuint64_t *)value = pool->used_bytes + pool->cached_bytes;
		break;
	case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
		*(cuuint64_t *)value = pool->high_reserved;
		break;
	case CU_MEMPOOL_ATTR_USED_MEM_CURRENT:
		*(cuuint64_t *)value = pool->used_bytes;
		break;
	case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
		*(cuuint64_t *)value = pool->high_used;
		break;
	default:
		rc = CUDA_ERROR_INVALID_VALUE;
	}
out:
	fc_unlock();
	return rc;
}

/*
 * A pool's own device reads and writes it; the double has no
 * cuMemPoolSetAccess, so other devices have no access (the real
 * driver's default).
 */
FC_API CUresult CUDAAPI cuMemPoolGetAccess(CUmemAccess_flags *flags,
					   CUmemoryPool memPool,
					   CUmemLocation *location)
{
	CUresult rc = CUDA_SUCCESS;

	FC_ENTER_INIT();
	if (!flags || !location ||
	    location->type != CU_MEM_LOCATION_TYPE_DEVICE ||
	    location->id < 0 || location->id >= fc.ndev)
		return CUDA_ERROR_INVALID_VALUE;
	fc_lock();
	if (!pool_valid(memPool))
		rc = CUDA_ERROR_INVALID_VALUE;
	else
		*flags = location->id == memPool->dev ?
			CU_MEM_ACCESS_FLAGS_PROT_READWRITE :
			CU_MEM_ACCESS_FLAGS_PROT_NONE;
	fc_unlock();
	return rc;
}

FC_API CUresult CUDAAPI cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out,
						  CUdevice dev)
{
	FC_ENTER_INIT();
	if (dev < 0 || dev >= fc.ndev)
		return CUDA_ERROR_INVALID_DEVICE;
	if (!pool_out)
		return CUDA_ERROR_INVALID_VALUE;
	*pool_out = &fc.dev[dev].default_pool;
	return CUDA_SUCCESS;
}

FC_API CUresult CUDAAPI cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
	FC_ENTER_INIT();
	if (dev < 0 || dev >= fc.ndev)
		return CUDA_ERROR_INVALID_DEVICE;
	if (!pool)
		return CUDA_ERROR_INVALID_VALUE;
	fc_lock();
	*pool = fc.dev[dev].cur_pool;
	fc_unlock();
	return CUDA_SUCCESS;
}

FC_API CUresult CUDAAPI cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool)
{
	CUresult rc = CUDA_SUCCESS;

	FC_ENTER_INIT();
	if (dev < 0 || dev >= fc.ndev)
		return CUDA_ERROR_INVALID_DEVICE;
	fc_lock();
	if (!pool_valid(pool) || pool->dev != dev)
		rc = CUDA_ERROR_INVALID_VALUE;
	else
		fc.dev[dev].cur_pool = pool;
	fc_unlock();
	return rc;
}
