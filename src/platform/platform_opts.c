// SPDX-License-Identifier: MIT
/* The GDRHOOK_* options of the platform: the driver library (resolve.c). */
#include "base/base.h"
#include "platform_opts.h"

struct gh_platform_cfg gh_platform_cfg;

#define CFG struct gh_platform_cfg
static const struct gh_opt rows[] = {
	GH_OPT(90, "LIBCUDA", "libcuda.so.1", GH_OPT_STR, CFG, libcuda,
	       "The driver library real entry points are resolved from. One that cannot be loaded or is not a CUDA driver is reported on stderr and `libcuda.so.1` used."),
};
GH_OPT_TABLE(rows, gh_platform_cfg);
