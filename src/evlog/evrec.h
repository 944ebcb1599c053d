/* SPDX-License-Identifier: MIT */
/*
 * One hook event, as the hook path records it: struct gh_evrec, the event
 * enum, and one emit function per event family, all generated from
 * hooks/events.table (scripts/gen-events.py -> gh_events.h).  Fixed size
 * and plain data, so recording it is a copy and a ring of them is readable
 * after the process died; formatting happens later, off the hook path.
 */
#ifndef GH_EVREC_H
#define GH_EVREC_H

#include "gh_events.h"

/* Bytes one event takes in a ring (GDRHOOK_TRACE_BUFFER / this = records);
 * scripts/gen-events.py generates struct gh_evrec of this size. */
#define GH_EVLOG_REC_BYTES	192

#endif
