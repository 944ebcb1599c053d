// SPDX-License-Identifier: MIT
/*
 * The interception self-test of gdrhook-info (see routes.h): a route
 * that does not reach a wrapper is an allocation or free the registry
 * would miss.
 */
#include <cuda.h>
#include <dlfcn.h>
#include <string.h>

#include "base/base.h"
#include "platform/platform.h"
#include "routes.h"

/*
 * What the program sees: the global scope, searched from the main
 * program (RTLD_DEFAULT from here would also search gdrhook's own local
 * scope when a program dlopen()ed it RTLD_LOCAL).
 */
static void *global(const char *name)
{
	void *self = dlopen(NULL, RTLD_LAZY);
	void *p;

	if (!self)
		return NULL;
	p = gh_real_dlsym(self, name);
	dlclose(self);
	return p;
}

static int ours(void *p)
{
	return p && gh_addr_is_ours(p);
}

static const char *owner(void *p)
{
	Dl_info di;

	if (!p)
		return "nothing";
	if (dladdr(p, &di) && di.dli_fname)
		return di.dli_fname;
	return "an unknown object";
}

static void route_elf(struct gh_route_check *r)
{
	static const char *const names[] = {
		"cuMemAlloc_v2", "cuMemFree_v2", "cudaMalloc", "cudaFree",
	};

	r->name = "ELF symbol binding";
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		void *p = global(names[i]);

		if (!ours(p)) {
			r->state = 0;
			gh_str_printf(r->detail, sizeof(r->detail),
			    "%s binds to %s (gdrhook must be preloaded)",
			    names[i], owner(p));
			return;
		}
	}
	r->state = 1;
	gh_str_printf(r->detail, sizeof(r->detail),
	    "cuMemAlloc_v2, cuMemFree_v2, cudaMalloc, cudaFree bind to gdrhook");
}

typedef void *(*dlsym_fn)(void *, const char *);

static void route_dlsym(struct gh_route_check *r, void *cuda)
{
	void *ds = global("dlsym");
	void *dv = global("dlvsym");
	void *p;

	r->name = "dlsym/dlvsym";
	if (!ours(ds) || !ours(dv)) {
		r->state = 0;
		gh_str_printf(r->detail, sizeof(r->detail), "%s comes from %s",
		    ours(ds) ? "dlvsym" : "dlsym", owner(ours(ds) ? dv : ds));
		return;
	}
	if (!cuda) {
		r->state = 1;
		gh_str_printf(r->detail, sizeof(r->detail),
		    "dlsym and dlvsym are gdrhook's (no driver to look up in)");
		return;
	}
	p = ((dlsym_fn)ds)(cuda, "cuMemFree_v2");
	r->state = ours(p);
	gh_str_printf(r->detail, sizeof(r->detail),
	    "dlsym(libcuda, \"cuMemFree_v2\") gives %s",
	    ours(p) ? "gdrhook's wrapper" : owner(p));
}

typedef CUresult (*gpa_fn)(const char *, void **, int, cuuint64_t,
			   CUdriverProcAddressQueryResult *);
typedef CUresult (*cu_errname_fn)(CUresult, const char **);
typedef const char *(*rt_errname_fn)(int);

const char *gh_cu_errname(void *cuda, int rc, char *buf, size_t cap)
{
	cu_errname_fn f = cuda ? (cu_errname_fn)gh_real_dlsym(cuda, "cuGetErrorName") : NULL;
	const char *n = NULL;

	if (f && f((CUresult)rc, &n) == CUDA_SUCCESS && n)
		return n;
	gh_str_printf(buf, cap, "CUresult %d", rc);
	return buf;
}

/* The runtime's name for an error, else its number. */
static const char *rt_err(void *rt, int rc, char *buf, size_t cap)
{
	rt_errname_fn f = (rt_errname_fn)gh_real_dlsym(rt, "cudaGetErrorName");
	const char *n = f ? f(rc) : NULL;

	if (n)
		return n;
	gh_str_printf(buf, cap, "cudaError %d", rc);
	return buf;
}

static void route_gpa(struct gh_route_check *r, void *cuda)
{
	void *g = global("cuGetProcAddress_v2");
	CUdriverProcAddressQueryResult st;
	void *p = NULL;
	char e[32];
	CUresult rc;

	r->name = "cuGetProcAddress";
	if (!ours(g)) {
		r->state = 0;
		gh_str_printf(r->detail, sizeof(r->detail),
		    "cuGetProcAddress_v2 comes from %s", owner(g));
		return;
	}
	if (!cuda || !gh_real_dlsym(cuda, "cuGetProcAddress_v2")) {
		r->state = -1;
		gh_str_printf(r->detail, sizeof(r->detail),
		    "not called: no CUDA driver with cuGetProcAddress_v2");
		return;
	}
	rc = ((gpa_fn)g)("cuMemFree", &p, CUDA_VERSION,
			 CU_GET_PROC_ADDRESS_DEFAULT, &st);
	if (rc != CUDA_SUCCESS) {
		r->state = -1;
		gh_str_printf(r->detail, sizeof(r->detail),
		    "cuGetProcAddress_v2(\"cuMemFree\", %d) failed: %s",
		    CUDA_VERSION, gh_cu_errname(cuda, rc, e, sizeof(e)));
		return;
	}
	r->state = ours(p);
	gh_str_printf(r->detail, sizeof(r->detail),
	    "cuGetProcAddress_v2(\"cuMemFree\", %d) gives %s", CUDA_VERSION,
	    ours(p) ? "gdrhook's wrapper" : owner(p));
}

typedef int (*dep_fn)(const char *, void **, unsigned int,
		      unsigned long long, int *);

static void route_dep(struct gh_route_check *r)
{
	void *f = global("cudaGetDriverEntryPointByVersion");
	void *rt;
	void *p = NULL;
	int st = 0, rc;
	char e[32];

	r->name = "cudaGetDriverEntryPoint";
	if (!ours(f)) {
		r->state = 0;
		gh_str_printf(r->detail, sizeof(r->detail),
		    "cudaGetDriverEntryPointByVersion comes from %s", owner(f));
		return;
	}
	/* Global, so our wrapper finds the runtime after us (RTLD_NEXT). */
	rt = dlopen("libcudart.so.13", RTLD_NOW | RTLD_GLOBAL);
	if (!rt)	/* the toolkit's default place, often not on the path */
		rt = dlopen("/usr/local/cuda/lib64/libcudart.so.13",
			    RTLD_NOW | RTLD_GLOBAL);
	if (!rt || !gh_real_dlsym(rt, "cudaGetDriverEntryPointByVersion")) {
		r->state = -1;
		gh_str_printf(r->detail, sizeof(r->detail),
		    "not called: no CUDA 13 runtime (libcudart.so.13) found");
		return;
	}
	rc = ((dep_fn)f)("cuMemFree", &p, CUDA_VERSION, 0, &st);
	if (rc) {
		/* No driver, no device: the runtime cannot start. */
		r->state = -1;
		gh_str_printf(r->detail, sizeof(r->detail),
		    "cudaGetDriverEntryPointByVersion(\"cuMemFree\", %d) failed: %s",
		    CUDA_VERSION, rt_err(rt, rc, e, sizeof(e)));
		return;
	}
	r->state = ours(p);
	gh_str_printf(r->detail, sizeof(r->detail),
	    "cudaGetDriverEntryPointByVersion(\"cuMemFree\", %d) gives %s",
	    CUDA_VERSION, ours(p) ? "gdrhook's wrapper" : owner(p));
}

void gh_routes_check(struct gh_route_check r[GH_ROUTES])
{
	void *cuda = gh_libcuda_handle();

	memset(r, 0, sizeof(*r) * GH_ROUTES);
	route_elf(&r[GH_ROUTE_ELF]);
	route_dlsym(&r[GH_ROUTE_DLSYM], cuda);
	route_gpa(&r[GH_ROUTE_GPA], cuda);
	route_dep(&r[GH_ROUTE_DEP]);
}
