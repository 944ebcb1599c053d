/* SPDX-License-Identifier: MIT */
/* Unit, model and concurrency tests of the registry's ranges
 * (src/registry/ranges*.c). */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "registry/registry.h"

#define KiB (1ull << 10)
#define MiB (1ull << 20)
#define GiB (1ull << 30)
#define TiB (1ull << 40)

/* Deterministic PRNG (splitmix64) so failures reproduce. */
static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint64_t rng_below(uint64_t *s, uint64_t n)
{
	return n ? rng_next(s) % n : 0;
}

static struct gh_range mk(uint64_t base, uint64_t size)
{
	struct gh_range r;

	memset(&r, 0, sizeof(r));
	r.base = base;
	r.size = size;
	r.ctx = base ^ 0xc0ffee;
	r.pool = size * 3;
	r.dev = (int32_t)(base >> 16) & 0x7;
	r.kind = 1;
	r.buffer_id = base + size;
	return r;
}

static uint64_t ins(uint64_t base, uint64_t size)
{
	struct gh_range r = mk(base, size);
	uint64_t gen = 0;
	int rc = gh_registry_insert(&r, &gen);

	if (rc)
		TH_FAIL("insert(%#llx, %#llx) = %d", (unsigned long long)base,
			(unsigned long long)size, rc);
	CHECK(gen != 0);
	return gen;
}

static int ins_rc(uint64_t base, uint64_t size)
{
	struct gh_range r = mk(base, size);

	return gh_registry_insert(&r, NULL);
}

/* Expect ptr to be found in [base, base + size) with generation gen. */
static void expect_in(uint64_t ptr, uint64_t base, uint64_t size, uint64_t gen)
{
	struct gh_range r;
	int rc;

	/* Whatever the shape, never "absent" where a range is. */
	CHECK_EQ(gh_registry_absent(ptr), 0);
	memset(&r, 0xcc, sizeof(r));
	rc = gh_registry_lookup(ptr, 1, &r);
	if (rc)
		TH_FAIL("lookup(%#llx) = %d, want [%#llx, +%#llx)",
			(unsigned long long)ptr, rc,
			(unsigned long long)base, (unsigned long long)size);
	CHECK_EQ(r.base, base);
	CHECK_EQ(r.size, size);
	if (gen)
		CHECK_EQ(r.gen, gen);
	CHECK_EQ(r.ctx, base ^ 0xc0ffee);
	CHECK_EQ(r.pool, size * 3);
	CHECK_EQ(r.buffer_id, base + size);
}

static void expect_none(uint64_t ptr)
{
	struct gh_range r;
	int rc = gh_registry_lookup(ptr, 1, &r);

	if (rc != -ENOENT)
		TH_FAIL("lookup(%#llx) = %d (base %#llx), want -ENOENT",
			(unsigned long long)ptr, rc,
			(unsigned long long)r.base);
}

TEST(empty)
{
	struct gh_range r;

	CHECK_EQ(gh_registry_init(), 0);
	CHECK_EQ(gh_registry_lookup(0, 0, &r), -ENOENT);
	CHECK_EQ(gh_registry_lookup(0x7f0000000000ull, 8, &r), -ENOENT);
	CHECK_EQ(gh_registry_lookup(UINT64_MAX, 1, &r), -ENOENT);
	CHECK_EQ(gh_registry_lookup(1ull << 56, 1, &r), -ENOENT);
	CHECK_EQ(gh_registry_count(), 0);
	CHECK_EQ(gh_registry_bytes(), 0);
	CHECK_EQ(gh_registry_remove(0x1000, &r), -ENOENT);
	CHECK_EQ(gh_registry_remove_overlap(0, UINT64_MAX, NULL, NULL), 0);
}

/*
 * gh_registry_absent(): 1 where the 4 GiB window or the 2 MiB region is
 * empty, 0 where a range may be (its own region, or above 2^48, which it
 * does not read); beside random inserts and removes, never 1 where the
 * lookup finds a range.
 */
TEST(absent_where_nothing_may_be)
{
	uint64_t seed = 38, b = 0x7f1200000000ull, live[64] = { 0 };
	struct gh_range r;

	CHECK_EQ(gh_registry_init(), 0);
	CHECK_EQ(gh_registry_absent(0x555555554000ull), 1);
	CHECK_EQ(gh_registry_absent(b), 1);
	CHECK_EQ(gh_registry_absent(1ull << 48), 0);
	ins(b + 3 * MiB, 4096);
	CHECK_EQ(gh_registry_absent(b + 3 * MiB), 0);
	CHECK_EQ(gh_registry_absent(b + 2 * MiB), 0);	/* its region */
	CHECK_EQ(gh_registry_absent(b), 1);		/* another region */
	CHECK_EQ(gh_registry_absent(b + 4 * GiB), 1);	/* another window */
	CHECK_EQ(gh_registry_remove(b + 3 * MiB, NULL), 0);
	for (int i = 0; i < 20000; i++) {
		int k = (int)rng_below(&seed, 64);
		uint64_t p = b + rng_below(&seed, 8 * GiB);

		if (live[k]) {
			CHECK_EQ(gh_registry_remove(live[k], NULL), 0);
			live[k] = 0;
		} else {
			uint64_t at = (b + rng_below(&seed, 8 * GiB)) & ~4095ull;
			uint64_t sz = 4096 << rng_below(&seed, 16);

			if (!ins_rc(at, sz))
				live[k] = at;
		}
		if (!gh_registry_lookup(p, 1, &r))
			CHECK_EQ(gh_registry_absent(p), 0);
		for (int j = 0; j < 64; j++)
			if (live[j])
				CHECK_EQ(gh_registry_absent(live[j]), 0);
	}
}

TEST(insert_lookup_fields)
{
	struct gh_range in, out;
	uint64_t gen = 0;

	memset(&in, 0, sizeof(in));
	in.base = 0x7f1234560000ull;
	in.size = 3 * MiB + 512;
	in.gen = 999;		/* ignored: insert assigns */
	in.ctx = 0x1111222233334444ull;
	in.pool = 0x5555666677778888ull;
	in.dev = -1;
	in.kind = 6;
	in.flags = GH_RANGE_VOLATILE;
	in.buffer_id = 0xdeadbeefcafef00dull;
	CHECK_EQ(gh_registry_insert(&in, &gen), 0);
	CHECK(gen >= 1);
	memset(&out, 0xcc, sizeof(out));
	CHECK_EQ(gh_registry_lookup(in.base + 12345, 100, &out), 0);
	CHECK_EQ(out.base, in.base);
	CHECK_EQ(out.size, in.size);
	CHECK_EQ(out.gen, gen);
	CHECK_EQ(out.ctx, in.ctx);
	CHECK_EQ(out.pool, in.pool);
	CHECK_EQ(out.dev, -1);
	CHECK_EQ(out.kind, 6);
	CHECK_EQ(out.flags, GH_RANGE_VOLATILE);
	CHECK_EQ(out.buffer_id, in.buffer_id);
	CHECK_EQ(gh_registry_count(), 1);
	CHECK_EQ(gh_registry_bytes(), in.size);
	expect_none(in.base - 1);
	expect_none(in.base + in.size);
	memset(&out, 0, sizeof(out));
	CHECK_EQ(gh_registry_remove(in.base, &out), 0);
	CHECK_EQ(out.gen, gen);
	CHECK_EQ(out.buffer_id, in.buffer_id);
	CHECK_EQ(out.dev, -1);
	CHECK_EQ(gh_registry_count(), 0);
	CHECK_EQ(gh_registry_bytes(), 0);
	expect_none(in.base);
	expect_none(in.base + 12345);
	CHECK_EQ(gh_registry_remove(in.base, NULL), -ENOENT);
}

TEST(insert_einval)
{
	CHECK_EQ(ins_rc(0x10000, 0), -EINVAL);
	CHECK_EQ(ins_rc(UINT64_MAX - 10, 100), -EINVAL);	/* wraps */
	CHECK_EQ(ins_rc(0, 0), -EINVAL);
	CHECK_EQ(ins_rc(1ull << 57, 4096), -EINVAL);		/* past 57 bits */
	CHECK_EQ(ins_rc((1ull << 57) - 4096, 8192), -EINVAL);
	CHECK_EQ(ins_rc(1ull << 63, 1), -EINVAL);
	CHECK_EQ(gh_registry_count(), 0);
	/* Address 0 and the very last 57-bit byte are valid. */
	ins(0, 1);
	ins((1ull << 57) - 1, 1);
	expect_in(0, 0, 1, 0);
	expect_in((1ull << 57) - 1, (1ull << 57) - 1, 1, 0);
	CHECK_EQ(gh_registry_count(), 2);
}

TEST(lookup_len_erange)
{
	uint64_t b = 0x200000000ull, s = 1 * MiB;
	struct gh_range r;

	ins(b, s);
	CHECK_EQ(gh_registry_lookup(b, 0, &r), 0);		/* len 0 = 1 */
	CHECK_EQ(gh_registry_lookup(b + s - 1, 0, &r), 0);
	CHECK_EQ(gh_registry_lookup(b + s - 1, 1, &r), 0);
	CHECK_EQ(gh_registry_lookup(b, s, &r), 0);
	CHECK_EQ(gh_registry_lookup(b + 100, s - 100, &r), 0);
	memset(&r, 0, sizeof(r));
	CHECK_EQ(gh_registry_lookup(b + 100, s - 99, &r), -ERANGE);
	CHECK_EQ(r.base, b);					/* still filled */
	CHECK_EQ(r.size, s);
	CHECK_EQ(gh_registry_lookup(b + s - 1, 2, &r), -ERANGE);
	CHECK_EQ(gh_registry_lookup(b, UINT64_MAX, &r), -ERANGE); /* wraps */
	CHECK_EQ(gh_registry_lookup(b + s, 1, &r), -ENOENT);
	CHECK_EQ(gh_registry_lookup(b - 1, 2, &r), -ENOENT);	/* starts outside */
	/* Running into an adjacent range is still -ERANGE. */
	ins(b + s, s);
	CHECK_EQ(gh_registry_lookup(b + s - 8, 16, &r), -ERANGE);
	CHECK_EQ(r.base, b);
}

TEST(adjacent_ranges)
{
	uint64_t b = 0x7f0000010000ull;
	uint64_t g[4];

	/* Sizes that share granules at both ends. */
	g[0] = ins(b, 1000);
	g[1] = ins(b + 1000, 70000);
	g[2] = ins(b + 71000, 512);
	g[3] = ins(b + 71512, 2 * MiB);
	expect_none(b - 1);
	expect_in(b, b, 1000, g[0]);
	expect_in(b + 999, b, 1000, g[0]);
	expect_in(b + 1000, b + 1000, 70000, g[1]);
	expect_in(b + 70999, b + 1000, 70000, g[1]);
	expect_in(b + 71000, b + 71000, 512, g[2]);
	expect_in(b + 71511, b + 71000, 512, g[2]);
	expect_in(b + 71512, b + 71512, 2 * MiB, g[3]);
	expect_in(b + 71512 + 2 * MiB - 1, b + 71512, 2 * MiB, g[3]);
	expect_none(b + 71512 + 2 * MiB);
	CHECK_EQ(gh_registry_count(), 4);
	CHECK_EQ(gh_registry_bytes(), 1000 + 70000 + 512 + 2 * MiB);
	/* Remove the middle ones; neighbours unaffected. */
	CHECK_EQ(gh_registry_remove(b + 1000, NULL), 0);
	expect_none(b + 1000);
	expect_none(b + 65536);
	expect_in(b + 999, b, 1000, g[0]);
	expect_in(b + 71000, b + 71000, 512, g[2]);
	CHECK_EQ(gh_registry_remove(b + 71000, NULL), 0);
	expect_in(b + 71512, b + 71512, 2 * MiB, g[3]);
	expect_none(b + 71511);
	/* Fill the gap again with one range touching both neighbours. */
	g[1] = ins(b + 1000, 70512);
	expect_in(b + 71511, b + 1000, 70512, g[1]);
}

TEST(overlap_rejected)
{
	uint64_t b = 0x300000000ull + 0x12345 * 512;
	uint64_t s = 300 * KiB;

	ins(b, s);
	CHECK_EQ(ins_rc(b, s), -EEXIST);			/* same */
	CHECK_EQ(ins_rc(b - 512, 1024), -EEXIST);		/* left edge */
	CHECK_EQ(ins_rc(b + s - 1, 100), -EEXIST);		/* right edge */
	CHECK_EQ(ins_rc(b - GiB, 2 * GiB), -EEXIST);		/* contains */
	CHECK_EQ(ins_rc(b + 4096, 1), -EEXIST);			/* inside */
	CHECK_EQ(ins_rc(b - 65536 * 3, 65536 * 3 + 1), -EEXIST);
	CHECK_EQ(ins_rc(0, 1ull << 57), -EEXIST);		/* everything */
	CHECK_EQ(gh_registry_count(), 1);
	CHECK_EQ(gh_registry_bytes(), s);
	/* Just outside on both sides is fine. */
	ins(b - 512, 512);
	ins(b + s, 1);
	CHECK_EQ(gh_registry_count(), 3);
	/* Overlap detected inside a shared granule. */
	ins(0x400000000ull + 512, 512);
	ins(0x400000000ull + 2048, 512);
	CHECK_EQ(ins_rc(0x400000000ull + 1000, 100), -EEXIST);
	CHECK_EQ(ins_rc(0x400000000ull + 1024, 1025), -EEXIST);
	CHECK_EQ(ins_rc(0x400000000ull, 513), -EEXIST);
	CHECK_EQ(ins_rc(0x400000000ull + 2559, 1), -EEXIST);
	ins(0x400000000ull + 1024, 1024);
	ins(0x400000000ull + 2560, 1);
	CHECK_EQ(gh_registry_count(), 7);
	/* A whole-window range blocks anything inside the window. */
	ins(0x800000000ull, 4 * GiB);
	CHECK_EQ(ins_rc(0x800000000ull + 3 * GiB, 1), -EEXIST);
	CHECK_EQ(ins_rc(0x7fffff000ull, 8192), -EEXIST);
	ins(0x7fffff000ull, 4096);
	ins(0x900000000ull, 4096);
}

TEST(cross_64k_and_4g)
{
	uint64_t b1 = 0x1234510000ull - 4096;			/* crosses 64K */
	uint64_t b2 = 0x500000000ull - 64 * KiB - 100;		/* crosses 4G */
	uint64_t b3 = 0x600000000ull - 3 * GiB;			/* 3 windows */
	uint64_t g1 = ins(b1, 8192);
	uint64_t g2 = ins(b2, 200 * KiB);
	uint64_t g3 = ins(b3, 7 * GiB + 12345);

	expect_in(b1, b1, 8192, g1);
	expect_in(b1 + 4095, b1, 8192, g1);
	expect_in(b1 + 4096, b1, 8192, g1);
	expect_in(b1 + 8191, b1, 8192, g1);
	expect_none(b1 + 8192);
	expect_in(0x500000000ull - 1, b2, 200 * KiB, g2);
	expect_in(0x500000000ull, b2, 200 * KiB, g2);
	expect_in(b2 + 200 * KiB - 1, b2, 200 * KiB, g2);
	expect_none(b2 + 200 * KiB);
	expect_none(b2 - 1);
	for (uint64_t off = 0; off < 7 * GiB + 12345; off += 333 * MiB + 7)
		expect_in(b3 + off, b3, 7 * GiB + 12345, g3);
	expect_in(0x600000000ull, b3, 7 * GiB + 12345, g3);
	expect_in(0x700000000ull + 5, b3, 7 * GiB + 12345, g3);
	expect_in(b3 + 7 * GiB + 12344, b3, 7 * GiB + 12345, g3);
	expect_none(b3 + 7 * GiB + 12345);
	expect_none(b3 - 1);
	CHECK_EQ(gh_registry_remove(b3, NULL), 0);
	expect_none(0x700000000ull + 5);
	expect_none(b3);
	expect_in(b2, b2, 200 * KiB, g2);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

TEST(many_small_in_one_granule)
{
	enum { N = 128 };
	uint64_t g = 0x7fab00000000ull + 7 * 65536;
	uint64_t order[N], gens[N];
	uint64_t seed = 42;

	for (int i = 0; i < N; i++)
		order[i] = i;
	for (int round = 0; round < 4; round++) {
		/* Insert in random order, check all after each step. */
		for (int i = N - 1; i > 0; i--) {
			uint64_t j = rng_below(&seed, i + 1), t = order[i];

			order[i] = order[j];
			order[j] = t;
		}
		for (int i = 0; i < N; i++) {
			uint64_t k = order[i];

			gens[k] = ins(g + k * 512, 512);
			for (int j = 0; j <= i; j += 7)
				expect_in(g + order[j] * 512 + 100,
					  g + order[j] * 512, 512,
					  gens[order[j]]);
		}
		CHECK_EQ(gh_registry_count(), N);
		for (int k = 0; k < N; k++)
			expect_in(g + k * 512 + 511, g + k * 512, 512, gens[k]);
		expect_none(g - 1);
		expect_none(g + 65536);
		/* Remove in another random order. */
		for (int i = N - 1; i > 0; i--) {
			uint64_t j = rng_below(&seed, i + 1), t = order[i];

			order[i] = order[j];
			order[j] = t;
		}
		for (int i = 0; i < N; i++) {
			struct gh_range r;
			uint64_t k = order[i];

			CHECK_EQ(gh_registry_remove(g + k * 512, &r), 0);
			CHECK_EQ(r.gen, gens[k]);
			expect_none(g + k * 512);
			for (int j = i + 1; j < N; j += 5)
				expect_in(g + order[j] * 512, g + order[j] * 512,
					  512, gens[order[j]]);
		}
		CHECK_EQ(gh_registry_count(), 0);
	}
	/* Many 1-byte allocations (large node classes), odd spacing. */
	{
		enum { M = 3000 };
		static uint64_t addr[M];

		for (int i = 0; i < M; i++)
			addr[i] = g + (uint64_t)i * 21 + 3;
		for (int i = M - 1; i > 0; i--) {
			uint64_t j = rng_below(&seed, i + 1), t = addr[i];

			addr[i] = addr[j];
			addr[j] = t;
		}
		for (int i = 0; i < M; i++)
			ins(addr[i], 1);
		qsort(addr, M, sizeof(addr[0]), cmp_u64);
		for (int i = 0; i < M; i++) {
			expect_in(addr[i], addr[i], 1, 0);
			expect_none(addr[i] + 1);
		}
		for (int i = 0; i < M; i += 2)
			CHECK_EQ(gh_registry_remove(addr[i], NULL), 0);
		for (int i = 0; i < M; i++) {
			if (i & 1)
				expect_in(addr[i], addr[i], 1, 0);
			else
				expect_none(addr[i]);
		}
		CHECK_EQ(gh_registry_count(), M / 2);
	}
}

/*
 * Shared granules of 8 items and more answer through a 512-byte slot
 * index while no slot holds two items, and binary-search otherwise:
 * check every 64 bytes of the granule across both modes and back.
 */
static void expect_granule(uint64_t g, const uint64_t *base,
			   const uint64_t *size, const uint64_t *gen, int n)
{
	for (uint64_t p = g; p < g + 65536; p += 64) {
		int hit = -1;

		for (int i = 0; i < n; i++)
			if (gen[i] && p - base[i] < size[i])
				hit = i;
		if (hit >= 0)
			expect_in(p, base[hit], size[hit], gen[hit]);
		else
			expect_none(p);
	}
}

TEST(slot_index_and_fallback)
{
	enum { N = 20 };
	uint64_t g = 0x7fac00000000ull + 3 * 65536;
	uint64_t base[N + 1], size[N + 1], gen[N + 1] = { 0 };

	for (int i = 0; i < N; i++) {
		base[i] = g + 1024 * i;	/* a free slot between neighbours */
		size[i] = 300 + 17 * i;
		gen[i] = ins(base[i], size[i]);
		expect_granule(g, base, size, gen, N);
	}
	/* One item that shares a slot with item 3: the index gives up. */
	base[N] = base[3] + 400;
	size[N] = 100;
	gen[N] = ins(base[N], size[N]);
	expect_granule(g, base, size, gen, N + 1);
	CHECK_EQ(gh_registry_remove(base[N], NULL), 0);
	gen[N] = 0;
	expect_granule(g, base, size, gen, N + 1);
	for (int i = 0; i < N; i += 2) {
		CHECK_EQ(gh_registry_remove(base[i], NULL), 0);
		gen[i] = 0;
		expect_granule(g, base, size, gen, N + 1);
	}
	for (int i = 1; i < N; i += 2) {
		CHECK_EQ(gh_registry_remove(base[i], NULL), 0);
		gen[i] = 0;
		expect_granule(g, base, size, gen, N + 1);
	}
	CHECK_EQ(gh_registry_count(), 0);
}

/*
 * Page leaves of a shared granule (4 KiB allocations): valid while no page
 * has two owners, given up while one has, rebuilt after.  An entry freed
 * and reused at the same page while they are given up must not leave the
 * old allocation's copy behind (same entry, new generation).
 */
TEST(page_leaves_and_reuse)
{
	enum { N = 6 };
	uint64_t g = 0x7fad00000000ull + 5 * 65536;
	uint64_t base[N], size[N], gen[N] = { 0 };

	for (int i = 0; i < 3; i++) {
		base[i] = g + 4096 * (2 * i);	/* pages 0, 2, 4 */
		size[i] = 4096 * (i + 1) - 512 * i;
		gen[i] = ins(base[i], size[i]);
	}
	expect_granule(g, base, size, gen, 3);
	/* Two 512-byte buffers in page 12: the page leaves give up. */
	base[3] = g + 12 * 4096;
	size[3] = 512;
	base[4] = base[3] + 512;
	size[4] = 512;
	gen[3] = ins(base[3], size[3]);
	gen[4] = ins(base[4], size[4]);
	expect_granule(g, base, size, gen, 5);
	/* Page 0's owner goes; a new one takes its entry and its place. */
	CHECK_EQ(gh_registry_remove(base[0], NULL), 0);
	gen[0] = 0;
	expect_granule(g, base, size, gen, 5);
	base[5] = base[0];
	size[5] = size[0];
	gen[5] = ins(base[5], size[5]);
	expect_granule(g, base, size, gen, N);
	/* Page 12 has one owner again: the page leaves come back. */
	CHECK_EQ(gh_registry_remove(base[4], NULL), 0);
	gen[4] = 0;
	expect_granule(g, base, size, gen, N);
	for (int i = 0; i < N; i++) {
		if (!gen[i])
			continue;
		CHECK_EQ(gh_registry_remove(base[i], NULL), 0);
		gen[i] = 0;
		expect_granule(g, base, size, gen, N);
	}
	CHECK_EQ(gh_registry_count(), 0);
}

/*
 * Slot leaves of a granule of small buffers (8 items and more, no 512-byte
 * slot with two owners), through every change of mode: page leaves while
 * the buffers are whole pages, slot leaves once two share a page, the
 * search once two share a slot, and back; a freed entry reused at the
 * same place under a new generation must not leave the old copy behind.
 */
TEST(slot_leaves_modes_and_reuse)
{
	enum { N = 14 };
	uint64_t g = 0x7fae00000000ull + 7 * 65536;
	uint64_t base[N], size[N], gen[N] = { 0 };

	for (int i = 0; i < 8; i++) {	/* pages 0..7: page leaves */
		base[i] = g + 4096 * i;
		size[i] = 4096;
		gen[i] = ins(base[i], size[i]);
		expect_granule(g, base, size, gen, 8);
	}
	/* Two buffers in page 9: slot leaves */
	base[8] = g + 9 * 4096;
	size[8] = 512;
	base[9] = base[8] + 1024;
	size[9] = 1536;
	gen[8] = ins(base[8], size[8]);
	expect_granule(g, base, size, gen, 10);
	gen[9] = ins(base[9], size[9]);
	expect_granule(g, base, size, gen, 10);
	/* Page 2's owner goes and a small buffer takes its entry and place */
	CHECK_EQ(gh_registry_remove(base[2], NULL), 0);
	gen[2] = 0;
	expect_granule(g, base, size, gen, 10);
	base[10] = base[2];
	size[10] = 700;
	gen[10] = ins(base[10], size[10]);
	expect_granule(g, base, size, gen, 11);
	/* A buffer sharing slot 0 of page 9 with item 8: the search */
	base[11] = base[8] + 512;	/* the slot after item 8: still slots */
	size[11] = 100;
	gen[11] = ins(base[11], size[11]);
	expect_granule(g, base, size, gen, 12);
	base[12] = base[11] + 200;	/* shares item 11's slot: search */
	size[12] = 100;
	gen[12] = ins(base[12], size[12]);
	expect_granule(g, base, size, gen, 13);
	CHECK_EQ(gh_registry_remove(base[12], NULL), 0);
	gen[12] = 0;
	expect_granule(g, base, size, gen, 13);
	/* Item 10 freed, its place taken again while slot leaves hold */
	CHECK_EQ(gh_registry_remove(base[10], NULL), 0);
	gen[10] = 0;
	expect_granule(g, base, size, gen, 13);
	base[13] = base[10] + 512;
	size[13] = 3000;
	gen[13] = ins(base[13], size[13]);
	expect_granule(g, base, size, gen, N);
	for (int i = N - 1; i >= 0; i--) {
		if (!gen[i])
			continue;
		CHECK_EQ(gh_registry_remove(base[i], NULL), 0);
		gen[i] = 0;
		expect_granule(g, base, size, gen, N);
	}
	CHECK_EQ(gh_registry_count(), 0);
}

TEST(shared_edges_of_big_ranges)
{
	/* Two big ranges meeting mid-granule, small ones in their edges. */
	uint64_t b = 0x20000000000ull + 1000 * 65536;
	uint64_t ga = ins(b + 4096, 10 * MiB - 4096 + 1536);	/* ends mid */
	uint64_t end_a = b + 10 * MiB + 1536;
	uint64_t gb = ins(end_a + 512, 5 * GiB);
	uint64_t gs = ins(b, 512);
	uint64_t gm = ins(end_a, 512);

	expect_in(b, b, 512, gs);
	expect_none(b + 512);
	expect_in(b + 4096, b + 4096, 10 * MiB - 4096 + 1536, ga);
	expect_in(end_a - 1, b + 4096, 10 * MiB - 4096 + 1536, ga);
	expect_in(end_a, end_a, 512, gm);
	expect_in(end_a + 512, end_a + 512, 5 * GiB, gb);
	expect_in(end_a + 5 * GiB + 511, end_a + 512, 5 * GiB, gb);
	CHECK_EQ(gh_registry_remove(b + 4096, NULL), 0);
	expect_none(b + 4096);
	expect_none(end_a - 1);
	expect_in(end_a, end_a, 512, gm);
	expect_in(b, b, 512, gs);
	CHECK_EQ(gh_registry_remove(end_a + 512, NULL), 0);
	expect_none(end_a + 512);
	expect_in(end_a + 511, end_a, 512, gm);
	CHECK_EQ(gh_registry_count(), 2);
}

TEST(huge_ranges)
{
	uint64_t b = 0x100000000000ull;		/* 4 GiB aligned */
	uint64_t s = 64 * GiB;
	uint64_t g = ins(b, s);

	expect_in(b, b, s, g);
	expect_in(b + s - 1, b, s, g);
	expect_in(b + 17 * GiB + 12345, b, s, g);
	expect_none(b + s);
	expect_none(b - 1);
	CHECK_EQ(gh_registry_bytes(), s);
	/* Neighbours inside the same edge granules. */
	ins(b - 512, 512);
	ins(b + s, 512);
	expect_in(b + s, b + s, 512, 0);
	expect_in(b - 1, b - 512, 512, 0);
	CHECK_EQ(gh_registry_remove(b, NULL), 0);
	expect_none(b + 17 * GiB);
	CHECK_EQ(gh_registry_remove(b + s, NULL), 0);
	/* Unaligned 80 GiB across windows, then reuse the space small. */
	g = ins(b + 12345 * 512, 80 * GiB);
	expect_in(b + 12345 * 512, b + 12345 * 512, 80 * GiB, g);
	expect_in(b + 40 * GiB, b + 12345 * 512, 80 * GiB, g);
	expect_none(b + 12345 * 512 - 1);
	CHECK_EQ(gh_registry_remove(b + 12345 * 512, NULL), 0);
	g = ins(b + 40 * GiB, 4096);
	expect_in(b + 40 * GiB, b + 40 * GiB, 4096, g);
	expect_none(b + 40 * GiB + 4096);
	expect_none(b + 41 * GiB);
	/* 1 TiB, and larger than a 48-bit dir span boundary crossing. */
	g = ins(0x300000000000ull, TiB);
	expect_in(0x300000000000ull + TiB / 2, 0x300000000000ull, TiB, g);
	CHECK_EQ(ins_rc(0x300000000000ull + 5, 1), -EEXIST);
	CHECK_EQ(gh_registry_remove_overlap(0x300000000000ull + TiB - 1, 1,
					    NULL, NULL), 1);
	expect_none(0x300000000000ull + TiB / 2);
}

TEST(high_addresses_57bit)
{
	uint64_t top = 1ull << 48;
	uint64_t b1 = top - 64 * KiB;		/* crosses 2^48 */
	uint64_t b2 = (1ull << 56) + 0x123456789000ull;
	uint64_t b3 = (1ull << 57) - 8 * GiB;	/* ends at the 57-bit top */
	uint64_t g1 = ins(b1, 128 * KiB);
	uint64_t g2 = ins(b2, 3 * MiB);
	uint64_t g3 = ins(b3, 8 * GiB);
	struct gh_range r;

	expect_in(top - 1, b1, 128 * KiB, g1);
	expect_in(top, b1, 128 * KiB, g1);
	expect_in(top + 64 * KiB - 1, b1, 128 * KiB, g1);
	expect_none(top + 64 * KiB);
	expect_in(b2 + MiB, b2, 3 * MiB, g2);
	expect_none(b2 - 1);
	expect_in((1ull << 57) - 1, b3, 8 * GiB, g3);
	expect_in(b3, b3, 8 * GiB, g3);
	CHECK_EQ(gh_registry_lookup((1ull << 57) - 1, 2, &r), -ERANGE);
	CHECK_EQ(gh_registry_lookup(1ull << 57, 1, &r), -ENOENT);
	CHECK_EQ(gh_registry_lookup(UINT64_MAX, 1, &r), -ENOENT);
	CHECK_EQ(gh_registry_lookup((1ull << 63) + b2, 1, &r), -ENOENT);
	/* Same low 48 bits as b2, other top index: not found. */
	expect_none(b2 - (1ull << 56) + (1ull << 55));
	expect_none(b2 & ((1ull << 48) - 1));
	CHECK_EQ(gh_registry_remove_overlap(top - 1, 2 * MiB, NULL, NULL), 1);
	CHECK_EQ(gh_registry_remove(b3, NULL), 0);
	expect_none((1ull << 57) - 1);
	CHECK_EQ(gh_registry_count(), 1);
}

TEST(gen_unique_and_realloc)
{
	uint64_t b = 0x7f0000000000ull, prev = 0, g;
	struct gh_range r;

	for (int i = 0; i < 1000; i++) {
		g = ins(b, 1 * MiB);
		CHECK(g > prev);		/* unique and increasing */
		expect_in(b + 5, b, MiB, g);
		CHECK_EQ(gh_registry_remove(b, &r), 0);
		CHECK_EQ(r.gen, g);
		prev = g;
	}
	/* Different sizes at the same base: still a new gen each time. */
	g = ins(b, 4096);
	CHECK(g > prev);
	expect_in(b, b, 4096, g);
	CHECK_EQ(gh_registry_remove(b, NULL), 0);
	prev = g;
	g = ins(b, 8192);
	CHECK(g > prev);
	/* A failed insert does not affect the next gen's uniqueness. */
	CHECK_EQ(ins_rc(b, 10), -EEXIST);
	CHECK(ins(b + 8192, 10) > g);
	/* Survives reset: gens never repeat. */
	gh_registry_reset();
	CHECK_EQ(gh_registry_count(), 0);
	CHECK(ins(b, 1) > g);
}

TEST(remove_exact_base_only)
{
	uint64_t b = 0x7e0000001000ull;
	struct gh_range r;

	ins(b, 100 * KiB);
	memset(&r, 0x5a, sizeof(r));
	CHECK_EQ(gh_registry_remove(b + 1, &r), -ENOENT);
	CHECK_EQ(r.base, 0x5a5a5a5a5a5a5a5aull);	/* untouched */
	CHECK_EQ(gh_registry_remove(b - 1, &r), -ENOENT);
	CHECK_EQ(gh_registry_remove(b + 64 * KiB, &r), -ENOENT);
	CHECK_EQ(gh_registry_remove(1ull << 60, &r), -ENOENT);
	CHECK_EQ(gh_registry_count(), 1);
	CHECK_EQ(gh_registry_remove(b, NULL), 0);
	CHECK_EQ(gh_registry_count(), 0);
}

struct rm_log {
	int n;
	uint64_t base[64];
	uint64_t seen_live;	/* on_remove ran while still registered */
};

static void log_rm(const struct gh_range *r, void *arg)
{
	struct rm_log *l = arg;
	struct gh_range x;

	if (l->n < 64)
		l->base[l->n] = r->base;
	l->n++;
	if (gh_registry_lookup(r->base, 1, &x) == 0 && x.gen == r->gen)
		l->seen_live++;
}

TEST(remove_overlap_several)
{
	uint64_t b = 0x7d0000000000ull;
	struct rm_log l = { 0 };

	/* VMM-like: several mappings in one reserved range. */
	ins(b, 2 * MiB);
	ins(b + 2 * MiB, 2 * MiB);
	ins(b + 4 * MiB, 4 * MiB);
	ins(b + 8 * MiB + 512, 512);
	ins(b + 16 * MiB, 2 * MiB);		/* outside the interval */
	ins(b - 4096, 4096);			/* outside, adjacent */
	CHECK_EQ(gh_registry_remove_overlap(b + MiB, 7 * MiB + 1024,
					    log_rm, &l), 4);
	CHECK_EQ(l.n, 4);
	CHECK_EQ(l.seen_live, 4);
	CHECK_EQ(l.base[0], b);			/* ascending order */
	CHECK_EQ(l.base[1], b + 2 * MiB);
	CHECK_EQ(l.base[2], b + 4 * MiB);
	CHECK_EQ(l.base[3], b + 8 * MiB + 512);
	CHECK_EQ(gh_registry_count(), 2);
	expect_in(b - 1, b - 4096, 4096, 0);
	expect_in(b + 16 * MiB, b + 16 * MiB, 2 * MiB, 0);
	expect_none(b);
	/* Empty interval removes nothing; touching edges remove nothing. */
	CHECK_EQ(gh_registry_remove_overlap(b + 16 * MiB, 0, NULL, NULL), 0);
	CHECK_EQ(gh_registry_remove_overlap(b + 18 * MiB, MiB, NULL, NULL), 0);
	CHECK_EQ(gh_registry_remove_overlap(b, 16 * MiB, NULL, NULL), 0);
	/* Huge interval (wraps): takes everything, incl. high ranges. */
	ins((1ull << 56) + 4096, 4096);
	ins(0x1000, 4096);
	CHECK_EQ(gh_registry_remove_overlap(0, UINT64_MAX, NULL, NULL), 4);
	CHECK_EQ(gh_registry_count(), 0);
	CHECK_EQ(gh_registry_bytes(), 0);
}

static int match_dev(const struct gh_range *r, void *arg)
{
	return r->dev == *(int *)arg;
}

struct sum {
	uint64_t n, bytes, xor_base;
};

static void sum_fn(const struct gh_range *r, void *arg)
{
	struct sum *s = arg;

	s->n++;
	s->bytes += r->size;
	s->xor_base ^= r->base;
}

TEST(remove_if_foreach_count_bytes)
{
	uint64_t b = 0x7c0000000000ull, bytes = 0, x = 0;
	struct rm_log l = { 0 };
	struct sum s = { 0 };
	int dev = 3;
	size_t n3 = 0;

	for (int i = 0; i < 200; i++) {
		uint64_t base = b + (uint64_t)i * 65536 + (i % 3) * 512;
		uint64_t size = 512 + (uint64_t)i * 64;

		ins(base, size);
		bytes += size;
		x ^= base;
		if (mk(base, size).dev == 3)
			n3++;
	}
	CHECK_EQ(gh_registry_count(), 200);
	CHECK_EQ(gh_registry_bytes(), bytes);
	gh_registry_foreach(sum_fn, &s);
	CHECK_EQ(s.n, 200);
	CHECK_EQ(s.bytes, bytes);
	CHECK_EQ(s.xor_base, x);
	CHECK(n3 > 0);
	CHECK_EQ(gh_registry_remove_if(match_dev, &dev, log_rm, &l), n3);
	CHECK_EQ(l.n, (int)n3);
	CHECK_EQ(l.seen_live, n3);
	CHECK_EQ(gh_registry_count(), 200 - n3);
	memset(&s, 0, sizeof(s));
	gh_registry_foreach(sum_fn, &s);
	CHECK_EQ(s.n, 200 - n3);
	CHECK_EQ(s.bytes, gh_registry_bytes());
	CHECK_EQ(gh_registry_remove_if(match_dev, &dev, NULL, NULL), 0);
	CHECK_EQ(gh_registry_remove_if(NULL, NULL, NULL, NULL), 200 - n3);
	CHECK_EQ(gh_registry_count(), 0);
	CHECK_EQ(gh_registry_bytes(), 0);
	expect_none(b);
}

TEST(reset_and_reuse)
{
	for (int i = 0; i < 50; i++)
		ins(0x7b0000000000ull + (uint64_t)i * 3 * MiB, 2 * MiB + 512);
	ins(0x7b1000000000ull, 9 * GiB);
	gh_registry_reset();
	CHECK_EQ(gh_registry_count(), 0);
	CHECK_EQ(gh_registry_bytes(), 0);
	expect_none(0x7b0000000000ull);
	expect_none(0x7b1000000000ull + 5 * GiB);
	ins(0x7b0000000000ull, 2 * MiB);
	expect_in(0x7b0000000000ull, 0x7b0000000000ull, 2 * MiB, 0);
}

TEST(atfork)
{
	uint64_t g = ins(0x7a0000000000ull, MiB);
	int status = 0;
	pid_t pid;

	gh_registry_atfork_prepare();
	pid = fork();
	if (pid == 0) {
		gh_registry_atfork_child();
		expect_in(0x7a0000000000ull, 0x7a0000000000ull, MiB, g);
		ins(0x7a0000100000ull, MiB);
		CHECK_EQ(gh_registry_count(), 2);
		_exit(0);
	}
	gh_registry_atfork_parent();
	CHECK(pid > 0);
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK_EQ(gh_registry_count(), 1);
	ins(0x7a0000100000ull, MiB);
}

/* ------------------------------------------------------------------ */
/* Randomized model test                                               */

struct mrange {
	uint64_t base, size, gen;
};

#define MODEL_MAX 4096
static struct mrange model[MODEL_MAX];
static int model_n;

static int model_find(uint64_t ptr)
{
	for (int i = 0; i < model_n; i++)
		if (ptr - model[i].base < model[i].size)
			return i;
	return -1;
}

static int model_overlaps(uint64_t a, uint64_t b)
{
	for (int i = 0; i < model_n; i++)
		if (model[i].base < b && model[i].base + model[i].size > a)
			return 1;
	return 0;
}

static void model_del(int i)
{
	model[i] = model[--model_n];
}

static uint64_t model_bytes(void)
{
	uint64_t s = 0;

	for (int i = 0; i < model_n; i++)
		s += model[i].size;
	return s;
}

/* Random range in one of a few areas chosen to collide and share. */
static void rand_range(uint64_t *seed, uint64_t *base_p, uint64_t *size_p)
{
	uint64_t k = rng_below(seed, 100), base, size;

	if (k < 45) {		/* small, sharing granules */
		base = 0x7f0000000000ull - 64 * KiB +
		       rng_below(seed, 4 * MiB / 512) * 512;
		size = rng_below(seed, 8) ? 512 * (1 + rng_below(seed, 16))
					  : 1 + rng_below(seed, 200 * KiB);
		if (!rng_below(seed, 10))
			base += rng_below(seed, 512);	/* unaligned */
	} else if (k < 75) {	/* medium, crossing a 4 GiB boundary */
		base = 0x10000000000ull - 32 * MiB +
		       rng_below(seed, 64 * MiB / 4096) * 4096;
		size = 4096ull << rng_below(seed, 12);
	} else if (k < 85) {	/* huge, whole windows */
		base = 0x200000000000ull +
		       rng_below(seed, 64 * GiB / (64 * KiB)) * 64 * KiB;
		if (rng_below(seed, 2))
			base &= ~(4 * GiB - 1);
		size = (1 + rng_below(seed, 12 * GiB / MiB)) * MiB;
	} else if (k < 95) {	/* 57-bit area, crossing 2^48 */
		base = (1ull << 48) - 8 * MiB + rng_below(seed, 16 * MiB);
		if (rng_below(seed, 3) == 0)
			base += (1ull << 56);
		size = 1 + rng_below(seed, 3 * MiB);
	} else {		/* the top of the 57-bit space */
		size = 1 + rng_below(seed, 6 * GiB);
		base = (1ull << 57) - size - rng_below(seed, 2) *
		       rng_below(seed, 2 * GiB);
	}
	*base_p = base;
	*size_p = size;
}

static uint64_t rand_ptr(uint64_t *seed)
{
	if (model_n && rng_below(seed, 4)) {
		struct mrange *m = &model[rng_below(seed, model_n)];
		uint64_t k = rng_below(seed, 4);

		if (k == 0)
			return m->base - 1 - rng_below(seed, 1024);
		if (k == 1)
			return m->base + m->size + rng_below(seed, 1024);
		return m->base + rng_below(seed, m->size);
	}
	{
		uint64_t b, s;

		rand_range(seed, &b, &s);
		return b + rng_below(seed, s);
	}
}

static void model_check_lookup(uint64_t ptr, uint64_t len)
{
	int i = model_find(ptr);
	struct gh_range r;
	int rc;

	memset(&r, 0, sizeof(r));
	rc = gh_registry_lookup(ptr, len, &r);
	if (i < 0) {
		if (rc != -ENOENT)
			TH_FAIL("lookup %#llx: %d, model: none",
				(unsigned long long)ptr, rc);
		return;
	}
	{
		uint64_t last = ptr + (len ? len - 1 : 0);
		int want = (last >= ptr && last - model[i].base <
			    model[i].size) ? 0 : -ERANGE;

		if (rc != want)
			TH_FAIL("lookup %#llx+%llu: %d, want %d",
				(unsigned long long)ptr,
				(unsigned long long)len, rc, want);
	}
	CHECK_EQ(r.base, model[i].base);
	CHECK_EQ(r.size, model[i].size);
	CHECK_EQ(r.gen, model[i].gen);
	CHECK_EQ(r.buffer_id, model[i].base + model[i].size);
}

static void model_count_cb(const struct gh_range *r, void *arg)
{
	int i = model_find(r->base);

	if (i < 0 || model[i].base != r->base || model[i].gen != r->gen)
		TH_FAIL("remove_overlap callback for unknown %#llx",
			(unsigned long long)r->base);
	(*(int *)arg)++;
}

TEST_TIMEOUT(model_random_200k, 300)
{
	uint64_t seed = 0x5eed5eedull, last_gen = 0;
	int ops = 200000;

	if (getenv("GH_TEST_QUICK"))
		ops = 20000;
	for (int op = 0; op < ops; op++) {
		uint64_t k = rng_below(&seed, 100);

		if (k < 45 && model_n < MODEL_MAX) {
			uint64_t b, s, gen = 0;
			struct gh_range r;
			int rc, want;

			rand_range(&seed, &b, &s);
			want = model_overlaps(b, b + s) ? -EEXIST : 0;
			r = mk(b, s);
			rc = gh_registry_insert(&r, &gen);
			if (rc != want)
				TH_FAIL("op %d insert %#llx+%#llx: %d want %d",
					op, (unsigned long long)b,
					(unsigned long long)s, rc, want);
			if (rc == 0) {
				CHECK(gen > last_gen);
				last_gen = gen;
				model[model_n++] = (struct mrange){ b, s, gen };
			}
		} else if (k < 62) {
			struct gh_range r;
			uint64_t b;
			int i = -1, rc;

			if (model_n && rng_below(&seed, 5)) {
				i = (int)rng_below(&seed, model_n);
				b = model[i].base;
			} else {
				b = rand_ptr(&seed);
				for (int j = 0; j < model_n; j++)
					if (model[j].base == b)
						i = j;
			}
			rc = gh_registry_remove(b, &r);
			if (i < 0) {
				CHECK_EQ(rc, -ENOENT);
			} else {
				CHECK_EQ(rc, 0);
				CHECK_EQ(r.gen, model[i].gen);
				CHECK_EQ(r.size, model[i].size);
				model_del(i);
			}
		} else if (k < 99) {
			uint64_t ptr = rand_ptr(&seed);
			uint64_t len = rng_below(&seed, 4) ? rng_below(&seed, 8192)
				       : rng_next(&seed) >> rng_below(&seed, 64);

			model_check_lookup(ptr, len);
		} else {
			uint64_t a = rand_ptr(&seed);
			uint64_t len = rng_below(&seed, 2) ? rng_below(&seed, MiB)
				       : rng_below(&seed, 16 * GiB);
			uint64_t end = a + len;
			int want = 0, got = 0;
			size_t n;

			if (end < a)
				end = UINT64_MAX;
			for (int i = 0; i < model_n; i++)
				if (len && model[i].base < end &&
				    model[i].base + model[i].size > a)
					want++;
			n = gh_registry_remove_overlap(a, len, model_count_cb,
						       &got);
			CHECK_EQ(n, want);
			CHECK_EQ(got, want);
			for (int i = 0; i < model_n;)
				if (len && model[i].base < end &&
				    model[i].base + model[i].size > a)
					model_del(i);
				else
					i++;
		}
		if (gh_registry_count() != (uint64_t)model_n)
			TH_FAIL("op %d: count %llu, model %d", op,
				(unsigned long long)gh_registry_count(),
				model_n);
		if (gh_registry_bytes() != model_bytes())
			TH_FAIL("op %d: bytes differ", op);
	}
	/* Final sweep: every live range findable at both ends. */
	for (int i = 0; i < model_n; i++) {
		model_check_lookup(model[i].base, 1);
		model_check_lookup(model[i].base + model[i].size - 1, 1);
	}
	printf("  model: %d live at the end, last gen %llu\n", model_n,
	       (unsigned long long)last_gen);
}

/* ------------------------------------------------------------------ */
/* Concurrency: readers check every answer against what writers own.   */

#define CW 2		/* writers */
#define CR 3		/* readers */
#define CELLS 64	/* granules per writer area */
#define AREA(w)	(0x7f0000000000ull + (uint64_t)(w) * 0x100000000ull - \
		 (uint64_t)CELLS * 65536 / 2)	/* straddles a 4 GiB line */
#define HUGE_AREA 0x500000000000ull

static int conc_stop;
static uint64_t conc_reads, conc_found, conc_errors;

/* Fields derived from base/size/nonce so a torn snapshot is detected. */
static struct gh_range conc_mk(uint64_t base, uint64_t size, uint64_t nonce)
{
	struct gh_range r;

	memset(&r, 0, sizeof(r));
	r.base = base;
	r.size = size;
	r.ctx = nonce;
	r.pool = (base ^ nonce) * 0x9e3779b97f4a7c15ull;
	r.buffer_id = (size + nonce) * 0xbf58476d1ce4e5b9ull;
	r.dev = (int32_t)(nonce & 0xff);
	r.kind = (uint16_t)(size & 0x7);
	r.flags = (uint16_t)((base >> 9) & 0xff);
	return r;
}

static int conc_consistent(const struct gh_range *r)
{
	struct gh_range x = conc_mk(r->base, r->size, r->ctx);

	return r->pool == x.pool && r->buffer_id == x.buffer_id && r->dev == x.dev &&
	       r->kind == x.kind && r->flags == x.flags && r->gen != 0;
}

/*
 * Cell layout (one 64 KiB granule per cell, areas of CELLS cells):
 *   [16 KiB, +512)         permanent: must always be found, same gen
 *   odd cells:
 *     [0, 16 KiB)          churn: random small ranges
 *     [32 KiB, next+16 KiB) churn: crosses into the next (even) cell
 *   even cells:
 *     [20 KiB, 64 KiB)     churn: random small ranges
 */
#define PERM_OFF (16 * KiB)
static uint64_t perm_gen[CW][CELLS];

static void *conc_writer(void *arg)
{
	int w = (int)(intptr_t)arg;
	uint64_t seed = 1000 + w, area = AREA(w);
	uint64_t cur[CELLS][2] = { { 0 } };	/* churn bases (0: none) */
	uint64_t hb = 0;
	long iter = 0;

	while (!__atomic_load_n(&conc_stop, __ATOMIC_RELAXED)) {
		int c = (int)rng_below(&seed, CELLS), k = (int)rng_below(&seed, 2);
		uint64_t cell = area + (uint64_t)c * 65536;
		struct gh_range r;

		if (!(c & 1))
			k = 0;
		if (cur[c][k]) {
			if (gh_registry_remove(cur[c][k], &r) != 0 ||
			    !conc_consistent(&r))
				__atomic_fetch_add(&conc_errors, 1,
						   __ATOMIC_RELAXED);
			cur[c][k] = 0;
		} else {
			uint64_t b, s;

			if (k == 0 && (c & 1)) {
				b = cell + rng_below(&seed, 30) * 512;
				s = 1 + rng_below(&seed, cell + 16 * KiB - b);
			} else if (k == 0) {
				b = cell + 20 * KiB + rng_below(&seed, 80) * 512;
				s = 1 + rng_below(&seed, cell + 64 * KiB - b);
			} else {
				b = cell + 32 * KiB + rng_below(&seed, 1024) * 8;
				s = cell + 64 * KiB - b + 1 +
				    rng_below(&seed, 16 * KiB);
			}
			r = conc_mk(b, s, rng_next(&seed));
			if (gh_registry_insert(&r, NULL) != 0)
				__atomic_fetch_add(&conc_errors, 1,
						   __ATOMIC_RELAXED);
			cur[c][k] = b;
		}
		/* Writer 0 also churns whole-window ranges. */
		if (w == 0 && (++iter & 255) == 0) {
			if (hb) {
				gh_registry_remove(hb, NULL);
				hb = 0;
			} else {
				struct gh_range h;

				hb = HUGE_AREA + rng_below(&seed, 4) * 4 * GiB;
				h = conc_mk(hb, 4 * GiB + rng_below(&seed, 3) *
					    GiB, rng_next(&seed));
				if (gh_registry_insert(&h, NULL) != 0)
					__atomic_fetch_add(&conc_errors, 1,
							   __ATOMIC_RELAXED);
			}
		}
	}
	return NULL;
}

/*
 * A lookup of a pointer in the churn: a miss, or a consistent snapshot of
 * a range that covers it and starts in [lo, hi).
 */
static void conc_check_churn(int rc, const struct gh_range *r, uint64_t ptr,
			     uint64_t lo, uint64_t hi, uint64_t *found)
{
	if (rc == 0) {
		(*found)++;
		if (!conc_consistent(r) || ptr - r->base >= r->size ||
		    r->base < lo || r->base >= hi)
			__atomic_fetch_add(&conc_errors, 1, __ATOMIC_RELAXED);
	} else if (rc != -ENOENT) {
		__atomic_fetch_add(&conc_errors, 1, __ATOMIC_RELAXED);
	}
}

/* A reader's totals. */
static void conc_tally(uint64_t reads, uint64_t found)
{
	__atomic_fetch_add(&conc_reads, reads, __ATOMIC_RELAXED);
	__atomic_fetch_add(&conc_found, found, __ATOMIC_RELAXED);
}

static void *conc_reader(void *arg)
{
	uint64_t seed = 77 + (uintptr_t)arg, reads = 0, found = 0;

	while (!__atomic_load_n(&conc_stop, __ATOMIC_RELAXED)) {
		int w = (int)rng_below(&seed, CW), c = (int)rng_below(&seed, CELLS);
		uint64_t cell = AREA(w) + (uint64_t)c * 65536, ptr;
		uint64_t lo = AREA(w), hi = AREA(w) + CELLS * 65536ull + 65536;
		struct gh_range r;
		int rc, perm = 0;

		switch (rng_below(&seed, 4)) {
		case 0:
			ptr = cell + PERM_OFF + rng_below(&seed, 512);
			perm = 1;
			break;
		case 1:
			ptr = HUGE_AREA + rng_below(&seed, 24 * GiB);
			lo = HUGE_AREA;
			hi = HUGE_AREA + 24 * GiB;
			break;
		default:
			ptr = cell + rng_below(&seed, 65536);
			break;
		}
		rc = gh_registry_lookup(ptr, 1, &r);
		reads++;
		if (perm) {
			if (rc != 0 || r.base != cell + PERM_OFF || r.size != 512 ||
			    r.gen != perm_gen[w][c] || !conc_consistent(&r))
				__atomic_fetch_add(&conc_errors, 1,
						   __ATOMIC_RELAXED);
		} else {
			conc_check_churn(rc, &r, ptr, lo, hi, &found);
		}
	}
	conc_tally(reads, found);
	return NULL;
}

/*
 * Run CR readers and CW writers for 2 s (0.3 s with GH_TEST_QUICK), stop
 * them, and check that no reader or writer saw an error and that readers
 * both looked up and found something in the churn.
 */
static void conc_run(void *(*reader)(void *), void *(*writer)(void *),
		     const char *what)
{
	pthread_t wt[CW], rt[CR];
	int ms = getenv("GH_TEST_QUICK") ? 300 : 2000;

	for (int i = 0; i < CR; i++)
		CHECK_EQ(pthread_create(&rt[i], NULL, reader,
					(void *)(intptr_t)i), 0);
	for (int w = 0; w < CW; w++)
		CHECK_EQ(pthread_create(&wt[w], NULL, writer,
					(void *)(intptr_t)w), 0);
	usleep(ms * 1000);
	__atomic_store_n(&conc_stop, 1, __ATOMIC_RELAXED);
	for (int w = 0; w < CW; w++)
		pthread_join(wt[w], NULL);
	for (int i = 0; i < CR; i++)
		pthread_join(rt[i], NULL);
	printf("  %s: %llu lookups, %llu found in churn, %llu errors\n", what,
	       (unsigned long long)conc_reads,
	       (unsigned long long)conc_found,
	       (unsigned long long)conc_errors);
	CHECK_EQ(conc_errors, 0);
	CHECK(conc_reads > 1000);
	CHECK(conc_found > 0);
}

TEST_TIMEOUT(concurrent_readers_writers, 120)
{
	for (int w = 0; w < CW; w++)
		for (int c = 0; c < CELLS; c++) {
			struct gh_range r = conc_mk(AREA(w) + c * 65536ull +
						    PERM_OFF, 512, w * 1000 + c);

			CHECK_EQ(gh_registry_insert(&r, &perm_gen[w][c]), 0);
		}
	conc_run(conc_reader, conc_writer, "concurrent");
	/* Everything permanent is still there and the rest can go. */
	CHECK(gh_registry_count() >= CW * CELLS);
	CHECK(gh_registry_remove_if(NULL, NULL, NULL, NULL) >= CW * CELLS);
	CHECK_EQ(gh_registry_bytes(), 0);
}

/*
 * Concurrency inside granules: per writer SCELLS granules ("cells"), each
 * with permanent buffers that must always be found, and writers churning
 * the items of a cell description (fixed offsets, sizes up to a maximum)
 * in the space between them, while readers check every answer.
 */
#define SCELLS 16
#define SPERM 10	/* permanent buffers per cell, at most */
#define SITEMS 64	/* churned items per cell, at most */

struct cell_churn {
	uint64_t area;		/* cells of writer w: area + w * 1 GiB */
	int items;		/* at most SITEMS */
	/* Item i: its offset in the cell and its size (from seed). */
	void (*item)(int i, uint64_t *off, uint64_t *size, uint64_t *seed);
	int nperm;
	uint64_t perm_off[SPERM], perm_size;
	uint64_t perm_gen[CW][SCELLS][SPERM];
};

static uint64_t cell_at(const struct cell_churn *cc, int w, int c)
{
	return cc->area + (uint64_t)w * 0x40000000ull + (uint64_t)c * 65536;
}

static void cell_writer(const struct cell_churn *cc, int w)
{
	uint64_t seed = 3000 + w + cc->area;
	uint8_t live[SCELLS][SITEMS] = { { 0 } };

	while (!__atomic_load_n(&conc_stop, __ATOMIC_RELAXED)) {
		int c = (int)rng_below(&seed, SCELLS);
		int i = (int)rng_below(&seed, (uint64_t)cc->items);
		uint64_t off, size, b;
		struct gh_range r;

		cc->item(i, &off, &size, &seed);
		b = cell_at(cc, w, c) + off;
		if (live[c][i]) {
			if (gh_registry_remove(b, &r) != 0 ||
			    !conc_consistent(&r))
				__atomic_fetch_add(&conc_errors, 1,
						   __ATOMIC_RELAXED);
			live[c][i] = 0;
			continue;
		}
		r = conc_mk(b, size, rng_next(&seed));
		if (gh_registry_insert(&r, NULL) != 0)
			__atomic_fetch_add(&conc_errors, 1, __ATOMIC_RELAXED);
		live[c][i] = 1;
	}
}

static void cell_reader(const struct cell_churn *cc, int id)
{
	uint64_t seed = 99 + id + cc->area, reads = 0, found = 0;

	while (!__atomic_load_n(&conc_stop, __ATOMIC_RELAXED)) {
		int w = (int)rng_below(&seed, CW), c = (int)rng_below(&seed, SCELLS);
		uint64_t cell = cell_at(cc, w, c), ptr;
		struct gh_range r;
		int rc, k = -1;

		if (rng_below(&seed, 3) == 0) {
			k = (int)rng_below(&seed, (uint64_t)cc->nperm);
			ptr = cell + cc->perm_off[k] +
			      rng_below(&seed, cc->perm_size);
		} else {
			ptr = cell + rng_below(&seed, 65536);
		}
		rc = gh_registry_lookup(ptr, 1, &r);
		reads++;
		if (k >= 0) {
			if (rc != 0 || r.base != cell + cc->perm_off[k] ||
			    r.size != cc->perm_size ||
			    r.gen != cc->perm_gen[w][c][k] ||
			    !conc_consistent(&r))
				__atomic_fetch_add(&conc_errors, 1,
						   __ATOMIC_RELAXED);
		} else {
			conc_check_churn(rc, &r, ptr, cell, cell + 65536,
					 &found);
		}
	}
	conc_tally(reads, found);
}

/* The churn cell_run() runs (each test is a process of its own). */
static struct cell_churn *cell_cur;

static void *cell_writer_thread(void *arg)
{
	cell_writer(cell_cur, (int)(intptr_t)arg);
	return NULL;
}

static void *cell_reader_thread(void *arg)
{
	cell_reader(cell_cur, (int)(intptr_t)arg);
	return NULL;
}

/* Insert the permanent buffers, run, check they all stayed. */
static void cell_run(struct cell_churn *cc, const char *what)
{
	cell_cur = cc;
	for (int w = 0; w < CW; w++)
		for (int c = 0; c < SCELLS; c++)
			for (int k = 0; k < cc->nperm; k++) {
				struct gh_range r = conc_mk(
					cell_at(cc, w, c) + cc->perm_off[k],
					cc->perm_size, w * 100000 + c * 100 + k);

				CHECK_EQ(gh_registry_insert(&r,
						&cc->perm_gen[w][c][k]), 0);
			}
	conc_run(cell_reader_thread, cell_writer_thread, what);
	CHECK(gh_registry_count() >= (uint64_t)(CW * SCELLS * cc->nperm));
}

/*
 * Granules packed with small buffers: 10 permanent ones (every other
 * 512-byte slot), so that the node has a slot index, and writers churning
 * buffers in the slots between them, second buffers sharing a slot (the
 * search), buffers crossing into the next slot and whole pages (page
 * leaves given up and back): each lookup goes through slot leaves, the
 * slot index, the search or page leaves while they change under it.
 */
static void small_item(int i, uint64_t *off, uint64_t *size, uint64_t *seed)
{
	if (i < 10) {			/* alone in odd slot 2i+1 */
		*off = (2 * i + 1) * 512ull;
		*size = 1 + rng_below(seed, 300);
	} else if (i < 15) {		/* shares slot 2(i-10)+1 */
		*off = (2 * (i - 10) + 1) * 512ull + 300;
		*size = 1 + rng_below(seed, 200);
	} else if (i < 24) {		/* crosses into the next slot */
		*off = (2 * (i - 15) + 21) * 512ull;
		*size = 513 + rng_below(seed, 1023 - 512);
	} else {			/* a whole page in the upper half */
		*off = 32 * KiB + (i - 24) * 4096ull;
		*size = 4096;
	}
}

static struct cell_churn small_churn = {
	.area = 0x7e0000000000ull, .items = 32, .item = small_item,
	.nperm = 10, .perm_off = { 0, 1024, 2048, 3072, 4096, 5120, 6144,
				   7168, 8192, 9216 },
	.perm_size = 300,
};

TEST_TIMEOUT(concurrent_small_buffers, 120)
{
	cell_run(&small_churn, "small buffers");
}

/*
 * Concurrency in regions of whole-granule allocations: per writer one
 * 2 MiB region with two permanent ranges (granules 8..11 and 20), and
 * writers churning runs of whole granules around them (some ending or
 * starting right next to them, some with a ragged end that shares a
 * granule), so that granule leaves change from one owner to another,
 * to shared and to empty under the readers.  A permanent range must
 * always be found; anything found must be a consistent snapshot
 * covering the pointer.
 */
#define RAREA(w) (0x7c0000000000ull + (uint64_t)(w) * 0x40000000ull)
static uint64_t rperm_gen[CW][2];

static void *runs_writer(void *arg)
{
	int w = (int)(intptr_t)arg;
	uint64_t seed = 3000 + w, area = RAREA(w);
	/* Churn slots: granule spans [0, 8), [12, 20) and [21, 32). */
	static const uint32_t lo[3] = { 0, 12, 21 }, hi[3] = { 8, 20, 32 };
	uint64_t cur[3] = { 0 };

	while (!__atomic_load_n(&conc_stop, __ATOMIC_RELAXED)) {
		int k = (int)rng_below(&seed, 3);
		struct gh_range r;

		if (cur[k]) {
			if (gh_registry_remove(cur[k], &r) != 0 ||
			    !conc_consistent(&r))
				__atomic_fetch_add(&conc_errors, 1,
						   __ATOMIC_RELAXED);
			cur[k] = 0;
		} else {
			uint32_t g0 = lo[k] + (uint32_t)rng_below(&seed,
							hi[k] - lo[k]);
			uint32_t n = 1 + (uint32_t)rng_below(&seed, hi[k] - g0);
			uint64_t b = area + g0 * 65536ull;
			uint64_t sz = n * 65536ull;

			/* Now and then a ragged end: its last granule shared. */
			if (rng_below(&seed, 4) == 0)
				sz -= 512 * (1 + rng_below(&seed, 100));
			r = conc_mk(b, sz, rng_next(&seed));
			if (gh_registry_insert(&r, NULL) != 0)
				__atomic_fetch_add(&conc_errors, 1,
						   __ATOMIC_RELAXED);
			cur[k] = b;
		}
	}
	return NULL;
}

static void *runs_reader(void *arg)
{
	uint64_t seed = 97 + (uintptr_t)arg, reads = 0, found = 0;

	while (!__atomic_load_n(&conc_stop, __ATOMIC_RELAXED)) {
		int w = (int)rng_below(&seed, CW);
		uint64_t area = RAREA(w);
		uint64_t ptr = area + rng_below(&seed, 2 * MiB);
		uint32_t g = (uint32_t)((ptr - area) >> 16);
		int perm = g >= 8 && g < 12 ? 0 : g == 20 ? 1 : -1;
		struct gh_range r;
		int rc;

		rc = gh_registry_lookup(ptr, 1, &r);
		reads++;
		if (perm >= 0) {
			uint64_t pb = area + (perm ? 20 : 8) * 65536ull;

			if (rc != 0 || r.base != pb ||
			    r.gen != rperm_gen[w][perm] || !conc_consistent(&r))
				__atomic_fetch_add(&conc_errors, 1,
						   __ATOMIC_RELAXED);
		} else {
			conc_check_churn(rc, &r, ptr, area, area + 2 * MiB,
					 &found);
		}
	}
	conc_tally(reads, found);
	return NULL;
}

TEST_TIMEOUT(concurrent_granule_runs, 120)
{
	for (int w = 0; w < CW; w++) {
		struct gh_range a = conc_mk(RAREA(w) + 8 * 65536ull,
					    4 * 65536ull, w * 10 + 1);
		struct gh_range b = conc_mk(RAREA(w) + 20 * 65536ull,
					    65536ull, w * 10 + 2);

		CHECK_EQ(gh_registry_insert(&a, &rperm_gen[w][0]), 0);
		CHECK_EQ(gh_registry_insert(&b, &rperm_gen[w][1]), 0);
	}
	conc_run(runs_reader, runs_writer, "granule runs");
}

/*
 * Granules of page-sized buffers, as cuMemAlloc packs 4 KiB allocations:
 * three permanent pages (0, 5, 10) and writers churning buffers of one or
 * two pages between them, so that lookups read page leaves while the
 * writer changes the granule's node in place; and two buffers that share
 * page 15, which give the page leaves up (the node is copied again, with
 * a slot index) until one of them goes.
 */
static void page_item(int i, uint64_t *off, uint64_t *size, uint64_t *seed)
{
	static const uint32_t page[6] = { 1, 3, 6, 8, 11, 13 };

	if (i < 6) {
		*off = page[i] * 4096ull;
		*size = 4096 * (1 + rng_below(seed, 2));
	} else {
		*off = 15 * 4096ull + (i - 6) * 1024ull;
		*size = 1 + rng_below(seed, 1024 - (i == 6) * 512);
	}
}

static struct cell_churn page_churn = {
	.area = 0x7d0000000000ull, .items = 8, .item = page_item,
	.nperm = 3, .perm_off = { 0, 5 * 4096, 10 * 4096 },
	.perm_size = 4096,
};

TEST_TIMEOUT(concurrent_page_buffers, 120)
{
	cell_run(&page_churn, "page buffers");
}

/*
 * Writers' shards: inserts and removes in regions of different shards, of
 * one shard (one region, one granule, and a region 64 regions away), a
 * range across two regions' shards and one across every shard, while
 * readers check that permanent ranges are always found and churned ones
 * are found whole or not at all.  Generations must stay unique.
 */
#define SAREA 0x7b0000000000ull
#define SREG(i) (SAREA + (uint64_t)(i) * 2 * MiB)
#define SH_ITEMS 7
#define SH_PERM 3
#define SH_GENS 200000

static uint64_t shard_gen[CW][SH_GENS];
static uint64_t shard_ngen[CW];
static uint64_t shard_cur[CW][SH_ITEMS];	/* gen of the live item, or 0 */
static uint64_t shard_perm_gen[CW][SH_PERM];

static void shard_item(int w, int i, uint64_t *base, uint64_t *size)
{
	switch (i) {
	case 0:		/* the writer's own region and shard */
		*base = SREG(1 + w) + 4 * KiB, *size = 4 * KiB;
		break;
	case 1:
		*base = SREG(1 + w) + 64 * KiB + 512, *size = 1000;
		break;
	case 2:		/* one region (shard 10), a granule each */
		*base = SREG(10) + (uint64_t)w * 64 * KiB + 8 * KiB;
		*size = 4 * KiB;
		break;
	case 3:		/* one granule of that region, both writers */
		*base = SREG(10) + 128 * KiB + (uint64_t)w * 8 * KiB;
		*size = 4 * KiB;
		break;
	case 4:		/* shard 10 again, another region */
		*base = SREG(74) + (uint64_t)w * 64 * KiB + 4 * KiB;
		*size = 4 * KiB;
		break;
	case 5:		/* across two regions, so two shards */
		*base = SREG(21 + 2 * w) - 32 * KiB, *size = 64 * KiB;
		break;
	default:	/* across 66 regions: every shard */
		*base = SREG(200 + 80 * w) + 4 * KiB, *size = 65 * 2 * MiB;
		break;
	}
}

static void shard_perm(int w, int j, uint64_t *base, uint64_t *size)
{
	*size = 4 * KiB;
	*base = j == 0 ? SREG(1 + w) :
		j == 1 ? SREG(10) + 128 * KiB + 32 * KiB + (uint64_t)w * 4 * KiB :
		SREG(21 + 2 * w) + 64 * KiB;
}

static void shard_err(void)
{
	__atomic_fetch_add(&conc_errors, 1, __ATOMIC_RELAXED);
}

static void *shard_writer(void *arg)
{
	int w = (int)(intptr_t)arg;
	uint64_t seed = 4242 + w, last = 0, iter = 0;

	while (!__atomic_load_n(&conc_stop, __ATOMIC_RELAXED)) {
		int i = (int)rng_below(&seed, SH_ITEMS);
		uint64_t b, sz, gen;
		struct gh_range r;

		shard_item(w, i, &b, &sz);
		if (shard_cur[w][i]) {
			if (gh_registry_remove(b, &r) != 0 || r.base != b ||
			    r.size != sz || r.gen != shard_cur[w][i] ||
			    !conc_consistent(&r))
				shard_err();
			shard_cur[w][i] = 0;
		} else {
			r = conc_mk(b, sz, rng_next(&seed));
			if (gh_registry_insert(&r, &gen) != 0 || gen <= last)
				shard_err();
			last = gen;
			shard_cur[w][i] = gen;
			if (shard_ngen[w] < SH_GENS)
				shard_gen[w][shard_ngen[w]++] = gen;
		}
		if ((++iter & 63) == 0) {
			/* Overlaps: one shard, and across two shards. */
			r = conc_mk(SREG(21 + 2 * w) + 60 * KiB, 8 * KiB, 1);
			if (gh_registry_insert(&r, NULL) != -EEXIST)
				shard_err();
			r = conc_mk(SREG(2) - 4 * KiB, 8 * KiB, 2);
			if (gh_registry_insert(&r, NULL) != -EEXIST)
				shard_err();
		}
	}
	return NULL;
}

static void *shard_reader(void *arg)
{
	uint64_t seed = 99 + (uintptr_t)arg, reads = 0, found = 0;

	while (!__atomic_load_n(&conc_stop, __ATOMIC_RELAXED)) {
		int w = (int)rng_below(&seed, CW);
		int i = (int)rng_below(&seed, SH_ITEMS + SH_PERM);
		uint64_t b, sz, ptr;
		struct gh_range r;
		int rc;

		if (i < SH_ITEMS)
			shard_item(w, i, &b, &sz);
		else
			shard_perm(w, i - SH_ITEMS, &b, &sz);
		ptr = b + rng_below(&seed, sz);
		rc = gh_registry_lookup(ptr, 1, &r);
		reads++;
		if (i >= SH_ITEMS) {
			if (rc != 0 || r.base != b || r.size != sz ||
			    r.gen != shard_perm_gen[w][i - SH_ITEMS] ||
			    !conc_consistent(&r))
				shard_err();
		} else if (rc == 0) {
			found++;
			if (r.base != b || r.size != sz || !conc_consistent(&r))
				shard_err();
		} else if (rc != -ENOENT) {
			shard_err();
		}
	}
	conc_tally(reads, found);
	return NULL;
}

TEST_TIMEOUT(concurrent_shards, 120)
{
	uint64_t n = 0, bytes = 0, count, *all;

	for (int w = 0; w < CW; w++)
		for (int j = 0; j < SH_PERM; j++) {
			uint64_t b, sz;
			struct gh_range r;

			shard_perm(w, j, &b, &sz);
			r = conc_mk(b, sz, 7 + j);
			CHECK_EQ(gh_registry_insert(&r, &shard_perm_gen[w][j]), 0);
			n++;
			bytes += sz;
		}
	conc_run(shard_reader, shard_writer, "shards");
	/* Nothing lost: every live item is found whole, with its gen. */
	for (int w = 0; w < CW; w++)
		for (int i = 0; i < SH_ITEMS; i++) {
			uint64_t b, sz;
			struct gh_range r;

			if (!shard_cur[w][i])
				continue;
			shard_item(w, i, &b, &sz);
			CHECK_EQ(gh_registry_lookup(b + sz - 1, 1, &r), 0);
			CHECK(r.base == b && r.size == sz &&
			      r.gen == shard_cur[w][i]);
			n++;
			bytes += sz;
		}
	CHECK_EQ(gh_registry_count(), n);
	CHECK_EQ(gh_registry_bytes(), bytes);
	CHECK(gh_registry_peak_bytes() >= bytes);
	/* Generations unique across writers. */
	count = shard_ngen[0] + shard_ngen[1];
	all = malloc(count * sizeof(*all));
	CHECK(all != NULL);
	memcpy(all, shard_gen[0], shard_ngen[0] * sizeof(*all));
	memcpy(all + shard_ngen[0], shard_gen[1], shard_ngen[1] * sizeof(*all));
	qsort(all, count, sizeof(*all), cmp_u64);
	for (uint64_t k = 1; k < count; k++)
		CHECK(all[k] != all[k - 1]);
	free(all);
	gh_registry_reset();
	CHECK_EQ(gh_registry_count(), 0);
}

TEST_MAIN()
