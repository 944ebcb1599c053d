/* SPDX-License-Identifier: MIT */
/* Subscribers to allocation events (subscribers.c). */
#ifndef GH_SUBSCRIBERS_H
#define GH_SUBSCRIBERS_H

#include <stdint.h>

#include "ranges.h"
#include "gdrhook.h"

/* Subscribers (subscribers.c): the table and its notification; the
 * public gdrhook_subscribe (api.c) adds to it once gdrhook is active. */
/* This thread left the callbacks it is inside for good (call.c: it
 * jumped out of a hook; or it ends): they no longer count as running. */
void gh_subscribers_abandon(void);
void gh_subscribers_notify(uint32_t type, const struct gh_range *r,
			   const char *api);
int gh_subscribers_add(uint32_t mask, gdrhook_event_fn fn, void *arg);

/* r as the public API gives it (gdrhook_lookup, events); inline: the
 * lookup is a hot path. */
static inline void gh_range_copy_out(const struct gh_range *r,
				     struct gdrhook_range *out_p)
{
	out_p->base = r->base;
	out_p->size = r->size;
	out_p->gen = r->gen;
	out_p->ctx = r->ctx;
	out_p->pool = r->pool;
	out_p->dev = r->dev;
	out_p->kind = r->kind;
	out_p->flags = r->flags & GH_RANGE_VOLATILE ?
		       GDRHOOK_RANGE_VOLATILE : 0;
	out_p->reserved = 0;
}

#endif
