// SPDX-License-Identifier: GPL-2.0
/*
 * An importer's dma_buf_attach_ops callback for "the exporter is moving
 * the buffer": move_notify until 7.x, invalidate_mappings since.
 */
#include <linux/dma-buf.h>

static void probe_invalidate(struct dma_buf_attachment *att)
{
}

const struct dma_buf_attach_ops gdrpin_probe_attach_ops = {
	.invalidate_mappings = probe_invalidate,
};
