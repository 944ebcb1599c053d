// SPDX-License-Identifier: MIT
/*
 * config.c over the option tables of several layers, as the link brings
 * them (GH_OPT_TABLE): two tables here besides base's own, their rows
 * interleaved by order key, each value in its own table's struct, an old
 * name read as its new row; and gh_config_check on a repeated order key,
 * a repeated name and an old name whose new row no table has.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#include "base/base.h"

struct lo_cfg {
	int on;
	uint64_t size;
};
struct hi_cfg {
	const char *path;
	int word;
};
static struct lo_cfg lo;
static struct hi_cfg hi;

static const char *const words[] = { "one", "two", NULL };

/* Not const: a case changes a row before the load to plant a fault. */
static struct gh_opt lo_rows[] = {
	GH_OPT(15, "TEST_ON", "1", GH_OPT_BOOL, struct lo_cfg, on, "on"),
	GH_OPT(35, "TEST_SIZE", "4k", GH_OPT_SIZE, struct lo_cfg, size, "size"),
};
GH_OPT_TABLE(lo_rows, lo);

static struct gh_opt hi_rows[] = {
	GH_OPT(25, "TEST_PATH", "", GH_OPT_PATH, struct hi_cfg, path, "path"),
	GH_OPT_WORDS(5, "TEST_WORD", "one", struct hi_cfg, word, "word", words),
	GH_OPT_OLD("TEST_OLD_WORD", "TEST_WORD"),
};
GH_OPT_TABLE(hi_rows, hi);

/* The rows of gh_config_row, in its order, as "A B C". */
static const char *listed(void)
{
	static char out[512];
	struct gh_config_row r;
	size_t n = 0;

	out[0] = '\0';
	for (unsigned int i = 0; !gh_config_row(i, &r); i++)
		n += (size_t)snprintf(out + n, sizeof(out) - n, "%s%s",
				      i ? " " : "", r.name);
	return out;
}

static const struct gh_config_row *row(const char *name)
{
	static struct gh_config_row r;

	for (unsigned int i = 0; !gh_config_row(i, &r); i++)
		if (!strcmp(r.name, name))
			return &r;
	return NULL;
}

TEST(rows_walked_by_order_key_across_tables)
{
	char why[128];

	clearenv();
	CHECK_EQ(gh_config_load(), 0);
	CHECK_STR(listed(), "TEST_WORD TEST_ON LOG_LEVEL TEST_PATH LOG_FILE TEST_SIZE");
	CHECK_EQ(gh_config_check(why, sizeof(why)), 0);
	/* the defaults, each in its table's struct */
	CHECK_EQ(lo.on, 1);
	CHECK_EQ(lo.size, 4096);
	CHECK(hi.path == NULL);
	CHECK_EQ(hi.word, 0);
	CHECK_EQ(gh_base_cfg.log_level, GH_LOG_WARN);
}

TEST(values_land_in_their_tables)
{
	const struct gh_config_row *r;

	clearenv();
	setenv("GDRHOOK_TEST_ON", "off", 1);
	setenv("GDRHOOK_TEST_SIZE", "2m", 1);
	setenv("GDRHOOK_TEST_PATH", "t.%p", 1);
	setenv("GDRHOOK_TEST_OLD_WORD", "two", 1);
	setenv("GDRHOOK_LOG_LEVEL", "error", 1);
	CHECK_EQ(gh_config_load(), 0);
	CHECK_EQ(lo.on, 0);
	CHECK_EQ(lo.size, 2 << 20);
	CHECK_STR(hi.path, "t.%p");
	CHECK_EQ(hi.word, 1);			/* read under the old name */
	CHECK_EQ(gh_log_level, GH_LOG_ERR);
	r = row("TEST_WORD");
	CHECK(r && r->source == GH_CFG_ENV);
	CHECK_STR(r->value, "two");
	CHECK_STR(r->via, "TEST_OLD_WORD");
	CHECK_STR(gh_config_setting("TEST_WORD"), "GDRHOOK_TEST_OLD_WORD=two");
	r = row("TEST_SIZE");
	CHECK(r && r->source == GH_CFG_ENV && !r->via);
	CHECK_STR(r->value, "2m");
}

TEST(bad_value_keeps_the_default)
{
	const struct gh_config_row *r;

	clearenv();
	setenv("GDRHOOK_TEST_SIZE", "lots", 1);
	setenv("GDRHOOK_TEST_WORD", "three", 1);
	CHECK_EQ(gh_config_load(), 2);
	CHECK_EQ(lo.size, 4096);
	CHECK_EQ(hi.word, 0);
	r = row("TEST_SIZE");
	CHECK(r && r->source == GH_CFG_BAD_ENV);
	CHECK_STR(r->value, "4k");
	CHECK(gh_config_setting("TEST_SIZE") == NULL);
}

TEST(repeated_order_key_fails_the_check)
{
	char why[128];

	lo_rows[1].order = 15;
	clearenv();
	gh_config_load();
	CHECK_EQ(gh_config_check(why, sizeof(why)), -EINVAL);
	CHECK(strstr(why, "GDRHOOK_TEST_ON and GDRHOOK_TEST_SIZE: the same order key 15"));
}

TEST(repeated_name_fails_the_check)
{
	char why[128];

	hi_rows[0].name = "TEST_ON";
	clearenv();
	gh_config_load();
	CHECK_EQ(gh_config_check(why, sizeof(why)), -EINVAL);
	CHECK(strstr(why, "GDRHOOK_TEST_ON: in two rows"));
}

TEST(old_name_without_its_row_fails_the_check)
{
	char why[128];

	hi_rows[2].renamed_to = "TEST_GONE";
	clearenv();
	setenv("GDRHOOK_TEST_OLD_WORD", "two", 1);
	gh_config_load();
	CHECK_EQ(hi.word, 0);			/* nothing to read it as */
	CHECK_EQ(gh_config_check(why, sizeof(why)), -EINVAL);
	CHECK(strstr(why, "GDRHOOK_TEST_OLD_WORD: renamed to GDRHOOK_TEST_GONE, which no table has"));
}

TEST_MAIN()
