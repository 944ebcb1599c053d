// SPDX-License-Identifier: MIT
/*
 * The verbs hooks and the registration cache end to end: LD_PRELOAD=
 * libgdrhook.so, the CUDA driver double (build/fake) and the libibverbs
 * double (build/fakeverbs, found through this program's RUNPATH), loaded
 * the way NCCL does it: dlopen("libibverbs.so.1") + dlvsym(handle, ...,
 * "IBVERBS_1.1").  Each case runs in a fresh process with its own
 * GDRHOOK_* settings (run_scenario).
 */
#include <cuda.h>
#include <dlfcn.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "preload_util.h"
#include "fakeverbs.h"
#include "verbs_load.h"

static int count_fds(void)
{
	return th_dir_entries("/proc/self/fd") - 1;	/* the directory's own */
}

/* ---------------------------------------------------------- scenarios */

/* Routes: the wrappers are handed out for the default versions only. */
static int scenario_routes(void)
{
	primary_ctx(0);
	verbs_load();
	CHECK(in_shim(v.reg));
	CHECK(in_shim(v.reg10));	/* compat ABI: watched (reg_mr_1_0) */
	CHECK(in_shim(v.reg2));
	CHECK(in_shim(v.dmabuf));
	CHECK(in_shim(v.rereg));
	CHECK(in_shim(v.dereg));
	CHECK(in_shim(v.dealloc_pd));
	CHECK(in_shim(v.close_dev));
	CHECK(!in_shim(v.alloc_pd));	/* not hooked */
	CHECK(in_shim(dlsym(v.h, "ibv_reg_mr")));
	CHECK(!in_shim(dlvsym(v.h, "ibv_dereg_mr", "IBVERBS_1.0")));
	/* The ELF route: our export, which finds the real one by itself
	 * although libibverbs is not in the global scope. */
	CHECK(in_shim(dlsym(RTLD_DEFAULT, "ibv_reg_mr")));
	{
		struct ibv_pd *pd = v.alloc_pd(v.open());
		reg_fn elf = (reg_fn)dlsym(RTLD_DEFAULT, "ibv_reg_mr");
		char buf[64];
		struct ibv_mr *mr = elf(pd, buf, sizeof(buf), LW);

		struct gdrhook_stats st = { .size = sizeof(st) };

		CHECK(mr && v.is_mr(mr));	/* host memory: untouched */
		CHECK_EQ(v.dereg(mr), 0);
		/* ... but seen, and counted as such */
		CHECK_EQ(gdrhook_get_stats(&st), 0);
		CHECK_EQ(st.regs_seen, 1);
		CHECK_EQ(st.regs_passed, 1);
		CHECK_EQ(st.rcache_hits + st.rcache_misses, 0);
	}
	return 0;
}

/* The cache on the dmabuf backend, with an RDMA write after reuse. */
static int scenario_cache(const char *backend)
{
	struct ibv_context *vctx;
	struct ibv_pd *pd, *pd2;
	struct ibv_mr *a, *b, *held, *m;
	unsigned long dm0, r20;
	CUdeviceptr d, d2;
	char host[256];
	int dmabuf = !strcmp(backend, "dmabuf");
	const char *reg_ep = dmabuf ? "ibv_reg_dmabuf_mr" : "ibv_reg_mr_iova2";

	primary_ctx(0);
	verbs_load();
	vctx = v.open();
	pd = v.alloc_pd(vctx);
	pd2 = v.alloc_pd(vctx);
	d = dev_alloc(4 * MiB);

	/* Host memory passes through untouched, seen once. */
	r20 = v.calls("ibv_reg_mr_iova2");
	a = v.reg(pd, host, sizeof(host), LW);
	CHECK(a && v.is_mr(a));
	CHECK_EQ(v.calls("ibv_reg_mr_iova2"), r20 + 1);
	CHECK_EQ(v.dereg(a), 0);

	/* First GPU registration: pins and registers the whole allocation. */
	dm0 = v.calls(reg_ep);
	a = v.reg(pd, (void *)(d + 4096), 65536, LW | RW);
	CHECK(a && !v.is_mr(a));	/* an alias */
	CHECK_EQ(v.calls(reg_ep), dm0 + 1);
	CHECK_EQ((uintptr_t)a->addr, d + 4096);
	CHECK_EQ(a->length, 65536);
	/* Anywhere inside it, any entry point: hits. */
	b = v.reg2(pd, (void *)d, 128, d, LW);
	CHECK(b && b != a && b->lkey == a->lkey);
	CHECK_EQ(v.calls(reg_ep), dm0 + 1);
	CHECK_EQ(v.calls("ibv_reg_mr"), 1);	/* only the host one */

	/* What a peer can do with the rkey: the allocation, this PD. */
	CHECK_EQ(v.write(pd, a->rkey, d + 4096, "hello", 6), 0);
	CHECK(!memcmp((void *)(d + 4096), "hello", 6));
	CHECK_EQ(v.write(pd, a->rkey, d + 4 * MiB - 4, "edge", 5), -ERANGE);
	CHECK_EQ(v.write(pd, a->rkey, d + 4 * MiB - 4, "edge", 4), 0);
	CHECK_EQ(v.write(pd, a->rkey, d + 4 * MiB, "past", 4), -ERANGE);
	CHECK_EQ(v.write(pd2, a->rkey, d, "pd", 2), -EPERM);

	/* Lazy: dereg keeps the registration. */
	CHECK_EQ(v.dereg(b), 0);
	CHECK_EQ(v.dereg(a), 0);
	CHECK_EQ(v.live(), 1);
	held = v.reg(pd, (void *)d, 64, LW | RW);
	CHECK_EQ(v.calls(reg_ep), dm0 + 1);

	/* Free: deregistered before the real free, held one included. */
	CU_OK(cuMemFree(d));
	CHECK_EQ(v.live(), 0);
	CHECK_EQ(v.stale(), 0);
	CHECK_EQ(v.dereg(held), 0);		/* revoked: no-op, succeeds */

	/* Same address again: a miss, and the data lands in the new buffer. */
	d2 = dev_alloc(4 * MiB);
	if (d2 != d)
		printf("  note: the driver double did not reuse the address\n");
	m = v.reg(pd, (void *)d2, 64, LW | RW);
	CHECK_EQ(v.calls(reg_ep), dm0 + 2);
	CHECK_EQ(v.write(pd, m->rkey, d2 + 100, "new", 4), 0);
	CHECK(!memcmp((void *)(d2 + 100), "new", 4));
	CHECK_EQ(v.stale(), 0);
	CHECK_EQ(v.calls("stale_writes"), 0);

	/* ibv_rereg_mr of an alias onto host memory, then dereg. */
	CHECK_EQ(v.rereg(m, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, host,
			 sizeof(host), 0), 0);
	CHECK_EQ((uintptr_t)m->addr, (uintptr_t)host);
	CHECK_EQ(v.live(), 2);		/* cached (idle) + the host one */
	CHECK_EQ(v.dereg(m), 0);
	CHECK_EQ(v.live(), 1);

	/* Our idle cached MR must not make ibv_dealloc_pd fail. */
	CHECK_EQ(v.dealloc_pd(pd), 0);
	CHECK_EQ(v.live(), 0);

	/* Pool memory is never cached, but a free still revokes it. */
	{
		CUdeviceptr p = 0;
		struct ibv_mr *x, *y;
		unsigned long n;

		CU_OK(cuMemAllocAsync(&p, 2 * MiB, NULL));
		n = v.calls("ibv_reg_mr_iova2") + v.calls("ibv_reg_dmabuf_mr");
		x = v.reg(pd2, (void *)p, 64, LW);
		y = v.reg(pd2, (void *)p, 64, LW);
		CHECK(x && y && !v.is_mr(x) && x->lkey != y->lkey);
		CHECK_EQ(v.calls("ibv_reg_mr_iova2") +
			 v.calls("ibv_reg_dmabuf_mr"), n + 2);
		CHECK_EQ(v.dereg(y), 0);
		CHECK_EQ(v.live(), 1);
		CU_OK(cuMemFreeAsync(p, NULL));
		CHECK_EQ(v.live(), 0);
		CHECK_EQ(v.dereg(x), 0);
	}
	/* The export fails (twice: the retry after eviction too): the
	 * registration still works, uncached, and is still revoked by free. */
	if (dmabuf) {
		unsigned long n = v.calls("ibv_reg_mr_iova2");
		struct ibv_mr *x;

		d = dev_alloc(2 * MiB);
		fake_fail_next("cuMemGetHandleForAddressRange",
			       CUDA_ERROR_OUT_OF_MEMORY, 2);
		x = v.reg(pd2, (void *)d, 64, LW);
		CHECK(x && !v.is_mr(x));
		CHECK_EQ(v.calls("ibv_reg_mr_iova2"), n + 1);
		CU_OK(cuMemFree(d));
		CHECK_EQ(v.live(), 0);
		CHECK_EQ(v.dereg(x), 0);
	}
	/* Closing the device drops (revokes) everything of it. */
	d = dev_alloc(2 * MiB);
	held = v.reg(pd2, (void *)d, 64, LW);
	CHECK_EQ(v.live(), 1);
	CHECK_EQ(v.close_dev(vctx), 0);
	CHECK_EQ(v.live(), 0);
	CHECK_EQ(v.dereg(held), 0);
	return 0;
}

static int scenario_dmabuf(void)
{
	return scenario_cache("dmabuf");
}

static int scenario_peermem(void)
{
	return scenario_cache("peermem");
}

/* GDRHOOK_BACKEND=none: every registration reaches libibverbs as is. */
static int scenario_none(void)
{
	struct ibv_pd *pd;
	struct ibv_mr *a, *b;
	CUdeviceptr d;

	primary_ctx(0);
	verbs_load();
	pd = v.alloc_pd(v.open());
	d = dev_alloc(MiB);
	a = v.reg(pd, (void *)d, 64, LW);
	b = v.reg(pd, (void *)d, 64, LW);
	CHECK(v.is_mr(a) && v.is_mr(b));
	CHECK_EQ(v.calls("ibv_reg_mr"), 2);
	CHECK_EQ(v.calls("ibv_reg_mr_iova2"), 2);	/* nested: seen once */
	CHECK_EQ(v.dereg(a), 0);
	CHECK_EQ(v.dereg(b), 0);
	CU_OK(cuMemFree(d));
	return 0;
}

/* Auto choice: the double exports DMA-BUF, has ibv_reg_dmabuf_mr, and
 * its NIC imports DMA-BUF; no peer-memory client (FAKEVERBS_PEERMEM=0),
 * so exact exposure has no window-capable parent to prefer. */
static int scenario_auto(void)
{
	struct ibv_pd *pd;
	struct ibv_mr *a;
	CUdeviceptr d;

	primary_ctx(0);
	verbs_load();
	pd = v.alloc_pd(v.open());
	d = dev_alloc(MiB);
	a = v.reg(pd, (void *)d, 64, LW);
	CHECK(a && !v.is_mr(a));
	/* the NIC-import probe, then the registration */
	CHECK_EQ(v.calls("ibv_reg_dmabuf_mr"), 2);
	CHECK_EQ(v.dereg(a), 0);
	CU_OK(cuMemFree(d));
	CHECK_EQ(v.live(), 0);
	return 0;
}

#define FD_SCAN	4096

/*
 * A program that closes the descriptors it did not open (a daemon's
 * close-all) and opens its own file on each of those numbers: the
 * cache's export is neither registered through nor closed by number.  A
 * registration on a second PD (the held export is needed again) gets a
 * fresh one and reaches the memory; the free leaves the program's files
 * open.
 */
static int scenario_fd_reuse(void)
{
	static char before[FD_SCAN];
	struct ibv_pd *pd1, *pd2;
	struct ibv_mr *a, *b;
	struct stat null_st, st;
	int taken[64], nt = 0;
	CUdeviceptr d;
	char got = 0;

	primary_ctx(0);
	verbs_load();
	pd1 = v.alloc_pd(v.open());
	pd2 = v.alloc_pd(v.open());
	d = dev_alloc(MiB);
	CHECK_EQ(stat("/dev/null", &null_st), 0);
	for (int fd = 0; fd < FD_SCAN; fd++)
		before[fd] = fcntl(fd, F_GETFD) >= 0;
	a = v.reg(pd1, (void *)d, 64, LW | RW);
	CHECK(a != NULL);
	for (int fd = 3; fd < FD_SCAN && nt < 64; fd++) {
		int nul;

		if (before[fd] || fcntl(fd, F_GETFD) < 0)
			continue;
		nul = open("/dev/null", O_RDONLY);
		CHECK(nul >= 0);
		CHECK_EQ(dup2(nul, fd), fd);
		close(nul);
		taken[nt++] = fd;
	}
	CHECK(nt >= 1);		/* the export the cache holds */
	b = v.reg(pd2, (void *)(d + 4096), 64, LW | RW);
	CHECK(b != NULL);
	CHECK_EQ(v.write(pd2, b->rkey, d + 4096, "x", 1), 0);
	CU_OK(cuMemcpyDtoH(&got, d + 4096, 1));
	CHECK_EQ(got, 'x');
	CHECK_EQ(v.dereg(a), 0);
	CHECK_EQ(v.dereg(b), 0);
	CU_OK(cuMemFree(d));
	CHECK_EQ(v.live(), 0);
	for (int i = 0; i < nt; i++) {
		CHECK_EQ(fstat(taken[i], &st), 0);
		CHECK(st.st_rdev == null_st.st_rdev && S_ISCHR(st.st_mode));
	}
	CHECK_EQ(v.calls("stale_writes"), 0);
	return 0;
}

/* BUFFER_ID answered from the registry. */
static int scenario_buffer_id(void)
{
	const char *mode = getenv("GDRHOOK_BUFFER_ID");
	int driver = mode && !strcmp(mode, "driver");
	struct gdrhook_range r;
	unsigned long long id = 0, id2 = 0, id3 = 0;
	unsigned long before;
	CUpointer_attribute at[2] = { CU_POINTER_ATTRIBUTE_BUFFER_ID,
				      CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL };
	int ord = -5;
	void *data[2] = { &id3, &ord };
	CUdeviceptr d;

	primary_ctx(0);
	d = dev_alloc(MiB);
	CHECK_EQ(tracked(d, &r), 0);
	before = fake_calls("cuPointerGetAttribute");
	CU_OK(cuPointerGetAttribute(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID,
				    d + 100));
	if (driver) {
		CHECK_EQ(fake_calls("cuPointerGetAttribute"), before + 1);
		CHECK(id != (r.gen | (1ULL << 63)));
	} else {
		CHECK_EQ(fake_calls("cuPointerGetAttribute"), before);
		CHECK_EQ(id, r.gen | (1ULL << 63));
	}
	CU_OK(cuPointerGetAttributes(2, at, data, d));
	CHECK_EQ(id3, id);
	CHECK_EQ(ord, 0);
	/* Other attributes still come from the driver. */
	{
		CUcontext c = NULL;

		CU_OK(cuPointerGetAttribute(&c, CU_POINTER_ATTRIBUTE_CONTEXT, d));
		CHECK(c != NULL);
	}
	/* Free and reallocate at the same address: a different ID. */
	CU_OK(cuMemFree(d));
	d = dev_alloc(MiB);
	CU_OK(cuPointerGetAttribute(&id2, CU_POINTER_ATTRIBUTE_BUFFER_ID, d));
	CHECK(id2 != id);
	/* Untracked pointers go to the driver (which refuses them). */
	CHECK(cuPointerGetAttribute(&id2, CU_POINTER_ATTRIBUTE_BUFFER_ID,
				    (CUdeviceptr)(uintptr_t)&id2) != CUDA_SUCCESS);
	CU_OK(cuMemFree(d));
	return 0;
}

/* The event log records pins, registrations, hits, misses, revocations. */
static int scenario_log(void)
{
	scenario_cache("dmabuf");
	gdrhook_flush_log();
	return 0;
}

/*
 * Seen 1: registrations that straddle two allocations, run one byte past
 * one, or cover several are never handed out unwrapped: the free of any
 * allocation they touch makes the NIC refuse their rkey.
 */
static int scenario_straddle(void)
{
	struct ibv_pd *pd;
	struct ibv_mr *m;
	CUdeviceptr a, b, lo, hi, c[4];
	uint64_t len;

	primary_ctx(0);
	verbs_load();
	pd = v.alloc_pd(v.open());
	a = dev_alloc(10000);
	b = dev_alloc(10000);
	lo = a < b ? a : b;
	hi = a < b ? b : a;
	printf("  A %#llx, B %#llx (%llu bytes apart)\n", (unsigned long long)lo,
	       (unsigned long long)hi, (unsigned long long)(hi - lo));
	/* A + 9000 into B (hi - lo: 10000 adjacent, 65536 rounded) */
	len = hi - (lo + 9000) + 1000;
	m = v.reg(pd, (void *)(lo + 9000), len, LW | RW);
	CHECK(m != NULL);
	CHECK(!v.is_mr(m));		/* wrapped */
	CHECK_EQ(v.write(pd, m->rkey, lo + 9000, "ok", 2), 0);
	CU_OK(cuMemFree(lo));
	CHECK(refused(pd, m->rkey, lo + 9000));
	CHECK(refused(pd, m->rkey, hi));
	CHECK_EQ(v.stale(), 0);
	CHECK_EQ(v.dereg(m), 0);
	/* the other one's free revokes it too */
	lo = dev_alloc(10000);
	m = v.reg2(pd, (void *)(lo + 9000), len, lo + 9000, LW | RW);
	CHECK(m && !v.is_mr(m));
	CU_OK(cuMemFree(hi));
	CHECK(refused(pd, m->rkey, lo + 9000));
	CHECK_EQ(v.stale(), 0);
	CHECK_EQ(v.dereg(m), 0);
	/* one byte past the end of one allocation */
	m = v.reg(pd, (void *)(lo + 5000), 5001, LW | RW);
	CHECK(m && !v.is_mr(m));
	CU_OK(cuMemFree(lo));
	CHECK(refused(pd, m->rkey, lo + 5000));
	CHECK_EQ(v.stale(), 0);
	CHECK_EQ(v.dereg(m), 0);
	/* several allocations; the program's dmabuf of tracked memory too */
	for (int i = 0; i < 4; i++)
		c[i] = dev_alloc(MiB);
	lo = hi = c[0];
	for (int i = 1; i < 4; i++) {
		lo = c[i] < lo ? c[i] : lo;
		hi = c[i] > hi ? c[i] : hi;
	}
	m = v.reg(pd, (void *)lo, hi + MiB - lo, LW | RW);
	CHECK(m && !v.is_mr(m));
	CU_OK(cuMemFree(c[2]));
	CHECK(refused(pd, m->rkey, lo));
	CHECK_EQ(v.dereg(m), 0);
	for (int i = 0; i < 4; i++)
		if (i != 2)
			CU_OK(cuMemFree(c[i]));
	CHECK_EQ(v.live(), 0);
	CHECK_EQ(v.stale(), 0);
	CHECK_EQ(v.calls("stale_writes"), 0);
	return 0;
}

/*
 * Seen 2 and 3: ibv_rereg_mr takes effect as natively (all three flags,
 * rdma-core's input errors), and with exact exposure (the default) an
 * rkey reaches exactly what was registered and dies with ibv_dereg_mr.
 */
static int scenario_rereg(void)
{
	struct ibv_context *vctx;
	struct ibv_pd *pd, *pd2;
	struct ibv_mr *m, *keep;
	uint32_t old;
	CUdeviceptr a;

	primary_ctx(0);
	verbs_load();
	vctx = v.open();
	pd = v.alloc_pd(vctx);
	pd2 = v.alloc_pd(vctx);
	a = dev_alloc(4 * MiB);
	m = v.reg(pd, (void *)(a + 4096), 512, LW | RW);
	CHECK(m && !v.is_mr(m));
	CHECK_EQ(v.write(pd, m->rkey, a + 4096, "in", 2), 0);
	/* exact: 512 bytes, not the allocation */
	CHECK(refused(pd, m->rkey, a + 4096 + 512));
	CHECK(refused(pd, m->rkey, a));
	/* input errors, as rdma-core: nothing changes */
	errno = 0;
	CHECK_EQ(v.rereg(m, 0x100, NULL, NULL, 0, 0), IBV_REREG_MR_ERR_INPUT);
	CHECK_EQ(errno, EINVAL);
	errno = 0;
	CHECK_EQ(v.rereg(m, IBV_REREG_MR_CHANGE_PD, pd2, NULL, 0, LW),
		 IBV_REREG_MR_ERR_INPUT);
	CHECK_EQ(errno, EINVAL);
	errno = 0;
	CHECK_EQ(v.rereg(m, IBV_REREG_MR_CHANGE_TRANSLATION, NULL,
			 (void *)a, 0, 0), IBV_REREG_MR_ERR_INPUT);
	CHECK_EQ(errno, EINVAL);
	CHECK_EQ(v.write(pd, m->rkey, a + 4096, "in", 2), 0);
	/* narrowing the access: the peer's write is refused at once */
	old = m->rkey;
	CHECK_EQ(v.rereg(m, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, LW), 0);
	CHECK(refused(pd, m->rkey, a + 4096));
	CHECK(refused(pd, old, a + 4096));
	/* widening again, then moving the range: the old range is gone */
	CHECK_EQ(v.rereg(m, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			 LW | RW), 0);
	CHECK_EQ(v.write(pd, m->rkey, a + 4096, "in", 2), 0);
	old = m->rkey;
	CHECK_EQ(v.rereg(m, IBV_REREG_MR_CHANGE_TRANSLATION, NULL,
			 (void *)(a + 65536), 1024, 0), 0);
	CHECK_EQ((uintptr_t)m->addr, a + 65536);
	CHECK_EQ(m->length, 1024);
	CHECK(refused(pd, old, a + 4096));
	CHECK(refused(pd, m->rkey, a + 4096));
	CHECK_EQ(v.write(pd, m->rkey, a + 65536 + 1000, "in", 2), 0);
	/* another PD: the old one loses it */
	old = m->rkey;
	CHECK_EQ(v.rereg(m, IBV_REREG_MR_CHANGE_PD, pd2, NULL, 0, 0), 0);
	CHECK(m->pd == pd2);
	CHECK(refused(pd, m->rkey, a + 65536));
	CHECK(refused(pd, old, a + 65536));
	CHECK_EQ(v.write(pd2, m->rkey, a + 65536, "in", 2), 0);
	/* all three at once */
	CHECK_EQ(v.rereg(m, IBV_REREG_MR_CHANGE_PD |
			 IBV_REREG_MR_CHANGE_TRANSLATION |
			 IBV_REREG_MR_CHANGE_ACCESS, pd, (void *)(a + 8192),
			 256, LW | RW), 0);
	CHECK(refused(pd2, m->rkey, a + 8192));
	CHECK(refused(pd, m->rkey, a + 65536));
	CHECK_EQ(v.write(pd, m->rkey, a + 8192 + 255, "i", 1), 0);
	CHECK(refused(pd, m->rkey, a + 8192 + 256));
	/* the NIC refuses the new registration: ERR_CMD, old grant gone */
	old = m->rkey;
	errno = 0;
	CHECK_EQ(v.rereg(m, IBV_REREG_MR_CHANGE_PD, NULL, NULL, 0, 0),
		 IBV_REREG_MR_ERR_CMD);
	CHECK(errno != 0);
	CHECK(refused(pd, old, a + 8192));
	CHECK_EQ(v.dereg(m), 0);
	/* exact: ibv_dereg_mr kills the rkey, even with another MR alive */
	keep = v.reg(pd, (void *)(a + 100), 64, LW);
	m = v.reg(pd, (void *)(a + 4096), 512, LW | RW);
	old = m->rkey;
	CHECK_EQ(v.dereg(m), 0);
	CHECK(refused(pd, old, a + 4096));
	CHECK_EQ(v.dereg(keep), 0);
	CU_OK(cuMemFree(a));
	CHECK_EQ(v.live(), 0);
	CHECK_EQ(v.stale(), 0);
	CHECK_EQ(v.calls("stale_writes"), 0);
	return 0;
}

/*
 * An MR libibverbs made on host memory, moved onto GPU memory by the
 * program's own ibv_rereg_mr: the free still revokes it first, and the
 * program's ibv_dereg_mr of it still works.
 */
static int scenario_adopt(void)
{
	static char host[8192] __attribute__((aligned(4096)));
	struct ibv_pd *pd;
	struct ibv_mr *h;
	CUdeviceptr a, b;
	uint32_t rkey;

	primary_ctx(0);
	verbs_load();
	pd = v.alloc_pd(v.open());
	a = dev_alloc(MiB);
	b = dev_alloc(MiB);
	h = v.reg(pd, host, sizeof(host), LW | RW);
	CHECK(h && v.is_mr(h));		/* host memory: libibverbs' own */
	CHECK_EQ(v.rereg(h, IBV_REREG_MR_CHANGE_TRANSLATION, NULL,
			 (void *)(a + 4096), 512, 0), 0);
	CHECK_EQ(v.write(pd, h->rkey, a + 4096, "in", 2), 0);
	CU_OK(cuMemFree(a));
	CHECK(refused(pd, h->rkey, a + 4096));
	CHECK_EQ(v.stale(), 0);
	/*
	 * The free took its access away: a rereg of the range alone would
	 * succeed with none (the random stress found it), so it fails as a
	 * command; the access alone too.
	 */
	errno = 0;
	CHECK_EQ(v.rereg(h, IBV_REREG_MR_CHANGE_TRANSLATION, NULL,
			 (void *)b, 4096, 0), IBV_REREG_MR_ERR_CMD);
	CHECK_EQ(errno, EINVAL);
	CHECK_EQ(v.rereg(h, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			 LW | RW), IBV_REREG_MR_ERR_CMD);
	CHECK(refused(pd, h->rkey, b + 100));
	/* moved again (onto b), then the program deregisters it */
	CHECK_EQ(v.rereg(h, IBV_REREG_MR_CHANGE_TRANSLATION |
			 IBV_REREG_MR_CHANGE_ACCESS, NULL, (void *)b, 4096,
			 LW | RW), 0);
	CHECK_EQ(v.write(pd, h->rkey, b + 100, "in", 2), 0);
	rkey = h->rkey;
	CHECK_EQ(v.dereg(h), 0);
	CHECK(refused(pd, rkey, b + 100));
	CU_OK(cuMemFree(b));
	CHECK_EQ(v.live(), 0);
	CHECK_EQ(v.calls("stale_writes"), 0);
	return 0;
}

/*
 * Random shapes over the fake NIC, on the backend of the environment
 * (GDRHOOK_BACKEND) and the exposure policy of the environment
 * (GDRHOOK_REMOTE_EXPOSURE): registrations of random offsets and lengths
 * (inside one allocation, across 64 KiB pin granules, straddling,
 * running past an end), in one of three PDs, with random access flags;
 * random deregistrations, rereg of access or range, frees and new
 * allocations.  After every step a peer writes through a random held
 * MR's rkey at a random address near it, in its PD or another.  The NIC
 * must take every write the program's MR grants (remote write, its
 * range, its PD, everything under it still allocated); it may take a
 * write outside that only where the exposure policy allows: never with
 * exact, and with allocation only inside a live allocation the MR was
 * made in, in its PD, when that PD was granted remote write there.  No
 * write may reach freed memory (the fake NIC counts stale writes).
 *
 * Where registrations pass through (backend none, or gdrpin without
 * /dev/gdrpin) the shim promises nothing more than libibverbs: the
 * program then deregisters what touches an allocation before freeing
 * it, as a correct program must, and the same checks run.
 *
 * RND_CYCLES in the environment sets the cycle count (make stress:
 * 10^6 on every backend and both policies).
 */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define RND_CYCLES	2000
#else
#define RND_CYCLES	20000
#endif
#define RND_SLOTS	6
#define RND_HELD	24
#define RND_PDS		3

struct rnd_held {
	struct ibv_mr *mr;
	uint64_t addr, len;
	unsigned int access;
	int pd;
	uint64_t gens[RND_SLOTS];	/* slot generations it touched */
};

static uint64_t rnd_next(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

struct rnd_state {
	CUdeviceptr base[RND_SLOTS];
	uint64_t size[RND_SLOTS], gen[RND_SLOTS], next_gen;
	int live[RND_SLOTS];
	/* allocation policy: the PD was granted remote write in the slot's
	 * allocation (by any registration since it was allocated) */
	int rw[RND_SLOTS][RND_PDS];
	struct rnd_held h[RND_HELD];
	int nh;
};

/* Which generations [addr, addr + len) touches now. */
static void rnd_touch(struct rnd_state *st, struct rnd_held *r)
{
	for (int k = 0; k < RND_SLOTS; k++) {
		r->gens[k] = st->live[k] && st->base[k] < r->addr + r->len &&
			     r->addr < st->base[k] + st->size[k] ?
			     st->gen[k] : 0;
		if (r->gens[k] && (r->access & RW))
			st->rw[k][r->pd] = 1;
	}
}

static void rnd_alloc(struct rnd_state *st, uint64_t *x, int i)
{
	/* mostly under 3 granules, sometimes several MiB */
	st->size[i] = rnd_next(x) % 8 ? 4096 + rnd_next(x) % (3 * 65536) :
		      MiB + rnd_next(x) % (3 * MiB);
	st->base[i] = dev_alloc(st->size[i]);
	st->gen[i] = st->next_gen++;
	st->live[i] = 1;
	memset(st->rw[i], 0, sizeof(st->rw[i]));
}

static int scenario_random(void)
{
	static const unsigned int acc[] = {
		0, LW, LW | RW, LW | RW | IBV_ACCESS_REMOTE_READ,
		LW | RW | IBV_ACCESS_RELAXED_ORDERING, IBV_ACCESS_REMOTE_READ,
		LW | RW | IBV_ACCESS_REMOTE_ATOMIC,
	};
	static struct rnd_state st;
	const char *ec = getenv("RND_CYCLES"), *ex = getenv("GDRHOOK_REMOTE_EXPOSURE");
	long cycles = ec ? atol(ec) : RND_CYCLES;
	int alloc_policy = ex && !strcmp(ex, "allocation");
	uint64_t x = 0x853c49e6748fea9bULL, writes = 0, taken = 0, bad = 0;
	uint64_t beyond = 0, regs = 0;
	struct ibv_pd *pds[RND_PDS];
	struct ibv_context *vctx;
	int passthru = -1;	/* unknown until the first registration */

	primary_ctx(0);
	verbs_load();
	vctx = v.open();
	for (int p = 0; p < RND_PDS; p++)
		pds[p] = v.alloc_pd(vctx);
	st.next_gen = 1;
	for (int i = 0; i < RND_SLOTS; i++)
		rnd_alloc(&st, &x, i);
	for (long n = 0; n < cycles; n++) {
		uint64_t op = rnd_next(&x) % 16;
		int i = (int)(rnd_next(&x) % RND_SLOTS);

		if (op < 2) {			/* free, or allocate again */
			if (st.live[i]) {
				/* pass-through: a correct program's order */
				for (int k = 0; passthru == 1 && k < st.nh;) {
					if (st.h[k].gens[i] == st.gen[i]) {
						CHECK_EQ(v.dereg(st.h[k].mr), 0);
						st.h[k] = st.h[--st.nh];
					} else {
						k++;
					}
				}
				CU_OK(cuMemFree(st.base[i]));
				st.live[i] = 0;
				CHECK_EQ(v.stale(), 0);
			} else {
				rnd_alloc(&st, &x, i);
			}
		} else if (op < 8 && st.nh < RND_HELD && st.live[i]) {
			struct rnd_held *r = &st.h[st.nh];
			int64_t off = (int64_t)(rnd_next(&x) % (st.size[i] + 8192)) - 4096;

			r->addr = st.base[i] + (uint64_t)off;
			r->len = 1 + rnd_next(&x) % (rnd_next(&x) % 4 ? 8192 : 4 * 65536);
			r->access = acc[rnd_next(&x) % (sizeof(acc) / sizeof(acc[0]))];
			r->pd = (int)(rnd_next(&x) % RND_PDS);
			r->mr = v.reg2(pds[r->pd], (void *)(uintptr_t)r->addr,
				       r->len, r->addr, r->access);
			if (r->mr) {
				rnd_touch(&st, r);
				if (passthru < 0)
					passthru = v.is_mr(r->mr);
				st.nh++;
				regs++;
			}
		} else if (op < 12 && st.nh) {
			int k = (int)(rnd_next(&x) % (uint64_t)st.nh);

			CHECK_EQ(v.dereg(st.h[k].mr), 0);
			st.h[k] = st.h[--st.nh];
		} else if (op < 14 && st.nh) {	/* rereg: access or range */
			struct rnd_held *r = &st.h[rnd_next(&x) % (uint64_t)st.nh];

			/* a rereg registers anew: on what is there now */
			if (rnd_next(&x) & 1) {
				r->access = acc[rnd_next(&x) % (sizeof(acc) / sizeof(acc[0]))];
				if (v.rereg(r->mr, IBV_REREG_MR_CHANGE_ACCESS,
					    NULL, NULL, 0, (int)r->access))
					r->access = 0;	/* grants nothing */
				rnd_touch(&st, r);
			} else if (st.live[i]) {
				r->addr = st.base[i] + rnd_next(&x) % st.size[i];
				r->len = 1 + rnd_next(&x) % 8192;
				if (v.rereg(r->mr,
					    IBV_REREG_MR_CHANGE_TRANSLATION,
					    NULL, (void *)(uintptr_t)r->addr,
					    r->len, 0))
					r->access = 0;
				rnd_touch(&st, r);
			}
		}
		/* a peer's write near a random held MR */
		if (st.nh) {
			struct rnd_held *r = &st.h[rnd_next(&x) % (uint64_t)st.nh];
			int64_t d = (int64_t)(rnd_next(&x) % (r->len + 128)) - 64;
			uint64_t at = r->addr + (uint64_t)d;
			int p = rnd_next(&x) % 4 ? r->pd :
				(int)((uint64_t)r->pd + 1 + rnd_next(&x) % (RND_PDS - 1)) % RND_PDS;
			int ok = (r->access & RW) && p == r->pd &&
				 at >= r->addr && at < r->addr + r->len;
			int may = 0, in = -1, got;

			for (int k = 0; k < RND_SLOTS && ok; k++)
				if (r->gens[k] && (!st.live[k] || st.gen[k] != r->gens[k]))
					ok = 0;
			/* only inside tracked memory: host pages are real */
			for (int k = 0; k < RND_SLOTS; k++)
				if (st.live[k] && at >= st.base[k] &&
				    at < st.base[k] + st.size[k])
					in = k;
			if (in < 0)
				continue;
			/* allocation: the whole allocation the MR was made in */
			if (alloc_policy && p == r->pd && r->gens[in] == st.gen[in] &&
			    st.rw[in][p])
				may = 1;
			got = v.write(pds[p], r->mr->rkey, at, "w", 1) == 0;
			writes++;
			taken += got;
			beyond += got && !ok;
			if (ok ? !got : got && !may) {
				if (!bad++)
					printf("  first violation: cycle %ld, MR %#llx+%llu access %#x pd %d, write at %#llx pd %d (allocation %d: %#llx+%llu) %s\n",
					       n, (unsigned long long)r->addr,
					       (unsigned long long)r->len,
					       r->access, r->pd,
					       (unsigned long long)at, p, in,
					       (unsigned long long)st.base[in],
					       (unsigned long long)st.size[in],
					       got ? "taken" : "refused");
			}
		}
	}
	printf("  random shapes, backend %s%s%s: %ld cycles, %llu registrations, %llu peer writes checked (%llu taken, %llu of them outside the grant as the policy allows), %llu against the policy, stale writes %lu\n",
	       getenv("GDRHOOK_BACKEND") ? getenv("GDRHOOK_BACKEND") : "auto",
	       passthru == 1 ? " (pass-through)" : "",
	       alloc_policy ? " (allocation exposure)" : "", cycles,
	       (unsigned long long)regs, (unsigned long long)writes,
	       (unsigned long long)taken, (unsigned long long)beyond,
	       (unsigned long long)bad, v.calls("stale_writes"));
	CHECK_EQ(bad, 0);
	CHECK_EQ(v.calls("stale_writes"), 0);
	CHECK(taken > 0 && taken < writes);
	if (!alloc_policy)
		CHECK_EQ(beyond, 0);
	if (passthru == 0) {
		/* the cached path ran, not only the wrapped one (a backend
		 * whose every pin failed passed all the above, uncached) */
		struct gdrhook_stats gs = { .size = sizeof(gs) };

		CHECK_EQ(gdrhook_get_stats(&gs), 0);
		printf("  cache: %llu hits, %llu NIC registrations\n",
		       (unsigned long long)gs.rcache_hits,
		       (unsigned long long)gs.nic_regs);
		CHECK(gs.rcache_hits > 0 && gs.nic_regs > 0);
	}
	while (st.nh)
		CHECK_EQ(v.dereg(st.h[--st.nh].mr), 0);
	for (int i = 0; i < RND_SLOTS; i++)
		if (st.live[i])
			CU_OK(cuMemFree(st.base[i]));
	CHECK_EQ(v.live(), 0);
	return 0;
}

/* stderr into a file while fn runs: how many lines contain what. */
/*
 * Seen 4: auto on a NIC that cannot import DMA-BUF (FAKEVERBS_NO_DMABUF):
 * one probe, then pass-through (no nvidia-peermem here), said once at
 * the default level; a program's own capability probe is untouched.
 */
static int scenario_auto_noimport(void)
{
	char path[512];
	struct ibv_pd *pd;
	struct ibv_mr *m;
	CUdeviceptr d;
	int fd, saved = dup(2);

	log_path(path, sizeof(path), "auto-noimport");
	fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0600);
	CHECK(fd >= 0 && saved >= 0);
	dup2(fd, 2);
	primary_ctx(0);
	verbs_load();
	pd = v.alloc_pd(v.open());
	d = dev_alloc(MiB);
	/* NCCL's probe: fd -1, reaches the NIC, errno untouched */
	errno = 0;
	CHECK(v.dmabuf(pd, 0, 0, 0, -1, 0) == NULL);
	CHECK_EQ(errno, EOPNOTSUPP);
	CHECK_EQ(v.calls("ibv_reg_dmabuf_mr"), 1);
	for (int i = 0; i < 10; i++) {
		m = v.reg(pd, (void *)(d + 64 * i), 64, LW | RW);
		CHECK(m != NULL);
		CHECK_EQ(v.dereg(m), 0);
	}
	CHECK_EQ(v.calls("ibv_reg_dmabuf_mr"), 2);	/* + one probe */
	CHECK_EQ(v.calls("ibv_reg_mr_iova2"), 10);
	CU_OK(cuMemFree(d));
	dup2(saved, 2);
	close(fd);
	CHECK_EQ(count_in_file(path, "auto chose dmabuf"), 1);
	unlink(path);
	return 0;
}

/*
 * Auto with two NICs, one of which cannot import DMA-BUF
 * (FAKEVERBS_NO_DMABUF=fakenic1): each NIC is probed once, at its first
 * registration of GPU memory; fakenic1's registrations pass through
 * (libibverbs' own MRs) while fakenic0's are cached, whichever comes
 * first.  order 1: fakenic1 first (the cache starts at the second NIC).
 */
static int auto_two_nics(int order)
{
	struct ibv_pd *pd[2];
	struct ibv_mr *m;
	CUdeviceptr d;
	unsigned long probes;

	primary_ctx(0);
	verbs_load();
	pd[0] = v.alloc_pd(v.open_nic(0));
	pd[1] = v.alloc_pd(v.open_nic(1));
	d = dev_alloc(MiB);
	for (int round = 0; round < 3; round++) {
		for (int k = 0; k < 2; k++) {
			int n = order ? 1 - k : k;

			m = v.reg(pd[n], (void *)(d + 4096 * (uint64_t)round), 64,
				  LW | RW);
			CHECK(m != NULL);
			CHECK_EQ(v.is_mr(m), n == 1);
			CHECK_EQ(v.write(pd[n], m->rkey, d + 4096 * (uint64_t)round,
					 "w", 1), 0);
			CHECK_EQ(v.dereg(m), 0);
		}
	}
	/* one probe per NIC, and fakenic0's three MRs each a registration
	 * of the cached export (the fake NIC judges as mlx5 by default,
	 * which binds no type-1 window over a DMA-BUF MR: src/pin/mwin.h) */
	probes = v.calls("ibv_reg_dmabuf_mr");
	CHECK_EQ(probes, 2 + 3);
	CHECK_EQ(v.calls("bind_mw"), 0);
	CHECK_EQ(v.calls("ibv_reg_mr_iova2"), 3);	/* fakenic1's */
	CU_OK(cuMemFree(d));
	CHECK_EQ(v.live(), 0);
	CHECK_EQ(v.calls("stale_writes"), 0);
	return 0;
}

static int scenario_auto_nic0_first(void)
{
	return auto_two_nics(0);
}

static int scenario_auto_nic1_first(void)
{
	return auto_two_nics(1);
}

/*
 * No fd held longer than needed: 10^5 register/free cycles, dmabuf.
 * Sanitizer builds run 10^4: they are there for memory and race errors.
 */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define FD_CYCLES	10000
#else
#define FD_CYCLES	100000
#endif

static int scenario_fds(void)
{
	struct ibv_pd *pd;
	int before, after;

	primary_ctx(0);
	verbs_load();
	pd = v.alloc_pd(v.open());
	before = count_fds();
	for (int i = 0; i < FD_CYCLES; i++) {
		CUdeviceptr d = dev_alloc(MiB);
		struct ibv_mr *m = v.reg(pd, (void *)(d + 4096), 4096,
					 i & 1 ? LW : LW | RW);

		CHECK(m != NULL);
		if (i % 3)
			CHECK_EQ(v.dereg(m), 0);
		CU_OK(cuMemFree(d));
		if (!(i % 3))
			CHECK_EQ(v.dereg(m), 0);	/* revoked */
	}
	after = count_fds();
	printf("  open fds before %d, after %d cycles %d\n", before, FD_CYCLES,
	       after);
	CHECK_EQ(after, before);
	CHECK_EQ(v.live(), 0);
	return 0;
}

static const struct scenario scenarios[] = {
	{ "routes", scenario_routes },
	{ "dmabuf", scenario_dmabuf },
	{ "peermem", scenario_peermem },
	{ "none", scenario_none },
	{ "auto", scenario_auto },
	{ "fd_reuse", scenario_fd_reuse },
	{ "buffer_id", scenario_buffer_id },
	{ "log", scenario_log },
	{ "straddle", scenario_straddle },
	{ "rereg", scenario_rereg },
	{ "auto_noimport", scenario_auto_noimport },
	{ "auto_nic0_first", scenario_auto_nic0_first },
	{ "auto_nic1_first", scenario_auto_nic1_first },
	{ "fds", scenario_fds },
	{ "adopt", scenario_adopt },
	{ "random", scenario_random },
};

/* ------------------------------------------------------------- cases */

TEST(verbs_routes)
{
	const char *env[] = { NULL };

	CHECK_EQ(run_scenario("routes", env), 0);
}

TEST(verbs_cache_dmabuf)
{
	const char *env[] = { "GDRHOOK_BACKEND=dmabuf",
			      "GDRHOOK_REMOTE_EXPOSURE=allocation", NULL };

	CHECK_EQ(run_scenario("dmabuf", env), 0);
}

TEST(verbs_cache_peermem)
{
	const char *env[] = { "GDRHOOK_BACKEND=peermem",
			      "GDRHOOK_REMOTE_EXPOSURE=allocation", NULL };

	CHECK_EQ(run_scenario("peermem", env), 0);
}

TEST(verbs_backend_none_passes_through)
{
	const char *env[] = { "GDRHOOK_BACKEND=none", NULL };

	CHECK_EQ(run_scenario("none", env), 0);
}

TEST(verbs_backend_auto)
{
	const char *env[] = { "GDRHOOK_BACKEND=auto", "FAKEVERBS_PEERMEM=0",
			      NULL };

	CHECK_EQ(run_scenario("auto", env), 0);
}

TEST(verbs_dmabuf_program_reuses_our_fd)
{
	const char *env[] = { "GDRHOOK_BACKEND=dmabuf",
			      "GDRHOOK_REMOTE_EXPOSURE=allocation", NULL };

	CHECK_EQ(run_scenario("fd_reuse", env), 0);
}

TEST(buffer_id_from_registry)
{
	const char *env[] = { "GDRHOOK_BUFFER_ID=registry", NULL };

	CHECK_EQ(run_scenario("buffer_id", env), 0);
}

TEST(buffer_id_from_driver)
{
	const char *env[] = { "GDRHOOK_BUFFER_ID=driver", NULL };

	CHECK_EQ(run_scenario("buffer_id", env), 0);
}

TEST(verbs_event_log)
{
	char path[512], envlog[600];
	const char *env[] = { "GDRHOOK_BACKEND=dmabuf",
			      "GDRHOOK_REMOTE_EXPOSURE=allocation", envlog, NULL };

	log_path(path, sizeof(path), "verbs");
	snprintf(envlog, sizeof(envlog), "GDRHOOK_TRACE=%s", path);
	CHECK_EQ(run_scenario("log", env), 0);
	CHECK(LOG_COUNT(path, "\"ev\":\"pin\"", "\"backend\":\"dmabuf\"") >= 2);
	CHECK(LOG_COUNT(path, "\"ev\":\"unpin\"") >= 2);
	CHECK(LOG_COUNT(path, "\"ev\":\"reg\"") >= 2);
	CHECK(LOG_COUNT(path, "\"ev\":\"dereg\"") >= 2);
	CHECK(LOG_COUNT(path, "\"ev\":\"hit\"") >= 2);
	CHECK(LOG_COUNT(path, "\"ev\":\"miss\"") >= 2);
	CHECK(LOG_COUNT(path, "\"ev\":\"revoke\"") >= 1);
	unlink(path);
}

static const char *const backends[] = { "GDRHOOK_BACKEND=dmabuf",
					 "GDRHOOK_BACKEND=peermem" };

TEST(straddling_registrations_revoked)
{
	for (int i = 0; i < 2; i++) {
		const char *env[] = { backends[i], NULL };

		CHECK_EQ(run_scenario("straddle", env), 0);
	}
}

TEST(rereg_as_natively)
{
	for (int i = 0; i < 2; i++) {
		const char *env[] = { backends[i], NULL };

		CHECK_EQ(run_scenario("rereg", env), 0);
	}
}

TEST(rereg_of_a_real_mr_onto_gpu_memory)
{
	for (int i = 0; i < 2; i++) {
		const char *env[] = { backends[i], NULL };

		CHECK_EQ(run_scenario("adopt", env), 0);
	}
}

/* Every backend, both exposure policies (make stress: 10^6 cycles each). */
TEST_TIMEOUT(random_shapes_every_peer_write_checked, 600)
{
	static const char *const all[] = {
		"GDRHOOK_BACKEND=dmabuf", "GDRHOOK_BACKEND=peermem",
		"GDRHOOK_BACKEND=gdrpin", "GDRHOOK_BACKEND=none",
	};

	for (int i = 0; i < 4; i++) {
		for (int a = 0; a < 2; a++) {
			const char *env[] = { all[i], a ?
				"GDRHOOK_REMOTE_EXPOSURE=allocation" :
				"GDRHOOK_REMOTE_EXPOSURE=exact", NULL };

			CHECK_EQ(run_scenario("random", env), 0);
		}
	}
}

TEST(auto_on_a_nic_without_dmabuf_import)
{
	/* a NIC without windows: auto has no window-capable parent to
	 * prefer (test_windows) */
	const char *env[] = { "GDRHOOK_BACKEND=auto", "FAKEVERBS_NO_DMABUF=1",
			      "FAKEVERBS_PROVIDER=nomw", NULL };

	CHECK_EQ(run_scenario("auto_noimport", env), 0);
}

TEST(auto_probes_each_nic)
{
	const char *env[] = { "GDRHOOK_BACKEND=auto",
			      "FAKEVERBS_NO_DMABUF=fakenic1",
			      "FAKEVERBS_PROVIDER=nomw", NULL };

	CHECK_EQ(run_scenario("auto_nic0_first", env), 0);
	CHECK_EQ(run_scenario("auto_nic1_first", env), 0);
}

TEST_TIMEOUT(no_fd_leak_1e5_cycles, 600)
{
	const char *env[] = { "GDRHOOK_BACKEND=dmabuf", NULL };

	CHECK_EQ(run_scenario("fds", env), 0);
}

SCENARIO_MAIN(scenarios)
