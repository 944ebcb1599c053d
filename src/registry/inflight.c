// SPDX-License-Identifier: MIT
/*
 * Registrations in flight against allocations and frees (see inflight.h).
 *
 * Why it is exact.  A registration announces its range (a record, then a
 * seq_cst RMW on if_state.busy) before it reads the registry; a hook
 * changes the registry, then (seq_cst fence) reads busy and marks every
 * announced record its range overlaps.  Of two such pairs at least one
 * side sees the other: either the registration's registry read saw the
 * change, or the hook marked the record.
 *
 * Left: changes a hook has made to the memory but not yet to the
 * registry when the NIC call returns.
 *  - A free publishes its range (the thread's mark) before its real
 *    free: a registration whose range overlaps it waits for that call's
 *    end, which tells it again (the memory is released then).  The only
 *    wait, and only on memory the registration names.
 *  - Any other call in flight (an allocation inside the driver, a free
 *    before its removal or elsewhere) is not waited for.  The record
 *    names it (thread, mark) and, once the program's MR exists, stays
 *    announced, committed: the call, when it inserts or removes a range
 *    the record overlaps, runs the raced callback on that MR before it
 *    returns (before its real free).  The record goes when each call it
 *    names has ended (or the program deregistered the MR).
 *  A call that ended when the registration looked began after its NIC
 *  call returned: a free then removes what the registration's registry
 *  read saw (its wrap is revoked by that free), an allocation then maps
 *  pages the NIC call could not have reached.
 *
 * No fixed table bounds the records: they come in mmap'ed chunks, linked
 * once made.  Marks: one per live thread (tslot), the last shared by
 * count past IF_THREADS - 1 live threads; a registration waits for those
 * (they publish nothing).  A mark left odd by a thread that ended inside
 * a call is ended at its exit; one left by a thread that jumped out of a
 * hook, at its next hook (gh_inflight_abandon).
 *
 * Cost on the hooks: two thread-local stores and a fence per memory
 * call, and a fence plus one shared load per registry change; the record
 * scan runs only while a registration is announced or committed.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <sys/mman.h>

#include "base/base.h"
#include "inflight.h"

#define IF_THREADS	1024	/* the last one shared, by count */
#define IF_CHUNK	64
#define IF_WAIT_NS	(1000ULL * 1000 * 1000)

struct if_thread {
	uint64_t seq;		/* odd while a memory call is in flight */
	uint64_t lo, hi;	/* what that call frees, once published */
} __attribute__((aligned(64)));

/* A call a committed record waits on: thread index, its mark then. */
struct if_dep {
	uint32_t t;
	uint32_t pad;
	uint64_t seq;
};

/* state: flags, callbacks running, generation (the record's identity) */
#define R_ANN		1ull	/* taken: announced or committed */
#define R_HIT		2ull	/* a change touched its range */
#define R_LINGER	4ull	/* committed: its NIC call has returned */
#define R_DEAD		8ull	/* its MR is being deregistered */
#define R_HOLD		16ull	/* its MR is being moved (gh_inflight_hold) */
#define R_FLAGS		0xffull
#define R_CB_ONE	(1ull << 8)
#define R_CB		(0xffffull << 8)
#define R_GEN_SHIFT	24

struct if_rec {
	uint64_t state;
	uint64_t lo, hi;	/* [lo, hi) */
	void *cookie;		/* committed: the program's MR */
	gh_inflight_raced_fn fn;	/* ... the callback */
	uint32_t flags;		/* ... for the callback */
	uint32_t ndeps;
	struct if_dep *deps;	/* IF_THREADS entries, in its chunk */
} __attribute__((aligned(64)));

/*
 * The dependencies live beside the records, made with them: a record
 * needs room for them at the moment another thread is in a long call,
 * and an mmap then waits for that call if it holds the process's
 * mappings (a cuMemHostRegister pinning gigabytes does).
 */
struct if_chunk {
	struct if_rec rec[IF_CHUNK];
	struct if_chunk *next;	/* atomic: set once */
	struct if_dep deps[IF_CHUNK][IF_THREADS];
};

static struct if_chunk if_first;
static struct if_thread if_threads[IF_THREADS];
static struct {
	uint32_t busy;		/* records taken */
	uint32_t linger;	/* records committed */
	uint32_t threads;	/* if_threads ever in use: settle scans these */
} if_state;
/* which of if_threads[0..IF_THREADS - 2] a live thread holds */
static struct gh_tslot_set if_owned = GH_TSLOT_SET(IF_THREADS - 1);

static __thread struct if_thread *if_me;
static __thread uint32_t if_depth;
/* what the memory call in flight here is freeing */
static __thread uint64_t if_free_lo, if_free_hi;
/* the record this thread used last: taken again first */
static __thread struct if_rec *if_mine;

#ifdef __SANITIZE_THREAD__
/* TSan does not model fences: a seq_cst RMW orders the same way */
static uint32_t if_fence;
#define FENCE()		__atomic_fetch_add(&if_fence, 0, __ATOMIC_SEQ_CST)
#else
#define FENCE()		__atomic_thread_fence(__ATOMIC_SEQ_CST)
#endif

static int cas(uint64_t *p, uint64_t *old, uint64_t new)
{
	return __atomic_compare_exchange_n(p, old, new, 0, __ATOMIC_SEQ_CST,
					   __ATOMIC_SEQ_CST);
}

/* ------------------------------------------------------------- marks */

/* This thread's first memory call: out of line, the calls' path stays
 * as short as it was. */
static __attribute__((noinline)) struct if_thread *me_first(void)
{
	int i = gh_tslot_take(&if_owned);
	uint32_t n = LD(&if_state.threads), want;

	if (i < 0)
		i = IF_THREADS - 1;
	/* settle scans every mark ever used, the shared one too */
	want = (uint32_t)i + 1;
	while (n < want &&
	       !__atomic_compare_exchange_n(&if_state.threads, &n, want, 1,
					    __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
	if_me = &if_threads[i];
	return if_me;
}

static inline struct if_thread *me(void)
{
	struct if_thread *t = if_me;

	return GH_LIKELY(t) ? t : me_first();
}

static int shared(const struct if_thread *t)
{
	return t == &if_threads[IF_THREADS - 1];
}

/* End t's mark (its owner's call is over, or was abandoned). */
static void mark_end(struct if_thread *t)
{
	if (shared(t)) {
		__atomic_sub_fetch(&t->seq, 2, __ATOMIC_RELEASE);
		return;
	}
	ST(&t->lo, 0);
	ST(&t->hi, 0);
	ST_REL(&t->seq, LD(&t->seq) + 1);
}

/*
 * The thread ends: a call it left inside (pthread_exit from a callback)
 * will never end by itself, so its mark ends here; the slot goes to the
 * next thread that needs one, which goes on counting from there.
 */
static void if_thread_end(void *v)
{
	unsigned int i = (unsigned int)(uintptr_t)v - 1;

	if (i >= IF_THREADS - 1)
		return;
	if (LD(&if_threads[i].seq) & 1)
		mark_end(&if_threads[i]);
	if (if_me == &if_threads[i])
		if_me = NULL;
	if_depth = 0;
	gh_tslot_give(&if_owned, i);
}

/* A first call, or one on the shared mark: out of line (see me_first). */
static __attribute__((noinline)) void mark_rare(int begin)
{
	struct if_thread *t = me();

	if (!begin) {
		mark_end(t);
		return;
	}
	if (shared(t))
		__atomic_add_fetch(&t->seq, 2, __ATOMIC_SEQ_CST);
	else
		ST(&t->seq, LD(&t->seq) + 1);
	FENCE();
}

void gh_inflight_call_begin(void)
{
	struct if_thread *t;

	if (if_depth++)
		return;		/* the runtime call around a driver call */
	t = if_me;
	if (GH_UNLIKELY(!t || shared(t))) {
		mark_rare(1);
		return;
	}
	ST(&t->seq, LD(&t->seq) + 1);
	/* before the real call: a NIC call that can reach its memory
	 * returns after this is visible */
	FENCE();
}

/* ----------------------------------------------------------- records */

static uint64_t gen_of(uint64_t s)
{
	return s >> R_GEN_SHIFT;
}

/* Give rec back (its owner, or the last of its callers): 1 if it was. */
static int rec_free(struct if_rec *r, uint64_t s)
{
	if (s & R_CB)
		return 0;
	if (!cas(&r->state, &s, s & ~(R_FLAGS | R_CB)))
		return 0;
	if (s & R_LINGER)
		__atomic_sub_fetch(&if_state.linger, 1, __ATOMIC_RELAXED);
	__atomic_sub_fetch(&if_state.busy, 1, __ATOMIC_RELEASE);
	return 1;
}

/* The owner gives back a record that is not committed. */
static void rec_put(struct if_rec *r)
{
	uint64_t s = LD(&r->state);

	while (!rec_free(r, s))
		s = LD(&r->state);
}

static int rec_try(struct if_rec *r)
{
	uint64_t s = LD(&r->state);

	if (s & (R_FLAGS | R_CB))
		return 0;
	return cas(&r->state, &s,
		   ((gen_of(s) + 1) << R_GEN_SHIFT) | R_ANN);
}

static struct if_rec *rec_take(void)
{
	struct if_chunk *c, *last = NULL, *n;

	if (if_mine && rec_try(if_mine))
		return if_mine;
	for (c = &if_first; c; c = LD_ACQ(&c->next)) {
		for (int i = 0; i < IF_CHUNK; i++)
			if (rec_try(&c->rec[i])) {
				ST(&c->rec[i].deps, c->deps[i]);
				return if_mine = &c->rec[i];
			}
		last = c;
	}
	n = mmap(NULL, sizeof(*n), PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (n == MAP_FAILED)
		return NULL;
	n->rec[0].state = (1ull << R_GEN_SHIFT) | R_ANN;
	n->rec[0].deps = n->deps[0];
	for (c = last;;) {
		struct if_chunk *z = NULL;

		if (__atomic_compare_exchange_n(&c->next, &z, n, 0,
						__ATOMIC_RELEASE,
						__ATOMIC_ACQUIRE))
			break;
		c = z;
	}
	return if_mine = &n->rec[0];
}

/* Has every call rec names ended? */
static int deps_done(const struct if_rec *r)
{
	/* read while its owner may take it again: a stale answer is
	 * caught by the generation in reap's compare-and-swap */
	const struct if_dep *deps = LD(&r->deps);
	uint32_t n = LD(&r->ndeps);

	for (uint32_t k = 0; k < n && deps; k++) {
		uint32_t t = LD(&deps[k].t);

		if (t < IF_THREADS &&
		    LD_ACQ(&if_threads[t].seq) == LD(&deps[k].seq))
			return 0;
	}
	return 1;
}

/* A committed record whose calls have all ended (or whose MR went). */
static void reap(struct if_rec *r, uint64_t s)
{
	if ((s & (R_LINGER | R_CB)) != R_LINGER)
		return;
	if (!(s & R_DEAD) && !deps_done(r))
		return;
	/* a record taken again meanwhile has another generation: no-op */
	rec_free(r, s);
}

static void reap_all(void)
{
	for (struct if_chunk *c = &if_first; c; c = LD_ACQ(&c->next))
		for (int i = 0; i < IF_CHUNK; i++) {
			struct if_rec *r = &c->rec[i];

			reap(r, LD_ACQ(&r->state));
		}
}

int gh_inflight_enter(uint64_t lo, uint64_t len, struct gh_if_rec **rec_p)
{
	struct if_rec *r;

	if (LD(&if_state.linger))
		reap_all();
	r = rec_take();
	if (!r)
		return -ENOMEM;
	ST(&r->lo, lo);
	ST(&r->hi, lo + len < lo ? UINT64_MAX : lo + len);
	ST(&r->ndeps, 0);
	ST(&r->cookie, NULL);
	/* announced before the caller reads the registry */
	__atomic_add_fetch(&if_state.busy, 1, __ATOMIC_SEQ_CST);
	*rec_p = (struct gh_if_rec *)r;
	return 0;
}

/* Wait until the memory call t had in flight (seq) has ended. */
static int wait_thread(struct if_thread *t, uint64_t seq, uint64_t *t0)
{
	for (int spins = 0;; spins++) {
		uint64_t now = LD_ACQ(&t->seq);

		if (shared(t) ? !now : now != seq)
			return 0;
		if (spins < 64)
			continue;
		if (!*t0)
			*t0 = gh_now_ns();
		else if (gh_now_ns() - *t0 > IF_WAIT_NS)
			return 1;
		sched_yield();
	}
}

int gh_inflight_settle(struct gh_if_rec *h)
{
	struct if_rec *r = (struct if_rec *)h;
	uint32_t n;
	uint64_t t0 = 0;

	FENCE();	/* the NIC call returned before these reads */
	n = LD(&if_state.threads);
	if (n > IF_THREADS)
		n = IF_THREADS;
	for (uint32_t i = 0; i < n; i++) {
		struct if_thread *t = &if_threads[i];
		uint64_t seq = LD_ACQ(&t->seq), lo, hi;

		/* our own thread is not in a memory call (the guard) */
		if (t == if_me && !shared(t))
			continue;
		if (shared(t)) {
			/* publishes nothing: waited for, as a whole */
			if (seq && wait_thread(t, seq, &t0))
				return 2;
			continue;
		}
		if (!(seq & 1))
			continue;
		lo = LD(&t->lo);
		hi = LD(&t->hi);
		if (LD_ACQ(&t->seq) != seq)
			continue;	/* it ended: began after the NIC call */
		if (hi > lo && lo < r->hi && r->lo < hi) {
			/* freeing memory of this range: its end tells us */
			if (wait_thread(t, seq, &t0))
				return 2;
			continue;
		}
		/*
		 * Anything else it does to memory it publishes only after
		 * the registry change (a removal's range is known then):
		 * it is handed the record, however far away it is now.
		 */
		ST(&r->deps[r->ndeps].t, i);
		ST(&r->deps[r->ndeps].seq, seq);
		ST(&r->ndeps, r->ndeps + 1);
	}
	if (LD_ACQ(&r->state) & R_HIT)
		return 1;
	if (r->ndeps)
		return 3;
	rec_put(r);
	return 0;
}

int gh_inflight_commit(struct gh_if_rec *h, gh_inflight_raced_fn fn,
		       void *cookie, unsigned int flags)
{
	struct if_rec *r = (struct if_rec *)h;
	uint64_t s;

	ST(&r->fn, fn);
	ST(&r->cookie, cookie);
	ST(&r->flags, flags);
	s = LD(&r->state);
	do {
		if (s & R_HIT) {
			rec_put(r);
			return 1;
		}
	} while (!cas(&r->state, &s, s | R_LINGER));
	__atomic_add_fetch(&if_state.linger, 1, __ATOMIC_RELAXED);
	return 0;
}

int gh_inflight_wait(struct gh_if_rec *h)
{
	struct if_rec *r = (struct if_rec *)h;
	uint64_t t0 = 0;
	int moved;

	for (uint32_t k = 0; k < r->ndeps; k++)
		if (wait_thread(&if_threads[r->deps[k].t], r->deps[k].seq,
				&t0)) {
			rec_put(r);
			return 2;
		}
	moved = !!(LD_ACQ(&r->state) & R_HIT);
	rec_put(r);
	return moved;
}

void gh_inflight_leave(struct gh_if_rec *h)
{
	rec_put((struct if_rec *)h);
}

/* Is r (state s) committed to cookie, not being forgotten or moved? */
static int committed_to(struct if_rec *r, uint64_t s, const void *cookie)
{
	return (s & (R_LINGER | R_DEAD | R_HOLD)) == R_LINGER &&
	       LD(&r->cookie) == cookie;
}

/*
 * Set bit (R_DEAD: the MR goes; R_HOLD: it is being moved) on every
 * record committed to cookie, and return once no callback that took one
 * of them before runs (callbacks run our own code: they end).  A
 * callback taking a record between the look and the CAS fails the CAS:
 * it is tried again, never given up on.
 */
static void mark_committed(const void *cookie, uint64_t bit)
{
	if (!cookie || !LD_ACQ(&if_state.linger))
		return;
	for (struct if_chunk *c = &if_first; c; c = LD_ACQ(&c->next))
		for (int i = 0; i < IF_CHUNK; i++) {
			struct if_rec *r = &c->rec[i];
			uint64_t s = LD_ACQ(&r->state);

			while (committed_to(r, s, cookie) &&
			       !cas(&r->state, &s, s | bit))
				;
			if (!committed_to(r, s, cookie))
				continue;	/* released or taken again */
			for (s |= bit; s & R_CB; s = LD_ACQ(&r->state))
				sched_yield();
			if (bit == R_DEAD)
				reap(r, s);
		}
}

void gh_inflight_forget(void *cookie)
{
	mark_committed(cookie, R_DEAD);
}

void gh_inflight_hold(void *from)
{
	mark_committed(from, R_HOLD);
}

void gh_inflight_unhold(void *from, void *to, unsigned int flags)
{
	if (!from || !LD_ACQ(&if_state.linger))
		return;
	for (struct if_chunk *c = &if_first; c; c = LD_ACQ(&c->next))
		for (int i = 0; i < IF_CHUNK; i++) {
			struct if_rec *r = &c->rec[i];
			uint64_t s = LD_ACQ(&r->state);

			if (!(s & R_HOLD) || LD(&r->cookie) != from)
				continue;
			if (to) {
				ST(&r->flags, flags);
				ST(&r->cookie, to);
				__atomic_and_fetch(&r->state, ~R_HOLD,
						   __ATOMIC_SEQ_CST);
				continue;
			}
			/* from is gone: dead before a callback may take it */
			s = __atomic_or_fetch(&r->state, R_DEAD,
					      __ATOMIC_SEQ_CST);
			s = __atomic_and_fetch(&r->state, ~R_HOLD,
					       __ATOMIC_SEQ_CST);
			reap(r, s);
		}
}

/* Does committed rec wait on this thread's call in flight? */
static int waits_on_me(const struct if_rec *r)
{
	struct if_thread *t = if_me;
	uint32_t i;

	if (!t || shared(t))
		return 0;
	i = (uint32_t)(t - if_threads);
	for (uint32_t k = 0; k < LD(&r->ndeps); k++)
		if (LD(&r->deps[k].t) == i &&
		    LD(&r->deps[k].seq) == LD(&t->seq))
			return 1;
	return 0;
}

/* Committed rec (state s, seen with our mark) reaches g: the callback. */
static void raced(struct if_rec *r, uint64_t s, const struct gh_range *g,
		  int freed)
{
	gh_inflight_raced_fn fn;
	uint64_t gen = gen_of(s);

	/* hold it against release and against its MR's deregistration;
	 * while its MR is being moved (a short, lock-free step), wait */
	for (;;) {
		if (gen_of(s) != gen ||
		    (s & (R_LINGER | R_DEAD)) != R_LINGER)
			return;
		if (s & R_HOLD) {
			sched_yield();
			s = LD_ACQ(&r->state);
			continue;
		}
		if (cas(&r->state, &s, s + R_CB_ONE))
			break;
	}
	/* set before the commit made it R_LINGER, kept while it lasts */
	fn = __atomic_load_n(&r->fn, __ATOMIC_ACQUIRE);
	if (fn && waits_on_me(r))
		fn(__atomic_load_n(&r->cookie, __ATOMIC_ACQUIRE),
		   __atomic_load_n(&r->flags, __ATOMIC_RELAXED), g, freed);
	s = __atomic_sub_fetch(&r->state, R_CB_ONE, __ATOMIC_RELEASE);
	reap(r, s);
}

/*
 * g was inserted (freed 0) or removed (freed 1) by this thread: mark
 * every announced record it overlaps; a committed one that waits on this
 * call is handed to the callback (act 1; 0 at the call's end, after the
 * real free: only records still in flight matter then).
 */
static void scan(uint64_t lo, uint64_t hi, const struct gh_range *g,
		 int freed, int act)
{
	FENCE();	/* the registry change, then the records */
	if (GH_LIKELY(!LD(&if_state.busy)))
		return;
	for (struct if_chunk *c = &if_first; c; c = LD_ACQ(&c->next))
		for (int i = 0; i < IF_CHUNK; i++) {
			struct if_rec *r = &c->rec[i];
			uint64_t s = LD_ACQ(&r->state);

			if (!(s & R_ANN))
				continue;
			if (!(LD(&r->lo) < hi && lo < LD(&r->hi))) {
				if (s & R_LINGER)
					reap(r, s);
				continue;
			}
			while (!(s & R_HIT) && (s & R_ANN) &&
			       !cas(&r->state, &s, s | R_HIT))
				;
			if (act && (s & (R_ANN | R_LINGER)) ==
				   (R_ANN | R_LINGER))
				raced(r, s | R_HIT, g, freed);
		}
}

static uint64_t end_of(const struct gh_range *g)
{
	return g->base + g->size < g->base ? UINT64_MAX : g->base + g->size;
}

void gh_inflight_note(const struct gh_range *g)
{
	scan(g->base, end_of(g), g, 0, 1);
}

void gh_inflight_note_free(const struct gh_range *g)
{
	struct if_thread *t = if_me;
	uint64_t hi = end_of(g);

	if (if_depth) {
		if (!if_free_hi || g->base < if_free_lo)
			if_free_lo = g->base;
		if (hi > if_free_hi)
			if_free_hi = hi;
		/* published before the records are read (scan's fence) */
		if (t && !shared(t)) {
			ST(&t->lo, if_free_lo);
			ST(&t->hi, if_free_hi);
		}
	}
	scan(g->base, hi, g, 1, 1);
}

void gh_inflight_call_end(void)
{
	struct if_thread *t;

	if (!if_depth || --if_depth)
		return;
	t = if_me;
	if (if_free_hi) {
		/*
		 * The memory is released now: a registration that read the
		 * registry after the removal but whose NIC call reached the
		 * pages before the real free waited for this (its range
		 * overlaps what was published) and is told here.
		 */
		scan(if_free_lo, if_free_hi, NULL, 1, 0);
		if_free_lo = if_free_hi = 0;
		/* unpublished before the mark ends (only a free published) */
		if (t && !shared(t)) {
			ST(&t->lo, 0);
			ST(&t->hi, 0);
		}
	}
	if (GH_UNLIKELY(!t || shared(t))) {
		mark_rare(0);
		return;
	}
	ST_REL(&t->seq, LD(&t->seq) + 1);
}

void gh_inflight_abandon(void)
{
	struct if_thread *t = if_me;

	if (!if_depth)
		return;
	if_depth = 0;
	if_free_lo = if_free_hi = 0;
	if (t && (shared(t) ? LD(&t->seq) != 0 : (LD(&t->seq) & 1)))
		mark_end(t);
}

/*
 * A child of fork has one thread: the others' marks would never end,
 * and the records are the parent's registrations.  (CUDA is unusable
 * there anyway; the registrations it makes are its own.)
 */
static void if_atfork_child(void)
{
	long own = if_me ? if_me - if_threads : -1;

	gh_tslot_reset(&if_owned, own < IF_THREADS - 1 ? (int)own : -1);
	for (int i = 0; i < IF_THREADS; i++)
		if (&if_threads[i] != if_me) {
			if_threads[i].seq = 0;
			if_threads[i].lo = if_threads[i].hi = 0;
		}
	for (struct if_chunk *c = &if_first; c; c = c->next)
		for (int i = 0; i < IF_CHUNK; i++)
			c->rec[i].state &= ~(R_FLAGS | R_CB);
	if_state.busy = 0;
	if_state.linger = 0;
}

__attribute__((constructor)) static void if_init(void)
{
	gh_tslot_init(&if_owned, if_thread_end);
	pthread_atfork(NULL, NULL, if_atfork_child);
}
