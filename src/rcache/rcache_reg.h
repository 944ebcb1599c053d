/* SPDX-License-Identifier: MIT */
/*
 * What the registration path (rcache_reg.c) offers the other files of
 * the cache: the aliases it hands out (rcache_wrap.c) and eviction.
 */
#ifndef GH_RCACHE_REG_H
#define GH_RCACHE_REG_H

#include <stdint.h>

#include "rcache_state.h"

/* An alias of entry e (its reference passes to the alias), or NULL. */
struct ibv_mr *gh_rc_alias_make(struct rc_state *rc, struct rc_entry *e,
				struct ibv_pd *pd, uint64_t addr, uint64_t len,
				unsigned int access);
/* The entry (index + 1) live alias mr holds, or 0. */
uint32_t gh_rc_alias_ent(struct rc_state *rc, const struct ibv_mr *mr);

/* Unpin one allocation state with a pin and no registration, not skip:
 * 1 if done (the purge, rcache_drop.c).  With the cache lock held. */
int gh_rc_evict_idle_pin(struct rc_state *rc, const struct rc_ga *skip);

#endif
