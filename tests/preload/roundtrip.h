/* SPDX-License-Identifier: MIT */
/*
 * What the resolver-route tests share (test_dlsym, test_procaddr,
 * test_substitute, test_routes): whether a pointer is one of gdrhook's
 * wrappers, and an allocate/free round trip through a pair of entry
 * points the program got from a route.
 */
#ifndef GH_ROUNDTRIP_H
#define GH_ROUNDTRIP_H

#include <errno.h>

#include "preload_util.h"

static inline int in_shim(const void *p)
{
	Dl_info info;

	return p && dladdr(p, &info) && info.dli_fname &&
	       strstr(info.dli_fname, "libgdrhook");
}

/* The exported symbol p is (dladdr), or "". */
static inline const char *sym_name(const void *p)
{
	Dl_info info;

	return p && dladdr(p, &info) && info.dli_sname &&
	       info.dli_saddr == p ? info.dli_sname : "";
}

/* Allocate, free and allocate again through alloc and fre: tracked
 * exactly while live, a new generation at a reused address. */
static inline void check_roundtrip(CUresult (*alloc)(CUdeviceptr *, size_t),
				   CUresult (*fre)(CUdeviceptr))
{
	struct gdrhook_range r, r2;
	CUdeviceptr p, q;

	primary_ctx(0);
	CU_OK(alloc(&p, 1 << 20));
	CHECK_EQ(tracked(p, &r), 0);
	CHECK_EQ(r.base, p);
	CHECK_EQ(r.size, 1 << 20);
	CHECK_EQ(r.kind, GDRHOOK_KIND_DEVICE);
	CHECK_EQ(r.dev, 0);
	CHECK_EQ(tracked(p + 4096, NULL), 0);
	CHECK_EQ(gdrhook_lookup((void *)(uintptr_t)(p + 4096), 1 << 20, &r2),
		 -ERANGE);
	CU_OK(fre(p));
	CHECK_EQ(tracked(p, NULL), -ENOENT);
	/* Same size again: the driver reuses the address, the gen changes. */
	CU_OK(alloc(&q, 1 << 20));
	CHECK_EQ(q, p);
	CHECK_EQ(tracked(q, &r2), 0);
	CHECK(r2.gen != r.gen);
	CU_OK(fre(q));
}

#endif
