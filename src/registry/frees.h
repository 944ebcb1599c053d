/* SPDX-License-Identifier: MIT */
/*
 * What follows the removal of a range from the registry (frees.c), in
 * one order for every free: the program's (cuMemFree and the like) and
 * the implicit ones (a context, pool, graph or VMM range going with its
 * memory):
 *
 *   1. registrations in flight are told (gh_inflight_note_free), before
 *      anything may act on the memory;
 *   2. the listeners, in the order they listened: the registration cache
 *      listens first (it revokes what it registered on the range before
 *      the memory goes);
 *   3. the subscribers (gdrhook_subscribe).
 *
 * All of it before the real free.  The event record describes the call,
 * and stays with its caller.
 */
#ifndef GH_FREES_H
#define GH_FREES_H

#include <stddef.h>
#include <stdint.h>

#include "ranges.h"

typedef void (*gh_free_listener_fn)(const struct gh_range *r);

/*
 * Add fn to the listeners (at most GH_FREES_MAX, each once): it is called
 * for every range removed from then on.  A layer above the registry
 * listens this way (the cache: gh_rcache_invalidate).  0, -EEXIST, or
 * -ENOSPC.
 */
#define GH_FREES_MAX	4
int gh_frees_listen(gh_free_listener_fn fn);

/* Steps 1-3 for r, just removed; api: the entry point, for subscribers. */
void gh_frees_removed(const struct gh_range *r, const char *api);

/*
 * Remove every range match() selects, in batches collected under the
 * registry's locks and followed outside them by steps 1-3 and then
 * after(r, after_arg) (the caller's record; may be NULL) for each.  The
 * number removed.
 */
size_t gh_frees_remove_matching(gh_range_match_fn match, void *arg,
				const char *api, gh_range_fn after,
				void *after_arg);

/* Remove the allocation based at base (*out_p: what it was), then steps
 * 1-3.  0, or -ENOENT when nothing is based there. */
int gh_frees_remove(uint64_t base, struct gh_range *out_p, const char *api);

#endif
