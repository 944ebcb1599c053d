// SPDX-License-Identifier: GPL-2.0
/*
 * gdrpin: run-time binding to the nv-p2p provider.
 *
 * The nvidia_p2p_* functions are resolved with symbol_get() instead of being
 * linked at load time. Reasons:
 *  - gdrpin loads (and answers GET_VERSION) on a machine without the NVIDIA
 *    driver; pins then fail with -ENODEV;
 *  - any module that exports the same symbols with the same ABI can stand
 *    in, which is how tests/kmod/fake_nvp2p tests gdrpin without a GPU;
 *  - no Module.symvers of nvidia.ko is needed at build time;
 *  - the provider is referenced only while some fd holds pins, so nvidia.ko
 *    can be unloaded and reloaded when gdrpin is idle.
 * symbol_get() works only for EXPORT_SYMBOL_GPL symbols on newer kernels;
 * the open NVIDIA kernel modules export nv-p2p that way.
 */
#include <linux/module.h>

#include "gdrpin.h"

struct gdrpin_provider gdrpin_nv;
static DEFINE_MUTEX(gdrpin_prov_lock);
static unsigned int gdrpin_prov_refs;

/* Bind and drop one nv-p2p symbol; gdrpin_nv's fields are named after them. */
#define GDRPIN_NV_BIND(fn)	(gdrpin_nv.fn = symbol_get(nvidia_p2p_##fn))
#define GDRPIN_NV_UNBIND(fn)					\
	do {							\
		if (gdrpin_nv.fn)				\
			symbol_put(nvidia_p2p_##fn);		\
		gdrpin_nv.fn = NULL;				\
	} while (0)

static void gdrpin_provider_release(void)
{
	GDRPIN_NV_UNBIND(get_pages);
	GDRPIN_NV_UNBIND(put_pages);
	GDRPIN_NV_UNBIND(get_pages_persistent);
	GDRPIN_NV_UNBIND(put_pages_persistent);
	GDRPIN_NV_UNBIND(free_page_table);
	GDRPIN_NV_UNBIND(dma_map_pages);
	GDRPIN_NV_UNBIND(dma_unmap_pages);
	GDRPIN_NV_UNBIND(free_dma_mapping);
}

static int gdrpin_provider_bind(void)
{
	GDRPIN_NV_BIND(get_pages);
	GDRPIN_NV_BIND(put_pages);
	GDRPIN_NV_BIND(get_pages_persistent);
	GDRPIN_NV_BIND(put_pages_persistent);
	GDRPIN_NV_BIND(free_page_table);
	GDRPIN_NV_BIND(dma_map_pages);
	GDRPIN_NV_BIND(dma_unmap_pages);
	GDRPIN_NV_BIND(free_dma_mapping);

	/* The legacy API is the minimum; persistent and DMA are optional. */
	if (!gdrpin_nv.get_pages || !gdrpin_nv.put_pages ||
	    !gdrpin_nv.free_page_table)
		goto fail;
	/* A persistent pair must be complete to be used. */
	if (!gdrpin_nv.get_pages_persistent || !gdrpin_nv.put_pages_persistent) {
		GDRPIN_NV_UNBIND(get_pages_persistent);
		GDRPIN_NV_UNBIND(put_pages_persistent);
	}
	if (!gdrpin_nv.dma_map_pages || !gdrpin_nv.dma_unmap_pages ||
	    !gdrpin_nv.free_dma_mapping) {
		GDRPIN_NV_UNBIND(dma_map_pages);
		GDRPIN_NV_UNBIND(dma_unmap_pages);
		GDRPIN_NV_UNBIND(free_dma_mapping);
	}
	return 0;
fail:
	gdrpin_provider_release();
	return -ENODEV;
}

/* Take a reference on the provider, binding its symbols on first use. */
int gdrpin_provider_get(void)
{
	int ret = 0;

	mutex_lock(&gdrpin_prov_lock);
	if (gdrpin_prov_refs == 0)
		ret = gdrpin_provider_bind();
	if (!ret)
		gdrpin_prov_refs++;
	mutex_unlock(&gdrpin_prov_lock);
	return ret;
}

void gdrpin_provider_put(void)
{
	mutex_lock(&gdrpin_prov_lock);
	if (!WARN_ON(gdrpin_prov_refs == 0) && --gdrpin_prov_refs == 0)
		gdrpin_provider_release();
	mutex_unlock(&gdrpin_prov_lock);
}

/* GDRPIN_CAP_* bits that depend on the provider (probes it if unbound). */
u64 gdrpin_provider_caps(void)
{
	u64 caps = 0;

	if (gdrpin_provider_get())
		return 0;
	caps |= GDRPIN_CAP_PROVIDER | GDRPIN_CAP_LEGACY;
	if (gdrpin_nv.get_pages_persistent)
		caps |= GDRPIN_CAP_PERSISTENT | GDRPIN_CAP_FORCE_BAR1;
	gdrpin_provider_put();
	return caps;
}
