/* SPDX-License-Identifier: MIT */
/*
 * The registration cache layer (src/rcache), its one header: the cache
 * (rcache_api.h: rcache_core.c and the files it names; their state, one
 * object, is rcache_state.h, private to the folder), its start
 * (rcache_start.c), the span key table (rcache_spankeys.c) and the span
 * policy above the core (rcache_span.c).
 */
#ifndef GH_RCACHE_H
#define GH_RCACHE_H

#include "pin/pin.h"
#include "rcache_api.h"
#include "rcache_spankeys.h"
#include "rcache_span.h"
#include "rcache_opts.h"

#endif
