/* SPDX-License-Identifier: MIT */
/*
 * Registrations in flight against allocations and frees (src/registry/inflight.c).
 *
 * A registration that reaches the NIC outside the cache's lock (wrapped,
 * passed through, the program's own dma-buf) decides what memory it is
 * for before the NIC call and must learn whether that changed during it:
 *
 *   slot = gh_inflight_enter(lo, len);    announce the range
 *   ... read the registry (what it touches now) ...
 *   ... the NIC call ...
 *   if (gh_inflight_settle(slot)) ...     an allocation or free touched
 *                                         the range meanwhile: undo, retry
 *   gh_inflight_leave(slot);
 *
 * The hooks' side: every hooked memory call is bracketed by
 * gh_inflight_call_begin/end (from before the real call until its
 * registry work is done), and every registry insert or removal is
 * followed by gh_inflight_note(base, size) (a removal by
 * gh_inflight_note_free, noted again when its call ends, after the real
 * free).  settle waits for the calls in flight when the NIC call
 * returned, so an allocation the NIC may have pinned before its hook
 * recorded it is seen too, and so is memory whose removal the
 * registration read but whose real free came after the NIC pinned it.
 */
#ifndef GH_INFLIGHT_H
#define GH_INFLIGHT_H

#include <stdint.h>

/* Slot index, or -1 when all are taken for long (the caller refuses). */
int gh_inflight_enter(uint64_t lo, uint64_t len);
/*
 * 0: not touched; 1: the range was touched: undo, retry; 2: a memory
 * call of another thread did not end within a second: undo, give up
 * (that thread may be waiting for this one).
 */
int gh_inflight_settle(int slot);
void gh_inflight_leave(int slot);

void gh_inflight_call_begin(void);
void gh_inflight_call_end(void);
void gh_inflight_note(uint64_t base, uint64_t size);
/* A removal: noted now and again when the memory call ends (after the
 * real free). */
void gh_inflight_note_free(uint64_t base, uint64_t size);

#endif
