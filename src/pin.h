/* SPDX-License-Identifier: MIT */
/*
 * Pin backends: how the registration cache (rcache.c) makes one GPU
 * allocation reachable by a NIC and registers it in a protection domain.
 *
 *   pin()    once per allocation generation: make the whole allocation
 *            (rounded out to 64 KiB, the GPU BAR page) pinnable;
 *   reg()    once per (generation, PD, access): register exactly the
 *            allocation [base, base + size), never the rounding slack;
 *   dereg()  drop one registration;
 *   unpin()  drop the pin (at free, eviction, or when nothing uses it).
 *
 * "The allocation" is gh_pin.base/size: one allocation, or what the cache
 * pins in its place (src/rcache_span.c): a span of adjacent VMM mappings,
 * or the registered part of an allocation over the BAR1 budget.
 *
 * Backends (chosen by gh_pin_choose(), GDRHOOK_BACKEND overrides):
 *   dmabuf   cuMemGetHandleForAddressRange(DMA_BUF_FD) + ibv_reg_dmabuf_mr
 *   peermem  plain ibv_reg_mr on the GPU address (nvidia-peermem pins)
 *   gdrpin   the gdrpin kernel module (/dev/gdrpin) pins and reports
 *            revocations; plain ibv_reg_mr registers (src/pin_gdrpin.c)
 *   none     no caching: every registration passes through untouched
 *
 * All functions return 0 or -errno and are called with the cache lock
 * held and the per-thread hook guard up (nested verbs/CUDA calls pass
 * straight through).
 */
#ifndef GH_PIN_H
#define GH_PIN_H

#include <stddef.h>
#include <stdint.h>

struct ibv_pd;
struct ibv_mr;

#define GH_PIN_ALIGN	(64ULL << 10)	/* GPU BAR page */

struct gh_pin {
	/* the allocation, from the registry */
	uint64_t base, size, gen, ctx;
	int32_t dev;
	uint16_t kind;
	/* backend state */
	uint64_t pin_base, pin_size;	/* what the backend pinned */
	int fd;				/* dmabuf: the exported fd, else -1 */
	uint64_t cookie;		/* for ops->valid (gdrpin: pin handle) */
};

struct gh_pin_ops {
	const char *name;
	int (*pin)(struct gh_pin *p);
	void (*unpin)(struct gh_pin *p);
	int (*reg)(const struct gh_pin *p, struct ibv_pd *pd,
		   unsigned int access, struct ibv_mr **mr_p);
	int (*dereg)(struct ibv_mr *mr);
	/*
	 * Optional, called on every cache hit (lock-free, no syscall, no lock
	 * held): 0 when the pin with this cookie was revoked behind the
	 * cache's back; the hit then becomes a miss that drops the pin.
	 */
	int (*valid)(uint64_t cookie);
};

extern const struct gh_pin_ops gh_pin_dmabuf;
extern const struct gh_pin_ops gh_pin_peermem;
extern const struct gh_pin_ops gh_pin_none;
extern const struct gh_pin_ops gh_pin_gdrpin;

/*
 * gdrpin: open /dev/gdrpin (gh_gdrpin_dev: tests point it elsewhere) and
 * check the ABI once; 0, or -errno with *why saying what is missing.
 */
extern const char *gh_gdrpin_dev;
int gh_pin_gdrpin_open(const char **why);

/*
 * The backend for this process: GDRHOOK_BACKEND, else probed (dmabuf when
 * the driver and libibverbs can do it, else peermem when nvidia-peermem
 * is loaded, else none).  Decided once, logged once with the reason.
 * dev: a device to probe (-1: device 0).
 */
const struct gh_pin_ops *gh_pin_choose(int dev);

/* Real libibverbs entry points (src/verbs.c): never our wrappers. */
struct ibv_mr *gh_vreal_reg_mr_iova2(struct ibv_pd *pd, void *addr,
				     size_t length, uint64_t iova,
				     unsigned int access);
struct ibv_mr *gh_vreal_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset,
				      size_t length, uint64_t iova, int fd,
				      int access);
int gh_vreal_dereg_mr(struct ibv_mr *mr);
int gh_vreal_have(const char *name);	/* 1 if libibverbs has it */

#endif
