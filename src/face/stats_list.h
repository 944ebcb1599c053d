/* SPDX-License-Identifier: MIT */
/*
 * The counters, as one list: the members of struct gdrhook_stats (in
 * order: stats.c asserts it), what gdrhook_get_stats() fills them from,
 * the GDRHOOK_STATS printout and the README's counter table
 * (scripts/gen-doc.py reads the rows below; `make check` verifies it).
 *
 * X(member, label, value, meaning): value is an expression over
 * ctr (struct gh_counters), rc (struct gh_rc_counters, zero when the
 * registration cache never started), mw (struct gh_mw_counters), live
 * and live_bytes (the registry now), log_events and log_dropped.
 */
#ifndef GH_STATS_LIST_H
#define GH_STATS_LIST_H

#define GH_STATS_LIST(X)						\
	X(allocs, "allocations", ctr.allocs,				\
	  "successful allocations seen")				\
	X(frees, "frees", ctr.frees,					\
	  "frees of tracked allocations")				\
	X(frees_untracked, "frees untracked", ctr.frees_untracked,	\
	  "frees of pointers never seen")				\
	X(failed_calls, "failed calls", ctr.failed_calls,		\
	  "hooked calls whose real call failed")			\
	X(implicit_frees, "implicit frees", ctr.implicit_frees,		\
	  "allocations dropped by a context, pool or VMM-range call")	\
	X(live, "live at exit", live,					\
	  "tracked allocations now")					\
	X(live_bytes, "live bytes at exit", live_bytes,			\
	  "their bytes")						\
	X(peak_live_bytes, "peak live bytes",				\
	  peak > live_bytes ? peak : live_bytes,			\
	  "most bytes live at once")					\
	X(lookups, "lookups", ctr.lookups,				\
	  "`gdrhook_lookup` calls (when counted)")			\
	X(untrusted, "untrusted", ctr.untrusted,			\
	  "entry points reached that gdrhook could not wrap")		\
	X(audit_checks, "audit checks", ctr.audit_checks,		\
	  "`GDRHOOK_VALIDATE` comparisons made")			\
	X(audit_disagreements, "audit disagreements",			\
	  ctr.audit_disagreements,					\
	  "`GDRHOOK_VALIDATE` comparisons that disagreed")		\
	X(log_events, "log events", log_events,				\
	  "event log records written")					\
	X(log_dropped, "log dropped", log_dropped,			\
	  "event log records lost (full buffers, a failed sink)")	\
	X(regs_seen, "registrations seen", ctr.regs_seen,		\
	  "`ibv_reg_mr`-family calls the shim saw")			\
	X(regs_passed, "registrations passed", ctr.regs_passed,		\
	  "of those, passed to libibverbs untouched (host or untracked memory, no cache)") \
	X(rcache_hits, "rcache hits", rc.hits,				\
	  "registrations served from the cache")			\
	X(rcache_misses, "rcache misses", rc.misses,			\
	  "registrations the cache had to make")			\
	X(rcache_evictions, "rcache evictions", rc.evictions,		\
	  "idle registrations evicted")					\
	X(stale_averted, "stale regs averted", rc.stale_averted,	\
	  "registrations dropped before their memory was freed")	\
	X(revoked, "revoked while held", rc.revoked,			\
	  "... that the program still held")				\
	X(pinned_bytes, "pinned bytes", rc.pinned_bytes,		\
	  "bytes the cache keeps pinned now")				\
	X(nic_regs, "nic regs", rc.regs,				\
	  "real NIC registrations made")				\
	X(nic_deregs, "nic deregs", rc.deregs,				\
	  "real NIC deregistrations made")				\
	X(regs_raced, "registrations raced", ctr.regs_raced,		\
	  "registrations tied to (or revoked with) GPU memory that an allocation or free in flight during their NIC call made") \
	X(window_binds, "window binds", mw.binds,			\
	  "exact registrations served by binding a memory window")	\
	X(window_invalidations, "window invalidations",		\
	  mw.invalidations,						\
	  "windows invalidated (their registration dropped)")		\
	X(window_fallbacks, "window fallbacks", mw.fallbacks,		\
	  "binds the NIC refused: a NIC registration instead")

#endif
