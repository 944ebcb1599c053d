// SPDX-License-Identifier: MIT
/*
 * The event log out of room (issue "never stale, never hurt", 16, 17,
 * 19): a tiny or full /dev/shm must not kill the program (a store into
 * an unreserved tmpfs page takes SIGBUS), a full disk under the log
 * leaves its exit status alone and says why in words, a killed process's
 * drops are recovered with its records, and a GDRHOOK_TRACE_BUFFER the
 * ring cannot honour is said once.  The /dev/shm cases run in a private
 * mount namespace with a tmpfs of their own (skipped where mounting is
 * not permitted).
 */
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>

#pragma GCC diagnostic ignored "-Wunused-function"
#include "preload_util.h"

#define NTHREADS	6
#define PAIRS		2000

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
	pairs(PAIRS);
	return NULL;
}

/* ---- scenarios ---- */

/* Six threads log at once (NCCL, a DataLoader): every ring is touched. */
static int scenario_threads(void)
{
	CUcontext ctx = primary_ctx(0);
	pthread_t th[NTHREADS];

	for (int i = 0; i < NTHREADS; i++)
		pthread_create(&th[i], NULL, pairs_thread, ctx);
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	return 7;
}

/* Drop (a tiny ring, no waiting), then die without an exit record. */
static int scenario_killed_dropping(void)
{
	primary_ctx(0);
	pairs(PAIRS);
	raise(SIGKILL);
	return 0;
}

static int scenario_alloc(void)
{
	primary_ctx(0);
	pairs(5);
	return 7;
}

static int scenario_nocuda(void)
{
	return 7;
}

static const struct scenario scenarios[] = {
	{ "threads", scenario_threads },
	{ "killed_dropping", scenario_killed_dropping },
	{ "alloc", scenario_alloc },
	{ "nocuda", scenario_nocuda },
};

/* ---- helpers ---- */

static char *slurp(const char *path)
{
	static char buf[1 << 24];
	int fd = open(path, O_RDONLY);
	ssize_t n = 0, r;

	buf[0] = 0;
	if (fd >= 0) {
		while ((r = read(fd, buf + n, sizeof(buf) - 1 - n)) > 0)
			n += r;
		close(fd);
	}
	buf[n] = 0;
	return buf;
}

static int count_str(const char *hay, const char *needle)
{
	int n = 0;

	for (const char *p = hay; (p = strstr(p, needle)); p++)
		n++;
	return n;
}

/*
 * The mount that will hold a mount on dir made private (recursively) in
 * this mount namespace, or SKIP: while it is shared, the tmpfs would
 * show in the namespace the tests were started from.  "/" first; in a
 * chroot "/" is no mount point (EINVAL), and the nearest mount point at
 * or above dir (a bind-mounted /dev, /tmp) is made private instead.
 */
static void private_above(const char *dir)
{
	char p[256];
	char *slash;

	if (!mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL))
		return;
	if (errno != EINVAL)
		TH_FAIL("mount(/, MS_PRIVATE): %s", strerror(errno));
	snprintf(p, sizeof(p), "%s", dir);
	while ((slash = strrchr(p, '/')) && slash != p) {
		if (!mount(NULL, p, NULL, MS_REC | MS_PRIVATE, NULL))
			return;
		if (errno != EINVAL)
			TH_FAIL("mount(%s, MS_PRIVATE): %s", p, strerror(errno));
		*slash = 0;
	}
	SKIP("no mount point at or above %s here (a chroot?): a tmpfs "
	     "mounted there could not be kept private", dir);
}

/*
 * The cases re-run this program (run_scenario_err) by the path that
 * /proc/self/exe names; in a new mount namespace of a chroot that path
 * may not lead back to it.  SKIP then, saying so.
 */
static void self_reachable(void)
{
	char self[4096];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	if (n < 0)
		SKIP("readlink(/proc/self/exe): %s: this program cannot re-run "
		     "itself (is /proc mounted?)", strerror(errno));
	self[n] = 0;
	if (access(self, X_OK))
		SKIP("%s (/proc/self/exe) is not reachable in this mount "
		     "namespace (%s; a chroot?): this program cannot re-run "
		     "itself", self, strerror(errno));
}

/* A private mount namespace with a tmpfs of size over dir, or SKIP. */
static void private_tmpfs(const char *dir, const char *size)
{
	char opt[64];

	if (unshare(CLONE_NEWNS)) {
		if (errno == EPERM)
			SKIP("unshare(CLONE_NEWNS): not permitted");
		TH_FAIL("unshare: %s", strerror(errno));
	}
	private_above(dir);
	snprintf(opt, sizeof(opt), "size=%s,mode=1777", size);
	if (mount("tmpfs", dir, "tmpfs", 0, opt)) {
		if (errno == EPERM)
			SKIP("mount tmpfs: not permitted");
		TH_FAIL("mount tmpfs on %s: %s", dir, strerror(errno));
	}
	self_reachable();
}

/* Fill the file system of dir: a file written until ENOSPC. */
static void fill(const char *dir)
{
	static char junk[4096];
	char path[300];
	int fd;

	snprintf(path, sizeof(path), "%s/fill", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	CHECK(fd >= 0);
	while (write(fd, junk, sizeof(junk)) > 0)
		;
	CHECK_EQ(errno, ENOSPC);
	close(fd);
}

#define ENV(...) ((const char *const[]){ __VA_ARGS__, NULL })

/* ---- cases ---- */

TEST_TIMEOUT(tiny_dev_shm_six_threads_run_to_completion, 120)
{
	char log[256], err[256], var[300];
	const char *e;

	log_path(log, sizeof(log), "log");
	log_path(err, sizeof(err), "err");
	snprintf(var, sizeof(var), "GDRHOOK_TRACE=%s", log);
	/* room for the header and a ring or two of 48 KiB, not six */
	private_tmpfs("/dev/shm", "160k");
	CHECK_EQ(run_scenario_err("threads", ENV(var, "GDRHOOK_TRACE_BUFFER=48k",
					"GDRHOOK_TRACE_MODE=block"), err), 7);
	/* nothing lost: rings without room are private memory instead */
	CHECK_EQ(count_str(slurp(log), "\"ev\":\"alloc\""),
		 NTHREADS * PAIRS);
	e = slurp(err);
	CHECK_EQ(count_str(e, "not crash-safe"), 1);
	CHECK_EQ(count_str(e, "/dev/shm is full"), 1);
	unlink(log);
	unlink(err);
}

TEST_TIMEOUT(full_dev_shm_default_rings_run_to_completion, 120)
{
	char log[256], err[256], var[300];

	log_path(log, sizeof(log), "log");
	log_path(err, sizeof(err), "err");
	snprintf(var, sizeof(var), "GDRHOOK_TRACE=%s", log);
	private_tmpfs("/dev/shm", "256k");
	fill("/dev/shm");
	CHECK_EQ(run_scenario_err("threads", ENV(var), err), 7);
	CHECK_EQ(count_str(slurp(err), "not crash-safe"), 1);
	CHECK(count_str(slurp(log), "\"ev\":\"exit\"") == 1);
	unlink(log);
	unlink(err);
}

TEST_TIMEOUT(full_disk_under_the_log_said_in_words, 120)
{
	char dir[256], log[300], err[256], var[320];
	const char *e;

	snprintf(dir, sizeof(dir), "%s/gdrhook-test-%d-disk",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid());
	CHECK(mkdir(dir, 0700) == 0 || errno == EEXIST);
	log_path(err, sizeof(err), "err");
	private_tmpfs(dir, "64k");
	fill(dir);
	snprintf(log, sizeof(log), "%s/log", dir);
	snprintf(var, sizeof(var), "GDRHOOK_TRACE=%s", log);
	CHECK_EQ(run_scenario_err("threads", ENV(var), err), 7);
	e = slurp(err);
	CHECK_EQ(count_str(e, "event log"), 1);
	CHECK_EQ(count_str(e, "No space left on device"), 1);
	CHECK_EQ(count_str(e, "errno"), 0);
	umount(dir);
	rmdir(dir);
	unlink(err);
}

TEST_TIMEOUT(killed_process_drops_are_recovered, 120)
{
	char log[256], var[300];
	const char *l, *rec;
	unsigned long long ev = 0, drop = 0;
	int pid = 0;
	char pidkey[64];
	int lines;

	log_path(log, sizeof(log), "log");
	snprintf(var, sizeof(var), "GDRHOOK_TRACE=%s", log);
	/* its own /dev/shm: no other process recovers our spool first */
	private_tmpfs("/dev/shm", "64m");
	CHECK_EQ(run_scenario_err("killed_dropping", ENV(var, "GDRHOOK_TRACE_BUFFER=4k"),
			 "/dev/null"), 128 + SIGKILL);
	CHECK_EQ(run_scenario_err("nocuda", ENV(var), "/dev/null"), 7);
	l = slurp(log);
	rec = strstr(l, "{\"ev\":\"recovered\"");
	CHECK(rec != NULL);
	CHECK(sscanf(strstr(rec, "\"pid\":"), "\"pid\":%d", &pid) == 1);
	CHECK(strstr(rec, "\"events\":"));
	sscanf(strstr(rec, "\"events\":"), "\"events\":%llu", &ev);
	CHECK(strstr(rec, "\"dropped\":") != NULL);
	sscanf(strstr(rec, "\"dropped\":"), "\"dropped\":%llu", &drop);
	CHECK(drop > 0);
	/* every event is a line or counted: a ring's worth at most twice */
	snprintf(pidkey, sizeof(pidkey), "\"pid\":%d,", pid);
	lines = 0;
	for (const char *p = l; (p = strstr(p, pidkey)); p++) {
		const char *eol = strchr(p, '\n');
		const char *a = strstr(p, "\"ev\":\"alloc\"");
		const char *f = strstr(p, "\"ev\":\"free\"");

		lines += (a && (!eol || a < eol)) || (f && (!eol || f < eol));
	}
	if (lines + drop < 2 * PAIRS || lines + drop > 2 * PAIRS + 16)
		TH_FAIL("%d lines + %llu dropped, %d events", lines, drop,
			2 * PAIRS);
	unlink(log);
}

TEST(log_buffer_the_ring_cannot_honour_said_once)
{
	char log[256], err[256], var[300];
	const char *e;

	log_path(log, sizeof(log), "log");
	log_path(err, sizeof(err), "err");
	snprintf(var, sizeof(var), "GDRHOOK_TRACE=%s", log);
	CHECK_EQ(run_scenario_err("alloc", ENV(var, "GDRHOOK_TRACE_BUFFER=5000"), err),
		 7);
	e = slurp(err);
	CHECK_EQ(count_str(e, "GDRHOOK_TRACE_BUFFER=5000: each thread's ring "
			      "holds 16 events (3072 bytes)"), 1);
	/* a process that never logs says nothing */
	CHECK_EQ(run_scenario_err("nocuda", ENV(var, "GDRHOOK_TRACE_BUFFER=5000"), err),
		 7);
	CHECK_STR(slurp(err), "");
	/* a value it honours: nothing */
	CHECK_EQ(run_scenario_err("alloc", ENV(var, "GDRHOOK_TRACE_BUFFER=3072"), err),
		 7);
	CHECK_STR(slurp(err), "");
	unlink(log);
	unlink(err);
}

TEST(symlink_log_refused_in_words)
{
	char log[256], lnk[256], err[256], var[300];
	const char *e;

	log_path(log, sizeof(log), "target");
	log_path(lnk, sizeof(lnk), "link");
	log_path(err, sizeof(err), "err");
	CHECK_EQ(symlink(log, lnk), 0);
	snprintf(var, sizeof(var), "GDRHOOK_TRACE=%s", lnk);
	CHECK_EQ(run_scenario_err("alloc", ENV(var), err), 7);
	e = slurp(err);
	CHECK_EQ(count_str(e, "logs are never written through a symlink"), 1);
	CHECK_EQ(count_str(e, "errno"), 0);
	CHECK(access(log, F_OK) != 0);
	unlink(lnk);
	unlink(err);
}

SCENARIO_MAIN(scenarios)
