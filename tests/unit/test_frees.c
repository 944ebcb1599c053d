// SPDX-License-Identifier: MIT
/*
 * The free sequence (src/registry/frees.c): the listeners (each once, at
 * most GH_FREES_MAX), and what follows every removal, in its one order:
 * the range is gone from the registry, the registrations in flight over
 * it are told, then the listeners in the order they listened, then the
 * subscribers; gh_frees_remove_matching removes in batches outside the
 * registry's locks and calls the caller's after() last for each range.
 */
#include <pthread.h>
#include <sched.h>
#include <stdint.h>

#include "harness.h"
#include "registry/registry.h"

#define MiB	(1ULL << 20)
#define BASE	0x7f1000000000ULL

/* What ran, in order: one letter per step ('1', '2'... listeners, 'S'
 * subscriber, 'A' after), one line per range. */
static char trail[4096];
static size_t trail_n;

static void put(char c)
{
	if (trail_n < sizeof(trail) - 1)
		trail[trail_n++] = c;
}

static struct gh_if_rec *rec_over, *rec_away;
static int settled_over = -1, settled_away = -1, seen_in_registry = -1;

static void listener1(const struct gh_range *r)
{
	struct gh_range now;

	put('1');
	/* step 1 ran before: the registration over the range was told */
	if (rec_over) {
		settled_over = gh_inflight_settle(rec_over);
		settled_away = gh_inflight_settle(rec_away);
		rec_over = rec_away = NULL;
	}
	seen_in_registry = gh_registry_lookup(r->base, 1, &now) == 0;
}

static void listener2(const struct gh_range *r)
{
	put('2');
}

static void listener3(const struct gh_range *r)
{
	put('3');
}

static void listener4(const struct gh_range *r)
{
	put('4');
}

static void listener5(const struct gh_range *r)
{
	put('5');
}

static struct gdrhook_event last_ev;
static int n_ev;

static void subscriber(const struct gdrhook_event *ev, void *arg)
{
	put('S');
	last_ev = *ev;
	n_ev++;
}

static int every(const struct gh_range *r, void *arg)
{
	return 1;
}

static uint64_t ins(uint64_t base, uint64_t size, int32_t dev)
{
	struct gh_range r = { .base = base, .size = size, .dev = dev,
			      .kind = GDRHOOK_KIND_DEVICE, .ctx = 0xc0 };
	uint64_t gen = 0;

	CHECK_EQ(gh_registry_insert(&r, &gen), 0);
	return gen;
}

TEST(listen_each_once_at_most_max)
{
	CHECK_EQ(GH_FREES_MAX, 4);
	CHECK_EQ(gh_frees_listen(listener1), 0);
	CHECK_EQ(gh_frees_listen(listener1), -EEXIST);
	CHECK_EQ(gh_frees_listen(listener2), 0);
	CHECK_EQ(gh_frees_listen(listener3), 0);
	CHECK_EQ(gh_frees_listen(listener4), 0);
	CHECK_EQ(gh_frees_listen(listener5), -ENOSPC);
	CHECK_EQ(gh_frees_listen(listener2), -EEXIST);

	/* the four listen, the refused one does not, each once */
	CHECK_EQ(gh_registry_init(), 0);
	ins(BASE, MiB, 0);
	CHECK_EQ(gh_frees_remove_matching(every, NULL, "cuCtxDestroy", NULL,
					  NULL), 1);
	CHECK_STR(trail, "1234");
}

TEST(remove_in_order_inflight_listeners_subscribers)
{
	struct gh_range out;
	uint64_t gen;

	CHECK_EQ(gh_registry_init(), 0);
	CHECK_EQ(gh_frees_listen(listener1), 0);
	CHECK_EQ(gh_frees_listen(listener2), 0);
	CHECK(gh_subscribers_add(GDRHOOK_EVENT_FREE, subscriber, NULL) >= 0);
	gen = ins(BASE, 4 * MiB, 3);
	ins(BASE + 8 * MiB, MiB, 3);
	/* registrations in flight: one over the range, one elsewhere */
	CHECK_EQ(gh_inflight_enter(BASE + MiB, 4096, &rec_over), 0);
	CHECK_EQ(gh_inflight_enter(BASE + 8 * MiB, 4096, &rec_away), 0);

	memset(&out, 0xcc, sizeof(out));
	CHECK_EQ(gh_frees_remove(BASE, &out, "cuMemFree_v2"), 0);
	CHECK_STR(trail, "12S");
	CHECK_EQ(settled_over, 1);	/* touched: told before the listeners */
	CHECK_EQ(settled_away, 0);	/* another range: untouched */
	CHECK_EQ(seen_in_registry, 0);	/* removed before anyone is told */
	CHECK_EQ(out.base, BASE);
	CHECK_EQ(out.size, 4 * MiB);
	CHECK_EQ(out.gen, gen);
	CHECK_EQ(out.dev, 3);
	CHECK_EQ(n_ev, 1);
	CHECK_EQ(last_ev.type, GDRHOOK_EVENT_FREE);
	CHECK_EQ(last_ev.range.base, BASE);
	CHECK_EQ(last_ev.range.gen, gen);
	CHECK_STR(last_ev.api, "cuMemFree_v2");
	CHECK_EQ(gh_registry_count(), 1);
}

TEST(remove_nothing_based_there)
{
	struct gh_range out;

	CHECK_EQ(gh_registry_init(), 0);
	CHECK_EQ(gh_frees_listen(listener2), 0);
	CHECK(gh_subscribers_add(GDRHOOK_EVENT_FREE, subscriber, NULL) >= 0);
	ins(BASE, MiB, 0);
	/* inside the range, not its base; and nothing at all */
	CHECK_EQ(gh_frees_remove(BASE + 4096, &out, "cuMemFree_v2"), -ENOENT);
	CHECK_EQ(gh_frees_remove(BASE + 64 * MiB, &out, "cuMemFree_v2"),
		 -ENOENT);
	CHECK_STR(trail, "");
	CHECK_EQ(n_ev, 0);
	CHECK_EQ(gh_registry_count(), 1);
}

/* ------------------------------------------------ removal by matching */

#define N_RANGES	300
static uint64_t gens[N_RANGES];
static int removed_by_listener[N_RANGES], removed_after[N_RANGES];
static int order_bad;

static int index_of(const struct gh_range *r)
{
	return (int)((r->base - BASE) / (2 * MiB));
}

static int odd_device(const struct gh_range *r, void *arg)
{
	int *asked = arg;

	(*asked)++;
	return r->dev & 1;
}

static void count_listener(const struct gh_range *r)
{
	int i = index_of(r);

	if (i >= 0 && i < N_RANGES)
		removed_by_listener[i]++;
}

static void after(const struct gh_range *r, void *arg)
{
	int i = index_of(r);
	int *n = arg;

	(*n)++;
	if (i < 0 || i >= N_RANGES || gens[i] != r->gen ||
	    removed_by_listener[i] != 1)
		order_bad++;	/* after() before the listener, or foreign */
	else
		removed_after[i]++;
}

/* More ranges match than one batch holds (128): every one is removed
 * once, told once, after() once, and only those. */
TEST(remove_matching_past_one_batch)
{
	int asked = 0, n_after = 0, left = 0;

	CHECK_EQ(gh_registry_init(), 0);
	CHECK_EQ(gh_frees_listen(count_listener), 0);
	CHECK(gh_subscribers_add(GDRHOOK_EVENT_FREE, subscriber, NULL) >= 0);
	/* 2/3 on odd devices: 200 match */
	for (int i = 0; i < N_RANGES; i++)
		gens[i] = ins(BASE + (uint64_t)i * 2 * MiB, MiB,
			      i % 3 ? 1 : 2);
	CHECK_EQ(gh_frees_remove_matching(odd_device, &asked,
					  "cuDevicePrimaryCtxReset", after,
					  &n_after), 200);
	CHECK(asked >= N_RANGES);
	CHECK_EQ(n_after, 200);
	CHECK_EQ(n_ev, 200);
	CHECK_STR(last_ev.api, "cuDevicePrimaryCtxReset");
	CHECK_EQ(order_bad, 0);
	for (int i = 0; i < N_RANGES; i++) {
		struct gh_range r;
		int gone = gh_registry_lookup(BASE + (uint64_t)i * 2 * MiB, 1,
					      &r) == -ENOENT;

		CHECK_EQ(removed_by_listener[i], i % 3 ? 1 : 0);
		CHECK_EQ(removed_after[i], i % 3 ? 1 : 0);
		CHECK_EQ(gone, i % 3 != 0);
		left += !gone;
	}
	CHECK_EQ(left, 100);
	CHECK_EQ(gh_registry_count(), 100);

	/* nothing matches now: nothing removed, after() not called */
	n_after = 0;
	CHECK_EQ(gh_frees_remove_matching(odd_device, &asked, "x", after,
					  &n_after), 0);
	CHECK_EQ(n_after, 0);
	/* no after(): the rest go all the same */
	CHECK_EQ(gh_frees_remove_matching(every, NULL, "x", NULL, NULL), 100);
	CHECK_EQ(gh_registry_count(), 0);
}

/* ---------------------------------- listening while frees go on */

static int stop, late_calls;

static void late_listener(const struct gh_range *r)
{
	__atomic_add_fetch(&late_calls, 1, __ATOMIC_RELAXED);
}

static void *freer(void *arg)
{
	uint64_t i = 0, *rounds = arg;

	while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
		struct gh_range out;
		uint64_t b = BASE + (i++ % 64) * MiB;

		ins(b, MiB, 0);
		CHECK_EQ(gh_frees_remove(b, &out, "cuMemFree_v2"), 0);
		__atomic_add_fetch(rounds, 1, __ATOMIC_RELEASE);
	}
	return NULL;
}

/* A listener added while another thread frees is called for every
 * removal that begins after gh_frees_listen returned. */
TEST(listen_while_freeing)
{
	uint64_t rounds = 0, at;
	pthread_t t;
	int calls;

	CHECK_EQ(gh_registry_init(), 0);
	CHECK_EQ(pthread_create(&t, NULL, freer, &rounds), 0);
	while (__atomic_load_n(&rounds, __ATOMIC_ACQUIRE) < 100)
		sched_yield();
	CHECK_EQ(gh_frees_listen(late_listener), 0);
	at = __atomic_load_n(&rounds, __ATOMIC_ACQUIRE);
	while (__atomic_load_n(&rounds, __ATOMIC_ACQUIRE) < at + 1000)
		sched_yield();
	__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
	pthread_join(t, NULL);
	calls = __atomic_load_n(&late_calls, __ATOMIC_RELAXED);
	/* at most one removal was under way when it listened */
	CHECK(calls >= (int)(rounds - at) - 1);
	CHECK(calls <= (int)rounds);
}

TEST_MAIN()
