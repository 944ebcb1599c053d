// SPDX-License-Identifier: GPL-2.0
/*
 * gdrpin: the per-fd context (struct gdrpin_ctx, gdrpin.h).
 *
 * A context is made by open, bound to the opener (tgid and mm) and kref'd:
 * the file and every pin hold a reference. Its pins are released when the
 * opener's mm goes (mmu_notifier release) or the file is released,
 * whichever comes first. Kernel clients (gdrpin_peer.c) pin on the context
 * of the calling process through the functions at the end of this file.
 */
#include <linux/eventfd.h>
#include <linux/fs.h>
#include <linux/mm.h>
#include <linux/overflow.h>
#include <linux/sched/mm.h>
#include <linux/slab.h>

#include "gdrpin.h"

DEFINE_MUTEX(gdrpin_ctx_list_lock);
LIST_HEAD(gdrpin_ctx_list);

/* ctx->release: the last reference (the file's or a pin's) is gone. */
static void gdrpin_ctx_free(struct kref *ref)
{
	struct gdrpin_ctx *ctx = container_of(ref, struct gdrpin_ctx, ref);

	WARN_ON(!xa_empty(&ctx->pins));
	xa_destroy(&ctx->pins);
	if (ctx->prov_held)
		gdrpin_provider_put();
	if (ctx->evfd)
		eventfd_ctx_put(ctx->evfd);
	gdrpin_status_free(ctx);
	gdrpin_user_close(ctx->user);
	mmdrop(ctx->mm);
	put_pid(ctx->tgid);
	kfree(ctx);
	atomic_dec(&gdrpin_live_ctx);
	wake_up_all(&gdrpin_live_wq);
}

/* The caller is the process that opened the context (tgid and mm). */
bool gdrpin_ctx_is_owner(struct gdrpin_ctx *ctx)
{
	return task_tgid(current) == ctx->tgid && current->mm == ctx->mm;
}

/*
 * Release a pin already taken off ctx's table: unpin it, give its bytes
 * back to the fd's and the global accounting, drop the table's reference.
 * @unpin: count it as an unpin (not for a pin undone inside PIN).
 */
void gdrpin_ctx_pin_release(struct gdrpin_ctx *ctx, struct gdrpin_range *pin,
			    bool unpin)
{
	gdrpin_pin_teardown(pin);
	atomic64_sub(pin->len, &ctx->pinned_bytes);
	gdrpin_quota_release(ctx, pin->len);
	if (unpin)
		atomic64_inc(&gdrpin_cnt.unpins);
	gdrpin_pin_put(pin);
}

/*
 * Take the listed pin @handle off @ctx and release it; -ENOENT if there is
 * none. @state_p (if not NULL): its GDRPIN_SLOT_* state before.
 */
int gdrpin_ctx_unpin(struct gdrpin_ctx *ctx, u64 handle, bool unpin,
		     u32 *state_p)
{
	struct gdrpin_range *pin;

	lockdep_assert_not_held(&ctx->lock);
	mutex_lock(&ctx->lock);
	pin = gdrpin_pin_lookup(ctx, handle);
	if (pin)
		gdrpin_pin_unlist(ctx, pin);
	mutex_unlock(&ctx->lock);
	if (!pin)
		return -ENOENT;
	if (state_p)
		*state_p = gdrpin_pin_user_state(pin);
	gdrpin_ctx_pin_release(ctx, pin, unpin);
	return 0;
}

/* Drop every pin of @ctx; ctx->dead stops new ones. */
static void gdrpin_ctx_drain(struct gdrpin_ctx *ctx)
{
	struct gdrpin_range *pin, *tmp;
	unsigned long slot;
	LIST_HEAD(list);

	lockdep_assert_not_held(&ctx->lock);
	mutex_lock(&ctx->lock);
	ctx->dead = true;
	xa_for_each(&ctx->pins, slot, pin) {
		if (!pin->listed)
			continue;	/* cannot happen: no ioctl in flight */
		gdrpin_pin_unlist(ctx, pin);
		list_add_tail(&pin->tmp_node, &list);
	}
	mutex_unlock(&ctx->lock);

	list_for_each_entry_safe(pin, tmp, &list, tmp_node) {
		list_del_init(&pin->tmp_node);
		gdrpin_ctx_pin_release(ctx, pin, true);
	}
}

/*
 * The opener's address space is going away (exit or exec of the opener;
 * also called by mmu_notifier_unregister() if that has not happened yet).
 * Pins belong to the opener, so they go now, even while a forked child
 * still holds the fd.
 */
static void gdrpin_mm_release(struct mmu_notifier *mn, struct mm_struct *mm)
{
	gdrpin_ctx_drain(container_of(mn, struct gdrpin_ctx, mn));
}

static const struct mmu_notifier_ops gdrpin_mn_ops = {
	.release = gdrpin_mm_release,
};

/* open of /dev/gdrpin: a context for the calling process. */
int gdrpin_ctx_open(struct inode *inode, struct file *file)
{
	struct gdrpin_ctx *ctx;
	int ret;

	if (!current->mm)
		return -EINVAL;
	ctx = kzalloc(sizeof(*ctx), GFP_KERNEL_ACCOUNT);
	if (!ctx)
		return -ENOMEM;
	ctx->user = gdrpin_user_open();
	if (IS_ERR(ctx->user)) {
		ret = PTR_ERR(ctx->user);
		kfree(ctx);
		return ret;
	}
	kref_init(&ctx->ref);
	ctx->release = gdrpin_ctx_free;
	mutex_init(&ctx->lock);
	xa_init_flags(&ctx->pins, XA_FLAGS_ALLOC);
	ctx->itree = RB_ROOT_CACHED;
	spin_lock_init(&ctx->ev_lock);
	INIT_LIST_HEAD(&ctx->revoked);
	init_waitqueue_head(&ctx->wq);
	atomic64_set(&ctx->pinned_bytes, 0);
	ret = gdrpin_status_alloc(ctx);
	if (ret)
		goto err_user;
	ctx->mn.ops = &gdrpin_mn_ops;
	ret = mmu_notifier_register(&ctx->mn, current->mm);
	if (ret)
		goto err_status;
	ctx->tgid = get_pid(task_tgid(current));
	mmgrab(current->mm);
	ctx->mm = current->mm;
	atomic_inc(&gdrpin_live_ctx);

	mutex_lock(&gdrpin_ctx_list_lock);
	list_add_tail(&ctx->node, &gdrpin_ctx_list);
	mutex_unlock(&gdrpin_ctx_list_lock);

	file->private_data = ctx;
	return nonseekable_open(inode, file);

err_status:
	gdrpin_status_free(ctx);
err_user:
	gdrpin_user_close(ctx->user);
	kfree(ctx);
	return ret;
}

/* release of the file: its pins go, the context when its last pin has. */
int gdrpin_ctx_close(struct inode *inode, struct file *file)
{
	struct gdrpin_ctx *ctx = file->private_data;

	mutex_lock(&gdrpin_ctx_list_lock);
	list_del_init(&ctx->node);
	mutex_unlock(&gdrpin_ctx_list_lock);

	/* Drains the pins through ->release unless the mm already did. */
	mmu_notifier_unregister(&ctx->mn, ctx->mm);
	gdrpin_ctx_drain(ctx);	/* no-op after ->release; kept for clarity */
	gdrpin_status_set_eventfd(ctx, -1);
	gdrpin_ctx_put(ctx);
	return 0;
}

/* --- pins made for kernel clients (gdrpin_peer.c) ---------------------- */

/*
 * A live context of the calling process (the opener itself, same mm), with
 * a reference; NULL if the process has no open /dev/gdrpin. Kernel clients
 * pin only for processes that opened gdrpin, so its permissions, limits and
 * status page apply to them.
 */
struct gdrpin_ctx *gdrpin_ctx_of_current(void)
{
	struct gdrpin_ctx *ctx, *found = NULL;

	mutex_lock(&gdrpin_ctx_list_lock);
	list_for_each_entry(ctx, &gdrpin_ctx_list, node) {
		if (gdrpin_ctx_is_owner(ctx) && !READ_ONCE(ctx->dead)) {
			gdrpin_ctx_get(ctx);
			found = ctx;
			break;
		}
	}
	mutex_unlock(&gdrpin_ctx_list_lock);
	return found;
}

/*
 * Pin [va, va + len) on @ctx for a kernel client through @pin_fn, a pin
 * mode's PIN (the client's choice: modes sit below the context), as PIN
 * would (slot, quota, statistics, status page); the pin comes with a
 * reference of its own. The caller must be the context's owner.
 */
int gdrpin_ctx_pin_kernel(struct gdrpin_ctx *ctx,
			  int (*pin_fn)(struct gdrpin_ctx *ctx,
					struct gdrpin_pin_args *args),
			  u64 va, u64 len, u32 flags,
			  struct gdrpin_range **pin_p)
{
	struct gdrpin_pin_args a = { .size = sizeof(a), .va = va, .len = len,
				     .flags = flags };
	struct gdrpin_range *pin;
	int ret;

	lockdep_assert_not_held(&ctx->lock);
	if (!gdrpin_ctx_is_owner(ctx))
		return -EACCES;
	ret = pin_fn(ctx, &a);
	if (ret) {
		gdrpin_count_failure(ret);
		return ret;
	}
	mutex_lock(&ctx->lock);
	pin = gdrpin_pin_lookup(ctx, a.handle);
	if (pin)
		gdrpin_pin_get(pin);
	mutex_unlock(&ctx->lock);
	/* Unlisted meanwhile (fd closed, GET_REVOKED): already released. */
	if (!pin)
		return -ESTALE;
	*pin_p = pin;
	return 0;
}

/* Undo gdrpin_ctx_pin_kernel() unless the fd released the pin already. */
void gdrpin_ctx_unpin_kernel(struct gdrpin_ctx *ctx, struct gdrpin_range *pin)
{
	bool mine;

	lockdep_assert_not_held(&ctx->lock);
	mutex_lock(&ctx->lock);
	mine = pin->listed;
	if (mine)
		gdrpin_pin_unlist(ctx, pin);
	mutex_unlock(&ctx->lock);
	if (mine)
		gdrpin_ctx_pin_release(ctx, pin, true);
	gdrpin_pin_put(pin);
}
