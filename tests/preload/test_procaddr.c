// SPDX-License-Identifier: MIT
/*
 * The driver's resolvers (src/hooks/procaddr.c), under LD_PRELOAD against
 * the driver test double: cuGetProcAddress_v2, cuGetProcAddress and the
 * runtime's cudaGetDriverEntryPoint[ByVersion] hand out the wrapper of
 * the entry point the real resolver chose (its version, its per-thread
 * flag), and work through it; what the resolver refuses reaches the
 * program as the resolver said it, outputs untouched where it left them;
 * names gdrhook does not wrap are the driver's; with GDRHOOK_ENABLE=0
 * every answer is the driver's.
 */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <errno.h>

/* cudaGetDriverEntryPoint is deprecated, and still what programs call. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#include "roundtrip.h"

/* The 4-argument resolver (cuda.h names cuGetProcAddress_v2 so). */
typedef CUresult (*gpa4_fn)(const char *, void **, int, cuuint64_t);

static gpa4_fn legacy_gpa(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);

	return h ? (gpa4_fn)dlsym(h, "cuGetProcAddress") : NULL;
}

TEST(cuGetProcAddress_v2_through_dlsym)
{
	CUdriverProcAddressQueryResult st;
	void *a = NULL, *f = NULL, *gpa = NULL;
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);

	/* Reached the way the runtime does it: dlsym, then the resolver. */
	gpa = dlsym(h, "cuGetProcAddress_v2");
	CHECK(in_shim(gpa));
	CU_OK(cuInit(0));
	CU_OK(((CUresult (*)(const char *, void **, int, cuuint64_t,
			     CUdriverProcAddressQueryResult *))gpa)(
		"cuMemAlloc", &a, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &st));
	CU_OK(cuGetProcAddress_v2("cuMemFree", &f, 13000,
				  CU_GET_PROC_ADDRESS_DEFAULT, &st));
	CHECK(in_shim(a) && in_shim(f));
	check_roundtrip((CUresult (*)(CUdeviceptr *, size_t))a,
			(CUresult (*)(CUdeviceptr))f);
}

TEST(cuGetProcAddress_legacy_and_versions)
{
	CUresult (*gpa)(const char *, void **, int, cuuint64_t);
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	void *a = NULL, *old = NULL;
	Dl_info info;

	gpa = (CUresult (*)(const char *, void **, int, cuuint64_t))dlsym(
		h, "cuGetProcAddress");
	CHECK(in_shim((void *)gpa));
	CU_OK(cuInit(0));
	CU_OK(gpa("cuMemAlloc", &a, 12000, CU_GET_PROC_ADDRESS_DEFAULT));
	CHECK(in_shim(a));
	CHECK(dladdr(a, &info) && !strcmp(info.dli_sname, "cuMemAlloc_v2"));
	/* An old version selects the 32-bit-ABI entry: its own wrapper. */
	CU_OK(gpa("cuMemAlloc", &old, 3000, CU_GET_PROC_ADDRESS_DEFAULT));
	CHECK(in_shim(old));
	CHECK(dladdr(old, &info) && !strcmp(info.dli_sname, "cuMemAlloc"));
}

TEST(per_thread_default_stream_flag)
{
	CUdriverProcAddressQueryResult st;
	void *a = NULL, *f = NULL;
	Dl_info info;
	CUdeviceptr p;
	char path[256];

	(void)path;
	CU_OK(cuInit(0));
	CU_OK(cuGetProcAddress_v2("cuMemAllocAsync", &a, 13000,
				  CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
				  &st));
	CU_OK(cuGetProcAddress_v2("cuMemFreeAsync", &f, 13000,
				  CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
				  &st));
	CHECK(in_shim(a) && in_shim(f));
	CHECK(dladdr(a, &info) &&
	      !strcmp(info.dli_sname, "cuMemAllocAsync_ptsz"));
	primary_ctx(0);
	CU_OK(((CUresult (*)(CUdeviceptr *, size_t, CUstream))a)(&p, 4096,
								  NULL));
	CHECK_EQ(tracked(p, NULL), 0);
	CHECK_EQ(fake_calls("cuMemAllocAsync_ptsz"), 1);
	CU_OK(((CUresult (*)(CUdeviceptr, CUstream))f)(p, NULL));
	CHECK_EQ(tracked(p, NULL), -ENOENT);
}

TEST(cudaGetDriverEntryPoint_and_by_version)
{
	void *a = NULL, *f = NULL;
	enum cudaDriverEntryPointQueryResult q;

	/* (cudaSetDevice, not wrapped, links the runtime in) */
	CHECK_EQ(cudaSetDevice(0), cudaSuccess);
	CHECK_EQ(cudaGetDriverEntryPointByVersion("cuMemAlloc", &a, 13000,
						  cudaEnableDefault, &q),
		 cudaSuccess);
	CHECK_EQ(cudaGetDriverEntryPoint("cuMemFree", &f, cudaEnableDefault,
					 &q),
		 cudaSuccess);
	CHECK(in_shim(a) && in_shim(f));
	check_roundtrip((CUresult (*)(CUdeviceptr *, size_t))a,
			(CUresult (*)(CUdeviceptr))f);
}

TEST(runtime_resolver_per_thread_flag)
{
	enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
	void *a = NULL, *d = NULL;

	CHECK_EQ(cudaSetDevice(0), cudaSuccess);
	CHECK_EQ(cudaGetDriverEntryPointByVersion("cuMemAllocAsync", &a, 13000,
						  cudaEnablePerThreadDefaultStream,
						  &q),
		 cudaSuccess);
	CHECK_EQ(q, cudaDriverEntryPointSuccess);
	CHECK(in_shim(a));
	CHECK_STR(sym_name(a), "cuMemAllocAsync_ptsz");
	CHECK_EQ(cudaGetDriverEntryPoint("cuMemAllocAsync", &d,
					 cudaEnableDefault, &q),
		 cudaSuccess);
	CHECK(in_shim(d));
	CHECK_STR(sym_name(d), "cuMemAllocAsync");
}

/* Refusals pass through as the resolver made them: its return value, its
 * status, the pointer it wrote (NULL) or left alone. */
TEST(refusals_reach_the_program_unchanged)
{
	CUdriverProcAddressQueryResult st;
	void *const sentinel = (void *)0x5a5a;
	void *p;

	CU_OK(cuInit(0));
	p = sentinel;
	st = CU_GET_PROC_ADDRESS_SUCCESS;
	CU_OK(cuGetProcAddress_v2("cuNoSuchEntryPoint", &p, 13000,
				  CU_GET_PROC_ADDRESS_DEFAULT, &st));
	CHECK(p == NULL);
	CHECK_EQ(st, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
	p = sentinel;
	CU_OK(cuGetProcAddress_v2("cuMemAllocAsync", &p, 11000,
				  CU_GET_PROC_ADDRESS_DEFAULT, &st));
	CHECK(p == NULL);
	CHECK_EQ(st, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
	/* a version above the driver's: INVALID_VALUE, outputs untouched */
	p = sentinel;
	st = CU_GET_PROC_ADDRESS_SUCCESS;
	CHECK_EQ(cuGetProcAddress_v2("cuMemAlloc", &p, 99000,
				     CU_GET_PROC_ADDRESS_DEFAULT, &st),
		 CUDA_ERROR_INVALID_VALUE);
	CHECK(p == sentinel);
	CHECK_EQ(st, CU_GET_PROC_ADDRESS_SUCCESS);
	p = sentinel;
	CHECK(legacy_gpa() != NULL);
	CHECK_EQ(legacy_gpa()("cuNoSuchEntryPoint", &p, 13000,
			      CU_GET_PROC_ADDRESS_DEFAULT),
		 CUDA_ERROR_NOT_FOUND);
	CHECK(p == sentinel);
	CHECK_EQ(gdrhook_trusted(), 1);
}

/* Entry points gdrhook does not wrap: the driver's own, trusted. */
TEST(names_not_wrapped_are_the_drivers)
{
	CUdriverProcAddressQueryResult st;
	void *p = NULL, *q = NULL;
	Dl_info info;

	CU_OK(cuInit(0));
	CU_OK(cuGetProcAddress_v2("cuDeviceGetName", &p, 13000,
				  CU_GET_PROC_ADDRESS_DEFAULT, &st));
	CHECK(p && !in_shim(p));
	CHECK(dladdr(p, &info) && strstr(info.dli_fname, "libcuda"));
	CHECK_STR(sym_name(p), "cuDeviceGetName");
	CU_OK(legacy_gpa()("cuCtxSynchronize", &q, 13000,
			   CU_GET_PROC_ADDRESS_DEFAULT));
	CHECK(q && !in_shim(q));
	CHECK_EQ(gdrhook_trusted(), 1);
}

/* ---- scenarios run in a fresh process with their own GDRHOOK_* ---- */

/* GDRHOOK_ENABLE=0: every resolver answers with the driver's function. */
static int scenario_disabled(void)
{
	CUdriverProcAddressQueryResult st;
	enum cudaDriverEntryPointQueryResult q;
	void *a = NULL, *b = NULL, *c = NULL;

	if (cuInit(0) || cudaSetDevice(0))
		return 2;
	if (cuGetProcAddress_v2("cuMemAlloc", &a, 13000,
				CU_GET_PROC_ADDRESS_DEFAULT, &st) ||
	    !legacy_gpa() ||
	    legacy_gpa()("cuMemFree", &b, 13000,
			 CU_GET_PROC_ADDRESS_DEFAULT) ||
	    cudaGetDriverEntryPoint("cuMemAllocAsync", &c, cudaEnableDefault,
				    &q))
		return 3;
	if (!a || !b || !c || in_shim(a) || in_shim(b) || in_shim(c))
		return 4;
	if (strcmp(sym_name(a), "cuMemAlloc_v2") ||
	    strcmp(sym_name(b), "cuMemFree_v2"))
		return 5;
	return 0;
}

static const struct scenario scenarios[] = {
	{ "disabled", scenario_disabled },
};

TEST(disabled_resolvers_are_the_drivers)
{
	const char *env[] = { "GDRHOOK_ENABLE=0", NULL };

	CHECK_EQ(run_scenario("disabled", env), 0);
}

SCENARIO_MAIN(scenarios)
