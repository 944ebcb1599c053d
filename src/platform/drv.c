// SPDX-License-Identifier: MIT
/*
 * Driver calls gdrhook makes for itself (context and device of a new
 * allocation, audit queries).  They go to the real entry points, never
 * through our wrappers, and are resolved once from libcuda.
 */
#include <stddef.h>
#include <string.h>

#include <cuda.h>

#include "gh_hooks.h"
#include "base/base.h"
#include "drv.h"
#include "resolve.h"

enum drv_fn {
	DRV_CTX_GET_CURRENT,
	DRV_CTX_GET_DEVICE,
	DRV_MEM_GET_ADDRESS_RANGE,
	DRV_POINTER_GET_ATTRIBUTE,
	DRV_PRIMARY_GET_STATE,
	DRV_ALLOC_PROPS_FROM_HANDLE,
	DRV_RETAIN_ALLOCATION_HANDLE,
	DRV_RELEASE,
	DRV_CAPTURE_INFO,
	DRV_NODE_TYPE,
	DRV_COUNT
};

static const char *const drv_names[DRV_COUNT] = {
	"cuCtxGetCurrent",
	"cuCtxGetDevice",
	"cuMemGetAddressRange_v2",
	"cuPointerGetAttribute",
	"cuDevicePrimaryCtxGetState",
	"cuMemGetAllocationPropertiesFromHandle",
	"cuMemRetainAllocationHandle",
	"cuMemRelease",
	"cuStreamGetCaptureInfo_v3",
	"cuGraphNodeGetType",
};

static void *drv_ptr[DRV_COUNT];

static void *drv(enum drv_fn f)
{
	void *p = __atomic_load_n(&drv_ptr[f], __ATOMIC_ACQUIRE);
	void *h;

	if (GH_LIKELY(p != NULL))
		return p;
	h = gh_libcuda_handle();
	if (!h)
		return NULL;
	p = gh_real_dlsym(h, drv_names[f]);
	if (p && gh_addr_is_ours(p))
		p = NULL;
	__atomic_store_n(&drv_ptr[f], p, __ATOMIC_RELEASE);
	return p;
}

int gh_drv_ctx_current(uint64_t *ctx_p)
{
	CUresult (*f)(CUcontext *) = drv(DRV_CTX_GET_CURRENT);
	CUcontext ctx = NULL;

	if (!f || f(&ctx) != CUDA_SUCCESS)
		return -1;
	*ctx_p = (uint64_t)(uintptr_t)ctx;
	return 0;
}

int gh_drv_ctx_device(int *dev_p)
{
	CUresult (*f)(CUdevice *) = drv(DRV_CTX_GET_DEVICE);
	CUdevice dev = -1;

	if (!f || f(&dev) != CUDA_SUCCESS)
		return -1;
	*dev_p = dev;
	return 0;
}

/*
 * Contexts destroyed, reset or released so far.  A context's device never
 * changes, but a new context may get a dead one's handle: a cached
 * answer holds while this has not moved.
 */
static uint64_t drv_ctx_epoch;

static __thread struct {
	uint64_t ctx, epoch;
	int dev;
} drv_ctx_cache;

void gh_drv_ctx_forget(void)
{
	__atomic_add_fetch(&drv_ctx_epoch, 1, __ATOMIC_ACQ_REL);
}

/* The device of ctx, the calling thread's current context: one driver
 * call per thread and context instead of one per allocation. */
int gh_drv_ctx_device_of(uint64_t ctx, int *dev_p)
{
	uint64_t ep = __atomic_load_n(&drv_ctx_epoch, __ATOMIC_ACQUIRE);
	int dev;

	if (ctx && drv_ctx_cache.ctx == ctx && drv_ctx_cache.epoch == ep) {
		*dev_p = drv_ctx_cache.dev;
		return 0;
	}
	if (gh_drv_ctx_device(&dev))
		return -1;
	drv_ctx_cache.ctx = ctx;
	drv_ctx_cache.epoch = ep;
	drv_ctx_cache.dev = dev;
	*dev_p = dev;
	return 0;
}

int gh_drv_range(uint64_t ptr, uint64_t *base_p, uint64_t *size_p)
{
	CUresult (*f)(CUdeviceptr *, size_t *, CUdeviceptr) =
		drv(DRV_MEM_GET_ADDRESS_RANGE);
	CUdeviceptr base = 0;
	size_t size = 0;

	if (!f || f(&base, &size, (CUdeviceptr)ptr) != CUDA_SUCCESS)
		return -1;
	*base_p = base;
	*size_p = size;
	return 0;
}

int gh_drv_buffer_id(uint64_t ptr, uint64_t *id_p)
{
	CUresult (*f)(void *, CUpointer_attribute, CUdeviceptr) =
		drv(DRV_POINTER_GET_ATTRIBUTE);
	unsigned long long id = 0;

	if (!f || f(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID, (CUdeviceptr)ptr) !=
	    CUDA_SUCCESS)
		return -1;
	*id_p = id;
	return 0;
}

int gh_drv_primary_active(int dev)
{
	CUresult (*f)(CUdevice, unsigned int *, int *) =
		drv(DRV_PRIMARY_GET_STATE);
	unsigned int flags = 0;
	int active = 0;

	if (!f || f((CUdevice)dev, &flags, &active) != CUDA_SUCCESS)
		return 0;
	return active;
}

/*
 * The handle of an active primary context: retain then release it (the
 * count stays >= 1 because it is active, so this never destroys it).
 */
int gh_drv_primary_ctx(int dev, uint64_t *ctx_p)
{
	CUresult (*retain)(CUcontext *, CUdevice);
	CUresult (*release)(CUdevice);
	CUcontext ctx = NULL;

	if (!gh_drv_primary_active(dev))
		return -1;
	retain = gh_real_get(GH_SYM_cuDevicePrimaryCtxRetain);
	release = gh_real_get(GH_SYM_cuDevicePrimaryCtxRelease_v2);
	if (!retain || !release || retain(&ctx, (CUdevice)dev) != CUDA_SUCCESS)
		return -1;
	release((CUdevice)dev);
	*ctx_p = (uint64_t)(uintptr_t)ctx;
	return 0;
}

int gh_drv_vmm_device(uint64_t handle, int *dev_p)
{
	CUresult (*f)(CUmemAllocationProp *, CUmemGenericAllocationHandle) =
		drv(DRV_ALLOC_PROPS_FROM_HANDLE);
	CUmemAllocationProp prop;

	memset(&prop, 0, sizeof(prop));
	if (!f || f(&prop, (CUmemGenericAllocationHandle)handle) !=
	    CUDA_SUCCESS)
		return -1;
	*dev_p = prop.location.type == CU_MEM_LOCATION_TYPE_DEVICE ?
		 prop.location.id : -1;
	return 0;
}

/* Is a physical allocation mapped at ptr?  (VMM ranges are not visible to
 * cuMemGetAddressRange until access is set.) */
int gh_drv_vmm_mapped(uint64_t ptr)
{
	CUresult (*retain)(CUmemGenericAllocationHandle *, void *) =
		drv(DRV_RETAIN_ALLOCATION_HANDLE);
	CUresult (*release)(CUmemGenericAllocationHandle) = drv(DRV_RELEASE);
	CUmemGenericAllocationHandle h;

	if (!retain || !release ||
	    retain(&h, (void *)(uintptr_t)ptr) != CUDA_SUCCESS)
		return 0;
	release(h);
	return 1;
}

/* The graph stream s is capturing into: 1 and *graph_p, else 0.  The
 * legacy and per-thread default streams never capture. */
/* The type of graph node n (CUgraphNodeType), or -1. */
int gh_drv_graph_node_type(uint64_t n)
{
	CUresult (*f)(CUgraphNode, CUgraphNodeType *) = drv(DRV_NODE_TYPE);
	CUgraphNodeType t;

	if (!f || f((CUgraphNode)(uintptr_t)n, &t) != CUDA_SUCCESS)
		return -1;
	return (int)t;
}

int gh_drv_capture_graph(uint64_t stream, uint64_t *graph_p)
{
	CUresult (*f)(CUstream, CUstreamCaptureStatus *, cuuint64_t *,
		      CUgraph *, const CUgraphNode **, const CUgraphEdgeData **,
		      size_t *) = drv(DRV_CAPTURE_INFO);
	CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
	CUgraph g = NULL;

	if (stream == 0 || stream == (uint64_t)(uintptr_t)CU_STREAM_LEGACY ||
	    stream == (uint64_t)(uintptr_t)CU_STREAM_PER_THREAD || !f)
		return 0;
	if (f((CUstream)(uintptr_t)stream, &st, NULL, &g, NULL, NULL, NULL) !=
	    CUDA_SUCCESS || st != CU_STREAM_CAPTURE_STATUS_ACTIVE || !g)
		return 0;
	*graph_p = (uint64_t)(uintptr_t)g;
	return 1;
}
