// SPDX-License-Identifier: MIT
/*
 * Event subscribers: a fixed table read without locks on every event.
 * A slot is published by writing fn last; unsubscribing clears fn first.
 */
#include <errno.h>
#include <pthread.h>

#include "internal.h"

#define GH_MAX_SUBSCRIBERS 16
#define GH_EVENT_ALL (GDRHOOK_EVENT_ALLOC | GDRHOOK_EVENT_FREE | \
		      GDRHOOK_EVENT_UNTRUSTED)

struct subscriber {
	gdrhook_event_fn fn;
	void *arg;
	uint32_t mask;
};

static struct subscriber subs[GH_MAX_SUBSCRIBERS];
static int nsubs_hint;
static pthread_mutex_t subs_lock = PTHREAD_MUTEX_INITIALIZER;

GH_EXPORT int gdrhook_subscribe(uint32_t mask, gdrhook_event_fn fn, void *arg)
{
	int h = -ENOSPC;

	if (!fn || !mask || (mask & ~(uint32_t)GH_EVENT_ALL))
		return -EINVAL;
	if (!gh_active())
		return -ENODEV;
	pthread_mutex_lock(&subs_lock);
	for (int i = 0; i < GH_MAX_SUBSCRIBERS; i++) {
		if (__atomic_load_n(&subs[i].fn, __ATOMIC_RELAXED))
			continue;
		__atomic_store_n(&subs[i].arg, arg, __ATOMIC_RELAXED);
		__atomic_store_n(&subs[i].mask, mask, __ATOMIC_RELAXED);
		__atomic_store_n(&subs[i].fn, fn, __ATOMIC_RELEASE);
		if (i + 1 > nsubs_hint)
			__atomic_store_n(&nsubs_hint, i + 1, __ATOMIC_RELEASE);
		h = i;
		break;
	}
	pthread_mutex_unlock(&subs_lock);
	return h;
}

GH_EXPORT int gdrhook_unsubscribe(int handle)
{
	int rc = -EINVAL;

	if (handle < 0 || handle >= GH_MAX_SUBSCRIBERS)
		return -EINVAL;
	pthread_mutex_lock(&subs_lock);
	if (__atomic_load_n(&subs[handle].fn, __ATOMIC_RELAXED)) {
		__atomic_store_n(&subs[handle].fn, NULL, __ATOMIC_RELEASE);
		rc = 0;
	}
	pthread_mutex_unlock(&subs_lock);
	return rc;
}

void gh_subscribers_notify(uint32_t type, const struct gh_range *r,
			   const char *api)
{
	int n = __atomic_load_n(&nsubs_hint, __ATOMIC_ACQUIRE);
	struct gdrhook_event ev;
	int built = 0, was;

	for (int i = 0; i < n; i++) {
		gdrhook_event_fn fn = __atomic_load_n(&subs[i].fn,
						      __ATOMIC_ACQUIRE);

		if (!fn || !(__atomic_load_n(&subs[i].mask, __ATOMIC_RELAXED) &
			     type))
			continue;
		if (!built) {
			ev.type = type;
			ev.reserved = 0;
			ev.range.base = r->base;
			ev.range.size = r->size;
			ev.range.gen = r->gen;
			ev.range.ctx = r->ctx;
			ev.range.pool = r->pool;
			ev.range.dev = r->dev;
			ev.range.kind = r->kind;
			ev.range.flags = r->flags & GH_RANGE_VOLATILE ?
					 GDRHOOK_RANGE_VOLATILE : 0;
			ev.range.reserved = 0;
			ev.api = api;
			built = 1;
		}
		was = gh_guard_enter();
		fn(&ev, __atomic_load_n(&subs[i].arg, __ATOMIC_RELAXED));
		gh_guard_leave(was);
	}
}
