// SPDX-License-Identifier: GPL-2.0
/*
 * fake_ibcore: a TEST-ONLY stand-in for the peer-memory client API of
 * MLNX_OFED's ib_core (src/kmod/gdrpin_peermem.h).
 *
 * It exports ib_register_peer_memory_client and
 * ib_unregister_peer_memory_client and drives a client the way ib_core
 * does for ibv_reg_mr: in the registering process, acquire -> get_pages ->
 * dma_map; at deregistration dma_unmap -> put_pages -> release. The
 * invalidate callback it hands out does what newer ib_core does: it stops
 * the "HCA" and calls dma_unmap and put_pages from inside the callback;
 * deregistration then only releases. Unregistering a client (or unloading
 * this module) tears its live registrations down through the client.
 *
 * It never holds a lock of its own across a client call (reg_lock is a
 * spinlock taken for state changes only); client_lock serialises
 * registration, deregistration and unregistration, as ib_core's client
 * reference does, and is never taken by the invalidate callback.
 *
 * Controls (debugfs, /sys/kernel/debug/fake_ibcore/):
 *   ctl    write "reg <tgid> <va> <len>" (tgid 0 or the caller's own:
 *          ib_core registers in the caller's context), then read
 *          "id=<n> nmap=<n> page_size=<n> csum=<hex>": csum is FNV-1a of
 *          [va, va + len) read through the DMA addresses (identity DMA in
 *          the lab); no client claims the range: -ENXIO.
 *          write "dereg <id>"; "csum <id>" reads the data again (-ESTALE
 *          once invalidated).
 *   stats  clients, live_regs, invalidations (callbacks seen),
 *          invalidate_unmaps (unmapped inside one), teardowns (by
 *          unregister or unload), errors (client misbehaved)
 */
#include <linux/debugfs.h>
#include <linux/highmem.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/pci.h>
#include <linux/scatterlist.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/xarray.h>

#include "gdrpin_peermem.h"

enum fib_state {
	FIB_MAPPED,		/* the HCA may use the pages */
	FIB_UNMAPPING,		/* someone is calling dma_unmap + put_pages */
	FIB_UNMAPPED,
};

struct fib_client {
	struct list_head node;
	const struct peer_memory_client *ops;
};

struct fib_reg {
	u32 id;
	struct fib_client *client;
	void *cc;			/* client context */
	struct sg_table sg;
	struct pci_dev *pdev;
	u64 va;
	u64 len;
	unsigned long page_size;
	int nmap;
	enum fib_state state;		/* reg_lock */
	bool invalidated;		/* reg_lock */
};

static DEFINE_MUTEX(fib_client_lock);	/* clients, reg/dereg/unregister */
static LIST_HEAD(fib_clients);
static DEFINE_SPINLOCK(fib_reg_lock);	/* fib_regs' states */
static DEFINE_XARRAY_ALLOC1(fib_regs);	/* id -> struct fib_reg */
static DECLARE_WAIT_QUEUE_HEAD(fib_wq);	/* an UNMAPPING reg settled */
static struct dentry *fib_dir;

static struct {
	atomic64_t live_regs;
	atomic64_t invalidations;
	atomic64_t invalidate_unmaps;
	atomic64_t teardowns;
	atomic64_t errors;
} fib_st;

/* Claim the unmap of @reg: true if the caller must unmap it now. */
static bool fib_claim(struct fib_reg *reg)
{
	bool mine;

	spin_lock(&fib_reg_lock);
	mine = reg->state == FIB_MAPPED;
	if (mine)
		reg->state = FIB_UNMAPPING;
	spin_unlock(&fib_reg_lock);
	return mine;
}

static void fib_unmap(struct fib_reg *reg)
{
	const struct peer_memory_client *ops = reg->client->ops;

	if (ops->dma_unmap(&reg->sg, reg->cc, &reg->pdev->dev))
		atomic64_inc(&fib_st.errors);
	ops->put_pages(&reg->sg, reg->cc);
	spin_lock(&fib_reg_lock);
	reg->state = FIB_UNMAPPED;
	spin_unlock(&fib_reg_lock);
	wake_up_all(&fib_wq);
}

static bool fib_settled(struct fib_reg *reg)
{
	bool ret;

	spin_lock(&fib_reg_lock);
	ret = reg->state != FIB_UNMAPPING;
	spin_unlock(&fib_reg_lock);
	return ret;
}

/* client_lock held; @reg is off fib_regs. */
static void fib_destroy(struct fib_reg *reg)
{
	lockdep_assert_held(&fib_client_lock);
	if (fib_claim(reg))
		fib_unmap(reg);
	/* an invalidation that is unmapping it must finish first */
	wait_event(fib_wq, fib_settled(reg));
	reg->client->ops->release(reg->cc);
	pci_dev_put(reg->pdev);
	kfree(reg);
	atomic64_dec(&fib_st.live_regs);
}

/* The client's memory is going: stop using it, then give it back. */
static int fib_invalidate(void *reg_handle, u64 core_context)
{
	struct fib_reg *reg;
	bool mine = false;

	atomic64_inc(&fib_st.invalidations);
	xa_lock(&fib_regs);
	reg = xa_load(&fib_regs, core_context);
	if (reg && reg->client == reg_handle) {
		spin_lock(&fib_reg_lock);
		reg->invalidated = true;
		mine = reg->state == FIB_MAPPED;
		if (mine)
			reg->state = FIB_UNMAPPING;
		spin_unlock(&fib_reg_lock);
	}
	xa_unlock(&fib_regs);
	/* An UNMAPPING reg is not freed before it settles (fib_destroy). */
	if (mine) {
		fib_unmap(reg);
		atomic64_inc(&fib_st.invalidate_unmaps);
	}
	return 0;
}

/* FNV-1a of [va, va + len) as the HCA sees it through the sg list. */
static int fib_csum(struct fib_reg *reg, u64 *sum)
{
	u64 off = reg->va & (reg->page_size - 1), len = reg->len;
	u64 h = 0xcbf29ce484222325ULL;
	struct scatterlist *sg;
	int i;

	for_each_sg(reg->sg.sgl, sg, reg->nmap, i) {
		u64 a = sg_dma_address(sg) + off, end = sg_dma_address(sg) +
						       sg_dma_len(sg);

		off = 0;
		while (len && a < end) {
			size_t n = min_t(u64, len, PAGE_SIZE - offset_in_page(a));
			u8 *kva = kmap_local_page(pfn_to_page(PHYS_PFN(a)));
			size_t j;

			for (j = 0; j < n; j++) {
				h ^= kva[offset_in_page(a) + j];
				h *= 0x100000001b3ULL;
			}
			kunmap_local(kva);
			a += n;
			len -= n;
		}
	}
	if (len)
		return -ERANGE;
	*sum = h;
	return 0;
}

static int fib_reg_cmd(u64 va, u64 len, char *res, size_t reslen)
{
	struct fib_client *c;
	struct fib_reg *reg;
	u64 sum = 0;
	int ret;

	reg = kzalloc(sizeof(*reg), GFP_KERNEL);
	if (!reg)
		return -ENOMEM;
	reg->va = va;
	reg->len = len;
	reg->pdev = pci_get_device(PCI_ANY_ID, PCI_ANY_ID, NULL);
	if (!reg->pdev) {
		kfree(reg);
		return -ENODEV;
	}
	mutex_lock(&fib_client_lock);
	ret = -ENXIO;
	list_for_each_entry(c, &fib_clients, node) {
		if (c->ops->acquire(va, len, NULL, NULL, &reg->cc) == 1) {
			reg->client = c;
			ret = 0;
			break;
		}
	}
	if (ret)
		goto err_unlock;
	/* the id is the core context: in the table before get_pages */
	reg->state = FIB_UNMAPPED;
	ret = xa_alloc(&fib_regs, &reg->id, reg, xa_limit_31b, GFP_KERNEL);
	if (ret)
		goto err_release;
	atomic64_inc(&fib_st.live_regs);
	ret = c->ops->get_pages(va, len, 1, 0, &reg->sg, reg->cc, reg->id);
	if (ret)
		goto err_erase;
	ret = c->ops->dma_map(&reg->sg, reg->cc, &reg->pdev->dev, 0,
			      &reg->nmap);
	if (ret) {
		c->ops->put_pages(&reg->sg, reg->cc);
		goto err_erase;
	}
	reg->page_size = c->ops->get_page_size(reg->cc);
	spin_lock(&fib_reg_lock);
	reg->state = FIB_MAPPED;
	/* invalidated while we mapped: the HCA never uses it */
	if (reg->invalidated)
		ret = -ESTALE;
	spin_unlock(&fib_reg_lock);
	if (!ret)
		ret = fib_csum(reg, &sum);
	if (ret) {
		xa_erase(&fib_regs, reg->id);
		fib_destroy(reg);
		mutex_unlock(&fib_client_lock);
		return ret;
	}
	mutex_unlock(&fib_client_lock);
	snprintf(res, reslen, "id=%u nmap=%d page_size=%lu csum=%016llx\n",
		 reg->id, reg->nmap, reg->page_size, sum);
	return 0;

err_erase:
	xa_erase(&fib_regs, reg->id);
	atomic64_dec(&fib_st.live_regs);
err_release:
	c->ops->release(reg->cc);
err_unlock:
	mutex_unlock(&fib_client_lock);
	pci_dev_put(reg->pdev);
	kfree(reg);
	return ret;
}

static int fib_dereg_cmd(u32 id)
{
	struct fib_reg *reg;

	mutex_lock(&fib_client_lock);
	reg = xa_erase(&fib_regs, id);
	if (reg)
		fib_destroy(reg);
	mutex_unlock(&fib_client_lock);
	return reg ? 0 : -ENOENT;
}

static int fib_csum_cmd(u32 id, char *res, size_t reslen)
{
	struct fib_reg *reg;
	u64 sum;
	int ret;

	mutex_lock(&fib_client_lock);	/* keeps @reg */
	reg = xa_load(&fib_regs, id);
	ret = reg ? 0 : -ENOENT;
	if (reg) {
		spin_lock(&fib_reg_lock);
		if (reg->state != FIB_MAPPED || reg->invalidated)
			ret = -ESTALE;
		spin_unlock(&fib_reg_lock);
	}
	if (!ret)
		ret = fib_csum(reg, &sum);
	mutex_unlock(&fib_client_lock);
	if (!ret)
		snprintf(res, reslen, "csum=%016llx\n", sum);
	return ret;
}

/* --- the exported API ---------------------------------------------------- */

void *ib_register_peer_memory_client(const struct peer_memory_client *client,
				     invalidate_peer_memory *invalidate_cb)
{
	struct fib_client *c;

	if (!client || !client->acquire || !client->get_pages ||
	    !client->dma_map || !client->dma_unmap || !client->put_pages ||
	    !client->get_page_size || !client->release || !invalidate_cb)
		return NULL;
	c = kzalloc(sizeof(*c), GFP_KERNEL);
	if (!c)
		return NULL;
	c->ops = client;
	mutex_lock(&fib_client_lock);
	list_add_tail(&c->node, &fib_clients);
	mutex_unlock(&fib_client_lock);
	*invalidate_cb = fib_invalidate;
	pr_info("fake_ibcore: peer-memory client %s registered\n",
		client->name);
	return c;
}
EXPORT_SYMBOL_GPL(ib_register_peer_memory_client);

/* client_lock held: release every registration of @c (NULL: of all). */
static void fib_teardown(struct fib_client *c)
{
	struct fib_reg *reg;
	unsigned long id;

	lockdep_assert_held(&fib_client_lock);
	xa_for_each(&fib_regs, id, reg) {
		if (c && reg->client != c)
			continue;
		xa_erase(&fib_regs, id);
		fib_destroy(reg);
		atomic64_inc(&fib_st.teardowns);
	}
}

void ib_unregister_peer_memory_client(void *reg_handle)
{
	struct fib_client *c = reg_handle;

	mutex_lock(&fib_client_lock);
	fib_teardown(c);
	list_del(&c->node);
	mutex_unlock(&fib_client_lock);
	pr_info("fake_ibcore: peer-memory client %s unregistered\n",
		c->ops->name);
	kfree(c);
}
EXPORT_SYMBOL_GPL(ib_unregister_peer_memory_client);

/* --- debugfs ------------------------------------------------------------- */

struct fib_file {
	char result[128];
};

static int fib_ctl_open(struct inode *inode, struct file *file)
{
	file->private_data = kzalloc(sizeof(struct fib_file), GFP_KERNEL);
	return file->private_data ? 0 : -ENOMEM;
}

static int fib_ctl_release(struct inode *inode, struct file *file)
{
	kfree(file->private_data);
	return 0;
}

static ssize_t fib_ctl_write(struct file *file, const char __user *ubuf,
			     size_t count, loff_t *ppos)
{
	struct fib_file *f = file->private_data;
	long long tgid;
	char buf[96];
	u64 va, len;
	u32 id;
	int ret;

	if (count >= sizeof(buf))
		return -EINVAL;
	if (copy_from_user(buf, ubuf, count))
		return -EFAULT;
	buf[count] = '\0';
	f->result[0] = '\0';
	if (sscanf(buf, "reg %lld %llx %llx", &tgid, &va, &len) == 3) {
		if (!len || (tgid && tgid != task_tgid_nr(current)))
			return -EINVAL;
		ret = fib_reg_cmd(va, len, f->result, sizeof(f->result));
	} else if (sscanf(buf, "dereg %u", &id) == 1) {
		ret = fib_dereg_cmd(id);
	} else if (sscanf(buf, "csum %u", &id) == 1) {
		ret = fib_csum_cmd(id, f->result, sizeof(f->result));
	} else {
		ret = -EINVAL;
	}
	return ret ? ret : count;
}

static ssize_t fib_ctl_read(struct file *file, char __user *ubuf, size_t count,
			    loff_t *ppos)
{
	struct fib_file *f = file->private_data;

	return simple_read_from_buffer(ubuf, count, ppos, f->result,
				       strlen(f->result));
}

static const struct file_operations fib_ctl_fops = {
	.owner = THIS_MODULE,
	.open = fib_ctl_open,
	.release = fib_ctl_release,
	.write = fib_ctl_write,
	.read = fib_ctl_read,
	.llseek = default_llseek,
};

static int fib_stats_show(struct seq_file *s, void *unused)
{
	struct fib_client *c;
	int n = 0;

	mutex_lock(&fib_client_lock);
	list_for_each_entry(c, &fib_clients, node)
		n++;
	mutex_unlock(&fib_client_lock);
	seq_printf(s, "clients %d\n", n);
#define FIB_SHOW(f) seq_printf(s, "%s %lld\n", #f, \
			       (long long)atomic64_read(&fib_st.f))
	FIB_SHOW(live_regs);
	FIB_SHOW(invalidations);
	FIB_SHOW(invalidate_unmaps);
	FIB_SHOW(teardowns);
	FIB_SHOW(errors);
#undef FIB_SHOW
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(fib_stats);

static int __init fib_init(void)
{
	fib_dir = debugfs_create_dir("fake_ibcore", NULL);
	debugfs_create_file("ctl", 0600, fib_dir, NULL, &fib_ctl_fops);
	debugfs_create_file("stats", 0400, fib_dir, NULL, &fib_stats_fops);
	return 0;
}

static void __exit fib_exit(void)
{
	debugfs_remove_recursive(fib_dir);
	/*
	 * Clients hold this module (symbol_get) while registered, so none is
	 * left unless one forgot to unregister; its registrations still go
	 * back through it.
	 */
	mutex_lock(&fib_client_lock);
	WARN_ON(!list_empty(&fib_clients));
	fib_teardown(NULL);
	mutex_unlock(&fib_client_lock);
	xa_destroy(&fib_regs);
}

module_init(fib_init);
module_exit(fib_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("Test-only stand-in for ib_core's peer-memory client API");
