/* SPDX-License-Identifier: MIT */
/*
 * The base layer (src/base), the one header other layers include from it:
 * formatting, the diagnostic log, the clock, the GDRHOOK_* configuration,
 * the counters, the per-thread guard, per-thread slots given back at
 * thread end (tslot.h), the parts of the descriptors the shim owns
 * (ownfd.h) and the mutex whose lock rules debug builds assert.  It
 * calls nothing above it; what it needs from above (the guard's drain)
 * is handed down at init.  Files inside src/base include the header of
 * what they use, not this one.
 */
#ifndef GH_BASE_H
#define GH_BASE_H

#include "gdrhook.h"
#include "compiler.h"
#include "file.h"
#include "fmt.h"
#include "log.h"
#include "clock.h"
#include "config.h"
#include "base_opts.h"
#include "counters.h"
#include "guard.h"
#include "lock.h"
#include "ownfd.h"
#include "tslot.h"

#endif
