// SPDX-License-Identifier: MIT
/*
 * What each hook does to the registry, the subscribers and the log.
 *
 * Allocations are registered after the real call succeeded; frees are
 * unregistered (and subscribers told) before the real call runs, so no
 * consumer can use memory the driver is about to reuse.  If a free fails
 * the allocation is put back under a new generation: anything cached
 * against the old one is already gone, which is safe.
 */
#include <errno.h>
#include <string.h>

#include "registry/registry.h"
#include "hookrt.h"

void gh_emit(const struct gh_evrec *r)
{
	if (gh_evlog_enabled())
		gh_evlog_put(r);
}

/*
 * Start the log record of call c.  Returns 0, building nothing, when no
 * log is configured: hooks then pay for no record at all.  t is the end
 * of the call for events that take effect then (hooks/events.table).
 */
static int rec_init(struct gh_evrec *e, const struct gh_call *c,
		    unsigned int ev)
{
	if (!gh_evlog_enabled())
		return 0;
	if (c->t0 && c->t1 >= c->t0) {
		/* the call's own clock reads: none more per record; t is
		 * the call's start unless the event takes effect at its end */
		gh_evrec_start_span(e, ev, c->t0, c->t1);
		e->t_ns = gh_ev_t_is_end(ev) ? c->t1 : c->t0;
	} else {
		gh_evrec_start(e, ev, c->t0);
	}
	return 1;
}

/* The fields every family with an api and rc shares. */
static void rec_mem(struct gh_evrec *e, const struct gh_call *c)
{
	gh_evrec_str(e->u.mem.api, c->api);
	e->u.mem.rc = c->rc;
	e->u.mem.dev = -1;
}

static void rec_range(struct gh_evrec *e, const struct gh_range *r)
{
	e->u.mem.ptr = r->base;
	e->u.mem.size = r->size;
	e->u.mem.gen = r->gen;
	e->u.mem.ctx = r->ctx;
	e->u.mem.dev = r->dev;
	e->u.mem.kind = r->kind;
}

/* An implicit free's record (gh_frees_remove_matching's after step). */
static void dropped(const struct gh_range *r, void *arg)
{
	struct gh_call *c = arg;
	struct gh_evrec e;

	if (c->dev < 0)
		c->dev = r->dev;
	if (rec_init(&e, c, GH_EV_FREE)) {
		rec_mem(&e, c);
		rec_range(&e, r);
		e.flags = GH_EVF_IMPLICIT;
		e.u.mem.rc = 0;
		e.dur_ns = 0;
		gh_emit(&e);
	}
	c->dropped++;
	c->dropped_bytes += r->size;
	GH_COUNT(implicit_frees, 1);
}

/* Drop every range match() selects: the free sequence, then a record. */
void gh_drop_matching(struct gh_call *c, gh_range_match_fn match, void *arg)
{
	gh_frees_remove_matching(match, arg, c->api, dropped, c);
}

static int match_ctx(const struct gh_range *r, void *arg)
{
	return r->ctx == *(uint64_t *)arg;
}

struct overlap {
	uint64_t lo, hi;
};

static int match_overlap(const struct gh_range *r, void *arg)
{
	struct overlap *o = arg;

	return r->base < o->hi && o->lo < r->base + r->size;
}

static void fill_owner(struct gh_range *r, unsigned int kind,
		       uint64_t vmm_handle)
{
	uint64_t ctx = 0;
	int dev = -1;

	/* VMM memory belongs to the device, not to a context. */
	if (kind != GDRHOOK_KIND_VMM && !gh_drv_ctx_current(&ctx))
		r->ctx = ctx;
	if (kind == GDRHOOK_KIND_HOST || kind == GDRHOOK_KIND_HOST_REGISTERED)
		r->dev = -1;
	else if (kind == GDRHOOK_KIND_VMM && !gh_drv_vmm_device(vmm_handle, &dev))
		r->dev = dev;
	else if (!gh_drv_ctx_device_of(ctx, &dev))
		r->dev = dev;
	else
		r->dev = -1;
}

void gh_alloc_post(struct gh_call *c, unsigned int kind, uint64_t ptr,
		   uint64_t size, uint64_t pool, uint64_t vmm_handle)
{
	struct gh_range r = { 0 };
	struct gh_evrec e;
	uint64_t gen = 0;
	int err;
	GH_PH_T(t0);
	GH_PH_T(t);

	if (c->outer)
		c->outer->nested_allocs++;
	else if (gh_syms[c->sym].family == GH_FAM_RUNTIME && c->nested_allocs)
		return;		/* the driver-level wrapper registered it */
	r.base = ptr;
	r.size = size;
	r.kind = (uint16_t)kind;
	r.pool = pool;
	if (kind == GDRHOOK_KIND_POOL || kind == GDRHOOK_KIND_GRAPH)
		r.flags |= GH_RANGE_VOLATILE;
	if (size == GH_SIZE_FROM_DRIVER) {
		uint64_t base;

		if (gh_drv_range(ptr, &base, &r.size) || base != ptr) {
			gh_mark_untrusted(c->api, "size of a new range unknown");
			return;
		}
	}
	fill_owner(&r, kind, vmm_handle);
	if (gh_registry_cfg.validate)
		gh_drv_buffer_id(ptr, &r.buffer_id);
	GH_PH_LAP(GH_PH_A_OWNER, t);
	err = gh_registry_insert(&r, &gen);
	if (err == -EEXIST) {
		struct overlap o = { r.base, r.base + r.size };

		/* A free we never saw: say so, drop the stale ranges. */
		gh_audit_report(c->api, r.base, r.size, 0,
				"new allocation overlaps a live one: a free was missed");
		gh_mark_untrusted(c->api, "allocation overlaps a live range");
		gh_drop_matching(c, match_overlap, &o);
		err = gh_registry_insert(&r, &gen);
	}
	if (err) {
		gh_warn("%s: cannot register %p+%llu: %s", c->api,
			(void *)(uintptr_t)ptr, (unsigned long long)r.size,
			gh_errtext(-err));
		gh_mark_untrusted(c->api, "registry insert failed");
		return;
	}
	GH_PH_LAP(GH_PH_A_INSERT, t);
	r.gen = gen;
	gh_inflight_note(&r);
	GH_PH_LAP(GH_PH_A_INFLIGHT, t);
	gh_hot_count(GH_HC_ALLOCS);	/* this thread's line; peak: the registry */
	GH_PH_LAP(GH_PH_A_COUNT, t);
	gh_subscribers_notify(GDRHOOK_EVENT_ALLOC, &r, c->api);
	GH_PH_LAP(GH_PH_A_SUBS, t);
	if (gh_registry_cfg.validate)
		gh_audit_alloc(&r, c->api);
	GH_PH_T(tl);
	if (rec_init(&e, c, GH_EV_ALLOC)) {
		rec_mem(&e, c);
		rec_range(&e, &r);
		gh_emit(&e);
	}
	GH_PH_LAP(GH_PH_A_LOG, tl);
	GH_PH_SPAN(GH_PH_ALLOC_POST, t0);
}

void gh_failed_post(struct gh_call *c, unsigned int ev)
{
	struct gh_evrec e;

	GH_COUNT(failed_calls, 1);
	if (c->outer)
		return;		/* the runtime call logs its own failure */
	if (rec_init(&e, c, ev)) {
		rec_mem(&e, c);
		gh_emit(&e);
	}
}

void gh_free_pre(struct gh_call *c, uint64_t ptr)
{
	GH_PH_T(t0);

	c->arg = ptr;
	if (!ptr ||
	    (c->outer && c->outer->has_gone && c->outer->gone.base == ptr) ||
	    (c->outer && c->outer->arg == ptr)) {
		/* free(NULL) is a no-op; or the runtime call did it. */
		c->skip = 1;
		return;
	}
	if (gh_registry_cfg.validate) {
		struct gh_range cur;

		if (!gh_registry_lookup(ptr, 1, &cur) && cur.base == ptr)
			gh_audit_free(&cur, c->api);
	}
	if (!gh_frees_remove(ptr, &c->gone, c->api))
		c->has_gone = 1;
	GH_PH_SPAN(GH_PH_FREE_PRE, t0);
}

void gh_free_post(struct gh_call *c)
{
	struct gh_evrec e;
	GH_PH_T(t0);
	GH_PH_T(t);

	if (c->skip)
		return;
	if (rec_init(&e, c, GH_EV_FREE)) {
		rec_mem(&e, c);
		if (c->has_gone) {
			rec_range(&e, &c->gone);
		} else {
			e.u.mem.ptr = c->arg;
			e.flags = GH_EVF_NOT_TRACKED;
		}
		gh_emit(&e);
	}
	GH_PH_LAP(GH_PH_F_LOG, t);
	if (c->rc) {
		GH_COUNT(failed_calls, 1);
		if (c->has_gone) {
			struct gh_range r = c->gone;
			uint64_t gen;

			/* Still live: back in, under a new generation. */
			if (!gh_registry_insert(&r, &gen)) {
				r.gen = gen;
				gh_inflight_note(&r);
				gh_subscribers_notify(GDRHOOK_EVENT_ALLOC, &r,
						      c->api);
				if (rec_init(&e, c, GH_EV_RESTORE)) {
					rec_mem(&e, c);
					rec_range(&e, &r);
					gh_emit(&e);
				}
			}
		}
		return;
	}
	if (c->has_gone)
		gh_hot_count(GH_HC_FREES);
	else
		GH_COUNT(frees_untracked, 1);
	GH_PH_LAP(GH_PH_F_COUNT, t);
	GH_PH_SPAN(GH_PH_FREE_POST, t0);
}

void gh_free_range_pre(struct gh_call *c, uint64_t ptr, uint64_t size)
{
	struct overlap o = { ptr, ptr + size };

	c->arg = ptr;
	c->arg2 = size;
	if (!size || (c->outer && c->outer->arg == ptr)) {
		c->skip = 1;
		return;
	}
	gh_drop_matching(c, match_overlap, &o);
}

void gh_free_range_post(struct gh_call *c)
{
	/* Each range dropped was logged as an implicit free. */
	if (c->rc)
		GH_COUNT(failed_calls, 1);
}

static void ctx_record(struct gh_call *c, unsigned int ev)
{
	struct gh_evrec e;

	if (c->rc)
		GH_COUNT(failed_calls, 1);
	if (c->outer) {
		c->outer->dropped += c->dropped;
		c->outer->dropped_bytes += c->dropped_bytes;
		return;
	}
	if (!rec_init(&e, c, ev))
		return;
	gh_evrec_str(e.u.ctx.api, c->api);
	e.u.ctx.rc = c->rc;
	e.u.ctx.ctx = c->arg;
	e.u.ctx.dev = c->dev;
	e.u.ctx.dropped_bytes = c->dropped_bytes;
	e.u.ctx.dropped = c->dropped;
	gh_emit(&e);
}

void gh_ctx_destroy_pre(struct gh_call *c, uint64_t ctx)
{
	c->arg = ctx;
	gh_drv_ctx_forget();
	if (ctx)
		gh_drop_matching(c, match_ctx, &c->arg);
}

void gh_ctx_destroy_post(struct gh_call *c)
{
	ctx_record(c, GH_EV_CTX_DESTROY);
}

void gh_ctx_reset_pre(struct gh_call *c, int dev)
{
	uint64_t ctx;

	c->dev = dev;
	gh_drv_ctx_forget();
	if (gh_drv_primary_ctx(dev, &ctx))
		return;		/* not active: owns nothing */
	c->arg = ctx;
	gh_drop_matching(c, match_ctx, &c->arg);
}

void gh_ctx_reset_post(struct gh_call *c)
{
	ctx_record(c, GH_EV_CTX_RESET);
}

/*
 * The last release of a primary context destroys it.  We count retains
 * and releases; when our count says "last", drop before the call.  If the
 * count was off (retains we did not see), the state check after the call
 * catches it, late, and says so.
 */
#define GH_MAX_DEVS 64
static int primary_refs[GH_MAX_DEVS];

void gh_ctx_retain_post(struct gh_call *c, uint64_t ctx, int dev)
{
	if (c->rc == 0 && dev >= 0 && dev < GH_MAX_DEVS)
		__atomic_add_fetch(&primary_refs[dev], 1, __ATOMIC_RELAXED);
	if (c->rc)
		GH_COUNT(failed_calls, 1);
}

void gh_ctx_release_pre(struct gh_call *c, int dev)
{
	uint64_t ctx;

	c->dev = dev;
	gh_drv_ctx_forget();
	if (gh_drv_primary_ctx(dev, &ctx))
		return;
	c->arg = ctx;
	if (dev >= 0 && dev < GH_MAX_DEVS &&
	    __atomic_load_n(&primary_refs[dev], __ATOMIC_RELAXED) <= 1)
		gh_drop_matching(c, match_ctx, &c->arg);
}

void gh_ctx_release_post(struct gh_call *c)
{
	int dev = c->dev;

	if (c->rc == 0 && dev >= 0 && dev < GH_MAX_DEVS) {
		int left = __atomic_sub_fetch(&primary_refs[dev], 1,
					      __ATOMIC_RELAXED);

		if (left < 0)
			__atomic_store_n(&primary_refs[dev], 0,
					 __ATOMIC_RELAXED);
		if (c->arg && !gh_drv_primary_active(dev)) {
			uint64_t before = c->dropped;

			gh_drop_matching(c, match_ctx, &c->arg);
			if (c->dropped != before)
				gh_warn("%s: primary context of device %d went away with %llu allocations we had not dropped",
					c->api, dev,
					(unsigned long long)(c->dropped - before));
		}
	}
	ctx_record(c, GH_EV_CTX_RELEASE);
}

void gh_dev_reset_pre(struct gh_call *c)
{
	uint64_t ctx = 0;
	int dev = -1;

	if (gh_drv_ctx_current(&ctx) || !ctx)
		return;
	if (!gh_drv_ctx_device(&dev))
		c->dev = dev;
	c->arg = ctx;
	gh_drop_matching(c, match_ctx, &c->arg);
}

void gh_dev_reset_post(struct gh_call *c)
{
	ctx_record(c, GH_EV_CTX_RESET);
}

void gh_pool_pre(struct gh_call *c, uint64_t pool)
{
	c->arg = pool;
}

void gh_pool_post(struct gh_call *c)
{
	struct gh_evrec e;

	if (c->rc)
		GH_COUNT(failed_calls, 1);
	if (c->outer)
		return;
	if (!rec_init(&e, c, gh_syms[c->sym].ev))
		return;
	gh_evrec_str(e.u.pool.api, c->api);
	e.u.pool.rc = c->rc;
	e.u.pool.pool = c->arg;
	gh_emit(&e);
}

void gh_untracked_post(struct gh_call *c)
{
	if (c->rc == 0)
		gh_mark_untrusted(c->api,
				  "memory entry point gdrhook does not model");
	else
		GH_COUNT(failed_calls, 1);
}
