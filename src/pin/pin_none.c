// SPDX-License-Identifier: MIT
/*
 * The "none" backend: nothing is pinned or cached; src/hooks/verbs.c passes
 * every registration through untouched when this backend is chosen.
 */
#include <errno.h>

#include "platform/platform.h"
#include "backend.h"

static int none_pin(struct gh_pin *p)
{
	return -ENOTSUP;
}

static void none_unpin(struct gh_pin *p)
{
}

static int none_reg(const struct gh_pin *p, struct ibv_pd *pd,
		    uint64_t addr, uint64_t len, unsigned int access,
		    struct ibv_mr **mr_p)
{
	return -ENOTSUP;
}

static int none_dereg(struct ibv_mr *mr)
{
	return gh_vreal_dereg_mr(mr);
}

const struct gh_pin_ops gh_pin_none = {
	.name = "none",
	.pin = none_pin,
	.unpin = none_unpin,
	.reg = none_reg,
	.dereg = none_dereg,
};
