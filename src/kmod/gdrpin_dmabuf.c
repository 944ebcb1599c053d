// SPDX-License-Identifier: GPL-2.0
/*
 * gdrpin: DMA-BUF pins (GDRPIN_IOC_PIN_DMABUF).
 *
 * NVIDIA deprecates nv-p2p for GPUDirect RDMA in favour of DMA-BUF
 * (cuMemGetHandleForAddressRange), so gdrpin also pins a dma-buf: a dynamic
 * attachment of gdrpin's own device to the buffer, mapped once, held for as
 * long as the pin lives. Everything else (slot, handle, quota, statistics,
 * status page, poll, eventfd, GET_REVOKED, release on close or exit) is the
 * common pin machinery of gdrpin_pin.c, which calls this mode through
 * gdrpin_dmabuf_ops.
 *
 * Pinned or revocable: where the exporter is dynamic and the kernel was
 * built with CONFIG_DMABUF_MOVE_NOTIFY, the exporter may move the buffer
 * and tells importers through move_notify; elsewhere gdrpin pins the buffer
 * (dma_buf_pin) so that it stays put. Either way a move_notify revokes the
 * pin: after it the mapping gdrpin holds is stale (moved, or the memory is
 * gone), which is exactly what a revocation reports.
 *
 * Locks: the buffer's reservation lock (dma_resv) is taken with no gdrpin
 * lock held. move_notify runs under it and takes only pin->lock,
 * notify_lock and ctx->ev_lock (gdrpin_pin_revoke). The attachment's
 * importer_priv is the pin: the pin's reference outlives dma_buf_detach(),
 * after which no move_notify can reach it.
 */
#include <linux/dma-buf.h>
#include <linux/dma-mapping.h>
#include <linux/dma-resv.h>
#include <linux/ktime.h>
#include <linux/module.h>
#include <linux/slab.h>

#include "gdrpin.h"
#include "gdrpin_compat.h"

#ifdef GDRPIN_HAVE_MODULE_IMPORT_NS_IDENT
MODULE_IMPORT_NS(DMA_BUF);
#else
MODULE_IMPORT_NS("DMA_BUF");
#endif

struct gdrpin_dmabuf {
	struct dma_buf *buf;		/* referenced */
	struct dma_buf_attachment *att;
	struct sg_table *sgt;
	bool pinned;			/* dma_buf_pin() done */
};

static struct device *gdrpin_dma_dev;

/*
 * Exporters map the buffer for the importing device; gdrpin's misc device
 * takes any address, as a device behind no IOMMU would.
 */
void gdrpin_dmabuf_setup(struct device *dev)
{
	dev->coherent_dma_mask = DMA_BIT_MASK(64);
	dev->dma_mask = &dev->coherent_dma_mask;
	gdrpin_dma_dev = dev;
}

static void gdrpin_dmabuf_move_notify(struct dma_buf_attachment *att)
{
	struct gdrpin_range *pin = att->importer_priv;

	dma_resv_assert_held(att->dmabuf->resv);
	gdrpin_pin_revoke(pin);
}

static const struct dma_buf_attach_ops gdrpin_dmabuf_attach_ops = {
	.allow_peer2peer = true,	/* GPU memory has no struct pages */
	.GDRPIN_DMABUF_NOTIFY = gdrpin_dmabuf_move_notify,
};

/* Unmap, unpin, detach and drop the buffer; does not free @db. */
static void gdrpin_dmabuf_drop(struct gdrpin_dmabuf *db)
{
	if (db->att) {
		dma_resv_lock(db->buf->resv, NULL);
		if (db->sgt)
			dma_buf_unmap_attachment(db->att, db->sgt,
						 DMA_BIDIRECTIONAL);
		if (db->pinned)
			dma_buf_unpin(db->att);
		dma_resv_unlock(db->buf->resv);
		dma_buf_detach(db->buf, db->att);
		db->att = NULL;
	}
	dma_buf_put(db->buf);
}

static void gdrpin_dmabuf_release(struct gdrpin_dmabuf *db)
{
	gdrpin_dmabuf_drop(db);
	kfree(db);
}

/* Attach, pin where the buffer could otherwise move unseen, map. */
static int gdrpin_dmabuf_attach(struct gdrpin_range *pin,
				struct gdrpin_dmabuf *db)
{
	struct dma_buf_attachment *att;
	struct sg_table *sgt;
	int ret = 0;

	att = dma_buf_dynamic_attach(db->buf, gdrpin_dma_dev,
				     &gdrpin_dmabuf_attach_ops, pin);
	if (IS_ERR(att))
		return PTR_ERR(att);
	db->att = att;
	dma_resv_lock(db->buf->resv, NULL);
	if (!dma_buf_is_dynamic(db->buf) ||
	    !IS_ENABLED(CONFIG_DMABUF_MOVE_NOTIFY)) {
		ret = dma_buf_pin(att);
		db->pinned = !ret;
	}
	if (!ret) {
		sgt = dma_buf_map_attachment(att, DMA_BIDIRECTIONAL);
		if (IS_ERR(sgt))
			ret = PTR_ERR(sgt);
		else
			db->sgt = sgt;
	}
	dma_resv_unlock(db->buf->resv);
	return ret;
}

/*
 * gdrpin_dmabuf_ops.pin: @req is the buffer, now the pin's (released here
 * on failure).
 */
static int gdrpin_dmabuf_pin_op(struct gdrpin_range *pin, void *req)
{
	struct gdrpin_dmabuf *db = req;
	int ret;

	pin->mode = GDRPIN_MODE_DMABUF;
	pin->pt_freed = true;	/* no nv-p2p page table, ever */
	ret = gdrpin_dmabuf_attach(pin, db);
	if (ret) {
		gdrpin_dmabuf_release(db);	/* detached: no move_notify after */
		return ret;
	}
	pin->page_size = PAGE_SIZE;
	pin->entries = db->sgt->nents;
	pin->db = db;
	return 0;
}

/* gdrpin_dmabuf_ops.teardown (see struct gdrpin_pin_ops). */
static void gdrpin_dmabuf_teardown(struct gdrpin_range *pin)
{
	struct gdrpin_dmabuf *db = pin->db;
	bool active;

	spin_lock(&pin->lock);
	active = pin->state == GDRPIN_PS_ACTIVE;
	if (active)
		pin->state = GDRPIN_PS_RELEASING;
	spin_unlock(&pin->lock);
	if (active)
		gdrpin_pin_notify(pin, GDRPIN_REVOKE_UNPINNED);
	/* kapi map calls that entered while ACTIVE are done with pin->db */
	wait_event(pin->busy_wq, !READ_ONCE(pin->nv_busy));
	pin->db = NULL;
	if (db)
		gdrpin_dmabuf_release(db);	/* detached: no move_notify after */
}

/* No page table: a revocation leaves nothing for free_revoked. */
static const struct gdrpin_pin_ops gdrpin_dmabuf_ops = {
	.pin = gdrpin_dmabuf_pin_op,
	.teardown = gdrpin_dmabuf_teardown,
};

/* PIN_DMABUF: pin the whole buffer a->fd, placed at a->va. */
int gdrpin_dmabuf_pin(struct gdrpin_ctx *ctx, struct gdrpin_pin_dmabuf_args *a)
{
	struct gdrpin_dmabuf *db;
	struct gdrpin_range *pin;
	u64 t0 = ktime_get_ns(), len;
	int ret;

	db = kzalloc(sizeof(*db), GFP_KERNEL);
	if (!db)
		return -ENOMEM;
	db->buf = dma_buf_get(a->fd);
	if (IS_ERR(db->buf)) {
		ret = PTR_ERR(db->buf);
		kfree(db);
		return ret;
	}
	len = db->buf->size;
	if (!gdrpin_pin_range_ok(a->va, len)) {
		ret = -EINVAL;
		goto err_buf;
	}
	pin = gdrpin_pin_new(ctx, &gdrpin_dmabuf_ops, a->va, len);
	if (IS_ERR(pin)) {
		ret = PTR_ERR(pin);
		goto err_buf;
	}
	/* move_notify before the pin was ACTIVE: -ESTALE */
	ret = gdrpin_pin_make(pin, db, t0);
	if (ret)
		return ret;
	a->handle = pin->handle;
	a->pinned_len = pin->len;
	a->slot = pin->slot;
	a->mode = pin->mode;
	a->entries = pin->entries;
	gdrpin_pin_put(pin);		/* the table keeps its reference */
	return 0;

err_buf:
	dma_buf_put(db->buf);
	kfree(db);
	return ret;
}

/* --- in-kernel API: a consumer's own mapping (gdrpin_kapi.h) ----------- */

struct gdrpin_dmabuf_map {
	struct gdrpin_range *pin;	/* referenced */
	struct gdrpin_dmabuf db;	/* buf referenced; never kfree'd alone */
};

static void gdrpin_dmabuf_map_move_notify(struct dma_buf_attachment *att)
{
	struct gdrpin_dmabuf_map *m = att->importer_priv;

	dma_resv_assert_held(att->dmabuf->resv);
	gdrpin_pin_revoke(m->pin);
}

static const struct dma_buf_attach_ops gdrpin_dmabuf_map_ops = {
	.allow_peer2peer = true,
	.GDRPIN_DMABUF_NOTIFY = gdrpin_dmabuf_map_move_notify,
};

static void gdrpin_range_dmabuf_unmap_one(struct gdrpin_dmabuf_map *m)
{
	gdrpin_dmabuf_drop(&m->db);	/* detached: no move_notify after */
	gdrpin_pin_put(m->pin);
	kfree(m);
}

/**
 * gdrpin_range_dmabuf_map() - map a held DMA-BUF pin for a device
 * @r: the pin, held by gdrpin_range_get(), of mode GDRPIN_MODE_DMABUF
 * @dev: the consumer's device, which DMAs to the pin
 * @map_p: set to the mapping on success
 *
 * Attaches @dev to the pin's dma-buf (its own reference on the buffer and
 * on @r), pins the attachment and maps it: @dev cannot follow a move, so
 * the buffer stays where it is until gdrpin_range_dmabuf_unmap(). Takes
 * the buffer's reservation lock; must not be called with it held, nor
 * from revoke(). May sleep.
 *
 * Return: 0 and *@map_p; -EOPNOTSUPP for a pin of another mode; -ENOMEM;
 * -ESTALE when the pin is being unpinned or was revoked meanwhile; or the
 * error of the dma-buf attach, pin or map.
 */
int gdrpin_range_dmabuf_map(struct gdrpin_range *r, struct device *dev,
			    struct gdrpin_dmabuf_map **map_p)
{
	struct dma_buf_attachment *att;
	struct gdrpin_dmabuf_map *m;
	struct sg_table *sgt;
	int ret;

	if (r->mode != GDRPIN_MODE_DMABUF)
		return -EOPNOTSUPP;
	m = kzalloc(sizeof(*m), GFP_KERNEL);
	if (!m)
		return -ENOMEM;
	/* busy keeps the owner's teardown from releasing r->db under us */
	if (!gdrpin_pin_busy_enter(r)) {
		kfree(m);
		return -ESTALE;
	}
	m->db.buf = r->db->buf;
	get_dma_buf(m->db.buf);
	gdrpin_pin_busy_exit(r);
	gdrpin_pin_get(r);
	m->pin = r;

	att = dma_buf_dynamic_attach(m->db.buf, dev, &gdrpin_dmabuf_map_ops, m);
	if (IS_ERR(att)) {
		ret = PTR_ERR(att);
		goto err;
	}
	m->db.att = att;
	/* a consumer's device cannot follow a move: always pinned */
	dma_resv_lock(m->db.buf->resv, NULL);
	ret = dma_buf_pin(att);
	m->db.pinned = !ret;
	if (!ret) {
		sgt = dma_buf_map_attachment(att, DMA_BIDIRECTIONAL);
		if (IS_ERR(sgt))
			ret = PTR_ERR(sgt);
		else
			m->db.sgt = sgt;
	}
	dma_resv_unlock(m->db.buf->resv);
	if (ret)
		goto err;
	if (gdrpin_pin_user_state(r) != GDRPIN_SLOT_ACTIVE) {
		ret = -ESTALE;	/* revoked while we mapped */
		goto err;
	}
	atomic64_inc(&gdrpin_cnt.kapi_refs);
	*map_p = m;
	return 0;
err:
	gdrpin_range_dmabuf_unmap_one(m);
	return ret;
}
EXPORT_SYMBOL_GPL(gdrpin_range_dmabuf_map);

/**
 * gdrpin_dmabuf_map_sgt() - the device's DMA addresses of a mapping
 * @map: a mapping made by gdrpin_range_dmabuf_map()
 *
 * Return: the scatter table of the mapped attachment, valid until
 * gdrpin_range_dmabuf_unmap(); after revoke() the memory behind it may be
 * gone (include/gdrpin_kapi.h).
 */
const struct sg_table *gdrpin_dmabuf_map_sgt(struct gdrpin_dmabuf_map *map)
{
	return map->db.sgt;
}
EXPORT_SYMBOL_GPL(gdrpin_dmabuf_map_sgt);

/**
 * gdrpin_range_dmabuf_unmap() - undo gdrpin_range_dmabuf_map()
 * @r: the pin the mapping was made on
 * @map: the mapping
 *
 * Unmaps, unpins and detaches the attachment, and drops the mapping's
 * references on the buffer and on @r; call it even after revoke(), but
 * never from it (revoke() may run under the buffer's reservation lock).
 * A @map made on another pin is refused with a warning. May sleep.
 */
void gdrpin_range_dmabuf_unmap(struct gdrpin_range *r,
			       struct gdrpin_dmabuf_map *map)
{
	if (WARN_ON(map->pin != r))
		return;
	atomic64_dec(&gdrpin_cnt.kapi_refs);
	gdrpin_range_dmabuf_unmap_one(map);
}
EXPORT_SYMBOL_GPL(gdrpin_range_dmabuf_unmap);
