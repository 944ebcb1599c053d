/* SPDX-License-Identifier: MIT */
/*
 * Self-test of the fake CUDA driver and runtime (make fake-selftest).
 * Each TEST runs in its own forked child (tests/harness.h).
 */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/mman.h>

#include "harness.h"
#include "fakecuda.h"

static CUcontext setup(int dev)
{
	CUcontext c;

	CHECK_EQ(cuInit(0), CUDA_SUCCESS);
	CHECK_EQ(cuDevicePrimaryCtxRetain(&c, dev), CUDA_SUCCESS);
	CHECK_EQ(cuCtxSetCurrent(c), CUDA_SUCCESS);
	return c;
}

static unsigned long long bufid(CUdeviceptr p)
{
	unsigned long long id = 0;

	CHECK_EQ(cuPointerGetAttribute(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID, p),
		 CUDA_SUCCESS);
	return id;
}

static int attr_rc(CUdeviceptr p)
{
	unsigned long long id;

	return cuPointerGetAttribute(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID, p);
}

static const char *sname(void *p)
{
	Dl_info di;

	return p && dladdr(p, &di) && di.dli_sname ? di.dli_sname : "(none)";
}

TEST(init_and_context_errors)
{
	CUdeviceptr p;
	int v = 0, n = 0;

	CHECK_EQ(cuMemAlloc(&p, 4096), CUDA_ERROR_NOT_INITIALIZED);
	CHECK_EQ(cuDriverGetVersion(&v), CUDA_SUCCESS);
	CHECK_EQ(v, 13000);
	CHECK_EQ(cuInit(0), CUDA_SUCCESS);
	CHECK_EQ(cuDeviceGetCount(&n), CUDA_SUCCESS);
	CHECK_EQ(n, 2);
	CHECK_EQ(cuMemAlloc(&p, 4096), CUDA_ERROR_INVALID_CONTEXT);
	CHECK_EQ(cuDevicePrimaryCtxRelease(0), CUDA_ERROR_INVALID_CONTEXT);
	CHECK_EQ(cuDeviceGet(&n, 7), CUDA_ERROR_INVALID_DEVICE);
}

TEST(device_count_env)
{
	int n = 0;

	setenv("FAKECUDA_DEVICES", "4", 1);
	CHECK_EQ(cuInit(0), CUDA_SUCCESS);
	CHECK_EQ(cuDeviceGetCount(&n), CUDA_SUCCESS);
	CHECK_EQ(n, 4);
}

TEST(device_can_access_peer)
{
	int can = 7;

	CHECK_EQ(cuDeviceCanAccessPeer(&can, 0, 1), CUDA_ERROR_NOT_INITIALIZED);
	CHECK_EQ(cuInit(0), CUDA_SUCCESS);
	CHECK_EQ(cuDeviceCanAccessPeer(&can, 0, 0), CUDA_SUCCESS);
	CHECK_EQ(can, 0);	/* a device and itself: 0, as the driver says */
	CHECK_EQ(cuDeviceCanAccessPeer(&can, 0, 1), CUDA_SUCCESS);
	CHECK_EQ(can, 1);
	can = 7;
	CHECK_EQ(cuDeviceCanAccessPeer(&can, 1, 0), CUDA_SUCCESS);
	CHECK_EQ(can, 1);
	can = 7;
	CHECK_EQ(cuDeviceCanAccessPeer(&can, 0, 2), CUDA_ERROR_INVALID_DEVICE);
	CHECK_EQ(cuDeviceCanAccessPeer(&can, -1, 0), CUDA_ERROR_INVALID_DEVICE);
	CHECK_EQ(can, 7);
	CHECK_EQ(cuDeviceCanAccessPeer(NULL, 0, 1), CUDA_ERROR_INVALID_VALUE);
}

TEST(device_can_access_peer_one_device)
{
	int can = 7;

	setenv("FAKECUDA_DEVICES", "1", 1);
	CHECK_EQ(cuInit(0), CUDA_SUCCESS);
	CHECK_EQ(cuDeviceCanAccessPeer(&can, 0, 0), CUDA_SUCCESS);
	CHECK_EQ(can, 0);
	CHECK_EQ(cuDeviceCanAccessPeer(&can, 0, 1), CUDA_ERROR_INVALID_DEVICE);
}

TEST(reuse_same_address_new_buffer_id)
{
	CUdeviceptr a, b;
	unsigned long long ia, ib;
	unsigned char x = 1;

	setup(0);
	CHECK_EQ(cuMemAlloc(&a, 1 << 20), CUDA_SUCCESS);
	ia = bufid(a);
	CHECK_EQ(cuMemsetD8(a, 0xab, 1 << 20), CUDA_SUCCESS);
	CHECK_EQ(cuMemFree(a), CUDA_SUCCESS);
	CHECK_EQ(attr_rc(a), CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(cuMemFree(a), CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(cuMemAlloc(&b, 1 << 20), CUDA_SUCCESS);
	ib = bufid(b);
	CHECK_EQ(a, b);
	CHECK_EQ(ib, ia + 1);
	CHECK_EQ(cuMemcpyDtoH(&x, b + 77, 1), CUDA_SUCCESS);
	CHECK_EQ(x, 0);		/* fresh contents */
	/* big ones too, and a different device lives elsewhere */
	CHECK_EQ(cuMemAlloc(&a, 5 << 20), CUDA_SUCCESS);
	CHECK_EQ(a % (2 << 20), 0);
	CHECK_EQ(cuMemFree(a), CUDA_SUCCESS);
	CHECK_EQ(cuMemAlloc(&b, 5 << 20), CUDA_SUCCESS);
	CHECK_EQ(a, b);
	CHECK_EQ(cuMemFree(0), CUDA_SUCCESS);
	CHECK_EQ(cuMemFree(b + 8), CUDA_ERROR_INVALID_VALUE);
}

TEST(small_allocations_share_granule)
{
	CUdeviceptr a, b, c, base;
	size_t sz;
	int ord = -1;

	setup(1);
	CHECK_EQ(cuMemAlloc(&a, 100), CUDA_SUCCESS);
	CHECK_EQ(cuMemAlloc(&b, 100), CUDA_SUCCESS);
	CHECK_EQ(cuMemAlloc(&c, 1000), CUDA_SUCCESS);
	CHECK_EQ(b - a, 512);
	CHECK_EQ(c - b, 512);
	CHECK_EQ(a >> 16, c >> 16);
	CHECK_EQ(cuMemGetAddressRange(&base, &sz, a + 50), CUDA_SUCCESS);
	CHECK_EQ(base, a);
	CHECK_EQ(sz, 100);
	CHECK_EQ(cuMemGetAddressRange(&base, &sz, a + 200), CUDA_ERROR_NOT_FOUND);
	CHECK_EQ(cuPointerGetAttribute(&ord, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
				       c), CUDA_SUCCESS);
	CHECK_EQ(ord, 1);
	CHECK_EQ(cuMemFree(b), CUDA_SUCCESS);
	CHECK_EQ(cuMemAlloc(&base, 200), CUDA_SUCCESS);
	CHECK_EQ(base, b);	/* LIFO per rounded size */
}

TEST(pointer_attributes)
{
	CUcontext ctx = setup(0), got = NULL;
	CUdeviceptr d, m;
	unsigned int mt = 0;
	void *h = NULL, *hp = (void *)1;
	int stackv, im = 0;
	CUpointer_attribute at[3] = { CU_POINTER_ATTRIBUTE_BUFFER_ID,
				      CU_POINTER_ATTRIBUTE_CONTEXT,
				      CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL };
	unsigned long long id = 9;
	int ordv = 9;
	void *vals[3] = { &id, &got, &ordv };

	CHECK_EQ(cuMemAlloc(&d, 4096), CUDA_SUCCESS);
	CHECK_EQ(cuPointerGetAttribute(&got, CU_POINTER_ATTRIBUTE_CONTEXT, d + 1),
		 CUDA_SUCCESS);
	CHECK(got == ctx);
	CHECK_EQ(cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, d),
		 CUDA_SUCCESS);
	CHECK_EQ(mt, CU_MEMORYTYPE_DEVICE);
	CHECK_EQ(cuPointerGetAttribute(&hp, CU_POINTER_ATTRIBUTE_HOST_POINTER, d),
		 CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(cuMemAllocManaged(&m, 4096, CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS);
	CHECK_EQ(cuPointerGetAttribute(&im, CU_POINTER_ATTRIBUTE_IS_MANAGED, m),
		 CUDA_SUCCESS);
	CHECK_EQ(im, 1);
	CHECK_EQ(cuMemAllocHost(&h, 100), CUDA_SUCCESS);
	CHECK_EQ(cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
				       (CUdeviceptr)h), CUDA_SUCCESS);
	CHECK_EQ(mt, CU_MEMORYTYPE_HOST);
	CHECK_EQ(attr_rc((CUdeviceptr)&stackv), CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(cuPointerGetAttributes(3, at, vals, (CUdeviceptr)&stackv),
		 CUDA_SUCCESS);
	CHECK_EQ(id, 0);
	CHECK(got == NULL);
	CHECK_EQ(ordv, -2);
	CHECK_EQ(cuPointerGetAttributes(3, at, vals, d), CUDA_SUCCESS);
	CHECK_EQ(id, bufid(d));
	CHECK(got == ctx);
	CHECK_EQ(ordv, 0);
	CHECK_EQ(cuMemFreeHost(h), CUDA_SUCCESS);
	CHECK_EQ(cuMemFreeHost(h), CUDA_ERROR_INVALID_VALUE);
}

TEST(host_register)
{
	void *h = aligned_alloc(4096, 1 << 16);
	CUdeviceptr dp = 0;

	setup(0);
	CHECK_EQ(cuMemHostRegister(h, 1 << 16, 0), CUDA_SUCCESS);
	CHECK_EQ(cuMemHostRegister((char *)h + 4096, 4096, 0),
		 CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
	CHECK_EQ(cuMemHostGetDevicePointer(&dp, (char *)h + 8, 0), CUDA_SUCCESS);
	CHECK_EQ(dp, (CUdeviceptr)h + 8);
	CHECK_EQ(cuMemHostUnregister((char *)h + 8), CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(cuMemHostUnregister(h), CUDA_SUCCESS);
	CHECK_EQ(cuMemHostUnregister(h), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
	free(h);
}

TEST(ctx_destroy_frees_allocations)
{
	CUcontext prim = setup(0), mine, cur;
	CUdeviceptr p, q;
	size_t live;

	CHECK_EQ(cuMemAlloc(&q, 4096), CUDA_SUCCESS);
	live = fakecuda_live_count();
	CHECK_EQ(cuCtxCreate(&mine, NULL, 0, 0), CUDA_SUCCESS);
	CHECK_EQ(cuCtxGetCurrent(&cur), CUDA_SUCCESS);
	CHECK(cur == mine);
	CHECK_EQ(cuMemAlloc(&p, 3 << 20), CUDA_SUCCESS);
	CHECK_EQ(fakecuda_live_count(), live + 1);
	CHECK_EQ(cuCtxDestroy(mine), CUDA_SUCCESS);
	CHECK_EQ(cuCtxGetCurrent(&cur), CUDA_SUCCESS);
	CHECK(cur == prim);
	CHECK_EQ(attr_rc(p), CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(attr_rc(q), CUDA_SUCCESS);
	CHECK_EQ(fakecuda_live_count(), live);
	CHECK_EQ(cuCtxDestroy(mine), CUDA_ERROR_CONTEXT_IS_DESTROYED);
	CHECK_EQ(cuCtxDestroy(prim), CUDA_ERROR_INVALID_CONTEXT);
}

TEST(primary_refcount_and_reset)
{
	CUcontext c = setup(0), c2;
	CUdeviceptr p;
	unsigned int fl;
	int active;

	CHECK_EQ(cuDevicePrimaryCtxRetain(&c2, 0), CUDA_SUCCESS);
	CHECK(c == c2);
	CHECK_EQ(cuMemAlloc(&p, 4096), CUDA_SUCCESS);
	CHECK_EQ(cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);
	CHECK_EQ(attr_rc(p), CUDA_SUCCESS);
	CHECK_EQ(cuDevicePrimaryCtxReset(0), CUDA_SUCCESS);
	CHECK_EQ(attr_rc(p), CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(cuDevicePrimaryCtxGetState(0, &fl, &active), CUDA_SUCCESS);
	CHECK_EQ(active, 0);
	CHECK_EQ(cuMemAlloc(&p, 4096), CUDA_ERROR_CONTEXT_IS_DESTROYED);
	CHECK_EQ(cuDevicePrimaryCtxRetain(&c2, 0), CUDA_SUCCESS);
	CHECK(c == c2);
	CHECK_EQ(cuMemAlloc(&p, 4096), CUDA_SUCCESS);
	CHECK_EQ(cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);
	CHECK_EQ(cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);	/* last */
	CHECK_EQ(attr_rc(p), CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(cuDevicePrimaryCtxRelease(0), CUDA_ERROR_INVALID_CONTEXT);
	CHECK_EQ(fakecuda_live_count(), 0);
}

TEST(vmm_aliasing)
{
	CUmemAllocationProp prop = { 0 };
	CUmemAccessDesc ad = { { CU_MEM_LOCATION_TYPE_DEVICE, 0 },
			       CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
	CUmemGenericAllocationHandle h, h2;
	CUdeviceptr va, start = 0, base;
	size_t g = 0, rs = 0, sz;
	unsigned char b[8] = { 0 };

	setup(0);
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	CHECK_EQ(cuMemGetAllocationGranularity(&g, &prop,
			CU_MEM_ALLOC_GRANULARITY_MINIMUM), CUDA_SUCCESS);
	CHECK_EQ(g, 2 << 20);
	CHECK_EQ(cuMemCreate(&h, 1000, &prop, 0), CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(cuMemCreate(&h, g, &prop, 0), CUDA_SUCCESS);
	CHECK_EQ(cuMemAddressReserve(&va, 4 * g, 0, 0, 0), CUDA_SUCCESS);
	CHECK_EQ(attr_rc(va), CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(cuMemMap(va, g, 0, h, 0), CUDA_SUCCESS);
	CHECK_EQ(cuMemMap(va + g, g, 0, h, 0), CUDA_SUCCESS);
	CHECK_EQ(cuMemSetAccess(va, 2 * g, &ad, 1), CUDA_SUCCESS);
	CHECK(bufid(va) != bufid(va + g));
	CHECK_EQ(cuMemsetD8(va + 3, 0x5a, 1), CUDA_SUCCESS);
	CHECK_EQ(cuMemcpyDtoH(b, va + g, 8), CUDA_SUCCESS);
	CHECK_EQ(b[3], 0x5a);	/* same physical pages */
	CHECK_EQ(cuMemGetAddressRange(&base, &sz, va + g + 8), CUDA_SUCCESS);
	CHECK_EQ(base, va + g);
	CHECK_EQ(sz, g);
	cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, va + g);
	cuPointerGetAttribute(&rs, CU_POINTER_ATTRIBUTE_RANGE_SIZE, va + g);
	CHECK_EQ(start, va);
	CHECK_EQ(rs, 4 * g);
	CHECK_EQ(cuMemRetainAllocationHandle(&h2, (void *)(va + 5)), CUDA_SUCCESS);
	CHECK_EQ(h2, h);
	CHECK_EQ(cuMemRelease(h2), CUDA_SUCCESS);
	CHECK_EQ(cuMemRelease(h), CUDA_SUCCESS);	/* mapped: stays */
	CHECK_EQ(cuMemcpyDtoH(b, va + g, 8), CUDA_SUCCESS);
	CHECK_EQ(b[3], 0x5a);
	CHECK_EQ(cuMemUnmap(va + 8, g), CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(cuMemUnmap(va, g), CUDA_SUCCESS);
	CHECK_EQ(attr_rc(va), CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(cuMemUnmap(va + g, g), CUDA_SUCCESS);
	CHECK_EQ(cuMemAddressFree(va, 4 * g), CUDA_SUCCESS);
	CHECK_EQ(fakecuda_live_count(), 0);
}

TEST(vmm_get_access)
{
	CUmemAllocationProp prop = { 0 };
	CUmemAccessDesc ad[2] = {
		{ { CU_MEM_LOCATION_TYPE_DEVICE, 0 },
		  CU_MEM_ACCESS_FLAGS_PROT_READWRITE },
		{ { CU_MEM_LOCATION_TYPE_DEVICE, 1 },
		  CU_MEM_ACCESS_FLAGS_PROT_READ } };
	CUmemLocation l0 = { CU_MEM_LOCATION_TYPE_DEVICE, 0 };
	CUmemLocation l1 = { CU_MEM_LOCATION_TYPE_DEVICE, 1 };
	CUmemLocation bad = { CU_MEM_LOCATION_TYPE_DEVICE, 5 };
	CUmemLocation host = { CU_MEM_LOCATION_TYPE_HOST, 0 };
	CUmemGenericAllocationHandle h;
	unsigned long long f = 9;
	CUdeviceptr va, d;
	size_t g = 2 << 20;

	setup(0);
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	CHECK_EQ(cuMemCreate(&h, g, &prop, 0), CUDA_SUCCESS);
	CHECK_EQ(cuMemAddressReserve(&va, 2 * g, 0, 0, 0), CUDA_SUCCESS);
	CHECK_EQ(cuMemGetAccess(&f, &l0, va), CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(cuMemMap(va, g, 0, h, 0), CUDA_SUCCESS);
	CHECK_EQ(cuMemGetAccess(&f, &l0, va + 100), CUDA_SUCCESS);
	CHECK_EQ(f, CU_MEM_ACCESS_FLAGS_PROT_NONE);	/* until set */
	CHECK_EQ(cuMemSetAccess(va, g, &ad[0], 1), CUDA_SUCCESS);
	CHECK_EQ(cuMemGetAccess(&f, &l0, va + g - 1), CUDA_SUCCESS);
	CHECK_EQ(f, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
	CHECK_EQ(cuMemGetAccess(&f, &l1, va), CUDA_SUCCESS);
	CHECK_EQ(f, CU_MEM_ACCESS_FLAGS_PROT_NONE);
	CHECK_EQ(cuMemSetAccess(va, g, &ad[1], 1), CUDA_SUCCESS);
	CHECK_EQ(cuMemGetAccess(&f, &l1, va), CUDA_SUCCESS);
	CHECK_EQ(f, CU_MEM_ACCESS_FLAGS_PROT_READ);
	CHECK_EQ(cuMemGetAccess(&f, &l0, va), CUDA_SUCCESS);
	CHECK_EQ(f, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);	/* kept */
	ad[1].flags = (CUmemAccess_flags)2;	/* no such flags */
	CHECK_EQ(cuMemSetAccess(va, g, &ad[1], 1), CUDA_ERROR_INVALID_VALUE);
	f = 9;
	CHECK_EQ(cuMemGetAccess(&f, &bad, va), CUDA_ERROR_INVALID_DEVICE);
	CHECK_EQ(cuMemGetAccess(&f, &host, va), CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(cuMemGetAccess(NULL, &l0, va), CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(cuMemGetAccess(&f, NULL, va), CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(cuMemGetAccess(&f, &l0, va + g), CUDA_ERROR_INVALID_VALUE);
	/* cuMemAlloc memory: success and PROT_NONE (the H200's answer) */
	CHECK_EQ(cuMemAlloc(&d, 4096), CUDA_SUCCESS);
	f = 9;
	CHECK_EQ(cuMemGetAccess(&f, &l0, d + 8), CUDA_SUCCESS);
	CHECK_EQ(f, CU_MEM_ACCESS_FLAGS_PROT_NONE);
	/* a new mapping starts without access again */
	CHECK_EQ(cuMemUnmap(va, g), CUDA_SUCCESS);
	CHECK_EQ(cuMemGetAccess(&f, &l0, va), CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(cuMemMap(va, g, 0, h, 0), CUDA_SUCCESS);
	CHECK_EQ(cuMemGetAccess(&f, &l0, va), CUDA_SUCCESS);
	CHECK_EQ(f, CU_MEM_ACCESS_FLAGS_PROT_NONE);
	CHECK_EQ(fakecuda_calls("cuMemGetAccess"), 14);
}

TEST(pools)
{
	CUmemoryPool dp, cur, mine, ph = NULL;
	CUmemPoolProps pp = { 0 };
	CUdeviceptr a, b;
	CUstream s;
	unsigned long long ia;
	cuuint64_t used = 1;

	setup(0);
	CHECK_EQ(cuStreamCreate(&s, 0), CUDA_SUCCESS);
	CHECK_EQ(cuDeviceGetDefaultMemPool(&dp, 0), CUDA_SUCCESS);
	CHECK_EQ(cuDeviceGetMemPool(&cur, 0), CUDA_SUCCESS);
	CHECK(cur == dp);
	CHECK_EQ(cuMemAllocAsync(&a, 1 << 20, s), CUDA_SUCCESS);
	ia = bufid(a);
	CHECK_EQ(cuPointerGetAttribute(&ph, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, a),
		 CUDA_SUCCESS);
	CHECK(ph == dp);
	CHECK_EQ(cuMemFreeAsync(a, s), CUDA_SUCCESS);
	CHECK_EQ(attr_rc(a), CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(cuMemAllocAsync(&b, 1 << 20, s), CUDA_SUCCESS);
	CHECK_EQ(a, b);
	CHECK(bufid(b) != ia);
	CHECK_EQ(cuMemFreeAsync(b, s), CUDA_SUCCESS);
	CHECK_EQ(cuMemPoolTrimTo(dp, 0), CUDA_SUCCESS);
	CHECK_EQ(cuMemPoolGetAttribute(dp, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT,
				       &used), CUDA_SUCCESS);
	CHECK_EQ(used, 0);
	pp.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
	pp.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	pp.location.id = 1;
	CHECK_EQ(cuMemPoolCreate(&mine, &pp), CUDA_SUCCESS);
	CHECK_EQ(cuMemAllocFromPoolAsync(&a, 4096, mine, s), CUDA_SUCCESS);
	CHECK_EQ(cuPointerGetAttribute(&ph, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, a),
		 CUDA_SUCCESS);
	CHECK(ph == mine);
	CHECK_EQ(cuMemPoolDestroy(mine), CUDA_SUCCESS);
	CHECK_EQ(attr_rc(a), CUDA_SUCCESS);	/* live allocations survive */
	CHECK_EQ(cuMemFreeAsync(a, s), CUDA_SUCCESS);
	CHECK_EQ(cuMemAllocFromPoolAsync(&a, 4096, mine, s),
		 CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(cuMemPoolDestroy(dp), CUDA_ERROR_INVALID_VALUE);
	{
		CUresult (*ptsz)(CUdeviceptr *, size_t, CUstream) = NULL;

		CHECK_EQ(cuGetProcAddress_v2("cuMemAllocAsync", (void **)&ptsz,
				13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
				NULL), CUDA_SUCCESS);
		CHECK_EQ(ptsz(&a, 100, CU_STREAM_PER_THREAD), CUDA_SUCCESS);
		CHECK_EQ(fakecuda_calls("cuMemAllocAsync_ptsz"), 1);
	}
	CHECK_EQ(cuMemFree(a), CUDA_SUCCESS);
	CHECK_EQ(cuStreamSynchronize(s), CUDA_SUCCESS);
	CHECK_EQ(cuStreamDestroy(s), CUDA_SUCCESS);
}

TEST(pool_get_access)
{
	CUmemLocation l0 = { CU_MEM_LOCATION_TYPE_DEVICE, 0 };
	CUmemLocation l1 = { CU_MEM_LOCATION_TYPE_DEVICE, 1 };
	CUmemLocation bad = { CU_MEM_LOCATION_TYPE_DEVICE, 7 };
	CUmemLocation host = { CU_MEM_LOCATION_TYPE_HOST, 0 };
	CUmemAccess_flags f = (CUmemAccess_flags)9;
	CUmemPoolProps pp = { 0 };
	CUmemoryPool dp, mine;

	CHECK_EQ(cuMemPoolGetAccess(&f, NULL, &l0), CUDA_ERROR_NOT_INITIALIZED);
	setup(0);
	CHECK_EQ(cuDeviceGetDefaultMemPool(&dp, 0), CUDA_SUCCESS);
	CHECK_EQ(cuMemPoolGetAccess(&f, dp, &l0), CUDA_SUCCESS);
	CHECK_EQ(f, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);	/* its device */
	CHECK_EQ(cuMemPoolGetAccess(&f, dp, &l1), CUDA_SUCCESS);
	CHECK_EQ(f, CU_MEM_ACCESS_FLAGS_PROT_NONE);
	pp.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
	pp.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	pp.location.id = 1;
	CHECK_EQ(cuMemPoolCreate(&mine, &pp), CUDA_SUCCESS);
	CHECK_EQ(cuMemPoolGetAccess(&f, mine, &l1), CUDA_SUCCESS);
	CHECK_EQ(f, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
	CHECK_EQ(cuMemPoolGetAccess(&f, mine, &l0), CUDA_SUCCESS);
	CHECK_EQ(f, CU_MEM_ACCESS_FLAGS_PROT_NONE);
	f = (CUmemAccess_flags)9;
	CHECK_EQ(cuMemPoolGetAccess(&f, mine, &bad), CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(cuMemPoolGetAccess(&f, mine, &host), CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(cuMemPoolGetAccess(NULL, mine, &l0), CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(cuMemPoolGetAccess(&f, mine, NULL), CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(cuMemPoolGetAccess(&f, NULL, &l0), CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(cuMemPoolDestroy(mine), CUDA_SUCCESS);
	CHECK_EQ(cuMemPoolGetAccess(&f, mine, &l1), CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(f, 9);
}

TEST(ipc_across_fork)
{
	CUipcMemHandle ih;
	CUdeviceptr a, o;
	int st = 0;
	pid_t pid;

	setup(0);
	CHECK_EQ(cuMemAlloc(&a, 3 << 20), CUDA_SUCCESS);
	CHECK_EQ(cuMemsetD8(a, 0x42, 3 << 20), CUDA_SUCCESS);
	CHECK_EQ(cuIpcGetMemHandle(&ih, a), CUDA_SUCCESS);
	CHECK_EQ(cuIpcOpenMemHandle(&o, ih, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
		 CUDA_ERROR_INVALID_CONTEXT);	/* same process, like 580 */
	pid = fork();
	if (pid == 0) {
		CUdeviceptr o2, base;
		unsigned char v = 0;
		size_t sz;

		/* the child starts uninitialized, as with the real driver */
		if (cuMemAlloc(&o, 1) != CUDA_ERROR_NOT_INITIALIZED)
			_exit(10);
		setup(0);
		if (cuIpcOpenMemHandle(&o, ih, 1) || cuIpcOpenMemHandle(&o2, ih, 1))
			_exit(11);
		if (o != o2 || cuMemcpyDtoH(&v, o + 12345, 1) || v != 0x42)
			_exit(12);
		if (cuMemGetAddressRange(&base, &sz, o + 5) || base != o ||
		    sz != 3 << 20)
			_exit(13);
		if (cuMemsetD8(o, 0x17, 1) || cuMemFree(o) != CUDA_ERROR_INVALID_VALUE)
			_exit(14);
		if (cuIpcCloseMemHandle(o) || cuIpcCloseMemHandle(o) ||
		    cuIpcCloseMemHandle(o) != CUDA_ERROR_INVALID_VALUE)
			_exit(15);
		_exit(0);
	}
	CHECK(waitpid(pid, &st, 0) == pid);
	CHECK(WIFEXITED(st));
	CHECK_EQ(WEXITSTATUS(st), 0);
	CHECK_EQ(*(volatile unsigned char *)a, 0x17);	/* child's write */
}

TEST(ipc_same_process_opt_in)
{
	CUipcMemHandle ih;
	CUdeviceptr a, o;

	setenv("FAKECUDA_IPC_SAME_PROCESS", "1", 1);
	setup(0);
	CHECK_EQ(cuMemAlloc(&a, 300), CUDA_SUCCESS);
	CHECK_EQ(cuIpcGetMemHandle(&ih, a), CUDA_SUCCESS);
	CHECK_EQ(cuIpcOpenMemHandle(&o, ih, 1), CUDA_SUCCESS);
	CHECK(o != a);
	*(volatile char *)(a + 7) = 'x';
	CHECK_EQ(*(volatile char *)(o + 7), 'x');
	CHECK(bufid(o) != bufid(a));
	CHECK_EQ(cuIpcCloseMemHandle(o), CUDA_SUCCESS);
}

TEST(dmabuf_fd)
{
	CUdeviceptr a;
	uint64_t off = 0;
	int fd = -1;
	char *m;

	setup(0);
	CHECK_EQ(cuMemAlloc(&a, 4 << 20), CUDA_SUCCESS);
	*(volatile char *)(a + 4096 + 9) = 'q';
	CHECK_EQ(cuMemGetHandleForAddressRange(&fd, a + 100, 4096,
			CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0),
		 CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(cuMemGetHandleForAddressRange(&fd, a + 4096, 8192,
			CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0), CUDA_SUCCESS);
	CHECK(fd >= 0);
	CHECK_EQ(fakecuda_dmabuf_offset(fd, &off), 0);
	m = mmap(NULL, 8192, PROT_READ, MAP_SHARED, fd, off);
	CHECK(m != MAP_FAILED);
	CHECK_EQ(m[9], 'q');
	close(fd);
}

TEST(events)
{
	CUevent e, e2, nt, ip;
	CUcontext other;
	CUstream s, s1;
	uint64_t fake[8] = { 0 };	/* no event, no stream */
	CUresult (*rec_ptsz)(CUevent, CUstream) = NULL;
	CUresult (*destroy_v1)(CUevent) = NULL;
	float ms = -1;

	CHECK_EQ(cuEventCreate(&e, 0), CUDA_ERROR_NOT_INITIALIZED);
	CHECK_EQ(cuInit(0), CUDA_SUCCESS);
	CHECK_EQ(cuEventCreate(&e, 0), CUDA_ERROR_INVALID_CONTEXT);
	setup(0);
	CHECK_EQ(cuEventCreate(NULL, 0), CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(cuEventCreate(&e, 0x8), CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(cuEventCreate(&e, CU_EVENT_INTERPROCESS),
		 CUDA_ERROR_INVALID_VALUE);	/* needs DISABLE_TIMING */
	CHECK_EQ(cuEventCreate(&e, CU_EVENT_INTERPROCESS |
			       CU_EVENT_BLOCKING_SYNC), CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(cuEventCreate(&ip, CU_EVENT_INTERPROCESS |
			       CU_EVENT_DISABLE_TIMING | CU_EVENT_BLOCKING_SYNC),
		 CUDA_SUCCESS);
	CHECK_EQ(cuEventCreate(&nt, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
	CHECK_EQ(cuEventCreate(&e, CU_EVENT_DEFAULT), CUDA_SUCCESS);
	CHECK_EQ(cuEventCreate(&e2, CU_EVENT_BLOCKING_SYNC), CUDA_SUCCESS);
	CHECK_EQ(fakecuda_calls("cuEventCreate"), 10);
	/* never recorded: an empty set of work, complete */
	CHECK_EQ(cuEventQuery(e), CUDA_SUCCESS);
	CHECK_EQ(cuEventSynchronize(e), CUDA_SUCCESS);
	CHECK_EQ(cuEventElapsedTime(&ms, e, e2), CUDA_ERROR_INVALID_HANDLE);
	CHECK_EQ(cuStreamCreate(&s, 0), CUDA_SUCCESS);
	CHECK_EQ(cuEventRecord(e, NULL), CUDA_SUCCESS);
	CHECK_EQ(cuEventRecord(e2, s), CUDA_SUCCESS);
	CHECK_EQ(cuEventRecord(nt, CU_STREAM_PER_THREAD), CUDA_SUCCESS);
	CHECK_EQ(cuEventQuery(e2), CUDA_SUCCESS);	/* work is synchronous */
	CHECK_EQ(cuEventSynchronize(e2), CUDA_SUCCESS);
	CHECK_EQ(cuEventElapsedTime(&ms, e, e2), CUDA_SUCCESS);
	CHECK(ms >= 0 && ms < 10000);
	CHECK_EQ(cuEventElapsedTime(&ms, e, nt), CUDA_ERROR_INVALID_HANDLE);
	CHECK_EQ(cuEventElapsedTime(NULL, e, e2), CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(cuEventRecord(e, (CUstream)fake), CUDA_ERROR_INVALID_HANDLE);
	/* the per-thread-stream entry point, through cuGetProcAddress */
	CHECK_EQ(cuGetProcAddress_v2("cuEventRecord", (void **)&rec_ptsz, 13000,
			CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, NULL),
		 CUDA_SUCCESS);
	CHECK_STR(sname((void *)rec_ptsz), "cuEventRecord_ptsz");
	CHECK_EQ(rec_ptsz(e, CU_STREAM_PER_THREAD), CUDA_SUCCESS);
	CHECK_EQ(fakecuda_calls("cuEventRecord_ptsz"), 1);
	/* event and stream of different contexts */
	CHECK_EQ(cuCtxCreate(&other, NULL, 0, 1), CUDA_SUCCESS);
	CHECK_EQ(cuStreamCreate(&s1, 0), CUDA_SUCCESS);
	CHECK_EQ(cuEventRecord(e, s1), CUDA_ERROR_INVALID_HANDLE);
	CHECK_EQ(cuEventRecord(e, NULL), CUDA_ERROR_INVALID_HANDLE);
	CHECK_EQ(cuCtxPopCurrent(&other), CUDA_SUCCESS);
	CHECK_EQ(cuEventRecord(e, s), CUDA_SUCCESS);
	CHECK_EQ(cuCtxSetCurrent(NULL), CUDA_SUCCESS);
	CHECK_EQ(cuEventRecord(e, NULL), CUDA_ERROR_INVALID_CONTEXT);
	CHECK_EQ(cuCtxSetCurrent(setup(0)), CUDA_SUCCESS);
	/* destroy; the old ABI name too */
	CHECK_EQ(cuEventDestroy(e), CUDA_SUCCESS);
	CHECK_EQ(fakecuda_calls("cuEventDestroy_v2"), 1);
	CHECK_EQ(cuEventDestroy(e), CUDA_ERROR_INVALID_HANDLE);
	CHECK_EQ(cuEventQuery(e), CUDA_ERROR_INVALID_HANDLE);
	CHECK_EQ(cuEventSynchronize(e), CUDA_ERROR_INVALID_HANDLE);
	CHECK_EQ(cuEventRecord(e, s), CUDA_ERROR_INVALID_HANDLE);
	CHECK_EQ(cuEventElapsedTime(&ms, e, e2), CUDA_ERROR_INVALID_HANDLE);
	CHECK_EQ(cuEventDestroy(NULL), CUDA_ERROR_INVALID_HANDLE);
	CHECK_EQ(cuEventDestroy((CUevent)fake), CUDA_ERROR_INVALID_HANDLE);
	CHECK_EQ(cuGetProcAddress_v2("cuEventDestroy", (void **)&destroy_v1,
				     3020, 0, NULL), CUDA_SUCCESS);
	CHECK_STR(sname((void *)destroy_v1), "cuEventDestroy");
	CHECK_EQ(destroy_v1(e2), CUDA_SUCCESS);
	CHECK_EQ(destroy_v1(e2), CUDA_ERROR_INVALID_HANDLE);
	CHECK_EQ(fakecuda_calls("cuEventDestroy"), 2);
	CHECK_EQ(cuEventDestroy(nt), CUDA_SUCCESS);
	CHECK_EQ(cuEventDestroy(ip), CUDA_SUCCESS);
}

TEST(ipc_event_across_fork)
{
	CUipcEventHandle ih, junk;
	CUevent e, plain, o;
	int st = 0;
	pid_t pid;

	setup(0);
	CHECK_EQ(cuEventCreate(&plain, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
	/* the H200's answer (probe.c) */
	CHECK_EQ(cuIpcGetEventHandle(&ih, plain), CUDA_ERROR_INVALID_HANDLE);
	CHECK_EQ(cuEventCreate(&e, CU_EVENT_INTERPROCESS |
			       CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
	CHECK_EQ(cuIpcGetEventHandle(NULL, e), CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(cuIpcGetEventHandle(&ih, NULL), CUDA_ERROR_INVALID_HANDLE);
	CHECK_EQ(cuIpcGetEventHandle(&ih, e), CUDA_SUCCESS);
	CHECK_EQ(cuIpcOpenEventHandle(&o, ih), CUDA_ERROR_INVALID_CONTEXT);
	CHECK_EQ(cuEventRecord(e, NULL), CUDA_SUCCESS);
	memset(&junk, 0, sizeof(junk));
	pid = fork();
	if (pid == 0) {
		float ms;

		if (cuIpcOpenEventHandle(&o, ih) != CUDA_ERROR_NOT_INITIALIZED)
			_exit(10);
		if (cuInit(0) ||
		    cuIpcOpenEventHandle(&o, ih) != CUDA_ERROR_INVALID_CONTEXT)
			_exit(11);
		setup(1);
		if (cuIpcOpenEventHandle(&o, junk) != CUDA_ERROR_INVALID_VALUE ||
		    cuIpcOpenEventHandle(NULL, ih) != CUDA_ERROR_INVALID_VALUE)
			_exit(12);
		if (cuIpcOpenEventHandle(&o, ih) || cuEventQuery(o) ||
		    cuEventSynchronize(o) || cuEventRecord(o, NULL))
			_exit(13);
		/* like a local DISABLE_TIMING event: no timing, no export */
		if (cuEventElapsedTime(&ms, o, o) != CUDA_ERROR_INVALID_HANDLE ||
		    cuIpcGetEventHandle(&junk, o) != CUDA_ERROR_INVALID_HANDLE)
			_exit(14);
		if (cuEventDestroy(o) ||
		    cuEventDestroy(o) != CUDA_ERROR_INVALID_HANDLE)
			_exit(15);
		_exit(0);
	}
	CHECK(waitpid(pid, &st, 0) == pid);
	CHECK(WIFEXITED(st));
	CHECK_EQ(WEXITSTATUS(st), 0);
	CHECK_EQ(cuEventQuery(e), CUDA_SUCCESS);
	CHECK_EQ(cuEventDestroy(e), CUDA_SUCCESS);
	CHECK_EQ(cuIpcGetEventHandle(&ih, e), CUDA_ERROR_INVALID_HANDLE);
}

TEST(get_proc_address_versions_and_flags)
{
	CUdriverProcAddressQueryResult st;
	void *p, *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	CUresult (*legacy)(const char *, void **, int, cuuint64_t);
	const cuuint64_t PT = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;

	CHECK(h != NULL);
	CHECK_EQ(cuGetProcAddress_v2("cuMemAlloc", &p, 2000, 0, &st), 0);
	CHECK_STR(sname(p), "cuMemAlloc");
	CHECK(p == dlsym(h, "cuMemAlloc"));
	CHECK_EQ(cuGetProcAddress_v2("cuMemAlloc", &p, 3020, 0, &st), 0);
	CHECK_STR(sname(p), "cuMemAlloc_v2");
	CHECK_EQ(cuGetProcAddress_v2("cuMemAlloc", &p, 13000, PT, &st), 0);
	CHECK_STR(sname(p), "cuMemAlloc_v2");
	CHECK_EQ(cuGetProcAddress_v2("cuMemAlloc", &p, 1000, 0, &st), 0);
	CHECK(p == NULL);
	CHECK_EQ(st, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
	CHECK_EQ(cuGetProcAddress_v2("cuMemAlloc_v2", &p, 13000, 0, &st), 0);
	CHECK_EQ(st, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
	CHECK_EQ(cuGetProcAddress_v2("cuMemAlloc", &p, 13010, 0, &st),
		 CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(cuGetProcAddress_v2("cuMemAlloc", &p, 13000, 8, &st),
		 CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(cuGetProcAddress_v2("cuMemAllocAsync", &p, 13000, PT, &st), 0);
	CHECK_STR(sname(p), "cuMemAllocAsync_ptsz");
	CHECK_EQ(cuGetProcAddress_v2("cuMemAllocAsync", &p, 13000, 3, &st), 0);
	CHECK_STR(sname(p), "cuMemAllocAsync_ptsz");
	CHECK_EQ(cuGetProcAddress_v2("cuMemAllocAsync", &p, 13000,
				     CU_GET_PROC_ADDRESS_LEGACY_STREAM, &st), 0);
	CHECK_STR(sname(p), "cuMemAllocAsync");
	CHECK_EQ(cuGetProcAddress_v2("cuMemAllocAsync", &p, 11010, 0, &st), 0);
	CHECK_EQ(st, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
	CHECK_EQ(cuGetProcAddress_v2("cuMemcpyHtoD", &p, 13000, PT, &st), 0);
	CHECK_STR(sname(p), "cuMemcpyHtoD_v2_ptds");
	CHECK_EQ(cuGetProcAddress_v2("cuMemcpyHtoD", &p, 6050, PT, &st), 0);
	CHECK_EQ(st, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
	CHECK_EQ(cuGetProcAddress_v2("cuMemFreeAsync", &p, 13000, PT, &st), 0);
	CHECK_STR(sname(p), "cuMemFreeAsync_ptsz");
	CHECK_EQ(cuGetProcAddress_v2("cuCtxCreate", &p, 13000, 0, &st), 0);
	CHECK_STR(sname(p), "cuCtxCreate_v4");
	CHECK_EQ(cuGetProcAddress_v2("cuCtxDestroy", &p, 3020, 0, &st), 0);
	CHECK_STR(sname(p), "cuCtxDestroy");
	CHECK_EQ(cuGetProcAddress_v2("cuIpcOpenMemHandle", &p, 11000, 0, &st), 0);
	CHECK_STR(sname(p), "cuIpcOpenMemHandle_v2");
	CHECK_EQ(cuGetProcAddress_v2("cuDevicePrimaryCtxRelease", &p, 10000, 0,
				     &st), 0);
	CHECK_STR(sname(p), "cuDevicePrimaryCtxRelease");
	CHECK_EQ(cuGetProcAddress_v2("cuGetProcAddress", &p, 13000, 0, &st), 0);
	CHECK_STR(sname(p), "cuGetProcAddress_v2");
	CHECK_EQ(cuGetProcAddress_v2("cuGetProcAddress", &p, 11030, 0, &st), 0);
	CHECK_STR(sname(p), "cuGetProcAddress");
	legacy = (CUresult (*)(const char *, void **, int, cuuint64_t))p;
	CHECK_EQ(legacy("cuMemFree", &p, 13000, 0), CUDA_SUCCESS);
	CHECK_STR(sname(p), "cuMemFree_v2");
	CHECK_EQ(legacy("cuFooBar", &p, 13000, 0), CUDA_ERROR_NOT_FOUND);
}

static CUdeviceptr count_target;

static void count_cb(CUdeviceptr base, size_t size, unsigned long long id,
		     CUcontext c, void *arg)
{
	if (base == count_target && size == 64 && id && c)
		++*(size_t *)arg;
}

TEST(hooks_count_fail_errno_foreach)
{
	CUdeviceptr a = 0x1234, b;
	unsigned long n0 = fakecuda_calls("cuMemAlloc_v2");
	size_t count = 0;

	setup(0);
	CHECK_EQ(cuMemAlloc(&b, 64), CUDA_SUCCESS);
	CHECK_EQ(fakecuda_calls("cuMemAlloc_v2"), n0 + 1);
	CHECK_EQ(fakecuda_calls("cuNeverCalled"), 0);
	fakecuda_fail_next("cuMemAlloc_v2", CUDA_ERROR_OUT_OF_MEMORY, 2);
	CHECK_EQ(cuMemAlloc(&a, 64), CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_EQ(cuMemAlloc(&a, 64), CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_EQ(a, 0x1234);	/* no side effect */
	CHECK_EQ(fakecuda_live_count(), 1);
	CHECK_EQ(fakecuda_calls("cuMemAlloc_v2"), n0 + 3);
	CHECK_EQ(cuMemAlloc(&a, 64), CUDA_SUCCESS);
	fakecuda_set_errno(EIO);
	errno = 0;
	CHECK_EQ(cuMemFree(a), CUDA_SUCCESS);
	CHECK_EQ(errno, EIO);
	fakecuda_set_errno(-1);
	CHECK_EQ(fakecuda_live_bytes(), 64);
	count_target = b;
	fakecuda_foreach_live(count_cb, &count);
	CHECK_EQ(count, 1);
}

TEST(fork_child_starts_uninitialized)
{
	CUdeviceptr a;
	int st = 0;
	pid_t pid;

	setup(0);
	CHECK_EQ(cuMemAlloc(&a, 4096), CUDA_SUCCESS);
	pid = fork();
	if (pid == 0)
		_exit(cuMemAlloc(&a, 4096) == CUDA_ERROR_NOT_INITIALIZED &&
		      fakecuda_live_count() == 0 ? 0 : 1);
	CHECK(waitpid(pid, &st, 0) == pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CHECK_EQ(attr_rc(a), CUDA_SUCCESS);
}

/* ------------------------------------------------------------ runtime */

struct rt {
	void *h;
	cudaError_t (*malloc_)(void **, size_t);
	cudaError_t (*free_)(void *);
	cudaError_t (*malloc_async)(void **, size_t, cudaStream_t);
	cudaError_t (*malloc_async_ptsz)(void **, size_t, cudaStream_t);
	cudaError_t (*free_async)(void *, cudaStream_t);
	cudaError_t (*entry)(const char *, void **, unsigned long long,
			     enum cudaDriverEntryPointQueryResult *);
	cudaError_t (*entry_ver)(const char *, void **, unsigned int,
				 unsigned long long,
				 enum cudaDriverEntryPointQueryResult *);
	cudaError_t (*reset)(void);
	cudaError_t (*set_device)(int);
};

/*
 * Open the fake runtime next to the fake driver this program is linked
 * against, by path.  Not dlopen("libcudart.so.13"): glibc searches the
 * RUNPATH of the object that called dlopen, found from the return address,
 * and under ASan or TSan that caller is the sanitizer runtime's dlopen
 * interceptor, not this program (google/sanitizers#1219, LLVM bug 27790).
 * Our RUNPATH $ORIGIN is then ignored and the name resolves through
 * ld.so.cache, e.g. to an installed real CUDA runtime.
 */
static void *rt_dlopen(void)
{
	static char path[4096];
	Dl_info di;
	const char *slash;
	void *h;
	int n;

	CHECK(dladdr((void *)fakecuda_calls, &di) && di.dli_fname);
	slash = strrchr(di.dli_fname, '/');
	n = slash ? (int)(slash - di.dli_fname) + 1 : 0;
	CHECK(snprintf(path, sizeof(path), "%.*slibcudart.so.13", n,
		       di.dli_fname) < (int)sizeof(path));
	h = dlopen(path, RTLD_NOW);
	CHECK(h != NULL);
	/* The fake, not some other libcudart.so.13. */
	CHECK(dlsym(h, "cudaFakeSetPerThread") != NULL);
	return h;
}

static struct rt rt_open(void)
{
	struct rt r;

	r.h = rt_dlopen();
#define L(f, n) CHECK((*(void **)&r.f = dlsym(r.h, n)) != NULL)
	L(malloc_, "cudaMalloc");
	L(free_, "cudaFree");
	L(malloc_async, "cudaMallocAsync");
	L(malloc_async_ptsz, "cudaMallocAsync_ptsz");
	L(free_async, "cudaFreeAsync");
	L(entry, "cudaGetDriverEntryPoint");
	L(entry_ver, "cudaGetDriverEntryPointByVersion");
	L(reset, "cudaDeviceReset");
	L(set_device, "cudaSetDevice");
#undef L
	return r;
}

TEST(cudart_goes_through_dlopen_and_get_proc_address)
{
	struct rt r = rt_open();
	unsigned long gpa0 = fakecuda_calls("cuGetProcAddress_v2");
	unsigned long ma0 = fakecuda_calls("cuMemAlloc_v2");
	enum cudaDriverEntryPointQueryResult st;
	void *p = NULL, *fn = NULL;
	CUcontext cur = NULL, prim;

	CHECK_EQ(r.malloc_(&p, 1 << 20), cudaSuccess);
	CHECK(fakecuda_calls("cuGetProcAddress_v2") > gpa0 + 10);
	CHECK_EQ(fakecuda_calls("cuMemAlloc_v2"), ma0 + 1);
	CHECK_EQ(fakecuda_calls("cuDevicePrimaryCtxRetain"), 1);
	CHECK_EQ(cuCtxGetCurrent(&cur), CUDA_SUCCESS);
	CHECK_EQ(cuDevicePrimaryCtxRetain(&prim, 0), CUDA_SUCCESS);
	CHECK(cur == prim);
	CHECK_EQ(attr_rc((CUdeviceptr)p), CUDA_SUCCESS);
	CHECK_EQ(r.free_(p), cudaSuccess);
	CHECK_EQ(fakecuda_calls("cuMemFree_v2"), 1);
	CHECK_EQ(r.malloc_async(&p, 4096, 0), cudaSuccess);
	CHECK_EQ(fakecuda_calls("cuMemAllocAsync"), 1);
	CHECK_EQ(r.free_async(p, 0), cudaSuccess);
	CHECK_EQ(r.malloc_async_ptsz(&p, 4096, 0), cudaSuccess);
	CHECK_EQ(fakecuda_calls("cuMemAllocAsync_ptsz"), 1);
	CHECK_EQ(r.entry("cuMemAlloc", &fn, 0, &st), cudaSuccess);
	CHECK_EQ(st, cudaDriverEntryPointSuccess);
	CHECK_STR(sname(fn), "cuMemAlloc_v2");
	CHECK_EQ(r.entry("cuMemFreeAsync", &fn, cudaEnablePerThreadDefaultStream,
			 &st), cudaSuccess);
	CHECK_STR(sname(fn), "cuMemFreeAsync_ptsz");
	CHECK_EQ(r.entry_ver("cuMemAlloc", &fn, 2000, 0, &st), cudaSuccess);
	CHECK_STR(sname(fn), "cuMemAlloc");
	CHECK_EQ(r.entry_ver("cuNope", &fn, 13000, 0, &st), cudaSuccess);
	CHECK_EQ(st, cudaDriverEntryPointSymbolNotFound);
	CHECK(fn == NULL);
	CHECK_EQ(r.malloc_(&p, 100), cudaSuccess);
	CHECK_EQ(r.reset(), cudaSuccess);	/* frees everything */
	CHECK_EQ(attr_rc((CUdeviceptr)p), CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(fakecuda_calls("cuDevicePrimaryCtxReset_v2"), 1);
	CHECK_EQ(r.malloc_(&p, 100), cudaSuccess);	/* re-initializes */
	CHECK_EQ(r.set_device(1), cudaSuccess);
	CHECK_EQ(r.malloc_(&p, 100), cudaSuccess);
	{
		int ord = -1;

		cuPointerGetAttribute(&ord, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
				      (CUdeviceptr)p);
		CHECK_EQ(ord, 1);
	}
}

TEST(cudart_per_thread_mode)
{
	struct rt r;
	void *p;

	setenv("FAKECUDART_PTDS", "1", 1);
	r = rt_open();
	CHECK_EQ(r.malloc_async(&p, 4096, 0), cudaSuccess);
	CHECK_EQ(fakecuda_calls("cuMemAllocAsync_ptsz"), 1);
	CHECK_EQ(fakecuda_calls("cuMemAllocAsync"), 0);
	CHECK_EQ(r.free_async(p, 0), cudaSuccess);
	CHECK_EQ(fakecuda_calls("cuMemFreeAsync_ptsz"), 1);
}

TEST_MAIN()
