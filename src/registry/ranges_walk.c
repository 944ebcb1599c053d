/* SPDX-License-Identifier: MIT */
/*
 * The registry's walks for one entry: what overlaps a range, the entry
 * at a base, the tables and nodes an insert needs created first, then
 * the slots it covers published or unpublished.  Writers only, with the
 * shards of the range held (ranges_impl.h).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

#include "ranges_impl.h"

static inline uint32_t gh_rtab_gran_index(uint64_t a)
{
	return (a >> GH_REG_GRAN_SHIFT) & (GH_REG_SUB_SLOTS - 1);
}

/* Entries in sub slot @sv. */
static uint32_t gh_rtab_slot_count(uint64_t sv)
{
	if (!sv)
		return 0;
	if (!(sv & GH_REG_SLOT_NODE))
		return 1;
	return ((struct gh_rtab_node *)(sv & ~GH_REG_SLOT_NODE))->n;
}

/* The first entry of sub slot @sv overlapping [a, b), or NULL. */
static struct gh_rtab_ent *gh_rtab_slot_overlap(uint64_t sv, uint64_t a,
					      uint64_t b)
{
	struct gh_rtab_node *n;
	struct gh_rtab_ent *e;
	uint32_t i;

	if (!(sv & GH_REG_SLOT_NODE)) {
		e = (struct gh_rtab_ent *)sv;
		return e->base < b && gh_rtab_ent_end(e) > a ? e : NULL;
	}
	/*
	 * Items are sorted and disjoint: the first overlap is the last item
	 * based at or below a, else the one after it.
	 */
	n = (struct gh_rtab_node *)(sv & ~GH_REG_SLOT_NODE);
	i = gh_rtab_node_floor(n, a);
	if (i < n->n) {
		e = gh_rtab_node_ent(n, i);
		if (e->base < b && gh_rtab_ent_end(e) > a)
			return e;
		i++;
	} else {
		i = 0;
	}
	if (i < n->n) {
		e = gh_rtab_node_ent(n, i);
		if (e->base < b && gh_rtab_ent_end(e) > a)
			return e;
	}
	return NULL;
}

/*
 * The live entry with the lowest base that overlaps [a, b), or NULL
 * (b <= 2^57).  Skips absent dirs and empty tables, so huge intervals
 * are cheap.
 */
struct gh_rtab_ent *gh_rtab_first_overlap(uint64_t a, uint64_t b)
{
	uint64_t ws = a & ~(GH_REG_WIN - 1);

	for (; ws < b; ws += GH_REG_WIN) {
		struct gh_rtab_dir *d = gh_rtab_dir_peek(ws >> GH_REG_DIR_SHIFT);
		uint64_t dv, lo, hi, rs;
		struct gh_rtab_mid *m;

		if (!d) {
			/* Next top index; the loop adds one window. */
			ws = (((ws >> GH_REG_DIR_SHIFT) + 1) <<
			      GH_REG_DIR_SHIFT) - GH_REG_WIN;
			continue;
		}
		/* Other shards may create the mid table or count in it. */
		dv = GH_LD_ACQ(&d->slot[(ws >> GH_REG_WIN_SHIFT) & 0xffff]);
		if (!dv)
			continue;
		if (dv & GH_REG_WHOLE)
			return (struct gh_rtab_ent *)(dv & ~GH_REG_WHOLE);
		m = (struct gh_rtab_mid *)dv;
		if (!GH_LD(&m->used))
			continue;
		lo = gh_rtab_max(a, ws);
		hi = gh_rtab_min(b, ws + GH_REG_WIN);
		for (rs = lo & ~(GH_REG_REG - 1); rs < hi; rs += GH_REG_REG) {
			uint64_t mv = m->slot[(rs >> GH_REG_REG_SHIFT) &
					      (GH_REG_MID_SLOTS - 1)];
			uint64_t rlo, rhi, gs;
			struct gh_rtab_sub *s;

			if (!mv)
				continue;
			if (mv & GH_REG_WHOLE)
				return (struct gh_rtab_ent *)(mv & ~GH_REG_WHOLE);
			s = (struct gh_rtab_sub *)mv;
			if (!s->used)
				continue;
			rlo = gh_rtab_max(lo, rs);
			rhi = gh_rtab_min(hi, rs + GH_REG_REG);
			for (gs = rlo & ~(GH_REG_GRAN - 1); gs < rhi;
			     gs += GH_REG_GRAN) {
				uint64_t sv = s->slot[(gs >> GH_REG_GRAN_SHIFT) &
						      (GH_REG_SUB_SLOTS - 1)];
				struct gh_rtab_ent *e;

				if (!sv)
					continue;
				e = gh_rtab_slot_overlap(sv, rlo, rhi);
				if (e)
					return e;
			}
		}
	}
	return NULL;
}

/*
 * The sub table of the region holding @a (< 2^57), or NULL; *whole_p gets
 * the entry covering @a's whole window or region when one does.  What
 * gh_rtab_first_overlap() walks, for one granule: the writer's fast path
 * for the small allocations whose driver calls are fast.
 */
static struct gh_rtab_sub *gh_rtab_region_of(uint64_t a,
					    struct gh_rtab_ent **whole_p)
{
	struct gh_rtab_dir *d = gh_rtab_dir_peek(a >> GH_REG_DIR_SHIFT);
	uint64_t v;

	*whole_p = NULL;
	if (!d)
		return NULL;
	v = GH_LD_ACQ(&d->slot[(a >> GH_REG_WIN_SHIFT) & 0xffff]);
	if (v && !(v & GH_REG_WHOLE))
		v = ((struct gh_rtab_mid *)v)->slot[(a >> GH_REG_REG_SHIFT) &
						    (GH_REG_MID_SLOTS - 1)];
	if (v & GH_REG_WHOLE) {
		*whole_p = (struct gh_rtab_ent *)(v & ~GH_REG_WHOLE);
		return NULL;
	}
	return (struct gh_rtab_sub *)v;
}

/* The live entry whose base is exactly @base, or NULL. */
struct gh_rtab_ent *gh_rtab_find_base(uint64_t base)
{
	struct gh_rtab_ent *e;
	struct gh_rtab_sub *s;
	uint64_t sv;

	if (base >= GH_REG_VA_END)
		return NULL;
	s = gh_rtab_region_of(base, &e);
	if (s) {
		sv = s->slot[gh_rtab_gran_index(base)];
		e = sv ? gh_rtab_slot_overlap(sv, base, base + 1) : NULL;
	}
	return e && e->base == base ? e : NULL;
}

/*
 * Publish (@add) or unpublish @e in every slot it covers.  Everything it
 * needs when adding was created beforehand by gh_rtab_prepare().
 */
void gh_rtab_publish(struct gh_rtab_ent *e, bool add)
{
	uint64_t base = e->base, end = gh_rtab_ent_end(e);
	uint64_t ws = base & ~(GH_REG_WIN - 1);

	if (gh_rtab_one_gran(base, end)) {
		uint64_t gs = base & ~(GH_REG_GRAN - 1);
		struct gh_rtab_mid *m = GH_LD_ACQ(&gh_rtab_dir_peek(
			base >> GH_REG_DIR_SHIFT)->mid[(base >> GH_REG_WIN_SHIFT) &
							0xffff]);
		struct gh_rtab_sub *s = m->sub[(base >> GH_REG_REG_SHIFT) &
					       (GH_REG_MID_SLOTS - 1)];
		uint32_t si = gh_rtab_gran_index(base);

		if (base == gs && end - gs == GH_REG_GRAN)
			gh_rtab_sub_set(s, si, add ? (uint64_t)e : 0);
		else if (add)
			gh_rtab_slot_add(s, si, gs, e);
		else
			gh_rtab_slot_del(s, si, gs, e);
		return;
	}
	for (; ws < end; ws += GH_REG_WIN) {
		struct gh_rtab_dir *d = gh_rtab_dir_peek(ws >> GH_REG_DIR_SHIFT);
		uint32_t di = (ws >> GH_REG_WIN_SHIFT) & 0xffff;
		uint64_t lo = gh_rtab_max(base, ws);
		uint64_t hi = gh_rtab_min(end, ws + GH_REG_WIN);
		struct gh_rtab_mid *m = GH_LD_ACQ(&d->mid[di]);
		uint64_t rs;

		if (lo == ws && hi == ws + GH_REG_WIN) {
			GH_ST_REL(&d->slot[di], add ? (uint64_t)e | GH_REG_WHOLE
						    : (uint64_t)m);
			continue;
		}
		for (rs = lo & ~(GH_REG_REG - 1); rs < hi; rs += GH_REG_REG) {
			uint32_t mi = (rs >> GH_REG_REG_SHIFT) &
				      (GH_REG_MID_SLOTS - 1);
			uint64_t rlo = gh_rtab_max(lo, rs);
			uint64_t rhi = gh_rtab_min(hi, rs + GH_REG_REG);
			struct gh_rtab_sub *s = m->sub[mi];
			uint64_t gs;

			if (rlo == rs && rhi == rs + GH_REG_REG) {
				gh_rtab_mid_set(m, mi, add ?
					       (uint64_t)e | GH_REG_WHOLE :
					       (uint64_t)s);
				continue;
			}
			for (gs = rlo & ~(GH_REG_GRAN - 1); gs < rhi;
			     gs += GH_REG_GRAN) {
				uint32_t si = (gs >> GH_REG_GRAN_SHIFT) &
					      (GH_REG_SUB_SLOTS - 1);

				if (base <= gs && end - gs >= GH_REG_GRAN)
					gh_rtab_sub_set(s, si, add ? (uint64_t)e : 0);
				else if (add)
					gh_rtab_slot_add(s, si, gs, e);
				else
					gh_rtab_slot_del(s, si, gs, e);
			}
		}
	}
}

/* [base, end) starts or ends inside a page of granule @gs. */
static bool gh_rtab_subpage(uint64_t gs, uint64_t base, uint64_t end)
{
	return (base > gs && (base & ((1ull << GH_REG_PAGE_SHIFT) - 1))) ||
	       (end < gs + GH_REG_GRAN &&
		(end & ((1ull << GH_REG_PAGE_SHIFT) - 1)));
}

/*
 * Reserve node capacity for granule @gs, shared by [base, end), in its
 * shard; @need counts what this insert takes from that shard.
 */
static int gh_rtab_reserve_gran(struct gh_rtab_sub *s, uint64_t gs,
				uint64_t base, uint64_t end, uint32_t need[])
{
	uint32_t cnt, cls, g = gh_rtab_gran_index(gs);

	if (!s)
		return -ENOMEM;
	cnt = gh_rtab_slot_count(s->slot[g]);
	if (!cnt)
		return 0;
	if (!s->fine[g]) {
		/* About to be shared: its page leaves (zeroed, owner none). */
		struct gh_rtab_fine *f = gh_rtab_carve(sizeof(*f));

		if (!f)
			return -ENOMEM;
		GH_ST(&s->fine[g], f);	/* lookups prefetch through it */
	}
	if (!s->slots[g]) {
		const struct gh_rtab_ent *o = (const struct gh_rtab_ent *)
			(s->slot[g] & GH_REG_SLOT_NODE ? 0 : s->slot[g]);

		/* Buffers share pages here: its slot leaves (owner none). */
		if (gh_rtab_subpage(gs, base, end) ||
		    (o && gh_rtab_subpage(gs, o->base, gh_rtab_ent_end(o)))) {
			struct gh_rtab_slots *sl = gh_rtab_carve(sizeof(*sl));

			if (!sl)
				return -ENOMEM;
			GH_ST(&s->slots[g], sl);
		}
	}
	/* Keep one spare for later removals from this class. */
	cls = gh_rtab_node_cls_for(cnt + 1);
	need[cls]++;
	return gh_rtab_node_reserve(gh_rtab_shard_of(gs), cls, need[cls] + 1);
}

/* Create every table and node that publishing [base, end) needs. */
int gh_rtab_prepare(uint64_t base, uint64_t end)
{
	uint32_t need[2][GH_REG_NODE_MAX_CLS + 1] = { { 0 } };
	uint64_t g0 = base & ~(GH_REG_GRAN - 1);
	uint64_t g1 = (end - 1) & ~(GH_REG_GRAN - 1);
	uint64_t ws = base & ~(GH_REG_WIN - 1);
	int rc;

	for (; ws < end; ws += GH_REG_WIN) {
		uint64_t lo = gh_rtab_max(base, ws);
		uint64_t hi = gh_rtab_min(end, ws + GH_REG_WIN);
		uint64_t rs;

		if (lo == ws && hi == ws + GH_REG_WIN) {
			if (!gh_rtab_dir_get(ws >> GH_REG_DIR_SHIFT))
				return -ENOMEM;
			continue;
		}
		if (!gh_rtab_mid_get(ws))
			return -ENOMEM;
		for (rs = lo & ~(GH_REG_REG - 1); rs < hi; rs += GH_REG_REG)
			if ((gh_rtab_max(lo, rs) != rs ||
			     gh_rtab_min(hi, rs + GH_REG_REG) != rs + GH_REG_REG) &&
			    !gh_rtab_sub_get(rs))
				return -ENOMEM;
	}
	if (!(base <= g0 && end - g0 >= GH_REG_GRAN)) {
		rc = gh_rtab_reserve_gran(gh_rtab_sub_get(g0 & ~(GH_REG_REG - 1)),
					  g0, base, end, need[0]);
		if (rc)
			return rc;
	}
	if (g1 != g0 && !(base <= g1 && end - g1 >= GH_REG_GRAN)) {
		rc = gh_rtab_reserve_gran(gh_rtab_sub_get(g1 & ~(GH_REG_REG - 1)),
					  g1, base, end,
					  need[gh_rtab_shard_of(g0) !=
					       gh_rtab_shard_of(g1)]);
		if (rc)
			return rc;
	}
	return 0;
}

/*
 * gh_rtab_first_overlap() and gh_rtab_prepare() for [base, end) inside
 * one granule: -EEXIST, -ENOMEM or 0.
 */
int gh_rtab_prepare_gran(uint64_t base, uint64_t end)
{
	uint32_t need[GH_REG_NODE_MAX_CLS + 1] = { 0 };
	uint64_t gs = base & ~(GH_REG_GRAN - 1);
	struct gh_rtab_ent *whole;
	struct gh_rtab_sub *s = gh_rtab_region_of(base, &whole);
	uint64_t sv;

	if (whole)
		return -EEXIST;
	if (s) {
		uint32_t g = gh_rtab_gran_index(base);
		struct gh_rtab_node *n;

		sv = s->slot[g];
		n = (struct gh_rtab_node *)(sv & ~GH_REG_SLOT_NODE);
		/* Joins the node in place: no search, nothing to reserve. */
		if ((sv & GH_REG_SLOT_NODE) && n->n < 1u << n->cls &&
		    gh_rtab_pages_free(s->fine[g], gs, base, end))
			return 0;
		if (sv && gh_rtab_slot_overlap(sv, base, end))
			return -EEXIST;
	} else {
		s = gh_rtab_sub_get(base & ~(GH_REG_REG - 1));
	}
	if (base == gs && end - gs == GH_REG_GRAN)
		return s ? 0 : -ENOMEM;
	return gh_rtab_reserve_gran(s, gs, base, end, need);
}

/* Unpublish @e, kill it and free it. */
/* The caller accounts the bytes (gh_rtab_bytes_sub). */
void gh_rtab_unlink(struct gh_rtab_ent *e)
{
	struct gh_rtab_shard *sh = gh_rtab_shard_of(e->base);

	gh_rtab_publish(e, false);
	/* Kill: readers holding a stale pointer now see a dead entry. */
	GH_ST(&e->seq, e->seq + 1);
	GH_FENCE_REL();
	GH_ST(&e->size, 0);
	GH_ST_REL(&e->seq, e->seq + 1);
	gh_rtab_ent_release(sh, e);
	GH_ST(&sh->count, sh->count - 1);
}
