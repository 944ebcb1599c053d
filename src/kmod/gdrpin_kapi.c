// SPDX-License-Identifier: GPL-2.0
/*
 * gdrpin: in-kernel API for peer device drivers (include/gdrpin_kapi.h).
 *
 * Lookups walk the global context list (gdrpin_ctx_list_lock), then search
 * the interval tree of each context of that process (ctx->lock); neither
 * lock is held across nv-p2p calls. A lookup costs O(contexts + log pins).
 */
#include <linux/module.h>
#include <linux/pci.h>
#include <linux/pid.h>
#include <linux/slab.h>

#include "gdrpin.h"

/**
 * gdrpin_range_get() - find and hold the pin that covers a range
 * @tgid: the process whose pins are searched
 * @va: start of the range, in that process's GPU address space
 * @len: length of the range in bytes, not zero
 *
 * Searches every gdrpin context of @tgid for one pin that covers
 * [@va, @va + @len) and takes a reference on it. Takes the context list
 * lock and each context's lock; must not be called with either held.
 *
 * Return: the pin, to be given back with gdrpin_range_put();
 * ERR_PTR(-EINVAL) for a NULL @tgid, a zero @len or a range that wraps;
 * ERR_PTR(-ENOENT) when no pin covers the range.
 */
struct gdrpin_range *gdrpin_range_get(struct pid *tgid, u64 va, u64 len)
{
	struct gdrpin_range *found = NULL;
	struct gdrpin_ctx *ctx;
	u64 end;

	if (!tgid || !len || check_add_overflow(va, len, &end))
		return ERR_PTR(-EINVAL);
	mutex_lock(&gdrpin_ctx_list_lock);
	list_for_each_entry(ctx, &gdrpin_ctx_list, node) {
		if (ctx->tgid != tgid)
			continue;
		mutex_lock(&ctx->lock);
		found = gdrpin_pin_get_cover(ctx, va, end);
		mutex_unlock(&ctx->lock);
		if (found)
			break;
	}
	mutex_unlock(&gdrpin_ctx_list_lock);
	if (!found)
		return ERR_PTR(-ENOENT);
	atomic64_inc(&gdrpin_cnt.kapi_refs);
	return found;
}
EXPORT_SYMBOL_GPL(gdrpin_range_get);

/**
 * gdrpin_range_get_by_nr() - gdrpin_range_get() for a process number
 * @tgid: the process's thread group id, in the caller's pid namespace
 * @va: start of the range
 * @len: length of the range in bytes, not zero
 *
 * Return: as gdrpin_range_get(), or ERR_PTR(-ESRCH) when no process has
 * that number.
 */
struct gdrpin_range *gdrpin_range_get_by_nr(pid_t tgid, u64 va, u64 len)
{
	struct gdrpin_range *r;
	struct pid *pid;

	pid = find_get_pid(tgid);
	if (!pid)
		return ERR_PTR(-ESRCH);
	r = gdrpin_range_get(pid, va, len);
	put_pid(pid);
	return r;
}
EXPORT_SYMBOL_GPL(gdrpin_range_get_by_nr);

/**
 * gdrpin_range_put() - give back a pin taken by gdrpin_range_get()
 * @r: the pin; NULL or an error pointer is ignored
 *
 * The pin is released once its last reference is gone.
 */
void gdrpin_range_put(struct gdrpin_range *r)
{
	if (IS_ERR_OR_NULL(r))
		return;
	atomic64_dec(&gdrpin_cnt.kapi_refs);
	gdrpin_pin_put(r);
}
EXPORT_SYMBOL_GPL(gdrpin_range_put);

/**
 * gdrpin_range_info() - describe a held pin
 * @r: the pin, held by gdrpin_range_get()
 * @info: filled with its range, page size, number of entries, mode, and
 *        whether it is still active or has been revoked
 *
 * Return: 0.
 */
int gdrpin_range_info(struct gdrpin_range *r, struct gdrpin_range_info *info)
{
	info->va = r->va;
	info->len = r->len;
	info->page_size = r->page_size;
	info->entries = r->entries;
	info->mode = r->mode;
	spin_lock(&r->lock);
	info->state = (r->state == GDRPIN_PS_ACTIVE && !r->cb_fired) ?
		      GDRPIN_SLOT_ACTIVE : GDRPIN_SLOT_REVOKED;
	spin_unlock(&r->lock);
	return 0;
}
EXPORT_SYMBOL_GPL(gdrpin_range_info);

/**
 * gdrpin_range_page_table() - the NVIDIA page table of a held pin
 * @r: the pin, held by gdrpin_range_get()
 *
 * Return: the page table; NULL once the pin is revoked or unpinned.
 */
const struct nvidia_p2p_page_table *gdrpin_range_page_table(struct gdrpin_range *r)
{
	const struct nvidia_p2p_page_table *pt = NULL;

	spin_lock(&r->lock);
	if (r->state == GDRPIN_PS_ACTIVE && !r->cb_fired)
		pt = r->pt;
	spin_unlock(&r->lock);
	return pt;
}
EXPORT_SYMBOL_GPL(gdrpin_range_page_table);

/**
 * gdrpin_range_dma_map() - map a held pin's pages for a peer device
 * @r: the pin, held by gdrpin_range_get()
 * @pdev: the device that will reach the pages
 * @map_p: set to the mapping on success, for gdrpin_dma_map_mapping() and
 *         gdrpin_range_dma_unmap()
 *
 * May sleep (allocates with GFP_KERNEL and calls nvidia_p2p_dma_map_pages).
 *
 * Return: 0; -EOPNOTSUPP when the NVIDIA driver has no DMA mapping call or
 * the pin is a DMA-BUF one; -ENOMEM; -ESTALE when the pin is revoked or
 * unpinned (before or while it is mapped); -EPROTO when the driver's
 * mapping has a version gdrpin does not know; else the driver's error.
 */
int gdrpin_range_dma_map(struct gdrpin_range *r, struct pci_dev *pdev,
			 struct gdrpin_dma_map **map_p)
{
	struct nvidia_p2p_dma_mapping *m = NULL;
	struct gdrpin_dma_map *w;
	bool fired;
	int ret;

	if (!gdrpin_nv.dma_map_pages || r->mode == GDRPIN_MODE_DMABUF)
		return -EOPNOTSUPP;
	w = kzalloc(sizeof(*w), GFP_KERNEL);
	if (!w)
		return -ENOMEM;
	if (!gdrpin_pin_busy_enter(r)) {
		kfree(w);
		return -ESTALE;
	}
	gdrpin_assert_nv_callable(r);
	ret = gdrpin_nv.dma_map_pages(pdev, r->pt, &m);
	if (!ret && (!m || !GDRPIN_NVP2P_DMA_VERSION_COMPATIBLE(m))) {
		pr_err_ratelimited("gdrpin: dma mapping version %#x unsupported\n",
				   m ? m->version : 0);
		if (m)
			gdrpin_nv.dma_unmap_pages(pdev, r->pt, m);
		ret = -EPROTO;
	}
	if (!ret) {
		w->pdev = pci_dev_get(pdev);
		w->m = m;
		mutex_lock(&r->map_lock);
		list_add_tail(&w->node, &r->maps);
		mutex_unlock(&r->map_lock);
	}
	gdrpin_pin_busy_exit(r);
	if (ret) {
		kfree(w);
		return ret;
	}

	spin_lock(&r->lock);
	fired = r->cb_fired;
	spin_unlock(&r->lock);
	if (fired) {
		/* Revoked while we mapped: the mapping is dead already. */
		gdrpin_range_dma_unmap(r, w);
		return -ESTALE;
	}
	*map_p = w;
	return 0;
}
EXPORT_SYMBOL_GPL(gdrpin_range_dma_map);

/**
 * gdrpin_dma_map_mapping() - the NVIDIA driver's mapping behind a map
 * @map: a mapping made by gdrpin_range_dma_map()
 *
 * Return: the nvidia_p2p_dma_mapping (the peer's DMA addresses); NULL once
 * it has been unmapped.
 */
const struct nvidia_p2p_dma_mapping *gdrpin_dma_map_mapping(struct gdrpin_dma_map *map)
{
	return map->m;
}
EXPORT_SYMBOL_GPL(gdrpin_dma_map_mapping);

/**
 * gdrpin_range_dma_unmap() - undo gdrpin_range_dma_map()
 * @r: the pin the mapping was made on
 * @w: the mapping; NULL is ignored
 *
 * Unmaps and frees @w. While the pin is being revoked or unpinned, gdrpin
 * unmaps and frees it instead. May sleep.
 */
void gdrpin_range_dma_unmap(struct gdrpin_range *r, struct gdrpin_dma_map *w)
{
	struct nvidia_p2p_dma_mapping *m;
	bool active;

	if (!w)
		return;
	mutex_lock(&r->map_lock);
	active = gdrpin_pin_busy_enter(r);
	if (!active && w->m) {
		/* Revoke/unpin in progress: gdrpin unmaps and frees it. */
		w->orphan = true;
		mutex_unlock(&r->map_lock);
		return;
	}
	list_del(&w->node);
	m = w->m;
	w->m = NULL;
	mutex_unlock(&r->map_lock);
	if (active) {
		if (m)
			gdrpin_pin_dma_unmap(r, w->pdev, m);
		gdrpin_pin_busy_exit(r);
	}
	pci_dev_put(w->pdev);
	kfree(w);
}
EXPORT_SYMBOL_GPL(gdrpin_range_dma_unmap);

/**
 * gdrpin_range_notifier_register() - be told when a pin is revoked
 * @r: the pin, held by gdrpin_range_get()
 * @n: the notifier; its revoke callback must be set
 *
 * Return: 0; -EINVAL for a NULL @n or one without a revoke callback;
 * -ESTALE when the pin's notifiers have already been told.
 */
int gdrpin_range_notifier_register(struct gdrpin_range *r,
				   struct gdrpin_notifier *n)
{
	int ret = 0;

	if (!n || !n->revoke)
		return -EINVAL;
	INIT_LIST_HEAD(&n->node);
	mutex_lock(&r->notify_lock);
	if (r->notified)
		ret = -ESTALE;
	else
		list_add_tail(&n->node, &r->notifiers);
	mutex_unlock(&r->notify_lock);
	return ret;
}
EXPORT_SYMBOL_GPL(gdrpin_range_notifier_register);

/**
 * gdrpin_range_notifier_unregister() - stop being told about a pin
 * @r: the pin @n was registered on
 * @n: a notifier registered by gdrpin_range_notifier_register()
 */
void gdrpin_range_notifier_unregister(struct gdrpin_range *r,
				      struct gdrpin_notifier *n)
{
	mutex_lock(&r->notify_lock);
	list_del_init(&n->node);
	mutex_unlock(&r->notify_lock);
}
EXPORT_SYMBOL_GPL(gdrpin_range_notifier_unregister);
