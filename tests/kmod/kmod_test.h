/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers for the gdrpin in-guest tests: one case per process, a failed
 * check prints "file:line: message" and exits 1; exit 77 means skipped.
 */
#ifndef KMOD_TEST_H
#define KMOD_TEST_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gdrpin_ioctl.h"

#define CHECK(cond, ...)						\
	do {								\
		if (!(cond)) {						\
			fprintf(stderr, "%s:%d: check failed: %s: ",	\
				__FILE__, __LINE__, #cond);		\
			fprintf(stderr, __VA_ARGS__);			\
			fprintf(stderr, " (errno %d %s)\n", errno,	\
				strerror(errno));			\
			exit(1);					\
		}							\
	} while (0)

/* Expect a call that returns -1 to fail with errno e. */
#define CHECK_ERR(call, e)						\
	do {								\
		errno = 0;						\
		long r_ = (long)(call);					\
		CHECK(r_ == -1 && errno == (e), "%s returned %ld, want errno %d (%s)", \
		      #call, r_, (e), strerror(e));			\
	} while (0)

#define CHECK_OK(call)							\
	do {								\
		errno = 0;						\
		long r_ = (long)(call);					\
		CHECK(r_ == 0, "%s returned %ld", #call, r_);		\
	} while (0)

#define SKIP(...)							\
	do {								\
		fprintf(stderr, "skip: " __VA_ARGS__);			\
		fprintf(stderr, "\n");					\
		exit(77);						\
	} while (0)

#define KT_ALIGN	((uint64_t)GDRPIN_PIN_ALIGN)

#endif /* KMOD_TEST_H */
