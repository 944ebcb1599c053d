/* SPDX-License-Identifier: MIT */
/*
 * The test doubles of the build a unit test belongs to, by path: the
 * test is $(BUILD)/tests/unit/<name>, the doubles are under $(BUILD)
 * (fake/libcuda.so.1, fake/libcudart.so.13, fakeverbs/libibverbs.so.1).
 * Unit tests run without LD_LIBRARY_PATH: a test of the platform layer
 * loads the double itself, as a program's own dlopen would.
 */
#ifndef GH_TEST_DOUBLES_H
#define GH_TEST_DOUBLES_H

#include <dlfcn.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

/* $(BUILD)/rel, checked to exist. */
static inline const char *double_path(const char *rel)
{
	static char path[4][4096];
	static int i;
	char *p = path[i = (i + 1) % 4];
	ssize_t n = readlink("/proc/self/exe", p, sizeof(path[0]) - 256);

	CHECK(n > 0);
	p[n] = '\0';
	for (int up = 0; up < 3; up++) {
		char *s = strrchr(p, '/');

		CHECK(s != NULL);
		*s = '\0';
	}
	strcat(p, "/");
	strcat(p, rel);
	if (access(p, R_OK))
		TH_FAIL("no %s (make fake fakeverbs builds the doubles)", p);
	return p;
}

/* dlopen of a double, or the test fails saying why. */
static inline void *double_open(const char *rel, int flags)
{
	void *h = dlopen(double_path(rel), flags);

	if (!h)
		TH_FAIL("dlopen %s: %s", rel, dlerror());
	return h;
}

/* A function of the double h (its default version). */
static inline void *double_sym(void *h, const char *name)
{
	void *p = dlsym(h, name);

	if (!p)
		TH_FAIL("the double lacks %s", name);
	return p;
}

#endif
