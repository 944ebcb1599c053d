// SPDX-License-Identifier: MIT
/*
 * Registration cache: ibv_reg_mr on GPU memory, done once per allocation.
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
 * path announces the generation (an atomic increment of ga_cnt) and then
 * re-checks the registry under the lock; the free path removes from the
 * registry and then reads ga_cnt with an atomic read-modify-write: the
 * two RMWs are ordered, so either the free sees the announcement (and
 * takes the lock, after the miss), or the miss path's RMW reads the
 * free's and its registry re-check sees the removal.
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
 * mutex that only this file takes, with the hook guard up.  Limitation:
 * a free that must drop registrations waits for a miss in progress in
 * another thread.
 */
#include <errno.h>
#include <stddef.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <infiniband/verbs.h>

#include "pin/pin.h"
#include "rcache_core.h"
#include "rcache_spankeys.h"

#define RC_ENT_CAP	(1u << 18)
#define RC_GA_CAP	(1u << 18)
#define RC_ALIAS_CAP	(1u << 20)
#define RC_HBITS	18	/* buckets: one per entry slot */
#define RC_RBITS	14
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

static struct {
	int ready;
	int stopped;
	/*
	 * A child of fork: CUDA is unusable there and every registration
	 * it inherited is its parent's too (one uverbs file): nothing is
	 * deregistered or unpinned from here on, only forgotten.
	 */
	int forked;
	int exact;		/* GH_RC_EXPOSE_EXACT */
	const struct gh_pin_ops *ops;
	uint64_t max_size, max_count;
	pthread_mutex_t lock;

	struct rc_entry *ent;
	uint32_t ent_hi;	/* bump allocator: above it, only homes used */
	uint32_t *used;		/* entries not free, dense (lock) */
	uint32_t n_used;
	uint32_t ent_free, hand;

	struct rc_ga *ga;
	uint32_t ga_hi, ga_free, ga_hand;
	uint32_t *ga_head;	/* allocation-state hash heads (lock) */
	uint32_t *ga_cnt;	/* allocation states per bucket (atomic, fenced) */

	struct rc_alias *alias;
	uint32_t alias_hi;	/* atomic */
	uint64_t alias_top;	/* tag << 32 | index + 1 (atomic) */

	uint64_t n_entries, pinned_bytes;	/* lock; read relaxed */

	/* adopted program MRs (gh_rcache_adopt), by pointer (lock) */
	struct ibv_mr *adopt_mr[RC_ADOPT_CAP];
	uint32_t adopt_ent[RC_ADOPT_CAP];	/* ring entry + 1, 0: revoked */
	uint8_t adopt_moved[RC_ADOPT_CAP];	/* revoked onto the dummy page */
	uint32_t n_adopted;			/* atomic */
	void *dummy;		/* the page revoked adopted MRs move to */
	struct gh_rc_counters ctr;
} rc = { .lock = PTHREAD_MUTEX_INITIALIZER };

#define LD(p)		__atomic_load_n((p), __ATOMIC_RELAXED)
#define LD_ACQ(p)	__atomic_load_n((p), __ATOMIC_ACQUIRE)
#define ST(p, v)	__atomic_store_n((p), (v), __ATOMIC_RELAXED)
#define ST_REL(p, v)	__atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define CTR(f, n)	__atomic_add_fetch(&rc.ctr.f, (n), __ATOMIC_RELAXED)

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
static struct rc_shard rc_shards[RC_SHARDS];
static uint32_t rc_shard_next;
/* initial-exec: a hit reads these; no __tls_get_addr call (as in call.c) */
static __thread struct rc_shard *rc_my_shard
	__attribute__((tls_model("initial-exec")));
static __thread int rc_my_shared __attribute__((tls_model("initial-exec")));

static inline struct rc_shard *shard_mine(void)
{
	struct rc_shard *s = rc_my_shard;

	if (GH_UNLIKELY(!s)) {
		uint32_t i = __atomic_fetch_add(&rc_shard_next, 1,
						__ATOMIC_RELAXED);

		rc_my_shared = i >= RC_SHARDS - 1;
		s = &rc_shards[rc_my_shared ? RC_SHARDS - 1 : i];
		rc_my_shard = s;
	}
	return s;
}

static inline void shard_add(size_t off, uint64_t n)
{
	struct rc_shard *s = shard_mine();
	uint64_t *p = (uint64_t *)((char *)s + off);

	if (GH_UNLIKELY(rc_my_shared))
		__atomic_add_fetch(p, n, __ATOMIC_RELAXED);
	else
		__atomic_store_n(p, __atomic_load_n(p, __ATOMIC_RELAXED) + n,
				 __ATOMIC_RELAXED);
}

#define SHARD(f, n) \
	shard_add(offsetof(struct rc_shard, f), (uint64_t)(n))

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
	pthread_mutex_lock(&rc.lock);
}

static void atfork_release(void)
{
	pthread_mutex_unlock(&rc.lock);
}

static void atfork_child(void)
{
	ST(&rc.forked, 1);
	ST(&rc.stopped, 1);
	pthread_mutex_unlock(&rc.lock);
}

int gh_rcache_init(const struct gh_pin_ops *ops, uint64_t max_size,
		   uint64_t max_count, unsigned int flags)
{
	static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
	int rc_ = 0;

	if (LD_ACQ(&rc.ready))
		return 0;
	pthread_mutex_lock(&init_lock);
	if (rc.ready)
		goto out;
	rc.ent = map_zero(sizeof(*rc.ent) * RC_ENT_CAP);
	rc.used = map_zero(sizeof(uint32_t) * RC_ENT_CAP);
	rc.ga = map_zero(sizeof(*rc.ga) * RC_GA_CAP);
	rc.alias = map_zero(sizeof(*rc.alias) * RC_ALIAS_CAP);
	rc.ga_head = map_zero(sizeof(uint32_t) << RC_RBITS);
	rc.ga_cnt = map_zero(sizeof(uint32_t) << RC_RBITS);
	if (!rc.ent || !rc.used || !rc.ga || !rc.alias || !rc.ga_head ||
	    !rc.ga_cnt) {
		rc_ = -ENOMEM;
		goto out;
	}
	rc.dummy = map_zero(4096);
	if (!rc.dummy) {
		rc_ = -ENOMEM;
		goto out;
	}
	rc.ops = ops;
	rc.exact = !!(flags & GH_RC_EXPOSE_EXACT);
	rc.max_size = max_size;
	rc.max_count = max_count && max_count < RC_ENT_CAP ? max_count :
		       RC_ENT_CAP;
	pthread_atfork(atfork_prepare, atfork_release, atfork_child);
	gh_pin_on_revoked(gh_rcache_revoke);
	ST_REL(&rc.ready, 1);
out:
	pthread_mutex_unlock(&init_lock);
	return rc_;
}

int gh_rcache_ready(void)
{
	return LD_ACQ(&rc.ready);
}

const struct gh_pin_ops *gh_rcache_ops(void)
{
	return LD_ACQ(&rc.ready) ? rc.ops : NULL;
}

void *gh_rcache_dummy_page(void)
{
	return rc.dummy;
}

int gh_rcache_exact(void)
{
	return LD_ACQ(&rc.ready) && rc.exact;
}

int gh_rcache_access_ok(unsigned int access)
{
	return !(access & ~(GH_RC_ACCESS_PERM | GH_RC_ACCESS_EXACT));
}

/* MW_BIND is a right too: a window's parent must carry it. */
#define RC_ACCESS_RIGHTS	(GH_RC_ACCESS_PERM | IBV_ACCESS_MW_BIND)

static int covers(unsigned int have, unsigned int want)
{
	return !(want & RC_ACCESS_RIGHTS & ~have) &&
	       (have & GH_RC_ACCESS_EXACT) == (want & GH_RC_ACCESS_EXACT);
}

static int kind_cacheable(const struct gh_range *r)
{
	if (r->flags & GH_RANGE_VOLATILE)
		return 0;
	return r->kind == GDRHOOK_KIND_DEVICE || r->kind == GDRHOOK_KIND_VMM ||
	       r->kind == GDRHOOK_KIND_IPC;
}

/* addr, len: the E_EXACT key; 0, 0 for allocation-wide entries. */
/*
 * An entry's bucket: keyed by the 64 KiB granule of its allocation's base
 * (not its generation), so the verbs wrapper can fetch the bucket of a
 * registration inside its allocation's first granule (the usual case)
 * before the registry has named the allocation: gh_rcache_prefetch.
 */
static uint32_t hash_ent(uint64_t base, uint64_t pd, unsigned int access,
			 uint64_t addr, uint64_t len)
{
	/* one multiply on the path of a hit: the top bits of a Fibonacci
	 * hash of the mixed key */
	uint64_t k = (base >> 16) ^ (pd << 20) ^ (pd >> 4) ^
		     (access & GH_RC_ACCESS_EXACT) ^
		     (addr * 0xc2b2ae3d27d4eb4fULL) ^ (len << 32);

	return (uint32_t)((k * 0x9e3779b97f4a7c15ULL) >> (64 - RC_HBITS));
}

static uint32_t hash_of(const struct rc_entry *e)
{
	return e->home;
}

static uint32_t hash_ga(uint64_t gen)
{
	return (uint32_t)((gen * 0x9e3779b97f4a7c15ULL) >> (64 - RC_RBITS));
}

static uint32_t ent_idx(const struct rc_entry *e)
{
	return (uint32_t)(e - rc.ent) + 1;
}

static struct rc_ga *ga_of(const struct rc_entry *e)
{
	return e->ga ? &rc.ga[e->ga - 1] : NULL;
}

/* ------------------------------------------------------------ event log */

/*
 * Every record the registration path writes is built here, straight into
 * the event log layer (evlog.h): pin/unpin, reg/dereg, revoke (r, gen,
 * mr, pd, access), hit/miss (api, addr, len, alias).
 */
struct rc_logarg {
	const char *api;
	uint64_t addr, len;	/* hit/miss: what the program asked */
	const struct rc_ga *r;
	const struct gh_range *g;
	uint64_t gen, mr, pd;
	unsigned int access;
	int err;
};

static void rc_log(unsigned int ev, uint64_t t0, const struct rc_logarg *a)
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
		gh_ev_emit_pin(ev, t0, ptr, size, a->gen, dev, rc.ops->name,
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

static void ev_pin(unsigned int ev, const struct rc_ga *r, int err,
		   uint64_t t0)
{
	struct rc_logarg a = { .r = r, .gen = r->gen, .err = err };

	if (gh_evlog_enabled())
		rc_log(ev, t0, &a);
}

static void ev_reg(unsigned int ev, const struct rc_entry *x,
		   const struct rc_ga *r, int err, uint64_t t0)
{
	struct rc_logarg a = { .r = r, .gen = x->gen,
			       .mr = x->mr ? (uint64_t)(uintptr_t)x->mr :
			       (uint64_t)(uintptr_t)x->win, .pd = x->pd,
			       .access = x->access, .err = err,
			       .addr = x->addr, .len = x->len };

	if (gh_evlog_enabled())
		rc_log(ev, t0, &a);
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
		rc_log(hit ? GH_EV_HIT : GH_EV_MISS, t0, &a);
}

/* ------------------------------------------------------- entry word ops */

/* Kill: set dead, bump the version.  Returns the references left, or -1
 * when it was dead already. */
static int64_t ent_kill(struct rc_entry *e)
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
static int ent_kill_idle(struct rc_entry *e, uint64_t ver)
{
	uint64_t w = LD_ACQ(&e->word), nw;

	if ((w & (W_DEAD | W_REFS)) ||
	    (ver && (w >> W_VER_SHIFT) != ver))
		return 0;
	nw = (((w >> W_VER_SHIFT) + 1) << W_VER_SHIFT) | W_DEAD;
	return __atomic_compare_exchange_n(&e->word, &w, nw, 0,
					   __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

/*
 * Lock-free: find a live entry for (gen, pd) serving want; take a ref.
 * len 0: an allocation-wide entry whose access covers want; else the
 * E_EXACT entry of exactly [addr, addr + len) and exactly want.
 */
static struct rc_entry *lookup_ref(uint64_t base, uint64_t gen, uint64_t pd,
				   unsigned int want, uint64_t addr,
				   uint64_t len)
{
	struct rc_entry *home = &rc.ent[hash_ent(base, pd, want, addr, len)];
	uint32_t i;

	__builtin_prefetch(home);	/* in parallel with its bhead line */
	i = LD_ACQ(&home->bhead);

	for (int steps = 0; i && steps < RC_STEPS; steps++) {
		struct rc_entry *e = &rc.ent[i - 1];
		uint64_t w = LD_ACQ(&e->word);

		if (!(w & W_DEAD) && LD(&e->gen) == gen && LD(&e->pd) == pd &&
		    LD(&e->addr) == addr && LD(&e->len) == len &&
		    (len ? LD(&e->access) == want :
		     covers(LD(&e->access), want))) {
			uint32_t t = LD(&e->type);
			uint64_t ver = w >> W_VER_SHIFT;

			if ((t != E_CACHED && t != E_RETIRED && t != E_EXACT) ||
			    (rc.ops->valid && !rc.ops->valid(LD(&e->cookie))))
				goto next;
			/*
			 * Another holder's reference moving the word is no
			 * reason to look further: retry while the version
			 * (the key just checked) stands.  Giving up here made
			 * contended hits misses, and the miss path then took
			 * the entry for an access upgrade.
			 */
			while (!(w & W_DEAD) && (w & W_REFS) < W_REFS &&
			       (w >> W_VER_SHIFT) == ver) {
				if (__atomic_compare_exchange_n(
					    &e->word, &w, (w + 1) | W_CLOCK, 0,
					    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
					return e;
			}
		}
next:
		i = LD_ACQ(&e->hnext);
	}
	return NULL;
}

/* ------------------------------------------------------- lock held below */

static void hash_unlink(struct rc_entry *e)
{
	uint32_t *pp = &rc.ent[hash_of(e)].bhead;
	uint32_t me = ent_idx(e), i;

	while ((i = LD(pp)) != 0) {
		if (i == me) {
			ST_REL(pp, LD(&e->hnext));
			return;
		}
		pp = &rc.ent[i - 1].hnext;
	}
}

/* The current cached entry for (gen, pd, exact bits), dead or alive. */
static struct rc_entry *hash_find_cur(uint64_t base, uint64_t gen,
				      uint64_t pd, unsigned int access)
{
	uint32_t i = LD(&rc.ent[hash_ent(base, pd, access, 0, 0)].bhead);

	while (i) {
		struct rc_entry *e = &rc.ent[i - 1];

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

static void ga_unlink_ent(struct rc_entry *e)
{
	struct rc_ga *r = ga_of(e);
	uint32_t *pp, me = ent_idx(e);

	if (!r)
		return;
	for (pp = &r->ents; *pp; pp = &rc.ent[*pp - 1].rnext) {
		if (*pp == me) {
			*pp = e->rnext;
			break;
		}
	}
	e->ga = 0;
	e->rnext = 0;
}

static void free_push(struct rc_entry *e)
{
	if (e->onfree)
		return;		/* still listed from before its home reuse */
	e->onfree = 1;
	e->fnext = rc.ent_free;
	rc.ent_free = ent_idx(e);
}

/*
 * A free entry, in slot home (index + 1; 0: anywhere) when that one is
 * free.  A slot taken as a home may still be on the free list: the pop
 * skips what is not free (lazy removal).
 */
/* Homes scatter entries over the array: scans (eviction, drops) walk
 * the dense list of the used ones instead. */
static struct rc_entry *ent_used(struct rc_entry *e)
{
	e->upos = rc.n_used;
	rc.used[rc.n_used++] = ent_idx(e) - 1;
	return e;
}

static void ent_unused(struct rc_entry *e)
{
	uint32_t last = rc.used[--rc.n_used];

	rc.used[e->upos] = last;
	rc.ent[last].upos = e->upos;
}

static struct rc_entry *ent_take(uint32_t home)
{
	struct rc_entry *e;

	if (home && LD(&rc.ent[home - 1].type) == E_FREE)
		return ent_used(&rc.ent[home - 1]);
	while (rc.ent_free) {
		e = &rc.ent[rc.ent_free - 1];
		rc.ent_free = e->fnext;
		e->onfree = 0;
		if (LD(&e->type) == E_FREE)
			return ent_used(e);
	}
	/* never used yet: the bump skips the homes taken above it */
	while (rc.ent_hi < RC_ENT_CAP) {
		e = &rc.ent[rc.ent_hi++];
		if (LD(&e->type) == E_FREE)
			return ent_used(e);
	}
	return NULL;
}

static void ent_reclaim(struct rc_entry *e)
{
	ga_unlink_ent(e);
	ent_unused(e);
	ST(&e->type, E_FREE);
	e->mr = NULL;
	free_push(e);
}

static struct rc_entry *ent_new(struct rc_ga *r, uint32_t type,
				struct ibv_pd *pd, unsigned int access,
				struct ibv_mr *mr, uint64_t addr, uint64_t len)
{
	struct rc_entry *e;
	uint64_t ver;

	uint32_t home = r ? hash_ent(r->pin.base, (uint64_t)(uintptr_t)pd,
				     access, addr, len) : 0;

	e = ent_take(type == E_CACHED || type == E_EXACT ? home + 1 : 0);
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
		e->ga = (uint32_t)(r - rc.ga) + 1;
		e->rnext = r->ents;
		r->ents = ent_idx(e);
	}
	/* Publish: one reference, for the caller's alias. */
	ST_REL(&e->word, (ver << W_VER_SHIFT) | W_CLOCK | 1);
	return e;
}

static void hash_insert(struct rc_entry *e)
{
	uint32_t *head = &rc.ent[hash_of(e)].bhead;

	ST(&e->hnext, LD(head));
	ST_REL(head, ent_idx(e));
}

/*
 * e was just killed by us (refs references left).  Deregister for real;
 * reclaim it, or leave it detached for its last holder (revoked).
 */
static void ga_free_if_unused(struct rc_ga *r);
static void ent_finish(struct rc_entry *e, int64_t refs, int revoke);

/* The adopt table slot of mr, or -1. */
static int adopt_find(const struct ibv_mr *mr)
{
	for (uint32_t i = 0; i < RC_ADOPT_CAP; i++)
		if (rc.adopt_mr[i] == mr)
			return (int)i;
	return -1;
}

/*
 * Take the NIC's access away from an adopted MR without freeing the
 * program's object: re-register it onto a private page, local read only.
 * If the provider cannot, deregister it and remember the pointer as
 * revoked (the program's ibv_dereg_mr then succeeds without a call).
 */
static int adopt_revoke(struct ibv_mr *mr)
{
	int i = adopt_find(mr), err;

	err = gh_vreal_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION |
				IBV_REREG_MR_CHANGE_ACCESS, NULL, rc.dummy,
				4096, 0);
	if (!err) {
		/* kept: its next rereg must restate what it lost */
		if (i >= 0) {
			rc.adopt_ent[i] = 0;
			rc.adopt_moved[i] = 1;
		}
		return 0;
	}
	err = gh_vreal_dereg_mr(mr);
	if (i >= 0)
		rc.adopt_ent[i] = 0;
	return err;
}

/*
 * e (E_WRAP) was finished: its real MR is gone, so every other entry of
 * its ring goes too (one per allocation the registration touched).
 */
static void ring_finish(struct rc_entry *e, int revoke)
{
	uint32_t me = ent_idx(e), i = e->sib;

	e->sib = 0;
	while (i && i != me) {
		struct rc_entry *x = &rc.ent[i - 1];
		struct rc_ga *xr = ga_of(x);
		int64_t refs;

		i = x->sib;
		x->sib = 0;
		x->mr = NULL;		/* deregistered with e */
		refs = ent_kill(x);
		if (refs >= 0)
			ent_finish(x, refs, revoke);
		ga_free_if_unused(xr);
	}
}

/* Drop a reference with the lock held (a window let its parent go). */
static void put_ref_locked(struct rc_entry *e)
{
	uint64_t w = __atomic_sub_fetch(&e->word, 1, __ATOMIC_ACQ_REL);

	if (w & W_REFS)
		return;
	if (w & W_DEAD) {
		ent_reclaim(e);		/* revoked: we were the last holder */
		return;
	}
	if (LD(&e->type) == E_CACHED && !LD(&rc.stopped))
		return;		/* lazy, as put_ref */
	if (ent_kill_idle(e, w >> W_VER_SHIFT)) {
		struct rc_ga *r = ga_of(e);

		ent_finish(e, 0, 0);
		ga_free_if_unused(r);
	}
}

/* An E_WIN entry goes: its window invalidated, its parent let go. */
static void win_finish(struct rc_entry *e, struct rc_ga *r, uint64_t t0)
{
	if (e->win) {
		if (LD(&rc.forked)) {
			gh_mw_forget(e->win);	/* the parent process's */
		} else {
			gh_mw_invalidate(e->win);
			ev_reg(GH_EV_DEREG, e, r, 0, t0);
		}
		e->win = NULL;
	}
	if (e->parent) {
		struct rc_entry *par = &rc.ent[e->parent - 1];

		e->parent = 0;
		put_ref_locked(par);
	}
}

static void ent_finish(struct rc_entry *e, int64_t refs, int revoke)
{
	uint32_t type = LD(&e->type);
	struct rc_ga *r = ga_of(e);
	uint64_t t0 = gh_evlog_clock();
	int err = 0;

	if (type == E_CACHED)
		hash_unlink(e);
	if (type == E_CACHED || type == E_RETIRED || type == E_EXACT)
		__atomic_sub_fetch(&rc.n_entries, 1, __ATOMIC_RELAXED);
	if (type == E_WIN)
		win_finish(e, r, t0);
	if (e->mr && LD(&rc.forked)) {
		e->mr = NULL;	/* the parent's too: forgotten, never deregistered */
	} else if (e->mr) {
		err = e->adopted ? adopt_revoke(e->mr) : rc.ops->dereg(e->mr);
		ev_reg(GH_EV_DEREG, e, r, err, t0);
		CTR(deregs, 1);
		if (err)
			gh_warn("deregistration of mr %p failed: %s",
				(void *)e->mr, gh_errtext(-err));
		e->mr = NULL;
	}
	if (e->sib)
		ring_finish(e, revoke);
	if (revoke)
		CTR(stale_averted, 1);
	if (refs > 0) {
		CTR(revoked, 1);
		if (gh_evlog_enabled()) {
			struct rc_logarg a = { .r = r, .gen = e->gen };

			rc_log(GH_EV_REVOKE, t0, &a);
		}
		ga_unlink_ent(e);	/* the last holder reclaims it */
	} else {
		ent_reclaim(e);
	}
}

static void ga_free_if_unused(struct rc_ga *r)
{
	uint32_t *pp, me;

	if (!r || r->ents || r->busy || !r->used)
		return;
	if (r->pinned && LD(&rc.forked)) {
		r->pinned = 0;	/* the parent's pin: forgotten */
	} else if (r->pinned) {
		uint64_t t0 = gh_evlog_clock(), bytes = r->pin.pin_size;

		/* (the backend may clear pin_size) */
		rc.ops->unpin(&r->pin);
		ev_pin(GH_EV_UNPIN, r, 0, t0);
		__atomic_sub_fetch(&rc.pinned_bytes, bytes, __ATOMIC_RELAXED);
		CTR(unpins, 1);
		r->pinned = 0;
	}
	me = (uint32_t)(r - rc.ga) + 1;
	for (pp = &rc.ga_head[hash_ga(r->gen)]; *pp; pp = &rc.ga[*pp - 1].hnext) {
		if (*pp == me) {
			*pp = r->hnext;
			break;
		}
	}
	__atomic_sub_fetch(&rc.ga_cnt[hash_ga(r->gen)], 1, __ATOMIC_ACQ_REL);
	if (gh_rcspan_is_key(r->gen))
		gh_rcspan_release(r->gen);
	r->used = 0;
	r->fnext = rc.ga_free;
	rc.ga_free = me;
}

static struct rc_ga *ga_find(uint64_t gen)
{
	uint32_t i = rc.ga_head[hash_ga(gen)];

	while (i) {
		struct rc_ga *r = &rc.ga[i - 1];

		if (r->gen == gen)
			return r;
		i = r->hnext;
	}
	return NULL;
}

/*
 * The state (struct rc_ga) of live allocation g, made if needed.  A new one is
 * announced in ga_cnt before the registry is re-checked (see the top).
 */
static int ga_get(const struct gh_range *g, struct rc_ga **r_p)
{
	uint32_t b = hash_ga(g->gen), i;
	struct gh_range cur;
	struct rc_ga *r = ga_find(g->gen);

	if (r) {
		*r_p = r;
		return 0;
	}
	/* Announce, then re-check (see the top of this file). */
	__atomic_add_fetch(&rc.ga_cnt[b], 1, __ATOMIC_ACQ_REL);
	if (gh_rcspan_is_key(g->gen) ? gh_rcspan_claim(g->gen) :
	    gh_registry_lookup(g->base, 1, &cur) || cur.gen != g->gen ||
	    cur.base != g->base) {
		__atomic_sub_fetch(&rc.ga_cnt[b], 1, __ATOMIC_ACQ_REL);
		return -ESTALE;
	}
	if (rc.ga_free) {
		i = rc.ga_free;
		rc.ga_free = rc.ga[i - 1].fnext;
	} else if (rc.ga_hi < RC_GA_CAP) {
		i = ++rc.ga_hi;
	} else {
		__atomic_sub_fetch(&rc.ga_cnt[b], 1, __ATOMIC_ACQ_REL);
		if (gh_rcspan_is_key(g->gen))
			gh_rcspan_release(g->gen);
		return -ENOSPC;
	}
	r = &rc.ga[i - 1];
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
	r->hnext = rc.ga_head[b];
	rc.ga_head[b] = i;
	*r_p = r;
	return 0;
}

/* Deregister everything made on r (revoking held ones), then drop r. */
static void ga_kill_all(struct rc_ga *r, int before_free)
{
	/* windows first: a parent with a bound window cannot go */
	for (uint32_t i = r->ents; i;) {
		struct rc_entry *e = &rc.ent[i - 1];
		int64_t refs;

		i = e->rnext;
		if (LD(&e->type) != E_WIN)
			continue;
		refs = ent_kill(e);
		if (refs < 0) {
			ga_unlink_ent(e);
			continue;
		}
		ent_finish(e, refs, before_free);
	}
	while (r->ents) {
		struct rc_entry *e = &rc.ent[r->ents - 1];
		int64_t refs = ent_kill(e);

		if (refs < 0) {
			ga_unlink_ent(e);	/* dead: holder reclaims */
			continue;
		}
		ent_finish(e, refs, before_free);
	}
	ga_free_if_unused(r);
}

/* r's pin was revoked. */
static void ga_drop(struct rc_ga *r)
{
	ga_kill_all(r, 0);
}

/* Evict one idle cached entry (clock); not from the allocation-state skip.  1 if done. */
static int evict_one(const struct rc_ga *skip, int ignore_clock)
{
	uint32_t hi = rc.n_used;

	for (uint64_t n = 0; hi && n < 2ULL * hi + 1; n++) {
		struct rc_entry *e;
		struct rc_ga *r;
		uint64_t w;

		if (rc.hand >= rc.n_used)
			rc.hand = 0;
		e = &rc.ent[rc.used[rc.hand++]];
		if (LD(&e->type) != E_CACHED)
			continue;
		r = ga_of(e);
		if (r == skip && skip)
			continue;
		w = LD_ACQ(&e->word);
		if (w & (W_DEAD | W_REFS))
			continue;
		if ((w & W_CLOCK) && !ignore_clock) {
			__atomic_compare_exchange_n(&e->word, &w, w & ~W_CLOCK,
						    0, __ATOMIC_ACQ_REL,
						    __ATOMIC_ACQUIRE);
			continue;
		}
		if (!ent_kill_idle(e, w >> W_VER_SHIFT))
			continue;
		ent_finish(e, 0, 0);
		ga_free_if_unused(r);
		CTR(evictions, 1);
		return 1;
	}
	return 0;
}

/*
 * Unpin one allocation state that holds a pin but no registration (exact exposure
 * keeps pins after the last MR on them is gone); not skip.  1 if done.
 */
static int evict_idle_pin(const struct rc_ga *skip)
{
	uint32_t hi = rc.ga_hi;

	for (uint32_t n = 0; n < hi; n++) {
		struct rc_ga *r;

		if (rc.ga_hand >= hi)
			rc.ga_hand = 0;
		r = &rc.ga[rc.ga_hand++];
		if (r == skip || !r->used || !r->pinned || r->ents || r->busy)
			continue;
		ga_free_if_unused(r);
		CTR(evictions, 1);
		return 1;
	}
	return 0;
}

static int evict_any(const struct rc_ga *skip, int ignore_clock)
{
	return evict_idle_pin(skip) || evict_one(skip, ignore_clock);
}

static uint64_t pin_bytes_of(const struct rc_ga *r)
{
	uint64_t lo = r->pin.base & ~(GH_PIN_ALIGN - 1);
	uint64_t hi = (r->pin.base + r->pin.size + GH_PIN_ALIGN - 1) &
		      ~(GH_PIN_ALIGN - 1);

	return hi - lo;
}

static int make_room(const struct rc_ga *r)
{
	uint64_t need = r->pinned ? 0 : pin_bytes_of(r);

	while (rc.n_entries + 1 > rc.max_count)
		if (!evict_one(r, 0))
			return -ENOSPC;
	while (rc.max_size && rc.pinned_bytes + need > rc.max_size)
		if (!evict_any(r, 0))
			return -ENOSPC;
	return 0;
}

static int evict_all_idle(const struct rc_ga *skip)
{
	int n = 0;

	while (evict_any(skip, 1))
		n++;
	return n;
}

/* Out of memory, NIC resources, or fds (each dmabuf pin holds one). */
static int retryable(int err)
{
	return err == -ENOMEM || err == -ENOSPC || err == -EMFILE ||
	       err == -ENFILE;
}

static int do_pin(struct rc_ga *r)
{
	uint64_t t0 = gh_evlog_clock();
	int err = rc.ops->pin(&r->pin);

	if (retryable(err) && evict_all_idle(r)) {
		CTR(retries, 1);
		t0 = gh_evlog_clock();
		err = rc.ops->pin(&r->pin);
	}
	ev_pin(GH_EV_PIN, r, err, t0);
	if (err)
		return err;
	r->pinned = 1;
	__atomic_add_fetch(&rc.pinned_bytes, r->pin.pin_size, __ATOMIC_RELAXED);
	CTR(pins, 1);
	return 0;
}

static int do_reg(struct rc_ga *r, struct ibv_pd *pd, uint64_t addr,
		  uint64_t len, unsigned int access, struct ibv_mr **mr_p)
{
	int err = rc.ops->reg(&r->pin, pd, addr, len, access, mr_p);

	if (retryable(err) && evict_all_idle(r)) {
		CTR(retries, 1);
		err = rc.ops->reg(&r->pin, pd, addr, len, access, mr_p);
	}
	return err;
}

/* --------------------------------------------------------------- aliases */

static struct rc_alias *alias_get(void)
{
	struct rc_shard *s = shard_mine();
	uint64_t top;
	uint32_t i;

	if (!rc_my_shared && s->mag_n)
		return &rc.alias[s->mag[--s->mag_n] - 1];
	top = LD_ACQ(&rc.alias_top);

	for (;;) {
		uint64_t nt;

		i = (uint32_t)top;
		if (!i)
			break;
		nt = (((top >> 32) + 1) << 32) | LD(&rc.alias[i - 1].fnext);
		if (__atomic_compare_exchange_n(&rc.alias_top, &top, nt, 0,
						__ATOMIC_ACQ_REL,
						__ATOMIC_ACQUIRE))
			return &rc.alias[i - 1];
	}
	i = __atomic_fetch_add(&rc.alias_hi, 1, __ATOMIC_RELAXED);
	if (i >= RC_ALIAS_CAP) {
		__atomic_fetch_sub(&rc.alias_hi, 1, __ATOMIC_RELAXED);
		return NULL;
	}
	return &rc.alias[i];
}

static void alias_put(struct rc_alias *a)
{
	uint32_t me = (uint32_t)(a - rc.alias) + 1;
	struct rc_shard *s = shard_mine();
	uint64_t top, nt;

	if (!rc_my_shared && s->mag_n < RC_MAG) {
		s->mag[s->mag_n++] = me;
		return;
	}
	top = LD(&rc.alias_top);
	do {
		ST(&a->fnext, (uint32_t)top);
		nt = (((top >> 32) + 1) << 32) | me;
	} while (!__atomic_compare_exchange_n(&rc.alias_top, &top, nt, 0,
					      __ATOMIC_RELEASE,
					      __ATOMIC_RELAXED));
}

static struct ibv_mr *alias_make(struct rc_entry *e, struct ibv_pd *pd,
				 uint64_t addr, uint64_t len,
				 unsigned int access)
{
	struct rc_alias *a = alias_get();

	if (!a)
		return NULL;
	a->mr.context = pd ? pd->context : NULL;
	a->mr.pd = pd;
	a->mr.addr = (void *)(uintptr_t)addr;
	a->mr.length = len;
	a->mr.handle = e->handle;
	a->mr.lkey = e->lkey;
	a->mr.rkey = e->rkey;
	a->ent = ent_idx(e);
	a->access = access;
	ST_REL(&a->state, 1);
	SHARD(aliases, 1);
	return &a->mr;
}

int gh_rcache_is_alias(const struct ibv_mr *mr)
{
	uintptr_t p = (uintptr_t)mr, lo = (uintptr_t)rc.alias;

	return rc.alias && p >= lo &&
	       p < lo + sizeof(struct rc_alias) * RC_ALIAS_CAP &&
	       !((p - lo) % sizeof(struct rc_alias));
}

/* Drop a reference (an alias went away). */
static void put_ref(struct rc_entry *e)
{
	uint64_t w = __atomic_sub_fetch(&e->word, 1, __ATOMIC_ACQ_REL);
	uint32_t type;
	int was;

	if (w & W_REFS)
		return;
	if (w & W_DEAD) {
		/* Revoked (or retired and killed): we were the last holder. */
		pthread_mutex_lock(&rc.lock);
		ent_reclaim(e);
		pthread_mutex_unlock(&rc.lock);
		return;
	}
	type = LD(&e->type);
	if (type == E_CACHED && !LD(&rc.stopped))
		return;		/* lazy: stays registered until free/eviction */
	was = gh_guard_enter();
	pthread_mutex_lock(&rc.lock);
	if (ent_kill_idle(e, w >> W_VER_SHIFT)) {
		struct rc_ga *r = ga_of(e);

		ent_finish(e, 0, 0);
		/* exact: the NIC registration goes, the pin stays cached */
		if (type != E_EXACT || LD(&rc.stopped))
			ga_free_if_unused(r);
	}
	pthread_mutex_unlock(&rc.lock);
	gh_guard_leave(was);
}

/* ------------------------------------------------------------ public API */

void gh_rcache_prefetch(const struct ibv_pd *pd, uint64_t addr, uint64_t len,
			unsigned int access)
{
	int ex;
	const struct rc_entry *home;

	if (!LD_ACQ(&rc.ready))
		return;
	ex = rc.exact && (access & GH_RC_ACCESS_REMOTE);
	home = &rc.ent[hash_ent(addr, (uint64_t)(uintptr_t)pd, access,
				ex ? addr : 0, ex ? len : 0)];
	__builtin_prefetch(home);
	__builtin_prefetch((const char *)home + 64);	/* its bucket head */
}

/*
 * A miss (lock held): the allocation's state, its pin if needed, and a
 * NIC registration: of all of it (ex 0: cached, shared, an access upgrade
 * of the current one retires it) or of exactly [addr, addr + len) (ex:
 * E_EXACT, one per MR).  0 and *e_p holding one reference.
 */
static int miss_locked(const struct gh_range *g, struct ibv_pd *pd,
		       uint64_t addr, uint64_t len, unsigned int access,
		       int ex, struct rc_entry **e_p)
{
	uint64_t pdk = (uint64_t)(uintptr_t)pd;
	uint64_t ka = ex ? addr : 0, kl = ex ? len : 0;
	struct rc_entry *e = NULL, *old;
	struct ibv_mr *mr = NULL;
	struct rc_ga *r;
	int err;

	err = ga_get(g, &r);
	if (err)
		return err;
	if (r->pinned && rc.ops->valid && !rc.ops->valid(r->pin.cookie)) {
		/* Revoked behind our back (lookup_ref skipped it): drop, redo. */
		ga_drop(r);
		CTR(pins_revoked, 1);
		err = ga_get(g, &r);
		if (err)
			return err;
	}
	r->busy = 1;
	old = ex ? NULL : hash_find_cur(g->base, g->gen, pdk, access);
	if (old)
		access |= old->access & RC_ACCESS_RIGHTS;
	err = make_room(r);
	if (err) {
		CTR(full, 1);
		goto out;
	}
	if (!r->pinned) {
		err = do_pin(r);
		if (err)
			goto out;
	}
	{
		uint64_t t0 = gh_evlog_clock();
		struct rc_entry tmp = { .gen = g->gen, .pd = pdk,
					.access = access, .addr = ka,
					.len = kl };

		err = do_reg(r, pd, ex ? addr : g->base, ex ? len : g->size,
			     access, &mr);
		tmp.mr = mr;
		ev_reg(GH_EV_REG, &tmp, r, err, t0);
	}
	if (err)
		goto out;
	CTR(regs, 1);
	e = ent_new(r, ex ? E_EXACT : E_CACHED, pd, access, mr, ka, kl);
	if (!e) {
		rc.ops->dereg(mr);
		CTR(deregs, 1);
		err = -ENOSPC;
		goto out;
	}
	__atomic_add_fetch(&rc.n_entries, 1, __ATOMIC_RELAXED);
	if (old) {
		/* Access upgrade: the old one goes once nobody holds it. */
		hash_unlink(old);
		ST(&old->type, E_RETIRED);
		CTR(upgrades, 1);
		if (ent_kill_idle(old, 0))
			ent_finish(old, 0, 0);
	}
	if (!ex)
		hash_insert(e);
	*e_p = e;
out:
	r->busy = 0;
	ga_free_if_unused(r);
	return err;
}

/*
 * Exact exposure over a window (lock held): the allocation's parent
 * registration in pd (LOCAL_WRITE | MW_BIND, no remote rights; cached,
 * made if needed, with the miss path's rules), then a window bound to
 * exactly [addr, addr + len) with the remote access asked.  0 and *e_p
 * (an E_WIN entry holding one reference for the alias), *hit_p: no NIC
 * registration was made.  -EOPNOTSUPP (no windows here) or any other
 * error: the caller registers exactly instead.
 */
static int reg_window(const struct gh_range *g, struct ibv_pd *pd,
		      uint64_t addr, uint64_t len, unsigned int asked,
		      struct rc_entry **e_p, int *hit_p)
{
	unsigned int pacc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND |
			    (asked & GH_RC_ACCESS_EXACT);
	uint64_t pdk = (uint64_t)(uintptr_t)pd, t0;
	struct rc_entry *par, *e;
	struct gh_mw *w;
	struct rc_ga *r;
	uint32_t rkey;
	int err;

	*hit_p = 1;
	par = lookup_ref(g->base, g->gen, pdk, pacc, 0, 0);
	if (!par) {
		*hit_p = 0;
		err = miss_locked(g, pd, g->base, g->size, pacc, 0, &par);
		if (err)
			return err;
	}
	r = ga_of(par);
	t0 = gh_evlog_clock();
	err = gh_mw_bind(pd, par->mr, addr, len, asked & GH_RC_ACCESS_REMOTE,
			 &w, &rkey);
	if (err) {
		put_ref_locked(par);
		return err;
	}
	e = ent_new(r, E_WIN, pd, asked, par->mr, addr, len);
	if (!e) {
		gh_mw_invalidate(w);
		put_ref_locked(par);
		return -ENOSPC;
	}
	e->mr = NULL;		/* the parent's: deregistered with it */
	e->rkey = rkey;
	e->win = w;
	e->parent = ent_idx(par);
	ev_reg(GH_EV_REG, e, r, 0, t0);
	*e_p = e;
	return 0;
}

int gh_rcache_reg(const struct gh_range *g, struct ibv_pd *pd, uint64_t addr,
		  uint64_t len, unsigned int access, struct ibv_mr **mr_p,
		  int *hit_p)
{
	uint64_t pdk = (uint64_t)(uintptr_t)pd;
	struct rc_entry *e;
	struct ibv_mr *am;
	unsigned int asked = access;
	uint64_t ka, kl;	/* E_EXACT key, or 0, 0 */
	int err, hit = 1, ex, win;

	if (!LD_ACQ(&rc.ready) || LD(&rc.stopped) || !pd)
		return -ENOTSUP;
	if (!gh_rcache_access_ok(access) || !kind_cacheable(g))
		return -ENOTSUP;
	if (!len || addr < g->base || addr - g->base + len > g->size)
		return -EINVAL;
	ex = rc.exact && (access & GH_RC_ACCESS_REMOTE);
	ka = ex ? addr : 0;
	kl = ex ? len : 0;
	/*
	 * Exact: every MR its own NIC registration, as natively, so its
	 * rkey dies with its own ibv_dereg_mr even while an identical
	 * request lives (the pin stays shared and cached).
	 */
	if (!ex) {
		e = lookup_ref(g->base, g->gen, pdk, access, ka, kl);
		if (e)
			goto found;
	}

	win = ex && gh_mw_supported(pd, NULL);
	pthread_mutex_lock(&rc.lock);
	if (!ex) {
		e = lookup_ref(g->base, g->gen, pdk, access, ka, kl);
		if (e) {
			pthread_mutex_unlock(&rc.lock);
			goto found;
		}
	}
	if (win) {
		err = reg_window(g, pd, addr, len, access, &e, &hit);
		if (!err) {
			pthread_mutex_unlock(&rc.lock);
			if (!hit)
				CTR(misses, 1);
			goto found;
		}
		if (err == -ESTALE) {
			pthread_mutex_unlock(&rc.lock);
			return err;
		}
		/* no window: a NIC registration of exactly the range */
	}
	hit = 0;
	CTR(misses, 1);
	err = miss_locked(g, pd, addr, len, access, ex, &e);
	pthread_mutex_unlock(&rc.lock);
	if (err)
		return err;
found:
	am = alias_make(e, pd, addr, len, asked);
	if (!am) {
		put_ref(e);
		return -ENOSPC;
	}
	if (hit)
		SHARD(hits, 1);
	*mr_p = am;
	*hit_p = hit;
	return 0;
}

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

/* Unlink a ring under construction; real stays the program's. */
static void wrap_undo(struct rc_entry *first)
{
	uint32_t me = ent_idx(first), i = first->sib;

	first->sib = 0;
	while (i && i != me) {
		struct rc_entry *x = &rc.ent[i - 1];
		struct rc_ga *xr = ga_of(x);

		i = x->sib;
		x->sib = 0;
		ent_kill(x);
		x->mr = NULL;
		ent_reclaim(x);
		ga_free_if_unused(xr);
	}
	{
		struct rc_ga *fr = ga_of(first);

		ent_kill(first);
		first->mr = NULL;
		ent_reclaim(first);
		ga_free_if_unused(fr);
	}
}

/*
 * With the lock: tie real, a registration of [addr, addr + len), to each
 * GPU allocation of snap (what the range touched before the NIC call)
 * that is still that generation now; any that is not (freed since)
 * makes it -ESTALE.  plain: a ring of no allocation when snap has none.
 * The first entry of the ring holds one reference; 0 and *first_p.
 */
static int wrap_locked(struct ibv_mr *real, const struct gh_range *snap,
		       unsigned int n, uint64_t addr, uint64_t len, int plain,
		       struct rc_entry **first_p)
{
	struct rc_entry *first = NULL, *last = NULL, *e;
	int err = 0;

	for (unsigned int k = 0; k < n && !err; k++) {
		struct rc_ga *r;

		if (!kind_gpu(&snap[k]))
			continue;
		err = ga_get(&snap[k], &r);
		if (err)
			break;
		e = ent_new(r, E_WRAP, real->pd, 0, real, 0, 0);
		if (!e) {
			ga_free_if_unused(r);
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
		e->sib = ent_idx(first);
		last->sib = ent_idx(e);
		last = e;
	}
	if (err) {
		if (first)
			wrap_undo(first);
		return err;
	}
	if (!first) {
		if (!plain)
			return -ENOENT;
		first = ent_new(NULL, E_WRAP, real->pd, 0, real, 0, 0);
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
	struct rc_entry *first;
	struct ibv_mr *am = NULL;
	int err;

	if (!LD_ACQ(&rc.ready) || !real)
		return -ENOTSUP;
	if (LD(&rc.forked))
		return -ENOTSUP;
	/*
	 * All under the lock the free path takes: a free of anything in
	 * snap either ran before (its generation is gone: -ESTALE) or
	 * waits, and then deregisters a ring that is complete.
	 */
	pthread_mutex_lock(&rc.lock);
	err = wrap_locked(real, snap, n, addr, len, plain, &first);
	if (!err) {
		am = alias_make(first, real->pd, (uint64_t)(uintptr_t)real->addr,
				real->length, access);
		if (!am) {
			wrap_undo(first);
			err = -ENOSPC;
		}
	}
	pthread_mutex_unlock(&rc.lock);
	if (err)
		return err;
	CTR(wrapped, 1);
	*alias_p = am;
	return 0;
}

int gh_rcache_adopt(struct ibv_mr *mr, const struct gh_range *snap,
		    unsigned int n)
{
	struct rc_entry *first = NULL;
	int slot = -1, err;

	if (!LD_ACQ(&rc.ready) || !mr || LD(&rc.forked))
		return -ENOTSUP;
	pthread_mutex_lock(&rc.lock);
	err = wrap_locked(mr, snap, n, (uint64_t)(uintptr_t)mr->addr,
			  mr->length, 0, &first);
	if (!err && (slot = adopt_find(NULL)) < 0) {
		wrap_undo(first);
		err = -ENOSPC;
	}
	if (err) {
		/* never leave it reaching GPU memory untracked */
		if (err != -ENOENT &&
		    gh_vreal_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION |
				      IBV_REREG_MR_CHANGE_ACCESS, NULL,
				      rc.dummy, 4096, 0))
			gh_warn("ibv_rereg_mr: mr %p reaches untracked GPU memory",
				(void *)mr);
		pthread_mutex_unlock(&rc.lock);
		return err;
	}
	{
		uint32_t me = ent_idx(first), i = me;

		do {
			struct rc_entry *x = &rc.ent[i - 1];

			x->adopted = 1;
			i = x->sib;
		} while (i && i != me);
	}
	/* no alias holds it: only a free (or the program) ends it */
	ST_REL(&first->word, LD(&first->word) & ~W_REFS);
	rc.adopt_mr[slot] = mr;
	rc.adopt_ent[slot] = ent_idx(first);
	rc.adopt_moved[slot] = 0;
	__atomic_add_fetch(&rc.n_adopted, 1, __ATOMIC_RELAXED);
	CTR(wrapped, 1);
	pthread_mutex_unlock(&rc.lock);
	return 0;
}

int gh_rcache_unadopt(struct ibv_mr *mr)
{
	int i, rc_ = 0;

	if (!LD_ACQ(&rc.ready) || !LD(&rc.n_adopted))
		return 0;
	pthread_mutex_lock(&rc.lock);
	i = adopt_find(mr);
	if (i >= 0) {
		uint32_t ei = rc.adopt_ent[i];

		rc_ = ei ? 1 : rc.adopt_moved[i] ? 0 : -1;
		rc.adopt_mr[i] = NULL;
		rc.adopt_moved[i] = 0;
		__atomic_sub_fetch(&rc.n_adopted, 1, __ATOMIC_RELAXED);
		if (ei) {
			struct rc_entry *e = &rc.ent[ei - 1];
			struct rc_ga *r = ga_of(e);
			int64_t refs = ent_kill(e);

			e->mr = NULL;	/* still the program's */
			if (refs >= 0)
				ent_finish(e, refs, 0);
			ga_free_if_unused(r);
		}
	}
	pthread_mutex_unlock(&rc.lock);
	return rc_;
}

int gh_rcache_moved(struct ibv_mr *mr)
{
	int i, moved = 0;

	if (!LD_ACQ(&rc.ready) || !LD(&rc.n_adopted))
		return 0;
	pthread_mutex_lock(&rc.lock);
	i = adopt_find(mr);
	if (i >= 0)
		moved = rc.adopt_moved[i];
	pthread_mutex_unlock(&rc.lock);
	return moved;
}

static struct rc_alias *alias_of(const struct ibv_mr *mr)
{
	struct rc_alias *a;

	if (!gh_rcache_is_alias(mr))
		return NULL;
	a = (struct rc_alias *)(uintptr_t)mr;
	return LD_ACQ(&a->state) == 1 ? a : NULL;
}

int gh_rcache_dereg(struct ibv_mr *mr)
{
	struct rc_alias *a = alias_of(mr);
	uint32_t one = 1;
	struct rc_entry *e;

	if (!a || !__atomic_compare_exchange_n(&a->state, &one, 0, 0,
					       __ATOMIC_ACQ_REL,
					       __ATOMIC_ACQUIRE))
		return -EINVAL;
	e = a->ent ? &rc.ent[a->ent - 1] : NULL;
	a->ent = 0;
	alias_put(a);
	SHARD(aliases, -1);
	if (e)
		put_ref(e);
	return 0;
}

void gh_rcache_move(struct ibv_mr *mr, struct ibv_mr *new_alias)
{
	struct rc_alias *a = alias_of(mr), *n = alias_of(new_alias);
	struct rc_entry *old;

	if (!a)
		return;
	old = a->ent ? &rc.ent[a->ent - 1] : NULL;
	if (n) {
		a->mr = n->mr;
		a->ent = n->ent;
		a->access = n->access;
		ST(&n->state, 0);
		n->ent = 0;
		alias_put(n);
		SHARD(aliases, -1);
	} else {
		a->ent = 0;	/* holds nothing; ibv_dereg_mr still works */
	}
	if (old)
		put_ref(old);
}

int gh_rcache_revoked(const struct ibv_mr *mr)
{
	struct rc_alias *a = alias_of(mr);
	uint32_t ei = a ? LD(&a->ent) : 0;

	/* an alias holds its entry: it is not recycled under us */
	return !ei || (LD_ACQ(&rc.ent[ei - 1].word) & W_DEAD);
}

int gh_rcache_still_granted(const struct ibv_mr *mr)
{
	int ok;

	pthread_mutex_lock(&rc.lock);
	ok = !gh_rcache_revoked(mr);
	pthread_mutex_unlock(&rc.lock);
	return ok;
}

unsigned int gh_rcache_alias_access(const struct ibv_mr *mr)
{
	struct rc_alias *a = alias_of(mr);

	return a ? a->access : 0;
}

struct ibv_mr *gh_rcache_wrapped(const struct ibv_mr *mr)
{
	struct rc_alias *a = alias_of(mr);
	struct rc_entry *e;
	struct ibv_mr *real = NULL;

	if (!a || !a->ent)
		return NULL;
	e = &rc.ent[a->ent - 1];
	pthread_mutex_lock(&rc.lock);
	if (LD(&e->type) == E_WRAP && !(LD(&e->word) & W_DEAD))
		real = e->mr;
	pthread_mutex_unlock(&rc.lock);
	return real;
}

void gh_rcache_invalidate(const struct gh_range *g)
{
	struct rc_ga *r;
	uint64_t key;
	int was;

	if (!LD_ACQ(&rc.ready) || LD(&rc.forked))
		return;
	/*
	 * The registry removal is done; an RMW (not a plain load) reads the
	 * latest count: either it sees a miss path's announcement, or that
	 * miss path's increment reads our write and its registry re-check
	 * then sees the removal.
	 */
	if (!__atomic_fetch_add(&rc.ga_cnt[hash_ga(g->gen)], 0,
				__ATOMIC_ACQ_REL) && !gh_rcspan_pending(g->gen))
		return;
	was = gh_guard_enter();
	pthread_mutex_lock(&rc.lock);
	r = ga_find(g->gen);
	if (r)
		ga_kill_all(r, 1);
	/* Spans that include this mapping (src/rcache/rcache_span.c). */
	for (uint32_t c = 0; (key = gh_rcspan_next(g->gen, &c)) != 0;) {
		r = ga_find(key);
		if (r)
			ga_kill_all(r, 1);
	}
	pthread_mutex_unlock(&rc.lock);
	gh_guard_leave(was);
}

int gh_rcache_revoke(uint64_t gen, uint64_t cookie)
{
	struct rc_ga *r;
	int was, done = 0;

	if (!LD_ACQ(&rc.ready))
		return 0;
	was = gh_guard_enter();
	pthread_mutex_lock(&rc.lock);
	r = ga_find(gen);
	if (r && r->pinned && r->pin.cookie == cookie) {
		ga_drop(r);
		CTR(pins_revoked, 1);
		done = 1;
	}
	pthread_mutex_unlock(&rc.lock);
	gh_guard_leave(was);
	return done;
}

/* Does pd have live windows (the program's MRs over them)? */
static int rc_pd_has_windows(uint64_t pd)
{
	int n = 0;

	if (!LD_ACQ(&rc.ready))
		return 0;
	pthread_mutex_lock(&rc.lock);
	for (uint32_t i = 0; i < rc.n_used && !n; i++) {
		struct rc_entry *e = &rc.ent[rc.used[i]];

		n = LD(&e->type) == E_WIN && e->pd == pd &&
		    !(LD(&e->word) & W_DEAD);
	}
	pthread_mutex_unlock(&rc.lock);
	return n;
}

static void drop_matching(uint64_t pd, uint64_t ctx, int held_too)
{
	int was;

	if (!LD_ACQ(&rc.ready))
		return;
	was = gh_guard_enter();
	pthread_mutex_lock(&rc.lock);
	/*
	 * Backwards over the dense list: what a reclaim moves into an
	 * earlier place was visited already (seen twice: harmless).
	 * Windows in a first pass: a parent with a bound window cannot go.
	 */
	for (int pass = 0; pass < 2; pass++)
	for (uint32_t i = rc.n_used; i-- > 0;) {
		struct rc_entry *e;
		uint32_t type;
		struct rc_ga *r;
		int64_t refs;

		if (i >= rc.n_used) {
			i = rc.n_used;
			continue;
		}
		e = &rc.ent[rc.used[i]];
		type = LD(&e->type);
		if (type == E_FREE || (LD(&e->word) & W_DEAD))
			continue;
		if ((type == E_WIN) != !pass)
			continue;
		if ((pd && e->pd != pd) || (ctx && e->ctx != ctx))
			continue;
		if (!held_too && type == E_WRAP)
			continue;
		r = ga_of(e);
		if (held_too) {
			refs = ent_kill(e);
			if (refs < 0)
				continue;
		} else {
			if (!ent_kill_idle(e, 0))
				continue;
			refs = 0;
		}
		ent_finish(e, refs, 0);
		ga_free_if_unused(r);
	}
	pthread_mutex_unlock(&rc.lock);
	gh_guard_leave(was);
}

void gh_rcache_drop_pd(struct ibv_pd *pd)
{
	if (pd)
		drop_matching((uint64_t)(uintptr_t)pd, 0, 0);
	/* our queue pair and idle windows must not make it fail; windows
	 * still bound mean MRs the program holds: it fails natively too */
	if (pd && !rc_pd_has_windows((uint64_t)(uintptr_t)pd))
		gh_mw_drop_pd(pd);
}

void gh_rcache_drop_context(struct ibv_context *ctx)
{
	if (!ctx)
		return;
	drop_matching(0, (uint64_t)(uintptr_t)ctx, 1);
	gh_mw_drop_context(ctx);
}

void gh_rcache_purge(int stop)
{
	int was;

	if (!LD_ACQ(&rc.ready))
		return;
	if (stop)
		ST(&rc.stopped, 1);
	drop_matching(0, 0, 0);
	/* and the pins exact exposure keeps after their last MR */
	was = gh_guard_enter();
	pthread_mutex_lock(&rc.lock);
	while (evict_idle_pin(NULL))
		;
	pthread_mutex_unlock(&rc.lock);
	gh_guard_leave(was);
}

void gh_rcache_counters(struct gh_rc_counters *c_p)
{
	struct gh_rc_counters c;
	const uint64_t *src = (const uint64_t *)&rc.ctr;
	uint64_t *dst = (uint64_t *)&c;

	for (size_t i = 0; i < sizeof(c) / sizeof(uint64_t); i++)
		dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
	c.hits = c.aliases = 0;
	for (int i = 0; i < RC_SHARDS; i++) {
		c.hits += LD(&rc_shards[i].hits);
		c.aliases += LD(&rc_shards[i].aliases);
	}
	c.entries = LD(&rc.n_entries);
	c.pinned_bytes = LD(&rc.pinned_bytes);
	*c_p = c;
}
