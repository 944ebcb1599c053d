/* SPDX-License-Identifier: MIT */
/*
 * Per-thread slots of a fixed table, given back when their thread ends
 * (tslot.c).  The in-flight call marks (src/registry/inflight.c) and the
 * deferred queues (src/hooks/deferred.c) hand each thread one slot.  A
 * slot kept for the process's life would run the table out in a program
 * that starts and ends threads all the time: its later threads would
 * share one slot (marks) or lose what they queue (deferred effects).
 */
#ifndef GH_TSLOT_H
#define GH_TSLOT_H

#include <pthread.h>
#include <stdint.h>

#define GH_TSLOT_MAX	1024

struct gh_tslot_set {
	uint64_t used[GH_TSLOT_MAX / 64];	/* bit i: slot i has a thread */
	unsigned int n;				/* slots in the table */
	int key_ok;		/* 0: slots are never given back */
	pthread_key_t key;	/* its value: slot + 1, for the destructor */
};

/* A set of n (<= GH_TSLOT_MAX) slots, usable before gh_tslot_init. */
#define GH_TSLOT_SET(slots)	{ .n = (slots) }

/*
 * At load (a constructor): from now on, at a thread's end, dtor gets
 * (void *)(slot + 1) and calls gh_tslot_give when the slot may be reused.
 * Slots taken before, or without a key that needs no malloc (one of the
 * first 32), are their thread's for the process's life.
 */
void gh_tslot_init(struct gh_tslot_set *s, void (*dtor)(void *));
/* The lowest free slot, now this thread's, or -1: async-signal-safe, no
 * malloc, no lock. */
int gh_tslot_take(struct gh_tslot_set *s);
void gh_tslot_give(struct gh_tslot_set *s, unsigned int i);
/* Slots taken, for tests and statistics. */
unsigned int gh_tslot_count(const struct gh_tslot_set *s);
/* A fork child has one thread: every slot but keep (-1: none) is free. */
void gh_tslot_reset(struct gh_tslot_set *s, int keep);

#endif
