/* SPDX-License-Identifier: MIT */
/* The counters at exit (stats.c). */
#ifndef GH_STATS_H
#define GH_STATS_H

/* The counters at exit (GDRHOOK_STATS). */
void gh_stats_print(void);

#endif
