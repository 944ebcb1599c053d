/* SPDX-License-Identifier: MIT */
/*
 * The hook path's counters and, in a measurement build, its phase timer
 * (src/face/stats.c).
 *
 * Counters every allocation and free bumps are striped: each thread adds
 * to its own cache line (one of GH_STRIPES, picked once per thread), and
 * gdrhook_get_stats() sums the stripes.  A shared counter line written
 * by every allocation of every thread costs a cache-line transfer per
 * call once threads allocate at once (tests/bench/README.md, "The
 * allocation path under threads").
 *
 * GH_PHASES (make CFLAGS="-O2 -g -DGH_PHASES"; never in a release
 * build): src/hooks/events.c times each phase of the alloc and free hooks with
 * the TSC into per-thread slots; GDRHOOK_STATS=1 prints cycles and ns
 * per call of each phase at exit.
 */
#ifndef GH_COUNTERS_H
#define GH_COUNTERS_H

#include <stdint.h>

#define GH_STRIPES 64

enum gh_hot_ctr { GH_HC_ALLOCS, GH_HC_FREES, GH_HC_N };

struct gh_stripe {
	uint64_t v[GH_HC_N];
} __attribute__((aligned(64)));

extern struct gh_stripe gh_stripes[GH_STRIPES];
extern __thread int gh_stripe_ix;
int gh_stripe_pick(void);

/* Relaxed add to this thread's stripe: no line shared with other
 * threads in the common case (more than GH_STRIPES threads share). */
static inline void gh_hot_count(enum gh_hot_ctr c)
{
	int i = gh_stripe_ix;

	if (__builtin_expect(!i, 0))
		i = gh_stripe_pick();
	__atomic_add_fetch(&gh_stripes[i - 1].v[c], 1, __ATOMIC_RELAXED);
}

uint64_t gh_hot_sum(enum gh_hot_ctr c);

#ifdef GH_PHASES
#include <x86intrin.h>

/* Per phase: calls and time per call, on stderr (GDRHOOK_STATS=1). */
void gh_ph_print(void);

enum gh_phase {
	GH_PH_ALLOC_POST,	/* all of gh_alloc_post */
	GH_PH_A_OWNER,		/* context and device of the allocation */
	GH_PH_A_INSERT,		/* registry insert */
	GH_PH_A_INFLIGHT,	/* gh_inflight_note */
	GH_PH_A_COUNT,		/* counters, peak */
	GH_PH_A_SUBS,		/* subscribers */
	GH_PH_A_LOG,		/* log record built and put */
	GH_PH_FREE_PRE,		/* all of gh_free_pre */
	GH_PH_F_REMOVE,		/* registry remove */
	GH_PH_F_INFLIGHT,	/* gh_inflight_note_free */
	GH_PH_F_RCACHE,		/* gh_rcache_invalidate */
	GH_PH_F_SUBS,		/* subscribers */
	GH_PH_FREE_POST,	/* all of gh_free_post */
	GH_PH_F_LOG,		/* log record built and put */
	GH_PH_F_COUNT,		/* counters */
	GH_PH_N
};

struct gh_ph_thread {
	uint64_t cyc[GH_PH_N], cnt[GH_PH_N], max[GH_PH_N];
	uint32_t hist[GH_PH_N][32];	/* by log2 of the cycles */
} __attribute__((aligned(64)));

static inline void gh_ph_add(struct gh_ph_thread *t, int p, uint64_t d)
{
	int b = 63 - __builtin_clzll(d | 1);

	t->cyc[p] += d;
	t->cnt[p]++;
	if (d > t->max[p])
		t->max[p] = d;
	t->hist[p][b > 31 ? 31 : b]++;
}

extern __thread struct gh_ph_thread *gh_ph_me;
struct gh_ph_thread *gh_ph_get(void);

#define GH_PH_T(v)	uint64_t v = __rdtsc()
#define GH_PH_LAP(p, v)							\
	do {								\
		struct gh_ph_thread *t_ = gh_ph_me ? gh_ph_me :		\
					  gh_ph_get();			\
		uint64_t n_ = __rdtsc();				\
		if (t_)							\
			gh_ph_add(t_, (p), n_ - (v));			\
		(v) = n_;						\
	} while (0)
#define GH_PH_SPAN(p, v0)						\
	do {								\
		struct gh_ph_thread *t_ = gh_ph_me ? gh_ph_me :		\
					  gh_ph_get();			\
		if (t_)							\
			gh_ph_add(t_, (p), __rdtsc() - (v0));		\
	} while (0)
#else
#define GH_PH_T(v)		do { } while (0)
#define GH_PH_LAP(p, v)		do { } while (0)
#define GH_PH_SPAN(p, v0)	do { } while (0)
#endif

/* Counters (counters.c); printed by the face (stats.c). */
struct gh_counters {
	uint64_t allocs, frees, frees_untracked, failed_calls;
	uint64_t implicit_frees, lookups, untrusted;
	uint64_t audit_checks, audit_disagreements;
	uint64_t regs_seen, regs_passed;	/* verbs registrations */
	uint64_t regs_raced;	/* ... tied or revoked by a racing memory call */
};
extern struct gh_counters gh_ctr;
#define GH_COUNT(field, n) \
	__atomic_add_fetch(&gh_ctr.field, (n), __ATOMIC_RELAXED)

#endif
