/* SPDX-License-Identifier: MIT */
/*
 * What a generated wrapper (build/gen/gh_hooks.c) calls around the real
 * function.  The contract every wrapper follows:
 *
 *   real = gh_real_get(sym)          the real entry point (resolved lazily)
 *   gh_enter()                       GH_PASS: call straight through
 *                                    (disabled, nested, an inner runtime
 *                                    call); GH_GUARDED: call through, then
 *                                    queue the effect (gh_guarded_*: our
 *                                    own code is running on this thread);
 *                                    GH_HOOK: all that follows
 *   gh_*_pre()                       frees: unregister BEFORE the real call
 *   gh_real_begin(); real(); gh_real_end()
 *   gh_*_post()                      allocations: register AFTER success
 *   gh_leave()                       restores the real call's errno
 *
 * None of these call malloc or stdio or block on a lock held by non-hook
 * code.
 */
#ifndef GH_HOOKRT_H
#define GH_HOOKRT_H

#include <pthread.h>
#include <stdint.h>
#include <cuda.h>
#include <cuda_runtime_api.h>

#include "rcache/rcache.h"
#include "gdrhook.h"
#include "gh_hooks.h"
#include "gh_manual.h"

#define GH_SIZE_FROM_DRIVER UINT64_MAX

struct gh_call {
	unsigned int sym;
	const char *api;	/* what the program called (log "api") */
	struct gh_call *outer;	/* runtime call this driver call is inside */
	uint64_t t0, t1;
	int saved_errno;
	int rc;
	int skip;		/* an outer call already did this work */
	int nested_allocs;	/* allocations registered by nested calls */
	int has_gone;
	uint64_t arg;		/* ctx/pool/ptr of the call */
	uint64_t arg2;		/* size of a range free */
	int dev;
	uint64_t dropped, dropped_bytes;
	/* Whether the call's stream is capturing (1, into capture_graph) or
	 * not (-1); 0: not asked yet.  Kept in the outermost call only. */
	int capture;
	uint64_t capture_stream, capture_graph;
	/* pushed while the hook runs: a longjmp or pthread_exit that
	 * unwinds the wrapper runs it (call.c) */
	struct _pthread_cleanup_buffer unwind;
	int pushed;
	/* Last: gh_enter() leaves it unset, it is read only when has_gone. */
	struct gh_range gone;	/* what a free unregistered */
};

/* What gh_enter() tells the wrapper to do. */
#define GH_PASS		0	/* call through, nothing else */
#define GH_HOOK		1	/* the full hook */
#define GH_GUARDED	2	/* call through, then gh_guarded_*() */

int gh_enter(struct gh_call *c, unsigned int sym);
/* The wrappers' cleanup attribute on a pointer to their call: a hook an
 * exception unwound is ended as gh_leave would have. */
void gh_call_unwound(struct gh_call **cp);
void gh_leave(struct gh_call *c);
void gh_real_begin(struct gh_call *c);
void gh_real_end(struct gh_call *c, int rc);

void gh_alloc_post(struct gh_call *c, unsigned int kind, uint64_t ptr,
		   uint64_t size, uint64_t pool, uint64_t vmm_handle);
void gh_failed_post(struct gh_call *c, unsigned int ev);
void gh_free_pre(struct gh_call *c, uint64_t ptr);
void gh_free_post(struct gh_call *c);
void gh_free_range_pre(struct gh_call *c, uint64_t ptr, uint64_t size);
void gh_free_range_post(struct gh_call *c);
void gh_ctx_destroy_pre(struct gh_call *c, uint64_t ctx);
void gh_ctx_destroy_post(struct gh_call *c);
void gh_ctx_reset_pre(struct gh_call *c, int dev);
void gh_ctx_reset_post(struct gh_call *c);
void gh_ctx_release_pre(struct gh_call *c, int dev);
void gh_ctx_release_post(struct gh_call *c);
void gh_ctx_retain_post(struct gh_call *c, uint64_t ctx, int dev);
void gh_dev_reset_pre(struct gh_call *c);
void gh_dev_reset_post(struct gh_call *c);
void gh_pool_pre(struct gh_call *c, uint64_t pool);
void gh_pool_post(struct gh_call *c);
void gh_untracked_post(struct gh_call *c);
/* Drop (and report, as implicit frees) every range match() selects. */
void gh_drop_matching(struct gh_call *c, gh_range_match_fn match, void *arg);

/* Stream capture (src/hooks/drv_graph.c): 1 when the call became a graph node
 * (nothing to register or unregister now). */
int gh_graph_captured_alloc(struct gh_call *c, uint64_t stream, uint64_t ptr,
			    uint64_t size);
int gh_graph_captured_free(struct gh_call *c, uint64_t stream, uint64_t ptr);

/* Calls in the guarded window (src/hooks/deferred.c): queued, applied before the
 * outermost hook returns. */
void gh_guarded_alloc(unsigned int sym, unsigned int kind, uint64_t ptr,
		      uint64_t size, uint64_t pool, uint64_t handle);
void gh_guarded_free(unsigned int sym, uint64_t ptr, uint64_t size,
		     int range);
void gh_guarded_untrusted(unsigned int sym);
int gh_guarded_captured(uint64_t stream);
int gh_deferred_pending(void);
void gh_deferred_drain(void);

/* Emit one event to the log (when configured).  Records are started with
 * gh_evrec_start(); most callers use a family's gh_ev_emit_*() (evrec.h). */
void gh_emit(const struct gh_evrec *r);

#endif
