/* SPDX-License-Identifier: MIT */
/*
 * Aliases and the per-thread shards (rcache_alias.c), for the paths that
 * hand aliases out.
 */
#ifndef GH_RCACHE_ALIAS_H
#define GH_RCACHE_ALIAS_H

#include <stddef.h>
#include <stdint.h>

#include "pin/pin.h"
#include "rcache_state.h"

/*
 * What every hit counts (hits, aliases held) goes to a per-thread shard,
 * written by its owner with plain relaxed load + store: no shared line,
 * no locked instruction.  Threads past RC_SHARDS share the last shard
 * with atomic adds.  Readers sum the shards.
 *
 * A shard also keeps a few free alias slots for its owner: a hit takes
 * one and a deregistration on the same thread gives it back without a
 * locked instruction on the shared stack.  The shared last shard keeps
 * none; the slots of a thread that exits stay in its shard (at most
 * RC_MAG per shard ever made: 2550 of the 1 M slots).  RC_MAG keeps a
 * shard to one line: at three lines a random hit was 40 ns slower.
 */
#define RC_SHARDS	256
#define RC_MAG		10
struct rc_shard {
	uint64_t hits;
	uint64_t aliases;	/* made minus dropped (wraps around) */
	uint32_t mag_n;		/* owner only */
	uint32_t mag[RC_MAG];	/* free alias slots, index + 1 */
} __attribute__((aligned(64)));
_Static_assert(sizeof(struct rc_shard) == 64, "a shard is one line");
extern struct rc_shard gh_rc_shards[RC_SHARDS];
extern uint32_t gh_rc_shard_next;
/* a hit reads these: initial-exec (the build's flag), no __tls_get_addr */
extern __thread struct rc_shard *gh_rc_my_shard;
extern __thread int gh_rc_my_shared;

static inline struct rc_shard *shard_mine(void)
{
	struct rc_shard *s = gh_rc_my_shard;

	if (GH_UNLIKELY(!s)) {
		uint32_t i = __atomic_fetch_add(&gh_rc_shard_next, 1,
						__ATOMIC_RELAXED);

		gh_rc_my_shared = i >= RC_SHARDS - 1;
		s = &gh_rc_shards[gh_rc_my_shared ? RC_SHARDS - 1 : i];
		gh_rc_my_shard = s;
	}
	return s;
}

static inline void shard_add(size_t off, uint64_t n)
{
	struct rc_shard *s = shard_mine();
	uint64_t *p = (uint64_t *)((char *)s + off);

	if (GH_UNLIKELY(gh_rc_my_shared))
		__atomic_add_fetch(p, n, __ATOMIC_RELAXED);
	else
		__atomic_store_n(p, __atomic_load_n(p, __ATOMIC_RELAXED) + n,
				 __ATOMIC_RELAXED);
}

#define SHARD(f, n) \
	shard_add(offsetof(struct rc_shard, f), (uint64_t)(n))

/* An alias of entry e (its reference passes to the alias), or NULL. */
struct ibv_mr *gh_rc_alias_make(struct rc_entry *e, struct ibv_pd *pd,
				uint64_t addr, uint64_t len,
				unsigned int access);
/* The entry (index + 1) live alias mr holds, or 0. */
uint32_t gh_rc_alias_ent(const struct ibv_mr *mr);
/* Drop a reference (an alias went away); takes the cache lock if needed. */
void gh_rc_put_ref(struct rc_entry *e);

#endif
