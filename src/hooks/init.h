/* SPDX-License-Identifier: MIT */
/* The process lifecycle (init.c). */
#ifndef GH_INIT_H
#define GH_INIT_H

#include "rcache/rcache.h"

/* Process-wide state (init.c). */
enum gh_state {
	GH_STATE_UNINIT = 0,
	GH_STATE_ACTIVE,
	GH_STATE_DISABLED,	/* GDRHOOK_ENABLE=0 or init failed */
};
extern int gh_state;
void gh_init(void);		/* idempotent; safe from any hook */
static inline int gh_active(void)
{
	int s = __atomic_load_n(&gh_state, __ATOMIC_ACQUIRE);

	if (GH_UNLIKELY(s == GH_STATE_UNINIT)) {
		gh_init();
		s = __atomic_load_n(&gh_state, __ATOMIC_ACQUIRE);
	}
	return s == GH_STATE_ACTIVE;
}
/* Arm the exit-time work (audit sweep, log flush) once CUDA is used. */
void gh_note_cuda_used(void);
extern int gh_cuda_used;

/* The face's part of the lifecycle, handed down to init.c at load: the
 * banner (gh_lifecycle_banner() prints it once) and the exit counters. */
void gh_lifecycle_set_face(void (*banner)(void), void (*stats_print)(void));
void gh_lifecycle_banner(void);

#endif
