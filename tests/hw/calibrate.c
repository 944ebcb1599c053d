// SPDX-License-Identifier: MIT
/*
 * calibrate: what registration and memory windows cost on this machine's
 * first RDMA device and first GPU, printed as rows of the fake NIC's cost
 * table (tests/fakeverbs/fakeverbs_cost.c), so that the model the
 * benchmarks run (tests/bench/bench_exposure) becomes a measurement by
 * pasting them in as a new profile.
 *
 * Per size, 4 KiB .. 1 GiB (x4 steps): ibv_reg_mr of host memory, of GPU
 * memory (a peer-memory client: nvidia-peermem; skipped, with the reason,
 * where the NIC refuses), ibv_reg_dmabuf_mr of one
 * cuMemGetHandleForAddressRange export, and each ibv_dereg_mr; then
 * ibv_alloc_mw/ibv_dealloc_mw of a type-1 window, and its bind and
 * zero-length unbind (ibv_bind_mw), each timed to its CQE on an RC QP
 * connected to itself.  A row's figure is a least-squares line through
 * the medians (fixed ns + ns per MiB), lo/hi the same through the 10th
 * and 90th percentiles.
 *
 * libcuda is opened at run time (dlopen, RTLD_GLOBAL: the fake NIC finds
 * the CUDA double's test hooks through the global scope); without it the
 * GPU rows are left out, said in a comment.  Against the doubles:
 *
 *   LD_LIBRARY_PATH=build/fakeverbs:build/fake build/tests/hw/calibrate
 *
 * CALIBRATE_CLOCK=modelled reads the fake NIC's modelled clock
 * (fakeverbs_modelled_ns, FAKEVERBS_COST) instead of CLOCK_MONOTONIC:
 * then the rows must come back as the profile's own (tests/hw/run).
 *
 *   calibrate [--iters N] [--max-mib M] [--profile NAME] [--dev NAME]
 */
#include <cuda.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "verbs_qp.h"

#define MiB	(1ull << 20)
#define ACC	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
		 IBV_ACCESS_REMOTE_READ)
#define MAXS	16
#define MAXIT	1000

/* The table's op names (tests/fakeverbs/fakeverbs_cost.h). */
enum op { REG_HOST, DEREG_HOST, REG_GPU, DEREG_GPU, REG_DMABUF, DEREG_DMABUF,
	  ALLOC_MW, DEALLOC_MW, BIND, UNBIND, NOPS };
static const char *const op_name[NOPS] = {
	"FV_COST_REG_HOST", "FV_COST_DEREG_HOST", "FV_COST_REG_GPU",
	"FV_COST_DEREG_GPU", "FV_COST_REG_DMABUF", "FV_COST_DEREG_DMABUF",
	"FV_COST_ALLOC_MW", "FV_COST_DEALLOC_MW", "FV_COST_BIND",
	"FV_COST_UNBIND",
};

static struct {
	CUresult (*init)(unsigned int);
	CUresult (*device_get)(CUdevice *, int);
	CUresult (*device_get_name)(char *, int, CUdevice);
	CUresult (*ctx_retain)(CUcontext *, CUdevice);
	CUresult (*ctx_set)(CUcontext);
	CUresult (*alloc)(CUdeviceptr *, size_t);
	CUresult (*free)(CUdeviceptr);
	CUresult (*handle)(void *, CUdeviceptr, size_t,
			   CUmemRangeHandleType, unsigned long long);
} cu;

/* Per op: sizes measured, and per size the samples. */
static struct series {
	int n;			/* sizes */
	uint64_t len[MAXS];
	double p10[MAXS], p50[MAXS], p90[MAXS];
	const char *skipped;
} ser[NOPS];

static unsigned long long (*modelled)(void);
static unsigned int iters = 0;

static double clk(void)
{
	struct timespec t;

	if (modelled)
		return (double)modelled();
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void add(enum op o, uint64_t len, double *v, unsigned int n)
{
	struct series *s = &ser[o];

	if (s->n >= MAXS || !n)
		return;
	qsort(v, n, sizeof(*v), cmp_d);
	s->len[s->n] = len;
	s->p10[s->n] = v[n / 10];
	s->p50[s->n] = v[n / 2];
	s->p90[s->n] = v[n - 1 - n / 10];
	s->n++;
}

/* Least squares: y = a + b * (len / MiB); a and b at least 0. */
static void fit(const struct series *s, const double *y, double *a, double *b)
{
	double sx = 0, sy = 0, sxx = 0, sxy = 0, n = s->n;

	for (int i = 0; i < s->n; i++) {
		double x = (double)s->len[i] / MiB;

		sx += x;
		sy += y[i];
		sxx += x * x;
		sxy += x * y[i];
	}
	*b = n > 1 && n * sxx - sx * sx > 0 ?
	     (n * sxy - sx * sy) / (n * sxx - sx * sx) : 0;
	if (*b < 0)
		*b = 0;
	*a = (sy - *b * sx) / n;
	if (*a < 0)
		*a = 0;
}

static unsigned int iters_for(uint64_t len)
{
	unsigned int n = iters ? iters : len <= 16 * MiB ? 50 : 10;

	return n > MAXIT ? MAXIT : n;
}

/*
 * Registers [p, p + len) n times, by reg_mr, or by reg_dmabuf_mr of fd
 * (offset off) when fd >= 0; each reg and dereg timed.  0, or the errno of
 * the first failure (nothing recorded then).
 */
static int measure_reg(struct ibv_pd *pd, void *p, uint64_t len, int fd,
		       uint64_t off, enum op reg, enum op dereg)
{
	static double tr[MAXIT], td[MAXIT];
	unsigned int n = iters_for(len);

	for (unsigned int i = 0; i < n; i++) {
		struct ibv_mr *mr;
		double t0 = clk();

		mr = fd < 0 ? ibv_reg_mr(pd, p, len, ACC) :
		     ibv_reg_dmabuf_mr(pd, off, len, (uintptr_t)p, fd, ACC);
		tr[i] = clk() - t0;
		if (!mr)
			return errno ? errno : EIO;
		t0 = clk();
		if (ibv_dereg_mr(mr))
			return errno ? errno : EIO;
		td[i] = clk() - t0;
	}
	add(reg, len, tr, n);
	add(dereg, len, td, n);
	return 0;
}

static void sweep(struct ibv_pd *pd, char *p, uint64_t max, int fd,
		  enum op reg, enum op dereg, const char *what)
{
	static char why[NOPS][160];

	for (uint64_t len = 4096; len <= max; len *= 4) {
		int e = measure_reg(pd, p, len, fd, 0, reg, dereg);

		if (e) {
			snprintf(why[reg], sizeof(why[reg]), "%s of %llu bytes: %s",
				 what, (unsigned long long)len, strerror(e));
			ser[reg].skipped = ser[dereg].skipped = why[reg];
			ser[reg].n = ser[dereg].n = 0;
			return;
		}
	}
}

static int load_cuda(char *gpu, size_t n)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
	CUcontext ctx;
	CUdevice dev;

	if (!h)
		return -1;
	cu.init = (CUresult (*)(unsigned int))dlsym(h, "cuInit");
	cu.device_get = (CUresult (*)(CUdevice *, int))dlsym(h, "cuDeviceGet");
	cu.device_get_name = (CUresult (*)(char *, int, CUdevice))dlsym(h, "cuDeviceGetName");
	cu.ctx_retain = (CUresult (*)(CUcontext *, CUdevice))dlsym(h, "cuDevicePrimaryCtxRetain");
	cu.ctx_set = (CUresult (*)(CUcontext))dlsym(h, "cuCtxSetCurrent");
	cu.alloc = (CUresult (*)(CUdeviceptr *, size_t))dlsym(h, "cuMemAlloc_v2");
	cu.free = (CUresult (*)(CUdeviceptr))dlsym(h, "cuMemFree_v2");
	cu.handle = (CUresult (*)(void *, CUdeviceptr, size_t, CUmemRangeHandleType,
				  unsigned long long))dlsym(h, "cuMemGetHandleForAddressRange");
	if (!cu.init || !cu.device_get || !cu.ctx_retain || !cu.ctx_set ||
	    !cu.alloc || !cu.free || cu.init(0) || cu.device_get(&dev, 0) ||
	    cu.ctx_retain(&ctx, dev) || cu.ctx_set(ctx))
		return -1;
	if (!cu.device_get_name || cu.device_get_name(gpu, (int)n, dev))
		snprintf(gpu, n, "GPU 0");
	return 0;
}

/* An RC QP connected to itself, in RTS (as src/pin/mwin.c's); NULL and
 * errno. */
static struct ibv_qp *loopback_qp(struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_qp *qp = vqp_create(pd, cq, 16, 1, 0);
	struct vqp_path p;
	const char *step;
	int err;

	if (!qp)
		return NULL;
	err = vqp_path_query(pd->context, IBV_ACCESS_REMOTE_WRITE, &p);
	if (!err)
		err = vqp_connect(qp, &p, qp->qp_num, &step);
	if (err) {
		ibv_destroy_qp(qp);
		errno = err;
		return NULL;
	}
	return qp;
}

/* One bind (len > 0) or unbind (len 0) posted and its CQE polled. */
static int bind_to_cqe(struct ibv_qp *qp, struct ibv_cq *cq, struct ibv_mw *mw,
		       struct ibv_mr *mr, uint64_t len)
{
	struct ibv_mw_bind b = { .wr_id = 1, .send_flags = IBV_SEND_SIGNALED,
		.bind_info = { .mr = len ? mr : NULL,
			       .addr = len ? (uintptr_t)mr->addr : 0,
			       .length = len,
			       .mw_access_flags = len ? IBV_ACCESS_REMOTE_WRITE : 0 } };
	struct ibv_wc wc;
	int n;

	if (ibv_bind_mw(qp, mw, &b))
		return errno ? errno : EIO;
	while ((n = ibv_poll_cq(cq, 1, &wc)) == 0)
		;
	if (n < 0 || wc.status != IBV_WC_SUCCESS)
		return EIO;
	return 0;
}

static const char *measure_windows(struct ibv_pd *pd, struct ibv_mr *parent)
{
	static double ta[MAXIT], tdl[MAXIT], tb[MAXIT], tu[MAXIT];
	static char why[160];
	unsigned int n = iters ? iters : 200;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mw *mw;

	if (n > MAXIT)
		n = MAXIT;
	cq = ibv_create_cq(pd->context, 32, NULL, NULL, 0);
	qp = cq ? loopback_qp(pd, cq) : NULL;
	if (!qp) {
		snprintf(why, sizeof(why), "no loopback RC QP: %s", strerror(errno));
		return why;
	}
	for (unsigned int i = 0; i < n; i++) {
		double t0 = clk();
		int e;

		mw = ibv_alloc_mw(pd, IBV_MW_TYPE_1);
		ta[i] = clk() - t0;
		if (!mw) {
			snprintf(why, sizeof(why), "ibv_alloc_mw(type 1): %s (windows exist on physical functions only)",
				 strerror(errno));
			return why;
		}
		t0 = clk();
		e = bind_to_cqe(qp, cq, mw, parent, 4096);
		tb[i] = clk() - t0;
		if (!e) {
			t0 = clk();
			e = bind_to_cqe(qp, cq, mw, parent, 0);
			tu[i] = clk() - t0;
		}
		if (e) {
			snprintf(why, sizeof(why), "type-1 bind or unbind to its CQE: %s",
				 strerror(e));
			return why;
		}
		t0 = clk();
		ibv_dealloc_mw(mw);
		tdl[i] = clk() - t0;
	}
	add(ALLOC_MW, 0, ta, n);
	add(DEALLOC_MW, 0, tdl, n);
	add(BIND, 0, tb, n);
	add(UNBIND, 0, tu, n);
	ibv_destroy_qp(qp);
	ibv_destroy_cq(cq);
	return NULL;
}

int main(int argc, char **argv)
{
	const char *profile = "measured", *want = NULL, *c, *wskip;
	unsigned long long max = 1024 * MiB;
	struct ibv_device **list;
	struct ibv_context *ctx = NULL;
	struct ibv_mr *parent = NULL;
	struct ibv_pd *pd;
	char gpu[128] = "", date[32], src[512];
	CUdeviceptr d = 0;
	time_t now = time(NULL);
	int nd = 0, fd = -1;
	char *host;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--iters") && i + 1 < argc)
			iters = (unsigned int)strtoul(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--max-mib") && i + 1 < argc)
			max = strtoull(argv[++i], NULL, 0) * MiB;
		else if (!strcmp(argv[i], "--profile") && i + 1 < argc)
			profile = argv[++i];
		else if (!strcmp(argv[i], "--dev") && i + 1 < argc)
			want = argv[++i];
		else {
			fprintf(stderr, "usage: %s [--iters N] [--max-mib M] [--profile NAME] [--dev NAME]\n",
				argv[0]);
			return 2;
		}
	}
	c = getenv("CALIBRATE_CLOCK");
	if (c && !strcmp(c, "modelled")) {
		modelled = (unsigned long long (*)(void))dlsym(RTLD_DEFAULT,
							      "fakeverbs_modelled_ns");
		if (!modelled) {
			fprintf(stderr, "calibrate: CALIBRATE_CLOCK=modelled needs the fake NIC\n");
			return 1;
		}
	}
	list = ibv_get_device_list(&nd);
	for (int i = 0; list && i < nd && !ctx; i++)
		if (!want || !strcmp(ibv_get_device_name(list[i]), want))
			ctx = ibv_open_device(list[i]);
	if (!ctx) {
		fprintf(stderr, "calibrate: no RDMA device%s%s\n", want ? " " : "",
			want ? want : "");
		return 77;
	}
	pd = ibv_alloc_pd(ctx);
	if (!pd) {
		perror("calibrate: ibv_alloc_pd");
		return 1;
	}
	host = mmap(NULL, max, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (host == MAP_FAILED) {
		perror("calibrate: mmap");
		return 1;
	}
	memset(host, 1, max);	/* faulted in: the pin is timed, not the fault */
	sweep(pd, host, max, -1, REG_HOST, DEREG_HOST, "ibv_reg_mr of host memory");

	if (load_cuda(gpu, sizeof(gpu)) || cu.alloc(&d, max)) {
		ser[REG_GPU].skipped = ser[DEREG_GPU].skipped =
		ser[REG_DMABUF].skipped = ser[DEREG_DMABUF].skipped =
			"no CUDA driver or no GPU memory";
		d = 0;
	} else {
		sweep(pd, (char *)(uintptr_t)d, max, -1, REG_GPU, DEREG_GPU,
		      "ibv_reg_mr of GPU memory (peer memory)");
		if (!cu.handle || cu.handle(&fd, d, max,
					    CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0))
			ser[REG_DMABUF].skipped = ser[DEREG_DMABUF].skipped =
				"cuMemGetHandleForAddressRange refused (no DMA-BUF export)";
		else
			sweep(pd, (char *)(uintptr_t)d, max, fd, REG_DMABUF,
			      DEREG_DMABUF, "ibv_reg_dmabuf_mr");
	}
	/* a window's parent: GPU memory by peer memory where that works, as
	 * gdrhook's windows have; else host memory (a bind does not read it) */
	if (d && !ser[REG_GPU].skipped)
		parent = ibv_reg_mr(pd, (void *)(uintptr_t)d, 1 << 20,
				    ACC | IBV_ACCESS_MW_BIND);
	if (!parent)
		parent = ibv_reg_mr(pd, host, 1 << 20, ACC | IBV_ACCESS_MW_BIND);
	wskip = parent ? measure_windows(pd, parent) : "no parent registration";
	if (wskip)
		ser[ALLOC_MW].skipped = ser[DEALLOC_MW].skipped =
		ser[BIND].skipped = ser[UNBIND].skipped = wskip;

	strftime(date, sizeof(date), "%Y-%m-%d", gmtime(&now));
	printf("/* tests/hw/calibrate on %s%s%s, %s, %s clock; p50 (fixed ns, ns per MiB) by size: */\n",
	       ibv_get_device_name(ctx->device), gpu[0] ? " + " : "", gpu,
	       date, modelled ? "modelled" : "monotonic");
	for (int o = 0; o < NOPS; o++) {
		printf("/* %-20s", op_name[o]);
		if (!ser[o].n)
			printf(" not measured: %s", ser[o].skipped ? ser[o].skipped : "?");
		for (int i = 0; i < ser[o].n; i++)
			printf(" %llu:%.0f", (unsigned long long)ser[o].len[i],
			       ser[o].p50[i]);
		printf(" */\n");
	}
	for (int o = 0; o < NOPS; o++) {
		double a, b, alo, blo, ahi, bhi;

		if (!ser[o].n)
			continue;
		fit(&ser[o], ser[o].p50, &a, &b);
		fit(&ser[o], ser[o].p10, &alo, &blo);
		fit(&ser[o], ser[o].p90, &ahi, &bhi);
		snprintf(src, sizeof(src), "measured: tests/hw/calibrate, %s%s%s, %s; %s (lo/hi: p10/p90)",
			 ibv_get_device_name(ctx->device), gpu[0] ? " + " : "",
			 gpu, date, ser[o].n > 1 ?
			 "least squares through the medians by size" : "median");
		printf("\t{ \"%s\", %s, %.0f, %.0f, %.0f, %.0f, %.0f, %.0f,\n\t  \"%s\" },\n",
		       profile, op_name[o], a, b, alo < a ? alo : a,
		       ahi > a ? ahi : a, blo < b ? blo : b, bhi > b ? bhi : b,
		       src);
	}
	if (parent)
		ibv_dereg_mr(parent);
	if (fd >= 0)
		close(fd);
	if (d)
		cu.free(d);
	munmap(host, max);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return 0;
}
