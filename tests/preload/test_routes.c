// SPDX-License-Identifier: MIT
/*
 * The ELF route to a driver entry point (the others: test_dlsym,
 * test_procaddr), and what each API family does to the registry, under
 * LD_PRELOAD against the driver test double.
 */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <errno.h>

/* Exported _ptsz entry points; cuda.h only declares them under macros. */
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize,
			      CUstream hStream);
CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream);

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#include "roundtrip.h"

TEST(route_elf_symbol)
{
	check_roundtrip(cuMemAlloc_v2, cuMemFree_v2);
}

TEST(family_pitch_managed_host_register)
{
	struct gdrhook_range r;
	CUdeviceptr d, m;
	size_t pitch = 0;
	void *h = NULL;
	static char buf[1 << 16] __attribute__((aligned(4096)));

	primary_ctx(0);
	CU_OK(cuMemAllocPitch_v2(&d, &pitch, 1000, 7, 4));
	CHECK_EQ(tracked(d, &r), 0);
	CHECK_EQ(r.size, pitch * 7);
	CU_OK(cuMemAllocManaged(&m, 8192, CU_MEM_ATTACH_GLOBAL));
	CHECK_EQ(tracked(m, &r), 0);
	CHECK_EQ(r.kind, GDRHOOK_KIND_MANAGED);
	CU_OK(cuMemHostAlloc(&h, 12345, 0));
	CHECK_EQ(tracked((uintptr_t)h, &r), 0);
	CHECK_EQ(r.kind, GDRHOOK_KIND_HOST);
	CHECK_EQ(r.dev, -1);
	CU_OK(cuMemHostRegister_v2(buf, sizeof(buf), 0));
	CHECK_EQ(tracked((uintptr_t)buf, &r), 0);
	CHECK_EQ(r.kind, GDRHOOK_KIND_HOST_REGISTERED);
	CU_OK(cuMemHostUnregister(buf));
	CU_OK(cuMemFreeHost(h));
	CU_OK(cuMemFree_v2(m));
	CU_OK(cuMemFree_v2(d));
	CHECK_EQ(tracked((uintptr_t)buf, NULL), -ENOENT);
	CHECK_EQ(tracked((uintptr_t)h, NULL), -ENOENT);
	CHECK_EQ(tracked(m, NULL), -ENOENT);
	CHECK_EQ(tracked(d, NULL), -ENOENT);
}

TEST(family_async_and_pools)
{
	struct gdrhook_range r;
	CUmemPoolProps props;
	CUmemoryPool pool;
	CUdeviceptr a, b;

	primary_ctx(0);
	CU_OK(cuMemAllocAsync(&a, 1 << 20, NULL));
	CHECK_EQ(tracked(a, &r), 0);
	CHECK_EQ(r.kind, GDRHOOK_KIND_POOL);
	CHECK(r.flags & GDRHOOK_RANGE_VOLATILE);
	memset(&props, 0, sizeof(props));
	props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
	props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	props.location.id = 0;
	CU_OK(cuMemPoolCreate(&pool, &props));
	CU_OK(cuMemAllocFromPoolAsync(&b, 4096, pool, NULL));
	CHECK_EQ(tracked(b, &r), 0);
	CHECK_EQ(r.pool, (uintptr_t)pool);
	CU_OK(cuMemFreeAsync(b, NULL));
	CHECK_EQ(tracked(b, NULL), -ENOENT);
	CU_OK(cuMemPoolTrimTo(pool, 0));
	CU_OK(cuMemPoolDestroy(pool));
	CU_OK(cuMemFreeAsync(a, NULL));
	CHECK_EQ(tracked(a, NULL), -ENOENT);
}

TEST(family_vmm_mapped_range_is_the_unit)
{
	CUmemAllocationProp prop;
	CUmemGenericAllocationHandle h1, h2;
	struct gdrhook_range r;
	CUdeviceptr va;
	size_t gran = 0;

	primary_ctx(0);
	memset(&prop, 0, sizeof(prop));
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = 1;
	CU_OK(cuMemGetAllocationGranularity(&gran, &prop,
					    CU_MEM_ALLOC_GRANULARITY_MINIMUM));
	CU_OK(cuMemAddressReserve(&va, 4 * gran, 0, 0, 0));
	CU_OK(cuMemCreate(&h1, gran, &prop, 0));
	CU_OK(cuMemCreate(&h2, gran, &prop, 0));
	CHECK_EQ(tracked(va, NULL), -ENOENT);	/* reserved is not memory */
	CU_OK(cuMemMap(va, gran, 0, h1, 0));
	CU_OK(cuMemMap(va + gran, gran, 0, h2, 0));
	CHECK_EQ(tracked(va, &r), 0);
	CHECK_EQ(r.kind, GDRHOOK_KIND_VMM);
	CHECK_EQ(r.size, gran);
	CHECK_EQ(r.dev, 1);
	CHECK_EQ(tracked(va + gran, &r), 0);
	CHECK_EQ(r.base, va + gran);
	CU_OK(cuMemRelease(h1));	/* still mapped: still live */
	CHECK_EQ(tracked(va, NULL), 0);
	CU_OK(cuMemUnmap(va, 2 * gran));	/* one unmap, two mappings */
	CHECK_EQ(tracked(va, NULL), -ENOENT);
	CHECK_EQ(tracked(va + gran, NULL), -ENOENT);
	CU_OK(cuMemRelease(h2));
	CU_OK(cuMemAddressFree(va, 4 * gran));
}

TEST(vmm_mapping_outlives_the_context_it_was_made_in)
{
	CUctxCreateParams params;
	CUmemAllocationProp prop;
	CUmemGenericAllocationHandle h;
	CUcontext ctx;
	CUdeviceptr va;
	size_t gran = 0;

	CU_OK(cuInit(0));
	memset(&params, 0, sizeof(params));
	CU_OK(cuCtxCreate_v4(&ctx, &params, 0, 0));
	memset(&prop, 0, sizeof(prop));
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	CU_OK(cuMemGetAllocationGranularity(&gran, &prop,
					    CU_MEM_ALLOC_GRANULARITY_MINIMUM));
	CU_OK(cuMemAddressReserve(&va, gran, 0, 0, 0));
	CU_OK(cuMemCreate(&h, gran, &prop, 0));
	CU_OK(cuMemMap(va, gran, 0, h, 0));
	/* VMM memory is the device's: destroying a context keeps it. */
	CU_OK(cuCtxDestroy_v2(ctx));
	CHECK_EQ(tracked(va, NULL), 0);
	CU_OK(cuMemUnmap(va, gran));
	CHECK_EQ(tracked(va, NULL), -ENOENT);
}

TEST(family_ipc_open_close)
{
	CUipcMemHandle ih;
	CUdeviceptr p, q;
	struct gdrhook_range r;

	setenv("FAKECUDA_IPC_SAME_PROCESS", "1", 1);
	primary_ctx(0);
	CU_OK(cuMemAlloc_v2(&p, 1 << 21));
	CU_OK(cuIpcGetMemHandle(&ih, p));
	if (cuIpcOpenMemHandle_v2(&q, ih,
				  CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) !=
	    CUDA_SUCCESS)
		TH_FAIL("the double refused a same-process IPC open");
	CHECK_EQ(tracked(q, &r), 0);
	CHECK_EQ(r.kind, GDRHOOK_KIND_IPC);
	CHECK_EQ(r.size, 1 << 21);
	CU_OK(cuIpcCloseMemHandle(q));
	CHECK_EQ(tracked(q, NULL), -ENOENT);
	CU_OK(cuMemFree_v2(p));
}

/* ---- scenarios run in a fresh process with their own GDRHOOK_* ---- */

static int scenario_families(void)
{
	CUdeviceptr a, b;
	void *h, *p;

	/* (cudaSetDevice, not wrapped, links the runtime in) */
	if (cudaSetDevice(0))
		return 4;
	primary_ctx(0);
	if (cuMemAlloc_v2(&a, 1 << 20) || cuMemAllocAsync_ptsz(&b, 4096, NULL))
		return 2;
	if (cudaMalloc(&p, 5000) || cudaMallocHost(&h, 100))
		return 3;
	cuMemFree_v2(a);
	cuMemFreeAsync_ptsz(b, NULL);
	cudaFree(p);
	cudaFreeHost(h);
	return 0;
}

static int scenario_audit(void)
{
	struct gdrhook_stats s = { .size = sizeof(s) };
	CUdeviceptr a, b;
	void *p;

	primary_ctx(0);
	if (cuMemAlloc_v2(&a, 1000) || cuMemAllocManaged(&b, 1 << 20, 1))
		return 2;
	if (cudaMalloc(&p, 77) || tracked(a + 10, NULL))
		return 3;
	tracked(a + 4096 * 1024, NULL);	/* not tracked: driver agrees */
	cuMemFree_v2(a);
	cudaFree(p);
	/* b stays live: the exit sweep checks it. */
	gdrhook_get_stats(&s);
	if (!s.audit_checks)
		return 4;
	return s.audit_disagreements ? 5 : 0;
}

static const struct scenario scenarios[] = {
	{ "families", scenario_families },
	{ "audit", scenario_audit },
};

TEST(log_records_every_call_with_exact_api_names)
{
	char path[256];
	const char *env[] = { NULL, NULL };
	char var[300];

	snprintf(var, sizeof(var), "GDRHOOK_TRACE=%s",
		 log_path(path, sizeof(path), "families"));
	env[0] = var;
	CHECK_EQ(run_scenario("families", env), 0);
	CHECK_EQ(LOG_COUNT(path, "\"ev\":\"start\""), 1);
	CHECK_EQ(LOG_COUNT(path, "\"ev\":\"alloc\"", "\"api\":\"cuMemAlloc_v2\"",
			   "\"size\":1048576", "\"kind\":\"device\"", "\"rc\":0"), 1);
	CHECK_EQ(LOG_COUNT(path, "\"ev\":\"alloc\"",
			   "\"api\":\"cuMemAllocAsync_ptsz\"", "\"kind\":\"pool\""), 1);
	CHECK_EQ(LOG_COUNT(path, "\"ev\":\"alloc\"", "\"api\":\"cudaMalloc\"",
			   "\"size\":5000"), 1);
	CHECK_EQ(LOG_COUNT(path, "\"ev\":\"alloc\"", "\"api\":\"cudaMallocHost\"",
			   "\"kind\":\"host\""), 1);
	CHECK_EQ(LOG_COUNT(path, "\"ev\":\"alloc\""), 4);
	CHECK_EQ(LOG_COUNT(path, "\"ev\":\"free\""), 4);
	CHECK_EQ(LOG_COUNT(path, "\"ev\":\"free\"", "\"api\":\"cudaFree\""), 1);
	CHECK_EQ(LOG_COUNT(path, "\"tracked\":false"), 0);
	CHECK_EQ(LOG_COUNT(path, "\"dur_ns\":"), 8);
	CHECK_EQ(LOG_COUNT(path, "\"ev\":\"exit\"", "\"dropped\":0", "\"live\":0"), 1);
	unlink(path);
}

TEST(audit_mode_agrees_with_the_driver)
{
	char path[256];
	char var[300];
	const char *env[] = { "GDRHOOK_VALIDATE=1", var, NULL };

	snprintf(var, sizeof(var), "GDRHOOK_TRACE=%s",
		 log_path(path, sizeof(path), "audit"));
	CHECK_EQ(run_scenario("audit", env), 0);
	CHECK_EQ(LOG_COUNT(path, "\"ev\":\"audit\""), 0);
	CHECK_EQ(LOG_COUNT(path, "\"ev\":\"exit\"", "\"live\":1"), 1);
	unlink(path);
}

SCENARIO_MAIN(scenarios)
