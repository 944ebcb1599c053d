// SPDX-License-Identifier: MIT
/*
 * Starting the registration cache, at the first registration of tracked
 * GPU memory: the pin backend (gh_pin_choose: GDRHOOK_BACKEND, or auto's
 * static choice), then, when auto chose dmabuf, a proof that the NIC can
 * import a DMA-BUF at all, then the cache itself (GDRHOOK_CACHE_MAX_*,
 * GDRHOOK_REMOTE_EXPOSURE).
 *
 * Why the proof: the driver exporting DMA-BUF and libibverbs having
 * ibv_reg_dmabuf_mr say nothing about the NIC (soft-RoCE refuses with
 * EOPNOTSUPP); trusting them made every registration fail once and retry
 * uncached, slower than no shim.  The probe allocates a 64 KiB buffer of
 * its own on the device of the allocation being registered (untracked:
 * the hook guard is up), exports it and registers one page of it in the
 * program's own PD (if that buffer cannot be had, the program's
 * allocation serves), once per NIC (the ibv_device of the PD's context):
 * one NIC of a machine may import while another cannot.  When the first
 * NIC probed fails, auto falls back to peermem for every NIC when it is
 * loaded; else that NIC's registrations pass through (as with none) and
 * the next NIC is probed in turn: the first that imports starts the
 * cache on dmabuf.  A NIC that fails once the cache runs on dmabuf passes
 * through too (the cache has one backend).  Each failure is said once at
 * the warn level.
 */
#include <cuda.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <infiniband/verbs.h>

#include "pin/pin.h"
#include "rcache_core.h"

static const struct gh_pin_ops *started;
static int start_done;
static int per_nic;		/* auto chose dmabuf: each NIC is probed */

/* NICs probed (lock; n_nics published with release) */
#define NIC_MAX	64
static struct {
	const void *dev;
	int imports;
} nics[NIC_MAX];
static int n_nics;

static const void *nic_of(const struct ibv_pd *pd)
{
	return pd && pd->context ? (const void *)pd->context->device : NULL;
}

/* 1: imports, 0: does not, -1: not probed yet. */
static int nic_known(const void *dev)
{
	int n = __atomic_load_n(&n_nics, __ATOMIC_ACQUIRE);

	for (int i = 0; i < n; i++)
		if (nics[i].dev == dev)
			return nics[i].imports;
	return -1;
}

static int exposure_flags(void)
{
	return gh_cfg.remote_exposure == GH_CFG_EXPOSURE_ALLOCATION ? 0 :
	       GH_RC_EXPOSE_EXACT;
}

typedef CUresult (*ctx_get_fn)(CUcontext *);
typedef CUresult (*ctx_set_fn)(CUcontext);
typedef CUresult (*alloc_fn)(CUdeviceptr *, size_t);
typedef CUresult (*free_fn)(CUdeviceptr);

static void *drv_sym(const char *name)
{
	void *h = gh_libcuda_handle();
	void *p = h ? gh_real_dlsym(h, name) : NULL;

	return p && !gh_addr_is_ours(p) ? p : NULL;
}

/*
 * The probe's own buffer on g's device (op 1: allocate into *d_p, 0:
 * free *d_p), with g's context (or its device's primary one) bound when
 * the thread has none.  0, or -1.
 */
static int probe_buffer(const struct gh_range *g, int op, CUdeviceptr *d_p)
{
	ctx_get_fn get = (ctx_get_fn)drv_sym("cuCtxGetCurrent");
	ctx_set_fn set = (ctx_set_fn)drv_sym("cuCtxSetCurrent");
	alloc_fn alloc = (alloc_fn)drv_sym("cuMemAlloc_v2");
	free_fn fr = (free_fn)drv_sym("cuMemFree_v2");
	CUcontext cur = NULL;
	int bound = 0, rc;

	if (!get || !set || !alloc || !fr)
		return -1;
	if (get(&cur) != CUDA_SUCCESS || !cur) {
		uint64_t ctx = g->ctx;

		if (!ctx && (g->dev < 0 || gh_drv_primary_ctx(g->dev, &ctx)))
			return -1;
		if (set((CUcontext)(uintptr_t)ctx) != CUDA_SUCCESS)
			return -1;
		bound = 1;
	}
	rc = op ? alloc(d_p, GH_PIN_ALIGN) : fr(*d_p);
	if (bound)
		set(NULL);
	return rc == CUDA_SUCCESS ? 0 : -1;
}

/* Can pd's NIC import a DMA-BUF of g's device?  0 or -errno (*what: which
 * step failed). */
static int dmabuf_probe(const struct gh_range *g, struct ibv_pd *pd,
			const char **what)
{
	struct gh_pin p;
	struct ibv_mr *mr = NULL;
	CUdeviceptr own = 0;
	int err, have = !probe_buffer(g, 1, &own);

	memset(&p, 0, sizeof(p));
	p.base = have ? (uint64_t)own : g->base;
	p.size = have ? GH_PIN_ALIGN :
		 g->size < GH_PIN_ALIGN ? g->size : GH_PIN_ALIGN;
	p.gen = g->gen;
	p.ctx = g->ctx;
	p.dev = g->dev;
	p.kind = g->kind;
	p.fd = -1;
	*what = "cuMemGetHandleForAddressRange";
	err = gh_pin_dmabuf.pin(&p);
	if (err)
		goto out;
	*what = "ibv_reg_dmabuf_mr";
	err = gh_pin_dmabuf.reg(&p, pd, p.base, p.size < 4096 ? p.size : 4096,
				IBV_ACCESS_LOCAL_WRITE, &mr);
	if (!err)
		gh_pin_dmabuf.dereg(mr);
	gh_pin_dmabuf.unpin(&p);
out:
	if (have)
		probe_buffer(g, 0, &own);
	return err;
}

static void cache_on(const struct gh_pin_ops *ops)
{
	if (!gh_rcache_init(ops, gh_cfg.cache_max_size,
			    gh_cfg.cache_max_count, exposure_flags()))
		__atomic_store_n(&started, ops, __ATOMIC_RELEASE);
	else
		gh_warn("registration cache: no memory for its tables: registrations pass through uncached");
}

/* With the lock: probe pd's NIC (auto chose dmabuf); start the cache on
 * dmabuf at the first NIC that imports. */
static void probe_nic(const struct gh_range *g, struct ibv_pd *pd)
{
	const void *dev = nic_of(pd);
	const char *what = "", *name = dev ?
		((const struct ibv_device *)dev)->name : "?";
	int err;

	if (nic_known(dev) >= 0 || n_nics >= NIC_MAX)
		return;
	err = dmabuf_probe(g, pd, &what);
	/* published after the cache is on: a lock-free reader that finds
	 * an importing NIC finds the cache too */
	nics[n_nics].dev = dev;
	nics[n_nics].imports = !err;
	if (!err) {
		gh_info("pin backend: dmabuf: NIC %s imported a probe DMA-BUF",
			name);
		if (!started)
			cache_on(&gh_pin_dmabuf);
		__atomic_store_n(&n_nics, n_nics + 1, __ATOMIC_RELEASE);
		return;
	}
	__atomic_store_n(&n_nics, n_nics + 1, __ATOMIC_RELEASE);
	if (!started && n_nics == 1 && gh_pin_peermem_loaded()) {
		gh_warn("pin backend: auto chose dmabuf, but %s failed on the probe of NIC %s (%s): using peermem (nvidia-peermem is loaded)",
			what, name, gh_errtext(-err));
		__atomic_store_n(&per_nic, 0, __ATOMIC_RELEASE);
		cache_on(&gh_pin_peermem);
		return;
	}
	gh_warn("pin backend: auto chose dmabuf, but %s failed on the probe of NIC %s (%s): its registrations pass through uncached%s",
		what, name, gh_errtext(-err), started ? " (the cache runs on dmabuf for the others)" :
		gh_pin_peermem_loaded() ? "" : " (nvidia-peermem is not loaded)");
}

const struct gh_pin_ops *gh_rcache_start(const struct gh_range *g,
					 struct ibv_pd *pd)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	const struct gh_pin_ops *ops, *ret;
	int k;

	if (__atomic_load_n(&start_done, __ATOMIC_ACQUIRE)) {
		if (!__atomic_load_n(&per_nic, __ATOMIC_ACQUIRE))
			return __atomic_load_n(&started, __ATOMIC_ACQUIRE);
		k = nic_known(nic_of(pd));
		if (k >= 0)
			return k ? __atomic_load_n(&started, __ATOMIC_ACQUIRE) :
				   NULL;
	}
	pthread_mutex_lock(&lock);
	if (!start_done) {
		ops = gh_pin_choose(g->dev);
		if (ops == &gh_pin_dmabuf &&
		    gh_cfg.backend == GH_CFG_BACKEND_AUTO)
			__atomic_store_n(&per_nic, 1, __ATOMIC_RELEASE);
		else if (ops != &gh_pin_none)
			cache_on(ops);
	}
	if (per_nic)
		probe_nic(g, pd);
	__atomic_store_n(&start_done, 1, __ATOMIC_RELEASE);
	k = per_nic ? nic_known(nic_of(pd)) : 1;
	ret = k > 0 ? started : NULL;
	pthread_mutex_unlock(&lock);
	return ret;
}
