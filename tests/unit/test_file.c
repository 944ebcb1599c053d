// SPDX-License-Identifier: MIT
/* src/base/file.c: small files read whole into a caller's buffer. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#include "base/base.h"

static char path[64];

static void make_file(const char *text)
{
	int fd;

	snprintf(path, sizeof(path), "/tmp/gh_filetest.XXXXXX");
	fd = mkstemp(path);
	CHECK(fd >= 0);
	CHECK_EQ(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

TEST(read_whole_and_terminated)
{
	char buf[64];

	memset(buf, 'Z', sizeof(buf));
	make_file("3 words here\n");
	CHECK_EQ(gh_read_text(path, buf, sizeof(buf)), 13);
	CHECK_STR(buf, "3 words here\n");
	unlink(path);
}

/* At most cap - 1 bytes, then the NUL; nothing past cap touched. */
TEST(read_cut_at_cap)
{
	char buf[16];

	memset(buf, 'Z', sizeof(buf));
	make_file("0123456789abcdef");
	CHECK_EQ(gh_read_text(path, buf, 8), 7);
	CHECK_STR(buf, "0123456");
	CHECK_EQ(buf[8], 'Z');
	CHECK_EQ(gh_read_text(path, buf, 1), -1);	/* room for none */
	CHECK_STR(buf, "");
	unlink(path);
}

/* Missing, empty, a directory: -1 and "". cap 0: -1, buf untouched. */
TEST(read_failures)
{
	char buf[16];

	strcpy(buf, "old");
	CHECK_EQ(gh_read_text("/nonexistent/gh_file", buf, sizeof(buf)), -1);
	CHECK_STR(buf, "");
	make_file("");
	strcpy(buf, "old");
	CHECK_EQ(gh_read_text(path, buf, sizeof(buf)), -1);
	CHECK_STR(buf, "");
	unlink(path);
	strcpy(buf, "old");
	CHECK_EQ(gh_read_text("/", buf, sizeof(buf)), -1);
	CHECK_STR(buf, "");
	strcpy(buf, "old");
	CHECK_EQ(gh_read_text("/nonexistent/gh_file", buf, 0), -1);
	CHECK_STR(buf, "old");
}

/* A /proc file (size 0 in stat) reads as what it holds; no fd is left. */
TEST(read_proc_file_leaves_no_fd)
{
	char buf[256], want[32];
	int before = th_dir_entries("/proc/self/fd");

	CHECK(gh_read_text("/proc/self/stat", buf, sizeof(buf)) > 0);
	snprintf(want, sizeof(want), "%d (", getpid());
	CHECK(!strncmp(buf, want, strlen(want)));
	CHECK_EQ(th_dir_entries("/proc/self/fd"), before);
}

TEST_MAIN()
