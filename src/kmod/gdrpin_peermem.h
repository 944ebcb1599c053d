/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Our own declarations of the "peer memory" client ABI of MLNX_OFED's
 * ib_core (the interface nvidia-peermem implements), written from its public
 * description. The struct layout must stay binary-identical to what ib_core
 * was built with: fields are never reordered here. Newer ib_core passes the
 * core context as a u64 (older releases used a pointer of the same size on
 * 64-bit kernels).
 *
 * Flow, as ib_core drives it for ibv_reg_mr on memory it does not own:
 *   acquire()       in the registering process: 1 = the range is ours
 *   get_pages()     pin it; core_context names the registration in
 *                   invalidate callbacks
 *   dma_map()       fill sg_head with DMA addresses for dma_device
 *   ... the HCA uses the memory ...
 *   dma_unmap(), put_pages(), release()
 * The client calls *invalidate (handed back at registration) when the
 * memory goes away; ib_core then stops the HCA and may call dma_unmap and
 * put_pages from inside that call.
 *
 * If MLNX_OFED's rdma/peer_mem.h was included first, it wins.
 */
#ifndef GDRPIN_PEERMEM_H
#define GDRPIN_PEERMEM_H

#include <linux/types.h>

#ifndef PEER_MEM_H

struct device;
struct sg_table;

#define IB_PEER_MEMORY_NAME_MAX	64
#define IB_PEER_MEMORY_VER_MAX	16

struct peer_memory_client {
	char name[IB_PEER_MEMORY_NAME_MAX];
	char version[IB_PEER_MEMORY_VER_MAX];
	/* 1: the range belongs to this client, 0: not ours */
	int (*acquire)(unsigned long addr, size_t size, void *peer_mem_private_data,
		       char *peer_mem_name, void **client_context);
	int (*get_pages)(unsigned long addr, size_t size, int write, int force,
			 struct sg_table *sg_head, void *client_context,
			 u64 core_context);
	int (*dma_map)(struct sg_table *sg_head, void *client_context,
		       struct device *dma_device, int dmasync, int *nmap);
	int (*dma_unmap)(struct sg_table *sg_head, void *client_context,
			 struct device *dma_device);
	void (*put_pages)(struct sg_table *sg_head, void *client_context);
	unsigned long (*get_page_size)(void *client_context);
	void (*release)(void *client_context);
	/* optional; gdrpin leaves them NULL */
	void *(*get_context_private_data)(u64 peer_id);
	void (*put_context_private_data)(void *context);
};

typedef int (*invalidate_peer_memory)(void *reg_handle, u64 core_context);

void *ib_register_peer_memory_client(const struct peer_memory_client *client,
				     invalidate_peer_memory *invalidate_cb);
void ib_unregister_peer_memory_client(void *reg_handle);

#endif /* PEER_MEM_H */

#endif /* GDRPIN_PEERMEM_H */
