// SPDX-License-Identifier: MIT
/*
 * bench_regcache: what the registration cache saves on a real verbs stack.
 * Run it in the QEMU lab (soft-RoCE rxe0, the CUDA driver double for "GPU
 * memory"):
 *
 *     make && tests/lab/lab --run 'REGCACHE_CASES= REGCACHE_BENCH=1 tests/lab/regcache/run'
 *
 * or directly: LD_LIBRARY_PATH=build/fake REGCACHE_SHIM_LIB=build/libgdrhook.so
 * bench_regcache [ITERS].  It runs itself once without the shim (the
 * anchor: every ibv_reg_mr/ibv_dereg_mr reaches rxe) and then once per
 * configuration with LD_PRELOAD=$REGCACHE_SHIM_LIB: each backend of
 * GDRHOOK_BACKEND (a single one when it is set in the environment, else
 * auto, peermem and dmabuf) under each GDRHOOK_REMOTE_EXPOSURE
 * (REGCACHE_EXPOSURES, default "exact exact-nowin allocation": exact over
 * memory windows, exact with a NIC registration per MR, allocation).  Per buffer size it
 * prints the median ns (a loaded host preempts at random) per call of
 *   reg, dereg   ibv_reg_mr / ibv_dereg_mr of the same buffer again
 *                (with the shim: a hit, or the NIC part only with exact);
 *   miss         ibv_reg_mr of a freshly allocated buffer (pin + register);
 *   xfer         a register-per-transfer step: ibv_reg_mr + one RDMA WRITE
 *                of 4 KiB into the buffer + poll + ibv_dereg_mr, over a
 *                loopback RC QP pair;
 * and each configuration's speed-up against the anchor of the same run.
 * Under QEMU TCG the absolute figures are those of an emulated CPU:
 * compare the columns, not with hardware.
 */
#include <cuda.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "verbs_qp.h"
#include "bench_util.h"

#define ACC	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
		 IBV_ACCESS_REMOTE_READ)
#define XFER	4096

static const size_t sizes[] = { 4 << 10, 64 << 10, 1 << 20, 16 << 20 };
#define NSIZES	(sizeof(sizes) / sizeof(sizes[0]))

static void die(const char *what)
{
	fprintf(stderr, "bench_regcache: %s (errno %d: %s)\n", what, errno,
		strerror(errno));
	exit(1);
}

static struct {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qa, *qb;
	struct vqp_path path;
	void *src;
	struct ibv_mr *src_mr;
} vb;

static struct ibv_qp *qp_new(void)
{
	struct ibv_qp *qp = vqp_create(vb.pd, vb.cq, 16, 16, 0);

	if (!qp)
		die("ibv_create_qp");
	return qp;
}

static void qp_connect(struct ibv_qp *qp, uint32_t dest)
{
	const char *step;

	errno = vqp_connect(qp, &vb.path, dest, &step);
	if (errno)
		die(step);
}

static void verbs_open(const char *want)
{
	struct ibv_device **l;
	int n, i;

	l = ibv_get_device_list(&n);
	if (!l)
		die("ibv_get_device_list");
	for (i = 0; i < n; i++)
		if (!strcmp(ibv_get_device_name(l[i]), want))
			break;
	if (i == n)
		die("no such RDMA device");
	vb.ctx = ibv_open_device(l[i]);
	ibv_free_device_list(l);
	if (!vb.ctx)
		die("ibv_open_device");
	errno = vqp_path_query(vb.ctx, ACC, &vb.path);
	if (errno)
		die("ibv_query_port/gid");
	vb.pd = ibv_alloc_pd(vb.ctx);
	vb.cq = ibv_create_cq(vb.ctx, 64, NULL, NULL, 0);
	if (!vb.pd || !vb.cq)
		die("pd/cq");
	vb.qa = qp_new();
	vb.qb = qp_new();
	qp_connect(vb.qa, vb.qb->qp_num);
	qp_connect(vb.qb, vb.qa->qp_num);
	if (posix_memalign(&vb.src, 4096, XFER))
		die("posix_memalign");
	memset(vb.src, 0x5a, XFER);
	vb.src_mr = ibv_reg_mr(vb.pd, vb.src, XFER, IBV_ACCESS_LOCAL_WRITE);
	if (!vb.src_mr)
		die("ibv_reg_mr(host)");
}

static void write_wait(uint64_t raddr, uint32_t rkey)
{
	struct ibv_sge sge = { (uintptr_t)vb.src, XFER, vb.src_mr->lkey };
	struct ibv_send_wr wr, *bad;
	struct ibv_wc wc;
	int n;

	memset(&wr, 0, sizeof(wr));
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	if (ibv_post_send(vb.qa, &wr, &bad))
		die("ibv_post_send");
	while ((n = ibv_poll_cq(vb.cq, 1, &wc)) == 0)
		;
	if (n < 0 || wc.status != IBV_WC_SUCCESS) {
		fprintf(stderr, "bench_regcache: completion %s\n",
			ibv_wc_status_str(wc.status));
		exit(1);
	}
}

/* One process: print "R size reg_ns dereg_ns miss_ns xfer_ns". */
static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Median: a loaded host preempts the emulated CPU at random; a mean
 * would be the preemptions' figure. */
static double median(uint64_t *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_u64);
	return (double)v[n / 2];
}

static void child(int iters)
{
	uint64_t *reg = calloc((size_t)iters, sizeof(uint64_t));
	uint64_t *dereg = calloc((size_t)iters, sizeof(uint64_t));
	uint64_t *miss = calloc((size_t)iters, sizeof(uint64_t));
	uint64_t *xfer = calloc((size_t)iters, sizeof(uint64_t));
	CUdevice dev;
	CUcontext ctx;

	if (!reg || !dereg || !miss || !xfer)
		die("calloc");
	if (cuInit(0) || cuDeviceGet(&dev, 0) ||
	    cuDevicePrimaryCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx))
		die("CUDA init");
	verbs_open(getenv("RDMA_DEV") ? getenv("RDMA_DEV") : "rxe0");
	for (size_t s = 0; s < NSIZES; s++) {
		int nmiss = iters / 4 ? iters / 4 : 1;
		size_t sz = sizes[s];
		uint64_t t0, t1, t2;
		CUdeviceptr p;
		struct ibv_mr *mr;

		if (cuMemAlloc(&p, sz))
			die("cuMemAlloc");
		/* warm up: the first registration is the miss (shim) */
		mr = ibv_reg_mr(vb.pd, (void *)(uintptr_t)p, sz, ACC);
		if (!mr)
			die("ibv_reg_mr");
		ibv_dereg_mr(mr);
		for (int i = 0; i < iters; i++) {
			t0 = now_ns();
			mr = ibv_reg_mr(vb.pd, (void *)(uintptr_t)p, sz, ACC);
			t1 = now_ns();
			if (!mr)
				die("ibv_reg_mr");
			if (ibv_dereg_mr(mr))
				die("ibv_dereg_mr");
			t2 = now_ns();
			reg[i] = t1 - t0;
			dereg[i] = t2 - t1;
		}
		for (int i = 0; i < nmiss; i++) {
			CUdeviceptr q;

			if (cuMemAlloc(&q, sz))
				die("cuMemAlloc");
			t0 = now_ns();
			mr = ibv_reg_mr(vb.pd, (void *)(uintptr_t)q, sz, ACC);
			t1 = now_ns();
			if (!mr)
				die("ibv_reg_mr (miss)");
			miss[i] = t1 - t0;
			ibv_dereg_mr(mr);
			cuMemFree(q);
		}
		for (int i = 0; i < iters; i++) {
			t0 = now_ns();
			mr = ibv_reg_mr(vb.pd, (void *)(uintptr_t)p, sz, ACC);
			if (!mr)
				die("ibv_reg_mr");
			write_wait(p + (uint64_t)(i % (sz / XFER)) * XFER,
				   mr->rkey);
			if (ibv_dereg_mr(mr))
				die("ibv_dereg_mr");
			xfer[i] = now_ns() - t0;
		}
		printf("R %zu %.0f %.0f %.0f %.0f\n", sz, median(reg, iters),
		       median(dereg, iters), median(miss, nmiss),
		       median(xfer, iters));
		fflush(stdout);
		cuMemFree(p);
	}
	ibv_dereg_mr(vb.src_mr);
	ibv_destroy_qp(vb.qa);
	ibv_destroy_qp(vb.qb);
	ibv_destroy_cq(vb.cq);
	ibv_dealloc_pd(vb.pd);
	ibv_close_device(vb.ctx);
	free(reg);
	free(dereg);
	free(miss);
	free(xfer);
}

struct res {
	double reg, dereg, miss, xfer;
};

/* backend NULL: no shim. */
static int run(const char *preload, const char *backend, const char *expo,
	       int iters, struct res *r)
{
	char cmd[4096];
	char line[256];
	FILE *f;
	int n = 0;

	/* exact-nowin: exact exposure with a NIC registration per MR
	 * (GDRHOOK_WINDOWS=0) instead of a memory window */
	if (preload)
		snprintf(cmd, sizeof(cmd),
			 "env LD_PRELOAD=%s GDRHOOK_BACKEND=%s GDRHOOK_REMOTE_EXPOSURE=%s GDRHOOK_WINDOWS=%d /proc/%d/exe --child %d",
			 preload, backend,
			 strncmp(expo, "exact", 5) ? expo : "exact",
			 strcmp(expo, "exact-nowin") ? 1 : 0, (int)getpid(),
			 iters);
	else
		snprintf(cmd, sizeof(cmd),
			 "env -u LD_PRELOAD /proc/%d/exe --child %d",
			 (int)getpid(), iters);
	f = popen(cmd, "r");
	if (!f)
		die("popen");
	while (fgets(line, sizeof(line), f)) {
		size_t sz;
		double a, b, c, d;

		if (sscanf(line, "R %zu %lf %lf %lf %lf", &sz, &a, &b, &c,
			   &d) == 5 && n < (int)NSIZES) {
			r[n].reg = a;
			r[n].dereg = b;
			r[n].miss = c;
			r[n].xfer = d;
			n++;
		}
	}
	return pclose(f) == 0 && n == (int)NSIZES ? 0 : -1;
}

static void row(const char *name, const struct res *r, const struct res *raw)
{
	for (size_t s = 0; s < NSIZES; s++)
		printf("%-20s %9zu | %10.0f %10.0f %10.0f %10.0f | %7.2fx %7.2fx %7.2fx\n",
		       s ? "" : name, sizes[s], r[s].reg, r[s].dereg,
		       r[s].miss, r[s].xfer, raw[s].reg / r[s].reg,
		       raw[s].miss / r[s].miss, raw[s].xfer / r[s].xfer);
}

int main(int argc, char **argv)
{
	struct res raw[NSIZES], shim[NSIZES];
	const char *lib = getenv("REGCACHE_SHIM_LIB");
	const char *be = getenv("GDRHOOK_BACKEND");
	const char *ex = getenv("REGCACHE_EXPOSURES");
	char backends[256], expos[256], name[600];
	int iters, failed = 0;

	if (argc > 2 && !strcmp(argv[1], "--child")) {
		child(atoi(argv[2]));
		return 0;
	}
	iters = argc > 1 ? atoi(argv[1]) : 200;
	if (!lib) {
		fprintf(stderr, "bench_regcache: set REGCACHE_SHIM_LIB to libgdrhook.so\n");
		return 2;
	}
	snprintf(backends, sizeof(backends), "%s",
		 be && *be ? be : "auto peermem dmabuf");
	snprintf(expos, sizeof(expos), "%s",
		 ex && *ex ? ex : "exact exact-nowin allocation");
	if (run(NULL, NULL, NULL, iters, raw)) {
		fprintf(stderr, "bench_regcache: the run without the shim failed\n");
		return 1;
	}
	printf("registration on %s (\"GPU\" memory of the driver double), %d iterations, median ns per call; speed-up = no shim / this, same run\n",
	       getenv("RDMA_DEV") ? getenv("RDMA_DEV") : "rxe0", iters);
	printf("%-20s %9s | %10s %10s %10s %10s | %8s %8s %8s\n",
	       "configuration", "size", "reg", "dereg", "miss", "xfer",
	       "reg", "miss", "xfer");
	row("no shim", raw, raw);
	for (char *b = strtok(backends, " "); b; b = strtok(NULL, " ")) {
		char list[256];

		snprintf(list, sizeof(list), "%s", expos);
		for (char *e = list, *next; e && *e; e = next) {
			next = strchr(e, ' ');
			if (next)
				*next++ = 0;
			snprintf(name, sizeof(name), "%s/%s", b, e);
			if (run(lib, b, e, iters, shim)) {
				printf("%-20s: the run failed\n", name);
				failed = 1;
				continue;
			}
			row(name, shim, raw);
		}
	}
	return failed;
}
