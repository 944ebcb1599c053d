// SPDX-License-Identifier: MIT
/*
 * Per-call bookkeeping shared by every wrapper: the reentrancy guard,
 * timing, errno preservation and runtime-over-driver nesting.
 *
 * The CUDA runtime reaches the driver through pointers it got from
 * cuGetProcAddress, which are our driver wrappers.  A driver call made
 * inside a runtime call (cudaMalloc -> cuMemAlloc_v2) does the registry
 * work, because the driver level knows the context, and is labelled with
 * the runtime call the program made.
 */
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <string.h>

#include "rcache/rcache.h"
#include "hookrt.h"
#include "init.h"

/*
 * A hook left without returning: a siglongjmp out of a signal handler
 * or a subscriber callback that ran inside it, pthread_exit from one, a
 * C++ exception through one.  glibc runs the cleanup buffer gh_enter
 * pushed for a longjmp or pthread_exit that unwinds the wrapper's frame
 * (__pthread_cleanup_upto); the wrappers' cleanup attribute
 * (gh_call_unwound) catches an exception.  What the call had open ends
 * here, as gh_leave would have ended it: its in-flight mark, the
 * callbacks it was inside, the guard.  Its real call may not have run.
 */
/* glibc's, exported since 2.2.5: the cleanup list a longjmp runs */
extern void _pthread_cleanup_push(struct _pthread_cleanup_buffer *buf,
				  void (*routine)(void *), void *arg);
extern void _pthread_cleanup_pop(struct _pthread_cleanup_buffer *buf,
				 int execute);

static void call_abandoned(void *arg)
{
	struct gh_call *c = arg;
	int saved = errno;

	c->pushed = 0;
	if (gh_tls.rt_outer == c)
		gh_tls.rt_outer = NULL;
	gh_inflight_call_end();
	gh_subscribers_abandon();
	gh_tls.busy = 0;
	gh_warn_once("%s: a hook was left without returning (siglongjmp, pthread_exit or an exception through a callback): its marks were ended",
		     c->api);
	errno = saved;
}

void gh_call_unwound(struct gh_call **cp)
{
	struct gh_call *c = *cp;

	if (GH_LIKELY(!c || !c->pushed))
		return;
	_pthread_cleanup_pop(&c->unwind, 0);
	call_abandoned(c);
}

int gh_enter(struct gh_call *c, unsigned int sym)
{
	int saved = errno;

	if (GH_UNLIKELY(gh_tls.busy) && gh_active() &&
	    gh_syms[sym].family <= GH_FAM_RUNTIME) {
		/* Our own bookkeeping is running on this thread: the wrapper
		 * calls through and queues the effect (src/hooks/deferred.c). */
		errno = saved;
		return GH_GUARDED;
	}
	if (!gh_active() || gh_tls.busy) {
		errno = saved;
		return GH_PASS;
	}
	memset(c, 0, offsetof(struct gh_call, gone));
	c->sym = sym;
	c->api = gh_syms[sym].name;
	c->saved_errno = saved;
	c->dev = -1;
	if (gh_syms[sym].family == GH_FAM_RUNTIME) {
		if (gh_tls.rt_outer) {
			errno = saved;
			return GH_PASS;
		}
		gh_tls.rt_outer = c;
	} else if (gh_tls.rt_outer) {
		c->outer = gh_tls.rt_outer;
		c->api = c->outer->api;
	}
	_pthread_cleanup_push(&c->unwind, call_abandoned, c);
	c->pushed = 1;
	gh_tls.busy = 1;
	/* a handler's hook after a window's calls queued, before they were
	 * applied (they came first) */
	if (GH_UNLIKELY(gh_deferred_pending()))
		gh_deferred_drain();
	gh_note_cuda_used();
	gh_inflight_call_begin();	/* until its registry work is done */
	return GH_HOOK;
}

/*
 * The clock is read only for the event log (t, dur_ns).  What the
 * guarded window queued is applied before the real call: a queued free's
 * address may come back from this very call.
 */
void gh_real_begin(struct gh_call *c)
{
	gh_guard_down(0);
	c->t0 = gh_evlog_clock();
	errno = c->saved_errno;
}

void gh_real_end(struct gh_call *c, int rc)
{
	c->saved_errno = errno;
	if (c->t0)
		c->t1 = gh_now_ns();
	c->rc = rc;
	gh_tls.busy = 1;
}

void gh_leave(struct gh_call *c)
{
	if (gh_tls.rt_outer == c)
		gh_tls.rt_outer = NULL;
	if (GH_UNLIKELY(gh_deferred_pending()))
		gh_deferred_drain();
	gh_inflight_call_end();
	gh_guard_down(0);
	if (GH_LIKELY(c->pushed)) {
		c->pushed = 0;
		_pthread_cleanup_pop(&c->unwind, 0);
	}
	errno = c->saved_errno;
}
