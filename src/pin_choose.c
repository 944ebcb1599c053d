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
 * src/pin_gdrpin.c): auto prefers plain peermem there.  An explicit gdrpin
 * that cannot be used gets none, with the reason.
 */
#include <cuda.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "log.h"
#include "pin.h"

static const struct gh_pin_ops *chosen;

static int dmabuf_possible(int dev, const char **why)
{
	CUresult (*attr)(int *, CUdevice_attribute, CUdevice);
	void *h = gh_libcuda_handle();
	int v = 0;

	if (!h || !gh_real_dlsym(h, "cuMemGetHandleForAddressRange")) {
		*why = "the driver has no cuMemGetHandleForAddressRange";
		return 0;
	}
	if (!gh_vreal_have("ibv_reg_dmabuf_mr")) {
		*why = "libibverbs has no ibv_reg_dmabuf_mr";
		return 0;
	}
	attr = (CUresult (*)(int *, CUdevice_attribute, CUdevice))
		gh_real_dlsym(h, "cuDeviceGetAttribute");
	if (!attr || attr(&v, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED,
			  dev < 0 ? 0 : dev) != CUDA_SUCCESS || !v) {
		*why = "the device does not support DMA-BUF export";
		return 0;
	}
	*why = "the device exports DMA-BUF and libibverbs has ibv_reg_dmabuf_mr";
	return 1;
}

int gh_pin_peermem_loaded(void)
{
	return !access("/sys/module/nvidia_peermem", F_OK) ||
	       !access("/sys/module/nv_peer_mem", F_OK);
}

static const struct gh_pin_ops *decide(int dev)
{
	const char *want = gh_cfg.backend ? gh_cfg.backend : "auto";
	const char *why = NULL;

	if (!strcmp(want, "none")) {
		gh_info("pin backend: none (GDRHOOK_BACKEND=none): registrations pass through uncached");
		return &gh_pin_none;
	}
	if (!strcmp(want, "dmabuf")) {
		gh_info("pin backend: dmabuf (GDRHOOK_BACKEND=dmabuf)");
		return &gh_pin_dmabuf;
	}
	if (!strcmp(want, "peermem")) {
		gh_info("pin backend: peermem (GDRHOOK_BACKEND=peermem)");
		return &gh_pin_peermem;
	}
	if (!strcmp(want, "gdrpin")) {
		if (gh_pin_gdrpin_open(&why)) {
			gh_warn("pin backend: gdrpin unavailable (%s): none, registrations pass through uncached",
				why);
			return &gh_pin_none;
		}
		gh_info("pin backend: gdrpin (GDRHOOK_BACKEND=gdrpin)");
		return &gh_pin_gdrpin;
	}
	if (strcmp(want, "auto"))
		gh_warn("GDRHOOK_BACKEND=%s is not one of auto, dmabuf, peermem, gdrpin, none: using auto",
			want);
	if (dmabuf_possible(dev, &why)) {
		gh_info("pin backend: dmabuf (auto: %s)", why);
		return &gh_pin_dmabuf;
	}
	if (gh_pin_peermem_loaded()) {
		gh_info("pin backend: peermem (auto: %s; nvidia-peermem is loaded)",
			why);
		return &gh_pin_peermem;
	}
	{
		const char *gwhy = NULL;

		if (!gh_pin_gdrpin_open(&gwhy)) {
			gh_info("pin backend: gdrpin (auto: %s, nvidia-peermem is not loaded, %s)",
				why, gh_gdrpin_dev);
			return &gh_pin_gdrpin;
		}
		gh_info("pin backend: none (auto: %s, nvidia-peermem is not loaded, gdrpin: %s): registrations pass through uncached",
			why, gwhy);
	}
	return &gh_pin_none;
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
