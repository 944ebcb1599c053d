// SPDX-License-Identifier: MIT
/*
 * The face's part of the lifecycle (the info banner, the exit counters)
 * is in place at the program's first CUDA call, wherever that call is
 * made: in main, in the program's constructor, or in the constructor of
 * a library the program links, which the loader runs before those of a
 * preloaded libgdrhook.so (tests/preload/early_cuda.c and
 * early_cuda_lib.c).  A face handed over by a constructor of its own
 * misses the last: the banner is never printed.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

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
	snprintf(buf, cap, "%s/gdrhook-test-%d-lifecycle-%s",
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

TEST_MAIN()
