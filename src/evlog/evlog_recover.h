/* SPDX-License-Identifier: MIT */
/*
 * Recovery (src/evlog/evlog_recover.c): what the rings of a dead process
 * (killed, or a former image of ours before exec) still hold, appended to
 * the log named in its spool after a "recovered" record.  Inside
 * src/evlog only.
 */
#ifndef GH_EVLOG_RECOVER_H
#define GH_EVLOG_RECOVER_H

#include "evspool.h"

struct gh_ev_log;

/*
 * Recover one dead process's spool into its log (at configure, for
 * gh_spool_recover_all).  Under ev's lock with ev->sink.fd unused (-1 or
 * -2): borrows the output buffer and fd slot, and leaves this process's
 * counts as they were.
 */
void gh_ev_recover(struct gh_ev_log *ev, const struct gh_spool_dead *d);

#endif
