// SPDX-License-Identifier: GPL-2.0
/*
 * gdrpin: pin GPU memory for peer devices on behalf of a process.
 *
 * This file: the misc device, ioctl dispatch and argument validation,
 * module init/exit. It is the top layer: it picks the pin mode of each
 * PIN ioctl; the per-fd context (gdrpin_ctx.c) sits below it, the pin
 * modes below that and the generic pin code at the bottom. Module
 * parameters live beside their users. Every file
 * operation first checks that the caller is the process (tgid and mm) that
 * opened the fd: a forked child or a process that received the fd over
 * SCM_RIGHTS gets -EACCES.
 */
#include <linux/compat.h>
#include <linux/fs.h>
#include <linux/miscdevice.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/poll.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "gdrpin.h"

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

/*
 * The end of every PIN ioctl, @ret from its checks and the pin: a failure
 * is counted; a pin whose handle cannot be copied out is undone, as the
 * caller cannot know it.
 */
static long gdrpin_ioc_pin_done(struct gdrpin_ctx *ctx, void __user *uarg,
				const void *a, size_t size, u64 handle, int ret)
{
	if (ret) {
		gdrpin_count_failure(ret);
		return ret;
	}
	if (!copy_to_user(uarg, a, size))
		return 0;
	gdrpin_ctx_unpin(ctx, handle, false, NULL);
	return -EFAULT;
}

static long gdrpin_ioc_pin(struct gdrpin_ctx *ctx, void __user *uarg)
{
	struct gdrpin_pin_args a;
	int ret;

	if (copy_from_user(&a, uarg, sizeof(a)))
		return -EFAULT;
	if (a.size != sizeof(a) || (a.flags & ~GDRPIN_PIN_FLAGS_ALL) ||
	    ((a.flags & GDRPIN_PIN_LEGACY) && (a.flags & GDRPIN_PIN_FORCE_BAR1)) ||
	    !gdrpin_zero(a.reserved, ARRAY_SIZE(a.reserved)))
		ret = -EINVAL;
	else
		ret = gdrpin_nv_pin(ctx, &a);
	return gdrpin_ioc_pin_done(ctx, uarg, &a, sizeof(a), a.handle, ret);
}

static long gdrpin_ioc_pin_dmabuf(struct gdrpin_ctx *ctx, void __user *uarg)
{
	struct gdrpin_pin_dmabuf_args a;
	int ret;

	if (copy_from_user(&a, uarg, sizeof(a)))
		return -EFAULT;
	if (a.size != sizeof(a) || a.flags || a.pad || a.pad2 ||
	    !gdrpin_zero(a.reserved, ARRAY_SIZE(a.reserved)) ||
	    !PAGE_ALIGNED(a.va))
		ret = -EINVAL;
	else
		ret = gdrpin_dmabuf_pin(ctx, &a);
	return gdrpin_ioc_pin_done(ctx, uarg, &a, sizeof(a), a.handle, ret);
}

static long gdrpin_ioc_unpin(struct gdrpin_ctx *ctx, void __user *uarg)
{
	struct gdrpin_unpin_args a;
	int ret;

	if (copy_from_user(&a, uarg, sizeof(a)))
		return -EFAULT;
	if (a.size != sizeof(a) || a.flags || a.pad)
		return -EINVAL;
	ret = gdrpin_ctx_unpin(ctx, a.handle, true, &a.state);
	if (ret)
		return ret;
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
		gdrpin_ctx_pin_release(ctx, pin, true);
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

	if (!gdrpin_ctx_is_owner(ctx))
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

	if (!gdrpin_ctx_is_owner(ctx))
		return -EACCES;
	return gdrpin_status_mmap(ctx, vma);
}

static __poll_t gdrpin_poll(struct file *file, poll_table *wait)
{
	struct gdrpin_ctx *ctx = file->private_data;
	__poll_t mask = 0;

	if (!gdrpin_ctx_is_owner(ctx))
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
	.open = gdrpin_ctx_open,
	.release = gdrpin_ctx_close,
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
MODULE_VERSION(GDRPIN_VERSION);
