/* SPDX-License-Identifier: MIT */
/* Driver queries gdrhook itself makes, never through a wrapper (drv.c). */
#ifndef GH_DRV_H
#define GH_DRV_H

#include <stdint.h>

/* Real driver calls made by gdrhook itself, never through a wrapper. */
struct gh_drv;
int gh_drv_ctx_current(uint64_t *ctx_p);
int gh_drv_ctx_device(int *dev_p);
int gh_drv_ctx_device_of(uint64_t ctx, int *dev_p);
void gh_drv_ctx_forget(void);
int gh_drv_range(uint64_t ptr, uint64_t *base_p, uint64_t *size_p);
int gh_drv_buffer_id(uint64_t ptr, uint64_t *id_p);
int gh_drv_primary_ctx(int dev, uint64_t *ctx_p);	/* 0 if active */
int gh_drv_primary_active(int dev);
int gh_drv_vmm_device(uint64_t handle, int *dev_p);
int gh_drv_vmm_mapped(uint64_t ptr);
int gh_drv_capture_graph(uint64_t stream, uint64_t *graph_p);
int gh_drv_graph_node_type(uint64_t n);

#endif
