/* SPDX-License-Identifier: MIT */
/*
 * The subscription relay of the gdrhook Python package.
 *
 * gdrhook_subscribe() runs its callback inside the hook, on the thread
 * that called cuMemFree and before the real free.  A ctypes callback
 * there would take the GIL first: a thread with no GIL (a C++ worker, a
 * Python thread inside a ctypes or extension call) would then wait for
 * whoever holds it, while that holder may itself wait for the freeing
 * thread (PyTorch's allocator calls cudaFree under its own mutex):
 * a deadlock.  So the callback is this C function: it copies the event
 * into a bounded ring and returns, with no lock, no malloc, no system
 * call but gettid and the vDSO clock; a full ring counts the event as
 * dropped.  Python drains the ring on its own threads (gdrhook.Subscription).
 *
 * The ring is Vyukov's bounded queue: producers claim a slot with a
 * compare-and-swap on head and publish it through the slot's sequence;
 * one consumer at a time (the Python side holds a lock) takes slots in
 * order.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>

#include "_relay.h"

#define RELAY_EXPORT __attribute__((visibility("default")))

struct relay_slot {
	_Atomic uint64_t seq;
	struct gdrhook_relay_event ev;
};

struct gdrhook_relay {
	uint64_t mask;
	_Atomic uint64_t head;		/* next slot a producer claims */
	uint64_t tail;			/* next slot the consumer takes */
	_Atomic uint64_t dropped;
	struct relay_slot slot[];
};

RELAY_EXPORT struct gdrhook_relay *gdrhook_relay_new(uint32_t capacity);
RELAY_EXPORT void gdrhook_relay_free(struct gdrhook_relay *r);
RELAY_EXPORT void gdrhook_relay_push(const struct gdrhook_event *ev, void *arg);
RELAY_EXPORT uint32_t gdrhook_relay_poll(struct gdrhook_relay *r,
					 struct gdrhook_relay_event *out,
					 uint32_t max);
RELAY_EXPORT uint64_t gdrhook_relay_dropped(const struct gdrhook_relay *r);

/* capacity: a power of two, 2 to 2^24; NULL and errno otherwise. */
struct gdrhook_relay *gdrhook_relay_new(uint32_t capacity)
{
	struct gdrhook_relay *r;
	uint32_t i;

	if (capacity < 2 || capacity > (1u << 24) ||
	    (capacity & (capacity - 1))) {
		errno = EINVAL;
		return NULL;
	}
	r = calloc(1, sizeof(*r) + (size_t)capacity * sizeof(r->slot[0]));
	if (!r)
		return NULL;
	r->mask = capacity - 1;
	for (i = 0; i < capacity; i++)
		atomic_init(&r->slot[i].seq, i);
	return r;
}

/* Only once gdrhook_unsubscribe() returned 0: no callback runs any more. */
void gdrhook_relay_free(struct gdrhook_relay *r)
{
	free(r);
}

/* The gdrhook_event_fn: on the hook's path. */
void gdrhook_relay_push(const struct gdrhook_event *ev, void *arg)
{
	struct gdrhook_relay *r = arg;
	uint64_t pos = atomic_load_explicit(&r->head, memory_order_relaxed);
	struct relay_slot *s;
	struct timespec ts;
	int saved = errno;	/* the hook's caller sees the real call's */

	for (;;) {
		int64_t d;

		s = &r->slot[pos & r->mask];
		d = (int64_t)(atomic_load_explicit(&s->seq, memory_order_acquire) - pos);
		if (d == 0) {
			if (atomic_compare_exchange_weak_explicit(&r->head, &pos, pos + 1,
								  memory_order_relaxed,
								  memory_order_relaxed))
				break;
		} else if (d < 0) {
			atomic_fetch_add_explicit(&r->dropped, 1, memory_order_relaxed);
			return;
		} else {
			pos = atomic_load_explicit(&r->head, memory_order_relaxed);
		}
	}
	s->ev.ev = *ev;
	s->ev.ev.api = NULL;	/* Python reads the copy below */
	clock_gettime(CLOCK_MONOTONIC, &ts);
	s->ev.t = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	s->ev.tid = (uint64_t)syscall(SYS_gettid);
	memset(s->ev.api, 0, sizeof(s->ev.api));
	if (ev->api)
		strncpy(s->ev.api, ev->api, sizeof(s->ev.api) - 1);
	atomic_store_explicit(&s->seq, pos + 1, memory_order_release);
	errno = saved;
}

/* Up to max events into out, oldest first; one caller at a time. */
uint32_t gdrhook_relay_poll(struct gdrhook_relay *r,
			    struct gdrhook_relay_event *out, uint32_t max)
{
	uint64_t pos = r->tail;
	uint32_t n = 0;

	while (n < max) {
		struct relay_slot *s = &r->slot[pos & r->mask];
		uint64_t seq = atomic_load_explicit(&s->seq, memory_order_acquire);

		if ((int64_t)(seq - (pos + 1)) < 0)
			break;		/* not published yet */
		out[n++] = s->ev;
		atomic_store_explicit(&s->seq, pos + r->mask + 1,
				      memory_order_release);
		pos++;
	}
	r->tail = pos;
	return n;
}

uint64_t gdrhook_relay_dropped(const struct gdrhook_relay *r)
{
	return atomic_load_explicit(&r->dropped, memory_order_relaxed);
}
