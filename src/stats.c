// SPDX-License-Identifier: MIT
/* Counters: relaxed atomics, printed at exit with GDRHOOK_STATS=1. */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "evlog.h"
#include "fmt.h"
#include "rcache.h"

struct gh_counters gh_ctr;

void gh_stats_note_live(void)
{
	uint64_t live = gh_registry_bytes();
	uint64_t peak = __atomic_load_n(&gh_ctr.peak_live_bytes,
					__ATOMIC_RELAXED);

	while (live > peak &&
	       !__atomic_compare_exchange_n(&gh_ctr.peak_live_bytes, &peak,
					    live, 1, __ATOMIC_RELAXED,
					    __ATOMIC_RELAXED))
		;
}

GH_EXPORT int gdrhook_get_stats(struct gdrhook_stats *st)
{
	struct gdrhook_stats s;
	uint64_t want;

	if (!st || st->size < sizeof(uint64_t))
		return -EINVAL;
	want = st->size;
	memset(&s, 0, sizeof(s));
	s.size = sizeof(s) < want ? sizeof(s) : want;
	s.allocs = __atomic_load_n(&gh_ctr.allocs, __ATOMIC_RELAXED);
	s.frees = __atomic_load_n(&gh_ctr.frees, __ATOMIC_RELAXED);
	s.frees_untracked = __atomic_load_n(&gh_ctr.frees_untracked,
					    __ATOMIC_RELAXED);
	s.failed_calls = __atomic_load_n(&gh_ctr.failed_calls,
					 __ATOMIC_RELAXED);
	s.implicit_frees = __atomic_load_n(&gh_ctr.implicit_frees,
					   __ATOMIC_RELAXED);
	if (gh_state == GH_STATE_ACTIVE) {
		s.live = gh_registry_count();
		s.live_bytes = gh_registry_bytes();
	}
	s.peak_live_bytes = __atomic_load_n(&gh_ctr.peak_live_bytes,
					    __ATOMIC_RELAXED);
	if (s.live_bytes > s.peak_live_bytes)
		s.peak_live_bytes = s.live_bytes;
	s.lookups = __atomic_load_n(&gh_ctr.lookups, __ATOMIC_RELAXED);
	s.untrusted = __atomic_load_n(&gh_ctr.untrusted, __ATOMIC_RELAXED);
	s.audit_checks = __atomic_load_n(&gh_ctr.audit_checks,
					 __ATOMIC_RELAXED);
	s.audit_disagreements = __atomic_load_n(&gh_ctr.audit_disagreements,
						__ATOMIC_RELAXED);
	s.log_events = gh_evlog_enabled() ? gh_evlog_written() : 0;
	s.log_dropped = gh_evlog_enabled() ? gh_evlog_dropped() : 0;
	memcpy(st, &s, s.size);
	return 0;
}

static void row(struct gh_buf *b, const char *name, uint64_t v)
{
	size_t n = strlen(name);

	gh_buf_puts(b, "  ");
	gh_buf_puts(b, name);
	while (n++ < 24)
		gh_buf_putc(b, ' ');
	gh_buf_u64(b, v);
	gh_buf_putc(b, '\n');
}

void gh_stats_print(void)
{
	struct gdrhook_stats s = { .size = sizeof(s) };
	char mem[2048];
	struct gh_buf b;
	char pid[24];

	gdrhook_get_stats(&s);
	gh_buf_init(&b, mem, sizeof(mem));
	pid[gh_fmt_u64(pid, (uint64_t)getpid())] = 0;
	gh_buf_puts(&b, "gdrhook[");
	gh_buf_puts(&b, pid);
	gh_buf_puts(&b, "]: stats\n");
	row(&b, "allocations", s.allocs);
	row(&b, "frees", s.frees);
	row(&b, "frees untracked", s.frees_untracked);
	row(&b, "implicit frees", s.implicit_frees);
	row(&b, "failed calls", s.failed_calls);
	row(&b, "live at exit", s.live);
	row(&b, "live bytes at exit", s.live_bytes);
	row(&b, "peak live bytes", s.peak_live_bytes);
	row(&b, "untrusted", s.untrusted);
	row(&b, "audit checks", s.audit_checks);
	row(&b, "audit disagreements", s.audit_disagreements);
	row(&b, "log events", s.log_events);
	row(&b, "log dropped", s.log_dropped);
	if (gh_rcache_ready()) {
		struct gh_rc_counters rc;

		gh_rcache_counters(&rc);
		row(&b, "rcache hits", rc.hits);
		row(&b, "rcache misses", rc.misses);
		row(&b, "rcache evictions", rc.evictions);
		row(&b, "stale regs averted", rc.stale_averted);
		row(&b, "revoked while held", rc.revoked);
		row(&b, "pinned bytes", rc.pinned_bytes);
		row(&b, "nic regs", rc.regs);
		row(&b, "nic deregs", rc.deregs);
	}
	if (write(2, mem, b.len) < 0)
		return;
}
