// SPDX-License-Identifier: MIT
/*
 * bench_liveness: what a registration costs beside threads that allocate
 * GPU memory, with and without the shim, measured in the same run.
 *
 *     make bench-liveness
 *     LD_LIBRARY_PATH=build/fake:build/fakeverbs \
 *         GH_BENCH_LIB=$PWD/build/libgdrhook.so build/tests/bench/bench_liveness
 *
 * (on a GPU host leave build/fake out; build/fakeverbs is the NIC when
 * there is no RDMA device).  For each count of allocating threads (each
 * cuMemAlloc + cuMemFree of 64 KiB .. 1 MiB of its own, without pause;
 * GH_BENCH_THREADS, default 0,1,2,4,8,16) it starts itself twice, without
 * and with LD_PRELOAD=$GH_BENCH_LIB, one after the other, and times the
 * main thread's ibv_reg_mr of
 *   host     64 KiB of malloc'd memory,
 *   wrapped  64 KiB of GPU memory the cache does not serve (iova != addr:
 *            libibverbs registers it, the shim wraps it),
 *   cached   64 KiB inside one GPU allocation (the shim: a cache hit),
 * GH_BENCH_REGS each (default 2000, with an ibv_dereg_mr after each),
 * printing p50, p99, max (us) and refusals side by side.  Then:
 *   slow call  another thread inside a driver call that takes 1.5 s (a
 *              cuMemHostRegister of 4 GiB on a GPU, a call the CUDA
 *              double stalls): the longest registration of other memory
 *              made meanwhile;
 *   slow NIC   100 threads register their own host memory at once on a
 *              NIC that takes 1.2 s a registration (the libibverbs
 *              double, FAKEVERBS_REG_DELAY_US): how many succeed.
 * A program, not a test: it prints figures.
 */
#include <cuda.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "bench_util.h"

#define ACC	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)
#define LEN	(64u << 10)
#define IOVA	0x7a0000000000ull

static const char *const kinds[] = { "host", "wrapped", "cached" };

static void die(const char *what)
{
	fprintf(stderr, "bench_liveness: %s (errno %d: %s)\n", what, errno,
		strerror(errno));
	exit(1);
}

static void cu(CUresult rc, const char *what)
{
	if (rc != CUDA_SUCCESS) {
		fprintf(stderr, "bench_liveness: %s: CUDA error %d\n", what,
			(int)rc);
		exit(1);
	}
}

static CUcontext ctx;
static struct ibv_pd *pd;

static void setup(void)
{
	struct ibv_device **l;
	struct ibv_context *vc;
	CUdevice dev;

	cu(cuInit(0), "cuInit");
	cu(cuDeviceGet(&dev, 0), "cuDeviceGet");
	cu(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
	cu(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
	l = ibv_get_device_list(NULL);
	if (!l || !l[0])
		die("no RDMA device (LD_LIBRARY_PATH=build/fakeverbs?)");
	vc = ibv_open_device(l[0]);
	pd = vc ? ibv_alloc_pd(vc) : NULL;
	if (!pd)
		die("ibv_open_device/ibv_alloc_pd");
}

/* --------------------------------------------------- allocating threads */

static int stop;	/* atomic */

static void *churn(void *arg)
{
	unsigned int seed = (unsigned int)(uintptr_t)arg * 2654435761u;

	cu(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		CUdeviceptr d;

		if (cuMemAlloc(&d, (64u << 10) << (rand_r(&seed) % 5)))
			die("cuMemAlloc");
		cu(cuMemFree(d), "cuMemFree");
	}
	return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static struct ibv_mr *reg_kind(int kind, void *host, CUdeviceptr a)
{
	if (kind == 0)
		return ibv_reg_mr(pd, host, LEN, ACC);
	if (kind == 1)
		return ibv_reg_mr_iova2(pd, (void *)(a + 4096), LEN, IOVA, ACC);
	return ibv_reg_mr(pd, (void *)(a + 4096), LEN, ACC);
}

/* One child: nthreads allocating; prints "kind p50 p99 max refused". */
static int child_threads(int nthreads, int regs)
{
	pthread_t t[64];
	uint64_t *lat = malloc(sizeof(*lat) * (size_t)regs);
	void *host = aligned_alloc(4096, LEN);
	CUdeviceptr a;

	setup();
	if (!lat || !host)
		die("malloc");
	memset(host, 1, LEN);
	cu(cuMemAlloc(&a, 2u << 20), "cuMemAlloc");
	for (int i = 0; i < nthreads; i++)
		if (pthread_create(&t[i], NULL, churn, (void *)(uintptr_t)(i + 1)))
			die("pthread_create");
	usleep(100000);
	for (int k = 0; k < 3; k++) {
		int refused = 0;

		for (int i = 0; i < regs; i++) {
			uint64_t t0 = now_ns();
			struct ibv_mr *m = reg_kind(k, host, a);

			lat[i] = now_ns() - t0;
			if (!m)
				refused++;
			else
				ibv_dereg_mr(m);
		}
		qsort(lat, (size_t)regs, sizeof(*lat), cmp_u64);
		printf("%s %.1f %.1f %.1f %d\n", kinds[k],
		       lat[regs / 2] / 1e3, lat[regs * 99 / 100] / 1e3,
		       lat[regs - 1] / 1e3, refused);
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < nthreads; i++)
		pthread_join(t[i], NULL);
	return 0;
}

/* ------------------------------------------------------- a slow call */

static int slow_done;	/* atomic */
static uint64_t slow_ns;

static void *slow_call(void *arg)
{
	void (*stall)(const char *) = (void (*)(const char *))
		dlsym(RTLD_DEFAULT, "fakecuda_stall_next");
	size_t n = 4ull << 30;
	void *p = NULL;
	uint64_t t0;

	(void)arg;
	cu(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
	if (stall) {
		n = 1u << 20;	/* the double: stalled 1.5 s instead */
		stall("cuMemHostRegister_v2");
	}
	p = aligned_alloc(4096, n);
	if (!p)
		die("malloc of the slow call's buffer");
	t0 = now_ns();
	cu(cuMemHostRegister(p, n, 0), "cuMemHostRegister");
	slow_ns = now_ns() - t0;
	__atomic_store_n(&slow_done, 1, __ATOMIC_RELEASE);
	cu(cuMemHostUnregister(p), "cuMemHostUnregister");
	free(p);
	return NULL;
}

static void *unstall_later(void *arg)
{
	void (*unstall)(void) = (void (*)(void))
		dlsym(RTLD_DEFAULT, "fakecuda_unstall");

	(void)arg;
	usleep(1500000);
	if (unstall)
		unstall();
	return NULL;
}

/* Registrations of other memory while another thread's call lasts:
 * prints "slow_call n max_us refused call_ms". */
static int child_slow_call(void)
{
	void *host = aligned_alloc(4096, LEN);
	pthread_t t, u;
	uint64_t worst = 0;
	CUdeviceptr a;
	int n = 0, refused = 0;

	setup();
	cu(cuMemAlloc(&a, 2u << 20), "cuMemAlloc");
	/* a library registers at its start: the shim's backend is decided
	 * then (auto asks the driver), not inside the slow call */
	for (int k = 0; k < 3; k++) {
		struct ibv_mr *m = reg_kind(k, host, a);

		if (m)
			ibv_dereg_mr(m);
	}
	if (pthread_create(&t, NULL, slow_call, NULL) ||
	    pthread_create(&u, NULL, unstall_later, NULL))
		die("pthread_create");
	usleep(100000);		/* inside it by now */
	while (!__atomic_load_n(&slow_done, __ATOMIC_ACQUIRE)) {
		uint64_t t0 = now_ns(), d;
		struct ibv_mr *m = reg_kind(n % 2, host, a);

		d = now_ns() - t0;
		if (d > worst)
			worst = d;
		if (!m)
			refused++;
		else
			ibv_dereg_mr(m);
		n++;
	}
	pthread_join(t, NULL);
	pthread_join(u, NULL);
	printf("slow_call %d %.1f %d %.0f\n", n, worst / 1e3, refused,
	       slow_ns / 1e6);
	return 0;
}

/* --------------------------------------------------------- a slow NIC */

static int nic_ok;	/* atomic */

static void *reg_own(void *arg)
{
	void *p = aligned_alloc(4096, LEN);
	struct ibv_mr *m = p ? ibv_reg_mr(pd, p, LEN, ACC) : NULL;

	(void)arg;
	if (m) {
		__atomic_add_fetch(&nic_ok, 1, __ATOMIC_RELAXED);
		ibv_dereg_mr(m);
	}
	free(p);
	return NULL;
}

/* Prints "slow_nic ok ms". */
static int child_slow_nic(void)
{
	pthread_t t[100];
	uint64_t t0;

	setup();
	t0 = now_ns();
	for (int i = 0; i < 100; i++)
		if (pthread_create(&t[i], NULL, reg_own, NULL))
			die("pthread_create");
	for (int i = 0; i < 100; i++)
		pthread_join(t[i], NULL);
	printf("slow_nic %d %.0f\n", nic_ok, (now_ns() - t0) / 1e6);
	return 0;
}

/* ------------------------------------------------------------- parent */

/* Run this program with args, with or without the shim; its output in
 * buf. */
static void run_child(const char *lib, int shim, const char *extra_env,
		      char *const args[], char *buf, size_t cap)
{
	int fd[2], st;
	pid_t pid;
	ssize_t n, got = 0;

	if (pipe(fd))
		die("pipe");
	pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		dup2(fd[1], 1);
		close(fd[0]);
		if (shim)
			setenv("LD_PRELOAD", lib, 1);
		else
			unsetenv("LD_PRELOAD");
		if (extra_env)
			putenv((char *)extra_env);
		execv("/proc/self/exe", args);
		_exit(127);
	}
	close(fd[1]);
	while (got < (ssize_t)cap - 1 &&
	       (n = read(fd[0], buf + got, cap - 1 - (size_t)got)) > 0)
		got += n;
	buf[got] = 0;
	close(fd[0]);
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st)) {
		fprintf(stderr, "bench_liveness: %s, %s: the child failed\n",
			args[1], shim ? "shim" : "no shim");
		exit(1);
	}
}

int main(int argc, char **argv)
{
	const char *lib = getenv("GH_BENCH_LIB");
	const char *threads = getenv("GH_BENCH_THREADS");
	const char *r = getenv("GH_BENCH_REGS");
	int regs = r ? atoi(r) : 2000;
	char buf[2][4096], nt[16], rs[16];
	char tl[256];

	if (argc >= 2 && !strcmp(argv[1], "--threads") && argc == 4)
		return child_threads(atoi(argv[2]), atoi(argv[3]));
	if (argc == 2 && !strcmp(argv[1], "--slow-call"))
		return child_slow_call();
	if (argc == 2 && !strcmp(argv[1], "--slow-nic"))
		return child_slow_nic();
	if (!lib) {
		fprintf(stderr, "bench_liveness: set GH_BENCH_LIB to libgdrhook.so (see the top of tests/bench/bench_liveness.c)\n");
		return 2;
	}
	if (regs < 100)
		regs = 100;
	snprintf(tl, sizeof(tl), "%s", threads ? threads : "0,1,2,4,8,16");
	snprintf(rs, sizeof(rs), "%d", regs);
	printf("registration latency (us) beside N threads that allocate, %d each, no shim | shim\n",
	       regs);
	printf("%-3s %-8s %8s %8s %8s %4s | %8s %8s %8s %4s\n", "N", "kind",
	       "p50", "p99", "max", "ref", "p50", "p99", "max", "ref");
	for (char *s = strtok(tl, ","); s; s = strtok(NULL, ",")) {
		char *args[] = { argv[0], "--threads", nt, rs, NULL };
		char *line[2], *save[2];

		snprintf(nt, sizeof(nt), "%d", atoi(s));
		for (int shim = 0; shim < 2; shim++)
			run_child(lib, shim, NULL, args, buf[shim],
				  sizeof(buf[shim]));
		line[0] = strtok_r(buf[0], "\n", &save[0]);
		line[1] = strtok_r(buf[1], "\n", &save[1]);
		while (line[0] && line[1]) {
			char k[2][16];
			double p50[2], p99[2], mx[2];
			int ref[2];

			for (int i = 0; i < 2; i++)
				if (sscanf(line[i], "%15s %lf %lf %lf %d", k[i],
					   &p50[i], &p99[i], &mx[i],
					   &ref[i]) != 5)
					die("a child's output");
			printf("%-3s %-8s %8.1f %8.1f %8.1f %4d | %8.1f %8.1f %8.1f %4d\n",
			       nt, k[0], p50[0], p99[0], mx[0], ref[0],
			       p50[1], p99[1], mx[1], ref[1]);
			line[0] = strtok_r(NULL, "\n", &save[0]);
			line[1] = strtok_r(NULL, "\n", &save[1]);
		}
		fflush(stdout);
	}
	{
		char *args[] = { argv[0], "--slow-call", NULL };

		for (int shim = 0; shim < 2; shim++)
			run_child(lib, shim, NULL, args, buf[shim],
				  sizeof(buf[shim]));
		printf("\nanother thread in a driver call of 1.5 s: registrations of other memory meanwhile\n");
		for (int shim = 0; shim < 2; shim++) {
			int n = 0, ref = 0;
			double mx = 0, ms = 0;

			sscanf(buf[shim], "slow_call %d %lf %d %lf", &n, &mx,
			       &ref, &ms);
			printf("  %-8s %6d registrations, longest %.1f us, %d refused (the call: %.0f ms)\n",
			       shim ? "shim" : "no shim", n, mx, ref, ms);
		}
	}
	if (dlsym(RTLD_DEFAULT, "fakeverbs_write")) {
		char *args[] = { argv[0], "--slow-nic", NULL };

		for (int shim = 0; shim < 2; shim++)
			run_child(lib, shim, "FAKEVERBS_REG_DELAY_US=1200000",
				  args, buf[shim], sizeof(buf[shim]));
		printf("\n100 threads registering at once, 1.2 s a registration (the NIC double)\n");
		for (int shim = 0; shim < 2; shim++) {
			int ok = 0;
			double ms = 0;

			sscanf(buf[shim], "slow_nic %d %lf", &ok, &ms);
			printf("  %-8s %3d of 100 succeeded in %.0f ms\n",
			       shim ? "shim" : "no shim", ok, ms);
		}
	}
	return 0;
}
