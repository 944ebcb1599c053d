/* SPDX-License-Identifier: MIT */
/*
 * Registration cache: ibv_reg_mr on GPU memory, done once per allocation.
 * This header: the cache's state, one object (struct rc_state), its
 * rules, and what the core does with it, for the files of the cache;
 * their interface is rcache_api.h.
 *
 * The files, by the path a reader follows through them:
 *   rcache_core.c      the object (it defines the one instance) and
 *                      its upkeep: set up and fork, the index (hash
 *                      chains, entries, allocation states), how each
 *                      registration ends, the free of an allocation and
 *                      a revoked pin, the event records, the counters;
 *   rcache_reg.c       a registration, hit and miss: the lock-free hit,
 *                      the miss with the eviction that makes room for
 *                      it, the aliases both hand out, and what the
 *                      program does with them (dereg, rereg, queries);
 *   rcache_wrap.c      registrations the program made itself: wrapped,
 *                      adopted, caught racing a free;
 *   rcache_drop.c      ibv_dealloc_pd, ibv_close_device, the purge;
 *   rcache_spankeys.c  the span key table, below the core (which claims,
 *                      releases and walks keys with its lock held);
 *   rcache_span.c      the span policy, above: what to register for a
 *                      range, then gh_rcache_reg;
 *   rcache_start.c     the backend per NIC and gh_rcache_init, above.
 * A hit stays in rcache_reg.c; a miss in rcache_reg.c and rcache_core.c
 * (a span's first miss claims its key in rcache_spankeys.c too); the free
 * of an allocation in rcache_core.c.  Calls point one way: start and span
 * call entry points (span the key table too); reg, wrap and drop call
 * the core (wrap and drop also reg, for aliases and eviction); the core
 * calls the key table; no two files share a variable.  The span policy and its key table stay
 * files of their own: the policy runs before the cache is asked (the
 * verbs wrapper calls gh_rcspan_reg, which calls gh_rcache_reg) and
 * decides what to pin, not how it is cached; the key table has its own
 * table and lock (nested inside the cache's) and is the core's only for
 * the announcement that closes the race with a free (see "Unpin before
 * free").  rcache_start.c reads the options and touches no cache state.
 *
 * What is cached.  One NIC registration per (allocation generation, PD,
 * access): the first registration anywhere inside a tracked allocation
 * pins the whole allocation (pin.h: rounded out to 64 KiB) and registers
 * all of it; later registrations inside it, in the same PD, with access
 * flags the cached registration covers, are hits with no driver, kernel or
 * NIC call.  A request for more access re-registers the allocation with
 * the union of both (an access upgrade); the old registration is retired:
 * deregistered as soon as the program holds no MR on it.  There is never
 * more than one current registration per (gen, PD, relaxed-ordering bit).
 * Only plain memory kinds are cached (device, VMM mapping, IPC mapping),
 * never pool memory (GH_RANGE_VOLATILE), managed or host memory.
 *
 * Exposure rule (remote access).  A cached registration covers exactly
 * the program's own allocation [base, base + size) as the registry knows
 * it, in exactly the PD the program named: the 64 KiB rounding applies to
 * the pin (the DMA-BUF export) and never to the MR (ibv_reg_dmabuf_mr gets
 * the allocation's offset and length within the export), so an rkey never
 * reaches a neighbour's memory, and a request in another PD never gets it
 * (the PD is part of the key).  A registration that runs past the end of
 * one allocation is not served from the cache (src/hooks/verbs.c passes it
 * through untouched), unless it runs across adjacent VMM mappings: then
 * it is a span of those mappings (src/rcache/rcache_span.c, which also keys the
 * partial pins of allocations over the BAR1 budget).  So a remote peer that learns an rkey can reach at
 * most the allocation the program registered part of, through QPs of the
 * program's PD.  A local-only request may be served by a registration
 * with remote access in the same PD: that rkey was already granted by the
 * program for the same allocation and PD.
 *
 * What the program gets.  Every registration hands out a private alias
 * MR (struct rc_alias, from an mmap'ed pool): context and pd as asked,
 * addr/length as asked, handle/lkey/rkey of the cached registration.  The
 * program's ibv_dereg_mr on an alias drops one reference; the registration
 * stays (lazy) until its allocation is freed or it is evicted.
 * Registrations of tracked memory that cannot be cached (odd access
 * flags, iova != addr, pool memory, the program's own dmabuf) are wrapped
 * the same way (gh_rcache_wrap), so that a free revokes them too.
 *
 * Unpin before free.  The free path calls gh_rcache_invalidate() after the
 * registry removed the allocation and before the real free: every
 * registration of that generation is deregistered for real, including
 * ones the program still holds (revoked: the NIC must never reach memory
 * the driver may reuse), and the pin is dropped.  A later ibv_dereg_mr of
 * a revoked alias is a no-op that succeeds.  A registration racing with
 * the free of its allocation cannot leave a stale entry behind: the miss
 * path announces the generation (an atomic increment of its bucket's
 * count in ga_b) and then re-checks the registry under the lock; the free
 * path removes from the registry and then reads that count with an
 * atomic read-modify-write: the two RMWs are ordered, so either the free
 * sees the announcement (and takes the lock, after the miss), or the miss
 * path's RMW reads the free's and its registry re-check sees the removal.
 *
 * Concurrency.  Hits are lock-free: hash bucket -> entry (the bucket
 * heads live in the entry array, and an entry is made in the slot of
 * its own bucket when that is free: one place to miss on); the entry's
 * 64-bit word holds a version, a dead bit, the clock (second chance) bit
 * and the reference count, and one CAS takes a reference, sets the clock
 * bit and validates the key read before it (a recycled or killed entry
 * changes the version).  The reference is the one write a hit must make
 * anyway (the program's MR pins the entry); the LRU costs nothing more,
 * because the clock bit rides in the same CAS.  Memory is type-stable
 * (mmap'ed, never unmapped) and an entry is only recycled at reference 0.
 * Everything else (misses, pins, eviction, invalidation) runs under one
 * mutex, the object's (rc->lock), taken by the cache's own functions
 * with the hook guard up.  Limitation:
 * a free that must drop registrations waits for a miss in progress in
 * another thread.
 */
#ifndef GH_RCACHE_STATE_H
#define GH_RCACHE_STATE_H

#include <pthread.h>
#include <stdint.h>
#include <infiniband/verbs.h>

#include "pin/pin.h"
#include "rcache_api.h"

#define RC_ENT_CAP	(1u << 18)
#define RC_GA_CAP	(1u << 18)
#define RC_ALIAS_CAP	(1u << 20)
#define RC_HBITS	18	/* buckets: one per entry slot */
#define RC_RBITS	18	/* allocation-state buckets: one per state */
#define RC_STEPS	32	/* lock-free chain walk bound: then slow path */
#define RC_ADOPT_CAP	4096

#define W_REFS		0x3fffffffULL
#define W_CLOCK		(1ULL << 30)
#define W_DEAD		(1ULL << 31)
#define W_VER_SHIFT	32

/*
 * E_CACHED: allocation-wide, shared, lazy (key gen, pd, access);
 * E_RETIRED: replaced by an access upgrade, goes with its last holder;
 * E_EXACT: exactly the range asked (key gen, pd, access, addr, len),
 *   shared by identical requests, deregistered with its last holder;
 * E_WRAP: a registration the program made itself; one per allocation
 *   it touches, linked in a ring (sib) around one real MR;
 * E_WIN: exact exposure over a memory window (src/pin/mwin.c): one per
 *   program MR, the window bound to exactly its range and remote access,
 *   on a cached allocation-wide parent (E_CACHED, LOCAL_WRITE | MW_BIND,
 *   no remote rights) it holds a reference on; invalidated with its
 *   last holder, or by the free before the parent is deregistered.
 */
enum { E_FREE = 0, E_CACHED, E_RETIRED, E_WRAP, E_EXACT, E_WIN };

/* A hit reads the first cache line only. */
struct rc_entry {
	uint64_t word;		/* version | dead | clock | refs (atomic) */
	uint64_t gen;		/* key: atomic */
	uint64_t pd;		/* key: atomic */
	uint64_t addr, len;	/* E_EXACT key (atomic), else 0 */
	uint32_t access;	/* key: atomic */
	uint32_t type;		/* E_*: atomic */
	uint32_t hnext;		/* hash chain, index + 1: atomic */
	uint32_t handle, lkey, rkey;	/* read by holders of a reference */
	/* second line */
	uint64_t cookie;	/* the pin's, for ops->valid (atomic) */
	struct ibv_mr *mr;	/* the real registration (lock) */
	uint64_t ctx;		/* pd->context */
	uint32_t rnext;		/* its allocation's entry list (lock) */
	uint32_t ga;		/* allocation state index + 1, 0: detached (lock) */
	uint32_t fnext;		/* free list (lock) */
	uint32_t sib;		/* E_WRAP ring: next entry + 1 (lock) */
	uint32_t adopted;	/* E_WRAP of a program MR with no alias */
	/*
	 * Head (entry + 1) of the hash chain of bucket "this index": the
	 * buckets live in the entries, and an entry is put in its home
	 * slot when that is free, so a hit usually reads one entry's two
	 * lines (fetched together) and no separate bucket array.
	 */
	uint32_t bhead;		/* atomic; written under the lock */
	uint32_t onfree;	/* on the free list (lock) */
	uint32_t upos;		/* its place in rc.used (lock) */
	uint32_t home;		/* its bucket (lock) */
	uint32_t parent;	/* E_WIN: its parent entry + 1 (lock) */
	struct gh_mw *win;	/* E_WIN: its window (lock) */
} __attribute__((aligned(128)));

/* The cache's state of one live GPU allocation ("ga"): its pin, its entries. */
struct rc_ga {
	uint64_t gen;
	struct gh_pin pin;
	int pinned;
	int busy;		/* a miss is working on it: do not free */
	uint32_t hnext;		/* allocation-state hash chain */
	uint32_t ents;		/* entry list */
	uint32_t fnext;
	uint32_t used;
};

struct rc_alias {
	struct ibv_mr mr;	/* what the program sees */
	uint32_t ent;		/* entry index + 1 */
	uint32_t state;		/* 1 live, 0 free: atomic */
	uint32_t fnext;		/* Treiber stack: atomic */
	uint32_t access;	/* what the program asked for */
};

/*
 * What every hit counts (hits, aliases held) goes to a per-thread shard,
 * written by its owner with plain relaxed load + store: no shared line,
 * no locked instruction.  Threads past RC_SHARDS share the last shard
 * with atomic adds.  Readers sum the shards.
 *
 * A shard also keeps a few free alias slots for its owner: a hit takes
 * one and a deregistration on the same thread gives it back without a
 * locked instruction on the shared stack.  The shared last shard keeps
 * none; the slots of a thread that exits stay in its shard (at most
 * RC_MAG per shard ever made: 2550 of the 1 M slots).  RC_MAG keeps a
 * shard to one line: at three lines a random hit was 40 ns slower.
 */
#define RC_SHARDS	256
#define RC_MAG		10
struct rc_shard {
	uint64_t hits;
	uint64_t aliases;	/* made minus dropped (wraps around) */
	uint32_t mag_n;		/* owner only */
	uint32_t mag[RC_MAG];	/* free alias slots, index + 1 */
} __attribute__((aligned(64)));
_Static_assert(sizeof(struct rc_shard) == 64, "a shard is one line");

/*
 * The cache's state: one object, one instance for the process (owned by
 * rcache_core.c), handed to every function of the cache as its first
 * argument.  Each field says who may touch it:
 *   lock    read and written only with rc->lock (the cache lock) held:
 *           every function that touches such a field without taking the
 *           lock itself says so and asserts it on the object
 *           (RC_LOCKED(rc), debug builds);
 *   atomic  read without the lock (LD/LD_ACQ); written where it says;
 *   init    set by gh_rcache_init before ready is published, then only
 *           read.
 * The span key table's lock (rcache_spankeys.c) and the window engine's
 * (src/pin/mwin.c) nest inside the cache lock, never the other way round.
 * Everything but the lock-free hit and the alias pool runs under it, with
 * the hook guard up.
 */
struct rc_state {
	int ready;		/* init: published with release (LD_ACQ) */
	int stopped;		/* atomic: set by gh_rcache_purge(1), a fork */
	/*
	 * A child of fork: CUDA is unusable there and every registration
	 * it inherited is its parent's too (one uverbs file): nothing is
	 * deregistered or unpinned from here on, only forgotten.
	 */
	int forked;		/* atomic: set in the child */
	int exact;		/* init: GH_RC_EXPOSE_EXACT */
	const struct gh_pin_ops *ops;		/* init */
	uint64_t max_size, max_count;		/* init */
	struct gh_mutex lock;	/* the cache lock */

	struct rc_entry *ent;	/* init; each field of an entry says its rule */
	uint32_t ent_hi;	/* lock: bump allocator; above it, only homes */
	uint32_t *used;		/* lock: entries not free, dense */
	uint32_t n_used;	/* lock */
	uint32_t ent_free;	/* lock: free list */
	uint32_t hand;		/* lock: eviction's clock hand */

	struct rc_ga *ga;	/* init; the states themselves: lock */
	uint32_t ga_hi, ga_free, ga_hand;	/* lock */
	/*
	 * The allocation-state hash, one bucket per state (a miss walks the
	 * chain of a state not there yet: with fewer buckets that was one
	 * cache miss per state of the chain), head and count in one line.
	 */
	struct rc_gab {
		uint32_t head;	/* lock: chain head, state index + 1 */
		uint32_t cnt;	/* states in the bucket: changed under the
				 * lock, read by the free path with an RMW
				 * before it takes it (see the top) */
	} *ga_b;

	struct rc_alias *alias;	/* init: the pool (rcache_reg.c) */
	uint32_t alias_hi;	/* atomic: bump allocator */
	uint64_t alias_top;	/* atomic: free stack, tag << 32 | index + 1 */

	uint64_t n_entries, pinned_bytes;	/* lock (ADD_LOCKED); read
						 * relaxed */

	/* adopted program MRs (gh_rcache_adopt), by pointer (lock) */
	struct ibv_mr *adopt_mr[RC_ADOPT_CAP];
	uint32_t adopt_ent[RC_ADOPT_CAP];	/* ring entry + 1, 0: revoked */
	uint8_t adopt_moved[RC_ADOPT_CAP];	/* revoked onto the dummy page */
	uint32_t n_adopted;	/* written under the lock, read atomic */
	void *dummy;		/* init: the page revoked adopted MRs move to */
	/* atomic adds (CTR), anywhere; pins, unpins, regs, deregs and
	 * misses: under the lock only (CTR_LOCKED) */
	struct gh_rc_counters ctr;
	/* the per-thread shards (rcache_reg.c): each its owner's, the
	 * last one shared with atomic adds */
	uint32_t shard_next;	/* atomic: shards handed out */
	struct rc_shard shards[RC_SHARDS];
};

/*
 * The one instance, owned by the cache core (rcache_core.c), which
 * defines it; every other file names it only through gh_rc_instance().
 * The entry points the layers above call (rcache_api.h) keep their
 * signatures: each outside the core takes the instance from here once
 * and passes it down; every other function of the cache gets it as its
 * first argument.  Inline: every entry point, the lock-free hit's
 * included, takes it (a call cost 1-2 ns on a hot hit).
 */
extern struct rc_state gh_rc_cache;

static inline struct rc_state *gh_rc_instance(void)
{
	return &gh_rc_cache;
}

/* The caller holds the cache lock (checked with GH_DEBUG, else nothing). */
#define RC_LOCKED(rc) \
	do { (void)(rc); GH_ASSERT_LOCKED(&(rc)->lock); } while (0)

#define CTR(rc, f, n) \
	__atomic_add_fetch(&(rc)->ctr.f, (n), __ATOMIC_RELAXED)
/*
 * A counter (or n_entries, pinned_bytes) every writer of which holds the
 * cache lock: a plain add, read relaxed anywhere (no locked instruction
 * on the miss and free paths).  Counters bumped both with and without
 * the lock use CTR at every site.
 */
#define ADD_LOCKED(rc, p, n) \
	do { RC_LOCKED(rc); ST((p), LD(p) + (n)); } while (0)
#define CTR_LOCKED(rc, f, n)	ADD_LOCKED((rc), &(rc)->ctr.f, (n))

/* MW_BIND is a right too: a window's parent must carry it. */
#define RC_ACCESS_RIGHTS	(GH_RC_ACCESS_PERM | IBV_ACCESS_MW_BIND)

static inline int covers(unsigned int have, unsigned int want)
{
	return !(want & RC_ACCESS_RIGHTS & ~have) &&
	       (have & GH_RC_ACCESS_EXACT) == (want & GH_RC_ACCESS_EXACT);
}

/* addr, len: the E_EXACT key; 0, 0 for allocation-wide entries. */
/*
 * An entry's bucket: keyed by the 64 KiB granule of its allocation's base
 * (not its generation), so the verbs wrapper can fetch the bucket of a
 * registration inside its allocation's first granule (the usual case)
 * before the registry has named the allocation: gh_rcache_prefetch.
 */
static inline uint32_t hash_ent(uint64_t base, uint64_t pd,
				unsigned int access, uint64_t addr,
				uint64_t len)
{
	/* one multiply on the path of a hit: the top bits of a Fibonacci
	 * hash of the mixed key */
	uint64_t k = (base >> 16) ^ (pd << 20) ^ (pd >> 4) ^
		     (access & GH_RC_ACCESS_EXACT) ^
		     (addr * 0xc2b2ae3d27d4eb4fULL) ^ (len << 32);

	return (uint32_t)((k * 0x9e3779b97f4a7c15ULL) >> (64 - RC_HBITS));
}

static inline uint32_t hash_of(const struct rc_entry *e)
{
	return e->home;
}

static inline uint32_t hash_ga(uint64_t gen)
{
	return (uint32_t)((gen * 0x9e3779b97f4a7c15ULL) >> (64 - RC_RBITS));
}

static inline uint32_t ent_idx(const struct rc_state *rc,
			       const struct rc_entry *e)
{
	return (uint32_t)(e - rc->ent) + 1;
}

static inline struct rc_ga *ga_of(const struct rc_state *rc,
				  const struct rc_entry *e)
{
	return e->ga ? &rc->ga[e->ga - 1] : NULL;
}

/* ------------------------------------------------ the core's operations */

/*
 * What the core (rcache_core.c) does with the object, for the other files
 * of the cache.  All but the entry word ops and the records with the
 * cache lock held (asserted).
 */

/* Entry word: kill (set dead, bump the version): the references left, or
 * -1 when it was dead already; kill only if idle and (ver != 0) still at
 * version ver. */
int64_t gh_rc_ent_kill(struct rc_entry *e);
int gh_rc_ent_kill_idle(struct rc_entry *e, uint64_t ver);

/* The hash chains of cached entries. */
void gh_rc_hash_unlink(struct rc_state *rc, struct rc_entry *e);
void gh_rc_hash_insert(struct rc_state *rc, struct rc_entry *e);
struct rc_entry *gh_rc_hash_find_cur(struct rc_state *rc, uint64_t base,
				     uint64_t gen, uint64_t pd,
				     unsigned int access);

/* A new entry (one reference, for the caller's alias), and back to the
 * free list. */
struct rc_entry *gh_rc_ent_new(struct rc_state *rc, struct rc_ga *r,
			       uint32_t type, struct ibv_pd *pd,
			       unsigned int access, struct ibv_mr *mr,
			       uint64_t addr, uint64_t len);
void gh_rc_ent_reclaim(struct rc_state *rc, struct rc_entry *e);

/*
 * e was just killed by us (refs references left).  Deregister for real;
 * reclaim it, or leave it detached for its last holder (revoked).
 */
void gh_rc_ent_finish(struct rc_state *rc, struct rc_entry *e, int64_t refs,
		      int revoke);
/* Drop a reference with the lock held (a window let its parent go). */
void gh_rc_put_ref_locked(struct rc_state *rc, struct rc_entry *e);

/* The adopt table slot of mr, or -1. */
int gh_rc_adopt_find(struct rc_state *rc, const struct ibv_mr *mr);

/* Allocation states: get (made if needed: 0, -ESTALE, -ENOSPC), free
 * when nothing uses it, kill everything made on it. */
int gh_rc_ga_get(struct rc_state *rc, const struct gh_range *g,
		 struct rc_ga **r_p);
void gh_rc_ga_free_if_unused(struct rc_state *rc, struct rc_ga *r);
void gh_rc_ga_kill_all(struct rc_state *rc, struct rc_ga *r, int before_free);
/* r's pin was revoked. */
void gh_rc_ga_drop(struct rc_state *rc, struct rc_ga *r);

/* The event records (rcache_core.c). */
struct rc_logarg {
	const char *api;
	uint64_t addr, len;	/* hit/miss: what the program asked */
	const struct rc_ga *r;
	const struct gh_range *g;
	uint64_t gen, mr, pd;
	unsigned int access;
	int err;
};

void gh_rc_log(struct rc_state *rc, unsigned int ev, uint64_t t0,
	       const struct rc_logarg *a);
/* Shorthands that build the record of a pin or a registration. */
void gh_rc_ev_pin(struct rc_state *rc, unsigned int ev, const struct rc_ga *r,
		  int err, uint64_t t0);
void gh_rc_ev_reg(struct rc_state *rc, unsigned int ev,
		  const struct rc_entry *x, const struct rc_ga *r, int err,
		  uint64_t t0);

#endif
