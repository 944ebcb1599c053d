/* SPDX-License-Identifier: MIT */
/*
 * What the registration path (rcache_reg.c) offers the other files of
 * the cache; with the cache lock held.
 */
#ifndef GH_RCACHE_REG_H
#define GH_RCACHE_REG_H

#include <stdint.h>

#include "rcache_state.h"

/* Unpin one allocation state with a pin and no registration, not skip:
 * 1 if done (the purge, rcache_drop.c). */
int gh_rc_evict_idle_pin(struct rc_state *rc, const struct rc_ga *skip);

#endif
