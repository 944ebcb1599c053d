// SPDX-License-Identifier: MIT
/* Descriptors the shim owns, their parts: see ownfd.h. */
#include <sys/resource.h>
#include <sys/stat.h>

#include "ownfd.h"

/*
 * Near the soft RLIMIT_NOFILE, where open() reaches last, but not so
 * high that the program's fd table grows for it (a table of n
 * descriptors costs the kernel 8n bytes).
 */
int gh_fd_floor(void)
{
	struct rlimit rl;
	rlim_t lim = 1024;

	if (!getrlimit(RLIMIT_NOFILE, &rl))
		lim = rl.rlim_cur;
	if (lim > 4096)
		lim = 4096;
	return (int)(lim - lim / 8);
}

int gh_fd_is(int fd, dev_t dev, ino_t ino)
{
	struct stat st;

	return fd >= 0 && !fstat(fd, &st) && st.st_dev == dev &&
	       st.st_ino == ino;
}
