/* SPDX-License-Identifier: MIT */
/* The registry's options, GDRHOOK_VALIDATE and _STRICT (registry_opts.c). */
#ifndef GH_REGISTRY_OPTS_H
#define GH_REGISTRY_OPTS_H

struct gh_registry_cfg {
	int validate;			/* GDRHOOK_VALIDATE: audit mode (audit.c) */
	int strict;			/* GDRHOOK_STRICT (trust.c) */
};
extern struct gh_registry_cfg gh_registry_cfg;	/* read-only after init */

#endif
