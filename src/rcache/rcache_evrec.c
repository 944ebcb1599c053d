// SPDX-License-Identifier: MIT
/*
 * Every record the registration path writes is built here, straight into
 * the event log layer (evlog.h): pin/unpin, reg/dereg, revoke (r, gen,
 * mr, pd, access), hit/miss (api, addr, len, alias).
 */
#include <stdint.h>

#include "pin/pin.h"
#include "rcache_core.h"
#include "rcache_state.h"
#include "rcache_evrec.h"

void gh_rc_log(struct rc_state *rc, unsigned int ev, uint64_t t0,
	       const struct rc_logarg *a)
{
	uint64_t ptr = 0, size = 0;
	int32_t dev = -1;

	if (a->r) {
		ptr = a->r->pin.base;
		size = a->r->pin.size;
		dev = a->r->pin.dev;
	}
	if (a->g || a->len) {
		/* what was asked (hit/miss) or registered (reg/dereg) */
		ptr = a->addr;
		size = a->len;
	}
	if (a->g)
		dev = a->g->dev;
	switch (ev) {
	case GH_EV_PIN:
	case GH_EV_UNPIN:
		if (a->r->pin.pin_size) {
			ptr = a->r->pin.pin_base;
			size = a->r->pin.pin_size;
		}
		gh_ev_emit_pin(ev, t0, ptr, size, a->gen, dev, rc->ops->name,
			       a->err);
		break;
	case GH_EV_REG:
	case GH_EV_DEREG:
		/* the registered range: exact and wrapped ones carry theirs;
		 * an allocation-wide one is the allocation */
		gh_ev_emit_reg(ev, t0, ptr, size, a->gen, a->mr, a->pd,
			       a->access, a->err);
		break;
	case GH_EV_REVOKE:
		gh_ev_emit_revoke(ev, t0, ptr, size, a->gen, dev);
		break;
	default:	/* hit, miss */
		gh_ev_emit_lookup(ev, t0, a->api, ptr, size, a->gen, dev,
				  a->mr, a->pd, a->access);
	}
}

void gh_rc_ev_pin(struct rc_state *rc, unsigned int ev, const struct rc_ga *r,
		  int err, uint64_t t0)
{
	struct rc_logarg a = { .r = r, .gen = r->gen, .err = err };

	if (gh_evlog_enabled())
		gh_rc_log(rc, ev, t0, &a);
}

void gh_rc_ev_reg(struct rc_state *rc, unsigned int ev,
		  const struct rc_entry *x, const struct rc_ga *r, int err,
		  uint64_t t0)
{
	struct rc_logarg a = { .r = r, .gen = x->gen,
			       .mr = x->mr ? (uint64_t)(uintptr_t)x->mr :
			       (uint64_t)(uintptr_t)x->win, .pd = x->pd,
			       .access = x->access, .err = err,
			       .addr = x->addr, .len = x->len };

	if (gh_evlog_enabled())
		gh_rc_log(rc, ev, t0, &a);
}

void gh_rcache_log_lookup(int hit, const char *api, uint64_t addr,
			  uint64_t len, const struct gh_range *g,
			  const struct ibv_mr *mr, const struct ibv_pd *pd,
			  unsigned int access, uint64_t t0)
{
	struct rc_logarg a = { .api = api, .addr = addr, .len = len, .g = g,
			       .gen = g->gen, .mr = (uint64_t)(uintptr_t)mr,
			       .pd = (uint64_t)(uintptr_t)pd, .access = access };

	if (gh_evlog_enabled())
		gh_rc_log(gh_rc_instance(), hit ? GH_EV_HIT : GH_EV_MISS, t0,
			  &a);
}
