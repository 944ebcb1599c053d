// SPDX-License-Identifier: MIT
/*
 * Event subscribers: a fixed table read without locks on every event.
 *
 * Each slot has a sequence word: odd while a subscription lives in it,
 * bumped on subscribe and on unsubscribe, so fn, arg and mask are read
 * as one snapshot of one subscription (a seqlock), and a handle carries
 * the generation it was given for, so a stale handle never removes a
 * later subscription in the same slot.
 *
 * A notifier counts itself in the slot's inflight before it checks the
 * sequence (both sequentially consistent); unsubscribe bumps the
 * sequence, then waits for inflight to drop to what its own thread holds.
 * So either the notifier sees the subscription gone and skips it, or the
 * unsubscriber sees the notifier and waits for its callback to return.
 * The slot is not reused until that wait is over: a callback never sees
 * another subscription's fn, arg or mask.  The notify side takes no lock.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <time.h>

#include "base/base.h"
#include "ranges.h"
#include "subscribers.h"

#define GH_MAX_SUBSCRIBERS 16
#define GH_SUB_SLOT_BITS 4
#define GH_SUB_GEN_MASK ((1u << (31 - GH_SUB_SLOT_BITS)) - 1)
#define GH_EVENT_ALL (GDRHOOK_EVENT_ALLOC | GDRHOOK_EVENT_FREE | \
		      GDRHOOK_EVENT_UNTRUSTED)

_Static_assert(GH_MAX_SUBSCRIBERS <= 1 << GH_SUB_SLOT_BITS,
	       "a handle's slot bits hold every slot");

/* One cache line each: notifiers on many threads touch inflight. */
struct subscriber {
	uint32_t seq;		/* odd: live; changes on (un)subscribe */
	uint32_t inflight;	/* notifiers between their check and return */
	gdrhook_event_fn fn;
	void *arg;
	uint32_t mask;
	int busy;		/* under subs_lock: live or still draining */
} __attribute__((aligned(64)));

static struct subscriber subs[GH_MAX_SUBSCRIBERS];
static int nsubs_hint;
static pthread_mutex_t subs_lock = PTHREAD_MUTEX_INITIALIZER;

/*
 * Callbacks of each slot this thread is inside (a callback may be
 * interrupted by a signal whose handler's hook notifies again).  Counted
 * before inflight is, so an unsubscribe from this thread never waits
 * for its own callbacks.
 */
static __thread uint8_t sub_mine[GH_MAX_SUBSCRIBERS];
/* this thread's sub_mine is handed back at its end (sub_key) */
static __thread int sub_keyed;
static pthread_key_t sub_key;
static int sub_key_ok;

/*
 * This thread will not return from the callbacks it is inside (it
 * jumped out of them, or it ends inside one: pthread_exit): they are
 * no longer in flight, so an unsubscribe does not wait for them.
 */
void gh_subscribers_abandon(void)
{
	for (int i = 0; i < GH_MAX_SUBSCRIBERS; i++) {
		uint8_t n = sub_mine[i];

		if (!n)
			continue;
		__atomic_fetch_sub(&subs[i].inflight, n, __ATOMIC_RELEASE);
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		sub_mine[i] = 0;
	}
}

static void sub_thread_end(void *v)
{
	(void)v;
	gh_subscribers_abandon();
}

/* The key's value lives in the thread descriptor only for the first 32
 * keys; a later one's setspecific may calloc, which a hook must not. */
__attribute__((constructor)) static void sub_init(void)
{
	if (pthread_key_create(&sub_key, sub_thread_end))
		return;
	if ((unsigned long)sub_key < 32)
		__atomic_store_n(&sub_key_ok, 1, __ATOMIC_RELEASE);
	else
		pthread_key_delete(sub_key);
}

static int handle_of(int slot, uint32_t seq)
{
	return (int)(((seq >> 1) & GH_SUB_GEN_MASK) << GH_SUB_SLOT_BITS) |
	       slot;
}

/* gdrhook_subscribe (api.c) once gdrhook is active. */
int gh_subscribers_add(uint32_t mask, gdrhook_event_fn fn, void *arg)
{
	int h = -ENOSPC;

	if (!fn || !mask || (mask & ~(uint32_t)GH_EVENT_ALL))
		return -EINVAL;
	pthread_mutex_lock(&subs_lock);
	for (int i = 0; i < GH_MAX_SUBSCRIBERS; i++) {
		struct subscriber *s = &subs[i];
		uint32_t seq;

		if (s->busy)
			continue;
		/* seq is even and no notifier is past its check: the fields
		 * are ours until the release below publishes them. */
		__atomic_store_n(&s->fn, fn, __ATOMIC_RELAXED);
		__atomic_store_n(&s->arg, arg, __ATOMIC_RELAXED);
		__atomic_store_n(&s->mask, mask, __ATOMIC_RELAXED);
		seq = __atomic_load_n(&s->seq, __ATOMIC_RELAXED) + 1;
		__atomic_store_n(&s->seq, seq, __ATOMIC_RELEASE);
		s->busy = 1;
		if (i + 1 > nsubs_hint)
			__atomic_store_n(&nsubs_hint, i + 1, __ATOMIC_RELEASE);
		h = handle_of(i, seq);
		break;
	}
	pthread_mutex_unlock(&subs_lock);
	return h;
}

/* Until only this thread's own callbacks of the slot are in flight. */
static void sub_drain(struct subscriber *s, int slot)
{
	struct timespec nap = { 0, 50 * 1000 };

	for (int spins = 0;; spins++) {
		uint32_t mine = __atomic_load_n(&sub_mine[slot],
						__ATOMIC_RELAXED);

		if (__atomic_load_n(&s->inflight, __ATOMIC_SEQ_CST) <= mine)
			return;
		if (spins < 100)
			sched_yield();
		else
			nanosleep(&nap, NULL);	/* a callback that blocks */
	}
}

GH_EXPORT int gdrhook_unsubscribe(int handle)
{
	int slot = handle & ((1 << GH_SUB_SLOT_BITS) - 1);
	struct subscriber *s;
	uint32_t seq;

	if (handle < 0 || slot >= GH_MAX_SUBSCRIBERS)
		return -EINVAL;
	s = &subs[slot];
	pthread_mutex_lock(&subs_lock);
	seq = __atomic_load_n(&s->seq, __ATOMIC_RELAXED);
	if (!(seq & 1) || handle_of(slot, seq) != handle) {
		pthread_mutex_unlock(&subs_lock);
		return -EINVAL;
	}
	/* Ordered before the inflight reads in sub_drain (see the top). */
	__atomic_store_n(&s->seq, seq + 1, __ATOMIC_SEQ_CST);
	pthread_mutex_unlock(&subs_lock);
	/* Unlocked: a callback in flight may (un)subscribe others. */
	sub_drain(s, slot);
	pthread_mutex_lock(&subs_lock);
	s->busy = 0;
	pthread_mutex_unlock(&subs_lock);
	return 0;
}

static void build_event(struct gdrhook_event *ev, uint32_t type,
			const struct gh_range *r, const char *api)
{
	ev->type = type;
	ev->reserved = 0;
	gh_range_copy_out(r, &ev->range);
	ev->api = api;
}

void gh_subscribers_notify(uint32_t type, const struct gh_range *r,
			   const char *api)
{
	int n = __atomic_load_n(&nsubs_hint, __ATOMIC_ACQUIRE);
	struct gdrhook_event ev;
	int built = 0, was;

	for (int i = 0; i < n; i++) {
		struct subscriber *s = &subs[i];
		uint32_t seq = __atomic_load_n(&s->seq, __ATOMIC_ACQUIRE);
		gdrhook_event_fn fn;
		void *arg;

		/* Unlocked filter first: most slots cost two loads. */
		if (!(seq & 1) ||
		    !(__atomic_load_n(&s->mask, __ATOMIC_RELAXED) & type))
			continue;
		if (GH_UNLIKELY(!sub_keyed) &&
		    __atomic_load_n(&sub_key_ok, __ATOMIC_ACQUIRE)) {
			sub_keyed = 1;
			pthread_setspecific(sub_key, (void *)1);
		}
		sub_mine[i]++;
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		__atomic_fetch_add(&s->inflight, 1, __ATOMIC_SEQ_CST);
		/* Same generation as the filter read, and the mask read with
		 * it was its own: otherwise it changed meanwhile, and an
		 * event racing a (un)subscribe may be missed. */
		if (__atomic_load_n(&s->seq, __ATOMIC_SEQ_CST) != seq)
			goto out;
		fn = __atomic_load_n(&s->fn, __ATOMIC_RELAXED);
		arg = __atomic_load_n(&s->arg, __ATOMIC_RELAXED);
		if (!built) {
			build_event(&ev, type, r, api);
			built = 1;
		}
		was = gh_guard_enter();
		fn(&ev, arg);
		gh_guard_leave(was);
out:
		__atomic_fetch_sub(&s->inflight, 1, __ATOMIC_RELEASE);
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		sub_mine[i]--;
	}
}
