/* SPDX-License-Identifier: MIT */
/*
 * What the benchmark programs share: the clock, knobs from the
 * environment, sorting, a random sequence and the CPUs to pin to.
 * Header-only (each program is one file); static inline, so a program
 * that uses one helper carries no other.
 */
#ifndef GH_BENCH_UTIL_H
#define GH_BENCH_UTIL_H

#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static inline uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* $name as a number (0x.. and 0.. as in C), def when unset or empty. */
static inline long env_long(const char *name, long def)
{
	const char *s = getenv(name);

	return s && *s ? strtol(s, NULL, 0) : def;
}

static inline double env_double(const char *name, double def)
{
	const char *s = getenv(name);

	return s && *s ? strtod(s, NULL) : def;
}

/* qsort's comparison of doubles, ascending. */
static inline int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Of a sorted array: the element at rank p (0..1), rounded to nearest. */
static inline double rank(const double *s, int n, double p)
{
	return s[(int)(p * (n - 1) + 0.5)];
}

/* xorshift64: the next of the sequence seeded by *s (not 0). */
static inline uint64_t xs(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

/* The CPUs this process may run on, in order; returns the count. */
static inline int allowed_cpus(int *cpus, int max)
{
	cpu_set_t set;
	int n = 0;

	if (sched_getaffinity(0, sizeof(set), &set))
		return 0;
	for (int c = 0; c < CPU_SETSIZE && n < max; c++)
		if (CPU_ISSET(c, &set))
			cpus[n++] = c;
	return n;
}

/* Pins the calling thread to @cpu; 0, or an error number. */
static inline int pin_cpu(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

/*
 * Starts this program again (@self with @argv) as a child whose standard
 * output is the stream returned; @setup(@arg) runs in the child first
 * (its environment: the library to preload, the figures to make).  NULL
 * when it cannot start.  bench_reap() closes the stream and waits.
 */
static inline FILE *bench_spawn(const char *self, char *const argv[],
				void (*setup)(const void *), const void *arg,
				pid_t *pid)
{
	int fd[2];
	FILE *f;

	if (pipe(fd))
		return NULL;
	*pid = fork();
	if (*pid < 0) {
		close(fd[0]);
		close(fd[1]);
		return NULL;
	}
	if (!*pid) {
		dup2(fd[1], 1);
		close(fd[0]);
		close(fd[1]);
		if (setup)
			setup(arg);
		execv(self, argv);
		_exit(127);
	}
	close(fd[1]);
	f = fdopen(fd[0], "r");
	if (!f) {
		close(fd[0]);
		waitpid(*pid, NULL, 0);
	}
	return f;
}

/* 0 when the child bench_spawn() started exited with 0. */
static inline int bench_reap(FILE *f, pid_t pid)
{
	int st;

	fclose(f);
	return waitpid(pid, &st, 0) == pid && WIFEXITED(st) &&
	       !WEXITSTATUS(st) ? 0 : -1;
}

#endif /* GH_BENCH_UTIL_H */
