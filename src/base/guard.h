/* SPDX-License-Identifier: MIT */
/* The per-thread guard (guard.c): gdrhook's own code on this thread. */
#ifndef GH_GUARD_H
#define GH_GUARD_H

/* Guard for gdrhook-initiated work outside a wrapper (guard.c). */
int gh_guard_enter(void);
void gh_guard_leave(int was);
/* Down to was, applying what the guarded window queued (the wrappers). */
void gh_guard_down(int was);
/* What coming down means, handed down by the hooks layer at init: is
 * anything queued, apply it, and the first use (arm the exit work). */
void gh_guard_set_ops(int (*pending)(void), void (*drain)(void),
		      void (*first_use)(void));

/* Per-thread call state (call.c). */
struct gh_tls {
	int busy;		/* inside gdrhook's own code */
	struct gh_call *rt_outer; /* runtime call in progress */
};
extern __thread struct gh_tls gh_tls;

/* Non-zero while gdrhook's own code runs on this thread. */
static inline int gh_guard_busy(void)
{
	return gh_tls.busy;
}

#endif
