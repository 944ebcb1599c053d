// SPDX-License-Identifier: GPL-2.0
/*
 * gdrpin: the nv-p2p pin mode (GDRPIN_IOC_PIN, and the peer-memory
 * client's pins): nvidia_p2p_get_pages*, put_pages*, tickets, the free
 * callback and the release of page tables and DMA mappings. The generic
 * pin code (gdrpin_pin.c) calls it through gdrpin_nv_ops. The lock order
 * and the page-table ownership rules are in gdrpin.h.
 */
#include <linux/hashtable.h>
#include <linux/ktime.h>
#include <linux/module.h>
#include <linux/pci.h>
#include <linux/slab.h>

#include "gdrpin.h"

static DEFINE_SPINLOCK(gdrpin_ticket_lock);
static DEFINE_HASHTABLE(gdrpin_ticket_hash, 10);
static u64 gdrpin_ticket_seq;		/* under gdrpin_ticket_lock */

/* --- tickets: what the NVIDIA driver gets as callback data ------------- */

static void gdrpin_ticket_add(struct gdrpin_range *pin)
{
	gdrpin_pin_get(pin);
	spin_lock(&gdrpin_ticket_lock);
	pin->ticket = ++gdrpin_ticket_seq;
	hash_add(gdrpin_ticket_hash, &pin->tnode, pin->ticket);
	pin->in_tickets = true;
	spin_unlock(&gdrpin_ticket_lock);
}

static void gdrpin_ticket_del(struct gdrpin_range *pin)
{
	bool had;

	spin_lock(&gdrpin_ticket_lock);
	had = pin->in_tickets;
	if (had) {
		hash_del(&pin->tnode);
		pin->in_tickets = false;
	}
	spin_unlock(&gdrpin_ticket_lock);
	if (had)
		gdrpin_pin_put(pin);
}

static struct gdrpin_range *gdrpin_ticket_lookup(u64 ticket)
{
	struct gdrpin_range *pin, *found = NULL;

	spin_lock(&gdrpin_ticket_lock);
	hash_for_each_possible(gdrpin_ticket_hash, pin, tnode, ticket) {
		if (pin->ticket == ticket) {
			gdrpin_pin_get(pin);
			found = pin;
			break;
		}
	}
	spin_unlock(&gdrpin_ticket_lock);
	return found;
}

/* --- page-table release ------------------------------------------------ */

/* After the callback: free (not unmap) mappings and the page table. */
static void gdrpin_free_nv(struct gdrpin_range *pin,
			   struct nvidia_p2p_page_table *pt)
{
	struct gdrpin_dma_map *w, *tmp;

	lockdep_assert_not_held(&pin->lock);
	mutex_lock(&pin->map_lock);
	list_for_each_entry_safe(w, tmp, &pin->maps, node) {
		if (w->m) {
			gdrpin_nv.free_dma_mapping(w->m);
			w->m = NULL;
		}
		if (w->orphan) {
			list_del(&w->node);
			pci_dev_put(w->pdev);
			kfree(w);
		}
	}
	mutex_unlock(&pin->map_lock);
	if (pt)
		gdrpin_nv.free_page_table(pt);
}

/*
 * Unmap one DMA mapping of a pin we are busy on (the page table cannot be
 * freed under us). A revocation that got in first makes the unmap fail and
 * leaves the mapping to be freed, not unmapped: that is ours to do here, as
 * the mapping is no longer on pin->maps for gdrpin_free_nv() to find.
 */
void gdrpin_pin_dma_unmap(struct gdrpin_range *pin, struct pci_dev *pdev,
			  struct nvidia_p2p_dma_mapping *m)
{
	bool fired;
	int ret;

	gdrpin_assert_nv_callable(pin);
	ret = gdrpin_nv.dma_unmap_pages(pdev, pin->pt, m);
	if (!ret)
		return;
	spin_lock(&pin->lock);
	fired = pin->cb_fired;
	spin_unlock(&pin->lock);
	if (fired)
		gdrpin_nv.free_dma_mapping(m);
	else
		pr_err_ratelimited("gdrpin: dma_unmap_pages: %d\n", ret);
}

/* --- the free callback -------------------------------------------------- */

/*
 * NVIDIA contract: synchronous, runs under NVIDIA's internal locks, must not
 * call put_pages, must release the page table with free_page_table. data is
 * a ticket, never a pointer.
 */
static void gdrpin_free_callback(void *data)
{
	struct nvidia_p2p_page_table *pt = NULL;
	enum gdrpin_pin_state prev;
	struct gdrpin_range *pin;
	bool claim;

	pin = gdrpin_ticket_lookup((unsigned long)data);
	if (!pin)
		return;		/* already torn down: nothing of ours left */
	/* Runs under NVIDIA's locks: never ctx->lock (gdrpin.h). */
	lockdep_assert_not_held(&pin->ctx->lock);

	spin_lock(&pin->lock);
	if (pin->cb_fired) {
		spin_unlock(&pin->lock);
		gdrpin_pin_put(pin);
		return;
	}
	pin->cb_fired = true;
	pin->cb_running = true;
	prev = pin->state;
	if (prev == GDRPIN_PS_ACTIVE)
		pin->state = GDRPIN_PS_REVOKED;
	spin_unlock(&pin->lock);

	if (prev == GDRPIN_PS_ACTIVE) {
		/*
		 * Report it on the fd first: a kapi user's revoke() may hand
		 * the pin back at once (the peer-memory client does, when
		 * ib_core puts the pages from its invalidate callback), and
		 * an unlisted pin is reported nowhere.
		 */
		atomic64_inc(&gdrpin_cnt.revocations);
		gdrpin_status_revoked(pin->ctx, pin);
		/* Stop kapi users before the pages go away. */
		gdrpin_pin_notify(pin, GDRPIN_REVOKE_FREED);
	}

	spin_lock(&pin->lock);
	pin->cb_running = false;
	claim = gdrpin_claim_free(pin, &pt);
	spin_unlock(&pin->lock);
	if (claim)
		gdrpin_free_nv(pin, pt);

	gdrpin_ticket_del(pin);
	gdrpin_pin_put(pin);
}

/* --- pin ---------------------------------------------------------------- */

static int gdrpin_nv_get(struct gdrpin_range *pin, u32 flags,
			 struct nvidia_p2p_page_table **pt)
{
	bool legacy = flags & GDRPIN_PIN_LEGACY;
	int ret;

	gdrpin_assert_nv_callable(pin);
	if (!legacy && !gdrpin_nv.get_pages_persistent) {
		if (flags & GDRPIN_PIN_FORCE_BAR1)
			return -EOPNOTSUPP;
		legacy = true;
	}
	if (!legacy) {
		ret = gdrpin_nv.get_pages_persistent(pin->va, pin->len, pt,
				(flags & GDRPIN_PIN_FORCE_BAR1) ?
				NVIDIA_P2P_FLAGS_FORCE_BAR1_MAPPING :
				NVIDIA_P2P_FLAGS_DEFAULT);
		if (!ret) {
			pin->mode = GDRPIN_MODE_PERSISTENT;
			return 0;
		}
		/* MIG and vGPU refuse persistent pins: fall back. */
		if ((flags & GDRPIN_PIN_FORCE_BAR1) ||
		    (ret != -EINVAL && ret != -ENOTSUPP && ret != -EOPNOTSUPP))
			return ret;
		atomic64_inc(&gdrpin_cnt.legacy_fallbacks);
	}
	gdrpin_ticket_add(pin);
	pin->mode = GDRPIN_MODE_LEGACY;
	ret = gdrpin_nv.get_pages(0, 0, pin->va, pin->len, pt,
				  gdrpin_free_callback,
				  (void *)(unsigned long)pin->ticket);
	if (ret)
		gdrpin_ticket_del(pin);
	return ret;
}

static void gdrpin_nv_put(struct gdrpin_range *pin,
			  struct nvidia_p2p_page_table *pt)
{
	int ret;

	gdrpin_assert_nv_callable(pin);
	if (pin->mode == GDRPIN_MODE_PERSISTENT)
		ret = gdrpin_nv.put_pages_persistent(pin->va, pt, 0);
	else
		ret = gdrpin_nv.put_pages(0, 0, pin->va, pt);
	if (ret)
		pr_err_ratelimited("gdrpin: put_pages va %#llx len %#llx: %d\n",
				   pin->va, pin->len, ret);
}

static int gdrpin_check_pt(struct gdrpin_range *pin,
			   struct nvidia_p2p_page_table *pt)
{
	u32 bytes;

	if (!pt || !GDRPIN_NVP2P_PT_VERSION_COMPATIBLE(pt)) {
		pr_err_ratelimited("gdrpin: page table version %#x unsupported\n",
				   pt ? pt->version : 0);
		return -EPROTO;
	}
	bytes = gdrpin_nvp2p_page_bytes(pt->page_size);
	if (!bytes || (u64)pt->entries * bytes != pin->len || !pt->pages) {
		pr_err_ratelimited("gdrpin: page table %u x %u does not cover %#llx\n",
				   pt->entries, bytes, pin->len);
		return -EPROTO;
	}
	pin->page_size = bytes;
	pin->entries = pt->entries;
	if (pt->gpu_uuid)
		memcpy(pin->uuid, pt->gpu_uuid, sizeof(pin->uuid));
	return 0;
}

/*
 * gdrpin_nv_ops.pin: @req is the GDRPIN_PIN_* flags. The creator is busy
 * on the pin, so no claim takes the page table before the pin is
 * published; on failure nothing is left but the ticket (teardown's).
 */
static int gdrpin_nv_pin_op(struct gdrpin_range *pin, void *req)
{
	struct nvidia_p2p_page_table *pt = NULL;
	u32 flags = *(u32 *)req;
	bool revoked;
	int ret;

	ret = gdrpin_nv_get(pin, flags, &pt);
	if (ret)
		goto fail;
	ret = gdrpin_check_pt(pin, pt);
	if (ret) {
		/* Give it back the normal way unless it was revoked already. */
		spin_lock(&pin->lock);
		revoked = pin->cb_fired;
		spin_unlock(&pin->lock);
		if (!revoked) {
			gdrpin_nv_put(pin, pt);
			spin_lock(&pin->lock);
			revoked = pin->cb_fired; /* fired during put_pages */
			spin_unlock(&pin->lock);
		}
		if (revoked)
			gdrpin_nv.free_page_table(pt);
		goto fail;
	}
	spin_lock(&pin->lock);
	pin->pt = pt;
	spin_unlock(&pin->lock);
	return 0;
fail:
	spin_lock(&pin->lock);
	pin->pt_freed = true;
	spin_unlock(&pin->lock);
	return ret;
}

static bool gdrpin_busy_only_me(struct gdrpin_range *pin)
{
	bool ret;

	spin_lock(&pin->lock);
	ret = pin->nv_busy == 1;
	spin_unlock(&pin->lock);
	return ret;
}

/*
 * gdrpin_nv_ops.teardown: releases the nv-p2p resources unless the free
 * callback got there first.
 */
static void gdrpin_nv_teardown(struct gdrpin_range *pin)
{
	struct nvidia_p2p_page_table *pt = NULL;
	struct nvidia_p2p_dma_mapping *m;
	struct gdrpin_dma_map *w, *tmp;
	struct pci_dev *pdev;
	bool fired, claim;

	spin_lock(&pin->lock);
	if (pin->state != GDRPIN_PS_ACTIVE) {
		spin_unlock(&pin->lock);
		goto out;		/* revoked: the callback path owns it */
	}
	pin->state = GDRPIN_PS_RELEASING;
	pin->nv_busy++;
	spin_unlock(&pin->lock);

	gdrpin_pin_notify(pin, GDRPIN_REVOKE_UNPINNED);
	/* kapi DMA map/unmap calls that entered while ACTIVE */
	wait_event(pin->busy_wq, gdrpin_busy_only_me(pin));

	for (;;) {
		m = NULL;
		pdev = NULL;
		mutex_lock(&pin->map_lock);
		list_for_each_entry(w, &pin->maps, node) {
			if (w->m) {
				m = w->m;
				w->m = NULL;
				pdev = pci_dev_get(w->pdev);
				break;
			}
		}
		mutex_unlock(&pin->map_lock);
		if (!m)
			break;
		gdrpin_pin_dma_unmap(pin, pdev, m);
		pci_dev_put(pdev);
	}
	mutex_lock(&pin->map_lock);
	list_for_each_entry_safe(w, tmp, &pin->maps, node) {
		if (w->orphan) {
			list_del(&w->node);
			pci_dev_put(w->pdev);
			kfree(w);
		}
	}
	mutex_unlock(&pin->map_lock);

	spin_lock(&pin->lock);
	fired = pin->cb_fired;
	spin_unlock(&pin->lock);
	/* pin->pt is stable: only a claim frees it, and we are busy. */
	if (!fired)
		gdrpin_nv_put(pin, pin->pt);

	spin_lock(&pin->lock);
	pin->nv_busy--;
	if (pin->cb_fired) {
		/* put_pages found it unlinked (or was skipped): free it. */
		claim = gdrpin_claim_free(pin, &pt);
	} else {
		claim = false;
		pin->pt = NULL;
		pin->pt_freed = true;
	}
	spin_unlock(&pin->lock);
	wake_up_all(&pin->busy_wq);
	if (claim)
		gdrpin_free_nv(pin, pt);
out:
	/* No callback can start after put_pages returned. */
	gdrpin_ticket_del(pin);
}

static const struct gdrpin_pin_ops gdrpin_nv_ops = {
	.pin = gdrpin_nv_pin_op,
	.teardown = gdrpin_nv_teardown,
	.free_revoked = gdrpin_free_nv,
};

/* The context's reference on the provider, taken by its first pin. */
static int gdrpin_ctx_provider(struct gdrpin_ctx *ctx)
{
	int ret = 0;

	mutex_lock(&ctx->lock);
	if (ctx->dead) {
		ret = -EBADF;
	} else if (!ctx->prov_held) {
		ret = gdrpin_provider_get();
		ctx->prov_held = !ret;
	}
	mutex_unlock(&ctx->lock);
	return ret;
}

/* PIN: pin [va, va + len) rounded out to GDRPIN_PIN_ALIGN through nv-p2p. */
int gdrpin_nv_pin(struct gdrpin_ctx *ctx, struct gdrpin_pin_args *args)
{
	struct gdrpin_range *pin;
	u64 start, end, t0;
	int ret;

	if (!gdrpin_pin_range_ok(args->va, args->len))
		return -EINVAL;
	t0 = ktime_get_ns();
	start = round_down(args->va, GDRPIN_PIN_ALIGN);
	end = round_up(args->va + args->len, GDRPIN_PIN_ALIGN);
	if (end <= start)		/* wrapped past 2^64 */
		return -EINVAL;

	ret = gdrpin_ctx_provider(ctx);
	if (ret)
		return ret;
	pin = gdrpin_pin_new(ctx, &gdrpin_nv_ops, start, end - start);
	if (IS_ERR(pin))
		return PTR_ERR(pin);
	ret = gdrpin_pin_make(pin, &args->flags, t0);
	if (ret)
		return ret;

	args->handle = pin->handle;
	args->pinned_va = pin->va;
	args->pinned_len = pin->len;
	args->slot = pin->slot;
	args->mode = pin->mode;
	args->page_size = pin->page_size;
	args->entries = pin->entries;
	memcpy(args->gpu_uuid, pin->uuid, sizeof(args->gpu_uuid));
	gdrpin_pin_put(pin);		/* the table keeps its reference */
	return 0;
}

/* --- probe: is this GPU memory the provider can pin? -------------------- */

/* The probe's free callback: data is the prober's on-stack flag. */
static void gdrpin_probe_callback(void *data)
{
	WRITE_ONCE(*(bool *)data, true);
}

/*
 * Pin and unpin [va, va + len) of the calling process through nv-p2p,
 * counting nothing: 0 if the provider would pin it. The flag handed to the
 * callback lives on our stack, which is safe because no callback can start
 * after put_pages has returned.
 */
int gdrpin_pin_probe(u64 va, u64 len)
{
	struct nvidia_p2p_page_table *pt = NULL;
	bool fired = false;
	int ret;

	ret = gdrpin_provider_get();
	if (ret)
		return ret;
	ret = gdrpin_nv.get_pages(0, 0, va, len, &pt, gdrpin_probe_callback,
				  &fired);
	if (!ret) {
		gdrpin_nv.put_pages(0, 0, va, pt);
		/* freed meanwhile: put_pages left the page table to us */
		if (READ_ONCE(fired))
			gdrpin_nv.free_page_table(pt);
	}
	gdrpin_provider_put();
	return ret;
}
