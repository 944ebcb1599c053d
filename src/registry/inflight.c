// SPDX-License-Identifier: MIT
/*
 * Registrations in flight against allocations and frees (see inflight.h).
 *
 * Why it is exact.  A registration announces its range (a slot, then a
 * seq_cst RMW on if_state.busy) before it reads the registry; a hook
 * changes the registry, then (seq_cst fence) reads busy and marks every
 * announced slot its range overlaps.  Of two such pairs at least one
 * side sees the other: either the registration's registry read saw the
 * change, or the hook marked the slot.  That covers changes the hook
 * recorded before the NIC call returned.  An allocation whose real call
 * returned (so the NIC may have pinned it) but whose hook has not yet
 * recorded it is covered by the per-thread call marks: settle waits for
 * every memory call in flight when the NIC call returned, and the hook
 * marks the slot before its call ends.  A call that starts after that
 * cannot have been reached by the NIC call.
 *
 * Cost on the hooks: two thread-local stores and a fence per memory
 * call, and a fence plus one shared load per registry change; the slot
 * scan runs only while a registration is in flight.
 */
#include <pthread.h>
#include <sched.h>
#include <stddef.h>

#include "platform/platform.h"
#include "inflight.h"

#define IF_SLOTS	64
#define IF_THREADS	256	/* the last one shared, by count, by threads
				   past the first 255 alive at once */
#define IF_WAIT_NS	(1000ULL * 1000 * 1000)

struct if_slot {
	uint64_t lo, hi;	/* [lo, hi) */
	uint32_t busy;
	uint32_t hit;
} __attribute__((aligned(64)));

struct if_thread {
	uint64_t seq;		/* odd while a memory call is in flight */
} __attribute__((aligned(64)));

static struct if_slot if_slots[IF_SLOTS];
static struct if_thread if_threads[IF_THREADS];
static struct {
	uint32_t busy;		/* announced slots */
	uint32_t threads;	/* if_threads ever in use: settle scans these */
} if_state;
/* which of if_threads[0..IF_THREADS - 2] a live thread holds */
static struct gh_tslot_set if_owned = GH_TSLOT_SET(IF_THREADS - 1);

static __thread struct if_thread *if_me
	__attribute__((tls_model("initial-exec")));
static __thread uint32_t if_depth
	__attribute__((tls_model("initial-exec")));
/* what the memory call in flight here is freeing: noted again at its end */
static __thread uint64_t if_free_lo
	__attribute__((tls_model("initial-exec")));
static __thread uint64_t if_free_hi
	__attribute__((tls_model("initial-exec")));

#ifdef __SANITIZE_THREAD__
/* TSan does not model fences: a seq_cst RMW orders the same way */
static uint32_t if_fence;
#define FENCE()		__atomic_fetch_add(&if_fence, 0, __ATOMIC_SEQ_CST)
#else
#define FENCE()		__atomic_thread_fence(__ATOMIC_SEQ_CST)
#endif

/* This thread's first memory call: out of line, the calls' path stays
 * as short as it was. */
static __attribute__((noinline)) struct if_thread *me_first(void)
{
	int i = gh_tslot_take(&if_owned);
	uint32_t n = LD(&if_state.threads), want;

	if (i < 0)
		i = IF_THREADS - 1;
	/* settle scans every slot ever used, the shared one too */
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

/*
 * The thread ends: its slot goes to the next thread that needs one, which
 * goes on counting from its even value (a settle that saw it odd saw it
 * change).  Not while a call of its own is in flight: settle waits for
 * that call's end, which the next owner must not fake.
 */
static void if_thread_end(void *v)
{
	unsigned int i = (unsigned int)(uintptr_t)v - 1;

	if (if_me == &if_threads[i])
		if_me = NULL;
	if (!(LD(&if_threads[i].seq) & 1))
		gh_tslot_give(&if_owned, i);
}

static int shared(const struct if_thread *t)
{
	return t == &if_threads[IF_THREADS - 1];
}

/*
 * A thread's first memory call, or one past the slots that counts on the
 * shared one: out of line, so that the calls' own path saves nothing on
 * the stack.  begin: the mark goes up (and the fence), else down.
 */
static __attribute__((noinline)) void mark_rare(int begin)
{
	struct if_thread *t = me();

	if (shared(t)) {
		if (begin)
			__atomic_add_fetch(&t->seq, 2, __ATOMIC_SEQ_CST);
		else
			__atomic_sub_fetch(&t->seq, 2, __ATOMIC_RELEASE);
	} else if (begin) {
		ST(&t->seq, LD(&t->seq) + 1);
	} else {
		ST_REL(&t->seq, LD(&t->seq) + 1);
	}
	if (begin)
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

void gh_inflight_call_end(void)
{
	struct if_thread *t;

	if (!if_depth || --if_depth)
		return;
	if (if_free_hi) {
		/*
		 * The memory is released now: a registration that read the
		 * registry after the removal but whose NIC call reached the
		 * pages before the real free is told here (settle waits for
		 * this call to end).
		 */
		gh_inflight_note(if_free_lo, if_free_hi - if_free_lo);
		if_free_lo = if_free_hi = 0;
	}
	t = if_me;
	if (GH_UNLIKELY(!t || shared(t))) {
		mark_rare(0);
		return;
	}
	ST_REL(&t->seq, LD(&t->seq) + 1);
}

void gh_inflight_note(uint64_t base, uint64_t size)
{
	uint64_t hi = base + size < base ? UINT64_MAX : base + size;

	FENCE();	/* the registry change, then the slots */
	if (GH_LIKELY(!LD(&if_state.busy)))
		return;
	for (int i = 0; i < IF_SLOTS; i++) {
		struct if_slot *s = &if_slots[i];

		if (LD_ACQ(&s->busy) == 1 && LD(&s->lo) < hi &&
		    base < LD(&s->hi))
			__atomic_store_n(&s->hit, 1, __ATOMIC_SEQ_CST);
	}
}

void gh_inflight_note_free(uint64_t base, uint64_t size)
{
	uint64_t hi = base + size < base ? UINT64_MAX : base + size;

	gh_inflight_note(base, size);
	if (!if_depth)
		return;		/* not inside a hooked call */
	if (!if_free_hi || base < if_free_lo)
		if_free_lo = base;
	if (hi > if_free_hi)
		if_free_hi = hi;
}

int gh_inflight_enter(uint64_t lo, uint64_t len)
{
	uint64_t t0 = 0;

	for (;;) {
		for (int i = 0; i < IF_SLOTS; i++) {
			struct if_slot *s = &if_slots[i];
			uint32_t zero = 0;

			/* 2: taken, 1: its range published */
			if (LD(&s->busy) ||
			    !__atomic_compare_exchange_n(&s->busy, &zero, 2, 0,
							 __ATOMIC_ACQUIRE,
							 __ATOMIC_RELAXED))
				continue;
			ST(&s->lo, lo);
			ST(&s->hi, lo + len < lo ? UINT64_MAX : lo + len);
			ST(&s->hit, 0);
			ST_REL(&s->busy, 1);
			/* announced before the caller reads the registry */
			__atomic_add_fetch(&if_state.busy, 1, __ATOMIC_SEQ_CST);
			return i;
		}
		/* 64 registrations of GPU memory in NIC calls at once */
		if (!t0)
			t0 = gh_now_ns();
		else if (gh_now_ns() - t0 > IF_WAIT_NS)
			return -1;
		sched_yield();
	}
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

int gh_inflight_settle(int slot)
{
	uint32_t n = LD(&if_state.threads);
	uint64_t t0 = 0;

	FENCE();	/* the NIC call returned before these reads */
	if (n > IF_THREADS)
		n = IF_THREADS;
	for (uint32_t i = 0; i < n; i++) {
		struct if_thread *t = &if_threads[i];
		uint64_t seq = LD_ACQ(&t->seq);

		/* our own thread is not in a memory call (the guard) */
		if (t == if_me && !shared(t))
			continue;
		if ((shared(t) ? seq != 0 : (seq & 1)) &&
		    wait_thread(t, seq, &t0))
			return 2;	/* a memory call that does not end */
	}
	return __atomic_load_n(&if_slots[slot].hit, __ATOMIC_SEQ_CST) != 0;
}

void gh_inflight_leave(int slot)
{
	__atomic_sub_fetch(&if_state.busy, 1, __ATOMIC_RELEASE);
	ST_REL(&if_slots[slot].busy, 0);
}

/*
 * A child of fork has one thread: the others' marks would never end.
 * (CUDA is unusable there anyway; the registrations it makes are its
 * own.)
 */
static void if_atfork_child(void)
{
	long own = if_me ? if_me - if_threads : -1;

	gh_tslot_reset(&if_owned, own < IF_THREADS - 1 ? (int)own : -1);
	for (int i = 0; i < IF_THREADS; i++)
		if (&if_threads[i] != if_me)
			if_threads[i].seq = 0;
	for (int i = 0; i < IF_SLOTS; i++)
		if_slots[i].busy = 0;
	if_state.busy = 0;
}

__attribute__((constructor)) static void if_init(void)
{
	gh_tslot_init(&if_owned, if_thread_end);
	pthread_atfork(NULL, NULL, if_atfork_child);
}
