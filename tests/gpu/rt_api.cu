// SPDX-License-Identifier: MIT
/*
 * gpu-check: every CUDA runtime allocation route, printed for the checker
 * (protocol: tests/gpu/gpu_check.py; same lines as drv_api.c).
 *
 * Built by nvcc three ways (-cudart shared, -cudart static,
 * --default-stream per-thread).  Also valid C: `cc -x c` builds it
 * without kernels against a stand-in libcudart (gpu-check --fake).
 */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MiB (1024UL * 1024UL)
#define HP(p) ((unsigned long long)(uintptr_t)(p))

#ifdef __CUDACC__
__global__ void fill(unsigned char *p, size_t n, unsigned char v)
{
	size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;

	for (; i < n; i += (size_t)gridDim.x * blockDim.x)
		p[i] = v;
}
#endif

static void die_rt(const char *what, cudaError_t rc, int line)
{
	printf("GH-FAIL line %d: %s -> %d (%s)\n", line, what, (int)rc,
	       cudaGetErrorName(rc));
	fprintf(stderr, "rt_api: line %d: %s failed: %d (%s)\n", line, what,
		(int)rc, cudaGetErrorName(rc));
	fflush(stdout);
	exit(1);
}

#define CK(call)							\
	do {								\
		cudaError_t rc_ = (call);				\
		if (rc_ != cudaSuccess)					\
			die_rt(#call, rc_, __LINE__);			\
	} while (0)

/* Write v over [p, p+n) on stream s (a kernel where there is one). */
static void touch(void *p, size_t n, cudaStream_t s, unsigned char v)
{
#ifdef __CUDACC__
	fill<<<64, 256, 0, s>>>((unsigned char *)p, n, v);
	CK(cudaGetLastError());
#else
	(void)s;	/* the stand-in runtime has the synchronous call only */
	CK(cudaMemset(p, v, n));
#endif
}

/* touch, then read the last bytes back */
static void touch_check(void *p, size_t n, cudaStream_t s, unsigned char v)
{
	unsigned char b[16];

	touch(p, n, s, v);
	CK(cudaStreamSynchronize(s));
	CK(cudaMemcpy(b, (unsigned char *)p + n - sizeof(b), sizeof(b),
		      cudaMemcpyDefault));
	for (size_t i = 0; i < sizeof(b); i++) {
		if (b[i] != v) {
			printf("GH-FAIL readback %p: 0x%02x\n", p, b[i]);
			exit(1);
		}
	}
}

static unsigned long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000000000ULL +
	       (unsigned long long)ts.tv_nsec;
}

static void section(const char *name)
{
	printf("GH-CASE %s\nGH-T %llu\n", name, now_ns());
}

static void p_alloc(const char *api, const void *p, size_t size)
{
	printf("GH-PTR alloc %s 0x%llx %llu\n", api, HP(p),
	       (unsigned long long)size);
}

static void p_free(const char *api, const void *p)
{
	printf("GH-PTR free %s 0x%llx\n", api, HP(p));
}

int main(void)
{
	cudaStream_t s;
	void *d1, *d2, *dp, *dm, *a1, *a2, *h1, *h2;
	size_t pitch;
	int ndev = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("GH-PID %d\n", (int)getpid());
	CK(cudaGetDeviceCount(&ndev));
	CK(cudaSetDevice(0));
	CK(cudaFree(0));		/* create the primary context */
	CK(cudaStreamCreate(&s));

	section("device");
	CK(cudaMalloc(&d1, 1 * MiB));
	p_alloc("cudaMalloc", d1, 1 * MiB);
	CK(cudaMalloc(&d2, 100));
	p_alloc("cudaMalloc", d2, 100);
	touch_check(d1, 1 * MiB, 0, 1);
	CK(cudaMallocPitch(&dp, &pitch, 1000, 33));
	p_alloc("cudaMallocPitch", dp, pitch * 33);
	touch_check(dp, pitch * 33, 0, 2);
	p_free("cudaFree", d2);
	CK(cudaFree(d2));
	p_free("cudaFree", d1);
	CK(cudaFree(d1));
	p_free("cudaFree", dp);
	CK(cudaFree(dp));
	CK(cudaMalloc(&d1, 1 * MiB));
	p_alloc("cudaMalloc", d1, 1 * MiB);
	p_free("cudaFree", d1);
	CK(cudaFree(d1));

	section("async");
	/* on the default stream (per-thread in the ptds build) */
	CK(cudaMallocAsync(&a1, 1 * MiB, 0));
	p_alloc("cudaMallocAsync", a1, 1 * MiB);
	touch(a1, 1 * MiB, 0, 3);
	CK(cudaMallocAsync(&a2, 3 * MiB + 1, s));
	p_alloc("cudaMallocAsync", a2, 3 * MiB + 1);
	touch(a2, 3 * MiB + 1, s, 4);
	p_free("cudaFreeAsync", a1);
	CK(cudaFreeAsync(a1, 0));
	p_free("cudaFreeAsync", a2);
	CK(cudaFreeAsync(a2, s));
	CK(cudaStreamSynchronize(s));
	CK(cudaStreamSynchronize(0));

	section("pool");
	{
		struct cudaMemPoolProps props;
		cudaMemPool_t pool;
		void *pp[3];
		size_t sz[3] = { 64 * 1024, 1 * MiB, 5 * MiB + 3 };

		memset(&props, 0, sizeof(props));
		props.allocType = cudaMemAllocationTypePinned;
		props.location.type = cudaMemLocationTypeDevice;
		props.location.id = 0;
		CK(cudaMemPoolCreate(&pool, &props));
		for (int i = 0; i < 3; i++) {
			CK(cudaMallocFromPoolAsync(&pp[i], sz[i], pool, s));
			p_alloc("cudaMallocFromPoolAsync", pp[i], sz[i]);
			touch(pp[i], sz[i], s, (unsigned char)(5 + i));
		}
		for (int i = 0; i < 3; i++) {
			p_free("cudaFreeAsync", pp[i]);
			CK(cudaFreeAsync(pp[i], s));
		}
		CK(cudaStreamSynchronize(s));
		printf("GH-PTR ev pool_trim cudaMemPoolTrimTo\n");
		CK(cudaMemPoolTrimTo(pool, 0));
		printf("GH-PTR ev pool_destroy cudaMemPoolDestroy\n");
		CK(cudaMemPoolDestroy(pool));
	}

	section("managed");
	CK(cudaMallocManaged(&dm, 1 * MiB, cudaMemAttachGlobal));
	p_alloc("cudaMallocManaged", dm, 1 * MiB);
	touch_check(dm, 1 * MiB, 0, 8);
	((unsigned char *)dm)[10] = 1;	/* host access */
	p_free("cudaFree", dm);
	CK(cudaFree(dm));

	section("host");
	CK(cudaHostAlloc(&h1, 64 * 1024, cudaHostAllocDefault));
	p_alloc("cudaHostAlloc", h1, 64 * 1024);
	memset(h1, 1, 64 * 1024);
	CK(cudaMallocHost(&h2, 5000));
	p_alloc("cudaMallocHost", h2, 5000);
	memset(h2, 2, 5000);
	p_free("cudaFreeHost", h1);
	CK(cudaFreeHost(h1));
	p_free("cudaFreeHost", h2);
	CK(cudaFreeHost(h2));

	section("hostreg");
	{
		size_t n = 256 * 1024;
		void *m = aligned_alloc(4096, n), *dev_copy;

		memset(m, 3, n);
		CK(cudaHostRegister(m, n, cudaHostRegisterDefault));
		p_alloc("cudaHostRegister", m, n);
		CK(cudaMalloc(&dev_copy, n));
		p_alloc("cudaMalloc", dev_copy, n);
		CK(cudaMemcpy(dev_copy, m, n, cudaMemcpyHostToDevice));
		p_free("cudaFree", dev_copy);
		CK(cudaFree(dev_copy));
		p_free("cudaHostUnregister", m);
		CK(cudaHostUnregister(m));
		free(m);
	}

	section("reset");
	{
		void *r1, *r2, *r3, *r4;

		CK(cudaStreamDestroy(s));
		CK(cudaMalloc(&r1, 2 * MiB));
		p_alloc("cudaMalloc", r1, 2 * MiB);
		CK(cudaMallocManaged(&r2, 1 * MiB, cudaMemAttachGlobal));
		p_alloc("cudaMallocManaged", r2, 1 * MiB);
		CK(cudaHostAlloc(&r3, 8192, cudaHostAllocDefault));
		p_alloc("cudaHostAlloc", r3, 8192);
		CK(cudaMallocAsync(&r4, 1 * MiB, 0));
		p_alloc("cudaMallocAsync", r4, 1 * MiB);
		touch(r1, 2 * MiB, 0, 9);
		CK(cudaDeviceSynchronize());
		printf("GH-PTR reset cudaDeviceReset\n");
		CK(cudaDeviceReset());
	}
	section("end");
	printf("GH-OK rt_api done (%d devices)\n", ndev);
	return 0;
}
