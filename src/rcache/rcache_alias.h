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
 * The calling thread's shard (struct rc_shard, rcache_state.h) of the one
 * instance.  A hit reads these: initial-exec (the build's flag), no
 * __tls_get_addr.
 */
extern __thread struct rc_shard *gh_rc_my_shard;
extern __thread int gh_rc_my_shared;

static inline struct rc_shard *shard_mine(struct rc_state *rc)
{
	struct rc_shard *s = gh_rc_my_shard;

	if (GH_UNLIKELY(!s)) {
		uint32_t i = __atomic_fetch_add(&rc->shard_next, 1,
						__ATOMIC_RELAXED);

		gh_rc_my_shared = i >= RC_SHARDS - 1;
		s = &rc->shards[gh_rc_my_shared ? RC_SHARDS - 1 : i];
		gh_rc_my_shard = s;
	}
	return s;
}

static inline void shard_add(struct rc_state *rc, size_t off, uint64_t n)
{
	struct rc_shard *s = shard_mine(rc);
	uint64_t *p = (uint64_t *)((char *)s + off);

	if (GH_UNLIKELY(gh_rc_my_shared))
		__atomic_add_fetch(p, n, __ATOMIC_RELAXED);
	else
		__atomic_store_n(p, __atomic_load_n(p, __ATOMIC_RELAXED) + n,
				 __ATOMIC_RELAXED);
}

#define SHARD(rc, f, n) \
	shard_add((rc), offsetof(struct rc_shard, f), (uint64_t)(n))

/* An alias of entry e (its reference passes to the alias), or NULL. */
struct ibv_mr *gh_rc_alias_make(struct rc_state *rc, struct rc_entry *e,
				struct ibv_pd *pd, uint64_t addr, uint64_t len,
				unsigned int access);
/* The entry (index + 1) live alias mr holds, or 0. */
uint32_t gh_rc_alias_ent(struct rc_state *rc, const struct ibv_mr *mr);
/* Drop a reference (an alias went away); takes the cache lock if needed. */
void gh_rc_put_ref(struct rc_state *rc, struct rc_entry *e);

#endif
