// SPDX-License-Identifier: MIT
/*
 * Exact remote exposure at cache speed: memory windows over one cached
 * registration (src/pin/mwin.c), end to end over the fake NIC (it models
 * windows, queue pairs and a peer's RDMA by rkey, tests/fakeverbs).
 * With GDRHOOK_REMOTE_EXPOSURE=exact (the default) a remote-access
 * registration of tracked GPU memory is a window bound to exactly its
 * range and access on a parent registration with no remote rights; its
 * rkey dies with ibv_dereg_mr, a free invalidates every window before the
 * parent goes, and where the NIC has no windows each MR is a NIC
 * registration of its own, said once.  Each case runs in a fresh process
 * (run_scenario), on the cached backends.
 *
 * Windows only where the provider binds them (src/pin/mwin.h): the fake
 * NIC judges as the provider FAKEVERBS_PROVIDER names (mlx5 by default,
 * rxe, nomw; tests/fakeverbs/fakeverbs_provider.c).  The window cases run
 * on MR parents (peermem) over mlx5 and rxe; the byte-exactness cases on
 * every profile and backend, each with the route that profile allows.
 */
#include <cuda.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "preload_util.h"
#include "fakecuda.h"
#include "fakeverbs.h"
#include "verbs_load.h"

static struct {
	int (*live_mws)(void);
	int (*bound_mws)(void);
	int (*live_qps)(const struct ibv_context *);
	int (*read)(struct ibv_pd *, uint32_t, uint64_t, void *, size_t);
} f;

static unsigned long nic_regs(void)
{
	return v.calls("ibv_reg_mr_iova2") + v.calls("ibv_reg_dmabuf_mr");
}

static void setup(void)
{
	primary_ctx(0);
	verbs_load();
	f.live_mws = need(dlsym(v.h, "fakeverbs_live_mws"), "live_mws");
	f.bound_mws = need(dlsym(v.h, "fakeverbs_bound_mws"), "bound_mws");
	f.live_qps = need(dlsym(v.h, "fakeverbs_live_qps"), "live_qps");
	f.read = need(dlsym(v.h, "fakeverbs_read"), "read");
}

/*
 * One parent registration for the allocation; every remote-access MR a
 * window of exactly its range and access, its own rkey, dead at its
 * ibv_dereg_mr; 2000 of them cost no NIC registration.
 */
static int scenario_exact(void)
{
	struct ibv_pd *pd, *pd2;
	struct ibv_context *vc;
	struct ibv_mr *a, *b, *r;
	unsigned long n0;
	uint32_t ka;
	CUdeviceptr d;
	char buf[8];

	setup();
	vc = v.open();
	pd = v.alloc_pd(vc);
	pd2 = v.alloc_pd(vc);
	d = dev_alloc(4 * MiB);
	n0 = nic_regs();
	a = v.reg(pd, (void *)(d + 4096), 512, LW | RW);
	CHECK(a && !v.is_mr(a));
	CHECK_EQ(nic_regs(), n0 + 1);		/* the parent */
	CHECK_EQ(f.bound_mws(), 1);
	/* exactly the range, the PD, the access */
	CHECK_EQ(v.write(pd, a->rkey, d + 4096, "in", 2), 0);
	CHECK(!memcmp((void *)(d + 4096), "in", 2));
	CHECK_EQ(v.write(pd, a->rkey, d + 4096 + 511, "e", 1), 0);
	CHECK(refused(pd, a->rkey, d + 4096 + 512));
	CHECK(refused(pd, a->rkey, d + 4095));
	CHECK(refused(pd, a->rkey, d));
	CHECK(refused(pd2, a->rkey, d + 4096));
	CHECK(f.read(pd, a->rkey, d + 4096, buf, 1) != 0);	/* no read */
	/* the parent's lkey; no remote right of its own */
	b = v.reg(pd, (void *)(d + 100), 64, LW);
	CHECK(b && b->lkey == a->lkey);
	CHECK(refused(pd, b->rkey, d + 100));
	CHECK_EQ(v.dereg(b), 0);
	/* an identical request: its own window, its own rkey */
	r = v.reg(pd, (void *)(d + 4096), 512, LW | RW);
	CHECK(r && r->rkey != a->rkey);
	ka = a->rkey;
	CHECK_EQ(v.dereg(a), 0);
	CHECK(refused(pd, ka, d + 4096));
	CHECK_EQ(v.write(pd, r->rkey, d + 4096, "ok", 2), 0);
	CHECK_EQ(v.dereg(r), 0);
	/* register per transfer: windows, not NIC registrations */
	for (int i = 0; i < 2000; i++) {
		uint64_t off = (uint64_t)(i % 1000) * 4096;
		struct ibv_mr *m = v.reg(pd, (void *)(d + off), 4096,
					 LW | RW | IBV_ACCESS_REMOTE_READ);

		CHECK(m != NULL);
		CHECK_EQ(v.write(pd, m->rkey, d + off + 4095, "z", 1), 0);
		CHECK_EQ(f.read(pd, m->rkey, d + off, buf, 1), 0);
		CHECK(refused(pd, m->rkey, d + off + 4096));
		CHECK_EQ(v.dereg(m), 0);
	}
	CHECK_EQ(nic_regs(), n0 + 1);
	CHECK_EQ(f.bound_mws(), 0);
	CU_OK(cuMemFree(d));
	CHECK_EQ(v.live(), 0);
	CHECK_EQ(v.calls("stale_writes"), 0);
	return 0;
}

/*
 * An rkey comes back no sooner than natively (an MR key at one index
 * repeats after 256 registrations): 2048 registrations of one range in
 * turn, no key seen twice within 256.
 */
static int scenario_rotation(void)
{
	static uint32_t keys[2048];
	struct ibv_pd *pd;
	CUdeviceptr d;

	setup();
	pd = v.alloc_pd(v.open());
	d = dev_alloc(MiB);
	for (int i = 0; i < 2048; i++) {
		struct ibv_mr *m = v.reg(pd, (void *)d, 4096, LW | RW);

		CHECK(m != NULL);
		keys[i] = m->rkey;
		for (int j = i - 1; j >= 0 && j > i - 256; j--)
			if (keys[j] == keys[i])
				TH_FAIL("rkey %#x again after %d registrations",
					keys[i], i - j);
		CHECK_EQ(v.dereg(m), 0);
		/* a peer holding the old key is refused */
		CHECK(refused(pd, keys[i], d));
	}
	CU_OK(cuMemFree(d));
	return 0;
}

/*
 * The free invalidates every window on the allocation, then the parent
 * is deregistered (it could not go with a window bound), before the real
 * free; a peer keeping an old rkey is refused after the free and after
 * the address is reused.
 */
static int scenario_free(void)
{
	struct gdrhook_stats st = { .size = sizeof(st) };
	struct ibv_pd *pd;
	struct ibv_mr *m[3];
	uint32_t k[3];
	CUdeviceptr d, d2;

	setup();
	pd = v.alloc_pd(v.open());
	d = dev_alloc(2 * MiB);
	for (int i = 0; i < 3; i++) {
		m[i] = v.reg(pd, (void *)(d + (uint64_t)i * 8192), 4096,
			     LW | RW);
		CHECK(m[i] != NULL);
		k[i] = m[i]->rkey;
	}
	CHECK_EQ(f.bound_mws(), 3);
	CU_OK(cuMemFree(d));
	CHECK_EQ(f.bound_mws(), 0);
	CHECK_EQ(v.live(), 0);		/* the parent went too */
	CHECK_EQ(gdrhook_get_stats(&st), 0);
	CHECK_EQ(st.window_binds, 3);
	CHECK_EQ(st.window_invalidations, 3);
	CHECK_EQ(st.window_fallbacks, 0);
	for (int i = 0; i < 3; i++)
		CHECK(refused(pd, k[i], d + (uint64_t)i * 8192));
	d2 = dev_alloc(2 * MiB);
	CHECK_EQ(d2, d);
	for (int i = 0; i < 3; i++) {
		CHECK(refused(pd, k[i], d + (uint64_t)i * 8192));
		CHECK_EQ(v.dereg(m[i]), 0);	/* revoked: a no-op */
	}
	CU_OK(cuMemFree(d2));
	CHECK_EQ(v.calls("stale_writes"), 0);
	CHECK_EQ(v.stale(), 0);
	return 0;
}

/*
 * What the program does to its PD and device gets what it would get
 * natively: ibv_dealloc_pd fails while it holds an MR there, succeeds
 * once it holds none (gdrhook's queue pair and windows went first);
 * ibv_close_device takes everything.  Nothing of ours is left.
 */
static int scenario_teardown(void)
{
	struct ibv_context *vc;
	struct ibv_pd *pd;
	struct ibv_mr *m;
	CUdeviceptr d;

	setup();
	vc = v.open();
	pd = v.alloc_pd(vc);
	d = dev_alloc(MiB);
	m = v.reg(pd, (void *)d, 4096, LW | RW);
	CHECK(m != NULL);
	CHECK(f.live_qps(NULL) >= 1);		/* gdrhook's */
	CHECK(v.dealloc_pd(pd) != 0);		/* the program's MR */
	CHECK_EQ(v.write(pd, m->rkey, d, "ok", 2), 0);
	CHECK_EQ(v.dereg(m), 0);
	CHECK_EQ(v.dealloc_pd(pd), 0);
	CHECK_EQ(f.live_qps(NULL), 0);
	CHECK_EQ(f.live_mws(), 0);
	CHECK_EQ(v.live(), 0);
	/* close_device with a window held: all gone, the held one revoked */
	pd = v.alloc_pd(vc);
	m = v.reg(pd, (void *)d, 4096, LW | RW);
	CHECK(m != NULL);
	CHECK_EQ(v.close_dev(vc), 0);
	CHECK_EQ(f.live_qps(NULL), 0);
	CHECK_EQ(f.live_mws(), 0);
	CHECK_EQ(v.live(), 0);
	CHECK_EQ(v.dereg(m), 0);
	CU_OK(cuMemFree(d));
	return 0;
}

/*
 * ibv_rereg_mr of a window MR keeps the native meaning: new access, new
 * range, another PD; the old rkey dies each time.
 */
static int scenario_rereg(void)
{
	struct ibv_context *vc;
	struct ibv_pd *pd, *pd2;
	struct ibv_mr *m;
	uint32_t old;
	CUdeviceptr d;

	setup();
	vc = v.open();
	pd = v.alloc_pd(vc);
	pd2 = v.alloc_pd(vc);
	d = dev_alloc(MiB);
	m = v.reg(pd, (void *)(d + 4096), 512, LW | RW);
	CHECK(m != NULL);
	old = m->rkey;
	CHECK_EQ(v.rereg(m, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, LW), 0);
	CHECK(refused(pd, old, d + 4096));
	CHECK(refused(pd, m->rkey, d + 4096));
	CHECK_EQ(v.rereg(m, IBV_REREG_MR_CHANGE_ACCESS |
			 IBV_REREG_MR_CHANGE_TRANSLATION, NULL,
			 (void *)(d + 65536), 1024, LW | RW), 0);
	CHECK_EQ(v.write(pd, m->rkey, d + 65536 + 1023, "x", 1), 0);
	CHECK(refused(pd, m->rkey, d + 4096));
	old = m->rkey;
	CHECK_EQ(v.rereg(m, IBV_REREG_MR_CHANGE_PD, pd2, NULL, 0, 0), 0);
	CHECK(refused(pd, old, d + 65536));
	CHECK(refused(pd, m->rkey, d + 65536));
	CHECK_EQ(v.write(pd2, m->rkey, d + 65536, "y", 1), 0);
	CHECK_EQ(v.dereg(m), 0);
	CU_OK(cuMemFree(d));
	CHECK_EQ(v.live(), 0);
	CHECK_EQ(f.bound_mws(), 0);
	return 0;
}

/*
 * No windows on this NIC (FAKEVERBS_NO_MW), or the NIC refuses the first
 * bind (FAKEVERBS_FAIL_BIND=1): each MR a NIC registration of exactly
 * its range, as before; the reason said once.
 */
static int scenario_fallback(void)
{
	struct ibv_pd *pd;
	unsigned long n0;
	CUdeviceptr d;

	setup();
	pd = v.alloc_pd(v.open());
	d = dev_alloc(MiB);
	n0 = nic_regs();
	for (int i = 0; i < 4; i++) {
		struct ibv_mr *m = v.reg(pd, (void *)(d + 4096), 512, LW | RW);
		uint32_t k;

		CHECK(m != NULL);
		CHECK_EQ(v.write(pd, m->rkey, d + 4096, "in", 2), 0);
		CHECK(refused(pd, m->rkey, d + 4096 + 512));
		k = m->rkey;
		CHECK_EQ(v.dereg(m), 0);
		CHECK(refused(pd, k, d + 4096));
	}
	CHECK(nic_regs() >= n0 + 4);
	CHECK_EQ(f.bound_mws(), 0);
	CU_OK(cuMemFree(d));
	CHECK_EQ(v.live(), 0);
	return 0;
}

/* ------------------------------------------------- routes per profile */

static int env_is(const char *var, const char *val)
{
	const char *e = getenv(var);

	return e && !strcmp(e, val);
}

/* The route this process's exact registrations take (mwin.h): a window
 * on an MR parent where the NIC has windows; a DMA-BUF parent, or none:
 * a NIC registration each; rxe imports no DMA-BUF: passed through. */
enum route { WINDOW, NIC_REG, PASS };

static enum route route(void)
{
	int dmabuf = env_is("GDRHOOK_BACKEND", "dmabuf");

	/* auto under exact exposure: peermem where the NIC binds windows
	 * and a peer-memory client serves it, else dmabuf; rxe imports no
	 * DMA-BUF and no nvidia-peermem module is loaded here: none */
	if (env_is("GDRHOOK_BACKEND", "auto"))
		dmabuf = env_is("FAKEVERBS_PEERMEM", "0") ||
			 env_is("FAKEVERBS_PROVIDER", "nomw");
	if (dmabuf && env_is("FAKEVERBS_PROVIDER", "rxe"))
		return PASS;
	if (dmabuf || env_is("FAKEVERBS_PROVIDER", "nomw"))
		return NIC_REG;
	return WINDOW;
}

/*
 * A peer reaches exactly the registered bytes, with exactly the access
 * asked, until the MR's ibv_dereg_mr or the allocation's free, on the
 * route the profile allows: ranges of odd offsets and lengths, each
 * written at its first and last byte, refused one byte outside, refused
 * a read; dead after dereg; an MR still held is dead after the free.
 * The cost of each route is counted: a window costs no NIC
 * registration, a NIC registration one each and no new export or pin.
 */
static int scenario_bytes(void)
{
	unsigned long regs0, exports0, bound0;
	enum route rt = route();
	struct ibv_pd *pd;
	struct ibv_mr *held;
	uint32_t kh;
	CUdeviceptr d;
	char b;

	setup();
	pd = v.alloc_pd(v.open());
	d = dev_alloc(4 * MiB);
	memset((void *)d, '.', 4 * MiB);
	/* the first registration pins (and, for DMA-BUF, exports) */
	held = v.reg(pd, (void *)(d + 3 * MiB + 1), 4095, LW | RW);
	CHECK(held != NULL);
	if (rt != PASS)
		CHECK(!v.is_mr(held));	/* the cache's */
	kh = held->rkey;
	regs0 = nic_regs();
	exports0 = fakecuda_calls("cuMemGetHandleForAddressRange");
	bound0 = (unsigned long)f.bound_mws();
	for (int i = 0; i < 16; i++) {
		uint64_t off = (uint64_t)i * 65536 + 37 * (uint64_t)i + 1;
		uint64_t len = 1 + 997 * (uint64_t)i;
		uint64_t a = d + off;
		struct ibv_mr *m = v.reg(pd, (void *)a, len, LW | RW);
		uint32_t k;

		CHECK(m != NULL);
		CHECK_EQ(v.write(pd, m->rkey, a, "F", 1), 0);
		CHECK_EQ(v.write(pd, m->rkey, a + len - 1, "L", 1), 0);
		CHECK(refused(pd, m->rkey, a - 1));
		CHECK(refused(pd, m->rkey, a + len));
		CHECK(f.read(pd, m->rkey, a, &b, 1) != 0);
		CHECK_EQ(((char *)a)[-1], '.');
		CHECK_EQ(((char *)a)[len], '.');
		CHECK_EQ(((char *)a)[len - 1], 'L');
		if (len > 1)
			CHECK_EQ(((char *)a)[0], 'F');
		k = m->rkey;
		CHECK_EQ(v.dereg(m), 0);
		CHECK(refused(pd, k, a));
		CHECK(refused(pd, k, a + len - 1));
	}
	/* what the route cost */
	if (rt == WINDOW)
		CHECK_EQ(nic_regs(), regs0);
	else if (rt == NIC_REG)
		CHECK_EQ(nic_regs(), regs0 + 16);
	if (rt != PASS)		/* no new export, no new pin */
		CHECK_EQ(fakecuda_calls("cuMemGetHandleForAddressRange"),
			 exports0);
	CHECK_EQ((unsigned long)f.bound_mws(), bound0);
	CHECK_EQ(v.write(pd, kh, d + 3 * MiB + 1, "h", 1), 0);
	CU_OK(cuMemFree(d));
	CHECK(refused(pd, kh, d + 3 * MiB + 1));
	CHECK_EQ(v.dereg(held), 0);
	CHECK_EQ(f.bound_mws(), 0);
	CHECK_EQ(v.calls("stale_writes"), 0);
	CHECK_EQ(v.stale(), 0);
	CHECK_EQ(v.live(), 0);
	return 0;
}

/* GDRHOOK_REMOTE_EXPOSURE=allocation: a remote-access registration is
 * the cached parent itself (no window), its DMA-BUF under auto. */
static int scenario_exposure_allocation(void)
{
	struct ibv_mr *m;
	struct ibv_pd *pd;
	CUdeviceptr d;

	setup();
	pd = v.alloc_pd(v.open());
	d = dev_alloc(MiB);
	m = v.reg(pd, (void *)(d + 4096), 4096, LW | RW);
	CHECK(m && !v.is_mr(m));
	CHECK_EQ(f.bound_mws(), 0);
	/* the probe's and the parent's */
	CHECK_EQ(v.calls("ibv_reg_dmabuf_mr"), 2);
	CHECK_EQ(v.calls("ibv_reg_mr_iova2"), 0);
	CHECK_EQ(v.write(pd, m->rkey, d + 4096, "a", 1), 0);
	CHECK_EQ(v.dereg(m), 0);
	CU_OK(cuMemFree(d));
	CHECK_EQ(v.live(), 0);
	return 0;
}

/*
 * mlx5 binds at most 2 GiB (providers/mlx5/qp.c set_bind_wr): a range
 * over it is a NIC registration of exactly the range, said once; 2 GiB
 * exactly is still a window.
 */
static int scenario_long(void)
{
	const uint64_t two = 2048 * MiB;
	struct ibv_mr *m, *w;
	struct ibv_pd *pd;
	unsigned long r0;
	CUdeviceptr d;

	setup();
	pd = v.alloc_pd(v.open());
	d = dev_alloc(two + 2 * MiB);
	w = v.reg(pd, (void *)d, two, LW | RW);
	CHECK(w != NULL);
	CHECK_EQ(f.bound_mws(), 1);
	CHECK_EQ(v.write(pd, w->rkey, d + two - 1, "w", 1), 0);
	CHECK(refused(pd, w->rkey, d + two));
	r0 = nic_regs();
	for (int i = 0; i < 2; i++) {
		m = v.reg(pd, (void *)(d + 4096), two + 1, LW | RW);
		CHECK(m != NULL);
		CHECK_EQ(nic_regs(), r0 + 1 + (unsigned long)i);
		CHECK_EQ(f.bound_mws(), 1);		/* w's only */
		CHECK_EQ(v.write(pd, m->rkey, d + 4096 + two, "l", 1), 0);
		CHECK(refused(pd, m->rkey, d + 4096 + two + 1));
		CHECK(refused(pd, m->rkey, d + 4095));
		CHECK_EQ(v.dereg(m), 0);
	}
	CHECK_EQ(v.dereg(w), 0);
	CU_OK(cuMemFree(d));
	CHECK_EQ(v.live(), 0);
	return 0;
}

static const struct scenario scenarios[] = {
	{ "bytes", scenario_bytes },
	{ "exposure_allocation", scenario_exposure_allocation },
	{ "long", scenario_long },
	{ "exact", scenario_exact },
	{ "rotation", scenario_rotation },
	{ "free", scenario_free },
	{ "teardown", scenario_teardown },
	{ "rereg", scenario_rereg },
	{ "fallback", scenario_fallback },
};

/* ------------------------------------------------------------- cases */

static const char *const cached[] = { "GDRHOOK_BACKEND=dmabuf",
				       "GDRHOOK_BACKEND=peermem" };
static const char *const profiles[] = { "FAKEVERBS_PROVIDER=mlx5",
					"FAKEVERBS_PROVIDER=rxe",
					"FAKEVERBS_PROVIDER=nomw" };

/* The window cases: an MR parent (peermem) on the NICs that bind
 * windows over one, mlx5 and rxe. */
static void both(const char *name, const char *extra)
{
	for (int p = 0; p < 2; p++) {
		const char *env[] = { "GDRHOOK_BACKEND=peermem", profiles[p],
				      "GDRHOOK_REMOTE_EXPOSURE=exact", extra,
				      NULL };

		CHECK_EQ(run_scenario(name, env), 0);
	}
}

/* Every profile, every cached backend. */
static void everywhere(const char *name)
{
	for (int p = 0; p < 3; p++)
		for (int b = 0; b < 2; b++) {
			const char *env[] = { cached[b], profiles[p],
					      "GDRHOOK_REMOTE_EXPOSURE=exact",
					      NULL };

			if (run_scenario(name, env))
				TH_FAIL("%s, %s", profiles[p], cached[b]);
		}
}

TEST(exact_bytes_on_every_profile_and_backend)
{
	everywhere("bytes");
}

TEST(rereg_as_natively_on_every_profile_and_backend)
{
	everywhere("rereg");
}

/*
 * auto under exact exposure takes a window-capable parent where there is
 * one: peermem where the NIC binds windows and a peer-memory client
 * registers GPU memory (FAKEVERBS_PEERMEM, 1 by default), else dmabuf;
 * byte-exact on every profile either way, the reason in the banner.
 */
TEST(auto_takes_windows_where_a_peer_client_serves)
{
	static const char *const peer[] = { "FAKEVERBS_PEERMEM=1",
					    "FAKEVERBS_PEERMEM=0" };
	char err[512];

	for (int p = 0; p < 3; p++)
		for (int c = 0; c < 2; c++) {
			const char *env[] = { "GDRHOOK_BACKEND=auto",
					      profiles[p], peer[c],
					      "GDRHOOK_REMOTE_EXPOSURE=exact",
					      NULL };

			/* rxe imports no DMA-BUF: without a peer-memory
			 * client no GPU memory registers there, natively
			 * either */
			if (p == 1 && c == 1)
				continue;
			if (run_scenario("bytes", env))
				TH_FAIL("%s, %s", profiles[p], peer[c]);
		}
	log_path(err, sizeof(err), "auto-route");
	{
		const char *env[] = { "GDRHOOK_BACKEND=auto",
				      "GDRHOOK_LOG_LEVEL=info", NULL };

		/* the decision, then the banner of what the cache runs */
		CHECK_EQ(run_scenario_err("bytes", env, err), 0);
		CHECK_EQ(count_in_file(err, "a peer-memory client registered GPU memory: peermem"), 2);
		CHECK_EQ(count_in_file(err, "pin backend peermem (chosen; "), 1);
	}
	{
		const char *env[] = { "GDRHOOK_BACKEND=auto",
				      "FAKEVERBS_PEERMEM=0",
				      "GDRHOOK_LOG_LEVEL=info", NULL };

		CHECK_EQ(run_scenario_err("bytes", env, err), 0);
		CHECK_EQ(count_in_file(err, "no peer-memory client registered GPU memory"), 1);
		CHECK_EQ(count_in_file(err, "DMA-BUF parent: mlx5"), 1);
	}
	{
		const char *env[] = { "GDRHOOK_BACKEND=auto",
				      "GDRHOOK_REMOTE_EXPOSURE=allocation",
				      "GDRHOOK_LOG_LEVEL=info", NULL };

		/* no windows wanted: auto keeps DMA-BUF, no peer probe */
		CHECK_EQ(run_scenario_err("exposure_allocation", env, err), 0);
		CHECK_EQ(count_in_file(err, "peer-memory client"), 0);
		CHECK_EQ(count_in_file(err, "pin backend dmabuf (chosen; auto: device 0 exports DMA-BUF and libibverbs has ibv_reg_dmabuf_mr; NIC fakenic0 imported a probe DMA-BUF)"), 1);
	}
	unlink(err);
}

/* mlx5, DMA-BUF parent: no bind is tried, the reason said once. */
TEST(dmabuf_parent_per_mr_registration_said_once)
{
	char err[512];
	const char *env[] = { "GDRHOOK_BACKEND=dmabuf",
			      "FAKEVERBS_PROVIDER=mlx5",
			      "GDRHOOK_LOG_LEVEL=info", NULL };

	log_path(err, sizeof(err), "dmabuf-route");
	CHECK_EQ(run_scenario_err("bytes", env, err), 0);
	CHECK_EQ(count_in_file(err, "DMA-BUF parent: mlx5"), 1);
	CHECK_EQ(count_in_file(err, "refused gdrhook's first bind"), 0);
	unlink(err);
}

TEST(over_2_gib_a_nic_registration_said_once)
{
	char err[512];
	const char *env[] = { "GDRHOOK_BACKEND=peermem",
			      "FAKEVERBS_PROVIDER=mlx5",
			      "GDRHOOK_LOG_LEVEL=info", NULL };

	log_path(err, sizeof(err), "long-route");
	CHECK_EQ(run_scenario_err("long", env, err), 0);
	CHECK_EQ(count_in_file(err, "over 2 GiB"), 1);
	unlink(err);
}

TEST(exact_range_access_and_pd_one_parent)
{
	both("exact", NULL);
}

TEST(rkeys_rotate_no_sooner_than_natively)
{
	both("rotation", NULL);
}

TEST(free_invalidates_windows_then_the_parent)
{
	both("free", NULL);
}

TEST(dealloc_pd_and_close_device_as_natively)
{
	both("teardown", NULL);
}


TEST(no_windows_a_nic_registration_each_said_once)
{
	char err[512];
	const char *env[] = { "GDRHOOK_BACKEND=peermem",
			      "FAKEVERBS_PROVIDER=nomw", NULL };
	const char *env2[] = { "GDRHOOK_BACKEND=peermem",
			       "FAKEVERBS_FAIL_BIND=1", NULL };

	log_path(err, sizeof(err), "win-stderr");
	CHECK_EQ(run_scenario_err("fallback", env, err), 0);
	CHECK_EQ(count_in_file(err, "memory windows: NIC"), 1);
	CHECK_EQ(run_scenario_err("fallback", env2, err), 0);
	CHECK_EQ(count_in_file(err, "memory windows: NIC"), 1);
	CHECK_EQ(count_in_file(err, "refused gdrhook's first bind"), 1);
	unlink(err);
}

SCENARIO_MAIN(scenarios)
