// SPDX-License-Identifier: GPL-2.0
/* eventfd_signal(ctx) without a count (6.8): it always adds 1. */
#include <linux/eventfd.h>

void gdrpin_probe(struct eventfd_ctx *ctx);
void gdrpin_probe(struct eventfd_ctx *ctx)
{
	eventfd_signal(ctx);
}
