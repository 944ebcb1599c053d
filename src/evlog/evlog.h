/* SPDX-License-Identifier: MIT */
/*
 * The event log layer (src/evlog), the one header other layers include
 * from it: the event log (GDRHOOK_TRACE, JSON Lines), its records (evrec.h,
 * generated), the per-thread rings and the writer thread
 * (evlog_ring.h), the sinks and their meta lines (evlog_sink.h) and the
 * crash-safe spool (evspool.h).  It calls only the base layer.  Files
 * inside src/evlog include the header of what they use, not this one.
 */
#ifndef GH_EVLOG_H
#define GH_EVLOG_H

#include "base/base.h"
#include "evrec.h"
#include "evspool.h"
#include "evlog_sink.h"
#include "evlog_ring.h"
#include "evlog_opts.h"

#endif
