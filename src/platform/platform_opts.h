/* SPDX-License-Identifier: MIT */
/* The platform's options, GDRHOOK_LIBCUDA (platform_opts.c). */
#ifndef GH_PLATFORM_OPTS_H
#define GH_PLATFORM_OPTS_H

struct gh_platform_cfg {
	const char *libcuda;		/* GDRHOOK_LIBCUDA (resolve.c) */
};
extern struct gh_platform_cfg gh_platform_cfg;	/* read-only after init */

#endif
