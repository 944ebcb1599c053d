// SPDX-License-Identifier: GPL-2.0
/*
 * fake_nvp2p: a TEST-ONLY stand-in for the nv-p2p API of nvidia.ko.
 *
 * It exports the nvidia_p2p_* symbols with the ABI of src/kmod/gdrpin_nvp2p.h
 * and backs "GPU memory" with the calling process's own pages: get_pages
 * pins the user VA range with pin_user_pages_fast(), and the page table
 * holds the real physical addresses of those pages, so a consumer that reads
 * them through the page table sees what the process wrote.
 *
 * Page size: the table reports NVIDIA_P2P_PAGE_SIZE_4KB with one entry per
 * 4 KiB page. (64 KiB entries would claim physical contiguity that user
 * pages do not have.) Alignment rules are still the GPU's: va and length
 * must be 64 KiB aligned, else -EINVAL, as on a real GPU.
 * DMA mappings are identity (dma address = physical address), i.e. what a
 * peer sees with the IOMMU off.
 *
 * Semantics copied from the documented NVIDIA behaviour:
 *  - get_pages needs a free callback (-EINVAL without one);
 *  - put_pages on a page table that the free callback already took returns
 *    0 and frees nothing (the callback's owner must call free_page_table);
 *  - the callback runs synchronously under an internal "RM" lock that
 *    get/put/dma_map/dma_unmap also take, so a consumer that holds one of
 *    its own locks across an nv-p2p call while its callback waits for that
 *    lock deadlocks here as it would on real hardware;
 *  - persistent pins get no callback; "freeing" their memory does nothing.
 *
 * Controls (debugfs, /sys/kernel/debug/fake_nvp2p/):
 *   free               write "<tgid> <va> <len>" (tgid 0 = caller): fire the
 *                      free callback of every legacy pin overlapping the
 *                      range, like cuMemFree on a GPU
 *   inject             write "<errno> <count>": the next count get_pages*
 *                      calls fail with -errno
 *   put_delay_ms       sleep this long at the start of put_pages*
 *   unmap_delay_ms     sleep this long at the start of dma_unmap_pages
 *   refuse_persistent  1: get_pages_persistent returns -EINVAL (MIG/vGPU)
 *   pt_version         version word put in new page tables
 *   stats              counters; "errors" counts API misuse by the caller
 */
#include <linux/debugfs.h>
#include <linux/delay.h>
#include <linux/io.h>
#include <linux/list.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/sched.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/uaccess.h>

#include "gdrpin_nvp2p.h"

#define FAKE_ALIGN	0x10000ULL

struct fake_pt {
	struct list_head node;		/* fake_live or fake_zombies */
	struct nvidia_p2p_page_table pt;
	struct nvidia_p2p_page *pagearr;
	struct nvidia_p2p_page **pageptrs;
	struct page **upages;
	unsigned long npages;
	u64 va;
	u64 len;
	pid_t tgid;
	bool persistent;
	void (*cb)(void *data);
	void *data;
	u8 uuid[NVIDIA_P2P_GPU_UUID_LEN];
	struct list_head maps;		/* struct fake_map (under fake_lock) */
};

struct fake_map {
	struct list_head node;		/* fpt->maps or fake_dead_maps */
	struct nvidia_p2p_dma_mapping m;
	struct fake_pt *fpt;
};

static DEFINE_MUTEX(fake_rm_lock);	/* the driver's internal lock */
static DEFINE_SPINLOCK(fake_lock);	/* lists and counters below */
static LIST_HEAD(fake_live);
static LIST_HEAD(fake_zombies);		/* revoked, awaiting free_page_table */
static LIST_HEAD(fake_dead_maps);	/* revoked, awaiting free_dma_mapping */

static struct {
	long live_pts, zombie_pts, live_maps, dead_maps, pinned_pages;
	long get_pages, get_persistent, put_pages, put_notfound;
	long callbacks, persistent_free_skipped, free_page_table;
	long dma_map, dma_unmap, free_dma_mapping, injected, errors;
} fake_st;

static u32 fake_put_delay_ms;
static u32 fake_unmap_delay_ms;
static bool fake_refuse_persistent;
static u32 fake_pt_version = GDRPIN_NVP2P_PT_V2;
static atomic_t fake_inject_count = ATOMIC_INIT(0);
static atomic_t fake_inject_errno = ATOMIC_INIT(0);
static struct dentry *fake_dir;

static void fake_error(const char *what)
{
	spin_lock(&fake_lock);
	fake_st.errors++;
	spin_unlock(&fake_lock);
	pr_err_ratelimited("fake_nvp2p: misuse: %s\n", what);
}

static void fake_pt_free(struct fake_pt *fpt)
{
	kvfree(fpt->upages);
	kvfree(fpt->pagearr);
	kvfree(fpt->pageptrs);
	kfree(fpt);
}

static void fake_unpin(struct fake_pt *fpt)
{
	if (!fpt->upages)
		return;
	unpin_user_pages(fpt->upages, fpt->npages);
	spin_lock(&fake_lock);
	fake_st.pinned_pages -= fpt->npages;
	spin_unlock(&fake_lock);
	kvfree(fpt->upages);
	fpt->upages = NULL;
}

static int fake_get(u64 va, u64 len, struct nvidia_p2p_page_table **ptp,
		    bool persistent, void (*cb)(void *), void *data)
{
	struct fake_pt *fpt;
	unsigned long i, done = 0;
	int ret, err;

	if (atomic_add_unless(&fake_inject_count, -1, 0)) {
		err = atomic_read(&fake_inject_errno);
		spin_lock(&fake_lock);
		fake_st.injected++;
		spin_unlock(&fake_lock);
		return -err;
	}
	if (!ptp || !len || (va & (FAKE_ALIGN - 1)) || (len & (FAKE_ALIGN - 1)))
		return -EINVAL;
	if (!current->mm)
		return -EINVAL;

	fpt = kzalloc(sizeof(*fpt), GFP_KERNEL);
	if (!fpt)
		return -ENOMEM;
	fpt->npages = len >> PAGE_SHIFT;
	fpt->upages = kvmalloc_array(fpt->npages, sizeof(*fpt->upages),
				     GFP_KERNEL);
	fpt->pagearr = kvcalloc(fpt->npages, sizeof(*fpt->pagearr), GFP_KERNEL);
	fpt->pageptrs = kvmalloc_array(fpt->npages, sizeof(*fpt->pageptrs),
				       GFP_KERNEL);
	if (!fpt->upages || !fpt->pagearr || !fpt->pageptrs) {
		fake_pt_free(fpt);
		return -ENOMEM;
	}
	while (done < fpt->npages) {
		ret = pin_user_pages_fast(va + (done << PAGE_SHIFT),
					  min_t(unsigned long,
						fpt->npages - done, INT_MAX),
					  FOLL_WRITE | FOLL_LONGTERM,
					  fpt->upages + done);
		if (ret <= 0) {
			if (done)
				unpin_user_pages(fpt->upages, done);
			fake_pt_free(fpt);
			return -EFAULT;	/* not "GPU memory" of this process */
		}
		done += ret;
	}
	for (i = 0; i < fpt->npages; i++) {
		fpt->pagearr[i].physical_address = page_to_phys(fpt->upages[i]);
		fpt->pageptrs[i] = &fpt->pagearr[i];
	}
	memcpy(fpt->uuid, "fake-nvp2p-gpu-0", sizeof(fpt->uuid));
	fpt->pt.version = READ_ONCE(fake_pt_version);
	fpt->pt.page_size = NVIDIA_P2P_PAGE_SIZE_4KB;
	fpt->pt.pages = fpt->pageptrs;
	fpt->pt.entries = fpt->npages;
	fpt->pt.gpu_uuid = fpt->uuid;
	fpt->pt.flags = 0;
	fpt->va = va;
	fpt->len = len;
	fpt->tgid = task_tgid_nr(current);
	fpt->persistent = persistent;
	fpt->cb = cb;
	fpt->data = data;
	INIT_LIST_HEAD(&fpt->maps);

	mutex_lock(&fake_rm_lock);
	spin_lock(&fake_lock);
	list_add_tail(&fpt->node, &fake_live);
	fake_st.live_pts++;
	fake_st.pinned_pages += fpt->npages;
	spin_unlock(&fake_lock);
	mutex_unlock(&fake_rm_lock);
	*ptp = &fpt->pt;
	return 0;
}

int nvidia_p2p_get_pages(u64 p2p_token, u32 va_space, u64 virtual_address,
			 u64 length, struct nvidia_p2p_page_table **page_table,
			 void (*free_callback)(void *data), void *data)
{
	spin_lock(&fake_lock);
	fake_st.get_pages++;
	spin_unlock(&fake_lock);
	if (!free_callback || p2p_token || va_space)
		return -EINVAL;
	return fake_get(virtual_address, length, page_table, false,
			free_callback, data);
}
EXPORT_SYMBOL_GPL(nvidia_p2p_get_pages);

int nvidia_p2p_get_pages_persistent(u64 virtual_address, u64 length,
				    struct nvidia_p2p_page_table **page_table,
				    u32 flags)
{
	spin_lock(&fake_lock);
	fake_st.get_persistent++;
	spin_unlock(&fake_lock);
	if (READ_ONCE(fake_refuse_persistent))
		return -EINVAL;
	if (flags & ~NVIDIA_P2P_FLAGS_FORCE_BAR1_MAPPING)
		return -EINVAL;
	return fake_get(virtual_address, length, page_table, true, NULL, NULL);
}
EXPORT_SYMBOL_GPL(nvidia_p2p_get_pages_persistent);

/* fake_lock held */
static struct fake_pt *fake_find(struct list_head *list,
				 struct nvidia_p2p_page_table *pt)
{
	struct fake_pt *fpt;

	list_for_each_entry(fpt, list, node)
		if (&fpt->pt == pt)
			return fpt;
	return NULL;
}

static int fake_put(u64 va, struct nvidia_p2p_page_table *pt, bool persistent)
{
	struct fake_map *fm, *tmp;
	struct fake_pt *fpt;
	u32 delay = READ_ONCE(fake_put_delay_ms);

	if (delay)
		msleep(delay);
	mutex_lock(&fake_rm_lock);
	spin_lock(&fake_lock);
	fake_st.put_pages++;
	fpt = fake_find(&fake_live, pt);
	if (fpt && (fpt->persistent != persistent || fpt->va != va)) {
		spin_unlock(&fake_lock);
		mutex_unlock(&fake_rm_lock);
		fake_error("put_pages: wrong kind or va");
		return -EINVAL;
	}
	if (!fpt) {
		/* Already taken by the free callback: like NVIDIA, report OK. */
		bool zombie = fake_find(&fake_zombies, pt);

		if (zombie)
			fake_st.put_notfound++;
		spin_unlock(&fake_lock);
		mutex_unlock(&fake_rm_lock);
		if (!zombie)
			fake_error("put_pages of an unknown page table");
		return zombie ? 0 : -EINVAL;
	}
	list_del(&fpt->node);
	fake_st.live_pts--;
	if (!list_empty(&fpt->maps))
		fake_st.errors++;	/* put_pages with live DMA mappings */
	list_for_each_entry_safe(fm, tmp, &fpt->maps, node) {
		list_del(&fm->node);
		kfree(fm->m.dma_addresses);
		kfree(fm);
		fake_st.live_maps--;
	}
	spin_unlock(&fake_lock);
	mutex_unlock(&fake_rm_lock);
	fake_unpin(fpt);
	fake_pt_free(fpt);
	return 0;
}

int nvidia_p2p_put_pages(u64 p2p_token, u32 va_space, u64 virtual_address,
			 struct nvidia_p2p_page_table *page_table)
{
	return fake_put(virtual_address, page_table, false);
}
EXPORT_SYMBOL_GPL(nvidia_p2p_put_pages);

int nvidia_p2p_put_pages_persistent(u64 virtual_address,
				    struct nvidia_p2p_page_table *page_table,
				    u32 flags)
{
	if (flags)
		return -EINVAL;
	return fake_put(virtual_address, page_table, true);
}
EXPORT_SYMBOL_GPL(nvidia_p2p_put_pages_persistent);

/* Only valid for a page table handed over by the free callback. */
int nvidia_p2p_free_page_table(struct nvidia_p2p_page_table *page_table)
{
	struct fake_pt *fpt;
	bool live;

	spin_lock(&fake_lock);
	fpt = fake_find(&fake_zombies, page_table);
	if (fpt) {
		list_del(&fpt->node);
		fake_st.zombie_pts--;
		fake_st.free_page_table++;
	}
	live = !fpt && fake_find(&fake_live, page_table);
	spin_unlock(&fake_lock);
	if (!fpt) {
		fake_error(live ? "free_page_table of a live page table" :
			   "free_page_table of an unknown page table");
		return -EINVAL;
	}
	fake_pt_free(fpt);
	return 0;
}
EXPORT_SYMBOL_GPL(nvidia_p2p_free_page_table);

int nvidia_p2p_dma_map_pages(struct pci_dev *peer,
			     struct nvidia_p2p_page_table *page_table,
			     struct nvidia_p2p_dma_mapping **dma_mapping)
{
	struct fake_map *fm;
	struct fake_pt *fpt;
	u32 i;

	fm = kzalloc(sizeof(*fm), GFP_KERNEL);
	if (!fm)
		return -ENOMEM;
	mutex_lock(&fake_rm_lock);
	spin_lock(&fake_lock);
	fpt = fake_find(&fake_live, page_table);
	spin_unlock(&fake_lock);
	if (!fpt) {
		mutex_unlock(&fake_rm_lock);
		kfree(fm);
		return -EINVAL;
	}
	fm->m.dma_addresses = kcalloc(fpt->pt.entries, sizeof(u64), GFP_KERNEL);
	if (!fm->m.dma_addresses) {
		mutex_unlock(&fake_rm_lock);
		kfree(fm);
		return -ENOMEM;
	}
	for (i = 0; i < fpt->pt.entries; i++)
		fm->m.dma_addresses[i] = fpt->pagearr[i].physical_address;
	fm->m.version = GDRPIN_NVP2P_DMA_V2;
	fm->m.page_size_type = fpt->pt.page_size;
	fm->m.entries = fpt->pt.entries;
	fm->m.pci_dev = peer;
	fm->fpt = fpt;
	spin_lock(&fake_lock);
	list_add_tail(&fm->node, &fpt->maps);
	fake_st.live_maps++;
	fake_st.dma_map++;
	spin_unlock(&fake_lock);
	mutex_unlock(&fake_rm_lock);
	*dma_mapping = &fm->m;
	return 0;
}
EXPORT_SYMBOL_GPL(nvidia_p2p_dma_map_pages);

int nvidia_p2p_dma_unmap_pages(struct pci_dev *peer,
			       struct nvidia_p2p_page_table *page_table,
			       struct nvidia_p2p_dma_mapping *dma_mapping)
{
	struct fake_map *fm, *found = NULL;
	struct fake_pt *fpt;
	u32 delay = READ_ONCE(fake_unmap_delay_ms);

	if (delay)
		msleep(delay);
	mutex_lock(&fake_rm_lock);
	spin_lock(&fake_lock);
	fpt = fake_find(&fake_live, page_table);
	if (fpt) {
		list_for_each_entry(fm, &fpt->maps, node) {
			if (&fm->m == dma_mapping) {
				found = fm;
				break;
			}
		}
	}
	if (found) {
		list_del(&found->node);
		fake_st.live_maps--;
		fake_st.dma_unmap++;
	}
	spin_unlock(&fake_lock);
	mutex_unlock(&fake_rm_lock);
	if (!found)
		return -EINVAL;	/* revoked meanwhile, or bogus */
	if (found->m.pci_dev != peer)
		fake_error("dma_unmap_pages with another pci_dev");
	kfree(found->m.dma_addresses);
	kfree(found);
	return 0;
}
EXPORT_SYMBOL_GPL(nvidia_p2p_dma_unmap_pages);

int nvidia_p2p_free_dma_mapping(struct nvidia_p2p_dma_mapping *dma_mapping)
{
	struct fake_map *fm, *found = NULL;

	spin_lock(&fake_lock);
	list_for_each_entry(fm, &fake_dead_maps, node) {
		if (&fm->m == dma_mapping) {
			found = fm;
			break;
		}
	}
	if (found) {
		list_del(&found->node);
		fake_st.dead_maps--;
		fake_st.free_dma_mapping++;
	}
	spin_unlock(&fake_lock);
	if (!found) {
		fake_error("free_dma_mapping of a mapping not revoked");
		return -EINVAL;
	}
	kfree(found->m.dma_addresses);
	kfree(found);
	return 0;
}
EXPORT_SYMBOL_GPL(nvidia_p2p_free_dma_mapping);

/* --- test controls ------------------------------------------------------ */

/* "cuMemFree": fire the callbacks of legacy pins overlapping the range. */
static int fake_fire(pid_t tgid, u64 va, u64 len)
{
	struct fake_map *fm, *tmp;
	struct fake_pt *fpt;
	int fired = 0;

	mutex_lock(&fake_rm_lock);
	for (;;) {
		struct fake_pt *hit = NULL;

		spin_lock(&fake_lock);
		list_for_each_entry(fpt, &fake_live, node) {
			if (fpt->tgid != tgid || fpt->va >= va + len ||
			    fpt->va + fpt->len <= va)
				continue;
			if (fpt->persistent) {
				/* the memory stays while persistently pinned */
				continue;
			}
			hit = fpt;
			break;
		}
		if (hit) {
			list_move_tail(&hit->node, &fake_zombies);
			fake_st.live_pts--;
			fake_st.zombie_pts++;
			list_for_each_entry_safe(fm, tmp, &hit->maps, node) {
				list_move_tail(&fm->node, &fake_dead_maps);
				fake_st.live_maps--;
				fake_st.dead_maps++;
			}
			fake_st.callbacks++;
		}
		spin_unlock(&fake_lock);
		if (!hit)
			break;
		/*
		 * The callback may free the page table before it returns; keep
		 * what we need. Pages stay pinned while it runs (a consumer may
		 * still be reading them until it returns).
		 */
		{
			struct page **upages = hit->upages;
			unsigned long npages = hit->npages;

			hit->upages = NULL;
			hit->cb(hit->data);
			unpin_user_pages(upages, npages);
			kvfree(upages);
			spin_lock(&fake_lock);
			fake_st.pinned_pages -= npages;
			spin_unlock(&fake_lock);
		}
		fired++;
	}
	spin_lock(&fake_lock);
	list_for_each_entry(fpt, &fake_live, node)
		if (fpt->tgid == tgid && fpt->persistent &&
		    fpt->va < va + len && fpt->va + fpt->len > va)
			fake_st.persistent_free_skipped++;
	spin_unlock(&fake_lock);
	mutex_unlock(&fake_rm_lock);
	return fired;
}

static ssize_t fake_free_write(struct file *file, const char __user *ubuf,
			       size_t count, loff_t *ppos)
{
	char buf[96];
	long long tgid;
	u64 va, len;

	if (count >= sizeof(buf))
		return -EINVAL;
	if (copy_from_user(buf, ubuf, count))
		return -EFAULT;
	buf[count] = '\0';
	if (sscanf(buf, "%lld %llx %llx", &tgid, &va, &len) != 3 || !len)
		return -EINVAL;
	if (tgid == 0)
		tgid = task_tgid_nr(current);
	fake_fire((pid_t)tgid, va, len);
	return count;
}

static const struct file_operations fake_free_fops = {
	.owner = THIS_MODULE,
	.write = fake_free_write,
	.llseek = noop_llseek,
};

static ssize_t fake_inject_write(struct file *file, const char __user *ubuf,
				 size_t count, loff_t *ppos)
{
	char buf[48];
	int err, n;

	if (count >= sizeof(buf))
		return -EINVAL;
	if (copy_from_user(buf, ubuf, count))
		return -EFAULT;
	buf[count] = '\0';
	if (sscanf(buf, "%d %d", &err, &n) != 2 || err <= 0 || err > 4095 ||
	    n < 0)
		return -EINVAL;
	atomic_set(&fake_inject_errno, err);
	atomic_set(&fake_inject_count, n);
	return count;
}

static const struct file_operations fake_inject_fops = {
	.owner = THIS_MODULE,
	.write = fake_inject_write,
	.llseek = noop_llseek,
};

static int fake_stats_show(struct seq_file *s, void *unused)
{
	spin_lock(&fake_lock);
#define FAKE_SHOW(f) seq_printf(s, "%s %ld\n", #f, fake_st.f)
	FAKE_SHOW(live_pts);
	FAKE_SHOW(zombie_pts);
	FAKE_SHOW(live_maps);
	FAKE_SHOW(dead_maps);
	FAKE_SHOW(pinned_pages);
	FAKE_SHOW(get_pages);
	FAKE_SHOW(get_persistent);
	FAKE_SHOW(put_pages);
	FAKE_SHOW(put_notfound);
	FAKE_SHOW(callbacks);
	FAKE_SHOW(persistent_free_skipped);
	FAKE_SHOW(free_page_table);
	FAKE_SHOW(dma_map);
	FAKE_SHOW(dma_unmap);
	FAKE_SHOW(free_dma_mapping);
	FAKE_SHOW(injected);
	FAKE_SHOW(errors);
#undef FAKE_SHOW
	spin_unlock(&fake_lock);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(fake_stats);

static int __init fake_init(void)
{
	fake_dir = debugfs_create_dir("fake_nvp2p", NULL);
	debugfs_create_file("free", 0200, fake_dir, NULL, &fake_free_fops);
	debugfs_create_file("inject", 0200, fake_dir, NULL, &fake_inject_fops);
	debugfs_create_u32("put_delay_ms", 0600, fake_dir, &fake_put_delay_ms);
	debugfs_create_u32("unmap_delay_ms", 0600, fake_dir,
			   &fake_unmap_delay_ms);
	debugfs_create_bool("refuse_persistent", 0600, fake_dir,
			    &fake_refuse_persistent);
	debugfs_create_x32("pt_version", 0600, fake_dir, &fake_pt_version);
	debugfs_create_file("stats", 0400, fake_dir, NULL, &fake_stats_fops);
	pr_info("fake_nvp2p: loaded (test provider, not a GPU driver)\n");
	return 0;
}

static void __exit fake_exit(void)
{
	struct fake_pt *fpt, *tmp;
	struct fake_map *fm, *tm;

	debugfs_remove_recursive(fake_dir);
	/* Nothing may be left: gdrpin holds this module while it pins. */
	WARN_ON(!list_empty(&fake_live) || !list_empty(&fake_zombies) ||
		!list_empty(&fake_dead_maps));
	list_for_each_entry_safe(fpt, tmp, &fake_live, node) {
		list_del(&fpt->node);
		fake_unpin(fpt);
		fake_pt_free(fpt);
	}
	list_for_each_entry_safe(fpt, tmp, &fake_zombies, node) {
		list_del(&fpt->node);
		fake_pt_free(fpt);
	}
	list_for_each_entry_safe(fm, tm, &fake_dead_maps, node) {
		list_del(&fm->node);
		kfree(fm->m.dma_addresses);
		kfree(fm);
	}
}

module_init(fake_init);
module_exit(fake_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("Test-only fake of the NVIDIA nv-p2p API backed by host pages");
