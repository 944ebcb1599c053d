// SPDX-License-Identifier: MIT
/*
 * The cache core: the one state object (struct rc_state) and what keeps
 * it: the tables (made at gh_rcache_init) and the fork handlers, the
 * entry word (kill), the hash chains, the entry and allocation-state
 * allocators, how each kind of entry ends (ent_finish: deregistered, or
 * left to its last holder revoked), the free of an allocation (its
 * states and entries all go), the event record of each of those steps
 * and the counters.  The other files get the object as an argument
 * (their entry points from gh_rc_instance); the rules are at the top of
 * rcache_state.h.
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <infiniband/verbs.h>

#include "registry/registry.h"
#include "pin/pin.h"
#include "rcache_api.h"
#include "rcache_state.h"
#include "rcache_spankeys.h"

/* The cache, one for the process: other files take it from
 * gh_rc_instance() (rcache_state.h). */
struct rc_state gh_rc_cache = { .lock = GH_MUTEX_INIT };

static void *map_zero(size_t bytes)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	/*
	 * A random hit touches a bucket, an entry and an alias in arrays of
	 * megabytes: with 4 KiB pages each is a TLB miss too, and a page
	 * walk costs most in a virtual machine.  Advice only.
	 */
	if (bytes >= (2u << 20))
		madvise(p, bytes, MADV_HUGEPAGE);
	return p;
}

static void atfork_prepare(void)
{
	gh_mutex_lock(&gh_rc_cache.lock);
}

static void atfork_release(void)
{
	gh_mutex_unlock(&gh_rc_cache.lock);
}

static void atfork_child(void)
{
	ST(&gh_rc_cache.forked, 1);
	ST(&gh_rc_cache.stopped, 1);
	gh_mutex_unlock(&gh_rc_cache.lock);
}

int gh_rcache_init(const struct gh_pin_ops *ops, uint64_t max_size,
		   uint64_t max_count, unsigned int flags)
{
	static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
	struct rc_state *rc = &gh_rc_cache;
	int rc_ = 0;

	if (LD_ACQ(&rc->ready))
		return 0;
	pthread_mutex_lock(&init_lock);
	if (rc->ready)
		goto out;
	rc->ent = map_zero(sizeof(*rc->ent) * RC_ENT_CAP);
	rc->used = map_zero(sizeof(uint32_t) * RC_ENT_CAP);
	rc->ga = map_zero(sizeof(*rc->ga) * RC_GA_CAP);
	rc->alias = map_zero(sizeof(*rc->alias) * RC_ALIAS_CAP);
	rc->ga_b = map_zero(sizeof(*rc->ga_b) << RC_RBITS);
	if (!rc->ent || !rc->used || !rc->ga || !rc->alias || !rc->ga_b) {
		rc_ = -ENOMEM;
		goto out;
	}
	rc->dummy = map_zero(4096);
	if (!rc->dummy) {
		rc_ = -ENOMEM;
		goto out;
	}
	rc->ops = ops;
	rc->exact = !!(flags & GH_RC_EXPOSE_EXACT);
	rc->max_size = max_size;
	rc->max_count = max_count && max_count < RC_ENT_CAP ? max_count :
		        RC_ENT_CAP;
	pthread_atfork(atfork_prepare, atfork_release, atfork_child);
	gh_pin_on_revoked(gh_rcache_revoke);
	/* every free from now on: first listener, before subscribers */
	gh_frees_listen(gh_rcache_invalidate);
	ST_REL(&rc->ready, 1);
out:
	pthread_mutex_unlock(&init_lock);
	return rc_;
}

int gh_rcache_ready(void)
{
	return LD_ACQ(&gh_rc_cache.ready);
}

void *gh_rcache_dummy_page(void)
{
	return gh_rc_cache.dummy;
}

int gh_rcache_access_ok(unsigned int access)
{
	return !(access & ~(GH_RC_ACCESS_PERM | GH_RC_ACCESS_EXACT));
}

/* ------------------------------------------------------- entry word ops */

/* Kill: set dead, bump the version.  Returns the references left, or -1
 * when it was dead already. */
int64_t gh_rc_ent_kill(struct rc_entry *e)
{
	uint64_t w = LD_ACQ(&e->word), nw;

	do {
		if (w & W_DEAD)
			return -1;
		nw = (((w >> W_VER_SHIFT) + 1) << W_VER_SHIFT) | W_DEAD |
		     (w & W_REFS);
	} while (!__atomic_compare_exchange_n(&e->word, &w, nw, 0,
					      __ATOMIC_ACQ_REL,
					      __ATOMIC_ACQUIRE));
	return (int64_t)(w & W_REFS);
}

/* Kill only if idle and (ver != 0) still at version ver. */
int gh_rc_ent_kill_idle(struct rc_entry *e, uint64_t ver)
{
	uint64_t w = LD_ACQ(&e->word), nw;

	if ((w & (W_DEAD | W_REFS)) ||
	    (ver && (w >> W_VER_SHIFT) != ver))
		return 0;
	nw = (((w >> W_VER_SHIFT) + 1) << W_VER_SHIFT) | W_DEAD;
	return __atomic_compare_exchange_n(&e->word, &w, nw, 0,
					   __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

/* ------------------------------------------------------- lock held below */

void gh_rc_hash_unlink(struct rc_state *rc, struct rc_entry *e)
{
	uint32_t *pp = &rc->ent[hash_of(e)].bhead;
	uint32_t me = ent_idx(rc, e), i;

	RC_LOCKED(rc);

	while ((i = LD(pp)) != 0) {
		if (i == me) {
			ST_REL(pp, LD(&e->hnext));
			return;
		}
		pp = &rc->ent[i - 1].hnext;
	}
}

/* The current cached entry for (gen, pd, exact bits), dead or alive. */
struct rc_entry *gh_rc_hash_find_cur(struct rc_state *rc, uint64_t base,
				     uint64_t gen, uint64_t pd,
				     unsigned int access)
{
	uint32_t i = LD(&rc->ent[hash_ent(base, pd, access, 0, 0)].bhead);

	RC_LOCKED(rc);

	while (i) {
		struct rc_entry *e = &rc->ent[i - 1];

		if (e->gen == gen && e->pd == pd &&
		    LD(&e->type) == E_CACHED &&
		    (e->access & GH_RC_ACCESS_EXACT) ==
		    (access & GH_RC_ACCESS_EXACT) &&
		    !(LD(&e->word) & W_DEAD))
			return e;
		i = LD(&e->hnext);
	}
	return NULL;
}

static void ga_unlink_ent(struct rc_state *rc, struct rc_entry *e)
{
	struct rc_ga *r = ga_of(rc, e);
	uint32_t *pp, me = ent_idx(rc, e);

	RC_LOCKED(rc);

	if (!r)
		return;
	for (pp = &r->ents; *pp; pp = &rc->ent[*pp - 1].rnext) {
		if (*pp == me) {
			*pp = e->rnext;
			break;
		}
	}
	e->ga = 0;
	e->rnext = 0;
}

static void free_push(struct rc_state *rc, struct rc_entry *e)
{
	RC_LOCKED(rc);

	if (e->onfree)
		return;		/* still listed from before its home reuse */
	e->onfree = 1;
	e->fnext = rc->ent_free;
	rc->ent_free = ent_idx(rc, e);
}

/*
 * A free entry, in slot home (index + 1; 0: anywhere) when that one is
 * free.  A slot taken as a home may still be on the free list: the pop
 * skips what is not free (lazy removal).
 */
/* Homes scatter entries over the array: scans (eviction, drops) walk
 * the dense list of the used ones instead. */
static struct rc_entry *ent_used(struct rc_state *rc, struct rc_entry *e)
{
	RC_LOCKED(rc);

	e->upos = rc->n_used;
	rc->used[rc->n_used++] = ent_idx(rc, e) - 1;
	return e;
}

static void ent_unused(struct rc_state *rc, struct rc_entry *e)
{
	uint32_t last;

	RC_LOCKED(rc);

	last = rc->used[--rc->n_used];
	rc->used[e->upos] = last;
	rc->ent[last].upos = e->upos;
}

static struct rc_entry *ent_take(struct rc_state *rc, uint32_t home)
{
	struct rc_entry *e;

	RC_LOCKED(rc);

	if (home && LD(&rc->ent[home - 1].type) == E_FREE)
		return ent_used(rc, &rc->ent[home - 1]);
	while (rc->ent_free) {
		e = &rc->ent[rc->ent_free - 1];
		rc->ent_free = e->fnext;
		e->onfree = 0;
		if (LD(&e->type) == E_FREE)
			return ent_used(rc, e);
	}
	/* never used yet: the bump skips the homes taken above it */
	while (rc->ent_hi < RC_ENT_CAP) {
		e = &rc->ent[rc->ent_hi++];
		if (LD(&e->type) == E_FREE)
			return ent_used(rc, e);
	}
	return NULL;
}

void gh_rc_ent_reclaim(struct rc_state *rc, struct rc_entry *e)
{
	RC_LOCKED(rc);

	ga_unlink_ent(rc, e);
	ent_unused(rc, e);
	ST(&e->type, E_FREE);
	e->mr = NULL;
	free_push(rc, e);
}

struct rc_entry *gh_rc_ent_new(struct rc_state *rc, struct rc_ga *r,
			       uint32_t type, struct ibv_pd *pd,
			       unsigned int access, struct ibv_mr *mr,
			       uint64_t addr, uint64_t len)
{
	struct rc_entry *e;
	uint64_t ver;

	RC_LOCKED(rc);

	uint32_t home = r ? hash_ent(r->pin.base, (uint64_t)(uintptr_t)pd,
				     access, addr, len) : 0;

	e = ent_take(rc, type == E_CACHED || type == E_EXACT ? home + 1 : 0);
	if (!e)
		return NULL;
	e->home = home;
	ver = (LD(&e->word) >> W_VER_SHIFT) + 1;
	ST(&e->gen, r ? r->gen : 0);
	ST(&e->pd, (uint64_t)(uintptr_t)pd);
	ST(&e->access, access);
	ST(&e->type, type);
	ST(&e->cookie, r ? r->pin.cookie : 0);
	ST(&e->addr, addr);
	ST(&e->len, len);
	e->sib = 0;
	e->adopted = 0;
	e->parent = 0;
	e->win = NULL;
	e->mr = mr;
	e->ctx = pd ? (uint64_t)(uintptr_t)pd->context : 0;
	e->handle = mr->handle;
	e->lkey = mr->lkey;
	e->rkey = mr->rkey;
	e->ga = 0;
	e->rnext = 0;
	if (r) {
		e->ga = (uint32_t)(r - rc->ga) + 1;
		e->rnext = r->ents;
		r->ents = ent_idx(rc, e);
	}
	/* Publish: one reference, for the caller's alias. */
	ST_REL(&e->word, (ver << W_VER_SHIFT) | W_CLOCK | 1);
	return e;
}

void gh_rc_hash_insert(struct rc_state *rc, struct rc_entry *e)
{
	uint32_t *head = &rc->ent[hash_of(e)].bhead;

	RC_LOCKED(rc);

	ST(&e->hnext, LD(head));
	ST_REL(head, ent_idx(rc, e));
}

/* The adopt table slot of mr, or -1. */
int gh_rc_adopt_find(struct rc_state *rc, const struct ibv_mr *mr)
{
	RC_LOCKED(rc);

	for (uint32_t i = 0; i < RC_ADOPT_CAP; i++)
		if (rc->adopt_mr[i] == mr)
			return (int)i;
	return -1;
}

/*
 * Take the NIC's access away from an adopted MR without freeing the
 * program's object: re-register it onto a private page, local read only.
 * If the provider cannot, deregister it and remember the pointer as
 * revoked (the program's ibv_dereg_mr then succeeds without a call).
 */
static int adopt_revoke(struct rc_state *rc, struct ibv_mr *mr)
{
	int i = gh_rc_adopt_find(rc, mr), err;

	RC_LOCKED(rc);

	err = gh_vreal_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION |
				IBV_REREG_MR_CHANGE_ACCESS, NULL, rc->dummy,
				4096, 0);
	if (!err) {
		/* kept: its next rereg must restate what it lost */
		if (i >= 0) {
			rc->adopt_ent[i] = 0;
			rc->adopt_moved[i] = 1;
		}
		return 0;
	}
	err = gh_vreal_dereg_mr(mr);
	if (i >= 0)
		rc->adopt_ent[i] = 0;
	return err;
}

/*
 * e (E_WRAP) was finished: its real MR is gone, so every other entry of
 * its ring goes too (one per allocation the registration touched).
 */
static void ring_finish(struct rc_state *rc, struct rc_entry *e, int revoke)
{
	uint32_t me = ent_idx(rc, e), i = e->sib;

	RC_LOCKED(rc);

	e->sib = 0;
	while (i && i != me) {
		struct rc_entry *x = &rc->ent[i - 1];
		struct rc_ga *xr = ga_of(rc, x);
		int64_t refs;

		i = x->sib;
		x->sib = 0;
		x->mr = NULL;		/* deregistered with e */
		refs = gh_rc_ent_kill(x);
		if (refs >= 0)
			gh_rc_ent_finish(rc, x, refs, revoke);
		gh_rc_ga_free_if_unused(rc, xr);
	}
}

/* Drop a reference with the lock held (a window let its parent go). */
void gh_rc_put_ref_locked(struct rc_state *rc, struct rc_entry *e)
{
	uint64_t w = __atomic_sub_fetch(&e->word, 1, __ATOMIC_ACQ_REL);

	RC_LOCKED(rc);

	if (w & W_REFS)
		return;
	if (w & W_DEAD) {
		/* revoked: we were the last holder */
		gh_rc_ent_reclaim(rc, e);
		return;
	}
	if (LD(&e->type) == E_CACHED && !LD(&rc->stopped))
		return;		/* lazy, as gh_rc_put_ref */
	if (gh_rc_ent_kill_idle(e, w >> W_VER_SHIFT)) {
		struct rc_ga *r = ga_of(rc, e);

		gh_rc_ent_finish(rc, e, 0, 0);
		gh_rc_ga_free_if_unused(rc, r);
	}
}

/* An E_WIN entry goes: its window invalidated, its parent let go. */
static void win_finish(struct rc_state *rc, struct rc_entry *e, struct rc_ga *r,
		       uint64_t t0)
{
	RC_LOCKED(rc);

	if (e->win) {
		if (LD(&rc->forked)) {
			gh_mw_forget(e->win);	/* the parent process's */
		} else {
			gh_mw_invalidate(e->win);
			gh_rc_ev_reg(rc, GH_EV_DEREG, e, r, 0, t0);
		}
		e->win = NULL;
	}
	if (e->parent) {
		struct rc_entry *par = &rc->ent[e->parent - 1];

		e->parent = 0;
		gh_rc_put_ref_locked(rc, par);
	}
}

/*
 * e was just killed by us (refs references left).  Deregister for real;
 * reclaim it, or leave it detached for its last holder (revoked).
 */
void gh_rc_ent_finish(struct rc_state *rc, struct rc_entry *e, int64_t refs,
		      int revoke)
{
	uint32_t type = LD(&e->type);
	struct rc_ga *r = ga_of(rc, e);
	uint64_t t0 = gh_evlog_clock();
	int err = 0;

	RC_LOCKED(rc);

	if (type == E_CACHED)
		gh_rc_hash_unlink(rc, e);
	if (type == E_CACHED || type == E_RETIRED || type == E_EXACT)
		ADD_LOCKED(rc, &rc->n_entries, -1);
	if (type == E_WIN)
		win_finish(rc, e, r, t0);
	if (e->mr && LD(&rc->forked)) {
		e->mr = NULL;	/* the parent's too: forgotten, never deregistered */
	} else if (e->mr) {
		err = e->adopted ? adopt_revoke(rc, e->mr) :
		      rc->ops->dereg(e->mr);
		gh_rc_ev_reg(rc, GH_EV_DEREG, e, r, err, t0);
		CTR_LOCKED(rc, deregs, 1);
		if (err)
			gh_warn("deregistration of mr %p failed: %s",
				(void *)e->mr, gh_errtext(-err));
		e->mr = NULL;
	}
	if (e->sib)
		ring_finish(rc, e, revoke);
	if (revoke)
		CTR(rc, stale_averted, 1);
	if (refs > 0) {
		CTR(rc, revoked, 1);
		if (gh_evlog_enabled()) {
			struct rc_logarg a = { .r = r, .gen = e->gen };

			gh_rc_log(rc, GH_EV_REVOKE, t0, &a);
		}
		ga_unlink_ent(rc, e);	/* the last holder reclaims it */
	} else {
		gh_rc_ent_reclaim(rc, e);
	}
}

void gh_rc_ga_free_if_unused(struct rc_state *rc, struct rc_ga *r)
{
	uint32_t *pp, me;

	RC_LOCKED(rc);

	if (!r || r->ents || r->busy || !r->used)
		return;
	if (r->pinned && LD(&rc->forked)) {
		r->pinned = 0;	/* the parent's pin: forgotten */
	} else if (r->pinned) {
		uint64_t t0 = gh_evlog_clock(), bytes = r->pin.pin_size;

		/* (the backend may clear pin_size) */
		rc->ops->unpin(&r->pin);
		gh_rc_ev_pin(rc, GH_EV_UNPIN, r, 0, t0);
		ADD_LOCKED(rc, &rc->pinned_bytes, -bytes);
		CTR_LOCKED(rc, unpins, 1);
		r->pinned = 0;
	}
	me = (uint32_t)(r - rc->ga) + 1;
	for (pp = &rc->ga_b[hash_ga(r->gen)].head; *pp;
	     pp = &rc->ga[*pp - 1].hnext) {
		if (*pp == me) {
			*pp = r->hnext;
			break;
		}
	}
	__atomic_sub_fetch(&rc->ga_b[hash_ga(r->gen)].cnt, 1, __ATOMIC_ACQ_REL);
	if (gh_rcspan_is_key(r->gen))
		gh_rcspan_release(rc, r->gen);
	r->used = 0;
	r->fnext = rc->ga_free;
	rc->ga_free = me;
}

/* The state of allocation generation @gen, or NULL (cache lock held). */
static struct rc_ga *gh_rc_ga_find(struct rc_state *rc, uint64_t gen)
{
	uint32_t i = rc->ga_b[hash_ga(gen)].head;

	RC_LOCKED(rc);

	while (i) {
		struct rc_ga *r = &rc->ga[i - 1];

		if (r->gen == gen)
			return r;
		i = r->hnext;
	}
	return NULL;
}

/*
 * The state (struct rc_ga) of live allocation g, made if needed.  A new one is
 * announced in its bucket's count before the registry is re-checked (see the top of
 * rcache_state.h).
 */
int gh_rc_ga_get(struct rc_state *rc, const struct gh_range *g,
		 struct rc_ga **r_p)
{
	uint32_t b = hash_ga(g->gen), i;
	struct gh_range cur;
	struct rc_ga *r = gh_rc_ga_find(rc, g->gen);

	RC_LOCKED(rc);

	if (r) {
		*r_p = r;
		return 0;
	}
	/* Announce, then re-check (see the top of rcache_state.h). */
	__atomic_add_fetch(&rc->ga_b[b].cnt, 1, __ATOMIC_ACQ_REL);
	if (gh_rcspan_is_key(g->gen) ? gh_rcspan_claim(rc, g->gen) :
	    gh_registry_lookup(g->base, 1, &cur) || cur.gen != g->gen ||
	    cur.base != g->base) {
		__atomic_sub_fetch(&rc->ga_b[b].cnt, 1, __ATOMIC_ACQ_REL);
		return -ESTALE;
	}
	if (rc->ga_free) {
		i = rc->ga_free;
		rc->ga_free = rc->ga[i - 1].fnext;
	} else if (rc->ga_hi < RC_GA_CAP) {
		i = ++rc->ga_hi;
	} else {
		__atomic_sub_fetch(&rc->ga_b[b].cnt, 1, __ATOMIC_ACQ_REL);
		if (gh_rcspan_is_key(g->gen))
			gh_rcspan_release(rc, g->gen);
		return -ENOSPC;
	}
	r = &rc->ga[i - 1];
	memset(r, 0, sizeof(*r));
	r->used = 1;
	r->gen = g->gen;
	r->pin.base = g->base;
	r->pin.size = g->size;
	r->pin.gen = g->gen;
	r->pin.ctx = g->ctx;
	r->pin.dev = g->dev;
	r->pin.kind = g->kind;
	r->pin.fd = -1;
	r->hnext = rc->ga_b[b].head;
	rc->ga_b[b].head = i;
	*r_p = r;
	return 0;
}

/* Deregister everything made on r (revoking held ones), then drop r. */
void gh_rc_ga_kill_all(struct rc_state *rc, struct rc_ga *r, int before_free)
{
	RC_LOCKED(rc);

	/* windows first: a parent with a bound window cannot go */
	for (uint32_t i = r->ents; i;) {
		struct rc_entry *e = &rc->ent[i - 1];
		int64_t refs;

		i = e->rnext;
		if (LD(&e->type) != E_WIN)
			continue;
		refs = gh_rc_ent_kill(e);
		if (refs < 0) {
			ga_unlink_ent(rc, e);
			continue;
		}
		gh_rc_ent_finish(rc, e, refs, before_free);
	}
	while (r->ents) {
		struct rc_entry *e = &rc->ent[r->ents - 1];
		int64_t refs = gh_rc_ent_kill(e);

		if (refs < 0) {
			ga_unlink_ent(rc, e);	/* dead: holder reclaims */
			continue;
		}
		gh_rc_ent_finish(rc, e, refs, before_free);
	}
	gh_rc_ga_free_if_unused(rc, r);
}

/* r's pin was revoked. */
void gh_rc_ga_drop(struct rc_state *rc, struct rc_ga *r)
{
	RC_LOCKED(rc);

	gh_rc_ga_kill_all(rc, r, 0);
}

/* ------------------------------------------------ the free of an allocation */

/*
 * The free path (a free listener, set at gh_rcache_init) and the pin
 * backend's revocation (gh_pin_on_revoked): everything made on one
 * allocation state goes (gh_rc_ga_kill_all).
 */
void gh_rcache_invalidate(const struct gh_range *g)
{
	struct rc_state *rc = &gh_rc_cache;
	struct rc_ga *r;
	uint64_t key;
	int was;

	if (!LD_ACQ(&rc->ready) || LD(&rc->forked))
		return;
	/*
	 * The registry removal is done; an RMW (not a plain load) reads the
	 * latest count: either it sees a miss path's announcement, or that
	 * miss path's increment reads our write and its registry re-check
	 * then sees the removal.
	 */
	if (!__atomic_fetch_add(&rc->ga_b[hash_ga(g->gen)].cnt, 0,
				__ATOMIC_ACQ_REL) && !gh_rcspan_pending(g->gen))
		return;
	was = gh_guard_enter();
	gh_mutex_lock(&rc->lock);
	r = gh_rc_ga_find(rc, g->gen);
	if (r)
		gh_rc_ga_kill_all(rc, r, 1);
	/*
	 * Spans that include this mapping (src/rcache/rcache_span.c): a
	 * claimed one counts on the generation, and claims take the cache
	 * lock (held), so a count of 0 means none: no table scan.
	 */
	for (uint32_t c = 0; gh_rcspan_pending(g->gen) &&
	     (key = gh_rcspan_next(rc, g->gen, &c)) != 0;) {
		r = gh_rc_ga_find(rc, key);
		if (r)
			gh_rc_ga_kill_all(rc, r, 1);
	}
	gh_mutex_unlock(&rc->lock);
	gh_guard_leave(was);
}

int gh_rcache_revoke(uint64_t gen, uint64_t cookie)
{
	struct rc_state *rc = &gh_rc_cache;
	struct rc_ga *r;
	int was, done = 0;

	if (!LD_ACQ(&rc->ready))
		return 0;
	was = gh_guard_enter();
	gh_mutex_lock(&rc->lock);
	r = gh_rc_ga_find(rc, gen);
	if (r && r->pinned && r->pin.cookie == cookie) {
		gh_rc_ga_drop(rc, r);
		CTR(rc, pins_revoked, 1);
		done = 1;
	}
	gh_mutex_unlock(&rc->lock);
	gh_guard_leave(was);
	return done;
}

/* ------------------------------------------------------- event records */

/*
 * Every record the cache writes is built here, straight into the event
 * log layer (evlog.h): pin/unpin, reg/dereg, revoke (r, gen, mr, pd,
 * access), hit/miss (api, addr, len, alias).
 */
void gh_rc_log(struct rc_state *rc, unsigned int ev, uint64_t t0,
	       const struct rc_logarg *a)
{
	uint64_t ptr = 0, size = 0;
	int32_t dev = -1;

	if (a->r) {
		ptr = a->r->pin.base;
		size = a->r->pin.size;
		dev = a->r->pin.dev;
	}
	if (a->g || a->len) {
		/* what was asked (hit/miss) or registered (reg/dereg) */
		ptr = a->addr;
		size = a->len;
	}
	if (a->g)
		dev = a->g->dev;
	switch (ev) {
	case GH_EV_PIN:
	case GH_EV_UNPIN:
		if (a->r->pin.pin_size) {
			ptr = a->r->pin.pin_base;
			size = a->r->pin.pin_size;
		}
		gh_ev_emit_pin(ev, t0, ptr, size, a->gen, dev, rc->ops->name,
			       a->err);
		break;
	case GH_EV_REG:
	case GH_EV_DEREG:
		/* the registered range: exact and wrapped ones carry theirs;
		 * an allocation-wide one is the allocation */
		gh_ev_emit_reg(ev, t0, ptr, size, a->gen, a->mr, a->pd,
			       a->access, a->err);
		break;
	case GH_EV_REVOKE:
		gh_ev_emit_revoke(ev, t0, ptr, size, a->gen, dev);
		break;
	default:	/* hit, miss */
		gh_ev_emit_lookup(ev, t0, a->api, ptr, size, a->gen, dev,
				  a->mr, a->pd, a->access);
	}
}

void gh_rc_ev_pin(struct rc_state *rc, unsigned int ev, const struct rc_ga *r,
		  int err, uint64_t t0)
{
	struct rc_logarg a = { .r = r, .gen = r->gen, .err = err };

	if (gh_evlog_enabled())
		gh_rc_log(rc, ev, t0, &a);
}

void gh_rc_ev_reg(struct rc_state *rc, unsigned int ev,
		  const struct rc_entry *x, const struct rc_ga *r, int err,
		  uint64_t t0)
{
	struct rc_logarg a = { .r = r, .gen = x->gen,
			       .mr = x->mr ? (uint64_t)(uintptr_t)x->mr :
			       (uint64_t)(uintptr_t)x->win, .pd = x->pd,
			       .access = x->access, .err = err,
			       .addr = x->addr, .len = x->len };

	if (gh_evlog_enabled())
		gh_rc_log(rc, ev, t0, &a);
}

void gh_rcache_log_lookup(int hit, const char *api, uint64_t addr,
			  uint64_t len, const struct gh_range *g,
			  const struct ibv_mr *mr, const struct ibv_pd *pd,
			  unsigned int access, uint64_t t0)
{
	struct rc_logarg a = { .api = api, .addr = addr, .len = len, .g = g,
			       .gen = g->gen, .mr = (uint64_t)(uintptr_t)mr,
			       .pd = (uint64_t)(uintptr_t)pd, .access = access };

	if (gh_evlog_enabled())
		gh_rc_log(gh_rc_instance(), hit ? GH_EV_HIT : GH_EV_MISS, t0,
			  &a);
}

/* ------------------------------------------------------------ counters */

void gh_rcache_counters(struct gh_rc_counters *c_p)
{
	const struct rc_state *rc = gh_rc_instance();
	struct gh_rc_counters c;
	const uint64_t *src = (const uint64_t *)&rc->ctr;
	uint64_t *dst = (uint64_t *)&c;

	for (size_t i = 0; i < sizeof(c) / sizeof(uint64_t); i++)
		dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
	c.hits = c.aliases = 0;
	for (int i = 0; i < RC_SHARDS; i++) {
		c.hits += LD(&rc->shards[i].hits);
		c.aliases += LD(&rc->shards[i].aliases);
	}
	c.entries = LD(&rc->n_entries);
	c.pinned_bytes = LD(&rc->pinned_bytes);
	*c_p = c;
}
