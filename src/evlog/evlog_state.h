/* SPDX-License-Identifier: MIT */
/*
 * The event log's state, one object (struct gh_ev_log): its one instance
 * is evlog_ring.c's, whose entry points (evlog_ring.h) hand it down as an
 * argument to the rings and the writer there, to the sinks and their
 * meta lines (evlog_sink.c) and to recovery (evlog_recover.c).  Not for
 * other folders.
 *
 * Its rules, field by field below:
 *   atomic  read and written with __atomic builtins, by any thread; the
 *           hook path reads state, dead and block with one load each;
 *   lock    read and written with lock held (GH_ASSERT_LOCKED in debug
 *           builds): the sink (fd, paths, output buffer) and what the
 *           meta lines say;
 *   config  written at configure (before any event) and by a fork child
 *           while it is the only thread; read anywhere after;
 *   writer  the writer thread's own.
 * What is per thread (the thread's ring, whether its fork or exec
 * handler holds lock) is thread-local in evlog_ring.c.
 */
#ifndef GH_EVLOG_STATE_H
#define GH_EVLOG_STATE_H

#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/base.h"
#include "evrec.h"
#include "evspool.h"

#define GH_EV_DEFAULT_RING	(12u << 20)	/* 65536 records per thread */
#define GH_EV_MIN_RECS		8u
/* reserved by a thread making its own ring; power of two (192 KiB) */
#define GH_RING_FIRST_RECS	1024u
#define GH_EV_MAX_RECS		(1u << 24)
#define GH_EV_PERIOD_MS		50
#define GH_EV_STALL_MS		2000	/* a sink that takes nothing: dead */
#define GH_EV_OUTBUF		(256u << 10)
#define GH_EV_LINE_MAX		4096	/* longest line we ever format */
#define GH_EV_STR_MAX		256	/* input bytes of one string field */
/* GDRHOOK_TRACE's word for the process's stderr; also its spool's log name */
#define GH_EV_STDERR		"stderr"

/* gh_ev_log.state: what the hook path sees with one load. */
enum gh_ev_state {
	GH_EV_OFF,		/* not configured, or shut down */
	GH_EV_IDLE,		/* configured, no event yet */
	GH_EV_STARTING,		/* first event seen, writer being started */
	GH_EV_RUN,		/* writer running */
	GH_EV_NOWRITER,		/* pthread_create failed: drain on flush */
};

struct gh_ev_log {
	uint32_t state;		/* atomic: enum gh_ev_state */
	uint32_t futex;		/* atomic: the writer's wake word */
	uint32_t drained;	/* atomic: bumped after each drain (blocked puts) */
	uint32_t stop;		/* atomic: writer, exit after the next drain */
	uint32_t ring_recs;	/* config: records per ring (power of two) */
	uint64_t asked_bytes;	/* config: GDRHOOK_TRACE_BUFFER, for a message */
	uint32_t block;		/* config: GDRHOOK_TRACE_MODE=block */
	uint32_t dead;		/* atomic, set under lock: sink abandoned */
	struct gh_ring *rings;	/* atomic: list head */
	uint64_t dropped;	/* atomic */
	uint64_t written;	/* atomic (written under lock, read anywhere) */
	uint64_t start_t;	/* config: CLOCK_MONOTONIC at init (or fork) */
	uint64_t start_wall;	/* config */

	struct gh_mutex lock;	/* consumers, the sink, the output buffer */
	pthread_key_t key;	/* config: hands a ring back at thread exit */
	int key_ok;		/* config */
	pthread_t writer;	/* set by the thread that starts the log */
	int spare_off;		/* writer: no spare ring any more (no room) */
	/* lock: sink.fd -1: not open yet; -2: open failed or abandoned */
	struct gh_ownfd sink;
	const char *sink_path;	/* lock: what sink is opened again from */
	int is_stderr;		/* config */
	int is_fork_child;	/* lock: write a "fork" record after "start" */
	int after_exec;		/* lock: a former image of ours died writing */
	pid_t parent;		/* lock: pid that forked us / is forking */
	pid_t self;		/* config: our pid (a vfork child's differs) */
	int32_t first_tid;	/* atomic: thread of the first event (start) */
	uint64_t out_recs;	/* lock: event lines in the output buffer */
	char path[PATH_MAX];	/* config: template, absolute, unexpanded */
	char opened[PATH_MAX];	/* lock: expanded path */
	struct gh_buf out;	/* lock: over outbuf */
	char outbuf[GH_EV_OUTBUF];
};

/* Count n events as dropped, here and in the spool's header. */
static inline void gh_ev_drop(struct gh_ev_log *ev, uint64_t n)
{
	__atomic_add_fetch(&ev->dropped, n, __ATOMIC_RELAXED);
	/* the spool counts too: a killed process's recoverer reports it */
	gh_spool_count_drop(n);
}

/* Events the sink took, and events dropped, in this process. */
static inline uint64_t gh_ev_written(const struct gh_ev_log *ev)
{
	return __atomic_load_n(&ev->written, __ATOMIC_RELAXED);
}

static inline uint64_t gh_ev_dropped(const struct gh_ev_log *ev)
{
	return __atomic_load_n(&ev->dropped, __ATOMIC_RELAXED);
}

/* White box (tests/unit/test_evlog.c): the head of the ring list. */
struct gh_ring *gh_ev_rings(void);

#endif
