/* SPDX-License-Identifier: MIT */
/*
 * Diagnostics (GDRHOOK_LOG_LEVEL) on stderr or in GDRHOOK_LOG_FILE.
 * malloc-free, stdio-free, written with one write(2) per message, errno
 * preserved, safe on hook paths.  Messages are prefixed
 * "gdrhook[host:pid:tid]: LEVEL: " (NCCL's host:pid:tid: what tells the
 * lines apart once mpirun merges several nodes' stderr).
 */
#ifndef GH_LOG_H
#define GH_LOG_H

#include <stddef.h>

struct gh_buf;

enum gh_log_level {
	GH_LOG_NONE = 0,
	GH_LOG_ERR,
	GH_LOG_WARN,
	GH_LOG_INFO,
	GH_LOG_DEBUG,
};

extern int gh_log_level;	/* set from GDRHOOK_LOG_LEVEL at init */

/*
 * printf-like with a small subset: %s %d %u %ld %lu %lld %llu %zu %x %lx
 * %llx %p %c %%; '#' flag for 0x on %x; field width is ignored.
 */
void gh_log_emit(int level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/*
 * Diagnostics to the file template tmpl (escapes of gh_path_expand; NULL,
 * "" or "stderr": stderr), opened at the first message; one that cannot
 * be opened is said once on stderr, which is used instead.  At init.
 */
void gh_log_set_file(const char *tmpl);

/* Append a message's "gdrhook[host:pid:tid]: level: " to b. */
void gh_log_prefix(struct gh_buf *b, int level);
/* The short host name, as the prefix writes it (the stats' header). */
void gh_log_host(struct gh_buf *b);

/*
 * Write all of p to fd without ever raising SIGPIPE in the program.  A
 * non-blocking fd that accepts nothing for stall_ms gives -ETIMEDOUT.
 * Returns 0 or -errno; *done_p (may be NULL) gets the bytes written.
 * Preserves nothing: callers save errno.
 */
int gh_write_nosig(int fd, const char *p, size_t n, int stall_ms,
		   size_t *done_p);

#define gh_log(lvl, ...)					\
	do {							\
		if ((lvl) <= gh_log_level)			\
			gh_log_emit((lvl), __VA_ARGS__);	\
	} while (0)

#define gh_err(...)	gh_log(GH_LOG_ERR, __VA_ARGS__)
#define gh_warn(...)	gh_log(GH_LOG_WARN, __VA_ARGS__)
#define gh_info(...)	gh_log(GH_LOG_INFO, __VA_ARGS__)
#define gh_dbg(...)	gh_log(GH_LOG_DEBUG, __VA_ARGS__)

/* Log at lvl (shown at the default level for GH_LOG_WARN) only the first
 * time this call site fires. */
#define gh_log_once(lvl, ...)					\
	do {							\
		static int gh_once_;				\
		if (!__atomic_exchange_n(&gh_once_, 1,		\
					 __ATOMIC_RELAXED))	\
			gh_log((lvl), __VA_ARGS__);		\
	} while (0)

/* Warn only the first time this call site fires. */
/*
 * err (a positive errno) in words, for messages: strerror's text without
 * the translation machinery (no malloc, no locale), or "error N".
 */
const char *gh_errtext(int err);

#define gh_warn_once(...)					\
	do {							\
		static int gh_warned_;				\
		if (!__atomic_exchange_n(&gh_warned_, 1,	\
					 __ATOMIC_RELAXED))	\
			gh_warn(__VA_ARGS__);			\
	} while (0)

#endif
