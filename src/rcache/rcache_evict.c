// SPDX-License-Identifier: MIT
/*
 * Eviction: the size and count limits (GDRHOOK_CACHE_MAX_SIZE, _COUNT)
 * and the retry of a pin or registration that ran out of memory, NIC
 * resources or fds: idle cached registrations go by clock (second
 * chance), idle pins (exact exposure keeps them) first.  All with the
 * cache lock held.
 */
#include <errno.h>

#include "pin/pin.h"
#include "rcache_state.h"
#include "rcache_evict.h"

/* Evict one idle cached entry (clock); not from the allocation-state skip.  1 if done. */
static int evict_one(struct rc_state *rc, const struct rc_ga *skip,
		     int ignore_clock)
{
	uint32_t hi = rc->n_used;

	RC_LOCKED(rc);

	for (uint64_t n = 0; hi && n < 2ULL * hi + 1; n++) {
		struct rc_entry *e;
		struct rc_ga *r;
		uint64_t w;

		if (rc->hand >= rc->n_used)
			rc->hand = 0;
		e = &rc->ent[rc->used[rc->hand++]];
		if (LD(&e->type) != E_CACHED)
			continue;
		r = ga_of(rc, e);
		if (r == skip && skip)
			continue;
		w = LD_ACQ(&e->word);
		if (w & (W_DEAD | W_REFS))
			continue;
		if ((w & W_CLOCK) && !ignore_clock) {
			__atomic_compare_exchange_n(&e->word, &w, w & ~W_CLOCK,
						    0, __ATOMIC_ACQ_REL,
						    __ATOMIC_ACQUIRE);
			continue;
		}
		if (!gh_rc_ent_kill_idle(e, w >> W_VER_SHIFT))
			continue;
		gh_rc_ent_finish(rc, e, 0, 0);
		gh_rc_ga_free_if_unused(rc, r);
		CTR(rc, evictions, 1);
		return 1;
	}
	return 0;
}

/*
 * Unpin one allocation state that holds a pin but no registration (exact exposure
 * keeps pins after the last MR on them is gone); not skip.  1 if done.
 */
int gh_rc_evict_idle_pin(struct rc_state *rc, const struct rc_ga *skip)
{
	uint32_t hi = rc->ga_hi;

	RC_LOCKED(rc);

	for (uint32_t n = 0; n < hi; n++) {
		struct rc_ga *r;

		if (rc->ga_hand >= hi)
			rc->ga_hand = 0;
		r = &rc->ga[rc->ga_hand++];
		if (r == skip || !r->used || !r->pinned || r->ents || r->busy)
			continue;
		gh_rc_ga_free_if_unused(rc, r);
		CTR(rc, evictions, 1);
		return 1;
	}
	return 0;
}

static int evict_any(struct rc_state *rc, const struct rc_ga *skip,
		     int ignore_clock)
{
	RC_LOCKED(rc);

	return gh_rc_evict_idle_pin(rc, skip) ||
	       evict_one(rc, skip, ignore_clock);
}

static uint64_t pin_bytes_of(const struct rc_ga *r)
{
	uint64_t lo = r->pin.base & ~(GH_PIN_ALIGN - 1);
	uint64_t hi = (r->pin.base + r->pin.size + GH_PIN_ALIGN - 1) &
		      ~(GH_PIN_ALIGN - 1);

	return hi - lo;
}

int gh_rc_make_room(struct rc_state *rc, const struct rc_ga *r)
{
	uint64_t need = r->pinned ? 0 : pin_bytes_of(r);

	RC_LOCKED(rc);

	while (rc->n_entries + 1 > rc->max_count)
		if (!evict_one(rc, r, 0))
			return -ENOSPC;
	while (rc->max_size && rc->pinned_bytes + need > rc->max_size)
		if (!evict_any(rc, r, 0))
			return -ENOSPC;
	return 0;
}

static int evict_all_idle(struct rc_state *rc, const struct rc_ga *skip)
{
	int n = 0;

	RC_LOCKED(rc);

	while (evict_any(rc, skip, 1))
		n++;
	return n;
}

/* Out of memory, NIC resources, or fds (each dmabuf pin holds one). */
static int retryable(int err)
{
	return err == -ENOMEM || err == -ENOSPC || err == -EMFILE ||
	       err == -ENFILE;
}

int gh_rc_do_pin(struct rc_state *rc, struct rc_ga *r)
{
	uint64_t t0 = gh_evlog_clock();
	int err;

	RC_LOCKED(rc);
	err = rc->ops->pin(&r->pin);
	if (retryable(err) && evict_all_idle(rc, r)) {
		CTR(rc, retries, 1);
		t0 = gh_evlog_clock();
		err = rc->ops->pin(&r->pin);
	}
	gh_rc_ev_pin(rc, GH_EV_PIN, r, err, t0);
	if (err)
		return err;
	r->pinned = 1;
	ADD_LOCKED(rc, &rc->pinned_bytes, r->pin.pin_size);
	CTR_LOCKED(rc, pins, 1);
	return 0;
}

int gh_rc_do_reg(struct rc_state *rc, struct rc_ga *r, struct ibv_pd *pd,
		 uint64_t addr, uint64_t len, unsigned int access,
		 struct ibv_mr **mr_p)
{
	int err;

	RC_LOCKED(rc);
	err = rc->ops->reg(&r->pin, pd, addr, len, access, mr_p);
	if (retryable(err) && evict_all_idle(rc, r)) {
		CTR(rc, retries, 1);
		err = rc->ops->reg(&r->pin, pd, addr, len, access, mr_p);
	}
	return err;
}
