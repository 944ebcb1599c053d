// SPDX-License-Identifier: MIT
/*
 * Registrations in flight (src/registry/inflight.c): a registration
 * waits only for frees of its own range, and is never stale.
 *
 *  - host memory and GPU memory registered beside threads that allocate
 *    and free their own addresses: every registration succeeds;
 *  - a driver call that does not end (stalled in the CUDA double) delays
 *    no registration of other memory: they all return while it is still
 *    inside the driver;
 *  - a thread that leaves a hook without returning (pthread_exit from a
 *    subscriber callback, siglongjmp out of one, a C++ exception through
 *    one) leaves registrations and gdrhook_unsubscribe unaffected;
 *  - 100 registrations inside a slow NIC at once all succeed;
 *  - a registration whose NIC call returned while an allocation of its
 *    memory was still inside the driver is tied to that allocation (the
 *    allocation's hook does it, before the program sees the memory), so
 *    its free revokes it;
 *  - registrations across two VMM chunks while another thread remaps the
 *    second: each old rkey tried after a whole remap cycle that began
 *    after it was made reaches nothing that is not its memory;
 *  - a bad GDRHOOK_LIBCUDA keeps the cache (registrations are revoked at
 *    free).
 */
#include <cuda.h>
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "preload_util.h"
#include "fakecuda.h"
#include "fakeverbs.h"
#include "verbs_load.h"
#include "vmm_remap.h"

static CUcontext ctx0;

static void setup(void)
{
	ctx0 = primary_ctx(0);
	verbs_load();
}

static void sleep_us(long us)
{
	struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static void wait_stalled(int n)
{
	for (int i = 0; fakecuda_stalled() < n; i++) {
		if (i > 100000)
			TH_FAIL("no call of the double stalled");
		sleep_us(100);
	}
}

/*
 * One registration of what a communication library registers: host
 * memory (kind 0), GPU memory the cache does not serve (1: its iova is
 * not its address, so it is made by libibverbs and wrapped) or does (2);
 * 64 KiB.  *raddr_p: where a peer writes through it.
 */
#define IOVA	0x7a0000000000ull
static struct ibv_mr *reg_kind(struct ibv_pd *pd, int kind, void *host,
			       CUdeviceptr a, uint64_t *raddr_p)
{
	if (kind == 0) {
		*raddr_p = (uintptr_t)host;
		return v.reg(pd, host, 1 << 16, LW | RW);
	}
	if (kind == 1) {
		*raddr_p = IOVA;
		return v.reg2(pd, (void *)(a + 4096), 1 << 16, IOVA, LW | RW);
	}
	*raddr_p = a + 4096;
	return v.reg(pd, (void *)(a + 4096), 1 << 16, LW | RW);
}

/* ------------------------------------------- beside allocating threads */

struct churner {
	int stop;	/* atomic */
	int bad;
	unsigned long pairs;
};

static void *churn_own(void *arg)
{
	struct churner *c = arg;
	unsigned int seed = (unsigned int)(uintptr_t)&c;

	CU_OK(cuCtxSetCurrent(ctx0));
	while (!__atomic_load_n(&c->stop, __ATOMIC_ACQUIRE)) {
		size_t n = (64u << 10) << (rand_r(&seed) % 5);
		CUdeviceptr d;

		if (cuMemAlloc(&d, n) || cuMemFree(d)) {
			c->bad = 1;
			break;
		}
		__atomic_add_fetch(&c->pairs, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

/*
 * 4 threads allocate and free their own memory without pause (the double
 * holding its lock 20 us a call) while this thread registers host memory,
 * GPU memory across two allocations (wrapped) and inside one (cached):
 * every registration succeeds, every peer write lands.
 */
static int scenario_beside_churn(void)
{
	struct churner c = { 0 };
	pthread_t t[4];
	struct ibv_pd *pd;
	CUdeviceptr a;
	char *host = aligned_alloc(4096, 1 << 16);
	int regs = 0;

	setup();
	pd = v.alloc_pd(v.open());
	CHECK(host != NULL);
	a = dev_alloc(MiB);
	for (int i = 0; i < 4; i++)
		CHECK_EQ(pthread_create(&t[i], NULL, churn_own, &c), 0);
	while (__atomic_load_n(&c.pairs, __ATOMIC_RELAXED) < 50)
		sleep_us(1000);
	for (int i = 0; i < 600; i++) {
		uint64_t raddr;
		struct ibv_mr *m = reg_kind(pd, i % 3, host, a, &raddr);

		if (!m)
			TH_FAIL("registration %d (kind %d) refused: %s", i,
				i % 3, strerror(errno));
		CHECK_EQ(v.write(pd, m->rkey, raddr + 8, "w", 1), 0);
		CHECK_EQ(v.dereg(m), 0);
		regs++;
	}
	__atomic_store_n(&c.stop, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	CHECK(!c.bad);
	printf("  %d registrations beside %lu allocation pairs\n", regs,
	       c.pairs);
	CHECK_EQ(v.calls("stale_writes"), 0);
	CHECK_EQ(v.stale(), 0);
	CU_OK(cuMemFree(a));
	free(host);
	return 0;
}

/* ------------------------------------------------ a call that hangs */

struct stalled {
	const char *sym;
	CUdeviceptr d;	/* cuMemFree's */
	void *host;	/* cuMemHostRegister's */
	int rc;
};

static void *stalled_call(void *arg)
{
	struct stalled *s = arg;

	CU_OK(cuCtxSetCurrent(ctx0));
	if (!strcmp(s->sym, "cuMemFree_v2"))
		s->rc = cuMemFree(s->d);
	else
		s->rc = cuMemHostRegister(s->host, 1 << 20, 0);
	return NULL;
}

/*
 * Another thread is inside cuMemFree of unrelated memory, or inside a
 * cuMemHostRegister of a large buffer, and does not come out until this
 * thread lets it: 50 registrations of host memory and of other GPU
 * memory (wrapped) all return while it is still inside.
 */
static int scenario_stalled_call(void)
{
	static const char *const syms[] = { "cuMemFree_v2",
					    "cuMemHostRegister_v2" };
	struct ibv_pd *pd;
	char *host = aligned_alloc(4096, 1 << 16);

	setup();
	pd = v.alloc_pd(v.open());
	for (unsigned int k = 0; k < 2; k++) {
		struct stalled s = { syms[k], dev_alloc(MiB),
				     aligned_alloc(4096, 1 << 20), -1 };
		CUdeviceptr a = dev_alloc(MiB);
		pthread_t t;

		fakecuda_stall_next(syms[k]);
		CHECK_EQ(pthread_create(&t, NULL, stalled_call, &s), 0);
		wait_stalled(1);
		for (int i = 0; i < 60; i++) {
			uint64_t raddr;
			struct ibv_mr *m = reg_kind(pd, i % 3, host, a,
						    &raddr);

			if (!m)
				TH_FAIL("%s stalled: registration %d refused: %s",
					syms[k], i, strerror(errno));
			CHECK_EQ(v.write(pd, m->rkey, raddr, "s", 1), 0);
			CHECK_EQ(v.dereg(m), 0);
		}
		/* all made while it was still inside the driver */
		CHECK_EQ(fakecuda_stalled(), 1);
		fakecuda_unstall();
		pthread_join(t, NULL);
		CHECK_EQ(s.rc, 0);
		if (k == 1) {	/* cuMemFree freed s.d itself */
			CU_OK(cuMemHostUnregister(s.host));
			CU_OK(cuMemFree(s.d));
		}
		free(s.host);
		CU_OK(cuMemFree(a));
	}
	CHECK_EQ(v.calls("stale_writes"), 0);
	free(host);
	return 0;
}

/* ------------------------------------ threads that leave a hook early */

static sigjmp_buf jump_back;
static int leave_how;	/* 1: pthread_exit, 2: siglongjmp */

static void leave_cb(const struct gdrhook_event *ev, void *arg)
{
	static int once;

	(void)arg;
	if (ev->type != GDRHOOK_EVENT_FREE ||
	    __atomic_exchange_n(&once, 1, __ATOMIC_ACQ_REL))
		return;
	if (leave_how == 1)
		pthread_exit(NULL);
	siglongjmp(jump_back, 1);
}

static void *free_and_leave(void *arg)
{
	CUdeviceptr d = *(CUdeviceptr *)arg;

	CU_OK(cuCtxSetCurrent(ctx0));
	if (!sigsetjmp(jump_back, 1)) {
		cuMemFree(d);
		TH_FAIL("the callback returned");
	}
	/* back here without returning from the hook: the next hooked call
	 * on this thread notices; then the thread stays alive a while */
	{
		CUdeviceptr e = dev_alloc(4096);

		CU_OK(cuMemFree(e));
	}
	sleep_us(200000);
	return NULL;
}

/*
 * A subscriber callback run inside cuMemFree leaves the thread's hooks
 * for good (pthread_exit, or siglongjmp and then other work): later
 * registrations of any memory succeed at once, and gdrhook_unsubscribe
 * of that subscription returns (the test's timeout catches a hang).
 */
static int scenario_left_hook(int how)
{
	struct ibv_pd *pd;
	char *host = aligned_alloc(4096, 1 << 16);
	CUdeviceptr d, a;
	pthread_t t;
	int h;

	setup();
	pd = v.alloc_pd(v.open());
	leave_how = how;
	d = dev_alloc(MiB);
	a = dev_alloc(MiB);
	h = gdrhook_subscribe(GDRHOOK_EVENT_FREE, leave_cb, NULL);
	CHECK(h >= 0);
	CHECK_EQ(pthread_create(&t, NULL, free_and_leave, &d), 0);
	if (how == 1)
		pthread_join(t, NULL);
	else
		sleep_us(50000);	/* it is back, and alive */
	for (int i = 0; i < 60; i++) {
		uint64_t raddr;
		struct ibv_mr *m = reg_kind(pd, i % 3, host, a, &raddr);

		if (!m)
			TH_FAIL("registration %d refused: %s", i,
				strerror(errno));
		CHECK_EQ(v.dereg(m), 0);
	}
	CHECK_EQ(gdrhook_unsubscribe(h), 0);
	if (how == 2)
		pthread_join(t, NULL);
	CU_OK(cuMemFree(a));
	free(host);
	return 0;
}

static int scenario_left_by_exit(void)
{
	return scenario_left_hook(1);
}

static int scenario_left_by_jump(void)
{
	return scenario_left_hook(2);
}

/* ----------------------------------------------- a slow NIC, 100 calls */

struct slow {
	struct ibv_pd *pd;
	int ok;
};

static void *reg_own_host(void *arg)
{
	struct slow *s = arg;
	char *p = aligned_alloc(4096, 1 << 16);
	struct ibv_mr *m = p ? v.reg(s->pd, p, 1 << 16, LW | RW) : NULL;

	if (m) {
		__atomic_add_fetch(&s->ok, 1, __ATOMIC_RELAXED);
		v.dereg(m);
	}
	free(p);
	return NULL;
}

/* 100 threads each register their own host memory on a NIC that takes
 * 300 ms a registration: all 100 succeed, as natively. */
static int scenario_slow_nic(void)
{
	struct slow s = { 0 };
	pthread_t t[100];

	setup();
	s.pd = v.alloc_pd(v.open());
	for (int i = 0; i < 100; i++)
		CHECK_EQ(pthread_create(&t[i], NULL, reg_own_host, &s), 0);
	for (int i = 0; i < 100; i++)
		pthread_join(t[i], NULL);
	CHECK_EQ(s.ok, 100);
	return 0;
}

/* ------------------------------------- an allocation still in the driver */

struct mapper {
	CUdeviceptr va;
	size_t gran;
	CUmemGenericAllocationHandle h;
	int rc;
};

static void *map_second(void *arg)
{
	struct mapper *m = arg;

	CU_OK(cuCtxSetCurrent(ctx0));
	m->rc = cuMemMap(m->va + m->gran, m->gran, 0, m->h, 0);
	return NULL;
}

static void *alloc_one(void *arg)
{
	struct mapper *m = arg;

	CU_OK(cuCtxSetCurrent(ctx0));
	m->rc = cuMemAlloc(&m->va, m->gran);
	return NULL;
}

/*
 * A registration's NIC call returns while the allocation of memory it
 * reaches is done in the driver but not yet seen by its hook (the double
 * stalls the call at its exit).  When the hook runs it ties the
 * registration to that memory; freeing it then revokes the registration:
 * the old rkey reaches nothing, no write lands in memory it no longer
 * pinned.  Plain (all of it in the new memory: the program gets
 * libibverbs' MR) and wrapped (across a tracked mapping and the new one).
 */
static int scenario_raced_alloc(void)
{
	CUmemAllocationProp prop = { 0 };
	struct gdrhook_stats st = { .size = sizeof(st) };
	struct ibv_pd *pd;
	struct ibv_mr *m;
	struct mapper mp = { 0 };
	CUmemGenericAllocationHandle h0;
	CUdeviceptr a;
	pthread_t t;

	setup();
	pd = v.alloc_pd(v.open());

	/* plain: the address comes back from a free (the double's LIFO) */
	a = dev_alloc(MiB);
	CU_OK(cuMemFree(a));
	mp.gran = MiB;
	fakecuda_stall_next_exit("cuMemAlloc_v2");
	CHECK_EQ(pthread_create(&t, NULL, alloc_one, &mp), 0);
	wait_stalled(1);
	m = v.reg(pd, (void *)(a + 4096), 8192, LW | RW);
	CHECK(m != NULL);
	fakecuda_unstall();
	pthread_join(t, NULL);
	CHECK_EQ(mp.rc, 0);
	CHECK_EQ(mp.va, a);
	CHECK_EQ(v.write(pd, m->rkey, a + 4100, "p", 1), 0);
	CU_OK(cuMemFree(a));
	CHECK(refused(pd, m->rkey, a + 4100));
	CHECK_EQ(v.dereg(m), 0);

	/* wrapped: across a tracked mapping and one still being made */
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	mp.gran = 2 * MiB;
	CU_OK(cuMemAddressReserve(&mp.va, 2 * mp.gran, 0, 0, 0));
	CU_OK(cuMemCreate(&h0, mp.gran, &prop, 0));
	CU_OK(cuMemCreate(&mp.h, mp.gran, &prop, 0));
	CU_OK(cuMemMap(mp.va, mp.gran, 0, h0, 0));
	CU_OK(set_rw(mp.va, mp.gran));
	fakecuda_stall_next_exit("cuMemMap");
	CHECK_EQ(pthread_create(&t, NULL, map_second, &mp), 0);
	wait_stalled(1);
	m = v.reg(pd, (void *)(mp.va + mp.gran - 8192), 16384, LW | RW);
	CHECK(m != NULL);
	fakecuda_unstall();
	pthread_join(t, NULL);
	CHECK_EQ(mp.rc, 0);
	CU_OK(set_rw(mp.va + mp.gran, mp.gran));
	CHECK_EQ(v.write(pd, m->rkey, mp.va + mp.gran + 100, "w", 1), 0);
	/* unmapping the second revokes it: it reaches that memory */
	CU_OK(cuMemUnmap(mp.va + mp.gran, mp.gran));
	CHECK(refused(pd, m->rkey, mp.va + mp.gran - 100));
	CHECK_EQ(v.dereg(m), 0);
	CU_OK(cuMemUnmap(mp.va, mp.gran));
	CU_OK(cuMemRelease(h0));
	CU_OK(cuMemRelease(mp.h));
	CU_OK(cuMemAddressFree(mp.va, 2 * mp.gran));

	CHECK_EQ(v.calls("stale_writes"), 0);
	CHECK_EQ(v.stale(), 0);
	CHECK_EQ(gdrhook_get_stats(&st), 0);
	CHECK_EQ(st.regs_raced, 2);
	return 0;
}

/* ------------------------------------------- VMM chunks being remapped */

/*
 * Registrations across two VMM chunks while another thread unmaps and
 * maps the second again and again.  Each is kept until a whole remap
 * cycle that began after it returned is over, then written through at
 * both chunks: a write may land in the first chunk or be refused, never
 * in the second chunk's new memory (the double's NIC counts such a
 * write as stale).
 */
static int scenario_vmm_remapped(void)
{
	struct remap m = { 0 };
	CUmemGenericAllocationHandle h0, h1;
	struct ibv_pd *pd;
	pthread_t t;
	int made = 0, second_refused = 0, first_landed = 0;
	time_t end;

	setup();
	pd = v.alloc_pd(v.open());
	m.ctx = ctx0;
	m.gran = 2 * MiB;
	m.prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	m.prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	CU_OK(cuMemAddressReserve(&m.va, 2 * m.gran, 0, 0, 0));
	CU_OK(cuMemCreate(&h0, m.gran, &m.prop, 0));
	CU_OK(cuMemCreate(&h1, m.gran, &m.prop, 0));
	CU_OK(cuMemMap(m.va, m.gran, 0, h0, 0));
	CU_OK(cuMemMap(m.va + m.gran, m.gran, 0, h1, 0));
	CU_OK(set_rw(m.va, 2 * m.gran));
	CU_OK(cuMemRelease(h1));
	CHECK_EQ(pthread_create(&t, NULL, remap_thread, &m), 0);
	/* 2 s, or until 20 were made (at most 20 s) */
	end = time(NULL) + 2;
	while (time(NULL) < end || (made < 20 && time(NULL) < end + 18)) {
		uint64_t lo = m.va + m.gran - 8192;
		struct ibv_mr *r = v.reg(pd, (void *)lo, 16384, LW | RW);
		unsigned long c0;

		if (!r)
			continue;	/* over unmapped memory: refused */
		made++;
		/* a cycle that began after it returned, then its end */
		c0 = __atomic_load_n(&m.cycles, __ATOMIC_ACQUIRE);
		while (__atomic_load_n(&m.cycles, __ATOMIC_ACQUIRE) < c0 + 2 &&
		       !m.bad)
			sched_yield();
		first_landed += !v.write(pd, r->rkey, lo + 100, "a", 1);
		second_refused += refused(pd, r->rkey, lo + 12000);
		CHECK_EQ(v.dereg(r), 0);
	}
	__atomic_store_n(&m.stop, 1, __ATOMIC_RELEASE);
	pthread_join(t, NULL);
	CHECK(!m.bad);
	printf("  %d registrations across a remapped chunk: old rkeys refused in it %d, landed in the first chunk %d\n",
	       made, second_refused, first_landed);
	CHECK(made > 0);
	/* each was revoked with the mapping it reached: refused everywhere */
	CHECK_EQ(second_refused, made);
	CHECK_EQ(first_landed, 0);
	CHECK_EQ(v.calls("stale_writes"), 0);
	CHECK_EQ(v.stale(), 0);
	CU_OK(cuMemUnmap(m.va, 2 * m.gran));
	CU_OK(cuMemRelease(h0));
	CU_OK(cuMemAddressFree(m.va, 2 * m.gran));
	return 0;
}

/* ------------------------------------------------ a bad GDRHOOK_LIBCUDA */

/* The hooks and the backend choice both use the default driver: the
 * cache is on, and a free revokes the registration. */
static int scenario_bad_libcuda(void)
{
	struct ibv_pd *pd;
	struct ibv_mr *m;
	CUdeviceptr a, b;

	setup();
	pd = v.alloc_pd(v.open());
	a = dev_alloc(MiB);
	m = v.reg(pd, (void *)(a + 4096), 8192, LW | RW);
	CHECK(m != NULL);
	CU_OK(cuMemFree(a));
	b = dev_alloc(MiB);
	CHECK_EQ(b, a);
	CHECK(refused(pd, m->rkey, b + 4100));
	CHECK_EQ(v.dereg(m), 0);
	CHECK_EQ(v.calls("stale_writes"), 0);
	CU_OK(cuMemFree(b));
	return 0;
}

static const struct scenario scenarios[] = {
	{ "beside_churn", scenario_beside_churn },
	{ "stalled_call", scenario_stalled_call },
	{ "left_by_exit", scenario_left_by_exit },
	{ "left_by_jump", scenario_left_by_jump },
	{ "slow_nic", scenario_slow_nic },
	{ "raced_alloc", scenario_raced_alloc },
	{ "vmm_remapped", scenario_vmm_remapped },
	{ "bad_libcuda", scenario_bad_libcuda },
};

/* ------------------------------------------------------------- cases */

static const char *const cached[] = { "GDRHOOK_BACKEND=dmabuf",
				       "GDRHOOK_BACKEND=peermem" };

static void each_cached(const char *name, const char *extra,
			const char *extra2)
{
	for (int b = 0; b < 2; b++) {
		const char *env[] = { cached[b], extra, extra2, NULL };

		CHECK_EQ(run_scenario(name, env), 0);
	}
}

TEST_TIMEOUT(registrations_beside_threads_that_allocate, 120)
{
	each_cached("beside_churn", "FAKECUDA_ALLOC_HOLD_NS=20000", NULL);
}

TEST_TIMEOUT(a_call_stuck_in_the_driver_delays_no_registration, 120)
{
	each_cached("stalled_call", NULL, NULL);
}

TEST_TIMEOUT(a_thread_that_exits_inside_a_callback, 60)
{
	each_cached("left_by_exit", NULL, NULL);
}

TEST_TIMEOUT(a_thread_that_jumps_out_of_a_callback, 60)
{
	each_cached("left_by_jump", NULL, NULL);
}

/* A C++ exception thrown by a callback through cuMemFree's hook and
 * caught by the program (tests/preload/throw_cxx.cc). */
TEST_TIMEOUT(an_exception_through_a_callback, 60)
{
	char prog[4096];
	ssize_t n = readlink("/proc/self/exe", prog, sizeof(prog) - 16);
	pid_t pid;
	int st;

	CHECK(n > 0);
	prog[n] = 0;
	strcpy(strrchr(prog, '/') + 1, "throw_cxx");
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		execl(prog, prog, (char *)NULL);
		_exit(121);
	}
	CHECK_EQ(waitpid(pid, &st, 0), pid);
	CHECK(WIFEXITED(st));
	CHECK_EQ(WEXITSTATUS(st), 0);
}

TEST_TIMEOUT(a_hundred_registrations_inside_a_slow_nic, 120)
{
	const char *env[] = { "FAKEVERBS_REG_DELAY_US=300000", NULL };

	CHECK_EQ(run_scenario("slow_nic", env), 0);
}

TEST_TIMEOUT(an_allocation_in_the_driver_ties_the_registration_it_raced, 60)
{
	each_cached("raced_alloc", NULL, NULL);
}

TEST_TIMEOUT(old_rkeys_across_vmm_chunks_after_a_whole_remap, 120)
{
	each_cached("vmm_remapped", NULL, NULL);
}

TEST_TIMEOUT(a_bad_libcuda_keeps_the_cache, 60)
{
	static const char *const bad[] = {
		"GDRHOOK_LIBCUDA=/nonexistent/libcuda.so.1",
		"GDRHOOK_LIBCUDA=libc.so.6",
		"GDRHOOK_LIBCUDA=",
	};

	for (unsigned int i = 0; i < 3; i++) {
		const char *env[] = { "GDRHOOK_BACKEND=auto", bad[i], NULL };

		CHECK_EQ(run_scenario("bad_libcuda", env), 0);
	}
}

SCENARIO_MAIN(scenarios)
