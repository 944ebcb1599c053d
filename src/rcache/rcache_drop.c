// SPDX-License-Identifier: MIT
/*
 * What ends registrations from outside the registration path: the free
 * of an allocation (gh_rcache_invalidate, before the real free), a pin
 * the backend reports revoked, ibv_dealloc_pd and ibv_close_device, and
 * the purge when the registry becomes untrusted.
 */
#include <pthread.h>
#include <infiniband/verbs.h>

#include "pin/pin.h"
#include "rcache_core.h"
#include "rcache_state.h"
#include "rcache_index.h"
#include "rcache_evict.h"
#include "rcache_spankeys.h"

void gh_rcache_invalidate(const struct gh_range *g)
{
	struct rc_ga *r;
	uint64_t key;
	int was;

	if (!LD_ACQ(&gh_rc.ready) || LD(&gh_rc.forked))
		return;
	/*
	 * The registry removal is done; an RMW (not a plain load) reads the
	 * latest count: either it sees a miss path's announcement, or that
	 * miss path's increment reads our write and its registry re-check
	 * then sees the removal.
	 */
	if (!__atomic_fetch_add(&gh_rc.ga_b[hash_ga(g->gen)].cnt, 0,
				__ATOMIC_ACQ_REL) && !gh_rcspan_pending(g->gen))
		return;
	was = gh_guard_enter();
	gh_mutex_lock(&gh_rc.lock);
	r = gh_rc_ga_find(g->gen);
	if (r)
		gh_rc_ga_kill_all(r, 1);
	/*
	 * Spans that include this mapping (src/rcache/rcache_span.c): a
	 * claimed one counts on the generation, and claims take the cache
	 * lock (held), so a count of 0 means none: no table scan.
	 */
	for (uint32_t c = 0; gh_rcspan_pending(g->gen) &&
	     (key = gh_rcspan_next(g->gen, &c)) != 0;) {
		r = gh_rc_ga_find(key);
		if (r)
			gh_rc_ga_kill_all(r, 1);
	}
	gh_mutex_unlock(&gh_rc.lock);
	gh_guard_leave(was);
}

int gh_rcache_revoke(uint64_t gen, uint64_t cookie)
{
	struct rc_ga *r;
	int was, done = 0;

	if (!LD_ACQ(&gh_rc.ready))
		return 0;
	was = gh_guard_enter();
	gh_mutex_lock(&gh_rc.lock);
	r = gh_rc_ga_find(gen);
	if (r && r->pinned && r->pin.cookie == cookie) {
		gh_rc_ga_drop(r);
		CTR(pins_revoked, 1);
		done = 1;
	}
	gh_mutex_unlock(&gh_rc.lock);
	gh_guard_leave(was);
	return done;
}

/* Does pd have live windows (the program's MRs over them)? */
static int rc_pd_has_windows(uint64_t pd)
{
	int n = 0;

	if (!LD_ACQ(&gh_rc.ready))
		return 0;
	gh_mutex_lock(&gh_rc.lock);
	for (uint32_t i = 0; i < gh_rc.n_used && !n; i++) {
		struct rc_entry *e = &gh_rc.ent[gh_rc.used[i]];

		n = LD(&e->type) == E_WIN && e->pd == pd &&
		    !(LD(&e->word) & W_DEAD);
	}
	gh_mutex_unlock(&gh_rc.lock);
	return n;
}

static void drop_matching(uint64_t pd, uint64_t ctx, int held_too)
{
	int was;

	if (!LD_ACQ(&gh_rc.ready))
		return;
	was = gh_guard_enter();
	gh_mutex_lock(&gh_rc.lock);
	/*
	 * Backwards over the dense list: what a reclaim moves into an
	 * earlier place was visited already (seen twice: harmless).
	 * Windows in a first pass: a parent with a bound window cannot go.
	 */
	for (int pass = 0; pass < 2; pass++)
	for (uint32_t i = gh_rc.n_used; i-- > 0;) {
		struct rc_entry *e;
		uint32_t type;
		struct rc_ga *r;
		int64_t refs;

		if (i >= gh_rc.n_used) {
			i = gh_rc.n_used;
			continue;
		}
		e = &gh_rc.ent[gh_rc.used[i]];
		type = LD(&e->type);
		if (type == E_FREE || (LD(&e->word) & W_DEAD))
			continue;
		if ((type == E_WIN) != !pass)
			continue;
		if ((pd && e->pd != pd) || (ctx && e->ctx != ctx))
			continue;
		if (!held_too && type == E_WRAP)
			continue;
		r = ga_of(e);
		if (held_too) {
			refs = gh_rc_ent_kill(e);
			if (refs < 0)
				continue;
		} else {
			if (!gh_rc_ent_kill_idle(e, 0))
				continue;
			refs = 0;
		}
		gh_rc_ent_finish(e, refs, 0);
		gh_rc_ga_free_if_unused(r);
	}
	gh_mutex_unlock(&gh_rc.lock);
	gh_guard_leave(was);
}

void gh_rcache_drop_pd(struct ibv_pd *pd)
{
	if (pd)
		drop_matching((uint64_t)(uintptr_t)pd, 0, 0);
	/* our queue pair and idle windows must not make it fail; windows
	 * still bound mean MRs the program holds: it fails natively too */
	if (pd && !rc_pd_has_windows((uint64_t)(uintptr_t)pd))
		gh_mw_drop_pd(pd);
}

void gh_rcache_drop_context(struct ibv_context *ctx)
{
	if (!ctx)
		return;
	drop_matching(0, (uint64_t)(uintptr_t)ctx, 1);
	gh_mw_drop_context(ctx);
}

void gh_rcache_purge(int stop)
{
	int was;

	if (!LD_ACQ(&gh_rc.ready))
		return;
	if (stop)
		ST(&gh_rc.stopped, 1);
	drop_matching(0, 0, 0);
	/* and the pins exact exposure keeps after their last MR */
	was = gh_guard_enter();
	gh_mutex_lock(&gh_rc.lock);
	while (gh_rc_evict_idle_pin(NULL))
		;
	gh_mutex_unlock(&gh_rc.lock);
	gh_guard_leave(was);
}
