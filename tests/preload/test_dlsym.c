// SPDX-License-Identifier: MIT
/*
 * dlsym and dlvsym (src/hooks/dlsym.c), under LD_PRELOAD against the
 * driver test double: a lookup on any handle of a name gdrhook wraps
 * hands out the wrapper, and works through it; any other name, a
 * missing one and RTLD_NEXT get what the loader alone would give, errno
 * and dlerror() included; with GDRHOOK_ENABLE=0 every lookup is the
 * loader's.
 */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <errno.h>
#include <gnu/lib-names.h>

#include "roundtrip.h"

TEST(dlsym_on_libcuda_handle)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	void *a, *f;

	CHECK(h);
	a = dlsym(h, "cuMemAlloc_v2");
	f = dlsym(h, "cuMemFree_v2");
	CHECK(in_shim(a) && in_shim(f));
	check_roundtrip((CUresult (*)(CUdeviceptr *, size_t))a,
			(CUresult (*)(CUdeviceptr))f);
}

TEST(dlvsym_with_a_version)
{
	/* Versioned lookups (NCCL's way): the runtime's symbols carry the
	 * version "libcudart.so.13", as NVIDIA's do. */
	void *h = dlopen("libcudart.so.13", RTLD_NOW | RTLD_NOLOAD);
	cudaError_t (*m)(void **, size_t);
	cudaError_t (*f)(void *);
	void *p = NULL;

	/* (cudaSetDevice, not wrapped, links the runtime in) */
	CHECK_EQ(cudaSetDevice(0), cudaSuccess);
	CHECK(h);
	m = (cudaError_t (*)(void **, size_t))dlvsym(h, "cudaMalloc",
						      "libcudart.so.13");
	f = (cudaError_t (*)(void *))dlvsym(h, "cudaFree", "libcudart.so.13");
	CHECK(m && f);
	CHECK(in_shim((void *)m) && in_shim((void *)f));
	/* the wrapper the program's own binding reaches */
	CHECK((void *)m == (void *)cudaMalloc);
	CHECK(dlvsym(h, "cudaMalloc", "NO_SUCH_VERSION") == NULL);
	CHECK_EQ(m(&p, 4096), cudaSuccess);
	CHECK_EQ(tracked((uintptr_t)p, NULL), 0);
	CHECK_EQ(f(p), cudaSuccess);
	CHECK_EQ(tracked((uintptr_t)p, NULL), -ENOENT);
}

TEST(rtld_next_is_relative_to_the_caller)
{
	/* From the program, the next cuMemAlloc_v2 is the preloaded shim's. */
	CHECK(in_shim(dlsym(RTLD_NEXT, "cuMemAlloc_v2")));
	/* And a symbol only the driver has is found past the shim. */
	CHECK(dlsym(RTLD_NEXT, "cuInit") != NULL);
	CHECK(!in_shim(dlsym(RTLD_NEXT, "cuInit")));
}

/* Names that cannot be ours (not cu*, not ibv_*), and cu* names with no
 * wrapper: the loader's own answer. */
TEST(names_not_wrapped_are_the_loaders)
{
	void *libc = dlopen(LIBC_SO, RTLD_NOW | RTLD_NOLOAD);
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	Dl_info info;
	void *p;

	CHECK(libc && h);
	p = dlsym(libc, "getpid");
	CHECK(p == (void *)getpid);
	CHECK(dladdr(p, &info) && strstr(info.dli_fname, "libc"));
	p = dlsym(h, "cuDeviceGetName");
	CHECK(p != NULL && !in_shim(p));
	CHECK(dladdr(p, &info) && strstr(info.dli_fname, "libcuda"));
	CHECK_STR(sym_name(p), "cuDeviceGetName");
	/* a cu* name the driver has under a version gdrhook does not wrap */
	p = dlvsym(h, "cuDeviceGetName", "NO_SUCH_VERSION");
	CHECK(p == NULL);
	CHECK_EQ(gdrhook_trusted(), 1);
}

/* errno is the program's across every lookup; a miss says why in
 * dlerror(), as the loader does. */
TEST(lookups_keep_errno_and_dlerror)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	const char *e;

	CHECK(h);
	dlerror();
	errno = 4242;
	CHECK(in_shim(dlsym(h, "cuMemAlloc_v2")));
	CHECK_EQ(errno, 4242);
	CHECK(dlerror() == NULL);
	CHECK(dlsym(h, "cuNoSuchEntryPoint") == NULL);
	CHECK_EQ(errno, 4242);
	e = dlerror();
	CHECK(e && strstr(e, "cuNoSuchEntryPoint"));
	CHECK(dlsym(h, "ibv_no_such_verb") == NULL);
	CHECK(dlerror() != NULL);
	CHECK_EQ(errno, 4242);
}

/* The same wrapper whichever handle found the name, and the wrapper
 * itself when the lookup already lands in gdrhook. */
TEST(every_handle_gets_the_one_wrapper)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	void *self = dlopen(NULL, RTLD_NOW);
	void *a = dlsym(h, "cuMemFree_v2");

	CHECK(in_shim(a));
	CHECK(dlsym(RTLD_DEFAULT, "cuMemFree_v2") == a);
	CHECK(dlsym(self, "cuMemFree_v2") == a);
	CHECK(a == (void *)cuMemFree_v2);
	CHECK_STR(sym_name(a), "cuMemFree_v2");
}

/* ---- scenarios run in a fresh process with their own GDRHOOK_* ---- */

/* GDRHOOK_ENABLE=0: the driver's own function, and it works. */
static int scenario_disabled(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	CUresult (*a)(CUdeviceptr *, size_t);
	Dl_info info;
	CUdeviceptr p;

	if (!h)
		return 2;
	a = (CUresult (*)(CUdeviceptr *, size_t))dlsym(h, "cuMemAlloc_v2");
	if (!a || in_shim((void *)a) || !dladdr((void *)a, &info) ||
	    !strstr(info.dli_fname, "libcuda"))
		return 3;
	primary_ctx(0);
	return a(&p, 4096) == CUDA_SUCCESS ? 0 : 4;
}

static const struct scenario scenarios[] = {
	{ "disabled", scenario_disabled },
};

TEST(disabled_lookups_are_the_loaders)
{
	const char *env[] = { "GDRHOOK_ENABLE=0", NULL };

	CHECK_EQ(run_scenario("disabled", env), 0);
}

SCENARIO_MAIN(scenarios)
