/* SPDX-License-Identifier: MIT */
/*
 * Fake CUDA driver: virtual memory management (reserve, create, map).
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

/* ------------------------------------------------------------------ VMM */

static struct fc_vmmh *vmmh_of(CUmemGenericAllocationHandle h)
{
	struct fc_vmmh *v = (struct fc_vmmh *)(uintptr_t)h;

	return v && v->magic == FC_VMMH_MAGIC ? v : NULL;
}

struct fc_reserve *fc_res_find(uintptr_t p)
{
	for (size_t i = 0; i < fc.nres; i++)
		if (p >= fc.res[i].base && p < fc.res[i].base + fc.res[i].size)
			return &fc.res[i];
	return NULL;
}

FC_API CUresult CUDAAPI cuMemGetAllocationGranularity(
	size_t *granularity, const CUmemAllocationProp *prop,
	CUmemAllocationGranularity_flags option)
{
	FC_ENTER_INIT();
	if (!granularity || !prop)
		return CUDA_ERROR_INVALID_VALUE;
	*granularity = FC_GRAN;
	return CUDA_SUCCESS;
}

FC_API CUresult CUDAAPI cuMemAddressReserve(CUdeviceptr *ptr, size_t size,
					    size_t alignment, CUdeviceptr addr,
					    unsigned long long flags)
{
	CUresult rc = CUDA_SUCCESS;
	uintptr_t va;

	FC_ENTER_INIT();
	if (!ptr || !size || size % FC_GRAN || flags ||
	    (alignment & (alignment - 1)))
		return CUDA_ERROR_INVALID_VALUE;
	fc_lock();
	if (alignment <= FC_GRAN && fc_fl_pop(&fc.vmm_free, size, &va))
		goto got;
	va = fc_round_up(fc.vmm_bump, alignment > FC_GRAN ? alignment : FC_GRAN);
	if (va + size > fc.vmm_hi) {
		rc = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	fc.vmm_bump = va + size;
got:
	if (fc.nres == fc.capres) {
		size_t cap = fc.capres ? 2 * fc.capres : 16;
		struct fc_reserve *r = realloc(fc.res, cap * sizeof(*r));

		if (!r) {
			fc_fl_push(&fc.vmm_free, size, va);
			rc = CUDA_ERROR_OUT_OF_MEMORY;
			goto out;
		}
		fc.res = r;
		fc.capres = cap;
	}
	fc.res[fc.nres].base = va;
	fc.res[fc.nres].size = size;
	fc.nres++;
	*ptr = va;
out:
	fc_unlock();
	return rc;
}

FC_API CUresult CUDAAPI cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
	struct fc_reserve *r;
	CUresult rc = CUDA_SUCCESS;

	FC_ENTER_INIT();
	fc_lock();
	r = fc_res_find(ptr);
	if (!r || r->base != ptr || r->size != size) {
		rc = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	/* mappings left inside are dropped with the range */
	for (size_t i = 0; i < fc.na;) {
		struct fc_alloc *a = fc.a[i];

		if (a->kind == FC_K_VMM && a->base >= ptr &&
		    a->base < ptr + size)
			fc_release_alloc(a);
		else
			i++;
	}
	fc_fl_push(&fc.vmm_free, size, ptr);
	*r = fc.res[--fc.nres];
out:
	fc_unlock();
	return rc;
}

FC_API CUresult CUDAAPI cuMemCreate(CUmemGenericAllocationHandle *handle,
				    size_t size,
				    const CUmemAllocationProp *prop,
				    unsigned long long flags)
{
	struct fc_vmmh *v;

	FC_ENTER_INIT();
	if (!handle || !prop || !size || size % FC_GRAN || flags ||
	    prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
	    prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
	    prop->location.id < 0 || prop->location.id >= fc.ndev)
		return CUDA_ERROR_INVALID_VALUE;
	v = calloc(1, sizeof(*v));
	if (!v)
		return CUDA_ERROR_OUT_OF_MEMORY;
	v->fd = memfd_create("fakecuda-vmm", MFD_CLOEXEC);
	if (v->fd < 0 || ftruncate(v->fd, size) < 0) {
		if (v->fd >= 0)
			close(v->fd);
		free(v);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	v->magic = FC_VMMH_MAGIC;
	v->dev = prop->location.id;
	v->size = size;
	v->refs = 1;
	v->handle_refs = 1;
	v->prop = *prop;
	*handle = (CUmemGenericAllocationHandle)(uintptr_t)v;
	return CUDA_SUCCESS;
}

/* Physical memory lives until the last handle and the last mapping go. */
FC_API CUresult CUDAAPI cuMemRelease(CUmemGenericAllocationHandle handle)
{
	struct fc_vmmh *v;
	CUresult rc = CUDA_SUCCESS;

	FC_ENTER_INIT();
	fc_lock();
	v = vmmh_of(handle);
	if (!v || !v->handle_refs) {
		rc = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	v->handle_refs--;
	if (!--v->refs) {
		close(v->fd);
		v->magic = 0;
		free(v);
	}
out:
	fc_unlock();
	return rc;
}

FC_API CUresult CUDAAPI cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
				 CUmemGenericAllocationHandle handle,
				 unsigned long long flags)
{
	struct fc_reserve *r;
	struct fc_vmmh *v;
	struct fc_alloc *a;
	CUresult rc = CUDA_SUCCESS;

	FC_ENTER_INIT();
	if (!size || ptr % FC_GRAN || size % FC_GRAN || offset % FC_GRAN ||
	    flags)
		return CUDA_ERROR_INVALID_VALUE;
	fc_lock();
	v = vmmh_of(handle);
	r = fc_res_find(ptr);
	if (!v || !v->handle_refs || offset + size > v->size || !r ||
	    ptr + size > r->base + r->size || fc_reg_overlap(ptr, size)) {
		rc = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	/* no access until cuMemSetAccess, as on the real device */
	if (mmap((void *)ptr, size, PROT_NONE, MAP_SHARED | MAP_FIXED, v->fd,
		 offset) == MAP_FAILED) {
		rc = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	a = fc_reg_add(FC_K_VMM, ptr, size, v->dev, NULL);
	if (!a) {
		fc_unmap_to_reserved(ptr, size);
		rc = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	a->span_base = ptr;
	a->span = size;
	a->vmmh = v;
	a->map_offset = offset;
	v->refs++;
out:
	fc_unlock();
	return rc;
}

FC_API CUresult CUDAAPI cuMemUnmap(CUdeviceptr ptr, size_t size)
{
	CUresult rc = CUDA_SUCCESS;
	int found = 0;

	FC_ENTER_INIT();
	if (!size || ptr % FC_GRAN || size % FC_GRAN)
		return CUDA_ERROR_INVALID_VALUE;
	fc_lock();
	/* every mapping in the range must lie wholly inside it */
	for (size_t i = 0; i < fc.na; i++) {
		struct fc_alloc *a = fc.a[i];

		if (a->kind != FC_K_VMM || a->base + a->size <= ptr ||
		    a->base >= ptr + size)
			continue;
		if (a->base < ptr || a->base + a->size > ptr + size) {
			rc = CUDA_ERROR_INVALID_VALUE;
			goto out;
		}
		found = 1;
	}
	if (!found) {
		rc = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	for (size_t i = 0; i < fc.na;) {
		struct fc_alloc *a = fc.a[i];

		if (a->kind == FC_K_VMM && a->base >= ptr &&
		    a->base < ptr + size)
			fc_release_alloc(a);
		else
			i++;
	}
out:
	fc_unlock();
	return rc;
}

FC_API CUresult CUDAAPI cuMemSetAccess(CUdeviceptr ptr, size_t size,
				       const CUmemAccessDesc *desc, size_t count)
{
	CUresult rc = CUDA_SUCCESS;
	int prot = PROT_NONE;
	uintptr_t p;

	FC_ENTER_INIT();
	if (!desc || !count || !size || ptr % FC_GRAN || size % FC_GRAN)
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < count; i++) {
		if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
		    desc[i].location.id < 0 || desc[i].location.id >= fc.ndev ||
		    (desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE &&
		     desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READ &&
		     desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE))
			return CUDA_ERROR_INVALID_VALUE;
		if (desc[i].flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
			prot = PROT_READ | PROT_WRITE;
		else if (desc[i].flags == CU_MEM_ACCESS_FLAGS_PROT_READ &&
			 prot == PROT_NONE)
			prot = PROT_READ;
	}
	fc_lock();
	/* the whole range must be mapped */
	for (p = ptr; p < ptr + size;) {
		struct fc_alloc *a = fc_find(p);

		if (!a || a->kind != FC_K_VMM) {
			rc = CUDA_ERROR_INVALID_VALUE;
			goto out;
		}
		p = a->base + a->size;
	}
	if (mprotect((void *)ptr, size, prot)) {
		rc = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	/* what cuMemGetAccess reports, per mapping and device */
	for (p = ptr; p < ptr + size;) {
		struct fc_alloc *a = fc_find(p);

		for (size_t i = 0; i < count; i++)
			a->access[desc[i].location.id] = desc[i].flags;
		p = a->base + a->size;
	}
out:
	fc_unlock();
	return rc;
}

/*
 * The flags cuMemSetAccess last gave @location on the mapping holding
 * @ptr (PROT_NONE until then, as cuMemMap leaves it).  Device locations
 * only, like cuMemSetAccess.  cuMemAlloc memory: success and PROT_NONE
 * (H200, driver 580: probe.c); other kinds no mapping made are taken to
 * answer alike (unmeasured).  An address in no allocation: INVALID_VALUE.
 */
FC_API CUresult CUDAAPI cuMemGetAccess(unsigned long long *flags,
				       const CUmemLocation *location,
				       CUdeviceptr ptr)
{
	CUresult rc = CUDA_SUCCESS;
	struct fc_alloc *a;

	FC_ENTER_INIT();
	if (!flags || !location ||
	    location->type != CU_MEM_LOCATION_TYPE_DEVICE)
		return CUDA_ERROR_INVALID_VALUE;
	if (location->id < 0 || location->id >= fc.ndev)
		return CUDA_ERROR_INVALID_DEVICE;
	fc_lock();
	a = fc_find(ptr);
	if (!a)
		rc = CUDA_ERROR_INVALID_VALUE;
	else
		*flags = a->kind == FC_K_VMM ? a->access[location->id] :
			 CU_MEM_ACCESS_FLAGS_PROT_NONE;
	fc_unlock();
	return rc;
}

FC_API CUresult CUDAAPI cuMemGetAllocationPropertiesFromHandle(
	CUmemAllocationProp *prop, CUmemGenericAllocationHandle handle)
{
	struct fc_vmmh *v;
	CUresult rc = CUDA_SUCCESS;

	FC_ENTER_INIT();
	if (!prop)
		return CUDA_ERROR_INVALID_VALUE;
	fc_lock();
	v = vmmh_of(handle);
	if (!v)
		rc = CUDA_ERROR_INVALID_VALUE;
	else
		*prop = v->prop;
	fc_unlock();
	return rc;
}

FC_API CUresult CUDAAPI cuMemRetainAllocationHandle(
	CUmemGenericAllocationHandle *handle, void *addr)
{
	struct fc_alloc *a;
	CUresult rc = CUDA_SUCCESS;

	FC_ENTER_INIT();
	if (!handle)
		return CUDA_ERROR_INVALID_VALUE;
	fc_lock();
	a = fc_find((uintptr_t)addr);
	if (!a || a->kind != FC_K_VMM) {
		rc = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	a->vmmh->refs++;
	a->vmmh->handle_refs++;
	*handle = (CUmemGenericAllocationHandle)(uintptr_t)a->vmmh;
out:
	fc_unlock();
	return rc;
}
