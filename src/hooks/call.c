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
#include <signal.h>
#include <stddef.h>
#include <string.h>

#include "rcache/rcache.h"
#include "hookrt.h"
#include "init.h"

static int on_alt_stack(void)
{
	stack_t ss;

	return !sigaltstack(NULL, &ss) && (ss.ss_flags & SS_ONSTACK);
}

/*
 * A hook of this thread is still marked as running, yet this call is not
 * deeper on the stack than it: that hook was left without returning (a
 * siglongjmp, an exception through a subscriber callback).  Its marks
 * would never end: end them now.  A signal handler on its own stack is
 * not that.
 */
static __attribute__((noinline)) void left_abnormally(void)
{
	int saved = errno;

	if (on_alt_stack()) {
		errno = saved;
		return;
	}
	gh_tls.busy = 0;
	gh_tls.rt_outer = NULL;
	gh_tls.frame = 0;
	gh_inflight_abandon();
	gh_subscribers_abandon();
	gh_warn_once("a thread left a hook without returning (siglongjmp, or an exception through a callback): its marks were ended");
	errno = saved;
}

int gh_enter(struct gh_call *c, unsigned int sym)
{
	uintptr_t here = (uintptr_t)__builtin_frame_address(0);
	int saved = errno;

	if (GH_UNLIKELY(gh_tls.frame) && here >= gh_tls.frame)
		left_abnormally();
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
	if (!gh_tls.frame) {
		gh_tls.frame = here;
		c->owns_frame = 1;
	}
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
	if (c->owns_frame)
		gh_tls.frame = 0;
	gh_guard_down(0);
	errno = c->saved_errno;
}
