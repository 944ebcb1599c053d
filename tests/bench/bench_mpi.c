// SPDX-License-Identifier: MIT
/*
 * bench_mpi: MPI point-to-point between ranks 0 and 1, host or device
 * buffers, for tests/gpu/mpi-check (an MPI's per-message buffer
 * classification with and without gdrhook).  Our own program with the
 * OSU micro-benchmarks' definitions (their source is a tarball outside
 * GitHub; nothing of it is used here):
 *
 *   lat   half the round trip of a blocking ping-pong, in us;
 *   bw    rank 0 posts a window of nonblocking sends, rank 1 the
 *         receives, then a 4-byte ack back; bytes / time, in MB/s (1e6);
 *   bibw  both ranks post a window of receives and of sends at once;
 *         bytes both ways / time, in MB/s;
 *   mr    the bw loop counted in messages: messages/s.
 *
 * Sizes run from -s MIN to -S MAX by a factor -f (default 1 B to 4 MiB
 * by 4).  Each (test, size) prints one line on rank 0:
 *
 *   mpi test=bw buf=host size=4096 iters=... value=... unit=MB/s check=ok
 *       drv=N.NN drv_top=cuX:N.NN,... audit=N.NN
 *
 * check: after the timed loop each receiver compares what it got with the
 * peer's pattern for that size (device buffers copied back first); any
 * mismatch says check=bad and the exit code is 1.  drv: driver calls per
 * message of rank 0 in the timed loop, when libdrvcount.so is loaded
 * (tests/bench/drvcount.c); audit: gdrhook's audit checks per message
 * (GDRHOOK_VALIDATE=1: one per pointer query answered from its registry).
 * A "message" is one send or one receive that rank 0 posts, acks
 * included.
 *
 * Device memory comes from the CUDA driver (cuMemAlloc), resolved at run
 * time with dlopen/dlsym (a context is made current before MPI_Init), so the program builds with only an MPI
 * (make bench-mpi MPICC=...); -m host with -C skips CUDA altogether.
 * Options: -m host|device, -t lat,bw,bibw,mr, -i ITERS -w WARMUP (small
 * messages; above 8 KiB a tenth, at least 10 and 2), -W WINDOW (64),
 * -C (host: do not create a CUDA context), -r REPEATS (the timed loop
 * REPEATS times over, the best reported: a moment of interference on
 * the host then costs one repeat, not the figure; default 1).
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <mpi.h>

#include "gdrhook.h"

/* ---- the CUDA driver, found at run time ---- */

typedef int cu_rc;
typedef unsigned long long cu_ptr;

static struct {
	cu_rc (*init)(unsigned int);
	cu_rc (*dev_get)(int *, int);
	cu_rc (*ctx_retain)(void **, int);
	cu_rc (*ctx_set)(void *);
	cu_rc (*alloc)(cu_ptr *, size_t);
	cu_rc (*free)(cu_ptr);
	cu_rc (*htod)(cu_ptr, const void *, size_t);
	cu_rc (*dtoh)(void *, cu_ptr, size_t);
	cu_rc (*drv_version)(int *);
	cu_rc (*dev_name)(char *, int, int);
} cu;

/* Stop all ranks (or this process, before MPI_Init). */
static void die(void)
{
	int up = 0;

	MPI_Initialized(&up);
	if (up)
		MPI_Abort(MPI_COMM_WORLD, 2);
	exit(2);
}

static void *sym(void *h, const char *name)
{
	void *p = dlsym(h, name);

	if (!p) {
		fprintf(stderr, "bench_mpi: libcuda.so.1 has no %s\n", name);
		die();
	}
	return p;
}

#define CU(call) do { cu_rc rc_ = (call); if (rc_) { \
	fprintf(stderr, "bench_mpi: %s: CUDA error %d\n", #call, rc_); \
	die(); } } while (0)

/* cuInit and the primary context of the device local rank r picks. */
static void cuda_open(int r, char *name, size_t len, int *drv)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
	int dev, n;
	void *ctx;

	if (!h) {
		fprintf(stderr, "bench_mpi: %s\n", dlerror());
		die();
	}
	*(void **)&cu.init = sym(h, "cuInit");
	*(void **)&cu.dev_get = sym(h, "cuDeviceGet");
	*(void **)&cu.ctx_retain = sym(h, "cuDevicePrimaryCtxRetain");
	*(void **)&cu.ctx_set = sym(h, "cuCtxSetCurrent");
	*(void **)&cu.alloc = sym(h, "cuMemAlloc_v2");
	*(void **)&cu.free = sym(h, "cuMemFree_v2");
	*(void **)&cu.htod = sym(h, "cuMemcpyHtoD_v2");
	*(void **)&cu.dtoh = sym(h, "cuMemcpyDtoH_v2");
	*(void **)&cu.drv_version = sym(h, "cuDriverGetVersion");
	*(void **)&cu.dev_name = sym(h, "cuDeviceGetName");
	CU(cu.init(0));
	{
		cu_rc (*count)(int *) = (cu_rc (*)(int *))sym(h, "cuDeviceGetCount");

		CU(count(&n));
	}
	if (n < 1) {
		fprintf(stderr, "bench_mpi: no CUDA device\n");
		die();
	}
	CU(cu.dev_get(&dev, r % n));
	CU(cu.ctx_retain(&ctx, dev));
	CU(cu.ctx_set(ctx));
	CU(cu.drv_version(drv));
	CU(cu.dev_name(name, (int)len, dev));
}

/* ---- counters of the libraries around us, when loaded ---- */

static int (*gh_stats)(struct gdrhook_stats *);
static int (*gh_lookup)(const void *, size_t, struct gdrhook_range *);
static int (*dc_count)(void);
static const char *(*dc_name)(int);
static uint64_t (*dc_read)(int);

#define DC_MAX 64

struct snap {
	uint64_t audit;
	uint64_t drv[DC_MAX];
};

static void snap_take(struct snap *s)
{
	memset(s, 0, sizeof(*s));
	if (gh_stats) {
		struct gdrhook_stats st = { .size = sizeof(st) };

		if (!gh_stats(&st))
			s->audit = st.audit_checks;
	}
	for (int i = 0; dc_count && i < dc_count() && i < DC_MAX; i++)
		s->drv[i] = dc_read(i);
}

/* " drv=... drv_top=... audit=..." for msgs messages between a and b. */
static void snap_print(const struct snap *a, const struct snap *b, double msgs)
{
	if (dc_count) {
		uint64_t tot = 0;
		int n = dc_count() < DC_MAX ? dc_count() : DC_MAX, shown = 0;

		for (int i = 0; i < n; i++)
			tot += b->drv[i] - a->drv[i];
		printf(" drv=%.2f drv_top=", tot / msgs);
		for (int i = 0; i < n; i++) {
			uint64_t d = b->drv[i] - a->drv[i];

			if (d)
				printf("%s%s:%.2f", shown++ ? "," : "",
				       dc_name(i), d / msgs);
		}
		if (!shown)
			printf("-");
	}
	if (gh_stats)
		printf(" audit=%.2f", (b->audit - a->audit) / msgs);
}

/* ---- buffers ---- */

static int device;	/* -m device */

struct buf {
	void *host;	/* the buffer itself (host) or its staging copy */
	cu_ptr dev;
	size_t size;
};

static void buf_alloc(struct buf *b, size_t size)
{
	b->size = size;
	b->host = malloc(size);
	if (!b->host) {
		fprintf(stderr, "bench_mpi: out of memory\n");
		die();
	}
	memset(b->host, 0, size);
	if (device) {
		CU(cu.alloc(&b->dev, size));
		CU(cu.htod(b->dev, b->host, size));
	}
}

static void buf_free(struct buf *b)
{
	if (device)
		CU(cu.free(b->dev));
	free(b->host);
}

/* The address MPI sees. */
static void *addr(const struct buf *b)
{
	return device ? (void *)(uintptr_t)b->dev : b->host;
}

static unsigned char pattern(int rank, size_t size, size_t i)
{
	return (unsigned char)(rank * 101 + size * 7 + i * 13 + 1);
}

static void buf_fill(struct buf *b, int rank, size_t size)
{
	unsigned char *p = b->host;

	for (size_t i = 0; i < size; i++)
		p[i] = pattern(rank, size, i);
	if (device)
		CU(cu.htod(b->dev, b->host, size));
}

static void buf_clear(struct buf *b, size_t size)
{
	memset(b->host, 0, size);
	if (device)
		CU(cu.htod(b->dev, b->host, size));
}

/* 1 when the first size bytes are the peer's pattern. */
static int buf_check(struct buf *b, int peer, size_t size)
{
	const unsigned char *p = b->host;

	if (device)
		CU(cu.dtoh(b->host, b->dev, size));
	for (size_t i = 0; i < size; i++)
		if (p[i] != pattern(peer, size, i))
			return 0;
	return 1;
}

/* ---- the tests ---- */

enum { T_LAT, T_BW, T_BIBW, T_MR, T_N };
static const char *const tname[T_N] = { "lat", "bw", "bibw", "mr" };

static int rank, window = 64, repeats = 1;
static struct buf sbuf, rbuf;
static MPI_Request *req;

#define TAG 7
#define ACK 8

/* One iteration; returns the messages rank 0 posted. */
static int iter_lat(size_t size)
{
	void *s = addr(&sbuf), *r = addr(&rbuf);

	if (rank == 0) {
		MPI_Send(s, (int)size, MPI_CHAR, 1, TAG, MPI_COMM_WORLD);
		MPI_Recv(r, (int)size, MPI_CHAR, 1, TAG, MPI_COMM_WORLD,
			 MPI_STATUS_IGNORE);
	} else {
		MPI_Recv(r, (int)size, MPI_CHAR, 0, TAG, MPI_COMM_WORLD,
			 MPI_STATUS_IGNORE);
		MPI_Send(s, (int)size, MPI_CHAR, 0, TAG, MPI_COMM_WORLD);
	}
	return 2;
}

static int iter_bw(size_t size)
{
	void *s = addr(&sbuf), *r = addr(&rbuf);
	int ack = 0;

	if (rank == 0) {
		for (int w = 0; w < window; w++)
			MPI_Isend(s, (int)size, MPI_CHAR, 1, TAG,
				  MPI_COMM_WORLD, &req[w]);
		MPI_Waitall(window, req, MPI_STATUSES_IGNORE);
		MPI_Recv(&ack, 1, MPI_INT, 1, ACK, MPI_COMM_WORLD,
			 MPI_STATUS_IGNORE);
	} else {
		for (int w = 0; w < window; w++)
			MPI_Irecv(r, (int)size, MPI_CHAR, 0, TAG,
				  MPI_COMM_WORLD, &req[w]);
		MPI_Waitall(window, req, MPI_STATUSES_IGNORE);
		MPI_Send(&ack, 1, MPI_INT, 0, ACK, MPI_COMM_WORLD);
	}
	return window + 1;
}

static int iter_bibw(size_t size)
{
	void *s = addr(&sbuf), *r = addr(&rbuf);
	int peer = !rank;

	for (int w = 0; w < window; w++)
		MPI_Irecv(r, (int)size, MPI_CHAR, peer, TAG, MPI_COMM_WORLD,
			  &req[w]);
	for (int w = 0; w < window; w++)
		MPI_Isend(s, (int)size, MPI_CHAR, peer, TAG, MPI_COMM_WORLD,
			  &req[window + w]);
	MPI_Waitall(2 * window, req, MPI_STATUSES_IGNORE);
	return 2 * window;
}

static int run_iter(int t, size_t size)
{
	return t == T_LAT ? iter_lat(size) :
	       t == T_BIBW ? iter_bibw(size) : iter_bw(size);
}

static int failed;

/* 1 when gdrhook's registry holds buffer b as one allocation. */
static int buf_seen(const struct buf *b)
{
	struct gdrhook_range r;

	return gh_lookup && !gh_lookup(addr(b), b->size, &r) &&
	       r.base == (uint64_t)(uintptr_t)addr(b) && r.size >= b->size;
}

/*
 * Over both ranks: device buffers gdrhook's registry holds, and its
 * audit and trust counters (what mpi-check requires of a run).
 */
static void gdrhook_report(void)
{
	struct gdrhook_stats st = { .size = sizeof(st) };
	unsigned long long v[6] = { 0 }, sum[6];

	if (!gh_stats || gh_stats(&st))
		return;
	v[0] = device ? (unsigned long long)(buf_seen(&sbuf) + buf_seen(&rbuf)) : 0;
	v[1] = device ? 2 : 0;
	v[2] = st.allocs;
	v[3] = st.audit_checks;
	v[4] = st.audit_disagreements;
	v[5] = st.untrusted;
	MPI_Reduce(v, sum, 6, MPI_UNSIGNED_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
	if (!rank)
		printf("# gdrhook seen=%llu/%llu allocs=%llu audit_checks=%llu audit_disagreements=%llu untrusted=%llu\n",
		       sum[0], sum[1], sum[2], sum[3], sum[4], sum[5]);
}

static void run_test(int t, size_t size, int iters, int warmup)
{
	struct snap a, b;
	double t0, t1, el = 0, msgs = 0, value;
	int ok, all_ok;
	/* rank 0 does not receive sized data in bw/mr, only acks */
	int receives = t == T_LAT || t == T_BIBW || rank == 1;

	buf_fill(&sbuf, rank, size);
	buf_clear(&rbuf, size);
	for (int i = 0; i < warmup; i++)
		run_iter(t, size);
	snap_take(&a);
	for (int k = 0; k < repeats; k++) {
		MPI_Barrier(MPI_COMM_WORLD);
		t0 = MPI_Wtime();
		for (int i = 0; i < iters; i++)
			msgs += run_iter(t, size);
		t1 = MPI_Wtime();
		if (!k || t1 - t0 < el)
			el = t1 - t0;
	}
	snap_take(&b);
	ok = receives ? buf_check(&rbuf, !rank, size) : 1;
	MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
	if (!all_ok)
		failed = 1;
	if (rank)
		return;
	switch (t) {
	case T_LAT:
		value = el * 1e6 / (2.0 * iters);
		break;
	case T_BW:
		value = (double)size * window * iters / el / 1e6;
		break;
	case T_BIBW:
		value = 2.0 * size * window * iters / el / 1e6;
		break;
	default:
		value = (double)window * iters / el;
		break;
	}
	printf("mpi test=%s buf=%s size=%zu iters=%d value=%.*f unit=%s check=%s",
	       tname[t], device ? "device" : "host", size, iters,
	       t == T_LAT ? 3 : t == T_MR ? 0 : 2, value,
	       t == T_LAT ? "us" : t == T_MR ? "msg/s" : "MB/s",
	       all_ok ? "ok" : "bad");
	snap_print(&a, &b, msgs);
	printf("\n");
	fflush(stdout);
}

static void usage(void)
{
	fprintf(stderr, "usage: bench_mpi [-m host|device] [-t lat,bw,bibw,mr] "
		"[-s MIN] [-S MAX] [-f FACTOR] [-i ITERS] [-w WARMUP] "
		"[-W WINDOW] [-r REPEATS] [-C]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	size_t min = 1, max = 4u << 20, factor = 4;
	int iters = 2000, warmup = 200, nocuda = 0, size_n, c;
	int want[T_N] = { 1, 1, 1, 1 };
	char name[128] = "-";
	int drv = 0;

	while ((c = getopt(argc, argv, "m:t:s:S:f:i:w:W:r:C")) != -1) {
		switch (c) {
		case 'm':
			device = !strcmp(optarg, "device");
			if (!device && strcmp(optarg, "host"))
				usage();
			break;
		case 't':
			memset(want, 0, sizeof(want));
			for (char *tok = strtok(optarg, ","); tok;
			     tok = strtok(NULL, ",")) {
				int k;

				for (k = 0; k < T_N && strcmp(tok, tname[k]); k++)
					;
				if (k == T_N)
					usage();
				want[k] = 1;
			}
			break;
		case 's': min = strtoull(optarg, NULL, 0); break;
		case 'S': max = strtoull(optarg, NULL, 0); break;
		case 'f': factor = strtoull(optarg, NULL, 0); break;
		case 'i': iters = atoi(optarg); break;
		case 'w': warmup = atoi(optarg); break;
		case 'W': window = atoi(optarg); break;
		case 'r': repeats = atoi(optarg); break;
		case 'C': nocuda = 1; break;
		default: usage();
		}
	}
	if (min < 1 || max < min || factor < 2 || iters < 1 || warmup < 0 ||
	    window < 1 || repeats < 1 || (device && nocuda))
		usage();
	/*
	 * A context before MPI_Init, as the OSU benchmarks make one: Open
	 * MPI's CUDA support sets itself up at MPI_Init only when a context
	 * is current, and with none its probes fail early (not initialized)
	 * and measure nothing that a GPU program pays.
	 */
	if (!nocuda) {
		const char *lr = getenv("OMPI_COMM_WORLD_LOCAL_RANK");

		if (!lr)
			lr = getenv("MPI_LOCALRANKID");	/* MPICH's Hydra */
		cuda_open(lr ? atoi(lr) : 0, name, sizeof(name), &drv);
	}
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size_n);
	if (size_n != 2) {
		if (!rank)
			fprintf(stderr, "bench_mpi: needs 2 ranks\n");
		MPI_Finalize();
		return 2;
	}
	*(void **)&gh_stats = dlsym(RTLD_DEFAULT, "gdrhook_get_stats");
	*(void **)&gh_lookup = dlsym(RTLD_DEFAULT, "gdrhook_lookup");
	if (!gh_lookup)
		gh_stats = NULL;
	*(void **)&dc_count = dlsym(RTLD_DEFAULT, "drvcount_count");
	*(void **)&dc_name = dlsym(RTLD_DEFAULT, "drvcount_name");
	*(void **)&dc_read = dlsym(RTLD_DEFAULT, "drvcount_read");
	if (!dc_name || !dc_read)
		dc_count = NULL;
	req = calloc(2 * (size_t)window, sizeof(*req));
	buf_alloc(&sbuf, max);
	buf_alloc(&rbuf, max);
	if (!rank) {
		int vlen;
		char lib[MPI_MAX_LIBRARY_VERSION_STRING];

		MPI_Get_library_version(lib, &vlen);
		lib[strcspn(lib, "\n,")] = 0;
		printf("# bench_mpi buf=%s window=%d iters=%d repeats=%d warmup=%d device=%s driver=%d.%d mpi=%s gdrhook=%s drvcount=%s\n",
		       device ? "device" : "host", window, iters, repeats, warmup,
		       name, drv / 1000, drv % 1000 / 10, lib,
		       gh_stats ? "yes" : "no", dc_count ? "yes" : "no");
	}
	for (int t = 0; t < T_N; t++) {
		if (!want[t])
			continue;
		for (size_t s = min; s <= max; s *= factor) {
			int big = s > 8192;
			int it = big ? (iters / 10 > 10 ? iters / 10 : 10) : iters;
			int wu = big ? (warmup / 10 > 2 ? warmup / 10 : 2) : warmup;

			/* the windowed tests move window x size per iteration */
			if (t != T_LAT && big)
				it = it / 4 > 5 ? it / 4 : 5;
			run_test(t, s, it, wu);
		}
	}
	gdrhook_report();
	buf_free(&sbuf);
	buf_free(&rbuf);
	free(req);
	MPI_Finalize();
	return failed;
}
