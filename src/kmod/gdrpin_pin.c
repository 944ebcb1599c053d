// SPDX-License-Identifier: GPL-2.0
/*
 * gdrpin: pin objects, whatever their mode: slots and handles, quota,
 * publishing, lookup, revocation state, notifiers and teardown. What a mode
 * does (nv-p2p in gdrpin_nv.c, DMA-BUF in gdrpin_dmabuf.c) is reached
 * through the pin's ops, chosen once when the pin is made. The lock order
 * and the page-table ownership rules are in gdrpin.h.
 */
#include <linux/interval_tree_generic.h>
#include <linux/ktime.h>
#include <linux/moduleparam.h>
#include <linux/overflow.h>
#include <linux/pci.h>
#include <linux/slab.h>

#include "gdrpin.h"

DECLARE_WAIT_QUEUE_HEAD(gdrpin_live_wq);

unsigned long gdrpin_max_pin_len = 1UL << 40;
module_param_named(max_pin_len, gdrpin_max_pin_len, ulong, 0644);
MODULE_PARM_DESC(max_pin_len, "Largest single pin in bytes (-EINVAL above)");

/*
 * Listed pins of a context by VA, for in-kernel lookups by address
 * (gdrpin_range_get): an augmented rbtree, O(log n) per lookup instead of a
 * walk over every pin of the process. Under ctx->lock.
 */
#define GDRPIN_IT_START(p)	((p)->va)
#define GDRPIN_IT_LAST(p)	((p)->va + (p)->len - 1)
INTERVAL_TREE_DEFINE(struct gdrpin_range, itnode, u64, it_subtree_last,
		     GDRPIN_IT_START, GDRPIN_IT_LAST, static, gdrpin_it)

void gdrpin_pin_get(struct gdrpin_range *pin)
{
	kref_get(&pin->ref);
}

static void gdrpin_pin_release(struct kref *ref)
{
	struct gdrpin_range *pin = container_of(ref, struct gdrpin_range, ref);
	struct gdrpin_dma_map *w, *tmp;

	WARN_ON(pin->nv_busy);
	WARN_ON(pin->pt && !pin->pt_freed);
	list_for_each_entry_safe(w, tmp, &pin->maps, node) {
		/* A kapi user dropped its range without unmapping. */
		WARN_ON(!w->orphan);
		list_del(&w->node);
		pci_dev_put(w->pdev);
		kfree(w);
	}
	gdrpin_ctx_put(pin->ctx);
	kfree(pin);
	atomic64_dec(&gdrpin_cnt.live_pins);
	wake_up_all(&gdrpin_live_wq);
}

void gdrpin_pin_put(struct gdrpin_range *pin)
{
	kref_put(&pin->ref, gdrpin_pin_release);
}

/* --- page-table release ------------------------------------------------ */

/*
 * Called with pin->lock held. Returns true if the caller must release the
 * page table and the DMA mappings with the free_* calls (see gdrpin.h).
 */
bool gdrpin_claim_free(struct gdrpin_range *pin,
		       struct nvidia_p2p_page_table **pt_p)
{
	lockdep_assert_held(&pin->lock);
	if (!pin->cb_fired || pin->cb_running || pin->nv_busy || pin->pt_freed)
		return false;
	pin->pt_freed = true;
	*pt_p = pin->pt;
	pin->pt = NULL;
	return true;
}

/*
 * Enter an nv-p2p call on an ACTIVE pin (kapi DMA map/unmap). While any
 * thread is inside, the callback defers releasing the page table to it.
 */
bool gdrpin_pin_busy_enter(struct gdrpin_range *pin)
{
	bool ok;

	spin_lock(&pin->lock);
	ok = pin->state == GDRPIN_PS_ACTIVE && !pin->cb_fired;
	if (ok)
		pin->nv_busy++;
	spin_unlock(&pin->lock);
	return ok;
}

void gdrpin_pin_busy_exit(struct gdrpin_range *pin)
{
	struct nvidia_p2p_page_table *pt = NULL;
	bool claim;

	spin_lock(&pin->lock);
	pin->nv_busy--;
	claim = gdrpin_claim_free(pin, &pt);
	spin_unlock(&pin->lock);
	wake_up_all(&pin->busy_wq);
	if (claim)
		pin->ops->free_revoked(pin, pt);
}

/* --- notifiers ---------------------------------------------------------- */

void gdrpin_pin_notify(struct gdrpin_range *pin, int reason)
{
	struct gdrpin_notifier *n, *tmp;

	mutex_lock(&pin->notify_lock);
	if (!pin->notified) {
		pin->notified = true;
		list_for_each_entry_safe(n, tmp, &pin->notifiers, node)
			n->revoke(n, pin, reason);
	}
	mutex_unlock(&pin->notify_lock);
}

/* --- create ------------------------------------------------------------- */

/* [va, va + len) is a range a PIN may ask for (-EINVAL otherwise). */
bool gdrpin_pin_range_ok(u64 va, u64 len)
{
	u64 end;

	return len && !check_add_overflow(va, len, &end) &&
	       end <= TASK_SIZE_MAX && len <= READ_ONCE(gdrpin_max_pin_len);
}

static struct gdrpin_range *gdrpin_pin_alloc(struct gdrpin_ctx *ctx)
{
	struct gdrpin_range *pin = kzalloc(sizeof(*pin), GFP_KERNEL);

	if (!pin)
		return NULL;
	kref_init(&pin->ref);
	gdrpin_ctx_get(ctx);
	pin->ctx = ctx;
	spin_lock_init(&pin->lock);
	init_waitqueue_head(&pin->busy_wq);
	mutex_init(&pin->map_lock);
	INIT_LIST_HEAD(&pin->maps);
	mutex_init(&pin->notify_lock);
	INIT_LIST_HEAD(&pin->notifiers);
	INIT_LIST_HEAD(&pin->revoked_node);
	INIT_LIST_HEAD(&pin->tmp_node);
	pin->state = GDRPIN_PS_PINNING;
	atomic64_inc(&gdrpin_cnt.live_pins);
	return pin;
}

/* Reserve a slot and a handle for @pin (state PINNING, not yet listed). */
static int gdrpin_slot_reserve(struct gdrpin_ctx *ctx, struct gdrpin_range *pin)
{
	u32 slot;
	int ret;

	mutex_lock(&ctx->lock);
	ret = xa_alloc(&ctx->pins, &slot, pin, XA_LIMIT(0, ctx->nslots - 1),
		       GFP_KERNEL);
	if (!ret) {
		gdrpin_pin_get(pin);	/* the table's reference */
		pin->slot = slot;
		pin->gen = ++ctx->seq;
		pin->handle = (pin->gen << GDRPIN_HANDLE_SLOT_BITS) | slot;
		ctx->npins++;
	}
	mutex_unlock(&ctx->lock);
	return ret == -EBUSY ? -ENOBUFS : ret;
}

static void gdrpin_slot_drop(struct gdrpin_ctx *ctx, struct gdrpin_range *pin)
{
	mutex_lock(&ctx->lock);
	xa_erase(&ctx->pins, pin->slot);
	ctx->npins--;
	mutex_unlock(&ctx->lock);
	gdrpin_pin_put(pin);
}

/*
 * A PINNING pin of @ctx in mode @ops covering [va, va + len), its bytes
 * charged to the quota, with a slot and a handle; the caller holds the
 * returned reference and the table holds another. gdrpin_pin_make() goes
 * next.
 */
struct gdrpin_range *gdrpin_pin_new(struct gdrpin_ctx *ctx,
				    const struct gdrpin_pin_ops *ops,
				    u64 va, u64 len)
{
	struct gdrpin_range *pin;
	int ret;

	if (!gdrpin_quota_reserve(ctx, len))
		return ERR_PTR(-ENOSPC);
	mutex_lock(&ctx->lock);
	ret = ctx->dead ? -EBADF : 0;
	mutex_unlock(&ctx->lock);
	if (ret)
		goto err_quota;
	pin = gdrpin_pin_alloc(ctx);
	if (!pin) {
		ret = -ENOMEM;
		goto err_quota;
	}
	pin->ops = ops;
	pin->va = va;
	pin->len = len;
	ret = gdrpin_slot_reserve(ctx, pin);
	if (ret) {
		gdrpin_pin_put(pin);
		goto err_quota;
	}
	return pin;

err_quota:
	gdrpin_quota_release(ctx, len);
	return ERR_PTR(ret);
}

/* The pin is made: ACTIVE, in the lookup tree, on the status page. */
static void gdrpin_pin_activate(struct gdrpin_ctx *ctx, struct gdrpin_range *pin,
				u64 t0)
{
	lockdep_assert_held(&ctx->lock);
	lockdep_assert_held(&pin->lock);
	pin->state = GDRPIN_PS_ACTIVE;
	pin->pin_ns = ktime_get_ns() - t0;
	gdrpin_it_insert(pin, &ctx->itree);
	spin_lock(&ctx->ev_lock);
	pin->listed = true;
	gdrpin_status_set(ctx, pin->slot, pin->gen, GDRPIN_SLOT_ACTIVE);
	spin_unlock(&ctx->ev_lock);
}

/*
 * Pin @pin (from gdrpin_pin_new()) through its mode with the mode's @req,
 * then make it ACTIVE and listed, unless it was revoked meanwhile. On
 * failure everything is undone, the caller's reference included.
 */
int gdrpin_pin_make(struct gdrpin_range *pin, void *req, u64 t0)
{
	struct nvidia_p2p_page_table *pt = NULL;
	struct gdrpin_ctx *ctx = pin->ctx;
	bool revoked, claim = false;
	int ret;

	pin->nv_busy = 1;	/* the creator, until the pin is published */
	ret = pin->ops->pin(pin, req);
	if (ret) {
		spin_lock(&pin->lock);
		pin->nv_busy--;
		spin_unlock(&pin->lock);
		goto err;
	}

	/* Publish: ACTIVE and listed together, unless revoked meanwhile. */
	mutex_lock(&ctx->lock);
	spin_lock(&pin->lock);
	pin->nv_busy--;
	revoked = pin->cb_fired;
	if (revoked)
		claim = gdrpin_claim_free(pin, &pt);
	else
		gdrpin_pin_activate(ctx, pin, t0);
	spin_unlock(&pin->lock);
	mutex_unlock(&ctx->lock);
	if (revoked) {
		/* The memory was freed while we pinned it. */
		if (claim)
			pin->ops->free_revoked(pin, pt);
		ret = -ESTALE;
		goto err;
	}

	atomic64_add(pin->len, &ctx->pinned_bytes);
	atomic64_inc(&gdrpin_cnt.pins);
	gdrpin_count_pin_time(pin->pin_ns);
	return 0;

err:
	/* Not ACTIVE: the mode only drops what it holds. */
	pin->ops->teardown(pin);
	gdrpin_slot_drop(ctx, pin);
	gdrpin_quota_release(ctx, pin->len);
	gdrpin_pin_put(pin);
	return ret;
}

/* --- lookup, unlist, teardown ------------------------------------------ */

/* Find a listed pin by handle; ctx->lock held. No reference taken. */
struct gdrpin_range *gdrpin_pin_lookup(struct gdrpin_ctx *ctx, u64 handle)
{
	struct gdrpin_range *pin;

	lockdep_assert_held(&ctx->lock);
	if (GDRPIN_HANDLE_SLOT(handle) >= ctx->nslots)
		return NULL;
	pin = xa_load(&ctx->pins, GDRPIN_HANDLE_SLOT(handle));
	if (!pin || !pin->listed || pin->handle != handle)
		return NULL;
	return pin;
}

/*
 * Remove @pin from its fd: free its slot and drop it from the revoked list.
 * ctx->lock held; the caller inherits the table's reference.
 */
void gdrpin_pin_unlist(struct gdrpin_ctx *ctx, struct gdrpin_range *pin)
{
	lockdep_assert_held(&ctx->lock);
	spin_lock(&ctx->ev_lock);
	pin->listed = false;
	if (!list_empty(&pin->revoked_node)) {
		list_del_init(&pin->revoked_node);
		ctx->nrevoked--;
	}
	gdrpin_status_set(ctx, pin->slot, pin->gen, GDRPIN_SLOT_FREE);
	spin_unlock(&ctx->ev_lock);
	xa_erase(&ctx->pins, pin->slot);
	gdrpin_it_remove(pin, &ctx->itree);
	ctx->npins--;
}

/*
 * An ACTIVE listed pin of @ctx that covers [va, end), with a reference
 * for the caller; NULL if there is none. ctx->lock held.
 */
struct gdrpin_range *gdrpin_pin_get_cover(struct gdrpin_ctx *ctx, u64 va,
					  u64 end)
{
	struct gdrpin_range *pin;
	bool ok;

	lockdep_assert_held(&ctx->lock);
	for (pin = gdrpin_it_iter_first(&ctx->itree, va, end - 1); pin;
	     pin = gdrpin_it_iter_next(pin, va, end - 1)) {
		if (va < pin->va || end > pin->va + pin->len)
			continue;	/* overlaps, does not cover */
		spin_lock(&pin->lock);
		ok = pin->state == GDRPIN_PS_ACTIVE && !pin->cb_fired;
		if (ok)
			gdrpin_pin_get(pin);
		spin_unlock(&pin->lock);
		if (ok)
			return pin;
	}
	return NULL;
}

u32 gdrpin_pin_user_state(struct gdrpin_range *pin)
{
	u32 state;

	spin_lock(&pin->lock);
	state = pin->cb_fired ? GDRPIN_SLOT_REVOKED : GDRPIN_SLOT_ACTIVE;
	spin_unlock(&pin->lock);
	return state;
}

/*
 * Owner-side teardown (unpin, close, process exit) of an unlisted pin:
 * its mode releases what it holds unless a revocation got there first.
 * Does not drop the caller's reference; accounting is the caller's.
 */
void gdrpin_pin_teardown(struct gdrpin_range *pin)
{
	pin->ops->teardown(pin);
}

/* --- revocation by the mode (DMA-BUF move_notify) --------------------- */

/*
 * The provider took the memory away (dma-buf move_notify): mark the pin
 * revoked, stop kapi users, report it on the fd. Takes no ctx->lock.
 * True if this call revoked it.
 */
bool gdrpin_pin_revoke(struct gdrpin_range *pin)
{
	enum gdrpin_pin_state prev;

	spin_lock(&pin->lock);
	if (pin->cb_fired) {
		spin_unlock(&pin->lock);
		return false;
	}
	pin->cb_fired = true;
	prev = pin->state;
	if (prev == GDRPIN_PS_ACTIVE)
		pin->state = GDRPIN_PS_REVOKED;
	spin_unlock(&pin->lock);
	if (prev != GDRPIN_PS_ACTIVE)
		return false;
	gdrpin_pin_notify(pin, GDRPIN_REVOKE_FREED);
	atomic64_inc(&gdrpin_cnt.revocations);
	gdrpin_status_revoked(pin->ctx, pin);
	return true;
}
