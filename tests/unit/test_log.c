// SPDX-License-Identifier: MIT
/*
 * log.c (prefix host:pid:tid, levels, one line per message, errno,
 * message cap, GDRHOOK_LOG_FILE) and clock.h (the cached tid).  fmt.c and
 * tslot.c have their own tests (test_fmt.c, test_tslot.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

#include "base/base.h"

/* ---------------------------------------------------------------- */
/* log.c                                                             */

static char errpath[64];

/* The host as the prefix names it: the node name up to its first dot. */
static const char *nodename(void)
{
	static struct utsname u;

	CHECK_EQ(uname(&u), 0);
	return u.nodename;
}

static const char *host(void)
{
	static char h[sizeof(((struct utsname *)0)->nodename)];

	snprintf(h, sizeof(h), "%s", nodename());
	h[strcspn(h, ".")] = '\0';
	return h;
}

/* Send fd 2 to a fresh file. */
static void capture_stderr(void)
{
	int fd;

	snprintf(errpath, sizeof(errpath), "/tmp/gh_logtest.XXXXXX");
	fd = mkstemp(errpath);
	CHECK(fd >= 0);
	fflush(stderr);
	CHECK(dup2(fd, 2) == 2);
	close(fd);
}

static char *captured(void)
{
	static char buf[1 << 17];
	int fd = open(errpath, O_RDONLY);
	ssize_t n;

	CHECK(fd >= 0);
	n = read(fd, buf, sizeof(buf) - 1);
	CHECK(n >= 0);
	buf[n] = '\0';
	close(fd);
	unlink(errpath);
	return buf;
}

TEST(log_prefix_levels_errno)
{
	char want[512];
	char *out;

	capture_stderr();
	CHECK_EQ(gh_log_level, GH_LOG_WARN);
	errno = 4321;
	gh_warn("w %d %s %p", 7, "x", (void *)0x10);
	CHECK_EQ(errno, 4321);
	gh_err("e");
	gh_info("info is below the level");
	gh_dbg("so is debug");
	gh_log_level = GH_LOG_DEBUG;
	gh_dbg("d %zu", (size_t)3);
	gh_log_level = GH_LOG_NONE;
	gh_err("none: not even errors");
	CHECK_EQ(errno, 4321);
	out = captured();
	snprintf(want, sizeof(want),
		 "gdrhook[%s:%d:%d]: warning: w 7 x 0x10\n"
		 "gdrhook[%s:%d:%d]: error: e\n"
		 "gdrhook[%s:%d:%d]: debug: d 3\n", host(), getpid(), gettid(),
		 host(), getpid(), gettid(), host(), getpid(), gettid());
	CHECK_STR(out, want);
}

/* Another thread's lines carry its own tid (NCCL's host:pid:tid). */
static void *warn_thread(void *arg)
{
	*(pid_t *)arg = gettid();
	gh_warn("from a thread");
	return NULL;
}

TEST(log_prefix_tid_per_thread)
{
	char want[512];
	pthread_t t;
	pid_t tid;

	capture_stderr();
	CHECK_EQ(pthread_create(&t, NULL, warn_thread, &tid), 0);
	CHECK_EQ(pthread_join(t, NULL), 0);
	CHECK(tid != getpid());
	snprintf(want, sizeof(want), "gdrhook[%s:%d:%d]: warning: from a thread\n",
		 host(), getpid(), tid);
	CHECK_STR(captured(), want);
}

/* ---------------------------------------------------------------- */
/* GDRHOOK_LOG_FILE (gh_log_set_file)                                */

static char logdir[64];

static const char *fresh_dir(void)
{
	snprintf(logdir, sizeof(logdir), "/tmp/gh_logfile.XXXXXX");
	CHECK(mkdtemp(logdir));
	return logdir;
}

static void rm_dir(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", logdir);
	CHECK_EQ(system(cmd), 0);
}

static char *slurp(const char *path)
{
	static char buf[1 << 14];
	int fd = open(path, O_RDONLY);
	ssize_t n;

	if (fd < 0)
		return NULL;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n < 0 ? 0 : n] = '\0';
	return buf;
}

/* The fd (in /proc/self/fd) open on path, or -1. */
static int fd_on(const char *path)
{
	char link[64], target[256];

	for (int fd = 0; fd < 4096; fd++) {
		ssize_t n;

		snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
		n = readlink(link, target, sizeof(target) - 1);
		if (n < 0)
			continue;
		target[n] = '\0';
		if (!strcmp(target, path))
			return fd;
	}
	return -1;
}

/* %h and %p expand; the messages go there and not to stderr; appended. */
TEST(log_file_escapes_and_nothing_on_stderr)
{
	char tmpl[128], path[192];
	char *out;
	int fd;

	fresh_dir();
	snprintf(tmpl, sizeof(tmpl), "%s/d.%%h.%%p.%%%%.log", logdir);
	snprintf(path, sizeof(path), "%s/d.%s.%d.%%.log", logdir,
		 nodename(), getpid());
	fd = open(path, O_WRONLY | O_CREAT, 0600);
	CHECK(fd >= 0 && write(fd, "old\n", 4) == 4);
	close(fd);
	capture_stderr();
	gh_log_set_file(tmpl);
	errno = 77;
	gh_warn("to the file %d", 1);
	CHECK_EQ(errno, 77);
	gh_err("and %s", "again");
	CHECK_STR(captured(), "");
	out = slurp(path);
	CHECK(out);
	CHECK(!strncmp(out, "old\n", 4));
	CHECK(strstr(out, "]: warning: to the file 1\n"));
	CHECK(strstr(out, "]: error: and again\n"));
	/* high and close-on-exec: none of the program's numbers */
	CHECK(fd_on(path) > 100);
	CHECK(fcntl(fd_on(path), F_GETFD) & FD_CLOEXEC);
	rm_dir();
}

/* No file until the first message: a quiet process leaves none. */
TEST(log_file_opened_at_the_first_message)
{
	char tmpl[128];

	fresh_dir();
	snprintf(tmpl, sizeof(tmpl), "%s/quiet.log", logdir);
	gh_log_set_file(tmpl);
	gh_info("below the level: nothing");
	CHECK(access(tmpl, F_OK) < 0 && errno == ENOENT);
	gh_warn("now");
	CHECK(access(tmpl, F_OK) == 0);
	rm_dir();
}

/* A file that cannot be opened: one warning on stderr, then stderr. */
TEST(log_file_unopenable_falls_back_to_stderr_once)
{
	char *out;

	capture_stderr();
	gh_log_set_file("/nonexistent-dir/gh.log");
	gh_warn("first");
	gh_warn("second");
	out = captured();
	CHECK(strstr(out, "]: warning: cannot write the diagnostics to GDRHOOK_LOG_FILE /nonexistent-dir/gh.log: No such file or directory; they go to stderr\n"));
	CHECK(strstr(out, "]: warning: first\n"));
	CHECK(strstr(out, "]: warning: second\n"));
	CHECK(!strstr(strstr(out, "cannot write") + 1, "cannot write"));
}

/* "stderr" and "" mean stderr. */
TEST(log_file_stderr_word)
{
	capture_stderr();
	gh_log_set_file("stderr");
	gh_warn("here");
	CHECK(strstr(captured(), "]: warning: here\n"));
}

/*
 * The program closes our file and puts its own on that number: its file
 * never gets a line, ours is opened again by its name.
 */
TEST(log_file_program_closes_and_reuses_the_number)
{
	char tmpl[128], mine[128];
	int fd, p;

	fresh_dir();
	snprintf(tmpl, sizeof(tmpl), "%s/ours.log", logdir);
	snprintf(mine, sizeof(mine), "%s/program.txt", logdir);
	gh_log_set_file(tmpl);
	gh_warn("one");
	fd = fd_on(tmpl);
	CHECK(fd > 2);
	CHECK_EQ(close(fd), 0);
	p = open(mine, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	CHECK(p >= 0);
	CHECK_EQ(dup2(p, fd), fd);
	close(p);
	gh_warn("two");
	CHECK_STR(slurp(mine), "");
	CHECK(strstr(slurp(tmpl), "]: warning: one\n"));
	CHECK(strstr(slurp(tmpl), "]: warning: two\n"));
	/* the program's descriptor is still its own, still open */
	CHECK(fd_on(mine) == fd);
	rm_dir();
}

/* A fork child of a %p file writes its own file. */
TEST(log_file_fork_child_gets_its_own)
{
	char tmpl[128], path[192];
	pid_t pid;
	int st;

	fresh_dir();
	snprintf(tmpl, sizeof(tmpl), "%s/f.%%p.log", logdir);
	gh_log_set_file(tmpl);
	gh_warn("parent before");
	pid = fork();
	CHECK(pid >= 0);
	if (!pid) {
		gh_warn("child");
		_exit(0);
	}
	CHECK_EQ(waitpid(pid, &st, 0), pid);
	CHECK(WIFEXITED(st) && !WEXITSTATUS(st));
	gh_warn("parent after");
	snprintf(path, sizeof(path), "%s/f.%d.log", logdir, pid);
	CHECK(slurp(path) && strstr(slurp(path), "]: warning: child\n"));
	CHECK(!strstr(slurp(path), "parent"));
	snprintf(path, sizeof(path), "%s/f.%d.log", logdir, getpid());
	CHECK(strstr(slurp(path), "]: warning: parent before\n"));
	CHECK(strstr(slurp(path), "]: warning: parent after\n"));
	CHECK(!strstr(slurp(path), "child"));
	rm_dir();
}

TEST(log_long_message_truncated_one_line)
{
	char big[3000];
	char *out;
	size_t n;

	memset(big, 'q', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	capture_stderr();
	gh_warn("%s", big);
	out = captured();
	n = strlen(out);
	CHECK(n > 500 && n <= 1024);
	CHECK(out[n - 1] == '\n');
	CHECK(strchr(out, '\n') == out + n - 1);
	CHECK(!strncmp(out + n - 4, "...", 3));
}

TEST(log_cap)
{
	char *out;
	int lines = 0;

	capture_stderr();
	for (int i = 0; i < 1500; i++)
		gh_warn("m %d", i);
	out = captured();
	for (char *p = out; *p; p++)
		lines += *p == '\n';
	CHECK_EQ(lines, 1001);
	CHECK(strstr(out, "m 999\n"));
	CHECK(!strstr(out, "m 1000\n"));
	CHECK(strstr(out, "further messages suppressed\n"));
}

TEST(gettid_cached_and_reset)
{
	int32_t t = gh_gettid();
	pid_t pid;
	int st;

	CHECK_EQ(t, getpid());		/* the test runs in a child's main */
	CHECK_EQ(gh_gettid(), t);
	CHECK(gh_now_ns() > 0);
	CHECK(gh_now_ns() <= gh_now_ns());
	pid = fork();
	if (pid == 0) {
		/* stale without the atfork reset */
		int ok = gh_gettid() == t;

		gh_clock_atfork_child();
		ok = ok && gh_gettid() == getpid();
		_exit(ok ? 0 : 1);
	}
	CHECK(waitpid(pid, &st, 0) == pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

TEST_MAIN()
