/* SPDX-License-Identifier: MIT */
/* The options of base itself, the diagnostics' (base_opts.c). */
#ifndef GH_BASE_OPTS_H
#define GH_BASE_OPTS_H

struct gh_base_cfg {
	int log_level;			/* GDRHOOK_LOG_LEVEL (log.c's gh_log_level) */
	const char *log_file;		/* GDRHOOK_LOG_FILE (gh_log_set_file) */
};
extern struct gh_base_cfg gh_base_cfg;	/* read-only after init */

#endif
