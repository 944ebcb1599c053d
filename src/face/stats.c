// SPDX-License-Identifier: MIT
/*
 * Counters: relaxed atomics, printed at exit with GDRHOOK_STATS=1 by the
 * processes that used CUDA or verbs (a process tree's shells and tools
 * inherit the variable and have nothing to say), by every process with
 * GDRHOOK_STATS=all (gh_cfg.stats 2).
 */
#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

#include "hooks/hooks.h"
#include "info.h"
#include "stats.h"
#include "stats_list.h"

/* struct gdrhook_stats is exactly the list, in its order */
enum {
	GH_STAT_IDX_size,
#define X(m, label, value, doc) GH_STAT_IDX_##m,
	GH_STATS_LIST(X)
#undef X
	GH_STAT_COUNT_
};
#define X(m, label, value, doc)						\
	_Static_assert(offsetof(struct gdrhook_stats, m) ==		\
		       GH_STAT_IDX_##m * sizeof(uint64_t), #m " out of order");
GH_STATS_LIST(X)
#undef X
_Static_assert(sizeof(struct gdrhook_stats) ==
	       GH_STAT_COUNT_ * sizeof(uint64_t), "a member not in the list");

GH_EXPORT int gdrhook_get_stats(struct gdrhook_stats *st)
{
	struct gdrhook_stats s;
	struct gh_counters ctr;
	struct gh_rc_counters rc;
	uint64_t want, live = 0, live_bytes = 0, peak, log_events = 0,
		 log_dropped = 0;

	if (!st || st->size < sizeof(uint64_t))
		return -EINVAL;
	want = st->size;
	memset(&rc, 0, sizeof(rc));
	if (gh_rcache_ready())
		gh_rcache_counters(&rc);
	/* a snapshot, counter by counter (each is atomic on its own) */
	for (size_t i = 0; i < sizeof(ctr) / sizeof(uint64_t); i++)
		((uint64_t *)&ctr)[i] = __atomic_load_n(
			&((uint64_t *)&gh_ctr)[i], __ATOMIC_RELAXED);
	ctr.allocs += gh_hot_sum(GH_HC_ALLOCS);
	/* the registry keeps the peak on every insert */
	peak = gh_registry_peak_bytes();
	ctr.frees += gh_hot_sum(GH_HC_FREES);
	if (gh_state == GH_STATE_ACTIVE) {
		live = gh_registry_count();
		live_bytes = gh_registry_bytes();
	}
	if (gh_evlog_enabled()) {
		log_events = gh_evlog_written();
		log_dropped = gh_evlog_dropped();
	}
	memset(&s, 0, sizeof(s));
	s.size = sizeof(s) < want ? sizeof(s) : want;
#define X(m, label, value, doc) s.m = (value);
	GH_STATS_LIST(X)
#undef X
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

/* One write(2): the printout never interleaves with the program's output. */
void gh_stats_print(void)
{
	struct gdrhook_stats s = { .size = sizeof(s) };
	char mem[64 * (GH_STAT_COUNT_ + 1)];
	struct gh_buf b;

	gdrhook_get_stats(&s);
	if (gh_cfg.stats < 2 && !s.regs_seen &&
	    !__atomic_load_n(&gh_cuda_used, __ATOMIC_RELAXED))
		return;
	gh_buf_init(&b, mem, sizeof(mem));
	gh_buf_lit(&b, "gdrhook[");
	gh_buf_i64(&b, getpid());
	gh_buf_lit(&b, "]: stats\n");
#define X(m, label, value, doc) row(&b, label, s.m);
	GH_STATS_LIST(X)
#undef X
	gh_write_nosig(STDERR_FILENO, mem, b.len, 1000, NULL);
#ifdef GH_PHASES
	gh_ph_print();
#endif
}

/* The face's part of the lifecycle (init.c calls it at the first CUDA or
 * verbs use and at exit): handed down, so init calls nothing above it. */
__attribute__((constructor)) static void stats_face_init(void)
{
	gh_lifecycle_set_face(gh_info_banner, gh_stats_print);
}
