// SPDX-License-Identifier: MIT
/*
 * The GDRHOOK_* options of the registration cache: its limits and what
 * an rkey of cached memory reaches.  rcache_start.c sets the cache up
 * from them and hands the exposure to the pin layer's choice
 * (gh_pin_for_nic), which must not read an option of a layer above it.
 */
#include "base/base.h"
#include "rcache_opts.h"

struct gh_rcache_cfg gh_rcache_cfg;

static const char *const exposure_words[] = {
	[GH_CFG_EXPOSURE_EXACT] = "exact",
	[GH_CFG_EXPOSURE_ALLOCATION] = "allocation",
	NULL
};

#define CFG struct gh_rcache_cfg
static const struct gh_opt rows[] = {
	GH_OPT(120, "CACHE_MAX_SIZE", "0", GH_OPT_SIZE_INF, CFG, cache_max_size,
	       "Most bytes the registration cache keeps pinned (suffixes k, m, g; `0` or `inf`: no limit). Idle registrations are evicted, least recently used first."),
	GH_OPT(130, "CACHE_MAX_COUNT", "0", GH_OPT_SIZE_INF, CFG, cache_max_count,
	       "Most registrations the cache keeps (`0` or `inf`: its capacity, 262144). Idle ones are evicted, least recently used first."),
	GH_OPT_WORDS(140, "REMOTE_EXPOSURE", "exact", CFG, remote_exposure,
	       "What an rkey of cached GPU memory reaches. `exact`: exactly the range the program registered, until its last MR on that range is deregistered (dereg and `ibv_rereg_mr` act as natively; pins stay cached, so a new registration costs only the NIC's part). `allocation`: the whole allocation, until it is freed or evicted, even after `ibv_dereg_mr` (every later registration inside it is a hit).",
		     exposure_words),
};
GH_OPT_TABLE(rows, gh_rcache_cfg);
