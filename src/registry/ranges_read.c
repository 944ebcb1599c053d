/* SPDX-License-Identifier: MIT */
/*
 * The registry's lookups: lock-free, writing nothing, retrying on an
 * inconsistent snapshot.  The layout they walk and why what they read is
 * an answer: ranges_impl.h.  The hot path: gh_registry_lookup() and its
 * helpers stay in this one file, inlined.
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ranges_impl.h"

/*
 * Snapshot @e into @r.  Returns true when the snapshot is consistent and
 * the entry live; *seq_p gets the sequence it was read at.
 */
static inline bool gh_rtab_ent_snap(const struct gh_rtab_ent *e,
				   struct gh_range *r, uint64_t *seq_p)
{
	uint64_t s1, s2, meta;

	s1 = GH_LD_ACQ(&e->seq);
	r->base = GH_LD(&e->base);
	r->size = GH_LD(&e->size);
	r->gen = GH_LD(&e->gen);
	r->ctx = GH_LD(&e->ctx);
	r->pool = GH_LD(&e->pool);
	meta = GH_LD(&e->meta);
	r->buffer_id = GH_LD(&e->buffer_id);
	GH_FENCE_ACQ();
	s2 = GH_LD(&e->seq);
	r->dev = (int32_t)(uint32_t)meta;
	r->kind = (uint16_t)(meta >> 32);
	r->flags = (uint16_t)(meta >> 48);
	*seq_p = s1;
	return s1 == s2 && !(s1 & 1) && r->size;
}

/*
 * Snapshot leaf @l into @r (size 0: no single owner, see the leaf).  False
 * when a writer was changing it.
 */
static inline bool gh_rtab_leaf_snap(const struct gh_rtab_leaf *l,
				    struct gh_range *r, uint64_t *seq_p)
{
	uint64_t s1, s2, meta;

	s1 = GH_LD_ACQ(&l->seq);
	r->base = GH_LD(&l->base);
	r->size = GH_LD(&l->size);
	r->gen = GH_LD(&l->gen);
	r->ctx = GH_LD(&l->ctx);
	r->pool = GH_LD(&l->pool);
	meta = GH_LD(&l->meta);
	r->buffer_id = GH_LD(&l->buffer_id);
	GH_FENCE_ACQ();
	s2 = GH_LD(&l->seq);
	r->dev = (int32_t)(uint32_t)meta;
	r->kind = (uint16_t)(meta >> 32);
	r->flags = (uint16_t)(meta >> 48);
	*seq_p = s1;
	return s1 == s2 && !(s1 & 1);
}

static inline int gh_rtab_found(const struct gh_range *r, uint64_t last)
{
	return last - r->base < r->size ? 0 : -ERANGE;
}

/* gh_registry_absent() reads the first two levels with ranges.h's names. */
_Static_assert(GH_REGISTRY_WIN0_END == 1ull << GH_REG_DIR_SHIFT &&
	       GH_REGISTRY_WIN_SHIFT == GH_REG_WIN_SHIFT &&
	       GH_REGISTRY_REG_SHIFT == GH_REG_REG_SHIFT &&
	       GH_REGISTRY_REGS == GH_REG_MID_SLOTS &&
	       GH_REGISTRY_SLOT_WHOLE == GH_REG_WHOLE &&
	       offsetof(struct gh_rtab_dir, slot) == 0 &&
	       offsetof(struct gh_rtab_mid, slot) == 0,
	       "ranges.h's view of the index's first levels");

/* gh_registry_lookup() for every case, retrying until consistent. */
static __attribute__((noinline)) int
gh_rtab_lookup_full(uint64_t ptr, uint64_t len, struct gh_range *out_p)
{
	const struct gh_rtab_leaf *leaf;
	const uint64_t *dslot;
	struct gh_rtab_ent *e;
	struct gh_rtab_node *node;
	struct gh_range *r = out_p;
	uint64_t dv, mv, seq, lseq, nseq, last;

	if (GH_REG_LIKELY(ptr < (1ull << GH_REG_DIR_SHIFT))) {
		dslot = &gh_rtab_dir0.slot[ptr >> GH_REG_WIN_SHIFT];
	} else {
		struct gh_rtab_dir *d;

		if (ptr >= GH_REG_VA_END)
			return -ENOENT;
		d = GH_LD_ACQ(&gh_rtab_dirhi[ptr >> GH_REG_DIR_SHIFT]);
		if (!d)
			return -ENOENT;
		dslot = &d->slot[(ptr >> GH_REG_WIN_SHIFT) & 0xffff];
	}
	last = ptr + (len ? len - 1 : 0);
	if (GH_REG_UNLIKELY(last < ptr))
		last = UINT64_MAX;	/* wraps: runs past any range */

retry:
	dv = GH_LD_ACQ(dslot);
	if (!dv)
		return -ENOENT;
	if (GH_REG_UNLIKELY(dv & GH_REG_WHOLE)) {
		mv = dv;
		goto whole;
	}
	mv = GH_LD_ACQ(&((const struct gh_rtab_mid *)dv)->slot[
		(ptr >> GH_REG_REG_SHIFT) & (GH_REG_MID_SLOTS - 1)]);
	if (!mv)
		return -ENOENT;
	if (mv & GH_REG_WHOLE) {
whole:
		/* The entry covers the whole window/region if still there. */
		e = (struct gh_rtab_ent *)(mv & ~GH_REG_WHOLE);
		if (GH_REG_LIKELY(gh_rtab_ent_snap(e, r, &seq)) &&
		    GH_REG_LIKELY(ptr - r->base < r->size))
			return gh_rtab_found(r, last);
		goto retry;
	}
	{
		const struct gh_rtab_sub *sub = (const struct gh_rtab_sub *)mv;
		uint32_t g = (ptr >> GH_REG_GRAN_SHIFT) & (GH_REG_SUB_SLOTS - 1);
		const struct gh_rtab_fine *pf = GH_LD(&sub->fine[g]);
		const struct gh_rtab_slots *ps = GH_LD(&sub->slots[g]);

		/*
		 * A shared granule's page or slot leaf is read after its leaf
		 * names it: fetch both lines now so that the two misses
		 * overlap instead of following each other.
		 */
		if (pf)
			__builtin_prefetch(&pf->leaf[(ptr >> GH_REG_PAGE_SHIFT) &
						     (GH_REG_FINE_SLOTS - 1)]);
		if (ps)
			__builtin_prefetch(&ps->leaf[(ptr >> GH_REG_SLOT_SHIFT) &
						     (GH_REG_NODE_SLOTS - 1)]);
		leaf = &sub->leaf[g];
	}
	if (GH_REG_UNLIKELY(!gh_rtab_leaf_snap(leaf, r, &lseq)))
		goto retry;
	if (GH_REG_LIKELY(r->size)) {
		/* The granule's only allocation: the answer, or a miss. */
		if (GH_REG_LIKELY(ptr - r->base < r->size))
			return gh_rtab_found(r, last);
		return -ENOENT;
	}
	if (!r->base)
		return -ENOENT;
	if (GH_REG_LIKELY(r->gen)) {
		/* Page or slot leaves: valid while the granule's leaf holds. */
		const struct gh_rtab_leaf *pl = (r->gen & GH_REG_LEAF_SLOTS) ?
			&((const struct gh_rtab_slots *)
			  (r->gen & ~GH_REG_LEAF_SLOTS))->leaf[
				(ptr >> GH_REG_SLOT_SHIFT) &
				(GH_REG_NODE_SLOTS - 1)] :
			&((const struct gh_rtab_fine *)r->gen)->leaf[
				(ptr >> GH_REG_PAGE_SHIFT) &
				(GH_REG_FINE_SLOTS - 1)];

		if (GH_REG_UNLIKELY(!gh_rtab_leaf_snap(pl, r, &seq)))
			goto retry;
		GH_FENCE_ACQ();
		if (GH_REG_UNLIKELY(GH_LD(&leaf->seq) != lseq))
			goto retry;
		if (r->size && ptr - r->base < r->size)
			return gh_rtab_found(r, last);
		return -ENOENT;
	}
	if (r->ctx) {
		/* The node's slot index: the only entry that can cover ptr. */
		e = (struct gh_rtab_ent *)GH_LD(&((const uint64_t *)r->ctx)[
			(ptr >> GH_REG_SLOT_SHIFT) & (GH_REG_NODE_SLOTS - 1)]);
		if (e && GH_REG_UNLIKELY(!gh_rtab_ent_snap(e, r, &seq)))
			goto retry;
		GH_FENCE_ACQ();
		if (GH_REG_UNLIKELY(GH_LD(&leaf->seq) != lseq))
			goto retry;
		if (e && ptr - r->base < r->size)
			return gh_rtab_found(r, last);
		return -ENOENT;
	}

	/*
	 * Shared granule without page leaves or slot index (a node published
	 * so has direct == 0): binary search for the last base <= ptr.
	 */
	node = (struct gh_rtab_node *)(r->base & ~GH_REG_SLOT_NODE);
	nseq = GH_LD_ACQ(&node->seq);
	{
		const uint64_t *base = gh_rtab_node_base(node);
		uint32_t n = GH_LD(&node->n), lo = 0;

		if (GH_REG_UNLIKELY((nseq & 1) || n == 0 ||
				    n > (1u << node->cls)))
			goto retry;
		while (n > 1) {
			uint32_t half = n / 2;

			if (GH_LD(&base[lo + half]) <= ptr)
				lo += half;
			n -= half;
		}
		if (n && GH_LD(&base[lo]) <= ptr) {
			e = (struct gh_rtab_ent *)GH_LD(&gh_rtab_node_ents(node)[lo]);
			if (GH_REG_UNLIKELY(!e))
				goto retry;
			if (gh_rtab_ent_snap(e, r, &seq) &&
			    ptr - r->base < r->size) {
				GH_FENCE_ACQ();
				if (GH_REG_LIKELY(GH_LD(&node->seq) == nseq))
					return gh_rtab_found(r, last);
				goto retry;
			}
		}
	}
	/* No allocation of this granule covers ptr, if the node held. */
	GH_FENCE_ACQ();
	if (GH_LD_ACQ(&leaf->seq) == lseq && GH_LD(&node->seq) == nseq)
		return -ENOENT;
	goto retry;
}

/*
 * The common cases straight through, with few registers to save: a
 * granule with one owner, a whole-region entry, a shared granule's page
 * or slot leaf.  Anything else, and any inconsistent snapshot, goes to
 * gh_rtab_lookup_full(), which starts over.
 */
int gh_registry_lookup(uint64_t ptr, uint64_t len, struct gh_range *out_p)
{
	const struct gh_rtab_leaf *leaf, *pl;
	const struct gh_rtab_sub *sub;
	struct gh_range *r = out_p;
	uint64_t v, seq, lseq, size, base;
	uint32_t g;

	if (GH_REG_UNLIKELY(ptr >= (1ull << GH_REG_DIR_SHIFT)))
		return gh_rtab_lookup_full(ptr, len, r);
	v = GH_LD_ACQ(&gh_rtab_dir0.slot[ptr >> GH_REG_WIN_SHIFT]);
	if (!v)
		return -ENOENT;
	if (GH_REG_UNLIKELY(v & GH_REG_WHOLE))
		return gh_rtab_lookup_full(ptr, len, r);
	v = GH_LD_ACQ(&((const struct gh_rtab_mid *)v)->slot[
		(ptr >> GH_REG_REG_SHIFT) & (GH_REG_MID_SLOTS - 1)]);
	if (!v)
		return -ENOENT;
	if (v & GH_REG_WHOLE) {
		if (GH_REG_UNLIKELY(!gh_rtab_ent_snap(
			(const struct gh_rtab_ent *)(v & ~GH_REG_WHOLE), r, &seq)) ||
		    GH_REG_UNLIKELY(ptr - r->base >= r->size))
			return gh_rtab_lookup_full(ptr, len, r);
		goto found;
	}
	sub = (const struct gh_rtab_sub *)v;
	g = (ptr >> GH_REG_GRAN_SHIFT) & (GH_REG_SUB_SLOTS - 1);
	v = (uint64_t)GH_LD(&sub->fine[g]);
	if (v)
		__builtin_prefetch(&((const struct gh_rtab_fine *)v)->leaf[
			(ptr >> GH_REG_PAGE_SHIFT) & (GH_REG_FINE_SLOTS - 1)]);
	v = (uint64_t)GH_LD(&sub->slots[g]);
	if (v)
		__builtin_prefetch(&((const struct gh_rtab_slots *)v)->leaf[
			(ptr >> GH_REG_SLOT_SHIFT) & (GH_REG_NODE_SLOTS - 1)]);
	leaf = &sub->leaf[g];
	/* Size, base and gen first: a shared granule needs no more of it. */
	lseq = GH_LD_ACQ(&leaf->seq);
	size = GH_LD(&leaf->size);
	base = GH_LD(&leaf->base);
	v = GH_LD(&leaf->gen);
	if (GH_REG_LIKELY(size)) {
		/* The granule's only allocation: the answer, or a miss. */
		if (GH_REG_UNLIKELY(!gh_rtab_leaf_snap(leaf, r, &seq)) ||
		    GH_REG_UNLIKELY(seq != lseq))
			return gh_rtab_lookup_full(ptr, len, r);
		if (ptr - r->base >= r->size)
			return -ENOENT;
		goto found;
	}
	GH_FENCE_ACQ();
	if (GH_REG_UNLIKELY(GH_LD(&leaf->seq) != lseq || (lseq & 1)))
		return gh_rtab_lookup_full(ptr, len, r);
	if (!base)
		return -ENOENT;
	if (GH_REG_UNLIKELY(!v))
		return gh_rtab_lookup_full(ptr, len, r);
	pl = (v & GH_REG_LEAF_SLOTS) ?
		&((const struct gh_rtab_slots *)(v & ~GH_REG_LEAF_SLOTS))->leaf[
			(ptr >> GH_REG_SLOT_SHIFT) & (GH_REG_NODE_SLOTS - 1)] :
		&((const struct gh_rtab_fine *)v)->leaf[
			(ptr >> GH_REG_PAGE_SHIFT) & (GH_REG_FINE_SLOTS - 1)];
	if (GH_REG_UNLIKELY(!gh_rtab_leaf_snap(pl, r, &seq)))
		return gh_rtab_lookup_full(ptr, len, r);
	GH_FENCE_ACQ();
	if (GH_REG_UNLIKELY(GH_LD(&leaf->seq) != lseq))
		return gh_rtab_lookup_full(ptr, len, r);
	if (!r->size || ptr - r->base >= r->size)
		return -ENOENT;
found:
	if (GH_REG_LIKELY(len <= 1))
		return 0;
	return len - 1 <= r->size - (ptr - r->base) - 1 ? 0 : -ERANGE;
}
