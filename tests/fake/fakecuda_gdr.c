// SPDX-License-Identifier: MIT
/*
 * GPUDirect RDMA details, as the real driver answers them (H100, driver
 * 580, tests/gpu/vmm_probe.c):
 *
 *  - cuCtxSetFlags/cuCtxGetFlags keep a context's flags (CU_CTX_SYNC_MEMOPS
 *    among them); the per-pointer CU_POINTER_ATTRIBUTE_SYNC_MEMOPS reads 0
 *    until cuPointerSetAttribute set it, and the context flag does not
 *    show in it; the driver refuses the pointer attribute for VMM mappings
 *    (NOT_SUPPORTED);
 *  - the DMA-BUF PCIe mapping type flag is refused (NOT_SUPPORTED) on a
 *    PCIe-attached GPU; FAKECUDA_C2C=1 makes the devices C2C-attached
 *    (CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED = 1, as on Grace),
 *    where it is accepted.  Accepted exports with the flag are counted as
 *    "cuMemGetHandleForAddressRange:pcie" (fakecuda_calls).
 */
#include <stdlib.h>
#include <string.h>

#include "fakecuda_internal.h"

int fc_c2c(void)
{
	const char *e = getenv("FAKECUDA_C2C");

	return e && !strcmp(e, "1");
}

CUresult fc_dmabuf_flags(unsigned long long flags)
{
	if (!(flags & CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE))
		return CUDA_SUCCESS;
	if (!fc_c2c())
		return CUDA_ERROR_NOT_SUPPORTED;
	fc_sym_get("cuMemGetHandleForAddressRange:pcie")->calls++;
	return CUDA_SUCCESS;
}

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
	fc_lock();	/* another thread may set them: the driver is thread-safe */
	*flags = c->flags;
	fc_unlock();
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
	fc_lock();
	c->flags = flags;
	fc_unlock();
	return CUDA_SUCCESS;
}
