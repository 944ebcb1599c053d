/* SPDX-License-Identifier: MIT */
/*
 * Registration cache: one NIC registration per (allocation generation,
 * protection domain, access superset), handed to the program as private
 * per-call MR objects ("aliases").  See the comment at the top of
 * rcache_state.h for the rules; pin.h for the backends underneath.
 * This is the interface of the cache, whose files each serve a part of
 * it (rcache_state.h lists them by path): rcache_core.c (set up, the
 * free of an allocation and revoked pins, the event records, the
 * counters), rcache_reg.c (registration: hit and miss; the program's
 * MRs), rcache_wrap.c (registrations made elsewhere), rcache_drop.c (PD
 * and device close, purge).
 *
 * The cache is one object (struct rc_state, rcache_state.h), owned by
 * the core (rcache_core.c): other files reach it only through
 * gh_rc_instance() (inline, rcache_state.h).  The functions below
 * keep the signatures their callers (src/hooks, src/face) know and pass
 * that one instance down: each takes it from the core once
 * (gh_rc_instance; the core's own name it) and hands it to the cache's
 * functions, which all take it as their first argument and assert on its
 * lock where they need it held.
 */
#ifndef GH_RCACHE_API_H
#define GH_RCACHE_API_H

#include <stdint.h>

#include "pin/pin.h"

struct ibv_context;
struct ibv_pd;
struct ibv_mr;

/* Access bits the cache serves from a superset registration. */
#define GH_RC_ACCESS_PERM	0xfu	/* LOCAL_WRITE .. REMOTE_ATOMIC */
#define GH_RC_ACCESS_REMOTE	0xeu	/* REMOTE_WRITE|READ|ATOMIC */
/* ... and bits that must match exactly (RELAXED_ORDERING). */
#define GH_RC_ACCESS_EXACT	(1u << 20)

/* Remote exposure (GDRHOOK_REMOTE_EXPOSURE, see rcache_state.h): */
#define GH_RC_EXPOSE_EXACT	0x1	/* else allocation */

/*
 * Set up (idempotent; the first call wins).  max_size: pinned bytes
 * (0: unlimited); max_count: cached registrations (0: the internal
 * capacity); flags: GH_RC_EXPOSE_*.  Returns 0 or -ENOMEM.
 */
int gh_rcache_init(const struct gh_pin_ops *ops, uint64_t max_size,
		   uint64_t max_count, unsigned int flags);
int gh_rcache_ready(void);
/* A private page an MR can be moved onto to take its access away. */
void *gh_rcache_dummy_page(void);

/*
 * The first registration of tracked GPU memory (src/rcache/rcache_start.c):
 * choose the pin backend (gh_pin_choose, GDRHOOK_BACKEND), prove that
 * the NIC of pd can import what auto chose, set the cache up from its
 * options (rcache_opts.c).  The backend is chosen once per process, the
 * probe runs once per NIC (pd's device); later calls return the same.  g: the
 * allocation being registered (its device and memory serve the probe).
 * Returns the backend, or NULL when registrations (of pd's NIC) pass
 * through (none, a NIC that cannot import, or no memory for the cache).
 */
const struct gh_pin_ops *gh_rcache_start(const struct gh_range *g,
					 struct ibv_pd *pd);

/*
 * Does [addr, addr + len) touch tracked GPU memory (device, managed, VMM,
 * IPC, pool; not host)?  0 and the lowest such allocation, or -ENOENT.
 */
int gh_rcache_touches(uint64_t addr, uint64_t len, struct gh_range *first_p);

/* Can a request with these access flags be served from the cache? */
int gh_rcache_access_ok(unsigned int access);

/*
 * Start fetching the cache line a hit of this registration would read
 * first, assuming addr lies in its allocation's first 64 KiB: called
 * before the registry lookup, so the two misses overlap.  Reads and
 * writes nothing.
 */
void gh_rcache_prefetch(const struct ibv_pd *pd, uint64_t addr, uint64_t len,
			unsigned int access);

/*
 * Register [addr, addr + len) of the live allocation r (from a registry
 * lookup) in pd.  On success *mr_p is an alias MR: lkey/rkey of the
 * cached registration, addr/length as asked; *hit_p says whether it came
 * from the cache without a NIC call.  Errors: -ESTALE (r was freed
 * meanwhile), -ENOSPC (limits: nothing evictable), -ENOTSUP (not
 * cacheable), or what the backend returned (errno of the NIC call).
 */
int gh_rcache_reg(const struct gh_range *r, struct ibv_pd *pd, uint64_t addr,
		  uint64_t len, unsigned int access, struct ibv_mr **mr_p,
		  int *hit_p);

/*
 * Wrap real, a registration of [addr, addr + len) the program made itself
 * (not cacheable: odd access flags, iova != addr, pool memory, its own
 * dmabuf, or a range that is not inside one allocation), so that the
 * free of ANY tracked GPU allocation it touches revokes it first.
 * snap, n: the allocations the range touched when the NIC call began
 * (the caller read them after announcing the registration, see
 * inflight.h): each must still be that generation, checked under the
 * lock the free path takes, else -ESTALE (deregister real and retry:
 * it may reach freed memory).  plain: wrap it even when it touches none
 * (ibv_rereg_mr moved an alias off tracked memory).  Returns 0 and
 * *alias_p, -ENOENT (touches no tracked GPU memory, !plain), -ESTALE,
 * -ENOSPC, -ENOTSUP (no cache).
 */
int gh_rcache_wrap(struct ibv_mr *real, const struct gh_range *snap,
		   unsigned int n, uint64_t addr, uint64_t len,
		   unsigned int access, int plain, struct ibv_mr **alias_p);

/* Log a hit or miss of the program's registration (verbs.c). */
void gh_rcache_log_lookup(int hit, const char *api, uint64_t addr,
			  uint64_t len, const struct gh_range *g,
			  const struct ibv_mr *mr, const struct ibv_pd *pd,
			  unsigned int access, uint64_t t0);

/*
 * A program MR the shim did not hand out (libibverbs' own object) that
 * the program's ibv_rereg_mr moved onto tracked GPU memory: track it
 * without an alias, so that the free of anything it touches first moves
 * it onto a private page with no remote access (or deregisters it when
 * the provider cannot).  snap, n as for gh_rcache_wrap.  0, -ENOENT
 * (touches no tracked GPU memory), -ESTALE or -ENOSPC (then it was moved
 * onto that page at once: never left reaching GPU memory untracked).
 * gh_rcache_unadopt, for its ibv_dereg_mr or ibv_rereg_mr: 1 if it was
 * adopted and live, -1 if a free deregistered it already (do not call
 * libibverbs on it), 0 if it was not adopted (or a free moved it onto
 * the private page).
 * gh_rcache_moved: 1 while a free has it on the private page with no
 * access: its access flags are lost (libibverbs keeps them nowhere the
 * shim can read), so only an ibv_rereg_mr that gives both translation
 * and access anew may bring it back.
 */
int gh_rcache_adopt(struct ibv_mr *mr, const struct gh_range *snap,
		    unsigned int n);
int gh_rcache_unadopt(struct ibv_mr *mr);
int gh_rcache_moved(struct ibv_mr *mr);

/*
 * A registration the program holds (alias: one of our aliases, else the
 * MR libibverbs made) turned out to reach r, which a memory call in
 * flight during its NIC call inserted or is freeing: tie it to r, so
 * that r's free revokes it, or, where it cannot be tied (r is being
 * freed, the tables are full, it is tied already), revoke it now.
 */
void gh_rcache_raced(struct ibv_mr *mr, int alias, const struct gh_range *r);

/* Is mr one of our aliases (live or revoked)? */
int gh_rcache_is_alias(const struct ibv_mr *mr);

/*
 * The program's ibv_dereg_mr on an alias: 0, or -EINVAL for a pointer
 * that is not a live alias.  A cached registration stays registered
 * (lazy); a revoked one is already gone (this is a no-op that succeeds).
 */
int gh_rcache_dereg(struct ibv_mr *mr);

/*
 * ibv_rereg_mr on an alias: move it to the registration in new_alias
 * (an alias just made by gh_rcache_reg/gh_rcache_wrap), dropping the old
 * one; new_alias is consumed.  The program keeps its pointer.  new_alias
 * NULL (the new registration failed): mr keeps no registration at all;
 * only ibv_dereg_mr remains valid on it.
 */
void gh_rcache_move(struct ibv_mr *mr, struct ibv_mr *new_alias);

/*
 * Has alias mr lost its grant (a free revoked it, or a failed
 * ibv_rereg_mr left it holding nothing)?  Then only a new translation
 * may give it one again.  gh_rcache_still_granted: the same, read under
 * the lock the free path takes (a free that has not revoked it by then
 * has not released its memory either).
 */
int gh_rcache_revoked(const struct ibv_mr *mr);
int gh_rcache_still_granted(const struct ibv_mr *mr);

/* The access flags the program asked for when it got alias mr. */
unsigned int gh_rcache_alias_access(const struct ibv_mr *mr);

/*
 * The free path (src/hooks/events.c), before the real free: deregister and unpin
 * everything made for allocation r (by gen).  Registrations the program
 * still holds are deregistered for real too (revoked).  Lock-free and
 * cheap when nothing was registered for r.
 */
void gh_rcache_invalidate(const struct gh_range *r);

/*
 * The backend learned that the pin of allocation generation gen with
 * cookie (gh_pin.cookie) was revoked (gdrpin: the driver freed the memory
 * behind the hooks' back): deregister everything made on it, held or not
 * (revoked), and drop the pin.  Returns 1 if it was cached, else 0.
 */
int gh_rcache_revoke(uint64_t gen, uint64_t cookie);

/* ibv_dealloc_pd: drop idle cached registrations in pd. */
void gh_rcache_drop_pd(struct ibv_pd *pd);
/* ibv_close_device: drop (revoke) every registration of the device. */
void gh_rcache_drop_context(struct ibv_context *ctx);
/* Drop every idle cached registration; with stop, cache nothing more
 * (the registry became untrusted). */
void gh_rcache_purge(int stop);

struct gh_rc_counters {
	uint64_t hits, misses;
	uint64_t regs, deregs;		/* real NIC (de)registrations */
	uint64_t pins, unpins;
	uint64_t evictions;
	uint64_t upgrades;		/* access upgrades (re-registered) */
	uint64_t stale_averted;		/* registrations dropped before a free */
	uint64_t revoked;		/* ... that the program still held */
	uint64_t retries;		/* ENOMEM/ENOSPC: evicted and retried */
	uint64_t wrapped;		/* program registrations wrapped */
	uint64_t full;			/* not cached: limits, nothing idle */
	uint64_t pins_revoked;		/* pins the backend reported revoked */
	uint64_t entries;		/* cached registrations now */
	uint64_t pinned_bytes;		/* now */
	uint64_t aliases;		/* MR objects the program holds now */
};
void gh_rcache_counters(struct gh_rc_counters *c_p);

#endif
