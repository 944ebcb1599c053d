// SPDX-License-Identifier: MIT
/*
 * Recovery of dead processes' spools: see evlog_recover.h.
 *
 * The rings live in the spool (evspool.c), a file-backed shared mapping
 * the page cache keeps when the process dies.  The next process that
 * configures a log (or the next image after exec: same pid) appends what
 * a dead process's rings still hold to the log named in its spool, after
 * a "recovered" record.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "evspool.h"
#include "evlog_state.h"
#include "evlog_sink.h"
#include "evlog_recover.h"

/* What a dead process's spool still held, for a report: records. */
static uint64_t gh_ev_spool_count(const struct gh_spool_dead *d)
{
	uint64_t n = 0;

	for (uint32_t i = 0; i < d->nrings; i++) {
		struct gh_ring *g = gh_spool_dead_ring(d, i);

		if (!g)
			continue;
		n += g->head - g->tail;
		gh_spool_unmap_ring(d, g);
	}
	return n;
}

/* A dead process logged to its own stderr: say what it lost (info). */
static void gh_ev_recover_lost(const struct gh_spool_dead *d)
{
	uint64_t n;

	if (gh_log_level < GH_LOG_INFO)
		return;		/* nobody reads the count: map no ring */
	n = gh_ev_spool_count(d);
	if (n)
		gh_info("event log: %llu events of dead process %d were for "
			"its stderr; not recovered",
			(unsigned long long)n, (int)d->pid);
}

/*
 * Append what a dead process's rings still hold to its log, after a
 * "recovered" record.  Under ev's lock with ev->sink.fd unused (-1 or -2):
 * borrows the output buffer and fd slot.
 */
void gh_ev_recover(struct gh_ev_log *ev, const struct gh_spool_dead *d)
{
	struct gh_ownfd saved_sink = ev->sink;
	const char *saved_path = ev->sink_path;
	uint64_t n = 0;
	int lfd, saved_dead = ev->dead;
	uint64_t saved_written = gh_ev_written(ev);
	uint64_t saved_dropped = gh_ev_dropped(ev);

	GH_ASSERT_LOCKED(&ev->lock);
	if (!strcmp(d->log, GH_EV_STDERR)) {
		/*
		 * A former image of this process shares our stderr (the exec
		 * drained its rings with the writer held: no torn line); a
		 * dead process's stderr is not ours to write into.
		 */
		if (d->pid != getpid()) {
			gh_ev_recover_lost(d);
			return;
		}
		lfd = dup(STDERR_FILENO);
		if (lfd < 0)
			lfd = -errno;
	} else {
		if (d->pid == getpid())
			ev->after_exec = 1;	/* our former image: it may have torn */
		lfd = gh_ev_open_sink(d->log, 1);
	}
	if (lfd >= 0)
		lfd = gh_fd_own(lfd, &ev->sink);
	if (lfd < 0) {
		char text[256];
		struct gh_buf tb;

		gh_buf_init(&tb, text, sizeof(text));
		gh_ev_put_err(&tb, -lfd);
		gh_buf_cstr(&tb);
		gh_warn("event log: cannot recover %s into %s: %s", d->spool,
			d->log, text);
		ev->sink = saved_sink;
		return;
	}
	ev->sink_path = d->log;
	ev->dead = 0;
	gh_buf_reset(&ev->out);
	ev->out_recs = 0;
	/* the "recovered" record goes first, with the count */
	n = gh_ev_spool_count(d);
	gh_ev_put_recovered(ev, d, n);
	for (uint32_t i = 0; i < d->nrings && ev->sink.fd >= 0; i++) {
		struct gh_ring *g = gh_spool_dead_ring(d, i);

		if (!g)
			continue;
		gh_ev_drain_ring(ev, g, d->pid);
		gh_spool_unmap_ring(d, g);
	}
	if (ev->sink.fd >= 0)
		gh_fd_close(&ev->sink);
	ev->sink = saved_sink;
	ev->sink_path = saved_path;
	ev->dead = saved_dead;
	/* the recovered events are not this process's */
	__atomic_store_n(&ev->written, saved_written, __ATOMIC_RELAXED);
	__atomic_store_n(&ev->dropped, saved_dropped, __ATOMIC_RELAXED);
	gh_info("event log: recovered %llu events of dead process %d into %s",
		(unsigned long long)n, (int)d->pid, d->log);
}
