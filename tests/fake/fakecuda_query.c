/* SPDX-License-Identifier: MIT */
/*
 * Fake CUDA driver: address and pointer-attribute queries.
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

/* --------------------------------------------------- address queries */

FC_API CUresult CUDAAPI cuMemGetAddressRange_v2(CUdeviceptr *pbase,
						size_t *psize,
						CUdeviceptr dptr)
{
	struct fc_alloc *a;
	CUresult rc = CUDA_SUCCESS;

	FC_ENTER_INIT();
	fc_lock();
	a = fc_find(dptr);
	if (!fc_current() || !a) {
		/*
		 * 580 zeroes both outputs of an unknown pointer, and of any
		 * pointer on a thread with no current context.
		 */
		rc = fc_current() ? CUDA_ERROR_NOT_FOUND :
			CUDA_ERROR_INVALID_CONTEXT;
		if (pbase)
			*pbase = 0;
		if (psize)
			*psize = 0;
	} else {
		if (pbase)
			*pbase = a->base;
		if (psize)
			*psize = a->size;
	}
	fc_unlock();
	return rc;
}

static size_t attr_size(CUpointer_attribute attr)
{
	switch (attr) {
	case CU_POINTER_ATTRIBUTE_CONTEXT:
	case CU_POINTER_ATTRIBUTE_HOST_POINTER:
	case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
	case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
		return sizeof(void *);
	case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
	case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
		return sizeof(CUdeviceptr);
	case CU_POINTER_ATTRIBUTE_BUFFER_ID:
	case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
	case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
		return sizeof(unsigned long long);
	case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
	case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
		return sizeof(size_t);
	case CU_POINTER_ATTRIBUTE_P2P_TOKENS:
		return sizeof(CUDA_POINTER_ATTRIBUTE_P2P_TOKENS);
	default:
		return sizeof(int);
	}
}

static int is_host_kind(const struct fc_alloc *a)
{
	return a->kind == FC_K_HOST_ALLOC || a->kind == FC_K_HOST_REG;
}

/* Needs the lock; @a is the record containing @p. */
static CUresult attr_get(const struct fc_alloc *a, CUpointer_attribute attr,
			 void *data, CUdeviceptr p)
{
	const struct fc_reserve *r = NULL;
	uintptr_t mbase = a->span_base;
	size_t msize = a->span;

	if (a->kind == FC_K_VMM)
		r = fc_res_find(a->base);
	if (a->small) {
		mbase = a->base & ~(FC_GRAN - 1);
		msize = FC_GRAN;
	}
	if (a->kind == FC_K_HOST_REG) {
		mbase = a->base;
		msize = a->size;
	}
	switch (attr) {
	case CU_POINTER_ATTRIBUTE_CONTEXT:
		/* 580: pool memory belongs to no context. */
		*(CUcontext *)data = a->kind == FC_K_POOL ? NULL : a->ctx;
		break;
	case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
		*(unsigned int *)data = is_host_kind(a) ? CU_MEMORYTYPE_HOST :
			CU_MEMORYTYPE_DEVICE;
		break;
	case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
		/* The address in the current context: none, none (580). */
		*(CUdeviceptr *)data = fc_current() ? p : 0;
		if (!fc_current())
			return CUDA_ERROR_INVALID_CONTEXT;
		break;
	case CU_POINTER_ATTRIBUTE_HOST_POINTER:
		if (!is_host_kind(a) && a->kind != FC_K_MANAGED) {
			*(void **)data = NULL;	/* as 580 does */
			return CUDA_ERROR_INVALID_VALUE;
		}
		*(void **)data = (void *)p;
		break;
	case CU_POINTER_ATTRIBUTE_P2P_TOKENS: {
		CUDA_POINTER_ATTRIBUTE_P2P_TOKENS *t = data;

		if (a->kind != FC_K_DEVICE)
			return CUDA_ERROR_INVALID_VALUE;
		t->p2pToken = a->buffer_id;
		t->vaSpaceToken = 1;
		break;
	}
	case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
		*(int *)data = fc_syncmemops_get(a);
		break;
	case CU_POINTER_ATTRIBUTE_BUFFER_ID:
		*(unsigned long long *)data = a->buffer_id;
		break;
	case CU_POINTER_ATTRIBUTE_IS_MANAGED:
		*(int *)data = a->kind == FC_K_MANAGED;
		break;
	case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
		*(int *)data = a->dev;
		break;
	case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
		*(int *)data = a->kind == FC_K_DEVICE;
		break;
	case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
		*(CUdeviceptr *)data = r ? r->base : a->base;
		break;
	case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
		*(size_t *)data = r ? r->size : a->size;
		break;
	case CU_POINTER_ATTRIBUTE_MAPPED:
		*(int *)data = 1;
		break;
	case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
		*(unsigned long long *)data = a->kind == FC_K_VMM ?
			a->vmmh->prop.requestedHandleTypes : 0;
		break;
	case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
		*(int *)data = !is_host_kind(a);
		break;
	case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
		*(int *)data = CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE;
		break;
	case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
		*(CUmemoryPool *)data = a->pool;
		break;
	case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
		*(size_t *)data = msize;
		break;
	case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
		*(void **)data = (void *)mbase;
		break;
	case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
		*(unsigned long long *)data = a->kind == FC_K_VMM ?
			(unsigned long long)(uintptr_t)a->vmmh : a->buffer_id;
		break;
	case CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE:
		*(int *)data = 0;
		break;
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
	return CUDA_SUCCESS;
}

FC_API CUresult CUDAAPI cuPointerGetAttribute(void *data,
					      CUpointer_attribute attribute,
					      CUdeviceptr ptr)
{
	struct fc_alloc *a;
	CUresult rc;

	FC_ENTER_INIT();
	if (!data)
		return CUDA_ERROR_INVALID_VALUE;
	fc_lock();
	a = fc_find(ptr);
	rc = a ? attr_get(a, attribute, data, ptr) : CUDA_ERROR_INVALID_VALUE;
	fc_unlock();
	return rc;
}

/*
 * Unknown pointers are not an error here: every value reads as zero
 * (NULL, 0), except DEVICE_ORDINAL, which the real driver sets to -2,
 * HOST_POINTER, which it sets to the pointer, and RANGE_START_ADDR and
 * RANGE_SIZE, which it leaves alone (580 on an H100).
 */
FC_API CUresult CUDAAPI cuPointerGetAttributes(unsigned int numAttributes,
					       CUpointer_attribute *attributes,
					       void **data, CUdeviceptr ptr)
{
	struct fc_alloc *a;

	FC_ENTER_INIT();
	if (!numAttributes || !attributes || !data)
		return CUDA_ERROR_INVALID_VALUE;
	for (unsigned int i = 0; i < numAttributes; i++)
		if (attributes[i] < CU_POINTER_ATTRIBUTE_CONTEXT ||
		    attributes[i] > CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE)
			return CUDA_ERROR_INVALID_VALUE;
	fc_lock();
	a = fc_find(ptr);
	for (unsigned int i = 0; i < numAttributes; i++) {
		if (!data[i])
			continue;
		if (a && !attr_get(a, attributes[i], data[i], ptr))
			continue;
		if (!a && (attributes[i] == CU_POINTER_ATTRIBUTE_RANGE_START_ADDR ||
			   attributes[i] == CU_POINTER_ATTRIBUTE_RANGE_SIZE))
			continue;
		memset(data[i], 0, attr_size(attributes[i]));
		if (!a && attributes[i] == CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL)
			*(int *)data[i] = -2;
		if (!a && attributes[i] == CU_POINTER_ATTRIBUTE_HOST_POINTER)
			*(CUdeviceptr *)data[i] = ptr;
	}
	fc_unlock();
	return CUDA_SUCCESS;
}

FC_API CUresult CUDAAPI cuPointerSetAttribute(const void *value,
					      CUpointer_attribute attribute,
					      CUdeviceptr ptr)
{
	struct fc_alloc *a;
	CUresult rc = CUDA_SUCCESS;

	FC_ENTER_INIT();
	if (!value || attribute != CU_POINTER_ATTRIBUTE_SYNC_MEMOPS)
		return CUDA_ERROR_INVALID_VALUE;
	fc_lock();
	a = fc_find(ptr);
	if (!a || is_host_kind(a))
		rc = CUDA_ERROR_INVALID_VALUE;
	else
		rc = fc_syncmemops_set(a);
	fc_unlock();
	return rc;
}
