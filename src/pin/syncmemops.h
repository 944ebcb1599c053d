/* SPDX-License-Identifier: MIT */
/* SYNC_MEMOPS for memory the registration cache pins (src/pin/syncmemops.c). */
#ifndef GH_SYNCMEMOPS_H
#define GH_SYNCMEMOPS_H

#include <stdint.h>

#include "registry/registry.h"

/*
 * After a cache miss on live allocation r, with no lock held: give r's
 * memory synchronous memory operations (per context, else per pointer),
 * unless GDRHOOK_SYNC_MEMOPS=0.  Never fails the registration.
 */
void gh_syncmemops_ensure(const struct gh_range *r);

#endif
