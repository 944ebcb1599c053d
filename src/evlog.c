// SPDX-License-Identifier: MIT
/*
 * The event log (GDRHOOK_LOG): see evlog.h.
 *
 * Each thread that records an event owns one ring: a single-producer
 * (the owning thread), single-consumer (whoever holds gh_ev.lock: the
 * writer thread, a flush, fork or shutdown) queue of struct gh_evrec.
 * Rings are mmap'd on a thread's first event, pushed onto a lock-free,
 * push-only list, and never unmapped: when a thread exits, a pthread key
 * destructor marks its ring orphaned; the consumer drains it and marks it
 * free, and the next new thread takes it instead of mapping another.
 *
 * Producer:  h = head (own), t = tail (acquire); full -> count a drop;
 *            copy into slot h; head = h + 1 (release).
 * Consumer:  h = head (acquire); format slots tail..h; tail = h (release).
 *
 * The writer thread sleeps on a futex word for at most GH_EV_PERIOD_MS;
 * a producer whose ring reaches a quarter full bumps the word and wakes
 * it.  It formats JSON Lines into one static buffer and writes whole
 * lines.  gh_ev.lock (a mutex) serializes consumers and guards the file;
 * the hook path never takes it.
 */
#include <errno.h>
#include <fcntl.h>
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

#include "gdrhook.h"
#include "clock.h"
#include "evlog.h"
#include "fmt.h"
#include "log.h"

#define GH_EV_DEFAULT_RING	(1u << 20)	/* bytes per thread */
#define GH_EV_MIN_RECS		8u
#define GH_EV_MAX_RECS		(1u << 24)
#define GH_EV_PERIOD_MS		50
#define GH_EV_OUTBUF		(256u << 10)
#define GH_EV_LINE_MAX		4096	/* longest line we ever format */
#define GH_EV_STR_MAX		256	/* input bytes of one string field */

/* two escaped strings (6 bytes per input byte at worst) + the rest */
_Static_assert(2 * (6 * GH_EV_STR_MAX + 2) + 512 <= GH_EV_LINE_MAX,
	       "an event line may not fit GH_EV_LINE_MAX");
_Static_assert(6 * PATH_MAX + 512 <= GH_EV_OUTBUF, "start line too long");

enum gh_ring_state { GH_RING_FREE, GH_RING_OWNED, GH_RING_ORPHANED };

struct gh_ring {
	struct gh_ring *next;		/* global list, immutable once pushed */
	uint32_t state;			/* enum gh_ring_state, atomic */
	uint32_t mask;			/* capacity - 1 */
	uint32_t wake_at;		/* fill level that wakes the writer */
	uint32_t pad_;
	size_t map_len;
	uint64_t head __attribute__((aligned(64)));	/* producer */
	uint64_t tail __attribute__((aligned(64)));	/* consumer */
	struct gh_evrec rec[] __attribute__((aligned(64)));
};

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
	uint32_t stop;		/* writer: exit after the next drain */
	uint32_t ring_recs;	/* records per ring (power of two) */
	struct gh_ring *rings;	/* list head, atomic */
	uint64_t dropped;	/* atomic */
	uint64_t written;	/* atomic (written under lock, read anywhere) */

	pthread_mutex_t lock;	/* consumers, file, output buffer */
	pthread_key_t key;
	int key_ok;
	pthread_t writer;
	int fd;			/* -1: not open yet; -2: open failed */
	int is_stderr;
	int is_fork_child;	/* write a "fork" record after "start" */
	pid_t parent;		/* pid that forked us / is forking */
	int32_t first_tid;	/* thread of the first event: start record */
	char path[PATH_MAX];	/* template, "%p" not yet expanded */
	struct gh_buf out;
} gh_ev = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.fd = -1,
};

static char gh_ev_outbuf[GH_EV_OUTBUF];

static __thread struct gh_ring *gh_ev_tl_ring
	__attribute__((tls_model("initial-exec")));
/* This thread's fork prepare took gh_ev.lock (the child inherits it). */
static __thread int gh_ev_fork_held
	__attribute__((tls_model("initial-exec")));

static const char *const gh_ev_names[GH_EV_COUNT_] = {
	[GH_EV_ALLOC] = "alloc",
	[GH_EV_FREE] = "free",
	[GH_EV_RESTORE] = "restore",
	[GH_EV_CTX_DESTROY] = "ctx_destroy",
	[GH_EV_CTX_RESET] = "ctx_reset",
	[GH_EV_CTX_RELEASE] = "ctx_release",
	[GH_EV_POOL_TRIM] = "pool_trim",
	[GH_EV_POOL_DESTROY] = "pool_destroy",
	[GH_EV_UNTRUSTED] = "untrusted",
	[GH_EV_AUDIT] = "audit",
	[GH_EV_PIN] = "pin",
	[GH_EV_UNPIN] = "unpin",
	[GH_EV_REG] = "reg",
	[GH_EV_DEREG] = "dereg",
	[GH_EV_REVOKE] = "revoke",
	[GH_EV_HIT] = "hit",
	[GH_EV_MISS] = "miss",
};

const char *gh_ev_name(unsigned int ev)
{
	return ev < GH_EV_COUNT_ ? gh_ev_names[ev] : NULL;
}

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

/* ---------------------------------------------------------------- */
/* configuration                                                     */

static void gh_ev_thread_exit(void *arg);

int gh_evlog_configure(const char *path, uint64_t ring_bytes)
{
	uint64_t recs;
	size_t n;
	const char *p;
	int rc;

	if (!path || !*path)
		return -EINVAL;
	n = strlen(path);
	if (n >= sizeof(gh_ev.path))
		return -ENAMETOOLONG;
	for (p = path; *p; p++) {
		if (*p != '%')
			continue;
		if (p[1] != 'p' && p[1] != '%')
			return -EINVAL;
		p++;
	}
	if (__atomic_load_n(&gh_ev.state, __ATOMIC_ACQUIRE) != GH_EV_OFF)
		return -EBUSY;

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

	if (!gh_ev.key_ok) {
		rc = pthread_key_create(&gh_ev.key, gh_ev_thread_exit);
		if (rc)
			return -rc;
		gh_ev.key_ok = 1;
	}
	memcpy(gh_ev.path, path, n + 1);
	gh_ev.is_stderr = !strcmp(path, "stderr");
	gh_ev.ring_recs = (uint32_t)recs;
	gh_buf_init(&gh_ev.out, gh_ev_outbuf, sizeof(gh_ev_outbuf));
	__atomic_store_n(&gh_ev.state, GH_EV_IDLE, __ATOMIC_RELEASE);
	return 0;
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
	size_t len, pg;
	int saved = errno;

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

	pg = (size_t)sysconf(_SC_PAGESIZE);
	len = sizeof(*g) + (size_t)recs * sizeof(struct gh_evrec);
	len = (len + pg - 1) & ~(pg - 1);
	g = mmap(NULL, len, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (g == MAP_FAILED) {
		errno = saved;
		return NULL;
	}
	g->mask = recs - 1;
	g->wake_at = recs / 4 ? recs / 4 : 1;
	g->map_len = len;
	g->state = GH_RING_OWNED;
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
		pthread_mutex_unlock(&gh_ev.lock);
		if (stop)
			break;
		syscall(SYS_futex, &gh_ev.futex, FUTEX_WAIT_PRIVATE, seq, &ts,
			NULL, 0);
	}
	return NULL;
}

/* First event of the process: start the writer (once). */
static void gh_ev_start(void)
{
	uint32_t want = GH_EV_IDLE;
	sigset_t all, old;
	int saved = errno, rc;

	if (!__atomic_compare_exchange_n(&gh_ev.state, &want, GH_EV_STARTING,
					 0, __ATOMIC_ACQ_REL,
					 __ATOMIC_RELAXED))
		return;
	__atomic_store_n(&gh_ev.stop, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&gh_ev.first_tid, gh_gettid(), __ATOMIC_RELAXED);
	/* the writer inherits a full signal mask */
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

void gh_evlog_put(const struct gh_evrec *r)
{
	uint32_t s = __atomic_load_n(&gh_ev.state, __ATOMIC_ACQUIRE);
	struct gh_ring *g;
	struct gh_evrec *slot;
	uint64_t h, t;

	if (__builtin_expect(s != GH_EV_RUN, 0)) {
		if (s == GH_EV_OFF)
			return;
		if (s == GH_EV_IDLE)
			gh_ev_start();
	}
	g = gh_ev_tl_ring;
	if (__builtin_expect(!g, 0)) {
		g = gh_ring_get();
		if (!g) {
			__atomic_add_fetch(&gh_ev.dropped, 1, __ATOMIC_RELAXED);
			return;
		}
	}
	h = g->head;	/* only we write it */
	t = __atomic_load_n(&g->tail, __ATOMIC_ACQUIRE);
	if (__builtin_expect(h - t > g->mask, 0)) {
		__atomic_add_fetch(&gh_ev.dropped, 1, __ATOMIC_RELAXED);
		return;
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
/* formatting and output (all under gh_ev.lock)                      */

static void gh_ev_write_all(const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(gh_ev.fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			gh_warn_once("event log: write failed (errno %d); "
				     "events are lost", errno);
			return;
		}
		p += w;
		n -= (size_t)w;
	}
}

static void gh_ev_out_flush(void)
{
	if (gh_ev.out.len && gh_ev.fd >= 0)
		gh_ev_write_all(gh_ev.out.p, gh_ev.out.len);
	gh_buf_reset(&gh_ev.out);
}

/* Make room for one more line. */
static struct gh_buf *gh_ev_line(void)
{
	if (gh_buf_room(&gh_ev.out) < GH_EV_LINE_MAX)
		gh_ev_out_flush();
	return &gh_ev.out;
}

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

static void gh_ev_format(struct gh_buf *b, const struct gh_evrec *r,
			 pid_t pid)
{
	const char *name = gh_ev_name(r->ev);

	gh_buf_lit(b, "{\"t\":");
	gh_buf_u64(b, r->t_ns);
	GH_KV_I(b, "pid", pid);
	GH_KV_I(b, "tid", r->tid);
	GH_KEY(b, "ev");
	if (name) {
		gh_buf_putc(b, '"');
		gh_buf_puts(b, name);
		gh_buf_putc(b, '"');
	} else {
		gh_buf_u64(b, r->ev);	/* unknown: keep the number */
	}

	switch (r->ev) {
	case GH_EV_ALLOC:
	case GH_EV_FREE:
	case GH_EV_RESTORE:
		GH_KV_STR(b, "api", r->api);
		GH_KV_HEX(b, "ptr", r->ptr);
		GH_KV_U(b, "size", r->size);
		GH_KV_I(b, "dev", r->dev);
		GH_KV_U(b, "gen", r->gen);
		GH_KEY(b, "kind");
		if (r->kind < GDRHOOK_KIND_COUNT_)
			gh_buf_json_str(b, gh_kind_names[r->kind],
					GH_EV_STR_MAX);
		else
			gh_buf_u64(b, r->kind);
		GH_KV_HEX(b, "ctx", r->ctx);
		GH_KV_I(b, "rc", r->rc);
		GH_KV_U(b, "dur_ns", r->dur_ns);
		if (r->ev == GH_EV_FREE && (r->flags & GH_EVF_UNTRACKED))
			gh_buf_lit(b, ",\"tracked\":false");
		if (r->ev == GH_EV_FREE && (r->flags & GH_EVF_IMPLICIT))
			gh_buf_lit(b, ",\"implicit\":true");
		break;
	case GH_EV_CTX_DESTROY:
	case GH_EV_CTX_RESET:
	case GH_EV_CTX_RELEASE:
		GH_KV_STR(b, "api", r->api);
		GH_KV_HEX(b, "ctx", r->ctx);
		GH_KV_I(b, "dev", r->dev);
		GH_KV_I(b, "rc", r->rc);
		GH_KV_U(b, "dur_ns", r->dur_ns);
		GH_KV_U(b, "dropped", r->aux2);
		GH_KV_U(b, "dropped_bytes", r->aux);
		break;
	case GH_EV_POOL_TRIM:
	case GH_EV_POOL_DESTROY:
		GH_KV_STR(b, "api", r->api);
		GH_KV_HEX(b, "pool", r->ctx);
		GH_KV_I(b, "rc", r->rc);
		GH_KV_U(b, "dur_ns", r->dur_ns);
		break;
	case GH_EV_UNTRUSTED:
		GH_KV_STR(b, "api", r->api);
		GH_KV_STR(b, "why", r->what);
		break;
	case GH_EV_AUDIT:
		GH_KV_STR(b, "api", r->api);
		GH_KV_HEX(b, "ptr", r->ptr);
		GH_KV_U(b, "size", r->size);
		GH_KV_U(b, "gen", r->gen);
		GH_KV_STR(b, "what", r->what);
		break;
	case GH_EV_PIN:
	case GH_EV_UNPIN:
		GH_KV_HEX(b, "ptr", r->ptr);
		GH_KV_U(b, "size", r->size);
		GH_KV_U(b, "gen", r->gen);
		GH_KV_I(b, "dev", r->dev);
		GH_KV_STR(b, "backend", r->what);
		GH_KV_I(b, "rc", r->rc);
		GH_KV_U(b, "dur_ns", r->dur_ns);
		break;
	case GH_EV_REG:
	case GH_EV_DEREG:
		GH_KV_HEX(b, "ptr", r->ptr);
		GH_KV_U(b, "size", r->size);
		GH_KV_U(b, "gen", r->gen);
		GH_KV_HEX(b, "mr", r->aux);
		GH_KV_HEX(b, "pd", r->aux2);
		GH_KV_U(b, "access", r->kind);
		GH_KV_BOOL(b, "hit", r->flags & GH_EVF_HIT);
		GH_KV_I(b, "rc", r->rc);
		GH_KV_U(b, "dur_ns", r->dur_ns);
		break;
	case GH_EV_REVOKE:
	case GH_EV_HIT:
	case GH_EV_MISS:
		GH_KV_HEX(b, "ptr", r->ptr);
		GH_KV_U(b, "size", r->size);
		GH_KV_U(b, "gen", r->gen);
		break;
	default:
		break;
	}
	gh_buf_lit(b, "}\n");
}

static void gh_ev_expand_path(char *dst, size_t cap)
{
	struct gh_buf b;
	const char *p;

	gh_buf_init(&b, dst, cap);
	for (p = gh_ev.path; *p; p++) {
		if (p[0] == '%' && p[1] == 'p') {
			gh_buf_i64(&b, getpid());
			p++;
		} else if (p[0] == '%' && p[1] == '%') {
			gh_buf_putc(&b, '%');
			p++;
		} else {
			gh_buf_putc(&b, *p);
		}
	}
	gh_buf_cstr(&b);
}

/* Open the file (first use in this process) and write "start" [+ "fork"]. */
static void gh_ev_open_locked(void)
{
	char path[PATH_MAX], exe[PATH_MAX];
	struct gh_buf *b;
	ssize_t n;
	int saved = errno;

	if (gh_ev.fd != -1)
		return;
	if (gh_ev.is_stderr) {
		gh_ev.fd = STDERR_FILENO;
	} else {
		gh_ev_expand_path(path, sizeof(path));
		gh_ev.fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC,
				0644);
		if (gh_ev.fd < 0) {
			gh_warn("event log: cannot open %s (errno %d); "
				"GDRHOOK_LOG disabled", path, errno);
			gh_ev.fd = -2;
			errno = saved;
			return;
		}
	}
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	exe[n > 0 ? n : 0] = '\0';

	b = gh_ev_line();
	gh_buf_lit(b, "{\"ev\":\"start\",\"v\":");
	gh_buf_u64(b, GH_EVLOG_FORMAT);
	gh_buf_lit(b, ",\"t\":");
	gh_buf_u64(b, gh_now_ns());
	GH_KV_I(b, "pid", getpid());
	GH_KV_I(b, "tid",
			__atomic_load_n(&gh_ev.first_tid, __ATOMIC_RELAXED));
	GH_KEY(b, "exe");
	gh_buf_json_str(b, exe, sizeof(exe));
	GH_KV_U(b, "wall_ns", gh_wall_ns());
	gh_buf_lit(b, "}\n");
	if (gh_ev.is_fork_child) {
		b = gh_ev_line();
		gh_buf_lit(b, "{\"ev\":\"fork\",\"parent\":");
		gh_buf_i64(b, gh_ev.parent);
		GH_KV_U(b, "t", gh_now_ns());
		GH_KV_I(b, "pid", getpid());
		GH_KV_I(b, "tid",
			__atomic_load_n(&gh_ev.first_tid, __ATOMIC_RELAXED));
		gh_buf_lit(b, "}\n");
	}
	gh_ev_out_flush();
	errno = saved;
}

/* Consume every ring once; recycle orphaned rings once empty. */
static void gh_ev_drain_locked(void)
{
	struct gh_ring *g;
	pid_t pid = getpid();
	uint64_t n = 0;
	int saved = errno;

	for (g = __atomic_load_n(&gh_ev.rings, __ATOMIC_ACQUIRE); g;
	     g = g->next) {
		uint32_t st = __atomic_load_n(&g->state, __ATOMIC_ACQUIRE);
		uint64_t t, h;

		if (st == GH_RING_FREE)
			continue;
		t = __atomic_load_n(&g->tail, __ATOMIC_RELAXED);
		h = __atomic_load_n(&g->head, __ATOMIC_ACQUIRE);
		while (t != h) {
			struct gh_buf *b = &gh_ev.out;

			if (gh_buf_room(b) < GH_EV_LINE_MAX) {
				/* formatted copies are out: free the slots */
				__atomic_store_n(&g->tail, t, __ATOMIC_RELEASE);
				gh_ev_out_flush();
			}
			if (gh_ev.fd >= 0)
				gh_ev_format(b, &g->rec[t & g->mask], pid);
			t++;
			n++;
		}
		__atomic_store_n(&g->tail, t, __ATOMIC_RELEASE);
		/* orphaned before we read head: head was final */
		if (st == GH_RING_ORPHANED)
			__atomic_store_n(&g->state, GH_RING_FREE,
					 __ATOMIC_RELEASE);
	}
	gh_ev_out_flush();
	if (gh_ev.fd >= 0)
		__atomic_add_fetch(&gh_ev.written, n, __ATOMIC_RELAXED);
	else
		__atomic_add_fetch(&gh_ev.dropped, n, __ATOMIC_RELAXED);
	errno = saved;
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
	pthread_mutex_unlock(&gh_ev.lock);
	errno = saved;
}

void gh_evlog_shutdown(uint64_t live, uint64_t live_bytes)
{
	uint32_t s = __atomic_load_n(&gh_ev.state, __ATOMIC_ACQUIRE);
	uint64_t dropped;
	struct gh_buf *b;
	int saved = errno, spins = 0;

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
	dropped = gh_evlog_dropped();
	if (gh_ev.fd >= 0) {
		b = gh_ev_line();
		gh_buf_lit(b, "{\"ev\":\"exit\",\"t\":");
		gh_buf_u64(b, gh_now_ns());
		GH_KV_I(b, "pid", getpid());
		GH_KV_I(b, "tid", gh_gettid());
		GH_KV_U(b, "events", gh_evlog_written());
		GH_KV_U(b, "dropped", dropped);
		GH_KV_U(b, "live", live);
		GH_KV_U(b, "live_bytes", live_bytes);
		gh_buf_lit(b, "}\n");
		gh_ev_out_flush();
		if (!gh_ev.is_stderr)
			close(gh_ev.fd);
	}
	gh_ev.fd = -1;
	pthread_mutex_unlock(&gh_ev.lock);
	if (dropped)
		gh_warn("event log: %llu events dropped (rings full); raise "
			"the ring size", (unsigned long long)dropped);
	errno = saved;
}

void gh_evlog_atfork_prepare(void)
{
	int saved = errno;

	if (!gh_evlog_enabled())
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
	struct gh_ring *g;
	uint32_t s;

	gh_clock_atfork_child();
	if (!gh_ev_fork_held)
		return;
	/*
	 * Only this thread exists now.  Whatever the rings still hold was
	 * recorded by the parent (and is the parent's to write): discard it.
	 * Rings of the other threads are free for reuse.
	 */
	for (g = __atomic_load_n(&gh_ev.rings, __ATOMIC_ACQUIRE); g;
	     g = g->next) {
		__atomic_store_n(&g->tail, __atomic_load_n(&g->head,
							   __ATOMIC_RELAXED),
				 __ATOMIC_RELAXED);
		__atomic_store_n(&g->state, g == gh_ev_tl_ring ?
				 GH_RING_OWNED : GH_RING_FREE,
				 __ATOMIC_RELAXED);
	}
	if (gh_ev.fd >= 0 && !gh_ev.is_stderr)
		close(gh_ev.fd);
	gh_ev.fd = -1;
	gh_buf_reset(&gh_ev.out);
	gh_ev.is_fork_child = 1;
	__atomic_store_n(&gh_ev.stop, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&gh_ev.written, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&gh_ev.dropped, 0, __ATOMIC_RELAXED);
	s = __atomic_load_n(&gh_ev.state, __ATOMIC_RELAXED);
	if (s != GH_EV_OFF)
		__atomic_store_n(&gh_ev.state, GH_EV_IDLE, __ATOMIC_RELEASE);
	gh_ev_fork_held = 0;
	pthread_mutex_unlock(&gh_ev.lock);
}
