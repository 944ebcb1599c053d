// SPDX-License-Identifier: MIT
/*
 * Which pin backend this process uses (GDRHOOK_BACKEND=auto|dmabuf|
 * peermem|gdrpin|none), decided once at the first registration of a
 * tracked GPU allocation and logged once with the reason.
 *
 * auto: dmabuf when the driver says the device supports DMA-BUF
 * (CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED) and libibverbs has
 * ibv_reg_dmabuf_mr; else peermem when a peer-memory client for NVIDIA
 * GPUs is loaded (nvidia_peermem, or the older nv_peer_mem); else gdrpin
 * when /dev/gdrpin opens and answers (ABI 1, a provider loaded); else none.
 * gdrpin is asked for explicitly to combine it with nvidia-peermem (see
 * src/pin/pin_gdrpin.c): auto prefers plain peermem there.  An explicit gdrpin
 * that cannot be used gets none, with the reason.
 *
 * When auto chose dmabuf, a proof that the NIC can import a DMA-BUF at
 * all (gh_pin_for_nic, at the first registration of each NIC).  The
 * driver exporting DMA-BUF and libibverbs having ibv_reg_dmabuf_mr say
 * nothing about the NIC (soft-RoCE refuses with EOPNOTSUPP); trusting
 * them made every registration fail once and retry uncached, slower than
 * no shim.  The probe allocates a 64 KiB buffer of its own on the device
 * of the allocation being registered (untracked: the hook guard is up),
 * exports it and registers one page of it in the program's own PD (if
 * that buffer cannot be had, the program's allocation serves), once per
 * NIC (the ibv_device of the PD's context): one NIC of a machine may
 * import while another cannot.  When the first NIC probed fails, auto
 * falls back to peermem for every NIC when it is loaded; else that NIC's
 * registrations pass through (as with none) and the next NIC is probed
 * in turn: the first that imports gets dmabuf.  A NIC that fails after
 * one imported passes through too (the cache has one backend).  Each
 * failure is said once at the warn level.
 *
 * Under exact exposure (with GDRHOOK_WINDOWS) the first NIC probed
 * decides between parents first: windows bind only over an ordinary MR
 * (src/pin/mwin.h), so where that NIC binds type-1 windows and a plain
 * registration of one page of GPU memory succeeds (a peer-memory client
 * serves it), auto takes peermem: an exact MR costs a bind and an
 * unbind, where over DMA-BUF it costs a NIC registration and its dereg.
 *
 * gh_pin_explain() is the one place the verdicts are made: the choice
 * below and gdrhook-info's prediction (src/face/info.c) read it.  What
 * the cache then runs is recorded by it (gh_pin_record): the banner and
 * gdrhook-info's choice in the process read that record, never deciding
 * again.
 */
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "registry/registry.h"
#include "backend.h"
#include "mwin.h"
#include "pin_opts.h"

static const struct gh_pin_ops *chosen;	/* gh_pin_choose()'s decision */

/*
 * A backend and why: the process's verdict (gh_pin_for_nic) and what the
 * cache runs (gh_pin_record) point to one of these.  Each is filled once,
 * under the lock of gh_pin_for_nic (or, for cache_failed, the cache's),
 * before a pointer to it is published.
 */
struct verdict {
	const struct gh_pin_ops *ops;
	int per_nic;		/* dmabuf for the NICs that import, else NULL */
	char why[4 * GH_PIN_WHY_LEN];
};
static struct verdict v_static;		/* gh_pin_choose() */
static struct verdict v_refused;	/* the first NIC probed refused */
static struct verdict v_peer;		/* exact exposure: window-capable peermem */
static struct verdict v_imported;	/* the first NIC that imported */
static struct verdict v_cache_failed;	/* the cache could not start */
static struct verdict *verdict;		/* what the process should run */
static struct verdict *running;		/* what the cache runs */

static const struct gh_pin_ops *const backends[GH_PIN_NBACKENDS] = {
	[GH_PIN_DMABUF] = &gh_pin_dmabuf,
	[GH_PIN_PEERMEM] = &gh_pin_peermem,
	[GH_PIN_GDRPIN] = &gh_pin_gdrpin,
	[GH_PIN_NONE] = &gh_pin_none,
};

const struct gh_pin_ops *gh_pin_backend_ops(unsigned int b)
{
	return b < GH_PIN_NBACKENDS ? backends[b] : &gh_pin_none;
}

/* Every verdict's reason is a GH_PIN_WHY_LEN buffer. */
#define say(dst, ...) gh_str_printf((dst), GH_PIN_WHY_LEN, __VA_ARGS__)

static int dmabuf_possible(int dev, char *why)
{
	/* the driver the hooks use: a bad GDRHOOK_LIBCUDA is the default */
	const char *lib = gh_libcuda_loaded();
	CUresult (*attr)(int *, CUdevice_attribute, CUdevice);
	CUresult rc;
	void *h;
	int v = 0;

	/* Never load the driver into a program that has not. */
	if (!lib) {
		say(why, "no CUDA driver in the process (libcuda.so.1)");
		return 0;
	}
	h = gh_libcuda_handle();
	if (!h) {
		say(why, "no CUDA driver (%s)", lib);
		return 0;
	}
	if (!gh_real_dlsym(h, "cuMemGetHandleForAddressRange")) {
		say(why, "the driver has no cuMemGetHandleForAddressRange");
		return 0;
	}
	if (!gh_vreal_have("ibv_reg_dmabuf_mr")) {
		void *v = dlopen("libibverbs.so.1", RTLD_LAZY | RTLD_NOLOAD);

		if (v)
			dlclose(v);
		say(why, v ? "libibverbs has no ibv_reg_dmabuf_mr" :
		    "libibverbs is not loaded (not a verbs program)");
		return 0;
	}
	attr = (CUresult (*)(int *, CUdevice_attribute, CUdevice))
		gh_real_dlsym(h, "cuDeviceGetAttribute");
	rc = attr ? attr(&v, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED,
			 dev < 0 ? 0 : dev) : CUDA_ERROR_NOT_FOUND;
	if (rc == CUDA_ERROR_NOT_INITIALIZED) {
		say(why, "the driver is not initialized yet (cuInit)");
		return 0;
	}
	if (rc != CUDA_SUCCESS || !v) {
		say(why, "device %d does not support DMA-BUF export",
		    dev < 0 ? 0 : dev);
		return 0;
	}
	say(why, "device %d exports DMA-BUF and libibverbs has ibv_reg_dmabuf_mr",
	    dev < 0 ? 0 : dev);
	return 1;
}

static int peermem_loaded(char *why)
{
	if (!access("/sys/module/nvidia_peermem", F_OK)) {
		say(why, "nvidia-peermem is loaded");
		return 1;
	}
	if (!access("/sys/module/nv_peer_mem", F_OK)) {
		say(why, "nv_peer_mem is loaded");
		return 1;
	}
	say(why, "nvidia-peermem is not loaded");
	return 0;
}

/* Where auto goes once its dmabuf choice met a NIC that cannot import. */
unsigned int gh_pin_auto_fallback(void)
{
	char why[GH_PIN_WHY_LEN];

	return peermem_loaded(why) ? GH_PIN_PEERMEM : GH_PIN_NONE;
}

static int gdrpin_answers(char *why)
{
	const char *w = NULL;
	int rc = gh_pin_gdrpin_open(&w);

	say(why, "%s", w ? w : (rc ? "unavailable" : "/dev/gdrpin answers"));
	return !rc;
}

/* GDRHOOK_BACKEND's backend, or GH_PIN_NBACKENDS for auto. */
static unsigned int backend_asked(void)
{
	switch (gh_pin_cfg.backend) {
	case GH_CFG_BACKEND_DMABUF:
		return GH_PIN_DMABUF;
	case GH_CFG_BACKEND_PEERMEM:
		return GH_PIN_PEERMEM;
	case GH_CFG_BACKEND_GDRPIN:
		return GH_PIN_GDRPIN;
	case GH_CFG_BACKEND_NONE:
		return GH_PIN_NONE;
	default:
		return GH_PIN_NBACKENDS;
	}
}

static void probe_one(int dev, unsigned int b, struct gh_pin_explanation *x)
{
	char *why = x->why[b];

	switch (b) {
	case GH_PIN_DMABUF:
		x->usable[b] = dmabuf_possible(dev, why);
		break;
	case GH_PIN_PEERMEM:
		x->usable[b] = peermem_loaded(why);
		break;
	case GH_PIN_GDRPIN:
		x->usable[b] = gdrpin_answers(why);
		break;
	default:
		x->usable[b] = 1;
		say(why, "registrations pass through uncached");
		break;
	}
	x->probed[b] = 1;
}

/*
 * all: probe every backend.  Otherwise only what the decision needs: auto
 * stops at the first usable backend (opening /dev/gdrpin takes a gdrpin
 * context, which a process that will not use it should not hold); an
 * explicit gdrpin is probed alone; other explicit choices are not probed.
 */
void gh_pin_explain(int dev, int all, struct gh_pin_explanation *x)
{
	unsigned int b = 0, first = GH_PIN_NBACKENDS;

	memset(x, 0, sizeof(*x));
	x->requested = gh_cfg_backend_words[gh_pin_cfg.backend];
	for (b = 0; b < GH_PIN_NBACKENDS; b++)
		say(x->why[b], "not probed");
	b = backend_asked();
	if (all || b == GH_PIN_NBACKENDS) {
		for (unsigned int i = 0; i < GH_PIN_NBACKENDS; i++) {
			if (first < GH_PIN_NBACKENDS && !all) {
				say(x->why[i], "not probed: %s comes first",
				    backends[first]->name);
				continue;
			}
			probe_one(dev, i, x);
			if (x->usable[i] && first == GH_PIN_NBACKENDS)
				first = i;
		}
	} else if (b == GH_PIN_GDRPIN) {
		probe_one(dev, b, x);
	}

	if (b == GH_PIN_NONE || b == GH_PIN_DMABUF || b == GH_PIN_PEERMEM) {
		/* Asked for by name: taken as asked, even if the probe says no. */
		x->chosen = b;
		say(x->reason, "GDRHOOK_BACKEND=%s", x->requested);
		return;
	}
	if (b == GH_PIN_GDRPIN) {
		if (x->usable[GH_PIN_GDRPIN]) {
			x->chosen = GH_PIN_GDRPIN;
			say(x->reason, "GDRHOOK_BACKEND=gdrpin");
		} else {
			x->chosen = GH_PIN_NONE;
			say(x->reason, "GDRHOOK_BACKEND=gdrpin, but gdrpin is unavailable: %s",
			    x->why[GH_PIN_GDRPIN]);
		}
		return;
	}
	x->chosen = first;
	/* Every rejection on the way, then what was taken. */
	{
		struct gh_buf r;

		gh_buf_init(&r, x->reason, sizeof(x->reason));
		gh_buf_lit(&r, "auto: ");
		for (b = 0; b <= first && b < GH_PIN_NBACKENDS; b++) {
			if (b)
				gh_buf_lit(&r, "; ");
			gh_buf_puts(&r, x->why[b]);
		}
		gh_buf_cstr(&r);
	}
}

static const struct gh_pin_ops *decide(int dev)
{
	struct gh_pin_explanation x;

	gh_pin_explain(dev, 0, &x);
	v_static.ops = backends[x.chosen];
	gh_str_printf(v_static.why, sizeof(v_static.why), "%s", x.reason);
	if (gh_pin_cfg.backend == GH_CFG_BACKEND_GDRPIN && x.chosen == GH_PIN_NONE)
		gh_warn("pin backend: none (%s): registrations pass through uncached",
			x.reason);
	else
		gh_info("pin backend: %s (%s)", backends[x.chosen]->name,
			x.reason);
	return backends[x.chosen];
}

const struct gh_pin_ops *gh_pin_choose(int dev)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	const struct gh_pin_ops *ops = __atomic_load_n(&chosen,
						       __ATOMIC_ACQUIRE);

	if (ops)
		return ops;
	pthread_mutex_lock(&lock);
	if (!chosen)
		__atomic_store_n(&chosen, decide(dev), __ATOMIC_RELEASE);
	ops = chosen;
	pthread_mutex_unlock(&lock);
	return ops;
}

const struct gh_pin_ops *gh_pin_decided(void)
{
	return __atomic_load_n(&chosen, __ATOMIC_ACQUIRE);
}

/* ------------------------------------------------ the NIC-import probe */

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

/*
 * Does a peer-memory client serve pd's NIC?  A plain registration of one
 * page of GPU memory (the probe's own buffer, else the program's): the
 * kernel's ib_umem_get pins device memory only through a peer-memory
 * client (nvidia-peermem, or gdrpin as one); without one it fails
 * (EFAULT).  Asking the NIC, not /sys/module, finds any such client and
 * only where it serves.  0 or -errno.
 */
static int peer_probe(const struct gh_range *g, struct ibv_pd *pd)
{
	struct ibv_mr *mr = NULL;
	CUdeviceptr own = 0;
	int err, have = !probe_buffer(g, 1, &own);
	uint64_t base = have ? (uint64_t)own : g->base;
	uint64_t len = have ? 4096 : g->size < 4096 ? g->size : 4096;
	struct gh_pin p;

	memset(&p, 0, sizeof(p));
	p.base = base;
	p.size = len;
	p.fd = -1;
	err = gh_pin_peermem.pin(&p);
	if (!err)
		err = gh_pin_peermem.reg(&p, pd, base, len,
					 IBV_ACCESS_LOCAL_WRITE |
					 IBV_ACCESS_MW_BIND, &mr);
	if (!err)
		gh_pin_peermem.dereg(mr);
	gh_pin_peermem.unpin(&p);
	if (have)
		probe_buffer(g, 0, &own);
	return err;
}

/*
 * With the lock, at the first NIC probed: exact exposure (the cache's
 * policy, handed down) takes windows only over an ordinary MR
 * (gh_mw_route: mlx5 binds none over a DMA-BUF MR), so where this NIC
 * binds windows and a peer-memory client serves it, auto takes peermem
 * (a bind and an unbind per exact MR, where DMA-BUF costs a NIC
 * registration and its dereg).  1: taken.
 */
static int prefer_windows(const struct gh_range *g, struct ibv_pd *pd,
			  int exact, const char *name, char *no, size_t cap)
{
	const char *why = NULL;
	int err;

	if (!exact || !gh_pin_cfg.windows)
		return 0;
	if (!gh_mw_supported(pd, &why)) {
		gh_str_printf(no, cap, "; NIC %s: %s", name,
			      why ? why : "no type-1 windows");
		return 0;
	}
	err = peer_probe(g, pd);
	if (err) {
		gh_str_printf(no, cap,
			      "; NIC %s binds windows, but no peer-memory client registered GPU memory (ibv_reg_mr: %s): exact MRs are DMA-BUF registrations",
			      name, gh_errtext(-err));
		return 0;
	}
	v_peer.ops = &gh_pin_peermem;
	gh_str_printf(v_peer.why, sizeof(v_peer.why),
		      "%s; exact exposure: NIC %s binds type-1 windows, over an ordinary MR only (mlx5 binds none over DMA-BUF), and a peer-memory client registered GPU memory: peermem (a bind per MR, no NIC registration)",
		      v_static.why, name);
	__atomic_store_n(&verdict, &v_peer, __ATOMIC_RELEASE);
	gh_info("pin backend: %s", v_peer.why);
	return 1;
}

/* With the lock: probe pd's NIC (auto chose dmabuf); dmabuf from the
 * first NIC that imports, the fallback when the first NIC refuses. */
static void probe_nic(const struct gh_range *g, struct ibv_pd *pd, int exact)
{
	const void *dev = nic_of(pd);
	const char *what = "", *name = dev ?
		((const struct ibv_device *)dev)->name : "?";
	int err, imported = verdict == &v_imported;
	char no_win[GH_PIN_WHY_LEN * 2] = "";
	unsigned int fb;

	if (nic_known(dev) >= 0 || n_nics >= NIC_MAX)
		return;
	if (!n_nics && prefer_windows(g, pd, exact, name, no_win,
					    sizeof(no_win)))
		return;
	err = dmabuf_probe(g, pd, &what);
	gh_dbg("pin backend: NIC %s: a probe DMA-BUF import %s%s%s%s", name, err ? "failed at " : "succeeded", err ? what : "", err ? ": " : "", err ? gh_errtext(-err) : "");
	/* published after the verdict: a lock-free reader that finds an
	 * importing NIC finds dmabuf too */
	nics[n_nics].dev = dev;
	nics[n_nics].imports = !err;
	if (!err) {
		gh_info("pin backend: dmabuf: NIC %s imported a probe DMA-BUF",
			name);
		if (!imported) {
			v_imported.ops = &gh_pin_dmabuf;
			v_imported.per_nic = 1;
			gh_str_printf(v_imported.why, sizeof(v_imported.why),
				      "%s; NIC %s imported a probe DMA-BUF%s",
				      v_static.why, name, no_win);
			__atomic_store_n(&verdict, &v_imported,
					 __ATOMIC_RELEASE);
		}
		__atomic_store_n(&n_nics, n_nics + 1, __ATOMIC_RELEASE);
		return;
	}
	fb = gh_pin_auto_fallback();
	if (!n_nics) {
		v_refused.ops = backends[fb];
		gh_str_printf(v_refused.why, sizeof(v_refused.why),
			      "auto chose dmabuf, but %s failed on the probe of NIC %s (%s): %s",
			      what, name, gh_errtext(-err), fb == GH_PIN_PEERMEM ?
			      "using peermem (nvidia-peermem is loaded)" :
			      "its registrations pass through uncached (nvidia-peermem is not loaded)");
		v_refused.per_nic = fb != GH_PIN_PEERMEM;
		__atomic_store_n(&verdict, &v_refused, __ATOMIC_RELEASE);
		__atomic_store_n(&n_nics, n_nics + 1, __ATOMIC_RELEASE);
		gh_warn("pin backend: %s", v_refused.why);
		return;
	}
	__atomic_store_n(&n_nics, n_nics + 1, __ATOMIC_RELEASE);
	gh_warn("pin backend: auto chose dmabuf, but %s failed on the probe of NIC %s (%s): its registrations pass through uncached%s",
		what, name, gh_errtext(-err), imported ? " (the cache runs on dmabuf for the others)" :
		fb == GH_PIN_PEERMEM ? "" : " (nvidia-peermem is not loaded)");
}

const struct gh_pin_ops *gh_pin_for_nic(const struct gh_range *g,
					struct ibv_pd *pd, int exact)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	const struct verdict *v = __atomic_load_n(&verdict, __ATOMIC_ACQUIRE);
	const struct gh_pin_ops *ret;
	int k;

	if (v) {
		if (!v->per_nic)
			return v->ops != &gh_pin_none ? v->ops : NULL;
		k = nic_known(nic_of(pd));
		if (k >= 0)
			return k ? &gh_pin_dmabuf : NULL;
	}
	pthread_mutex_lock(&lock);
	if (!verdict) {
		v_static.per_nic = gh_pin_choose(g->dev) == &gh_pin_dmabuf &&
				   gh_pin_cfg.backend == GH_CFG_BACKEND_AUTO;
		__atomic_store_n(&verdict, &v_static, __ATOMIC_RELEASE);
	}
	if (verdict->per_nic)
		probe_nic(g, pd, exact);
	k = verdict->per_nic ? nic_known(nic_of(pd)) : 1;
	ret = k > 0 && verdict->ops != &gh_pin_none ? verdict->ops : NULL;
	pthread_mutex_unlock(&lock);
	return ret;
}

/* ----------------------------------------------- what the cache runs */

void gh_pin_record(const struct gh_pin_ops *ops, const char *why)
{
	struct verdict *v = __atomic_load_n(&verdict, __ATOMIC_ACQUIRE);

	if (!ops)
		ops = &gh_pin_none;
	if (!why && v && v->ops == ops) {
		__atomic_store_n(&running, v, __ATOMIC_RELEASE);
		return;
	}
	if (__atomic_load_n(&running, __ATOMIC_ACQUIRE) != &v_cache_failed) {
		v_cache_failed.ops = ops;
		gh_str_printf(v_cache_failed.why, sizeof(v_cache_failed.why),
			      "%s", why ? why : v ? v->why : "");
	}
	__atomic_store_n(&running, &v_cache_failed, __ATOMIC_RELEASE);
}

const struct gh_pin_ops *gh_pin_chosen(const char **why_p)
{
	const struct verdict *r = __atomic_load_n(&running, __ATOMIC_ACQUIRE);

	if (why_p)
		*why_p = r ? r->why : NULL;
	return r ? r->ops : NULL;
}
