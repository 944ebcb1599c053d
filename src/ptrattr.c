// SPDX-License-Identifier: MIT
/*
 * cuPointerGetAttribute(s): the per-use tag check of libfabric and Open
 * MPI (CU_POINTER_ATTRIBUTE_BUFFER_ID) answered from the registry.
 *
 * For a pointer inside a tracked allocation, while the registry is
 * trusted, BUFFER_ID is the allocation's generation with bit 63 set: it
 * changes on every free and reallocation at the same address, is never
 * reused in the process, and cannot collide with an ID the driver hands
 * out (small counters), so a cache that stored one of ours and later gets
 * the driver's (GDRHOOK_BUFFER_ID=driver, or the registry became
 * untrusted) sees a mismatch and re-registers: it never mistakes one for
 * the other.  Every other attribute, untracked pointer or error goes to
 * the driver unchanged.  cuPointerGetAttributes asks the driver for the
 * other attributes (one call) and then fills in BUFFER_ID; when every
 * attribute asked is BUFFER_ID the driver is not called at all.
 */
#include <errno.h>
#include <string.h>

#include "internal.h"
#include "hookrt.h"

#undef cuPointerGetAttribute
#undef cuPointerGetAttributes

#define GH_BUFFER_ID_TAG	(1ULL << 63)

typedef CUresult (*get_attr_fn)(void *, CUpointer_attribute, CUdeviceptr);
typedef CUresult (*get_attrs_fn)(unsigned int, CUpointer_attribute *,
				 void **, CUdeviceptr);

static int from_registry(void)
{
	static int mode = -1;	/* 1 registry, 0 driver */
	int m = __atomic_load_n(&mode, __ATOMIC_RELAXED);

	if (GH_UNLIKELY(m < 0)) {
		m = !(gh_cfg.buffer_id && !strcmp(gh_cfg.buffer_id, "driver"));
		__atomic_store_n(&mode, m, __ATOMIC_RELAXED);
	}
	return m && !__atomic_load_n(&gh_untrusted, __ATOMIC_RELAXED);
}

/* The registry's buffer ID for ptr; 0 and *id_p, or -1: ask the driver. */
static int registry_id(CUdeviceptr ptr, unsigned long long *id_p)
{
	struct gh_range r;

	if (!gh_active() || !from_registry() ||
	    gh_registry_lookup((uint64_t)ptr, 1, &r))
		return -1;
	*id_p = (unsigned long long)(r.gen | GH_BUFFER_ID_TAG);
	return 0;
}

CUresult gh_manual_cuPointerGetAttribute(void *data,
					 CUpointer_attribute attribute,
					 CUdeviceptr ptr)
{
	get_attr_fn real = (get_attr_fn)gh_real_get(GH_SYM_cuPointerGetAttribute);
	unsigned long long id;
	int saved = errno;

	if (attribute == CU_POINTER_ATTRIBUTE_BUFFER_ID && data &&
	    !registry_id(ptr, &id)) {
		memcpy(data, &id, sizeof(id));
		errno = saved;
		return CUDA_SUCCESS;
	}
	errno = saved;
	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	return real(data, attribute, ptr);
}

CUresult gh_manual_cuPointerGetAttributes(unsigned int numAttributes,
					  CUpointer_attribute *attributes,
					  void **data, CUdeviceptr ptr)
{
	get_attrs_fn real =
		(get_attrs_fn)gh_real_get(GH_SYM_cuPointerGetAttributes);
	unsigned long long id;
	unsigned int i, n_id = 0;
	int saved = errno, have = 0;
	CUresult rc;

	if (numAttributes && attributes && data) {
		for (i = 0; i < numAttributes; i++)
			n_id += attributes[i] == CU_POINTER_ATTRIBUTE_BUFFER_ID;
		if (n_id)
			have = !registry_id(ptr, &id);
	}
	if (have && n_id == numAttributes) {
		for (i = 0; i < numAttributes; i++)
			if (data[i])
				memcpy(data[i], &id, sizeof(id));
		errno = saved;
		return CUDA_SUCCESS;
	}
	errno = saved;
	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	rc = real(numAttributes, attributes, data, ptr);
	if (rc == CUDA_SUCCESS && have) {
		saved = errno;
		for (i = 0; i < numAttributes; i++)
			if (attributes[i] == CU_POINTER_ATTRIBUTE_BUFFER_ID &&
			    data[i])
				memcpy(data[i], &id, sizeof(id));
		errno = saved;
	}
	return rc;
}

GH_EXPORT CUresult cuPointerGetAttribute(void *data,
					 CUpointer_attribute attribute,
					 CUdeviceptr ptr)
	__attribute__((alias("gh_manual_cuPointerGetAttribute")));
GH_EXPORT CUresult cuPointerGetAttributes(unsigned int numAttributes,
					  CUpointer_attribute *attributes,
					  void **data, CUdeviceptr ptr)
	__attribute__((alias("gh_manual_cuPointerGetAttributes")));
