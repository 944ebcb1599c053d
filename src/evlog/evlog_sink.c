// SPDX-License-Identifier: MIT
/*
 * The event log's sinks: see evlog_sink.h.
 *
 * The sink is opened non-blocking and written with SIGPIPE held off; a
 * sink that cannot be opened or stops accepting is abandoned with one
 * message, and every event it did not take is counted as dropped.
 *
 * The log's fd is the shim's, not a number: it sits high (gh_fd_own) and
 * is checked by dev/ino before each write and close.  A program that
 * closed it and opened its own file on that number, or dup2()ed over it,
 * never gets our records; the log is opened again by its path.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gdrhook.h"
#include "base/base.h"
#include "evrec.h"
#include "evspool.h"
#include "evlog_state.h"
#include "evlog_sink.h"

/* two escaped strings (6 bytes per input byte at worst) + the rest */
_Static_assert(2 * (6 * GH_EV_STR_MAX + 2) + 512 <= GH_EV_LINE_MAX,
	       "an event line may not fit GH_EV_LINE_MAX");
_Static_assert(6 * PATH_MAX + 512 <= GH_EV_OUTBUF, "start line too long");

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
/* path expansion                                                    */

/* The grammar is base's (gh_path_expand), shared with GDRHOOK_LOG_FILE. */
int gh_ev_expand(const char *tmpl, pid_t pid, char *dst, size_t cap)
{
	return gh_path_expand(tmpl, pid, dst, cap);
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
/* output (all under the log's lock)                                */

/*
 * What err means for a log, in words: strerror's text, and what it means
 * here where that text alone would mislead or not say enough.
 */
void gh_ev_put_err(struct gh_buf *b, int err)
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
static void gh_ev_abandon(struct gh_ev_log *ev, const char *why, int err,
			  uint64_t lost)
{
	char text[256];
	struct gh_buf b;

	GH_ASSERT_LOCKED(&ev->lock);
	__atomic_store_n(&ev->dead, 1, __ATOMIC_RELAXED);
	gh_ev_drop(ev, lost);
	gh_buf_init(&b, text, sizeof(text));
	gh_ev_put_err(&b, -err);
	gh_buf_cstr(&b);
	gh_warn("event log %s: %s: %s; no more events are written, "
		"%llu lost so far (the exit counts say how many in all)",
		ev->is_stderr ? GH_EV_STDERR :
		ev->opened[0] ? ev->opened : ev->path, why, text,
		(unsigned long long)gh_ev_dropped(ev));
	if (!ev->is_stderr)
		gh_fd_close(&ev->sink);
	ev->sink.fd = -2;
}


/*
 * Before each write: is the log's fd still the file we opened?  The
 * program may have closed it (close_range) and opened its own on that
 * number, or dup2()ed over it: then it is not ours to write into or to
 * close.  The log is opened again by its path (as at first: O_APPEND,
 * never through a symlink) or, failing that, abandoned.  Returns 1 when
 * ev->sink.fd may be written.
 */
static int gh_ev_sink_ready(struct gh_ev_log *ev)
{
	int fd;

	if (ev->sink.fd < 0)
		return 0;
	if (ev->is_stderr || gh_fd_ours(&ev->sink))
		return 1;
	gh_log_once(GH_LOG_INFO, "event log %s: the program closed or "
		    "replaced its descriptor; opened again by its path",
		    ev->sink_path);
	/* a dup of stderr (recovery) has no path to open again */
	fd = ev->sink_path && ev->sink_path[0] == '/' ?
	     gh_ev_open_sink(ev->sink_path, 0) : -EBADF;
	if (fd >= 0)
		fd = gh_fd_own(fd, &ev->sink);
	if (fd < 0) {
		ev->sink.fd = -1;	/* never closed: not ours */
		gh_ev_abandon(ev, "cannot be opened again after the program closed "
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
static void gh_ev_out_flush(struct gh_ev_log *ev)
{
	size_t done = 0;
	int err;

	if (!ev->out.len)
		goto out;
	if (!gh_ev_sink_ready(ev)) {
		gh_ev_drop(ev, ev->out_recs);
		goto out;
	}
	err = gh_write_nosig(ev->sink.fd, ev->out.p, ev->out.len,
			     GH_EV_STALL_MS, &done);
	if (err) {
		uint64_t took = 0;

		/* whole lines taken: count the newlines that went out */
		for (size_t i = 0; i < done; i++)
			took += ev->out.p[i] == '\n';
		if (took > ev->out_recs)
			took = ev->out_recs;
		__atomic_add_fetch(&ev->written, took, __ATOMIC_RELAXED);
		gh_ev_abandon(ev, "write failed", err, ev->out_recs - took);
	} else {
		__atomic_add_fetch(&ev->written, ev->out_recs,
				   __ATOMIC_RELAXED);
	}
out:
	gh_buf_reset(&ev->out);
	ev->out_recs = 0;
}

/* A line that is not an event (start, fork, exit): written on its own. */
static struct gh_buf *gh_ev_meta_line(struct gh_ev_log *ev)
{
	if (ev->out.len)
		gh_ev_out_flush(ev);
	return &ev->out;
}

static void gh_ev_meta_done(struct gh_ev_log *ev)
{
	size_t done = 0;
	int err;

	if (ev->out.len && gh_ev_sink_ready(ev)) {
		err = gh_write_nosig(ev->sink.fd, ev->out.p, ev->out.len,
				     GH_EV_STALL_MS, &done);
		if (err)
			gh_ev_abandon(ev, "write failed", err, 0);
	}
	gh_buf_reset(&ev->out);
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
int gh_ev_open_sink(const char *path, int end_torn)
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

void gh_ev_out_init(struct gh_ev_log *ev)
{
	gh_buf_init(&ev->out, ev->outbuf, sizeof(ev->outbuf));
	ev->out_recs = 0;
}

/* Open the file (first use in this process) and write "start" [+ "fork"]. */
void gh_ev_open_locked(struct gh_ev_log *ev)
{
	char exe[PATH_MAX];
	struct gh_buf *b;
	ssize_t n;
	int saved = errno, fd;

	GH_ASSERT_LOCKED(&ev->lock);
	if (ev->sink.fd != -1)
		return;
	/* said by a process that logs, not by every one that starts */
	if ((uint64_t)ev->ring_recs * sizeof(struct gh_evrec) !=
	    ev->asked_bytes) {
		/* the value as the user wrote it ("100g"), not its bytes */
		const char *set = gh_config_setting("TRACE_BUFFER");
		char num[GH_FMT_NUM_MAX + 32];

		if (!set) {
			gh_str_printf(num, sizeof(num), "GDRHOOK_TRACE_BUFFER=%llu",
				      (unsigned long long)ev->asked_bytes);
			set = num;
		}
		gh_log_once(GH_LOG_WARN, "%s: each "
			    "thread's ring holds %u events (%llu bytes) "
			    "instead: a ring holds a power of two of %u-byte "
			    "events, %u to %u", set,
			    ev->ring_recs,
			    (unsigned long long)ev->ring_recs *
				    sizeof(struct gh_evrec),
			    (unsigned int)sizeof(struct gh_evrec),
			    GH_EV_MIN_RECS, GH_EV_MAX_RECS);
	}
	if (ev->is_stderr) {
		ev->sink.fd = STDERR_FILENO;
	} else {
		fd = gh_ev_expand(ev->path, getpid(), ev->opened,
				  sizeof(ev->opened));
		ev->sink_path = ev->opened;
		if (!fd)
			fd = gh_ev_open_sink(ev->opened, ev->after_exec);
		if (fd >= 0)
			fd = gh_fd_own(fd, &ev->sink);
		if (fd < 0) {
			gh_ev_abandon(ev, "cannot open", fd, 0);
			errno = saved;
			return;
		}
	}
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	exe[n > 0 ? n : 0] = '\0';

	b = gh_ev_meta_line(ev);
	gh_buf_lit(b, "{\"ev\":\"start\",\"v\":");
	gh_buf_u64(b, GH_EV_FORMAT_VERSION);
	GH_KV_U(b, "t", ev->start_t);
	GH_KV_I(b, "pid", getpid());
	GH_KV_I(b, "tid",
		__atomic_load_n(&ev->first_tid, __ATOMIC_RELAXED));
	GH_KEY(b, "exe");
	gh_buf_json_str(b, exe, sizeof(exe));
	GH_KV_U(b, "wall_ns", ev->start_wall);
	GH_KV_BOOL(b, "crash_safe", gh_spool_active());
	GH_KEY(b, "mode");
	if (ev->block)
		gh_buf_lit(b, "\"block\"");
	else
		gh_buf_lit(b, "\"drop\"");
	gh_buf_lit(b, "}\n");
	if (ev->is_fork_child) {
		gh_buf_lit(b, "{\"ev\":\"fork\",\"parent\":");
		gh_buf_i64(b, ev->parent);
		GH_KV_U(b, "t", ev->start_t);
		GH_KV_I(b, "pid", getpid());
		GH_KV_I(b, "tid",
			__atomic_load_n(&ev->first_tid, __ATOMIC_RELAXED));
		gh_buf_lit(b, "}\n");
	}
	gh_ev_meta_done(ev);
	errno = saved;
}

/* Format slots tail..head of one ring into the buffer; write as it fills. */
uint64_t gh_ev_drain_ring(struct gh_ev_log *ev, struct gh_ring *g, pid_t pid)
{
	uint64_t t = __atomic_load_n(&g->tail, __ATOMIC_RELAXED);
	uint64_t h = __atomic_load_n(&g->head, __ATOMIC_ACQUIRE);
	uint64_t n = 0;

	GH_ASSERT_LOCKED(&ev->lock);
	while (t != h) {
		if (gh_buf_room(&ev->out) < GH_EV_LINE_MAX) {
			/* written (or counted lost): free the slots */
			gh_ev_out_flush(ev);
			__atomic_store_n(&g->tail, t, __ATOMIC_RELEASE);
		}
		if (ev->sink.fd >= 0) {
			gh_ev_format_record(&ev->out, &g->rec[t & gh_ring_mask(g)], pid);
			ev->out_recs++;
		} else {
			gh_ev_drop(ev, 1);
		}
		t++;
		n++;
	}
	gh_ev_out_flush(ev);
	__atomic_store_n(&g->tail, t, __ATOMIC_RELEASE);
	return n;
}


/*
 * The "recovered" record of a dead process's spool (evlog_recover.c), n:
 * the records it still held; written before them.
 */
void gh_ev_put_recovered(struct gh_ev_log *ev, const struct gh_spool_dead *d,
			 uint64_t n)
{
	struct gh_buf *b;

	GH_ASSERT_LOCKED(&ev->lock);
	b = gh_ev_meta_line(ev);
	gh_buf_lit(b, "{\"ev\":\"recovered\",\"t\":");
	gh_buf_u64(b, d->start_t);
	GH_KV_I(b, "pid", d->pid);
	GH_KV_U(b, "wall_ns", d->start_wall);
	GH_KV_U(b, "events", n);
	GH_KV_U(b, "dropped", d->dropped);
	GH_KV_I(b, "by", getpid());
	gh_buf_lit(b, "}\n");
	gh_ev_meta_done(ev);
}

/* At exit, everything drained: write "exit", close the log. */
void gh_ev_close_locked(struct gh_ev_log *ev, uint64_t live,
			uint64_t live_bytes, uint64_t dropped)
{
	struct gh_buf *b;

	GH_ASSERT_LOCKED(&ev->lock);
	if (ev->sink.fd >= 0) {
		b = gh_ev_meta_line(ev);
		gh_buf_lit(b, "{\"ev\":\"exit\",\"t\":");
		gh_buf_u64(b, gh_now_ns());
		GH_KV_I(b, "pid", getpid());
		GH_KV_I(b, "tid", gh_gettid());
		GH_KV_U(b, "events", gh_ev_written(ev));
		GH_KV_U(b, "dropped", dropped);
		GH_KV_U(b, "live", live);
		GH_KV_U(b, "live_bytes", live_bytes);
		gh_buf_lit(b, "}\n");
		gh_ev_meta_done(ev);
		if (!ev->is_stderr && ev->sink.fd >= 0)
			gh_fd_close(&ev->sink);
	}
	ev->sink.fd = -1;
}

/* Lock held, taken by the parent's thread: no assertion (its owner). */
void gh_ev_sink_atfork_child(struct gh_ev_log *ev)
{
	/* the parent's log, ours only while dev/ino say so */
	if (ev->sink.fd >= 0 && !ev->is_stderr)
		gh_fd_close(&ev->sink);
	ev->sink.fd = -1;
	ev->dead = 0;
	gh_buf_reset(&ev->out);
	ev->out_recs = 0;
	ev->is_fork_child = 1;
}
