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

void gdrpin_range_put(struct gdrpin_range *r)
{
	if (IS_ERR_OR_NULL(r))
		return;
	atomic64_dec(&gdrpin_cnt.kapi_refs);
	gdrpin_pin_put(r);
}
EXPORT_SYMBOL_GPL(gdrpin_range_put);

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

/* NULL once the range is revoked or unpinned. */
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

const struct nvidia_p2p_dma_mapping *gdrpin_dma_map_mapping(struct gdrpin_dma_map *map)
{
	return map->m;
}
EXPORT_SYMBOL_GPL(gdrpin_dma_map_mapping);

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

void gdrpin_range_notifier_unregister(struct gdrpin_range *r,
				      struct gdrpin_notifier *n)
{
	mutex_lock(&r->notify_lock);
	list_del_init(&n->node);
	mutex_unlock(&r->notify_lock);
}
EXPORT_SYMBOL_GPL(gdrpin_range_notifier_unregister);
