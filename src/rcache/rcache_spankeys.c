// SPDX-License-Identifier: MIT
/*
 * Spans, the key table: cached registrations that are not exactly one
 * allocation are keyed by a span key (this file, below the cache core:
 * the cache core claims, releases and looks keys up here); what to pin and
 * register is decided above the core (rcache_span.c).
 *
 * 1. A registration that runs across adjacent VMM mappings (PyTorch's
 *    expandable segments map one range in 20 MiB chunks, NCCL's cuMem
 *    buffers and vLLM-style pools likewise) is served as one cached
 *    registration of the mappings it touches, [first mapping's base, last
 *    mapping's end): within the program's own memory, as the exposure rule
 *    of the cache core asks.  A later registration across mappings that a cached
 *    span already covers is a hit on it (as a registration inside one
 *    allocation is a hit on the allocation's registration); one inside a
 *    single mapping stays that mapping's own (no span search on that
 *    path).  The real driver exports such a range as one
 *    dma-buf even when the mappings are of different physical allocations
 *    (H100, driver 580; it refuses once one of them is unmapped), so the
 *    dmabuf backend pins a span with one export, like an allocation.
 * 2. An allocation, or a span, larger than the BAR1 budget (src/pin/bar.c):
 *    the cache pins and registers only the registered range rounded out
 *    to 64 KiB.
 *
 * A span is keyed in the cache by a span key (bit 62 set; allocation
 * generations never reach it) in place of an allocation generation.  It
 * is revoked before any of its mappings is unmapped: the free path of
 * each mapping (gh_rcache_invalidate) kills every span that names the
 * mapping's generation.  The race with a registration in progress is
 * closed as for allocations (see rcache_state.h): a new span record
 * announces itself on each of its mappings' generations (an RMW on
 * sp.cnt) and then re-checks the registry; the free path removes the
 * mapping from the registry and then reads sp.cnt with an RMW.  A remap
 * of a chunk is a new generation, so the next registration forms a new
 * span: a miss.
 *
 * Locking: sp.lock guards the span table and is taken either alone (the
 * registration path, before calling into the cache) or inside the cache
 * lock (claim, release, next), never the other way round.
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>

#include "pin/pin.h"
#include "rcache_spankeys.h"
#include "rcache_state.h"

#define SP_CAP		4096	/* spans at once; more are passed through */
#define SP_MAX		GH_SPAN_MAX
#define SP_CBITS	14
#define SP_KEY_BIT	(1ULL << 62)
#define SP_SLOT_BITS	16

enum { S_FREE = 0, S_NEW, S_CLAIMED };

struct span {
	uint64_t key;
	uint64_t lo, hi;		/* what is pinned and registered */
	uint32_t state, n;
	uint64_t gen[SP_MAX], base[SP_MAX];
};

static struct {
	pthread_mutex_t lock;
	struct span *s;
	uint32_t hi;			/* slots ever used */
	uint64_t seq;
	uint32_t *cnt;			/* claimed spans per gen bucket */
} sp = { .lock = PTHREAD_MUTEX_INITIALIZER };

static uint32_t hash_gen(uint64_t gen)
{
	return (uint32_t)((gen * 0x9e3779b97f4a7c15ULL) >> (64 - SP_CBITS));
}

/* A child of fork: a thread that held the lock is gone (CUDA is unusable
 * there anyway; the table only has to stay reachable). */
static void atfork_child(void)
{
	pthread_mutex_init(&sp.lock, NULL);
}

static void init_maps(void)
{
	void *s = mmap(NULL, sizeof(struct span) * SP_CAP,
		       PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	void *c = mmap(NULL, sizeof(uint32_t) << SP_CBITS,
		       PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	if (s == MAP_FAILED || c == MAP_FAILED)
		return;
	sp.cnt = c;
	pthread_atfork(NULL, NULL, atfork_child);
	__atomic_store_n(&sp.s, (struct span *)s, __ATOMIC_RELEASE);
}

static int sp_init(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, init_maps);
	return __atomic_load_n(&sp.s, __ATOMIC_ACQUIRE) && sp.cnt ? 0 :
	       -ENOMEM;
}

static struct span *slot_of(uint64_t key)
{
	uint32_t i = (uint32_t)(key & ((1u << SP_SLOT_BITS) - 1));
	struct span *s;

	if (!gh_rcspan_is_key(key) || !sp.s || i >= sp.hi)
		return NULL;
	s = &sp.s[i];
	return s->key == key && s->state != S_FREE ? s : NULL;
}

static void slot_free(struct span *s)
{
	s->state = S_FREE;
	s->key = 0;
}

/* ---------------------------- for the cache core, with the cache lock held */

int gh_rcspan_claim(struct rc_state *rc, uint64_t key)
{
	struct span *s;
	struct gh_range cur;
	int err = 0;

	RC_LOCKED(rc);

	pthread_mutex_lock(&sp.lock);
	s = slot_of(key);
	if (!s || s->state != S_NEW) {
		err = -ESTALE;
		goto out;
	}
	for (uint32_t i = 0; i < s->n; i++)
		__atomic_add_fetch(&sp.cnt[hash_gen(s->gen[i])], 1,
				   __ATOMIC_ACQ_REL);
	for (uint32_t i = 0; i < s->n && !err; i++)
		if (gh_registry_lookup(s->base[i], 1, &cur) ||
		    cur.gen != s->gen[i] || cur.base != s->base[i])
			err = -ESTALE;
	if (err) {
		for (uint32_t i = 0; i < s->n; i++)
			__atomic_sub_fetch(&sp.cnt[hash_gen(s->gen[i])], 1,
					   __ATOMIC_ACQ_REL);
		slot_free(s);
		goto out;
	}
	s->state = S_CLAIMED;
out:
	pthread_mutex_unlock(&sp.lock);
	return err;
}

void gh_rcspan_release(struct rc_state *rc, uint64_t key)
{
	struct span *s;

	RC_LOCKED(rc);

	pthread_mutex_lock(&sp.lock);
	s = slot_of(key);
	if (s) {
		if (s->state == S_CLAIMED)
			for (uint32_t i = 0; i < s->n; i++)
				__atomic_sub_fetch(&sp.cnt[hash_gen(s->gen[i])],
						   1, __ATOMIC_ACQ_REL);
		slot_free(s);
	}
	pthread_mutex_unlock(&sp.lock);
}

int gh_rcspan_pending(uint64_t gen)
{
	if (!__atomic_load_n(&sp.s, __ATOMIC_ACQUIRE))
		return 0;
	/* An RMW, not a load: see the top of this file. */
	return __atomic_fetch_add(&sp.cnt[hash_gen(gen)], 0,
				  __ATOMIC_ACQ_REL) != 0;
}

uint64_t gh_rcspan_next(struct rc_state *rc, uint64_t gen, uint32_t *cursor)
{
	uint64_t key = 0;

	RC_LOCKED(rc);

	pthread_mutex_lock(&sp.lock);
	for (; !key && *cursor < sp.hi; (*cursor)++) {
		struct span *s = &sp.s[*cursor];

		if (s->state != S_CLAIMED)
			continue;
		for (uint32_t i = 0; i < s->n; i++) {
			if (s->gen[i] == gen) {
				key = s->key;
				break;
			}
		}
	}
	pthread_mutex_unlock(&sp.lock);
	return key;
}

/* ------------------------------------------------- for the span policy */

/* Are w's mappings a run of s's?  (Then s serves w: its registration
 * reaches only the program's own mappings, already registered in that
 * PD.) */
static int contains(const struct span *s, const struct gh_span_walk *w)
{
	for (uint32_t j = 0; j + w->n <= s->n; j++)
		if (s->gen[j] == w->gen[0])
			return !memcmp(s->gen + j, w->gen,
				       w->n * sizeof(uint64_t));
	return 0;
}

/* A span of w, or one that contains it, covering [*lo_p, *hi_p), made if needed (state S_NEW until
 * the cache claims it); its key (0: table full), its extent in *lo_p,
 * *hi_p. */
uint64_t gh_rcspan_get(const struct gh_span_walk *w, uint64_t *lo_p,
		       uint64_t *hi_p)
{
	uint64_t lo = *lo_p, hi = *hi_p;
	uint64_t key = 0;
	uint32_t free_i = UINT32_MAX;
	struct span *s;

	if (sp_init())
		return 0;
	pthread_mutex_lock(&sp.lock);
	for (uint32_t i = 0; i < sp.hi; i++) {
		s = &sp.s[i];
		if (s->state == S_FREE) {
			if (free_i == UINT32_MAX)
				free_i = i;
			continue;
		}
		if (s->lo <= lo && s->hi >= hi && contains(s, w)) {
			key = s->key;
			*lo_p = s->lo;
			*hi_p = s->hi;
			goto out;
		}
	}
	if (free_i == UINT32_MAX) {
		if (sp.hi == SP_CAP)
			goto out;
		free_i = sp.hi++;
	}
	s = &sp.s[free_i];
	key = SP_KEY_BIT | (++sp.seq << SP_SLOT_BITS) | free_i;
	s->key = key;
	s->lo = lo;
	s->hi = hi;
	s->n = w->n;
	memcpy(s->gen, w->gen, w->n * sizeof(uint64_t));
	memcpy(s->base, w->base, w->n * sizeof(uint64_t));
	s->state = S_NEW;
out:
	pthread_mutex_unlock(&sp.lock);
	return key;
}

/* A span the cache never claimed (its registration failed early). */
void gh_rcspan_drop_unclaimed(uint64_t key)
{
	struct span *s;

	pthread_mutex_lock(&sp.lock);
	s = slot_of(key);
	if (s && s->state == S_NEW)
		slot_free(s);
	pthread_mutex_unlock(&sp.lock);
}

