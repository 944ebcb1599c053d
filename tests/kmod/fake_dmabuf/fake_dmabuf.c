// SPDX-License-Identifier: GPL-2.0
/*
 * fake_dmabuf: a dma-buf exporter for the gdrpin lab (see fake_dmabuf.h).
 * The buffers are ordinary pages, so the exporter is real in everything
 * the importer sees: attach, pin, map for the importer's device, unmap,
 * move_notify, release.
 */
#include <linux/dma-buf.h>
#include <linux/dma-mapping.h>
#include <linux/dma-resv.h>
#include <linux/file.h>
#include <linux/highmem.h>
#include <linux/miscdevice.h>
#include <linux/module.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "gdrpin_config.h"
#include "fake_dmabuf.h"

#ifdef GDRPIN_HAVE_MODULE_IMPORT_NS_IDENT
MODULE_IMPORT_NS(DMA_BUF);
#else
MODULE_IMPORT_NS("DMA_BUF");
#endif

#define FAKE_MAX_SIZE	(64UL << 20)

static atomic_t fake_buffers = ATOMIC_INIT(0);
static atomic_t fake_attachments = ATOMIC_INIT(0);
static atomic_t fake_pins = ATOMIC_INIT(0);
static atomic_t fake_maps = ATOMIC_INIT(0);
static atomic_t fake_moves = ATOMIC_INIT(0);

static int fake_get_count(char *buf, const struct kernel_param *kp)
{
	return sysfs_emit(buf, "%d\n", atomic_read(kp->arg));
}

static const struct kernel_param_ops fake_count_ops = {
	.get = fake_get_count,
};

module_param_cb(buffers, &fake_count_ops, &fake_buffers, 0444);
module_param_cb(attachments, &fake_count_ops, &fake_attachments, 0444);
module_param_cb(pins, &fake_count_ops, &fake_pins, 0444);
module_param_cb(maps, &fake_count_ops, &fake_maps, 0444);
module_param_cb(moves, &fake_count_ops, &fake_moves, 0444);

struct fake_buf {
	struct page **pages;
	unsigned long npages;
};

static int fake_attach(struct dma_buf *buf, struct dma_buf_attachment *att)
{
	atomic_inc(&fake_attachments);
	return 0;
}

static void fake_detach(struct dma_buf *buf, struct dma_buf_attachment *att)
{
	atomic_dec(&fake_attachments);
}

static int fake_pin(struct dma_buf_attachment *att)
{
	dma_resv_assert_held(att->dmabuf->resv);
	atomic_inc(&fake_pins);
	return 0;
}

static void fake_unpin(struct dma_buf_attachment *att)
{
	dma_resv_assert_held(att->dmabuf->resv);
	WARN_ON(atomic_dec_return(&fake_pins) < 0);
}

static struct sg_table *fake_map(struct dma_buf_attachment *att,
				 enum dma_data_direction dir)
{
	struct fake_buf *fb = att->dmabuf->priv;
	struct sg_table *sgt;
	int ret;

	sgt = kzalloc(sizeof(*sgt), GFP_KERNEL);
	if (!sgt)
		return ERR_PTR(-ENOMEM);
	ret = sg_alloc_table_from_pages(sgt, fb->pages, fb->npages, 0,
					fb->npages << PAGE_SHIFT, GFP_KERNEL);
	if (ret)
		goto err_free;
	ret = dma_map_sgtable(att->dev, sgt, dir, 0);
	if (ret)
		goto err_table;
	atomic_inc(&fake_maps);
	return sgt;

err_table:
	sg_free_table(sgt);
err_free:
	kfree(sgt);
	return ERR_PTR(ret);
}

static void fake_unmap(struct dma_buf_attachment *att, struct sg_table *sgt,
		       enum dma_data_direction dir)
{
	dma_unmap_sgtable(att->dev, sgt, dir, 0);
	sg_free_table(sgt);
	kfree(sgt);
	atomic_dec(&fake_maps);
}

static void fake_release(struct dma_buf *buf)
{
	struct fake_buf *fb = buf->priv;
	unsigned long i;

	for (i = 0; i < fb->npages; i++)
		__free_page(fb->pages[i]);
	kvfree(fb->pages);
	kfree(fb);
	atomic_dec(&fake_buffers);
}

static const struct dma_buf_ops fake_static_ops = {
	.attach = fake_attach,
	.detach = fake_detach,
	.map_dma_buf = fake_map,
	.unmap_dma_buf = fake_unmap,
	.release = fake_release,
};

static const struct dma_buf_ops fake_dynamic_ops = {
	.attach = fake_attach,
	.detach = fake_detach,
	.pin = fake_pin,
	.unpin = fake_unpin,
	.map_dma_buf = fake_map,
	.unmap_dma_buf = fake_unmap,
	.release = fake_release,
};

static int fake_fill(struct fake_buf *fb, u32 seed)
{
	unsigned long i, w, per = PAGE_SIZE / sizeof(u32);
	u32 *p;

	for (i = 0; i < fb->npages; i++) {
		fb->pages[i] = alloc_page(GFP_KERNEL);
		if (!fb->pages[i])
			return -ENOMEM;
		p = kmap_local_page(fb->pages[i]);
		for (w = 0; w < per; w++)
			p[w] = seed + (u32)(i * per + w);
		kunmap_local(p);
	}
	return 0;
}

static long fake_create(struct fake_dmabuf_create __user *uarg)
{
	DEFINE_DMA_BUF_EXPORT_INFO(exp);
	struct fake_dmabuf_create a;
	struct fake_buf *fb;
	struct dma_buf *buf;
	unsigned long i;
	int ret, fd;

	if (copy_from_user(&a, uarg, sizeof(a)))
		return -EFAULT;
	if (!a.size || a.size > FAKE_MAX_SIZE || !PAGE_ALIGNED(a.size) ||
	    (a.flags & ~FAKE_DMABUF_DYNAMIC) || a.pad)
		return -EINVAL;
	fb = kzalloc(sizeof(*fb), GFP_KERNEL);
	if (!fb)
		return -ENOMEM;
	fb->npages = a.size >> PAGE_SHIFT;
	fb->pages = kvcalloc(fb->npages, sizeof(*fb->pages), GFP_KERNEL);
	ret = fb->pages ? fake_fill(fb, a.seed) : -ENOMEM;
	if (ret)
		goto err_pages;
	exp.ops = (a.flags & FAKE_DMABUF_DYNAMIC) ? &fake_dynamic_ops :
						    &fake_static_ops;
	exp.size = a.size;
	exp.flags = O_RDWR;
	exp.priv = fb;
	buf = dma_buf_export(&exp);
	if (IS_ERR(buf)) {
		ret = PTR_ERR(buf);
		goto err_pages;
	}
	atomic_inc(&fake_buffers);
	fd = dma_buf_fd(buf, O_CLOEXEC);
	if (fd < 0) {
		dma_buf_put(buf);
		return fd;
	}
	a.fd = fd;
	if (copy_to_user(uarg, &a, sizeof(a)))
		return -EFAULT;	/* the fd stays installed: the caller closes it */
	return 0;

err_pages:
	for (i = 0; fb->pages && i < fb->npages && fb->pages[i]; i++)
		__free_page(fb->pages[i]);
	kvfree(fb->pages);
	kfree(fb);
	return ret;
}

static long fake_move(int __user *uarg)
{
	struct dma_buf *buf;
	int fd;

	if (get_user(fd, uarg))
		return -EFAULT;
	buf = dma_buf_get(fd);
	if (IS_ERR(buf))
		return PTR_ERR(buf);
	if (buf->ops != &fake_dynamic_ops && buf->ops != &fake_static_ops) {
		dma_buf_put(buf);
		return -EINVAL;
	}
	dma_resv_lock(buf->resv, NULL);
#ifdef GDRPIN_HAVE_DMABUF_INVALIDATE_MAPPINGS
	dma_buf_invalidate_mappings(buf);	/* 7.x name */
#else
	dma_buf_move_notify(buf);
#endif
	dma_resv_unlock(buf->resv);
	atomic_inc(&fake_moves);
	dma_buf_put(buf);
	return 0;
}

static long fake_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	switch (cmd) {
	case FAKE_DMABUF_CREATE:
		return fake_create((void __user *)arg);
	case FAKE_DMABUF_MOVE:
		return fake_move((int __user *)arg);
	default:
		return -ENOTTY;
	}
}

static const struct file_operations fake_fops = {
	.owner = THIS_MODULE,
	.unlocked_ioctl = fake_ioctl,
};

static struct miscdevice fake_misc = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "gdrpin_fake_dmabuf",
	.fops = &fake_fops,
	.mode = 0600,
};

static int __init fake_init(void)
{
	return misc_register(&fake_misc);
}

static void __exit fake_exit(void)
{
	misc_deregister(&fake_misc);
}

module_init(fake_init);
module_exit(fake_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("Test-only dma-buf exporter for the gdrpin lab");
