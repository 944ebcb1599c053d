/* SPDX-License-Identifier: MIT */
/*
 * The face (src/face), its one header: what gdrhook shows the world: the
 * public API (api.c), gdrhook-info (info.c), the route checks (routes.c)
 * and the exit counters (stats.c).  It is handed to the hooks layer by
 * the link (GH_FACE_OPS, src/hooks/init.h).
 */
#ifndef GH_FACE_H
#define GH_FACE_H

#include "hooks/hooks.h"
#include "info.h"
#include "stats.h"
#include "routes.h"

#endif
