/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Our own declarations of the NVIDIA peer-to-peer (nv-p2p) kernel ABI that
 * nvidia.ko exports, written from the public description of the interface
 * (see doc research notes): function prototypes, struct layouts, version
 * words. The layouts must stay binary-identical to what the NVIDIA driver
 * builds, so fields are never reordered here.
 *
 * If NVIDIA's own nv-p2p.h was included first (its guard is _NV_P2P_H_), it
 * wins and this file adds only the gdrpin helper macros.
 */
#ifndef GDRPIN_NVP2P_H
#define GDRPIN_NVP2P_H

#include <linux/types.h>

#ifndef _NV_P2P_H_

struct pci_dev;

/* Version words are (major << 16) | minor. */
#define NVIDIA_P2P_MAJOR_VERSION_MASK	0xffff0000
#define NVIDIA_P2P_MINOR_VERSION_MASK	0x0000ffff
#define NVIDIA_P2P_MAJOR_VERSION(v)	(((v) & NVIDIA_P2P_MAJOR_VERSION_MASK) >> 16)
#define NVIDIA_P2P_MINOR_VERSION(v)	((v) & NVIDIA_P2P_MINOR_VERSION_MASK)

enum nvidia_p2p_page_size_type {
	NVIDIA_P2P_PAGE_SIZE_4KB = 0,
	NVIDIA_P2P_PAGE_SIZE_64KB,
	NVIDIA_P2P_PAGE_SIZE_128KB,
	NVIDIA_P2P_PAGE_SIZE_COUNT
};

/* One GPU page; the register block only matters on pre-Kepler GPUs. */
struct nvidia_p2p_page {
	u64 physical_address;
	union {
		struct {
			u32 wreqmb_h;
			u32 rreqmb_h;
			u32 rreqmb_0;
			u32 reserved[3];
		} fermi;
	} registers;
};

#define NVIDIA_P2P_PAGE_TABLE_FLAGS_CPU_CACHEABLE	0x1
#define NVIDIA_P2P_GPU_UUID_LEN				16

struct nvidia_p2p_page_table {
	u32 version;
	u32 page_size;			/* enum nvidia_p2p_page_size_type */
	struct nvidia_p2p_page **pages;
	u32 entries;
	u8 *gpu_uuid;
	u32 flags;			/* page table major 2 and later */
};

struct nvidia_p2p_dma_mapping {
	u32 version;
	enum nvidia_p2p_page_size_type page_size_type;
	u32 entries;
	u64 *dma_addresses;
	void *private;
	struct pci_dev *pci_dev;
};

#define NVIDIA_P2P_FLAGS_DEFAULT		0
#define NVIDIA_P2P_FLAGS_FORCE_BAR1_MAPPING	1

int nvidia_p2p_get_pages(u64 p2p_token, u32 va_space, u64 virtual_address,
			 u64 length, struct nvidia_p2p_page_table **page_table,
			 void (*free_callback)(void *data), void *data);
int nvidia_p2p_put_pages(u64 p2p_token, u32 va_space, u64 virtual_address,
			 struct nvidia_p2p_page_table *page_table);
int nvidia_p2p_get_pages_persistent(u64 virtual_address, u64 length,
				    struct nvidia_p2p_page_table **page_table,
				    u32 flags);
int nvidia_p2p_put_pages_persistent(u64 virtual_address,
				    struct nvidia_p2p_page_table *page_table,
				    u32 flags);
int nvidia_p2p_free_page_table(struct nvidia_p2p_page_table *page_table);
int nvidia_p2p_dma_map_pages(struct pci_dev *peer,
			     struct nvidia_p2p_page_table *page_table,
			     struct nvidia_p2p_dma_mapping **dma_mapping);
int nvidia_p2p_dma_unmap_pages(struct pci_dev *peer,
			       struct nvidia_p2p_page_table *page_table,
			       struct nvidia_p2p_dma_mapping *dma_mapping);
int nvidia_p2p_free_dma_mapping(struct nvidia_p2p_dma_mapping *dma_mapping);

#endif /* _NV_P2P_H_ */

/*
 * Versions gdrpin understands. Page tables: major 1 (minor >= 1, the first
 * with gpu_uuid) and major 2 (adds flags). DMA mappings: major 2.
 */
#define GDRPIN_NVP2P_PT_V1	0x00010002u
#define GDRPIN_NVP2P_PT_V2	0x00020000u
#define GDRPIN_NVP2P_DMA_V2	0x00020003u

#define GDRPIN_NVP2P_PT_VERSION_COMPATIBLE(pt)				\
	((NVIDIA_P2P_MAJOR_VERSION((pt)->version) == 1 &&		\
	  NVIDIA_P2P_MINOR_VERSION((pt)->version) >= 1) ||		\
	 NVIDIA_P2P_MAJOR_VERSION((pt)->version) == 2)

#define GDRPIN_NVP2P_DMA_VERSION_COMPATIBLE(m)				\
	(NVIDIA_P2P_MAJOR_VERSION((m)->version) == 2)

static inline u32 gdrpin_nvp2p_page_bytes(u32 page_size_type)
{
	switch (page_size_type) {
	case NVIDIA_P2P_PAGE_SIZE_4KB:
		return 4096;
	case NVIDIA_P2P_PAGE_SIZE_64KB:
		return 65536;
	case NVIDIA_P2P_PAGE_SIZE_128KB:
		return 131072;
	default:
		return 0;
	}
}

#endif /* GDRPIN_NVP2P_H */
