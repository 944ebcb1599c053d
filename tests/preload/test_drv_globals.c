// SPDX-License-Identifier: MIT
/*
 * Memory owned by something other than an allocation call
 * (src/hooks/drv_globals.c): module and library globals, registered the
 * first time the program asks for their address and dropped with their
 * module, library or context; and the device alias of host memory.
 * Each case checks the registry against the driver double.
 */
#include <cuda.h>
#include <errno.h>

/* Not every helper of the shared header is used here. */
#pragma GCC diagnostic ignored "-Wunused-function"
#include "agree.h"

TEST(module_globals_live_until_unload)
{
	CUdeviceptr a, b, a2;
	size_t na, nb;
	CUmodule m;

	primary_ctx(0);
	CU_OK(cuModuleLoadData(&m, "fakecubin:flag=8,table=65536"));
	CU_OK(cuModuleGetGlobal_v2(&a, &na, m, "flag"));
	CU_OK(cuModuleGetGlobal_v2(&b, &nb, m, "table"));
	CHECK_EQ(na, 8);
	CHECK_EQ(agree(a, GDRHOOK_KIND_GLOBAL, 8), 1);
	CHECK_EQ(agree(b, GDRHOOK_KIND_GLOBAL, 65536), 1);
	/* Asking again is the same variable, not a new allocation. */
	CU_OK(cuModuleGetGlobal_v2(&a2, NULL, m, "flag"));
	CHECK_EQ(a2, a);
	CHECK_EQ(agree(a, GDRHOOK_KIND_GLOBAL, 8), 1);
	CHECK(cuModuleGetGlobal_v2(&a2, NULL, m, "nope") != CUDA_SUCCESS);
	CU_OK(cuModuleUnload(m));
	CHECK_EQ(agree(a, GDRHOOK_KIND_GLOBAL, 8), 0);
	CHECK_EQ(agree(b, GDRHOOK_KIND_GLOBAL, 65536), 0);
	CHECK_EQ(gdrhook_trusted(), 1);
}

TEST(library_globals_go_with_unload_and_with_their_context)
{
	CUctxCreateParams params;
	CUdeviceptr a, m1, a2;
	CUlibrary lib;
	CUcontext ctx;

	primary_ctx(0);
	CU_OK(cuLibraryLoadData(&lib, "fakecubin:counter=4,mvar=4096", NULL,
				NULL, 0, NULL, NULL, 0));
	CU_OK(cuLibraryGetGlobal(&a, NULL, lib, "counter"));
	CU_OK(cuLibraryGetManaged(&m1, NULL, lib, "mvar"));
	CHECK_EQ(agree(a, GDRHOOK_KIND_GLOBAL, 4), 1);
	CHECK_EQ(agree(m1, GDRHOOK_KIND_GLOBAL, 4096), 1);
	/* A second context gets its own copy; destroying it drops that. */
	memset(&params, 0, sizeof(params));
	CU_OK(cuCtxCreate_v4(&ctx, &params, 0, 0));
	CU_OK(cuLibraryGetGlobal(&a2, NULL, lib, "counter"));
	CHECK(a2 != a);
	CHECK_EQ(agree(a2, GDRHOOK_KIND_GLOBAL, 4), 1);
	CU_OK(cuCtxDestroy_v2(ctx));
	CHECK_EQ(agree(a2, GDRHOOK_KIND_GLOBAL, 4), 0);
	primary_ctx(0);
	CU_OK(cuLibraryUnload(lib));
	CHECK_EQ(agree(a, GDRHOOK_KIND_GLOBAL, 4), 0);
	CHECK_EQ(agree(m1, GDRHOOK_KIND_GLOBAL, 4096), 0);
	CHECK_EQ(gdrhook_trusted(), 1);
}

TEST(host_device_pointer_is_the_host_range)
{
	struct gdrhook_range r;
	CUdeviceptr d;
	void *h;

	primary_ctx(0);
	CU_OK(cuMemHostAlloc(&h, 1 << 16, CU_MEMHOSTALLOC_DEVICEMAP));
	CU_OK(cuMemHostGetDevicePointer_v2(&d, h, 0));
	CHECK_EQ(d, (CUdeviceptr)(uintptr_t)h);
	CHECK_EQ(tracked(d, &r), 0);
	CHECK_EQ(r.kind, GDRHOOK_KIND_HOST);
	CHECK_EQ(gdrhook_trusted(), 1);
}

/* Unloading one module drops its globals alone. */
TEST(unload_drops_only_that_modules_globals)
{
	CUdeviceptr a, b;
	CUmodule m1, m2;

	primary_ctx(0);
	CU_OK(cuModuleLoadData(&m1, "fakecubin:one=64"));
	CU_OK(cuModuleLoadData(&m2, "fakecubin:two=128"));
	CU_OK(cuModuleGetGlobal_v2(&a, NULL, m1, "one"));
	CU_OK(cuModuleGetGlobal_v2(&b, NULL, m2, "two"));
	CHECK_EQ(agree(a, GDRHOOK_KIND_GLOBAL, 64), 1);
	CHECK_EQ(agree(b, GDRHOOK_KIND_GLOBAL, 128), 1);
	CU_OK(cuModuleUnload(m1));
	CHECK_EQ(agree(a, GDRHOOK_KIND_GLOBAL, 64), 0);
	CHECK_EQ(agree(b, GDRHOOK_KIND_GLOBAL, 128), 1);
	CU_OK(cuModuleUnload(m2));
	CHECK_EQ(agree(b, GDRHOOK_KIND_GLOBAL, 128), 0);
	CHECK_EQ(gdrhook_trusted(), 1);
}

/* A lookup the driver refuses registers nothing and counts as failed. */
TEST(failed_global_lookup_registers_nothing)
{
	struct gdrhook_stats s0 = { .size = sizeof(s0) };
	struct gdrhook_stats s1 = { .size = sizeof(s1) };
	CUdeviceptr a = 0;
	CUmodule m;

	primary_ctx(0);
	CU_OK(cuModuleLoadData(&m, "fakecubin:only=8"));
	CHECK_EQ(gdrhook_get_stats(&s0), 0);
	CHECK(cuModuleGetGlobal_v2(&a, NULL, m, "missing") != CUDA_SUCCESS);
	CHECK_EQ(gdrhook_get_stats(&s1), 0);
	CHECK_EQ(s1.failed_calls, s0.failed_calls + 1);
	CHECK_EQ(s1.live, s0.live);
	CHECK_EQ(s1.allocs, s0.allocs);
	CU_OK(cuModuleUnload(m));
	CHECK_EQ(gdrhook_trusted(), 1);
}

TEST_MAIN()
