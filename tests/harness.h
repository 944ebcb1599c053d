/* SPDX-License-Identifier: MIT */
/*
 * Minimal test harness: every TEST() runs in its own forked child with a
 * timeout, so a crash fails one case, not the run.  A case passes by
 * returning, fails on a failed CHECK or a signal, and skips by calling
 * SKIP() (exit 77).  main() comes from TEST_MAIN().
 *
 *   TEST(name) { CHECK(x == 1); CHECK_EQ(a, b); }
 *   TEST_MAIN()
 *
 * Filters: argv[1..] are substrings of case names to run, or "=name" for
 * that one case alone; filters that select no case fail the run (a typo
 * must not pass).  "--list" prints the case names.  `make check-one
 * T=<program> CASE=<filter>` runs one program that way.
 * Output ends with a line "N passed, N failed, N skipped".
 */
#ifndef GH_TEST_HARNESS_H
#define GH_TEST_HARNESS_H

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct th_case {
	const char *name;
	void (*fn)(void);
	int timeout_s;
};

#define TH_MAX_CASES 512
static struct th_case th_cases[TH_MAX_CASES];
static int th_ncases;

#define TEST_TIMEOUT(name, secs)					\
	static void th_fn_##name(void);					\
	__attribute__((constructor)) static void th_reg_##name(void)	\
	{								\
		if (th_ncases < TH_MAX_CASES)				\
			th_cases[th_ncases++] = (struct th_case){	\
				#name, th_fn_##name, (secs) };		\
	}								\
	static void th_fn_##name(void)

#define TEST(name) TEST_TIMEOUT(name, 60)

#define TH_FAIL(...)							\
	do {								\
		fprintf(stderr, "  %s:%d: ", __FILE__, __LINE__);	\
		fprintf(stderr, __VA_ARGS__);				\
		fputc('\n', stderr);					\
		fflush(NULL);						\
		_exit(1);						\
	} while (0)

#define CHECK(cond)							\
	do {								\
		if (!(cond))						\
			TH_FAIL("CHECK(%s) failed", #cond);		\
	} while (0)

#define CHECK_EQ(a, b)							\
	do {								\
		long long th_a_ = (long long)(a);			\
		long long th_b_ = (long long)(b);			\
		if (th_a_ != th_b_)					\
			TH_FAIL("CHECK_EQ(%s, %s): %lld != %lld",	\
				#a, #b, th_a_, th_b_);			\
	} while (0)

#define CHECK_STR(a, b)							\
	do {								\
		const char *th_a_ = (a), *th_b_ = (b);			\
		if (!th_a_ || !th_b_ || strcmp(th_a_, th_b_))		\
			TH_FAIL("CHECK_STR(%s, %s): \"%s\" != \"%s\"",	\
				#a, #b, th_a_ ? th_a_ : "(null)",	\
				th_b_ ? th_b_ : "(null)");		\
	} while (0)

#define SKIP(...)							\
	do {								\
		fprintf(stderr, "  skip: ");				\
		fprintf(stderr, __VA_ARGS__);				\
		fputc('\n', stderr);					\
		fflush(NULL);						\
		_exit(77);						\
	} while (0)

static int th_selected(const char *name, int argc, char **argv)
{
	if (argc < 2)
		return 1;
	for (int i = 1; i < argc; i++)
		if (argv[i][0] == '=' ? !strcmp(name, argv[i] + 1) :
		    strstr(name, argv[i]) != NULL)
			return 1;
	return 0;
}

static int th_run(int argc, char **argv)
{
	int passed = 0, failed = 0, skipped = 0, ran = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 2 && !strcmp(argv[1], "--list")) {
		for (int i = 0; i < th_ncases; i++)
			printf("%s\n", th_cases[i].name);
		return 0;
	}
	for (int i = 0; i < th_ncases; i++) {
		struct th_case *c = &th_cases[i];
		int status = 0;
		pid_t pid;

		if (!th_selected(c->name, argc, argv))
			continue;
		ran++;
		fflush(NULL);
		pid = fork();
		if (pid == 0) {
			alarm(c->timeout_s);
			c->fn();
			fflush(NULL);
			_exit(0);
		}
		if (pid < 0 || waitpid(pid, &status, 0) < 0) {
			printf("FAIL %s: fork/wait: %s\n", c->name,
			       strerror(errno));
			failed++;
			continue;
		}
		if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
			printf("PASS %s\n", c->name);
			passed++;
		} else if (WIFEXITED(status) && WEXITSTATUS(status) == 77) {
			printf("SKIP %s\n", c->name);
			skipped++;
		} else if (WIFSIGNALED(status)) {
			printf("FAIL %s: signal %d%s\n", c->name,
			       WTERMSIG(status),
			       WTERMSIG(status) == SIGALRM ? " (timeout)" : "");
			failed++;
		} else {
			printf("FAIL %s: exit %d\n", c->name,
			       WEXITSTATUS(status));
			failed++;
		}
	}
	if (!ran && argc > 1) {
		printf("FAIL no case matches the filters (--list names them)\n");
		failed++;
	}
	printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
	return failed ? 1 : 0;
}

/*
 * Entries of a directory but "." and "..": threads in /proc/self/task,
 * descriptors in /proc/self/fd (its own, open while it reads, counted).
 */
static inline int th_dir_entries(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *e;
	int n = 0;

	if (!d)
		TH_FAIL("cannot read %s: %s", path, strerror(errno));
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

#define TEST_MAIN()							\
	int main(int argc, char **argv)					\
	{								\
		return th_run(argc, argv);				\
	}

#endif
