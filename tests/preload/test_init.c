// SPDX-License-Identifier: MIT
/*
 * The process lifecycle (src/hooks/init.c).
 *
 * The face's part of it (the info banner, the exit counters) is in place at the program's first CUDA call, wherever that call is
 * made: in main, in the program's constructor, or in the constructor of
 * a library the program links, which the loader runs before those of a
 * preloaded libgdrhook.so (tests/preload/early_cuda.c and
 * early_cuda_lib.c).  A face handed over by a constructor of its own
 * misses the last: the banner is never printed.
 *
 * Init itself: GDRHOOK_ENABLE=0 is a pure pass-through; a process that
 * never calls CUDA gets no banner, no counters, no log file and no
 * warnings; the fork handlers leave the child a usable registry while
 * other threads of the parent allocate.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Not every helper of the shared header is used here. */
#pragma GCC diagnostic ignored "-Wunused-function"
#include "preload_util.h"

/* Run early_cuda (beside this program) with EARLY_CUDA=when and the
 * loader's trace of constructors, stderr into err. */
static int run_early(const char *when, const char *err)
{
	char prog[4096], var[64];
	ssize_t n = readlink("/proc/self/exe", prog, sizeof(prog) - 16);
	pid_t pid;
	int st;

	CHECK(n > 0);
	prog[n] = 0;
	strcpy(strrchr(prog, '/') + 1, "early_cuda");
	snprintf(var, sizeof(var), "EARLY_CUDA=%s", when);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		int fd = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0600);

		if (fd < 0 || dup2(fd, 2) < 0)
			_exit(120);
		putenv(var);
		putenv("GDRHOOK_LOG_LEVEL=info");
		putenv("GDRHOOK_STATS=1");
		putenv("LD_DEBUG=libs");
		execl(prog, prog, (char *)NULL);
		_exit(121);
	}
	CHECK_EQ(waitpid(pid, &st, 0), pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* 1-based number of err's first line with a and b (b may be NULL), 0: none. */
static int line_of(const char *err, const char *a, const char *b)
{
	char line[2048];
	FILE *f = fopen(err, "r");
	int n = 0, at = 0;

	CHECK(f != NULL);
	while (!at && fgets(line, sizeof(line), f)) {
		n++;
		if (strstr(line, a) && (!b || strstr(line, b)))
			at = n;
	}
	fclose(f);
	return at;
}

static int lines_with(const char *err, const char *a)
{
	char line[2048];
	FILE *f = fopen(err, "r");
	int n = 0;

	CHECK(f != NULL);
	while (fgets(line, sizeof(line), f))
		n += strstr(line, a) != NULL;
	fclose(f);
	return n;
}

static void err_path(char *buf, size_t cap, const char *when)
{
	snprintf(buf, cap, "%s/gdrhook-test-%d-init-%s",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid(),
		 when);
}

/* One banner, the counters at exit with the allocation in them. */
static void face_was_there(const char *err)
{
	int banners = lines_with(err, "info: gdrhook ");

	if (banners != 1)
		TH_FAIL("%d info banners, want 1 (%s)", banners, err);
	CHECK_EQ(lines_with(err, "]: stats"), 1);
	CHECK(line_of(err, "  allocations ", " 1\n") > 0);
}

TEST(face_in_place_when_a_library_constructor_calls_cuda_first)
{
	char err[512];
	int lib, ours, banner;

	err_path(err, sizeof(err), "lib");
	CHECK_EQ(run_early("lib", err), 0);
	lib = line_of(err, "calling init:", "libearly_cuda.so");
	ours = line_of(err, "calling init:", "libgdrhook.so");
	/* the case this test is about: the first call before our code */
	if (!lib || !ours || lib > ours)
		TH_FAIL("the loader did not run libearly_cuda.so's constructor before libgdrhook.so's (lines %d, %d of %s)",
			lib, ours, err);
	face_was_there(err);
	/* printed at that call, before gdrhook's constructors ran */
	banner = line_of(err, "info: gdrhook ", NULL);
	if (banner > ours)
		TH_FAIL("the banner (line %d) came after gdrhook's constructors (line %d)",
			banner, ours);
	unlink(err);
}

TEST(face_in_place_when_the_program_calls_cuda_first)
{
	static const char *const whens[] = { "prog", "main" };

	for (int i = 0; i < 2; i++) {
		char err[512];

		err_path(err, sizeof(err), whens[i]);
		CHECK_EQ(run_early(whens[i], err), 0);
		face_was_there(err);
		unlink(err);
	}
}

static int stop;

static void *churn(void *arg)
{
	CUdeviceptr p;

	cuCtxSetCurrent((CUcontext)arg);
	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		if (cuMemAlloc_v2(&p, 4096) == CUDA_SUCCESS)
			cuMemFree_v2(p);
	}
	return NULL;
}

TEST(fork_while_other_threads_allocate)
{
	pthread_t t[2];
	CUcontext ctx = primary_ctx(0);
	CUdeviceptr keep;

	CU_OK(cuMemAlloc_v2(&keep, 1 << 20));
	for (int i = 0; i < 2; i++)
		CHECK(pthread_create(&t[i], NULL, churn, ctx) == 0);
	for (int i = 0; i < 20; i++) {
		pid_t pid = fork();
		int st;

		if (pid == 0) {
			/* The child sees the parent's registry, no deadlock. */
			_exit(tracked(keep, NULL) == 0 ? 0 : 1);
		}
		CHECK(pid > 0);
		CHECK(waitpid(pid, &st, 0) == pid);
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
}

/* ---- scenarios run in a fresh process with their own GDRHOOK_* ---- */

static int scenario_disabled(void)
{
	CUdeviceptr a;

	primary_ctx(0);
	if (cuMemAlloc_v2(&a, 4096))
		return 2;
	if (tracked(a, NULL) != -ENODEV)
		return 3;
	return cuMemFree_v2(a) ? 4 : 0;
}

/* No CUDA call at all: the exit-time work is never armed. */
static int scenario_no_cuda(void)
{
	return tracked(0x1000, NULL) == -ENOENT ? 0 : 2;
}

static int scenario_one_alloc(void)
{
	CUdeviceptr a;

	primary_ctx(0);
	if (cuMemAlloc_v2(&a, 4096))
		return 2;
	return cuMemFree_v2(a) ? 3 : 0;
}

static const struct scenario scenarios[] = {
	{ "disabled", scenario_disabled },
	{ "no_cuda", scenario_no_cuda },
	{ "one_alloc", scenario_one_alloc },
};

TEST(disabled_is_a_pure_pass_through)
{
	char path[256];
	char var[300];
	const char *env[] = { "GDRHOOK_ENABLE=0", var, NULL };

	snprintf(var, sizeof(var), "GDRHOOK_TRACE=%s",
		 log_path(path, sizeof(path), "disabled"));
	CHECK_EQ(run_scenario("disabled", env), 0);
	CHECK(access(path, F_OK) != 0);
}

TEST(no_banner_and_no_counters_without_a_cuda_call)
{
	char err[512];
	const char *env[] = { "GDRHOOK_LOG_LEVEL=info", "GDRHOOK_STATS=1",
			      NULL };

	err_path(err, sizeof(err), "nocuda");
	CHECK_EQ(run_scenario_err("no_cuda", env, err), 0);
	CHECK_EQ(lines_with(err, "info: gdrhook "), 0);
	CHECK_EQ(lines_with(err, "]: stats"), 0);
	/* the same program with one CUDA call says both (the contrast) */
	CHECK_EQ(run_scenario_err("one_alloc", env, err), 0);
	CHECK_EQ(lines_with(err, "info: gdrhook "), 1);
	CHECK_EQ(lines_with(err, "]: stats"), 1);
	unlink(err);
}

TEST(children_without_cuda_are_untouched)
{
	char path[256], cmd[600];

	log_path(path, sizeof(path), "child");
	snprintf(cmd, sizeof(cmd),
		 "GDRHOOK_TRACE=%s GDRHOOK_TYPO=1 bash -c 'echo ok' 2>&1", path);
	{
		FILE *f = popen(cmd, "r");
		char out[256] = "";

		CHECK(f);
		CHECK(fgets(out, sizeof(out), f) != NULL);
		pclose(f);
		CHECK_STR(out, "ok\n");	/* no warnings, no output */
	}
	CHECK(access(path, F_OK) != 0);	/* no log file either */
}

SCENARIO_MAIN(scenarios)
