/* SPDX-License-Identifier: MIT */
/*
 * The platform layer (src/platform), its one header: the outside world as
 * gdrhook itself calls it, never through a wrapper: the loader and the
 * real entry points of hooked symbols (resolve.c), the driver queries
 * gdrhook makes (drv.c) and the real libibverbs calls (vreal.c).
 */
#ifndef GH_PLATFORM_H
#define GH_PLATFORM_H

#include <cuda.h>

#include "gh_hooks.h"
#include "evlog/evlog.h"
#include "resolve.h"
#include "drv.h"
#include "vreal.h"
#include "platform_opts.h"

#endif
