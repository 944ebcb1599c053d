// SPDX-License-Identifier: MIT
/*
 * Never stale under races and reused numbers: the registration paths
 * against frees and reallocations of the same addresses, over the
 * libibverbs double's checking NIC (tests/fakeverbs: it reaches what it
 * pinned and counts every peer write that lands in memory that is no
 * longer what it pinned).  A slow NIC (FAKEVERBS_PIN_DELAY_US,
 * FAKEVERBS_REG_DELAY_US) makes the windows wide.  Each case runs in a
 * fresh process with its own settings (run_scenario), on the cached
 * backends and both exposure policies where the promise is theirs.
 *
 * The race stress (scenario "stress"): threads that register, rereg,
 * dereg, free and reallocate the same few addresses at once, checking
 * every peer write: none may land in memory the MR no longer pinned,
 * none outside what the MR granted.  RACE_SECONDS sets its length.
 */
#include <cuda.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "preload_util.h"
#include "each_backend.h"
#include "fakeverbs.h"
#include "verbs_load.h"
#include "vmm_remap.h"

static CUcontext ctx0;

static void setup(void)
{
	ctx0 = primary_ctx(0);
	verbs_load();
}

static void *thread_ctx(void)
{
	CU_OK(cuCtxSetCurrent(ctx0));
	return NULL;
}

static void sleep_us(long us)
{
	struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/*
 * 1. ibv_rereg_mr of an MR whose memory was freed (the cache revoked
 * it): a change of access or PD alone gives no new translation, so it
 * must not bring the MR back on whatever is at the address now.
 */
static int scenario_rereg_revoked(void)
{
	static const int flags[] = {
		IBV_REREG_MR_CHANGE_ACCESS, IBV_REREG_MR_CHANGE_PD,
		IBV_REREG_MR_CHANGE_ACCESS | IBV_REREG_MR_CHANGE_PD,
	};
	struct ibv_pd *pd, *pd2;
	struct ibv_context *vc;

	setup();
	vc = v.open();
	pd = v.alloc_pd(vc);
	pd2 = v.alloc_pd(vc);
	for (unsigned int i = 0; i < 3; i++) {
		CUdeviceptr a = dev_alloc(MiB);
		struct ibv_mr *m = v.reg(pd, (void *)(a + 4096), 512, LW | RW);
		struct ibv_pd *np = flags[i] & IBV_REREG_MR_CHANGE_PD ? pd2 : pd;
		int rc;

		CHECK(m != NULL);
		a = realloc_same(a, MiB);	/* revokes m */
		CHECK(refused(pd, m->rkey, a + 4096));
		errno = 0;
		rc = v.rereg(m, flags[i], np, NULL, 0,
			     flags[i] & IBV_REREG_MR_CHANGE_ACCESS ? LW | RW : 0);
		CHECK_EQ(rc, IBV_REREG_MR_ERR_CMD);
		CHECK(errno != 0);
		CHECK(refused(pd, m->rkey, a + 4096));
		CHECK(refused(pd2, m->rkey, a + 4096));
		/* a new translation is a new grant: allowed */
		CHECK_EQ(v.rereg(m, IBV_REREG_MR_CHANGE_TRANSLATION |
				 IBV_REREG_MR_CHANGE_ACCESS, NULL,
				 (void *)(a + 8192), 256, LW | RW), 0);
		CHECK_EQ(v.write(pd, m->rkey, a + 8192, "ok", 2), 0);
		CHECK_EQ(v.dereg(m), 0);
		CU_OK(cuMemFree(a));
	}
	CHECK_EQ(v.calls("stale_writes"), 0);
	CHECK_EQ(v.stale(), 0);
	return 0;
}

/* A registration on another thread while this one frees and reallocates. */
struct racer {
	struct ibv_pd *pd;
	CUdeviceptr addr;
	size_t len;
	uint64_t iova;
	struct ibv_mr *mr;
	int err;
};

static void *reg_thread(void *arg)
{
	struct racer *r = arg;

	thread_ctx();
	r->mr = v.reg2(r->pd, (void *)r->addr, r->len, r->iova, LW | RW);
	r->err = r->mr ? 0 : errno;
	return NULL;
}

/*
 * The registration r must end either refused, or reaching only memory
 * that is what it pinned; and the free of whatever it reaches must
 * revoke it.
 */
static int check_outcome(struct racer *r, CUdeviceptr b, size_t n)
{
	if (!r->mr) {
		CHECK(r->err != 0);
		return 0;
	}
	/* a write now may land only in what the NIC pinned */
	v.write(r->pd, r->mr->rkey, r->iova, "w", 1);
	CHECK_EQ(v.calls("stale_writes"), 0);
	CU_OK(cuMemFree(b));
	CHECK(refused(r->pd, r->mr->rkey, r->iova));
	CHECK_EQ(v.calls("stale_writes"), 0);
	CHECK_EQ(v.stale(), 0);
	CHECK_EQ(v.dereg(r->mr), 0);
	(void)n;
	return 1;
}

/*
 * 3. Wrap ABA: a registration the cache cannot serve (iova != addr) is
 * made by the NIC on A's pages; meanwhile A is freed and B allocated at
 * the same address.  The MR must not come back tied to B.
 * (FAKEVERBS_REG_DELAY_US: the NIC pins at once, returns late.)
 */
static int scenario_wrap_aba(void)
{
	struct ibv_pd *pd;

	setup();
	pd = v.alloc_pd(v.open());
	for (int round = 0; round < 3; round++) {
		CUdeviceptr a = dev_alloc(MiB), b;
		struct racer r = { pd, a + 4096, 8192, a + 4096 + 1, NULL, 0 };
		pthread_t t;

		CHECK_EQ(pthread_create(&t, NULL, reg_thread, &r), 0);
		sleep_us(15000);	/* inside the NIC's call */
		b = realloc_same(a, MiB);
		pthread_join(t, NULL);
		if (!check_outcome(&r, b, MiB))
			CU_OK(cuMemFree(b));
	}
	CHECK_EQ(v.calls("stale_writes"), 0);
	return 0;
}

/*
 * 4. Pass-through TOCTOU: a registration finds nothing tracked at its
 * address (just freed) and goes to libibverbs; the NIC pins after
 * another thread allocated B there.  B's free must revoke it.
 * (FAKEVERBS_PIN_DELAY_US: the NIC pins late.)
 */
static int scenario_pass_toctou(void)
{
	struct ibv_pd *pd;

	setup();
	pd = v.alloc_pd(v.open());
	for (int round = 0; round < 3; round++) {
		CUdeviceptr a = dev_alloc(MiB), b;
		struct racer r = { pd, a + 4096, 8192, a + 4096, NULL, 0 };
		pthread_t t;

		CU_OK(cuMemFree(a));
		CHECK_EQ(pthread_create(&t, NULL, reg_thread, &r), 0);
		sleep_us(15000);	/* before the NIC pins */
		b = dev_alloc(MiB);
		CHECK_EQ(b, a);
		pthread_join(t, NULL);
		if (!check_outcome(&r, b, MiB))
			CU_OK(cuMemFree(b));
	}
	CHECK_EQ(v.calls("stale_writes"), 0);
	return 0;
}

/*
 * 5. Wrapped registrations across two allocations while another thread
 * frees and reallocates the second (the PyTorch expandable-segments
 * shape over VMM chunks, and plain allocations): no crash (ASan: no use
 * after free), no stale write.
 */
struct churn {
	CUdeviceptr b;
	size_t n;
	int stop;	/* atomic */
	int bad;
};

static void *churn_thread(void *arg)
{
	struct churn *c = arg;

	thread_ctx();
	while (!__atomic_load_n(&c->stop, __ATOMIC_ACQUIRE)) {
		CUdeviceptr nb = 0;

		if (cuMemFree(c->b) || cuMemAlloc(&nb, c->n) || nb != c->b) {
			c->bad = 1;
			break;
		}
	}
	return NULL;
}

/*
 * Wrapped registrations across a and its neighbour c->b for 2 s, each
 * with a peer write into both, while thread fn (given c) frees and
 * allocates the neighbour again; what fn returned into *ret_p.  No write
 * may land in memory the registration no longer reaches.
 */
static void wrap_across_churn(void *(*fn)(void *), const char *what,
			      void **ret_p)
{
	struct churn c = { 0 };
	struct ibv_pd *pd;
	CUdeviceptr a, lo;
	pthread_t t;
	int rounds = 0, made = 0, passed = 0;
	time_t end;

	setup();
	pd = v.alloc_pd(v.open());
	a = dev_alloc(10000);
	c.b = dev_alloc(10000);
	c.n = 10000;
	CHECK(c.b > a);
	lo = a + 9000;
	CHECK_EQ(pthread_create(&t, NULL, fn, &c), 0);
	end = time(NULL) + 2;
	while (time(NULL) < end) {
		struct ibv_mr *m = v.reg(pd, (void *)lo, c.b + 1000 - lo,
					 LW | RW);

		if (m && v.is_mr(m))
			passed++;
		if (m) {
			made++;
			v.write(pd, m->rkey, c.b + 500, "x", 1);
			v.write(pd, m->rkey, lo, "y", 1);
			CHECK_EQ(v.dereg(m), 0);
		}
		rounds++;
	}
	__atomic_store_n(&c.stop, 1, __ATOMIC_RELEASE);
	pthread_join(t, ret_p);
	CHECK(!c.bad);
	printf("  %d registrations across %s, %d made, %d unwrapped\n",
	       rounds, what, made, passed);
	CHECK_EQ(v.calls("stale_writes"), 0);
	CHECK_EQ(v.stale(), 0);
}

static int scenario_wrap_churn(void)
{
	wrap_across_churn(churn_thread, "a churned neighbour", NULL);
	return 0;
}

/*
 * 5 (VMM). Registrations across two mapped chunks of one reservation
 * (PyTorch's expandable segments) while another thread unmaps and maps
 * the second chunk again with new memory: no crash, no stale write.
 */
static int scenario_vmm_churn(void)
{
	struct remap m = { 0 };
	CUmemGenericAllocationHandle h0, h1;
	struct ibv_pd *pd;
	pthread_t t;
	int rounds = 0;
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
	end = time(NULL) + 2;
	while (time(NULL) < end) {
		uint64_t lo = m.va + m.gran - 8192;
		struct ibv_mr *r = v.reg(pd, (void *)lo, 16384, LW | RW);

		if (r) {
			v.write(pd, r->rkey, lo + 100, "a", 1);
			v.write(pd, r->rkey, lo + 12000, "b", 1);
			CHECK_EQ(v.dereg(r), 0);
		}
		rounds++;
	}
	__atomic_store_n(&m.stop, 1, __ATOMIC_RELEASE);
	pthread_join(t, NULL);
	CHECK(!m.bad);
	printf("  %d registrations across a remapped chunk\n", rounds);
	CHECK_EQ(v.calls("stale_writes"), 0);
	CHECK_EQ(v.stale(), 0);
	CU_OK(cuMemUnmap(m.va, 2 * m.gran));
	CU_OK(cuMemRelease(h0));
	CU_OK(cuMemAddressFree(m.va, 2 * m.gran));
	return 0;
}

/*
 * 6. A range whose end wraps past 2^64 is refused as the kernel refuses
 * it (EINVAL), never served from the cache as if inside an allocation.
 */
static int scenario_wrap64(void)
{
	struct ibv_pd *pd;
	CUdeviceptr a, va = 0;
	CUmemGenericAllocationHandle h;
	CUmemAllocationProp prop = { 0 };
	struct ibv_mr *m;
	size_t gran = 2 * MiB;

	setup();
	pd = v.alloc_pd(v.open());
	a = dev_alloc(MiB);
	/* warm the cache on it */
	m = v.reg(pd, (void *)a, 64, LW);
	CHECK(m != NULL);
	CHECK_EQ(v.dereg(m), 0);
	errno = 0;
	m = v.reg(pd, (void *)(a + 64), (size_t)(UINT64_MAX - (a + 64) + 4097),
		  LW);
	CHECK(m == NULL);
	CHECK_EQ(errno, EINVAL);
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = 0;
	CU_OK(cuMemAddressReserve(&va, 2 * gran, 0, 0, 0));
	CU_OK(cuMemCreate(&h, gran, &prop, 0));
	CU_OK(cuMemMap(va, gran, 0, h, 0));
	CU_OK(cuMemMap(va + gran, gran, 0, h, 0));
	m = v.reg(pd, (void *)va, 2 * gran, LW);	/* a span */
	CHECK(m != NULL);
	CHECK_EQ(v.dereg(m), 0);
	errno = 0;
	m = v.reg(pd, (void *)(va + 4096),
		  (size_t)(UINT64_MAX - (va + 4096) + 8193), LW | RW);
	CHECK(m == NULL);
	CHECK_EQ(errno, EINVAL);
	CU_OK(cuMemUnmap(va, 2 * gran));
	CU_OK(cuMemRelease(h));
	CU_OK(cuMemAddressFree(va, 2 * gran));
	CU_OK(cuMemFree(a));
	CHECK_EQ(v.stale(), 0);
	return 0;
}

/*
 * 7. A forked child (CUDA unusable there) frees GPU memory the parent
 * registered: the driver refuses, and the child must not deregister
 * anything (with real rdma-core those would be the parent's MRs).
 */
static int scenario_fork_free(void)
{
	struct ibv_pd *pd;
	struct ibv_mr *m, *e;
	CUdeviceptr a;
	unsigned long d0, d10;
	pid_t pid;
	int st;

	setup();
	pd = v.alloc_pd(v.open());
	a = dev_alloc(MiB);
	m = v.reg(pd, (void *)a, 4096, LW | RW);
	e = v.reg(pd, (void *)(a + 8192), 4096, LW);
	CHECK(m && e);
	d0 = v.calls("ibv_dereg_mr");
	d10 = v.calls("ibv_dereg_mr@IBVERBS_1.0");
	fflush(NULL);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		CUresult rc = cuMemFree(a);

		if (rc == CUDA_SUCCESS)
			_exit(3);
		/* the program's own dereg in the child stays its business;
		 * the shim's must not happen */
		if (v.calls("ibv_dereg_mr") != d0 ||
		    v.calls("ibv_dereg_mr@IBVERBS_1.0") != d10)
			_exit(4);
		_exit(0);
	}
	CHECK_EQ(waitpid(pid, &st, 0), pid);
	CHECK(WIFEXITED(st));
	CHECK_EQ(WEXITSTATUS(st), 0);
	CHECK_EQ(v.write(pd, m->rkey, a + 10, "ok", 2), 0);
	CHECK_EQ(v.dereg(m), 0);
	CHECK_EQ(v.dereg(e), 0);
	CU_OK(cuMemFree(a));
	CHECK_EQ(v.stale(), 0);
	return 0;
}

/*
 * 8. ibv_reg_mr@IBVERBS_1.0 on GPU memory: revoked by the free, whether
 * the compat entry calls the default one (rdma-core) or registers by
 * itself (FAKEVERBS_COMPAT_DIRECT=1: then it is refused).
 */
static int scenario_compat(void)
{
	dereg_fn dereg10;
	struct ibv_pd *pd;
	struct ibv_mr *m;
	CUdeviceptr a;

	setup();
	dereg10 = need(dlvsym(v.h, "ibv_dereg_mr", "IBVERBS_1.0"), "1.0");
	pd = v.alloc_pd(v.open());
	a = dev_alloc(MiB);
	m = v.reg10(pd, (void *)(a + 4096), 4096, LW | RW);
	if (m) {
		CHECK_EQ(v.write(pd, m->rkey, a + 4096, "in", 2), 0);
		a = realloc_same(a, MiB);
		CHECK(refused(pd, m->rkey, a + 4096));
		CHECK_EQ(dereg10(m), 0);
	} else {
		printf("  the 1.0 registration was refused (errno %d)\n", errno);
		CHECK(errno != 0);
	}
	/* host memory through it: untouched */
	{
		static char host[8192];

		m = v.reg10(pd, host, sizeof(host), LW);
		CHECK(m != NULL);
		CHECK_EQ(dereg10(m), 0);
	}
	CU_OK(cuMemFree(a));
	CHECK_EQ(v.calls("stale_writes"), 0);
	CHECK_EQ(v.stale(), 0);
	CHECK_EQ(v.live(), 0);
	return 0;
}

/*
 * 9 and 10 (exact exposure): each MR its own NIC registration, as
 * natively (the first rkey dies with its own ibv_dereg_mr while an
 * identical second one lives); the reg/dereg records name what was
 * registered, not the allocation.
 */
static int scenario_exact_own(void)
{
	struct ibv_pd *pd;
	struct ibv_mr *m1, *m2;
	CUdeviceptr a;
	uint32_t k1;

	setup();
	pd = v.alloc_pd(v.open());
	a = dev_alloc(MiB);
	m1 = v.reg(pd, (void *)(a + 4096), 512, LW | RW);
	m2 = v.reg(pd, (void *)(a + 4096), 512, LW | RW);
	CHECK(m1 && m2);
	k1 = m1->rkey;
	CHECK(k1 != m2->rkey);
	CHECK_EQ(v.dereg(m1), 0);
	CHECK(refused(pd, k1, a + 4096));
	CHECK_EQ(v.write(pd, m2->rkey, a + 4096, "ok", 2), 0);
	CHECK_EQ(v.dereg(m2), 0);
	CU_OK(cuMemFree(a));
	gdrhook_flush_log();
	return 0;
}

/* ------------------------------------------------------------ stress */

#define ST_SLOTS	3
#define ST_THREADS	4

static struct {
	struct ibv_pd *pd[2];
	/* slot k: an allocation that comes and goes at one address */
	CUdeviceptr base[ST_SLOTS];
	size_t size[ST_SLOTS];
	pthread_mutex_t lock[ST_SLOTS];
	int live[ST_SLOTS];
	int stop;	/* atomic */
	int exact;		/* a write past the MR is wider than asked */
	unsigned long regs, writes, taken, wider, bad;
} st;

static uint64_t xrand(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

static void *stress_thread(void *arg)
{
	uint64_t x = 0x9e3779b97f4a7c15ULL * (uintptr_t)arg + 1;
	struct ibv_mr *held = NULL;
	uint64_t h_addr = 0, h_len = 0;
	int h_pd = 0;

	thread_ctx();
	while (!__atomic_load_n(&st.stop, __ATOMIC_ACQUIRE)) {
		int k = (int)(xrand(&x) % ST_SLOTS), op = (int)(xrand(&x) % 8);

		if (op == 0) {
			/* free and reallocate slot k (same address) */
			CUdeviceptr b = 0;

			pthread_mutex_lock(&st.lock[k]);
			if (st.live[k]) {
				if (cuMemFree(st.base[k]))
					__atomic_add_fetch(&st.bad, 1, __ATOMIC_RELAXED);
				st.live[k] = 0;
			} else {
				if (cuMemAlloc(&b, st.size[k]) || b != st.base[k])
					__atomic_add_fetch(&st.bad, 1, __ATOMIC_RELAXED);
				st.live[k] = 1;
			}
			pthread_mutex_unlock(&st.lock[k]);
		} else if (op <= 3 || !held) {
			/* register somewhere in or across slot k (may be freed) */
			uint64_t off = xrand(&x) % st.size[k];
			uint64_t len = 1 + xrand(&x) % 20000;
			uint64_t addr = st.base[k] + off;
			int pd = (int)(xrand(&x) & 1);
			int how = (int)(xrand(&x) % 3);
			struct ibv_mr *m;

			if (held)
				v.dereg(held);
			held = NULL;
			m = how == 0 ? v.reg(st.pd[pd], (void *)addr, len, LW | RW) :
			    how == 1 ? v.reg2(st.pd[pd], (void *)addr, len,
					      addr + 4096, LW | RW) :
			    v.reg(st.pd[pd], (void *)addr, len,
				  LW | RW | IBV_ACCESS_REMOTE_READ);
			__atomic_add_fetch(&st.regs, 1, __ATOMIC_RELAXED);
			if (m) {
				held = m;
				h_addr = how == 1 ? addr + 4096 : addr;
				h_len = len;
				h_pd = pd;
			}
		} else if (op <= 5) {
			/* a peer writes through the held MR, inside or just past */
			uint64_t at = h_addr + xrand(&x) % (h_len + 64);
			int rc = v.write(st.pd[h_pd], held->rkey, at, "p", 1);

			__atomic_add_fetch(&st.writes, 1, __ATOMIC_RELAXED);
			if (!rc)
				__atomic_add_fetch(&st.taken, 1, __ATOMIC_RELAXED);
			if (!rc && at >= h_addr + h_len && st.exact)
				__atomic_add_fetch(&st.wider, 1, __ATOMIC_RELAXED);
		} else if (op == 6) {
			/* rereg: access, or a new translation in slot k */
			uint64_t addr = st.base[k] + xrand(&x) % st.size[k];
			int rc;

			if (xrand(&x) & 1) {
				rc = v.rereg(held, IBV_REREG_MR_CHANGE_ACCESS,
					     NULL, NULL, 0, LW | RW);
			} else {
				rc = v.rereg(held, IBV_REREG_MR_CHANGE_TRANSLATION,
					     NULL, (void *)addr, 4096, 0);
				if (!rc) {
					h_addr = addr;
					h_len = 4096;
				}
			}
			if (rc) {
				v.dereg(held);
				held = NULL;
			}
		} else {
			v.dereg(held);
			held = NULL;
		}
	}
	if (held)
		v.dereg(held);
	return NULL;
}

static int scenario_stress(void)
{
	const char *e = getenv("RACE_SECONDS");
	const char *ex = getenv("GDRHOOK_REMOTE_EXPOSURE");
	long secs = e ? atol(e) : 2;
	struct ibv_context *vc;
	pthread_t t[ST_THREADS];

	st.exact = !ex || strcmp(ex, "allocation");
	setup();
	vc = v.open();
	st.pd[0] = v.alloc_pd(vc);
	st.pd[1] = v.alloc_pd(vc);
	for (int k = 0; k < ST_SLOTS; k++) {
		st.size[k] = k == 2 ? 3 * MiB : 20000 + 30000 * (size_t)k;
		st.base[k] = dev_alloc(st.size[k]);
		st.live[k] = 1;
		pthread_mutex_init(&st.lock[k], NULL);
	}
	for (long i = 0; i < ST_THREADS; i++)
		CHECK_EQ(pthread_create(&t[i], NULL, stress_thread,
					(void *)(i + 1)), 0);
	sleep_us(secs * 1000000);
	__atomic_store_n(&st.stop, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < ST_THREADS; i++)
		pthread_join(t[i], NULL);
	printf("  %lu registrations, %lu peer writes (%lu taken, %lu past the MR), stale writes %lu\n",
	       st.regs, st.writes, st.taken, st.wider,
	       v.calls("stale_writes"));
	CHECK_EQ(st.bad, 0);
	CHECK_EQ(st.wider, 0);
	CHECK_EQ(v.calls("stale_writes"), 0);
	CHECK_EQ(v.stale(), 0);
	CHECK(st.regs > 0 && st.taken > 0);
	return 0;
}

/*
 * 6b. The process's first registrations, from many threads at once: the
 * cache, the backend and the lazily resolved driver entry points
 * (SYNC_MEMOPS) are set up by all of them together.  Each registration
 * must succeed and the context end with SYNC_MEMOPS.  (Under TSan this
 * seldom overlaps enough to show unsynchronized first-use state: the
 * SYNC_MEMOPS resolution race was caught by the stress below, in about
 * one process in a hundred.)
 */
#define FR_THREADS 8

struct first_reg {
	pthread_barrier_t *go;
	struct ibv_pd *pd;
	CUdeviceptr b;
	struct ibv_mr *mr;
};

static void *first_reg_thread(void *arg)
{
	struct first_reg *f = arg;

	thread_ctx();
	pthread_barrier_wait(f->go);
	f->mr = v.reg(f->pd, (void *)f->b, 4096, LW | RW);
	return NULL;
}

static int scenario_first_regs(void)
{
	struct first_reg f[FR_THREADS];
	pthread_t t[FR_THREADS];
	pthread_barrier_t go;
	struct ibv_pd *pd;
	unsigned int fl = 0;

	setup();
	pd = v.alloc_pd(v.open());
	CHECK_EQ(pthread_barrier_init(&go, NULL, FR_THREADS), 0);
	for (int i = 0; i < FR_THREADS; i++) {
		f[i] = (struct first_reg){ &go, pd, dev_alloc(MiB), NULL };
		CHECK_EQ(pthread_create(&t[i], NULL, first_reg_thread, &f[i]),
			 0);
	}
	for (int i = 0; i < FR_THREADS; i++)
		pthread_join(t[i], NULL);
	CU_OK(cuCtxGetFlags(&fl));
	CHECK(fl & CU_CTX_SYNC_MEMOPS);
	for (int i = 0; i < FR_THREADS; i++) {
		CHECK(f[i].mr != NULL);
		CHECK_EQ(v.dereg(f[i].mr), 0);
		CU_OK(cuMemFree(f[i].b));
	}
	pthread_barrier_destroy(&go);
	return 0;
}

/*
 * 6c. A program that starts and ends threads all its life: after 300
 * short-lived threads made memory calls, four new ones churn allocations
 * (every call holding the double's lock, so each is nearly always inside
 * one), and wrapped registrations on the main thread must each succeed
 * within a moment: the ended threads' in-flight marks went to the new
 * ones, so settle waits for each churner's own call to end, not for an
 * instant when none of them is in a call (what one mark shared by every
 * thread past the first 255 needed: a second's wait, then a refusal,
 * every time).
 */
static void *short_lived_thread(void *arg)
{
	thread_ctx();
	CU_OK(cuMemFree(dev_alloc(4096)));
	return arg;
}

/* Its own buffers, allocated and freed until c->stop (c->b unused). */
static void *own_churn_thread(void *arg)
{
	struct churn *c = arg;

	thread_ctx();
	while (!__atomic_load_n(&c->stop, __ATOMIC_ACQUIRE)) {
		CUdeviceptr b;

		if (cuMemAlloc(&b, 4096) || cuMemFree(b)) {
			c->bad = 1;
			break;
		}
	}
	return NULL;
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int scenario_thread_churn(void)
{
	struct churn c = { 0 };
	pthread_t t[4];
	struct ibv_pd *pd;
	CUdeviceptr a, b, lo;
	uint64_t worst = 0;

	setup();
	pd = v.alloc_pd(v.open());
	a = dev_alloc(10000);
	b = dev_alloc(10000);
	CHECK(b > a);
	lo = a + 9000;
	for (int i = 0; i < 300; i++) {
		pthread_t s;

		CHECK_EQ(pthread_create(&s, NULL, short_lived_thread, NULL), 0);
		CHECK_EQ(pthread_join(s, NULL), 0);
	}
	for (int i = 0; i < 4; i++)
		CHECK_EQ(pthread_create(&t[i], NULL, own_churn_thread, &c), 0);
	for (int i = 0; i < 40; i++) {
		uint64_t t0 = mono_ns(), dt;
		struct ibv_mr *m = v.reg(pd, (void *)lo, b + 1000 - lo,
					 LW | RW);

		dt = mono_ns() - t0;
		if (dt > worst)
			worst = dt;
		CHECK(m != NULL);
		CHECK_EQ(v.write(pd, m->rkey, b + 500, "x", 1), 0);
		CHECK_EQ(v.dereg(m), 0);
	}
	__atomic_store_n(&c.stop, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	CHECK(!c.bad);
	printf("  40 wrapped registrations beside 4 churning threads, after 300 ended threads: slowest %llu us\n",
	       (unsigned long long)(worst / 1000));
	CHECK_EQ(v.stale(), 0);
	return 0;
}

/*
 * 6d. The same address freed and allocated again by threads that come and
 * go (each does it 20 times and ends; a new one follows), while wrapped
 * registrations across it and its neighbour run with peer writes: the
 * in-flight marks change hands under registrations in flight, and still
 * no write lands in memory the registration no longer reaches.
 */
static void *short_churn_thread(void *arg)
{
	struct churn *c = arg;

	thread_ctx();
	for (int i = 0; i < 20 && !__atomic_load_n(&c->stop, __ATOMIC_ACQUIRE);
	     i++) {
		CUdeviceptr nb = 0;

		if (cuMemFree(c->b) || cuMemAlloc(&nb, c->n) || nb != c->b) {
			c->bad = 1;
			break;
		}
	}
	return NULL;
}

static void *spawn_churners(void *arg)
{
	struct churn *c = arg;
	long n = 0;

	while (!__atomic_load_n(&c->stop, __ATOMIC_ACQUIRE) && !c->bad) {
		pthread_t t;

		if (pthread_create(&t, NULL, short_churn_thread, c)) {
			c->bad = 1;
			break;
		}
		pthread_join(t, NULL);
		n++;
	}
	return (void *)n;
}

static int scenario_thread_churn_aba(void)
{
	void *spawned = NULL;

	wrap_across_churn(spawn_churners,
			  "a neighbour reallocated by threads that come and go",
			  &spawned);
	printf("  %ld threads, each reallocating it 20 times\n",
	       (long)spawned);
	CHECK((long)spawned > 1);
	return 0;
}

static const struct scenario scenarios[] = {
	{ "rereg_revoked", scenario_rereg_revoked },
	{ "wrap_aba", scenario_wrap_aba },
	{ "pass_toctou", scenario_pass_toctou },
	{ "wrap_churn", scenario_wrap_churn },
	{ "vmm_churn", scenario_vmm_churn },
	{ "wrap64", scenario_wrap64 },
	{ "fork_free", scenario_fork_free },
	{ "compat", scenario_compat },
	{ "exact_own", scenario_exact_own },
	{ "stress", scenario_stress },
	{ "first_regs", scenario_first_regs },
	{ "thread_churn", scenario_thread_churn },
	{ "thread_churn_aba", scenario_thread_churn_aba },
};

/* ------------------------------------------------------------- cases */

TEST(rereg_never_revives_a_revoked_mr)
{
	each_backend("rereg_revoked", NULL);
}

TEST_TIMEOUT(wrap_aba_with_a_slow_nic, 120)
{
	each_backend("wrap_aba", "FAKEVERBS_REG_DELAY_US=50000");
}

TEST_TIMEOUT(pass_through_toctou_with_a_slow_nic, 120)
{
	each_backend("pass_toctou", "FAKEVERBS_PIN_DELAY_US=50000");
}

TEST_TIMEOUT(wrapped_across_a_churned_neighbour, 120)
{
	each_backend("wrap_churn", NULL);
}

TEST_TIMEOUT(across_vmm_chunks_while_one_is_remapped, 120)
{
	each_backend("vmm_churn", NULL);
}

TEST(range_wrapping_past_2_64_refused)
{
	each_backend("wrap64", NULL);
}

TEST(forked_child_free_deregisters_nothing)
{
	each_backend("fork_free", NULL);
}

TEST(compat_1_0_registration_revoked)
{
	each_backend("compat", NULL);
	each_backend("compat", "FAKEVERBS_COMPAT_DIRECT=1");
}

TEST(first_registrations_from_many_threads_at_once)
{
	for (int i = 0; i < 3; i++)
		each_backend("first_regs", NULL);
}

TEST_TIMEOUT(registrations_beside_threads_that_come_and_go, 180)
{
	each_backend("thread_churn", "FAKECUDA_ALLOC_HOLD_NS=20000");
}

TEST_TIMEOUT(same_address_reallocated_by_threads_that_come_and_go, 120)
{
	each_backend("thread_churn_aba", NULL);
}

TEST(exact_each_mr_its_own_registration_and_record)
{
	char path[512], envlog[600];
	const char *env[] = { "GDRHOOK_BACKEND=dmabuf",
			      "GDRHOOK_REMOTE_EXPOSURE=exact", envlog, NULL };

	log_path(path, sizeof(path), "races");
	snprintf(envlog, sizeof(envlog), "GDRHOOK_TRACE=%s", path);
	CHECK_EQ(run_scenario("exact_own", env), 0);
	CHECK(LOG_COUNT(path, "\"ev\":\"reg\"", "\"size\":512") >= 2);
	/* allocation-wide only as a window's parent: LOCAL_WRITE|MW_BIND */
	CHECK_EQ(LOG_COUNT(path, "\"ev\":\"reg\"", "\"size\":1048576"),
		 LOG_COUNT(path, "\"ev\":\"reg\"", "\"size\":1048576",
			   "\"access\":17,"));
	CHECK(LOG_COUNT(path, "\"ev\":\"dereg\"", "\"size\":512") >= 2);
	unlink(path);
}

/*
 * The cached backends, both exposures; a slow NIC (the windows are
 * wide).  Where registrations pass through (backend none; gdrpin
 * without /dev/gdrpin) the shim promises only what libibverbs does: a
 * program that frees memory under its own MR has a stale MR natively
 * too, so this racing program is not run there.
 */
TEST_TIMEOUT(race_stress_every_peer_write_checked, 600)
{
	each_backend("stress", "FAKEVERBS_REG_DELAY_US=300");
	each_backend("stress", "FAKEVERBS_PIN_DELAY_US=300");
	/* exact exposure without memory windows: a NIC registration each */
	each_backend("stress", "GDRHOOK_WINDOWS=0");
}

SCENARIO_MAIN(scenarios)
