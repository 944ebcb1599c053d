/* SPDX-License-Identifier: MIT */
/*
 * The dma-bufs the program exported (cuMemGetHandleForAddressRange), by
 * the identity of the file (st_dev, st_ino: never the fd number, which
 * the program may close and reuse), with the GPU allocations each one
 * reached when it was made (src/hooks/dmabuf_export.c).
 */
#ifndef GH_DMABUF_EXPORT_H
#define GH_DMABUF_EXPORT_H

#include <stdint.h>

#include "rcache/rcache.h"

#define GH_EXPORT_RANGES	8

struct gh_export {
	uint64_t base, size;		/* what the dma-buf begins at, reaches */
	unsigned int n;			/* allocations it reached (at most 8) */
	struct gh_range r[GH_EXPORT_RANGES];
};

/*
 * The export fd refers to: 0 and *x_p, or -ENOENT (not a dma-buf the
 * program exported through the driver here), -EBADF.
 */
int gh_dmabuf_export_find(int fd, struct gh_export *x_p);

#endif
