// SPDX-License-Identifier: MIT
/*
 * Drops: what ends registrations by the PD or device they are in
 * (ibv_dealloc_pd, ibv_close_device) and the purge when the registry
 * becomes untrusted.  (The free of an allocation, and a pin the backend
 * reports revoked, end everything made on one allocation state: the
 * core does that, rcache_core.c.)
 */
#include <pthread.h>
#include <infiniband/verbs.h>

#include "pin/pin.h"
#include "rcache_api.h"
#include "rcache_state.h"
#include "rcache_reg.h"

/* Does pd have live windows (the program's MRs over them)? */
static int rc_pd_has_windows(struct rc_state *rc, uint64_t pd)
{
	int n = 0;

	if (!LD_ACQ(&rc->ready))
		return 0;
	gh_mutex_lock(&rc->lock);
	for (uint32_t i = 0; i < rc->n_used && !n; i++) {
		struct rc_entry *e = &rc->ent[rc->used[i]];

		n = LD(&e->type) == E_WIN && e->pd == pd &&
		    !(LD(&e->word) & W_DEAD);
	}
	gh_mutex_unlock(&rc->lock);
	return n;
}

static void drop_matching(struct rc_state *rc, uint64_t pd, uint64_t ctx,
			  int held_too)
{
	int was;

	if (!LD_ACQ(&rc->ready))
		return;
	was = gh_guard_enter();
	gh_mutex_lock(&rc->lock);
	/*
	 * Backwards over the dense list: what a reclaim moves into an
	 * earlier place was visited already (seen twice: harmless).
	 * Windows in a first pass: a parent with a bound window cannot go.
	 */
	for (int pass = 0; pass < 2; pass++)
	for (uint32_t i = rc->n_used; i-- > 0;) {
		struct rc_entry *e;
		uint32_t type;
		struct rc_ga *r;
		int64_t refs;

		if (i >= rc->n_used) {
			i = rc->n_used;
			continue;
		}
		e = &rc->ent[rc->used[i]];
		type = LD(&e->type);
		if (type == E_FREE || (LD(&e->word) & W_DEAD))
			continue;
		if ((type == E_WIN) != !pass)
			continue;
		if ((pd && e->pd != pd) || (ctx && e->ctx != ctx))
			continue;
		if (!held_too && type == E_WRAP)
			continue;
		r = ga_of(rc, e);
		if (held_too) {
			refs = gh_rc_ent_kill(e);
			if (refs < 0)
				continue;
		} else {
			if (!gh_rc_ent_kill_idle(e, 0))
				continue;
			refs = 0;
		}
		gh_rc_ent_finish(rc, e, refs, 0);
		gh_rc_ga_free_if_unused(rc, r);
	}
	gh_mutex_unlock(&rc->lock);
	gh_guard_leave(was);
}

void gh_rcache_drop_pd(struct ibv_pd *pd)
{
	struct rc_state *rc = gh_rc_instance();

	if (pd)
		drop_matching(rc, (uint64_t)(uintptr_t)pd, 0, 0);
	/* our queue pair and idle windows must not make it fail; windows
	 * still bound mean MRs the program holds: it fails natively too */
	if (pd && !rc_pd_has_windows(rc, (uint64_t)(uintptr_t)pd))
		gh_mw_drop_pd(pd);
}

void gh_rcache_drop_context(struct ibv_context *ctx)
{
	if (!ctx)
		return;
	drop_matching(gh_rc_instance(), 0, (uint64_t)(uintptr_t)ctx, 1);
	gh_mw_drop_context(ctx);
}

void gh_rcache_purge(int stop)
{
	struct rc_state *rc = gh_rc_instance();
	int was;

	if (!LD_ACQ(&rc->ready))
		return;
	if (stop)
		ST(&rc->stopped, 1);
	drop_matching(rc, 0, 0, 0);
	/* and the pins exact exposure keeps after their last MR */
	was = gh_guard_enter();
	gh_mutex_lock(&rc->lock);
	while (gh_rc_evict_idle_pin(rc, NULL))
		;
	gh_mutex_unlock(&rc->lock);
	gh_guard_leave(was);
}
