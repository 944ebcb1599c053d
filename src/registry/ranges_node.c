/* SPDX-License-Identifier: MIT */
/*
 * The registry's granules: a sub slot and its leaf, and a shared
 * granule's node (copy-on-write, or changed in place while its page
 * leaves serve), its slot index, its page and slot leaves.  Writers only,
 * under the granule's shard lock; what readers may see meanwhile:
 * ranges_impl.h.
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "ranges_impl.h"

/* Rewrite leaf @l (seqlock write): a copy of @e, else @tag and @aux. */
static void gh_rtab_leaf_set(struct gh_rtab_leaf *l, const struct gh_rtab_ent *e,
			    uint64_t tag, uint64_t aux)
{
	GH_ST(&l->seq, l->seq + 1);
	GH_FENCE_REL();
	GH_ST(&l->base, e ? e->base : tag);
	GH_ST(&l->size, e ? e->size : 0);
	GH_ST(&l->gen, e ? e->gen : aux);
	GH_ST(&l->ctx, e ? e->ctx : 0);
	GH_ST(&l->pool, e ? e->pool : 0);
	GH_ST(&l->meta, e ? e->meta : 0);
	GH_ST(&l->buffer_id, e ? e->buffer_id : 0);
	GH_ST_REL(&l->seq, l->seq + 1);
}

/* Set a sub slot to an entry or 0, and its leaf to match. */
void gh_rtab_sub_set(struct gh_rtab_sub *s, uint32_t i, uint64_t v)
{
	s->used += (v != 0) - (s->slot[i] != 0);
	s->slot[i] = v;
	if (s->fine[i])
		s->fine[i]->valid = 0;	/* rebuilt when a node comes back */
	gh_rtab_leaf_set(&s->leaf[i], (const struct gh_rtab_ent *)v, 0, 0);
}

static struct gh_rtab_node *gh_rtab_node_pop(struct gh_rtab_shard *sh,
					     uint32_t cls)
{
	struct gh_rtab_node *n = sh->node_free[cls];

	sh->node_free[cls] = n->next_free;
	sh->node_nfree[cls]--;
	return n;
}

static void gh_rtab_node_push(struct gh_rtab_shard *sh, struct gh_rtab_node *n)
{
	n->next_free = sh->node_free[n->cls];
	sh->node_free[n->cls] = n;
	sh->node_nfree[n->cls]++;
}

static void gh_rtab_node_write_begin(struct gh_rtab_node *n)
{
	GH_ST(&n->seq, n->seq + 1);
	GH_FENCE_REL();
}

static void gh_rtab_node_set(struct gh_rtab_node *n, uint32_t i,
			    struct gh_rtab_ent *e)
{
	GH_ST(&gh_rtab_node_base(n)[i], e->base);
	GH_ST(&gh_rtab_node_ents(n)[i], (uint64_t)e);
}

/*
 * Items [from, from + cnt) of @src to [at, ...) of @dst, which is being
 * written: array pointers taken once (atomic stores would make the
 * compiler reload them per item).
 */
static void gh_rtab_node_copy(struct gh_rtab_node *dst, uint32_t at,
			     struct gh_rtab_node *src, uint32_t from,
			     uint32_t cnt)
{
	uint64_t *db = gh_rtab_node_base(dst) + at;
	uint64_t *de = gh_rtab_node_ents(dst) + at;
	const uint64_t *sb = gh_rtab_node_base(src) + from;
	const uint64_t *se = gh_rtab_node_ents(src) + from;

	for (uint32_t i = 0; i < cnt; i++) {
		GH_ST(&db[i], sb[i]);
		GH_ST(&de[i], se[i]);
	}
}

/* The slots of granule @gs that entry @e touches: [*lo_p, *hi_p]. */
static void gh_rtab_ent_slots(const struct gh_rtab_ent *e, uint64_t gs,
			     uint32_t *lo_p, uint32_t *hi_p)
{
	*lo_p = (gh_rtab_max(e->base, gs) - gs) >> GH_REG_SLOT_SHIFT;
	*hi_p = (gh_rtab_min(gh_rtab_ent_end(e), gs + GH_REG_GRAN) - 1 - gs) >>
		GH_REG_SLOT_SHIFT;
}

/* Build the slot index of node @n (items 0..count-1) of granule @gs. */
static void gh_rtab_node_index(struct gh_rtab_node *n, uint32_t count,
			      uint64_t gs)
{
	uint64_t *slot = gh_rtab_node_slots(n);
	int64_t prev_hi = -1;
	uint32_t i, k;

	for (k = 0; k < GH_REG_NODE_SLOTS; k++)
		GH_ST(&slot[k], 0);
	for (i = 0; i < count; i++) {
		uint32_t lo, hi;

		gh_rtab_ent_slots(gh_rtab_node_ent(n, i), gs, &lo, &hi);
		if ((int64_t)lo <= prev_hi) {
			GH_ST(&n->direct, 0);	/* a slot shared: search */
			return;
		}
		for (k = lo; k <= hi; k++)
			GH_ST(&slot[k], (uint64_t)gh_rtab_node_ent(n, i));
		prev_hi = hi;
	}
	GH_ST(&n->direct, 1);
}

/*
 * Derive the slot index of @n from that of @old, which differs from it by
 * @add or @del (one of them): a copy and a few slots instead of a pass
 * over every item.  False when it must be built from scratch.
 */
static bool gh_rtab_node_index_from(struct gh_rtab_node *n,
				   struct gh_rtab_node *old, uint64_t gs,
				   struct gh_rtab_ent *add,
				   struct gh_rtab_ent *del)
{
	uint64_t *slot = gh_rtab_node_slots(n);
	const uint64_t *os;
	uint32_t k, lo, hi;

	if (!old || old->cls < GH_REG_NODE_IDX_CLS || !old->direct)
		return false;
	os = gh_rtab_node_slots(old);
	for (k = 0; k < GH_REG_NODE_SLOTS; k++)
		GH_ST(&slot[k], os[k]);
	gh_rtab_ent_slots(add ? add : del, gs, &lo, &hi);
	for (k = lo; k <= hi; k++) {
		if (add && slot[k]) {
			GH_ST(&n->direct, 0);	/* a slot shared: search */
			return true;
		}
		GH_ST(&slot[k], add ? (uint64_t)add : 0);
	}
	GH_ST(&n->direct, 1);
	return true;
}

/* @index: build the slot index (lookups use page leaves otherwise). */
static void gh_rtab_node_write_end(struct gh_rtab_node *n, uint32_t count,
				  uint64_t gs, struct gh_rtab_node *old,
				  struct gh_rtab_ent *add,
				  struct gh_rtab_ent *del, bool index)
{
	GH_ST(&n->n, count);
	if (!index)
		GH_ST(&n->direct, 0);
	else if (n->cls >= GH_REG_NODE_IDX_CLS &&
		 !gh_rtab_node_index_from(n, old, gs, add, del))
		gh_rtab_node_index(n, count, gs);
	GH_ST_REL(&n->seq, n->seq + 1);
}

/* The pages of granule @gs that [base, end) touches: [*lo_p, *hi_p]. */
static void gh_rtab_range_pages(uint64_t base, uint64_t end, uint64_t gs,
			       uint32_t *lo_p, uint32_t *hi_p)
{
	*lo_p = (gh_rtab_max(base, gs) - gs) >> GH_REG_PAGE_SHIFT;
	*hi_p = (gh_rtab_min(end, gs + GH_REG_GRAN) - 1 - gs) >>
		GH_REG_PAGE_SHIFT;
}

static void gh_rtab_ent_pages(const struct gh_rtab_ent *e, uint64_t gs,
			     uint32_t *lo_p, uint32_t *hi_p)
{
	gh_rtab_range_pages(e->base, gh_rtab_ent_end(e), gs, lo_p, hi_p);
}

/*
 * [base, end) touches only pages of the shared granule @gs that no
 * allocation touches, and its page leaves @f are valid (so their owners
 * are every allocation touching each page): it overlaps nothing there and
 * the page leaves stay valid with it.
 */
bool gh_rtab_pages_free(const struct gh_rtab_fine *f, uint64_t gs,
			       uint64_t base, uint64_t end)
{
	uint32_t k, lo, hi;

	if (!f || !f->valid)
		return false;
	gh_rtab_range_pages(base, end, gs, &lo, &hi);
	for (k = lo; k <= hi; k++)
		if (f->owner[k])
			return false;
	return true;
}

static void gh_rtab_fine_set(struct gh_rtab_fine *f, uint32_t k,
			    const struct gh_rtab_ent *e)
{
	uint64_t gen = e ? e->gen : 0;

	if (f->owner[k] == gen)
		return;
	f->owner[k] = gen;
	gh_rtab_leaf_set(&f->leaf[k], e, 0, 0);
}

/*
 * Bring the page leaves of granule @gs in line with its next node, @n
 * with @count items, which differs from the published one by @add or
 * @del: true when no page has two owners (the leaves are then valid),
 * false if one has (leaves left as they are, to be rebuilt once valid).
 * Only the pages of @add or @del change when the leaves were valid.
 */
static bool gh_rtab_fine_update(struct gh_rtab_fine *f, struct gh_rtab_node *n,
			       uint32_t count, uint64_t gs,
			       const struct gh_rtab_ent *add,
			       const struct gh_rtab_ent *del)
{
	const struct gh_rtab_ent *own[GH_REG_FINE_SLOTS];
	uint32_t i, k, lo, hi;

	if (f->valid) {
		gh_rtab_ent_pages(add ? add : del, gs, &lo, &hi);
		for (k = lo; k <= hi && add; k++)
			if (f->owner[k])
				goto invalid;
		for (k = lo; k <= hi; k++)
			gh_rtab_fine_set(f, k, add);
		return true;
	}
	memset(own, 0, sizeof(own));
	for (i = 0; i < count; i++) {
		const struct gh_rtab_ent *e = gh_rtab_node_ent(n, i);

		gh_rtab_ent_pages(e, gs, &lo, &hi);
		for (k = lo; k <= hi; k++) {
			if (own[k])
				goto invalid;
			own[k] = e;
		}
	}
	for (k = 0; k < GH_REG_FINE_SLOTS; k++)
		gh_rtab_fine_set(f, k, own[k]);
	f->valid = 1;
	return true;
invalid:
	f->valid = 0;
	return false;
}

/*
 * Bring the slot leaves @sl of a granule in line with its next node @n
 * (only the slots whose owner changes are rewritten): true when they are
 * valid, that is when @n's slot index is.
 */
static bool gh_rtab_slots_sync(struct gh_rtab_slots *sl,
			      struct gh_rtab_node *n)
{
	const uint64_t *slot;

	if (!sl || n->cls < GH_REG_NODE_IDX_CLS || !n->direct)
		return false;
	slot = gh_rtab_node_slots(n);
	for (uint32_t k = 0; k < GH_REG_NODE_SLOTS; k++) {
		const struct gh_rtab_ent *e = (const struct gh_rtab_ent *)slot[k];
		uint64_t gen = e ? e->gen : 0;

		if (sl->owner[k] != gen) {
			sl->owner[k] = gen;
			gh_rtab_leaf_set(&sl->leaf[k], e, 0, 0);
		}
	}
	return true;
}

/*
 * Publish node @n in sub slot @g; @fine: its page leaves are valid, else
 * @slotted: its slot leaves are.  Otherwise the granule's leaf names the
 * node's slot index when that is valid, so that a lookup there skips the
 * node's header.
 */
static void gh_rtab_sub_set_node(struct gh_rtab_sub *s, uint32_t g,
				struct gh_rtab_node *n, bool fine,
				bool slotted)
{
	uint64_t v = (uint64_t)n | GH_REG_SLOT_NODE;
	struct gh_rtab_leaf *l = &s->leaf[g];

	s->used += s->slot[g] == 0;
	s->slot[g] = v;
	GH_ST(&l->seq, l->seq + 1);
	GH_FENCE_REL();
	GH_ST(&l->base, v);
	GH_ST(&l->size, 0);
	GH_ST(&l->gen, fine ? (uint64_t)s->fine[g] :
		       slotted ? (uint64_t)s->slots[g] | GH_REG_LEAF_SLOTS : 0);
	GH_ST(&l->ctx, !fine && n->direct ?
		       (uint64_t)gh_rtab_node_slots(n) : 0);
	GH_ST_REL(&l->seq, l->seq + 1);
}

/*
 * While a granule's page leaves are valid, lookups read them and never its
 * node (a reader holding an older leaf that named the node validates the
 * node's sequence as well as the leaf's): add (@add) or remove @e in place
 * under the node's sequence instead of copying the node, which saves the
 * copy and the cache lines of a second node.  False, having changed
 * nothing, when the page leaves would not stay valid or the node has no
 * room.
 */
static bool gh_rtab_slot_inplace(struct gh_rtab_sub *sub, uint32_t g,
				 uint64_t gs, struct gh_rtab_node *n,
				 struct gh_rtab_ent *e, bool add)
{
	struct gh_rtab_fine *f = sub->fine[g];
	uint64_t *base = gh_rtab_node_base(n), *ents = gh_rtab_node_ents(n);
	uint32_t cnt = n->n, i, k, lo, hi;

	if (add ? cnt >= 1u << n->cls ||
		  !gh_rtab_pages_free(f, gs, e->base, gh_rtab_ent_end(e)) :
		  cnt <= 2 || !f || !f->valid)
		return false;
	gh_rtab_ent_pages(e, gs, &lo, &hi);
	i = gh_rtab_node_floor(n, e->base);
	gh_rtab_node_write_begin(n);
	if (add) {
		i = i == cnt ? 0 : i + 1;
		for (k = cnt; k > i; k--) {
			GH_ST(&base[k], base[k - 1]);
			GH_ST(&ents[k], ents[k - 1]);
		}
		gh_rtab_node_set(n, i, e);
		cnt++;
	} else {
		if (i == cnt || ents[i] != (uint64_t)e)
			__builtin_trap();	/* registry corrupted */
		for (k = i; k + 1 < cnt; k++) {
			GH_ST(&base[k], base[k + 1]);
			GH_ST(&ents[k], ents[k + 1]);
		}
		cnt--;
	}
	GH_ST(&n->n, cnt);
	GH_ST(&n->direct, 0);	/* no slot index while page leaves serve */
	GH_ST_REL(&n->seq, n->seq + 1);
	for (k = lo; k <= hi; k++)
		gh_rtab_fine_set(f, k, add ? e : NULL);
	gh_rtab_sub_set_node(sub, g, n, true, false);
	return true;
}

/* Add @e to a shared granule slot; its node class was reserved. */
void gh_rtab_slot_add(struct gh_rtab_sub *sub, uint32_t g, uint64_t gs,
			    struct gh_rtab_ent *e)
{
	struct gh_rtab_shard *sh = gh_rtab_shard_of(gs);
	uint64_t sv = sub->slot[g];
	struct gh_rtab_node *old = NULL, *n;
	uint32_t cnt = 0, k = 0;
	bool fine;

	if (!sv) {
		gh_rtab_sub_set(sub, g, (uint64_t)e);
		return;
	}
	if (sv & GH_REG_SLOT_NODE) {
		old = (struct gh_rtab_node *)(sv & ~GH_REG_SLOT_NODE);
		if (gh_rtab_slot_inplace(sub, g, gs, old, e, true))
			return;
		cnt = old->n;
	} else {
		cnt = 1;
	}
	n = gh_rtab_node_pop(sh, gh_rtab_node_cls_for(cnt + 1));
	gh_rtab_node_write_begin(n);
	if (old) {
		/* Items before e, e, the rest: no entry is read. */
		uint32_t at = gh_rtab_node_floor(old, e->base);

		at = at == cnt ? 0 : at + 1;
		gh_rtab_node_copy(n, 0, old, 0, at);
		gh_rtab_node_set(n, at, e);
		gh_rtab_node_copy(n, at + 1, old, at, cnt - at);
		k = cnt + 1;
	} else {
		struct gh_rtab_ent *o = (struct gh_rtab_ent *)sv;

		gh_rtab_node_set(n, o->base < e->base ? 1 : 0, e);
		gh_rtab_node_set(n, o->base < e->base ? 0 : 1, o);
		k = 2;
	}
	fine = gh_rtab_fine_update(sub->fine[g], n, k, gs, e, NULL);
	gh_rtab_node_write_end(n, k, gs, old, e, NULL, !fine);
	gh_rtab_sub_set_node(sub, g, n, fine,
			     !fine && gh_rtab_slots_sync(sub->slots[g], n));
	if (old)
		gh_rtab_node_push(sh, old);
}

/* Remove @e from granule slot @g; never allocates (see the top). */
void gh_rtab_slot_del(struct gh_rtab_sub *sub, uint32_t g, uint64_t gs,
			    struct gh_rtab_ent *e)
{
	struct gh_rtab_shard *sh = gh_rtab_shard_of(gs);
	uint64_t sv = sub->slot[g];
	struct gh_rtab_node *old, *n;
	uint32_t cnt, i, k = 0, cls;
	bool fine;

	if (sv == (uint64_t)e) {
		gh_rtab_sub_set(sub, g, 0);
		return;
	}
	if (!(sv & GH_REG_SLOT_NODE))
		__builtin_trap();	/* registry corrupted */
	old = (struct gh_rtab_node *)(sv & ~GH_REG_SLOT_NODE);
	cnt = old->n;
	if (cnt == 2) {
		struct gh_rtab_ent *o = gh_rtab_node_ent(old, 0);

		if (o == e)
			o = gh_rtab_node_ent(old, 1);
		gh_rtab_sub_set(sub, g, (uint64_t)o);
		gh_rtab_node_push(sh, old);
		return;
	}
	if (gh_rtab_slot_inplace(sub, g, gs, old, e, false))
		return;
	/* Shrink when a smaller class has a spare node, else same class. */
	cls = gh_rtab_node_cls_for(cnt - 1);
	if (cls == old->cls || sh->node_nfree[cls] < 2)
		cls = old->cls;
	i = gh_rtab_node_floor(old, e->base);
	if (i == cnt || gh_rtab_node_ent(old, i) != e)
		__builtin_trap();	/* registry corrupted */
	n = gh_rtab_node_pop(sh, cls);
	gh_rtab_node_write_begin(n);
	gh_rtab_node_copy(n, 0, old, 0, i);
	gh_rtab_node_copy(n, i, old, i + 1, cnt - i - 1);
	k = cnt - 1;
	fine = gh_rtab_fine_update(sub->fine[g], n, k, gs, NULL, e);
	gh_rtab_node_write_end(n, k, gs, old, NULL, e, !fine);
	gh_rtab_sub_set_node(sub, g, n, fine,
			     !fine && gh_rtab_slots_sync(sub->slots[g], n));
	gh_rtab_node_push(sh, old);
}
