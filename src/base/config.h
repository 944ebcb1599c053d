/* SPDX-License-Identifier: MIT */
/* The GDRHOOK_* configuration (config.c). */
#ifndef GH_CONFIG_H
#define GH_CONFIG_H

#include <stdint.h>

/*
 * The words of each enum-valued option, in the order of its index (the
 * value stored in struct gh_config); config.c validates them once.
 */
enum gh_cfg_backend {
	GH_CFG_BACKEND_AUTO,
	GH_CFG_BACKEND_DMABUF,
	GH_CFG_BACKEND_PEERMEM,
	GH_CFG_BACKEND_GDRPIN,
	GH_CFG_BACKEND_NONE,
};
enum gh_cfg_exposure {
	GH_CFG_EXPOSURE_EXACT,
	GH_CFG_EXPOSURE_ALLOCATION,
};
enum gh_cfg_answer {		/* GDRHOOK_BUFFER_ID, GDRHOOK_POINTER_QUERIES */
	GH_CFG_ANSWER_REGISTRY,
	GH_CFG_ANSWER_DRIVER,
};
enum gh_cfg_trace_mode {
	GH_CFG_TRACE_MODE_DROP,
	GH_CFG_TRACE_MODE_BLOCK,
};
enum gh_cfg_dmabuf_mapping {
	GH_CFG_DMABUF_MAPPING_AUTO,
	GH_CFG_DMABUF_MAPPING_PCIE,
	GH_CFG_DMABUF_MAPPING_DEFAULT,
};
extern const char *const gh_cfg_backend_words[];	/* by enum gh_cfg_backend */

/* Parsed GDRHOOK_* configuration (config.c); read-only after init. */
struct gh_config {
	int enable;
	int log_level;			/* GDRHOOK_LOG_LEVEL (log.c) */
	const char *log_file;		/* GDRHOOK_LOG_FILE (log.c) */
	const char *trace_path;		/* GDRHOOK_TRACE (src/evlog) */
	uint64_t trace_ring_bytes;	/* GDRHOOK_TRACE_BUFFER */
	int trace_mode;			/* GDRHOOK_TRACE_MODE, enum gh_cfg_trace_mode */
	int stats;
	int validate;
	const char *libcuda;
	int strict;
	int backend;			/* GDRHOOK_BACKEND (src/pin/pin_choose.c) */
	uint64_t cache_max_size;	/* GDRHOOK_CACHE_MAX_SIZE (src/rcache/rcache_evict.c) */
	uint64_t cache_max_count;	/* GDRHOOK_CACHE_MAX_COUNT */
	int remote_exposure;		/* GDRHOOK_REMOTE_EXPOSURE (rcache) */
	int windows;			/* GDRHOOK_WINDOWS (src/pin/mwin.c) */
	int buffer_id;			/* GDRHOOK_BUFFER_ID (src/hooks/ptrattr.c) */
	int pointer_queries;		/* GDRHOOK_POINTER_QUERIES (ptrattr.c) */
	int sync_memops;		/* GDRHOOK_SYNC_MEMOPS (src/pin/syncmemops.c) */
	uint64_t pin_whole_max;		/* GDRHOOK_PIN_WHOLE_MAX (src/pin/bar.c) */
	int dmabuf_mapping;		/* GDRHOOK_DMABUF_MAPPING (src/pin/pin_dmabuf.c) */
};
extern struct gh_config gh_cfg;

int gh_config_load(void);
/* Warn about old names, unknown GDRHOOK_* names (with the name probably
 * meant) and bad values, as written (once, at the first CUDA or verbs
 * call: processes that merely inherit the environment stay silent). */
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
	const char *def, *doc, *value;	/* value: as written */
	enum gh_cfg_source source;
	const char *via;	/* set under this old name (no prefix), or NULL */
};
int gh_config_row(unsigned int i, struct gh_config_row *r_p);	/* -ENOENT: past the end */
const char *gh_config_unknown(unsigned int i);	/* "GDRHOOK_X=v" or NULL */
/*
 * The environment's "GDRHOOK_X=value" that set option name (no prefix;
 * maybe under an old name), as written: for messages that echo a value
 * ("100g", not its bytes).  NULL when the default is in effect.
 */
const char *gh_config_setting(const char *name);

#endif
