// SPDX-License-Identifier: MIT
/*
 * bench_classify: what Open MPI 5.0 pays per message to classify a host
 * buffer (accelerator_cuda_check_addr: cuMemRetainAllocationHandle,
 * cuPointerGetAttribute(MEMPOOL_HANDLE), cuPointerGetAttributes of
 * MEMORY_TYPE, CONTEXT and IS_MANAGED), under gdrhook and under the
 * floor (tests/bench/null_classify.c: a preloaded library that answers
 * as the driver answers for host memory and does nothing else), side by
 * side in one run:
 *
 *     make bench
 *     LD_LIBRARY_PATH=build/fake build/tests/bench/bench_classify
 *
 * (on a GPU host leave build/fake out: the first column is then the
 * driver itself, timed on a hundredth of the checks).  It starts itself once per library per round, in
 * turns (GH_BENCH_ROUNDS, default 7), each child timing GH_BENCH_CHECKS
 * checks (default 2000000) twice: back to back, and with GH_BENCH_WS_KIB
 * (default 64) KiB read between two checks, as a program does between
 * two messages (then the answer's own cache lines are cold, which is
 * what the floor is spared).  A row gives each library's median ns per
 * iteration (the reading included: it is the same in every column) and
 * gdrhook's excess over the floor, round by round: median and range.  GH_BENCH_LIB and
 * GH_BENCH_FLOOR name the libraries (defaults: beside this program's
 * build folder).  GH_BENCH_CHILD=1 runs one child alone, for counting
 * what a check touches:
 *
 *     GH_BENCH_CHILD=1 GH_BENCH_CHECKS=40000 LD_LIBRARY_PATH=build/fake \
 *       valgrind --tool=cachegrind --cache-sim=yes --trace-children=yes \
 *       env LD_PRELOAD=$PWD/build/libgdrhook.so build/tests/bench/bench_classify
 *
 * (50 000 checks, the last 10 000 with the reads: take the floor's
 * counts off and divide).  A program, not a test: it prints figures.
 */
#include <cuda.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_util.h"

#define NLIB	3
#define NWS	2

static const char *const lib_name[NLIB] = { "driver", "floor", "gdrhook" };

/* One check, as Open MPI makes it of every message's buffer. */
static int check(CUdeviceptr p)
{
	CUpointer_attribute at[3] = {
		CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_CONTEXT,
		CU_POINTER_ATTRIBUTE_IS_MANAGED,
	};
	CUmemGenericAllocationHandle h;
	CUmemoryPool pool;
	CUmemorytype mt = 0;
	CUcontext mc = NULL;
	unsigned int managed = 0;
	void *data[3] = { &mt, &mc, &managed };
	int r = 0;

	r += cuMemRetainAllocationHandle(&h, (void *)(uintptr_t)p);
	r += cuPointerGetAttribute(&pool, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE,
				   p);
	r += cuPointerGetAttributes(3, at, data, p);
	return r + (int)mt;
}

/* ns per check, @ws bytes of @w read before each (0: none). */
static double timed(CUdeviceptr p, long n, const volatile char *w, size_t ws)
{
	uint64_t t0;
	long sink = 0;

	t0 = now_ns();
	for (long i = 0; i < n; i++) {
		for (size_t o = 0; o < ws; o += 64)
			sink += w[o];
		sink += check(p);
	}
	if (sink == LONG_MIN)	/* keeps the loop */
		puts("");
	return (double)(now_ns() - t0) / (double)n;
}

/* A child: "ns_back_to_back ns_with_reads" on stdout. */
static int child(long n, size_t ws)
{
	CUdevice d;
	CUcontext c;
	char *buf = malloc(64), *w = malloc(ws ? ws : 1);
	double a, b;

	if (!buf || !w || cuInit(0) || cuDeviceGet(&d, 0) ||
	    cuDevicePrimaryCtxRetain(&c, d) || cuCtxSetCurrent(c)) {
		fprintf(stderr, "bench_classify: no CUDA context\n");
		return 1;
	}
	memset(w, 1, ws ? ws : 1);
	/* a first check: the driver has answered one (gdrhook's rule) */
	check((CUdeviceptr)(uintptr_t)buf);
	a = timed((CUdeviceptr)(uintptr_t)buf, n, w, 0);
	b = timed((CUdeviceptr)(uintptr_t)buf, n / 4, w, ws);
	printf("%.3f %.3f\n", a, b);
	return 0;
}

/* A child's environment: LD_PRELOAD=@lib (NULL: none), @n checks a loop. */
struct child_env {
	const char *lib;
	long n;
};

static void child_setup(const void *arg)
{
	const struct child_env *e = arg;
	char num[32];

	if (e->lib)
		setenv("LD_PRELOAD", e->lib, 1);
	else
		unsetenv("LD_PRELOAD");
	setenv("GH_BENCH_CHILD", "1", 1);
	snprintf(num, sizeof(num), "%ld", e->n);
	setenv("GH_BENCH_CHECKS", num, 1);
}

/* Runs this program as a child (child_env); its two figures. */
static int run(const char *self, const char *lib, long n, double out[2])
{
	char *argv[] = { (char *)self, NULL };
	struct child_env e = { lib, n };
	char line[256] = "";
	pid_t pid;
	FILE *f = bench_spawn(self, argv, child_setup, &e, &pid);

	if (!f)
		return -1;
	if (!fgets(line, sizeof(line), f))
		line[0] = 0;
	if (bench_reap(f, pid) ||
	    sscanf(line, "%lf %lf", &out[0], &out[1]) != 2)
		return -1;
	return 0;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return rank(v, n, 0.5);
}

int main(int argc, char **argv)
{
	long n = env_long("GH_BENCH_CHECKS", 2000000);
	size_t ws = (size_t)env_long("GH_BENCH_WS_KIB", 64) << 10;
	int rounds = (int)env_long("GH_BENCH_ROUNDS", 7);
	char self[PATH_MAX], dir[PATH_MAX], deflib[PATH_MAX + 32],
	     deffloor[PATH_MAX + 32];
	const char *lib[NLIB];
	double v[NLIB][NWS][64], ex[NWS][64];
	ssize_t len;
	int ok[NLIB] = { 0 };

	(void)argc;
	if (getenv("GH_BENCH_CHILD"))
		return child(n, ws);
	if (rounds < 1 || rounds > 64 || n < 8) {
		fprintf(stderr, "bench_classify: GH_BENCH_ROUNDS 1..64, GH_BENCH_CHECKS >= 8\n");
		return 2;
	}
	len = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (len <= 0)
		return 1;
	self[len] = 0;
	snprintf(dir, sizeof(dir), "%s", self);
	*strrchr(dir, '/') = 0;
	snprintf(deflib, sizeof(deflib), "%s/../../libgdrhook.so", dir);
	snprintf(deffloor, sizeof(deffloor), "%s/libnull_classify.so", dir);
	lib[0] = NULL;
	lib[1] = getenv("GH_BENCH_FLOOR") ? getenv("GH_BENCH_FLOOR") : deffloor;
	lib[2] = getenv("GH_BENCH_LIB") ? getenv("GH_BENCH_LIB") : deflib;
	printf("bench_classify: Open MPI's check of a host buffer (3 calls), %d rounds, %ld checks a child, %zu KiB read between checks in the second row\n",
	       rounds, n, ws >> 10);
	for (int r = 0; r < rounds; r++) {
		for (int k = 0; k < NLIB; k++) {
			int l = (k + r) % NLIB;	/* none always first */
			double o[2];

			/* the driver takes microseconds a call */
			if (run(self, lib[l], l ? n : n / 100 + 8, o)) {
				fprintf(stderr, "bench_classify: the %s child failed\n",
					lib_name[l]);
				return 1;
			}
			v[l][0][r] = o[0];
			v[l][1][r] = o[1];
			ok[l]++;
		}
		for (int w = 0; w < NWS; w++)
			ex[w][r] = v[2][w][r] - v[1][w][r];
	}
	printf("%-24s %12s %12s %12s   %-26s\n", "ns a check", lib_name[0],
	       lib_name[1], lib_name[2], "gdrhook - floor (range)");
	for (int w = 0; w < NWS; w++) {
		double m[NLIB], lo, hi;

		for (int l = 0; l < NLIB; l++)
			m[l] = median(v[l][w], ok[l]);
		qsort(ex[w], (size_t)rounds, sizeof(double), cmp_double);
		lo = ex[w][0];
		hi = ex[w][rounds - 1];
		snprintf(dir, sizeof(dir), "%zu KiB read between", ws >> 10);
		printf("%-24s %12.1f %12.1f %12.1f   %6.1f (%.1f .. %.1f)\n",
		       w ? dir : "back to back", m[0], m[1], m[2],
		       median(ex[w], rounds), lo, hi);
	}
	printf("(the driver's column is the CUDA test double's when build/fake is on LD_LIBRARY_PATH)\n");
	return 0;
}
