/* SPDX-License-Identifier: MIT */
/*
 * The pin layer (src/pin), its one header: the pin backends and their
 * choice (backend.h), the BAR1 budget (bar.c), memory windows (mwin.c)
 * and SYNC_MEMOPS (syncmemops.c).
 */
#ifndef GH_PIN_H
#define GH_PIN_H

#include "registry/registry.h"
#include "backend.h"
#include "bar.h"
#include "mwin.h"
#include "syncmemops.h"
#include "pin_opts.h"

#endif
