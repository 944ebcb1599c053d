/* SPDX-License-Identifier: MIT */
/* gdrhook-info and the banner (info.c). */
#ifndef GH_INFO_H
#define GH_INFO_H

/* gdrhook-info (info.c); the one-line banner at GDRHOOK_LOG_LEVEL=info,
 * printed once at the first CUDA or verbs call. */
void gh_info_banner(void);

#endif
