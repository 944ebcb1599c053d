// SPDX-License-Identifier: MIT
/*
 * The event log's descriptors and the program's own (issue "never stale,
 * never hurt", 13-15): a program that closes every descriptor, opens its
 * own files on the same numbers, dup2()s over the log's and the spool's,
 * or forks and closes in the child must find its files exactly as it
 * wrote them, and its pipe open.  Each case runs this program again, as
 * a scenario, under GDRHOOK_TRACE; the file checks happen after the
 * scenario exited (the log's last records are written at exit).
 */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#pragma GCC diagnostic ignored "-Wunused-function"
#include "preload_util.h"

/*
 * The sanitizer runtimes cannot start a thread in the child of a
 * threaded fork (tsan: "dup thread with used id"; asan: an allocator
 * lock a parent thread held stays locked): there the fork is left out.
 */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define UNDER_SAN 1
#else
#define UNDER_SAN 0
#endif

#define PROG_TEXT	"program\n"
#define LONG_LEN	(256 << 10)

static void pairs(int n)
{
	CUdeviceptr p;

	for (int i = 0; i < n; i++) {
		if (!cuMemAlloc(&p, 4096))
			cuMemFree(p);
	}
}

static void *pairs_thread(void *arg)
{
	cuCtxSetCurrent((CUcontext)arg);
	pairs(50);
	return NULL;
}

/* A thread that records its first event now (it takes a new ring). */
static void pairs_in_new_thread(void)
{
	pthread_t th;

	pthread_create(&th, NULL, pairs_thread, primary_ctx(0));
	pthread_join(th, NULL);
}

/* close_range(lo, hi), or one by one where the kernel lacks it. */
static void close_from(unsigned int lo, unsigned int hi)
{
	if (syscall(SYS_close_range, lo, hi, 0) == 0)
		return;
	for (unsigned int fd = lo; fd <= hi && fd < 65536; fd++)
		close((int)fd);
}

/* A file of the program's: text, or LONG_LEN bytes of 'A' when long. */
static int prog_file(const char *var, int is_long)
{
	const char *path = getenv(var);
	static char a[LONG_LEN];
	int fd;

	if (!path)
		return -1;
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		return -1;
	if (is_long) {
		memset(a, 'A', sizeof(a));
		if (write(fd, a, sizeof(a)) != (ssize_t)sizeof(a))
			return -1;
	} else if (write(fd, PROG_TEXT, strlen(PROG_TEXT)) !=
		   (ssize_t)strlen(PROG_TEXT)) {
		return -1;
	}
	return fd;
}

/* Everything the pipe holds, until every writer is gone. */
static int pipe_is(int rfd, const char *want)
{
	char buf[4096];
	size_t got = 0;
	ssize_t n;

	while ((n = read(rfd, buf + got, sizeof(buf) - 1 - got)) > 0)
		got += (size_t)n;
	if (n < 0)
		return 0;
	buf[got] = 0;
	return !strcmp(buf, want);
}

/* ---- scenarios ---- */

/*
 * The program closes every descriptor but stdio, then opens a short
 * file and a pipe (on the numbers the log and the spool had), records
 * from a new thread, forks a child that closes what it does not use,
 * opens its own file and records too.
 */
static int scenario_closeall(void)
{
	int f, p[2], st;
	pid_t pid;

	primary_ctx(0);
	pairs(20);
	gdrhook_flush_log();		/* the log and the spool are open */
	close_from(3, ~0U);
	f = prog_file("FDT_FILE", 0);
	if (f < 0 || pipe(p))
		return 100;
	pairs_in_new_thread();
	pairs(20);
	gdrhook_flush_log();
	if (UNDER_SAN) {
		if (write(p[1], "child\nparent\n", 13) != 13)
			return 105;
		close(p[1]);
		if (!pipe_is(p[0], "child\nparent\n"))
			return 106;
		return prog_file("FDT_CHILD", 0) < 0 ? 102 : 7;
	}
	pid = fork();
	if (pid < 0)
		return 101;
	if (pid == 0) {
		int c;

		pairs(5);
		gdrhook_flush_log();
		close(p[0]);
		if (p[1] > 3)
			close_from(3, (unsigned int)p[1] - 1);
		close_from((unsigned int)p[1] + 1, ~0U);
		c = prog_file("FDT_CHILD", 0);
		if (c < 0)
			_exit(102);
		pairs_in_new_thread();
		pairs(5);
		gdrhook_flush_log();
		if (write(p[1], "child\n", 6) != 6)
			_exit(103);
		exit(0);	/* the shim writes its last records now */
	}
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) ||
	    WEXITSTATUS(st))
		return 104;
	if (write(p[1], "parent\n", 7) != 7)
		return 105;
	close(p[1]);
	if (!pipe_is(p[0], "child\nparent\n"))
		return 106;
	pairs(5);
	return 7;
}

/* The number /proc/self/fd shows for a file whose path contains what. */
static int fd_of(const char *what)
{
	char link[300], target[4096];
	struct dirent *e;
	DIR *d = opendir("/proc/self/fd");
	int fd = -1;

	if (!d)
		return -1;
	while ((e = readdir(d))) {
		ssize_t n;

		snprintf(link, sizeof(link), "/proc/self/fd/%s", e->d_name);
		n = readlink(link, target, sizeof(target) - 1);
		if (n <= 0)
			continue;
		target[n] = 0;
		if (strstr(target, what) && atoi(e->d_name) != dirfd(d))
			fd = atoi(e->d_name);
	}
	closedir(d);
	return fd;
}

/*
 * The program dup2()s its own files over the log's and the spool's
 * numbers (a long one over the spool: a ring mapped from it would fit),
 * then records from a new thread and from this one.
 */
static int scenario_dup2(void)
{
	int lfd, sfd, a, b;

	primary_ctx(0);
	pairs(20);
	gdrhook_flush_log();
	lfd = fd_of(getenv("GDRHOOK_TRACE"));
	sfd = fd_of("gdrhook-spool.");
	if (lfd < 0 || sfd < 0)
		return 100;
	a = prog_file("FDT_FILE", 0);
	b = prog_file("FDT_LONG", 1);
	if (a < 0 || b < 0)
		return 101;
	if (dup2(a, lfd) != lfd || dup2(b, sfd) != sfd)
		return 102;
	pairs_in_new_thread();
	pairs(20);
	gdrhook_flush_log();
	return 7;
}

static const struct scenario scenarios[] = {
	{ "closeall", scenario_closeall },
	{ "dup2", scenario_dup2 },
};

/* ---- helpers ---- */

static char *slurp(const char *path, size_t *len)
{
	static char buf[LONG_LEN + 4096];
	int fd = open(path, O_RDONLY);
	ssize_t n = 0, r;

	buf[0] = 0;
	if (fd >= 0) {
		while ((r = read(fd, buf + n, sizeof(buf) - 1 - n)) > 0)
			n += r;
		close(fd);
	}
	buf[n] = 0;
	if (len)
		*len = (size_t)n;
	return buf;
}

static int count_str(const char *hay, const char *needle)
{
	int n = 0;

	for (const char *p = hay; (p = strstr(p, needle)); p++)
		n++;
	return n;
}

static void check_long(const char *path)
{
	size_t len;
	const char *s = slurp(path, &len);

	CHECK_EQ(len, LONG_LEN);
	for (size_t i = 0; i < len; i++)
		if (s[i] != 'A')
			TH_FAIL("%s: byte %zu is not the program's", path, i);
}

#define ENV(...) ((const char *const[]){ __VA_ARGS__, NULL })

/* ---- cases ---- */

TEST(close_all_then_reuse_numbers_program_files_intact)
{
	char log[256], file[256], child[256], v[4][300];
	const char *l;

	log_path(log, sizeof(log), "log");
	log_path(file, sizeof(file), "file");
	log_path(child, sizeof(child), "child");
	snprintf(v[0], sizeof(v[0]), "GDRHOOK_TRACE=%s", log);
	snprintf(v[1], sizeof(v[1]), "FDT_FILE=%s", file);
	snprintf(v[2], sizeof(v[2]), "FDT_CHILD=%s", child);
	CHECK_EQ(run_scenario_err("closeall", ENV(v[0], v[1], v[2],
					 "GDRHOOK_TRACE_BUFFER=4096"), NULL), 7);
	CHECK_STR(slurp(file, NULL), PROG_TEXT);
	CHECK_STR(slurp(child, NULL), PROG_TEXT);
	/* the log went on after the program closed it: both exits in it */
	l = slurp(log, NULL);
	CHECK_EQ(count_str(l, "\"ev\":\"exit\""), UNDER_SAN ? 1 : 2);
	unlink(log);
	unlink(file);
	unlink(child);
}

TEST(dup2_over_log_and_spool_program_files_intact)
{
	char log[256], file[256], lng[256], v[3][300];

	log_path(log, sizeof(log), "log");
	log_path(file, sizeof(file), "file");
	log_path(lng, sizeof(lng), "long");
	snprintf(v[0], sizeof(v[0]), "GDRHOOK_TRACE=%s", log);
	snprintf(v[1], sizeof(v[1]), "FDT_FILE=%s", file);
	snprintf(v[2], sizeof(v[2]), "FDT_LONG=%s", lng);
	CHECK_EQ(run_scenario_err("dup2", ENV(v[0], v[1], v[2],
				     "GDRHOOK_TRACE_BUFFER=4096"), NULL), 7);
	CHECK_STR(slurp(file, NULL), PROG_TEXT);
	check_long(lng);
	CHECK_EQ(count_str(slurp(log, NULL), "\"ev\":\"exit\""), 1);
	unlink(log);
	unlink(file);
	unlink(lng);
}

SCENARIO_MAIN(scenarios)
