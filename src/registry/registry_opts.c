// SPDX-License-Identifier: MIT
/*
 * The GDRHOOK_* options of the registry: audit mode (audit.c; the hooks
 * and the face ask it whether to cross-check) and what untrusted means
 * (trust.c).
 */
#include "base/base.h"
#include "registry_opts.h"

struct gh_registry_cfg gh_registry_cfg;

#define CFG struct gh_registry_cfg
static const struct gh_opt rows[] = {
	GH_OPT(80, "VALIDATE", "0", GH_OPT_BOOL, CFG, validate,
	       "`1` is audit mode: every event and lookup is cross-checked against the driver (`cuMemGetAddressRange`, buffer ID) and the live set is swept at exit; disagreements become `audit` events and a counter."),
	GH_OPT(100, "STRICT", "0", GH_OPT_BOOL, CFG, strict,
	       "`1` aborts the process when the registry becomes untrusted, instead of running on with caching off."),
};
GH_OPT_TABLE(rows, gh_registry_cfg);
