/* SPDX-License-Identifier: MIT */
/*
 * gdrhook-info's writer: text into a buffer, lines wrapped to a
 * terminal's width, flushed to the caller's file descriptor.  gdrhook_info()
 * (info.c) holds its lock throughout.
 */
#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "info_impl.h"

void gh_info_flush(struct out *o)
{
	const char *p = o->b.p;
	size_t n = o->b.len;

	while (n && !o->err) {
		ssize_t w = write(o->fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			o->err = w < 0 ? -errno : -EIO;
			break;
		}
		p += w;
		n -= (size_t)w;
	}
	gh_buf_reset(&o->b);
}

void gh_info_room(struct out *o)
{
	if (gh_buf_room(&o->b) < 4096)
		gh_info_flush(o);
}

void gh_info_text(struct out *o, const char *fmt, ...)
{
	va_list ap;

	gh_info_room(o);
	va_start(ap, fmt);
	gh_buf_vprintf(&o->b, fmt, ap);
	va_end(ap);
}

/*
 * One line of text (fmt ends without a newline), broken at spaces into
 * at most maxl lines (0: any number) of at most INFO_COLS columns,
 * continuations indented; what does not fit in maxl ends in "...".
 */
static void vline(struct out *o, unsigned int maxl, const char *fmt,
		  va_list ap)
{
	static char l[2048];	/* gdrhook_info() holds its lock */
	struct gh_buf lb;
	const size_t cont = sizeof(INFO_CONT) - 1;
	size_t width = INFO_COLS;
	const char *p;

	gh_buf_init(&lb, l, sizeof(l));
	gh_buf_vprintf(&lb, fmt, ap);
	gh_buf_putc(&lb, '\0');
	l[sizeof(l) - 1] = '\0';
	p = l;
	for (unsigned int n_l = 1;; n_l++) {
		size_t n = strlen(p), cut;

		if (n <= width) {
			gh_info_text(o, "%s\n", p);
			return;
		}
		if (maxl && n_l == maxl) {	/* the last one allowed */
			gh_info_room(o);
			gh_buf_putn(&o->b, p, width - 3);
			gh_buf_lit(&o->b, "...\n");
			return;
		}
		for (cut = width; cut > 0 && p[cut] != ' '; cut--)
			;
		if (!cut)	/* one word longer than a line: as it is */
			for (cut = width; p[cut] && p[cut] != ' '; cut++)
				;
		gh_info_room(o);
		gh_buf_putn(&o->b, p, cut);
		gh_buf_putc(&o->b, '\n');
		p += cut;
		while (*p == ' ')
			p++;
		if (!*p)
			return;
		gh_buf_puts(&o->b, INFO_CONT);
		width = INFO_COLS - cont;
	}
}

void gh_info_line(struct out *o, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vline(o, 0, fmt, ap);
	va_end(ap);
}

void gh_info_line_max(struct out *o, unsigned int maxl, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vline(o, maxl, fmt, ap);
	va_end(ap);
}

/*
 * The configuration table's meanings are written for README.md: the
 * backticks are markdown, noise on a terminal and in JSON.
 */
const char *gh_info_unmark(const char *s, char *buf, size_t cap)
{
	size_t n = 0;

	for (; *s && n + 1 < cap; s++)
		if (*s != '`')
			buf[n++] = *s;
	buf[n] = '\0';
	return buf;
}
