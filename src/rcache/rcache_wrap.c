// SPDX-License-Identifier: MIT
/*
 * Registrations made elsewhere: wrapping the program's own registration
 * of tracked memory (gh_rcache_wrap: an alias over it, revoked by the
 * free of anything it touches) and adopting a libibverbs MR the program's
 * ibv_rereg_mr moved onto tracked memory (gh_rcache_adopt).
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <infiniband/verbs.h>

#include "pin/pin.h"
#include "rcache_api.h"
#include "rcache_state.h"
#include "rcache_reg.h"

static int kind_gpu(const struct gh_range *g)
{
	return g->kind != GDRHOOK_KIND_HOST &&
	       g->kind != GDRHOOK_KIND_HOST_REGISTERED;
}

static int first_gpu(const struct gh_range *g, void *arg)
{
	if (!kind_gpu(g))
		return 0;
	*(struct gh_range *)arg = *g;
	return 1;
}

int gh_rcache_touches(uint64_t addr, uint64_t len, struct gh_range *first_p)
{
	struct gh_range g;

	memset(&g, 0, sizeof(g));
	gh_registry_overlaps(addr, len ? len : 1, first_gpu, &g);
	if (!g.size)
		return -ENOENT;
	*first_p = g;
	return 0;
}

/* Unlink a ring under construction (lock held); real stays the program's. */
static void wrap_undo(struct rc_state *rc, struct rc_entry *first)
{
	uint32_t me = ent_idx(rc, first), i = first->sib;

	RC_LOCKED(rc);

	first->sib = 0;
	while (i && i != me) {
		struct rc_entry *x = &rc->ent[i - 1];
		struct rc_ga *xr = ga_of(rc, x);

		i = x->sib;
		x->sib = 0;
		gh_rc_ent_kill(x);
		x->mr = NULL;
		gh_rc_ent_reclaim(rc, x);
		gh_rc_ga_free_if_unused(rc, xr);
	}
	{
		struct rc_ga *fr = ga_of(rc, first);

		gh_rc_ent_kill(first);
		first->mr = NULL;
		gh_rc_ent_reclaim(rc, first);
		gh_rc_ga_free_if_unused(rc, fr);
	}
}

/*
 * With the lock: tie real, a registration of [addr, addr + len), to each
 * GPU allocation of snap (what the range touched before the NIC call)
 * that is still that generation now; any that is not (freed since)
 * makes it -ESTALE.  plain: a ring of no allocation when snap has none.
 * The first entry of the ring holds one reference; 0 and *first_p.
 */
static int wrap_locked(struct rc_state *rc, struct ibv_mr *real,
		       const struct gh_range *snap, unsigned int n,
		       uint64_t addr, uint64_t len, int plain,
		       struct rc_entry **first_p)
{
	struct rc_entry *first = NULL, *last = NULL, *e;
	int err = 0;

	RC_LOCKED(rc);

	for (unsigned int k = 0; k < n && !err; k++) {
		struct rc_ga *r;

		if (!kind_gpu(&snap[k]))
			continue;
		err = gh_rc_ga_get(rc, &snap[k], &r);
		if (err)
			break;
		e = gh_rc_ent_new(rc, r, E_WRAP, real->pd, 0, real, 0, 0);
		if (!e) {
			gh_rc_ga_free_if_unused(rc, r);
			err = -ENOSPC;
			break;
		}
		/* the registered range, for the log */
		ST(&e->addr, addr);
		ST(&e->len, len);
		if (!first) {
			first = last = e;
			continue;
		}
		/* only the first holds the alias's reference */
		ST_REL(&e->word, LD(&e->word) & ~W_REFS);
		e->sib = ent_idx(rc, first);
		last->sib = ent_idx(rc, e);
		last = e;
	}
	if (err) {
		if (first)
			wrap_undo(rc, first);
		return err;
	}
	if (!first) {
		if (!plain)
			return -ENOENT;
		first = gh_rc_ent_new(rc, NULL, E_WRAP, real->pd, 0, real,
				      0, 0);
		if (!first)
			return -ENOSPC;
	}
	*first_p = first;
	return 0;
}

int gh_rcache_wrap(struct ibv_mr *real, const struct gh_range *snap,
		   unsigned int n, uint64_t addr, uint64_t len,
		   unsigned int access, int plain, struct ibv_mr **alias_p)
{
	struct rc_state *rc = gh_rc_instance();
	struct rc_entry *first;
	struct ibv_mr *am = NULL;
	int err;

	if (!LD_ACQ(&rc->ready) || !real)
		return -ENOTSUP;
	if (LD(&rc->forked))
		return -ENOTSUP;
	/*
	 * All under the lock the free path takes: a free of anything in
	 * snap either ran before (its generation is gone: -ESTALE) or
	 * waits, and then deregisters a ring that is complete.
	 */
	gh_mutex_lock(&rc->lock);
	err = wrap_locked(rc, real, snap, n, addr, len, plain, &first);
	if (!err) {
		am = gh_rc_alias_make(rc, first, real->pd,
				      (uint64_t)(uintptr_t)real->addr,
				      real->length, access);
		if (!am) {
			wrap_undo(rc, first);
			err = -ENOSPC;
		}
	}
	gh_mutex_unlock(&rc->lock);
	if (err)
		return err;
	gh_dbg("cache: wrapped MR %p+%zu (lkey %#x): revoked when any of the %u tracked allocation(s) it covers is freed", real->addr, real->length, real->lkey, n);
	CTR(rc, wrapped, 1);
	*alias_p = am;
	return 0;
}

static int adopt(struct rc_state *rc, struct ibv_mr *mr,
		 const struct gh_range *snap, unsigned int n)
{
	struct rc_entry *first = NULL;
	int slot = -1, err;

	if (!LD_ACQ(&rc->ready) || !mr || LD(&rc->forked))
		return -ENOTSUP;
	gh_mutex_lock(&rc->lock);
	err = wrap_locked(rc, mr, snap, n, (uint64_t)(uintptr_t)mr->addr,
			  mr->length, 0, &first);
	if (!err && (slot = gh_rc_adopt_find(rc, NULL)) < 0) {
		wrap_undo(rc, first);
		err = -ENOSPC;
	}
	if (err) {
		/* never leave it reaching GPU memory untracked */
		if (err != -ENOENT &&
		    gh_vreal_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION |
				      IBV_REREG_MR_CHANGE_ACCESS, NULL,
				      rc->dummy, 4096, 0))
			gh_warn("ibv_rereg_mr: mr %p reaches untracked GPU memory",
				(void *)mr);
		gh_mutex_unlock(&rc->lock);
		return err;
	}
	{
		uint32_t me = ent_idx(rc, first), i = me;

		do {
			struct rc_entry *x = &rc->ent[i - 1];

			x->adopted = 1;
			i = x->sib;
		} while (i && i != me);
	}
	/* no alias holds it: only a free (or the program) ends it */
	ST_REL(&first->word, LD(&first->word) & ~W_REFS);
	rc->adopt_mr[slot] = mr;
	rc->adopt_ent[slot] = ent_idx(rc, first);
	rc->adopt_moved[slot] = 0;
	__atomic_add_fetch(&rc->n_adopted, 1, __ATOMIC_RELAXED);
	CTR(rc, wrapped, 1);
	gh_mutex_unlock(&rc->lock);
	return 0;
}

int gh_rcache_adopt(struct ibv_mr *mr, const struct gh_range *snap,
		    unsigned int n)
{
	return adopt(gh_rc_instance(), mr, snap, n);
}

int gh_rcache_unadopt(struct ibv_mr *mr)
{
	struct rc_state *rc = gh_rc_instance();
	int i, rc_ = 0;

	if (!LD_ACQ(&rc->ready) || !LD(&rc->n_adopted))
		return 0;
	gh_mutex_lock(&rc->lock);
	i = gh_rc_adopt_find(rc, mr);
	if (i >= 0) {
		uint32_t ei = rc->adopt_ent[i];

		rc_ = ei ? 1 : rc->adopt_moved[i] ? 0 : -1;
		rc->adopt_mr[i] = NULL;
		rc->adopt_moved[i] = 0;
		__atomic_sub_fetch(&rc->n_adopted, 1, __ATOMIC_RELAXED);
		if (ei) {
			struct rc_entry *e = &rc->ent[ei - 1];
			struct rc_ga *r = ga_of(rc, e);
			int64_t refs = gh_rc_ent_kill(e);

			e->mr = NULL;	/* still the program's */
			if (refs >= 0)
				gh_rc_ent_finish(rc, e, refs, 0);
			gh_rc_ga_free_if_unused(rc, r);
		}
	}
	gh_mutex_unlock(&rc->lock);
	return rc_;
}

int gh_rcache_moved(struct ibv_mr *mr)
{
	struct rc_state *rc = gh_rc_instance();
	int i, moved = 0;

	if (!LD_ACQ(&rc->ready) || !LD(&rc->n_adopted))
		return 0;
	gh_mutex_lock(&rc->lock);
	i = gh_rc_adopt_find(rc, mr);
	if (i >= 0)
		moved = rc->adopt_moved[i];
	gh_mutex_unlock(&rc->lock);
	return moved;
}

/* Revoke the registration whose ring starts at e (lock held). */
static void ring_revoke(struct rc_state *rc, struct rc_entry *e)
{
	struct rc_ga *r = ga_of(rc, e);
	int64_t refs = gh_rc_ent_kill(e);

	RC_LOCKED(rc);

	if (refs < 0)
		return;		/* revoked already */
	gh_rc_ent_finish(rc, e, refs, 1);
	gh_rc_ga_free_if_unused(rc, r);
}

/* Add allocation g to the ring at first (lock held): 0 or -errno. */
static int ring_add(struct rc_state *rc, struct rc_entry *first,
		    const struct gh_range *g)
{
	struct rc_entry *e;
	struct rc_ga *r;
	int err;

	RC_LOCKED(rc);

	if (!first->mr)
		return -ESTALE;
	err = gh_rc_ga_get(rc, g, &r);
	if (err)
		return err;
	e = gh_rc_ent_new(rc, r, E_WRAP, first->mr->pd, 0, first->mr, 0, 0);
	if (!e) {
		gh_rc_ga_free_if_unused(rc, r);
		return -ENOSPC;
	}
	ST(&e->addr, LD(&first->addr));
	ST(&e->len, LD(&first->len));
	/* only the first holds the alias's reference */
	ST_REL(&e->word, LD(&e->word) & ~W_REFS);
	e->sib = first->sib ? first->sib : ent_idx(rc, first);
	first->sib = ent_idx(rc, e);
	return 0;
}

void gh_rcache_raced(struct ibv_mr *mr, int alias, const struct gh_range *g)
{
	struct rc_state *rc = gh_rc_instance();
	uint32_t ei = 0;
	int was, i;

	if (!LD_ACQ(&rc->ready) || LD(&rc->forked) || !mr)
		return;
	was = gh_guard_enter();
	gh_mutex_lock(&rc->lock);
	if (alias) {
		ei = gh_rc_alias_ent(rc, mr);
	} else {
		i = gh_rc_adopt_find(rc, mr);
		if (i < 0) {
			/* not tied yet: adopted (tied), or moved onto the
			 * private page when it cannot be */
			gh_mutex_unlock(&rc->lock);
			adopt(rc, mr, g, 1);
			gh_guard_leave(was);
			return;
		}
		ei = rc->adopt_ent[i];
	}
	if (ei) {
		struct rc_entry *first = &rc->ent[ei - 1];

		/* a plain MR tied before: its adoption names other memory,
		 * and a second one cannot be added to it */
		if (!(LD(&first->word) & W_DEAD) &&
		    (!alias || ring_add(rc, first, g)))
			ring_revoke(rc, first);
	}
	gh_mutex_unlock(&rc->lock);
	gh_guard_leave(was);
}
