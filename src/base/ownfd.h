/* SPDX-License-Identifier: MIT */
/*
 * The parts of a descriptor the shim owns, known by its file (st_dev,
 * st_ino) and never by its number alone, since the program may close it
 * and open its own file on that number.  Owned descriptors are moved up
 * to gh_fd_floor() and checked with gh_fd_is() before each use: the
 * diagnostic log's file (log.c) directly, the event log and the pin
 * backends through struct gh_ownfd (evlog/evspool.h, gh_fd_own).
 */
#ifndef GH_OWNFD_H
#define GH_OWNFD_H

#include <sys/types.h>

/* The lowest number an owned fd takes (F_DUPFD_CLOEXEC's floor). */
int gh_fd_floor(void);
/* Whether fd is open on the file dev/ino. */
int gh_fd_is(int fd, dev_t dev, ino_t ino);

#endif
