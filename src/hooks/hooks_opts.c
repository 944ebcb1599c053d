// SPDX-License-Identifier: MIT
/*
 * The GDRHOOK_* options of the hooks: the lifecycle's (init.c: on or
 * off, the counters at exit, which the face prints) and the pointer
 * queries' (ptrattr.c).
 */
#include "base/base.h"
#include "hooks_opts.h"

struct gh_hooks_cfg gh_hooks_cfg;

static const char *const answer_words[] = {
	[GH_CFG_ANSWER_REGISTRY] = "registry",
	[GH_CFG_ANSWER_DRIVER] = "driver",
	NULL
};

#define CFG struct gh_hooks_cfg
static const struct gh_opt rows[] = {
	GH_OPT(10, "ENABLE", "1", GH_OPT_BOOL, CFG, enable,
	       "`0` makes gdrhook a pure pass-through: no registry, no event log, no caching."),
	GH_OPT(70, "STATS", "0", GH_OPT_BOOL_ALL, CFG, stats,
	       "`1` prints the counters to stderr at exit, in processes that used CUDA or verbs; `all` in every process."),
	GH_OPT_WORDS(160, "BUFFER_ID", "registry", CFG, buffer_id,
	       "`registry`: `cuPointerGetAttribute(s)` answers `CU_POINTER_ATTRIBUTE_BUFFER_ID` of a tracked allocation from the registry (its generation with bit 63 set; no driver call). `driver`: always ask the driver.",
		     answer_words),
	GH_OPT_WORDS(170, "POINTER_QUERIES", "registry", CFG, pointer_queries,
	       "`registry`: `cuPointerGetAttribute(s)`, `cudaPointerGetAttributes` and `cuMemGetAddressRange` are answered from the registry for every attribute it knows exactly, and for pointers in no tracked allocation while it is trusted (what the driver says for host memory), as is `cuMemRetainAllocationHandle`'s refusal of such pointers; the rest goes to the driver. `driver`: ask the driver (`BUFFER_ID` keeps following `GDRHOOK_BUFFER_ID`).",
		     answer_words),
};
GH_OPT_TABLE(rows, gh_hooks_cfg);
