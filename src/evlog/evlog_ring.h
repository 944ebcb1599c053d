/* SPDX-License-Identifier: MIT */
/*
 * The event log (GDRHOOK_TRACE) as its callers see it
 * (src/evlog/evlog_ring.c): JSON Lines, one object per event.
 *
 * Hook threads copy gh_evrec records into preallocated per-thread rings
 * (no I/O, no locks, no malloc on that path); one writer thread formats
 * and writes them.  Everything is flushed at exit and before fork and exec.
 */
#ifndef GH_EVLOG_RING_H
#define GH_EVLOG_RING_H

#include <stdint.h>

#include "base/base.h"
#include "evrec.h"

/*
 * Configure the log; called once at init when GDRHOOK_TRACE is set.  path is
 * a file path or "stderr"; "%p" in it is replaced by the pid, "%h" by the
 * host name; a relative path is resolved now, against the starting
 * directory.  The "start" record is stamped now.  Spools of dead
 * processes are recovered into their logs now (see evlog_recover.c).
 * Opens no log and starts no thread yet: that happens at the first event,
 * so processes that never touch CUDA leave no log.  ring_bytes:
 * per-thread ring size (0 = default).  Returns 0 or -errno (bad path
 * pattern).
 */
int gh_evlog_configure(const char *path, uint64_t ring_bytes);

/* GDRHOOK_TRACE_MODE: 0 drop (a full ring drops, counted), 1 block (a hook
 * waits for ring space).  Before the first event. */
void gh_evlog_set_block(int block);

/* True when a log is configured (cheap; the hook path tests it first). */
int gh_evlog_enabled(void);

/* Start time of an operation for its log record: no clock read (0)
 * when no log is configured. */
static inline uint64_t gh_evlog_clock(void)
{
	return gh_evlog_enabled() ? gh_now_ns() : 0;
}

/*
 * Hook path: record one event.  Never allocates with malloc, never
 * formats.  If this thread's ring is full the event is counted as dropped
 * (or, in block mode, the call waits for the writer).  Preserves errno.
 */
void gh_evlog_put(const struct gh_evrec *r);

/* Events the sink took, and events dropped, in this process. */
uint64_t gh_evlog_written(void);
uint64_t gh_evlog_dropped(void);

/* Drain every ring to the file now (synchronous). */
void gh_evlog_flush(void);

/* At exit: drain, write the "exit" record, stop the writer, close. */
void gh_evlog_shutdown(uint64_t live, uint64_t live_bytes);

/*
 * exec*: prepare drains every ring and holds the log until the image is
 * replaced (returns 1 when it did); if the exec fails, exec_failed lets
 * go.  Both preserve errno; neither allocates.
 */
int gh_evlog_exec_prepare(void);
void gh_evlog_exec_failed(void);

/* fork: prepare drains and quiesces; child restarts with fresh state. */
void gh_evlog_atfork_prepare(void);
void gh_evlog_atfork_parent(void);
void gh_evlog_atfork_child(void);

#endif
