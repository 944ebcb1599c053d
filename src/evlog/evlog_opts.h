/* SPDX-License-Identifier: MIT */
/* The event log's options, GDRHOOK_TRACE* (evlog_opts.c). */
#ifndef GH_EVLOG_OPTS_H
#define GH_EVLOG_OPTS_H

#include <stdint.h>

enum gh_cfg_trace_mode {		/* by the words of evlog_opts.c */
	GH_CFG_TRACE_MODE_DROP,
	GH_CFG_TRACE_MODE_BLOCK,
};

struct gh_evlog_cfg {
	const char *trace_path;		/* GDRHOOK_TRACE */
	uint64_t trace_ring_bytes;	/* GDRHOOK_TRACE_BUFFER */
	int trace_mode;			/* GDRHOOK_TRACE_MODE, enum gh_cfg_trace_mode */
};
extern struct gh_evlog_cfg gh_evlog_cfg;	/* read-only after init */

#endif
