/* SPDX-License-Identifier: MIT */
/* Whether the registry can be trusted (trust.c). */
#ifndef GH_TRUST_H
#define GH_TRUST_H

/* Untrusted registry (a memory entry point reached with no wrapper;
 * src/registry/trust.c). */
extern int gh_untrusted;
void gh_mark_untrusted(const char *api, const char *why);

#endif
