/* SPDX-License-Identifier: MIT */
/*
 * One hook event, as the hook path records it.  Fixed size and plain data,
 * so recording it is a copy; formatting happens later, off the hook path.
 */
#ifndef GH_EVREC_H
#define GH_EVREC_H

#include <stdint.h>

enum gh_ev {
	GH_EV_ALLOC = 1,
	GH_EV_FREE,
	GH_EV_RESTORE,		/* free failed: allocation live again, new gen */
	GH_EV_CTX_DESTROY,
	GH_EV_CTX_RESET,
	GH_EV_CTX_RELEASE,
	GH_EV_POOL_TRIM,
	GH_EV_POOL_DESTROY,
	GH_EV_UNTRUSTED,
	GH_EV_AUDIT,
	GH_EV_PIN,
	GH_EV_UNPIN,
	GH_EV_REG,
	GH_EV_DEREG,
	GH_EV_REVOKE,
	GH_EV_HIT,
	GH_EV_MISS,
	GH_EV_COUNT_
};

/* enum gh_ev -> "alloc", "free", ... (NULL when out of range) */
const char *gh_ev_name(unsigned int ev);

#define GH_EVF_UNTRACKED	0x1	/* free of a pointer we never saw */
#define GH_EVF_IMPLICIT		0x2	/* dropped by a context/pool call */
#define GH_EVF_HIT		0x4	/* reg served from the cache */

struct gh_evrec {
	uint64_t t_ns;		/* CLOCK_MONOTONIC at the start of the call */
	uint64_t dur_ns;	/* duration of the real call, 0 if none */
	uint64_t ptr;
	uint64_t size;
	uint64_t gen;
	uint64_t ctx;		/* context, or pool for pool events */
	uint64_t aux;		/* dropped bytes, mr, ... (per event) */
	uint64_t aux2;		/* dropped count, pd, ... (per event) */
	const char *api;	/* static string: exact entry point name */
	const char *what;	/* static string or NULL: audit/untrusted text */
	int32_t tid;
	int32_t rc;		/* real call's result code */
	int32_t dev;
	uint16_t ev;		/* enum gh_ev */
	uint16_t kind;		/* enum gdrhook_kind */
	uint32_t flags;		/* GH_EVF_* */
	uint32_t pad_;
};

#endif
