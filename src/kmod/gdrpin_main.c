// SPDX-License-Identifier: GPL-2.0
/*
 * gdrpin: pin GPU memory for peer devices on behalf of a process.
 *
 * This file: module parameters, the misc device, per-fd contexts, ioctl
 * dispatch and argument validation. Every file operation first checks that
 * the caller is the process (tgid and mm) that opened the fd: a forked child
 * or a process that received the fd over SCM_RIGHTS gets -EACCES.
 */
#include <linux/compat.h>
#include <linux/eventfd.h>
#include <linux/fs.h>
#include <linux/miscdevice.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/overflow.h>
#include <linux/poll.h>
#include <linux/sched/mm.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "gdrpin.h"

unsigned long gdrpin_max_pinned_bytes;
module_param_named(max_pinned_bytes, gdrpin_max_pinned_bytes, ulong, 0644);
MODULE_PARM_DESC(max_pinned_bytes,
		 "Quota on bytes pinned by all fds; 0 = unlimited (-ENOSPC)");

unsigned long gdrpin_max_user_pinned_bytes;
module_param_named(max_user_pinned_bytes, gdrpin_max_user_pinned_bytes, ulong,
		   0644);
MODULE_PARM_DESC(max_user_pinned_bytes,
		 "Quota on bytes pinned by the fds of one uid; 0 = unlimited (-ENOSPC)");

unsigned int gdrpin_max_user_contexts = 256;
module_param_named(max_user_contexts, gdrpin_max_user_contexts, uint, 0644);
MODULE_PARM_DESC(max_user_contexts,
		 "Open fds (each with its status area) per uid; 0 = unlimited (-EMFILE)");

unsigned long gdrpin_max_pin_len = 1UL << 40;
module_param_named(max_pin_len, gdrpin_max_pin_len, ulong, 0644);
MODULE_PARM_DESC(max_pin_len, "Largest single pin in bytes (-EINVAL above)");

unsigned int gdrpin_status_pages = 16;
module_param_named(status_pages, gdrpin_status_pages, uint, 0444);
MODULE_PARM_DESC(status_pages, "Pages of status area per fd (slots)");

DEFINE_MUTEX(gdrpin_ctx_list_lock);
LIST_HEAD(gdrpin_ctx_list);
atomic_t gdrpin_live_ctx = ATOMIC_INIT(0);

void gdrpin_ctx_get(struct gdrpin_ctx *ctx)
{
	kref_get(&ctx->ref);
}

static void gdrpin_ctx_release(struct kref *ref)
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

void gdrpin_ctx_put(struct gdrpin_ctx *ctx)
{
	kref_put(&ctx->ref, gdrpin_ctx_release);
}

static bool gdrpin_is_owner(struct gdrpin_ctx *ctx)
{
	return task_tgid(current) == ctx->tgid && current->mm == ctx->mm;
}

/*
 * Release a pin already taken off ctx's table: unpin it, give its bytes
 * back to the fd's and the global accounting, drop the table's reference.
 * @unpin: count it as an unpin (not for a pin undone inside PIN).
 */
static void gdrpin_pin_release(struct gdrpin_ctx *ctx,
			       struct gdrpin_range *pin, bool unpin)
{
	gdrpin_pin_teardown(pin);
	atomic64_sub(pin->len, &ctx->pinned_bytes);
	gdrpin_quota_release(ctx, pin->len);
	if (unpin)
		atomic64_inc(&gdrpin_cnt.unpins);
	gdrpin_pin_put(pin);
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
		gdrpin_pin_release(ctx, pin, true);
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

static int gdrpin_open(struct inode *inode, struct file *file)
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

static int gdrpin_release(struct inode *inode, struct file *file)
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
		if (gdrpin_is_owner(ctx) && !READ_ONCE(ctx->dead)) {
			gdrpin_ctx_get(ctx);
			found = ctx;
			break;
		}
	}
	mutex_unlock(&gdrpin_ctx_list_lock);
	return found;
}

/*
 * Pin [va, va + len) on @ctx for a kernel client, as PIN would (slot,
 * quota, statistics, status page); the pin comes with a reference of its
 * own. The caller must be the context's owner.
 */
int gdrpin_ctx_pin_kernel(struct gdrpin_ctx *ctx, u64 va, u64 len, u32 flags,
			  struct gdrpin_range **pin_p)
{
	struct gdrpin_pin_args a = { .size = sizeof(a), .va = va, .len = len,
				     .flags = flags };
	struct gdrpin_range *pin;
	u64 end;
	int ret;

	lockdep_assert_not_held(&ctx->lock);
	if (!gdrpin_is_owner(ctx))
		return -EACCES;
	if (!len || check_add_overflow(va, len, &end) || end > TASK_SIZE_MAX ||
	    len > READ_ONCE(gdrpin_max_pin_len)) {
		ret = -EINVAL;
		goto fail;
	}
	ret = gdrpin_pin_create(ctx, &a);
	if (ret)
		goto fail;
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
fail:
	gdrpin_count_failure(ret);
	return ret;
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
		gdrpin_pin_release(ctx, pin, true);
	gdrpin_pin_put(pin);
}

/* --- ioctls ------------------------------------------------------------- */

static bool gdrpin_zero(const u64 *p, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

static long gdrpin_ioc_version(struct gdrpin_ctx *ctx, void __user *uarg)
{
	struct gdrpin_version_args a;

	if (copy_from_user(&a, uarg, sizeof(a)))
		return -EFAULT;
	if (a.size != sizeof(a) || a.flags ||
	    !gdrpin_zero(a.reserved, ARRAY_SIZE(a.reserved)))
		return -EINVAL;
	a.abi_major = GDRPIN_ABI_MAJOR;
	a.abi_minor = GDRPIN_ABI_MINOR;
	a.caps = GDRPIN_CAP_POLL | GDRPIN_CAP_EVENTFD | GDRPIN_CAP_STATUS_PAGE |
		 gdrpin_provider_caps() | GDRPIN_CAP_DMABUF;
	if (IS_ENABLED(CONFIG_DMABUF_MOVE_NOTIFY))
		a.caps |= GDRPIN_CAP_DMABUF_MOVE;
	a.status_header_size = sizeof(struct gdrpin_status_header);
	a.status_slot_size = sizeof(struct gdrpin_status_slot);
	a.status_nslots = ctx->nslots;
	a.status_map_size = ctx->status_size;
	a.pin_align = GDRPIN_PIN_ALIGN;
	return copy_to_user(uarg, &a, sizeof(a)) ? -EFAULT : 0;
}

/* A pin whose handle could not be copied out: the caller cannot know it. */
static long gdrpin_pin_undo(struct gdrpin_ctx *ctx, u64 handle)
{
	struct gdrpin_range *pin;

	mutex_lock(&ctx->lock);
	pin = gdrpin_pin_lookup(ctx, handle);
	if (pin)
		gdrpin_pin_unlist(ctx, pin);
	mutex_unlock(&ctx->lock);
	if (pin)
		gdrpin_pin_release(ctx, pin, false);
	return -EFAULT;
}

static long gdrpin_ioc_pin(struct gdrpin_ctx *ctx, void __user *uarg)
{
	struct gdrpin_pin_args a;
	u64 end;
	int ret;

	if (copy_from_user(&a, uarg, sizeof(a)))
		return -EFAULT;
	if (a.size != sizeof(a) || (a.flags & ~GDRPIN_PIN_FLAGS_ALL) ||
	    ((a.flags & GDRPIN_PIN_LEGACY) && (a.flags & GDRPIN_PIN_FORCE_BAR1)) ||
	    !gdrpin_zero(a.reserved, ARRAY_SIZE(a.reserved)))
		return -EINVAL;
	if (!a.len || check_add_overflow(a.va, a.len, &end) ||
	    end > TASK_SIZE_MAX || a.len > READ_ONCE(gdrpin_max_pin_len)) {
		ret = -EINVAL;
		goto fail;
	}
	ret = gdrpin_pin_create(ctx, &a);
	if (ret)
		goto fail;
	if (!copy_to_user(uarg, &a, sizeof(a)))
		return 0;

	return gdrpin_pin_undo(ctx, a.handle);
fail:
	gdrpin_count_failure(ret);
	return ret;
}

static long gdrpin_ioc_pin_dmabuf(struct gdrpin_ctx *ctx, void __user *uarg)
{
	struct gdrpin_pin_dmabuf_args a;
	int ret;

	if (copy_from_user(&a, uarg, sizeof(a)))
		return -EFAULT;
	if (a.size != sizeof(a) || a.flags || a.pad || a.pad2 ||
	    !gdrpin_zero(a.reserved, ARRAY_SIZE(a.reserved)) ||
	    !PAGE_ALIGNED(a.va)) {
		ret = -EINVAL;
		goto fail;
	}
	ret = gdrpin_dmabuf_pin(ctx, &a);
	if (ret)
		goto fail;
	if (!copy_to_user(uarg, &a, sizeof(a)))
		return 0;

	return gdrpin_pin_undo(ctx, a.handle);
fail:
	gdrpin_count_failure(ret);
	return ret;
}

static long gdrpin_ioc_unpin(struct gdrpin_ctx *ctx, void __user *uarg)
{
	struct gdrpin_unpin_args a;
	struct gdrpin_range *pin;

	if (copy_from_user(&a, uarg, sizeof(a)))
		return -EFAULT;
	if (a.size != sizeof(a) || a.flags || a.pad)
		return -EINVAL;
	mutex_lock(&ctx->lock);
	pin = gdrpin_pin_lookup(ctx, a.handle);
	if (pin)
		gdrpin_pin_unlist(ctx, pin);
	mutex_unlock(&ctx->lock);
	if (!pin)
		return -ENOENT;

	a.state = gdrpin_pin_user_state(pin);
	gdrpin_pin_release(ctx, pin, true);
	return copy_to_user(uarg, &a, sizeof(a)) ? -EFAULT : 0;
}

static long gdrpin_ioc_query(struct gdrpin_ctx *ctx, void __user *uarg)
{
	struct gdrpin_query_args a;
	struct gdrpin_range *pin;

	if (copy_from_user(&a, uarg, sizeof(a)))
		return -EFAULT;
	if (a.size != sizeof(a) || a.flags ||
	    !gdrpin_zero(a.reserved, ARRAY_SIZE(a.reserved)))
		return -EINVAL;
	mutex_lock(&ctx->lock);
	pin = gdrpin_pin_lookup(ctx, a.handle);
	if (pin) {
		a.pinned_va = pin->va;
		a.pinned_len = pin->len;
		a.state = gdrpin_pin_user_state(pin);
		a.mode = pin->mode;
		a.page_size = pin->page_size;
		a.entries = pin->entries;
		a.pin_ns = pin->pin_ns;
	}
	mutex_unlock(&ctx->lock);
	if (!pin)
		return -ENOENT;
	return copy_to_user(uarg, &a, sizeof(a)) ? -EFAULT : 0;
}

static long gdrpin_ioc_get_revoked(struct gdrpin_ctx *ctx, void __user *uarg)
{
	struct gdrpin_get_revoked_args a;
	struct gdrpin_range *pin, *tmp;
	u64 __user *out;
	u64 *handles = NULL;
	LIST_HEAD(list);
	u32 n = 0, i;
	int ret = 0;

	if (copy_from_user(&a, uarg, sizeof(a)))
		return -EFAULT;
	if (a.size != sizeof(a) || a.flags || a.count ||
	    a.max_handles > ctx->nslots || (a.max_handles && !a.handles_ptr))
		return -EINVAL;
	out = u64_to_user_ptr(a.handles_ptr);
	if (a.max_handles) {
		handles = kvmalloc_array(a.max_handles, sizeof(u64), GFP_KERNEL);
		if (!handles)
			return -ENOMEM;
	}
	/*
	 * Both copies to user space come before any pin is released: on
	 * -EFAULT every revoked handle stays pending for the next call.
	 * Holding ctx->lock keeps the first n entries of ctx->revoked in
	 * place (the callback only appends; only ctx->lock holders remove).
	 */
	mutex_lock(&ctx->lock);
	spin_lock(&ctx->ev_lock);
	list_for_each_entry(pin, &ctx->revoked, revoked_node) {
		if (n == a.max_handles)
			break;
		handles[n++] = pin->handle;
	}
	a.pending = ctx->nrevoked - n;
	spin_unlock(&ctx->ev_lock);
	a.count = n;
	if ((n && copy_to_user(out, handles, n * sizeof(u64))) ||
	    copy_to_user(uarg, &a, sizeof(a))) {
		ret = -EFAULT;
		n = 0;
	}
	for (i = 0; i < n; i++) {
		spin_lock(&ctx->ev_lock);
		pin = list_first_entry(&ctx->revoked, struct gdrpin_range,
				       revoked_node);
		spin_unlock(&ctx->ev_lock);
		WARN_ON_ONCE(pin->handle != handles[i]);
		gdrpin_pin_unlist(ctx, pin);
		list_add_tail(&pin->tmp_node, &list);
	}
	mutex_unlock(&ctx->lock);
	kvfree(handles);

	list_for_each_entry_safe(pin, tmp, &list, tmp_node) {
		list_del_init(&pin->tmp_node);
		gdrpin_pin_release(ctx, pin, true);
	}
	return ret;
}

static long gdrpin_ioc_set_eventfd(struct gdrpin_ctx *ctx, void __user *uarg)
{
	struct gdrpin_set_eventfd_args a;

	if (copy_from_user(&a, uarg, sizeof(a)))
		return -EFAULT;
	if (a.size != sizeof(a) || a.flags || a.pad)
		return -EINVAL;
	return gdrpin_status_set_eventfd(ctx, a.fd);
}

static long gdrpin_ioc_stats(struct gdrpin_ctx *ctx, void __user *uarg)
{
	struct gdrpin_stats_args a;

	if (copy_from_user(&a, uarg, sizeof(a)))
		return -EFAULT;
	if (a.size != sizeof(a) || a.flags ||
	    !gdrpin_zero(a.reserved, ARRAY_SIZE(a.reserved)))
		return -EINVAL;
	a.fd_pinned_bytes = atomic64_read(&ctx->pinned_bytes);
	mutex_lock(&ctx->lock);
	a.fd_pins = ctx->npins;
	spin_lock(&ctx->ev_lock);
	a.fd_revoked = ctx->nrevoked;
	a.fd_revocations = ctx->revocations;
	spin_unlock(&ctx->ev_lock);
	mutex_unlock(&ctx->lock);
	a.global_pinned_bytes = atomic64_read(&gdrpin_cnt.pinned_bytes);
	a.max_pinned_bytes = READ_ONCE(gdrpin_max_pinned_bytes);
	return copy_to_user(uarg, &a, sizeof(a)) ? -EFAULT : 0;
}

static long gdrpin_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	struct gdrpin_ctx *ctx = file->private_data;
	void __user *uarg = (void __user *)arg;

	if (!gdrpin_is_owner(ctx))
		return -EACCES;
	switch (cmd) {
	case GDRPIN_IOC_GET_VERSION:
		return gdrpin_ioc_version(ctx, uarg);
	case GDRPIN_IOC_PIN:
		return gdrpin_ioc_pin(ctx, uarg);
	case GDRPIN_IOC_UNPIN:
		return gdrpin_ioc_unpin(ctx, uarg);
	case GDRPIN_IOC_QUERY:
		return gdrpin_ioc_query(ctx, uarg);
	case GDRPIN_IOC_GET_REVOKED:
		return gdrpin_ioc_get_revoked(ctx, uarg);
	case GDRPIN_IOC_SET_EVENTFD:
		return gdrpin_ioc_set_eventfd(ctx, uarg);
	case GDRPIN_IOC_GET_STATS:
		return gdrpin_ioc_stats(ctx, uarg);
	case GDRPIN_IOC_PIN_DMABUF:
		return gdrpin_ioc_pin_dmabuf(ctx, uarg);
	default:
		return -ENOTTY;
	}
}

static int gdrpin_mmap(struct file *file, struct vm_area_struct *vma)
{
	struct gdrpin_ctx *ctx = file->private_data;

	if (!gdrpin_is_owner(ctx))
		return -EACCES;
	return gdrpin_status_mmap(ctx, vma);
}

static __poll_t gdrpin_poll(struct file *file, poll_table *wait)
{
	struct gdrpin_ctx *ctx = file->private_data;
	__poll_t mask = 0;

	if (!gdrpin_is_owner(ctx))
		return EPOLLERR;
	poll_wait(file, &ctx->wq, wait);
	spin_lock(&ctx->ev_lock);
	if (ctx->nrevoked)
		mask |= EPOLLIN | EPOLLRDNORM;
	spin_unlock(&ctx->ev_lock);
	return mask;
}

static const struct file_operations gdrpin_fops = {
	.owner = THIS_MODULE,
	.open = gdrpin_open,
	.release = gdrpin_release,
	.unlocked_ioctl = gdrpin_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
	.mmap = gdrpin_mmap,
	.poll = gdrpin_poll,
	/* no .llseek: nonseekable_open() makes lseek fail with -ESPIPE */
};

static struct miscdevice gdrpin_misc = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = GDRPIN_DEVICE_NAME,
	.fops = &gdrpin_fops,
	.mode = 0660,
	.groups = gdrpin_attr_groups,
};

static int __init gdrpin_init(void)
{
	int ret;

	if (!gdrpin_status_pages || gdrpin_status_pages > 256) {
		pr_err("gdrpin: status_pages must be 1..256\n");
		return -EINVAL;
	}
	ret = misc_register(&gdrpin_misc);
	if (ret)
		return ret;
	gdrpin_dmabuf_setup(gdrpin_misc.this_device);
	gdrpin_peer_init();
	pr_info("gdrpin: ABI %u.%u loaded\n", GDRPIN_ABI_MAJOR,
		GDRPIN_ABI_MINOR);
	return 0;
}

static void __exit gdrpin_exit(void)
{
	gdrpin_peer_exit();	/* ib_core gives back every registration */
	misc_deregister(&gdrpin_misc);
	/*
	 * Open fds hold the module (fops.owner), so every fd is closed here.
	 * Free callbacks that were already running when put_pages returned,
	 * and kapi users, may still hold pins or contexts: wait for them.
	 */
	wait_event(gdrpin_live_wq, !atomic64_read(&gdrpin_cnt.live_pins) &&
		   !atomic_read(&gdrpin_live_ctx));
}

module_init(gdrpin_init);
module_exit(gdrpin_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("Pin GPU memory for peer devices (nv-p2p) with revocation");
MODULE_VERSION("1.0");
