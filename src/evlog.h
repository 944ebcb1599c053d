/* SPDX-License-Identifier: MIT */
/*
 * The event log (GDRHOOK_LOG): JSON Lines, one object per event.
 *
 * Hook threads copy gh_evrec records into preallocated per-thread rings
 * (no I/O, no locks, no malloc on that path); one writer thread formats
 * and writes them.  Everything is flushed at exit and before fork.
 */
#ifndef GH_EVLOG_H
#define GH_EVLOG_H

/* "v" of the start record: the event log format version. */
#define GH_EVLOG_FORMAT	1

#include <stdint.h>
#include "evrec.h"
#include "clock.h"

/*
 * Configure the log; called once at init when GDRHOOK_LOG is set.  path is
 * a file path or "stderr"; "%p" in it is replaced by the pid.  Opens
 * nothing and starts no thread yet: that happens at the first event, so
 * processes that never touch CUDA leave no trace.  ring_bytes: per-thread
 * ring size (0 = default).  Returns 0 or -errno (bad path pattern).
 */
int gh_evlog_configure(const char *path, uint64_t ring_bytes);

/* True when a log is configured (cheap; the hook path tests it first). */
int gh_evlog_enabled(void);

/* Start time of an operation for its log record: no clock read (0)
 * when no log is configured. */
static inline uint64_t gh_evlog_clock(void)
{
	return gh_evlog_enabled() ? gh_now_ns() : 0;
}

/*
 * Hook path: record one event.  Never blocks, never allocates with malloc,
 * never formats.  If this thread's ring is full the event is counted as
 * dropped.  Preserves errno.
 */
void gh_evlog_put(const struct gh_evrec *r);

/* Drain every ring to the file now (synchronous). */
void gh_evlog_flush(void);

/* At exit: drain, write the "exit" record, stop the writer, close. */
void gh_evlog_shutdown(uint64_t live, uint64_t live_bytes);

uint64_t gh_evlog_written(void);
uint64_t gh_evlog_dropped(void);

/* fork: prepare drains and quiesces; child restarts with fresh state. */
void gh_evlog_atfork_prepare(void);
void gh_evlog_atfork_parent(void);
void gh_evlog_atfork_child(void);

#endif
