// SPDX-License-Identifier: MIT
/*
 * src/base/fmt.c: the bounded buffer, numbers, JSON strings, the printf
 * subset (equal to libc's where they overlap) and file name templates.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "harness.h"

#include "base/base.h"

/* Format with gh_buf_printf into a buffer of cap bytes (NUL included). */
static const char *fmt_cap(size_t cap, int *trunc, const char *f, ...)
	__attribute__((format(printf, 3, 4)));

static const char *fmt_cap(size_t cap, int *trunc, const char *f, ...)
{
	static char out[512];
	struct gh_buf b;
	va_list ap;

	memset(out, 'Z', sizeof(out));
	gh_buf_init(&b, out, cap);
	va_start(ap, f);
	gh_buf_vprintf(&b, f, ap);
	va_end(ap);
	gh_buf_cstr(&b);
	if (trunc)
		*trunc = b.truncated;
	/* nothing past cap was touched */
	for (size_t i = cap; i < sizeof(out); i++)
		if (out[i] != 'Z')
			TH_FAIL("byte %zu past cap %zu written", i, cap);
	return out;
}

#define FMT(...) fmt_cap(256, NULL, __VA_ARGS__)

/* Our output must equal snprintf's for the supported subset. */
#define SAME(...)							\
	do {								\
		char want_[256];					\
		snprintf(want_, sizeof(want_), __VA_ARGS__);		\
		CHECK_STR(FMT(__VA_ARGS__), want_);			\
	} while (0)

TEST(numbers)
{
	char d[GH_FMT_NUM_MAX + 1];

	d[gh_fmt_u64(d, 0)] = 0;
	CHECK_STR(d, "0");
	d[gh_fmt_u64(d, UINT64_MAX)] = 0;
	CHECK_STR(d, "18446744073709551615");
	d[gh_fmt_i64(d, INT64_MIN)] = 0;
	CHECK_STR(d, "-9223372036854775808");
	d[gh_fmt_i64(d, -1)] = 0;
	CHECK_STR(d, "-1");
	d[gh_fmt_hex(d, 0)] = 0;
	CHECK_STR(d, "0x0");
	d[gh_fmt_hex(d, 0xdeadbeefcafef00dull)] = 0;
	CHECK_STR(d, "0xdeadbeefcafef00d");
	d[gh_fmt_hex(d, 0x10)] = 0;
	CHECK_STR(d, "0x10");
}

TEST(printf_subset_matches_libc)
{
	SAME("plain");
	SAME("%s|%s", "a", "");
	SAME("%d %d %d", 0, -5, 2147483647);
	SAME("%i", -2147483647 - 1);
	SAME("%u %u", 0u, 4294967295u);
	SAME("%ld %lu", -9223372036854775807L - 1, 18446744073709551615UL);
	SAME("%lld %llu", -3LL, 18446744073709551615ULL);
	SAME("%zu %zd", (size_t)123456789, (ssize_t)-7);
	SAME("%x %lx %llx", 0xabcu, 0xfffffffffUL, 0x1234567890abcdefULL);
	SAME("%#x %#lx", 0x1fu, 0x2fUL);
	SAME("%c%c", 'o', 'k');
	SAME("100%%");
	SAME("%hd %hu %hhu", (short)-3, (unsigned short)65535,
	     (unsigned char)255);
	SAME("%jd %td", (intmax_t)-9, (ptrdiff_t)12);
	SAME("%.3s|%.*s", "abcdef", 2, "xyz");
	CHECK_STR(FMT("%p", (void *)0x7f00dead0000), "0x7f00dead0000");
	CHECK_STR(FMT("%p", (void *)0), "0x0");
	/* width and flags are ignored, but consumed */
	CHECK_STR(FMT("[%5d][%-3s][%08x][%*d]", 42, "a", 0xffu, 9, 7),
		  "[42][a][ff][7]");
	{
		const char *volatile nul = NULL;

		CHECK_STR(FMT("%s", nul), "(null)");
	}
}

/* No format attribute: lets the test pass formats gcc would reject. */
static const char *fmt_raw(const char *f, ...)
{
	static char out[64];
	struct gh_buf b;
	va_list ap;

	gh_buf_init(&b, out, sizeof(out));
	va_start(ap, f);
	gh_buf_vprintf(&b, f, ap);
	va_end(ap);
	return gh_buf_cstr(&b);
}

TEST(printf_odd_formats)
{
	/* unknown conversions are copied literally; trailing '%' kept */
	CHECK_STR(fmt_raw("a%qb"), "a%qb");
	CHECK_STR(fmt_raw("end%"), "end%");
}

TEST(truncation_never_overflows)
{
	int trunc;

	for (size_t cap = 1; cap < 40; cap++) {
		const char *s = fmt_cap(cap, &trunc, "%s-%d-%llx-%p-%s",
					"hello", -12345, 0xabcdefULL,
					(void *)0x1000, "world");
		char want[64];

		snprintf(want, sizeof(want), "%s-%d-%llx-%p-%s", "hello",
			 -12345, 0xabcdefULL, (void *)0x1000, "world");
		/* a prefix of the full text, cap - 1 bytes at most */
		CHECK(strlen(s) <= cap - 1);
		CHECK(!strncmp(s, want, strlen(s)));
		CHECK_EQ(trunc, strlen(want) > cap - 1);
	}
}

TEST(buf_primitives)
{
	char mem[8];
	struct gh_buf b;

	gh_buf_init(&b, mem, sizeof(mem));
	gh_buf_lit(&b, "abc");
	gh_buf_putc(&b, 'd');
	CHECK_EQ(b.len, 4);
	CHECK(!b.truncated);
	gh_buf_u64(&b, 123456);
	CHECK_EQ(b.len, 8);
	CHECK(b.truncated);
	CHECK(!memcmp(mem, "abcd1234", 8));
	gh_buf_putc(&b, 'x');
	CHECK_EQ(b.len, 8);
	CHECK_STR(gh_buf_cstr(&b), "abcd123");
	gh_buf_reset(&b);
	CHECK_EQ(b.len, 0);
	CHECK(!b.truncated);
	gh_buf_puts(&b, NULL);
	CHECK_STR(gh_buf_cstr(&b), "(null)");
}

static const char *json(const char *s, size_t max)
{
	static char out[256];
	struct gh_buf b;

	gh_buf_init(&b, out, sizeof(out));
	gh_buf_json_str(&b, s, max);
	return gh_buf_cstr(&b);
}

TEST(json_strings)
{
	CHECK_STR(json("plain", 100), "\"plain\"");
	CHECK_STR(json("", 100), "\"\"");
	CHECK_STR(json(NULL, 100), "null");
	CHECK_STR(json("a\"b\\c", 100), "\"a\\\"b\\\\c\"");
	CHECK_STR(json("\n\r\t\b\f", 100), "\"\\n\\r\\t\\b\\f\"");
	CHECK_STR(json("\x01\x1f\x7f", 100), "\"\\u0001\\u001f\x7f\"");
	/* valid UTF-8 passes; invalid bytes become U+FFFD */
	CHECK_STR(json("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", 100),
		  "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"");
	CHECK_STR(json("a\xff" "b", 100), "\"a\\ufffdb\"");
	CHECK_STR(json("\xc3", 100), "\"\\ufffd\"");		/* cut */
	CHECK_STR(json("\xc0\xaf", 100), "\"\\ufffd\\ufffd\"");	/* overlong */
	CHECK_STR(json("\xed\xa0\x80", 100),			/* surrogate */
		  "\"\\ufffd\\ufffd\\ufffd\"");
	/* max input bytes */
	CHECK_STR(json("abcdef", 3), "\"abc\"");
}

TEST(json_strings_python_roundtrip)
{
	static const char *const in[] = {
		"x\"y", "tab\there", "\x01\x02", "caf\xc3\xa9", "bad\xfe",
		"back\\slash", "/path/to/exe (deleted)",
	};
	char path[] = "/tmp/gh_logtest.XXXXXX";
	int fd;

	if (system("python3 -c '' >/dev/null 2>&1") != 0)
		SKIP("no python3");
	fd = mkstemp(path);
	CHECK(fd >= 0);
	for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++) {
		const char *j = json(in[i], 1000);

		CHECK(write(fd, j, strlen(j)) == (ssize_t)strlen(j));
		CHECK(write(fd, "\n", 1) == 1);
	}
	close(fd);
	{
		char cmd[600];
		int rc;

		snprintf(cmd, sizeof(cmd),
			 "python3 -c 'import json,sys\n"
			 "v=[json.loads(l) for l in open(sys.argv[1],"
			 "encoding=\"utf-8\")]\n"
			 "assert v[0]==\"x\\\"y\" and v[3]==\"caf\\u00e9\""
			 " and v[4]==\"bad\\ufffd\", v\n' %s", path);
		rc = system(cmd);
		unlink(path);
		CHECK_EQ(rc, 0);
	}
}

/* The escapes of a file name template; a bad one named. */
TEST(path_template_check_names_the_escape)
{
	char bad[3] = "", out[64];

	CHECK_EQ(gh_path_check("a.%p.%h.%%.log", bad), 0);
	CHECK_EQ(gh_path_check("a.%q.log", bad), -EINVAL);
	CHECK_STR(bad, "%q");
	CHECK_EQ(gh_path_check("a.%", bad), -EINVAL);
	CHECK_STR(bad, "%");
	CHECK_EQ(gh_path_expand("x%p%%", 42, out, sizeof(out)), 0);
	CHECK_STR(out, "x42%");
	CHECK_EQ(gh_path_expand("0123456789", 1, out, 8), -ENAMETOOLONG);
	CHECK_STR(out, "");
}

/* The appends of numbers, whole or cut at the capacity. */
TEST(buf_number_appends)
{
	char mem[64], small[5];
	struct gh_buf b;

	gh_buf_init(&b, mem, sizeof(mem));
	gh_buf_i64(&b, -42);
	gh_buf_putc(&b, ' ');
	gh_buf_hex(&b, 0xbeef);
	gh_buf_putc(&b, ' ');
	gh_buf_hex_noprefix(&b, 0xbeef);
	gh_buf_putc(&b, ' ');
	gh_buf_hex_noprefix(&b, 0);
	gh_buf_putc(&b, ' ');
	gh_buf_u64(&b, UINT64_MAX);
	CHECK_STR(gh_buf_cstr(&b), "-42 0xbeef beef 0 18446744073709551615");
	CHECK(!b.truncated);
	/* less room than GH_FMT_NUM_MAX: the number is cut, not overrun */
	gh_buf_init(&b, small, sizeof(small));
	gh_buf_i64(&b, INT64_MIN);
	CHECK_EQ(b.len, sizeof(small));
	CHECK(b.truncated);
	CHECK(!memcmp(small, "-9223", 5));
	gh_buf_init(&b, small, sizeof(small));
	gh_buf_hex(&b, 0x123456789ull);
	CHECK(b.truncated);
	CHECK(!memcmp(small, "0x123", 5));
}

/* gh_str_printf: NUL-terminated within cap, whatever the text's length. */
TEST(str_printf_terminates_within_cap)
{
	char d[8];

	memset(d, 'Z', sizeof(d));
	gh_str_printf(d, sizeof(d), "%d-%s", 12, "ab");
	CHECK_STR(d, "12-ab");
	gh_str_printf(d, sizeof(d), "%s", "0123456789");
	CHECK_STR(d, "0123456");
	gh_str_printf(d, 1, "%s", "x");
	CHECK_STR(d, "");
}

/* %h is the node name, whole; %% one percent sign; a name that just fits. */
TEST(path_expand_host_and_exact_fit)
{
	struct utsname u;
	char out[320], want[320];

	CHECK_EQ(uname(&u), 0);
	CHECK_EQ(gh_path_expand("/t/%h.%p.%%", 7, out, sizeof(out)), 0);
	snprintf(want, sizeof(want), "/t/%s.7.%%", u.nodename);
	CHECK_STR(out, want);
	/* 7 bytes and the NUL fit in 8; 8 bytes do not */
	CHECK_EQ(gh_path_expand("abcdefg", 1, out, 8), 0);
	CHECK_STR(out, "abcdefg");
	CHECK_EQ(gh_path_expand("abcdefgh", 1, out, 8), -ENAMETOOLONG);
	CHECK_STR(out, "");
}

TEST_MAIN()
