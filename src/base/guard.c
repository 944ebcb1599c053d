// SPDX-License-Identifier: MIT
/*
 * The per-thread guard (base layer): while gdrhook's own code runs on a
 * thread, CUDA calls on that thread (its own, a signal handler's, a
 * subscriber's) go straight to the driver and queue their effect.  The
 * guard is a flag; what coming down means (apply the queued effects, arm
 * the exit work at the first use) is handed down by the hooks layer
 * (gh_guard_set_ops at init), so every layer may raise it and none
 * calls up.
 */
#include <errno.h>

#include "compiler.h"
#include "guard.h"

__thread struct gh_tls gh_tls;

static struct {
	int (*pending)(void);
	void (*drain)(void);
	void (*first_use)(void);
} gops;

void gh_guard_set_ops(int (*pending)(void), void (*drain)(void),
		      void (*first_use)(void))
{
	gops.drain = drain;
	gops.first_use = first_use;
	__atomic_store_n(&gops.pending, pending, __ATOMIC_RELEASE);
}

static int pending(void)
{
	int (*fn)(void) = __atomic_load_n(&gops.pending, __ATOMIC_ACQUIRE);

	return fn && fn();
}

/*
 * Bring the guard down to `was`, applying first what calls in the
 * guarded window queued, including what a signal queues between the
 * last look and the guard coming down.
 */
void gh_guard_down(int was)
{
	for (;;) {
		if (GH_UNLIKELY(pending())) {
			gh_tls.busy = 1;
			gops.drain();
		}
		gh_tls.busy = was;
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		if (GH_LIKELY(was || !pending()))
			return;
	}
}

/* Run fn with the guard up, so CUDA calls it makes pass straight through. */
int gh_guard_enter(void)
{
	int was = gh_tls.busy;

	gh_tls.busy = 1;
	if (!was && GH_UNLIKELY(pending()))
		gops.drain();
	/* verbs programs hear about configuration problems too */
	if (!was && gops.first_use)
		gops.first_use();
	return was;
}

void gh_guard_leave(int was)
{
	int saved = errno;

	gh_guard_down(was);
	errno = saved;
}
