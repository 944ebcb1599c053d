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
#include "rcache_index.h"
#include "rcache_evrec.h"
#include "rcache_evict.h"

/* Evict one idle cached entry (clock); not from the allocation-state skip.  1 if done. */
static int evict_one(const struct rc_ga *skip, int ignore_clock)
{
	uint32_t hi = gh_rc.n_used;

	RC_LOCKED();

	for (uint64_t n = 0; hi && n < 2ULL * hi + 1; n++) {
		struct rc_entry *e;
		struct rc_ga *r;
		uint64_t w;

		if (gh_rc.hand >= gh_rc.n_used)
			gh_rc.hand = 0;
		e = &gh_rc.ent[gh_rc.used[gh_rc.hand++]];
		if (LD(&e->type) != E_CACHED)
			continue;
		r = ga_of(e);
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
		gh_rc_ent_finish(e, 0, 0);
		gh_rc_ga_free_if_unused(r);
		CTR(evictions, 1);
		return 1;
	}
	return 0;
}

/*
 * Unpin one allocation state that holds a pin but no registration (exact exposure
 * keeps pins after the last MR on them is gone); not skip.  1 if done.
 */
int gh_rc_evict_idle_pin(const struct rc_ga *skip)
{
	uint32_t hi = gh_rc.ga_hi;

	RC_LOCKED();

	for (uint32_t n = 0; n < hi; n++) {
		struct rc_ga *r;

		if (gh_rc.ga_hand >= hi)
			gh_rc.ga_hand = 0;
		r = &gh_rc.ga[gh_rc.ga_hand++];
		if (r == skip || !r->used || !r->pinned || r->ents || r->busy)
			continue;
		gh_rc_ga_free_if_unused(r);
		CTR(evictions, 1);
		return 1;
	}
	return 0;
}

static int evict_any(const struct rc_ga *skip, int ignore_clock)
{
	RC_LOCKED();

	return gh_rc_evict_idle_pin(skip) || evict_one(skip, ignore_clock);
}

static uint64_t pin_bytes_of(const struct rc_ga *r)
{
	uint64_t lo = r->pin.base & ~(GH_PIN_ALIGN - 1);
	uint64_t hi = (r->pin.base + r->pin.size + GH_PIN_ALIGN - 1) &
		      ~(GH_PIN_ALIGN - 1);

	return hi - lo;
}

int gh_rc_make_room(const struct rc_ga *r)
{
	uint64_t need = r->pinned ? 0 : pin_bytes_of(r);

	RC_LOCKED();

	while (gh_rc.n_entries + 1 > gh_rc.max_count)
		if (!evict_one(r, 0))
			return -ENOSPC;
	while (gh_rc.max_size && gh_rc.pinned_bytes + need > gh_rc.max_size)
		if (!evict_any(r, 0))
			return -ENOSPC;
	return 0;
}

static int evict_all_idle(const struct rc_ga *skip)
{
	int n = 0;

	RC_LOCKED();

	while (evict_any(skip, 1))
		n++;
	return n;
}

/* Out of memory, NIC resources, or fds (each dmabuf pin holds one). */
static int retryable(int err)
{
	return err == -ENOMEM || err == -ENOSPC || err == -EMFILE ||
	       err == -ENFILE;
}

int gh_rc_do_pin(struct rc_ga *r)
{
	uint64_t t0 = gh_evlog_clock();
	int err;

	RC_LOCKED();
	err = gh_rc.ops->pin(&r->pin);
	if (retryable(err) && evict_all_idle(r)) {
		CTR(retries, 1);
		t0 = gh_evlog_clock();
		err = gh_rc.ops->pin(&r->pin);
	}
	gh_rc_ev_pin(GH_EV_PIN, r, err, t0);
	if (err)
		return err;
	r->pinned = 1;
	ADD_LOCKED(&gh_rc.pinned_bytes, r->pin.pin_size);
	CTR_LOCKED(pins, 1);
	return 0;
}

int gh_rc_do_reg(struct rc_ga *r, struct ibv_pd *pd, uint64_t addr,
		 uint64_t len, unsigned int access, struct ibv_mr **mr_p)
{
	int err;

	RC_LOCKED();
	err = gh_rc.ops->reg(&r->pin, pd, addr, len, access, mr_p);
	if (retryable(err) && evict_all_idle(r)) {
		CTR(retries, 1);
		err = gh_rc.ops->reg(&r->pin, pd, addr, len, access, mr_p);
	}
	return err;
}
