// SPDX-License-Identifier: MIT
/*
 * bench_exposure: register-per-transfer with remote access under exact
 * exposure, in a NIC cost model.  Per buffer size (4 KiB .. 4 GiB) and
 * pair: ibv_reg_mr(LOCAL_WRITE | REMOTE_WRITE | REMOTE_READ) of the
 * buffer, one RDMA write through its rkey by a peer (the fake NIC's
 * fakeverbs_write), ibv_dereg_mr.  The buffer lies 2 MiB into an
 * allocation 4 MiB larger than it, touched once before (a first
 * registration, not counted), as in a caching allocator's segment.
 *
 * It runs against the CUDA driver double and the fake NIC with a cost
 * profile (FAKEVERBS_COST, tests/fakeverbs/fakeverbs_cost.c): the NIC's
 * time is the profile's modelled nanoseconds, charged per NIC operation
 * and read from fakeverbs_modelled_ns() (its mean per pair: a window
 * pool's allocation is spread over the pairs); the CPU time is measured
 * around the reg and dereg calls, its median over the pairs, less the
 * double's own time for the NIC registrations the pair made (measured
 * in the no-shim child, per kind).  Every configuration
 * runs in a child of the same run, the same program exec'ed again:
 *
 *   auto        LD_PRELOAD=libgdrhook.so, GDRHOOK_BACKEND=auto, exact
 *               exposure: on the doubles (a peer-memory client serves,
 *               the NIC binds windows) windows over a peermem parent
 *   no-peermem  auto on a host without a peer-memory client
 *               (FAKEVERBS_PEERMEM=0): DMA-BUF, a NIC registration per MR
 *   peermem     GDRHOOK_BACKEND=peermem: windows over a peer-memory parent
 *   nowin       auto with GDRHOOK_WINDOWS=0: a NIC registration per MR
 *   allocation  auto with GDRHOOK_REMOTE_EXPOSURE=allocation
 *   no shim     plain ibv_reg_mr of GPU memory (a peer-memory pin each time)
 *
 * and prints per size the modelled and measured time per pair, the ratio
 * of no shim's modelled time to the configuration's total, the NIC
 * operations per pair, and the bytes the rkey reaches beyond the buffer
 * (searched with one-byte peer reads: 0 is exact).  No shim's ratio is
 * against its modelled time alone (the double's CPU time is no NIC's).
 *
 *   build/tests/bench/bench_exposure [--profile cx7-h100] [--end lo|hi]
 *                                    [--max SIZE_MIB] [--iters N]
 *
 * The shim is found next to the build (../../libgdrhook.so from this
 * program) or at $GDRHOOK_LIB.
 */
#include <cuda.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "fakeverbs.h"
#include "fakeverbs_cost.h"
#include "bench_util.h"

#define MiB	(1ull << 20)
#define ACC	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
		 IBV_ACCESS_REMOTE_READ)
#define MARGIN	(2 * MiB)	/* the allocation's bytes on each side */

static const uint64_t sizes[] = {
	4096, 16384, 65536, 262144, MiB, 4 * MiB, 16 * MiB, 64 * MiB,
	256 * MiB, 1024 * MiB, 4096 * MiB,
};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

struct config {
	const char *name;
	int shim;
	const char *env[3];
};

static const struct config configs[] = {
	{ "auto", 1, { "GDRHOOK_BACKEND=auto", "GDRHOOK_REMOTE_EXPOSURE=exact",
		       "GDRHOOK_WINDOWS=1" } },
	{ "no-peermem", 1, { "GDRHOOK_BACKEND=auto",
			     "GDRHOOK_REMOTE_EXPOSURE=exact",
			     "FAKEVERBS_PEERMEM=0" } },
	{ "peermem", 1, { "GDRHOOK_BACKEND=peermem",
			  "GDRHOOK_REMOTE_EXPOSURE=exact", "GDRHOOK_WINDOWS=1" } },
	{ "nowin", 1, { "GDRHOOK_BACKEND=auto", "GDRHOOK_REMOTE_EXPOSURE=exact",
			"GDRHOOK_WINDOWS=0" } },
	{ "allocation", 1, { "GDRHOOK_BACKEND=auto",
			     "GDRHOOK_REMOTE_EXPOSURE=allocation",
			     "GDRHOOK_WINDOWS=1" } },
	{ "no shim", 0, { NULL } },
};
#define NCONFIGS (sizeof(configs) / sizeof(configs[0]))

/* One configuration's figures for one size, per pair. */
struct row {
	int ok;
	double model_ns, cpu_ns;
	uint64_t wider;
	double regs, dmabuf_regs, binds;
	double dmabuf_cpu_ns;	/* the anchor's: the double's own */
};

static void die(const char *what, long rc)
{
	fprintf(stderr, "bench_exposure: %s failed (%ld, errno %d)\n", what,
		rc, errno);
	exit(1);
}

/* Can a peer reach byte x through rkey (the NIC accepts the rkey's
 * bounds; -EFAULT: accepted, nothing mapped there)? */
static int reaches(struct ibv_pd *pd, uint32_t rkey, uint64_t x)
{
	char b;
	int rc = fakeverbs_read(pd, rkey, x, &b, 1);

	return rc == 0 || rc == -EFAULT;
}

/* Bytes the rkey reaches outside [p, p + len): its reach is one interval
 * holding the buffer, searched outward by doubling, then bisected. */
static uint64_t wider_than(struct ibv_pd *pd, uint32_t rkey, uint64_t p,
			   uint64_t len)
{
	uint64_t w = 0, in, out;

	/* above: the last reachable byte past p + len - 1 */
	in = p + len - 1;
	out = 1;
	while (in + out > in && reaches(pd, rkey, in + out))
		out *= 2;
	out = in + out;
	while (out - in > 1) {
		uint64_t mid = in + (out - in) / 2;

		*(reaches(pd, rkey, mid) ? &in : &out) = mid;
	}
	w += in - (p + len - 1);
	/* below */
	in = p;
	out = 1;
	while (out <= in && reaches(pd, rkey, in - out))
		out *= 2;
	out = out <= in ? in - out : 0;
	if (out == 0 && reaches(pd, rkey, 0))
		return w + p;
	while (in - out > 1) {
		uint64_t mid = out + (in - out) / 2;

		*(reaches(pd, rkey, mid) ? &in : &out) = mid;
	}
	return w + (p - in);
}

#define MAXIT	4096
static double samples[MAXIT];

/* The median of v[0..n): one preemption of a loaded host is no figure. */
static double median(double *v, unsigned int n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n ? v[n / 2] : 0;
}

static unsigned long calls(const char *n)
{
	return fakeverbs_calls(n);
}

/* One reg / write / dereg pair; the reg and dereg timed into *cpu. */
static void pair(struct ibv_pd *pd, uint64_t p, uint64_t len, unsigned int i,
		 double *cpu)
{
	uint64_t at = p + ((uint64_t)i * 4096) % len;
	char msg[8] = "xfer";
	struct ibv_mr *mr;
	double t0, t1;
	int rc;

	msg[4] = (char)i;
	t0 = now_ns();
	mr = ibv_reg_mr(pd, (void *)(uintptr_t)p, len, ACC);
	t1 = now_ns();
	if (!mr)
		die("ibv_reg_mr", 0);
	*cpu += t1 - t0;
	rc = fakeverbs_write(pd, mr->rkey, at, msg, at + 8 <= p + len ? 8 : 1);
	if (rc || memcmp((void *)(uintptr_t)at, msg, at + 8 <= p + len ? 8 : 1))
		die("the peer's write through the rkey", rc);
	t0 = now_ns();
	rc = ibv_dereg_mr(mr);
	t1 = now_ns();
	if (rc)
		die("ibv_dereg_mr", rc);
	*cpu += t1 - t0;
}

/*
 * The double's own CPU time for a DMA-BUF registration pair (mapping the
 * export, its page checks): measured in the anchor's process, it is
 * taken off the shim's measured time per DMA-BUF registration the shim
 * made, as the anchor's own time is per ibv_reg_mr (none of it is a
 * NIC's or the shim's).
 */
static double dmabuf_pair_cpu(struct ibv_pd *pd, uint64_t p, uint64_t len,
			      unsigned int n)
{
	struct ibv_mr *mr;
	double t0;
	int fd = -1;

	if (cuMemGetHandleForAddressRange(&fd, (CUdeviceptr)p, len,
					  CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0))
		die("cuMemGetHandleForAddressRange", 0);
	for (unsigned int i = 0; i < n; i++) {
		t0 = now_ns();
		mr = ibv_reg_dmabuf_mr(pd, 0, len, p, fd, ACC);
		if (!mr)
			die("ibv_reg_dmabuf_mr", 0);
		if (ibv_dereg_mr(mr))
			die("ibv_dereg_mr", 0);
		samples[i] = now_ns() - t0;
	}
	close(fd);
	return median(samples, n);
}

static unsigned int iters_for(uint64_t len, unsigned int iters)
{
	if (iters)
		return iters < MAXIT ? iters : MAXIT;
	return len <= MiB ? 400 : len <= 64 * MiB ? 100 : 20;
}

/* The child: every size, one line each on stdout. */
static int child(uint64_t max, unsigned int iters, int anchor)
{
	struct ibv_device **list;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	CUcontext cu;
	CUdevice dev;
	CUresult r;

	if (!fakeverbs_cost_profile()) {
		fprintf(stderr, "bench_exposure: no cost profile (FAKEVERBS_COST)\n");
		return 1;
	}
	if ((r = cuInit(0)) || (r = cuDeviceGet(&dev, 0)) ||
	    (r = cuDevicePrimaryCtxRetain(&cu, dev)) || (r = cuCtxSetCurrent(cu)))
		die("CUDA set-up", r);
	list = ibv_get_device_list(NULL);
	if (!list || !list[0])
		die("ibv_get_device_list", 0);
	ctx = ibv_open_device(list[0]);
	pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	if (!pd)
		die("ibv_alloc_pd", 0);
	for (size_t s = 0; s < NSIZES && sizes[s] <= max; s++) {
		uint64_t len = sizes[s], p, wider;
		unsigned int n = iters_for(len, iters);
		unsigned long r0, d0, b0;
		unsigned long long m0;
		struct ibv_mr *mr;
		CUdeviceptr d;
		double cpu = 0;

		r = cuMemAlloc(&d, len + 2 * MARGIN);
		if (r) {
			printf("%llu fail %d\n", (unsigned long long)len, (int)r);
			fflush(stdout);
			break;
		}
		p = d + MARGIN;
		/* touched once: the allocation's first registration */
		mr = ibv_reg_mr(pd, (void *)(uintptr_t)p, len, ACC);
		if (!mr)
			die("first ibv_reg_mr", 0);
		wider = wider_than(pd, mr->rkey, p, len);
		if (ibv_dereg_mr(mr))
			die("first ibv_dereg_mr", 0);
		r0 = calls("ibv_reg_mr_iova2");
		d0 = calls("ibv_reg_dmabuf_mr");
		b0 = calls("bind_mw");
		m0 = fakeverbs_modelled_ns();
		for (unsigned int i = 0; i < n; i++) {
			samples[i] = 0;
			pair(pd, p, len, i, &samples[i]);
		}
		cpu = median(samples, n);
		m0 = fakeverbs_modelled_ns() - m0;
		r0 = calls("ibv_reg_mr_iova2") - r0;
		d0 = calls("ibv_reg_dmabuf_mr") - d0;
		b0 = calls("bind_mw") - b0;
		printf("%llu ok %.1f %.1f %llu %.3f %.3f %.3f %.1f\n",
		       (unsigned long long)len, (double)m0 / n, cpu,
		       (unsigned long long)wider, (double)r0 / n,
		       (double)d0 / n, (double)b0 / n,
		       anchor ? dmabuf_pair_cpu(pd, p, len, n) : 0.0);
		fflush(stdout);
		if (cuMemFree(d))
			die("cuMemFree", 0);
	}
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return 0;
}

/* A child's environment: the configuration's, and the shim if it has one. */
struct child_env {
	const struct config *c;
	const char *shim;
};

static void child_setup(const void *arg)
{
	const struct child_env *e = arg;

	for (int i = 0; i < 3 && e->c->env[i]; i++)
		putenv((char *)e->c->env[i]);
	if (e->c->shim)
		setenv("LD_PRELOAD", e->shim, 1);
	else
		unsetenv("LD_PRELOAD");
}

/* Runs one configuration in a child of the same program; its rows. */
static int run_config(const struct config *c, const char *self,
		      const char *shim, char *const argv[], struct row *rows)
{
	struct child_env e = { c, shim };
	char line[256];
	pid_t pid;
	FILE *f = bench_spawn(self, argv, child_setup, &e, &pid);

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long len, wider;
		struct row x = { 0 };
		char what[8];

		if (sscanf(line, "%llu %7s", &len, what) != 2)
			continue;
		if (!strcmp(what, "ok") &&
		    sscanf(line, "%llu ok %lf %lf %llu %lf %lf %lf %lf", &len,
			   &x.model_ns, &x.cpu_ns, &wider, &x.regs,
			   &x.dmabuf_regs, &x.binds, &x.dmabuf_cpu_ns) == 8) {
			x.ok = 1;
			x.wider = wider;
		}
		for (size_t s = 0; s < NSIZES; s++)
			if (sizes[s] == len)
				rows[s] = x;
	}
	return bench_reap(f, pid);
}

/* The shim's CPU time per pair: what was measured, less the double's
 * own time for the NIC registrations made (the anchor's, per kind). */
static double shim_cpu(const struct row *x, const struct row *o)
{
	double d = x->regs * o->cpu_ns + x->dmabuf_regs * o->dmabuf_cpu_ns;

	return x->cpu_ns > d ? x->cpu_ns - d : 0;
}

static const char *size_str(uint64_t len, char *b, size_t n)
{
	if (len >= 1024 * MiB)
		snprintf(b, n, "%llu GiB", (unsigned long long)(len >> 30));
	else if (len >= MiB)
		snprintf(b, n, "%llu MiB", (unsigned long long)(len >> 20));
	else
		snprintf(b, n, "%llu KiB", (unsigned long long)(len >> 10));
	return b;
}

static void print_constants(const char *profile, const char *end)
{
	const struct fv_cost_row *t;
	size_t n;

	t = fakeverbs_cost_table(&n);
	printf("cost profile %s%s%s (ns, ns per MiB; lo..hi swept where no source):\n",
	       profile, end ? " end " : "", end ? end : "");
	for (size_t i = 0; i < n; i++)
		if (!strcmp(t[i].profile, profile))
			printf("  %-20s %8llu + %6llu/MiB  [%llu..%llu + %llu..%llu/MiB]  %s\n",
			       fv_cost_op_name(t[i].op),
			       (unsigned long long)t[i].ns,
			       (unsigned long long)t[i].ns_per_mib,
			       (unsigned long long)t[i].ns_lo,
			       (unsigned long long)t[i].ns_hi,
			       (unsigned long long)t[i].mib_lo,
			       (unsigned long long)t[i].mib_hi, t[i].source);
}

int main(int argc, char **argv)
{
	static struct row rows[NCONFIGS][NSIZES];
	const char *profile = "cx7-h100", *end = NULL, *shim;
	unsigned long long max_mib = 4096;
	char self[PATH_MAX], lib[PATH_MAX + 32], b[32];
	unsigned int iters = 0;
	int is_child = 0, anchor = 0, failed = 0;
	ssize_t k;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--child"))
			is_child = 1;
		else if (!strcmp(argv[i], "--anchor"))
			anchor = 1;
		else if (!strcmp(argv[i], "--profile") && i + 1 < argc)
			profile = argv[++i];
		else if (!strcmp(argv[i], "--end") && i + 1 < argc)
			end = argv[++i];
		else if (!strcmp(argv[i], "--max") && i + 1 < argc)
			max_mib = strtoull(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--iters") && i + 1 < argc)
			iters = (unsigned int)strtoul(argv[++i], NULL, 0);
		else {
			fprintf(stderr, "usage: %s [--profile NAME] [--end lo|hi] [--max SIZE_MIB] [--iters N]\n",
				argv[0]);
			return 2;
		}
	}
	if (is_child)
		return child(max_mib * MiB, iters, anchor);

	k = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (k <= 0)
		die("readlink /proc/self/exe", k);
	self[k] = 0;
	shim = getenv("GDRHOOK_LIB");
	if (!shim) {
		snprintf(lib, sizeof(lib), "%s", self);
		*strrchr(lib, '/') = 0;
		strcat(lib, "/../../libgdrhook.so");
		shim = lib;
	}
	if (access(shim, R_OK)) {
		fprintf(stderr, "bench_exposure: %s: not found (make; or GDRHOOK_LIB=)\n",
			shim);
		return 1;
	}
	setenv("FAKEVERBS_COST", profile, 1);
	if (end)
		setenv("FAKEVERBS_COST_END", end, 1);
	else
		unsetenv("FAKEVERBS_COST_END");
	snprintf(b, sizeof(b), "%llu", max_mib);
	for (size_t c = 0; c < NCONFIGS; c++) {
		char it[16], *av[8] = { self, "--child", "--max", b };
		int a = 4;

		if (iters) {
			snprintf(it, sizeof(it), "%u", iters);
			av[a++] = "--iters";
			av[a++] = it;
		}
		if (!configs[c].shim)
			av[a++] = "--anchor";
		av[a] = NULL;
		if (run_config(&configs[c], self, shim, av, rows[c])) {
			fprintf(stderr, "bench_exposure: configuration %s failed\n",
				configs[c].name);
			failed = 1;
		}
	}

	print_constants(profile, end);
	for (size_t c = 0; c < NCONFIGS; c++) {
		printf("\n== %s%s%s%s%s\n", configs[c].name,
		       configs[c].shim ? ": " : " (no LD_PRELOAD)",
		       configs[c].shim ? configs[c].env[0] : "",
		       configs[c].shim ? " " : "",
		       configs[c].shim ? configs[c].env[1] : "");
		printf("%-8s %9s %9s %9s %9s %10s %9s %10s %7s %7s %6s\n",
		       "size", "model_us", "cpu_us", "double_us", "shim_us",
		       "total_us", "x_noshim", "wider_B", "reg_mr", "dmabuf",
		       "binds");
		for (size_t s = 0; s < NSIZES; s++) {
			const struct row *x = &rows[c][s], *o = &rows[NCONFIGS - 1][s];
			double sh = configs[c].shim ? shim_cpu(x, o) : 0;
			double tot = x->model_ns + sh;

			if (sizes[s] > max_mib * MiB)
				break;
			if (!x->ok || !o->ok) {
				printf("%-8s  n/a\n", size_str(sizes[s], b, sizeof(b)));
				continue;
			}
			printf("%-8s %9.2f %9.2f %9.2f %9.2f %10.2f %8.1fx %10llu %7.2f %7.2f %6.2f\n",
			       size_str(sizes[s], b, sizeof(b)), x->model_ns / 1e3,
			       x->cpu_ns / 1e3, (x->cpu_ns - sh) / 1e3, sh / 1e3,
			       tot / 1e3, tot > 0 ? o->model_ns / tot : 0,
			       (unsigned long long)x->wider, x->regs,
			       x->dmabuf_regs, x->binds);
		}
	}
	printf("\nside by side: no shim's modelled us per pair, each configuration's ratio to it\n"
	       "(its modelled NIC time + the shim's CPU time; * = the rkey reaches bytes beyond the buffer)\n");
	printf("%-8s %12s", "size", "noshim_us");
	for (size_t c = 0; c + 1 < NCONFIGS; c++)
		printf(" %11s", configs[c].name);
	printf("\n");
	for (size_t s = 0; s < NSIZES && sizes[s] <= max_mib * MiB; s++) {
		const struct row *o = &rows[NCONFIGS - 1][s];

		printf("%-8s %12.1f", size_str(sizes[s], b, sizeof(b)),
		       o->ok ? o->model_ns / 1e3 : 0);
		for (size_t c = 0; c + 1 < NCONFIGS; c++) {
			const struct row *x = &rows[c][s];
			double tot = x->model_ns + shim_cpu(x, o);

			if (!x->ok || !o->ok || tot <= 0)
				printf(" %11s", "n/a");
			else
				printf(" %9.1fx%s", o->model_ns / tot,
				       x->wider ? "*" : " ");
		}
		printf("\n");
	}
	/* exact exposure is byte-exact or the figures are of something else */
	for (size_t c = 0; c + 1 < NCONFIGS; c++)
		for (size_t s = 0; s < NSIZES; s++)
			if (rows[c][s].ok && rows[c][s].wider &&
			    strstr(configs[c].env[1], "=exact")) {
				fprintf(stderr, "bench_exposure: FAIL: %s at %s: the rkey reaches %llu bytes beyond the buffer\n",
					configs[c].name,
					size_str(sizes[s], b, sizeof(b)),
					(unsigned long long)rows[c][s].wider);
				failed = 1;
			}
	return failed;
}
