/* SPDX-License-Identifier: MIT */
/*
 * Cached registrations that are not exactly one allocation (src/
 * rcache_span.c): a span of adjacent VMM mappings, or the part of a large
 * allocation that the BAR1 budget lets the cache pin.  The cache
 * (rcache_api.h) keys them like an allocation generation, by a span key.
 */
#ifndef GH_RCACHE_SPAN_H
#define GH_RCACHE_SPAN_H

#include <stdint.h>

#include "pin/pin.h"

struct ibv_pd;
struct ibv_mr;

/*
 * The registration path (src/hooks/verbs.c): register [addr, addr + len) of
 * tracked memory through the cache.  r is the registry's answer for addr;
 * straddle says it was -ERANGE (the range runs past r).  Picks what to pin
 * (the allocation whole, its registered part, or a span of mappings: BAR1
 * budget, src/pin/bar.c), registers through gh_rcache_reg, and after a miss
 * sets SYNC_MEMOPS (src/pin/syncmemops.c).  Returns like gh_rcache_reg;
 * -ENOTSUP when the range is not a span the cache serves.
 */
int gh_rcspan_reg(const struct gh_range *r, int straddle, struct ibv_pd *pd,
		  uint64_t addr, uint64_t len, unsigned int access,
		  struct ibv_mr **mr_p, int *hit_p);

#endif
