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

#endif
