// SPDX-License-Identifier: MIT
/*
 * The exec family (src/hooks/exec.c), under LD_PRELOAD: every form
 * (execl, execle, execlp, execv, execvp, execvpe, execve, execveat,
 * fexecve) runs the new image with exactly the arguments and
 * environment it was given; one that fails returns -1 with the real
 * error and leaves the program going, its memory still tracked; and the
 * event log is drained before the image is replaced, so what the old
 * image recorded is in the log even when the new one never writes it.
 */
#include <cuda.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>

/* Not every helper of the shared header is used here. */
#pragma GCC diagnostic ignored "-Wunused-function"
#include "preload_util.h"

extern char **environ;

static void tmp_path(char *buf, size_t cap, const char *tag)
{
	snprintf(buf, cap, "%s/gdrhook-test-%d-exec-%s",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid(),
		 tag);
	unlink(buf);
}

/* The shell line that writes its arguments and $EXEC_T to $1. */
#define SH_LINE	"out=$1; shift; printf '%s|' \"$0\" \"$@\" \"$EXEC_T\" > \"$out\""

/*
 * Run form (0..8) of exec in a child, the new image a shell that writes
 * its argv[0], the arguments after the output path and $EXEC_T into
 * out; returns what it wrote.
 */
static void run_form(int form, char *got, size_t cap)
{
	char out[256];
	char *argv[] = { "sh0", "-c", SH_LINE, "sh0", out, "x y", "z", NULL };
	char *envp[] = { "EXEC_T=envp", "PATH=/usr/bin:/bin", NULL };
	pid_t pid;
	int st, fd;
	ssize_t n;

	tmp_path(out, sizeof(out), "argv");
	argv[3] = "a0";
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		int dir;

		setenv("EXEC_T", "environ", 1);
		switch (form) {
		case 0:
			execl("/bin/sh", "sh0", "-c", SH_LINE, "a0", out,
			      "x y", "z", (char *)NULL);
			break;
		case 1:
			execle("/bin/sh", "sh0", "-c", SH_LINE, "a0", out,
			       "x y", "z", (char *)NULL, envp);
			break;
		case 2:
			execlp("sh", "sh0", "-c", SH_LINE, "a0", out, "x y",
			       "z", (char *)NULL);
			break;
		case 3:
			execv("/bin/sh", argv);
			break;
		case 4:
			execvp("sh", argv);
			break;
		case 5:
			execvpe("sh", argv, envp);
			break;
		case 6:
			execve("/bin/sh", argv, envp);
			break;
		case 7:
			dir = open("/bin", O_PATH | O_DIRECTORY);
			execveat(dir, "sh", argv, envp, 0);
			break;
		case 8:
			fexecve(open("/bin/sh", O_RDONLY), argv, envp);
			break;
		}
		_exit(120);
	}
	CHECK_EQ(waitpid(pid, &st, 0), pid);
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		TH_FAIL("form %d: the new image did not run (status %#x)",
			form, st);
	fd = open(out, O_RDONLY);
	CHECK(fd >= 0);
	n = read(fd, got, cap - 1);
	CHECK(n >= 0);
	got[n] = 0;
	close(fd);
	unlink(out);
}

TEST(every_form_passes_its_arguments_and_environment)
{
	static const char *const want[] = {
		"a0|x y|z|environ|",	/* execl: the program's environ */
		"a0|x y|z|envp|",	/* execle: the envp after the NULL */
		"a0|x y|z|environ|",	/* execlp */
		"a0|x y|z|environ|",	/* execv */
		"a0|x y|z|environ|",	/* execvp */
		"a0|x y|z|envp|",	/* execvpe */
		"a0|x y|z|envp|",	/* execve */
		"a0|x y|z|envp|",	/* execveat */
		"a0|x y|z|envp|",	/* fexecve */
	};
	char got[512];

	for (int form = 0; form < 9; form++) {
		run_form(form, got, sizeof(got));
		if (strcmp(got, want[form]))
			TH_FAIL("form %d: the new image got \"%s\", want \"%s\"",
				form, got, want[form]);
	}
}

/* Each form that fails: -1, the real errno, the program goes on. */
TEST(failed_exec_returns_the_real_error_and_the_program_goes_on)
{
	char *argv[] = { "nope", NULL };
	char *envp[] = { NULL };
	CUdeviceptr p;

	primary_ctx(0);
	CU_OK(cuMemAlloc_v2(&p, 4096));
	errno = 0;
	CHECK_EQ(execl("/nonexistent/prog", "nope", (char *)NULL), -1);
	CHECK_EQ(errno, ENOENT);
	errno = 0;
	CHECK_EQ(execle("/nonexistent/prog", "nope", (char *)NULL, envp), -1);
	CHECK_EQ(errno, ENOENT);
	errno = 0;
	CHECK_EQ(execlp("gdrhook-no-such-program", "nope", (char *)NULL), -1);
	CHECK_EQ(errno, ENOENT);
	errno = 0;
	CHECK_EQ(execv("/nonexistent/prog", argv), -1);
	CHECK_EQ(errno, ENOENT);
	errno = 0;
	CHECK_EQ(execvp("gdrhook-no-such-program", argv), -1);
	CHECK_EQ(errno, ENOENT);
	errno = 0;
	CHECK_EQ(execvpe("gdrhook-no-such-program", argv, envp), -1);
	CHECK_EQ(errno, ENOENT);
	errno = 0;
	CHECK_EQ(execve("/", argv, envp), -1);	/* a directory */
	CHECK_EQ(errno, EACCES);
	errno = 0;
	CHECK_EQ(execveat(-1, "relative", argv, envp, 0), -1);
	CHECK_EQ(errno, EBADF);
	errno = 0;
	CHECK_EQ(fexecve(-1, argv, envp), -1);
	CHECK_EQ(errno, EINVAL);	/* glibc's answer to a negative fd */
	/* still hooked: the registry kept p and follows its free */
	CHECK_EQ(tracked(p, NULL), 0);
	CU_OK(cuMemFree_v2(p));
	CHECK_EQ(tracked(p, NULL), -ENOENT);
}

/* ---- scenarios run in a fresh process with their own GDRHOOK_* ---- */

/* Three allocations recorded, then an image that never uses CUDA (so
 * never writes the log): what is in the log is the old image's drain. */
static int drain_then(int form)
{
	char *argv[] = { "true", NULL };
	CUdeviceptr p;

	primary_ctx(0);
	for (int i = 0; i < 3; i++)
		if (cuMemAlloc_v2(&p, 4096 << i))
			return 2;
	switch (form) {
	case 0:
		execl("/bin/true", "true", (char *)NULL);
		break;
	case 1:
		execvp("true", argv);
		break;
	case 2:
		fexecve(open("/bin/true", O_RDONLY), argv, environ);
		break;
	}
	return 3;
}

static int scenario_drain_execl(void)
{
	return drain_then(0);
}

static int scenario_drain_execvp(void)
{
	return drain_then(1);
}

static int scenario_drain_fexecve(void)
{
	return drain_then(2);
}

static const struct scenario scenarios[] = {
	{ "drain_execl", scenario_drain_execl },
	{ "drain_execvp", scenario_drain_execvp },
	{ "drain_fexecve", scenario_drain_fexecve },
};

TEST(the_log_is_drained_before_the_image_goes)
{
	static const char *const names[] = { "drain_execl", "drain_execvp",
					     "drain_fexecve" };
	char path[256], var[300];
	const char *env[] = { var, NULL };

	for (int i = 0; i < 3; i++) {
		snprintf(var, sizeof(var), "GDRHOOK_TRACE=%s",
			 log_path(path, sizeof(path), names[i]));
		CHECK_EQ(run_scenario(names[i], env), 0);
		if (LOG_COUNT(path, "\"ev\":\"alloc\"") != 3)
			TH_FAIL("%s: %d allocation records, want 3", names[i],
				LOG_COUNT(path, "\"ev\":\"alloc\""));
		CHECK_EQ(LOG_COUNT(path, "\"ev\":\"alloc\"", "\"size\":16384"),
			 1);
		CHECK_EQ(LOG_COUNT(path, "{\"ev\":\"start\""), 1);
		unlink(path);
	}
}

SCENARIO_MAIN(scenarios)
