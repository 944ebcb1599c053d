// SPDX-License-Identifier: MIT
/*
 * Bad GDRHOOK_* values under LD_PRELOAD: each is said once on stderr, with
 * what would have been accepted, and the default is used.
 *  - GDRHOOK_LIBCUDA naming a library that is not there, or one that is
 *    not a CUDA driver: one warning saying what was asked, why it was
 *    refused and that libcuda.so.1 is used; hooked calls then work.
 *  - booleans, sizes, levels and words: the warning lists the accepted
 *    values or forms.
 */
#include <cuda.h>
#include <fcntl.h>

/* Not every helper of the shared header is used here. */
#pragma GCC diagnostic ignored "-Wunused-function"
#include "preload_util.h"

/* Lines of path containing every fragment (stderr here, not a log). */
#define ERR_COUNT(path, ...) LOG_COUNT(path, __VA_ARGS__)

static char *err_path(char *buf, size_t n, const char *tag)
{
	snprintf(buf, n, "%s/gdrhook-test-%d-%s.err",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid(),
		 tag);
	return buf;
}

/* Hooked calls work and are tracked. */
static int scenario_alloc(void)
{
	CUdeviceptr p;

	primary_ctx(0);
	CU_OK(cuMemAlloc_v2(&p, 1 << 20));
	CHECK_EQ(tracked(p, NULL), 0);
	CU_OK(cuMemFree_v2(p));
	CHECK_EQ(tracked(p, NULL), -ENOENT);
	CHECK_EQ(gdrhook_trusted(), 1);
	return 0;
}

static const struct scenario scenarios[] = {
	{ "alloc", scenario_alloc },
};

TEST(libcuda_missing_warns_and_uses_default)
{
	static const char *const env[] = {
		"GDRHOOK_LIBCUDA=/nonexistent/libcuda.so.1", NULL
	};
	char err[256];

	err_path(err, sizeof(err), "missing");
	CHECK_EQ(run_scenario_err("alloc", env, err), 0);
	CHECK_EQ(ERR_COUNT(err, "GDRHOOK_LIBCUDA=/nonexistent/libcuda.so.1",
			   "refused", "using the default libcuda.so.1"), 1);
	CHECK_EQ(ERR_COUNT(err, "libcuda"), 1);
	unlink(err);
}

TEST(libcuda_not_a_driver_warns_and_uses_default)
{
	static const char *const env[] = { "GDRHOOK_LIBCUDA=libm.so.6", NULL };
	char err[256];

	err_path(err, sizeof(err), "notdrv");
	CHECK_EQ(run_scenario_err("alloc", env, err), 0);
	CHECK_EQ(ERR_COUNT(err, "GDRHOOK_LIBCUDA=libm.so.6", "refused",
			   "not a CUDA driver", "using the default libcuda.so.1"),
		 1);
	CHECK_EQ(ERR_COUNT(err, "libcuda"), 1);
	unlink(err);
}

/* Every kind of value: the warning says what would have been taken. */
TEST(bad_values_list_what_is_accepted)
{
	static const char *const env[] = {
		"GDRHOOK_STATS=maybe",
		"GDRHOOK_LOG_BUFFER=12q",
		"GDRHOOK_CACHE_MAX_SIZE=lots",
		"GDRHOOK_PIN_WHOLE_MAX=99999999999999999999",
		"GDRHOOK_LOG_LEVEL=loud",
		"GDRHOOK_LOG_MODE=sometimes",
		NULL
	};
	char err[256];

	err_path(err, sizeof(err), "values");
	CHECK_EQ(run_scenario_err("alloc", env, err), 0);
	CHECK_EQ(ERR_COUNT(err, "bad value \"maybe\" for GDRHOOK_STATS",
			   "1, y, yes, on, true, 0, n, no, off, false",
			   "using \"0\""), 1);
	CHECK_EQ(ERR_COUNT(err, "bad value \"12q\" for GDRHOOK_LOG_BUFFER",
			   "whole number", "k, m or g", "using \"12m\""), 1);
	CHECK_EQ(ERR_COUNT(err, "bad value \"lots\" for GDRHOOK_CACHE_MAX_SIZE",
			   "k, m or g", "inf"), 1);
	CHECK_EQ(ERR_COUNT(err, "GDRHOOK_PIN_WHOLE_MAX", "too large",
			   "k, m or g"), 1);
	CHECK_EQ(ERR_COUNT(err, "bad value \"loud\" for GDRHOOK_LOG_LEVEL",
			   "none, error, warn", "debug", "0, 1, 2, 3, 4"), 1);
	CHECK_EQ(ERR_COUNT(err, "bad value \"sometimes\" for GDRHOOK_LOG_MODE",
			   "one of: drop, block"), 1);
	CHECK_EQ(ERR_COUNT(err, "not understood"), 0);
	unlink(err);
}

SCENARIO_MAIN(scenarios)
