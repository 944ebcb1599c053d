/* SPDX-License-Identifier: MIT */
/*
 * Reach the gdrhook API when libgdrhook.so is only LD_PRELOADed and the
 * program or library must not link it.  Header-only:
 *
 *   struct gdrhook_preload gh;
 *   if (gdrhook_preload_open(&gh) == 0) {
 *           struct gdrhook_range r;
 *           if (gh.lookup(buf, len, &r) == 0 && r.gen == cached_gen)
 *                   ... registration still valid ...
 *   }
 *
 * gdrhook_preload_open() returns -ENOENT when gdrhook is not loaded (the
 * caller then falls back to its own validation, e.g. the buffer-ID check).
 * Needs -ldl on glibc older than 2.34.
 */
#ifndef GDRHOOK_PRELOAD_H
#define GDRHOOK_PRELOAD_H

#include <dlfcn.h>
#include <errno.h>
#include <string.h>

#include "gdrhook.h"

struct gdrhook_preload {
	unsigned int (*api_version)(void);
	int (*lookup)(const void *ptr, size_t len, struct gdrhook_range *r);
	int (*trusted)(void);
	int (*subscribe)(uint32_t mask, gdrhook_event_fn fn, void *arg);
	int (*unsubscribe)(int handle);
	int (*get_stats)(struct gdrhook_stats *st);
	void (*flush_log)(void);
};

static inline int gdrhook_preload_open(struct gdrhook_preload *g)
{
	memset(g, 0, sizeof(*g));
	*(void **)&g->api_version = dlsym(RTLD_DEFAULT, "gdrhook_api_version");
	if (!g->api_version)
		return -ENOENT;
	if (g->api_version() < GDRHOOK_API_VERSION)
		return -EPROTO;
	*(void **)&g->lookup = dlsym(RTLD_DEFAULT, "gdrhook_lookup");
	*(void **)&g->trusted = dlsym(RTLD_DEFAULT, "gdrhook_trusted");
	*(void **)&g->subscribe = dlsym(RTLD_DEFAULT, "gdrhook_subscribe");
	*(void **)&g->unsubscribe = dlsym(RTLD_DEFAULT, "gdrhook_unsubscribe");
	*(void **)&g->get_stats = dlsym(RTLD_DEFAULT, "gdrhook_get_stats");
	*(void **)&g->flush_log = dlsym(RTLD_DEFAULT, "gdrhook_flush_log");
	if (!g->lookup || !g->trusted || !g->subscribe || !g->unsubscribe ||
	    !g->get_stats || !g->flush_log)
		return -ENOENT;
	return 0;
}

#endif
