// SPDX-License-Identifier: MIT
/*
 * Signal handlers that allocate and free GPU memory (cuMemAlloc_v2 and
 * cuMemFree_v2 through the shim) while the thread they interrupt is
 * inside an allocation or a free itself: in gdrhook's bookkeeping, in the
 * driver double, under its lock.  Nothing may hang (the harness's alarm
 * fails a case that does), and afterwards the registry agrees with the
 * double's live set: every live allocation tracked with its size, every
 * freed one gone, the registry still trusted.  The double holds its lock
 * with signals blocked, so a handler runs as the call drops it.
 */
#include <cuda.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>

/* Not every helper of the shared header is used here. */
#pragma GCC diagnostic ignored "-Wunused-function"
#include "preload_util.h"
#include "fake/fakecuda.h"

#define HELD 4			/* allocations a handler keeps live */
#define MAIN_HELD 8

static CUdeviceptr held[HELD];
/* read by the signaler thread too: atomic */
static int handled, handler_errors;
static pthread_t target;
static int nsig = 20000;

/* Allocate one, free the one allocated HELD signals ago. */
static void on_signal(int sig)
{
	int saved = errno,
	    k = __atomic_load_n(&handled, __ATOMIC_RELAXED) % HELD;
	CUdeviceptr p = 0;

	if (cuMemAlloc_v2(&p, 4096 + 512 * (size_t)k) != CUDA_SUCCESS)
		__atomic_add_fetch(&handler_errors, 1, __ATOMIC_RELAXED);
	if (held[k] && cuMemFree_v2(held[k]) != CUDA_SUCCESS)
		__atomic_add_fetch(&handler_errors, 1, __ATOMIC_RELAXED);
	held[k] = p;
	__atomic_add_fetch(&handled, 1, __ATOMIC_RELEASE);
	errno = saved;
	(void)sig;
}

/* Each signal sent once the previous one was handled: none coalesce. */
static void *signaler(void *arg)
{
	for (int i = 0; i < nsig; i++) {
		while (__atomic_load_n(&handled, __ATOMIC_ACQUIRE) < i)
			sched_yield();
		pthread_kill(target, SIGUSR1);
	}
	(void)arg;
	return NULL;
}

/* What the double has live is what the registry has, and nothing else. */
static void check_consistent(const CUdeviceptr *gone, int ngone)
{
	struct fakecuda_live live[64];
	struct gdrhook_stats st = { .size = sizeof(st) };
	struct gdrhook_range r;
	size_t n = fakecuda_snapshot(live, 64);

	CHECK(n <= 64);
	for (size_t i = 0; i < n; i++) {
		CHECK_EQ(tracked(live[i].base, &r), 0);
		CHECK_EQ(r.base, live[i].base);
		CHECK_EQ(r.size, live[i].size);
	}
	for (int i = 0; i < ngone; i++) {
		int still = 0;

		for (size_t j = 0; j < n; j++)
			still |= live[j].base == gone[i];
		if (!still)
			CHECK_EQ(tracked(gone[i], NULL), -ENOENT);
	}
	CHECK_EQ(gdrhook_get_stats(&st), 0);
	CHECK_EQ(st.live, n);
	CHECK_EQ(gdrhook_trusted(), 1);
}

/*
 * Every size both sides use, allocated and freed once before any signal:
 * the double's free lists and records have room from then on, so a
 * handler's calls find what they need without malloc (which TSan rightly
 * calls unsafe in a handler).
 */
static void install(void)
{
	CUdeviceptr w[2 * (HELD + MAIN_HELD) + 1];
	struct sigaction sa;
	int n = 0;

	for (int r = 0; r < 2; r++) {
		for (int k = 0; k < HELD; k++)
			CU_OK(cuMemAlloc_v2(&w[n++], 4096 + 512 * (size_t)k));
		for (int k = 0; k < MAIN_HELD; k++)
			CU_OK(cuMemAlloc_v2(&w[n++], 8192 + 4096 * (size_t)k));
	}
	CU_OK(cuMemAlloc_v2(&w[n], 65536));
	CU_OK(cuMemFree_v2(w[n]));
	while (n)
		CU_OK(cuMemFree_v2(w[--n]));
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	CHECK_EQ(sigaction(SIGUSR1, &sa, NULL), 0);
}

/*
 * Signals at random points of this thread's allocations and frees: many
 * of them land in gdrhook's bookkeeping or in the double.  What a handler
 * does in gdrhook's guarded window is queued and must be applied in
 * order, before the interrupted call's own real call (which may get a
 * queued free's address back) and before a later handler's hook.
 */
static int scenario_random(void)
{
	CUdeviceptr mine[MAIN_HELD] = { 0 }, gone[MAIN_HELD];
	int ngone = 0;
	pthread_t th;

	alarm(300);	/* a hang fails, not blocks, whoever runs it */
	primary_ctx(0);
	install();
	target = pthread_self();
	CHECK_EQ(pthread_create(&th, NULL, signaler, NULL), 0);
	for (unsigned long i = 0;
	     __atomic_load_n(&handled, __ATOMIC_ACQUIRE) < nsig; i++) {
		int k = (int)(i % MAIN_HELD);

		if (mine[k])
			CU_OK(cuMemFree_v2(mine[k]));
		CU_OK(cuMemAlloc_v2(&mine[k], 8192 + 4096 * (size_t)k));
	}
	CHECK_EQ(pthread_join(th, NULL), 0);
	CHECK_EQ(handler_errors, 0);
	/* Half of ours freed, to see frees reach the registry too. */
	for (int k = 0; k < MAIN_HELD; k += 2) {
		gone[ngone++] = mine[k];
		CU_OK(cuMemFree_v2(mine[k]));
	}
	check_consistent(gone, ngone);
	return 0;
}

static const struct scenario scenarios[] = {
	{ "random", scenario_random },
};

/*
 * Deterministic: the double raises the signal on this thread while it
 * holds its lock, in the allocation and then in the free.
 */
TEST_TIMEOUT(handler_runs_while_the_double_holds_its_lock, 120)
{
	CUdeviceptr p, gone[1];

	primary_ctx(0);
	install();
	for (int i = 0; i < 200; i++) {
		int before = handled;

		fakecuda_signal_in_lock("cuMemAlloc_v2", SIGUSR1, 1);
		CU_OK(cuMemAlloc_v2(&p, 65536));
		CHECK_EQ(handled, before + 1);
		fakecuda_signal_in_lock("cuMemFree_v2", SIGUSR1, 1);
		CU_OK(cuMemFree_v2(p));
		CHECK_EQ(handled, before + 2);
	}
	CHECK_EQ(handler_errors, 0);
	gone[0] = p;
	check_consistent(gone, 1);
}

/* A storm: each signal sent as soon as the previous one was handled. */
TEST_TIMEOUT(signals_at_random_points_registry_stays_exact, 300)
{
	const char *env[] = { NULL };

	CHECK_EQ(run_scenario("random", env), 0);
}

SCENARIO_MAIN(scenarios)
