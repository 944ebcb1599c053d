// SPDX-License-Identifier: MIT
/*
 * The free sequence (see frees.h): one function for the program's frees
 * and the implicit ones, so that the order "registrations in flight, the
 * cache, then subscribers" is a property of one place.
 */
#include <errno.h>
#include <pthread.h>

#include "base/base.h"
#include "frees.h"
#include "inflight.h"
#include "subscribers.h"

static gh_free_listener_fn listeners[GH_FREES_MAX];
static unsigned int n_listeners;	/* published with release */

int gh_frees_listen(gh_free_listener_fn fn)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	unsigned int n;
	int rc = 0;

	pthread_mutex_lock(&lock);
	n = n_listeners;
	for (unsigned int i = 0; i < n; i++)
		if (listeners[i] == fn)
			rc = -EEXIST;
	if (!rc && n == GH_FREES_MAX)
		rc = -ENOSPC;
	if (!rc) {
		__atomic_store_n(&listeners[n], fn, __ATOMIC_RELAXED);
		__atomic_store_n(&n_listeners, n + 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&lock);
	return rc;
}

void gh_frees_removed(const struct gh_range *r, const char *api)
{
	unsigned int n = __atomic_load_n(&n_listeners, __ATOMIC_ACQUIRE);
	GH_PH_T(t);

	gh_inflight_note_free(r);
	GH_PH_LAP(GH_PH_F_INFLIGHT, t);
	for (unsigned int i = 0; i < n; i++)
		__atomic_load_n(&listeners[i], __ATOMIC_RELAXED)(r);
	GH_PH_LAP(GH_PH_F_RCACHE, t);
	gh_subscribers_notify(GDRHOOK_EVENT_FREE, r, api);
	GH_PH_LAP(GH_PH_F_SUBS, t);
}

int gh_frees_remove(uint64_t base, struct gh_range *out_p, const char *api)
{
	GH_PH_T(t);

	if (gh_registry_remove(base, out_p))
		return -ENOENT;
	GH_PH_LAP(GH_PH_F_REMOVE, t);
	gh_frees_removed(out_p, api);
	return 0;
}

#define GH_FREES_BATCH	128

struct batch {
	gh_range_match_fn match;
	void *arg;
	struct gh_range r[GH_FREES_BATCH];
	size_t n;
};

static int batch_match(const struct gh_range *r, void *arg)
{
	struct batch *b = arg;

	return b->n < GH_FREES_BATCH && b->match(r, b->arg);
}

static void batch_add(const struct gh_range *r, void *arg)
{
	struct batch *b = arg;

	if (b->n < GH_FREES_BATCH)
		b->r[b->n++] = *r;
}

size_t gh_frees_remove_matching(gh_range_match_fn match, void *arg,
				const char *api, gh_range_fn after,
				void *after_arg)
{
	struct batch b = { .match = match, .arg = arg };
	size_t total = 0;

	for (;;) {
		b.n = 0;
		gh_registry_remove_if(batch_match, &b, batch_add, &b);
		for (size_t i = 0; i < b.n; i++) {
			gh_frees_removed(&b.r[i], api);
			if (after)
				after(&b.r[i], after_arg);
		}
		total += b.n;
		if (b.n < GH_FREES_BATCH)
			return total;
	}
}
