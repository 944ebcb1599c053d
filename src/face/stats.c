// SPDX-License-Identifier: MIT
/*
 * Counters: relaxed atomics, printed at exit with GDRHOOK_STATS=1 by the
 * processes that used CUDA or verbs (a process tree's shells and tools
 * inherit the variable and have nothing to say), by every process with
 * GDRHOOK_STATS=all (gh_hooks_cfg.stats 2), on stderr after what the program
 * wrote to stdout.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "registry/registry.h"
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
	struct gh_mw_counters mw;
	uint64_t want, live = 0, live_bytes = 0, peak, log_events = 0,
		 log_dropped = 0;

	if (!st || st->size < sizeof(uint64_t))
		return -EINVAL;
	want = st->size;
	memset(&rc, 0, sizeof(rc));
	if (gh_rcache_ready())
		gh_rcache_counters(&rc);
	gh_mw_counters(&mw);
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

/* A size in bytes as people read it: "512 B", "4.2 MiB" (one decimal). */
static void put_bytes(struct gh_buf *b, uint64_t v)
{
	static const char unit[][4] = { "B", "KiB", "MiB", "GiB", "TiB",
					"PiB", "EiB" };
	unsigned u = 0;
	uint64_t whole, tenths;

	while (u + 1 < sizeof(unit) / sizeof(unit[0]) &&
	       v >> (10 * (u + 1)))
		u++;
	whole = v >> (10 * u);
	gh_buf_u64(b, whole);
	if (u) {
		/* the remainder is below 2^(10u) <= 2^60: times 10 fits */
		tenths = ((v & ((1ULL << (10 * u)) - 1)) * 10) >> (10 * u);
		gh_buf_putc(b, '.');
		gh_buf_putc(b, (char)('0' + tenths));
	}
	gh_buf_putc(b, ' ');
	gh_buf_puts(b, unit[u]);
}

/* A count, exact (scripts compare them), with "(1.2M)" when it is long. */
static void put_count(struct gh_buf *b, uint64_t v)
{
	gh_buf_u64(b, v);
	if (v < 100000)
		return;
	gh_buf_lit(b, " (");
	if (v < 1000000) {
		gh_buf_u64(b, v / 1000);
		gh_buf_putc(b, 'k');
	} else {
		int big = v >= 1000000000;
		uint64_t d = big ? 1000000000 : 1000000;

		gh_buf_u64(b, v / d);
		gh_buf_putc(b, '.');
		gh_buf_putc(b, (char)('0' + v % d / (d / 10)));
		gh_buf_putc(b, big ? 'G' : 'M');
	}
	gh_buf_putc(b, ')');
}

static int is_bytes(int i)
{
	return i == GH_STAT_IDX_live_bytes || i == GH_STAT_IDX_peak_live_bytes ||
	       i == GH_STAT_IDX_pinned_bytes;
}

/* A zero worth a row: the verdict of a check the run asked for. */
static int zero_shown(int i)
{
	return gh_registry_cfg.validate &&
	       (i == GH_STAT_IDX_audit_checks ||
		i == GH_STAT_IDX_audit_disagreements);
}

/* "  label<pad>value": one counter a line, as scripts read it (awk $3). */
static void row(struct gh_buf *b, int i, const char *name, uint64_t v,
		unsigned *zeros)
{
	size_t n = strlen(name);

	if (!v && !zero_shown(i)) {
		(*zeros)++;
		return;
	}
	gh_buf_puts(b, "  ");
	gh_buf_puts(b, name);
	while (n++ < 24)
		gh_buf_putc(b, ' ');
	if (is_bytes(i))
		put_bytes(b, v);
	else
		put_count(b, v);
	gh_buf_putc(b, '\n');
}

/*
 * The program's own output first.  stdio flushes the program's buffers
 * only after every exit handler has run, this one included: a program
 * whose stdout is a pipe or a file would show its output after the block.
 * Exit is no hook path, so stdio is allowed here; the trylock keeps a
 * thread that holds stdout (blocked on a full pipe) from hanging the exit,
 * which then flushes as it would have.
 */
static void flush_program_output(void)
{
	int saved = errno;

	if (!ftrylockfile(stdout)) {
		fflush_unlocked(stdout);
		funlockfile(stdout);
	}
	errno = saved;
}

/*
 * The block after the program's output (flush_program_output), in one
 * write(2): it never interleaves with it.  Zero counters are left out
 * and counted in the last line; sizes are in KiB, MiB, GiB.
 */
void gh_stats_print(void)
{
	struct gdrhook_stats s = { .size = sizeof(s) };
	char mem[64 * (GH_STAT_COUNT_ + 1)];
	struct gh_buf b;
	unsigned zeros = 0;

	gdrhook_get_stats(&s);
	if (gh_hooks_cfg.stats < 2 && !s.regs_seen &&
	    !__atomic_load_n(&gh_cuda_used, __ATOMIC_RELAXED))
		return;
	gh_buf_init(&b, mem, sizeof(mem));
	gh_buf_lit(&b, "gdrhook[");	/* the diagnostics' prefix, less a tid */
	gh_log_host(&b);
	gh_buf_putc(&b, ':');
	gh_buf_i64(&b, getpid());
	gh_buf_lit(&b, "]: stats\n");
#define X(m, label, value, doc) row(&b, GH_STAT_IDX_##m, label, s.m, &zeros);
	GH_STATS_LIST(X)
#undef X
	if (zeros) {
		/* a lower-case start, as the rows (scripts tell them apart) */
		gh_buf_puts(&b, zeros == GH_STAT_COUNT_ - 1 ? "  all " :
			    "  the other ");
		gh_buf_u64(&b, zeros);
		gh_buf_lit(&b, " counters are 0\n");
	}
	flush_program_output();
	gh_write_nosig(STDERR_FILENO, mem, b.len, 1000, NULL);
#ifdef GH_PHASES
	gh_ph_print();
#endif
}

/* The face's part of the lifecycle (init.c calls it at the first CUDA or
 * verbs use and at exit): handed down by the link, not by a constructor
 * (init.h says why), so init calls nothing above it. */
GH_FACE_OPS(face_ops) = { gh_info_banner, gh_stats_print };
