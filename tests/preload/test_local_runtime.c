// SPDX-License-Identifier: MIT
/*
 * A runtime loaded in a library's local scope (build/tests/preload/
 * liblocal_rt.so, dlopen()ed RTLD_LOCAL; this program links no CUDA
 * library): its calls reach gdrhook's runtime wrappers, which must find
 * that runtime (not fail with cudaErrorInitializationError), track what
 * it allocates and answer its pointer queries.
 */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "gdrhook.h"
#include "harness.h"

struct lib {
	int (*malloc_fn)(void **, size_t);
	int (*free_fn)(void *);
	int (*attrs)(struct cudaPointerAttributes *, const void *);
	int (*entry_point)(void **);
	unsigned long (*queries)(void);
};

static void open_lib(struct lib *l)
{
	char exe[PATH_MAX], path[PATH_MAX + 32];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	void *h;

	CHECK(n > 0);
	exe[n] = 0;
	snprintf(path, sizeof(path), "%s/liblocal_rt.so", dirname(exe));
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		TH_FAIL("dlopen %s: %s", path, dlerror());
	l->malloc_fn = (int (*)(void **, size_t))dlsym(h, "lr_malloc");
	l->free_fn = (int (*)(void *))dlsym(h, "lr_free");
	l->attrs = (int (*)(struct cudaPointerAttributes *, const void *))
		dlsym(h, "lr_attrs");
	l->entry_point = (int (*)(void **))dlsym(h, "lr_entry_point");
	l->queries = (unsigned long (*)(void))dlsym(h, "lr_runtime_queries");
	CHECK(l->malloc_fn && l->free_fn && l->attrs && l->entry_point &&
	      l->queries);
	/* Not global: this program cannot see the runtime by name. */
	CHECK(dlsym(RTLD_DEFAULT, "cudaRuntimeGetVersion") == NULL);
}

TEST(local_runtime_calls_reach_it_and_are_tracked)
{
	struct gdrhook_range r;
	struct lib l;
	void *p = NULL;

	open_lib(&l);
	CHECK_EQ(l.malloc_fn(&p, 4096), cudaSuccess);
	CHECK(p != NULL);
	CHECK_EQ(gdrhook_lookup(p, 1, &r), 0);
	CHECK_EQ(r.kind, GDRHOOK_KIND_DEVICE);
	CHECK_EQ(l.free_fn(p), cudaSuccess);
	CHECK(gdrhook_lookup(p, 1, &r) != 0);
}

TEST(local_runtime_pointer_queries_answered)
{
	struct cudaPointerAttributes pa;
	struct lib l;
	unsigned long before;
	void *p = NULL;

	open_lib(&l);
	CHECK_EQ(l.malloc_fn(&p, 4096), cudaSuccess);
	/* The first one is the runtime's; it tells its version. */
	CHECK_EQ(l.attrs(&pa, p), cudaSuccess);
	before = l.queries();
	memset(&pa, 0xcc, sizeof(pa));
	CHECK_EQ(l.attrs(&pa, (char *)p + 8), cudaSuccess);
	CHECK_EQ(pa.type, cudaMemoryTypeDevice);
	CHECK(pa.devicePointer == (char *)p + 8);
	CHECK_EQ(l.queries(), before);
}

TEST(local_runtime_entry_point_is_ours)
{
	struct lib l;
	void *fn = NULL;
	Dl_info info;

	open_lib(&l);
	CHECK_EQ(l.entry_point(&fn), cudaSuccess);
	CHECK(fn != NULL);
	/* cudaGetDriverEntryPoint hands out our cuMemAlloc wrapper. */
	CHECK(dladdr(fn, &info) && info.dli_fname &&
	      strstr(info.dli_fname, "libgdrhook"));
}

TEST_MAIN()
