// SPDX-License-Identifier: MIT
/*
 * Memory calls reached in the guarded window: while gdrhook's own
 * bookkeeping runs on a thread (a hook recording, a subscriber callback),
 * a CUDA call on that thread (from a signal handler, or from the
 * callback) goes straight to the driver, because the registry or a lock
 * may be half way through a change.  Such a call is never lost: its effect
 * is queued here (per thread, no malloc) and applied by the outermost hook
 * before it returns (gh_leave, gh_guard_leave).  Calls whose effect cannot
 * be replayed after the fact (context destroy, entry points with state of
 * their own) and a full queue mark the registry untrusted instead, with
 * the reason.
 *
 * Pushes can nest (a signal handler interrupting a push pushes too) and a
 * signal can push while the drain runs; both sides move the count with a
 * compare-and-swap, and a drain never runs inside a push (a push happens
 * only while the guard is up, a drain only as it comes down, or before a
 * hook's own real call: a queued free must be applied before that call
 * can get its address back).  Effects are applied in the order the calls
 * were made (free X, allocate X again: in that order).
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>

#include "base/base.h"
#include "platform/platform.h"
#include "registry/registry.h"
#include "hookrt.h"

#define GH_DEFER_MAX	128
#define GH_DEFER_RINGS	256

enum { OP_ALLOC = 1, OP_FREE, OP_FREE_RANGE, OP_UNTRUSTED };

struct deferred {
	uint16_t op, sym, kind;
	uint64_t ptr, size, pool, handle;
};

/*
 * A ring: pushes move tail, the drain moves head, both counting up (the
 * slot is the count modulo the size).  Slots are free again as soon as
 * they were applied, so a storm of signals only overflows it when more
 * than GH_DEFER_MAX calls wait at once.
 *
 * The rings are not thread-local storage themselves: initial-exec TLS is
 * scarce in a library that is dlopen'ed (about 1.6 KiB for all of them,
 * and Python's ctypes loads this one so).  A thread takes one of
 * GH_DEFER_RINGS at its first push and keeps it until it ends (then the
 * next thread may take it); a thread past them, while all are held by
 * live threads, loses what it would queue (the registry is marked
 * untrusted, as for a full ring).
 */
struct dqueue {
	unsigned int head, tail;
	struct deferred q[GH_DEFER_MAX];
};

static struct dqueue dq_rings[GH_DEFER_RINGS];
/* which rings live threads hold */
static struct gh_tslot_set dq_owned = GH_TSLOT_SET(GH_DEFER_RINGS);
static __thread struct dqueue *dq;
static __thread unsigned int dq_lost;

static void push(const struct deferred *d)
{
	struct dqueue *q = dq;
	unsigned int t;

	if (!q) {
		int i = gh_tslot_take(&dq_owned);

		if (i < 0) {
			__atomic_store_n(&dq_lost, 1, __ATOMIC_RELAXED);
			return;
		}
		q = &dq_rings[i];
		dq = q;
	}
	t = __atomic_load_n(&q->tail, __ATOMIC_RELAXED);
	do {
		if (t - __atomic_load_n(&q->head, __ATOMIC_RELAXED) >=
		    GH_DEFER_MAX) {
			__atomic_store_n(&dq_lost, 1, __ATOMIC_RELAXED);
			return;
		}
	} while (!__atomic_compare_exchange_n(&q->tail, &t, t + 1, 0,
					      __ATOMIC_RELAXED,
					      __ATOMIC_RELAXED));
	/* a handler interrupting here pushes behind, and returns before
	 * this slot is read: the drain never runs inside a push */
	q->q[t % GH_DEFER_MAX] = *d;
	__atomic_signal_fence(__ATOMIC_RELEASE);
}

int gh_deferred_pending(void)
{
	struct dqueue *q = dq;

	return (q && __atomic_load_n(&q->tail, __ATOMIC_RELAXED) !=
		     __atomic_load_n(&q->head, __ATOMIC_RELAXED)) ||
	       __atomic_load_n(&dq_lost, __ATOMIC_RELAXED);
}

void gh_guarded_alloc(unsigned int sym, unsigned int kind, uint64_t ptr,
		      uint64_t size, uint64_t pool, uint64_t handle)
{
	struct deferred d = { OP_ALLOC, (uint16_t)sym, (uint16_t)kind,
			      ptr, size, pool, handle };

	push(&d);
}

void gh_guarded_free(unsigned int sym, uint64_t ptr, uint64_t size,
		     int range)
{
	struct deferred d = { range ? OP_FREE_RANGE : OP_FREE, (uint16_t)sym,
			      0, ptr, size, 0, 0 };

	if (ptr && (!range || size))
		push(&d);
}

/* Did a stream-ordered call on this stream make a graph node?  (A driver
 * query, not a lock of ours: safe in the guarded window.) */
int gh_guarded_captured(uint64_t stream)
{
	int saved = errno;	/* the program sees the real call's errno */
	uint64_t graph;
	int captured = gh_drv_capture_graph(stream, &graph);

	errno = saved;
	return captured;
}

void gh_guarded_untrusted(unsigned int sym)
{
	struct deferred d = { OP_UNTRUSTED, (uint16_t)sym, 0, 0, 0, 0, 0 };

	push(&d);
}

static void call_init(struct gh_call *c, unsigned int sym)
{
	memset(c, 0, sizeof(*c));
	c->sym = sym;
	c->api = gh_syms[sym].name;
	c->dev = -1;
}

static void apply(const struct deferred *d)
{
	struct gh_call c;
	struct gh_range cur;

	call_init(&c, d->sym);
	switch (d->op) {
	case OP_ALLOC:
		/* A runtime call's driver call, queued too, registered it. */
		if (gh_syms[d->sym].family == GH_FAM_RUNTIME &&
		    !gh_registry_lookup(d->ptr, 1, &cur) && cur.base == d->ptr)
			return;
		gh_alloc_post(&c, d->kind, d->ptr, d->size, d->pool,
			      d->handle);
		return;
	case OP_FREE:
		/* Already gone: its driver-level call was queued too. */
		if (gh_registry_lookup(d->ptr, 1, &cur) || cur.base != d->ptr)
			return;
		gh_free_pre(&c, d->ptr);
		gh_free_post(&c);
		return;
	case OP_FREE_RANGE:
		gh_free_range_pre(&c, d->ptr, d->size);
		gh_free_range_post(&c);
		return;
	case OP_UNTRUSTED:
		gh_mark_untrusted(c.api,
				  "called in gdrhook's guarded window (signal handler or subscriber), effect not replayable");
		return;
	}
}

/*
 * Called with the guard still up: calls made while applying queue too
 * (behind the ones being applied), and are applied in this drain: oldest
 * first.
 */
void gh_deferred_drain(void)
{
	struct dqueue *q = dq;
	sigset_t all, old;
	unsigned int h;

	/*
	 * Signals wait while this runs: each apply makes driver calls, and a
	 * storm of handlers, each queueing more than one apply takes, would
	 * otherwise outgrow any ring.  What is pending is delivered as the
	 * mask comes back (and drained by the caller's next look).
	 */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	while (q && (h = __atomic_load_n(&q->head, __ATOMIC_RELAXED)) !=
		    __atomic_load_n(&q->tail, __ATOMIC_RELAXED)) {
		struct deferred d;

		__atomic_signal_fence(__ATOMIC_ACQUIRE);
		d = q->q[h % GH_DEFER_MAX];
		__atomic_store_n(&q->head, h + 1, __ATOMIC_RELAXED);
		apply(&d);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (__atomic_exchange_n(&dq_lost, 0, __ATOMIC_RELAXED))
		gh_mark_untrusted("gdrhook",
				  "too many memory calls in gdrhook's guarded window: some were lost");
}

/*
 * The thread ends: its ring goes to the next thread that pushes.  Empty,
 * as every drain leaves it; one that is not held effects nobody applied:
 * the registry is no longer complete, and the ring is not reused.
 */
static void dq_thread_end(void *v)
{
	unsigned int i = (unsigned int)(uintptr_t)v - 1;
	struct dqueue *q = &dq_rings[i];

	if (dq == q)
		dq = NULL;
	if (__atomic_load_n(&q->head, __ATOMIC_RELAXED) !=
	    __atomic_load_n(&q->tail, __ATOMIC_RELAXED)) {
		gh_mark_untrusted("gdrhook",
				  "a thread ended with memory calls of its guarded window not applied");
		return;
	}
	gh_tslot_give(&dq_owned, i);
}

/* A fork child has one thread: the other threads' rings are free. */
static void dq_atfork_child(void)
{
	long own = dq ? dq - dq_rings : -1;

	for (int i = 0; i < GH_DEFER_RINGS; i++)
		if (i != own)
			dq_rings[i].head = dq_rings[i].tail;
	gh_tslot_reset(&dq_owned, (int)own);
}

__attribute__((constructor)) static void dq_init(void)
{
	gh_tslot_init(&dq_owned, dq_thread_end);
	pthread_atfork(NULL, NULL, dq_atfork_child);
}
