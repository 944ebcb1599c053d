/* SPDX-License-Identifier: MIT */
/*
 * Malloc-free, stdio-free formatting into a caller's buffer.
 *
 * struct gh_buf is a bounded buffer that never overflows: an append that
 * does not fit is cut at the capacity and the buffer remembers that it
 * was truncated.  Everything here is async-signal-safe and touches no
 * errno.
 */
#ifndef GH_FMT_H
#define GH_FMT_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

struct gh_buf {
	char *p;
	size_t len;		/* bytes used, always <= cap */
	size_t cap;
	int truncated;		/* an append did not fit */
};

/* Longest output of gh_fmt_u64/i64 (20 digits + sign) and gh_fmt_hex. */
#define GH_FMT_NUM_MAX	24

static inline void gh_buf_init(struct gh_buf *b, char *p, size_t cap)
{
	b->p = p;
	b->len = 0;
	b->cap = cap;
	b->truncated = 0;
}

static inline void gh_buf_reset(struct gh_buf *b)
{
	b->len = 0;
	b->truncated = 0;
}

static inline size_t gh_buf_room(const struct gh_buf *b)
{
	return b->cap - b->len;
}

/* Raw number formatting; dst needs GH_FMT_NUM_MAX bytes; returns length. */
size_t gh_fmt_u64(char *dst, uint64_t v);
size_t gh_fmt_i64(char *dst, int64_t v);
size_t gh_fmt_hex(char *dst, uint64_t v);	/* "0x" + lowercase digits */

/* Inline so that appends of literals become plain stores. */
static inline void gh_buf_putn(struct gh_buf *b, const char *s, size_t n)
{
	size_t room = b->cap - b->len;

	if (__builtin_expect(n > room, 0)) {
		n = room;
		b->truncated = 1;
	}
	__builtin_memcpy(b->p + b->len, s, n);
	b->len += n;
}

static inline void gh_buf_putc(struct gh_buf *b, char c)
{
	if (__builtin_expect(b->len < b->cap, 1))
		b->p[b->len++] = c;
	else
		b->truncated = 1;
}

void gh_buf_puts(struct gh_buf *b, const char *s);	/* NULL: "(null)" */
void gh_buf_u64(struct gh_buf *b, uint64_t v);
void gh_buf_i64(struct gh_buf *b, int64_t v);
void gh_buf_hex(struct gh_buf *b, uint64_t v);		/* 0x... */
void gh_buf_hex_noprefix(struct gh_buf *b, uint64_t v);

/* Append a string literal without strlen. */
#define gh_buf_lit(b, lit)	gh_buf_putn((b), "" lit, sizeof(lit) - 1)

/*
 * Append s as a quoted JSON string: '"', '\\' and control characters are
 * escaped, valid UTF-8 passes through, an invalid byte becomes \ufffd.  At
 * most max input bytes are used (the rest is cut, still well-formed).
 * NULL appends null (no quotes).
 */
void gh_buf_json_str(struct gh_buf *b, const char *s, size_t max);

/*
 * printf subset: %s %d %i %u %x %X %p %c %%, length modifiers hh h l ll z
 * j t, flags '#' (0x for %x) and '-', '+', ' ', '0' (ignored), a field
 * width (ignored, '*' consumed) and a precision (for %s: max bytes; '*'
 * consumed).  An unknown conversion is copied literally.
 */
void gh_buf_vprintf(struct gh_buf *b, const char *fmt, va_list ap);
void gh_buf_printf(struct gh_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/*
 * NUL-terminate in place and return p.  If the buffer is full the last
 * byte is given up for the NUL (and truncated is set).  cap must be > 0.
 */
const char *gh_buf_cstr(struct gh_buf *b);

/* The printf subset above into dst[cap] (cap > 0), NUL-terminated. */
void gh_str_printf(char *dst, size_t cap, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/*
 * File name templates (GDRHOOK_TRACE, GDRHOOK_LOG_FILE), one grammar for
 * both, as NCCL_DEBUG_FILE and UCX_LOG_FILE spell it: GH_PATH_ESCAPES
 * says it in words, for messages.
 */
#define GH_PATH_ESCAPES	"%p the pid, %h the host name, %% a percent sign"
/*
 * 0, or -EINVAL with the first escape that is not one of them in bad[3]
 * ("%q", or "%" alone at the end).
 */
int gh_path_check(const char *tmpl, char bad[3]);
/* The template with its escapes expanded; -ENAMETOOLONG rather than a cut
 * name (dst is then ""). */
int gh_path_expand(const char *tmpl, int pid, char *dst, size_t cap);

#endif
