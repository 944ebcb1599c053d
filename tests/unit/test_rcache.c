// SPDX-License-Identifier: MIT
/*
 * Registration cache (src/rcache/rcache_api.h) against a mock pin backend and the
 * real registry: hits and misses, no duplicates, references, access
 * upgrades, PD separation, the remote-access exposure rule, invalidation
 * on free / context destroy / unmap (through the registry's free sequence,
 * src/registry/frees.c, which the cache listens to: the hooks layer is not
 * linked), LRU limits, ENOMEM retry, and a randomized stress of
 * free/realloc-at-the-same-address cycles.
 */
#include <pthread.h>
#include <stdint.h>
#include <infiniband/verbs.h>

#include "harness.h"
#include "rcache/rcache.h"

/* ------------------------------------------------------------ mock NIC */

#define MOCK_MAX	(1 << 16)
#define MiB		(1ULL << 20)
#define LW		IBV_ACCESS_LOCAL_WRITE
#define RW		IBV_ACCESS_REMOTE_WRITE
#define RR		IBV_ACCESS_REMOTE_READ

struct mock_mr {
	struct ibv_mr mr;
	int live;
	uint64_t gen, base, size;
	unsigned int access;
	int next_free;
	uint64_t serial;	/* tells a reused slot from its last user */
};

static struct mock {
	struct mock_mr mr[MOCK_MAX];
	int hi, free_head;	/* free_head: index + 1 */
	long live_mrs, regs, deregs, pins, unpins, live_pins;
	int fail_pin_n, fail_pin_rc, fail_reg_n, fail_reg_rc;
	uint64_t last_pin_base, last_pin_size, serial;
	pthread_mutex_t lock;
} mk = { .lock = PTHREAD_MUTEX_INITIALIZER };

static int mock_pin(struct gh_pin *p)
{
	if (mk.fail_pin_n) {
		mk.fail_pin_n--;
		return mk.fail_pin_rc;
	}
	p->pin_base = p->base & ~(GH_PIN_ALIGN - 1);
	p->pin_size = ((p->base + p->size + GH_PIN_ALIGN - 1) &
		       ~(GH_PIN_ALIGN - 1)) - p->pin_base;
	p->fd = 7;
	mk.last_pin_base = p->pin_base;
	mk.last_pin_size = p->pin_size;
	mk.pins++;
	mk.live_pins++;
	return 0;
}

static void mock_unpin(struct gh_pin *p)
{
	mk.unpins++;
	mk.live_pins--;
}

static struct mock_mr *mock_new(void)
{
	int i;

	pthread_mutex_lock(&mk.lock);
	if (mk.free_head) {
		i = mk.free_head - 1;
		mk.free_head = mk.mr[i].next_free;
	} else {
		i = mk.hi++;
		if (i >= MOCK_MAX)
			TH_FAIL("mock: out of MRs");
	}
	pthread_mutex_unlock(&mk.lock);
	memset(&mk.mr[i], 0, sizeof(mk.mr[i]));
	mk.mr[i].serial = __atomic_add_fetch(&mk.serial, 1, __ATOMIC_RELAXED);
	mk.mr[i].mr.lkey = (uint32_t)i;
	mk.mr[i].mr.rkey = (uint32_t)i | 0x80000000u;
	mk.mr[i].mr.handle = (uint32_t)i;
	mk.mr[i].live = 1;
	return &mk.mr[i];
}

static int mock_reg(const struct gh_pin *p, struct ibv_pd *pd, uint64_t addr,
		    uint64_t len, unsigned int access, struct ibv_mr **mr_p)
{
	struct mock_mr *m;

	if (mk.fail_reg_n) {
		mk.fail_reg_n--;
		return mk.fail_reg_rc;
	}
	m = mock_new();
	m->mr.pd = pd;
	m->mr.context = pd->context;
	m->mr.addr = (void *)(uintptr_t)addr;
	m->mr.length = len;
	m->gen = p->gen;
	m->base = addr;
	m->size = len;
	m->access = access;
	__atomic_add_fetch(&mk.regs, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&mk.live_mrs, 1, __ATOMIC_RELAXED);
	*mr_p = &m->mr;
	return 0;
}

static int mock_dereg(struct ibv_mr *mr)
{
	struct mock_mr *m = (struct mock_mr *)mr;
	int i = (int)(m - mk.mr);

	if (i < 0 || i >= mk.hi || !m->live)
		TH_FAIL("mock: dereg of a dead or foreign MR %p", (void *)mr);
	m->live = 0;
	__atomic_add_fetch(&mk.deregs, 1, __ATOMIC_RELAXED);
	__atomic_sub_fetch(&mk.live_mrs, 1, __ATOMIC_RELAXED);
	pthread_mutex_lock(&mk.lock);
	m->next_free = mk.free_head;
	mk.free_head = i + 1;
	pthread_mutex_unlock(&mk.lock);
	return 0;
}

static const struct gh_pin_ops mock_ops = {
	.name = "mock",
	.pin = mock_pin,
	.unpin = mock_unpin,
	.reg = mock_reg,
	.dereg = mock_dereg,
};

/* The mock MR behind an alias (by lkey). */
static struct mock_mr *backing(const struct ibv_mr *alias)
{
	CHECK(alias->lkey < (uint32_t)mk.hi);
	return &mk.mr[alias->lkey];
}

/* ------------------------------------------------------------- helpers */

static struct ibv_context ctx1, ctx2;
static struct ibv_pd pd1 = { .context = &ctx1 }, pd2 = { .context = &ctx1 },
		     pd3 = { .context = &ctx2 };

static void setup_flags(uint64_t max_size, uint64_t max_count,
			unsigned int flags)
{
	CHECK_EQ(gh_registry_init(), 0);
	CHECK_EQ(gh_rcache_init(&mock_ops, max_size, max_count, flags), 0);
}

/* GDRHOOK_REMOTE_EXPOSURE=allocation */
static void setup(uint64_t max_size, uint64_t max_count)
{
	setup_flags(max_size, max_count, 0);
}

static struct gh_range alloc_kind(uint64_t base, uint64_t size,
				  unsigned int kind, uint64_t ctx)
{
	struct gh_range r = { .base = base, .size = size, .kind = (uint16_t)kind,
			      .ctx = ctx, .dev = 0 };
	uint64_t gen;

	if (kind == GDRHOOK_KIND_POOL)
		r.flags = GH_RANGE_VOLATILE;
	CHECK_EQ(gh_registry_insert(&r, &gen), 0);
	r.gen = gen;
	return r;
}

static struct gh_range alloc_dev(uint64_t base, uint64_t size)
{
	return alloc_kind(base, size, GDRHOOK_KIND_DEVICE, 0x1c0);
}

/* The free sequence the hooks run before a real free (frees.h). */
static void free_dev(uint64_t base)
{
	struct gh_range gone;

	CHECK_EQ(gh_frees_remove(base, &gone, "cuMemFree_v2"), 0);
}

static int match_ctx(const struct gh_range *r, void *arg)
{
	return r->ctx == *(uint64_t *)arg;
}

/* A context destroyed: its ranges go (the implicit frees). */
static size_t drop_ctx(uint64_t ctx)
{
	return gh_frees_remove_matching(match_ctx, &ctx, "cuCtxDestroy_v2",
					NULL, NULL);
}

struct span {
	uint64_t lo, hi;
};

static int match_overlap(const struct gh_range *r, void *arg)
{
	const struct span *o = arg;

	return r->base < o->hi && o->lo < r->base + r->size;
}

/* A VMM range unmapped: what overlaps it goes. */
static size_t drop_range(uint64_t lo, uint64_t size)
{
	struct span o = { lo, lo + size };

	return gh_frees_remove_matching(match_overlap, &o, "cuMemUnmap",
					NULL, NULL);
}

static struct ibv_mr *reg(const struct gh_range *r, struct ibv_pd *pd,
			  uint64_t off, uint64_t len, unsigned int access,
			  int *hit_p)
{
	struct ibv_mr *mr = NULL;
	int hit = -1;

	CHECK_EQ(gh_rcache_reg(r, pd, r->base + off, len, access, &mr, &hit), 0);
	CHECK(mr != NULL);
	CHECK(gh_rcache_is_alias(mr));
	if (hit_p)
		*hit_p = hit;
	return mr;
}

static struct gh_rc_counters ctrs(void)
{
	struct gh_rc_counters c;

	gh_rcache_counters(&c);
	return c;
}

#define A1 0x7f0000000000ULL	/* 64 KiB-aligned test addresses */

/* What the verbs wrapper does: the GPU allocations [addr, addr + len)
 * touches now, then the wrap against them. */
static int snap_gpu(const struct gh_range *g, void *arg)
{
	struct { unsigned int n; struct gh_range r[64]; } *sn = arg;

	if (g->kind != GDRHOOK_KIND_HOST &&
	    g->kind != GDRHOOK_KIND_HOST_REGISTERED && sn->n < 64)
		sn->r[sn->n++] = *g;
	return 0;
}

static int wrap_now(struct ibv_mr *real, uint64_t addr, uint64_t len,
		    unsigned int access, struct ibv_mr **alias_p)
{
	struct { unsigned int n; struct gh_range r[64]; } sn = { 0 };

	gh_registry_overlaps(addr, len ? len : 1, snap_gpu, &sn);
	return gh_rcache_wrap(real, sn.r, sn.n, addr, len, access, 0,
			      alias_p);
}

/* --------------------------------------------------------------- cases */

TEST(hit_and_miss)
{
	struct gh_range r;
	struct ibv_mr *a, *b;
	int hit;

	setup(0, 0);
	r = alloc_dev(A1, MiB);
	a = reg(&r, &pd1, 4096, 8192, LW, &hit);
	CHECK_EQ(hit, 0);
	CHECK_EQ(mk.regs, 1);
	CHECK_EQ(mk.pins, 1);
	b = reg(&r, &pd1, 65536, 100, LW, &hit);
	CHECK_EQ(hit, 1);
	CHECK_EQ(mk.regs, 1);	/* no NIC call on a hit */
	CHECK_EQ(a->lkey, b->lkey);
	CHECK_EQ(a->rkey, b->rkey);
	CHECK(a != b);		/* per-registration MR objects */
	CHECK_EQ((uintptr_t)a->addr, A1 + 4096);
	CHECK_EQ(a->length, 8192);
	CHECK_EQ((uintptr_t)b->addr, A1 + 65536);
	CHECK_EQ(b->length, 100);
	CHECK(a->pd == &pd1 && a->context == &ctx1);
	CHECK_EQ(ctrs().hits, 1);
	CHECK_EQ(ctrs().misses, 1);
	CHECK_EQ(ctrs().aliases, 2);
}

TEST(no_duplicates)
{
	struct gh_range r;
	struct ibv_mr *m[100];

	setup(0, 0);
	r = alloc_dev(A1, 4 * MiB);
	for (int i = 0; i < 100; i++)
		m[i] = reg(&r, &pd1, (uint64_t)i * 4096, 4096, LW, NULL);
	CHECK_EQ(mk.regs, 1);
	CHECK_EQ(mk.pins, 1);
	CHECK_EQ(mk.live_mrs, 1);
	CHECK_EQ(ctrs().entries, 1);
	for (int i = 0; i < 100; i++)
		CHECK_EQ(gh_rcache_dereg(m[i]), 0);
	CHECK_EQ(mk.live_mrs, 1);
}

TEST(refcounts_and_lazy_dereg)
{
	struct gh_range r;
	struct ibv_mr *a, *b;
	int hit;

	setup(0, 0);
	r = alloc_dev(A1, MiB);
	a = reg(&r, &pd1, 0, 4096, LW, NULL);
	b = reg(&r, &pd1, 0, 4096, LW, NULL);
	CHECK_EQ(gh_rcache_dereg(a), 0);
	CHECK_EQ(gh_rcache_dereg(a), -EINVAL);	/* double dereg */
	CHECK_EQ(gh_rcache_dereg(b), 0);
	CHECK_EQ(ctrs().aliases, 0);
	/* Lazy: still registered and pinned, next use is a hit. */
	CHECK_EQ(mk.live_mrs, 1);
	CHECK_EQ(mk.live_pins, 1);
	CHECK_EQ(mk.deregs, 0);
	a = reg(&r, &pd1, 0, 4096, LW, &hit);
	CHECK_EQ(hit, 1);
	CHECK_EQ(gh_rcache_dereg(a), 0);
	/* Not ours: refused. */
	CHECK_EQ(gh_rcache_is_alias(&mk.mr[0].mr), 0);
	CHECK_EQ(gh_rcache_dereg(&mk.mr[0].mr), -EINVAL);
}

TEST(access_upgrade)
{
	struct gh_range r;
	struct ibv_mr *a, *b, *c;
	int hit;

	setup(0, 0);
	r = alloc_dev(A1, MiB);
	a = reg(&r, &pd1, 0, 4096, LW, NULL);
	CHECK_EQ(backing(a)->access, LW);
	b = reg(&r, &pd1, 0, 4096, LW | RW, &hit);
	CHECK_EQ(hit, 0);
	CHECK_EQ(mk.regs, 2);
	CHECK_EQ(backing(b)->access, LW | RW);
	CHECK_EQ(mk.pins, 1);	/* same pin, new registration */
	CHECK_EQ(ctrs().upgrades, 1);
	/* The old one is still held: it stays until its last dereg. */
	CHECK_EQ(mk.live_mrs, 2);
	CHECK(backing(a)->live);
	c = reg(&r, &pd1, 8192, 4096, LW, &hit);
	CHECK_EQ(hit, 1);
	CHECK_EQ(c->lkey, b->lkey);	/* the superset serves it */
	CHECK_EQ(gh_rcache_dereg(a), 0);
	CHECK_EQ(mk.live_mrs, 1);	/* retired one gone now */
	CHECK_EQ(gh_rcache_dereg(b), 0);
	CHECK_EQ(gh_rcache_dereg(c), 0);
	CHECK_EQ(mk.live_mrs, 1);
	CHECK_EQ(ctrs().entries, 1);
	/* Upgrade while idle: the old one goes at once. */
	a = reg(&r, &pd1, 0, 4096, LW | RW | RR, &hit);
	CHECK_EQ(hit, 0);
	CHECK_EQ(mk.live_mrs, 1);
	CHECK_EQ(backing(a)->access, LW | RW | RR);
	/* Relaxed ordering is part of the key, not merged. */
	b = reg(&r, &pd1, 0, 4096, LW | IBV_ACCESS_RELAXED_ORDERING, &hit);
	CHECK_EQ(hit, 0);
	CHECK_EQ(mk.live_mrs, 2);
}

TEST(pd_separation)
{
	struct gh_range r;
	struct ibv_mr *a, *b, *c;
	int hit;

	setup(0, 0);
	r = alloc_dev(A1, MiB);
	a = reg(&r, &pd1, 0, 4096, LW | RW, NULL);
	b = reg(&r, &pd2, 0, 4096, LW | RW, &hit);
	CHECK_EQ(hit, 0);
	c = reg(&r, &pd3, 0, 4096, LW, &hit);
	CHECK_EQ(hit, 0);
	CHECK_EQ(mk.regs, 3);
	CHECK_EQ(mk.pins, 1);	/* one pin serves every PD */
	CHECK(backing(a)->mr.pd == &pd1);
	CHECK(backing(b)->mr.pd == &pd2);
	CHECK(backing(c)->mr.pd == &pd3);
	CHECK(a->lkey != b->lkey && b->lkey != c->lkey);
	CHECK(b->pd == &pd2 && c->context == &ctx2);
	/* Dealloc of pd2 drops its idle registration only. */
	CHECK_EQ(gh_rcache_dereg(b), 0);
	gh_rcache_drop_pd(&pd2);
	CHECK_EQ(mk.live_mrs, 2);
	CHECK(backing(a)->live && backing(c)->live);
	/* Closing ctx2's device revokes c even though it is held. */
	gh_rcache_drop_context(&ctx2);
	CHECK_EQ(mk.live_mrs, 1);
	CHECK_EQ(gh_rcache_dereg(c), 0);
}

TEST(remote_access_exposure)
{
	struct gh_range r, n;
	struct ibv_mr *a, *mr = NULL;
	int hit;

	setup(0, 0);
	/* Not 64 KiB aligned, odd size, with a neighbour right after it. */
	r = alloc_dev(A1 + 4096, 100000);
	n = alloc_dev(A1 + 4096 + 100000, 4096);
	a = reg(&r, &pd1, 512, 1024, LW | RW | RR, NULL);
	/* The pin is rounded to 64 KiB; the MR is exactly the allocation. */
	CHECK_EQ(mk.last_pin_base, A1);
	CHECK_EQ(mk.last_pin_size, 2 * 65536);
	CHECK_EQ(backing(a)->base, A1 + 4096);
	CHECK_EQ(backing(a)->size, 100000);
	CHECK(backing(a)->mr.pd == &pd1);
	/* The program's view is what it asked for. */
	CHECK_EQ((uintptr_t)a->addr, A1 + 4096 + 512);
	CHECK_EQ(a->length, 1024);
	/* Past the end of the allocation: never from the cache. */
	CHECK_EQ(gh_rcache_reg(&r, &pd1, A1 + 4096 + 99000, 2000, LW | RW,
			       &mr, &hit), -EINVAL);
	CHECK_EQ(gh_rcache_reg(&r, &pd1, A1, 16, LW | RW, &mr, &hit), -EINVAL);
	/* Another PD never gets this rkey. */
	mr = reg(&r, &pd2, 512, 1024, LW | RW | RR, &hit);
	CHECK_EQ(hit, 0);
	CHECK(mr->rkey != a->rkey);
	/* Odd flags are not cached (ZERO_BASED, ON_DEMAND, MW_BIND). */
	CHECK_EQ(gh_rcache_reg(&r, &pd1, r.base, 16,
			       LW | IBV_ACCESS_ZERO_BASED, &mr, &hit), -ENOTSUP);
	CHECK_EQ(gh_rcache_reg(&r, &pd1, r.base, 16,
			       LW | IBV_ACCESS_ON_DEMAND, &mr, &hit), -ENOTSUP);
	(void)n;
}

TEST(kinds_not_cached)
{
	struct gh_range p, h, m;
	struct ibv_mr *mr = NULL;
	int hit;

	setup(0, 0);
	p = alloc_kind(A1, MiB, GDRHOOK_KIND_POOL, 1);
	h = alloc_kind(A1 + 4 * MiB, MiB, GDRHOOK_KIND_HOST, 1);
	m = alloc_kind(A1 + 8 * MiB, MiB, GDRHOOK_KIND_MANAGED, 1);
	CHECK_EQ(gh_rcache_reg(&p, &pd1, p.base, 16, LW, &mr, &hit), -ENOTSUP);
	CHECK_EQ(gh_rcache_reg(&h, &pd1, h.base, 16, LW, &mr, &hit), -ENOTSUP);
	CHECK_EQ(gh_rcache_reg(&m, &pd1, m.base, 16, LW, &mr, &hit), -ENOTSUP);
	CHECK_EQ(mk.pins, 0);
	/* VMM and IPC mappings are. */
	p = alloc_kind(A1 + 16 * MiB, 2 * MiB, GDRHOOK_KIND_VMM, 0);
	reg(&p, &pd1, 0, 16, LW, NULL);
	p = alloc_kind(A1 + 32 * MiB, 2 * MiB, GDRHOOK_KIND_IPC, 1);
	reg(&p, &pd1, 0, 16, LW, NULL);
	CHECK_EQ(mk.pins, 2);
}

TEST(invalidate_on_free)
{
	struct gh_range r;
	struct ibv_mr *held, *idle, *b;
	struct mock_mr *hm;
	int hit;

	setup(0, 0);
	r = alloc_dev(A1, MiB);
	held = reg(&r, &pd1, 0, 4096, LW, NULL);
	idle = reg(&r, &pd2, 0, 4096, LW, NULL);
	CHECK_EQ(gh_rcache_dereg(idle), 0);
	hm = backing(held);
	free_dev(A1);
	/* Both deregistered for real and unpinned, before the real free. */
	CHECK_EQ(mk.live_mrs, 0);
	CHECK_EQ(mk.live_pins, 0);
	CHECK(!hm->live);
	CHECK_EQ(ctrs().revoked, 1);
	CHECK_EQ(ctrs().stale_averted, 2);
	CHECK_EQ(ctrs().entries, 0);
	CHECK_EQ(ctrs().pinned_bytes, 0);
	/* The program's dereg of the revoked MR: a no-op that succeeds. */
	CHECK_EQ(gh_rcache_dereg(held), 0);
	CHECK_EQ(mk.deregs, 2);
	/* Same address again: a new generation, a miss, new pin. */
	r = alloc_dev(A1, MiB);
	b = reg(&r, &pd1, 0, 4096, LW, &hit);
	CHECK_EQ(hit, 0);
	CHECK_EQ(backing(b)->gen, r.gen);
	CHECK_EQ(mk.pins, 2);
	/* A free of something never registered costs nothing. */
	alloc_dev(A1 + 8 * MiB, MiB);
	free_dev(A1 + 8 * MiB);
	CHECK_EQ(mk.deregs, 2);
}

TEST(invalidate_on_ctx_destroy_and_unmap)
{
	struct gh_range r1, r2, r3;
	struct ibv_mr *a, *b, *d;

	setup(0, 0);
	r1 = alloc_kind(A1, MiB, GDRHOOK_KIND_DEVICE, 0xc1);
	r2 = alloc_kind(A1 + 2 * MiB, MiB, GDRHOOK_KIND_DEVICE, 0xc2);
	r3 = alloc_kind(A1 + 4 * MiB, 2 * MiB, GDRHOOK_KIND_VMM, 0);
	a = reg(&r1, &pd1, 0, 64, LW, NULL);
	b = reg(&r2, &pd1, 0, 64, LW, NULL);
	d = reg(&r3, &pd1, 0, 64, LW, NULL);
	CHECK_EQ(mk.live_mrs, 3);
	CHECK_EQ(drop_ctx(0xc1), 1);		/* drops r1 only */
	CHECK(!backing(a)->live);
	CHECK(backing(b)->live);
	CHECK_EQ(mk.live_mrs, 2);
	CHECK_EQ(drop_range(A1 + 4 * MiB, 2 * MiB), 1);	/* the VMM range */
	CHECK(!backing(d)->live);
	CHECK_EQ(mk.live_mrs, 1);
	CHECK_EQ(mk.live_pins, 1);
	CHECK_EQ(gh_rcache_dereg(a), 0);
	CHECK_EQ(gh_rcache_dereg(d), 0);
	CHECK_EQ(gh_rcache_dereg(b), 0);
	CHECK_EQ(ctrs().revoked, 2);
}

TEST(wrapped_registrations_are_revoked)
{
	struct mock_mr *m;
	struct ibv_mr *al;

	setup(0, 0);
	alloc_kind(A1, MiB, GDRHOOK_KIND_POOL, 1);
	m = mock_new();		/* the program's own registration */
	m->mr.pd = &pd1;
	m->mr.addr = (void *)(uintptr_t)A1;
	m->mr.length = 4096;
	mk.live_mrs++;
	CHECK_EQ(wrap_now(&m->mr, A1, 4096, LW, &al), 0);
	CHECK(al != &m->mr);
	CHECK_EQ(al->lkey, m->mr.lkey);
	CHECK_EQ(gh_rcache_alias_access(al), LW);
	free_dev(A1);
	CHECK(!m->live);
	CHECK_EQ(gh_rcache_dereg(al), 0);
	CHECK_EQ(ctrs().revoked, 1);
	/* Wrapped, not freed: the program's dereg is the real one. */
	alloc_dev(A1, MiB);
	m = mock_new();
	mk.live_mrs++;
	m->mr.pd = &pd1;
	CHECK_EQ(wrap_now(&m->mr, A1, 4096, LW, &al), 0);
	CHECK_EQ(gh_rcache_dereg(al), 0);
	CHECK(!m->live);
	/* A wrap of memory already freed: nothing tracked (-ENOENT). */
	m = mock_new();
	m->mr.pd = &pd1;
	free_dev(A1);
	CHECK_EQ(wrap_now(&m->mr, A1, 4096, LW, &al), -ENOENT);
}

/* A program registration of [addr, addr + len): a mock MR, wrapped. */
static struct ibv_mr *wrap_span(uint64_t addr, uint64_t len,
				struct mock_mr **m_p)
{
	struct mock_mr *m = mock_new();
	struct ibv_mr *al = NULL;

	m->mr.pd = &pd1;
	m->mr.addr = (void *)(uintptr_t)addr;
	m->mr.length = len;
	__atomic_add_fetch(&mk.live_mrs, 1, __ATOMIC_RELAXED);
	CHECK_EQ(wrap_now(&m->mr, addr, len, LW | RW, &al), 0);
	CHECK(al && al != &m->mr);
	*m_p = m;
	return al;
}

/*
 * Seen: two adjacent allocations, a registration of A + 9000 for 4000
 * bytes runs into B.  The free of EITHER must revoke it first; so must
 * the free of the one allocation a registration runs one byte past.
 */
TEST(straddling_registrations_revoked_by_any_free)
{
	struct mock_mr *m;
	struct ibv_mr *al;

	setup(0, 0);
	/* directly adjacent (a sub-allocated granule) */
	alloc_dev(A1, 10000);
	alloc_dev(A1 + 10000, 10000);
	al = wrap_span(A1 + 9000, 4000, &m);
	free_dev(A1);
	CHECK(!m->live);		/* revoked before A's free */
	CHECK_EQ(gh_rcache_dereg(al), 0);
	free_dev(A1 + 10000);
	/* B at A's 64 KiB-rounded end: B's free revokes it */
	alloc_dev(A1, 10000);
	alloc_dev(A1 + 65536, 10000);
	al = wrap_span(A1 + 9000, 65536, &m);
	free_dev(A1 + 65536);
	CHECK(!m->live);
	CHECK_EQ(gh_rcache_dereg(al), 0);
	free_dev(A1);
	/* one byte past the end of one allocation */
	alloc_dev(A1, 10000);
	al = wrap_span(A1 + 5000, 5001, &m);
	free_dev(A1);
	CHECK(!m->live);
	CHECK_EQ(gh_rcache_dereg(al), 0);
	/* covering several: the middle one's free revokes it */
	for (int i = 0; i < 5; i++)
		alloc_dev(A1 + (uint64_t)i * 20000, 10000);
	al = wrap_span(A1, 5 * 20000, &m);
	free_dev(A1 + 2 * 20000);
	CHECK(!m->live);
	CHECK_EQ(gh_rcache_dereg(al), 0);
	for (int i = 0; i < 5; i++)
		if (i != 2)
			free_dev(A1 + (uint64_t)i * 20000);
	/* the program deregisters first: every ring member goes */
	alloc_dev(A1, 10000);
	alloc_dev(A1 + 10000, 10000);
	al = wrap_span(A1 + 9000, 4000, &m);
	CHECK_EQ(gh_rcache_dereg(al), 0);
	CHECK(!m->live);
	free_dev(A1);
	free_dev(A1 + 10000);
	CHECK_EQ(mk.live_mrs, 0);
	CHECK_EQ(ctrs().revoked, 4);
	CHECK_EQ(ctrs().aliases, 0);
	/* host memory and untracked ranges are not wrapped */
	{
		struct mock_mr *h = mock_new();

		h->mr.pd = &pd1;
		CHECK_EQ(wrap_now(&h->mr, A1, 4096, LW, &al), -ENOENT);
		alloc_kind(A1, MiB, GDRHOOK_KIND_HOST, 0);
		CHECK_EQ(wrap_now(&h->mr, A1, 4096, LW, &al), -ENOENT);
	}
}

/*
 * GDRHOOK_REMOTE_EXPOSURE=exact: a remote-access registration is exactly
 * the range asked, shared only by identical requests, and deregistered
 * with the program's last MR on it; the pin stays cached.
 */
TEST(exact_exposure)
{
	struct gh_range r;
	struct ibv_mr *a, *b, *c, *l;
	long pins;
	int hit;

	setup_flags(0, 0, GH_RC_EXPOSE_EXACT);
	r = alloc_dev(A1, 4 * MiB);
	a = reg(&r, &pd1, 4096, 512, LW | RW, &hit);
	CHECK_EQ(hit, 0);
	CHECK_EQ(backing(a)->base, A1 + 4096);
	CHECK_EQ(backing(a)->size, 512);
	CHECK_EQ(backing(a)->access, LW | RW);
	/* an identical request: its own registration too, as natively
	 * (its rkey must not outlive its own ibv_dereg_mr) */
	b = reg(&r, &pd1, 4096, 512, LW | RW, &hit);
	CHECK_EQ(hit, 0);
	CHECK(b->rkey != a->rkey);
	/* another range, or other access: its own registration */
	c = reg(&r, &pd1, 8192, 512, LW | RW, &hit);
	CHECK_EQ(hit, 0);
	CHECK(c->rkey != a->rkey);
	l = reg(&r, &pd1, 4096, 512, LW | RW | RR, &hit);
	CHECK_EQ(hit, 0);
	CHECK(l->rkey != a->rkey);
	CHECK_EQ(gh_rcache_dereg(l), 0);
	/* local only: allocation-wide, cached lazily as before */
	l = reg(&r, &pd1, 100, 10, LW, &hit);
	CHECK_EQ(backing(l)->size, 4 * MiB);
	CHECK(!(backing(l)->access & RW));
	pins = mk.pins;
	CHECK_EQ(mk.live_mrs, 4);
	CHECK_EQ(gh_rcache_dereg(a), 0);
	CHECK_EQ(mk.live_mrs, 3);	/* a's rkey is dead, b's lives */
	CHECK_EQ(gh_rcache_dereg(b), 0);
	CHECK_EQ(mk.live_mrs, 2);
	CHECK_EQ(gh_rcache_dereg(c), 0);
	CHECK_EQ(gh_rcache_dereg(l), 0);
	CHECK_EQ(mk.live_mrs, 1);	/* the local-only one stays cached */
	CHECK_EQ(mk.live_pins, 1);	/* and so does the pin */
	a = reg(&r, &pd1, 4096, 512, LW | RW, &hit);
	CHECK_EQ(hit, 0);
	CHECK_EQ(mk.pins, pins);	/* NIC part only */
	/* the free revokes the held one and unpins */
	free_dev(A1);
	CHECK_EQ(mk.live_mrs, 0);
	CHECK_EQ(mk.live_pins, 0);
	CHECK_EQ(gh_rcache_dereg(a), 0);
}

/* ibv_rereg_mr's core: the MR moves; exact: nothing of the old grant. */
TEST(move_drops_old_grant)
{
	struct gh_range r;
	struct ibv_mr *a, *n;
	uint32_t old;

	setup_flags(0, 0, GH_RC_EXPOSE_EXACT);
	r = alloc_dev(A1, MiB);
	a = reg(&r, &pd1, 4096, 512, LW | RW, NULL);
	old = a->lkey;
	n = reg(&r, &pd1, 4096, 512, LW, NULL);
	gh_rcache_move(a, n);
	CHECK(!mk.mr[old].live);
	CHECK_EQ(gh_rcache_alias_access(a), LW);
	CHECK(!(backing(a)->access & RW));
	/* the new registration failed: the MR holds nothing */
	n = reg(&r, &pd1, 0, 64, LW | RW, NULL);
	old = n->lkey;
	gh_rcache_move(n, NULL);
	CHECK(!mk.mr[old].live);
	CHECK_EQ(gh_rcache_dereg(n), 0);
	CHECK_EQ(gh_rcache_dereg(a), 0);
	free_dev(A1);
	CHECK_EQ(mk.live_mrs, 0);
	CHECK_EQ(ctrs().aliases, 0);
}

TEST(lru_count_limit)
{
	struct gh_range r[6];
	struct ibv_mr *m;
	int hit;

	setup(0, 4);
	for (int i = 0; i < 6; i++)
		r[i] = alloc_dev(A1 + (uint64_t)i * 2 * MiB, MiB);
	for (int i = 0; i < 4; i++)
		CHECK_EQ(gh_rcache_dereg(reg(&r[i], &pd1, 0, 64, LW, NULL)), 0);
	CHECK_EQ(ctrs().entries, 4);
	/* Fifth: one idle entry goes (the clock clears, then evicts r0). */
	CHECK_EQ(gh_rcache_dereg(reg(&r[4], &pd1, 0, 64, LW, NULL)), 0);
	CHECK_EQ(ctrs().entries, 4);
	CHECK_EQ(ctrs().evictions, 1);
	CHECK_EQ(mk.live_mrs, 4);
	CHECK_EQ(mk.live_pins, 4);	/* its pin went with it */
	/* Use r1 now; the next eviction passes it over and takes r2. */
	m = reg(&r[1], &pd1, 0, 64, LW, &hit);
	CHECK_EQ(hit, 1);
	CHECK_EQ(gh_rcache_dereg(m), 0);
	CHECK_EQ(gh_rcache_dereg(reg(&r[5], &pd1, 0, 64, LW, NULL)), 0);
	CHECK_EQ(ctrs().evictions, 2);
	m = reg(&r[1], &pd1, 0, 64, LW, &hit);
	CHECK_EQ(hit, 1);
	CHECK_EQ(gh_rcache_dereg(m), 0);
	m = reg(&r[2], &pd1, 0, 64, LW, &hit);
	CHECK_EQ(hit, 0);
	CHECK_EQ(gh_rcache_dereg(m), 0);
	CHECK(ctrs().entries <= 4);
}

TEST(limits_never_evict_held)
{
	struct gh_range r[3];
	struct ibv_mr *m = NULL;
	int hit;

	setup(0, 2);
	for (int i = 0; i < 3; i++)
		r[i] = alloc_dev(A1 + (uint64_t)i * 2 * MiB, MiB);
	reg(&r[0], &pd1, 0, 64, LW, NULL);
	reg(&r[1], &pd1, 0, 64, LW, NULL);
	CHECK_EQ(gh_rcache_reg(&r[2], &pd1, r[2].base, 64, LW, &m, &hit),
		 -ENOSPC);
	CHECK_EQ(mk.live_mrs, 2);
	CHECK_EQ(ctrs().full, 1);
}

TEST(lru_size_limit)
{
	struct gh_range r[5];

	setup(3 * MiB, 0);
	for (int i = 0; i < 5; i++) {
		r[i] = alloc_dev(A1 + (uint64_t)i * 2 * MiB, MiB);
		CHECK_EQ(gh_rcache_dereg(reg(&r[i], &pd1, 0, 64, LW, NULL)), 0);
		CHECK(ctrs().pinned_bytes <= 3 * MiB);
	}
	CHECK_EQ(ctrs().pinned_bytes, 3 * MiB);
	CHECK_EQ(ctrs().evictions, 2);
	CHECK_EQ(mk.live_pins, 3);
}

TEST(enomem_retry)
{
	struct gh_range r[3];
	int hit;
	struct ibv_mr *m = NULL;

	setup(0, 0);
	for (int i = 0; i < 3; i++)
		r[i] = alloc_dev(A1 + (uint64_t)i * 2 * MiB, MiB);
	CHECK_EQ(gh_rcache_dereg(reg(&r[0], &pd1, 0, 64, LW, NULL)), 0);
	/* The pin fails with ENOMEM once: evict the idle one, retry. */
	mk.fail_pin_n = 1;
	mk.fail_pin_rc = -ENOMEM;
	reg(&r[1], &pd1, 0, 64, LW, NULL);
	CHECK_EQ(ctrs().retries, 1);
	CHECK_EQ(ctrs().evictions, 1);
	CHECK_EQ(mk.live_mrs, 1);
	/* The registration fails with ENOSPC once: nothing idle, no retry. */
	mk.fail_reg_n = 1;
	mk.fail_reg_rc = -ENOSPC;
	CHECK_EQ(gh_rcache_reg(&r[2], &pd1, r[2].base, 64, LW, &m, &hit),
		 -ENOSPC);
	CHECK_EQ(ctrs().retries, 1);
	/* It failed cleanly: no pin left behind, and it works next time. */
	CHECK_EQ(mk.live_pins, 1);
	reg(&r[2], &pd1, 0, 64, LW, NULL);
	/* Other errors are not retried. */
	mk.fail_reg_n = 1;
	mk.fail_reg_rc = -EACCES;
	CHECK_EQ(gh_rcache_reg(&r[0], &pd1, r[0].base, 64, LW, &m, &hit),
		 -EACCES);
}

/* Out of fds (a dmabuf pin holds one): an idle pin goes, then retry;
 * exact exposure's pins without a registration are idle too. */
TEST(emfile_retry_evicts_idle_pins)
{
	struct gh_range r[2];

	setup_flags(0, 0, GH_RC_EXPOSE_EXACT);
	r[0] = alloc_dev(A1, MiB);
	r[1] = alloc_dev(A1 + 2 * MiB, MiB);
	CHECK_EQ(gh_rcache_dereg(reg(&r[0], &pd1, 0, 64, LW | RW, NULL)), 0);
	CHECK_EQ(mk.live_mrs, 0);	/* exact: the NIC part went */
	CHECK_EQ(mk.live_pins, 1);	/* the pin stayed */
	mk.fail_pin_n = 1;
	mk.fail_pin_rc = -EMFILE;
	reg(&r[1], &pd1, 0, 64, LW | RW, NULL);
	CHECK_EQ(ctrs().retries, 1);
	CHECK_EQ(mk.live_pins, 1);	/* r[0]'s went, r[1]'s came */
}

TEST(stale_registration_raced_with_free)
{
	struct gh_range r, old;
	struct ibv_mr *m = NULL;
	int hit;

	setup(0, 0);
	r = alloc_dev(A1, MiB);
	old = r;
	free_dev(A1);
	/* A registration whose registry lookup predates the free. */
	CHECK_EQ(gh_rcache_reg(&old, &pd1, A1, 64, LW, &m, &hit), -ESTALE);
	CHECK_EQ(mk.live_mrs, 0);
	CHECK_EQ(mk.live_pins, 0);
	/* ... and one after a realloc at the same address. */
	r = alloc_dev(A1, MiB);
	CHECK_EQ(gh_rcache_reg(&old, &pd1, A1, 64, LW, &m, &hit), -ESTALE);
	m = reg(&r, &pd1, 0, 64, LW, &hit);
	CHECK_EQ(backing(m)->gen, r.gen);
}

/*
 * 10^6 free/realloc-at-the-same-address cycles over a few addresses, each
 * free through a randomly chosen route of the free sequence (a free call, a
 * context destroy, a VMM-range unmap), with registrations of random
 * sub-ranges in one of two PDs and deregistrations in between.  After
 * every registration the MR must belong to the current generation (no
 * stale hit) and be the only live NIC registration for (generation, PD)
 * (no duplicate); after every free no NIC registration of the old
 * generation may be left.  Sanitizer builds run a tenth of the cycles:
 * they are there for memory and race errors, not volume.
 */
#define ST_SLOTS	8
#define ST_HELD		16
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define ST_CYCLES	100000L
#else
#define ST_CYCLES	1000000L
#endif

struct st_slot {
	struct gh_range r;
	struct ibv_mr *held[ST_HELD];
	int nheld;
};

static int live_for(uint64_t gen, const struct ibv_pd *pd)
{
	int n = 0;

	for (int i = 0; i < mk.hi; i++)
		if (mk.mr[i].live && mk.mr[i].gen == gen &&
		    (!pd || mk.mr[i].mr.pd == pd))
			n++;
	return n;
}

/* Free slot i's allocation through one of the free routes. */
static void st_free(struct st_slot *sl, int i, unsigned int route)
{
	switch (route) {
	case 0:
		free_dev(sl->r.base);
		break;
	case 1:					/* each slot has its own ctx */
		CHECK_EQ(drop_ctx(0x100 + (uint64_t)i), 1);
		break;
	default:
		CHECK_EQ(drop_range(sl->r.base, sl->r.size), 1);
		break;
	}
}

TEST_TIMEOUT(stress_free_realloc_same_address, 240)
{
	static struct st_slot s[ST_SLOTS];
	uint64_t x = 0x9e3779b97f4a7c15ULL, stale = 0, dup = 0, left = 0;
	uint64_t by_route[3] = { 0 };
	struct ibv_pd *pds[2] = { &pd1, &pd2 };
	long regs = 0;

	setup(0, 0);
	for (int i = 0; i < ST_SLOTS; i++)
		s[i].r = alloc_kind(A1 + (uint64_t)i * 4 * MiB, 2 * MiB,
				    GDRHOOK_KIND_DEVICE, 0x100 + (uint64_t)i);
	for (long n = 0; n < ST_CYCLES; n++) {
		int i;
		struct st_slot *sl;
		uint64_t gen;
		unsigned int route, nreg;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		i = (int)(x % ST_SLOTS);
		sl = &s[i];
		route = (unsigned int)(x >> 8) % 3;
		gen = sl->r.gen;
		st_free(sl, i, route);
		by_route[route]++;
		if ((n & 7) == 0 && live_for(gen, NULL))
			left++;
		sl->r = alloc_kind(sl->r.base, 2 * MiB,
				   route == 2 ? GDRHOOK_KIND_VMM :
						GDRHOOK_KIND_DEVICE,
				   0x100 + (uint64_t)i);
		CHECK(sl->r.gen != gen);
		/* 0-3 registrations, then maybe give one back. */
		nreg = (unsigned int)(x >> 16) % 4;
		for (unsigned int k = 0; k < nreg && sl->nheld < ST_HELD; k++) {
			struct ibv_pd *pd = pds[(x >> (20 + k)) & 1];
			uint64_t off = (x >> (24 + k)) % MiB;
			uint64_t len = 1 + (x >> (40 + k)) % MiB;
			struct ibv_mr *m = reg(&sl->r, pd, off, len, LW | RW,
					       NULL);
			struct mock_mr *b = backing(m);

			regs++;
			if (!b->live || b->gen != sl->r.gen || b->mr.pd != pd)
				stale++;
			if ((n & 15) == 0 && live_for(sl->r.gen, pd) != 1)
				dup++;
			sl->held[sl->nheld++] = m;
		}
		if (sl->nheld && ((x >> 60) & 1))
			CHECK_EQ(gh_rcache_dereg(sl->held[--sl->nheld]), 0);
	}
	printf("  stress: %ld free/realloc cycles (free %llu, ctx destroy %llu, unmap %llu), %ld registrations; stale %llu, duplicates %llu, left after free %llu; hits %llu misses %llu revoked %llu\n",
	       ST_CYCLES, (unsigned long long)by_route[0],
	       (unsigned long long)by_route[1],
	       (unsigned long long)by_route[2], regs,
	       (unsigned long long)stale, (unsigned long long)dup,
	       (unsigned long long)left, (unsigned long long)ctrs().hits,
	       (unsigned long long)ctrs().misses,
	       (unsigned long long)ctrs().revoked);
	CHECK_EQ(stale, 0);
	CHECK_EQ(dup, 0);
	CHECK_EQ(left, 0);
	CHECK(ctrs().hits > 0 && ctrs().misses > 0 && ctrs().revoked > 0);
}

/*
 * Random shapes: 10^6 cycles over 8 slots of a 2 MiB arena, each slot an
 * allocation of random offset and size (some adjacent to the next slot's,
 * some sharing 64 KiB granules, some spanning several), freed through a
 * random route; registrations of random offsets and lengths (inside one
 * allocation, straddling two, running past an end, covering several,
 * off tracked memory), in one of 3 PDs, with random access flags; the
 * program's own registrations (what the cache cannot serve) are wrapped;
 * random deregistrations and re-registrations (gh_rcache_move, the core
 * of ibv_rereg_mr).  Every 32 cycles the mock NIC's live registrations
 * are checked: none may reach a freed generation (stale), and none may
 * grant remote access beyond what the exposure policy allows (exact:
 * exactly a live program MR's range, access and PD; allocation: the
 * whole current allocation, in a PD and with access the program asked
 * for in this generation).  Run once per policy.
 */
#define RS_SLOTS	8
#define RS_SLOT		(256 * 1024ULL)
#define RS_HELD		48
#define RS_TOUCH	RS_SLOTS

struct rs_slot {
	struct gh_range r;
	int live;
	unsigned int asked[3];		/* access asked per PD, this gen */
};

struct rs_held {
	struct ibv_mr *al;
	uint64_t addr, len;
	unsigned int access;
	int pd;
	struct mock_mr *own;		/* the program's own (wrapped) */
	uint64_t own_serial;
	int ntouch;
	uint64_t tgen[RS_TOUCH];	/* generations it touched */
};

static struct {
	struct rs_slot s[RS_SLOTS];
	struct rs_held h[RS_HELD];
	int nheld;
	uint64_t x;
	uint64_t stale, outside, regs, wraps, rereg, untracked;
	uint64_t by_route[3];
} rs;

static struct ibv_pd *rs_pds[3] = { &pd1, &pd2, &pd3 };

static uint64_t rs_rand(void)
{
	rs.x ^= rs.x << 13;
	rs.x ^= rs.x >> 7;
	rs.x ^= rs.x << 17;
	return rs.x;
}

static void rs_alloc(int i)
{
	struct rs_slot *sl = &rs.s[i];
	uint64_t off = rs_rand() % 3 ? 0 : (rs_rand() % 64) * 512;
	uint64_t size = 1 + rs_rand() % (RS_SLOT - off);

	if (rs_rand() % 3 == 0)
		size = RS_SLOT - off;	/* adjacent to the next slot */
	sl->r = alloc_kind(A1 + (uint64_t)i * RS_SLOT + off, size,
			   rs_rand() % 4 ? GDRHOOK_KIND_DEVICE :
					   GDRHOOK_KIND_VMM,
			   0x100 + (uint64_t)i);
	sl->live = 1;
	memset(sl->asked, 0, sizeof(sl->asked));
}

static void rs_free(int i)
{
	struct rs_slot *sl = &rs.s[i];
	unsigned int route = (unsigned int)(rs_rand() % 3);

	switch (route) {
	case 0:
		free_dev(sl->r.base);
		break;
	case 1:					/* each slot has its own ctx */
		CHECK_EQ(drop_ctx(0x100 + (uint64_t)i), 1);
		break;
	default:
		CHECK_EQ(drop_range(sl->r.base, sl->r.size), 1);
		break;
	}
	rs.by_route[route]++;
	sl->live = 0;
}

static int rs_slot_of(uint64_t a)
{
	if (a < A1 || a >= A1 + RS_SLOTS * RS_SLOT)
		return -1;
	return (int)((a - A1) / RS_SLOT);
}

static const unsigned int rs_access[] = {
	LW, LW | RW, LW | RR, LW | RW | RR, RR,
	LW | RW | IBV_ACCESS_RELAXED_ORDERING, LW | IBV_ACCESS_ZERO_BASED,
};

/* Register a random shape; fill *h.  0, or -1 when nothing was made. */
static int rs_reg(struct rs_held *h)
{
	int i = (int)(rs_rand() % RS_SLOTS), pd = (int)(rs_rand() % 3), hit;
	uint64_t base = A1 + (uint64_t)i * RS_SLOT, addr, len;
	unsigned int acc = rs_access[rs_rand() % 7];
	struct gh_range g;
	struct ibv_mr *al = NULL;

	if (rs.s[i].live && rs_rand() % 4)
		base = rs.s[i].r.base;
	addr = base + rs_rand() % (RS_SLOT + 8192) - 4096;
	len = rs_rand() % 4 ? 1 + rs_rand() % 8192 :
			      1 + rs_rand() % (3 * RS_SLOT);
	memset(h, 0, sizeof(*h));
	h->addr = addr;
	h->len = len;
	h->access = acc;
	h->pd = pd;
	/* what it touches now, for the stale check */
	for (int k = 0; k < RS_SLOTS; k++) {
		struct gh_range *r = &rs.s[k].r;

		if (rs.s[k].live && r->base < addr + len &&
		    addr < r->base + r->size) {
			h->tgen[h->ntouch++] = r->gen;
			rs.s[k].asked[pd] |= acc & GH_RC_ACCESS_PERM;
		}
	}
	if (!gh_registry_lookup(addr, len, &g) &&
	    !gh_rcache_reg(&g, rs_pds[pd], addr, len, acc, &al, &hit)) {
		h->al = al;
		rs.regs++;
		return 0;
	}
	/* the program's own registration, wrapped */
	h->own = mock_new();
	h->own_serial = h->own->serial;
	h->own->mr.pd = rs_pds[pd];
	h->own->mr.context = rs_pds[pd]->context;
	h->own->mr.addr = (void *)(uintptr_t)addr;
	h->own->mr.length = len;
	h->own->base = addr;
	h->own->size = len;
	h->own->access = acc;
	__atomic_add_fetch(&mk.live_mrs, 1, __ATOMIC_RELAXED);
	if (!wrap_now(&h->own->mr, addr, len, acc, &al)) {
		h->al = al;
		rs.wraps++;
		return 0;
	}
	CHECK_EQ(h->ntouch, 0);		/* only untracked ranges are left */
	rs.untracked++;
	mock_dereg(&h->own->mr);
	return -1;
}

/* Does a live program MR grant what NIC registration m reaches? */
static int rs_allowed(const struct mock_mr *m, int exact)
{
	int i;

	if (!(m->access & GH_RC_ACCESS_REMOTE))
		return 1;
	for (int k = 0; k < rs.nheld; k++) {
		const struct rs_held *h = &rs.h[k];

		if (h->own == m && h->own_serial == m->serial)
			return 1;	/* the program's own registration */
		if (exact && h->al->rkey == m->mr.rkey &&
		    m->mr.pd == rs_pds[h->pd] && h->addr == m->base &&
		    h->len == m->size && h->access == m->access)
			return 1;
	}
	if (exact)
		return 0;
	/* allocation: the whole current allocation, asked access and PD */
	i = rs_slot_of(m->base);
	if (i < 0 || !rs.s[i].live || rs.s[i].r.base != m->base ||
	    rs.s[i].r.size != m->size || rs.s[i].r.gen != m->gen)
		return 0;
	for (int p = 0; p < 3; p++)
		if (m->mr.pd == rs_pds[p])
			return !(m->access & GH_RC_ACCESS_PERM &
				 ~rs.s[i].asked[p]);
	return 0;
}

static void rs_check(int exact)
{
	for (int k = 0; k < mk.hi; k++) {
		struct mock_mr *m = &mk.mr[k];
		struct gh_range g;
		int own = 0;

		if (!m->live)
			continue;
		for (int j = 0; j < rs.nheld; j++) {
			if (rs.h[j].own != m || rs.h[j].own_serial != m->serial)
				continue;
			own = 1;
			for (int t = 0; t < rs.h[j].ntouch; t++) {
				uint64_t gen = rs.h[j].tgen[t];
				int live = 0;

				for (int s2 = 0; s2 < RS_SLOTS; s2++)
					live |= rs.s[s2].live &&
						rs.s[s2].r.gen == gen;
				rs.stale += !live;
			}
		}
		if (!own && (gh_registry_lookup(m->base, m->size, &g) ||
			     g.gen != m->gen))
			rs.stale++;
		rs.outside += !rs_allowed(m, exact);
	}
}

static void rs_run(int exact)
{
	rs.x = 0x2545f4914f6cdd1dULL;
	setup_flags(0, 0, exact ? GH_RC_EXPOSE_EXACT : 0);
	for (int i = 0; i < RS_SLOTS; i++)
		rs_alloc(i);
	for (long n = 0; n < ST_CYCLES; n++) {
		uint64_t op = rs_rand() % 16;
		int i = (int)(rs_rand() % RS_SLOTS);

		if (op < 4) {
			if (rs.s[i].live)
				rs_free(i);
			else
				rs_alloc(i);
		} else if (op < 9 && rs.nheld < RS_HELD) {
			if (!rs_reg(&rs.h[rs.nheld]))
				rs.nheld++;
		} else if (op < 13 && rs.nheld) {
			int k = (int)(rs_rand() % (uint64_t)rs.nheld);

			CHECK_EQ(gh_rcache_dereg(rs.h[k].al), 0);
			rs.h[k] = rs.h[--rs.nheld];
		} else if (rs.nheld && rs.nheld < RS_HELD) {
			/* re-register: the MR moves to a new shape */
			int k = (int)(rs_rand() % (uint64_t)rs.nheld);
			struct rs_held nh;

			if (!rs_reg(&nh)) {
				gh_rcache_move(rs.h[k].al, nh.al);
				nh.al = rs.h[k].al;
				rs.h[k] = nh;
				rs.rereg++;
			}
		}
		if (!(n & 31))
			rs_check(exact);
	}
	rs_check(exact);
	printf("  random shapes (%s): %ld cycles, frees %llu/%llu/%llu (free/ctx/unmap), %llu cached regs, %llu wrapped, %llu untracked, %llu rereg; stale %llu, outside the policy %llu; hits %llu misses %llu revoked %llu\n",
	       exact ? "exact" : "allocation", ST_CYCLES,
	       (unsigned long long)rs.by_route[0],
	       (unsigned long long)rs.by_route[1],
	       (unsigned long long)rs.by_route[2],
	       (unsigned long long)rs.regs, (unsigned long long)rs.wraps,
	       (unsigned long long)rs.untracked,
	       (unsigned long long)rs.rereg, (unsigned long long)rs.stale,
	       (unsigned long long)rs.outside,
	       (unsigned long long)ctrs().hits,
	       (unsigned long long)ctrs().misses,
	       (unsigned long long)ctrs().revoked);
	CHECK_EQ(rs.stale, 0);
	CHECK_EQ(rs.outside, 0);
	CHECK(rs.wraps > 0 && rs.regs > 0 && rs.rereg > 0 &&
	      ctrs().revoked > 0);
}

TEST_TIMEOUT(stress_random_shapes_exact, 600)
{
	rs_run(1);
}

TEST_TIMEOUT(stress_random_shapes_allocation, 600)
{
	rs_run(0);
}

/*
 * Hits from several threads on one allocation while another churns
 * free/realloc/register on others: the lock-free path under contention
 * (and under TSan in make test-tsan).
 */
struct mt_arg {
	struct gh_range r;
	long n, bad;
};

static void *mt_hitter(void *p)
{
	struct mt_arg *a = p;

	for (long i = 0; i < a->n; i++) {
		struct ibv_mr *m = NULL;
		int hit;

		if (gh_rcache_reg(&a->r, &pd1, a->r.base + (uint64_t)(i % 512) * 64,
				  64, LW, &m, &hit) ||
		    mk.mr[m->lkey].gen != a->r.gen ||
		    gh_rcache_dereg(m))
			a->bad++;
	}
	return NULL;
}

TEST(threads_hit_while_others_churn)
{
	struct mt_arg a[4];
	pthread_t t[4];
	struct gh_range r = { 0 }, c;

	setup(0, 0);
	r = alloc_dev(A1, MiB);
	CHECK_EQ(gh_rcache_dereg(reg(&r, &pd1, 0, 64, LW, NULL)), 0);
	for (int i = 0; i < 4; i++) {
		a[i].r = r;
		a[i].n = 50000;
		a[i].bad = 0;
		CHECK_EQ(pthread_create(&t[i], NULL, mt_hitter, &a[i]), 0);
	}
	c = alloc_dev(A1 + 8 * MiB, MiB);
	for (int i = 0; i < 2000; i++) {
		struct ibv_mr *m = reg(&c, i & 1 ? &pd1 : &pd2, 0, 64, LW, NULL);

		if (i % 3 == 0) {
			free_dev(c.base);
			c = alloc_dev(A1 + 8 * MiB, MiB);
		}
		CHECK_EQ(gh_rcache_dereg(m), 0);
	}
	for (int i = 0; i < 4; i++) {
		CHECK_EQ(pthread_join(t[i], NULL), 0);
		CHECK_EQ(a[i].bad, 0);
	}
	CHECK_EQ(live_for(r.gen, &pd1), 1);
}

/*
 * Hits racing on one entry's word stay hits: a reference CAS that loses
 * to another thread's retries instead of falling through to the miss
 * path (which took the entry for an access upgrade: a new NIC
 * registration, and the old one retired).
 */
struct ch_arg {
	struct gh_range r;
	long n, misses, bad;
};

static void *ch_hitter(void *p)
{
	struct ch_arg *a = p;

	for (long i = 0; i < a->n; i++) {
		struct ibv_mr *m = NULL;
		int hit = 0;

		if (gh_rcache_reg(&a->r, &pd1, a->r.base + (uint64_t)(i % 64) * 64,
				  64, LW, &m, &hit) || gh_rcache_dereg(m))
			a->bad++;
		a->misses += !hit;
	}
	return NULL;
}

TEST(contended_hits_stay_hits)
{
	struct ch_arg a[4];
	pthread_t t[4];
	struct gh_range r;
	struct gh_rc_counters c;

	setup(0, 0);
	r = alloc_dev(A1, MiB);
	CHECK_EQ(gh_rcache_dereg(reg(&r, &pd1, 0, 64, LW, NULL)), 0);
	for (int i = 0; i < 4; i++) {
		a[i] = (struct ch_arg){ .r = r, .n = 200000 };
		CHECK_EQ(pthread_create(&t[i], NULL, ch_hitter, &a[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		CHECK_EQ(pthread_join(t[i], NULL), 0);
		CHECK_EQ(a[i].bad, 0);
		CHECK_EQ(a[i].misses, 0);
	}
	c = ctrs();
	CHECK_EQ(c.misses, 1);
	CHECK_EQ(c.regs, 1);
	CHECK_EQ(c.upgrades, 0);
	CHECK_EQ(live_for(r.gen, &pd1), 1);
}

/*
 * MR objects move between threads and threads come and go: an object
 * made on one thread and dropped on another goes to the dropping thread's
 * free slots; a thread that exits keeps its few.  300 short-lived
 * threads (past the 256 per-thread shards) each take 40 MRs, drop the
 * ones a previous thread left, and leave theirs: no object is ever held
 * twice, every one drops once, and nothing is left held.
 */
#define XT_THREADS	300
#define XT_MRS		40
static struct ibv_mr *xt_left[XT_MRS];

struct xt_arg {
	struct gh_range r;
	long bad;
};

static void *xt_thread(void *p)
{
	struct xt_arg *a = p;
	struct ibv_mr *mine[XT_MRS];

	for (int i = 0; i < XT_MRS; i++) {
		int hit = 0;

		mine[i] = NULL;
		if (gh_rcache_reg(&a->r, &pd1, a->r.base + (uint64_t)i * 64, 64,
				  LW, &mine[i], &hit) || !mine[i])
			a->bad++;
		for (int k = 0; k < i; k++)
			a->bad += mine[k] == mine[i];	/* handed out twice */
		for (int k = 0; k < XT_MRS; k++)
			a->bad += xt_left[k] && xt_left[k] == mine[i];
	}
	for (int i = 0; i < XT_MRS; i++) {
		if (xt_left[i] && gh_rcache_dereg(xt_left[i]))
			a->bad++;
		xt_left[i] = mine[i];
	}
	return NULL;
}

TEST(mr_objects_across_threads_that_exit)
{
	struct xt_arg a = { .bad = 0 };
	pthread_t t;

	setup(0, 0);
	a.r = alloc_dev(A1, MiB);
	for (int i = 0; i < XT_THREADS; i++) {
		CHECK_EQ(pthread_create(&t, NULL, xt_thread, &a), 0);
		CHECK_EQ(pthread_join(t, NULL), 0);
	}
	CHECK_EQ(a.bad, 0);
	CHECK_EQ(ctrs().aliases, XT_MRS);
	for (int i = 0; i < XT_MRS; i++) {
		CHECK_EQ(gh_rcache_dereg(xt_left[i]), 0);
		CHECK(gh_rcache_dereg(xt_left[i]) != 0);	/* once only */
	}
	CHECK_EQ(ctrs().aliases, 0);
}

TEST_MAIN()
