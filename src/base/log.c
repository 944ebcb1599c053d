// SPDX-License-Identifier: MIT
/*
 * Diagnostics on stderr (see log.h): one write(2) per message, no malloc,
 * no stdio, errno preserved, a per-thread recursion guard and a cap on the
 * number of messages per process.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "fmt.h"
#include "log.h"

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

static void gh_log_write(const char *p, size_t n)
{
	gh_write_nosig(STDERR_FILENO, p, n, 1000, NULL);
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
	gh_buf_lit(&b, "gdrhook[");
	gh_buf_i64(&b, getpid());
	gh_buf_lit(&b, "]: ");
	if (n == GH_LOG_MAX_MSGS + 1) {
		gh_buf_lit(&b, "warning: further messages suppressed");
	} else {
		gh_buf_puts(&b, level >= GH_LOG_NONE && level <= GH_LOG_DEBUG ?
				gh_log_names[level] : "log");
		gh_buf_lit(&b, ": ");
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
