// SPDX-License-Identifier: MIT
/*
 * Spans, the policy: what the cache pins and registers for a
 * registration that is not inside one allocation (a run of adjacent VMM
 * mappings) or that the BAR1 budget cuts (src/pin/bar.c); above the cache
 * core (gh_rcache_reg), over the key table below it
 * (rcache_spankeys.c, whose top comment has the rules).
 */
#include <errno.h>
#include <string.h>
#include <infiniband/verbs.h>

#include "pin/pin.h"
#include "rcache_api.h"
#include "rcache_span.h"
#include "rcache_spankeys.h"

#define SP_MAX		GH_SPAN_MAX

/*
 * The mappings [addr, addr + len) runs through, from the registry: each
 * must be a plain (not pool) VMM mapping of the same device, starting
 * where the previous one ends.  0, or -ENOTSUP.
 */
static int walk_mappings(const struct gh_range *r, uint64_t addr,
			 uint64_t len, struct gh_span_walk *w)
{
	struct gh_range cur = *r;

	w->n = 0;
	w->first = *r;
	for (;;) {
		if (cur.kind != GDRHOOK_KIND_VMM ||
		    (cur.flags & GH_RANGE_VOLATILE) || cur.dev != r->dev ||
		    w->n == SP_MAX)
			return -ENOTSUP;
		w->gen[w->n] = cur.gen;
		w->base[w->n] = cur.base;
		w->n++;
		w->end = cur.base + cur.size;
		if (w->end >= addr + len)
			return 0;
		if (gh_registry_lookup(w->end, 1, &cur) || cur.base != w->end)
			return -ENOTSUP;
	}
}

static void sync_memops(const struct gh_span_walk *w,
			const struct gh_range *r)
{
	struct gh_range m = *r;

	for (uint32_t i = 0; i < w->n; i++) {
		m.base = w->base[i];
		m.gen = w->gen[i];
		gh_syncmemops_ensure(&m);
	}
}

int gh_rcspan_reg(const struct gh_range *r, int straddle, struct ibv_pd *pd,
		  uint64_t addr, uint64_t len, unsigned int access,
		  struct ibv_mr **mr_p, int *hit_p)
{
	struct gh_span_walk w;
	struct gh_range g;
	uint64_t lo, hi, key;
	int err;

	if (!straddle) {
		w.n = 1;
		w.gen[0] = r->gen;
		w.base[0] = r->base;
		w.end = r->base + r->size;
	} else if (walk_mappings(r, addr, len, &w)) {
		return -ENOTSUP;
	}
	if (gh_bar_extent(r->dev, r->base, w.end - r->base, addr, len, &lo,
			  &hi) && !straddle) {
		/* The allocation whole: the cache's own unit.  Memory the
		 * cache does not pin (pool memory, odd access flags) is
		 * registered by the program's own call next: it gets
		 * SYNC_MEMOPS too. */
		err = gh_rcache_reg(r, pd, addr, len, access, mr_p, hit_p);
		if ((!err && !*hit_p) || err == -ENOTSUP)
			gh_syncmemops_ensure(r);
		return err;
	}
	if (straddle) {
		/* Only the mappings the pinned extent reaches. */
		uint32_t a = 0, b = w.n;

		while (a + 1 < w.n && w.base[a + 1] <= lo)
			a++;
		while (b > a + 1 && w.base[b - 1] >= hi)
			b--;
		memmove(w.gen, w.gen + a, (b - a) * sizeof(uint64_t));
		memmove(w.base, w.base + a, (b - a) * sizeof(uint64_t));
		w.n = b - a;
	}
	key = gh_rcspan_get(&w, &lo, &hi);
	if (!key)
		return -ENOSPC;
	g = *r;
	g.base = lo;
	g.size = hi - lo;
	g.gen = key;
	err = gh_rcache_reg(&g, pd, addr, len, access, mr_p, hit_p);
	gh_rcspan_drop_unclaimed(key);
	if (!err && !*hit_p)
		sync_memops(&w, r);
	return err;
}
