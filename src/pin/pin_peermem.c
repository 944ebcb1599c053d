// SPDX-License-Identifier: MIT
/*
 * The "peermem" backend: a plain ibv_reg_mr of the GPU virtual address.
 * The kernel's peer-memory client (nvidia-peermem) recognises the range
 * and pins it with nvidia_p2p_get_pages; when the driver frees the memory
 * its free callback invalidates the MR.  There is no separate pin step:
 * the registration is the pin, so pin() only records the 64 KiB-rounded
 * range the NIC will pin, for accounting.
 */
#include <errno.h>

#include "platform/platform.h"
#include "backend.h"

static int peermem_pin(struct gh_pin *p)
{
	p->pin_base = p->base & ~(GH_PIN_ALIGN - 1);
	p->pin_size = ((p->base + p->size + GH_PIN_ALIGN - 1) &
		       ~(GH_PIN_ALIGN - 1)) - p->pin_base;
	p->fd = -1;
	return 0;
}

static void peermem_unpin(struct gh_pin *p)
{
	p->pin_base = 0;
	p->pin_size = 0;
}

static int peermem_reg(const struct gh_pin *p, struct ibv_pd *pd,
		       uint64_t addr, uint64_t len, unsigned int access,
		       struct ibv_mr **mr_p)
{
	struct ibv_mr *mr;

	/* Inside the allocation, iova = VA: never the rounding slack. */
	errno = 0;
	mr = gh_vreal_reg_mr_iova2(pd, (void *)(uintptr_t)addr, len, addr,
				   access);
	if (!mr)
		return errno ? -errno : -EIO;
	*mr_p = mr;
	return 0;
}

const struct gh_pin_ops gh_pin_peermem = {
	.name = "peermem",
	.pin = peermem_pin,
	.unpin = peermem_unpin,
	.reg = peermem_reg,
	.dereg = gh_vreal_dereg_mr,
};
