// SPDX-License-Identifier: MIT
/*
 * src/base/ownfd.c: where owned descriptors go (gh_fd_floor, from the
 * soft RLIMIT_NOFILE) and whether a number still names the file it was
 * opened on (gh_fd_is).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

#include "base/base.h"

static void soft_limit(rlim_t n)
{
	struct rlimit rl;

	CHECK_EQ(getrlimit(RLIMIT_NOFILE, &rl), 0);
	rl.rlim_cur = n;
	CHECK_EQ(setrlimit(RLIMIT_NOFILE, &rl), 0);
}

/* Seven eighths of the soft limit, the limit taken as 4096 at most. */
TEST(floor_follows_the_soft_limit)
{
	struct rlimit rl;

	soft_limit(1024);
	CHECK_EQ(gh_fd_floor(), 896);
	soft_limit(64);
	CHECK_EQ(gh_fd_floor(), 56);
	CHECK_EQ(getrlimit(RLIMIT_NOFILE, &rl), 0);
	if (rl.rlim_max < 8192)
		SKIP("hard RLIMIT_NOFILE %llu: cannot raise the soft one",
		     (unsigned long long)rl.rlim_max);
	soft_limit(8192);
	CHECK_EQ(gh_fd_floor(), 4096 - 512);
}

TEST(is_names_the_file_not_the_number)
{
	char a[] = "/tmp/gh_ownfd.XXXXXX", b[] = "/tmp/gh_ownfd.XXXXXX";
	struct stat sa, sb;
	int fa = mkstemp(a), fb = mkstemp(b);

	CHECK(fa >= 0 && fb >= 0);
	CHECK_EQ(fstat(fa, &sa), 0);
	CHECK_EQ(fstat(fb, &sb), 0);
	CHECK_EQ(gh_fd_is(fa, sa.st_dev, sa.st_ino), 1);
	CHECK_EQ(gh_fd_is(fa, sb.st_dev, sb.st_ino), 0);
	CHECK_EQ(gh_fd_is(-1, sa.st_dev, sa.st_ino), 0);
	/* the program puts another file on the number */
	CHECK_EQ(dup2(fb, fa), fa);
	CHECK_EQ(gh_fd_is(fa, sa.st_dev, sa.st_ino), 0);
	CHECK_EQ(gh_fd_is(fa, sb.st_dev, sb.st_ino), 1);
	/* ... or closes it */
	CHECK_EQ(close(fa), 0);
	CHECK_EQ(gh_fd_is(fa, sb.st_dev, sb.st_ino), 0);
	close(fb);
	unlink(a);
	unlink(b);
}

TEST_MAIN()
