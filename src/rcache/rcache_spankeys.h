/* SPDX-License-Identifier: MIT */
/* The span key table (rcache_spankeys.c), below the cache core: which
 * mappings a cached span covers, by span key. */
#ifndef GH_RCACHE_SPANKEYS_H
#define GH_RCACHE_SPANKEYS_H

#include <stdint.h>

#include "pin/pin.h"

#define GH_SPAN_MAX	128	/* mappings per span (2.5 GiB of 20 MiB) */

/* The mappings a registration runs through, in order. */
struct gh_span_walk {
	uint32_t n;
	uint64_t gen[GH_SPAN_MAX], base[GH_SPAN_MAX];
	struct gh_range first;
	uint64_t end;
};

/*
 * For the policy: a span record of w's mappings, or one that contains
 * them, covering [*lo_p, *hi_p) (state new until the cache claims it);
 * its key (0: table full), its extent in *lo_p, *hi_p.
 * gh_rcspan_drop_unclaimed: the registration failed before the cache
 * claimed it.
 */
uint64_t gh_rcspan_get(const struct gh_span_walk *w, uint64_t *lo_p,
		       uint64_t *hi_p);
void gh_rcspan_drop_unclaimed(uint64_t key);

/* For the cache core: claim, release and next with the lock of the cache
 * rc held (asserted on rc in debug builds). */
struct rc_state;
static inline int gh_rcspan_is_key(uint64_t key)
{
	return (key >> 62) == 1;
}
/* A record for span key is being made: announce it on each mapping's
 * generation, then check they are all still live (0, or -ESTALE). */
int gh_rcspan_claim(struct rc_state *rc, uint64_t key);
/* The record of span key is gone: withdraw the announcement, free it. */
void gh_rcspan_release(struct rc_state *rc, uint64_t key);
/* Free path, after the registry removal: may a span include gen? */
int gh_rcspan_pending(uint64_t gen);
/* Span keys that include gen, one per call (*cursor starts at 0); 0 at
 * the end. */
uint64_t gh_rcspan_next(struct rc_state *rc, uint64_t gen,
			uint32_t *cursor);

#endif
