/* SPDX-License-Identifier: MIT */
/*
 * A scenario on both caching backends and both exposures, each in its own
 * child (run_scenario, preload_util.h): the registration tests that must
 * hold whichever way the cache pins and whatever an rkey may reach.
 */
#ifndef GH_TEST_EACH_BACKEND_H
#define GH_TEST_EACH_BACKEND_H

#include "preload_util.h"

static inline void each_backend(const char *name, const char *extra)
{
	static const char *const cached[] = { "GDRHOOK_BACKEND=dmabuf",
					      "GDRHOOK_BACKEND=peermem" };
	static const char *const expo[] = { "GDRHOOK_REMOTE_EXPOSURE=exact",
					    "GDRHOOK_REMOTE_EXPOSURE=allocation" };

	for (int b = 0; b < 2; b++) {
		for (int x = 0; x < 2; x++) {
			const char *env[] = { cached[b], expo[x], extra, NULL };

			CHECK_EQ(run_scenario(name, env), 0);
		}
	}
}

#endif
