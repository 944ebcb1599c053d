/* SPDX-License-Identifier: MIT */
/*
 * The event records of the registration path (rcache_evrec.c).
 */
#ifndef GH_RCACHE_EVREC_H
#define GH_RCACHE_EVREC_H

#include <stdint.h>

#include "pin/pin.h"
#include "rcache_state.h"

struct rc_logarg {
	const char *api;
	uint64_t addr, len;	/* hit/miss: what the program asked */
	const struct rc_ga *r;
	const struct gh_range *g;
	uint64_t gen, mr, pd;
	unsigned int access;
	int err;
};

void gh_rc_log(struct rc_state *rc, unsigned int ev, uint64_t t0,
	       const struct rc_logarg *a);
/* Shorthands that build the record of a pin or a registration. */
void gh_rc_ev_pin(struct rc_state *rc, unsigned int ev, const struct rc_ga *r,
		  int err, uint64_t t0);
void gh_rc_ev_reg(struct rc_state *rc, unsigned int ev,
		  const struct rc_entry *x, const struct rc_ga *r, int err,
		  uint64_t t0);

#endif
