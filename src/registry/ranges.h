/* SPDX-License-Identifier: MIT */
/*
 * Registry of live GPU allocations, indexed by address range.
 *
 * Readers (gh_registry_lookup) are lock-free and write no shared memory:
 * they may run concurrently with any writer and never block.  Writers
 * (insert/remove/...) are rare (one per allocation or free) and serialize
 * among themselves on a private lock that is never held across a call out
 * of the registry.  No function here calls malloc: all memory comes from
 * mmap and is type-stable (never returned to the OS), so a reader holding
 * a stale pointer reads valid memory and detects the change.
 */
#ifndef GH_RANGES_H
#define GH_RANGES_H

#include <stddef.h>
#include <stdint.h>

/* Snapshot of one live allocation; also the insert argument. */
struct gh_range {
	uint64_t base;
	uint64_t size;
	uint64_t gen;	/* unique per allocation; assigned by insert */
	uint64_t ctx;	/* CUcontext (0 if none) */
	uint64_t pool;	/* CUmemoryPool for pool allocations, else 0 */
	int32_t dev;	/* device ordinal, -1 if unknown or host */
	uint16_t kind;	/* enum gdrhook_kind (include/gdrhook.h) */
	uint16_t flags;	/* GH_RANGE_* */
	uint64_t buffer_id; /* driver buffer ID at allocation (audit), or 0 */
};

#define GH_RANGE_VOLATILE	0x1	/* pool memory: may go back at a sync */

int gh_registry_init(void);

/*
 * Insert [r->base, r->base + r->size).  Assigns a fresh generation
 * (returned through gen_p and stored).  Returns 0, -EEXIST when the range
 * overlaps a live one (nothing inserted), -EINVAL for size 0, -ENOMEM.
 */
int gh_registry_insert(const struct gh_range *r, uint64_t *gen_p);

/* Remove the live range whose base is exactly @base; copy it to *out_p. */
int gh_registry_remove(uint64_t base, struct gh_range *out_p);

/*
 * Lock-free: find the live range containing [ptr, ptr + len) (len 0 is
 * treated as 1).  0 and *out_p filled; -ENOENT when ptr is in no live
 * range (*out_p may have been written: the snapshot goes straight into
 * it, a copy through the stack stalls store forwarding); -ERANGE when ptr
 * is inside one but ptr + len runs past its end (*out_p is still filled).
 */
int gh_registry_lookup(uint64_t ptr, uint64_t len, struct gh_range *out_p);

/*
 * The index's first level below 2^48 (one slot per 4 GiB window) and, in
 * a slot that names one, its table of 2 MiB regions: ranges_impl.h, whose
 * layout ranges_read.c checks against these.  Read by
 * gh_registry_absent() only.
 */
#define GH_REGISTRY_WIN0_END	(1ull << 48)
#define GH_REGISTRY_WIN_SHIFT	32
#define GH_REGISTRY_REG_SHIFT	21
#define GH_REGISTRY_REGS	2048u
#define GH_REGISTRY_SLOT_WHOLE	1ull
struct gh_rtab_dir;
extern struct gh_rtab_dir gh_rtab_dir0;	/* its slots come first */

/*
 * Lock-free, and cheaper than a lookup that misses (inline, no snapshot
 * to take): 1 when no live range can contain ptr, its 4 GiB window or
 * its 2 MiB region being empty; 0 when one may (gh_registry_lookup() then
 * says).
 */
static inline int gh_registry_absent(uint64_t ptr)
{
	const uint64_t *regs;
	uint64_t v;

	if (ptr >= GH_REGISTRY_WIN0_END)
		return 0;
	v = __atomic_load_n(&((const uint64_t *)(const void *)&gh_rtab_dir0)[
				    ptr >> GH_REGISTRY_WIN_SHIFT],
			    __ATOMIC_ACQUIRE);
	if (!v)
		return 1;
	if (v & GH_REGISTRY_SLOT_WHOLE)
		return 0;
	regs = (const uint64_t *)(uintptr_t)v;
	return !__atomic_load_n(&regs[(ptr >> GH_REGISTRY_REG_SHIFT) &
				      (GH_REGISTRY_REGS - 1)],
				__ATOMIC_ACQUIRE);
}

/*
 * Remove every live range for which match() returns non-zero (all ranges
 * when match is NULL), calling on_remove() for each before it is gone.
 * Callbacks run with the writer lock held: they must not call back into
 * the registry's writers.  Returns the number removed.
 */
typedef int (*gh_range_match_fn)(const struct gh_range *r, void *arg);
typedef void (*gh_range_fn)(const struct gh_range *r, void *arg);
size_t gh_registry_remove_if(gh_range_match_fn match, void *match_arg,
			     gh_range_fn on_remove, void *cb_arg);

/* Remove every live range overlapping [start, start + len). */
size_t gh_registry_remove_overlap(uint64_t start, uint64_t len,
				  gh_range_fn on_remove, void *cb_arg);

/*
 * Call fn on every live range overlapping [start, start + len), lowest
 * base first, with the writer lock held (none of them can be removed
 * meanwhile; fn must not call the registry's writers); fn returns
 * non-zero to stop.  Returns the number visited.
 */
size_t gh_registry_overlaps(uint64_t start, uint64_t len,
			    gh_range_match_fn fn, void *arg);

/* Visit every live range (writer lock held; fn must not write). */
void gh_registry_foreach(gh_range_fn fn, void *arg);

uint64_t gh_registry_count(void);
uint64_t gh_registry_bytes(void);

/* fork safety: prepare takes the writer lock, parent/child release it. */
void gh_registry_atfork_prepare(void);
void gh_registry_atfork_parent(void);
void gh_registry_atfork_child(void);

/* Tests and benchmarks only: drop everything (not thread-safe). */
void gh_registry_reset(void);

/* Most bytes the registry held at once (kept by its insert, under its
 * lock: no line of its own written per allocation). */
uint64_t gh_registry_peak_bytes(void);

#endif
