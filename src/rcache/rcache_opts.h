/* SPDX-License-Identifier: MIT */
/* The registration cache's options (rcache_opts.c). */
#ifndef GH_RCACHE_OPTS_H
#define GH_RCACHE_OPTS_H

#include <stdint.h>

enum gh_cfg_exposure {		/* by the words of rcache_opts.c */
	GH_CFG_EXPOSURE_EXACT,
	GH_CFG_EXPOSURE_ALLOCATION,
};

struct gh_rcache_cfg {
	uint64_t cache_max_size;	/* GDRHOOK_CACHE_MAX_SIZE (rcache_reg.c) */
	uint64_t cache_max_count;	/* GDRHOOK_CACHE_MAX_COUNT */
	int remote_exposure;		/* GDRHOOK_REMOTE_EXPOSURE, enum gh_cfg_exposure */
};
extern struct gh_rcache_cfg gh_rcache_cfg;	/* read-only after init */

#endif
