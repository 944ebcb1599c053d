/* SPDX-License-Identifier: MIT */
/* The GDRHOOK_* configuration (config.c). */
#ifndef GH_CONFIG_H
#define GH_CONFIG_H

#include <stdint.h>

/* Parsed GDRHOOK_* configuration (config.c); read-only after init. */
struct gh_config {
	int enable;
	const char *log_path;
	int log_level;
	int stats;
	int validate;
	uint64_t log_ring_bytes;
	const char *libcuda;
	int strict;
	const char *backend;		/* GDRHOOK_BACKEND (src/pin/pin_choose.c) */
	uint64_t cache_max_size;	/* GDRHOOK_CACHE_MAX_SIZE (src/rcache/rcache_evict.c) */
	uint64_t cache_max_count;	/* GDRHOOK_CACHE_MAX_COUNT */
	const char *remote_exposure;	/* GDRHOOK_REMOTE_EXPOSURE (rcache) */
	int windows;			/* GDRHOOK_WINDOWS (src/pin/mwin.c) */
	const char *buffer_id;		/* GDRHOOK_BUFFER_ID (src/hooks/ptrattr.c) */
	const char *pointer_queries;	/* GDRHOOK_POINTER_QUERIES (ptrattr.c) */
	const char *log_mode;		/* GDRHOOK_LOG_MODE: "drop", "block" */
	int sync_memops;		/* GDRHOOK_SYNC_MEMOPS (src/pin/syncmemops.c) */
	uint64_t pin_whole_max;		/* GDRHOOK_PIN_WHOLE_MAX (src/pin/bar.c) */
	const char *dmabuf_mapping;	/* GDRHOOK_DMABUF_MAPPING (src/pin/pin_dmabuf.c) */
};
extern struct gh_config gh_cfg;

int gh_config_load(void);
/* Warn about unknown GDRHOOK_* names and bad values (once, at the first
 * CUDA or verbs call: processes that merely inherit the environment stay
 * silent). */
void gh_config_report(void);
/* Keep one warning ("msg \"arg\"") for gh_config_report(). */
void gh_config_defer_warning(const char *msg, const char *arg);

/* One configuration table row and the value in effect (config.c). */
enum gh_cfg_source {
	GH_CFG_DEFAULT,		/* not set */
	GH_CFG_ENV,		/* from the environment */
	GH_CFG_BAD_ENV,		/* set, but not valid: the default is used */
};
struct gh_config_row {
	const char *name;	/* without the GDRHOOK_ prefix */
	const char *def, *doc, *value;
	enum gh_cfg_source source;
};
int gh_config_row(unsigned int i, struct gh_config_row *r_p);	/* -ENOENT: past the end */
const char *gh_config_unknown(unsigned int i);	/* "GDRHOOK_X=v" or NULL */

#endif
