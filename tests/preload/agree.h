/* SPDX-License-Identifier: MIT */
/*
 * The registry against the driver double, for the tests of memory no
 * plain allocation call makes (test_drv_graph, test_drv_globals,
 * test_events): tracked exactly while the driver backs the range.
 */
#ifndef GH_AGREE_H
#define GH_AGREE_H

#include <errno.h>

#include "preload_util.h"

/* Does the driver back ptr right now? */
static inline int backed(CUdeviceptr p)
{
	CUdeviceptr base;
	size_t size;

	return cuMemGetAddressRange_v2(&base, &size, p) == CUDA_SUCCESS;
}

/* The registry and the driver agree on ptr; returns whether it is live. */
static inline int agree(CUdeviceptr p, unsigned int kind, size_t size)
{
	struct gdrhook_range r;
	int live = backed(p);

	if (live) {
		CHECK_EQ(tracked(p, &r), 0);
		CHECK_EQ(r.base, p);
		CHECK_EQ(r.size, size);
		CHECK_EQ(r.kind, kind);
	} else {
		CHECK_EQ(tracked(p, NULL), -ENOENT);
	}
	return live;
}

#endif
