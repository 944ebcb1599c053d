// SPDX-License-Identifier: MIT
/*
 * Per-thread slots given back at thread end (tslot.h): a bitmap taken by
 * compare-and-swap (a first hook may run in a signal handler), and a
 * pthread key whose destructor hands the slot back.
 */
#include <stddef.h>

#include "tslot.h"

/*
 * glibc keeps the values of the first 32 keys in the thread descriptor
 * (PTHREAD_KEY_2NDLEVEL_SIZE); setting a later key's value may calloc,
 * which a hook must not.
 */
#define GH_TSLOT_INLINE_KEYS	32

void gh_tslot_init(struct gh_tslot_set *s, void (*dtor)(void *))
{
	if (s->n > GH_TSLOT_MAX)
		s->n = GH_TSLOT_MAX;
	if (!pthread_key_create(&s->key, dtor)) {
		if ((unsigned long)s->key < GH_TSLOT_INLINE_KEYS)
			__atomic_store_n(&s->key_ok, 1, __ATOMIC_RELEASE);
		else
			pthread_key_delete(s->key);
	}
}

/* The bits of word w that name slots. */
static uint64_t word_mask(const struct gh_tslot_set *s, unsigned int w)
{
	unsigned int left = s->n - w * 64;

	return left >= 64 ? ~0ull : (1ull << left) - 1;
}

int gh_tslot_take(struct gh_tslot_set *s)
{
	for (unsigned int w = 0; w * 64 < s->n; w++) {
		uint64_t m = word_mask(s, w);
		uint64_t cur = __atomic_load_n(&s->used[w], __ATOMIC_RELAXED);

		while (~cur & m) {
			uint64_t bit = 1ull << __builtin_ctzll(~cur & m);
			unsigned int i;

			/* acquire: the last owner's writes to the slot */
			if (!__atomic_compare_exchange_n(&s->used[w], &cur,
							 cur | bit, 1,
							 __ATOMIC_ACQUIRE,
							 __ATOMIC_RELAXED))
				continue;
			i = w * 64 + (unsigned int)__builtin_ctzll(bit);
			if (__atomic_load_n(&s->key_ok, __ATOMIC_ACQUIRE))
				pthread_setspecific(s->key,
						    (void *)(uintptr_t)(i + 1));
			return (int)i;
		}
	}
	return -1;
}

void gh_tslot_give(struct gh_tslot_set *s, unsigned int i)
{
	if (i < s->n)
		__atomic_fetch_and(&s->used[i / 64], ~(1ull << (i % 64)),
				   __ATOMIC_RELEASE);
}

unsigned int gh_tslot_count(const struct gh_tslot_set *s)
{
	unsigned int c = 0;

	for (unsigned int w = 0; w * 64 < s->n; w++)
		c += (unsigned int)__builtin_popcountll(
			__atomic_load_n(&s->used[w], __ATOMIC_RELAXED));
	return c;
}

void gh_tslot_reset(struct gh_tslot_set *s, int keep)
{
	for (unsigned int w = 0; w * 64 < s->n; w++)
		__atomic_store_n(&s->used[w],
				 keep >= 0 && (unsigned int)keep / 64 == w ?
				 1ull << (keep % 64) : 0, __ATOMIC_RELAXED);
}
