/* SPDX-License-Identifier: MIT */
/*
 * Registrations in flight against allocations and frees (src/registry/inflight.c).
 *
 * A registration that reaches the NIC outside the cache's lock (wrapped,
 * passed through) decides what memory it is for before the NIC call and
 * must learn whether that changed during it, without waiting for memory
 * calls that do not touch its range:
 *
 *   gh_inflight_enter(lo, len, &rec);     announce the range
 *   ... read the registry (what it touches now) ...
 *   ... the NIC call ...
 *   switch (gh_inflight_settle(rec))      0: untouched, record released
 *                                         1: touched: undo, leave, retry
 *                                         2: an overlapping free did not
 *                                            end within a second: give up
 *                                         3: as 0, but memory calls whose
 *                                            range is not known yet were
 *                                            in flight: once the program's
 *                                            MR exists, hand it over with
 *                                            gh_inflight_commit (or
 *                                            gh_inflight_leave on failure)
 *
 * The hooks' side: every hooked memory call is bracketed by
 * gh_inflight_call_begin/end, every registry insert is followed by
 * gh_inflight_note and every removal by gh_inflight_note_free (before the
 * real free; its range is then published for the rest of the call).  A
 * registration waits only for a call whose published free overlaps its
 * range; a call whose range is not known yet (an allocation inside the
 * driver) is handed the registration instead: the record stays
 * announced, committed, until every such call has ended, and such a call
 * that inserts or removes memory the record overlaps calls the raced
 * callback (handed down with the commit) before it returns, so the MR
 * is tied to (or revoked with) that memory.
 */
#ifndef GH_INFLIGHT_H
#define GH_INFLIGHT_H

#include <stdint.h>

#include "ranges.h"

struct gh_if_rec;

/* 0 and *rec_p, or -ENOMEM (no memory for a record: the caller refuses). */
int gh_inflight_enter(uint64_t lo, uint64_t len, struct gh_if_rec **rec_p);
int gh_inflight_settle(struct gh_if_rec *rec);
/*
 * fn(cookie, flags, r, freed) runs on the thread of a memory call that
 * inserted (freed 0) or is about to free (freed 1) r, which a committed
 * registration may reach, before that call returns (before the real free
 * for a free).  Handed down with the registration (gh_inflight_commit).
 */
typedef void (*gh_inflight_raced_fn)(void *cookie, unsigned int flags,
				     const struct gh_range *r, int freed);

/*
 * After settle said 3: cookie (what the program got, with flags for the
 * callback fn) is handed to the calls in flight.  1: one of them touched
 * the range meanwhile: undo what was made, retry (the record is released).
 */
int gh_inflight_commit(struct gh_if_rec *rec, gh_inflight_raced_fn fn,
		       void *cookie, unsigned int flags);
/*
 * After settle said 3, for a caller that cannot hand its result over:
 * wait (up to a second) for the calls it depends on, then as settle (0,
 * 1 or 2); the record is released.
 */
int gh_inflight_wait(struct gh_if_rec *rec);
void gh_inflight_leave(struct gh_if_rec *rec);
/* The program deregisters (or re-registers) cookie: forget it; returns
 * once no raced callback on it is running. */
void gh_inflight_forget(void *cookie);

/*
 * An ibv_rereg_mr moves the registration made for MR `from` to the
 * program's MR `to`: hold from's committed records (callbacks on them
 * wait) while the move runs, then unhold naming to (with flags), or
 * forgetting them when to is NULL.  hold returns once no callback on
 * from is running.
 */
void gh_inflight_hold(void *from);
void gh_inflight_unhold(void *from, void *to, unsigned int flags);

void gh_inflight_call_begin(void);
void gh_inflight_call_end(void);
/* This thread left its hooks abnormally (siglongjmp, an exception through
 * a callback): end the mark of the call it abandoned. */
void gh_inflight_abandon(void);
void gh_inflight_note(const struct gh_range *r);
/* A removal: before the real free; the range stays published until the
 * call ends, and in-flight registrations are told again then. */
void gh_inflight_note_free(const struct gh_range *r);

#endif
