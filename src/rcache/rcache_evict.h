/* SPDX-License-Identifier: MIT */
/*
 * Eviction and the retrying pin and registration (rcache_evict.c), for
 * the miss path and the purge; with the cache lock held.
 */
#ifndef GH_RCACHE_EVICT_H
#define GH_RCACHE_EVICT_H

#include <stdint.h>

#include "pin/pin.h"
#include "rcache_state.h"

/* Room for one more entry (and r's pin) within the limits: 0, -ENOSPC. */
int gh_rc_make_room(struct rc_state *rc, const struct rc_ga *r);
/* Unpin one allocation state with a pin and no registration, not skip:
 * 1 if done. */
int gh_rc_evict_idle_pin(struct rc_state *rc, const struct rc_ga *skip);
/* Pin r, register in pd: evicting what is idle and retrying once when
 * out of memory, NIC resources or fds. */
int gh_rc_do_pin(struct rc_state *rc, struct rc_ga *r);
int gh_rc_do_reg(struct rc_state *rc, struct rc_ga *r, struct ibv_pd *pd,
		 uint64_t addr, uint64_t len, unsigned int access,
		 struct ibv_mr **mr_p);

#endif
