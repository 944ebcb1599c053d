/* SPDX-License-Identifier: MIT */
/*
 * Registry of live GPU allocations: a radix table over 64 KiB granules.
 * Internals are named gh_rtab_* ("registry table"): "reg" elsewhere in
 * the project means a registration.
 *
 * Layout
 *
 *   address bits 56..48  -> top index: dir 0, for the usual 48-bit space,
 *                           is static; dirs 1..511 are mmap'ed on demand
 *   address bits 47..32  -> dir slot: one 4 GiB window
 *   address bits 31..21  -> mid slot: one 2 MiB region (CUDA's VA page)
 *   address bits 20..16  -> sub slot: one 64 KiB granule
 *
 * A dir slot holds 0, a mid table, or an entry tagged GH_REG_WHOLE when one
 * allocation covers the whole window; a mid slot likewise holds 0, a sub
 * table, or a tagged entry covering the whole region.  So a lookup in a
 * 2 MiB-aligned allocation reads dir, mid and entry (the mid tables of a
 * 200 GiB span take 800 KiB), and an 80 GiB allocation costs about 20
 * dir stores and at most 4 K mid stores.  A sub slot holds 0, the entry of
 * the only allocation touching that granule, or a node (tagged
 * GH_REG_SLOT_NODE) listing, sorted by base, every allocation touching a
 * granule that several share (cudaMalloc sub-allocates small buffers, so
 * hundreds can share one granule).  A node of 8 items or more also keeps
 * the entry touching each 512-byte slot of its granule, valid while no
 * slot is touched by two items (CUDA packs small buffers at 512-byte
 * steps), so a lookup there reads one slot instead of binary-searching.
 *
 * Lookups read no sub slot and, where they can, no entry: each granule
 * has a leaf, one cache line, that is a copy of its sole owner's entry,
 * or names its node, or says empty.  A shared granule also has page
 * leaves, one line per 4 KiB page holding the page's owner, used while no
 * page has two owners (allocations of 4 KiB and up; cuMemAlloc on an H100
 * places 4 KiB allocations 4 KiB apart); where buffers under 4 KiB share
 * pages, slot leaves, one line per 512-byte slot, used while the node's
 * slot index is valid; otherwise its leaf names the node's slot index.
 * So a lookup reads dir, mid, then: the leaf (one owner), the leaf and a
 * page or slot leaf (fetched together: the sub table's pointers to them
 * are set once), the leaf, a slot and the entry (small buffers that
 * share a slot), or the entry (whole region).  The price is memory: 2 KiB
 * more per sub table, 1 KiB per shared granule and 9 KiB per granule of
 * small buffers (bench_registry's layout on the H100 host: RSS 33 -> 99
 * MiB at 100 k live, 212 -> 924 MiB at 1 M; chained lookup 200 -> 165 ns
 * and 428 -> 323 ns, the one-miss floor being 103-130 ns; its small
 * buffers on a 2-core VM: 1 M live, 328 -> 197 ns against a 130 ns floor,
 * RSS +280 MiB).
 *
 * Only the first and last granule of an allocation can be shared;
 * everything in between is its alone.  Mid and sub tables and page
 * leaves stay bound to their window, region and granule forever (a
 * whole-cover entry hides them; removing it puts them back).
 *
 * Concurrency
 *
 * Writers of one 2 MiB region serialize on its shard's lock (see
 * gh_rtab_shard), writers of unrelated regions do not.  Readers take no lock and write
 * nothing.  Every location a reader may load is written with __atomic
 * stores and read with __atomic loads, so the sanitizers see no race.
 * Memory is type-stable: dirs, leaves, entries and nodes are mmap'ed and
 * never unmapped, so a stale pointer still points at an object of the
 * same type, and each entry and node carries a sequence number (odd while
 * it is being written) that the reader validates.
 *
 * Leaves are seqlocked the same way and rewritten whenever their slot
 * changes, so a consistent leaf snapshot is what the slot held at that
 * instant.  Page leaves and a node's slot index are read only while the
 * granule's leaf that named them stays unchanged (re-read after): both
 * are written before that leaf is published, and page leaves change in
 * place only in the writer's operation that rewrites the leaf next, so a
 * reader sees either the state the leaf names or that operation's.
 * Entries are written (seq odd..even) before they are published in any
 * slot, their range never changes while they are live (size != 0), and
 * they are killed (size = 0) only after every slot that named them has
 * been cleared.  Nodes that lookups may read are copy-on-write: a changed
 * granule gets a new node, published with one store, and the old one
 * goes back to the free list.  While a granule's page leaves are valid
 * its leaf names them, not the node, so the node is changed in place
 * under its sequence number (a reader holding an older leaf that named
 * the node checks that sequence and the leaf's).  Hence:
 *
 *  - a consistent snapshot of a live entry containing ptr is a correct
 *    answer at the instant it was taken;
 *  - a miss is only reported from a consistent leaf snapshot, or after
 *    re-reading the leaf (and the node's sequence) and finding them
 *    unchanged around the snapshot, so that there was an instant where
 *    the granule held exactly what was read;
 *  - a reader never waits for a writer: an odd sequence means the object
 *    is not published, so the reader re-reads the slot and follows it.
 *
 * Free paths never allocate: a node shrinks into a node of its own class
 * and every class that has live nodes in a shard keeps at least one free
 * node in that shard's reserve (refilled by insert, which may fail with
 * -ENOMEM); page leaves
 * are created by the insert that first shares their granule.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include "base/base.h"
#include "ranges.h"

#define GH_REG_LIKELY(x)	__builtin_expect(!!(x), 1)
#define GH_REG_UNLIKELY(x)	__builtin_expect(!!(x), 0)

#define GH_REG_GRAN_SHIFT	16
#define GH_REG_GRAN		(1ull << GH_REG_GRAN_SHIFT)
#define GH_REG_REG_SHIFT	21
#define GH_REG_REG		(1ull << GH_REG_REG_SHIFT)
#define GH_REG_WIN_SHIFT	32
#define GH_REG_WIN		(1ull << GH_REG_WIN_SHIFT)
#define GH_REG_DIR_SHIFT	48
#define GH_REG_DIR_SLOTS	65536u
#define GH_REG_MID_SLOTS	2048u	/* 2 MiB regions per window */
#define GH_REG_SUB_SLOTS	32u	/* 64 KiB granules per region */
#define GH_REG_TOPS		512u
#define GH_REG_VA_END		(1ull << 57)	/* 5-level paging user space */

#define GH_REG_WHOLE		1ull	/* dir/mid slot: entry covering it */
#define GH_REG_SLOT_NODE	1ull	/* sub slot: shared-granule node */
#define GH_REG_LEAF_SLOTS	1ull	/* leaf gen: slot leaves, not pages */

#define GH_REG_NODE_MIN_CLS	1	/* 2 items */
#define GH_REG_NODE_IDX_CLS	3	/* 8 items and up: slot index */
#define GH_REG_SLOT_SHIFT	9	/* 512-byte slots of a granule */
#define GH_REG_NODE_SLOTS	(GH_REG_GRAN >> GH_REG_SLOT_SHIFT)
#define GH_REG_PAGE_SHIFT	12	/* page leaves of a shared granule */
#define GH_REG_FINE_SLOTS	(GH_REG_GRAN >> GH_REG_PAGE_SHIFT)
#define GH_REG_NODE_MAX_CLS	16	/* 65536 items: 1-byte allocations */
#define GH_REG_ARENA		(2ull << 20)	/* one huge page */
#define GH_REG_ENT_PER_CHUNK	(GH_REG_ARENA / 64)
#define GH_REG_MAX_ENT_CHUNKS	8192u	/* 268 M entries */

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define GH_REG_TSAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define GH_REG_TSAN 1
#endif

#ifndef GH_REG_TSAN
#define GH_LD(p)	__atomic_load_n((p), __ATOMIC_RELAXED)
#define GH_ST(p, v)	__atomic_store_n((p), (v), __ATOMIC_RELAXED)
#define GH_FENCE_ACQ()	__atomic_thread_fence(__ATOMIC_ACQUIRE)
#define GH_FENCE_REL()	__atomic_thread_fence(__ATOMIC_RELEASE)
#else
/*
 * TSan does not model fences: order every access instead, which is
 * stronger than the fenced seqlock, so what TSan checks still holds.
 */
#define GH_LD(p)	__atomic_load_n((p), __ATOMIC_ACQUIRE)
#define GH_ST(p, v)	__atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define GH_FENCE_ACQ()	do { } while (0)
#define GH_FENCE_REL()	do { } while (0)
#endif
#define GH_LD_ACQ(p)	__atomic_load_n((p), __ATOMIC_ACQUIRE)
#define GH_ST_REL(p, v)	__atomic_store_n((p), (v), __ATOMIC_RELEASE)

/* One live (size != 0) or free (size == 0) allocation: one cache line. */
struct gh_rtab_ent {
	uint64_t seq;		/* odd while being written */
	uint64_t base;
	uint64_t size;		/* 0: dead */
	uint64_t gen;
	uint64_t ctx;		/* free list link while dead */
	uint64_t pool;
	uint64_t meta;		/* dev | kind << 32 | flags << 48 */
	uint64_t buffer_id;
} __attribute__((aligned(64)));

/* Granule shared by several allocations; items sorted by base. */
struct gh_rtab_node {
	uint64_t seq;		/* odd while being written */
	uint32_t n;
	uint32_t cls;		/* capacity 1 << cls; fixed when carved */
	struct gh_rtab_node *next_free;	/* writer only */
	uint64_t direct;	/* 1: the slot index below is valid */
	/*
	 * base[cap], then entry pointer[cap], then (classes of
	 * GH_REG_NODE_IDX_CLS and up) the slot index: the entry touching
	 * each 512-byte slot of the granule, or 0.  Valid when no slot is
	 * touched by two items (CUDA sub-allocates at 512-byte steps), so
	 * that a lookup reads one slot instead of binary-searching.
	 */
	uint64_t item[];
};

/*
 * What a lookup reads for one 64 KiB granule: a copy of the entry that is
 * alone in it (size != 0), a tagged node (size 0, base = node | 1, gen =
 * its page leaves while they are valid, else 0), or nothing (size 0,
 * base 0).  Page leaves hold the page's owner or nothing.  One cache line, so that a lookup in a granule
 * with one owner reads the tables and this line only, never the entry.
 */
struct gh_rtab_leaf {
	uint64_t seq;		/* odd while being written */
	uint64_t base;
	uint64_t size;
	uint64_t gen;
	uint64_t ctx;
	uint64_t pool;
	uint64_t meta;
	uint64_t buffer_id;
} __attribute__((aligned(64)));

/*
 * Leaves of the 4 KiB pages of a shared granule, used while no page has
 * two owners (allocations of 4 KiB and up), so that a lookup there reads
 * the granule's leaf and one page leaf instead of a node and an entry.
 * Created when the granule is first shared and bound to it forever.
 */
struct gh_rtab_fine {
	struct gh_rtab_leaf leaf[GH_REG_FINE_SLOTS];	/* read by lookups */
	uint64_t owner[GH_REG_FINE_SLOTS];	/* writer only: gen, or 0 */
	uint32_t valid;		/* writer only: owner[] is the slot's node's */
};

/*
 * Leaves of the 512-byte slots of a shared granule, used while its page
 * leaves are not (buffers under 4 KiB share pages) and its node's slot
 * index is valid (no slot has two owners), so that a lookup there reads
 * the granule's leaf and one slot leaf instead of the slot index and an
 * entry.  9 KiB, created when a buffer that does not start and end on
 * page boundaries first shares the granule, and bound to it forever.  The
 * granule's leaf names it with GH_REG_LEAF_SLOTS set.
 */
struct gh_rtab_slots {
	struct gh_rtab_leaf leaf[GH_REG_NODE_SLOTS];	/* read by lookups */
	uint64_t owner[GH_REG_NODE_SLOTS];	/* writer only: gen, or 0 */
};

/* 64 KiB granules of one 2 MiB region. */
struct gh_rtab_sub {
	struct gh_rtab_leaf leaf[GH_REG_SUB_SLOTS];	/* read by lookups */
	uint64_t slot[GH_REG_SUB_SLOTS];	/* writer only: entry or node */
	/* Set once, never changed: lookups only prefetch through them. */
	struct gh_rtab_fine *fine[GH_REG_SUB_SLOTS];
	struct gh_rtab_slots *slots[GH_REG_SUB_SLOTS];
	uint32_t used;		/* writer only: non-zero slots */
} __attribute__((aligned(64)));

/* 2 MiB regions of one 4 GiB window. */
struct gh_rtab_mid {
	uint64_t slot[GH_REG_MID_SLOTS];		/* read by lookups */
	struct gh_rtab_sub *sub[GH_REG_MID_SLOTS];	/* writer only */
	uint32_t used;		/* writer only: non-zero slots */
};

struct gh_rtab_dir {
	uint64_t slot[GH_REG_DIR_SLOTS];		/* read by lookups */
	struct gh_rtab_mid *mid[GH_REG_DIR_SLOTS];	/* writer only */
};

/*
 * Writers' shards: 2 MiB region r belongs to shard r mod GH_REG_SHARDS,
 * and everything a writer changes for a region is that shard's: its mid
 * slot, its sub table and granules, the nodes of those granules (the
 * shard's free lists) and the entries based in it (the shard's free
 * list).  An insert or remove takes the shards of the regions its range
 * touches, in shard order (all of them from GH_REG_SHARDS regions up, so
 * a whole-window entry holds every shard); whole-table operations take
 * every shard.  What regions share is kept apart: the dirs and mid tables
 * are created under gh_rtab_mem_lock (taken inside shard locks, never
 * around one), as is the arena and the entry chunks; a mid table's used
 * count, the live bytes, their peak and the generation are atomic; the
 * live count is kept per shard.
 *
 * The locks are adaptive: writers hold them for well under a microsecond,
 * so a waiter spins briefly instead of sleeping in the kernel and being
 * woken (two threads churning 4 KiB allocations on a 2-core VM: 10% more
 * pairs/s than a plain mutex).
 */
#define GH_REG_SHARDS		32u	/* all + the mem lock: TSan tracks 64 */
#define GH_REG_SHARDS_ALL	((1ull << GH_REG_SHARDS) - 1)

struct gh_rtab_shard {
	pthread_mutex_t lock;
	uint64_t count;		/* live entries based in its regions */
	struct gh_rtab_ent *ent_free;
	struct gh_rtab_node *node_free[GH_REG_NODE_MAX_CLS + 1];
	uint32_t node_nfree[GH_REG_NODE_MAX_CLS + 1];
} __attribute__((aligned(64)));

static struct gh_rtab_shard gh_rtab_shard[GH_REG_SHARDS] = {
	[0 ... GH_REG_SHARDS - 1] = {
		.lock = PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP,
	},
};
static pthread_mutex_t gh_rtab_mem_lock = PTHREAD_MUTEX_INITIALIZER;
static struct gh_rtab_dir gh_rtab_dir0 __attribute__((aligned(4096)));
static struct gh_rtab_dir *gh_rtab_dirhi[GH_REG_TOPS];

/* Under gh_rtab_mem_lock. */
static struct gh_rtab_ent *gh_rtab_ent_chunk[GH_REG_MAX_ENT_CHUNKS];
static uint32_t gh_rtab_ent_nchunks;
static uint32_t gh_rtab_ent_bump;	/* carved entries in the last chunk */
static char *gh_rtab_arena;		/* bump allocator for tables, nodes */
static size_t gh_rtab_arena_left;

/*
 * Atomic, in one line: an insert changes both, so that under contention
 * it fetches one line, not two.
 */
static struct {
	uint64_t gen_next;
	uint64_t bytes;
	uint64_t peak;	/* most bytes at once, for the counters */
} gh_rtab_tot __attribute__((aligned(64))) = { .gen_next = 1 };

/*
 * Generations are handed out in blocks per thread, so that an insert
 * does not fetch the shared line for each: unique and never reused, but
 * not in allocation order across threads (nothing compares them).
 */
#define GH_REG_GEN_BLOCK	64
static __thread uint64_t gh_rtab_gen_next, gh_rtab_gen_end;

static uint64_t gh_rtab_gen_take(void)
{
	if (GH_REG_UNLIKELY(gh_rtab_gen_next == gh_rtab_gen_end)) {
		gh_rtab_gen_next = __atomic_fetch_add(&gh_rtab_tot.gen_next,
						      GH_REG_GEN_BLOCK,
						      __ATOMIC_RELAXED);
		gh_rtab_gen_end = gh_rtab_gen_next + GH_REG_GEN_BLOCK;
	}
	return gh_rtab_gen_next++;
}

/*
 * The live bytes and their peak, after the shard's lock is dropped: the
 * shared line is not fetched while other writers of the shard wait.
 * Each sum is the total at one instant: the peak is their maximum.
 */
static void gh_rtab_bytes_add(uint64_t size)
{
	uint64_t bytes = __atomic_add_fetch(&gh_rtab_tot.bytes, size,
					    __ATOMIC_RELAXED);
	uint64_t peak = GH_LD(&gh_rtab_tot.peak);

	while (bytes > peak &&
	       !__atomic_compare_exchange_n(&gh_rtab_tot.peak, &peak, bytes,
					    true, __ATOMIC_RELAXED,
					    __ATOMIC_RELAXED))
		;
}

static inline struct gh_rtab_shard *gh_rtab_shard_of(uint64_t a)
{
	return &gh_rtab_shard[(a >> GH_REG_REG_SHIFT) & (GH_REG_SHARDS - 1)];
}

/* The shards of the regions [base, end) touches (end > base), as bits. */
static uint64_t gh_rtab_shard_mask(uint64_t base, uint64_t end)
{
	uint64_t r0 = base >> GH_REG_REG_SHIFT, r1 = (end - 1) >> GH_REG_REG_SHIFT;
	uint64_t m = 0;

	if (r1 - r0 >= GH_REG_SHARDS - 1)
		return GH_REG_SHARDS_ALL;
	for (uint64_t r = r0; r <= r1; r++)
		m |= 1ull << (r & (GH_REG_SHARDS - 1));
	return m;
}

/* [base, end) lies in one 2 MiB region, so one shard (end > base). */
static inline bool gh_rtab_one_region(uint64_t base, uint64_t end)
{
	return !((base ^ (end - 1)) >> GH_REG_REG_SHIFT);
}

/* Lock order: shards by index, then gh_rtab_mem_lock. */
static void gh_rtab_lock_mask(uint64_t m)
{
	for (uint64_t b = m; b; b &= b - 1)
		pthread_mutex_lock(&gh_rtab_shard[__builtin_ctzll(b)].lock);
}

static void gh_rtab_unlock_mask(uint64_t m)
{
	for (uint64_t b = m; b; b &= b - 1)
		pthread_mutex_unlock(&gh_rtab_shard[__builtin_ctzll(b)].lock);
}

/* ------------------------------------------------------------------ */
/* Reader side                                                         */

static inline uint64_t *gh_rtab_node_base(struct gh_rtab_node *n)
{
	return n->item;
}

static inline uint64_t *gh_rtab_node_ents(struct gh_rtab_node *n)
{
	return n->item + (1u << n->cls);
}

static inline uint64_t *gh_rtab_node_slots(struct gh_rtab_node *n)
{
	return n->item + 2 * (1u << n->cls);
}

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

/* ------------------------------------------------------------------ */
/* Writer side: memory                                                 */

static void *gh_rtab_map(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

/*
 * A 2 MiB-aligned 2 MiB mapping that may use a transparent huge page:
 * lookups touch tables and entries at random, and TLB misses would
 * otherwise cost as much as the cache misses.
 */
static void *gh_rtab_map_huge(void)
{
	char *p = gh_rtab_map(2 * GH_REG_ARENA), *a;

	if (!p)
		return NULL;
	a = (char *)(((uintptr_t)p + GH_REG_ARENA - 1) & ~(GH_REG_ARENA - 1));
	if (a > p)
		munmap(p, a - p);
	munmap(a + GH_REG_ARENA, p + GH_REG_ARENA - a);
#ifdef MADV_HUGEPAGE
	madvise(a, GH_REG_ARENA, MADV_HUGEPAGE);
#endif
	return a;
}

/*
 * Zeroed, type-stable memory for tables and nodes; never given back.
 * Under gh_rtab_mem_lock.
 */
static void *gh_rtab_carve_locked(size_t len)
{
	void *p;

	len = (len + 63) & ~(size_t)63;
	if (len > GH_REG_ARENA)
		return NULL;
	if (len > gh_rtab_arena_left) {
		char *a = gh_rtab_map_huge();

		if (!a)
			return NULL;
		gh_rtab_arena = a;
		gh_rtab_arena_left = GH_REG_ARENA;
	}
	p = gh_rtab_arena;
	gh_rtab_arena += len;
	gh_rtab_arena_left -= len;
	return p;
}

static void *gh_rtab_carve(size_t len)
{
	void *p;

	pthread_mutex_lock(&gh_rtab_mem_lock);
	p = gh_rtab_carve_locked(len);
	pthread_mutex_unlock(&gh_rtab_mem_lock);
	return p;
}

static struct gh_rtab_dir *gh_rtab_dir_peek(uint64_t top)
{
	return top ? GH_LD_ACQ(&gh_rtab_dirhi[top]) : &gh_rtab_dir0;
}

static struct gh_rtab_dir *gh_rtab_dir_get(uint64_t top)
{
	struct gh_rtab_dir *d = gh_rtab_dir_peek(top);

	if (d)
		return d;
	pthread_mutex_lock(&gh_rtab_mem_lock);
	d = gh_rtab_dirhi[top];
	if (!d) {
		d = gh_rtab_map(sizeof(*d));
		if (d)
			GH_ST_REL(&gh_rtab_dirhi[top], d);
	}
	pthread_mutex_unlock(&gh_rtab_mem_lock);
	return d;
}

/*
 * Set a mid slot (its region's shard held), keeping its used count,
 * which the window's other regions share.
 */
static void gh_rtab_mid_set(struct gh_rtab_mid *m, uint32_t i, uint64_t v)
{
	__atomic_add_fetch(&m->used, (uint32_t)((v != 0) - (m->slot[i] != 0)),
			   __ATOMIC_RELAXED);
	GH_ST_REL(&m->slot[i], v);
}

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
static void gh_rtab_sub_set(struct gh_rtab_sub *s, uint32_t i, uint64_t v)
{
	s->used += (v != 0) - (s->slot[i] != 0);
	s->slot[i] = v;
	if (s->fine[i])
		s->fine[i]->valid = 0;	/* rebuilt when a node comes back */
	gh_rtab_leaf_set(&s->leaf[i], (const struct gh_rtab_ent *)v, 0, 0);
}

/*
 * The mid table of the window at @ws, created and published if new.
 * Callers only ask for windows that no entry covers whole.
 */
static struct gh_rtab_mid *gh_rtab_mid_get(uint64_t ws)
{
	struct gh_rtab_dir *d = gh_rtab_dir_get(ws >> GH_REG_DIR_SHIFT);
	uint32_t i = (ws >> GH_REG_WIN_SHIFT) & 0xffff;
	struct gh_rtab_mid *m;

	if (!d)
		return NULL;
	m = GH_LD_ACQ(&d->mid[i]);
	if (m)
		return m;
	/* The window's regions may belong to other shards. */
	pthread_mutex_lock(&gh_rtab_mem_lock);
	m = d->mid[i];
	if (!m) {
		m = gh_rtab_carve_locked(sizeof(*m));
		if (m) {
			GH_ST_REL(&d->mid[i], m);
			GH_ST_REL(&d->slot[i], (uint64_t)m);
		}
	}
	pthread_mutex_unlock(&gh_rtab_mem_lock);
	return m;
}

/* Likewise the sub table of the region at @rs. */
static struct gh_rtab_sub *gh_rtab_sub_get(uint64_t rs)
{
	struct gh_rtab_mid *m = gh_rtab_mid_get(rs & ~(GH_REG_WIN - 1));
	uint32_t i = (rs >> GH_REG_REG_SHIFT) & (GH_REG_MID_SLOTS - 1);
	struct gh_rtab_sub *s;

	if (!m)
		return NULL;
	if (m->sub[i])
		return m->sub[i];
	s = gh_rtab_carve(sizeof(*s));
	if (!s)
		return NULL;
	m->sub[i] = s;
	gh_rtab_mid_set(m, i, (uint64_t)s);
	return s;
}

/* An entry for shard @sh (held): its free list, else a new one. */
static struct gh_rtab_ent *gh_rtab_ent_alloc(struct gh_rtab_shard *sh)
{
	struct gh_rtab_ent *e = sh->ent_free, *chunk;

	if (e) {
		sh->ent_free = (struct gh_rtab_ent *)e->ctx;
		return e;
	}
	pthread_mutex_lock(&gh_rtab_mem_lock);
	if (gh_rtab_ent_nchunks == 0 || gh_rtab_ent_bump == GH_REG_ENT_PER_CHUNK) {
		chunk = gh_rtab_ent_nchunks == GH_REG_MAX_ENT_CHUNKS ? NULL :
			gh_rtab_map_huge();
		if (!chunk) {
			pthread_mutex_unlock(&gh_rtab_mem_lock);
			return NULL;
		}
		gh_rtab_ent_chunk[gh_rtab_ent_nchunks++] = chunk;
		gh_rtab_ent_bump = 0;
	}
	e = &gh_rtab_ent_chunk[gh_rtab_ent_nchunks - 1][gh_rtab_ent_bump++];
	pthread_mutex_unlock(&gh_rtab_mem_lock);
	return e;
}

/* Entry @e is dead: back to its shard's free list. */
static void gh_rtab_ent_release(struct gh_rtab_shard *sh, struct gh_rtab_ent *e)
{
	GH_ST(&e->ctx, (uint64_t)sh->ent_free);
	sh->ent_free = e;
}

static size_t gh_rtab_node_bytes(uint32_t cls)
{
	return sizeof(struct gh_rtab_node) + 16ull * (1ull << cls) +
	       (cls >= GH_REG_NODE_IDX_CLS ? 8ull * GH_REG_NODE_SLOTS : 0);
}

static uint32_t gh_rtab_node_cls_for(uint32_t n)
{
	uint32_t cls = n > 1 ? 32 - (uint32_t)__builtin_clz(n - 1) : 0;

	return cls < GH_REG_NODE_MIN_CLS ? GH_REG_NODE_MIN_CLS : cls;
}

/*
 * Make sure class @cls of shard @sh has at least @want free nodes.  A
 * node serves granules of one shard only: it goes back where it came from.
 */
static int gh_rtab_node_reserve(struct gh_rtab_shard *sh, uint32_t cls,
				uint32_t want)
{
	while (sh->node_nfree[cls] < want) {
		struct gh_rtab_node *n = gh_rtab_carve(gh_rtab_node_bytes(cls));

		if (!n)
			return -ENOMEM;
		n->cls = cls;
		n->next_free = sh->node_free[cls];
		sh->node_free[cls] = n;
		sh->node_nfree[cls]++;
	}
	return 0;
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

static struct gh_rtab_ent *gh_rtab_node_ent(struct gh_rtab_node *n, uint32_t i)
{
	return (struct gh_rtab_ent *)gh_rtab_node_ents(n)[i];
}

/* Index of the last item based at or below @a, or n->n when none is. */
static uint32_t gh_rtab_node_floor(struct gh_rtab_node *n, uint64_t a)
{
	const uint64_t *base = gh_rtab_node_base(n);
	uint32_t lo = 0, cnt = n->n;

	while (cnt > 1) {
		uint32_t half = cnt / 2;

		if (base[lo + half] <= a)
			lo += half;
		cnt -= half;
	}
	return base[lo] <= a ? lo : n->n;
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

/* ------------------------------------------------------------------ */
/* Writer side: slots                                                  */

static inline uint64_t gh_rtab_ent_end(const struct gh_rtab_ent *e)
{
	return e->base + e->size;
}

static inline uint64_t gh_rtab_max(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

static inline uint64_t gh_rtab_min(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
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
static bool gh_rtab_pages_free(const struct gh_rtab_fine *f, uint64_t gs,
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

/* Entries in sub slot @sv. */
static uint32_t gh_rtab_slot_count(uint64_t sv)
{
	if (!sv)
		return 0;
	if (!(sv & GH_REG_SLOT_NODE))
		return 1;
	return ((struct gh_rtab_node *)(sv & ~GH_REG_SLOT_NODE))->n;
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
static void gh_rtab_slot_add(struct gh_rtab_sub *sub, uint32_t g, uint64_t gs,
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
static void gh_rtab_slot_del(struct gh_rtab_sub *sub, uint32_t g, uint64_t gs,
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
static struct gh_rtab_ent *gh_rtab_first_overlap(uint64_t a, uint64_t b)
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

static inline uint32_t gh_rtab_gran_index(uint64_t a)
{
	return (a >> GH_REG_GRAN_SHIFT) & (GH_REG_SUB_SLOTS - 1);
}

/* [base, end) lies in one granule. */
static inline bool gh_rtab_one_gran(uint64_t base, uint64_t end)
{
	return !((base ^ (end - 1)) >> GH_REG_GRAN_SHIFT);
}

/* The live entry whose base is exactly @base, or NULL. */
static struct gh_rtab_ent *gh_rtab_find_base(uint64_t base)
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
static void gh_rtab_publish(struct gh_rtab_ent *e, bool add)
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
static int gh_rtab_prepare(uint64_t base, uint64_t end)
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
static int gh_rtab_prepare_gran(uint64_t base, uint64_t end)
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
static void gh_rtab_unlink(struct gh_rtab_ent *e)
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

/* After the lock is dropped, as gh_rtab_bytes_add. */
static void gh_rtab_bytes_sub(uint64_t size)
{
	__atomic_sub_fetch(&gh_rtab_tot.bytes, size, __ATOMIC_RELAXED);
}

static void gh_rtab_ent_get(const struct gh_rtab_ent *e, struct gh_range *r)
{
	r->base = e->base;
	r->size = e->size;
	r->gen = e->gen;
	r->ctx = e->ctx;
	r->pool = e->pool;
	r->dev = (int32_t)(uint32_t)e->meta;
	r->kind = (uint16_t)(e->meta >> 32);
	r->flags = (uint16_t)(e->meta >> 48);
	r->buffer_id = e->buffer_id;
}

/* ------------------------------------------------------------------ */
/* Writer side: API                                                    */

int gh_registry_init(void)
{
	return 0;	/* everything is static or created on demand */
}

static int gh_rtab_insert_locked(const struct gh_range *r, uint64_t gen)
{
	uint64_t base = r->base, end = r->base + r->size;
	struct gh_rtab_shard *sh;
	struct gh_rtab_ent *e;
	int rc;

	/* Allocate everything first so that nothing fails once published. */
	if (gh_rtab_one_gran(base, end)) {
		rc = gh_rtab_prepare_gran(base, end);
	} else if (gh_rtab_first_overlap(base, end)) {
		rc = -EEXIST;
	} else {
		rc = gh_rtab_prepare(base, end);
	}
	if (rc)
		return rc;
	sh = gh_rtab_shard_of(base);
	e = gh_rtab_ent_alloc(sh);
	if (!e)
		return -ENOMEM;

	GH_ST(&e->seq, e->seq + 1);
	GH_FENCE_REL();
	GH_ST(&e->base, base);
	GH_ST(&e->gen, gen);
	GH_ST(&e->ctx, r->ctx);
	GH_ST(&e->pool, r->pool);
	GH_ST(&e->meta, (uint64_t)(uint32_t)r->dev |
			(uint64_t)r->kind << 32 | (uint64_t)r->flags << 48);
	GH_ST(&e->buffer_id, r->buffer_id);
	GH_ST(&e->size, r->size);
	GH_ST_REL(&e->seq, e->seq + 1);

	gh_rtab_publish(e, true);
	GH_ST(&sh->count, sh->count + 1);
	return 0;
}

int gh_registry_insert(const struct gh_range *r, uint64_t *gen_p)
{
	uint64_t end = r->base + r->size, m, gen;
	int rc;

	if (r->size == 0 || end < r->base || end > GH_REG_VA_END)
		return -EINVAL;
	gen = gh_rtab_gen_take();	/* a failed insert wastes one */
	if (gh_rtab_one_region(r->base, end)) {
		/* The common case, one shard: no mask to walk. */
		pthread_mutex_t *l = &gh_rtab_shard_of(r->base)->lock;

		pthread_mutex_lock(l);
		rc = gh_rtab_insert_locked(r, gen);
		pthread_mutex_unlock(l);
	} else {
		m = gh_rtab_shard_mask(r->base, end);
		gh_rtab_lock_mask(m);
		rc = gh_rtab_insert_locked(r, gen);
		gh_rtab_unlock_mask(m);
	}
	if (rc)
		return rc;
	gh_rtab_bytes_add(r->size);
	if (gen_p)
		*gen_p = gen;
	return 0;
}

int gh_registry_remove(uint64_t base, struct gh_range *out_p)
{
	pthread_mutex_t *l = &gh_rtab_shard_of(base)->lock;
	uint64_t m = 0, need;
	struct gh_rtab_ent *e;
	struct gh_range r;

	/*
	 * The base's shard finds the entry (its base is in that region); an
	 * entry that reaches into other shards' regions is looked up again
	 * with all of its shards held, in order.
	 */
	pthread_mutex_lock(l);
	e = gh_rtab_find_base(base);
	if (e && !gh_rtab_one_region(base, gh_rtab_ent_end(e))) {
		m = gh_rtab_shard_mask(base, gh_rtab_ent_end(e));
		pthread_mutex_unlock(l);
		for (;;) {
			gh_rtab_lock_mask(m);
			e = gh_rtab_find_base(base);
			if (!e)
				break;
			need = gh_rtab_shard_mask(base, gh_rtab_ent_end(e));
			if (!(need & ~m))
				break;
			gh_rtab_unlock_mask(m);
			m |= need;
		}
	}
	if (e) {
		gh_rtab_ent_get(e, &r);
		gh_rtab_unlink(e);
	}
	if (m)
		gh_rtab_unlock_mask(m);
	else
		pthread_mutex_unlock(l);
	if (!e)
		return -ENOENT;
	gh_rtab_bytes_sub(r.size);
	if (out_p)
		*out_p = r;
	return 0;
}

/* Visit live entries in pool order; @fn may unlink the one it is given. */
static size_t gh_rtab_scan(bool (*fn)(struct gh_rtab_ent *e, void *arg),
			  void *arg)
{
	size_t n = 0;

	for (uint32_t c = 0; c < gh_rtab_ent_nchunks; c++) {
		uint32_t lim = c + 1 == gh_rtab_ent_nchunks ?
			       gh_rtab_ent_bump : GH_REG_ENT_PER_CHUNK;

		for (uint32_t i = 0; i < lim; i++) {
			struct gh_rtab_ent *e = &gh_rtab_ent_chunk[c][i];

			if (e->size && fn(e, arg))
				n++;
		}
	}
	return n;
}

struct gh_rtab_rm_if {
	gh_range_match_fn match;
	void *match_arg;
	gh_range_fn on_remove;
	void *cb_arg;
};

static bool gh_rtab_rm_if_one(struct gh_rtab_ent *e, void *arg)
{
	struct gh_rtab_rm_if *a = arg;
	struct gh_range r;

	gh_rtab_ent_get(e, &r);
	if (a->match && !a->match(&r, a->match_arg))
		return false;
	if (a->on_remove)
		a->on_remove(&r, a->cb_arg);
	gh_rtab_unlink(e);
	gh_rtab_bytes_sub(r.size);
	return true;
}

size_t gh_registry_remove_if(gh_range_match_fn match, void *match_arg,
			     gh_range_fn on_remove, void *cb_arg)
{
	struct gh_rtab_rm_if a = { match, match_arg, on_remove, cb_arg };
	size_t n;

	gh_rtab_lock_mask(GH_REG_SHARDS_ALL);
	n = gh_rtab_scan(gh_rtab_rm_if_one, &a);
	gh_rtab_unlock_mask(GH_REG_SHARDS_ALL);
	return n;
}

/* The end of [start, start + len) inside the registry's address space;
 * start itself when nothing of it is. */
static uint64_t clip_end(uint64_t start, uint64_t len)
{
	uint64_t end = start + len;

	if (len == 0 || start >= GH_REG_VA_END)
		return start;
	if (end < start || end > GH_REG_VA_END)
		end = GH_REG_VA_END;
	return end;
}

size_t gh_registry_remove_overlap(uint64_t start, uint64_t len,
				  gh_range_fn on_remove, void *cb_arg)
{
	uint64_t end = clip_end(start, len);
	struct gh_rtab_ent *e;
	struct gh_range r;
	size_t n = 0;

	/* Every shard: what overlaps may reach into any region. */
	gh_rtab_lock_mask(GH_REG_SHARDS_ALL);
	while (start < end && (e = gh_rtab_first_overlap(start, end))) {
		uint64_t e_end = gh_rtab_ent_end(e);

		gh_rtab_ent_get(e, &r);
		if (on_remove)
			on_remove(&r, cb_arg);
		gh_rtab_unlink(e);
		gh_rtab_bytes_sub(r.size);
		n++;
		if (e_end > start)
			start = e_end;	/* the next overlap starts at or after */
	}
	gh_rtab_unlock_mask(GH_REG_SHARDS_ALL);
	return n;
}

size_t gh_registry_overlaps(uint64_t start, uint64_t len,
			    gh_range_match_fn fn, void *arg)
{
	uint64_t end = clip_end(start, len);
	struct gh_rtab_ent *e;
	struct gh_range r;
	size_t n = 0;
	uint64_t m;

	if (start >= end)
		return 0;
	/*
	 * The shards of [start, end) suffice: an entry overlapping it is in
	 * one of their regions, so it cannot be removed while they are held.
	 */
	m = gh_rtab_shard_mask(start, end);
	gh_rtab_lock_mask(m);
	while (start < end && (e = gh_rtab_first_overlap(start, end))) {
		gh_rtab_ent_get(e, &r);
		n++;
		if (fn(&r, arg))
			break;
		start = gh_rtab_ent_end(e);
	}
	gh_rtab_unlock_mask(m);
	return n;
}

struct gh_rtab_each {
	gh_range_fn fn;
	void *arg;
};

static bool gh_rtab_each_one(struct gh_rtab_ent *e, void *arg)
{
	struct gh_rtab_each *a = arg;
	struct gh_range r;

	gh_rtab_ent_get(e, &r);
	a->fn(&r, a->arg);
	return true;
}

void gh_registry_foreach(gh_range_fn fn, void *arg)
{
	struct gh_rtab_each a = { fn, arg };

	gh_rtab_lock_mask(GH_REG_SHARDS_ALL);
	gh_rtab_scan(gh_rtab_each_one, &a);
	gh_rtab_unlock_mask(GH_REG_SHARDS_ALL);
}

uint64_t gh_registry_count(void)
{
	uint64_t n = 0;

	for (uint32_t i = 0; i < GH_REG_SHARDS; i++)
		n += GH_LD(&gh_rtab_shard[i].count);
	return n;
}

uint64_t gh_registry_bytes(void)
{
	return GH_LD(&gh_rtab_tot.bytes);
}

uint64_t gh_registry_peak_bytes(void)
{
	return GH_LD(&gh_rtab_tot.peak);
}

void gh_registry_atfork_prepare(void)
{
	gh_rtab_lock_mask(GH_REG_SHARDS_ALL);
	pthread_mutex_lock(&gh_rtab_mem_lock);
}

void gh_registry_atfork_parent(void)
{
	pthread_mutex_unlock(&gh_rtab_mem_lock);
	gh_rtab_unlock_mask(GH_REG_SHARDS_ALL);
}

void gh_registry_atfork_child(void)
{
	/* Only the forking thread exists, and it holds the locks. */
	pthread_mutex_unlock(&gh_rtab_mem_lock);
	gh_rtab_unlock_mask(GH_REG_SHARDS_ALL);
}

static bool gh_rtab_reset_one(struct gh_rtab_ent *e, void *arg)
{
	gh_rtab_bytes_sub(e->size);
	gh_rtab_unlink(e);
	return true;
}

void gh_registry_reset(void)
{
	gh_rtab_lock_mask(GH_REG_SHARDS_ALL);
	gh_rtab_scan(gh_rtab_reset_one, NULL);
	gh_rtab_unlock_mask(GH_REG_SHARDS_ALL);
}
