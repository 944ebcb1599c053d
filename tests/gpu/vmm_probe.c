// SPDX-License-Identifier: MIT
/*
 * What the real driver does for the cases issue 10 rests on, printed as
 * "key: value" lines (no shim involved):
 *
 *   - cuMemGetHandleForAddressRange(DMA_BUF_FD) on a range that crosses
 *     VMM mappings: of different physical allocations, and of one physical
 *     allocation mapped in pieces; the dma-buf's size; the PCIe mapping
 *     type flag; unaligned offsets; cuMemGetAddressRange of a VMM chunk;
 *   - the BAR1 size: NVML (dlopen) and the PCI resource in sysfs;
 *   - SYNC_MEMOPS: per pointer (set + read back) and per context
 *     (cuCtxSetFlags + cuCtxGetFlags) for device, pool and VMM memory,
 *     and what each costs.
 *
 *   cc -I$CUDA_HOME/include -o vmm_probe tests/gpu/vmm_probe.c -lcuda -ldl
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define P(key, fmt, ...) printf("%s: " fmt "\n", key, __VA_ARGS__)

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static void export(const char *what, CUdeviceptr p, size_t len,
		   unsigned long long flags)
{
	int fd = -1;
	CUresult rc = cuMemGetHandleForAddressRange(&fd, p, len,
			CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, flags);
	long long sz = -1;

	if (rc == CUDA_SUCCESS) {
		sz = lseek(fd, 0, SEEK_END);
		close(fd);
	}
	printf("export %s flags=%llu len=%zu: rc=%d dmabuf_size=%lld\n", what,
	       flags, len, rc, sz);
}

static CUmemGenericAllocationHandle mk(size_t sz, int dev)
{
	CUmemAllocationProp prop;
	CUmemGenericAllocationHandle h = 0;
	CUresult rc;

	memset(&prop, 0, sizeof(prop));
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = dev;
	prop.allocFlags.gpuDirectRDMACapable = 1;
	rc = cuMemCreate(&h, sz, &prop, 0);
	if (rc)
		printf("cuMemCreate %zu: rc=%d\n", sz, rc);
	return h;
}

static void access_rw(CUdeviceptr p, size_t sz, int dev)
{
	CUmemAccessDesc a;

	memset(&a, 0, sizeof(a));
	a.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	a.location.id = dev;
	a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	if (cuMemSetAccess(p, sz, &a, 1))
		printf("cuMemSetAccess failed\n");
}

static void syncmemops(const char *kind, CUdeviceptr p)
{
	unsigned int v = 99, one = 1;
	CUresult g0, s, g1;
	double t;

	g0 = cuPointerGetAttribute(&v, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, p);
	printf("syncmemops %s before: rc=%d value=%u\n", kind, g0, v);
	t = now_us();
	s = cuPointerSetAttribute(&one, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, p);
	t = now_us() - t;
	v = 99;
	g1 = cuPointerGetAttribute(&v, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, p);
	printf("syncmemops %s set: rc=%d us=%.2f readback rc=%d value=%u\n",
	       kind, s, t, g1, v);
}

static void readback(const char *kind, CUdeviceptr p)
{
	unsigned int v = 99;
	CUresult g = cuPointerGetAttribute(&v, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS,
					   p);

	printf("syncmemops %s read: rc=%d value=%u\n", kind, g, v);
}

static void bar1(CUdevice dev)
{
	char bus[64] = "", path[256], line[256];
	void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW);
	FILE *f;
	int i = 0;

	cuDeviceGetPCIBusId(bus, sizeof(bus), dev);
	P("pci bus id", "%s", bus);
	if (h) {
		int (*init)(void) = dlsym(h, "nvmlInit_v2");
		int (*byb)(const char *, void **) =
			dlsym(h, "nvmlDeviceGetHandleByPciBusId_v2");
		int (*b1)(void *, unsigned long long *) =
			dlsym(h, "nvmlDeviceGetBAR1MemoryInfo");
		unsigned long long m[3] = { 0, 0, 0 };
		void *d = NULL;
		int r1 = init ? init() : -1, r2 = -1, r3 = -1;

		if (!r1 && byb)
			r2 = byb(bus, &d);
		if (!r2 && b1)
			r3 = b1(d, m);
		printf("nvml bar1: init=%d handle=%d info=%d total=%llu free=%llu used=%llu\n",
		       r1, r2, r3, m[0], m[1], m[2]);
	} else {
		printf("nvml: %s\n", dlerror());
	}
	for (char *c = bus; *c; c++)
		if (*c >= 'A' && *c <= 'F')
			*c += 'a' - 'A';
	/* sysfs wants "0000:xx:yy.z"; CUDA prints 8 hex digits of domain */
	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/resource",
		 strlen(bus) > 12 ? bus + 4 : bus);
	f = fopen(path, "r");
	P("sysfs path", "%s %s", path, f ? "ok" : "missing");
	while (f && fgets(line, sizeof(line), f)) {
		unsigned long long s, e, fl;

		if (sscanf(line, "%llx %llx %llx", &s, &e, &fl) == 3 && s)
			printf("sysfs resource %d: size=%llu flags=%#llx\n", i,
			       e - s + 1, fl);
		i++;
	}
	if (f)
		fclose(f);
}

int main(void)
{
	CUdevice dev;
	CUcontext ctx;
	size_t gran = 0, chunk;
	CUmemAllocationProp prop;
	CUdeviceptr va, va2, d, pool, base = 0;
	CUmemGenericAllocationHandle h[3], hbig;
	CUstream st;
	size_t rsz = 0;
	unsigned int fl = 0;
	int attr = -1;
	double t;

	if (cuInit(0) || cuDeviceGet(&dev, 0) ||
	    cuDevicePrimaryCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx)) {
		printf("no GPU\n");
		return 77;
	}
	{
		int drv = 0;
		char name[128];

		cuDriverGetVersion(&drv);
		cuDeviceGetName(name, sizeof(name), dev);
		P("device", "%s driver %d", name, drv);
	}
	cuDeviceGetAttribute(&attr, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, dev);
	P("attr dma_buf_supported", "%d", attr);
	cuDeviceGetAttribute(&attr, CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED, dev);
	P("attr host_native_atomic (C2C link)", "%d", attr);
	cuDeviceGetAttribute(&attr, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED, dev);
	P("attr gdr_with_vmm", "%d", attr);
	{
		size_t fr = 0, tot = 0;

		cuMemGetInfo(&fr, &tot);
		P("memory total", "%zu", tot);
	}
	bar1(dev);

	memset(&prop, 0, sizeof(prop));
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = dev;
	prop.allocFlags.gpuDirectRDMACapable = 1;
	cuMemGetAllocationGranularity(&gran, &prop,
				      CU_MEM_ALLOC_GRANULARITY_MINIMUM);
	P("vmm granularity", "%zu", gran);
	chunk = 20u << 20;	/* PyTorch's expandable segment page */
	chunk = (chunk + gran - 1) / gran * gran;

	/* A: three chunks, three physical allocations. */
	if (cuMemAddressReserve(&va, 3 * chunk, 0, 0, 0))
		return 1;
	for (int i = 0; i < 3; i++) {
		h[i] = mk(chunk, dev);
		if (cuMemMap(va + i * chunk, chunk, 0, h[i], 0))
			printf("map %d failed\n", i);
	}
	access_rw(va, 3 * chunk, dev);
	export("A one-chunk", va, chunk, 0);
	export("A inside-chunk 64k+64k", va + 65536, 65536, 0);
	export("A inside-chunk 4k-offset", va + 4096, 65536, 0);
	export("A cross-1 (2 allocs)", va + chunk - (1 << 20), 2 << 20, 0);
	export("A cross-2 (3 allocs)", va + chunk - (1 << 20), chunk + (2 << 20), 0);
	export("A whole 3 chunks", va, 3 * chunk, 0);
	export("A one-chunk pcie", va, chunk, CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE);
	export("A cross-1 pcie", va + chunk - (1 << 20), 2 << 20, CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE);
	cuMemGetAddressRange(&base, &rsz, va + chunk + 4096);
	P("A getaddressrange(middle+4k)", "base=+%llu size=%zu",
	  (unsigned long long)(base - va), rsz);
	syncmemops("vmm", va + chunk);
	/* Unmap the middle: the export of a crossing span must now fail. */
	cuMemUnmap(va + chunk, chunk);
	export("A cross-1 after middle unmapped", va + chunk - (1 << 20), 2 << 20, 0);
	export("A first chunk after middle unmapped", va, chunk, 0);
	/* Remap the middle with a new physical allocation. */
	cuMemRelease(h[1]);
	h[1] = mk(chunk, dev);
	cuMemMap(va + chunk, chunk, 0, h[1], 0);
	access_rw(va + chunk, chunk, dev);
	export("A cross-2 after remap", va + chunk - (1 << 20), chunk + (2 << 20), 0);

	/* B: one physical allocation of 2 chunks, mapped as two pieces. */
	hbig = mk(2 * chunk, dev);
	if (cuMemAddressReserve(&va2, 2 * chunk, 0, 0, 0))
		return 1;
	cuMemMap(va2, chunk, 0, hbig, 0);
	cuMemMap(va2 + chunk, chunk, chunk, hbig, 0);
	access_rw(va2, 2 * chunk, dev);
	export("B cross-1 (same alloc, two maps)", va2 + chunk - (1 << 20), 2 << 20, 0);
	export("B whole", va2, 2 * chunk, 0);
	cuMemGetAddressRange(&base, &rsz, va2 + chunk);
	P("B getaddressrange(second map)", "base=+%llu size=%zu",
	  (unsigned long long)(base - va2), rsz);

	/* C: device and pool memory. */
	cuMemAlloc(&d, 1 << 20);
	export("device 1MiB", d, 1 << 20, 0);
	export("device 1MiB pcie", d, 1 << 20, CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE);
	syncmemops("device", d);
	cuStreamCreate(&st, 0);
	cuMemAllocAsync(&pool, 1 << 20, st);
	cuStreamSynchronize(st);
	syncmemops("pool", pool);

	/* Per context. */
	cuCtxGetFlags(&fl);
	P("ctx flags before", "%#x", fl);
	{
		CUdeviceptr d2;
		CUdeviceptr pool2;

		cuMemAlloc(&d2, 1 << 20);
		readback("device(before ctx flag, not set per pointer)", d2);
		t = now_us();
		P("cuCtxSetFlags(SYNC_MEMOPS)", "rc=%d", cuCtxSetFlags(CU_CTX_SYNC_MEMOPS));
		t = now_us() - t;
		P("cuCtxSetFlags us", "%.2f", t);
		cuCtxGetFlags(&fl);
		P("ctx flags after", "%#x", fl);
		readback("device(after ctx flag)", d2);
		cuMemAllocAsync(&pool2, 1 << 20, st);
		cuStreamSynchronize(st);
		readback("pool(after ctx flag)", pool2);
		readback("vmm(after ctx flag)", va2);
		t = now_us();
		for (int i = 0; i < 1000; i++)
			cuCtxSetFlags(CU_CTX_SYNC_MEMOPS);
		P("cuCtxSetFlags repeat us", "%.3f", (now_us() - t) / 1000);
		t = now_us();
		for (int i = 0; i < 1000; i++)
			cuCtxGetFlags(&fl);
		P("cuCtxGetFlags us", "%.3f", (now_us() - t) / 1000);
	}
	printf("done\n");
	return 0;
}
