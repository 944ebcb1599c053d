// SPDX-License-Identifier: GPL-2.0
/*
 * gdrpin_consumer: TEST-ONLY user of the gdrpin in-kernel API.
 *
 * It plays a peer device driver: it looks up a range a process pinned
 * through /dev/gdrpin, reads the memory through the page table (kmap of the
 * physical pages the provider reported) and returns a checksum, so a test
 * can compare the data, not just return codes.
 *
 * /sys/kernel/debug/gdrpin_consumer/ctl, one state per open file:
 *   write "read <tgid> <va> <len>"  look up, map for DMA, checksum, release;
 *                                   the write fails with the errno
 *   write "hold <tgid> <va> <len>"  look up, register a revocation notifier,
 *                                   DMA-map, and keep all of it
 *   write "release"                 unmap, unregister, put
 *   write "lookup <tgid> <va> <len> <n>"
 *                                   n lookups (gdrpin_range_get + put);
 *                                   read gives "lookup ns=<per lookup> n=<n>"
 *   read                            "ok csum=<hex> len=<n> dma=<ok|none>"
 *                                   or "held revoked=<0|1> reason=<n>"
 * The checksum is 64-bit FNV-1a over the bytes.
 */
#include <linux/debugfs.h>
#include <linux/highmem.h>
#include <linux/ktime.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/pci.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "gdrpin_ioctl.h"
#include "gdrpin_kapi.h"
#include "gdrpin_nvp2p.h"

struct cons_state {
	struct mutex lock;		/* held while reading pages */
	struct gdrpin_range *r;
	struct gdrpin_notifier nb;
	struct gdrpin_dma_map *map;
	struct gdrpin_dmabuf_map *dmap;	/* DMA-BUF pins: mapped for pdev */
	struct pci_dev *pdev;
	bool registered;
	bool revoked;
	int reason;
	char result[128];
};

static struct dentry *cons_dir;

static void cons_revoke(struct gdrpin_notifier *n, struct gdrpin_range *r,
			int reason)
{
	struct cons_state *st = container_of(n, struct cons_state, nb);

	/* Fence: no page read is in progress once we hold the lock. */
	mutex_lock(&st->lock);
	st->revoked = true;
	st->reason = reason;
	mutex_unlock(&st->lock);
}

static u64 cons_fnv(u64 h, const u8 *p, size_t n)
{
	while (n--) {
		h ^= *p++;
		h *= 0x100000001b3ULL;
	}
	return h;
}

/* st->lock held; reads [va, va + len) through our mapping of a dma-buf. */
static int cons_checksum_dmabuf(struct cons_state *st, u64 va, u64 len,
				u64 *sum)
{
	const struct sg_table *sgt = gdrpin_dmabuf_map_sgt(st->dmap);
	struct gdrpin_range_info info;
	u64 off, h = 0xcbf29ce484222325ULL;
	struct scatterlist *sg;
	unsigned int i;

	if (st->revoked)
		return -ESTALE;
	gdrpin_range_info(st->r, &info);
	off = va - info.va;
	/* no IOMMU in the lab: DMA address == physical address */
	for_each_sgtable_dma_sg(sgt, sg, i) {
		u64 seg = sg_dma_len(sg), a;

		if (off >= seg) {
			off -= seg;
			continue;
		}
		for (a = sg_dma_address(sg) + off; len && a < sg_dma_address(sg) + seg;) {
			size_t chunk = min_t(u64, len, PAGE_SIZE - offset_in_page(a));
			void *kva = kmap_local_page(pfn_to_page(PHYS_PFN(a)));

			h = cons_fnv(h, (u8 *)kva + offset_in_page(a), chunk);
			kunmap_local(kva);
			a += chunk;
			len -= chunk;
		}
		off = 0;
		if (!len)
			break;
		cond_resched();
	}
	if (len)
		return -ERANGE;
	*sum = h;
	return 0;
}

/* st->lock held; reads [va, va + len) through the page table. */
static int cons_checksum(struct cons_state *st, u64 va, u64 len, u64 *sum)
{
	const struct nvidia_p2p_page_table *pt;
	struct gdrpin_range_info info;
	u64 off, h = 0xcbf29ce484222325ULL;
	u32 psz;

	if (st->dmap)
		return cons_checksum_dmabuf(st, va, len, sum);
	pt = gdrpin_range_page_table(st->r);
	if (!pt || st->revoked)
		return -ESTALE;
	gdrpin_range_info(st->r, &info);
	psz = gdrpin_nvp2p_page_bytes(pt->page_size);
	if (!psz || psz != info.page_size)
		return -EPROTO;
	off = va - info.va;
	while (len) {
		u64 idx = off / psz, in = off % psz, phys;
		size_t chunk;
		struct page *pg;
		void *kva;

		if (idx >= pt->entries)
			return -ERANGE;
		phys = pt->pages[idx]->physical_address + in;
		chunk = min_t(u64, len, PAGE_SIZE - offset_in_page(phys));
		pg = pfn_to_page(PHYS_PFN(phys));
		kva = kmap_local_page(pg);
		h = cons_fnv(h, (u8 *)kva + offset_in_page(phys), chunk);
		kunmap_local(kva);
		off += chunk;
		len -= chunk;
		cond_resched();
	}
	*sum = h;
	return 0;
}

/*
 * st->lock held; checks the DMA mapping against the page table (identity in
 * the fake). Both are freed right after a revocation is reported: read
 * them only under the lock the revoke notifier takes, and not once it ran.
 */
static int cons_check_dma(struct cons_state *st)
{
	const struct nvidia_p2p_dma_mapping *m;
	const struct nvidia_p2p_page_table *pt;
	u32 i;

	lockdep_assert_held(&st->lock);
	if (st->revoked)
		return -ESTALE;
	if (st->dmap) {
		const struct sg_table *sgt = gdrpin_dmabuf_map_sgt(st->dmap);
		struct gdrpin_range_info info;
		struct scatterlist *sg;
		u64 total = 0;

		/*
		 * An importer sees DMA addresses only (CONFIG_DMABUF_DEBUG
		 * scrambles the pages behind them): with no IOMMU in the lab
		 * each must be RAM, and together they cover the pin.
		 */
		for_each_sgtable_dma_sg(sgt, sg, i) {
			if (!pfn_valid(PHYS_PFN(sg_dma_address(sg))) ||
			    !pfn_valid(PHYS_PFN(sg_dma_address(sg) +
						sg_dma_len(sg) - 1)))
				return -EPROTO;
			total += sg_dma_len(sg);
		}
		gdrpin_range_info(st->r, &info);
		return total >= info.len ? 0 : -EPROTO;
	}
	m = gdrpin_dma_map_mapping(st->map);
	pt = gdrpin_range_page_table(st->r);
	if (!m || !pt)
		return -ESTALE;
	if (m->entries != pt->entries)
		return -EPROTO;
	for (i = 0; i < m->entries; i++)
		if (m->dma_addresses[i] != pt->pages[i]->physical_address)
			return -EPROTO;
	return 0;
}

static void cons_release(struct cons_state *st)
{
	if (!st->r)
		return;
	if (st->map)
		gdrpin_range_dma_unmap(st->r, st->map);
	st->map = NULL;
	if (st->dmap)
		gdrpin_range_dmabuf_unmap(st->r, st->dmap);
	st->dmap = NULL;
	if (st->registered)
		gdrpin_range_notifier_unregister(st->r, &st->nb);
	st->registered = false;
	gdrpin_range_put(st->r);
	st->r = NULL;
	pci_dev_put(st->pdev);
	st->pdev = NULL;
}

static int cons_acquire(struct cons_state *st, pid_t tgid, u64 va, u64 len)
{
	struct gdrpin_range_info info;
	struct gdrpin_range *r;
	int ret;

	r = gdrpin_range_get_by_nr(tgid, va, len);
	if (IS_ERR(r))
		return PTR_ERR(r);
	st->r = r;
	st->revoked = false;
	st->reason = 0;
	st->nb.revoke = cons_revoke;
	ret = gdrpin_range_notifier_register(r, &st->nb);
	if (ret) {
		cons_release(st);
		return ret;
	}
	st->registered = true;
	/* Any PCI device will do as the "peer"; none -> no DMA check. */
	st->pdev = pci_get_device(PCI_ANY_ID, PCI_ANY_ID, NULL);
	gdrpin_range_info(r, &info);
	if (info.mode == GDRPIN_MODE_DMABUF) {
		ret = st->pdev ? gdrpin_range_dmabuf_map(r, &st->pdev->dev,
							 &st->dmap) : -ENODEV;
		if (ret) {
			cons_release(st);
			return ret;
		}
	} else if (st->pdev) {
		ret = gdrpin_range_dma_map(r, st->pdev, &st->map);
		if (ret) {
			cons_release(st);
			return ret;
		}
	}
	return 0;
}

/* The cost of one in-kernel lookup by address (pins of a process). */
static int cons_lookup(struct cons_state *st, pid_t tgid, u64 va, u64 len,
		       unsigned int n)
{
	struct gdrpin_range *r;
	struct pid *pid;
	unsigned int i;
	u64 t0, ns;
	int ret = 0;

	if (!n)
		return -EINVAL;
	pid = find_get_pid(tgid);
	if (!pid)
		return -ESRCH;
	t0 = ktime_get_ns();
	for (i = 0; i < n && !ret; i++) {
		r = gdrpin_range_get(pid, va, len);
		if (IS_ERR(r))
			ret = PTR_ERR(r);
		else
			gdrpin_range_put(r);
	}
	ns = ktime_get_ns() - t0;
	put_pid(pid);
	if (!ret)
		snprintf(st->result, sizeof(st->result),
			 "lookup ns=%llu n=%u\n", ns / n, n);
	return ret;
}

static int cons_cmd(struct cons_state *st, char *cmd)
{
	long long tgid;
	u64 va, len, sum = 0;
	unsigned int n;
	int ret;

	if (!strcmp(cmd, "release")) {
		cons_release(st);
		snprintf(st->result, sizeof(st->result), "released\n");
		return 0;
	}
	if (sscanf(cmd, "read %lld %llx %llx", &tgid, &va, &len) == 3) {
		if (st->r)
			return -EBUSY;
		ret = cons_acquire(st, (pid_t)tgid, va, len);
		if (ret)
			return ret;
		mutex_lock(&st->lock);
		ret = st->map || st->dmap ? cons_check_dma(st) : 0;
		if (!ret)
			ret = cons_checksum(st, va, len, &sum);
		mutex_unlock(&st->lock);
		if (!ret)
			snprintf(st->result, sizeof(st->result),
				 "ok csum=%016llx len=%llu dma=%s\n", sum, len,
				 st->map || st->dmap ? "ok" : "none");
		cons_release(st);
		return ret;
	}
	if (sscanf(cmd, "lookup %lld %llx %llx %u", &tgid, &va, &len, &n) == 4)
		return cons_lookup(st, (pid_t)tgid, va, len, n);
	if (sscanf(cmd, "hold %lld %llx %llx", &tgid, &va, &len) == 3) {
		if (st->r)
			return -EBUSY;
		return cons_acquire(st, (pid_t)tgid, va, len);
	}
	return -EINVAL;
}

static ssize_t cons_write(struct file *file, const char __user *ubuf,
			  size_t count, loff_t *ppos)
{
	struct cons_state *st = file->private_data;
	char buf[96];
	int ret;

	if (count >= sizeof(buf))
		return -EINVAL;
	if (copy_from_user(buf, ubuf, count))
		return -EFAULT;
	buf[count] = '\0';
	strim(buf);
	ret = cons_cmd(st, buf);
	return ret ? ret : count;
}

static ssize_t cons_read(struct file *file, char __user *ubuf, size_t count,
			 loff_t *ppos)
{
	struct cons_state *st = file->private_data;
	char buf[128];

	if (st->r) {
		mutex_lock(&st->lock);
		snprintf(buf, sizeof(buf), "held revoked=%d reason=%d\n",
			 st->revoked, st->reason);
		mutex_unlock(&st->lock);
	} else {
		strscpy(buf, st->result, sizeof(buf));
	}
	return simple_read_from_buffer(ubuf, count, ppos, buf, strlen(buf));
}

static int cons_open(struct inode *inode, struct file *file)
{
	struct cons_state *st = kzalloc(sizeof(*st), GFP_KERNEL);

	if (!st)
		return -ENOMEM;
	mutex_init(&st->lock);
	file->private_data = st;
	return 0;
}

static int cons_close(struct inode *inode, struct file *file)
{
	struct cons_state *st = file->private_data;

	cons_release(st);
	kfree(st);
	return 0;
}

static const struct file_operations cons_fops = {
	.owner = THIS_MODULE,
	.open = cons_open,
	.release = cons_close,
	.read = cons_read,
	.write = cons_write,
};

static int __init cons_init(void)
{
	cons_dir = debugfs_create_dir("gdrpin_consumer", NULL);
	debugfs_create_file("ctl", 0600, cons_dir, NULL, &cons_fops);
	return 0;
}

static void __exit cons_exit(void)
{
	debugfs_remove_recursive(cons_dir);
}

module_init(cons_init);
module_exit(cons_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("Test-only consumer of the gdrpin in-kernel API");
