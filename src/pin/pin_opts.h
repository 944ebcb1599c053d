/* SPDX-License-Identifier: MIT */
/* The pin layer's options (pin_opts.c). */
#ifndef GH_PIN_OPTS_H
#define GH_PIN_OPTS_H

#include <stdint.h>

/* The words of each enum-valued option, in the order of its index (the
 * value stored in struct gh_pin_cfg). */
enum gh_cfg_backend {
	GH_CFG_BACKEND_AUTO,
	GH_CFG_BACKEND_DMABUF,
	GH_CFG_BACKEND_PEERMEM,
	GH_CFG_BACKEND_GDRPIN,
	GH_CFG_BACKEND_NONE,
};
enum gh_cfg_dmabuf_mapping {
	GH_CFG_DMABUF_MAPPING_AUTO,
	GH_CFG_DMABUF_MAPPING_PCIE,
	GH_CFG_DMABUF_MAPPING_DEFAULT,
};
extern const char *const gh_cfg_backend_words[];	/* by enum gh_cfg_backend */

struct gh_pin_cfg {
	int backend;			/* GDRHOOK_BACKEND (pin_choose.c) */
	int windows;			/* GDRHOOK_WINDOWS (mwin.c, pin_choose.c) */
	int sync_memops;		/* GDRHOOK_SYNC_MEMOPS (syncmemops.c) */
	uint64_t pin_whole_max;		/* GDRHOOK_PIN_WHOLE_MAX (bar.c) */
	int dmabuf_mapping;		/* GDRHOOK_DMABUF_MAPPING (pin_dmabuf.c) */
};
extern struct gh_pin_cfg gh_pin_cfg;	/* read-only after init */

#endif
