// SPDX-License-Identifier: MIT
/*
 * gpu-check: every driver-API allocation route, printed for the checker.
 *
 * Prints, on stdout, one line per allocation and free it makes (the
 * protocol is described in tests/gpu/gpu_check.py):
 *   GH-CASE <section>  + GH-T <CLOCK_MONOTONIC ns>
 *   GH-PTR alloc <api> <ptr> <size> | free <api> <ptr> | fail <api> <rc>
 *   GH-PTR ev <event> <api>   a pool_trim/pool_destroy/ctx record follows
 *   GH-PTR reset              everything still live was in the context
 *                             that is destroyed/reset next
 * Runs on the real driver (nvcc/cc ... -lcuda) and on the test double
 * (build/fake/libcuda.so.1).
 */
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MiB (1024UL * 1024UL)

static void die_cu(const char *what, CUresult rc, int line)
{
	const char *name = NULL;

	cuGetErrorName(rc, &name);
	printf("GH-FAIL line %d: %s -> %d (%s)\n", line, what, (int)rc,
	       name ? name : "?");
	fprintf(stderr, "drv_api: line %d: %s failed: %d (%s)\n", line, what,
		(int)rc, name ? name : "?");
	fflush(stdout);
	exit(1);
}

#define CK(call)							\
	do {								\
		CUresult rc_ = (call);					\
		if (rc_ != CUDA_SUCCESS)				\
			die_cu(#call, rc_, __LINE__);			\
	} while (0)

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

static void p_alloc(const char *api, uint64_t p, uint64_t size)
{
	printf("GH-PTR alloc %s 0x%llx %llu\n", api, (unsigned long long)p,
	       (unsigned long long)size);
}

static void p_free(const char *api, uint64_t p)
{
	printf("GH-PTR free %s 0x%llx\n", api, (unsigned long long)p);
}

#define HP(p) ((uint64_t)(uintptr_t)(p))

/* Write a pattern to device memory and read it back. */
static void touch(CUdeviceptr d, size_t n)
{
	unsigned char b[16];

	CK(cuMemsetD8_v2(d, 0x5a, n));
	CK(cuMemcpyDtoH_v2(b, d + n - sizeof(b), sizeof(b)));
	for (size_t i = 0; i < sizeof(b); i++) {
		if (b[i] != 0x5a) {
			printf("GH-FAIL readback 0x%llx: got 0x%02x\n",
			       (unsigned long long)d, b[i]);
			exit(1);
		}
	}
}

/*
 * After a context is gone: does the driver still know the allocation?
 * If it does, the implicit free the shim logged for it was wrong.
 */
static void probe_gone(uint64_t p, int host, const char *after)
{
	CUdeviceptr b;
	size_t n;
	unsigned int fl;
	CUresult rc;

	if (host)
		rc = cuMemHostGetFlags(&fl, (void *)(uintptr_t)p);
	else
		rc = cuMemGetAddressRange_v2(&b, &n, (CUdeviceptr)p);
	if (rc == CUDA_SUCCESS)
		printf("GH-SURVIVED 0x%llx %s\n", (unsigned long long)p, after);
}

int main(void)
{
	CUdevice dev;
	CUcontext pctx, cctx;
	CUstream s;
	CUdeviceptr d1, d2, dp, dm, da, db;
	size_t pitch;
	void *h1, *h2;
	CUresult rc;

	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("GH-PID %d\n", (int)getpid());
	CK(cuInit(0));
	CK(cuDeviceGet(&dev, 0));
	CK(cuDevicePrimaryCtxRetain(&pctx, dev));
	CK(cuCtxSetCurrent(pctx));
	CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));

	section("device");
	CK(cuMemAlloc_v2(&d1, 1 * MiB));
	p_alloc("cuMemAlloc_v2", d1, 1 * MiB);
	CK(cuMemAlloc_v2(&d2, 100));
	p_alloc("cuMemAlloc_v2", d2, 100);
	touch(d1, 1 * MiB);
	CK(cuMemAllocPitch_v2(&dp, &pitch, 1000, 64, 4));
	p_alloc("cuMemAllocPitch_v2", dp, (uint64_t)pitch * 64);
	touch(dp, pitch * 64);
	rc = cuMemAlloc_v2(&da, (size_t)1 << 52);	/* 4 PiB: must fail */
	if (rc == CUDA_SUCCESS) {
		p_alloc("cuMemAlloc_v2", da, (size_t)1 << 52);
		CK(cuMemFree_v2(da));
		p_free("cuMemFree_v2", da);
	} else {
		printf("GH-PTR fail cuMemAlloc_v2 %d\n", (int)rc);
	}
	p_free("cuMemFree_v2", d2);
	CK(cuMemFree_v2(d2));
	p_free("cuMemFree_v2", d1);
	CK(cuMemFree_v2(d1));
	p_free("cuMemFree_v2", dp);
	CK(cuMemFree_v2(dp));
	/* the same size again: the driver usually hands back the address */
	CK(cuMemAlloc_v2(&d1, 1 * MiB));
	p_alloc("cuMemAlloc_v2", d1, 1 * MiB);
	p_free("cuMemFree_v2", d1);
	CK(cuMemFree_v2(d1));

	section("managed");
	CK(cuMemAllocManaged(&dm, 1 * MiB, CU_MEM_ATTACH_GLOBAL));
	p_alloc("cuMemAllocManaged", dm, 1 * MiB);
	touch(dm, 1 * MiB);
	p_free("cuMemFree_v2", dm);
	CK(cuMemFree_v2(dm));

	section("host");
	CK(cuMemAllocHost_v2(&h1, 64 * 1024));
	p_alloc("cuMemAllocHost_v2", HP(h1), 64 * 1024);
	memset(h1, 1, 64 * 1024);
	CK(cuMemHostAlloc(&h2, 3 * 4096 + 7,
			  CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP));
	p_alloc("cuMemHostAlloc", HP(h2), 3 * 4096 + 7);
	memset(h2, 2, 3 * 4096 + 7);
	p_free("cuMemFreeHost", HP(h1));
	CK(cuMemFreeHost(h1));
	p_free("cuMemFreeHost", HP(h2));
	CK(cuMemFreeHost(h2));

	section("hostreg");
	{
		size_t n = 256 * 1024;
		void *m = aligned_alloc(4096, n);

		memset(m, 3, n);
		CK(cuMemHostRegister_v2(m, n, 0));
		p_alloc("cuMemHostRegister_v2", HP(m), n);
		p_free("cuMemHostUnregister", HP(m));
		CK(cuMemHostUnregister(m));
		free(m);
	}

	section("async");
	CK(cuMemAllocAsync(&da, 1 * MiB, s));
	p_alloc("cuMemAllocAsync", da, 1 * MiB);
	CK(cuMemAllocAsync(&db, 12345, s));
	p_alloc("cuMemAllocAsync", db, 12345);
	CK(cuMemsetD8Async(da, 7, 1 * MiB, s));
	p_free("cuMemFreeAsync", da);
	CK(cuMemFreeAsync(da, s));
	p_free("cuMemFreeAsync", db);
	CK(cuMemFreeAsync(db, s));
	CK(cuStreamSynchronize(s));

	section("pool");
	{
		CUmemPoolProps props;
		CUmemoryPool pool;
		CUdeviceptr pp[3];
		size_t sz[3] = { 64 * 1024, 1 * MiB, 3 * MiB + 5 };

		memset(&props, 0, sizeof(props));
		props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
		props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
		props.location.id = dev;
		CK(cuMemPoolCreate(&pool, &props));
		for (int i = 0; i < 3; i++) {
			CK(cuMemAllocFromPoolAsync(&pp[i], sz[i], pool, s));
			p_alloc("cuMemAllocFromPoolAsync", pp[i], sz[i]);
			CK(cuMemsetD8Async(pp[i], 9, sz[i], s));
		}
		for (int i = 0; i < 3; i++) {
			p_free("cuMemFreeAsync", pp[i]);
			CK(cuMemFreeAsync(pp[i], s));
		}
		CK(cuStreamSynchronize(s));
		printf("GH-PTR ev pool_trim cuMemPoolTrimTo\n");
		CK(cuMemPoolTrimTo(pool, 0));
		printf("GH-PTR ev pool_destroy cuMemPoolDestroy\n");
		CK(cuMemPoolDestroy(pool));
	}

	section("vmm");
	{
		CUmemAllocationProp prop;
		CUmemAccessDesc acc;
		CUmemGenericAllocationHandle ha, hb;
		CUdeviceptr va;
		size_t g;

		memset(&prop, 0, sizeof(prop));
		prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
		prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
		prop.location.id = dev;
		CK(cuMemGetAllocationGranularity(&g, &prop,
				CU_MEM_ALLOC_GRANULARITY_MINIMUM));
		CK(cuMemAddressReserve(&va, 4 * g, 0, 0, 0));
		CK(cuMemCreate(&ha, g, &prop, 0));
		CK(cuMemCreate(&hb, 2 * g, &prop, 0));
		CK(cuMemMap(va, g, 0, ha, 0));
		p_alloc("cuMemMap", va, g);
		CK(cuMemMap(va + g, 2 * g, 0, hb, 0));
		p_alloc("cuMemMap", va + g, 2 * g);
		memset(&acc, 0, sizeof(acc));
		acc.location = prop.location;
		acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
		CK(cuMemSetAccess(va, 3 * g, &acc, 1));
		touch(va, g);		/* mapping by mapping */
		touch(va + g, 2 * g);
		/* one unmap of both mappings: two implicit frees */
		p_free("cuMemUnmap", va);
		p_free("cuMemUnmap", va + g);
		CK(cuMemUnmap(va, 3 * g));
		CK(cuMemRelease(ha));
		CK(cuMemRelease(hb));
		/* map again, unmap mapping by mapping */
		CK(cuMemCreate(&ha, g, &prop, 0));
		CK(cuMemMap(va + 3 * g, g, 0, ha, 0));
		p_alloc("cuMemMap", va + 3 * g, g);
		CK(cuMemSetAccess(va + 3 * g, g, &acc, 1));
		touch(va + 3 * g, g);
		p_free("cuMemUnmap", va + 3 * g);
		CK(cuMemUnmap(va + 3 * g, g));
		CK(cuMemRelease(ha));
		CK(cuMemAddressFree(va, 4 * g));
	}

	section("ctxdestroy");
	{
		CUdeviceptr c1, c2, cp;
		void *ch;

		CK(cuCtxCreate(&cctx, NULL, 0, dev));
		CK(cuMemAlloc_v2(&c1, 2 * MiB));
		p_alloc("cuMemAlloc_v2", c1, 2 * MiB);
		CK(cuMemAllocPitch_v2(&cp, &pitch, 512, 16, 16));
		p_alloc("cuMemAllocPitch_v2", cp, (uint64_t)pitch * 16);
		CK(cuMemAllocManaged(&c2, 64 * 1024, CU_MEM_ATTACH_GLOBAL));
		p_alloc("cuMemAllocManaged", c2, 64 * 1024);
		CK(cuMemAllocHost_v2(&ch, 8192));
		p_alloc("cuMemAllocHost_v2", HP(ch), 8192);
		touch(c1, 2 * MiB);
		/* one freed normally before the destroy */
		p_free("cuMemFree_v2", cp);
		CK(cuMemFree_v2(cp));
		CK(cuCtxSynchronize());
		printf("GH-PTR reset cuCtxDestroy_v2\n");
		CK(cuCtxDestroy(cctx));
		CK(cuCtxSetCurrent(pctx));
		probe_gone(c1, 0, "cuCtxDestroy_v2");
		probe_gone(c2, 0, "cuCtxDestroy_v2");
		probe_gone(HP(ch), 1, "cuCtxDestroy_v2");
	}

	/*
	 * A VMM mapping made while a created context was current, then the
	 * context destroyed.  Mappings belong to the address space, not to
	 * a context: if the driver still lets us use it, its free is the
	 * later cuMemUnmap and nothing may drop it before.
	 */
	section("vmmctx");
	{
		CUmemAllocationProp prop;
		CUmemAccessDesc acc;
		CUmemGenericAllocationHandle h;
		CUdeviceptr va;
		size_t g;

		memset(&prop, 0, sizeof(prop));
		prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
		prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
		prop.location.id = dev;
		CK(cuMemGetAllocationGranularity(&g, &prop,
				CU_MEM_ALLOC_GRANULARITY_MINIMUM));
		CK(cuCtxCreate(&cctx, NULL, 0, dev));
		CK(cuMemAddressReserve(&va, g, 0, 0, 0));
		CK(cuMemCreate(&h, g, &prop, 0));
		CK(cuMemMap(va, g, 0, h, 0));
		p_alloc("cuMemMap", va, g);
		memset(&acc, 0, sizeof(acc));
		acc.location = prop.location;
		acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
		CK(cuMemSetAccess(va, g, &acc, 1));
		touch(va, g);
		CK(cuCtxDestroy(cctx));
		CK(cuCtxSetCurrent(pctx));
		rc = cuMemsetD8_v2(va, 0x11, g);
		/* The memset is asynchronous: let it finish before unmapping. */
		if (rc == CUDA_SUCCESS)
			rc = cuCtxSynchronize();
		if (rc == CUDA_SUCCESS) {
			printf("GH-NOTE vmm mapping still usable after cuCtxDestroy of the context it was made in: its free is the cuMemUnmap\n");
			p_free("cuMemUnmap", va);
			CK(cuMemUnmap(va, g));
			CK(cuMemRelease(h));
			CK(cuMemAddressFree(va, g));
		} else {
			printf("GH-NOTE vmm mapping unusable after cuCtxDestroy (rc %d): expect an implicit free at the destroy\n",
			       (int)rc);
			p_free("cuCtxDestroy_v2", va);
			(void)cuMemUnmap(va, g);
			(void)cuMemRelease(h);
			(void)cuMemAddressFree(va, g);
		}
	}

	/* a release that is not the last one drops nothing */
	section("release");
	{
		CUcontext again;
		CUdeviceptr x;

		CK(cuDevicePrimaryCtxRetain(&again, dev));
		/* vmmctx destroyed the context that was current */
		CK(cuCtxSetCurrent(again));
		CK(cuMemAlloc_v2(&x, 3 * MiB));
		p_alloc("cuMemAlloc_v2", x, 3 * MiB);
		printf("GH-PTR ev ctx_release cuDevicePrimaryCtxRelease_v2\n");
		CK(cuDevicePrimaryCtxRelease_v2(dev));
		touch(x, 3 * MiB);
		p_free("cuMemFree_v2", x);
		CK(cuMemFree_v2(x));
	}

	section("reset");
	{
		CUdeviceptr r1, r2;
		void *rh;

		CK(cuStreamDestroy(s));
		CK(cuMemAlloc_v2(&r1, 4 * MiB));
		p_alloc("cuMemAlloc_v2", r1, 4 * MiB);
		CK(cuMemAllocManaged(&r2, 1 * MiB, CU_MEM_ATTACH_GLOBAL));
		p_alloc("cuMemAllocManaged", r2, 1 * MiB);
		CK(cuMemHostAlloc(&rh, 4096, 0));
		p_alloc("cuMemHostAlloc", HP(rh), 4096);
		touch(r1, 4 * MiB);
		printf("GH-PTR reset cuDevicePrimaryCtxReset_v2\n");
		CK(cuDevicePrimaryCtxReset_v2(dev));
	}

	/*
	 * The reset kept our reference; retain again (the context comes
	 * back), then release twice: the last release destroys it.
	 */
	section("lastrelease");
	{
		CUcontext again;
		CUdeviceptr y;
		void *yh;

		CK(cuDevicePrimaryCtxRetain(&again, dev));
		CK(cuCtxSetCurrent(again));
		CK(cuMemAlloc_v2(&y, 1 * MiB));
		p_alloc("cuMemAlloc_v2", y, 1 * MiB);
		CK(cuMemAllocHost_v2(&yh, 4096));
		p_alloc("cuMemAllocHost_v2", HP(yh), 4096);
		touch(y, 1 * MiB);
		printf("GH-PTR ev ctx_release cuDevicePrimaryCtxRelease_v2\n");
		CK(cuDevicePrimaryCtxRelease_v2(dev));
		touch(y, 1 * MiB);	/* still one reference: still alive */
		printf("GH-PTR reset cuDevicePrimaryCtxRelease_v2\n");
		CK(cuDevicePrimaryCtxRelease_v2(dev));
	}
	section("end");
	printf("GH-OK drv_api done\n");
	return 0;
}
