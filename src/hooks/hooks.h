/* SPDX-License-Identifier: MIT */
/*
 * The hooks layer (src/hooks), its one header: the wrappers' runtime
 * (hookrt.h), the process lifecycle (init.c), what a resolver hands out
 * (substitute.c) and the program's own dma-buf exports (dmabuf_export.c).
 */
#ifndef GH_HOOKS_H
#define GH_HOOKS_H

#include "rcache/rcache.h"
#include "hookrt.h"
#include "init.h"
#include "substitute.h"
#include "dmabuf_export.h"
#include "hooks_opts.h"

#endif
