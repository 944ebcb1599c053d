/* SPDX-License-Identifier: GPL-2.0 */
/*
 * gdrpin in-kernel API (kernel-only header).
 *
 * A device driver (an RDMA NIC, a storage controller, ...) that is handed a
 * GPU virtual address by a process can find the pin gdrpin holds for it,
 * read its page table, map it for its own PCI device and learn when the pin
 * goes away.
 *
 * Lifetime:
 *   r = gdrpin_range_get(pid, va, len);    takes a reference (ERR_PTR on miss)
 *   gdrpin_range_notifier_register(r, &n); n.revoke() runs once when the pin
 *                                          is revoked (GPU memory freed) or
 *                                          unpinned (unpin, close, exit)
 *   pt = gdrpin_range_page_table(r);       valid until n.revoke() returns
 *   gdrpin_range_dma_map(r, pdev, &map);   nvidia_p2p_dma_map_pages
 *   gdrpin_range_dma_unmap(r, map);        always call it, even after revoke
 *   gdrpin_range_notifier_unregister(r, &n);
 *   gdrpin_range_put(r);
 *
 * Rules for revoke(): it is called synchronously, possibly from the NVIDIA
 * free callback under NVIDIA's internal locks. It must stop every use of the
 * page table and DMA addresses before it returns and must not call into
 * nv-p2p or into gdrpin functions other than gdrpin_range_dma_unmap() (which
 * does not call nv-p2p once revoke has started). It may sleep but must not
 * wait for a thread that calls gdrpin_range_dma_map().
 * After revoke() the page table and mappings belong to gdrpin, which frees
 * or unmaps them.
 *
 * DMA-BUF pins (info.mode GDRPIN_MODE_DMABUF) have no page table and no
 * nv-p2p mapping (gdrpin_range_dma_map() answers -EOPNOTSUPP); a consumer
 * maps the buffer for its own device instead:
 *   gdrpin_range_dmabuf_map(r, dev, &dm);  a pinned attachment of dev
 *   sgt = gdrpin_dmabuf_map_sgt(dm);       dev's DMA addresses of the pin
 *   gdrpin_range_dmabuf_unmap(r, dm);      always call it, even after revoke
 * The mapping holds the buffer, so it stays valid after revoke() until it
 * is unmapped, but the memory behind it may be gone: stop using it in
 * revoke(). revoke() of a DMA-BUF pin may run under the buffer's
 * reservation lock (move_notify): it must not call
 * gdrpin_range_dmabuf_unmap().
 */
#ifndef GDRPIN_KAPI_H
#define GDRPIN_KAPI_H

#include <linux/list.h>
#include <linux/types.h>

struct pid;
struct pci_dev;
struct nvidia_p2p_page_table;
struct nvidia_p2p_dma_mapping;
struct device;
struct sg_table;
struct gdrpin_dmabuf_map;	/* opaque: a consumer's mapping of a DMA-BUF pin */

struct gdrpin_range;		/* opaque: a referenced pin */
struct gdrpin_dma_map;		/* opaque: one DMA mapping of a range */

#define GDRPIN_REVOKE_FREED	1	/* driver freed the memory (callback) */
#define GDRPIN_REVOKE_UNPINNED	2	/* owner unpinned, closed or exited */

struct gdrpin_notifier {
	void (*revoke)(struct gdrpin_notifier *n, struct gdrpin_range *r,
		       int reason);
	struct list_head node;	/* private to gdrpin */
};

struct gdrpin_range_info {
	u64 va;			/* pinned (64 KiB aligned) start */
	u64 len;		/* pinned length */
	u32 page_size;		/* bytes per page table entry */
	u32 entries;
	u32 mode;		/* GDRPIN_MODE_* */
	u32 state;		/* GDRPIN_SLOT_ACTIVE or _REVOKED */
};

/* Find the live pin of process @tgid covering [va, va + len). */
struct gdrpin_range *gdrpin_range_get(struct pid *tgid, u64 va, u64 len);
struct gdrpin_range *gdrpin_range_get_by_nr(pid_t tgid, u64 va, u64 len);
void gdrpin_range_put(struct gdrpin_range *r);

int gdrpin_range_info(struct gdrpin_range *r, struct gdrpin_range_info *info);
const struct nvidia_p2p_page_table *
gdrpin_range_page_table(struct gdrpin_range *r);

int gdrpin_range_dma_map(struct gdrpin_range *r, struct pci_dev *pdev,
			 struct gdrpin_dma_map **map_p);
const struct nvidia_p2p_dma_mapping *
gdrpin_dma_map_mapping(struct gdrpin_dma_map *map);
void gdrpin_range_dma_unmap(struct gdrpin_range *r, struct gdrpin_dma_map *map);

int gdrpin_range_notifier_register(struct gdrpin_range *r,
				   struct gdrpin_notifier *n);
void gdrpin_range_notifier_unregister(struct gdrpin_range *r,
				      struct gdrpin_notifier *n);

int gdrpin_range_dmabuf_map(struct gdrpin_range *r, struct device *dev,
			    struct gdrpin_dmabuf_map **map_p);
const struct sg_table *gdrpin_dmabuf_map_sgt(struct gdrpin_dmabuf_map *map);
void gdrpin_range_dmabuf_unmap(struct gdrpin_range *r,
			       struct gdrpin_dmabuf_map *map);

#endif /* GDRPIN_KAPI_H */
