// SPDX-License-Identifier: MIT
/*
 * src/platform/drv.c: the driver queries gdrhook makes for itself,
 * against the driver double (GDRHOOK_LIBCUDA naming it by path), and
 * what they say with no driver at all.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "harness.h"
#include "doubles.h"

#include "platform/platform.h"

static void *cuda;

/* The double's fn (the exported name, spelled out: cuda.h's macros
 * would send a bare cuMemAlloc to its _v2 type but its old name). */
#define DRV(fn)	((__typeof__(fn) *)double_sym(cuda, #fn))
#define DRV_OK(call) CHECK_EQ((call), CUDA_SUCCESS)

static unsigned long calls(const char *sym)
{
	return ((unsigned long (*)(const char *))double_sym(cuda,
		"fakecuda_calls"))(sym);
}

/* The double as gdrhook's driver, initialized; device 0's primary
 * context current. */
static CUcontext use_double(void)
{
	CUcontext ctx = NULL;

	gh_platform_cfg.libcuda = double_path("fake/libcuda.so.1");
	cuda = gh_libcuda_handle();
	CHECK(cuda != NULL);
	DRV_OK(DRV(cuInit)(0));
	DRV_OK(DRV(cuDevicePrimaryCtxRetain)(&ctx, 0));
	DRV_OK(DRV(cuCtxSetCurrent)(ctx));
	return ctx;
}

/* No driver: every query fails, outputs untouched. */
TEST(without_a_driver_every_query_fails)
{
	uint64_t a = 7, b = 7;
	int dev = 7;
	void *h = dlopen("libcuda.so.1", RTLD_LAZY);

	if (h)
		SKIP("this machine has a libcuda.so.1");
	gh_platform_cfg.libcuda = NULL;
	gh_log_level = GH_LOG_NONE;	/* test_resolve checks the warning */
	CHECK_EQ(gh_drv_ctx_current(&a), -1);
	CHECK_EQ(gh_drv_ctx_device(&dev), -1);
	CHECK_EQ(gh_drv_ctx_device_of(1, &dev), -1);
	CHECK_EQ(gh_drv_range(0x1000, &a, &b), -1);
	CHECK_EQ(gh_drv_buffer_id(0x1000, &a), -1);
	CHECK_EQ(gh_drv_primary_active(0), 0);
	CHECK_EQ(gh_drv_primary_ctx(0, &a), -1);
	CHECK_EQ(gh_drv_vmm_device(1, &dev), -1);
	CHECK_EQ(gh_drv_vmm_mapped(0x1000), 0);
	CHECK_EQ(gh_drv_capture_graph(0x1234, &a), 0);
	CHECK_EQ(gh_drv_graph_node_type(0x1234), -1);
	CHECK_EQ(a, 7);
	CHECK_EQ(b, 7);
	CHECK_EQ(dev, 7);
}

/* The current context, its device, device 1's primary context: active
 * only once retained, and then the handle the program got. */
TEST(context_device_and_primary_context)
{
	CUcontext ctx = use_double(), ctx1 = NULL;
	uint64_t got = 0;
	int dev = -1;

	CHECK_EQ(gh_drv_ctx_current(&got), 0);
	CHECK_EQ(got, (uintptr_t)ctx);
	CHECK_EQ(gh_drv_ctx_device(&dev), 0);
	CHECK_EQ(dev, 0);
	CHECK_EQ(gh_drv_primary_active(0), 1);
	CHECK_EQ(gh_drv_primary_ctx(0, &got), 0);
	CHECK_EQ(got, (uintptr_t)ctx);
	CHECK_EQ(gh_drv_primary_active(1), 0);
	got = 5;
	CHECK_EQ(gh_drv_primary_ctx(1, &got), -1);
	CHECK_EQ(got, 5);
	DRV_OK(DRV(cuDevicePrimaryCtxRetain)(&ctx1, 1));
	CHECK_EQ(gh_drv_primary_ctx(1, &got), 0);
	CHECK_EQ(got, (uintptr_t)ctx1);
	/* the query retained and released: still retained once, by us */
	DRV_OK(DRV(cuDevicePrimaryCtxRelease_v2)(1));
	CHECK_EQ(gh_drv_primary_active(1), 0);
	DRV_OK(DRV(cuCtxSetCurrent)(ctx1));
	CHECK_EQ(gh_drv_ctx_device(&dev), 0);	/* inactive, still current */
	CHECK_EQ(dev, 1);
}

/* The device of a context is asked once per thread and context, again
 * after gh_drv_ctx_forget (a context destroyed may lend its handle). */
TEST(device_of_a_context_cached_until_forget)
{
	CUcontext ctx = use_double();
	unsigned long n0;
	int dev = -1;

	n0 = calls("cuCtxGetDevice");
	CHECK_EQ(gh_drv_ctx_device_of((uintptr_t)ctx, &dev), 0);
	CHECK_EQ(dev, 0);
	CHECK_EQ(calls("cuCtxGetDevice"), n0 + 1);
	dev = -1;
	CHECK_EQ(gh_drv_ctx_device_of((uintptr_t)ctx, &dev), 0);
	CHECK_EQ(dev, 0);
	CHECK_EQ(calls("cuCtxGetDevice"), n0 + 1);
	gh_drv_ctx_forget();
	CHECK_EQ(gh_drv_ctx_device_of((uintptr_t)ctx, &dev), 0);
	CHECK_EQ(calls("cuCtxGetDevice"), n0 + 2);
	/* no context handle: never cached */
	CHECK_EQ(gh_drv_ctx_device_of(0, &dev), 0);
	CHECK_EQ(gh_drv_ctx_device_of(0, &dev), 0);
	CHECK_EQ(calls("cuCtxGetDevice"), n0 + 4);
}

/* The allocation around a pointer and its buffer ID; nothing for a
 * pointer the driver does not know. */
TEST(range_and_buffer_id)
{
	CUdeviceptr p, q;
	uint64_t base = 0, size = 0, id_p = 0, id_q = 0;

	use_double();
	DRV_OK(DRV(cuMemAlloc_v2)(&p, 1 << 20));
	DRV_OK(DRV(cuMemAlloc_v2)(&q, 4096));
	CHECK_EQ(gh_drv_range(p + 1000, &base, &size), 0);
	CHECK_EQ(base, p);
	CHECK_EQ(size, 1 << 20);
	CHECK_EQ(gh_drv_buffer_id(p + 1000, &id_p), 0);
	CHECK_EQ(gh_drv_buffer_id(q, &id_q), 0);
	CHECK(id_p != 0 && id_q != 0 && id_p != id_q);
	DRV_OK(DRV(cuMemFree_v2)(p));
	base = size = id_p = 9;
	CHECK_EQ(gh_drv_range(p + 1000, &base, &size), -1);
	CHECK_EQ(gh_drv_buffer_id(p + 1000, &id_p), -1);
	CHECK_EQ(base, 9);
	CHECK_EQ(size, 9);
	CHECK_EQ(id_p, 9);
	DRV_OK(DRV(cuMemFree_v2)(q));
}

/* A VMM handle's device; whether a physical allocation is mapped at a
 * pointer (reserved alone: not). */
TEST(vmm_handle_device_and_mapping)
{
	CUmemAllocationProp prop;
	CUmemGenericAllocationHandle h;
	CUdeviceptr va;
	size_t gran = 0;
	int dev = -1;

	use_double();
	memset(&prop, 0, sizeof(prop));
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = 1;
	DRV_OK(DRV(cuMemGetAllocationGranularity)(
		&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
	DRV_OK(DRV(cuMemCreate)(&h, gran, &prop, 0));
	CHECK_EQ(gh_drv_vmm_device(h, &dev), 0);
	CHECK_EQ(dev, 1);
	DRV_OK(DRV(cuMemAddressReserve)(&va, 2 * gran, 0, 0, 0));
	CHECK_EQ(gh_drv_vmm_mapped(va), 0);
	DRV_OK(DRV(cuMemMap)(va, gran, 0, h, 0));
	CHECK_EQ(gh_drv_vmm_mapped(va), 1);
	CHECK_EQ(gh_drv_vmm_mapped(va + gran), 0);
	DRV_OK(DRV(cuMemUnmap)(va, gran));
	CHECK_EQ(gh_drv_vmm_mapped(va), 0);
	DRV_OK(DRV(cuMemRelease)(h));
	DRV_OK(DRV(cuMemAddressFree)(va, 2 * gran));
}

/*
 * The graph a stream captures into: none for the default streams (the
 * driver not even asked) nor for a stream not capturing; the type of a
 * node.
 */
TEST(capture_graph_and_node_type)
{
	CUstream s;
	CUgraph g = NULL, cg;
	CUgraphNode an, fn;
	CUDA_MEM_ALLOC_NODE_PARAMS ap;
	uint64_t got = 0;
	unsigned long n0;

	use_double();
	DRV_OK(DRV(cuStreamCreate)(&s, 0));
	n0 = calls("cuStreamGetCaptureInfo_v3");
	CHECK_EQ(gh_drv_capture_graph(0, &got), 0);
	CHECK_EQ(gh_drv_capture_graph((uintptr_t)CU_STREAM_LEGACY, &got), 0);
	CHECK_EQ(gh_drv_capture_graph((uintptr_t)CU_STREAM_PER_THREAD, &got),
		 0);
	CHECK_EQ(calls("cuStreamGetCaptureInfo_v3"), n0);
	CHECK_EQ(gh_drv_capture_graph((uintptr_t)s, &got), 0);
	CHECK_EQ(got, 0);
	DRV_OK(DRV(cuStreamBeginCapture_v2)(s,
		CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
	CHECK_EQ(gh_drv_capture_graph((uintptr_t)s, &got), 1);
	CHECK(got != 0);
	DRV_OK(DRV(cuStreamEndCapture)(s, &cg));
	CHECK_EQ(got, (uintptr_t)cg);
	CHECK_EQ(gh_drv_capture_graph((uintptr_t)s, &got), 0);
	DRV_OK(DRV(cuGraphCreate)(&g, 0));
	memset(&ap, 0, sizeof(ap));
	ap.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
	ap.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	ap.bytesize = 1 << 20;
	DRV_OK(DRV(cuGraphAddMemAllocNode)(&an, g, NULL, 0, &ap));
	DRV_OK(DRV(cuGraphAddMemFreeNode)(&fn, g, &an, 1, ap.dptr));
	CHECK_EQ(gh_drv_graph_node_type((uintptr_t)an),
		 CU_GRAPH_NODE_TYPE_MEM_ALLOC);
	CHECK_EQ(gh_drv_graph_node_type((uintptr_t)fn),
		 CU_GRAPH_NODE_TYPE_MEM_FREE);
	CHECK_EQ(gh_drv_graph_node_type(0x1234), -1);
	DRV_OK(DRV(cuGraphDestroy)(g));
	DRV_OK(DRV(cuGraphDestroy)(cg));
	DRV_OK(DRV(cuStreamDestroy_v2)(s));
}

TEST_MAIN()
