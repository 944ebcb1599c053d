// SPDX-License-Identifier: GPL-2.0
/*
 * gdrpin: peer-memory client of MLNX_OFED's ib_core (gdrpin_peermem.h).
 *
 * ibv_reg_mr on GPU memory reaches ib_core, which asks its peer-memory
 * clients whether they own the range. gdrpin answers for processes that
 * have /dev/gdrpin open and whose range the provider can pin, and backs
 * each registration with an ordinary legacy (revocable) nv-p2p pin on that
 * process's fd: slots, quota, per-user limits, statistics and the status
 * page hold as for PIN. When the pin goes (the GPU memory is freed, or the
 * fd is closed or its process exits) the pin's in-kernel notifier calls
 * ib_core's invalidate callback before the pages go.
 *
 * Binding: ib_register_peer_memory_client and its pair are resolved at
 * load with symbol_get(), so gdrpin loads without MLNX_OFED (stats file
 * peer_client reads 0) and holds ib_core while registered.
 *
 * Locks: ib_core may hold its own locks across every client call and may
 * take them in the invalidate callback, which gdrpin calls from the free
 * callback (under the provider's locks and pin->notify_lock). So no client
 * call waits for anything the invalidation path holds: dma_unmap,
 * put_pages and release only record what ib_core gave back, and a work
 * item (gdrpin_peer_wq) unmaps, unregisters the notifier and unpins with
 * no ib_core lock held. peer->lock (spinlock) orders put_pages against the
 * notifier, so ib_core is never invalidated after it gave the pages back.
 */
#include <linux/device.h>
#include <linux/module.h>
#include <linux/pci.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>
#include <linux/workqueue.h>

#include "gdrpin.h"
#include "gdrpin_peermem.h"

struct gdrpin_peer {
	struct kref ref;		/* ib_core's (until release), the work's */
	u64 va;				/* what ib_core registers */
	u64 len;
	u64 pin_va;			/* 64 KiB aligned cover that gdrpin pins */
	u64 pin_len;
	u64 core_context;
	struct gdrpin_ctx *ctx;		/* registering process's fd (ref) */
	struct gdrpin_range *pin;	/* after get_pages (ref) */
	struct gdrpin_notifier nb;
	bool nb_on;			/* notifier registered */
	struct gdrpin_dma_map *map;	/* after dma_map, until the work */
	bool unmapped;			/* ib_core called dma_unmap */
	struct work_struct work;

	spinlock_t lock;
	bool put;			/* ib_core gave the pages back */
	bool invalidated;		/* ib_core was told */
};

static void *(*gdrpin_ib_register)(const struct peer_memory_client *,
				   invalidate_peer_memory *);
static void (*gdrpin_ib_unregister)(void *);
static void *gdrpin_peer_handle;
static invalidate_peer_memory gdrpin_peer_invalidate;
static struct workqueue_struct *gdrpin_peer_wq;

static void gdrpin_peer_free(struct kref *ref)
{
	struct gdrpin_peer *peer = container_of(ref, struct gdrpin_peer, ref);

	WARN_ON(peer->pin || peer->map);
	if (peer->ctx)
		gdrpin_ctx_put(peer->ctx);
	kfree(peer);
	atomic64_dec(&gdrpin_cnt.peer_regs);
}

/* Give the pin back, in process context with no ib_core lock held. */
static void gdrpin_peer_work(struct work_struct *work)
{
	struct gdrpin_peer *peer = container_of(work, struct gdrpin_peer, work);
	struct gdrpin_range *pin = peer->pin;

	lockdep_assert_not_held(&peer->ctx->lock);
	if (pin) {
		if (peer->map) {
			/* after a revocation, frees instead of unmapping */
			gdrpin_range_dma_unmap(pin, peer->map);
			peer->map = NULL;
		}
		/* waits for an invalidation in progress to return */
		if (peer->nb_on)
			gdrpin_range_notifier_unregister(pin, &peer->nb);
		peer->nb_on = false;
		peer->pin = NULL;
		gdrpin_ctx_unpin_kernel(peer->ctx, pin);
	}
	kref_put(&peer->ref, gdrpin_peer_free);
}

static void gdrpin_peer_queue(struct gdrpin_peer *peer)
{
	kref_get(&peer->ref);
	if (!queue_work(gdrpin_peer_wq, &peer->work))
		kref_put(&peer->ref, gdrpin_peer_free);	/* queued already */
}

/* The pin is going (revoked or unpinned): ib_core must stop using it. */
static void gdrpin_peer_revoke(struct gdrpin_notifier *nb,
			       struct gdrpin_range *r, int reason)
{
	struct gdrpin_peer *peer = container_of(nb, struct gdrpin_peer, nb);
	bool tell;

	lockdep_assert_held(&r->notify_lock);
	spin_lock(&peer->lock);
	tell = !peer->put && !peer->invalidated;
	peer->invalidated = true;
	spin_unlock(&peer->lock);
	if (!tell)
		return;
	atomic64_inc(&gdrpin_cnt.peer_invalidations);
	gdrpin_peer_invalidate(gdrpin_peer_handle, peer->core_context);
}

/* --- client operations --------------------------------------------------- */

static int gdrpin_peer_acquire(unsigned long addr, size_t size,
			       void *peer_mem_private_data, char *peer_mem_name,
			       void **client_context)
{
	struct gdrpin_peer *peer;
	struct gdrpin_ctx *ctx;
	u64 start, end;

	if (!size || check_add_overflow((u64)addr, (u64)size, &end))
		return 0;
	start = round_down(addr, GDRPIN_PIN_ALIGN);
	end = round_up(end, GDRPIN_PIN_ALIGN);
	if (end <= start)
		return 0;
	ctx = gdrpin_ctx_of_current();
	if (!ctx)
		return 0;	/* the process did not open gdrpin */
	if (gdrpin_pin_probe(start, end - start)) {
		gdrpin_ctx_put(ctx);
		return 0;	/* not memory the provider pins */
	}
	peer = kzalloc(sizeof(*peer), GFP_KERNEL);
	if (!peer) {
		gdrpin_ctx_put(ctx);
		return 0;
	}
	kref_init(&peer->ref);
	spin_lock_init(&peer->lock);
	INIT_WORK(&peer->work, gdrpin_peer_work);
	peer->nb.revoke = gdrpin_peer_revoke;
	peer->va = addr;
	peer->len = size;
	peer->pin_va = start;
	peer->pin_len = end - start;
	peer->ctx = ctx;
	atomic64_inc(&gdrpin_cnt.peer_regs);
	*client_context = peer;
	return 1;
}

static int gdrpin_peer_get_pages(unsigned long addr, size_t size, int write,
				 int force, struct sg_table *sg_head,
				 void *client_context, u64 core_context)
{
	struct gdrpin_peer *peer = client_context;
	struct gdrpin_range *pin;
	int ret;

	if (addr != peer->va || size != peer->len || peer->pin)
		return -EINVAL;
	peer->core_context = core_context;
	/* nv-p2p, legacy: revocable, so ib_core hears when the memory goes */
	ret = gdrpin_ctx_pin_kernel(peer->ctx, gdrpin_nv_pin, peer->pin_va,
				    peer->pin_len, GDRPIN_PIN_LEGACY, &pin);
	if (ret)
		return ret;
	ret = gdrpin_range_notifier_register(pin, &peer->nb);
	if (ret) {
		/* revoked already */
		gdrpin_ctx_unpin_kernel(peer->ctx, pin);
		return ret;
	}
	peer->nb_on = true;
	peer->pin = pin;
	return 0;
}

static int gdrpin_peer_dma_map(struct sg_table *sg_head, void *client_context,
			       struct device *dma_device, int dmasync, int *nmap)
{
	struct gdrpin_peer *peer = client_context;
	const struct nvidia_p2p_dma_mapping *m;
	struct gdrpin_range_info info;
	struct gdrpin_dma_map *map;
	struct scatterlist *sg;
	u32 first, last, i;
	int ret;

	if (!peer->pin || peer->map || !dma_device || !dev_is_pci(dma_device))
		return -EINVAL;
	gdrpin_range_info(peer->pin, &info);
	ret = gdrpin_range_dma_map(peer->pin, to_pci_dev(dma_device), &map);
	if (ret)
		return ret;
	m = gdrpin_dma_map_mapping(map);
	/* The entries that cover what ib_core registered, not our cover. */
	first = div_u64(peer->va - info.va, info.page_size);
	last = div_u64(peer->va + peer->len - info.va + info.page_size - 1,
		       info.page_size);
	if (WARN_ON(!m || last > m->entries)) {
		ret = -EPROTO;
		goto err_unmap;
	}
	ret = sg_alloc_table(sg_head, last - first, GFP_KERNEL);
	if (ret)
		goto err_unmap;
	/* DMA addresses only: the HCA never needs struct pages of the GPU. */
	for_each_sg(sg_head->sgl, sg, last - first, i) {
		sg->dma_address = m->dma_addresses[first + i];
		sg_dma_len(sg) = info.page_size;
		sg->length = info.page_size;
		sg->offset = 0;
	}
	peer->map = map;
	*nmap = last - first;
	return 0;

err_unmap:
	gdrpin_range_dma_unmap(peer->pin, map);
	return ret;
}

static int gdrpin_peer_dma_unmap(struct sg_table *sg_head, void *client_context,
				 struct device *dma_device)
{
	struct gdrpin_peer *peer = client_context;

	if (!peer->map || peer->unmapped)
		return -EINVAL;
	/*
	 * The HCA is done with it; the mapping itself goes in the work item:
	 * an nv-p2p unmap here could wait for the provider's lock while its
	 * free callback waits in ib_core's invalidate for a lock that ib_core
	 * holds across this call.
	 */
	peer->unmapped = true;
	sg_free_table(sg_head);
	return 0;
}

static void gdrpin_peer_put_pages(struct sg_table *sg_head,
				  void *client_context)
{
	struct gdrpin_peer *peer = client_context;

	if (peer->map && !peer->unmapped)
		sg_free_table(sg_head);	/* ib_core skipped dma_unmap */
	spin_lock(&peer->lock);
	peer->put = true;
	spin_unlock(&peer->lock);
	gdrpin_peer_queue(peer);
}

static unsigned long gdrpin_peer_get_page_size(void *client_context)
{
	struct gdrpin_peer *peer = client_context;
	struct gdrpin_range_info info;

	if (!peer->pin)
		return PAGE_SIZE;
	gdrpin_range_info(peer->pin, &info);
	return info.page_size;
}

static void gdrpin_peer_release(void *client_context)
{
	struct gdrpin_peer *peer = client_context;

	spin_lock(&peer->lock);
	peer->put = true;
	spin_unlock(&peer->lock);
	gdrpin_peer_queue(peer);	/* a no-op if the pin is gone */
	kref_put(&peer->ref, gdrpin_peer_free);
}

static const struct peer_memory_client gdrpin_peer_client = {
	.name = "gdrpin",
	.version = GDRPIN_VERSION,
	.acquire = gdrpin_peer_acquire,
	.get_pages = gdrpin_peer_get_pages,
	.dma_map = gdrpin_peer_dma_map,
	.dma_unmap = gdrpin_peer_dma_unmap,
	.put_pages = gdrpin_peer_put_pages,
	.get_page_size = gdrpin_peer_get_page_size,
	.release = gdrpin_peer_release,
};

/* --- registration with ib_core ------------------------------------------ */

static void gdrpin_peer_unbind(void)
{
	if (gdrpin_ib_register)
		symbol_put(ib_register_peer_memory_client);
	if (gdrpin_ib_unregister)
		symbol_put(ib_unregister_peer_memory_client);
	gdrpin_ib_register = NULL;
	gdrpin_ib_unregister = NULL;
}

/* Register with ib_core if it exports the API; gdrpin works without. */
void gdrpin_peer_init(void)
{
	void *handle;

	gdrpin_ib_register = symbol_get(ib_register_peer_memory_client);
	gdrpin_ib_unregister = symbol_get(ib_unregister_peer_memory_client);
	if (!gdrpin_ib_register || !gdrpin_ib_unregister)
		goto none;
	gdrpin_peer_wq = alloc_workqueue("gdrpin_peer", 0, 0);
	if (!gdrpin_peer_wq)
		goto none;
	handle = gdrpin_ib_register(&gdrpin_peer_client,
				    &gdrpin_peer_invalidate);
	if (!handle || !gdrpin_peer_invalidate) {
		pr_warn("gdrpin: ib_core refused the peer-memory client\n");
		if (handle)
			gdrpin_ib_unregister(handle);
		destroy_workqueue(gdrpin_peer_wq);
		gdrpin_peer_wq = NULL;
		goto none;
	}
	WRITE_ONCE(gdrpin_peer_handle, handle);
	atomic64_set(&gdrpin_cnt.peer_client, 1);
	pr_info("gdrpin: registered with ib_core as peer-memory client\n");
	return;
none:
	gdrpin_peer_unbind();
}

void gdrpin_peer_exit(void)
{
	if (!gdrpin_peer_handle)
		return;
	/* ib_core releases (or waits for) every registration of ours */
	gdrpin_ib_unregister(gdrpin_peer_handle);
	WRITE_ONCE(gdrpin_peer_handle, NULL);
	atomic64_set(&gdrpin_cnt.peer_client, 0);
	destroy_workqueue(gdrpin_peer_wq);	/* runs pending hand-backs */
	gdrpin_peer_wq = NULL;
	gdrpin_peer_unbind();
}
