/* SPDX-License-Identifier: MIT */
/*
 * Helpers for tests that run under LD_PRELOAD=libgdrhook.so against the
 * CUDA driver test double: the double's test hooks, a primary context,
 * the public API, re-running this program with other GDRHOOK_* settings,
 * and reading back the event log.
 */
#ifndef GH_PRELOAD_UTIL_H
#define GH_PRELOAD_UTIL_H

#include <cuda.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gdrhook.h"
#include "harness.h"

#define CU_OK(call) CHECK_EQ((call), CUDA_SUCCESS)

static inline void *fake_sym(const char *name)
{
	void *p = dlsym(RTLD_DEFAULT, name);

	if (!p)
		TH_FAIL("driver double lacks %s", name);
	return p;
}

static inline unsigned long fake_calls(const char *sym)
{
	return ((unsigned long (*)(const char *))fake_sym("fakecuda_calls"))(sym);
}

static inline void fake_fail_next(const char *sym, CUresult rc, int n)
{
	((void (*)(const char *, CUresult, int))fake_sym("fakecuda_fail_next"))(
		sym, rc, n);
}

static CUcontext primary_ctx(int dev)
{
	CUcontext ctx = NULL;

	CU_OK(cuInit(0));
	CU_OK(cuDevicePrimaryCtxRetain(&ctx, dev));
	CU_OK(cuCtxSetCurrent(ctx));
	return ctx;
}

/* The registry's view of ptr: 0, -ENOENT, ... */
static inline int tracked(uint64_t ptr, struct gdrhook_range *r)
{
	struct gdrhook_range tmp;

	return gdrhook_lookup((void *)(uintptr_t)ptr, 1, r ? r : &tmp);
}

/* A program's scenarios: each runs alone in a fresh process (run_scenario),
 * found by name when the program is started with --scenario NAME. */
struct scenario {
	const char *name;
	int (*fn)(void);
};

/* main() of a test program with scenarios: --scenario NAME runs one (exit
 * 2 for an unknown name), anything else runs the tests. */
#define SCENARIO_MAIN(table)						\
	int main(int argc, char **argv)					\
	{								\
		if (argc == 3 && !strcmp(argv[1], "--scenario")) {	\
			for (size_t i = 0;				\
			     i < sizeof(table) / sizeof((table)[0]); i++) \
				if (!strcmp(argv[2], (table)[i].name))	\
					return (table)[i].fn();		\
			return 2;					\
		}							\
		return th_run(argc, argv);				\
	}

/* Run this program's scenario `name` in a fresh process with env set. */
static inline int run_scenario(const char *name, const char *const *env)
{
	pid_t pid = fork();
	int st;

	if (pid == 0) {
		char self[4096];
		ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

		if (n < 0)
			_exit(120);
		self[n] = 0;
		for (const char *const *e = env; e && *e; e++)
			putenv((char *)*e);
		execl(self, self, "--scenario", name, (char *)NULL);
		_exit(121);
	}
	CHECK(pid > 0);
	CHECK(waitpid(pid, &st, 0) == pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The same, its stderr into the file err (truncated; NULL: as it is). */
static inline int run_scenario_err(const char *name, const char *const *env,
				   const char *err)
{
	pid_t pid = fork();
	int st;

	if (pid == 0) {
		char self[4096];
		ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
		int fd = err ? open(err, O_WRONLY | O_CREAT | O_TRUNC, 0600) : -1;

		if (n < 0 || (err && (fd < 0 || dup2(fd, 2) < 0)))
			_exit(120);
		self[n] = 0;
		if (fd >= 0)
			close(fd);
		for (const char *const *e = env; e && *e; e++)
			putenv((char *)*e);
		execl(self, self, "--scenario", name, (char *)NULL);
		_exit(121);
	}
	CHECK(pid > 0);
	CHECK(waitpid(pid, &st, 0) == pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Lines of file path that contain what, or -1. */
static inline int count_in_file(const char *path, const char *what)
{
	char line[1024];
	FILE *f = fopen(path, "r");
	int n = 0;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		n += strstr(line, what) != NULL;
	fclose(f);
	return n;
}

/* Temporary log path unique to this case. */
static inline const char *log_path(char *buf, size_t n, const char *tag)
{
	snprintf(buf, n, "%s/gdrhook-test-%d-%s.jsonl",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid(),
		 tag);
	unlink(buf);
	return buf;
}

/* Count log lines containing every one of the given fragments. */
static inline int log_count(const char *path, const char *const *frags)
{
	FILE *f = fopen(path, "r");
	char line[4096];
	int n = 0;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		int all = 1;

		for (const char *const *p = frags; *p; p++)
			if (!strstr(line, *p))
				all = 0;
		n += all;
	}
	fclose(f);
	return n;
}

#define LOG_COUNT(path, ...) \
	log_count((path), (const char *const[]){ __VA_ARGS__, NULL })

#endif
