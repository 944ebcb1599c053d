/* SPDX-License-Identifier: MIT */
/*
 * Interception self-test (src/face/routes.c): do the four routes to a CUDA
 * entry point reach gdrhook's wrappers in this process?  Each route is
 * looked up and called as a program would (from the program's global
 * scope, through the interposed dlsym, cuGetProcAddress_v2 and
 * cudaGetDriverEntryPointByVersion).  It may initialize the CUDA runtime:
 * for gdrhook-info, not for hook paths.
 */
#ifndef GH_ROUTES_H
#define GH_ROUTES_H

#include <stddef.h>

enum { GH_ROUTE_ELF, GH_ROUTE_DLSYM, GH_ROUTE_GPA, GH_ROUTE_DEP, GH_ROUTES };

struct gh_route_check {
	const char *name;
	int state;		/* 1 reaches our wrapper, 0 misses, -1 unchecked */
	char detail[192];
};

void gh_routes_check(struct gh_route_check r[GH_ROUTES]);

/* A CUresult by the driver's name for it (cuGetErrorName from the libcuda
 * handle cuda), else "CUresult N" written into buf. */
const char *gh_cu_errname(void *cuda, int rc, char *buf, size_t cap);

#endif
