// SPDX-License-Identifier: MIT
/*
 * The event log's rings and its writer thread: see evlog_ring.h.
 *
 * Each thread that records an event owns one ring: a single-producer
 * (the owning thread), single-consumer (whoever holds the log's lock: the
 * writer thread, a flush, fork or shutdown) queue of self-contained
 * records (struct gh_evrec: strings copied in, no pointers).  Rings are
 * mapped on a thread's first event, pushed onto a lock-free, push-only
 * list, and never unmapped: when a thread exits, a pthread key destructor
 * marks its ring orphaned; the consumer drains it and marks it free, and
 * the next new thread takes it instead of mapping another.
 *
 * Producer:  h = head (own), t = tail (acquire); full -> count a drop
 *            (GDRHOOK_TRACE_MODE=drop) or wait for the writer (block);
 *            copy into slot h; head = h + 1 (release).
 * Consumer:  h = head (acquire); format slots tail..h; write them
 *            (evlog_sink.c); only then tail = h (release).
 *
 * Crash safety: the rings live in the spool (evspool.c), a file-backed
 * shared mapping the page cache keeps when the process dies.  A clean
 * exit drains and removes it; what a dead process's rings still hold is
 * recovered by the next process that configures a log (evlog_recover.c).
 *
 * The writer thread sleeps on a futex word for at most GH_EV_PERIOD_MS;
 * a producer whose ring reaches a quarter full bumps the word and wakes
 * it.
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "base/base.h"
#include "evrec.h"
#include "evspool.h"
#include "evlog_state.h"
#include "evlog_sink.h"
#include "evlog_recover.h"
#include "evlog_ring.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23	/* Linux 5.14 */
#endif

/* The log: the one instance, handed down from the entry points below. */
static struct gh_ev_log gh_ev = {
	.lock = GH_MUTEX_INIT,
	.sink = { .fd = -1 },
};

static __thread struct gh_ring *gh_ev_tl_ring;
/* This thread's fork prepare took the log's lock (the child inherits it). */
static __thread int gh_ev_fork_held;
/* This thread's exec prepare took the log's lock (until the image is gone). */
static __thread int gh_ev_exec_held;

/* ---------------------------------------------------------------- */
/* configuration                                                     */

static void gh_ev_thread_exit(void *arg);

/* gh_spool_recover_all's callback: one dead process's spool. */
static void gh_ev_recover_one(void *ev, const struct gh_spool_dead *d)
{
	gh_ev_recover(ev, d);
}

int gh_evlog_configure(const char *path, uint64_t ring_bytes)
{
	struct gh_ev_log *ev = &gh_ev;
	struct gh_buf b;
	uint64_t recs;
	const char *p;
	int rc;

	if (!path || !*path)
		return -EINVAL;
	for (p = path; *p; p++) {
		if (*p != '%')
			continue;
		if (p[1] != 'p' && p[1] != 'h' && p[1] != '%')
			return -EINVAL;
		p++;
	}
	if (__atomic_load_n(&ev->state, __ATOMIC_ACQUIRE) != GH_EV_OFF)
		return -EBUSY;

	/* a relative path means relative to where the program started */
	gh_buf_init(&b, ev->path, sizeof(ev->path));
	if (strcmp(path, GH_EV_STDERR) && path[0] != '/') {
		char cwd[PATH_MAX];

		if (!getcwd(cwd, sizeof(cwd)))
			return -errno;
		gh_buf_puts(&b, cwd);
		if (strcmp(cwd, "/"))
			gh_buf_putc(&b, '/');
	}
	gh_buf_puts(&b, path);
	if (b.truncated || gh_buf_room(&b) == 0)
		return -ENAMETOOLONG;
	gh_buf_cstr(&b);

	if (!ring_bytes)
		ring_bytes = GH_EV_DEFAULT_RING;
	recs = ring_bytes / sizeof(struct gh_evrec);
	if (recs < GH_EV_MIN_RECS)
		recs = GH_EV_MIN_RECS;
	if (recs > GH_EV_MAX_RECS)
		recs = GH_EV_MAX_RECS;
	/* round down to a power of two */
	while (recs & (recs - 1))
		recs &= recs - 1;
	ev->asked_bytes = ring_bytes;

	if (!ev->key_ok) {
		rc = pthread_key_create(&ev->key, gh_ev_thread_exit);
		if (rc)
			return -rc;
		ev->key_ok = 1;
	}
	ev->is_stderr = !strcmp(path, GH_EV_STDERR);
	ev->ring_recs = (uint32_t)recs;
	ev->dead = 0;
	__atomic_store_n(&ev->written, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&ev->dropped, 0, __ATOMIC_RELAXED);
	ev->self = getpid();
	ev->start_t = gh_now_ns();
	ev->start_wall = gh_wall_ns();
	gh_ev_out_init(ev);
	gh_fd_prime();		/* not in the first logged call */
	gh_mutex_lock(&ev->lock);
	gh_spool_recover_all(gh_ev_recover_one, ev);
	gh_mutex_unlock(&ev->lock);
	__atomic_store_n(&ev->state, GH_EV_IDLE, __ATOMIC_RELEASE);
	return 0;
}

void gh_evlog_set_block(int block)
{
	gh_ev.block = block ? 1 : 0;
}

int gh_evlog_enabled(void)
{
	return __atomic_load_n(&gh_ev.state, __ATOMIC_RELAXED) != GH_EV_OFF;
}

/* ---------------------------------------------------------------- */
/* rings                                                             */

static void gh_ev_wake(struct gh_ev_log *ev)
{
	int saved = errno;

	__atomic_add_fetch(&ev->futex, 1, __ATOMIC_RELEASE);
	syscall(SYS_futex, &ev->futex, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
	errno = saved;
}

/*
 * Reserve and map a ring of recs records, in the spool when it can (else
 * anonymous memory, or NULL with spool_only), and put it on the list in
 * state st.  Reserving the spool's storage (posix_fallocate) is the slow
 * part: 6 ms for the default 12 MiB in /dev/shm, and the reservations of
 * threads starting at once queue on the spool file (8 threads: 50 ms).
 * So a thread's own ring has its first GH_RING_FIRST_RECS records
 * reserved here, the rest by the writer, which is woken for it, or by
 * the thread itself if it gets there first (gh_ring_grow).
 */
static struct gh_ring *gh_ring_new(struct gh_ev_log *ev, uint32_t recs,
				   uint32_t st, int spool_only)
{
	struct gh_ring *g, *head;
	size_t len = gh_ring_bytes(recs);
	uint32_t first = st == GH_RING_FREE || recs <= GH_RING_FIRST_RECS ?
			 recs : GH_RING_FIRST_RECS;
	uint64_t off = 0;
	int in_spool, err = 0;

	/* a spare is made by the writer: its page faults are taken there */
	g = gh_spool_map_ring(len, gh_ring_bytes(first), st == GH_RING_FREE,
			      &off, &err);
	in_spool = g != MAP_FAILED;
	if (g == MAP_FAILED && !spool_only) {
		/* no room: this thread's events go to private memory */
		if (err)
			gh_spool_note(err);
		g = mmap(NULL, len, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	}
	if (g == MAP_FAILED)
		return NULL;
	g->mask = recs - 1;
	g->wake_at = recs / 4 ? recs / 4 : 1;
	g->map_len = len;
	g->limit = in_spool && first < recs ? first : UINT64_MAX;
	g->spool_off = off;
	g->in_spool = (uint32_t)in_spool;
	g->populated = st == GH_RING_FREE;
	/* recoverers look at state: it is set last */
	__atomic_store_n(&g->state, st, __ATOMIC_RELEASE);
	head = __atomic_load_n(&ev->rings, __ATOMIC_RELAXED);
	do {
		g->next = head;
	} while (!__atomic_compare_exchange_n(&ev->rings, &head, g, 1,
					      __ATOMIC_RELEASE,
					      __ATOMIC_RELAXED));
	return g;
}

/* A free ring of recs records, now owned by the caller, or NULL. */
static struct gh_ring *gh_ring_take_free(struct gh_ev_log *ev, uint32_t recs)
{
	struct gh_ring *g;

	for (g = __atomic_load_n(&ev->rings, __ATOMIC_ACQUIRE); g;
	     g = g->next) {
		uint32_t want = GH_RING_FREE;

		/* a recycled ring must be of the configured size */
		if (gh_ring_mask(g) + 1 != recs)
			continue;
		if (__atomic_load_n(&g->state, __ATOMIC_RELAXED) ==
			    GH_RING_FREE &&
		    __atomic_compare_exchange_n(&g->state, &want,
						GH_RING_OWNED, 0,
						__ATOMIC_ACQUIRE,
						__ATOMIC_RELAXED))
			return g;
	}
	return NULL;
}

/* Raise g's limit to at least lim (the writer and the producer both may). */
static void gh_ring_raise_limit(struct gh_ring *g, uint64_t lim)
{
	uint64_t cur = __atomic_load_n(&g->limit, __ATOMIC_RELAXED);

	while (cur < lim &&
	       !__atomic_compare_exchange_n(&g->limit, &cur, lim, 1,
					    __ATOMIC_RELEASE,
					    __ATOMIC_RELAXED))
		;
}

/* Reserve g's records [from, to) in the spool: 0 or an errno. */
static int gh_ring_reserve(struct gh_ring *g, uint64_t from, uint64_t to)
{
	return gh_spool_reserve(g->spool_off + gh_ring_bytes((uint32_t)from),
				gh_ring_bytes((uint32_t)to) -
				gh_ring_bytes((uint32_t)from));
}

/*
 * Writer: reserve what a thread's ring has not reserved yet, all of it at
 * once.  On failure (no room left in the spool) nothing changes: the
 * producer finds out when it gets there (gh_ring_grow).
 */
static void gh_ring_reserve_rest(struct gh_ring *g)
{
	uint64_t lim = __atomic_load_n(&g->limit, __ATOMIC_ACQUIRE);
	uint64_t all = (uint64_t)gh_ring_mask(g) + 1;

	if (lim < all && !gh_ring_reserve(g, lim, all))
		gh_ring_raise_limit(g, UINT64_MAX);
}

/*
 * Producer: head reached what its ring has reserved (h == limit, a power
 * of two) before the writer reserved the rest: reserve up to twice as
 * much itself, a bounded wait that happens at most a few times per
 * thread.  If the spool has no room left, the ring goes on as a ring of
 * what it has (mask shrunk: every index so far is below the new size, so
 * the writer, reading the mask as it drains, finds the same slots).
 * Preserves errno.
 */
static __attribute__((noinline)) void gh_ring_grow(struct gh_ev_log *ev,
						   struct gh_ring *g,
						   uint64_t h)
{
	uint64_t lim = __atomic_load_n(&g->limit, __ATOMIC_ACQUIRE);
	uint64_t all = (uint64_t)gh_ring_mask(g) + 1, want;
	int saved = errno, err;

	if (h < lim)
		return;		/* the writer did it meanwhile */
	want = lim * 2 < all ? lim * 2 : all;
	err = gh_ring_reserve(g, lim, want);
	if (!err) {
		gh_ring_raise_limit(g, want == all ? UINT64_MAX : want);
	} else {
		gh_spool_note_smaller(err);
		__atomic_store_n(&g->wake_at, lim / 4 ? (uint32_t)lim / 4 : 1,
				 __ATOMIC_RELAXED);
		__atomic_store_n(&g->mask, (uint32_t)lim - 1,
				 __ATOMIC_RELEASE);
		gh_ring_raise_limit(g, UINT64_MAX);
	}
	gh_ev_wake(ev);
	errno = saved;
}

/*
 * The writer keeps one free ring in the spool ready, so that a thread's
 * first record takes it instead of reserving its own storage inside the
 * program's call, and finds its pages mapped (no fault per 4 KiB of
 * records on the hook path).  A thread that takes it wakes the writer, which makes
 * the next.  Not after a spool ring could not be reserved (no room).
 */
static void gh_ev_keep_spare(struct gh_ev_log *ev)
{
	struct gh_ring *g;
	uint32_t recs = ev->ring_recs;
	int have_spare = 0;

	for (g = __atomic_load_n(&ev->rings, __ATOMIC_ACQUIRE); g;
	     g = g->next) {
		/* the rest of a ring a thread made itself */
		if (g->in_spool)
			gh_ring_reserve_rest(g);
		/*
		 * A ring a thread made itself (no spare was ready) faults
		 * once per page as its records fill it: fault the rest in
		 * here, once (no-op before Linux 5.14), once all of it is
		 * reserved.  It writes nothing: safe beside the producer.
		 */
		if (g->in_spool && !__atomic_load_n(&g->populated,
						    __ATOMIC_RELAXED) &&
		    __atomic_load_n(&g->limit, __ATOMIC_ACQUIRE) ==
			    UINT64_MAX) {
			__atomic_store_n(&g->populated, 1, __ATOMIC_RELAXED);
			madvise(g, gh_ring_bytes(gh_ring_mask(g) + 1),
				MADV_POPULATE_WRITE);
		}
		if (gh_ring_mask(g) + 1 == recs &&
		    __atomic_load_n(&g->state, __ATOMIC_ACQUIRE) ==
			    GH_RING_FREE)
			have_spare = 1;
	}
	if (have_spare || ev->spare_off || ev->is_stderr ||
	    __atomic_load_n(&ev->state, __ATOMIC_ACQUIRE) != GH_EV_RUN ||
	    __atomic_load_n(&ev->stop, __ATOMIC_ACQUIRE))
		return;
	if (!gh_ring_new(ev, recs, GH_RING_FREE, 1))
		ev->spare_off = 1;
}

/* Take a free ring or map a new one.  Slow path: once per thread. */
static struct gh_ring *gh_ring_get(struct gh_ev_log *ev)
{
	struct gh_ring *g;
	uint32_t recs = ev->ring_recs;
	int saved = errno;

	g = gh_ring_take_free(ev, recs);
	if (!g) {
		g = gh_ring_new(ev, recs, GH_RING_OWNED, 0);
		if (!g) {
			errno = saved;
			return NULL;
		}
	}
	/* the writer makes the next spare, or reserves the rest of this */
	gh_ev_wake(ev);
	/*
	 * The key's destructor hands the ring back at thread exit.  glibc
	 * keeps the first 32 keys' values inline in the thread descriptor
	 * (no allocation); a later key may calloc once per thread.
	 */
	if (ev->key_ok)
		pthread_setspecific(ev->key, g);
	gh_ev_tl_ring = g;
	errno = saved;
	return g;
}

static void gh_ev_thread_exit(void *arg)
{
	struct gh_ring *g = arg;

	if (gh_ev_tl_ring == g)
		gh_ev_tl_ring = NULL;
	/* all our puts happen before this (release) */
	__atomic_store_n(&g->state, GH_RING_ORPHANED, __ATOMIC_RELEASE);
}

/* ---------------------------------------------------------------- */
/* writer thread                                                     */

static void gh_ev_drain_locked(struct gh_ev_log *ev);

static void *gh_ev_writer_main(void *arg)
{
	struct timespec ts = { 0, GH_EV_PERIOD_MS * 1000000L };
	struct gh_ev_log *ev = arg;

	for (;;) {
		uint32_t seq = __atomic_load_n(&ev->futex, __ATOMIC_ACQUIRE);
		int stop = __atomic_load_n(&ev->stop, __ATOMIC_ACQUIRE);

		gh_mutex_lock(&ev->lock);
		gh_ev_open_locked(ev);
		gh_ev_drain_locked(ev);
		gh_spool_report();
		gh_mutex_unlock(&ev->lock);
		if (stop)
			break;
		gh_ev_keep_spare(ev);
		syscall(SYS_futex, &ev->futex, FUTEX_WAIT_PRIVATE, seq, &ts,
			NULL, 0);
	}
	return NULL;
}

/* First event of the process: map the spool, start the writer (once). */
static void gh_ev_start(struct gh_ev_log *ev)
{
	char log[PATH_MAX];
	uint32_t want = GH_EV_IDLE;
	sigset_t all, old;
	int saved = errno, rc;

	if (!__atomic_compare_exchange_n(&ev->state, &want, GH_EV_STARTING,
					 0, __ATOMIC_ACQ_REL,
					 __ATOMIC_RELAXED))
		return;
	__atomic_store_n(&ev->stop, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&ev->first_tid, gh_gettid(), __ATOMIC_RELAXED);
	/* stderr's spool is recovered only by this pid's next image */
	if (ev->is_stderr ||
	    !gh_ev_expand(ev->path, getpid(), log, sizeof(log)))
		gh_spool_open(ev->is_stderr ? GH_EV_STDERR : log,
			      ev->ring_recs, ev->start_t, ev->start_wall);
	/* the writer inherits a full signal mask (SIGPIPE included) */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&ev->writer, NULL, gh_ev_writer_main, ev);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	__atomic_store_n(&ev->state, rc ? GH_EV_NOWRITER : GH_EV_RUN,
			 __ATOMIC_RELEASE);
	errno = saved;
}

/* ---------------------------------------------------------------- */
/* hook path                                                         */

/*
 * GDRHOOK_TRACE_MODE=block and the ring is full: wait for the writer.
 * Returns 0 when there is room, -1 when the event must be dropped (no
 * writer, sink abandoned, or this thread holds the consumer lock).
 */
static int gh_ev_wait_room(struct gh_ev_log *ev, struct gh_ring *g,
			   uint64_t h)
{
	struct timespec ts = { 0, 10 * 1000000L };

	for (;;) {
		uint32_t seq = __atomic_load_n(&ev->drained,
					       __ATOMIC_ACQUIRE);

		if (h - __atomic_load_n(&g->tail, __ATOMIC_ACQUIRE) <= g->mask)
			return 0;
		if (gh_ev_fork_held || gh_ev_exec_held ||
		    __atomic_load_n(&ev->state, __ATOMIC_ACQUIRE) !=
			    GH_EV_RUN ||
		    __atomic_load_n(&ev->dead, __ATOMIC_RELAXED))
			return -1;
		gh_ev_wake(ev);
		syscall(SYS_futex, &ev->drained, FUTEX_WAIT_PRIVATE, seq,
			&ts, NULL, 0);
	}
}

void gh_evlog_put(const struct gh_evrec *r)
{
	struct gh_ev_log *ev = &gh_ev;
	uint32_t s = __atomic_load_n(&ev->state, __ATOMIC_ACQUIRE);
	struct gh_ring *g;
	struct gh_evrec *slot;
	uint64_t h, t;
	int saved;

	if (__builtin_expect(s != GH_EV_RUN, 0)) {
		if (s == GH_EV_OFF)
			return;
		if (s == GH_EV_IDLE)
			gh_ev_start(ev);
		/* another thread is mapping the spool: its rings come next */
		for (int spins = 0; spins < 100000 &&
		     __atomic_load_n(&ev->state, __ATOMIC_ACQUIRE) ==
			     GH_EV_STARTING; spins++)
			sched_yield();
	}
	if (__builtin_expect(__atomic_load_n(&ev->dead, __ATOMIC_RELAXED),
			     0)) {
		gh_ev_drop(ev, 1);
		return;
	}
	g = gh_ev_tl_ring;
	if (__builtin_expect(!g, 0)) {
		g = gh_ring_get(ev);
		if (!g) {
			gh_ev_drop(ev, 1);
			return;
		}
	}
	h = g->head;	/* only we write it */
	t = __atomic_load_n(&g->tail, __ATOMIC_ACQUIRE);
	if (__builtin_expect(h >= __atomic_load_n(&g->limit, __ATOMIC_ACQUIRE),
			     0))
		gh_ring_grow(ev, g, h);
	if (__builtin_expect(h - t > g->mask, 0)) {
		saved = errno;
		if (!ev->block || gh_ev_wait_room(ev, g, h)) {
			errno = saved;
			gh_ev_drop(ev, 1);
			return;
		}
		errno = saved;
		t = __atomic_load_n(&g->tail, __ATOMIC_ACQUIRE);
	}
	slot = &g->rec[h & g->mask];
	*slot = *r;
	if (!slot->tid)
		slot->tid = gh_gettid();
	if (!slot->t_ns)
		slot->t_ns = gh_now_ns();
	__atomic_store_n(&g->head, h + 1, __ATOMIC_RELEASE);
	/* fill level rises by one per put, so it meets wake_at exactly */
	if (__builtin_expect(h + 1 - t == g->wake_at, 0))
		gh_ev_wake(ev);
}

/* Consume every ring once; recycle orphaned rings once empty. */
static void gh_ev_drain_locked(struct gh_ev_log *ev)
{
	struct gh_ring *g;
	pid_t pid = getpid();
	int saved = errno;

	GH_ASSERT_LOCKED(&ev->lock);
	for (g = __atomic_load_n(&ev->rings, __ATOMIC_ACQUIRE); g;
	     g = g->next) {
		uint32_t st = __atomic_load_n(&g->state, __ATOMIC_ACQUIRE);

		if (st == GH_RING_FREE)
			continue;
		gh_ev_drain_ring(ev, g, pid);
		/* orphaned before we read head: head was final */
		if (st == GH_RING_ORPHANED)
			__atomic_store_n(&g->state, GH_RING_FREE,
					 __ATOMIC_RELEASE);
	}
	__atomic_add_fetch(&ev->drained, 1, __ATOMIC_RELEASE);
	if (ev->block)
		syscall(SYS_futex, &ev->drained, FUTEX_WAKE_PRIVATE, INT_MAX,
			NULL, NULL, 0);
	errno = saved;
}

/* ---------------------------------------------------------------- */
/* flush, shutdown, fork                                             */

/* Has this process recorded any event (so that the log exists)? */
static int gh_ev_touched(const struct gh_ev_log *ev)
{
	uint32_t s = __atomic_load_n(&ev->state, __ATOMIC_ACQUIRE);

	return s >= GH_EV_STARTING;
}

void gh_evlog_flush(void)
{
	struct gh_ev_log *ev = &gh_ev;
	int saved = errno;

	if (!gh_ev_touched(ev))
		return;
	gh_mutex_lock(&ev->lock);
	gh_ev_open_locked(ev);
	gh_ev_drain_locked(ev);
	gh_spool_report();
	gh_mutex_unlock(&ev->lock);
	errno = saved;
}

/*
 * Before exec: drain every ring and keep the log's lock until the image is
 * replaced, so that the writer is never cut off mid-line; what threads
 * record after the drain stays in the spool for the next image.  The
 * wait is bounded (a signal handler may exec while its thread holds the
 * lock): past it, the spool alone keeps the records.
 */
int gh_evlog_exec_prepare(void)
{
	struct gh_ev_log *ev = &gh_ev;
	struct timespec until;
	int saved = errno;

	/* a vfork child shares our memory: the lock is the parent's */
	if (!gh_ev_touched(ev) || gh_ev_exec_held || getpid() != ev->self)
		return 0;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += GH_EV_STALL_MS / 1000 + 1;
	if (gh_mutex_timedlock(&ev->lock, &until)) {
		errno = saved;
		return 0;
	}
	gh_ev_exec_held = 1;
	gh_ev_open_locked(ev);
	gh_ev_drain_locked(ev);
	errno = saved;
	return 1;
}

void gh_evlog_exec_failed(void)
{
	int saved = errno;

	if (!gh_ev_exec_held)
		return;
	gh_ev_exec_held = 0;
	gh_mutex_unlock(&gh_ev.lock);
	errno = saved;
}

void gh_evlog_shutdown(uint64_t live, uint64_t live_bytes)
{
	struct gh_ev_log *ev = &gh_ev;
	uint32_t s = __atomic_load_n(&ev->state, __ATOMIC_ACQUIRE);
	uint64_t dropped;
	int saved = errno, spins = 0, dead_before;

	/* another thread may be inside pthread_create for the writer */
	while (s == GH_EV_STARTING && spins++ < 10000) {
		sched_yield();
		s = __atomic_load_n(&ev->state, __ATOMIC_ACQUIRE);
	}
	if (s == GH_EV_OFF)
		return;
	if (s == GH_EV_RUN) {
		__atomic_store_n(&ev->stop, 1, __ATOMIC_RELEASE);
		gh_ev_wake(ev);
		pthread_join(ev->writer, NULL);
	}
	/* later puts are ignored */
	__atomic_store_n(&ev->state, GH_EV_OFF, __ATOMIC_RELEASE);
	if (s == GH_EV_IDLE) {
		errno = saved;
		return;		/* no event: leave no trace */
	}

	gh_mutex_lock(&ev->lock);
	gh_ev_open_locked(ev);
	gh_ev_drain_locked(ev);
	dead_before = ev->dead;
	dropped = gh_ev_dropped(ev);
	gh_ev_close_locked(ev, live, live_bytes, dropped);
	gh_spool_report();
	/* every record went out or was counted: the spool has no more use */
	gh_spool_remove();
	gh_mutex_unlock(&ev->lock);
	/* an abandoned sink already said so, with its count */
	if (dropped && !dead_before)
		gh_warn("event log: %llu events dropped (rings full); raise "
			"GDRHOOK_TRACE_BUFFER or set GDRHOOK_TRACE_MODE=block",
			(unsigned long long)dropped);
	errno = saved;
}

/*
 * The handlers may be registered twice (a program linked with the core
 * archive that registers its own, beside init.c's): the second prepare
 * finds the lock ours and does nothing; the first parent/child handler
 * lets go, the second finds nothing held.
 */
void gh_evlog_atfork_prepare(void)
{
	struct gh_ev_log *ev = &gh_ev;
	int saved = errno;

	if (!gh_evlog_enabled() || gh_ev_fork_held)
		return;
	gh_mutex_lock(&ev->lock);
	gh_ev_fork_held = 1;
	ev->parent = getpid();
	if (gh_ev_touched(ev)) {
		gh_ev_open_locked(ev);
		gh_ev_drain_locked(ev);
	}
	errno = saved;
}

void gh_evlog_atfork_parent(void)
{
	if (!gh_ev_fork_held)
		return;
	gh_ev_fork_held = 0;
	gh_mutex_unlock(&gh_ev.lock);
}

void gh_evlog_atfork_child(void)
{
	struct gh_ev_log *ev = &gh_ev;
	struct gh_ring *g, *next, *keep = NULL;
	uint32_t s;

	gh_clock_atfork_child();
	if (!gh_ev_fork_held)
		return;
	/*
	 * Only this thread exists now.  Whatever the rings still hold was
	 * recorded by the parent (and is the parent's to write): discard it.
	 * Rings in the parent's spool are shared with the parent: unmap
	 * them; the child maps its own spool at its first event.  Private
	 * rings of the other threads are free for reuse.
	 */
	for (g = __atomic_load_n(&ev->rings, __ATOMIC_ACQUIRE); g;
	     g = next) {
		next = g->next;
		if (g->in_spool) {
			if (g == gh_ev_tl_ring)
				gh_ev_tl_ring = NULL;
			munmap(g, g->map_len);
			continue;
		}
		g->tail = g->head;
		g->state = g == gh_ev_tl_ring ? GH_RING_OWNED : GH_RING_FREE;
		g->next = keep;
		keep = g;
	}
	__atomic_store_n(&ev->rings, keep, __ATOMIC_RELEASE);
	if (ev->key_ok)
		pthread_setspecific(ev->key, gh_ev_tl_ring);
	gh_spool_atfork_child();
	gh_ev_sink_atfork_child(ev);
	ev->self = getpid();
	ev->start_t = gh_now_ns();
	ev->start_wall = gh_wall_ns();
	__atomic_store_n(&ev->stop, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&ev->written, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&ev->dropped, 0, __ATOMIC_RELAXED);
	s = __atomic_load_n(&ev->state, __ATOMIC_RELAXED);
	if (s != GH_EV_OFF)
		__atomic_store_n(&ev->state, GH_EV_IDLE, __ATOMIC_RELEASE);
	gh_ev_fork_held = 0;
	gh_mutex_unlock(&ev->lock);
}

uint64_t gh_evlog_written(void)
{
	return gh_ev_written(&gh_ev);
}

uint64_t gh_evlog_dropped(void)
{
	return gh_ev_dropped(&gh_ev);
}

struct gh_ring *gh_ev_rings(void)
{
	return __atomic_load_n(&gh_ev.rings, __ATOMIC_ACQUIRE);
}
