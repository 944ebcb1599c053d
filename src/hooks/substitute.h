/* SPDX-License-Identifier: MIT */
/* What a resolver hands out (substitute.c, verbs.c). */
#ifndef GH_SUBSTITUTE_H
#define GH_SUBSTITUTE_H

/* Wrapper for a function pointer the program obtained from a resolver:
 * returns the wrapper to hand out instead of p, or p itself. */
void *gh_substitute(const char *requested, void *p, const char *route);
/* The same for ibv_* names (src/hooks/verbs.c). */
void *gh_verbs_substitute(const char *name, void *p, const char *route);

#endif
