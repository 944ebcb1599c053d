// SPDX-License-Identifier: MIT
/*
 * src/platform/resolve.c: libc's dlsym/dlvsym found without the loader,
 * the symbol index, what is ours, the driver library (GDRHOOK_LIBCUDA,
 * the default, a refusal said once) and the real entry points of hooked
 * symbols, recorded once: from the driver, from a sibling in the same
 * library, from a runtime the program loaded RTLD_LOCAL.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "capture.h"
#include "doubles.h"

#include "platform/platform.h"

static int count(const char *hay, const char *needle)
{
	int n = 0;

	for (const char *p = hay; (p = strstr(p, needle)); p++)
		n++;
	return n;
}

static int default_driver_loadable(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_LAZY);

	return h != NULL;
}

/* A function of this program (the "library" resolve.c is part of). */
static int ours(void)
{
	return 1;
}

/* libc's own dlsym and dlvsym, found by reading its symbol table. */
TEST(libc_dlsym_found_without_the_loader)
{
	void *(*ds)(void *, const char *) = gh_libc_dlsym_fn();
	void *(*dvs)(void *, const char *, const char *) = gh_libc_dlvsym_fn();
	Dl_info info;

	CHECK(ds != NULL && dvs != NULL);
	CHECK(dladdr((void *)ds, &info) && info.dli_sname);
	CHECK_STR(info.dli_sname, "dlsym");
	CHECK(strstr(info.dli_fname, "libc.so") ||
	      strstr(info.dli_fname, "libdl.so"));
	CHECK(dladdr((void *)dvs, &info) && info.dli_sname);
	CHECK_STR(info.dli_sname, "dlvsym");
	CHECK(ds(RTLD_DEFAULT, "getpid") == gh_real_dlsym(RTLD_DEFAULT,
							   "getpid"));
	CHECK(gh_real_dlsym(RTLD_DEFAULT, "getpid") != NULL);
	CHECK(gh_real_dlsym(RTLD_DEFAULT, "gh_no_such_function") == NULL);
	CHECK(gh_real_dlvsym(RTLD_DEFAULT, "dlsym", "GLIBC_NO_SUCH") == NULL);
#if defined(__x86_64__)
	CHECK(gh_real_dlvsym(RTLD_DEFAULT, "memcpy", "GLIBC_2.2.5") != NULL);
#endif
}

/* Every row of the symbol table found at its own index; others not. */
TEST(sym_find_every_row_and_nothing_else)
{
	for (unsigned int i = 0; i < GH_SYM_COUNT; i++)
		CHECK_EQ(gh_sym_find(gh_syms[i].name), (int)i);
	CHECK_EQ(gh_sym_find("cuMemAlloc_v2"), GH_SYM_cuMemAlloc_v2);
	CHECK_EQ(gh_sym_find("cumemalloc_v2"), -1);
	CHECK_EQ(gh_sym_find("cuMemAlloc_v"), -1);
	CHECK_EQ(gh_sym_find(""), -1);
	CHECK_EQ(gh_sym_find("zzz"), -1);
}

TEST(addr_is_ours_only_inside_our_object)
{
	int local;

	CHECK_EQ(gh_addr_is_ours((void *)ours), 1);
	CHECK_EQ(gh_addr_is_ours((void *)gh_sym_find), 1);
	CHECK_EQ(gh_addr_is_ours(gh_real_dlsym(RTLD_DEFAULT, "getpid")), 0);
	CHECK_EQ(gh_addr_is_ours(&local), 0);
	CHECK_EQ(gh_addr_is_ours(NULL), 0);
}

/* GDRHOOK_LIBCUDA names the double: loaded, and said to be in effect. */
TEST(libcuda_by_path)
{
	const char *path = double_path("fake/libcuda.so.1");
	void *h;

	if (default_driver_loadable())
		SKIP("this machine has a libcuda.so.1");
	gh_platform_cfg.libcuda = path;
	CHECK(gh_libcuda_loaded() == NULL);	/* never loads it */
	CHECK(dlopen(path, RTLD_LAZY | RTLD_NOLOAD) == NULL);
	h = gh_libcuda_handle();
	CHECK(h != NULL);
	CHECK(h == dlopen(path, RTLD_LAZY | RTLD_NOLOAD));
	CHECK(gh_libcuda_handle() == h);
	CHECK_STR(gh_libcuda_loaded(), path);
	/* a driver entry point from it, kept */
	CHECK(gh_real_get(GH_SYM_cuMemAlloc_v2) == dlsym(h, "cuMemAlloc_v2"));
	CHECK(gh_real_get(GH_SYM_cuMemAlloc_v2) == dlsym(h, "cuMemAlloc_v2"));
}

/*
 * A GDRHOOK_LIBCUDA that is no driver: said once, the default tried; no
 * default either: said once, every entry point NULL, errno kept.
 */
TEST(libcuda_refused_and_no_default_said_once)
{
	const char *err;

	if (default_driver_loadable())
		SKIP("this machine has a libcuda.so.1");
	capture_begin();
	gh_platform_cfg.libcuda = "libm.so.6";
	CHECK(gh_libcuda_handle() == NULL);
	CHECK(gh_libcuda_handle() == NULL);
	errno = 1234;
	CHECK(gh_real_get(GH_SYM_cuMemAlloc_v2) == NULL);
	CHECK(gh_real_get(GH_SYM_cuMemFree_v2) == NULL);
	CHECK_EQ(errno, 1234);
	CHECK(gh_libcuda_loaded() == NULL);
	err = capture_end();
	CHECK_EQ(count(err, "warning: GDRHOOK_LIBCUDA=libm.so.6 refused: not a CUDA driver (no cuInit, no cuGetProcAddress_v2); using the default libcuda.so.1\n"), 1);
	CHECK_EQ(count(err, "warning: cannot load the CUDA driver libcuda.so.1: "), 1);
	CHECK_EQ(count(err, "\n"), 2);
}

/* A path that cannot be loaded: refused with the loader's reason. */
TEST(libcuda_missing_path_refused_with_the_reason)
{
	const char *err;

	if (default_driver_loadable())
		SKIP("this machine has a libcuda.so.1");
	capture_begin();
	gh_platform_cfg.libcuda = "/nonexistent/libcuda.so.1";
	CHECK(gh_libcuda_handle() == NULL);
	err = capture_end();
	CHECK(strstr(err, "warning: GDRHOOK_LIBCUDA=/nonexistent/libcuda.so.1 refused: /nonexistent/libcuda.so.1: cannot open shared object file"));
}

/* The first record of a real entry point stands; the same one again is
 * no conflict, another one is. */
TEST(real_set_first_record_stands)
{
	void *a = (void *)ours, *b = (void *)gh_sym_find;

	CHECK_EQ(gh_real_set(GH_SYM_cudaMalloc, a), 0);
	CHECK_EQ(gh_real_set(GH_SYM_cudaMalloc, a), 0);
	CHECK_EQ(gh_real_set(GH_SYM_cudaMalloc, b), -EEXIST);
	CHECK(gh_real_get(GH_SYM_cudaMalloc) == a);
}

/* A name beside a function: from that function's library, never ours. */
TEST(real_sibling_from_the_same_library)
{
	void *h, *fn;

	gh_platform_cfg.libcuda = double_path("fake/libcuda.so.1");
	h = gh_libcuda_handle();
	CHECK(h != NULL);
	fn = dlsym(h, "cuMemAlloc_v2");
	CHECK(gh_real_sibling(fn, "cuInit") == dlsym(h, "cuInit"));
	CHECK(gh_real_sibling(fn, "gh_no_such_function") == NULL);
	CHECK(gh_real_sibling((void *)ours, "gh_sym_find") == NULL);
	CHECK(gh_real_sibling(NULL, "cuInit") == NULL);
}

/*
 * A runtime the program loaded RTLD_LOCAL: not the next definition after
 * us, but found in the caller's scope, or in any loaded libcudart when
 * the caller is unknown; then recorded for every later call.
 */
TEST(runtime_loaded_local_found_for_its_caller)
{
	void *rt;

	/* the runtime's driver comes first, where the runtime finds it */
	gh_platform_cfg.libcuda = double_path("fake/libcuda.so.1");
	CHECK(gh_libcuda_handle() != NULL);
	rt = double_open("fake/libcudart.so.13", RTLD_NOW | RTLD_LOCAL);
	CHECK(gh_real_get(GH_SYM_cudaMalloc) == NULL);
	CHECK(gh_real_get_for(GH_SYM_cudaMalloc, dlsym(rt, "cudaFree")) ==
	      dlsym(rt, "cudaMalloc"));
	CHECK(gh_real_get(GH_SYM_cudaMalloc) == dlsym(rt, "cudaMalloc"));
	/* no caller to go by: the loaded libcudart */
	CHECK(gh_real_get(GH_SYM_cudaFree) == NULL);
	CHECK(gh_real_get_for(GH_SYM_cudaFree, NULL) == dlsym(rt, "cudaFree"));
}

TEST_MAIN()
