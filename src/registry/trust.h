/* SPDX-License-Identifier: MIT */
/* Whether the registry can be trusted (trust.c). */
#ifndef GH_TRUST_H
#define GH_TRUST_H

/* Untrusted registry (a memory entry point reached with no wrapper;
 * src/registry/trust.c). */
extern int gh_untrusted;
void gh_mark_untrusted(const char *api, const char *why);

/*
 * fn is called (any thread, any context) each time the registry is
 * marked untrusted, after gh_untrusted is set: a layer above that keeps
 * its own copy of "trusted" clears it there.  One at a time.
 */
void gh_trust_on_untrusted(void (*fn)(void));

#endif
