// SPDX-License-Identifier: MIT
/*
 * BAR1 budget (src/pin/bar.c): the sysfs resource parse (an H100's table as
 * read on the GPU machine), the default budget, and the pin extent for
 * allocations under and over it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "harness.h"
#include "pin/pin.h"


#define KiB (1ULL << 10)
#define MiB (1ULL << 20)
#define GiB (1ULL << 30)

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	CHECK(f);
	fputs(text, f);
	fclose(f);
}

/* BAR0 16 MiB, BAR1 128 GiB (resource 2 here), BAR3 32 MiB, ROM. */
static const char h100[] =
	"0x00000000fd000000 0x00000000fdffffff 0x000000000014220c\n"
	"0x0000000000000000 0x0000000000000000 0x0000000000000000\n"
	"0x0000002000000000 0x0000003fffffffff 0x000000000014220c\n"
	"0x0000000000000000 0x0000000000000000 0x0000000000000000\n"
	"0x0000004000000000 0x0000004001ffffff 0x000000000014220c\n"
	"0x0000000000000000 0x0000000000000000 0x0000000000000000\n"
	"0x00000000fe000000 0x00000000fe07ffff 0x0000000000046200\n";

TEST(bar_parse_sysfs_resource)
{
	char path[] = "/tmp/gh-bar-XXXXXX";
	int fd = mkstemp(path);

	CHECK(fd >= 0);
	close(fd);
	write_file(path, h100);
	CHECK_EQ(gh_bar_parse_resource(path), 128 * GiB);
	/* I/O ports and empty lines do not count; ROM (line 6) neither */
	write_file(path,
		   "0x0000000000001000 0x0000000000001fff 0x0000000000040101\n"
		   "0x0000000000000000 0x0000000000000000 0x0000000000000000\n"
		   "0x00000000e0000000 0x00000000efffffff 0x0000000000042208\n"
		   "0x0 0x0 0x0\n0x0 0x0 0x0\n0x0 0x0 0x0\n"
		   "0x0000000100000000 0x00000001ffffffff 0x0000000000046200\n");
	CHECK_EQ(gh_bar_parse_resource(path), 256 * MiB);
	write_file(path, "");
	CHECK_EQ(gh_bar_parse_resource(path), 0);
	unlink(path);
	CHECK_EQ(gh_bar_parse_resource(path), 0);
}

TEST(bar_default_budget)
{
	/* H100 80GB: BAR1 128 GiB > memory 79.2 GiB: a tenth of memory */
	CHECK_EQ(gh_bar_default_budget(128 * GiB, 85017493504ULL),
		 8501749350ULL);
	/* T4-class: 256 MiB BAR1, 16 GiB memory */
	CHECK_EQ(gh_bar_default_budget(256 * MiB, 16 * GiB), 256 * MiB / 10);
	CHECK_EQ(gh_bar_default_budget(0, 16 * GiB), 16 * GiB / 10);
	CHECK_EQ(gh_bar_default_budget(256 * MiB, 0), 256 * MiB / 10);
	CHECK_EQ(gh_bar_default_budget(0, 0), 0);
}

TEST(bar_extent)
{
	uint64_t lo, hi, base = 0x7f0000000000ULL;

	/* the H100 figure: 1 MiB and 1 GiB whole, 40 GiB by range */
	gh_pin_cfg.pin_whole_max = gh_bar_default_budget(128 * GiB,
						     85017493504ULL);
	CHECK_EQ(gh_bar_extent(-1, base, MiB, base + 4096, 100, &lo, &hi), 1);
	CHECK_EQ(lo, base);
	CHECK_EQ(hi, base + MiB);
	CHECK_EQ(gh_bar_extent(-1, base, GiB, base + 4096, 100, &lo, &hi), 1);
	CHECK_EQ(hi - lo, GiB);
	CHECK_EQ(gh_bar_extent(-1, base, 40 * GiB, base + 3 * GiB + 100, 5000,
			       &lo, &hi), 0);
	CHECK_EQ(lo, base + 3 * GiB);
	CHECK_EQ(hi, base + 3 * GiB + 64 * KiB);
	/* rounding never leaves the allocation */
	CHECK_EQ(gh_bar_extent(-1, base + 4096, 40 * GiB, base + 8192, 100,
			       &lo, &hi), 0);
	CHECK_EQ(lo, base + 4096);
	CHECK_EQ(gh_bar_extent(-1, base, 40 * GiB + 4096,
			       base + 40 * GiB, 4096, &lo, &hi), 0);
	CHECK_EQ(hi, base + 40 * GiB + 4096);
	/* the whole range asked for: whole */
	CHECK_EQ(gh_bar_extent(-1, base, 40 * GiB, base, 40 * GiB, &lo, &hi),
		 1);
	/* no budget known: whole */
	gh_pin_cfg.pin_whole_max = 0;
	CHECK_EQ(gh_bar_extent(-1, base, 40 * GiB, base + 4096, 1, &lo, &hi),
		 1);
}

TEST_MAIN()
