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

/*
 * The face's part of the lifecycle: the banner (gh_lifecycle_banner()
 * prints it once) and the exit counters.  The face defines one with
 * GH_FACE_OPS, in the section gh_face, and init.c finds it there
 * (__start_gh_face): the link hands it down, so it is in place before
 * any code runs, a hook called from another library's constructor (one
 * that the loader runs before ours) included.  No constructor hands it
 * over, so no constructor order can lose the banner.
 */
struct gh_face_ops {
	void (*banner)(void);
	void (*stats_print)(void);
};
#define GH_FACE_OPS(name)						\
	static const struct gh_face_ops name				\
	__attribute__((section("gh_face"), used))
void gh_lifecycle_banner(void);

#endif
