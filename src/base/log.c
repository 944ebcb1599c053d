// SPDX-License-Identifier: MIT
/*
 * Diagnostics on stderr or in GDRHOOK_LOG_FILE (see log.h): one write(2)
 * per message, no malloc, no stdio, errno preserved, a per-thread
 * recursion guard and a cap on the number of messages per process.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "fmt.h"
#include "log.h"
#include "ownfd.h"

/* TLS behind gh_gettid() (clock.h is header-only). */
__thread int32_t gh_tid_cache_;

int gh_log_level = GH_LOG_WARN;

#define GH_LOG_MAX_MSGS	1000
#define GH_LOG_LINE	1024

static unsigned int gh_log_count;
static __thread int gh_log_busy;

static const char *const gh_log_names[] = {
	[GH_LOG_NONE] = "none",
	[GH_LOG_ERR] = "error",
	[GH_LOG_WARN] = "warning",
	[GH_LOG_INFO] = "info",
	[GH_LOG_DEBUG] = "debug",
};

/*
 * SIGPIPE is blocked around the write and, if the write raised it and it
 * was not already pending, taken back: a reader that went away must not
 * kill the program, and the program's own disposition is left alone.
 */
int gh_write_nosig(int fd, const char *p, size_t n, int stall_ms,
		   size_t *done_p)
{
	sigset_t pipe_set, old, pend;
	size_t done = 0;
	int err = 0, was_pending;

	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
	was_pending = !sigpending(&pend) && sigismember(&pend, SIGPIPE);
	while (done < n) {
		ssize_t w = write(fd, p + done, n - done);

		if (w > 0) {
			done += (size_t)w;
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			struct pollfd pf = { .fd = fd, .events = POLLOUT };
			int r = poll(&pf, 1, stall_ms);

			if (r > 0 && !(pf.revents & (POLLERR | POLLNVAL)))
				continue;
			if (r < 0 && errno == EINTR)
				continue;
			err = r == 0 ? -ETIMEDOUT : -EPIPE;
			break;
		}
		err = w < 0 ? -errno : -EIO;
		break;
	}
	if (err == -EPIPE && !was_pending) {
		struct timespec zero = { 0, 0 };

		while (sigtimedwait(&pipe_set, NULL, &zero) < 0 &&
		       errno == EINTR)
			;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (done_p)
		*done_p = done;
	return err;
}

/* ------------------------------------------------------- the file */

/*
 * GDRHOOK_LOG_FILE, opened at the first message (a process that says
 * nothing leaves no file).  Its descriptor is the shim's, not a number,
 * as the event trace's is (ownfd.h, evlog's gh_fd_own): moved high,
 * known by dev/ino and checked before each write, so a program that
 * closed it and opened its own file on that number never gets our lines,
 * and nothing of the program's is ever closed or written over.
 */
enum {
	GH_LF_STDERR,		/* no file, or it could not be opened */
	GH_LF_CLOSED,		/* a file, not yet open */
	GH_LF_OPENING,		/* one thread opens it */
	GH_LF_OPEN,
};
static int gh_lf_state;			/* atomic */
static char gh_lf_tmpl[PATH_MAX];	/* absolute, escapes unexpanded */
/* Written only under GH_LF_OPENING, read by any thread: atomic. */
static int gh_lf_fd = -1;
static dev_t gh_lf_dev;
static ino_t gh_lf_ino;
static pid_t gh_lf_pid;			/* the file was named for it */
#define LF_LD(v)	__atomic_load_n(&(v), __ATOMIC_RELAXED)
#define LF_ST(v, x)	__atomic_store_n(&(v), (x), __ATOMIC_RELAXED)

void gh_log_set_file(const char *tmpl)
{
	struct gh_buf b;
	char cwd[PATH_MAX];

	if (!tmpl || !*tmpl || !strcmp(tmpl, "stderr")) {
		__atomic_store_n(&gh_lf_state, GH_LF_STDERR, __ATOMIC_RELEASE);
		return;
	}
	/* relative to where the program started, as the trace's path */
	gh_buf_init(&b, gh_lf_tmpl, sizeof(gh_lf_tmpl));
	if (tmpl[0] != '/' && getcwd(cwd, sizeof(cwd))) {
		gh_buf_puts(&b, cwd);
		if (strcmp(cwd, "/"))
			gh_buf_putc(&b, '/');
	}
	gh_buf_puts(&b, tmpl);
	gh_buf_cstr(&b);
	__atomic_store_n(&gh_lf_state, b.truncated ? GH_LF_STDERR :
			 GH_LF_CLOSED, __ATOMIC_RELEASE);
}

static int gh_lf_ours(int fd)
{
	return gh_fd_is(fd, LF_LD(gh_lf_dev), LF_LD(gh_lf_ino));
}

/*
 * Open (again) under GH_LF_OPENING; 0 or -errno.  A fork child whose name
 * has %p gets its own file, put on the number the parent's file had here
 * (still ours: checked), so no thread ever writes to a number we closed.
 */
static int gh_lf_open(void)
{
	char path[PATH_MAX];
	struct stat st;
	int fd, hi, err, old;

	err = gh_path_expand(gh_lf_tmpl, getpid(), path, sizeof(path));
	if (err)
		return err;
	/* non-blocking: a FIFO with no reader refuses, never waits */
	fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC |
		  O_NOFOLLOW | O_NONBLOCK | O_NOCTTY, 0600);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st)) {
		err = -errno;
		close(fd);
		return err;
	}
	old = LF_LD(gh_lf_fd);
	if (gh_lf_ours(old) && dup3(fd, old, O_CLOEXEC) >= 0) {
		close(fd);
		fd = old;
	} else {
		hi = fcntl(fd, F_DUPFD_CLOEXEC, gh_fd_floor());
		if (hi >= 0) {
			close(fd);
			fd = hi;
		}
	}
	LF_ST(gh_lf_dev, st.st_dev);
	LF_ST(gh_lf_ino, st.st_ino);
	LF_ST(gh_lf_fd, fd);
	LF_ST(gh_lf_pid, getpid());
	return 0;
}

/* Where this message goes: the file, or stderr. */
static int gh_log_fd(void)
{
	int st = __atomic_load_n(&gh_lf_state, __ATOMIC_ACQUIRE), err, fd;

	for (int spins = 0; st == GH_LF_OPENING && spins < 10000; spins++) {
		sched_yield();
		st = __atomic_load_n(&gh_lf_state, __ATOMIC_ACQUIRE);
	}
	fd = LF_LD(gh_lf_fd);
	if (st == GH_LF_OPEN && gh_lf_ours(fd) &&
	    (LF_LD(gh_lf_pid) == getpid() || !strstr(gh_lf_tmpl, "%p")))
		return fd;
	if (st != GH_LF_OPEN && st != GH_LF_CLOSED)
		return STDERR_FILENO;
	/* first message, a fork child's, or the program closed ours */
	if (!__atomic_compare_exchange_n(&gh_lf_state, &st, GH_LF_OPENING, 0,
					 __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
		return gh_log_fd();
	err = gh_lf_open();
	__atomic_store_n(&gh_lf_state, err ? GH_LF_STDERR : GH_LF_OPEN,
			 __ATOMIC_RELEASE);
	if (!err)
		return LF_LD(gh_lf_fd);
	{
		char line[GH_LOG_LINE];
		struct gh_buf b;

		gh_buf_init(&b, line, sizeof(line) - 1);	/* room for '\n' */
		gh_log_prefix(&b, GH_LOG_WARN);
		gh_buf_printf(&b, "cannot write the diagnostics to GDRHOOK_LOG_FILE %s: %s; they go to stderr",
			      gh_lf_tmpl, gh_errtext(-err));
		line[b.len++] = '\n';
		gh_write_nosig(STDERR_FILENO, line, b.len, 1000, NULL);
	}
	return STDERR_FILENO;
}

static void gh_log_write(const char *p, size_t n)
{
	gh_write_nosig(gh_log_fd(), p, n, 1000, NULL);
}

/* ----------------------------------------------------------- prefix */

/* The short host name (up to its first dot, as NCCL prints it), found
 * once; a thread that races the first fill asks uname itself. */
static char gh_host[65];
static int gh_host_state;	/* atomic: 0 unknown, 1 filling, 2 ready */

void gh_log_host(struct gh_buf *b)
{
	struct utsname u;
	int st = __atomic_load_n(&gh_host_state, __ATOMIC_ACQUIRE);

	if (st == 2) {
		gh_buf_puts(b, gh_host);
		return;
	}
	if (uname(&u))
		u.nodename[0] = '\0';
	u.nodename[strcspn(u.nodename, ".")] = '\0';
	gh_buf_puts(b, u.nodename);
	if (!st && __atomic_compare_exchange_n(&gh_host_state, &st, 1, 0,
					       __ATOMIC_ACQUIRE,
					       __ATOMIC_RELAXED)) {
		memcpy(gh_host, u.nodename, sizeof(gh_host) - 1);
		__atomic_store_n(&gh_host_state, 2, __ATOMIC_RELEASE);
	}
}

void gh_log_prefix(struct gh_buf *b, int level)
{
	gh_buf_lit(b, "gdrhook[");
	gh_log_host(b);
	gh_buf_putc(b, ':');
	gh_buf_i64(b, getpid());
	gh_buf_putc(b, ':');
	gh_buf_i64(b, gh_gettid());
	gh_buf_lit(b, "]: ");
	gh_buf_puts(b, level >= GH_LOG_NONE && level <= GH_LOG_DEBUG ?
			gh_log_names[level] : "log");
	gh_buf_lit(b, ": ");
}

void gh_log_emit(int level, const char *fmt, ...)
{
	char line[GH_LOG_LINE];
	struct gh_buf b;
	unsigned int n;
	va_list ap;
	int saved = errno;

	if (gh_log_busy)
		return;		/* a message from inside a message */
	gh_log_busy = 1;

	n = __atomic_add_fetch(&gh_log_count, 1, __ATOMIC_RELAXED);
	if (n > GH_LOG_MAX_MSGS + 1)
		goto out;

	gh_buf_init(&b, line, sizeof(line) - 1);	/* room for '\n' */
	if (n == GH_LOG_MAX_MSGS + 1) {
		gh_log_prefix(&b, GH_LOG_WARN);
		gh_buf_lit(&b, "further messages suppressed");
	} else {
		gh_log_prefix(&b, level);
		va_start(ap, fmt);
		gh_buf_vprintf(&b, fmt, ap);
		va_end(ap);
		if (b.truncated && b.len >= 3) {
			b.p[b.len - 3] = '.';
			b.p[b.len - 2] = '.';
			b.p[b.len - 1] = '.';
		}
	}
	line[b.len++] = '\n';
	gh_log_write(line, b.len);
out:
	gh_log_busy = 0;
	errno = saved;
}

const char *gh_errtext(int err)
{
	static __thread char buf[24];
	const char *t = err > 0 ? strerrordesc_np(err) : NULL;

	if (t)
		return t;
	gh_str_printf(buf, sizeof(buf), "error %d", err);
	return buf;
}
