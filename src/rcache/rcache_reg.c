// SPDX-License-Identifier: MIT
/*
 * The registration path (gh_rcache_reg), hit and miss: the alias MRs it
 * hands out, the lock-free hit, the miss under the cache lock (pin, NIC
 * registration, access upgrade, exact exposure over a memory window) with
 * the eviction that makes room for it; and what the program does with
 * its aliases afterwards.  A miss begins as a hit that found nothing and
 * ends as a hit does, with an alias, so all of it is here; what a miss
 * needs of the object besides (its index, entries, records) is the
 * core's (rcache_core.c).
 */
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <infiniband/verbs.h>

#include "pin/pin.h"
#include "rcache_api.h"
#include "rcache_state.h"
#include "rcache_reg.h"

/* -------------------------------------------------- the program's MRs */

/*
 * Aliases: the private MR objects the program gets (from an mmap'ed pool,
 * a lock-free stack with a few slots per thread), the reference each
 * holds on its entry, the per-thread shards that count hits and aliases
 * (struct rc_shard, rcache_state.h), and what the program does with them
 * (ibv_dereg_mr, ibv_rereg_mr, queries: at the end of this file).
 */

/*
 * The calling thread's shard (struct rc_shard, rcache_state.h) of the one
 * instance.  A hit reads these: initial-exec (the build's flag), no
 * __tls_get_addr.
 */
static __thread struct rc_shard *my_shard;
static __thread int my_shared;

static inline struct rc_shard *shard_mine(struct rc_state *rc)
{
	struct rc_shard *s = my_shard;

	if (GH_UNLIKELY(!s)) {
		uint32_t i = __atomic_fetch_add(&rc->shard_next, 1,
						__ATOMIC_RELAXED);

		my_shared = i >= RC_SHARDS - 1;
		s = &rc->shards[my_shared ? RC_SHARDS - 1 : i];
		my_shard = s;
	}
	return s;
}

static inline void shard_add(struct rc_state *rc, size_t off, uint64_t n)
{
	struct rc_shard *s = shard_mine(rc);
	uint64_t *p = (uint64_t *)((char *)s + off);

	if (GH_UNLIKELY(my_shared))
		__atomic_add_fetch(p, n, __ATOMIC_RELAXED);
	else
		__atomic_store_n(p, __atomic_load_n(p, __ATOMIC_RELAXED) + n,
				 __ATOMIC_RELAXED);
}

#define SHARD(rc, f, n) \
	shard_add((rc), offsetof(struct rc_shard, f), (uint64_t)(n))

static struct rc_alias *alias_get(struct rc_state *rc)
{
	struct rc_shard *s = shard_mine(rc);
	uint64_t top;
	uint32_t i;

	if (!my_shared && s->mag_n)
		return &rc->alias[s->mag[--s->mag_n] - 1];
	top = LD_ACQ(&rc->alias_top);

	for (;;) {
		uint64_t nt;

		i = (uint32_t)top;
		if (!i)
			break;
		nt = (((top >> 32) + 1) << 32) | LD(&rc->alias[i - 1].fnext);
		if (__atomic_compare_exchange_n(&rc->alias_top, &top, nt, 0,
						__ATOMIC_ACQ_REL,
						__ATOMIC_ACQUIRE))
			return &rc->alias[i - 1];
	}
	i = __atomic_fetch_add(&rc->alias_hi, 1, __ATOMIC_RELAXED);
	if (i >= RC_ALIAS_CAP) {
		__atomic_fetch_sub(&rc->alias_hi, 1, __ATOMIC_RELAXED);
		return NULL;
	}
	return &rc->alias[i];
}

static void alias_put(struct rc_state *rc, struct rc_alias *a)
{
	uint32_t me = (uint32_t)(a - rc->alias) + 1;
	struct rc_shard *s = shard_mine(rc);
	uint64_t top, nt;

	if (!my_shared && s->mag_n < RC_MAG) {
		s->mag[s->mag_n++] = me;
		return;
	}
	top = LD(&rc->alias_top);
	do {
		ST(&a->fnext, (uint32_t)top);
		nt = (((top >> 32) + 1) << 32) | me;
	} while (!__atomic_compare_exchange_n(&rc->alias_top, &top, nt, 0,
					      __ATOMIC_RELEASE,
					      __ATOMIC_RELAXED));
}

/* An alias of entry e (its reference passes to the alias), or NULL. */
struct ibv_mr *gh_rc_alias_make(struct rc_state *rc, struct rc_entry *e,
				struct ibv_pd *pd, uint64_t addr, uint64_t len,
				unsigned int access)
{
	struct rc_alias *a = alias_get(rc);

	if (!a)
		return NULL;
	a->mr.context = pd ? pd->context : NULL;
	a->mr.pd = pd;
	a->mr.addr = (void *)(uintptr_t)addr;
	a->mr.length = len;
	a->mr.handle = e->handle;
	a->mr.lkey = e->lkey;
	a->mr.rkey = e->rkey;
	ST(&a->ent, ent_idx(rc, e));
	a->access = access;
	ST_REL(&a->state, 1);
	SHARD(rc, aliases, 1);
	return &a->mr;
}

static int is_alias(const struct rc_state *rc, const struct ibv_mr *mr)
{
	uintptr_t p = (uintptr_t)mr, lo = (uintptr_t)rc->alias;

	return rc->alias && p >= lo &&
	       p < lo + sizeof(struct rc_alias) * RC_ALIAS_CAP &&
	       !((p - lo) % sizeof(struct rc_alias));
}

static struct rc_alias *alias_of(const struct rc_state *rc,
				 const struct ibv_mr *mr)
{
	struct rc_alias *a;

	if (!is_alias(rc, mr))
		return NULL;
	a = (struct rc_alias *)(uintptr_t)mr;
	return LD_ACQ(&a->state) == 1 ? a : NULL;
}

uint32_t gh_rc_alias_ent(struct rc_state *rc, const struct ibv_mr *mr)
{
	struct rc_alias *a = alias_of(rc, mr);

	return a ? LD(&a->ent) : 0;
}

/* Drop a reference (an alias went away). */
static void put_ref(struct rc_state *rc, struct rc_entry *e)
{
	uint64_t w = __atomic_sub_fetch(&e->word, 1, __ATOMIC_ACQ_REL);
	uint32_t type;
	int was;

	if (w & W_REFS)
		return;
	if (w & W_DEAD) {
		/* Revoked (or retired and killed): we were the last holder. */
		gh_mutex_lock(&rc->lock);
		gh_rc_ent_reclaim(rc, e);
		gh_mutex_unlock(&rc->lock);
		return;
	}
	type = LD(&e->type);
	if (type == E_CACHED && !LD(&rc->stopped))
		return;		/* lazy: stays registered until free/eviction */
	was = gh_guard_enter();
	gh_mutex_lock(&rc->lock);
	if (gh_rc_ent_kill_idle(e, w >> W_VER_SHIFT)) {
		struct rc_ga *r = ga_of(rc, e);

		gh_rc_ent_finish(rc, e, 0, 0);
		/* exact: the NIC registration goes, the pin stays cached */
		if (type != E_EXACT || LD(&rc->stopped))
			gh_rc_ga_free_if_unused(rc, r);
	}
	gh_mutex_unlock(&rc->lock);
	gh_guard_leave(was);
}

/* ------------------------------------------------------------- the hit */

/*
 * Lock-free: find a live entry for (gen, pd) serving want; take a ref.
 * len 0: an allocation-wide entry whose access covers want; else the
 * E_EXACT entry of exactly [addr, addr + len) and exactly want.
 */
static struct rc_entry *lookup_ref(struct rc_state *rc, uint64_t base,
				   uint64_t gen, uint64_t pd, unsigned int want,
				   uint64_t addr, uint64_t len)
{
	struct rc_entry *home = &rc->ent[hash_ent(base, pd, want, addr, len)];
	uint32_t i;

	__builtin_prefetch(home);	/* in parallel with its bhead line */
	i = LD_ACQ(&home->bhead);

	for (int steps = 0; i && steps < RC_STEPS; steps++) {
		struct rc_entry *e = &rc->ent[i - 1];
		uint64_t w = LD_ACQ(&e->word);

		if (!(w & W_DEAD) && LD(&e->gen) == gen && LD(&e->pd) == pd &&
		    LD(&e->addr) == addr && LD(&e->len) == len &&
		    (len ? LD(&e->access) == want :
		     covers(LD(&e->access), want))) {
			uint32_t t = LD(&e->type);
			uint64_t ver = w >> W_VER_SHIFT;

			if ((t != E_CACHED && t != E_RETIRED && t != E_EXACT) ||
			    (rc->ops->valid &&
			     !rc->ops->valid(LD(&e->cookie))))
				goto next;
			/*
			 * Another holder's reference moving the word is no
			 * reason to look further: retry while the version
			 * (the key just checked) stands.  Giving up here made
			 * contended hits misses, and the miss path then took
			 * the entry for an access upgrade.
			 */
			while (!(w & W_DEAD) && (w & W_REFS) < W_REFS &&
			       (w >> W_VER_SHIFT) == ver) {
				if (__atomic_compare_exchange_n(
					    &e->word, &w, (w + 1) | W_CLOCK, 0,
					    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
					return e;
			}
		}
next:
		i = LD_ACQ(&e->hnext);
	}
	return NULL;
}

void gh_rcache_prefetch(const struct ibv_pd *pd, uint64_t addr, uint64_t len,
			unsigned int access)
{
	const struct rc_state *rc = gh_rc_instance();
	const struct rc_entry *home;
	int ex;

	if (!LD_ACQ(&rc->ready))
		return;
	ex = rc->exact && (access & GH_RC_ACCESS_REMOTE);
	home = &rc->ent[hash_ent(addr, (uint64_t)(uintptr_t)pd, access,
				 ex ? addr : 0, ex ? len : 0)];
	__builtin_prefetch(home);
	__builtin_prefetch((const char *)home + 64);	/* its bucket head */
}

/* ------------------------------------------------------------ eviction */

/*
 * Eviction: the size and count limits (GDRHOOK_CACHE_MAX_SIZE, _COUNT)
 * and the retry of a pin or registration that ran out of memory, NIC
 * resources or fds: idle cached registrations go by clock (second
 * chance), idle pins (exact exposure keeps them) first.  All with the
 * cache lock held.
 */

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

/* Room for one more entry (and r's pin) within the limits: 0, -ENOSPC. */
static int make_room(struct rc_state *rc, const struct rc_ga *r)
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

/* Pin r, register in pd: evicting what is idle and retrying once when
 * out of memory, NIC resources or fds. */
static int do_pin(struct rc_state *rc, struct rc_ga *r)
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

static int do_reg(struct rc_state *rc, struct rc_ga *r, struct ibv_pd *pd,
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

/* ------------------------------------------------------------ the miss */

/*
 * A miss (lock held): the allocation's state, its pin if needed, and a
 * NIC registration: of all of it (ex 0: cached, shared, an access upgrade
 * of the current one retires it) or of exactly [addr, addr + len) (ex:
 * E_EXACT, one per MR).  0 and *e_p holding one reference.
 */
static int miss_locked(struct rc_state *rc, const struct gh_range *g,
		       struct ibv_pd *pd, uint64_t addr, uint64_t len,
		       unsigned int access, int ex, struct rc_entry **e_p)
{
	uint64_t pdk = (uint64_t)(uintptr_t)pd;
	uint64_t ka = ex ? addr : 0, kl = ex ? len : 0;
	struct rc_entry *e = NULL, *old;
	struct ibv_mr *mr = NULL;
	struct rc_ga *r;
	int err;

	RC_LOCKED(rc);

	err = gh_rc_ga_get(rc, g, &r);
	if (err)
		return err;
	if (r->pinned && rc->ops->valid && !rc->ops->valid(r->pin.cookie)) {
		/* Revoked behind our back (lookup_ref skipped it): drop, redo. */
		gh_rc_ga_drop(rc, r);
		CTR(rc, pins_revoked, 1);
		err = gh_rc_ga_get(rc, g, &r);
		if (err)
			return err;
	}
	r->busy = 1;
	old = ex ? NULL : gh_rc_hash_find_cur(rc, g->base, g->gen, pdk, access);
	if (old)
		access |= old->access & RC_ACCESS_RIGHTS;
	err = make_room(rc, r);
	if (err) {
		CTR(rc, full, 1);
		goto out;
	}
	if (!r->pinned) {
		err = do_pin(rc, r);
		if (err)
			goto out;
	}
	{
		uint64_t t0 = gh_evlog_clock();

		err = do_reg(rc, r, pd, ex ? addr : g->base,
				   ex ? len : g->size, access, &mr);
		/* the record gh_rc_ev_reg writes, without an entry to read it
		 * from (a zeroed stand-in cost more than the rest of it) */
		if (gh_evlog_enabled()) {
			struct rc_logarg a = { .r = r, .gen = g->gen,
					       .mr = (uint64_t)(uintptr_t)mr,
					       .pd = pdk, .access = access,
					       .err = err, .addr = ka,
					       .len = kl };

			gh_rc_log(rc, GH_EV_REG, t0, &a);
		}
	}
	if (err)
		goto out;
	CTR_LOCKED(rc, regs, 1);
	e = gh_rc_ent_new(rc, r, ex ? E_EXACT : E_CACHED, pd, access, mr,
			  ka, kl);
	if (!e) {
		rc->ops->dereg(mr);
		CTR_LOCKED(rc, deregs, 1);
		err = -ENOSPC;
		goto out;
	}
	ADD_LOCKED(rc, &rc->n_entries, 1);
	if (old) {
		/* Access upgrade: the old one goes once nobody holds it. */
		gh_rc_hash_unlink(rc, old);
		ST(&old->type, E_RETIRED);
		CTR(rc, upgrades, 1);
		if (gh_rc_ent_kill_idle(old, 0))
			gh_rc_ent_finish(rc, old, 0, 0);
	}
	if (!ex)
		gh_rc_hash_insert(rc, e);
	*e_p = e;
out:
	r->busy = 0;
	gh_rc_ga_free_if_unused(rc, r);
	return err;
}

/*
 * Exact exposure over a window (lock held): the allocation's parent
 * registration in pd (LOCAL_WRITE | MW_BIND, no remote rights; cached,
 * made if needed, with the miss path's rules), then a window bound to
 * exactly [addr, addr + len) with the remote access asked.  0 and *e_p
 * (an E_WIN entry holding one reference for the alias), *hit_p: no NIC
 * registration was made.  -EOPNOTSUPP (no windows here) or any other
 * error: the caller registers exactly instead.
 */
static int reg_window(struct rc_state *rc, const struct gh_range *g,
		      struct ibv_pd *pd, uint64_t addr, uint64_t len,
		      unsigned int asked, struct rc_entry **e_p, int *hit_p)
{
	unsigned int pacc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND |
			    (asked & GH_RC_ACCESS_EXACT);
	uint64_t pdk = (uint64_t)(uintptr_t)pd, t0;
	struct rc_entry *par, *e;
	struct gh_mw *w;
	struct rc_ga *r;
	uint32_t rkey;
	int err;

	RC_LOCKED(rc);

	*hit_p = 1;
	par = lookup_ref(rc, g->base, g->gen, pdk, pacc, 0, 0);
	if (!par) {
		*hit_p = 0;
		err = miss_locked(rc, g, pd, g->base, g->size, pacc, 0, &par);
		if (err)
			return err;
	}
	r = ga_of(rc, par);
	t0 = gh_evlog_clock();
	err = gh_mw_bind(pd, par->mr, addr, len, asked & GH_RC_ACCESS_REMOTE,
			 &w, &rkey);
	if (err) {
		gh_rc_put_ref_locked(rc, par);
		return err;
	}
	e = gh_rc_ent_new(rc, r, E_WIN, pd, asked, par->mr, addr, len);
	if (!e) {
		gh_mw_invalidate(w);
		gh_rc_put_ref_locked(rc, par);
		return -ENOSPC;
	}
	e->mr = NULL;		/* the parent's: deregistered with it */
	e->rkey = rkey;
	e->win = w;
	e->parent = ent_idx(rc, par);
	gh_rc_ev_reg(rc, GH_EV_REG, e, r, 0, t0);
	*e_p = e;
	return 0;
}

static int kind_cacheable(const struct gh_range *r)
{
	if (r->flags & GH_RANGE_VOLATILE)
		return 0;
	return r->kind == GDRHOOK_KIND_DEVICE || r->kind == GDRHOOK_KIND_VMM ||
	       r->kind == GDRHOOK_KIND_IPC;
}

int gh_rcache_reg(const struct gh_range *g, struct ibv_pd *pd, uint64_t addr,
		  uint64_t len, unsigned int access, struct ibv_mr **mr_p,
		  int *hit_p)
{
	struct rc_state *rc = gh_rc_instance();
	uint64_t pdk = (uint64_t)(uintptr_t)pd;
	struct rc_entry *e;
	struct ibv_mr *am;
	unsigned int asked = access;
	uint64_t ka, kl;	/* E_EXACT key, or 0, 0 */
	int err, hit = 1, ex, win;

	if (!LD_ACQ(&rc->ready) || LD(&rc->stopped) || !pd)
		return -ENOTSUP;
	if (!kind_cacheable(g))
		return -ENOTSUP;
	if (!gh_rcache_access_ok(access)) {
		/* zero-based: the program's own registration, said once */
		if (rc->exact && (access & IBV_ACCESS_ZERO_BASED))
			gh_mw_route(pd, 0, len, access);
		return -ENOTSUP;
	}
	if (!len || addr < g->base || addr - g->base + len > g->size)
		return -EINVAL;
	ex = rc->exact && (access & GH_RC_ACCESS_REMOTE);
	ka = ex ? addr : 0;
	kl = ex ? len : 0;
	/*
	 * Exact: every MR its own NIC registration, as natively, so its
	 * rkey dies with its own ibv_dereg_mr even while an identical
	 * request lives (the pin stays shared and cached).
	 */
	if (!ex) {
		e = lookup_ref(rc, g->base, g->gen, pdk, access, ka, kl);
		if (e)
			goto found;
	}

	/*
	 * Not a hit: the miss looks up g's allocation state first, in a
	 * bucket no hit reads; its line loads while the lock is taken.
	 */
	__builtin_prefetch(&rc->ga_b[hash_ga(g->gen)]);
	/* a window where every provider binds one (mwin.h), else exactly
	 * the range with the NIC */
	win = ex && gh_mw_route(pd, rc->ops == &gh_pin_dmabuf, len, access);
	gh_dbg("cache: pd %p %#llx+%llu: %s", (void *)pd, (unsigned long long)addr, (unsigned long long)len, !ex ? "a shared registration of the allocation (allocation exposure, or no remote access)" : win ? "exact exposure: a window bound to exactly the range" : "exact exposure: its own NIC registration (no window here)");
	gh_mutex_lock(&rc->lock);
	if (!ex) {
		e = lookup_ref(rc, g->base, g->gen, pdk, access, ka, kl);
		if (e) {
			gh_mutex_unlock(&rc->lock);
			goto found;
		}
	}
	if (win) {
		err = reg_window(rc, g, pd, addr, len, access, &e, &hit);
		if (!err) {
			if (!hit)
				CTR_LOCKED(rc, misses, 1);
			gh_mutex_unlock(&rc->lock);
			goto found;
		}
		if (err == -ESTALE) {
			gh_mutex_unlock(&rc->lock);
			return err;
		}
		/* no window: a NIC registration of exactly the range */
		gh_dbg("cache: pd %p %#llx+%llu: no window (%s): registered exactly with the NIC", (void *)pd, (unsigned long long)addr, (unsigned long long)len, gh_errtext(-err));
	}
	hit = 0;
	CTR_LOCKED(rc, misses, 1);
	err = miss_locked(rc, g, pd, addr, len, access, ex, &e);
	gh_mutex_unlock(&rc->lock);
	if (err)
		return err;
found:
	am = gh_rc_alias_make(rc, e, pd, addr, len, asked);
	if (!am) {
		put_ref(rc, e);
		return -ENOSPC;
	}
	if (hit)
		SHARD(rc, hits, 1);
	*mr_p = am;
	*hit_p = hit;
	return 0;
}

/* ------------------------------------------ what the program does with them */

int gh_rcache_is_alias(const struct ibv_mr *mr)
{
	return is_alias(gh_rc_instance(), mr);
}

int gh_rcache_dereg(struct ibv_mr *mr)
{
	struct rc_state *rc = gh_rc_instance();
	struct rc_alias *a = alias_of(rc, mr);
	uint32_t one = 1;
	struct rc_entry *e;

	if (!a || !__atomic_compare_exchange_n(&a->state, &one, 0, 0,
					       __ATOMIC_ACQ_REL,
					       __ATOMIC_ACQUIRE))
		return -EINVAL;
	e = LD(&a->ent) ? &rc->ent[LD(&a->ent) - 1] : NULL;
	ST(&a->ent, 0);	/* gh_rc_alias_ent reads it */
	alias_put(rc, a);
	SHARD(rc, aliases, -1);
	if (e)
		put_ref(rc, e);
	return 0;
}

void gh_rcache_move(struct ibv_mr *mr, struct ibv_mr *new_alias)
{
	struct rc_state *rc = gh_rc_instance();
	struct rc_alias *a = alias_of(rc, mr), *n = alias_of(rc, new_alias);
	struct rc_entry *old;

	if (!a)
		return;
	old = LD(&a->ent) ? &rc->ent[LD(&a->ent) - 1] : NULL;
	if (n) {
		a->mr = n->mr;
		ST(&a->ent, LD(&n->ent));
		a->access = n->access;
		ST(&n->state, 0);
		ST(&n->ent, 0);
		alias_put(rc, n);
		SHARD(rc, aliases, -1);
	} else {
		ST(&a->ent, 0);	/* holds nothing; ibv_dereg_mr still works */
	}
	if (old)
		put_ref(rc, old);
}

static int revoked(const struct rc_state *rc, const struct ibv_mr *mr)
{
	struct rc_alias *a = alias_of(rc, mr);
	uint32_t ei = a ? LD(&a->ent) : 0;

	/* an alias holds its entry: it is not recycled under us */
	return !ei || (LD_ACQ(&rc->ent[ei - 1].word) & W_DEAD);
}

int gh_rcache_revoked(const struct ibv_mr *mr)
{
	return revoked(gh_rc_instance(), mr);
}

int gh_rcache_still_granted(const struct ibv_mr *mr)
{
	struct rc_state *rc = gh_rc_instance();
	int ok;

	gh_mutex_lock(&rc->lock);
	ok = !revoked(rc, mr);
	gh_mutex_unlock(&rc->lock);
	return ok;
}

unsigned int gh_rcache_alias_access(const struct ibv_mr *mr)
{
	struct rc_alias *a = alias_of(gh_rc_instance(), mr);

	return a ? a->access : 0;
}
