// SPDX-License-Identifier: MIT
/*
 * The GDRHOOK_* options of the event log: where it goes, its per-thread
 * buffer, what a full buffer does; and their old names.  The lifecycle
 * (src/hooks/init.c) hands them to gh_evlog_configure at init.
 */
#include "base/base.h"
#include "evlog_opts.h"

struct gh_evlog_cfg gh_evlog_cfg;

static const char *const trace_mode_words[] = {
	[GH_CFG_TRACE_MODE_DROP] = "drop",
	[GH_CFG_TRACE_MODE_BLOCK] = "block",
	NULL
};

#define CFG struct gh_evlog_cfg
static const struct gh_opt rows[] = {
	GH_OPT(40, "TRACE", "", GH_OPT_PATH, CFG, trace_path,
	       "Write the event log (JSON Lines, one event per CUDA or verbs call; what `gdrhook-trace` reads) to this path, or `stderr`; `%p` expands to the pid, `%h` to the host name, `%%` to `%`; a relative path is relative to where the program started. Created `0600`, never through a symlink, never waited for (a FIFO needs its reader first). Unset: no event log, and no formatting on any hook path. Formerly `GDRHOOK_LOG` (still read, with a deprecation note)."),
	GH_OPT(50, "TRACE_BUFFER", "12m", GH_OPT_SIZE, CFG, trace_ring_bytes,
	       "Event log buffer per thread, in bytes (suffixes k, m, g; 192 bytes per event, rounded down to a power of two events: the default holds 65536). Events that do not fit are counted and reported at exit (`GDRHOOK_TRACE_MODE=drop`) or waited for (`block`). Formerly `GDRHOOK_LOG_BUFFER`."),
	GH_OPT_WORDS(60, "TRACE_MODE", "drop", CFG, trace_mode,
		     "What a hook does when its event log buffer is full: `drop` counts the event as dropped and goes on; `block` waits for the writer, never losing an event (a hook may then wait on the disk). Formerly `GDRHOOK_LOG_MODE`.",
		     trace_mode_words),

	GH_OPT_OLD("LOG", "TRACE"),
	GH_OPT_OLD("LOG_BUFFER", "TRACE_BUFFER"),
	GH_OPT_OLD("LOG_MODE", "TRACE_MODE"),
};
GH_OPT_TABLE(rows, gh_evlog_cfg);
