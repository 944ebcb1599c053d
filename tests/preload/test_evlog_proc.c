// SPDX-License-Identifier: MIT
/*
 * The event log and the configuration as whole processes see them
 * (issue 11): exit status, stdout and signals of the observed program,
 * configuration errors, where warnings appear, exec and _exit.  Each case
 * runs this program again, as a scenario, under other GDRHOOK_* settings.
 */
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>

#pragma GCC diagnostic ignored "-Wunused-function"
#include "preload_util.h"

/* ---- scenarios ---- */

static int scenario_alloc(void)
{
	CUdeviceptr p;

	if (cuInit(0))
		return 3;
	primary_ctx(0);
	for (int i = 0; i < 5; i++) {
		CU_OK(cuMemAlloc(&p, 4096));
		CU_OK(cuMemFree(p));
	}
	printf("stdout-intact\n");	/* buffered: lost if we are killed */
	return 7;
}

static int scenario_init_only(void)
{
	CUdeviceptr p;

	cuInit(0);
	return cuMemAlloc(&p, 4096) ? 3 : 0;	/* a hooked entry point */
}

static int scenario_nocuda(void)
{
	return 0;
}

static int scenario_exit_early(void)
{
	CUdeviceptr p;

	primary_ctx(0);
	for (int i = 0; i < 5; i++) {
		CU_OK(cuMemAlloc(&p, 4096));
		CU_OK(cuMemFree(p));
	}
	_exit(5);
}

static int scenario_pairs(void)
{
	struct gdrhook_stats s = { .size = sizeof(s) };
	CUdeviceptr p;

	primary_ctx(0);
	for (int i = 0; i < 200000; i++) {
		CU_OK(cuMemAlloc(&p, 4096));
		CU_OK(cuMemFree(p));
	}
	gdrhook_flush_log();
	gdrhook_get_stats(&s);
	return s.log_dropped ? 9 : 0;
}

static void *pairs_thread(void *arg)
{
	CUdeviceptr p;

	cuCtxSetCurrent((CUcontext)arg);
	for (int i = 0; i < 20000; i++) {
		if (!cuMemAlloc(&p, 4096))
			cuMemFree(p);
	}
	return NULL;
}

static int scenario_threads(void)
{
	CUcontext ctx = primary_ctx(0);
	pthread_t th[4];

	for (int i = 0; i < 4; i++)
		pthread_create(&th[i], NULL, pairs_thread, ctx);
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	return 0;
}

static volatile int churn_stop;
static int churned;

static void *churn(void *arg)
{
	CUdeviceptr p;

	(void)arg;
	cuCtxSetCurrent(primary_ctx(0));
	while (!churn_stop) {
		if (!cuMemAlloc(&p, 4096))
			cuMemFree(p);
		__atomic_add_fetch(&churned, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

static int scenario_exec_churn(void)
{
	char self[4096];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	pthread_t th[4];

	if (n < 0)
		return 120;
	self[n] = 0;
	primary_ctx(0);
	for (int i = 0; i < 4; i++)
		pthread_create(&th[i], NULL, churn, NULL);
	/* exec while they churn, once they have logged something */
	while (__atomic_load_n(&churned, __ATOMIC_RELAXED) < 2000)
		usleep(1000);
	execl(self, self, "--scenario", "alloc", (char *)NULL);
	return 121;
}

/* Allocate, then exec a program that never uses CUDA. */
static int scenario_exec_after_alloc(void)
{
	char self[4096];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	CUdeviceptr p;

	if (n < 0)
		return 120;
	self[n] = 0;
	primary_ctx(0);
	for (int i = 0; i < 5; i++)
		CU_OK(cuMemAlloc(&p, 4096));
	execl(self, self, "--scenario", "nocuda", (char *)NULL);
	return 121;
}

/* An exec that fails: the program goes on, errno intact, log working. */
static int scenario_exec_fails(void)
{
	char *const argv[] = { "nonexistent", NULL };
	CUdeviceptr p;
	int rc;

	primary_ctx(0);
	CU_OK(cuMemAlloc(&p, 4096));
	errno = 0;
	rc = execv("/nonexistent/gdrhook-test", argv);
	if (rc != -1 || errno != ENOENT)
		return 122;
	errno = 0;
	rc = execlp("/nonexistent/gdrhook-test", "x", "y", (char *)NULL);
	if (rc != -1 || errno != ENOENT)
		return 123;
	for (int i = 0; i < 5; i++) {
		CU_OK(cuMemAlloc(&p, 4096));
		CU_OK(cuMemFree(p));
	}
	return 0;
}

static const struct scenario scenarios[] = {
	{ "alloc", scenario_alloc },
	{ "init_only", scenario_init_only },
	{ "nocuda", scenario_nocuda },
	{ "exit_early", scenario_exit_early },
	{ "pairs", scenario_pairs },
	{ "exec_churn", scenario_exec_churn },
	{ "exec_after_alloc", scenario_exec_after_alloc },
	{ "exec_fails", scenario_exec_fails },
	{ "threads", scenario_threads },
};

/* ---- helpers ---- */

/*
 * Run a scenario with env, stdout and stderr into files (NULL: inherit;
 * "closed-pipe": stderr is a pipe nobody reads; "stdout": stderr into
 * stdout's file).  Returns the exit status,
 * or 128 + signal.
 */
static int run_io(const char *name, const char *const *env, const char *out,
		  const char *err)
{
	pid_t pid;
	int st, p[2] = { -1, -1 };

	if (err && !strcmp(err, "closed-pipe"))
		CHECK_EQ(pipe(p), 0);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		char self[4096];
		ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

		if (n < 0)
			_exit(120);
		self[n] = 0;
		for (const char *const *e = env; e && *e; e++)
			putenv((char *)*e);
		if (out)
			dup2(open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600), 1);
		if (p[1] >= 0) {
			close(p[0]);
			dup2(p[1], 2);
		} else if (err && !strcmp(err, "stdout")) {
			dup2(1, 2);
		} else if (err) {
			dup2(open(err, O_WRONLY | O_CREAT | O_TRUNC, 0600), 2);
		}
		execl(self, self, "--scenario", name, (char *)NULL);
		_exit(121);
	}
	if (p[0] >= 0) {
		close(p[0]);	/* the reader is gone before anything is written */
		close(p[1]);
	}
	CHECK(waitpid(pid, &st, 0) == pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static char *slurp(const char *path)
{
	static char buf[1 << 16];
	int fd = open(path, O_RDONLY);
	ssize_t n;

	buf[0] = 0;
	if (fd < 0)
		return buf;
	n = read(fd, buf, sizeof(buf) - 1);
	buf[n > 0 ? n : 0] = 0;
	close(fd);
	return buf;
}

static int count_str(const char *hay, const char *needle)
{
	int n = 0;

	for (const char *p = hay; (p = strstr(p, needle)); p++)
		n++;
	return n;
}

static const char *tmp(char *buf, size_t n, const char *tag)
{
	return log_path(buf, n, tag);
}

#define ENV(...) ((const char *const[]){ __VA_ARGS__, NULL })

/* ---- seen 1, 2: the program is never hurt ---- */

TEST(reader_gone_exit_status_and_stdout_intact)
{
	char out[256];

	tmp(out, sizeof(out), "stdout");
	CHECK_EQ(run_io("alloc", ENV("GDRHOOK_TRACE=stderr"), out,
			"closed-pipe"), 7);
	CHECK_STR(slurp(out), "stdout-intact\n");
	unlink(out);
}

TEST_TIMEOUT(fifo_without_reader_exits, 60)
{
	char fifo[256], var[300], err[256];

	tmp(fifo, sizeof(fifo), "fifo");
	tmp(err, sizeof(err), "stderr");
	CHECK_EQ(mkfifo(fifo, 0600), 0);
	snprintf(var, sizeof(var), "GDRHOOK_TRACE=%s", fifo);
	CHECK_EQ(run_io("alloc", ENV(var), "/dev/null", err), 7);
	/* one message, with the path and what was lost */
	CHECK_EQ(count_str(slurp(err), "event log"), 1);
	CHECK_EQ(count_str(slurp(err), "a FIFO with no reader"), 1);
	unlink(fifo);
	unlink(err);
}

/* ---- seen 6: a driver that cannot be loaded is reported ---- */

TEST(bad_libcuda_reported_once_with_dlerror)
{
	char err[256];

	tmp(err, sizeof(err), "stderr");
	CHECK(run_io("init_only", ENV("GDRHOOK_LIBCUDA=/nonexistent/libcuda.so"),
		     NULL, err) != 0);
	/* refused once, in words, and the default driver used instead */
	CHECK_EQ(count_str(slurp(err), "GDRHOOK_LIBCUDA=/nonexistent/libcuda.so refused"), 1);
	CHECK_EQ(count_str(slurp(err), "/nonexistent/libcuda.so"), 2);
	CHECK_EQ(count_str(slurp(err), "No such file"), 1);
	CHECK_EQ(count_str(slurp(err), "using the default libcuda.so.1"), 1);

	CHECK(run_io("init_only", ENV("GDRHOOK_LIBCUDA=libc.so.6"), NULL,
		     err) != 0);
	CHECK_EQ(count_str(slurp(err), "GDRHOOK_LIBCUDA=libc.so.6 refused: not a CUDA driver"), 1);
	unlink(err);
}

/* ---- seen 7: configuration values ---- */

TEST(sizes_reject_overflow_enums_reject_unknown_words)
{
	char err[256];
	const char *e;

	tmp(err, sizeof(err), "stderr");
	CHECK_EQ(run_io("alloc",
			ENV("GDRHOOK_TRACE_BUFFER=18446744073709551616",
			    "GDRHOOK_CACHE_MAX_SIZE=18446744073709551617",
			    "GDRHOOK_CACHE_MAX_COUNT=17179869184g",
			    "GDRHOOK_BUFFER_ID=garbage",
			    "GDRHOOK_TRACE_MODE=lossless"),
			"/dev/null", err), 7);
	e = slurp(err);
	CHECK_EQ(count_str(e, "\"18446744073709551616\" for GDRHOOK_TRACE_BUFFER (too large)"), 1);
	CHECK_EQ(count_str(e, "\"18446744073709551617\" for GDRHOOK_CACHE_MAX_SIZE (too large)"), 1);
	CHECK_EQ(count_str(e, "\"17179869184g\" for GDRHOOK_CACHE_MAX_COUNT (too large)"), 1);
	CHECK_EQ(count_str(e, "\"garbage\" for GDRHOOK_BUFFER_ID (one of: registry, driver)"), 1);
	CHECK_EQ(count_str(e, "\"lossless\" for GDRHOOK_TRACE_MODE (one of: drop, block)"), 1);
	unlink(err);
}

TEST(values_from_ucx_libfabric_nccl_accepted)
{
	char err[256];

	tmp(err, sizeof(err), "stderr");
	CHECK_EQ(run_io("alloc",
			ENV("GDRHOOK_VALIDATE=n", "GDRHOOK_STRICT=N",
			    "GDRHOOK_LOG_LEVEL=TRACE",
			    "GDRHOOK_CACHE_MAX_SIZE=inf",
			    "GDRHOOK_CACHE_MAX_COUNT=inf",
			    "GDRHOOK_BACKEND=none"),
			"/dev/null", err), 7);
	CHECK_EQ(count_str(slurp(err), "bad value"), 0);
	unlink(err);
}

TEST(value_warnings_only_in_cuda_processes)
{
	char err[256];

	tmp(err, sizeof(err), "stderr");
	CHECK_EQ(run_io("nocuda", ENV("GDRHOOK_BUFFER_ID=garbage",
				      "GDRHOOK_TYPO=1"), NULL, err), 0);
	CHECK_STR(slurp(err), "");
	CHECK_EQ(run_io("alloc", ENV("GDRHOOK_BUFFER_ID=garbage",
				     "GDRHOOK_TYPO=1"), "/dev/null", err), 7);
	CHECK_EQ(count_str(slurp(err), "bad value \"garbage\""), 1);
	CHECK_EQ(count_str(slurp(err), "GDRHOOK_TYPO"), 1);
	unlink(err);
}

/* ---- seen 7, 9: a child that ends in _exit loses nothing ---- */

TEST(underscore_exit_child_loses_nothing)
{
	char path[256], other[256], var[300], var2[300];

	snprintf(var, sizeof(var), "GDRHOOK_TRACE=%s",
		 tmp(path, sizeof(path), "exit_early"));
	CHECK_EQ(run_io("exit_early", ENV(var), NULL, NULL), 5);
	/* the next process with a log recovers the dead one's records */
	snprintf(var2, sizeof(var2), "GDRHOOK_TRACE=%s",
		 tmp(other, sizeof(other), "next"));
	CHECK_EQ(run_io("nocuda", ENV(var2), NULL, NULL), 0);
	CHECK_EQ(LOG_COUNT(path, "\"ev\":\"alloc\""), 5);
	CHECK_EQ(LOG_COUNT(path, "\"ev\":\"free\""), 5);
	CHECK_EQ(LOG_COUNT(path, "\"ev\":\"recovered\""), 1);
	unlink(path);
	unlink(other);
}

/* An uncaught C++ exception (tests/preload/die_cxx.cc) loses nothing. */
TEST(uncaught_cxx_exception_loses_nothing)
{
	char path[256], other[256], var[300], var2[300], prog[4096];
	ssize_t n = readlink("/proc/self/exe", prog, sizeof(prog) - 16);
	pid_t pid;
	int st;

	CHECK(n > 0);
	prog[n] = 0;
	strcpy(strrchr(prog, '/') + 1, "die_cxx");
	snprintf(var, sizeof(var), "GDRHOOK_TRACE=%s",
		 tmp(path, sizeof(path), "cxx"));
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		putenv(var);
		dup2(open("/dev/null", O_WRONLY), 2);
		execl(prog, prog, (char *)NULL);
		_exit(121);
	}
	CHECK_EQ(waitpid(pid, &st, 0), pid);
	CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
	snprintf(var2, sizeof(var2), "GDRHOOK_TRACE=%s",
		 tmp(other, sizeof(other), "next"));
	CHECK_EQ(run_io("nocuda", ENV(var2), NULL, NULL), 0);
	CHECK_EQ(LOG_COUNT(path, "\"ev\":\"alloc\""), 5);
	CHECK_EQ(LOG_COUNT(path, "\"ev\":\"free\""), 5);
	CHECK_EQ(LOG_COUNT(path, "\"ev\":\"recovered\""), 1);
	unlink(path);
	unlink(other);
}

/* ---- seen 3: exec while threads churn ---- */

/*
 * One exec while four threads churn; the log ends up in path (a file
 * log, or stderr redirected there, where gdrhook's messages may sit
 * between the records).
 */
static void exec_churn_round(const char *log_var, const char *path,
			     int on_stderr)
{
	char cmd[1200];

	CHECK_EQ(run_io("exec_churn", ENV(log_var, "GDRHOOK_TRACE_MODE=block"),
			"/dev/null", on_stderr ? path : NULL), 7);
	/* the new image's start is a whole record (the old image's
	 * writer may not have run before the exec) */
	CHECK(LOG_COUNT(path, "{\"ev\":\"start\"", "\"exit\"") == 0);
	CHECK(LOG_COUNT(path, "{\"ev\":\"start\"") >= 1);
	CHECK_EQ(LOG_COUNT(path, "\"ev\":\"exit\""), 1);
	/* the old image's records were recovered by the new image */
	CHECK_EQ(LOG_COUNT(path, "\"ev\":\"recovered\""), 1);
	/*
	 * The log was drained before the exec, with the writer held
	 * off: every record line is JSON (no torn line).  Nothing the old
	 * image recorded is lost: its allocation generations have no
	 * gap but the one allocation per churning thread whose record
	 * was not made yet when the image went (4 at most).  A thread
	 * takes generations in blocks of 64 (src/registry/ranges_write.c,
	 * GH_REG_GEN_BLOCK) and uses each block in order from its start:
	 * a gap is what a block misses below its highest.  Lossless
	 * mode: in drop mode a writer starved by a busy machine drops
	 * (and counts) records, which is not what this case is about.
	 */
	snprintf(cmd, sizeof(cmd),
		 "python3 -c 'import json,sys\n"
		 "bad=0; starts=0; gens=set()\n"
		 "for l in open(sys.argv[1]):\n"
		 "  if sys.argv[2]==\"1\" and not l.startswith(\"{\"): continue\n"
		 "  try: r=json.loads(l)\n"
		 "  except ValueError: bad+=1; continue\n"
		 "  starts+=r.get(\"ev\")==\"start\"\n"
		 "  if starts<2 and r.get(\"ev\")==\"alloc\": "
		 "gens.add(r[\"gen\"])\n"
		 "blk={}\n"
		 "for g in gens: b=(g-1)//64; blk[b]=max(blk.get(b,0),g-64*b)\n"
		 "gap=sum(blk.values())-len(gens)\n"
		 "print(\"  %%d bad lines, %%d allocations, %%d missing\""
		 " %% (bad, len(gens), gap))\n"
		 "sys.exit(bad > 0 or gap > 4 or len(gens) < 2000)' '%s' %d",
		 path, on_stderr);
	CHECK_EQ(system(cmd), 0);
	unlink(path);
}

TEST_TIMEOUT(exec_while_threads_churn, 120)
{
	char path[256], var[300];

	for (int round = 0; round < 6; round++) {
		snprintf(var, sizeof(var), "GDRHOOK_TRACE=%s",
			 tmp(path, sizeof(path), "exec"));
		exec_churn_round(var, path, 0);
	}
}

/*
 * A log on stderr has a spool too: the next image (same pid, same
 * stderr) writes what other threads recorded after the pre-exec drain.
 */
TEST_TIMEOUT(exec_while_threads_churn_on_stderr, 120)
{
	char path[256];

	for (int round = 0; round < 3; round++)
		exec_churn_round("GDRHOOK_TRACE=stderr",
				 tmp(path, sizeof(path), "exec-stderr"), 1);
}

/*
 * The records made just before exec are written by the old image itself
 * (the pre-exec drain): a new image that never uses CUDA configures no
 * log and would recover nothing.
 */
TEST(exec_drains_the_log_first)
{
	char path[256];

	tmp(path, sizeof(path), "exec-stderr");
	CHECK_EQ(run_io("exec_after_alloc", ENV("GDRHOOK_TRACE=stderr"),
			"/dev/null", path), 0);
	CHECK_EQ(LOG_COUNT(path, "{\"ev\":\"start\""), 1);
	CHECK_EQ(LOG_COUNT(path, "\"ev\":\"alloc\""), 5);
	unlink(path);
}

TEST(exec_that_fails_leaves_the_log_working)
{
	char path[256], var[300];

	snprintf(var, sizeof(var), "GDRHOOK_TRACE=%s",
		 tmp(path, sizeof(path), "exec-fails"));
	CHECK_EQ(run_io("exec_fails", ENV(var), NULL, NULL), 0);
	CHECK_EQ(LOG_COUNT(path, "\"ev\":\"alloc\""), 6);
	CHECK_EQ(LOG_COUNT(path, "\"ev\":\"exit\"", "\"dropped\":0,"), 1);
	unlink(path);
}

/* ---- seen 8: 200 k alloc/free pairs lose nothing in block mode ---- */

TEST_TIMEOUT(block_mode_200k_pairs_lose_nothing, 300)
{
	char path[256], var[300];

	snprintf(var, sizeof(var), "GDRHOOK_TRACE=%s",
		 tmp(path, sizeof(path), "pairs"));
	CHECK_EQ(run_io("pairs", ENV(var, "GDRHOOK_TRACE_MODE=block"), NULL,
			NULL), 0);
	CHECK_EQ(LOG_COUNT(path, "\"ev\":\"alloc\""), 200000);
	CHECK_EQ(LOG_COUNT(path, "\"ev\":\"exit\"", "\"dropped\":0,"), 1);
	unlink(path);
}

/* ---- seen 10: ordering a threaded log by t is consistent ---- */

TEST_TIMEOUT(ordering_by_t_shows_no_double_allocation, 300)
{
	char path[256], var[300], cmd[1200];

	snprintf(var, sizeof(var), "GDRHOOK_TRACE=%s",
		 tmp(path, sizeof(path), "threads"));
	CHECK_EQ(run_io("threads", ENV(var, "GDRHOOK_TRACE_MODE=block"), NULL,
			NULL), 0);
	snprintf(cmd, sizeof(cmd),
		 "python3 -c 'import json,sys\n"
		 "ev=[json.loads(l) for l in open(sys.argv[1])]\n"
		 "ev=[e for e in ev if e[\"ev\"] in (\"alloc\",\"free\")]\n"
		 "ev.sort(key=lambda e: (e[\"t\"], e[\"ev\"]!=\"free\"))\n"
		 "live=set(); bad=0; seen=set(); reused=0\n"
		 "for e in ev:\n"
		 "  p=e[\"ptr\"]\n"
		 "  if e[\"ev\"]==\"alloc\":\n"
		 "    bad+=p in live; reused+=p in seen; live.add(p); seen.add(p)\n"
		 "  else: live.discard(p)\n"
		 "print(\"  %%d records, %%d reallocations at a used address, %%d double\" %% (len(ev), reused, bad))\n"
		 "sys.exit(1 if bad or not reused or len(ev)!=160000 else 0)' '%s'",
		 path);
	CHECK_EQ(system(cmd), 0);
	unlink(path);
}

SCENARIO_MAIN(scenarios)
