/* SPDX-License-Identifier: MIT */
/* The hooks' options (hooks_opts.c). */
#ifndef GH_HOOKS_OPTS_H
#define GH_HOOKS_OPTS_H

enum gh_cfg_answer {		/* GDRHOOK_BUFFER_ID, GDRHOOK_POINTER_QUERIES */
	GH_CFG_ANSWER_REGISTRY,
	GH_CFG_ANSWER_DRIVER,
};

struct gh_hooks_cfg {
	int enable;			/* GDRHOOK_ENABLE (init.c) */
	int stats;			/* GDRHOOK_STATS (init.c, src/face/stats.c) */
	int buffer_id;			/* GDRHOOK_BUFFER_ID (ptrattr.c) */
	int pointer_queries;		/* GDRHOOK_POINTER_QUERIES (ptrattr.c) */
};
extern struct gh_hooks_cfg gh_hooks_cfg;	/* read-only after init */

#endif
