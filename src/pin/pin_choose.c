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
 * gh_pin_explain() is the one place the verdicts are made: the choice
 * below, the info banner and gdrhook-info (src/face/info.c) all read it.
 */
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "registry/registry.h"
#include "backend.h"

static const struct gh_pin_ops *chosen;

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
	const char *lib = gh_cfg.libcuda ? gh_cfg.libcuda : "libcuda.so.1";
	CUresult (*attr)(int *, CUdevice_attribute, CUdevice);
	void *h = dlopen(lib, RTLD_LAZY | RTLD_NOLOAD);
	CUresult rc;
	int v = 0;

	/* Never load the driver into a program that has not. */
	if (!h) {
		say(why, "no CUDA driver in the process (%s)", lib);
		return 0;
	}
	dlclose(h);
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

/* For the cache's fallback once auto's dmabuf choice proved unusable. */
int gh_pin_peermem_loaded(void)
{
	char why[GH_PIN_WHY_LEN];

	return peermem_loaded(why);
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
	switch (gh_cfg.backend) {
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
	x->requested = gh_cfg_backend_words[gh_cfg.backend];
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
	if (gh_cfg.backend == GH_CFG_BACKEND_GDRPIN && x.chosen == GH_PIN_NONE)
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

const struct gh_pin_ops *gh_pin_chosen(void)
{
	return __atomic_load_n(&chosen, __ATOMIC_ACQUIRE);
}
