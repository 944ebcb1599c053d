// SPDX-License-Identifier: MIT
/*
 * The event log (GDRHOOK_LOG): see evlog.h.
 *
 * Each thread that records an event owns one ring: a single-producer
 * (the owning thread), single-consumer (whoever holds gh_ev.lock: the
 * writer thread, a flush, fork or shutdown) queue of self-contained
 * records (struct gh_evrec: strings copied in, no pointers).  Rings are
 * mapped on a thread's first event, pushed onto a lock-free, push-only
 * list, and never unmapped: when a thread exits, a pthread key destructor
 * marks its ring orphaned; the consumer drains it and marks it free, and
 * the next new thread takes it instead of mapping another.
 *
 * Producer:  h = head (own), t = tail (acquire); full -> count a drop
 *            (GDRHOOK_LOG_MODE=drop) or wait for the writer (block);
 *            copy into slot h; head = h + 1 (release).
 * Consumer:  h = head (acquire); format slots tail..h; write them;
 *            only then tail = h (release).
 *
 * Crash safety: the rings live in the spool (evspool.c), a file-backed
 * shared mapping the page cache keeps when the process dies.  A clean
 * exit drains and removes it.  The next process that configures a log
 * (or the next image after exec: same pid) appends what a dead process's
 * rings still hold to the log named in its spool, after a "recovered"
 * record (gh_ev_recover below).
 *
 * The writer thread sleeps on a futex word for at most GH_EV_PERIOD_MS;
 * a producer whose ring reaches a quarter full bumps the word and wakes
 * it.  The sink is opened non-blocking and written with SIGPIPE held
 * off; a sink that cannot be opened or stops accepting is abandoned with
 * one message, and every event it did not take is counted as dropped.
 *
 * The log's fd is the shim's, not a number: it sits high (gh_fd_own) and
 * is checked by dev/ino before each write and close.  A program that
 * closed it and opened its own file on that number, or dup2()ed over it,
 * never gets our records; the log is opened again by its path.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "gdrhook.h"
#include "evlog.h"
#include "evspool.h"

#define GH_EV_DEFAULT_RING	(12u << 20)	/* 65536 records per thread */
#define GH_EV_MIN_RECS		8u
#define GH_EV_MAX_RECS		(1u << 24)
#define GH_EV_PERIOD_MS		50
#define GH_EV_STALL_MS		2000	/* a sink that takes nothing: dead */
#define GH_EV_OUTBUF		(256u << 10)
#define GH_EV_LINE_MAX		4096	/* longest line we ever format */
#define GH_EV_STR_MAX		256	/* input bytes of one string field */
/* GDRHOOK_LOG's word for the process's stderr; also its spool's log name */
#define GH_EV_STDERR		"stderr"

/* two escaped strings (6 bytes per input byte at worst) + the rest */
_Static_assert(2 * (6 * GH_EV_STR_MAX + 2) + 512 <= GH_EV_LINE_MAX,
	       "an event line may not fit GH_EV_LINE_MAX");
_Static_assert(6 * PATH_MAX + 512 <= GH_EV_OUTBUF, "start line too long");

/* gh_ev.state: what the hook path sees with one load. */
enum gh_ev_state {
	GH_EV_OFF,		/* not configured, or shut down */
	GH_EV_IDLE,		/* configured, no event yet */
	GH_EV_STARTING,		/* first event seen, writer being started */
	GH_EV_RUN,		/* writer running */
	GH_EV_NOWRITER,		/* pthread_create failed: drain on flush */
};

static struct {
	uint32_t state;		/* enum gh_ev_state, atomic */
	uint32_t futex;		/* writer's wake word, atomic */
	uint32_t drained;	/* bumped after each drain: blocked puts */
	uint32_t stop;		/* writer: exit after the next drain */
	uint32_t ring_recs;	/* records per ring (power of two) */
	uint64_t asked_bytes;	/* GDRHOOK_LOG_BUFFER, for a message */
	uint32_t block;		/* GDRHOOK_LOG_MODE=block */
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
} gh_ev = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.sink = { .fd = -1 },
};

static char gh_ev_outbuf[GH_EV_OUTBUF];

static __thread struct gh_ring *gh_ev_tl_ring
	__attribute__((tls_model("initial-exec")));
/* This thread's fork prepare took gh_ev.lock (the child inherits it). */
static __thread int gh_ev_fork_held
	__attribute__((tls_model("initial-exec")));
/* This thread's exec prepare took gh_ev.lock (until the image is gone). */
static __thread int gh_ev_exec_held
	__attribute__((tls_model("initial-exec")));

static const char *const gh_kind_names[GDRHOOK_KIND_COUNT_] = {
	[GDRHOOK_KIND_NONE] = "none",
	[GDRHOOK_KIND_DEVICE] = "device",
	[GDRHOOK_KIND_MANAGED] = "managed",
	[GDRHOOK_KIND_HOST] = "host",
	[GDRHOOK_KIND_HOST_REGISTERED] = "host_registered",
	[GDRHOOK_KIND_POOL] = "pool",
	[GDRHOOK_KIND_VMM] = "vmm",
	[GDRHOOK_KIND_IPC] = "ipc",
	[GDRHOOK_KIND_GRAPH] = "graph",
	[GDRHOOK_KIND_GLOBAL] = "global",
	[GDRHOOK_KIND_EXTERNAL] = "external",
};

void gh_ev_put_kind(struct gh_buf *b, unsigned int kind)
{
	if (kind < GDRHOOK_KIND_COUNT_)
		gh_buf_json_str(b, gh_kind_names[kind], GH_EV_STR_MAX);
	else
		gh_buf_u64(b, kind);	/* unknown: keep the number */
}

/* ---------------------------------------------------------------- */
/* configuration                                                     */

static void gh_ev_thread_exit(void *arg);
static void gh_ev_recover(const struct gh_spool_dead *d);

int gh_evlog_configure(const char *path, uint64_t ring_bytes)
{
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
	if (__atomic_load_n(&gh_ev.state, __ATOMIC_ACQUIRE) != GH_EV_OFF)
		return -EBUSY;

	/* a relative path means relative to where the program started */
	gh_buf_init(&b, gh_ev.path, sizeof(gh_ev.path));
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
	gh_ev.asked_bytes = ring_bytes;

	if (!gh_ev.key_ok) {
		rc = pthread_key_create(&gh_ev.key, gh_ev_thread_exit);
		if (rc)
			return -rc;
		gh_ev.key_ok = 1;
	}
	gh_ev.is_stderr = !strcmp(path, GH_EV_STDERR);
	gh_ev.ring_recs = (uint32_t)recs;
	gh_ev.dead = 0;
	__atomic_store_n(&gh_ev.written, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&gh_ev.dropped, 0, __ATOMIC_RELAXED);
	gh_ev.self = getpid();
	gh_ev.start_t = gh_now_ns();
	gh_ev.start_wall = gh_wall_ns();
	gh_buf_init(&gh_ev.out, gh_ev_outbuf, sizeof(gh_ev_outbuf));
	gh_ev.out_recs = 0;
	pthread_mutex_lock(&gh_ev.lock);
	gh_spool_recover_all(gh_ev_recover);
	pthread_mutex_unlock(&gh_ev.lock);
	__atomic_store_n(&gh_ev.state, GH_EV_IDLE, __ATOMIC_RELEASE);
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

uint64_t gh_evlog_written(void)
{
	return __atomic_load_n(&gh_ev.written, __ATOMIC_RELAXED);
}

uint64_t gh_evlog_dropped(void)
{
	return __atomic_load_n(&gh_ev.dropped, __ATOMIC_RELAXED);
}

static void gh_ev_drop(uint64_t n)
{
	__atomic_add_fetch(&gh_ev.dropped, n, __ATOMIC_RELAXED);
	/* the spool counts too: a killed process's recoverer reports it */
	gh_spool_count_drop(n);
}

/* ---------------------------------------------------------------- */
/* path expansion                                                    */

/* Expand %p, %h, %%; -ENAMETOOLONG rather than a cut name. */
static int gh_ev_expand(const char *tmpl, pid_t pid, char *dst, size_t cap)
{
	struct gh_buf b;
	const char *p;

	gh_buf_init(&b, dst, cap);
	for (p = tmpl; *p; p++) {
		if (p[0] == '%' && p[1] == 'p') {
			gh_buf_i64(&b, pid);
			p++;
		} else if (p[0] == '%' && p[1] == 'h') {
			struct utsname u;

			if (!uname(&u))
				gh_buf_puts(&b, u.nodename);
			p++;
		} else if (p[0] == '%' && p[1] == '%') {
			gh_buf_putc(&b, '%');
			p++;
		} else {
			gh_buf_putc(&b, *p);
		}
	}
	if (b.truncated || gh_buf_room(&b) == 0) {
		dst[0] = '\0';
		return -ENAMETOOLONG;
	}
	gh_buf_cstr(&b);
	return 0;
}

/* ---------------------------------------------------------------- */
/* rings                                                             */

static void gh_ev_wake(void)
{
	int saved = errno;

	__atomic_add_fetch(&gh_ev.futex, 1, __ATOMIC_RELEASE);
	syscall(SYS_futex, &gh_ev.futex, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
	errno = saved;
}

/* Take a free ring or map a new one.  Slow path: once per thread. */
static struct gh_ring *gh_ring_get(void)
{
	struct gh_ring *g, *head;
	uint32_t recs = gh_ev.ring_recs;
	size_t len = gh_ring_bytes(recs);
	int saved = errno, in_spool = 0;

	for (g = __atomic_load_n(&gh_ev.rings, __ATOMIC_ACQUIRE); g;
	     g = g->next) {
		uint32_t want = GH_RING_FREE;

		/* a recycled ring must be of the configured size */
		if (g->mask + 1 != recs)
			continue;
		if (__atomic_load_n(&g->state, __ATOMIC_RELAXED) ==
			    GH_RING_FREE &&
		    __atomic_compare_exchange_n(&g->state, &want,
						GH_RING_OWNED, 0,
						__ATOMIC_ACQUIRE,
						__ATOMIC_RELAXED))
			goto got;
	}

	g = gh_spool_map_ring(len);
	in_spool = g != MAP_FAILED;
	if (g == MAP_FAILED)
		g = mmap(NULL, len, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (g == MAP_FAILED) {
		errno = saved;
		return NULL;
	}
	g->mask = recs - 1;
	g->wake_at = recs / 4 ? recs / 4 : 1;
	g->map_len = len;
	g->in_spool = (uint32_t)in_spool;
	/* recoverers look at state: it is set last */
	__atomic_store_n(&g->state, GH_RING_OWNED, __ATOMIC_RELEASE);
	head = __atomic_load_n(&gh_ev.rings, __ATOMIC_RELAXED);
	do {
		g->next = head;
	} while (!__atomic_compare_exchange_n(&gh_ev.rings, &head, g, 1,
					      __ATOMIC_RELEASE,
					      __ATOMIC_RELAXED));
got:
	/*
	 * The key's destructor hands the ring back at thread exit.  glibc
	 * keeps the first 32 keys' values inline in the thread descriptor
	 * (no allocation); a later key may calloc once per thread.
	 */
	if (gh_ev.key_ok)
		pthread_setspecific(gh_ev.key, g);
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

static void gh_ev_drain_locked(void);
static void gh_ev_open_locked(void);

static void *gh_ev_writer_main(void *arg)
{
	struct timespec ts = { 0, GH_EV_PERIOD_MS * 1000000L };

	(void)arg;
	for (;;) {
		uint32_t seq = __atomic_load_n(&gh_ev.futex, __ATOMIC_ACQUIRE);
		int stop = __atomic_load_n(&gh_ev.stop, __ATOMIC_ACQUIRE);

		pthread_mutex_lock(&gh_ev.lock);
		gh_ev_open_locked();
		gh_ev_drain_locked();
		gh_spool_report();
		pthread_mutex_unlock(&gh_ev.lock);
		if (stop)
			break;
		syscall(SYS_futex, &gh_ev.futex, FUTEX_WAIT_PRIVATE, seq, &ts,
			NULL, 0);
	}
	return NULL;
}

/* First event of the process: map the spool, start the writer (once). */
static void gh_ev_start(void)
{
	char log[PATH_MAX];
	uint32_t want = GH_EV_IDLE;
	sigset_t all, old;
	int saved = errno, rc;

	if (!__atomic_compare_exchange_n(&gh_ev.state, &want, GH_EV_STARTING,
					 0, __ATOMIC_ACQ_REL,
					 __ATOMIC_RELAXED))
		return;
	__atomic_store_n(&gh_ev.stop, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&gh_ev.first_tid, gh_gettid(), __ATOMIC_RELAXED);
	/* stderr's spool is recovered only by this pid's next image */
	if (gh_ev.is_stderr ||
	    !gh_ev_expand(gh_ev.path, getpid(), log, sizeof(log)))
		gh_spool_open(gh_ev.is_stderr ? GH_EV_STDERR : log,
			      gh_ev.ring_recs, gh_ev.start_t, gh_ev.start_wall);
	/* the writer inherits a full signal mask (SIGPIPE included) */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&gh_ev.writer, NULL, gh_ev_writer_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	__atomic_store_n(&gh_ev.state, rc ? GH_EV_NOWRITER : GH_EV_RUN,
			 __ATOMIC_RELEASE);
	errno = saved;
}

/* ---------------------------------------------------------------- */
/* hook path                                                         */

/*
 * GDRHOOK_LOG_MODE=block and the ring is full: wait for the writer.
 * Returns 0 when there is room, -1 when the event must be dropped (no
 * writer, sink abandoned, or this thread holds the consumer lock).
 */
static int gh_ev_wait_room(struct gh_ring *g, uint64_t h)
{
	struct timespec ts = { 0, 10 * 1000000L };

	for (;;) {
		uint32_t seq = __atomic_load_n(&gh_ev.drained,
					       __ATOMIC_ACQUIRE);

		if (h - __atomic_load_n(&g->tail, __ATOMIC_ACQUIRE) <= g->mask)
			return 0;
		if (gh_ev_fork_held || gh_ev_exec_held ||
		    __atomic_load_n(&gh_ev.state, __ATOMIC_ACQUIRE) !=
			    GH_EV_RUN ||
		    __atomic_load_n(&gh_ev.dead, __ATOMIC_RELAXED))
			return -1;
		gh_ev_wake();
		syscall(SYS_futex, &gh_ev.drained, FUTEX_WAIT_PRIVATE, seq,
			&ts, NULL, 0);
	}
}

void gh_evlog_put(const struct gh_evrec *r)
{
	uint32_t s = __atomic_load_n(&gh_ev.state, __ATOMIC_ACQUIRE);
	struct gh_ring *g;
	struct gh_evrec *slot;
	uint64_t h, t;
	int saved;

	if (__builtin_expect(s != GH_EV_RUN, 0)) {
		if (s == GH_EV_OFF)
			return;
		if (s == GH_EV_IDLE)
			gh_ev_start();
		/* another thread is mapping the spool: its rings come next */
		for (int spins = 0; spins < 100000 &&
		     __atomic_load_n(&gh_ev.state, __ATOMIC_ACQUIRE) ==
			     GH_EV_STARTING; spins++)
			sched_yield();
	}
	if (__builtin_expect(__atomic_load_n(&gh_ev.dead, __ATOMIC_RELAXED),
			     0)) {
		gh_ev_drop(1);
		return;
	}
	g = gh_ev_tl_ring;
	if (__builtin_expect(!g, 0)) {
		g = gh_ring_get();
		if (!g) {
			gh_ev_drop(1);
			return;
		}
	}
	h = g->head;	/* only we write it */
	t = __atomic_load_n(&g->tail, __ATOMIC_ACQUIRE);
	if (__builtin_expect(h - t > g->mask, 0)) {
		saved = errno;
		if (!gh_ev.block || gh_ev_wait_room(g, h)) {
			errno = saved;
			gh_ev_drop(1);
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
		gh_ev_wake();
}

/* ---------------------------------------------------------------- */
/* formatting                                                        */

/* ,"key": then the value; lit must be a string literal */
#define GH_KEY(b, lit)		gh_buf_lit((b), ",\"" lit "\":")

static void gh_ev_kv_u64(struct gh_buf *b, const char *key, size_t klen,
			 uint64_t v)
{
	gh_buf_putn(b, key, klen);
	gh_buf_u64(b, v);
}

#define GH_KV_U(b, lit, v)						\
	gh_ev_kv_u64((b), ",\"" lit "\":", sizeof(",\"" lit "\":") - 1, (v))
#define GH_KV_I(b, lit, v)						\
	do {								\
		GH_KEY(b, lit);						\
		gh_buf_i64((b), (v));					\
	} while (0)
#define GH_KV_HEX(b, lit, v)						\
	do {								\
		GH_KEY(b, lit);						\
		gh_buf_putc((b), '"');					\
		gh_buf_hex((b), (v));					\
		gh_buf_putc((b), '"');					\
	} while (0)
#define GH_KV_STR(b, lit, s)						\
	do {								\
		GH_KEY(b, lit);						\
		gh_buf_json_str((b), (s), GH_EV_STR_MAX);		\
	} while (0)
#define GH_KV_BOOL(b, lit, v)						\
	do {								\
		GH_KEY(b, lit);						\
		if (v)							\
			gh_buf_lit((b), "true");			\
		else							\
			gh_buf_lit((b), "false");			\
	} while (0)

/* ---------------------------------------------------------------- */
/* output (all under gh_ev.lock)                                     */

/*
 * What err means for a log, in words: strerror's text, and what it means
 * here where that text alone would mislead or not say enough.
 */
static void gh_ev_put_err(struct gh_buf *b, int err)
{
	const char *what = NULL, *text = strerrordesc_np(err);

	switch (err) {
	case ETIMEDOUT:
		gh_buf_lit(b, "it took nothing for ");
		gh_buf_u64(b, GH_EV_STALL_MS / 1000);
		gh_buf_lit(b, " s");
		return;
	case ENXIO:
		gh_buf_lit(b, "a FIFO with no reader");
		return;
	case ELOOP:
		what = "it is a symlink; logs are never written through a "
		       "symlink";
		break;
	case ENOENT:
		what = "its directory does not exist";
		break;
	case EISDIR:
		what = "it is a directory";
		break;
	case ENOSPC:
	case EDQUOT:
		what = "the file system is full";
		break;
	case EACCES:
	case EPERM:
		what = "this user may not create or write it";
		break;
	case EPIPE:
		what = "its reader went away";
		break;
	}
	gh_buf_puts(b, text ? text : "unknown error");
	if (what) {
		gh_buf_lit(b, " (");
		gh_buf_puts(b, what);
		gh_buf_putc(b, ')');
	}
}

/* Give up on the sink: one message; what it did not take is dropped. */
static void gh_ev_abandon(const char *why, int err, uint64_t lost)
{
	char text[256];
	struct gh_buf b;

	__atomic_store_n(&gh_ev.dead, 1, __ATOMIC_RELAXED);
	gh_ev_drop(lost);
	gh_buf_init(&b, text, sizeof(text));
	gh_ev_put_err(&b, -err);
	gh_buf_cstr(&b);
	gh_warn("event log %s: %s: %s; no more events are written, "
		"%llu lost so far (the exit counts say how many in all)",
		gh_ev.is_stderr ? GH_EV_STDERR :
		gh_ev.opened[0] ? gh_ev.opened : gh_ev.path, why, text,
		(unsigned long long)gh_evlog_dropped());
	if (!gh_ev.is_stderr)
		gh_fd_close(&gh_ev.sink);
	gh_ev.sink.fd = -2;
}

static int gh_ev_open_sink(const char *path, int end_torn);

/*
 * Before each write: is the log's fd still the file we opened?  The
 * program may have closed it (close_range) and opened its own on that
 * number, or dup2()ed over it: then it is not ours to write into or to
 * close.  The log is opened again by its path (as at first: O_APPEND,
 * never through a symlink) or, failing that, abandoned.  Returns 1 when
 * gh_ev.sink.fd may be written.
 */
static int gh_ev_sink_ready(void)
{
	int fd;

	if (gh_ev.sink.fd < 0)
		return 0;
	if (gh_ev.is_stderr || gh_fd_ours(&gh_ev.sink))
		return 1;
	gh_log_once(GH_LOG_INFO, "event log %s: the program closed or "
		    "replaced its descriptor; opened again by its path",
		    gh_ev.sink_path);
	/* a dup of stderr (recovery) has no path to open again */
	fd = gh_ev.sink_path && gh_ev.sink_path[0] == '/' ?
	     gh_ev_open_sink(gh_ev.sink_path, 0) : -EBADF;
	if (fd >= 0)
		fd = gh_fd_own(fd, &gh_ev.sink);
	if (fd < 0) {
		gh_ev.sink.fd = -1;	/* never closed: not ours */
		gh_ev_abandon("cannot be opened again after the program closed "
			      "its descriptor", fd, 0);
		return 0;
	}
	return 1;
}

/*
 * Write the output buffer.  Event lines in it count as written only once
 * the sink took them whole; on failure the lines it did not take are
 * counted as dropped and the sink is abandoned.
 */
static void gh_ev_out_flush(void)
{
	size_t done = 0;
	int err;

	if (!gh_ev.out.len)
		goto out;
	if (!gh_ev_sink_ready()) {
		gh_ev_drop(gh_ev.out_recs);
		goto out;
	}
	err = gh_write_nosig(gh_ev.sink.fd, gh_ev.out.p, gh_ev.out.len,
			     GH_EV_STALL_MS, &done);
	if (err) {
		uint64_t took = 0;

		/* whole lines taken: count the newlines that went out */
		for (size_t i = 0; i < done; i++)
			took += gh_ev.out.p[i] == '\n';
		if (took > gh_ev.out_recs)
			took = gh_ev.out_recs;
		__atomic_add_fetch(&gh_ev.written, took, __ATOMIC_RELAXED);
		gh_ev_abandon("write failed", err, gh_ev.out_recs - took);
	} else {
		__atomic_add_fetch(&gh_ev.written, gh_ev.out_recs,
				   __ATOMIC_RELAXED);
	}
out:
	gh_buf_reset(&gh_ev.out);
	gh_ev.out_recs = 0;
}

/* A line that is not an event (start, fork, exit): written on its own. */
static struct gh_buf *gh_ev_meta_line(void)
{
	if (gh_ev.out.len)
		gh_ev_out_flush();
	return &gh_ev.out;
}

static void gh_ev_meta_done(void)
{
	size_t done = 0;
	int err;

	if (gh_ev.out.len && gh_ev_sink_ready()) {
		err = gh_write_nosig(gh_ev.sink.fd, gh_ev.out.p, gh_ev.out.len,
				     GH_EV_STALL_MS, &done);
		if (err)
			gh_ev_abandon("write failed", err, 0);
	}
	gh_buf_reset(&gh_ev.out);
}

/* A torn last line (a former image killed mid-write) ends here. */
static void gh_ev_end_torn_line(int fd, const char *path)
{
	struct stat st;
	char c = '\n';
	int rfd;

	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size <= 0)
		return;
	rfd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (rfd < 0)
		return;
	if (pread(rfd, &c, 1, st.st_size - 1) == 1 && c != '\n')
		gh_write_nosig(fd, "\n", 1, GH_EV_STALL_MS, NULL);
	close(rfd);
}

/*
 * Open a log for appending: never follows a symlink, never blocks (a
 * FIFO with no reader is refused at once), private to the user.
 * Returns the fd or -errno.
 */
static int gh_ev_open_sink(const char *path, int end_torn)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC |
				    O_NOFOLLOW | O_NONBLOCK, 0600);
	struct stat st;

	if (fd < 0)
		return -errno;
	/* files and devices block as usual; pipes stay non-blocking */
	if (!fstat(fd, &st) && !S_ISFIFO(st.st_mode) && !S_ISSOCK(st.st_mode))
		fcntl(fd, F_SETFL, O_WRONLY | O_APPEND);
	/* only after a death: a live writer's line may just be half done */
	if (end_torn)
		gh_ev_end_torn_line(fd, path);
	return fd;
}

/* Open the file (first use in this process) and write "start" [+ "fork"]. */
static void gh_ev_open_locked(void)
{
	char exe[PATH_MAX];
	struct gh_buf *b;
	ssize_t n;
	int saved = errno, fd;

	if (gh_ev.sink.fd != -1)
		return;
	/* said by a process that logs, not by every one that starts */
	if ((uint64_t)gh_ev.ring_recs * sizeof(struct gh_evrec) !=
	    gh_ev.asked_bytes)
		gh_log_once(GH_LOG_WARN, "GDRHOOK_LOG_BUFFER=%llu: each "
			    "thread's ring holds %u events (%llu bytes) "
			    "instead: a ring holds a power of two of %u-byte "
			    "events, %u to %u",
			    (unsigned long long)gh_ev.asked_bytes,
			    gh_ev.ring_recs,
			    (unsigned long long)gh_ev.ring_recs *
				    sizeof(struct gh_evrec),
			    (unsigned int)sizeof(struct gh_evrec),
			    GH_EV_MIN_RECS, GH_EV_MAX_RECS);
	if (gh_ev.is_stderr) {
		gh_ev.sink.fd = STDERR_FILENO;
	} else {
		fd = gh_ev_expand(gh_ev.path, getpid(), gh_ev.opened,
				  sizeof(gh_ev.opened));
		gh_ev.sink_path = gh_ev.opened;
		if (!fd)
			fd = gh_ev_open_sink(gh_ev.opened, gh_ev.after_exec);
		if (fd >= 0)
			fd = gh_fd_own(fd, &gh_ev.sink);
		if (fd < 0) {
			gh_ev_abandon("cannot open", fd, 0);
			errno = saved;
			return;
		}
	}
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	exe[n > 0 ? n : 0] = '\0';

	b = gh_ev_meta_line();
	gh_buf_lit(b, "{\"ev\":\"start\",\"v\":");
	gh_buf_u64(b, GH_EV_FORMAT_VERSION);
	GH_KV_U(b, "t", gh_ev.start_t);
	GH_KV_I(b, "pid", getpid());
	GH_KV_I(b, "tid",
		__atomic_load_n(&gh_ev.first_tid, __ATOMIC_RELAXED));
	GH_KEY(b, "exe");
	gh_buf_json_str(b, exe, sizeof(exe));
	GH_KV_U(b, "wall_ns", gh_ev.start_wall);
	GH_KV_BOOL(b, "crash_safe", gh_spool_active());
	GH_KEY(b, "mode");
	if (gh_ev.block)
		gh_buf_lit(b, "\"block\"");
	else
		gh_buf_lit(b, "\"drop\"");
	gh_buf_lit(b, "}\n");
	if (gh_ev.is_fork_child) {
		gh_buf_lit(b, "{\"ev\":\"fork\",\"parent\":");
		gh_buf_i64(b, gh_ev.parent);
		GH_KV_U(b, "t", gh_ev.start_t);
		GH_KV_I(b, "pid", getpid());
		GH_KV_I(b, "tid",
			__atomic_load_n(&gh_ev.first_tid, __ATOMIC_RELAXED));
		gh_buf_lit(b, "}\n");
	}
	gh_ev_meta_done();
	errno = saved;
}

/* Format slots tail..head of one ring into the buffer; write as it fills. */
static uint64_t gh_ev_drain_ring(struct gh_ring *g, pid_t pid)
{
	uint64_t t = __atomic_load_n(&g->tail, __ATOMIC_RELAXED);
	uint64_t h = __atomic_load_n(&g->head, __ATOMIC_ACQUIRE);
	uint64_t n = 0;

	while (t != h) {
		if (gh_buf_room(&gh_ev.out) < GH_EV_LINE_MAX) {
			/* written (or counted lost): free the slots */
			gh_ev_out_flush();
			__atomic_store_n(&g->tail, t, __ATOMIC_RELEASE);
		}
		if (gh_ev.sink.fd >= 0) {
			gh_ev_format_record(&gh_ev.out, &g->rec[t & g->mask], pid);
			gh_ev.out_recs++;
		} else {
			gh_ev_drop(1);
		}
		t++;
		n++;
	}
	gh_ev_out_flush();
	__atomic_store_n(&g->tail, t, __ATOMIC_RELEASE);
	return n;
}

/* Consume every ring once; recycle orphaned rings once empty. */
static void gh_ev_drain_locked(void)
{
	struct gh_ring *g;
	pid_t pid = getpid();
	int saved = errno;

	for (g = __atomic_load_n(&gh_ev.rings, __ATOMIC_ACQUIRE); g;
	     g = g->next) {
		uint32_t st = __atomic_load_n(&g->state, __ATOMIC_ACQUIRE);

		if (st == GH_RING_FREE)
			continue;
		gh_ev_drain_ring(g, pid);
		/* orphaned before we read head: head was final */
		if (st == GH_RING_ORPHANED)
			__atomic_store_n(&g->state, GH_RING_FREE,
					 __ATOMIC_RELEASE);
	}
	__atomic_add_fetch(&gh_ev.drained, 1, __ATOMIC_RELEASE);
	if (gh_ev.block)
		syscall(SYS_futex, &gh_ev.drained, FUTEX_WAKE_PRIVATE, INT_MAX,
			NULL, NULL, 0);
	errno = saved;
}

/* ---------------------------------------------------------------- */
/* recovery of dead processes' spools                                */

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
 * "recovered" record.  Under gh_ev.lock with gh_ev.sink.fd unused (-1 or -2):
 * borrows the output buffer and fd slot.
 */
static void gh_ev_recover(const struct gh_spool_dead *d)
{
	struct gh_ownfd saved_sink = gh_ev.sink;
	const char *saved_path = gh_ev.sink_path;
	uint64_t n = 0;
	int lfd, saved_dead = gh_ev.dead;
	uint64_t saved_written = gh_evlog_written();
	uint64_t saved_dropped = gh_evlog_dropped();
	struct gh_buf *b;

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
			gh_ev.after_exec = 1;	/* our former image: it may have torn */
		lfd = gh_ev_open_sink(d->log, 1);
	}
	if (lfd >= 0)
		lfd = gh_fd_own(lfd, &gh_ev.sink);
	if (lfd < 0) {
		char text[256];
		struct gh_buf tb;

		gh_buf_init(&tb, text, sizeof(text));
		gh_ev_put_err(&tb, -lfd);
		gh_buf_cstr(&tb);
		gh_warn("event log: cannot recover %s into %s: %s", d->spool,
			d->log, text);
		gh_ev.sink = saved_sink;
		return;
	}
	gh_ev.sink_path = d->log;
	gh_ev.dead = 0;
	gh_buf_reset(&gh_ev.out);
	gh_ev.out_recs = 0;
	/* the "recovered" record goes first, with the count */
	n = gh_ev_spool_count(d);
	b = gh_ev_meta_line();
	gh_buf_lit(b, "{\"ev\":\"recovered\",\"t\":");
	gh_buf_u64(b, d->start_t);
	GH_KV_I(b, "pid", d->pid);
	GH_KV_U(b, "wall_ns", d->start_wall);
	GH_KV_U(b, "events", n);
	GH_KV_U(b, "dropped", d->dropped);
	GH_KV_I(b, "by", getpid());
	gh_buf_lit(b, "}\n");
	gh_ev_meta_done();
	for (uint32_t i = 0; i < d->nrings && gh_ev.sink.fd >= 0; i++) {
		struct gh_ring *g = gh_spool_dead_ring(d, i);

		if (!g)
			continue;
		gh_ev_drain_ring(g, d->pid);
		gh_spool_unmap_ring(d, g);
	}
	if (gh_ev.sink.fd >= 0)
		gh_fd_close(&gh_ev.sink);
	gh_ev.sink = saved_sink;
	gh_ev.sink_path = saved_path;
	gh_ev.dead = saved_dead;
	/* the recovered events are not this process's */
	__atomic_store_n(&gh_ev.written, saved_written, __ATOMIC_RELAXED);
	__atomic_store_n(&gh_ev.dropped, saved_dropped, __ATOMIC_RELAXED);
	gh_info("event log: recovered %llu events of dead process %d into %s",
		(unsigned long long)n, (int)d->pid, d->log);
}

/* ---------------------------------------------------------------- */
/* flush, shutdown, fork                                             */

/* Has this process recorded any event (so that the log exists)? */
static int gh_ev_touched(void)
{
	uint32_t s = __atomic_load_n(&gh_ev.state, __ATOMIC_ACQUIRE);

	return s >= GH_EV_STARTING;
}

void gh_evlog_flush(void)
{
	int saved = errno;

	if (!gh_ev_touched())
		return;
	pthread_mutex_lock(&gh_ev.lock);
	gh_ev_open_locked();
	gh_ev_drain_locked();
	gh_spool_report();
	pthread_mutex_unlock(&gh_ev.lock);
	errno = saved;
}

/*
 * Before exec: drain every ring and keep gh_ev.lock until the image is
 * replaced, so that the writer is never cut off mid-line; what threads
 * record after the drain stays in the spool for the next image.  The
 * wait is bounded (a signal handler may exec while its thread holds the
 * lock): past it, the spool alone keeps the records.
 */
int gh_evlog_exec_prepare(void)
{
	struct timespec until;
	int saved = errno;

	/* a vfork child shares our memory: the lock is the parent's */
	if (!gh_ev_touched() || gh_ev_exec_held || getpid() != gh_ev.self)
		return 0;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += GH_EV_STALL_MS / 1000 + 1;
	if (pthread_mutex_timedlock(&gh_ev.lock, &until)) {
		errno = saved;
		return 0;
	}
	gh_ev_exec_held = 1;
	gh_ev_open_locked();
	gh_ev_drain_locked();
	errno = saved;
	return 1;
}

void gh_evlog_exec_failed(void)
{
	int saved = errno;

	if (!gh_ev_exec_held)
		return;
	gh_ev_exec_held = 0;
	pthread_mutex_unlock(&gh_ev.lock);
	errno = saved;
}

void gh_evlog_shutdown(uint64_t live, uint64_t live_bytes)
{
	uint32_t s = __atomic_load_n(&gh_ev.state, __ATOMIC_ACQUIRE);
	uint64_t dropped;
	struct gh_buf *b;
	int saved = errno, spins = 0, dead_before;

	/* another thread may be inside pthread_create for the writer */
	while (s == GH_EV_STARTING && spins++ < 10000) {
		sched_yield();
		s = __atomic_load_n(&gh_ev.state, __ATOMIC_ACQUIRE);
	}
	if (s == GH_EV_OFF)
		return;
	if (s == GH_EV_RUN) {
		__atomic_store_n(&gh_ev.stop, 1, __ATOMIC_RELEASE);
		gh_ev_wake();
		pthread_join(gh_ev.writer, NULL);
	}
	/* later puts are ignored */
	__atomic_store_n(&gh_ev.state, GH_EV_OFF, __ATOMIC_RELEASE);
	if (s == GH_EV_IDLE) {
		errno = saved;
		return;		/* no event: leave no trace */
	}

	pthread_mutex_lock(&gh_ev.lock);
	gh_ev_open_locked();
	gh_ev_drain_locked();
	dead_before = gh_ev.dead;
	dropped = gh_evlog_dropped();
	if (gh_ev.sink.fd >= 0) {
		b = gh_ev_meta_line();
		gh_buf_lit(b, "{\"ev\":\"exit\",\"t\":");
		gh_buf_u64(b, gh_now_ns());
		GH_KV_I(b, "pid", getpid());
		GH_KV_I(b, "tid", gh_gettid());
		GH_KV_U(b, "events", gh_evlog_written());
		GH_KV_U(b, "dropped", dropped);
		GH_KV_U(b, "live", live);
		GH_KV_U(b, "live_bytes", live_bytes);
		gh_buf_lit(b, "}\n");
		gh_ev_meta_done();
		if (!gh_ev.is_stderr && gh_ev.sink.fd >= 0)
			gh_fd_close(&gh_ev.sink);
	}
	gh_ev.sink.fd = -1;
	gh_spool_report();
	/* every record went out or was counted: the spool has no more use */
	gh_spool_remove();
	pthread_mutex_unlock(&gh_ev.lock);
	/* an abandoned sink already said so, with its count */
	if (dropped && !dead_before)
		gh_warn("event log: %llu events dropped (rings full); raise "
			"GDRHOOK_LOG_BUFFER or set GDRHOOK_LOG_MODE=block",
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
	int saved = errno;

	if (!gh_evlog_enabled() || gh_ev_fork_held)
		return;
	pthread_mutex_lock(&gh_ev.lock);
	gh_ev_fork_held = 1;
	gh_ev.parent = getpid();
	if (gh_ev_touched()) {
		gh_ev_open_locked();
		gh_ev_drain_locked();
	}
	errno = saved;
}

void gh_evlog_atfork_parent(void)
{
	if (!gh_ev_fork_held)
		return;
	gh_ev_fork_held = 0;
	pthread_mutex_unlock(&gh_ev.lock);
}

void gh_evlog_atfork_child(void)
{
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
	for (g = __atomic_load_n(&gh_ev.rings, __ATOMIC_ACQUIRE); g;
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
	__atomic_store_n(&gh_ev.rings, keep, __ATOMIC_RELEASE);
	if (gh_ev.key_ok)
		pthread_setspecific(gh_ev.key, gh_ev_tl_ring);
	gh_spool_atfork_child();
	/* the parent's log, ours only while dev/ino say so */
	if (gh_ev.sink.fd >= 0 && !gh_ev.is_stderr)
		gh_fd_close(&gh_ev.sink);
	gh_ev.sink.fd = -1;
	gh_ev.dead = 0;
	gh_buf_reset(&gh_ev.out);
	gh_ev.out_recs = 0;
	gh_ev.is_fork_child = 1;
	gh_ev.self = getpid();
	gh_ev.start_t = gh_now_ns();
	gh_ev.start_wall = gh_wall_ns();
	__atomic_store_n(&gh_ev.stop, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&gh_ev.written, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&gh_ev.dropped, 0, __ATOMIC_RELAXED);
	s = __atomic_load_n(&gh_ev.state, __ATOMIC_RELAXED);
	if (s != GH_EV_OFF)
		__atomic_store_n(&gh_ev.state, GH_EV_IDLE, __ATOMIC_RELEASE);
	gh_ev_fork_held = 0;
	pthread_mutex_unlock(&gh_ev.lock);
}
