// SPDX-License-Identifier: MIT
/*
 * Synchronous memory operations, as the real driver answers them (H100,
 * driver 580, tests/gpu/vmm_probe.c): cuCtxSetFlags/cuCtxGetFlags keep a
 * context's flags (CU_CTX_SYNC_MEMOPS among them), and the per-pointer
 * CU_POINTER_ATTRIBUTE_SYNC_MEMOPS reads 0 until cuPointerSetAttribute set
 * it; the context flag does not show in the pointer attribute.  The driver
 * refuses the pointer attribute for VMM mappings (NOT_SUPPORTED).
 */
#include "fakecuda_internal.h"

#define SM_CAP 4096

/* Buffer IDs of allocations with the attribute set (fc lock held). */
static unsigned long long sm_ids[SM_CAP];
static size_t sm_n;

CUresult fc_syncmemops_set(const struct fc_alloc *a)
{
	if (a->kind == FC_K_VMM)
		return CUDA_ERROR_NOT_SUPPORTED;
	for (size_t i = 0; i < sm_n; i++)
		if (sm_ids[i] == a->buffer_id)
			return CUDA_SUCCESS;
	if (sm_n < SM_CAP)
		sm_ids[sm_n++] = a->buffer_id;
	return CUDA_SUCCESS;
}

int fc_syncmemops_get(const struct fc_alloc *a)
{
	for (size_t i = 0; i < sm_n; i++)
		if (sm_ids[i] == a->buffer_id)
			return 1;
	return 0;
}

FC_API CUresult CUDAAPI cuCtxGetFlags(unsigned int *flags)
{
	CUcontext c;
	CUresult rc;

	FC_ENTER();
	rc = fc_check_init();
	if (rc)
		return rc;
	if (!flags)
		return CUDA_ERROR_INVALID_VALUE;
	c = fc_current();
	if (!c)
		return CUDA_ERROR_INVALID_CONTEXT;
	*flags = c->flags;
	return CUDA_SUCCESS;
}

FC_API CUresult CUDAAPI cuCtxSetFlags(unsigned int flags)
{
	CUcontext c;
	CUresult rc;

	FC_ENTER();
	rc = fc_check_init();
	if (rc)
		return rc;
	c = fc_current();
	if (!c)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (flags & ~(unsigned int)(CU_CTX_FLAGS_MASK))
		return CUDA_ERROR_INVALID_VALUE;
	c->flags = flags;
	return CUDA_SUCCESS;
}
