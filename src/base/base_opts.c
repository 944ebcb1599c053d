// SPDX-License-Identifier: MIT
/*
 * The GDRHOOK_* options of base: the diagnostics (log.c).  The level
 * applies as soon as it is parsed, the file once every table is loaded;
 * the other layers' options are in their own folders.
 */
#include "base_opts.h"
#include "config.h"
#include "log.h"

struct gh_base_cfg gh_base_cfg;

#define CFG struct gh_base_cfg
static const struct gh_opt rows[] = {
	GH_OPT(20, "LOG_LEVEL", "warn", GH_OPT_LEVEL, CFG, log_level,
	       "Diagnostics, on stderr or in `GDRHOOK_LOG_FILE`: `none`, `error`, `warn`, `info` or `debug` (also `0`-`4`, `warning`, and `trace` as NCCL spells debug). `info` adds one line naming the pin backend; `debug` adds a line per decision: the route a registration took, the backend chosen and why, and whether a registration was wrapped, windowed or passed through. Each line starts `gdrhook[host:pid:tid]: level:`."),
	GH_OPT(30, "LOG_FILE", "", GH_OPT_PATH, CFG, log_file,
	       "Write the diagnostics to this file instead of stderr (as `NCCL_DEBUG_FILE`, `UCX_LOG_FILE`): `%h` expands to the host name, `%p` to the pid, `%%` to `%`; a relative path is relative to where the program started. Appended to, created `0600`, never through a symlink, opened at the first message. One that cannot be opened: stderr, with one warning. Unset or `stderr`: stderr."),
};

static void loaded(void)
{
	gh_log_set_file(gh_base_cfg.log_file);
}
GH_OPT_TABLE_LOADED(rows, gh_base_cfg, loaded);
