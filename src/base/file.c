// SPDX-License-Identifier: MIT
/* Small files read whole: see file.h. */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "file.h"

ssize_t gh_read_text(const char *path, char *buf, size_t cap)
{
	ssize_t n;
	int fd;

	if (!cap)
		return -1;
	buf[0] = '\0';
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	do
		n = read(fd, buf, cap - 1);
	while (n < 0 && errno == EINTR);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	return n;
}
