// SPDX-License-Identifier: MIT
/*
 * Every pointer attribute of every kind of memory, as the program sees
 * it: one line per (memory, pointer, call).  Run it natively and under
 * LD_PRELOAD=libgdrhook.so and diff the two outputs: gdrhook answers
 * these queries from its registry and must answer byte for byte what the
 * driver does (tests/gpu/ptrattr-check does exactly that).
 *
 * Values are printed symbolically where the raw value differs from run
 * to run: P (the pointer asked about), B (the allocation's base), C (the
 * current context), X (the pool asked from), D (the device's default
 * pool), A (a mapping base address: the driver's own layout), ID (a non-zero buffer ID:
 * gdrhook's differ from the driver's on purpose).  Every output buffer is
 * poisoned with 0xcc first, so the width the callee wrote shows up.
 *
 * Builds against the real driver and runtime or the test doubles.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda.h>
#include <cuda_runtime_api.h>

/* Optional entry points (the test doubles lack some): found at run time. */
static cudaError_t (*rt_attrs)(struct cudaPointerAttributes *, const void *);
static cudaError_t (*rt_last)(void);
static CUresult (*load_data)(CUmodule *, const void *);
static CUresult (*get_global)(CUdeviceptr *, size_t *, CUmodule, const char *);

static CUcontext ctx;
static CUmemoryPool the_pool, def_pool;

struct row {
	const char *name;
	CUdeviceptr ptr;
	CUdeviceptr base;
};

static void sym(char *out, size_t n, CUpointer_attribute a,
		const unsigned char *b, size_t w, const struct row *r)
{
	uint64_t v = 0;
	size_t i, k = 0;

	memcpy(&v, b, 8);
	if (a == CU_POINTER_ATTRIBUTE_BUFFER_ID && v && v != 0xccccccccccccccccull) {
		snprintf(out, n, "ID");
		return;
	}
	if (v && v != 0xccccccccccccccccull) {
		const char *s = v == r->ptr ? "P" : v == r->base ? "B" :
				v == (uint64_t)(uintptr_t)ctx ? "C" :
				v == (uint64_t)(uintptr_t)the_pool ? "X" :
				v == (uint64_t)(uintptr_t)def_pool ? "D" :
				a == CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR ?
				"A" : NULL;

		if (s) {
			snprintf(out, n, "%s", s);
			return;
		}
	}
	for (i = 0; i < w && k + 3 < n; i++)
		k += snprintf(out + k, n - k, "%02x", b[i]);
}

static const CUpointer_attribute attrs[] = {
	CU_POINTER_ATTRIBUTE_CONTEXT, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
	CU_POINTER_ATTRIBUTE_DEVICE_POINTER, CU_POINTER_ATTRIBUTE_HOST_POINTER,
	CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, CU_POINTER_ATTRIBUTE_BUFFER_ID,
	CU_POINTER_ATTRIBUTE_IS_MANAGED, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
	CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE,
	CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_POINTER_ATTRIBUTE_RANGE_SIZE,
	CU_POINTER_ATTRIBUTE_MAPPED, CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES,
	CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE,
	CU_POINTER_ATTRIBUTE_ACCESS_FLAGS, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE,
	CU_POINTER_ATTRIBUTE_MAPPING_SIZE,
	CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR,
};
#define NATTR (sizeof(attrs) / sizeof(attrs[0]))

/* The classification set communication libraries ask in one call. */
static const CUpointer_attribute multi[] = {
	CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_BUFFER_ID,
	CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, CU_POINTER_ATTRIBUTE_CONTEXT,
	CU_POINTER_ATTRIBUTE_IS_MANAGED, CU_POINTER_ATTRIBUTE_DEVICE_POINTER,
	CU_POINTER_ATTRIBUTE_HOST_POINTER, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
	CU_POINTER_ATTRIBUTE_RANGE_SIZE, CU_POINTER_ATTRIBUTE_MAPPED,
	CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE,
	CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE,
};
#define NMULTI (sizeof(multi) / sizeof(multi[0]))

static void show(const struct row *r)
{
	unsigned char buf[NMULTI][16];
	void *data[NMULTI];
	char s[64];
	size_t i;
	CUresult rc;

	for (i = 0; i < NATTR; i++) {
		memset(buf[0], 0xcc, 16);
		rc = cuPointerGetAttribute(buf[0], attrs[i], r->ptr);
		sym(s, sizeof(s), attrs[i], buf[0], 16, r);
		printf("%-14s get %2d: rc=%d %s\n", r->name, (int)attrs[i],
		       (int)rc, s);
	}
	for (i = 0; i < NMULTI; i++) {
		memset(buf[i], 0xcc, 16);
		data[i] = buf[i];
	}
	rc = cuPointerGetAttributes(NMULTI, (CUpointer_attribute *)multi, data,
				    r->ptr);
	printf("%-14s getattrs: rc=%d", r->name, (int)rc);
	for (i = 0; i < NMULTI; i++) {
		sym(s, sizeof(s), multi[i], buf[i], 16, r);
		printf(" %d=%s", (int)multi[i], s);
	}
	printf("\n");
	{
		CUdeviceptr b = 0xcc;
		size_t sz = 0xcc;

		rc = cuMemGetAddressRange(&b, &sz, r->ptr);
		printf("%-14s range: rc=%d base=%s size=%zu\n", r->name, (int)rc,
		       b == r->base ? "B" : b == 0xcc ? "untouched" : "other",
		       sz);
	}
	if (rt_attrs) {
		struct cudaPointerAttributes pa;
		cudaError_t e;

		memset(&pa, 0xcc, sizeof(pa));
		e = rt_attrs(&pa, (void *)(uintptr_t)r->ptr);
		/* The runtime's last error is part of the answer. */
		printf("%-14s cudaPointerGetAttributes: rc=%d type=%d dev=%d dp=%s hp=%s last=%d\n",
		       r->name, (int)e, (int)pa.type, pa.device,
		       (uintptr_t)pa.devicePointer == r->ptr ? "P" :
		       pa.devicePointer ? "other" : "0",
		       (uintptr_t)pa.hostPointer == r->ptr ? "P" :
		       pa.hostPointer ? "other" : "0",
		       rt_last ? (int)rt_last() : -1);
		e = rt_attrs(NULL, (void *)(uintptr_t)r->ptr);
		printf("%-14s cudaPointerGetAttributes(NULL): rc=%d last=%d\n",
		       r->name, (int)e, rt_last ? (int)rt_last() : -1);
	}
}

static void both(const char *name, CUdeviceptr base, size_t size)
{
	char n[64];
	struct row r = { name, base, base };

	show(&r);
	snprintf(n, sizeof(n), "%s+8", name);
	r.name = n;
	r.ptr = base + 8;
	show(&r);
	snprintf(n, sizeof(n), "%s+end", name);
	r.ptr = base + size;
	show(&r);
}

/*
 * Graph memory: an alloc node's address, once launched (backed until the
 * free node's graph runs), and after that free.  Rows are skipped, not
 * the table, where graphs of memory nodes are not available.
 */
static void graph_rows(void)
{
	CUDA_MEM_ALLOC_NODE_PARAMS np;
	CUgraphExec ea = NULL, ef = NULL;
	CUgraph ga = NULL, gf = NULL;
	CUgraphNode n;
	struct row r;

	memset(&np, 0, sizeof(np));
	np.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
	np.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	np.poolProps.location.id = 0;
	np.bytesize = 1 << 20;
	if (cuGraphCreate(&ga, 0) ||
	    cuGraphAddMemAllocNode(&n, ga, NULL, 0, &np) ||
	    cuGraphCreate(&gf, 0) ||
	    cuGraphAddMemFreeNode(&n, gf, NULL, 0, np.dptr) ||
	    cuGraphInstantiateWithFlags(&ea, ga, 0) ||
	    cuGraphInstantiateWithFlags(&ef, gf, 0) ||
	    cuGraphLaunch(ea, 0) || cuStreamSynchronize(0)) {
		printf("graph: no graph memory nodes (skipped)\n");
		return;
	}
	both("graph", np.dptr, np.bytesize);
	if (!cuGraphLaunch(ef, 0) && !cuStreamSynchronize(0)) {
		r = (struct row){ "graph-freed", np.dptr, np.dptr };
		show(&r);
	}
	cuGraphExecDestroy(ea);
	cuGraphExecDestroy(ef);
	cuGraphDestroy(ga);
	cuGraphDestroy(gf);
}

/*
 * Rows asked again with no context current (on a new thread) and with
 * another context of the same device current: some answers depend on
 * the calling thread's context, and a query answered without the driver
 * must not change which context is current.
 */
#define MAXKEEP 16
static struct row keep[MAXKEEP];
static int nkeep;

static void keep_row(const char *name, CUdeviceptr ptr, CUdeviceptr base)
{
	if (nkeep < MAXKEEP)
		keep[nkeep++] = (struct row){ name, ptr, base };
}

static void show_kept(const char *suffix)
{
	char n[MAXKEEP][48];
	CUcontext cur = NULL;

	for (int i = 0; i < nkeep; i++) {
		struct row r = keep[i];

		snprintf(n[i], sizeof(n[i]), "%s%s", r.name, suffix);
		r.name = n[i];
		show(&r);
	}
	cuCtxGetCurrent(&cur);
	printf("%-14s context after: %s\n", suffix,
	       cur == ctx ? "C" : cur ? "other" : "none");
}

static void *no_ctx_thread(void *arg)
{
	(void)arg;
	cuCtxSetCurrent(NULL);
	show_kept("-noctx");
	return NULL;
}

static void context_rows(void)
{
	CUcontext c2 = NULL;
	pthread_t t;

	if (pthread_create(&t, NULL, no_ctx_thread, NULL) == 0)
		pthread_join(t, NULL);
	if (cuCtxCreate(&c2, NULL, 0, 0)) {
		printf("ctx2: no second context (skipped)\n");
		return;
	}
	show_kept("-ctx2");
	cuCtxDestroy(c2);
	cuCtxSetCurrent(ctx);
}

#define CK(x) do { CUresult rc_ = (x); if (rc_) { \
	printf("%s: rc=%d (skipped)\n", #x, (int)rc_); goto out; } } while (0)

static const char ptx[] =
	".version 7.0\n.target sm_50\n.address_size 64\n"
	".visible .global .align 8 .u64 gh_global[64];\n";

int main(void)
{
	CUdeviceptr d = 0, big = 0, pitch = 0, man = 0, pool1 = 0, pool2 = 0;
	CUdeviceptr va = 0, gptr = 0, freed = 0;
	CUmemGenericAllocationHandle h = 0;
	size_t ppitch = 0, gsize = 0;
	void *host = NULL, *reg = NULL;
	CUmodule mod = NULL;
	int stackv = 0;
	struct row r;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (cuInit(0) || cuDevicePrimaryCtxRetain(&ctx, 0) ||
	    cuCtxSetCurrent(ctx)) {
		printf("no CUDA device\n");
		return 77;
	}
	cuDeviceGetDefaultMemPool(&def_pool, 0);
	rt_attrs = (void *)dlsym(RTLD_DEFAULT, "cudaPointerGetAttributes");
	rt_last = (void *)dlsym(RTLD_DEFAULT, "cudaGetLastError");
	load_data = (void *)dlsym(RTLD_DEFAULT, "cuModuleLoadData");
	get_global = (void *)dlsym(RTLD_DEFAULT, "cuModuleGetGlobal_v2");
	CK(cuMemAlloc(&d, 100));
	both("device", d, 100);
	keep_row("device", d, d);
	CK(cuMemAlloc(&big, 3 << 20));
	both("device-3M", big, 3 << 20);
	CK(cuMemAllocPitch(&pitch, &ppitch, 100, 10, 4));
	both("pitch", pitch, ppitch * 10);
	CK(cuMemAllocManaged(&man, 4096, CU_MEM_ATTACH_GLOBAL));
	both("managed", man, 4096);
	keep_row("managed", man, man);
	CK(cuMemAllocHost(&host, 100));
	both("host-alloc", (CUdeviceptr)(uintptr_t)host, 100);
	keep_row("host-alloc", (CUdeviceptr)(uintptr_t)host, (CUdeviceptr)(uintptr_t)host);
	reg = aligned_alloc(65536, 65536);
	CK(cuMemHostRegister(reg, 65536, 0));
	both("host-reg", (CUdeviceptr)(uintptr_t)reg, 65536);
	keep_row("host-reg", (CUdeviceptr)(uintptr_t)reg, (CUdeviceptr)(uintptr_t)reg);
	CK(cuMemAllocAsync(&pool1, 1000, 0));
	CK(cuStreamSynchronize(0));
	both("pool", pool1, 1000);
	keep_row("pool", pool1, pool1);
	{
		CUmemPoolProps pp;

		memset(&pp, 0, sizeof(pp));
		pp.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
		pp.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
		pp.location.id = 0;
		CK(cuMemPoolCreate(&the_pool, &pp));
		CK(cuMemAllocFromPoolAsync(&pool2, 5000, the_pool, 0));
		CK(cuStreamSynchronize(0));
		both("pool-own", pool2, 5000);
	}
	{
		CUmemAllocationProp p;
		CUmemAccessDesc ad;
		size_t gran = 0;

		memset(&p, 0, sizeof(p));
		p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
		p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
		p.location.id = 0;
		CK(cuMemGetAllocationGranularity(&gran, &p,
					CU_MEM_ALLOC_GRANULARITY_MINIMUM));
		CK(cuMemCreate(&h, gran, &p, 0));
		CK(cuMemAddressReserve(&va, 2 * gran, 0, 0, 0));
		CK(cuMemMap(va, gran, 0, h, 0));
		memset(&ad, 0, sizeof(ad));
		ad.location = p.location;
		ad.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
		CK(cuMemSetAccess(va, gran, &ad, 1));
		both("vmm", va, gran);
		keep_row("vmm", va, va);
	}
	if (load_data && get_global && !load_data(&mod, ptx) &&
	    !get_global(&gptr, &gsize, mod, "gh_global")) {
		both("global", gptr, gsize);
		keep_row("global", gptr, gptr);
	} else {
		printf("global: no module loader (skipped)\n");
	}
	graph_rows();
	CK(cuMemAlloc(&freed, 4096));
	CK(cuMemFree(freed));
	r = (struct row){ "freed", freed, freed };
	show(&r);
	keep_row("freed", freed, freed);
	host = malloc(100);
	r = (struct row){ "malloc", (CUdeviceptr)(uintptr_t)host, 0 };
	show(&r);
	keep_row("malloc", (CUdeviceptr)(uintptr_t)host, 0);
	context_rows();
	free(host);
	r = (struct row){ "stack", (CUdeviceptr)(uintptr_t)&stackv, 0 };
	show(&r);
	r = (struct row){ "null", 0, 0 };
	show(&r);
out:
	fflush(stdout);
	return 0;
}
