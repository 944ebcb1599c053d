/* SPDX-License-Identifier: MIT */
/*
 * Pin backends: how the registration cache (src/rcache) makes one GPU
 * allocation reachable by a NIC and registers it in a protection domain.
 *
 *   pin()    once per allocation generation: make the whole allocation
 *            (rounded out to 64 KiB, the GPU BAR page) pinnable;
 *   reg()    register [addr, addr + len) within the allocation: all of
 *            it once per (generation, PD, access), or exactly what the
 *            program asked (exact exposure); never the rounding slack;
 *   dereg()  drop one registration;
 *   unpin()  drop the pin (at free, eviction, or when nothing uses it).
 *
 * "The allocation" is gh_pin.base/size: one allocation, or what the cache
 * pins in its place (src/rcache/rcache_span.c): a span of adjacent VMM mappings,
 * or the registered part of an allocation over the BAR1 budget.
 *
 * Backends (chosen by gh_pin_choose(), GDRHOOK_BACKEND overrides):
 *   dmabuf   cuMemGetHandleForAddressRange(DMA_BUF_FD) + ibv_reg_dmabuf_mr
 *   peermem  plain ibv_reg_mr on the GPU address (nvidia-peermem pins)
 *   gdrpin   the gdrpin kernel module (/dev/gdrpin) pins and reports
 *            revocations; plain ibv_reg_mr registers (src/pin/pin_gdrpin.c)
 *   none     no caching: every registration passes through untouched
 *
 * All functions return 0 or -errno and are called with the per-thread
 * hook guard up (nested verbs/CUDA calls pass straight through).  The
 * cache calls them with its lock held (src/rcache).  The one exception is
 * the first registration's probe (src/rcache/rcache_start.c): it calls
 * pin(), reg(), dereg() and unpin() of gh_pin_dmabuf on a probe buffer
 * holding the start lock, not the cache lock (the cache may not exist
 * yet), and may do so for a NIC met after the cache started on dmabuf,
 * while other threads call the same backend under the cache lock.  So
 * state a backend shares between calls is its own to guard.
 */
#ifndef GH_PIN_BACKEND_H
#define GH_PIN_BACKEND_H

#include <stddef.h>
#include <stdint.h>

struct ibv_pd;
struct ibv_mr;
struct gh_range;

#define GH_PIN_ALIGN	(64ULL << 10)	/* GPU BAR page */

struct gh_pin {
	/* the allocation, from the registry */
	uint64_t base, size, gen, ctx;
	int32_t dev;
	uint16_t kind;
	/* backend state */
	uint64_t pin_base, pin_size;	/* what the backend pinned */
	int fd;				/* dmabuf: the exported fd, else -1 */
	uint64_t fd_dev, fd_ino;	/* the file fd names (pin_dmabuf.c) */
	uint64_t cookie;		/* for ops->valid (gdrpin: pin handle) */
};

struct gh_pin_ops {
	const char *name;
	int (*pin)(struct gh_pin *p);
	void (*unpin)(struct gh_pin *p);
	/* [addr, addr + len) lies in [base, base + size) */
	int (*reg)(const struct gh_pin *p, struct ibv_pd *pd, uint64_t addr,
		   uint64_t len, unsigned int access, struct ibv_mr **mr_p);
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
 * is loaded, else gdrpin when /dev/gdrpin answers, else none).  Decided
 * once, logged once with the reason.  dev: a device to probe (-1: device
 * 0).  gh_pin_decided(): that decision, or NULL before it was made.
 */
const struct gh_pin_ops *gh_pin_choose(int dev);
const struct gh_pin_ops *gh_pin_decided(void);

/*
 * The backend for a registration of g (tracked GPU memory) in pd, at the
 * first registration of each NIC (src/rcache/rcache_start.c asks):
 * gh_pin_choose()'s decision and, when auto chose dmabuf, the proof that
 * pd's NIC imports a DMA-BUF, with auto's fallback when the first NIC
 * does not (see src/pin/pin_choose.c).  The one place the backend is
 * decided.  exact: the cache exposes exactly the registered range
 * (GDRHOOK_REMOTE_EXPOSURE, the cache's option), where auto prefers a NIC's
 * memory windows.  Returns the backend, or NULL when the registrations of
 * pd's NIC pass through (none, or a NIC that cannot import).
 */
const struct gh_pin_ops *gh_pin_for_nic(const struct gh_range *g,
					struct ibv_pd *pd, int exact);
/* Where auto goes when dmabuf meets a NIC that cannot import: peermem
 * when it is loaded, else none (enum gh_pin_backend). */
unsigned int gh_pin_auto_fallback(void);

/*
 * What the registration cache runs, recorded by it after each change
 * (ops NULL: nothing, registrations pass through; why NULL: the reason
 * of gh_pin_for_nic's verdict, else why the cache differs).
 * gh_pin_chosen(): that record, or NULL before the first registration of
 * GPU memory; *why_p (if why_p) its reason.  The banner and gdrhook-info
 * read it: "chosen" is what the cache runs.
 */
void gh_pin_record(const struct gh_pin_ops *ops, const char *why);
const struct gh_pin_ops *gh_pin_chosen(const char **why_p);

/*
 * Why: one verdict per backend, in auto's order, and the choice with its
 * reason.  gh_pin_choose() decides from it; the info banner and
 * gdrhook-info (src/face/info.c) print it.  all: probe every backend (else
 * only what the decision needs; see src/pin/pin_choose.c).
 */
enum gh_pin_backend {
	GH_PIN_DMABUF,
	GH_PIN_PEERMEM,
	GH_PIN_GDRPIN,
	GH_PIN_NONE,
	GH_PIN_NBACKENDS
};
#define GH_PIN_WHY_LEN	160

struct gh_pin_explanation {
	const char *requested;		/* GDRHOOK_BACKEND's word */
	unsigned int chosen;		/* enum gh_pin_backend */
	int probed[GH_PIN_NBACKENDS];
	int usable[GH_PIN_NBACKENDS];	/* auto could take it */
	char why[GH_PIN_NBACKENDS][GH_PIN_WHY_LEN];
	char reason[4 * GH_PIN_WHY_LEN];	/* for the choice */
};
void gh_pin_explain(int dev, int all, struct gh_pin_explanation *x);
const struct gh_pin_ops *gh_pin_backend_ops(unsigned int b);

/*
 * Who a backend tells that the pin of generation gen with this cookie was
 * revoked behind the hooks' back (gdrpin's helper thread): the cache sets
 * it at init (gh_rcache_revoke), so no backend calls up into the cache.
 */
typedef int (*gh_pin_revoked_fn)(uint64_t gen, uint64_t cookie);
void gh_pin_on_revoked(gh_pin_revoked_fn fn);

#endif
