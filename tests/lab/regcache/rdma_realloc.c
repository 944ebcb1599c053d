// SPDX-License-Identifier: MIT
/*
 * rdma_realloc: the registration cache over real rdma-core and a real
 * kernel (soft-RoCE, rxe0, in the QEMU lab: tests/lab/regcache/run).
 *
 * Runs under LD_PRELOAD=libgdrhook.so with the CUDA driver double
 * (build/fake: "GPU memory" is host pages at GPU-like addresses, and a
 * free + alloc of the same size returns the same address), GDRHOOK_TRACE set
 * and GDRHOOK_BACKEND=peermem or gdrpin.  One loopback RC QP pair on rxe0
 * (two QPs of one PD connected to each other through GID index 0).
 *
 * Per iteration of a case (a free route):
 *   allocate S bytes of "GPU memory" (same address as the last iteration),
 *   fill it with a background byte, register a sub-range (must be a cache
 *   MISS of the allocation's new generation: read from the event log),
 *   register a second sub-range (must be a HIT, cacheable kinds only),
 *   RDMA WRITE a pattern unique to the iteration from a host buffer into it,
 *   read it back with cuMemcpyDtoH: the pattern is there and the rest of the
 *   allocation still holds the background byte; deregister; free by the
 *   route; then probe the freed generation: an RDMA WRITE with its rkey must
 *   be refused by the NIC (the cache deregistered it for real before the
 *   free; a stale registration would take the write into freed memory).
 *
 * Cases (routes): free (cuMemAlloc/cuMemFree), freeasync (cuMemAlloc/
 * cuMemFreeAsync), pool (cuMemAllocAsync/cuMemFreeAsync: pool memory is
 * never cached, wrapped instead: every registration is a miss), ctx
 * (cuCtxCreate/alloc/cuCtxDestroy), vmm (cuMemCreate+cuMemMap/cuMemUnmap),
 * revoke (gdrpin only: a revocation fired through fake_nvp2p's debugfs
 * makes the cache drop the registration: the next one is a miss, the
 * helper thread unpins), dmabuf (does rxe take ibv_reg_dmabuf_mr?).
 *
 * GDRHOOK_REMOTE_EXPOSURE=exact (the default): the second registration
 * has its own rkey and no new pin: a hit on the cached parent
 * registration with its own memory window (GDRHOOK_WINDOWS=0: a miss on
 * the same pin, its own NIC registration), and after ibv_dereg_mr,
 * before the free, the NIC must already refuse the first rkey.
 * =allocation: the second registration is a hit on the same rkey.
 *
 * Usage: rdma_realloc CASE [ITERS]   prints "ok CASE: ..." or
 * "FAIL CASE: why" and exits 0 / 1 (77: skipped).
 */
#include <cuda.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <infiniband/verbs.h>

#include "gdrhook_preload.h"
#include "verbs_qp.h"

#define MiB		(1ULL << 20)
#define ACC		(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
			 IBV_ACCESS_REMOTE_READ)
#define BG		0xEE

static const char *cname = "?";
static int exact;	/* GDRHOOK_REMOTE_EXPOSURE */
static int windows;	/* exact over memory windows (GDRHOOK_WINDOWS) */
static struct gdrhook_preload gh;

static void fail(const char *fmt, ...)
{
	va_list ap;

	printf("FAIL %s: ", cname);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	exit(1);
}

#define CU(x) do { CUresult rc_ = (x); \
	if (rc_ != CUDA_SUCCESS) fail("%s: CUDA error %d (line %d)", #x, \
				      (int)rc_, __LINE__); } while (0)

/* ------------------------------------------------------------ verbs */

static struct {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qa, *qb;		/* data pair */
	struct ibv_qp *pa, *pb;		/* probe pair (reset after errors) */
	struct vqp_path path;
	void *src;
	struct ibv_mr *src_mr;
	size_t src_len;
} vb;

static struct ibv_qp *qp_new(void)
{
	struct ibv_qp *qp = vqp_create(vb.pd, vb.cq, 16, 16, 0);

	if (!qp)
		fail("ibv_create_qp: %s", strerror(errno));
	return qp;
}

static void qp_connect(struct ibv_qp *qp, uint32_t dest)
{
	const char *step;
	int rc = vqp_connect(qp, &vb.path, dest, &step);

	if (rc)
		fail("modify %s: %s", step, strerror(rc));
}

static void pair_connect(struct ibv_qp *a, struct ibv_qp *b)
{
	qp_connect(a, b->qp_num);
	qp_connect(b, a->qp_num);
}

static void verbs_open(const char *want)
{
	struct ibv_device **l;
	int n, i, rc;

	l = ibv_get_device_list(&n);
	if (!l || !n)
		fail("no RDMA device (ibv_get_device_list: %s)", strerror(errno));
	for (i = 0; i < n; i++)
		if (!strcmp(ibv_get_device_name(l[i]), want))
			break;
	if (i == n)
		fail("no device %s", want);
	vb.ctx = ibv_open_device(l[i]);
	ibv_free_device_list(l);
	if (!vb.ctx)
		fail("ibv_open_device: %s", strerror(errno));
	rc = vqp_path_query(vb.ctx, IBV_ACCESS_REMOTE_WRITE |
			    IBV_ACCESS_REMOTE_READ | IBV_ACCESS_LOCAL_WRITE,
			    &vb.path);
	if (rc)
		fail("ibv_query_port/gid: %s", strerror(rc));
	/*
	 * Soft-RoCE under an emulated CPU on a loaded host: an ACK can take
	 * far longer than on hardware.  timeout 10 (4 ms) with one retry
	 * gave "transport retry counter exceeded" at random; 18 (about 1 s)
	 * with 7 retries rides out scheduling stalls.  A refused write (the
	 * stale-rkey probe) is a NAK, not a timeout, so it stays fast.
	 */
	vb.path.timeout = 18;
	vb.path.reset_tries = 1000;
	vb.pd = ibv_alloc_pd(vb.ctx);
	vb.cq = ibv_create_cq(vb.ctx, 64, NULL, NULL, 0);
	if (!vb.pd || !vb.cq)
		fail("pd/cq: %s", strerror(errno));
	vb.qa = qp_new();
	vb.qb = qp_new();
	vb.pa = qp_new();
	vb.pb = qp_new();
	pair_connect(vb.qa, vb.qb);
	pair_connect(vb.pa, vb.pb);
	vb.src_len = 8 * MiB;
	if (posix_memalign(&vb.src, 4096, vb.src_len))
		fail("posix_memalign");
	memset(vb.src, 0, vb.src_len);
	vb.src_mr = ibv_reg_mr(vb.pd, vb.src, vb.src_len,
			       IBV_ACCESS_LOCAL_WRITE);
	if (!vb.src_mr)
		fail("ibv_reg_mr(host source): %s", strerror(errno));
}

static void verbs_close(void)
{
	ibv_dereg_mr(vb.src_mr);
	ibv_destroy_qp(vb.qa);
	ibv_destroy_qp(vb.qb);
	ibv_destroy_qp(vb.pa);
	ibv_destroy_qp(vb.pb);
	ibv_destroy_cq(vb.cq);
	ibv_dealloc_pd(vb.pd);
	ibv_close_device(vb.ctx);
	free(vb.src);
}

/* RDMA WRITE len bytes of vb.src to raddr/rkey over qp; wait; status. */
static int rdma_write(struct ibv_qp *qp, uint64_t raddr, uint32_t rkey,
		      size_t len)
{
	struct ibv_sge sge = { (uintptr_t)vb.src, (uint32_t)len,
			       vb.src_mr->lkey };
	struct ibv_send_wr wr, *bad;
	struct ibv_wc wc;
	struct timespec t0, t;
	int n;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 42;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	if (ibv_post_send(qp, &wr, &bad))
		fail("ibv_post_send: %s", strerror(errno));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		n = ibv_poll_cq(vb.cq, 1, &wc);
		if (n < 0)
			fail("ibv_poll_cq");
		if (n == 1)
			return wc.status;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > 120)
			fail("no completion in 120 s");
	}
}

/* ------------------------------------------------------- the event log */

static const char *log_path;
static off_t log_off;

struct logev {
	int hits, misses, pins, unpins, revokes, deregs, regs;
	uint64_t miss_gen, hit_gen, unpin_gen;
};

static uint64_t field_u64(const char *line, const char *key)
{
	const char *p = strstr(line, key);

	return p ? strtoull(p + strlen(key), NULL, 0) : 0;
}

/* Events logged since the last call. */
static void log_read(struct logev *e)
{
	char line[1024];
	FILE *f;

	memset(e, 0, sizeof(*e));
	gh.flush_log();
	f = fopen(log_path, "r");
	if (!f)
		fail("open %s: %s", log_path, strerror(errno));
	fseeko(f, log_off, SEEK_SET);
	while (fgets(line, sizeof(line), f)) {
		uint64_t g = field_u64(line, "\"gen\":");

		if (strstr(line, "\"ev\":\"miss\"")) {
			e->misses++;
			e->miss_gen = g;
		} else if (strstr(line, "\"ev\":\"hit\"")) {
			e->hits++;
			e->hit_gen = g;
		} else if (strstr(line, "\"ev\":\"pin\"")) {
			e->pins++;
		} else if (strstr(line, "\"ev\":\"unpin\"")) {
			e->unpins++;
			e->unpin_gen = g;
		} else if (strstr(line, "\"ev\":\"revoke\"")) {
			e->revokes++;
		} else if (strstr(line, "\"ev\":\"dereg\"")) {
			e->deregs++;
		} else if (strstr(line, "\"ev\":\"reg\"")) {
			e->regs++;
		}
	}
	log_off = ftello(f);
	fclose(f);
}

/* ------------------------------------------------------------ routes */

enum route { R_FREE, R_FREEASYNC, R_POOL, R_CTX, R_VMM };

static struct {
	enum route r;
	CUdevice dev;
	CUcontext prim, made;
	CUdeviceptr vmm_va;
	size_t size;
} rt;

static CUdeviceptr r_alloc(void)
{
	CUdeviceptr p = 0;

	switch (rt.r) {
	case R_FREE:
	case R_FREEASYNC:
		CU(cuMemAlloc(&p, rt.size));
		break;
	case R_POOL:
		CU(cuMemAllocAsync(&p, rt.size, 0));
		CU(cuStreamSynchronize(0));
		break;
	case R_CTX:
		CU(cuCtxCreate(&rt.made, NULL, 0, rt.dev));
		CU(cuMemAlloc(&p, rt.size));
		break;
	case R_VMM: {
		CUmemAllocationProp prop;
		CUmemAccessDesc ad;
		CUmemGenericAllocationHandle h;

		memset(&prop, 0, sizeof(prop));
		prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
		prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
		prop.location.id = rt.dev;
		memset(&ad, 0, sizeof(ad));
		ad.location = prop.location;
		ad.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
		if (!rt.vmm_va)
			CU(cuMemAddressReserve(&rt.vmm_va, rt.size, 0, 0, 0));
		CU(cuMemCreate(&h, rt.size, &prop, 0));
		CU(cuMemMap(rt.vmm_va, rt.size, 0, h, 0));
		CU(cuMemSetAccess(rt.vmm_va, rt.size, &ad, 1));
		CU(cuMemRelease(h));	/* the mapping keeps it */
		p = rt.vmm_va;
		break;
	}
	}
	return p;
}

static void r_free(CUdeviceptr p)
{
	switch (rt.r) {
	case R_FREE:
		CU(cuMemFree(p));
		break;
	case R_FREEASYNC:
	case R_POOL:
		CU(cuMemFreeAsync(p, 0));
		CU(cuStreamSynchronize(0));
		break;
	case R_CTX:
		CU(cuCtxDestroy(rt.made));
		rt.made = NULL;
		CU(cuCtxSetCurrent(rt.prim));
		break;
	case R_VMM:
		CU(cuMemUnmap(p, rt.size));
		break;
	}
}

/* ------------------------------------------------------------ checks */

static unsigned char *rb;	/* readback */

static void check_contents(CUdeviceptr p, size_t off, size_t len,
			   unsigned int seed, const char *what)
{
	size_t i;

	CU(cuMemcpyDtoH(rb, p, rt.size));
	for (i = 0; i < rt.size; i++) {
		unsigned char want = i >= off && i < off + len ?
			(unsigned char)(seed + (i - off) * 7 + ((i - off) >> 12)) :
			BG;

		if (rb[i] != want)
			fail("%s: byte %zu of the buffer is 0x%02x, want 0x%02x%s",
			     what, i, rb[i], want,
			     i >= off && i < off + len ?
			     " (the RDMA write did not land in this buffer)" :
			     " (written outside the registered range)");
	}
}

static void fill_src(size_t len, unsigned int seed)
{
	unsigned char *s = vb.src;

	for (size_t i = 0; i < len; i++)
		s[i] = (unsigned char)(seed + i * 7 + (i >> 12));
}

/* The freed generation's rkey must be dead at the NIC. */
static int probe_stale(uint64_t addr, uint32_t rkey, size_t len)
{
	int st;

	fill_src(len, 0x55);
	st = rdma_write(vb.pa, addr, rkey, len);
	pair_connect(vb.pa, vb.pb);	/* back from the error state */
	return st;
}

static uint64_t gen_of(CUdeviceptr p)
{
	struct gdrhook_range r;

	if (gh.lookup((void *)(uintptr_t)p, 1, &r))
		fail("gdrhook_lookup(%#llx) failed: not tracked",
		     (unsigned long long)p);
	return r.gen;
}

static int run_route(enum route r, int iters)
{
	CUdeviceptr prev = 0, p;
	uint64_t prev_gen = 0, gen;
	uint32_t prev_rkey = 0;
	size_t off1 = 4096 + 64, len1 = 1 * MiB + 300;
	size_t off2 = 2 * MiB, len2 = 256 * 1024;
	int cacheable = r != R_POOL;
	int same = 0, refused = 0;
	struct logev ev;

	rt.r = r;
	for (int it = 0; it < iters; it++) {
		struct ibv_mr *m1, *m2;
		unsigned int seed = 17 * it + 3 + (unsigned int)r * 101;
		int st;

		p = r_alloc();
		if (it && p == prev)
			same++;
		CU(cuMemsetD8(p, BG, rt.size));
		gen = gen_of(p);
		if (it && gen == prev_gen)
			fail("iteration %d: the registry kept generation %llu across the free",
			     it, (unsigned long long)gen);
		log_read(&ev);	/* skip what the allocation logged */

		m1 = ibv_reg_mr(vb.pd, (void *)(uintptr_t)(p + off1), len1,
				ACC);
		if (!m1)
			fail("iteration %d: ibv_reg_mr: %s", it, strerror(errno));
		log_read(&ev);
		if (ev.misses != 1 || ev.hits || ev.miss_gen != gen)
			fail("iteration %d: first registration of generation %llu: %d misses (gen %llu), %d hits; want one miss of the new generation",
			     it, (unsigned long long)gen, ev.misses,
			     (unsigned long long)ev.miss_gen, ev.hits);
		if (cacheable && ev.pins != 1)
			fail("iteration %d: %d pins for the first registration, want 1",
			     it, ev.pins);
		m2 = ibv_reg_mr(vb.pd, (void *)(uintptr_t)(p + off2), len2,
				ACC);
		if (!m2)
			fail("iteration %d: second ibv_reg_mr: %s", it,
			     strerror(errno));
		log_read(&ev);
		/* exact: its own rkey, no new pin; over a memory window a
		 * hit on the cached parent, else its own NIC registration */
		if (cacheable && exact &&
		    (ev.pins || m2->rkey == m1->rkey ||
		     (windows ? ev.hits != 1 || ev.misses || ev.hit_gen != gen :
		      ev.hits || ev.misses != 1 || ev.miss_gen != gen)))
			fail("iteration %d: second registration inside generation %llu (exact, %s): %d hits, %d misses, %d pins, rkey %#x vs %#x; want %s with its own rkey",
			     it, (unsigned long long)gen,
			     windows ? "windows" : "no windows", ev.hits,
			     ev.misses, ev.pins, m2->rkey, m1->rkey,
			     windows ? "a hit on the cached parent" :
			     "a miss on the same pin");
		if (cacheable && !exact &&
		    (ev.hits != 1 || ev.misses ||
		     ev.hit_gen != gen || m2->rkey != m1->rkey))
			fail("iteration %d: second registration inside generation %llu: %d hits, %d misses, rkey %#x vs %#x; want one hit on the same registration",
			     it, (unsigned long long)gen, ev.hits, ev.misses,
			     m2->rkey, m1->rkey);
		if (!cacheable && (ev.misses != 1 || ev.hits))
			fail("iteration %d: pool memory: %d hits %d misses, want no hit",
			     it, ev.hits, ev.misses);

		fill_src(len1, seed);
		st = rdma_write(vb.qa, p + off1, m1->rkey, len1);
		if (st != IBV_WC_SUCCESS)
			fail("iteration %d: RDMA WRITE into the new buffer: %s",
			     it, ibv_wc_status_str(st));
		check_contents(p, off1, len1, seed, "after the RDMA write");
		prev_rkey = m1->rkey;
		if (ibv_dereg_mr(m2) || ibv_dereg_mr(m1))
			fail("iteration %d: ibv_dereg_mr: %s", it,
			     strerror(errno));
		if (exact && probe_stale(p + off1, prev_rkey, 4096) ==
		    IBV_WC_SUCCESS)
			fail("iteration %d: exact exposure: an RDMA WRITE with rkey %#x was accepted after ibv_dereg_mr",
			     it, prev_rkey);
		r_free(p);
		log_read(&ev);
		if (!ev.deregs || (cacheable && ev.unpins != 1))
			fail("iteration %d: the free dropped %d registrations and %d pins; want them all gone before the free",
			     it, ev.deregs, ev.unpins);
		st = probe_stale(p + off1, prev_rkey, 4096);
		if (st == IBV_WC_SUCCESS)
			fail("iteration %d: an RDMA WRITE with the freed generation's rkey %#x was accepted: stale registration",
			     it, prev_rkey);
		refused++;
		prev = p;
		prev_gen = gen;
	}
	if (iters > 1 && same != iters - 1)
		fail("the driver double returned the same address %d of %d times (expected every time: the test relies on it)",
		     same, iters - 1);
	printf("ok %s (%s exposure): %d iterations at %#llx, %d same-address reallocations, each a miss of a new generation, data landed in the new buffer every time, %d stale rkeys refused by the NIC%s\n",
	       cname, exact ? "exact" : "allocation", iters,
	       (unsigned long long)prev, same, refused,
	       exact ? " (and each rkey refused right after ibv_dereg_mr)" : "");
	return 0;
}

/* ------------------------------------------------- gdrpin: revocation */

static int write_file(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY), rc = 0;

	if (fd < 0)
		return -errno;
	if (write(fd, s, strlen(s)) != (ssize_t)strlen(s))
		rc = -errno;
	close(fd);
	return rc;
}

static int run_revoke(int iters)
{
	struct logev ev;
	CUdeviceptr p;
	uint64_t gen;
	char cmd[96];

	rt.r = R_FREE;
	p = r_alloc();
	CU(cuMemsetD8(p, BG, rt.size));
	gen = gen_of(p);
	for (int it = 0; it < iters; it++) {
		struct ibv_mr *m;
		unsigned int seed = 31 * it + 7;
		int waited, st;

		CU(cuMemsetD8(p, BG, rt.size));
		log_read(&ev);
		m = ibv_reg_mr(vb.pd, (void *)(uintptr_t)p, rt.size, ACC);
		if (!m)
			fail("ibv_reg_mr: %s", strerror(errno));
		log_read(&ev);
		/* after an even iteration the cache holds the re-made pin */
		if (it % 2 == 0 && (ev.misses != 1 || ev.pins != 1))
			fail("iteration %d: registration after %s: %d misses %d pins, want a miss and a new pin",
			     it, it ? "the helper dropped the revoked pin" :
			     "allocation", ev.misses, ev.pins);
		if (it % 2 == 1 && (ev.hits != 1 || ev.pins))
			fail("iteration %d: registration on the pin re-made after the revocation: %d hits %d pins, want a hit",
			     it, ev.hits, ev.pins);
		fill_src(rt.size / 2, seed);
		st = rdma_write(vb.qa, p, m->rkey, rt.size / 2);
		if (st != IBV_WC_SUCCESS)
			fail("RDMA WRITE: %s", ibv_wc_status_str(st));
		check_contents(p, 0, rt.size / 2, seed, "after the RDMA write");
		if (ibv_dereg_mr(m))
			fail("ibv_dereg_mr");
		/* like a cuMemFree the hooks never saw: the driver revokes */
		snprintf(cmd, sizeof(cmd), "0 %llx %llx",
			 (unsigned long long)(p & ~0xffffULL),
			 (unsigned long long)rt.size);
		if (write_file("/sys/kernel/debug/fake_nvp2p/free", cmd))
			fail("write fake_nvp2p/free: %s", strerror(errno));
		if (it % 2 == 0) {
			/* the data path sees it at once (status page) */
			m = ibv_reg_mr(vb.pd, (void *)(uintptr_t)p, 4096, ACC);
			if (!m)
				fail("ibv_reg_mr: %s", strerror(errno));
			log_read(&ev);
			if (ev.hits || ev.misses != 1 || ev.pins != 1)
				fail("iteration %d: registration right after the revocation: %d hits, %d misses, %d pins; want a miss and a new pin",
				     it, ev.hits, ev.misses, ev.pins);
			ibv_dereg_mr(m);
			continue;
		}
		/* the helper thread drops the entry and unpins */
		for (waited = 0; waited < 500; waited++) {
			log_read(&ev);
			if (ev.unpins)
				break;
			usleep(10000);
		}
		if (!ev.unpins || ev.unpin_gen != gen)
			fail("iteration %d: the helper thread did not drop the revoked pin in 5 s",
			     it);
	}
	log_read(&ev);
	CU(cuMemFree(p));
	printf("ok %s: %d revocations through fake_nvp2p, each followed by a cache miss and a new pin (even iterations: caught on the data path by the status page, odd: dropped by the helper thread), data landed every time\n",
	       cname, iters);
	return 0;
}

/* ------------------------------------------------------------ fdsteal */

#define FD_SCAN	4096

/* CPU seconds the thread named name has used, or -1 when there is none. */
static double thread_cpu(const char *name)
{
	char path[300], buf[512];
	DIR *d = opendir("/proc/self/task");
	struct dirent *de;
	double t = -1;

	while (d && t < 0 && (de = readdir(d))) {
		unsigned long ut, st;
		FILE *f;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm",
			 de->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (!fgets(buf, sizeof(buf), f) ||
		    strncmp(buf, name, strlen(name))) {
			fclose(f);
			continue;
		}
		fclose(f);
		snprintf(path, sizeof(path), "/proc/self/task/%s/stat",
			 de->d_name);
		f = fopen(path, "r");
		if (f && fgets(buf, sizeof(buf), f) && strrchr(buf, ')') &&
		    sscanf(strrchr(buf, ')') + 2,
			   "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu",
			   &ut, &st) == 2)
			t = (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
		if (f)
			fclose(f);
	}
	if (d)
		closedir(d);
	return t;
}

/* The number of gdrhook's fd whose link reads target, or -1. */
static int fd_named(const char *target)
{
	for (int fd = 3; fd < FD_SCAN; fd++) {
		char link[64], t[256];
		ssize_t n;

		snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
		n = readlink(link, t, sizeof(t) - 1);
		if (n < 0)
			continue;
		t[n] = 0;
		if (!strcmp(t, target))
			return fd;
	}
	return -1;
}

/*
 * A program that closes descriptors it did not open and opens its own
 * files on those numbers: first a pipe holding 16 bytes over gdrhook's
 * eventfd, then a revocation (the driver frees the memory: gdrpin
 * signals the eventfd gdrhook gave it), then /dev/null over /dev/gdrpin's
 * fd.  gdrhook must not read the program's pipe, close its files, or spin
 * its revocation helper on the lost number; registrations go on
 * (uncached: the pins went with the file) and the frees revoke them.
 */
static int run_fdsteal(int iters)
{
	static const char data[16] = "the program's.\n";
	int efd, gfd, pp[2], fl;
	struct stat pipe_st, null_st, st;
	struct ibv_mr *m;
	char back[32], cmd[96];
	CUdeviceptr p;
	double c0, c1;
	ssize_t n;

	rt.r = R_FREE;
	p = r_alloc();
	CU(cuMemsetD8(p, BG, rt.size));
	m = ibv_reg_mr(vb.pd, (void *)(uintptr_t)p, rt.size, ACC);
	if (!m)
		fail("ibv_reg_mr: %s", strerror(errno));
	efd = fd_named("anon_inode:[eventfd]");
	gfd = fd_named("/dev/gdrpin");
	if (efd < 0 || gfd < 0)
		fail("gdrhook's eventfd (%d) or /dev/gdrpin fd (%d) not found",
		     efd, gfd);
	/* the eventfd's number: the program's pipe, with data in it */
	if (pipe(pp) || write(pp[1], data, sizeof(data)) != sizeof(data) ||
	    dup2(pp[0], efd) != efd || fstat(efd, &pipe_st))
		fail("a pipe over fd %d: %s", efd, strerror(errno));
	close(pp[0]);
	if (ibv_dereg_mr(m))
		fail("ibv_dereg_mr");
	/* the driver revokes: gdrpin signals the eventfd it was given */
	snprintf(cmd, sizeof(cmd), "0 %llx %llx",
		 (unsigned long long)(p & ~0xffffULL),
		 (unsigned long long)rt.size);
	if (write_file("/sys/kernel/debug/fake_nvp2p/free", cmd))
		fail("write fake_nvp2p/free: %s", strerror(errno));
	sleep(1);
	c0 = thread_cpu("gdrhook-gdrpin");
	sleep(2);
	c1 = thread_cpu("gdrhook-gdrpin");
	if (c0 >= 0 && c1 >= 0 && c1 - c0 > 0.5)
		fail("the revocation helper used %.2f s of CPU in 2 s after its fd was taken: it spins",
		     c1 - c0);
	fl = fcntl(efd, F_GETFL);
	fcntl(efd, F_SETFL, fl | O_NONBLOCK);
	n = read(efd, back, sizeof(back));
	if (n != (ssize_t)sizeof(data) || memcmp(back, data, sizeof(data)))
		fail("the program's pipe on fd %d: %zd bytes back of %zu: gdrhook read it",
		     efd, n, sizeof(data));
	/* /dev/gdrpin's number: the program's /dev/null */
	{
		int nul = open("/dev/null", O_RDONLY);

		if (nul < 0 || dup2(nul, gfd) != gfd || stat("/dev/null", &null_st))
			fail("/dev/null over fd %d: %s", gfd, strerror(errno));
		close(nul);
	}
	r_free(p);
	for (int it = 0; it < iters; it++) {
		p = r_alloc();
		CU(cuMemsetD8(p, BG, rt.size));
		m = ibv_reg_mr(vb.pd, (void *)(uintptr_t)p, rt.size, ACC);
		if (!m)
			fail("iteration %d: ibv_reg_mr after the fds were taken: %s",
			     it, strerror(errno));
		fill_src(4096, (unsigned int)it);
		if (rdma_write(vb.qa, p, m->rkey, 4096) != IBV_WC_SUCCESS)
			fail("iteration %d: RDMA WRITE", it);
		check_contents(p, 0, 4096, (unsigned int)it,
			       "after the RDMA write");
		if (ibv_dereg_mr(m))
			fail("ibv_dereg_mr");
		r_free(p);
	}
	if (fstat(efd, &st) || st.st_ino != pipe_st.st_ino)
		fail("the program's pipe on fd %d was closed or replaced", efd);
	if (fstat(gfd, &st) || st.st_rdev != null_st.st_rdev)
		fail("the program's /dev/null on fd %d was closed or replaced",
		     gfd);
	close(pp[1]);
	printf("ok %s: gdrhook's eventfd and /dev/gdrpin fd taken by the program, a revocation signalled: the program's pipe unread, its files left open, no spinning helper, %d registrations and RDMA writes after\n",
	       cname, iters);
	return 0;
}

/* ------------------------------------------------------------ dmabuf */

static int run_dmabuf(void)
{
	CUdeviceptr p;
	struct ibv_mr *m;
	int fd = -1;
	CUresult rc;

	rt.r = R_FREE;
	p = r_alloc();
	rc = cuMemGetHandleForAddressRange(&fd, p, rt.size,
					   CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD,
					   0);
	if (rc != CUDA_SUCCESS)
		fail("cuMemGetHandleForAddressRange: %d", (int)rc);
	errno = 0;
	m = ibv_reg_dmabuf_mr(vb.pd, 0, rt.size, p, fd, ACC);
	if (m) {
		printf("info %s: ibv_reg_dmabuf_mr on %s succeeded (lkey %#x)\n",
		       cname, ibv_get_device_name(vb.ctx->device), m->lkey);
		ibv_dereg_mr(m);
	} else {
		printf("info %s: ibv_reg_dmabuf_mr on %s fails: errno %d (%s)\n",
		       cname, ibv_get_device_name(vb.ctx->device), errno,
		       strerror(errno));
	}
	close(fd);
	/* What the cache does with GDRHOOK_BACKEND=dmabuf on this device. */
	if (gh.lookup) {
		struct logev ev;
		unsigned int seed = 99;
		int st;

		CU(cuMemsetD8(p, BG, rt.size));
		log_read(&ev);
		m = ibv_reg_mr(vb.pd, (void *)(uintptr_t)p, rt.size, ACC);
		if (!m)
			fail("ibv_reg_mr through the shim: %s", strerror(errno));
		log_read(&ev);
		fill_src(rt.size, seed);
		st = rdma_write(vb.qa, p, m->rkey, rt.size);
		if (st != IBV_WC_SUCCESS)
			fail("RDMA WRITE: %s", ibv_wc_status_str(st));
		check_contents(p, 0, rt.size, seed, "after the RDMA write");
		printf("info %s: ibv_reg_mr through the shim: %d pin, %d NIC reg events, %d miss, %d hit; the RDMA write landed\n",
		       cname, ev.pins, ev.regs, ev.misses, ev.hits);
		ibv_dereg_mr(m);
	}
	CU(cuMemFree(p));
	printf("ok %s\n", cname);
	return 0;
}

int main(int argc, char **argv)
{
	int iters = argc > 2 ? atoi(argv[2]) : 8, rc;
	const char *dev = getenv("RDMA_DEV") ? getenv("RDMA_DEV") : "rxe0";

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 2)
		fail("usage: rdma_realloc free|freeasync|pool|ctx|vmm|revoke|dmabuf|fdsteal [ITERS]");
	cname = argv[1];
	exact = !getenv("GDRHOOK_REMOTE_EXPOSURE") ||
		strcmp(getenv("GDRHOOK_REMOTE_EXPOSURE"), "allocation");
	/* rxe has type-1 windows: gdrhook uses them unless told not to */
	windows = exact && (!getenv("GDRHOOK_WINDOWS") ||
			    strcmp(getenv("GDRHOOK_WINDOWS"), "0"));
	if (gdrhook_preload_open(&gh))
		fail("libgdrhook.so is not preloaded");
	log_path = getenv("GDRHOOK_TRACE");
	if (!log_path || !*log_path || !strcmp(log_path, "stderr"))
		fail("GDRHOOK_TRACE must name a file");
	rt.size = 4 * MiB;
	rb = malloc(rt.size);
	CU(cuInit(0));
	CU(cuDeviceGet(&rt.dev, 0));
	CU(cuDevicePrimaryCtxRetain(&rt.prim, rt.dev));
	CU(cuCtxSetCurrent(rt.prim));
	verbs_open(dev);
	if (!strcmp(cname, "free"))
		rc = run_route(R_FREE, iters);
	else if (!strcmp(cname, "freeasync"))
		rc = run_route(R_FREEASYNC, iters);
	else if (!strcmp(cname, "pool"))
		rc = run_route(R_POOL, iters);
	else if (!strcmp(cname, "ctx"))
		rc = run_route(R_CTX, iters);
	else if (!strcmp(cname, "vmm"))
		rc = run_route(R_VMM, iters);
	else if (!strcmp(cname, "revoke"))
		rc = run_revoke(iters);
	else if (!strcmp(cname, "dmabuf"))
		rc = run_dmabuf();
	else if (!strcmp(cname, "fdsteal"))
		rc = run_fdsteal(iters);
	else
		fail("unknown case");
	verbs_close();
	if (rt.vmm_va)
		CU(cuMemAddressFree(rt.vmm_va, rt.size));
	CU(cuDevicePrimaryCtxRelease(rt.dev));
	free(rb);
	return rc;
}
