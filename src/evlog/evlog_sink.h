/* SPDX-License-Identifier: MIT */
/*
 * The event log's sinks (src/evlog/evlog_sink.c): what is written where.
 * The log file (or stderr) opened from its path template, the output
 * buffer records are formatted into, the lines that are not events
 * ("start", "fork", "exit", "recovered"), and the counts of what the
 * sink took and what was dropped.  Each takes the log (struct
 * gh_ev_log, evlog_state.h) from its caller; what touches the sink or the
 * output buffer runs under the log's lock, but gh_ev_out_init() at
 * configure.
 */
#ifndef GH_EVLOG_SINK_H
#define GH_EVLOG_SINK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "evspool.h"

struct gh_ev_log;

/* A memory kind's name as a JSON string (the generated formatter's). */
struct gh_buf;
void gh_ev_put_kind(struct gh_buf *b, unsigned int kind);

/* Inside src/evlog only. */

/* Expand %p, %h, %%; -ENAMETOOLONG rather than a cut name. */
int gh_ev_expand(const char *tmpl, pid_t pid, char *dst, size_t cap);

/* What err means for a log, in words. */
void gh_ev_put_err(struct gh_buf *b, int err);

/*
 * Open a log for appending (never through a symlink, never blocking);
 * end_torn: end a torn last line first.  The fd or -errno.
 */
int gh_ev_open_sink(const char *path, int end_torn);

/* The output buffer, empty (configure). */
void gh_ev_out_init(struct gh_ev_log *ev);

/* Open the log (first use in this process) and write "start" [+ "fork"]. */
void gh_ev_open_locked(struct gh_ev_log *ev);

/* Format what one ring holds and write it; returns the records taken. */
uint64_t gh_ev_drain_ring(struct gh_ev_log *ev, struct gh_ring *g, pid_t pid);

/* The "recovered" line of a dead process's spool that held n records. */
void gh_ev_put_recovered(struct gh_ev_log *ev, const struct gh_spool_dead *d,
			 uint64_t n);

/* At exit: the "exit" line, then the log is closed. */
void gh_ev_close_locked(struct gh_ev_log *ev, uint64_t live,
			uint64_t live_bytes, uint64_t dropped);

/* fork child: the parent's log is not ours; a fresh sink, "fork" next. */
void gh_ev_sink_atfork_child(struct gh_ev_log *ev);

#endif
