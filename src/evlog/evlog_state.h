/* SPDX-License-Identifier: MIT */
/*
 * The event log's state (gh_ev, defined in evlog_ring.c), shared by the
 * files of src/evlog: the rings and the writer (evlog_ring.c), the sinks
 * and their meta lines (evlog_sink.c), recovery (evlog_recover.c).  The
 * hook path reads state, dead and block with one load each; everything
 * of the sink (fd, paths, output buffer) is used under gh_ev.lock only.
 * Not for other folders.
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

/* gh_ev.state: what the hook path sees with one load. */
enum gh_ev_state {
	GH_EV_OFF,		/* not configured, or shut down */
	GH_EV_IDLE,		/* configured, no event yet */
	GH_EV_STARTING,		/* first event seen, writer being started */
	GH_EV_RUN,		/* writer running */
	GH_EV_NOWRITER,		/* pthread_create failed: drain on flush */
};

struct gh_ev_log {
	uint32_t state;		/* enum gh_ev_state, atomic */
	uint32_t futex;		/* writer's wake word, atomic */
	uint32_t drained;	/* bumped after each drain: blocked puts */
	uint32_t stop;		/* writer: exit after the next drain */
	uint32_t ring_recs;	/* records per ring (power of two) */
	uint64_t asked_bytes;	/* GDRHOOK_TRACE_BUFFER, for a message */
	uint32_t block;		/* GDRHOOK_TRACE_MODE=block */
	uint32_t dead;		/* sink abandoned: events are dropped */
	struct gh_ring *rings;	/* list head, atomic */
	uint64_t dropped;	/* atomic */
	uint64_t written;	/* atomic (written under lock, read anywhere) */
	uint64_t start_t;	/* CLOCK_MONOTONIC at init (or fork) */
	uint64_t start_wall;

	pthread_mutex_t lock;	/* consumers, file, output buffer */
	pthread_key_t key;
	int key_ok;
	pthread_t writer;
	/* sink.fd -1: not open yet; -2: open failed or abandoned */
	struct gh_ownfd sink;
	const char *sink_path;	/* what sink is opened again from */
	int is_stderr;
	int is_fork_child;	/* write a "fork" record after "start" */
	int after_exec;		/* a former image of ours died writing */
	pid_t parent;		/* pid that forked us / is forking */
	pid_t self;		/* our pid (a vfork child's differs) */
	int32_t first_tid;	/* thread of the first event: start record */
	uint64_t out_recs;	/* event lines in the output buffer */
	char path[PATH_MAX];	/* template, absolute, "%p"/"%h" unexpanded */
	char opened[PATH_MAX];	/* expanded path */
	struct gh_buf out;
};

extern struct gh_ev_log gh_ev;

/* Count n events as dropped, here and in the spool's header. */
static inline void gh_ev_drop(uint64_t n)
{
	__atomic_add_fetch(&gh_ev.dropped, n, __ATOMIC_RELAXED);
	/* the spool counts too: a killed process's recoverer reports it */
	gh_spool_count_drop(n);
}

#endif
