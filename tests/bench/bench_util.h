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
#include <stdlib.h>
#include <time.h>

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

#endif /* GH_BENCH_UTIL_H */
