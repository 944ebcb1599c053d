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
 *
 * Files.  This header: the layout, the types, the shared state and the
 * helpers every part uses.  ranges_read.c: the lookups, the readers'
 * whole path in one file so that it stays inlined.  ranges_mem.c: the
 * tables, entries and node reserves, and the memory under them.
 * ranges_node.c: one shared granule's node and its leaves.
 * ranges_walk.c: finding an entry's overlaps, preparing and publishing
 * its slots, unlinking it.  ranges_write.c: the writers' API (insert, remove,
 * the scans, counters, fork, reset).
 */
#ifndef GH_RANGES_IMPL_H
#define GH_RANGES_IMPL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

/* The shared state, defined in ranges_mem.c. */
GH_HIDDEN extern struct gh_rtab_shard gh_rtab_shard[GH_REG_SHARDS];
GH_HIDDEN extern pthread_mutex_t gh_rtab_mem_lock;
GH_HIDDEN extern struct gh_rtab_dir gh_rtab_dir0
	__attribute__((aligned(4096)));
GH_HIDDEN extern struct gh_rtab_dir *gh_rtab_dirhi[GH_REG_TOPS];

/* Under gh_rtab_mem_lock. */
GH_HIDDEN extern struct gh_rtab_ent *
	gh_rtab_ent_chunk[GH_REG_MAX_ENT_CHUNKS];
GH_HIDDEN extern uint32_t gh_rtab_ent_nchunks;
GH_HIDDEN extern uint32_t gh_rtab_ent_bump;	/* carved in the last chunk */

static inline struct gh_rtab_shard *gh_rtab_shard_of(uint64_t a)
{
	return &gh_rtab_shard[(a >> GH_REG_REG_SHIFT) & (GH_REG_SHARDS - 1)];
}

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

static inline struct gh_rtab_ent *gh_rtab_node_ent(struct gh_rtab_node *n,
						   uint32_t i)
{
	return (struct gh_rtab_ent *)gh_rtab_node_ents(n)[i];
}

/* Index of the last item based at or below @a, or n->n when none is. */
static inline uint32_t gh_rtab_node_floor(struct gh_rtab_node *n, uint64_t a)
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

static inline uint32_t gh_rtab_node_cls_for(uint32_t n)
{
	uint32_t cls = n > 1 ? 32 - (uint32_t)__builtin_clz(n - 1) : 0;

	return cls < GH_REG_NODE_MIN_CLS ? GH_REG_NODE_MIN_CLS : cls;
}

static inline struct gh_rtab_dir *gh_rtab_dir_peek(uint64_t top)
{
	return top ? GH_LD_ACQ(&gh_rtab_dirhi[top]) : &gh_rtab_dir0;
}

/*
 * Set a mid slot (its region's shard held), keeping its used count,
 * which the window's other regions share.
 */
static inline void gh_rtab_mid_set(struct gh_rtab_mid *m, uint32_t i,
				   uint64_t v)
{
	__atomic_add_fetch(&m->used, (uint32_t)((v != 0) - (m->slot[i] != 0)),
			   __ATOMIC_RELAXED);
	GH_ST_REL(&m->slot[i], v);
}

/* Entry @e is dead: back to its shard's free list. */
static inline void gh_rtab_ent_release(struct gh_rtab_shard *sh,
				       struct gh_rtab_ent *e)
{
	GH_ST(&e->ctx, (uint64_t)sh->ent_free);
	sh->ent_free = e;
}

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

/* [base, end) lies in one granule. */
static inline bool gh_rtab_one_gran(uint64_t base, uint64_t end)
{
	return !((base ^ (end - 1)) >> GH_REG_GRAN_SHIFT);
}

/* ranges_mem.c: tables and entries, created on demand. */
GH_HIDDEN void *gh_rtab_carve(size_t len);
GH_HIDDEN struct gh_rtab_dir *gh_rtab_dir_get(uint64_t top);
GH_HIDDEN struct gh_rtab_mid *gh_rtab_mid_get(uint64_t ws);
GH_HIDDEN struct gh_rtab_sub *gh_rtab_sub_get(uint64_t rs);
GH_HIDDEN struct gh_rtab_ent *gh_rtab_ent_alloc(struct gh_rtab_shard *sh);
GH_HIDDEN int gh_rtab_node_reserve(struct gh_rtab_shard *sh, uint32_t cls,
				   uint32_t want);

/* ranges_node.c: one granule's slot, node and leaves. */
GH_HIDDEN void gh_rtab_sub_set(struct gh_rtab_sub *s, uint32_t i, uint64_t v);
GH_HIDDEN bool gh_rtab_pages_free(const struct gh_rtab_fine *f, uint64_t gs,
				  uint64_t base, uint64_t end);
GH_HIDDEN void gh_rtab_slot_add(struct gh_rtab_sub *sub, uint32_t g,
				uint64_t gs, struct gh_rtab_ent *e);
GH_HIDDEN void gh_rtab_slot_del(struct gh_rtab_sub *sub, uint32_t g,
				uint64_t gs, struct gh_rtab_ent *e);

/* ranges_walk.c: an entry's slots, found, prepared, published. */
GH_HIDDEN struct gh_rtab_ent *gh_rtab_first_overlap(uint64_t a, uint64_t b);
GH_HIDDEN struct gh_rtab_ent *gh_rtab_find_base(uint64_t base);
GH_HIDDEN int gh_rtab_prepare(uint64_t base, uint64_t end);
GH_HIDDEN int gh_rtab_prepare_gran(uint64_t base, uint64_t end);
GH_HIDDEN void gh_rtab_publish(struct gh_rtab_ent *e, bool add);
GH_HIDDEN void gh_rtab_unlink(struct gh_rtab_ent *e);

#endif
