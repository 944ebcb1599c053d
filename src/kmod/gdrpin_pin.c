// SPDX-License-Identifier: GPL-2.0
/*
 * gdrpin: pin objects, nv-p2p calls, the free callback and teardown.
 * The lock order and the page-table ownership rules are in gdrpin.h.
 */
#include <linux/hashtable.h>
#include <linux/interval_tree_generic.h>
#include <linux/ktime.h>
#include <linux/module.h>
#include <linux/pci.h>
#include <linux/slab.h>

#include "gdrpin.h"

static DEFINE_SPINLOCK(gdrpin_ticket_lock);
static DEFINE_HASHTABLE(gdrpin_ticket_hash, 10);
static u64 gdrpin_ticket_seq;		/* under gdrpin_ticket_lock */

DECLARE_WAIT_QUEUE_HEAD(gdrpin_live_wq);

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

/*
 * Called with pin->lock held. Returns true if the caller must release the
 * page table and the DMA mappings with the free_* calls (see gdrpin.h).
 */
static bool gdrpin_claim_free(struct gdrpin_range *pin,
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
		gdrpin_free_nv(pin, pt);
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

/* --- create ------------------------------------------------------------- */

static int gdrpin_nv_pin(struct gdrpin_range *pin, u32 flags,
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

static void gdrpin_nv_unpin(struct gdrpin_range *pin,
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

int gdrpin_pin_create(struct gdrpin_ctx *ctx, struct gdrpin_pin_args *args)
{
	struct nvidia_p2p_page_table *pt = NULL;
	struct gdrpin_range *pin;
	u64 start, end, t0;
	bool revoked;
	int ret;

	t0 = ktime_get_ns();
	start = round_down(args->va, GDRPIN_PIN_ALIGN);
	end = round_up(args->va + args->len, GDRPIN_PIN_ALIGN);
	if (end <= start)		/* wrapped past 2^64 */
		return -EINVAL;

	ret = gdrpin_ctx_provider(ctx);
	if (ret)
		return ret;
	if (!gdrpin_quota_reserve(ctx, end - start))
		return -ENOSPC;
	pin = gdrpin_pin_alloc(ctx);
	if (!pin) {
		ret = -ENOMEM;
		goto err_quota;
	}
	pin->va = start;
	pin->len = end - start;
	ret = gdrpin_slot_reserve(ctx, pin);
	if (ret)
		goto err_pin;

	pin->nv_busy = 1;	/* the creator, until get_pages has returned */
	ret = gdrpin_nv_pin(pin, args->flags, &pt);
	if (ret) {
		spin_lock(&pin->lock);
		pin->nv_busy--;
		pin->pt_freed = true;
		spin_unlock(&pin->lock);
		goto err_slot;
	}
	ret = gdrpin_check_pt(pin, pt);
	if (ret) {
		/* Give it back the normal way unless it was revoked already. */
		spin_lock(&pin->lock);
		revoked = pin->cb_fired;
		spin_unlock(&pin->lock);
		if (!revoked) {
			gdrpin_nv_unpin(pin, pt);
			spin_lock(&pin->lock);
			revoked = pin->cb_fired; /* fired during put_pages */
			spin_unlock(&pin->lock);
		}
		if (revoked)
			gdrpin_nv.free_page_table(pt);
		spin_lock(&pin->lock);
		pin->nv_busy--;
		pin->pt_freed = true;
		spin_unlock(&pin->lock);
		goto err_slot;
	}

	/* Publish: ACTIVE and listed together, unless revoked meanwhile. */
	mutex_lock(&ctx->lock);
	spin_lock(&pin->lock);
	pin->nv_busy--;
	revoked = pin->cb_fired;
	if (revoked) {
		pin->pt_freed = true;
	} else {
		pin->pt = pt;
		gdrpin_pin_activate(ctx, pin, t0);
	}
	spin_unlock(&pin->lock);
	mutex_unlock(&ctx->lock);
	if (revoked) {
		/* The memory was freed while we pinned it. */
		gdrpin_nv.free_page_table(pt);
		ret = -ESTALE;
		goto err_slot;
	}

	atomic64_add(pin->len, &ctx->pinned_bytes);
	atomic64_inc(&gdrpin_cnt.pins);
	gdrpin_count_pin_time(pin->pin_ns);

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

err_slot:
	gdrpin_ticket_del(pin);
	gdrpin_slot_drop(ctx, pin);
err_pin:
	gdrpin_pin_put(pin);
err_quota:
	gdrpin_quota_release(ctx, end - start);
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

static bool gdrpin_busy_only_me(struct gdrpin_range *pin)
{
	bool ret;

	spin_lock(&pin->lock);
	ret = pin->nv_busy == 1;
	spin_unlock(&pin->lock);
	return ret;
}

/*
 * Owner-side teardown (unpin, close, process exit) of an unlisted pin.
 * Releases the nv-p2p resources unless the free callback got there first.
 * Does not drop the caller's reference; accounting is the caller's.
 */
void gdrpin_pin_teardown(struct gdrpin_range *pin)
{
	struct nvidia_p2p_page_table *pt = NULL;
	struct nvidia_p2p_dma_mapping *m;
	struct gdrpin_dma_map *w, *tmp;
	struct pci_dev *pdev;
	bool fired, claim;

	if (pin->mode == GDRPIN_MODE_DMABUF) {
		gdrpin_dmabuf_teardown(pin);
		return;
	}
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
		gdrpin_nv_unpin(pin, pin->pt);

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

/* --- pins of other providers (gdrpin_dmabuf.c) ------------------------- */

/*
 * A PINNING pin of @ctx covering [va, va + len) with a slot and a handle;
 * the caller holds the returned reference and the table holds another.
 * Quota is the caller's.
 */
struct gdrpin_range *gdrpin_pin_new(struct gdrpin_ctx *ctx, u64 va, u64 len,
				    u32 mode)
{
	struct gdrpin_range *pin;
	int ret;

	mutex_lock(&ctx->lock);
	ret = ctx->dead ? -EBADF : 0;
	mutex_unlock(&ctx->lock);
	if (ret)
		return ERR_PTR(ret);
	pin = gdrpin_pin_alloc(ctx);
	if (!pin)
		return ERR_PTR(-ENOMEM);
	pin->va = va;
	pin->len = len;
	pin->mode = mode;
	pin->pt_freed = true;	/* no nv-p2p page table, ever */
	ret = gdrpin_slot_reserve(ctx, pin);
	if (ret) {
		gdrpin_pin_put(pin);
		return ERR_PTR(ret);
	}
	return pin;
}

/* Undo gdrpin_pin_new(): free the slot, drop both references. */
void gdrpin_pin_abandon(struct gdrpin_ctx *ctx, struct gdrpin_range *pin)
{
	gdrpin_slot_drop(ctx, pin);
	gdrpin_pin_put(pin);
}

/*
 * Make a pinned PINNING pin ACTIVE and listed, unless it was revoked
 * meanwhile (then false: the caller releases it and abandons it).
 */
bool gdrpin_pin_publish(struct gdrpin_ctx *ctx, struct gdrpin_range *pin,
			u64 t0)
{
	bool revoked;

	mutex_lock(&ctx->lock);
	spin_lock(&pin->lock);
	revoked = pin->cb_fired;
	if (!revoked)
		gdrpin_pin_activate(ctx, pin, t0);
	spin_unlock(&pin->lock);
	mutex_unlock(&ctx->lock);
	if (revoked)
		return false;
	atomic64_add(pin->len, &ctx->pinned_bytes);
	atomic64_inc(&gdrpin_cnt.pins);
	gdrpin_count_pin_time(pin->pin_ns);
	return true;
}

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
