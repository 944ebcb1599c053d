/* SPDX-License-Identifier: MIT */
/*
 * What the library says on stderr, for the unit tests that check a
 * message is said (once): capture_begin() points stderr at a memory
 * file; capture_end() puts stderr back (a failing CHECK is seen again)
 * and returns what was written meanwhile; capture_count() counts a
 * string in it.
 */
#ifndef GH_TEST_CAPTURE_H
#define GH_TEST_CAPTURE_H

#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "harness.h"

static int cap_fd = -1, cap_saved = -1;
static char cap_text[16384];

static inline void capture_begin(void)
{
	cap_fd = memfd_create("stderr", 0);
	cap_saved = dup(2);
	if (cap_fd < 0 || cap_saved < 0 || dup2(cap_fd, 2) != 2)
		TH_FAIL("cannot capture stderr");
}

static inline const char *capture_end(void)
{
	ssize_t n = pread(cap_fd, cap_text, sizeof(cap_text) - 1, 0);

	dup2(cap_saved, 2);
	close(cap_saved);
	close(cap_fd);
	cap_fd = cap_saved = -1;
	cap_text[n > 0 ? n : 0] = '\0';
	return cap_text;
}

static inline int capture_count(const char *text, const char *what)
{
	int n = 0;

	for (const char *p = text; (p = strstr(p, what)); p += strlen(what))
		n++;
	return n;
}

#endif
