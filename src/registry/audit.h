/* SPDX-License-Identifier: MIT */
/* Audit mode, GDRHOOK_VALIDATE=1 (audit.c). */
#ifndef GH_AUDIT_H
#define GH_AUDIT_H

#include <stdint.h>

#include "ranges.h"

/* Audit mode (audit.c, GDRHOOK_VALIDATE=1). */
void gh_audit_alloc(const struct gh_range *r, const char *api);
void gh_audit_free(const struct gh_range *r, const char *api);
void gh_audit_lookup(uint64_t ptr, int rc, const struct gh_range *r);
void gh_audit_sweep(void);
void gh_audit_report(const char *api, uint64_t ptr, uint64_t size,
		     uint64_t gen, const char *what);

#endif
