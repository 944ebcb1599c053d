// SPDX-License-Identifier: MIT
/*
 * The gdrpin pin backend (src/pin/pin_gdrpin.c) where there is no /dev/gdrpin
 * (CPU machines): it fails cleanly, with the reason (the backend choice
 * falling back to none is tests/unit/test_pin_choose.c's).  And the cache
 * side of revocation (src/rcache/rcache_drop.c: ops->valid on every hit,
 * gh_rcache_revoke) against a mock backend whose pins can be revoked.
 * The real thing runs in the QEMU lab: tests/lab/regcache/run.
 */
#include <stdint.h>
#include <infiniband/verbs.h>

#include "harness.h"
#include "rcache/rcache.h"


TEST(gdrpin_missing_device)
{
	const char *why = NULL;

	gh_gdrpin_dev = "/nonexistent/gdrpin";
	CHECK_EQ(gh_pin_gdrpin_open(&why), -ENOENT);
	CHECK(why && strstr(why, "/nonexistent/gdrpin"));
	/* decided once: asking again gives the same answer */
	CHECK_EQ(gh_pin_gdrpin_open(NULL), -ENOENT);
}

TEST(gdrpin_not_a_gdrpin_device)
{
	const char *why = NULL;
	int rc;

	gh_gdrpin_dev = "/dev/null";
	rc = gh_pin_gdrpin_open(&why);
	CHECK(rc < 0);
	CHECK(why && strstr(why, "GET_VERSION"));
}

TEST(gdrpin_ops_fail_cleanly)
{
	struct gh_pin p = { .base = 0x7f0000010000ULL, .size = 1 << 20,
			    .gen = 5, .fd = -1 };

	gh_gdrpin_dev = "/nonexistent/gdrpin";
	CHECK_EQ(gh_pin_gdrpin.pin(&p), -ENODEV);
	CHECK_EQ(p.cookie, 0);
	CHECK_EQ(p.pin_size, 0);
	gh_pin_gdrpin.unpin(&p);	/* nothing pinned: a no-op */
	CHECK_EQ(gh_pin_gdrpin.valid(0), 0);
	CHECK_EQ(gh_pin_gdrpin.valid(1ULL << 16), 0);
	CHECK(!strcmp(gh_pin_gdrpin.name, "gdrpin"));
}

/* -------------------------------- revocation, against a mock backend */

#define MAXSLOT 64
static uint64_t slot_gen[MAXSLOT];	/* like the status page */
static uint64_t next_gen = 1;
static int pins, unpins, regs, deregs;
static struct ibv_mr mrs[256];

static int m_pin(struct gh_pin *p)
{
	for (uint32_t s = 0; s < MAXSLOT; s++) {
		if (!slot_gen[s]) {
			slot_gen[s] = next_gen++;
			p->cookie = slot_gen[s] << 16 | s;
			p->pin_base = p->base;
			p->pin_size = p->size;
			pins++;
			return 0;
		}
	}
	return -ENOSPC;
}

static void m_unpin(struct gh_pin *p)
{
	uint32_t s = (uint32_t)(p->cookie & 0xffff);

	if (slot_gen[s] == p->cookie >> 16)
		slot_gen[s] = 0;
	unpins++;
}

static int m_valid(uint64_t cookie)
{
	return __atomic_load_n(&slot_gen[cookie & 0xffff], __ATOMIC_ACQUIRE) ==
	       cookie >> 16;
}

static int m_reg(const struct gh_pin *p, struct ibv_pd *pd, uint64_t addr,
		 uint64_t len, unsigned int access, struct ibv_mr **mr_p)
{
	struct ibv_mr *m = &mrs[regs++ % 256];

	m->pd = pd;
	m->lkey = (uint32_t)regs;
	m->rkey = (uint32_t)regs;
	*mr_p = m;
	return 0;
}

static int m_dereg(struct ibv_mr *mr)
{
	deregs++;
	return 0;
}

static const struct gh_pin_ops mock_ops = {
	.name = "mockrev", .pin = m_pin, .unpin = m_unpin, .reg = m_reg,
	.dereg = m_dereg, .valid = m_valid,
};

static struct ibv_context ctx1;
static struct ibv_pd pd1 = { .context = &ctx1 };

static struct gh_range setup_alloc(uint64_t base, uint64_t size)
{
	struct gh_range r = { .base = base, .size = size,
			      .kind = GDRHOOK_KIND_DEVICE, .ctx = 0x1c0 };
	uint64_t gen;

	CHECK_EQ(gh_registry_init(), 0);
	CHECK_EQ(gh_rcache_init(&mock_ops, 0, 0, 0), 0);
	CHECK_EQ(gh_registry_insert(&r, &gen), 0);
	r.gen = gen;
	return r;
}

static struct ibv_mr *reg(const struct gh_range *r, int *hit)
{
	struct ibv_mr *mr = NULL;

	CHECK_EQ(gh_rcache_reg(r, &pd1, r->base, 4096, IBV_ACCESS_LOCAL_WRITE,
			       &mr, hit), 0);
	return mr;
}

/* A pin revoked behind the cache's back: the next hit is a miss. */
TEST(revoked_pin_turns_hit_into_miss)
{
	struct gh_range r = setup_alloc(0x7f0000000000ULL, 1 << 20);
	struct gh_rc_counters c;
	int hit = -1;

	gh_rcache_dereg(reg(&r, &hit));
	CHECK_EQ(hit, 0);
	gh_rcache_dereg(reg(&r, &hit));
	CHECK_EQ(hit, 1);
	slot_gen[0] = 0;	/* the kernel released the slot */
	gh_rcache_dereg(reg(&r, &hit));
	CHECK_EQ(hit, 0);
	CHECK_EQ(pins, 2);
	CHECK_EQ(unpins, 1);
	CHECK_EQ(regs, 2);
	CHECK_EQ(deregs, 1);
	gh_rcache_counters(&c);
	CHECK_EQ(c.pins_revoked, 1);
	CHECK_EQ(c.entries, 1);
	gh_rcache_dereg(reg(&r, &hit));
	CHECK_EQ(hit, 1);
}

/* The helper thread's way: gh_rcache_revoke(gen, cookie). */
TEST(revoke_drops_entries_and_pin)
{
	struct gh_range r = setup_alloc(0x7f0000000000ULL, 1 << 20);
	struct ibv_mr *held;
	struct gh_rc_counters c;
	uint64_t cookie;
	int hit = -1;

	held = reg(&r, &hit);
	CHECK_EQ(hit, 0);
	cookie = slot_gen[0] << 16;
	CHECK_EQ(gh_rcache_revoke(r.gen, cookie + 1), 0);	/* other pin */
	CHECK_EQ(gh_rcache_revoke(r.gen + 1, cookie), 0);	/* other gen */
	CHECK_EQ(gh_rcache_revoke(r.gen, cookie), 1);
	CHECK_EQ(gh_rcache_revoke(r.gen, cookie), 0);		/* gone */
	gh_rcache_counters(&c);
	CHECK_EQ(c.entries, 0);
	CHECK_EQ(c.pinned_bytes, 0);
	CHECK_EQ(c.revoked, 1);		/* the program still held it */
	CHECK_EQ(deregs, 1);
	CHECK_EQ(unpins, 1);
	CHECK_EQ(gh_rcache_dereg(held), 0);	/* a revoked alias: no-op */
	CHECK_EQ(deregs, 1);
	gh_rcache_dereg(reg(&r, &hit));
	CHECK_EQ(hit, 0);
	CHECK_EQ(pins, 2);
}

TEST_MAIN()
