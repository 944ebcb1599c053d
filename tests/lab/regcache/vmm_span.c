// SPDX-License-Identifier: MIT
/*
 * vmm_span: registrations across VMM mappings over real rdma-core and a
 * real kernel (soft-RoCE, rxe0, in the QEMU lab: tests/lab/regcache/run),
 * with the CUDA driver double (its "GPU memory" is host pages, so rxe can
 * register it: the peermem backend's path) under LD_PRELOAD=libgdrhook.so.
 *
 * The shapes of the GPU proof (tests/gpu/vmm_span_proof.c): a segment of 3
 * chunks, 3 physical allocations; registrations crossing 0, 1 and 2 chunk
 * boundaries (cached spans: hits inside them); an RDMA WRITE across both
 * boundaries lands and reads back; the 2-chunk span's rkey cannot reach
 * the third chunk; unmapping the middle chunk deregisters both spans for
 * real before the unmap (their rkeys are refused by the NIC after);
 * remapping it is a new generation: a new registration, and the data of a
 * write lands in the new memory.  Repeated ITERS times.
 *
 * Usage: vmm_span [ITERS]   prints "ok vmm_span: ..." or "FAIL vmm_span:
 * why" and exits 0 / 1.
 */
#include <cuda.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <infiniband/verbs.h>

#include "verbs_qp.h"

#define MiB		(1ULL << 20)
#define CHUNK		(2 * MiB)	/* the double's VMM granularity */
#define ACC		(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
			 IBV_ACCESS_REMOTE_READ)

static void fail(const char *fmt, ...)
{
	va_list ap;

	printf("FAIL vmm_span: ");
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
	struct ibv_qp *qa, *qb;
	struct vqp_path path;
	unsigned char *src;
	struct ibv_mr *src_mr;
} vb;

static struct ibv_qp *qp_new(void)
{
	struct ibv_qp *qp = vqp_create(vb.pd, vb.cq, 16, 16, 0);

	if (!qp)
		fail("ibv_create_qp: %s", strerror(errno));
	return qp;
}

/* RESET -> INIT -> RTR -> RTS towards dest (also after an error). */
static void qp_connect(struct ibv_qp *qp, uint32_t dest)
{
	const char *step;
	int rc = vqp_connect(qp, &vb.path, dest, &step);

	if (rc)
		fail("modify %s: %s", step, strerror(rc));
}

static void pair_connect(void)
{
	qp_connect(vb.qa, vb.qb->qp_num);
	qp_connect(vb.qb, vb.qa->qp_num);
}

static void verbs_open(void)
{
	struct ibv_device **l;
	int n, i, rc;

	l = ibv_get_device_list(&n);
	for (i = 0; l && i < n; i++)
		if (!strcmp(ibv_get_device_name(l[i]), "rxe0"))
			break;
	if (!l || i == n)
		fail("no rxe0");
	vb.ctx = ibv_open_device(l[i]);
	ibv_free_device_list(l);
	if (!vb.ctx)
		fail("open rxe0: %s", strerror(errno));
	rc = vqp_path_query(vb.ctx, ACC, &vb.path);
	if (rc)
		fail("query rxe0: %s", strerror(rc));
	/* rxe under TCG on a loaded host: 0.5 s per try, 7 tries (a refused
	 * rkey is a NAK, answered at once, so the probes stay fast) */
	vb.path.timeout = 17;
	vb.path.reset_tries = 1000;
	vb.pd = ibv_alloc_pd(vb.ctx);
	vb.cq = ibv_create_cq(vb.ctx, 64, NULL, NULL, 0);
	if (!vb.pd || !vb.cq)
		fail("pd/cq: %s", strerror(errno));
	vb.qa = qp_new();
	vb.qb = qp_new();
	pair_connect();
	if (posix_memalign((void **)&vb.src, 4096, 2 * CHUNK))
		fail("posix_memalign");
	vb.src_mr = ibv_reg_mr(vb.pd, vb.src, 2 * CHUNK, IBV_ACCESS_LOCAL_WRITE);
	if (!vb.src_mr)
		fail("ibv_reg_mr(host source): %s", strerror(errno));
}

/* RDMA WRITE len bytes of vb.src to raddr/rkey; the completion status.
 * After an error the pair is reconnected. */
static int rdma_write(uint64_t raddr, uint32_t rkey, size_t len)
{
	struct ibv_sge sge = { (uintptr_t)vb.src, (uint32_t)len,
			       vb.src_mr->lkey };
	struct ibv_send_wr wr, *bad;
	struct ibv_wc wc;
	struct timespec t0, t;
	int n;

	memset(&wr, 0, sizeof(wr));
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	if (ibv_post_send(vb.qa, &wr, &bad))
		fail("ibv_post_send: %s", strerror(errno));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		n = ibv_poll_cq(vb.cq, 1, &wc);
		if (n < 0)
			fail("ibv_poll_cq");
		if (n == 1)
			break;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > 60)
			fail("no completion in 60 s");
	}
	if (wc.status != IBV_WC_SUCCESS) {
		while (ibv_poll_cq(vb.cq, 1, &wc) > 0)
			;
		pair_connect();
	}
	return wc.status;
}

/* ----------------------------------------------------------- memory */

static CUmemGenericAllocationHandle chunk_map(CUdeviceptr va)
{
	CUmemAllocationProp prop;
	CUmemAccessDesc a;
	CUmemGenericAllocationHandle h;

	memset(&prop, 0, sizeof(prop));
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.allocFlags.gpuDirectRDMACapable = 1;
	CU(cuMemCreate(&h, CHUNK, &prop, 0));
	CU(cuMemMap(va, CHUNK, 0, h, 0));
	memset(&a, 0, sizeof(a));
	a.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	CU(cuMemSetAccess(va, CHUNK, &a, 1));
	return h;
}

static struct ibv_mr *reg(uint64_t addr, size_t len)
{
	struct ibv_mr *mr = ibv_reg_mr(vb.pd, (void *)(uintptr_t)addr, len,
				       ACC);

	if (!mr)
		fail("ibv_reg_mr(%#llx+%zu): %s", (unsigned long long)addr,
		     len, strerror(errno));
	return mr;
}

/* Write a pattern (seed) to [addr, addr + len) through rkey; read back. */
static void write_check(uint64_t addr, uint32_t rkey, size_t len,
			unsigned int seed)
{
	static unsigned char back[2 * CHUNK + 8192];
	int st;

	for (size_t i = 0; i < len; i++)
		vb.src[i] = (unsigned char)(seed * 131 + i * 7);
	st = rdma_write(addr, rkey, len);
	if (st != IBV_WC_SUCCESS)
		fail("RDMA WRITE %#llx+%zu: %s", (unsigned long long)addr, len,
		     ibv_wc_status_str(st));
	/* one copy per mapping: the driver double copies within one */
	for (size_t off = 0, n; off < len; off += n) {
		n = CHUNK - ((addr + off) & (CHUNK - 1));
		if (n > len - off)
			n = len - off;
		CU(cuMemcpyDtoH(back + off, addr + off, n));
	}
	if (memcmp(back, vb.src, len))
		fail("data of the write at %#llx+%zu did not land",
		     (unsigned long long)addr, len);
}

int main(int argc, char **argv)
{
	int iters = argc > 1 ? atoi(argv[1]) : 4;
	CUmemGenericAllocationHandle h[3];
	struct ibv_mr *m0, *m1, *m2, *hit;
	CUdeviceptr va;
	CUcontext cu;
	CUdevice dev;

	setvbuf(stdout, NULL, _IOLBF, 0);
	CU(cuInit(0));
	CU(cuDeviceGet(&dev, 0));
	CU(cuDevicePrimaryCtxRetain(&cu, dev));
	CU(cuCtxSetCurrent(cu));
	verbs_open();
	CU(cuMemAddressReserve(&va, 3 * CHUNK, 0, 0, 0));
	for (int i = 0; i < 3; i++)
		h[i] = chunk_map(va + i * CHUNK);
	for (int it = 0; it < iters; it++) {
		m0 = reg(va + 4096, 65536);
		m1 = reg(va + CHUNK - 4096, 8192);
		m2 = reg(va + CHUNK - 4096, CHUNK + 8192);
		if (m1->lkey == m0->lkey || m2->lkey == m1->lkey)
			fail("spans of 1 and 2 boundaries share a registration");
		hit = reg(va + 4096, 2 * CHUNK);
		if (hit->lkey != m1->lkey && hit->lkey != m2->lkey)
			fail("a registration inside cached spans was not a hit");
		ibv_dereg_mr(hit);
		/* after a remap these are new registrations: the old ones'
		 * rkeys were refused below, so a write can only land
		 * through a registration of the new generation */
		write_check(va + CHUNK - 4096, m1->rkey, 8192, it + 100);
		/* across both boundaries, through the 3-chunk span */
		write_check(va + CHUNK - 4096, m2->rkey, CHUNK + 8192, it);
		/* the 2-chunk span's rkey does not reach the third chunk */
		if (rdma_write(va + 2 * CHUNK, m1->rkey, 64) == IBV_WC_SUCCESS)
			fail("the 2-chunk span's rkey reached the third chunk");
		/* unmap the middle: both spans deregistered first */
		CU(cuMemUnmap(va + CHUNK, CHUNK));
		if (rdma_write(va, m1->rkey, 64) == IBV_WC_SUCCESS ||
		    rdma_write(va, m2->rkey, 64) == IBV_WC_SUCCESS)
			fail("a span's rkey still works after its middle chunk was unmapped");
		ibv_dereg_mr(m0);	/* chunk 0's own: still live */
		ibv_dereg_mr(m1);	/* revoked: no-op */
		ibv_dereg_mr(m2);
		CU(cuMemRelease(h[1]));
		h[1] = chunk_map(va + CHUNK);	/* a new generation */
	}
	for (int i = 0; i < 3; i++) {
		CU(cuMemUnmap(va + i * CHUNK, CHUNK));
		CU(cuMemRelease(h[i]));
	}
	CU(cuMemAddressFree(va, 3 * CHUNK));
	ibv_dereg_mr(vb.src_mr);
	ibv_destroy_qp(vb.qa);
	ibv_destroy_qp(vb.qb);
	ibv_destroy_cq(vb.cq);
	ibv_dealloc_pd(vb.pd);
	ibv_close_device(vb.ctx);
	printf("ok vmm_span: %d iterations: spans over 1 and 2 boundaries cached, hits inside, writes across boundaries land, revoked before unmap, remap a miss\n",
	       iters);
	return 0;
}
