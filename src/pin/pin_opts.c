// SPDX-License-Identifier: MIT
/*
 * The GDRHOOK_* options of the pin layer: the backend, memory windows,
 * synchronous memory operations, what is pinned whole, the DMA-BUF
 * mapping.  The exposure policy is the cache's (src/rcache/rcache_opts.c):
 * the cache hands it to gh_pin_for_nic.
 */
#include "base/base.h"
#include "pin_opts.h"

struct gh_pin_cfg gh_pin_cfg;

/* The words of each enum option, by index (mimalloc, UCX: one table each). */
const char *const gh_cfg_backend_words[] = {
	[GH_CFG_BACKEND_AUTO] = "auto",
	[GH_CFG_BACKEND_DMABUF] = "dmabuf",
	[GH_CFG_BACKEND_PEERMEM] = "peermem",
	[GH_CFG_BACKEND_GDRPIN] = "gdrpin",
	[GH_CFG_BACKEND_NONE] = "none",
	NULL
};
static const char *const dmabuf_mapping_words[] = {
	[GH_CFG_DMABUF_MAPPING_AUTO] = "auto",
	[GH_CFG_DMABUF_MAPPING_PCIE] = "pcie",
	[GH_CFG_DMABUF_MAPPING_DEFAULT] = "default",
	NULL
};

#define CFG struct gh_pin_cfg
static const struct gh_opt rows[] = {
	GH_OPT_WORDS(110, "BACKEND", "auto", CFG, backend,
	       "How GPU memory is pinned for RDMA: `dmabuf` (DMA-BUF export + `ibv_reg_dmabuf_mr`), `peermem` (plain `ibv_reg_mr`, nvidia-peermem pins), `none` (no registration cache: pass-through), `gdrpin` (the gdrpin kernel module pins and reports revocations, plain `ibv_reg_mr` registers: combine with nvidia-peermem), or `auto` (dmabuf if the device and libibverbs support it, else peermem if loaded, else gdrpin if `/dev/gdrpin` answers, else none; with `exact` exposure, peermem first where the NIC binds memory windows and a peer-memory client registers GPU memory). An unusable choice falls back to none, with the reason logged.",
		     gh_cfg_backend_words),
	GH_OPT(150, "WINDOWS", "1", GH_OPT_BOOL, CFG, windows,
	       "With `exact` exposure, where the NIC has memory windows: one cached registration per allocation and PD with no remote rights, and per MR a window bound to exactly its range and access (its own rkey, unbound by `ibv_dereg_mr`), so registering costs a work request, not a NIC registration. `0`: a NIC registration per MR."),
	GH_OPT(180, "SYNC_MEMOPS", "1", GH_OPT_BOOL, CFG, sync_memops,
	       "`1`: memory the registration cache pins gets synchronous memory operations (the GPUDirect RDMA guide's ordering rule), once per context with `cuCtxSetFlags(CU_CTX_SYNC_MEMOPS)` where the driver has it, else per allocation with `cuPointerSetAttribute(CU_POINTER_ATTRIBUTE_SYNC_MEMOPS)`. `0`: leave it to the program."),
	GH_OPT(190, "PIN_WHOLE_MAX", "0", GH_OPT_SIZE, CFG, pin_whole_max,
	       "Largest allocation (or span of VMM mappings) the cache pins whole on its first registration (suffixes k, m, g); larger ones pin the registered range rounded out to 64 KiB. `0`: a tenth of the smaller of the device's BAR1 and its memory (BAR1 from NVML, else the PCI resource in sysfs)."),
	GH_OPT_WORDS(200, "DMABUF_MAPPING", "auto", CFG, dmabuf_mapping,
	       "How the dmabuf backend asks the driver to map its exports: `pcie` (`CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE`, through BAR1; CUDA 12.8 and later), `default` (the driver's choice), or `auto` (`pcie` on devices whose host link is C2C, where the default mapping does not go over PCIe, falling back to the default if refused; else `default`).",
		     dmabuf_mapping_words),
};
GH_OPT_TABLE(rows, gh_pin_cfg);
