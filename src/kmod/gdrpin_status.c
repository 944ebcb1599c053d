// SPDX-License-Identifier: GPL-2.0
/*
 * gdrpin: the per-fd status page, revocation events, poll and eventfd.
 *
 * The status area is mapped read-only into the owner (offset 0). The kernel writes a slot's state before it bumps revoke_count
 * (smp_wmb in between), so user space polls one counter on its data path.
 */
#include <linux/eventfd.h>
#include <linux/mm.h>
#include <linux/moduleparam.h>
#include <linux/vmalloc.h>

#include "gdrpin.h"
#include "gdrpin_compat.h"

unsigned int gdrpin_status_pages = 16;
module_param_named(status_pages, gdrpin_status_pages, uint, 0444);
MODULE_PARM_DESC(status_pages, "Pages of status area per fd (slots)");

/*
 * The status area is pages of our own, charged to the opener's memory
 * cgroup (an open fd costs status_pages pages that user space made the
 * kernel allocate), mapped into the kernel with vmap() and into the owner
 * with vm_insert_pages().
 */
int gdrpin_status_alloc(struct gdrpin_ctx *ctx)
{
	u32 npages = gdrpin_status_pages, size = npages * PAGE_SIZE, i;
	u32 nslots;

	nslots = (size - sizeof(struct gdrpin_status_header)) /
		 sizeof(struct gdrpin_status_slot);
	nslots = min_t(u32, nslots, GDRPIN_MAX_SLOTS);
	ctx->status_pages = kcalloc(npages, sizeof(*ctx->status_pages),
				    GFP_KERNEL_ACCOUNT);
	if (!ctx->status_pages)
		return -ENOMEM;
	for (i = 0; i < npages; i++) {
		ctx->status_pages[i] = alloc_page(GFP_KERNEL_ACCOUNT |
						  __GFP_ZERO);
		if (!ctx->status_pages[i])
			goto err;
	}
	ctx->status = vmap(ctx->status_pages, npages, VM_MAP, PAGE_KERNEL);
	if (!ctx->status)
		goto err;
	ctx->status_size = size;
	ctx->nslots = nslots;
	ctx->slots = (struct gdrpin_status_slot *)(ctx->status + 1);
	ctx->status->magic = GDRPIN_STATUS_MAGIC;
	ctx->status->abi_version = GDRPIN_ABI_VERSION;
	ctx->status->header_size = sizeof(struct gdrpin_status_header);
	ctx->status->slot_size = sizeof(struct gdrpin_status_slot);
	ctx->status->nslots = nslots;
	return 0;
err:
	ctx->status_size = size;
	gdrpin_status_free(ctx);
	return -ENOMEM;
}

void gdrpin_status_free(struct gdrpin_ctx *ctx)
{
	u32 i;

	if (ctx->status)
		vunmap(ctx->status);
	ctx->status = NULL;
	for (i = 0; ctx->status_pages && i < ctx->status_size / PAGE_SIZE; i++)
		if (ctx->status_pages[i])
			__free_page(ctx->status_pages[i]);
	kfree(ctx->status_pages);
	ctx->status_pages = NULL;
}

int gdrpin_status_mmap(struct gdrpin_ctx *ctx, struct vm_area_struct *vma)
{
	unsigned long len = vma->vm_end - vma->vm_start;
	unsigned long npages = len >> PAGE_SHIFT;

	if (vma->vm_pgoff != 0 || len > ctx->status_size)
		return -EINVAL;
	if (vma->vm_flags & VM_WRITE)
		return -EPERM;
	vm_flags_clear(vma, VM_MAYWRITE);
	/* Not inherited by fork; the child is not the owner anyway. */
	vm_flags_set(vma, VM_DONTCOPY | VM_DONTEXPAND | VM_DONTDUMP);
	return vm_insert_pages(vma, vma->vm_start, ctx->status_pages, &npages);
}

/* ctx->ev_lock held. */
void gdrpin_status_set(struct gdrpin_ctx *ctx, u32 slot, u64 gen, u32 state)
{
	struct gdrpin_status_slot *s = &ctx->slots[slot];

	lockdep_assert_held(&ctx->ev_lock);
	if (state == GDRPIN_SLOT_ACTIVE) {
		/* Readers see the generation before the state. */
		WRITE_ONCE(s->state, GDRPIN_SLOT_FREE);
		smp_wmb(); /* FREE is visible before the new generation */
		WRITE_ONCE(s->gen, gen);
		smp_wmb(); /* the generation is visible before ACTIVE */
	}
	WRITE_ONCE(s->state, state);
}

/*
 * Free callback: mark @pin revoked if it still owns its slot, and signal.
 * The eventfd is signalled under ev_lock, which also guards its swap in
 * gdrpin_status_set_eventfd(), so it cannot be put concurrently.
 */
void gdrpin_status_revoked(struct gdrpin_ctx *ctx, struct gdrpin_range *pin)
{
	bool listed;

	spin_lock(&ctx->ev_lock);
	listed = pin->listed;
	if (listed) {
		gdrpin_status_set(ctx, pin->slot, pin->gen, GDRPIN_SLOT_REVOKED);
		smp_wmb(); /* pairs with the reader's acquire of revoke_count */
		WRITE_ONCE(ctx->status->revoke_count,
			   ctx->status->revoke_count + 1);
		list_add_tail(&pin->revoked_node, &ctx->revoked);
		ctx->nrevoked++;
		ctx->revocations++;
		if (ctx->evfd)
			gdrpin_eventfd_signal(ctx->evfd);
	}
	spin_unlock(&ctx->ev_lock);
	if (listed)
		wake_up_interruptible_all(&ctx->wq);
}

int gdrpin_status_set_eventfd(struct gdrpin_ctx *ctx, int fd)
{
	struct eventfd_ctx *evfd = NULL, *old;

	if (fd >= 0) {
		evfd = eventfd_ctx_fdget(fd);
		if (IS_ERR(evfd))
			return PTR_ERR(evfd);
	} else if (fd != -1) {
		return -EINVAL;
	}
	spin_lock(&ctx->ev_lock);
	old = ctx->evfd;
	ctx->evfd = evfd;
	/* Revocations already pending are announced to the new eventfd. */
	if (evfd && ctx->nrevoked)
		gdrpin_eventfd_signal(evfd);
	spin_unlock(&ctx->ev_lock);
	if (old)
		eventfd_ctx_put(old);
	return 0;
}
