/* SPDX-License-Identifier: MIT */
/* Small files read whole, without stdio or malloc (file.c). */
#ifndef GH_FILE_H
#define GH_FILE_H

#include <stddef.h>
#include <sys/types.h>

/*
 * Read at most cap - 1 bytes of path (a /proc or /sys file) into buf and
 * end them with a NUL.  Returns the bytes read, or -1 when the file could
 * not be opened or read, or was empty (buf is then "").
 */
ssize_t gh_read_text(const char *path, char *buf, size_t cap);

#endif
