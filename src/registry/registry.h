/* SPDX-License-Identifier: MIT */
/*
 * The registry layer (src/registry), its one header: the live GPU
 * allocations with lock-free lookups (ranges*.c), whether they can be
 * trusted (trust.c), the registrations in flight against them
 * (inflight.c), audit mode (audit.c), the subscribers (subscribers.c)
 * and the sequence every free follows (frees.c).
 */
#ifndef GH_REGISTRY_H
#define GH_REGISTRY_H

#include "platform/platform.h"
#include "ranges.h"
#include "trust.h"
#include "inflight.h"
#include "audit.h"
#include "subscribers.h"
#include "frees.h"
#include "registry_opts.h"

#endif
