/* SPDX-License-Identifier: MIT */
/*
 * One generated case per row of the hooks/ lists (build/gen/test_symbols.c
 * calls symbol_case()).  Runs under LD_PRELOAD=libgdrhook.so against the
 * CUDA driver test double, and checks for that one symbol:
 *
 *   1. ELF route: the preloaded library exports it, so symbol binding
 *      reaches the wrapper;
 *   2. dlsym route: dlsym(dlopen("libcuda.so.1"), name) hands out the
 *      wrapper, not the driver's function;
 *   3. resolver route: cuGetProcAddress_v2 (with the version and the
 *      per-thread flag that select this exact entry point) and the legacy
 *      cuGetProcAddress hand out the wrapper;
 *   4. call-through: the wrapper calls the real function exactly once and
 *      returns its result code and errno unchanged (an injected error code
 *      and errno from the double must come back bit for bit).
 */
#ifndef GH_SYMBOL_CASE_H
#define GH_SYMBOL_CASE_H

#include <cuda.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "harness.h"

typedef unsigned long (*fc_calls_fn)(const char *);
typedef void (*fc_fail_fn)(const char *, CUresult, int);
typedef void (*fc_errno_fn)(int);

static int in_shim(const void *p)
{
	Dl_info info;

	return p && dladdr(p, &info) && info.dli_fname &&
	       strstr(info.dli_fname, "libgdrhook");
}

static const char *sym_name_of(const void *p)
{
	Dl_info info;

	if (!p || !dladdr(p, &info) || info.dli_saddr != p)
		return NULL;
	return info.dli_sname;
}

static int ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n >= m && !strcmp(s + n - m, suffix);
}

/* Find the version/flag of cuGetProcAddress_v2 that selects name. */
static int resolver_reaches(const char *name, const char *base)
{
	static const int versions[] = { 13000, 12030, 12020, 12000, 11030, 11020, 11000,
					10020, 10010, 10000, 9020, 8000, 7000, 6050,
					6000, 5000, 4010, 4000, 3020, 3010,
					3000, 2000 };
	cuuint64_t flags = ends_with(name, "_ptsz") || ends_with(name, "_ptds") ?
			   CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM :
			   CU_GET_PROC_ADDRESS_LEGACY_STREAM;

	for (size_t i = 0; i < sizeof(versions) / sizeof(versions[0]); i++) {
		CUdriverProcAddressQueryResult st;
		void *p = NULL;

		if (cuGetProcAddress_v2(base, &p, versions[i], flags, &st) !=
		    CUDA_SUCCESS || !p)
			continue;
		if (!in_shim(p)) {
			const char *got = sym_name_of(p);

			if (got && !strcmp(got, name))
				TH_FAIL("cuGetProcAddress_v2(%s, %d) returned the driver's %s, not the wrapper",
					base, versions[i], name);
			continue;
		}
		if (sym_name_of(p) && !strcmp(sym_name_of(p), name))
			return versions[i];
	}
	return 0;
}

static void symbol_case(const char *name, const char *base,
			const char *family, const char *action, int nparams)
{
	void *self, *h, *p;

	/* 1. ELF: the symbol binds to the shim. */
	self = dlsym(RTLD_DEFAULT, name);
	CHECK(self != NULL);
	CHECK(in_shim(self));
	if (!strcmp(family, "libc"))
		return;		/* dlsym/dlvsym: covered by test_routes */

	if (!strcmp(family, "runtime")) {
		h = dlopen("libcudart.so.13", RTLD_NOW);
		CHECK(h != NULL);
		p = dlsym(h, name);
		if (!p) {
			/* The double does not implement it: nothing to call. */
			printf("  note: runtime double lacks %s\n", name);
			return;
		}
		CHECK(in_shim(p));
		return;
	}

	/* 2. dlsym on the driver's handle. */
	h = dlopen("libcuda.so.1", RTLD_NOW);
	CHECK(h != NULL);
	p = dlsym(h, name);
	if (!p)
		TH_FAIL("the driver double does not export %s", name);
	CHECK(in_shim(p));
	CHECK_STR(sym_name_of(p), name);

	/* 3. the driver's resolver, resolver-first. */
	CHECK(cuInit(0) == CUDA_SUCCESS);
	if (strcmp(action, "manual") && !resolver_reaches(name, base))
		TH_FAIL("no cuGetProcAddress_v2 version/flag reaches the wrapper for %s",
			name);

	/* 4. call-through with an injected result and errno. */
	if (!strcmp(action, "manual") || nparams > 6 ||
	    strstr(name, "IpcOpenMemHandle"))
		return;		/* by-value structs: see test_routes */
	{
		fc_calls_fn calls = (fc_calls_fn)dlsym(RTLD_DEFAULT,
						       "fakecuda_calls");
		fc_fail_fn fail = (fc_fail_fn)dlsym(RTLD_DEFAULT,
						    "fakecuda_fail_next");
		fc_errno_fn seterr = (fc_errno_fn)dlsym(RTLD_DEFAULT,
							"fakecuda_set_errno");
		typedef CUresult (*any_fn)(uintptr_t, uintptr_t, uintptr_t,
					   uintptr_t, uintptr_t, uintptr_t);
		unsigned long before;
		CUresult rc;

		CHECK(calls && fail && seterr);
		before = calls(name);
		fail(name, CUDA_ERROR_ILLEGAL_STATE, 1);
		seterr(4242);
		errno = 0;
		rc = ((any_fn)self)(0, 0, 0, 0, 0, 0);
		CHECK_EQ(errno, 4242);
		CHECK_EQ(rc, CUDA_ERROR_ILLEGAL_STATE);
		CHECK_EQ(calls(name), before + 1);
		seterr(0);
	}
}

#endif
