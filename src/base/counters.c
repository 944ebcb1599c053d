// SPDX-License-Identifier: MIT
/*
 * The counters' storage (base layer: every layer counts, stats.c prints
 * and sums them): gh_ctr, the per-thread stripes of the hook path's
 * counters (counters.h), and in a GH_PHASES build the phase timer.
 */
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "counters.h"
#include "fmt.h"
#include "log.h"

struct gh_counters gh_ctr;

struct gh_stripe gh_stripes[GH_STRIPES];
/* 1 + this thread's stripe; 0: not picked yet */
__thread int gh_stripe_ix;
static unsigned int stripe_next;

int gh_stripe_pick(void)
{
	unsigned int n = __atomic_fetch_add(&stripe_next, 1, __ATOMIC_RELAXED);

	gh_stripe_ix = (int)(n % GH_STRIPES) + 1;
	return gh_stripe_ix;
}

uint64_t gh_hot_sum(enum gh_hot_ctr c)
{
	uint64_t sum = 0;

	for (int i = 0; i < GH_STRIPES; i++)
		sum += __atomic_load_n(&gh_stripes[i].v[c], __ATOMIC_RELAXED);
	return sum;
}

#ifdef GH_PHASES
#define GH_PH_THREADS 1024
static struct gh_ph_thread ph_threads[GH_PH_THREADS];
static unsigned int ph_next;
static uint64_t ph_tsc0, ph_ns0;
__thread struct gh_ph_thread *gh_ph_me;

struct gh_ph_thread *gh_ph_get(void)
{
	unsigned int n = __atomic_fetch_add(&ph_next, 1, __ATOMIC_RELAXED);
	uint64_t zero = 0;

	if (__atomic_compare_exchange_n(&ph_tsc0, &zero, __rdtsc(), 0,
					__ATOMIC_RELAXED, __ATOMIC_RELAXED))
		ph_ns0 = gh_now_ns();
	if (n >= GH_PH_THREADS)
		return NULL;
	gh_ph_me = &ph_threads[n];
	return gh_ph_me;
}

static const char *const ph_names[GH_PH_N] = {
	"alloc_post (all)", "  owner (ctx, dev)", "  registry insert",
	"  inflight note", "  counters", "  subscribers", "  log",
	"free_pre (all)", "  registry remove", "  inflight note_free",
	"  rcache invalidate", "  subscribers", "free_post (all)", "  log",
	"  counters",
};

/* Per phase: calls, cycles per call, ns per call (TSC calibrated against
 * CLOCK_MONOTONIC since the first timed call). */
void gh_ph_print(void)
{
	uint64_t cyc[GH_PH_N] = { 0 }, cnt[GH_PH_N] = { 0 }, mx[GH_PH_N] = { 0 };
	uint64_t hist[GH_PH_N][32];
	unsigned int n = __atomic_load_n(&ph_next, __ATOMIC_RELAXED);
	double ghz = 0;
	char mem[200 * (GH_PH_N + 2)];
	struct gh_buf b;

	if (n > GH_PH_THREADS)
		n = GH_PH_THREADS;
	memset(hist, 0, sizeof(hist));
	for (unsigned int i = 0; i < n; i++)
		for (int p = 0; p < GH_PH_N; p++) {
			cyc[p] += ph_threads[i].cyc[p];
			cnt[p] += ph_threads[i].cnt[p];
			if (ph_threads[i].max[p] > mx[p])
				mx[p] = ph_threads[i].max[p];
			for (int k = 0; k < 32; k++)
				hist[p][k] += ph_threads[i].hist[p][k];
		}
	if (ph_tsc0 && gh_now_ns() > ph_ns0)
		ghz = (double)(__rdtsc() - ph_tsc0) /
		      (double)(gh_now_ns() - ph_ns0);
	gh_buf_init(&b, mem, sizeof(mem));
	gh_buf_lit(&b, "gdrhook[");
	gh_buf_i64(&b, getpid());
	gh_buf_lit(&b, "]: phases (GH_PHASES build), threads ");
	gh_buf_u64(&b, n);
	gh_buf_lit(&b, ", TSC MHz ");
	gh_buf_u64(&b, (uint64_t)(ghz * 1000));
	gh_buf_putc(&b, '\n');
	for (int p = 0; p < GH_PH_N; p++) {
		size_t l = strlen(ph_names[p]);

		gh_buf_lit(&b, "  PH ");
		gh_buf_puts(&b, ph_names[p]);
		while (l++ < 22)
			gh_buf_putc(&b, ' ');
		gh_buf_lit(&b, " calls ");
		gh_buf_u64(&b, cnt[p]);
		gh_buf_lit(&b, " cyc/call ");
		gh_buf_u64(&b, cnt[p] ? cyc[p] / cnt[p] : 0);
		gh_buf_lit(&b, " ns/call ");
		gh_buf_u64(&b, cnt[p] && ghz > 0 ?
			   (uint64_t)((double)cyc[p] / (double)cnt[p] / ghz) : 0);
		/* without the one slowest call (a thread's first record maps
		 * its ring, the process's first starts the log) */
		gh_buf_lit(&b, " ns/call-max ");
		gh_buf_u64(&b, cnt[p] > 1 && ghz > 0 ?
			   (uint64_t)((double)(cyc[p] - mx[p]) /
				      (double)(cnt[p] - 1) / ghz) : 0);
		gh_buf_lit(&b, " max_us ");
		gh_buf_u64(&b, ghz > 0 ? (uint64_t)((double)mx[p] / ghz / 1e3) : 0);
		/* the median's power-of-two bucket */
		{
			uint64_t acc = 0;
			int k = 0;

			for (; k < 32 && cnt[p]; k++) {
				acc += hist[p][k];
				if (2 * acc >= cnt[p])
					break;
			}
			gh_buf_lit(&b, " p50_cyc ");
			gh_buf_u64(&b, cnt[p] ? 1ull << k : 0);
			gh_buf_putc(&b, '-');
			gh_buf_u64(&b, cnt[p] ? 2ull << k : 0);
		}
		gh_buf_putc(&b, '\n');
	}
	gh_write_nosig(STDERR_FILENO, mem, b.len, 1000, NULL);
}
#endif

