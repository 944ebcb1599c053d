// SPDX-License-Identifier: MIT
/*
 * Malloc-free, stdio-free formatting (see fmt.h).
 */
#include <errno.h>
#include <string.h>
#include <sys/utsname.h>

#include "fmt.h"

static const char gh_hexdig[] = "0123456789abcdef";

static const char gh_dig2[201] =
	"00010203040506070809101112131415161718192021222324252627282930313233"
	"34353637383940414243444546474849505152535455565758596061626364656667"
	"6869707172737475767778798081828384858687888990919293949596979899";

size_t gh_fmt_u64(char *dst, uint64_t v)
{
	char tmp[GH_FMT_NUM_MAX];
	char *end = tmp + sizeof(tmp), *p = end;

	while (v >= 100) {
		p -= 2;
		memcpy(p, gh_dig2 + (v % 100) * 2, 2);
		v /= 100;
	}
	if (v >= 10) {
		p -= 2;
		memcpy(p, gh_dig2 + v * 2, 2);
	} else {
		*--p = (char)('0' + v);
	}
	memcpy(dst, p, (size_t)(end - p));
	return (size_t)(end - p);
}

size_t gh_fmt_i64(char *dst, int64_t v)
{
	if (v < 0) {
		dst[0] = '-';
		/* negate in unsigned arithmetic: INT64_MIN is fine */
		return 1 + gh_fmt_u64(dst + 1, (uint64_t)0 - (uint64_t)v);
	}
	return gh_fmt_u64(dst, (uint64_t)v);
}

static size_t gh_fmt_hex_digits(char *dst, uint64_t v)
{
	size_t n = (size_t)(64 - __builtin_clzll(v | 1) + 3) / 4, i;

	for (i = n; i > 0; i--) {
		dst[i - 1] = gh_hexdig[v & 0xf];
		v >>= 4;
	}
	return n;
}

size_t gh_fmt_hex(char *dst, uint64_t v)
{
	dst[0] = '0';
	dst[1] = 'x';
	return 2 + gh_fmt_hex_digits(dst + 2, v);
}

void gh_buf_puts(struct gh_buf *b, const char *s)
{
	if (!s)
		s = "(null)";
	gh_buf_putn(b, s, strlen(s));
}

void gh_buf_u64(struct gh_buf *b, uint64_t v)
{
	char tmp[GH_FMT_NUM_MAX];

	if (b->cap - b->len >= GH_FMT_NUM_MAX) {
		b->len += gh_fmt_u64(b->p + b->len, v);
		return;
	}
	gh_buf_putn(b, tmp, gh_fmt_u64(tmp, v));
}

void gh_buf_i64(struct gh_buf *b, int64_t v)
{
	char tmp[GH_FMT_NUM_MAX];

	if (b->cap - b->len >= GH_FMT_NUM_MAX) {
		b->len += gh_fmt_i64(b->p + b->len, v);
		return;
	}
	gh_buf_putn(b, tmp, gh_fmt_i64(tmp, v));
}

void gh_buf_hex(struct gh_buf *b, uint64_t v)
{
	char tmp[GH_FMT_NUM_MAX];

	if (b->cap - b->len >= GH_FMT_NUM_MAX) {
		b->len += gh_fmt_hex(b->p + b->len, v);
		return;
	}
	gh_buf_putn(b, tmp, gh_fmt_hex(tmp, v));
}

void gh_buf_hex_noprefix(struct gh_buf *b, uint64_t v)
{
	char tmp[GH_FMT_NUM_MAX];

	if (b->cap - b->len >= GH_FMT_NUM_MAX) {
		b->len += gh_fmt_hex_digits(b->p + b->len, v);
		return;
	}
	gh_buf_putn(b, tmp, gh_fmt_hex_digits(tmp, v));
}

/* Length of the valid UTF-8 sequence at s (n bytes left), or 0. */
static size_t gh_utf8_len(const unsigned char *s, size_t n)
{
	unsigned char c = s[0];
	size_t len, i;
	uint32_t cp;

	if (c >= 0xc2 && c <= 0xdf) {
		len = 2;
		cp = c & 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		len = 3;
		cp = c & 0x0f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4;
		cp = c & 0x07;
	} else {
		return 0;
	}
	if (len > n)
		return 0;
	for (i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	/* overlong forms, surrogates, beyond U+10FFFF */
	if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
	    (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
		return 0;
	return len;
}

void gh_buf_json_str(struct gh_buf *b, const char *s, size_t max)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t i = 0, n, run;

	if (!s) {
		gh_buf_lit(b, "null");
		return;
	}
	n = strnlen(s, max);
	gh_buf_putc(b, '"');
	while (i < n) {
		unsigned char c = u[i];

		/* copy a run of plain ASCII at once */
		run = i;
		while (run < n && u[run] >= 0x20 && u[run] < 0x80 &&
		       u[run] != '"' && u[run] != '\\')
			run++;
		if (run > i) {
			gh_buf_putn(b, s + i, run - i);
			i = run;
			continue;
		}
		if (c >= 0x80) {
			size_t l = gh_utf8_len(u + i, n - i);

			if (l) {
				gh_buf_putn(b, s + i, l);
				i += l;
			} else {
				gh_buf_lit(b, "\\ufffd");
				i++;
			}
			continue;
		}
		switch (c) {
		case '"':
			gh_buf_lit(b, "\\\"");
			break;
		case '\\':
			gh_buf_lit(b, "\\\\");
			break;
		case '\n':
			gh_buf_lit(b, "\\n");
			break;
		case '\r':
			gh_buf_lit(b, "\\r");
			break;
		case '\t':
			gh_buf_lit(b, "\\t");
			break;
		case '\b':
			gh_buf_lit(b, "\\b");
			break;
		case '\f':
			gh_buf_lit(b, "\\f");
			break;
		default: {
			char esc[6] = { '\\', 'u', '0', '0',
					gh_hexdig[c >> 4], gh_hexdig[c & 0xf] };

			gh_buf_putn(b, esc, sizeof(esc));
			break;
		}
		}
		i++;
	}
	gh_buf_putc(b, '"');
}

enum gh_lenmod { GH_LM_INT, GH_LM_LONG, GH_LM_LLONG, GH_LM_SIZE,
		 GH_LM_MAX, GH_LM_PTRDIFF, GH_LM_SHORT, GH_LM_CHAR };

static uint64_t gh_va_unsigned(va_list *ap, enum gh_lenmod lm)
{
	switch (lm) {
	case GH_LM_LONG:
		return va_arg(*ap, unsigned long);
	case GH_LM_LLONG:
		return va_arg(*ap, unsigned long long);
	case GH_LM_SIZE:
		return va_arg(*ap, size_t);
	case GH_LM_MAX:
		return va_arg(*ap, uintmax_t);
	case GH_LM_PTRDIFF:
		return (uint64_t)va_arg(*ap, ptrdiff_t);
	case GH_LM_SHORT:
		return (unsigned short)va_arg(*ap, unsigned int);
	case GH_LM_CHAR:
		return (unsigned char)va_arg(*ap, unsigned int);
	default:
		return va_arg(*ap, unsigned int);
	}
}

static int64_t gh_va_signed(va_list *ap, enum gh_lenmod lm)
{
	switch (lm) {
	case GH_LM_LONG:
		return va_arg(*ap, long);
	case GH_LM_LLONG:
		return va_arg(*ap, long long);
	case GH_LM_SIZE:
		return (int64_t)va_arg(*ap, size_t);	/* %zd: ssize_t */
	case GH_LM_MAX:
		return va_arg(*ap, intmax_t);
	case GH_LM_PTRDIFF:
		return va_arg(*ap, ptrdiff_t);
	case GH_LM_SHORT:
		return (short)va_arg(*ap, int);
	case GH_LM_CHAR:
		return (signed char)va_arg(*ap, int);
	default:
		return va_arg(*ap, int);
	}
}

/* va_list may be an array type: work through a pointer to a copy. */
static void gh_buf_vprintf_p(struct gh_buf *b, const char *fmt, va_list *ap)
{
	const char *p = fmt, *start;

	while (*p) {
		int alt = 0;
		long prec = -1;
		enum gh_lenmod lm = GH_LM_INT;

		if (*p != '%') {
			const char *q = strchrnul(p, '%');

			gh_buf_putn(b, p, (size_t)(q - p));
			p = q;
			continue;
		}
		start = p++;
		/* flags */
		for (;; p++) {
			if (*p == '#')
				alt = 1;
			else if (*p != '-' && *p != '+' && *p != ' ' &&
				 *p != '0')
				break;
		}
		/* width: ignored */
		if (*p == '*') {
			(void)va_arg(*ap, int);
			p++;
		} else {
			while (*p >= '0' && *p <= '9')
				p++;
		}
		/* precision: honoured for %s only */
		if (*p == '.') {
			p++;
			if (*p == '*') {
				prec = va_arg(*ap, int);
				p++;
			} else {
				prec = 0;
				while (*p >= '0' && *p <= '9')
					prec = prec * 10 + (*p++ - '0');
			}
		}
		/* length */
		switch (*p) {
		case 'l':
			p++;
			lm = GH_LM_LONG;
			if (*p == 'l') {
				p++;
				lm = GH_LM_LLONG;
			}
			break;
		case 'h':
			p++;
			lm = GH_LM_SHORT;
			if (*p == 'h') {
				p++;
				lm = GH_LM_CHAR;
			}
			break;
		case 'z':
			p++;
			lm = GH_LM_SIZE;
			break;
		case 'j':
			p++;
			lm = GH_LM_MAX;
			break;
		case 't':
			p++;
			lm = GH_LM_PTRDIFF;
			break;
		}
		switch (*p) {
		case 'd':
		case 'i':
			gh_buf_i64(b, gh_va_signed(ap, lm));
			break;
		case 'u':
			gh_buf_u64(b, gh_va_unsigned(ap, lm));
			break;
		case 'x':
		case 'X':
			if (alt)
				gh_buf_lit(b, "0x");
			gh_buf_hex_noprefix(b, gh_va_unsigned(ap, lm));
			break;
		case 'p':
			gh_buf_hex(b, (uint64_t)(uintptr_t)va_arg(*ap, void *));
			break;
		case 'c':
			gh_buf_putc(b, (char)va_arg(*ap, int));
			break;
		case 's': {
			const char *s = va_arg(*ap, const char *);

			if (!s)
				s = "(null)";
			gh_buf_putn(b, s, prec >= 0 ? strnlen(s, (size_t)prec)
						    : strlen(s));
			break;
		}
		case '%':
			gh_buf_putc(b, '%');
			break;
		case '\0':
			/* dangling '%' at the end: copy it */
			gh_buf_putn(b, start, (size_t)(p - start));
			return;
		default:
			gh_buf_putn(b, start, (size_t)(p + 1 - start));
			break;
		}
		p++;
	}
}

void gh_buf_vprintf(struct gh_buf *b, const char *fmt, va_list ap)
{
	va_list cp;

	va_copy(cp, ap);
	gh_buf_vprintf_p(b, fmt, &cp);
	va_end(cp);
}

void gh_buf_printf(struct gh_buf *b, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	gh_buf_vprintf_p(b, fmt, &ap);
	va_end(ap);
}

const char *gh_buf_cstr(struct gh_buf *b)
{
	if (b->len == b->cap) {
		b->len--;
		b->truncated = 1;
	}
	b->p[b->len] = '\0';
	return b->p;
}

void gh_str_printf(char *dst, size_t cap, const char *fmt, ...)
{
	struct gh_buf b;
	va_list ap;

	gh_buf_init(&b, dst, cap);
	va_start(ap, fmt);
	gh_buf_vprintf_p(&b, fmt, &ap);
	va_end(ap);
	gh_buf_cstr(&b);
}

int gh_path_check(const char *tmpl, char bad[3])
{
	for (const char *p = tmpl; *p; p++) {
		if (*p != '%')
			continue;
		if (p[1] != 'p' && p[1] != 'h' && p[1] != '%') {
			bad[0] = '%';
			bad[1] = p[1];
			bad[2] = '\0';
			return -EINVAL;
		}
		p++;
	}
	return 0;
}

int gh_path_expand(const char *tmpl, int pid, char *dst, size_t cap)
{
	struct gh_buf b;
	const char *p;

	gh_buf_init(&b, dst, cap);
	for (p = tmpl; *p; p++) {
		if (p[0] == '%' && p[1] == 'p') {
			gh_buf_i64(&b, pid);
			p++;
		} else if (p[0] == '%' && p[1] == 'h') {
			struct utsname u;

			if (!uname(&u))
				gh_buf_puts(&b, u.nodename);
			p++;
		} else if (p[0] == '%' && p[1] == '%') {
			gh_buf_putc(&b, '%');
			p++;
		} else {
			gh_buf_putc(&b, *p);
		}
	}
	if (b.truncated || gh_buf_room(&b) == 0) {
		dst[0] = '\0';
		return -ENAMETOOLONG;
	}
	gh_buf_cstr(&b);
	return 0;
}
