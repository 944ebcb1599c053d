/* SPDX-License-Identifier: MIT */
/*
 * The cache core's index and entry lifetimes (rcache_index.c), for the
 * other files of the core.  All but the entry word ops with the cache
 * lock held.
 */
#ifndef GH_RCACHE_INDEX_H
#define GH_RCACHE_INDEX_H

#include <stdint.h>

#include "pin/pin.h"
#include "rcache_state.h"

/* Entry word: kill (set dead, bump the version): the references left, or
 * -1 when it was dead already; kill only if idle and (ver != 0) still at
 * version ver. */
int64_t gh_rc_ent_kill(struct rc_entry *e);
int gh_rc_ent_kill_idle(struct rc_entry *e, uint64_t ver);

/* The hash chains of cached entries. */
void gh_rc_hash_unlink(struct rc_state *rc, struct rc_entry *e);
void gh_rc_hash_insert(struct rc_state *rc, struct rc_entry *e);
struct rc_entry *gh_rc_hash_find_cur(struct rc_state *rc, uint64_t base,
				     uint64_t gen, uint64_t pd,
				     unsigned int access);

/* A new entry (one reference, for the caller's alias), and back to the
 * free list. */
struct rc_entry *gh_rc_ent_new(struct rc_state *rc, struct rc_ga *r,
			       uint32_t type, struct ibv_pd *pd,
			       unsigned int access, struct ibv_mr *mr,
			       uint64_t addr, uint64_t len);
void gh_rc_ent_reclaim(struct rc_state *rc, struct rc_entry *e);

/*
 * e was just killed by us (refs references left).  Deregister for real;
 * reclaim it, or leave it detached for its last holder (revoked).
 */
void gh_rc_ent_finish(struct rc_state *rc, struct rc_entry *e, int64_t refs,
		      int revoke);
/* Drop a reference with the lock held (a window let its parent go). */
void gh_rc_put_ref_locked(struct rc_state *rc, struct rc_entry *e);

/* The adopt table slot of mr, or -1. */
int gh_rc_adopt_find(struct rc_state *rc, const struct ibv_mr *mr);

/* Allocation states: find, get (made if needed: 0, -ESTALE, -ENOSPC),
 * free when nothing uses it, kill everything made on it. */
struct rc_ga *gh_rc_ga_find(struct rc_state *rc, uint64_t gen);
int gh_rc_ga_get(struct rc_state *rc, const struct gh_range *g,
		 struct rc_ga **r_p);
void gh_rc_ga_free_if_unused(struct rc_state *rc, struct rc_ga *r);
void gh_rc_ga_kill_all(struct rc_state *rc, struct rc_ga *r, int before_free);
/* r's pin was revoked. */
void gh_rc_ga_drop(struct rc_state *rc, struct rc_ga *r);

#endif
