// SPDX-License-Identifier: MIT
/*
 * spin_shim: an LD_PRELOAD stand-in for a hook that does nothing but take
 * time.  It wraps cuMemAlloc_v2 and cuMemFree_v2 (after the allocation,
 * before the free, as gdrhook does) and spins SPIN_NS nanoseconds on the
 * calling thread, touching no shared data; with SPIN_SHARED set it also
 * takes one process-wide mutex and writes one shared line per call.  It
 * answers "how much does X ns per call cost this workload", the anchor
 * for gdrhook's own per-call cost (tests/bench/README.md):
 *
 *   LD_PRELOAD=build/tests/bench/libspin_shim.so SPIN_NS=250 \
 *     GH_BENCH_CHURN_THREADS=16 build/tests/bench/bench_driver churn
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

typedef int cu_result;
typedef unsigned long long cu_ptr;

static long spin_ns = -1;
static int shared;
static pthread_mutex_t mu = PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP;
static volatile uint64_t line[8];

static void spin(void)
{
	struct timespec a, b;

	if (spin_ns < 0) {
		const char *e = getenv("SPIN_NS");

		shared = getenv("SPIN_SHARED") != NULL;
		spin_ns = e ? atol(e) : 0;
	}
	if (shared) {
		pthread_mutex_lock(&mu);
		line[0]++;
		line[1] = line[0];
		pthread_mutex_unlock(&mu);
	}
	if (spin_ns <= 0)
		return;
	clock_gettime(CLOCK_MONOTONIC, &a);
	do
		clock_gettime(CLOCK_MONOTONIC, &b);
	while ((b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec) <
	       spin_ns);
}

cu_result cuMemAlloc_v2(cu_ptr *p, size_t n);
cu_result cuMemAlloc_v2(cu_ptr *p, size_t n)
{
	static cu_result (*f)(cu_ptr *, size_t);
	cu_result r;

	if (!f)
		f = (cu_result (*)(cu_ptr *, size_t))dlsym(RTLD_NEXT,
							   "cuMemAlloc_v2");
	r = f(p, n);
	spin();
	return r;
}

cu_result cuMemFree_v2(cu_ptr p);
cu_result cuMemFree_v2(cu_ptr p)
{
	static cu_result (*f)(cu_ptr);

	if (!f)
		f = (cu_result (*)(cu_ptr))dlsym(RTLD_NEXT, "cuMemFree_v2");
	spin();
	return f(p);
}
