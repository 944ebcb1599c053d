// SPDX-License-Identifier: MIT
/*
 * Aliases: the private MR objects the program gets (from an mmap'ed
 * pool, a lock-free stack with a few slots per thread), what the program
 * does with them (ibv_dereg_mr, ibv_rereg_mr, queries), the reference
 * each holds on its entry, and the per-thread shards that count hits and
 * aliases; the counters.
 */
#include <pthread.h>
#include <stddef.h>
#include <infiniband/verbs.h>

#include "pin/pin.h"
#include "rcache_core.h"
#include "rcache_state.h"
#include "rcache_alias.h"

__thread struct rc_shard *gh_rc_my_shard;
__thread int gh_rc_my_shared;

static struct rc_alias *alias_get(struct rc_state *rc)
{
	struct rc_shard *s = shard_mine(rc);
	uint64_t top;
	uint32_t i;

	if (!gh_rc_my_shared && s->mag_n)
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

	if (!gh_rc_my_shared && s->mag_n < RC_MAG) {
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

/* Drop a reference (an alias went away). */
void gh_rc_put_ref(struct rc_state *rc, struct rc_entry *e)
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

int gh_rcache_is_alias(const struct ibv_mr *mr)
{
	return is_alias(gh_rc_instance(), mr);
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
		gh_rc_put_ref(rc, e);
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
		gh_rc_put_ref(rc, old);
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
