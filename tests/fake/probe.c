/* SPDX-License-Identifier: MIT */
/*
 * Conformance probe: prints one "key: value" line per driver behaviour that
 * the fake libcuda imitates.  Build it against the real driver on a GPU
 * machine and against build/fake on a CPU machine, and diff the outputs:
 *
 *   cc -I$CUDA_HOME/include -o probe tests/fake/probe.c -lcuda -ldl -lpthread
 *
 * Addresses are printed as deltas, never absolute.  FAKECUDA_IPC_SAME_PROCESS
 * is left unset so both drivers refuse the same-process IPC open.
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define P(key, fmt, ...) printf("%s: " fmt "\n", key, __VA_ARGS__)

static const char *sname(void *p)
{
	Dl_info di;

	if (!p)
		return "(null)";
	if (!dladdr(p, &di) || !di.dli_sname)
		return "(no symbol)";
	return di.dli_sname;
}

static void gpa(const char *sym, int ver, cuuint64_t flags)
{
	void *pfn = (void *)1;
	CUdriverProcAddressQueryResult st = 99;
	CUresult rc = cuGetProcAddress_v2(sym, &pfn, ver, flags, &st);
	char key[128];

	snprintf(key, sizeof(key), "gpa %s %d %llu", sym, ver,
		 (unsigned long long)flags);
	printf("%s: rc=%d status=%d pfn=%s\n", key, rc, st, sname(pfn));
}

static void *thr_attr(void *arg)
{
	CUdeviceptr p = (CUdeviceptr)(uintptr_t)arg;
	unsigned long long id = 0;
	CUcontext c = (CUcontext)1;
	CUresult rc = cuPointerGetAttribute(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID, p);

	P("thread-noctx bufid rc", "%d", rc);
	cuCtxGetCurrent(&c);
	P("thread-noctx current", "%s", c ? "set" : "null");
	return NULL;
}

static void unhex(CUipcMemHandle *h, const char *s)
{
	for (size_t i = 0; i < sizeof(*h); i++) {
		unsigned int v;
		sscanf(s + 2 * i, "%2x", &v);
		h->reserved[i] = (char)v;
	}
}

static int ipc_child(const char *s1, const char *s2)
{
	CUipcMemHandle ih, ih2;
	CUdeviceptr o = 0, o2 = 0, base;
	CUcontext cc;
	CUdevice d0;
	CUresult rc;
	size_t s;

	unhex(&ih, s1);
	unhex(&ih2, s2);
	cuInit(0);
	cuDeviceGet(&d0, 0);
	cuDevicePrimaryCtxRetain(&cc, d0);
	cuCtxSetCurrent(cc);
	rc = cuIpcOpenMemHandle(&o, ih, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
	unsigned char v = 0;
	cuMemcpyDtoH(&v, o + 10, 1);
	P("child ipc open", "rc=%d val=%x", rc, v);
	rc = cuMemGetAddressRange(&base, &s, o + 8);
	P("child ipc range", "rc=%d off=%lld size=%zu", rc, (long long)(o - base), s);
	unsigned long long id = 0;
	rc = cuPointerGetAttribute(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID, o);
	P("child ipc bufid", "rc=%d", rc);
	CUcontext pc = NULL;
	rc = cuPointerGetAttribute(&pc, CU_POINTER_ATTRIBUTE_CONTEXT, o);
	P("child ipc ctx", "rc=%d primary=%d", rc, pc == cc);
	rc = cuMemFree(o);
	P("child ipc cuMemFree", "%d", rc);
	rc = cuIpcOpenMemHandle(&o2, ih, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
	P("child ipc open twice", "rc=%d same=%d", rc, o2 == o);
	rc = cuIpcCloseMemHandle(o + 8);
	P("child ipc close interior", "%d", rc);
	rc = cuIpcCloseMemHandle(o);
	P("child ipc close", "%d", rc);
	rc = cuPointerGetAttribute(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID, o);
	P("child ipc after 1 close attr", "rc=%d", rc);
	if (o2 == o)
		rc = cuIpcCloseMemHandle(o);
	rc = cuIpcCloseMemHandle(o);
	P("child ipc close again", "%d", rc);
	rc = cuIpcOpenMemHandle(&o, ih2, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
	P("child ipc small open", "%d", rc);
	rc = cuMemGetAddressRange(&base, &s, o);
	P("child ipc small", "rc=%d size=%zu off=%lld", rc, s, (long long)(o - base));
	return 0;
}

static const char *self;

/* Events, peer access and access queries (what Open MPI's CUDA support asks). */
static void probe_events_access(void)
{
	CUmemLocation loc = { CU_MEM_LOCATION_TYPE_DEVICE, 0 };
	CUevent e = NULL, e2 = NULL, nt = NULL, ip = NULL, o = NULL;
	CUmemAccess_flags pf = (CUmemAccess_flags)9;
	unsigned long long f = 9;
	CUipcEventHandle eh;
	CUmemoryPool pool;
	CUcontext pc;
	CUdevice d0;
	CUdeviceptr p = 0;
	CUresult rc;
	float ms = -1;
	int can = 7;

	cuDeviceGet(&d0, 0);
	cuDevicePrimaryCtxRetain(&pc, d0);
	cuCtxSetCurrent(pc);
	rc = cuEventCreate(&e, CU_EVENT_INTERPROCESS);
	P("event interprocess alone", "%d", rc);
	rc = cuEventCreate(&e, 0x8);
	P("event bad flag", "%d", rc);
	cuEventCreate(&e, CU_EVENT_DEFAULT);
	cuEventCreate(&e2, CU_EVENT_DEFAULT);
	cuEventCreate(&nt, CU_EVENT_DISABLE_TIMING);
	rc = cuEventQuery(e);
	P("event query unrecorded", "%d", rc);
	rc = cuEventElapsedTime(&ms, e, e2);
	P("event elapsed unrecorded", "%d", rc);
	cuEventRecord(e, NULL);
	cuEventRecord(e2, NULL);
	cuEventRecord(nt, NULL);
	cuEventSynchronize(e2);
	rc = cuEventElapsedTime(&ms, e, nt);
	P("event elapsed no timing", "%d", rc);
	rc = cuIpcGetEventHandle(&eh, nt);
	P("event ipc get not interprocess", "%d", rc);
	cuEventCreate(&ip, CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING);
	rc = cuIpcGetEventHandle(&eh, ip);
	P("event ipc get", "%d", rc);
	rc = cuIpcOpenEventHandle(&o, eh);
	P("event ipc open same process", "%d", rc);
	/* Not a second destroy: the real driver crashes on it. */
	cuEventDestroy(e);
	cuEventDestroy(e2);
	cuEventDestroy(nt);
	cuEventDestroy(ip);
	rc = cuDeviceCanAccessPeer(&can, d0, d0);
	P("peer self", "rc=%d can=%d", rc, can);
	rc = cuDeviceCanAccessPeer(&can, d0, 99);
	P("peer bad ordinal", "%d", rc);
	cuMemAlloc(&p, 1 << 20);
	rc = cuMemGetAccess(&f, &loc, p);
	P("getaccess memalloc", "rc=%d flags=%llu", rc, f);
	cuMemFree(p);
	cuDeviceGetDefaultMemPool(&pool, d0);
	rc = cuMemPoolGetAccess(&pf, pool, &loc);
	P("pool access own device", "rc=%d flags=%d", rc, (int)pf);
	loc.id = 99;
	rc = cuMemPoolGetAccess(&pf, pool, &loc);
	P("pool access bad ordinal", "%d", rc);
}

int main(int argc, char **argv)
{
	CUdeviceptr a = 0, b = 0, c = 0, d = 0;
	unsigned long long id1 = 0, id2 = 0;
	CUcontext cur = (CUcontext)1, pctx;
	CUdevice dev;
	CUresult rc;
	int n = -1, ver = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	self = argv[0];
	if (argc == 4 && !strcmp(argv[1], "ipc-child"))
		return ipc_child(argv[2], argv[3]);
	rc = cuMemAlloc(&a, 1 << 20);
	P("alloc before init", "%d", rc);
	rc = cuDeviceGetCount(&n);
	P("count before init", "%d", rc);
	rc = cuDriverGetVersion(&ver);
	P("version before init", "rc=%d v=%d", rc, ver);
	P("init", "%d", cuInit(0));
	rc = cuMemAlloc(&a, 1 << 20);
	P("alloc no ctx", "%d", rc);
	rc = cuCtxGetCurrent(&cur);
	P("getcurrent none", "rc=%d %s", rc, cur ? "set" : "null");
	cuDeviceGet(&dev, 0);
	rc = cuDevicePrimaryCtxRelease(dev);
	P("primary release unretained", "%d", rc);
	{
		unsigned int fl = 7; int active = 7;
		rc = cuDevicePrimaryCtxGetState(dev, &fl, &active);
		P("primary state", "rc=%d flags=%u active=%d", rc, fl, active);
	}
	cuDevicePrimaryCtxRetain(&pctx, dev);
	{
		unsigned int fl = 7; int active = 7;
		rc = cuDevicePrimaryCtxGetState(dev, &fl, &active);
		P("primary state retained", "rc=%d flags=%u active=%d", rc, fl, active);
	}
	rc = cuCtxGetCurrent(&cur);
	P("getcurrent after retain", "rc=%d %s", rc, cur ? "set" : "null");
	cuCtxSetCurrent(pctx);
	rc = cuMemAlloc(&a, 0);
	P("alloc 0", "rc=%d", rc);

	/* reuse */
	cuMemAlloc(&a, 1 << 20);
	cuPointerGetAttribute(&id1, CU_POINTER_ATTRIBUTE_BUFFER_ID, a);
	cuMemFree(a);
	cuMemAlloc(&b, 1 << 20);
	cuPointerGetAttribute(&id2, CU_POINTER_ATTRIBUTE_BUFFER_ID, b);
	P("reuse same addr", "%d", a == b);
	P("reuse bufid differs", "%d", id1 != id2);
	P("bufid step", "%lld", (long long)(id2 - id1));
	P("align 1MiB", "%llu", (unsigned long long)(b % (2 << 20)));
	rc = cuMemFree(b + 16);
	P("free interior", "%d", rc);
	cuMemFree(b);
	rc = cuMemFree(b);
	P("double free", "%d", rc);
	rc = cuMemFree(0);
	P("free 0", "%d", rc);
	{
		unsigned long long x = 5;
		rc = cuPointerGetAttribute(&x, CU_POINTER_ATTRIBUTE_BUFFER_ID, b);
		P("attr freed ptr", "rc=%d", rc);
	}

	/* small allocations */
	cuMemAlloc(&a, 100);
	cuMemAlloc(&b, 100);
	cuMemAlloc(&c, 1000);
	cuMemAlloc(&d, 3 << 20);
	P("small delta ab", "%lld", (long long)(b - a));
	P("small delta bc", "%lld", (long long)(c - b));
	P("small mod 512", "%llu", (unsigned long long)(a % 512));
	P("big mod 2M", "%llu", (unsigned long long)(d % (2 << 20)));
	{
		CUdeviceptr base = 0; size_t s = 0;
		rc = cuMemGetAddressRange(&base, &s, a + 50);
		P("range small", "rc=%d off=%lld size=%zu", rc, (long long)(a - base), s);
		rc = cuMemGetAddressRange(&base, &s, a + 200);
		P("range small past end", "rc=%d", rc);
		rc = cuMemGetAddressRange(&base, &s, d + 5);
		P("range big", "rc=%d off=%lld size=%zu", rc, (long long)(d - base), s);
		size_t rs = 0; CUdeviceptr rst = 0; int mt = 0, ord = -1, mp = -1;
		cuPointerGetAttribute(&rst, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, a + 50);
		cuPointerGetAttribute(&rs, CU_POINTER_ATTRIBUTE_RANGE_SIZE, a + 50);
		cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, a + 50);
		cuPointerGetAttribute(&ord, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, a + 50);
		cuPointerGetAttribute(&mp, CU_POINTER_ATTRIBUTE_MAPPED, a + 50);
		P("attr small", "start_off=%lld size=%zu mt=%d ord=%d mapped=%d",
		  (long long)(a - rst), rs, mt, ord, mp);
		void *hp = (void *)1; CUdeviceptr dp = 0; CUcontext ac = NULL;
		rc = cuPointerGetAttribute(&hp, CU_POINTER_ATTRIBUTE_HOST_POINTER, a);
		P("attr dev hostptr", "rc=%d %s", rc, hp ? "nonnull" : "null");
		rc = cuPointerGetAttribute(&dp, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, a + 8);
		P("attr dev devptr", "rc=%d same=%d", rc, dp == a + 8);
		rc = cuPointerGetAttribute(&ac, CU_POINTER_ATTRIBUTE_CONTEXT, a);
		P("attr dev ctx", "rc=%d primary=%d", rc, ac == pctx);
		void *mph = (void *)1;
		rc = cuPointerGetAttribute(&mph, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, a);
		P("attr dev mempool", "rc=%d %s", rc, mph ? "set" : "null");
		int im = 7;
		rc = cuPointerGetAttribute(&im, CU_POINTER_ATTRIBUTE_IS_MANAGED, a);
		P("attr dev managed", "rc=%d %d", rc, im);
	}
	{
		pthread_t t;
		pthread_create(&t, NULL, thr_attr, (void *)(uintptr_t)a);
		pthread_join(t, NULL);
	}
	{
		CUdeviceptr p; size_t pitch = 0;
		rc = cuMemAllocPitch(&p, &pitch, 100, 10, 4);
		P("pitch", "rc=%d pitch=%zu", rc, pitch);
		cuMemFree(p);
	}

	/* unknown pointers */
	{
		int stackv = 0;
		unsigned long long x = 77;
		int mt = 77;
		CUcontext xc = (CUcontext)1;
		void *hp = (void *)1;
		rc = cuPointerGetAttribute(&x, CU_POINTER_ATTRIBUTE_BUFFER_ID, (CUdeviceptr)&stackv);
		P("unknown bufid", "rc=%d x=%llu", rc, x);
		rc = cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)&stackv);
		P("unknown memtype", "rc=%d", rc);
		rc = cuPointerGetAttribute(&xc, CU_POINTER_ATTRIBUTE_CONTEXT, (CUdeviceptr)&stackv);
		P("unknown ctx", "rc=%d", rc);
		rc = cuPointerGetAttribute(&hp, CU_POINTER_ATTRIBUTE_HOST_POINTER, (CUdeviceptr)&stackv);
		P("unknown hostptr", "rc=%d", rc);
		int mp = 7;
		rc = cuPointerGetAttribute(&mp, CU_POINTER_ATTRIBUTE_MAPPED, (CUdeviceptr)&stackv);
		P("unknown mapped", "rc=%d %d", rc, mp);
		rc = cuPointerGetAttribute(&x, CU_POINTER_ATTRIBUTE_BUFFER_ID, 0);
		P("null bufid", "rc=%d", rc);
		CUpointer_attribute at[5] = { CU_POINTER_ATTRIBUTE_BUFFER_ID,
			CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_CONTEXT,
			CU_POINTER_ATTRIBUTE_IS_MANAGED, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL };
		unsigned long long v0 = 9; unsigned int v1 = 9; CUcontext v2 = (CUcontext)9;
		int v3 = 9, v4 = 9;
		void *vals[5] = { &v0, &v1, &v2, &v3, &v4 };
		rc = cuPointerGetAttributes(5, at, vals, (CUdeviceptr)&stackv);
		P("getattrs unknown", "rc=%d id=%llu mt=%u ctx=%p man=%d ord=%d", rc, v0, v1, (void *)v2, v3, v4);
		rc = cuPointerGetAttributes(5, at, vals, a);
		P("getattrs dev", "rc=%d idok=%d mt=%u ctxok=%d man=%d ord=%d", rc, v0 != 0, v1, v2 == pctx, v3, v4);
		CUdeviceptr base; size_t s;
		rc = cuMemGetAddressRange(&base, &s, (CUdeviceptr)&stackv);
		P("range unknown", "%d", rc);
	}

	/* host memory */
	{
		void *h = aligned_alloc(4096, 1 << 16);
		rc = cuMemHostRegister(h, 1 << 16, 0);
		P("hostreg", "%d", rc);
		rc = cuMemHostRegister(h, 1 << 16, 0);
		P("hostreg twice", "%d", rc);
		rc = cuMemHostRegister((char *)h + 4096, 4096, 0);
		P("hostreg overlap", "%d", rc);
		int mt = 0; unsigned long long id = 0; CUdeviceptr dp = 0; void *hp = 0;
		CUcontext hc = 0; size_t rs = 0; CUdeviceptr rst = 0;
		rc = cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)h + 8);
		P("hostreg memtype", "rc=%d %d", rc, mt);
		rc = cuPointerGetAttribute(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID, (CUdeviceptr)h + 8);
		P("hostreg bufid", "rc=%d %s", rc, id ? "nonzero" : "zero");
		rc = cuPointerGetAttribute(&dp, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, (CUdeviceptr)h + 8);
		P("hostreg devptr", "rc=%d same=%d", rc, dp == (CUdeviceptr)h + 8);
		rc = cuPointerGetAttribute(&hp, CU_POINTER_ATTRIBUTE_HOST_POINTER, (CUdeviceptr)h + 8);
		P("hostreg hostptr", "rc=%d same=%d", rc, hp == (char *)h + 8);
		rc = cuPointerGetAttribute(&hc, CU_POINTER_ATTRIBUTE_CONTEXT, (CUdeviceptr)h + 8);
		P("hostreg ctx", "rc=%d primary=%d", rc, hc == pctx);
		rc = cuPointerGetAttribute(&rst, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, (CUdeviceptr)h + 8);
		cuPointerGetAttribute(&rs, CU_POINTER_ATTRIBUTE_RANGE_SIZE, (CUdeviceptr)h + 8);
		P("hostreg range", "rc=%d off=%lld size=%zu", rc, (long long)((CUdeviceptr)h - rst), rs);
		CUdeviceptr base; size_t s;
		rc = cuMemGetAddressRange(&base, &s, (CUdeviceptr)h + 8);
		P("hostreg addrrange", "rc=%d", rc);
		int ord = -5;
		rc = cuPointerGetAttribute(&ord, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, (CUdeviceptr)h + 8);
		P("hostreg ordinal", "rc=%d %d", rc, ord);
		rc = cuMemHostUnregister((char *)h + 8);
		P("hostunreg interior", "%d", rc);
		rc = cuMemHostUnregister(h);
		P("hostunreg", "%d", rc);
		rc = cuMemHostUnregister(h);
		P("hostunreg twice", "%d", rc);
		free(h);

		void *ph = NULL;
		rc = cuMemAllocHost(&ph, 100);
		P("allochost", "rc=%d mod4096=%lu", rc, (unsigned long)((uintptr_t)ph % 4096));
		rc = cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)ph);
		P("allochost memtype", "rc=%d %d", rc, mt);
		rc = cuPointerGetAttribute(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID, (CUdeviceptr)ph);
		P("allochost bufid", "rc=%d %s", rc, id ? "nonzero" : "zero");
		rc = cuMemGetAddressRange(&base, &s, (CUdeviceptr)ph + 8);
		P("allochost addrrange", "rc=%d off=%lld size=%zu", rc, (long long)((CUdeviceptr)ph - base), s);
		rc = cuMemHostGetDevicePointer(&dp, ph, 0);
		P("allochost devptr", "rc=%d same=%d", rc, dp == (CUdeviceptr)ph);
		rc = cuMemHostRegister(ph, 4096, 0);
		P("hostreg of allochost", "%d", rc);
		rc = cuMemFreeHost(ph);
		P("freehost", "%d", rc);
		rc = cuMemFreeHost(ph);
		P("freehost twice", "%d", rc);
		int stackv;
		rc = cuMemFreeHost(&stackv);
		P("freehost unknown", "%d", rc);
		rc = cuMemFree((CUdeviceptr)&stackv);
		P("free unknown host", "%d", rc);
		rc = cuMemHostAlloc(&ph, 100, CU_MEMHOSTALLOC_DEVICEMAP);
		P("hostalloc", "%d", rc);
		cuMemFreeHost(ph);
	}

	/* managed */
	{
		CUdeviceptr m; int mt = 0, im = 0;
		rc = cuMemAllocManaged(&m, 4096, CU_MEM_ATTACH_GLOBAL);
		cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, m);
		cuPointerGetAttribute(&im, CU_POINTER_ATTRIBUTE_IS_MANAGED, m);
		P("managed", "rc=%d mt=%d im=%d", rc, mt, im);
		CUdeviceptr base; size_t s;
		rc = cuMemGetAddressRange(&base, &s, m + 8);
		P("managed range", "rc=%d size=%zu", rc, s);
		cuMemFree(m);
	}

	/* pools */
	{
		CUmemoryPool pool = NULL, dp = NULL;
		CUstream st;
		cuStreamCreate(&st, 0);
		cuDeviceGetDefaultMemPool(&dp, dev);
		cuDeviceGetMemPool(&pool, dev);
		P("pool current is default", "%d", pool == dp);
		rc = cuMemAllocAsync(&a, 1 << 20, st);
		unsigned long long i1 = 0, i2 = 0; CUmemoryPool ph = NULL;
		cuPointerGetAttribute(&i1, CU_POINTER_ATTRIBUTE_BUFFER_ID, a);
		rc = cuPointerGetAttribute(&ph, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, a);
		P("pool attr handle", "rc=%d same=%d", rc, ph == dp);
		CUdeviceptr base; size_t s;
		rc = cuMemGetAddressRange(&base, &s, a + 8);
		P("pool range", "rc=%d off=%lld size=%zu", rc, (long long)(a - base), s);
		cuMemFreeAsync(a, st);
		rc = cuMemAllocAsync(&b, 1 << 20, st);
		cuPointerGetAttribute(&i2, CU_POINTER_ATTRIBUTE_BUFFER_ID, b);
		P("pool reuse", "same=%d bufid_differs=%d", a == b, i1 != i2);
		cuMemFreeAsync(b, st);
		cuStreamSynchronize(st);
		unsigned long long x;
		rc = cuPointerGetAttribute(&x, CU_POINTER_ATTRIBUTE_BUFFER_ID, b);
		P("pool freed attr", "rc=%d", rc);
		rc = cuMemPoolTrimTo(dp, 0);
		P("pool trim", "%d", rc);
		rc = cuMemAllocAsync(&c, 1 << 20, st);
		P("pool after trim same", "%d", c == b);
		rc = cuMemFree(c);
		P("pool cuMemFree", "%d", rc);
		CUmemPoolProps pp;
		memset(&pp, 0, sizeof(pp));
		pp.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
		pp.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
		pp.location.id = 0;
		CUmemoryPool mine;
		rc = cuMemPoolCreate(&mine, &pp);
		P("pool create", "%d", rc);
		rc = cuMemAllocFromPoolAsync(&a, 4096, mine, st);
		cuPointerGetAttribute(&ph, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, a);
		P("pool from", "rc=%d same=%d", rc, ph == mine);
		rc = cuMemPoolDestroy(mine);
		P("pool destroy live", "%d", rc);
		rc = cuPointerGetAttribute(&x, CU_POINTER_ATTRIBUTE_BUFFER_ID, a);
		P("pool destroyed attr", "rc=%d", rc);
		rc = cuMemFreeAsync(a, st);
		P("pool destroyed free", "%d", rc);
		cuStreamSynchronize(st);
		cuuint64_t thr = 7;
		rc = cuMemPoolGetAttribute(dp, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &thr);
		P("pool threshold", "rc=%d %llu", rc, (unsigned long long)thr);
		cuStreamDestroy(st);
	}

	/* VMM */
	{
		CUmemAllocationProp prop;
		memset(&prop, 0, sizeof(prop));
		prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
		prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
		prop.location.id = 0;
		prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
		size_t g = 0, gr = 0;
		cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
		cuMemGetAllocationGranularity(&gr, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
		P("vmm gran", "%zu %zu", g, gr);
		CUmemGenericAllocationHandle h;
		rc = cuMemCreate(&h, 1000, &prop, 0);
		P("vmm create unaligned", "%d", rc);
		rc = cuMemCreate(&h, g, &prop, 0);
		CUdeviceptr va;
		rc = cuMemAddressReserve(&va, 4 * g, 0, 0, 0);
		P("vmm reserve", "rc=%d mod=%llu", rc, (unsigned long long)(va % g));
		unsigned long long x = 5;
		rc = cuPointerGetAttribute(&x, CU_POINTER_ATTRIBUTE_BUFFER_ID, va);
		P("vmm reserved attr", "rc=%d", rc);
		rc = cuMemMap(va, g, 0, h, 0);
		P("vmm map", "%d", rc);
		rc = cuMemMap(va + g, g, 0, h, 0);
		P("vmm map2", "%d", rc);
		CUmemAccessDesc ad = { { CU_MEM_LOCATION_TYPE_DEVICE, 0 }, CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
		rc = cuMemSetAccess(va, 2 * g, &ad, 1);
		P("vmm access", "%d", rc);
		unsigned long long i1 = 0, i2 = 0;
		rc = cuPointerGetAttribute(&i1, CU_POINTER_ATTRIBUTE_BUFFER_ID, va);
		cuPointerGetAttribute(&i2, CU_POINTER_ATTRIBUTE_BUFFER_ID, va + g);
		P("vmm bufid", "rc=%d differ=%d", rc, i1 != i2);
		CUdeviceptr base; size_t s;
		rc = cuMemGetAddressRange(&base, &s, va + g + 8);
		P("vmm range", "rc=%d off=%lld size=%zu", rc, (long long)(base - va), s);
		size_t rs = 0; CUdeviceptr rst = 0;
		cuPointerGetAttribute(&rst, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, va + g + 8);
		cuPointerGetAttribute(&rs, CU_POINTER_ATTRIBUTE_RANGE_SIZE, va + g + 8);
		P("vmm attr range", "off=%lld size=%zu", (long long)(rst - va), rs);
		int mt = 0;
		cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, va);
		P("vmm memtype", "%d", mt);
		cuMemsetD8(va, 0x5a, 16);
		unsigned char buf[16] = { 0 };
		cuMemcpyDtoH(buf, va + g, 16);
		P("vmm alias", "%d", buf[3] == 0x5a);
		CUmemGenericAllocationHandle h2;
		rc = cuMemRetainAllocationHandle(&h2, (void *)(va + g + 8));
		P("vmm retain", "rc=%d same=%d", rc, h2 == h);
		if (!rc)
			cuMemRelease(h2);
		CUmemAllocationProp p2;
		rc = cuMemGetAllocationPropertiesFromHandle(&p2, h);
		P("vmm props", "rc=%d id=%d", rc, p2.location.id);
		rc = cuMemRelease(h);
		P("vmm release mapped", "%d", rc);
		cuMemcpyDtoH(buf, va + g, 16);
		P("vmm after release", "%d", buf[3] == 0x5a);
		int fd = -1;
		rc = cuMemGetHandleForAddressRange(&fd, va, g, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
		P("dmabuf vmm", "rc=%d fd=%d", rc, fd >= 0);
		if (fd >= 0)
			close(fd);
		rc = cuMemUnmap(va + 8, g);
		P("vmm unmap unaligned", "%d", rc);
		rc = cuMemUnmap(va, g);
		P("vmm unmap", "%d", rc);
		rc = cuPointerGetAttribute(&x, CU_POINTER_ATTRIBUTE_BUFFER_ID, va);
		P("vmm unmapped attr", "rc=%d", rc);
		rc = cuMemUnmap(va + g, g);
		rc = cuMemAddressFree(va, 4 * g);
		P("vmm addrfree", "%d", rc);
	}

	/* DMA-BUF of plain alloc */
	{
		int fd = -1;
		cuMemAlloc(&a, 2 << 20);
		rc = cuMemGetHandleForAddressRange(&fd, a, 2 << 20, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
		P("dmabuf alloc", "rc=%d fd=%d", rc, fd >= 0);
		if (fd >= 0)
			close(fd);
		rc = cuMemGetHandleForAddressRange(&fd, a + 100, 4096, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
		P("dmabuf unaligned", "rc=%d", rc);
		cuMemFree(a);
	}
	/* A small buffer the driver sub-allocates (base not page aligned):
	 * may its page- or 64 KiB-rounded range, which may cover a neighbour,
	 * be exported? */
	{
		CUdeviceptr s1 = 0, s2 = 0, lo, hi;
		int fd = -1;

		cuMemAlloc(&s1, 10000);
		cuMemAlloc(&s2, 10000);
		lo = s2 & ~(CUdeviceptr)4095;
		hi = (s2 + 10000 + 4095) & ~(CUdeviceptr)4095;
		rc = cuMemGetHandleForAddressRange(&fd, lo, hi - lo, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
		P("dmabuf suballoc page-rounded", "base%%4096=%llu rc=%d", (unsigned long long)(s2 % 4096), rc);
		if (fd >= 0)
			close(fd);
		lo = s2 & ~(CUdeviceptr)65535;
		hi = (s2 + 10000 + 65535) & ~(CUdeviceptr)65535;
		fd = -1;
		rc = cuMemGetHandleForAddressRange(&fd, lo, hi - lo, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
		P("dmabuf suballoc 64k-rounded", "rc=%d", rc);
		P("dmabuf suballoc 64k-rounded covers the neighbour", "%d",
		  s1 >= lo && s1 + 10000 <= hi);
		if (fd >= 0)
			close(fd);
		cuMemFree(s1);
		cuMemFree(s2);
	}

	/* IPC */
	{
		CUipcMemHandle ih;
		cuMemAlloc(&a, 1 << 20);
		cuMemsetD8(a, 0x42, 1 << 20);
		rc = cuIpcGetMemHandle(&ih, a + 4096);
		P("ipc get interior", "%d", rc);
		rc = cuIpcGetMemHandle(&ih, a);
		P("ipc get", "%d", rc);
		CUdeviceptr o = 0;
		rc = cuIpcOpenMemHandle(&o, ih, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
		P("ipc open same process", "%d", rc);
		CUipcMemHandle ih2;
		cuMemAlloc(&b, 100);
		rc = cuIpcGetMemHandle(&ih2, b);
		P("ipc get small", "%d", rc);
		fflush(stdout);
		pid_t pid = fork();
		if (pid == 0) {
			char h1[2 * sizeof(ih) + 1], h2[2 * sizeof(ih2) + 1];
			for (size_t i = 0; i < sizeof(ih); i++) {
				sprintf(h1 + 2 * i, "%02x", (unsigned char)ih.reserved[i]);
				sprintf(h2 + 2 * i, "%02x", (unsigned char)ih2.reserved[i]);
			}
			execl(self, self, "ipc-child", h1, h2, (char *)NULL);
			_exit(127);
		}
		waitpid(pid, NULL, 0);
		cuMemFree(a);
		cuMemFree(b);
	}

	/* gpa */
	gpa("cuMemAlloc", 2000, 0);
	gpa("cuMemAlloc", 3010, 0);
	gpa("cuMemAlloc", 3020, 0);
	gpa("cuMemAlloc", 13000, 0);
	gpa("cuMemAlloc", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
	gpa("cuMemAlloc", 13010, 0);
	gpa("cuMemAlloc", 14000, 0);
	gpa("cuMemAlloc", 1000, 0);
	gpa("cuMemAlloc_v2", 13000, 0);
	gpa("cuFooBar", 13000, 0);
	gpa("cuMemAllocAsync", 11010, 0);
	gpa("cuMemAllocAsync", 11020, 0);
	gpa("cuMemAllocAsync", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
	gpa("cuMemAllocAsync", 11020, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
	gpa("cuMemAllocAsync", 13000, CU_GET_PROC_ADDRESS_LEGACY_STREAM);
	gpa("cuMemAllocAsync", 13000, 3);
	gpa("cuMemcpyHtoD", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
	gpa("cuMemcpyHtoD", 3020, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
	gpa("cuMemcpyHtoD", 6050, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
	gpa("cuMemcpyHtoD", 2000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
	gpa("cuMemcpy", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
	gpa("cuMemsetD8", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
	gpa("cuStreamSynchronize", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
	gpa("cuMemFreeAsync", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
	gpa("cuCtxCreate", 13000, 0);
	gpa("cuCtxCreate", 12000, 0);
	gpa("cuCtxCreate", 11040, 0);
	gpa("cuCtxDestroy", 13000, 0);
	gpa("cuCtxDestroy", 3020, 0);
	gpa("cuCtxDestroy", 4000, 0);
	gpa("cuMemHostRegister", 4000, 0);
	gpa("cuMemHostRegister", 6050, 0);
	gpa("cuIpcOpenMemHandle", 11000, 0);
	gpa("cuIpcOpenMemHandle", 10000, 0);
	gpa("cuDevicePrimaryCtxRelease", 11000, 0);
	gpa("cuDevicePrimaryCtxRelease", 10000, 0);
	gpa("cuGetProcAddress", 13000, 0);
	gpa("cuGetProcAddress", 11030, 0);
	gpa("cuMemFreeHost", 13000, 0);
	gpa("cuMemGetAddressRange", 13000, 0);
	gpa("cuMemAllocHost", 13000, 0);
	gpa("cuMemHostGetDevicePointer", 13000, 0);
	gpa("cuMemAllocPitch", 13000, 0);
	gpa("cuStreamDestroy", 13000, 0);
	gpa("cuCtxPushCurrent", 13000, 0);
	gpa("cuGetErrorString", 13000, 0);
	gpa("cuGetExportTable", 13000, 0);
	gpa("cuInit", 13000, 0);
	gpa("cuInit", 2000, 0);
	gpa("cuMemMap", 13000, 0);
	gpa("cuMemGetHandleForAddressRange", 13000, 0);
	gpa("cuStreamCreate", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
	{
		void *pfn = (void *)1;
		CUresult (*legacy)(const char *, void **, int, cuuint64_t) =
			(CUresult (*)(const char *, void **, int, cuuint64_t))dlsym(RTLD_DEFAULT, "cuGetProcAddress");
		rc = legacy("cuMemAlloc", &pfn, 13000, 0);
		P("gpa-legacy cuMemAlloc", "rc=%d %s", rc, sname(pfn));
		pfn = (void *)1;
		rc = legacy("cuFooBar", &pfn, 13000, 0);
		P("gpa-legacy cuFooBar", "rc=%d %s", rc, sname(pfn));
		pfn = (void *)1;
		rc = cuGetProcAddress_v2("cuMemAlloc", &pfn, 13000, 0, NULL);
		P("gpa null status", "rc=%d %s", rc, sname(pfn));
		/* pfn or symbol NULL crashes the real driver (580): not probed */
		rc = cuGetProcAddress_v2("cuMemAlloc", &pfn, 13000, 8, NULL);
		P("gpa bad flags", "rc=%d", rc);
	}
	{
		const void *tbl = (void *)1;
		CUuuid u;
		memset(&u, 0x11, sizeof(u));
		rc = cuGetExportTable(&tbl, &u);
		P("exporttable random", "rc=%d", rc);
		const char *s = NULL;
		rc = cuGetErrorName((CUresult)9999, &s);
		P("errname bad", "rc=%d %s", rc, s ? s : "(null)");
		rc = cuGetErrorName(CUDA_ERROR_INVALID_VALUE, &s);
		P("errname", "rc=%d %s", rc, s);
		rc = cuGetErrorString(CUDA_ERROR_INVALID_VALUE, &s);
		P("errstring", "rc=%d %s", rc, s);
	}

	/* contexts */
	{
		CUdeviceptr p;
		CUcontext mine = NULL;
		rc = cuCtxCreate(&mine, NULL, 0, dev);
		P("ctxcreate", "%d", rc);
		rc = cuCtxGetCurrent(&cur);
		P("ctxcreate current", "%d", cur == mine);
		cuMemAlloc(&p, 1 << 20);
		unsigned long long x;
		rc = cuCtxPopCurrent(&cur);
		P("ctx pop", "rc=%d mine=%d", rc, cur == mine);
		rc = cuCtxGetCurrent(&cur);
		P("ctx after pop", "%s", cur == pctx ? "primary" : cur ? "other" : "null");
		rc = cuPointerGetAttribute(&x, CU_POINTER_ATTRIBUTE_BUFFER_ID, p);
		P("ctx other attr", "rc=%d", rc);
		rc = cuMemFree(p);
		P("ctx free other ctx", "%d", rc);
		cuCtxPushCurrent(mine);
		cuMemAlloc(&p, 1 << 20);
		rc = cuCtxDestroy(mine);
		P("ctxdestroy", "%d", rc);
		rc = cuCtxGetCurrent(&cur);
		P("ctx after destroy", "%s", cur == pctx ? "primary" : cur ? "other" : "null");
		rc = cuPointerGetAttribute(&x, CU_POINTER_ATTRIBUTE_BUFFER_ID, p);
		P("ctxdestroy attr", "rc=%d", rc);
		rc = cuCtxDestroy(mine);
		P("ctxdestroy twice", "%d", rc);
		cuCtxSetCurrent(pctx);
		cuMemAlloc(&p, 1 << 20);
		rc = cuDevicePrimaryCtxReset(dev);
		P("primary reset", "%d", rc);
		rc = cuPointerGetAttribute(&x, CU_POINTER_ATTRIBUTE_BUFFER_ID, p);
		P("primary reset attr", "rc=%d", rc);
		rc = cuCtxGetCurrent(&cur);
		P("after reset current", "rc=%d %s", rc, cur == pctx ? "primary" : cur ? "other" : "null");
		rc = cuMemAlloc(&p, 1 << 20);
		P("alloc after reset", "%d", rc);
		unsigned int fl; int active;
		cuDevicePrimaryCtxGetState(dev, &fl, &active);
		P("state after reset", "%d", active);
		CUcontext p2;
		cuDevicePrimaryCtxRetain(&p2, dev);
		P("retain after reset same handle", "%d", p2 == pctx);
		rc = cuDevicePrimaryCtxRelease(dev);
		P("release", "%d", rc);
		rc = cuDevicePrimaryCtxRelease(dev);
		P("release2", "%d", rc);
		rc = cuDevicePrimaryCtxRelease(dev);
		P("release3", "%d", rc);
		rc = cuCtxDestroy(pctx);
		P("destroy primary", "%d", rc);
	}
	{
		int v = 0;
		rc = cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, dev);
		P("uva", "%d %d", rc, v);
		rc = cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED, dev);
		P("gdr", "%d %d", rc, v);
		rc = cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, dev);
		P("dmabuf", "%d %d", rc, v);
		rc = cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev);
		P("vmm", "%d %d", rc, v);
		rc = cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, dev);
		P("pools", "%d %d", rc, v);
		rc = cuDeviceGet(&dev, 99);
		P("deviceget bad", "%d", rc);
	}
	probe_events_access();
	return 0;
}
