// SPDX-License-Identifier: MIT
/*
 * Pointer queries answered from the registry (src/hooks/ptrattr.c), under
 * LD_PRELOAD against the CUDA driver double:
 *  - registry mode answers tracked and untracked pointers without calling
 *    the driver, with the driver's values;
 *  - GDRHOOK_VALIDATE=1 checks every answer against the driver: no
 *    disagreement over every attribute of every kind;
 *  - GDRHOOK_POINTER_QUERIES=driver sends them all to the driver;
 *  - on a thread with no current context, DEVICE_POINTER and the address
 *    range are the driver's refusals, still without calling it;
 *  - the runtime's cudaPointerGetAttributes is answered without calling
 *    the runtime once the runtime has answered one itself, byte for byte
 *    as the runtime does (reserved[] left as the caller had it);
 *  - answers that read the calling thread's context leave errno as it
 *    was, whatever the driver's cuCtxGetCurrent does to it;
 *  - a query made from gdrhook's own code (a subscriber callback) goes
 *    to the driver;
 *  - queries on threads running beside threads that allocate and free
 *    get exact answers.
 * (tests/gpu/ptrattr-check compares the whole table with the real driver.)
 */
#include <cuda_runtime_api.h>
#include <errno.h>
#include <pthread.h>
#include <time.h>

/* Not every helper is used here. */
#pragma GCC diagnostic ignored "-Wunused-function"
#include "preload_util.h"
#include "fake/fakecuda.h"

#define KiB 1024ull

static const CUpointer_attribute all_attrs[] = {
	CU_POINTER_ATTRIBUTE_CONTEXT, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
	CU_POINTER_ATTRIBUTE_DEVICE_POINTER, CU_POINTER_ATTRIBUTE_HOST_POINTER,
	CU_POINTER_ATTRIBUTE_BUFFER_ID, CU_POINTER_ATTRIBUTE_IS_MANAGED,
	CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
	CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE,
	CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_POINTER_ATTRIBUTE_RANGE_SIZE,
	CU_POINTER_ATTRIBUTE_MAPPED, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE,
};
#define NATTRS (sizeof(all_attrs) / sizeof(all_attrs[0]))

static unsigned long driver_queries(void)
{
	return fake_calls("cuPointerGetAttribute") +
	       fake_calls("cuPointerGetAttributes") +
	       fake_calls("cuMemGetAddressRange_v2");
}

/* Every query kind on ptr but those in skip (attribute bits); returns
 * how many calls were made. */
static int query_all(CUdeviceptr ptr, unsigned int skip)
{
	unsigned char buf[NATTRS][16];
	void *data[NATTRS];
	CUdeviceptr base;
	size_t size;
	size_t i;

	CUpointer_attribute at[NATTRS];
	unsigned int n = 0;

	for (i = 0; i < NATTRS; i++) {
		if (skip & (1u << all_attrs[i]))
			continue;
		cuPointerGetAttribute(buf[n], all_attrs[i], ptr);
		data[n] = buf[n];
		at[n++] = all_attrs[i];
	}
	cuPointerGetAttributes(n, at, data, ptr);
	cuMemGetAddressRange(&base, &size, ptr);
	return n + 2;
}

struct mem {
	CUdeviceptr dev, managed, pool;
	void *host, *reg;
};

static void alloc_all(struct mem *m)
{
	CU_OK(cuMemAlloc(&m->dev, 100));
	CU_OK(cuMemAllocManaged(&m->managed, 4 * KiB, CU_MEM_ATTACH_GLOBAL));
	CU_OK(cuMemAllocAsync(&m->pool, 1000, 0));
	CU_OK(cuMemAllocHost(&m->host, 100));
	m->reg = aligned_alloc(64 * KiB, 64 * KiB);
	CU_OK(cuMemHostRegister(m->reg, 64 * KiB, 0));
}

static CUdeviceptr ptrs(const struct mem *m, int i)
{
	static int stackv;
	const CUdeviceptr p[] = {
		m->dev, m->dev + 8, m->managed + 8, m->pool + 8,
		(CUdeviceptr)(uintptr_t)m->host + 8,
		(CUdeviceptr)(uintptr_t)m->reg + 8,
		(CUdeviceptr)(uintptr_t)&stackv, 0,
	};

	return i < (int)(sizeof(p) / sizeof(p[0])) ? p[i] : (CUdeviceptr)-1;
}

/*
 * Every kind allocated, and one query of an untracked pointer answered by
 * the driver (from then on "not CUDA memory" is answered here); returns
 * the driver's query count after it.
 */
static unsigned long setup_answered(struct mem *m)
{
	unsigned int mt = 7;
	int stackv = 0;

	primary_ctx(0);
	alloc_all(m);
	CHECK_EQ(cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
				       (CUdeviceptr)(uintptr_t)&stackv),
		 CUDA_ERROR_INVALID_VALUE);
	return driver_queries();
}

/* Registry mode: no driver call once the driver has answered one. */
static int scenario_registry(void)
{
	struct mem m;
	unsigned long before;
	unsigned int mt = 7;
	CUcontext c = NULL;
	int ord = 5, stackv = 0;
	CUdeviceptr base = 1;
	size_t size = 1;

	before = setup_answered(&m);
	/*
	 * All but what the registry does not record: the device of host
	 * memory, the pool of a cuMemAllocAsync (the current one), and the
	 * range of an untracked pointer (which could be an unmapped part of
	 * a VMM reservation).
	 */
	for (int i = 0; ptrs(&m, i) != (CUdeviceptr)-1; i++) {
		CUdeviceptr p = ptrs(&m, i);
		unsigned int skip = 0;

		if (p == (CUdeviceptr)(uintptr_t)m.host + 8 ||
		    p == (CUdeviceptr)(uintptr_t)m.reg + 8)
			skip = 1u << CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL;
		if (p == m.pool + 8)
			skip = 1u << CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE;
		if (tracked(p, NULL))
			skip = 1u << CU_POINTER_ATTRIBUTE_RANGE_START_ADDR |
			       1u << CU_POINTER_ATTRIBUTE_RANGE_SIZE;
		query_all(p, skip);
	}
	CHECK_EQ(driver_queries(), before);
	CU_OK(cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
				    m.dev + 8));
	CHECK_EQ(mt, CU_MEMORYTYPE_DEVICE);
	CU_OK(cuPointerGetAttribute(&c, CU_POINTER_ATTRIBUTE_CONTEXT, m.dev));
	CHECK(c != NULL);
	CU_OK(cuPointerGetAttribute(&ord, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
				    m.pool));
	CHECK_EQ(ord, 0);
	CU_OK(cuMemGetAddressRange(&base, &size, m.dev + 50));
	CHECK_EQ(base, m.dev);
	CHECK_EQ(size, 100);
	/* Untracked: the driver's answers for host memory. */
	CHECK_EQ(cuMemGetAddressRange(&base, &size,
				      (CUdeviceptr)(uintptr_t)&stackv),
		 CUDA_ERROR_NOT_FOUND);
	CHECK_EQ(base, 0);
	CHECK_EQ(size, 0);
	mt = 7;
	CHECK_EQ(cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
				       m.dev + 100), CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(mt, 7);
	/* A freed pointer is unknown at once. */
	CU_OK(cuMemFree(m.dev));
	CHECK_EQ(cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
				       m.dev), CUDA_ERROR_INVALID_VALUE);
	{
		CUpointer_attribute at[2] = { CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
					      CU_POINTER_ATTRIBUTE_HOST_POINTER };
		void *hp = NULL;
		void *data[2] = { &ord, &hp };

		CU_OK(cuPointerGetAttributes(2, at, data, m.dev));
		CHECK_EQ(ord, -2);
		CHECK(hp == (void *)(uintptr_t)m.dev);
	}
	CHECK_EQ(driver_queries(), before);
	/* Not answered here: a RANGE_* of an untracked pointer. */
	{
		CUpointer_attribute at = CU_POINTER_ATTRIBUTE_RANGE_SIZE;
		void *data = &size;

		CU_OK(cuPointerGetAttributes(1, &at, &data, m.dev));
		CHECK_EQ(driver_queries(), before + 1);
	}
	return 0;
}

/* Audit mode: every answer checked against the driver, all agree. */
static int scenario_validate(void)
{
	struct gdrhook_stats st = { .size = sizeof(st) };
	struct mem m;
	int calls = 0;

	primary_ctx(0);
	alloc_all(&m);
	for (int round = 0; round < 2; round++)
		for (int i = 0; ptrs(&m, i) != (CUdeviceptr)-1; i++)
			calls += query_all(ptrs(&m, i), 0);
	CU_OK(cuMemFree(m.dev));
	calls += query_all(m.dev, 0);
	CHECK_EQ(gdrhook_get_stats(&st), 0);
	CHECK_EQ(st.audit_disagreements, 0);
	/* Most queries are answered, hence checked (BUFFER_ID is ours). */
	CHECK(st.audit_checks >= (uint64_t)calls / 2);
	return 0;
}

/* GDRHOOK_POINTER_QUERIES=driver: every query but BUFFER_ID goes there. */
static int scenario_driver(void)
{
	struct mem m;
	unsigned long before;
	unsigned int mt = 0;

	primary_ctx(0);
	alloc_all(&m);
	before = fake_calls("cuPointerGetAttribute");
	CU_OK(cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
				    m.dev));
	CHECK_EQ(fake_calls("cuPointerGetAttribute"), before + 1);
	CHECK(cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
				    (CUdeviceptr)(uintptr_t)&mt) ==
	      CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(fake_calls("cuPointerGetAttribute"), before + 2);
	before = fake_calls("cuMemGetAddressRange_v2");
	{
		CUdeviceptr base;
		size_t size;

		CU_OK(cuMemGetAddressRange(&base, &size, m.dev));
	}
	CHECK_EQ(fake_calls("cuMemGetAddressRange_v2"), before + 1);
	{
		struct cudaPointerAttributes pa;

		CU_OK(cudaPointerGetAttributes(&pa, (void *)(uintptr_t)m.dev));
		before = cudaFakePointerQueries();
		CU_OK(cudaPointerGetAttributes(&pa, (void *)(uintptr_t)m.dev));
		CHECK_EQ(cudaFakePointerQueries(), before + 1);
	}
	return 0;
}

/* The no-context answers, checked on a thread with none current. */
struct noctx {
	struct mem *m;
	int failed;
};

static int noctx_checks(struct mem *m)
{
	CUpointer_attribute at[2] = { CU_POINTER_ATTRIBUTE_DEVICE_POINTER,
				      CU_POINTER_ATTRIBUTE_MEMORY_TYPE };
	CUdeviceptr dp = 1, base = 1;
	unsigned int mt = 0;
	void *data[2] = { &dp, &mt };
	size_t size = 1;
	int stackv = 0;
	CUcontext cur = (CUcontext)1;

	CU_OK(cuCtxSetCurrent(NULL));
	/* Refused, and NULL written, as the driver does. */
	CHECK_EQ(cuPointerGetAttribute(&dp, CU_POINTER_ATTRIBUTE_DEVICE_POINTER,
				       m->dev + 8), CUDA_ERROR_INVALID_CONTEXT);
	CHECK_EQ(dp, 0);
	dp = 1;
	CU_OK(cuPointerGetAttributes(2, at, data, m->managed + 8));
	CHECK_EQ(dp, 0);
	CHECK_EQ(mt, CU_MEMORYTYPE_DEVICE);
	CHECK_EQ(cuMemGetAddressRange(&base, &size, m->pool + 8),
		 CUDA_ERROR_INVALID_CONTEXT);
	CHECK_EQ(base, 0);
	CHECK_EQ(size, 0);
	base = size = 1;
	CHECK_EQ(cuMemGetAddressRange(&base, &size,
				      (CUdeviceptr)(uintptr_t)&stackv),
		 CUDA_ERROR_INVALID_CONTEXT);
	CHECK_EQ(base, 0);
	CHECK_EQ(size, 0);
	/* Other attributes do not depend on it. */
	CU_OK(cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
				    m->dev));
	CU_OK(cuCtxGetCurrent(&cur));
	CHECK(cur == NULL);
	return 0;
}

static void *noctx_thread(void *arg)
{
	struct noctx *n = arg;

	n->failed = noctx_checks(n->m);
	return NULL;
}

/* No context current: the driver's refusals, without asking it. */
static int scenario_noctx(void)
{
	struct noctx n;
	struct mem m;
	unsigned long before = setup_answered(&m);
	pthread_t t;

	n.m = &m;
	n.failed = 1;
	CHECK_EQ(pthread_create(&t, NULL, noctx_thread, &n), 0);
	CHECK_EQ(pthread_join(t, NULL), 0);
	CHECK_EQ(n.failed, 0);
	CHECK_EQ(driver_queries(), before);
	return 0;
}

/* The runtime's call: device, managed, pool and untracked memory. */
static int scenario_runtime(void)
{
	struct cudaPointerAttributes pa;
	struct mem m;
	unsigned long before;
	int stackv = 0;

	primary_ctx(0);
	alloc_all(&m);
	/* The first goes to the runtime (it may have to start). */
	CU_OK(cudaPointerGetAttributes(&pa, (void *)(uintptr_t)m.dev));
	CHECK_EQ(cudaFakePointerQueries(), 1);
	/* Host memory reaches the driver once (see scenario_registry). */
	CU_OK(cudaPointerGetAttributes(&pa, &stackv));
	before = cudaFakePointerQueries();
	memset(&pa, 0xcc, sizeof(pa));
	CU_OK(cudaPointerGetAttributes(&pa, (void *)(uintptr_t)(m.dev + 8)));
	CHECK_EQ(pa.type, cudaMemoryTypeDevice);
	CHECK_EQ(pa.device, 0);
	CHECK(pa.devicePointer == (void *)(uintptr_t)(m.dev + 8));
	CHECK(pa.hostPointer == NULL);
	CU_OK(cudaPointerGetAttributes(&pa, (void *)(uintptr_t)m.managed));
	CHECK_EQ(pa.type, cudaMemoryTypeManaged);
	CHECK(pa.hostPointer == (void *)(uintptr_t)m.managed);
	CU_OK(cudaPointerGetAttributes(&pa, (void *)(uintptr_t)m.pool));
	CHECK_EQ(pa.type, cudaMemoryTypeDevice);
	memset(&pa, 0xcc, sizeof(pa));
	CU_OK(cudaPointerGetAttributes(&pa, &stackv));
	CHECK_EQ(pa.type, cudaMemoryTypeUnregistered);
	CHECK_EQ(pa.device, -2);
	CHECK(pa.devicePointer == NULL);
	CHECK(pa.hostPointer == (void *)&stackv);
	/* One past the end is not in the allocation. */
	CU_OK(cudaPointerGetAttributes(&pa, (void *)(uintptr_t)(m.dev + 100)));
	CHECK_EQ(pa.type, cudaMemoryTypeUnregistered);
	CHECK_EQ(cudaFakePointerQueries(), before);
	/* Host memory's device is not recorded: the runtime answers. */
	CU_OK(cudaPointerGetAttributes(&pa, m.host));
	CHECK_EQ(pa.type, cudaMemoryTypeHost);
	CHECK_EQ(cudaFakePointerQueries(), before + 1);
	/* A bad argument is the runtime's to refuse (and to remember). */
	CHECK_EQ(cudaPointerGetAttributes(NULL, &stackv), cudaErrorInvalidValue);
	CHECK_EQ(cudaGetLastError(), cudaErrorInvalidValue);
	CHECK_EQ(cudaGetLastError(), cudaSuccess);
	CHECK_EQ(cudaFakePointerQueries(), before + 2);
	/* A freed pointer is unknown at once. */
	CU_OK(cuMemFree(m.dev));
	CU_OK(cudaPointerGetAttributes(&pa, (void *)(uintptr_t)m.dev));
	CHECK_EQ(pa.type, cudaMemoryTypeUnregistered);
	CHECK_EQ(cudaFakePointerQueries(), before + 2);
	return 0;
}

/*
 * Every byte of the caller's struct: what the runtime leaves alone
 * (reserved[]) stays as the caller had it, the rest is the runtime's.
 * Both structs start with the same pattern, the runtime double's own
 * answer is the reference, and the registry's must be byte-identical.
 */
static int scenario_runtime_bytes(void)
{
	struct cudaPointerAttributes ours, theirs;
	unsigned long before, answered = 0;
	struct mem m;

	primary_ctx(0);
	alloc_all(&m);
	/* The first goes to the runtime (it may have to start). */
	CU_OK(cudaPointerGetAttributes(&ours, (void *)(uintptr_t)m.dev));
	CU_OK(cudaPointerGetAttributes(&ours, &m));
	for (int i = 0; ptrs(&m, i) != (CUdeviceptr)-1; i++) {
		const void *p = (const void *)(uintptr_t)ptrs(&m, i);

		for (size_t b = 0; b < sizeof(ours); b++)
			((unsigned char *)&ours)[b] = (unsigned char)(0x5a + b);
		memcpy(&theirs, &ours, sizeof(ours));
		before = cudaFakePointerQueries();
		CHECK_EQ(cudaPointerGetAttributes(&ours, p),
			 cudaFakePointerGetAttributes(&theirs, p));
		answered += cudaFakePointerQueries() == before + 1;
		if (memcmp(&ours, &theirs, sizeof(ours)))
			TH_FAIL("pointer %d: bytes differ from the runtime's",
				i);
	}
	/* Most were the registry's answers, not the runtime's. */
	CHECK(answered >= 4);
	return 0;
}

/* Audit mode: the runtime's answers checked against it, all agree. */
static int scenario_runtime_validate(void)
{
	struct gdrhook_stats st = { .size = sizeof(st) };
	struct cudaPointerAttributes pa;
	struct mem m;
	uint64_t checks;

	primary_ctx(0);
	alloc_all(&m);
	CU_OK(cudaPointerGetAttributes(&pa, (void *)(uintptr_t)m.dev));
	CHECK_EQ(gdrhook_get_stats(&st), 0);
	checks = st.audit_checks;
	for (int round = 0; round < 2; round++)
		for (int i = 0; ptrs(&m, i) != (CUdeviceptr)-1; i++)
			CU_OK(cudaPointerGetAttributes(
				&pa, (void *)(uintptr_t)ptrs(&m, i)));
	CHECK_EQ(gdrhook_get_stats(&st), 0);
	CHECK_EQ(st.audit_disagreements, 0);
	/* All but the host ones (their device is not recorded) checked. */
	CHECK(st.audit_checks >= checks + 10);
	return 0;
}

/*
 * The answers that read the calling thread's context (DEVICE_POINTER,
 * the address range, the runtime's call) with the double's every call
 * setting errno: errno is the program's value after each, and the
 * driver was not asked.
 */
static int scenario_errno(void)
{
	void (*seterr)(int) = (void (*)(int))fake_sym("fakecuda_set_errno");
	CUpointer_attribute at[2] = { CU_POINTER_ATTRIBUTE_DEVICE_POINTER,
				      CU_POINTER_ATTRIBUTE_MEMORY_TYPE };
	struct cudaPointerAttributes pa;
	CUdeviceptr dp = 0, base = 0;
	unsigned int mt = 0;
	void *data[2] = { &dp, &mt };
	unsigned long before, rt_before;
	struct mem m;
	size_t size = 0;
	int stackv = 0;

	before = setup_answered(&m);
	/* The first runtime query goes to the runtime (it may have to start). */
	CU_OK(cudaPointerGetAttributes(&pa, &stackv));
	rt_before = cudaFakePointerQueries();
	seterr(4242);
	errno = 77;
	CU_OK(cuPointerGetAttribute(&dp, CU_POINTER_ATTRIBUTE_DEVICE_POINTER,
				    m.dev + 8));
	CHECK_EQ(errno, 77);
	CHECK_EQ(dp, m.dev + 8);
	errno = 78;
	CU_OK(cuPointerGetAttributes(2, at, data, m.managed));
	CHECK_EQ(errno, 78);
	CHECK_EQ(dp, m.managed);
	CHECK_EQ(mt, CU_MEMORYTYPE_DEVICE);
	errno = 79;
	CU_OK(cuMemGetAddressRange(&base, &size, m.dev + 50));
	CHECK_EQ(errno, 79);
	CHECK_EQ(base, m.dev);
	CHECK_EQ(size, 100);
	errno = 80;
	CHECK_EQ(cuMemGetAddressRange(&base, &size,
				      (CUdeviceptr)(uintptr_t)&stackv),
		 CUDA_ERROR_NOT_FOUND);
	CHECK_EQ(errno, 80);
	errno = 81;
	CU_OK(cudaPointerGetAttributes(&pa, (void *)(uintptr_t)(m.pool + 8)));
	CHECK_EQ(errno, 81);
	CHECK(pa.devicePointer == (void *)(uintptr_t)(m.pool + 8));
	seterr(-1);
	CHECK_EQ(driver_queries(), before);
	CHECK_EQ(cudaFakePointerQueries(), rt_before);
	return 0;
}

/* What a subscriber callback's queries got, and how many the driver saw. */
static struct {
	CUresult rc;
	unsigned int mt;
	unsigned long long id;
	unsigned long asked;
	int fired;
} cb;

static void query_in_callback(const struct gdrhook_event *ev, void *arg)
{
	unsigned long before = driver_queries();

	(void)arg;
	cb.rc = cuPointerGetAttribute(&cb.mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
				      (CUdeviceptr)ev->range.base);
	if (cb.rc == CUDA_SUCCESS)
		cb.rc = cuPointerGetAttribute(&cb.id,
					      CU_POINTER_ATTRIBUTE_BUFFER_ID,
					      (CUdeviceptr)ev->range.base);
	cb.asked = driver_queries() - before;
	cb.fired++;
}

/*
 * A query from gdrhook's own code (a subscriber callback) reaches the
 * driver, which answers; the same query from the program afterwards is
 * answered here.
 */
static int scenario_callback(void)
{
	unsigned long long id = 0;
	unsigned long before;
	CUdeviceptr p;
	struct mem m;

	before = setup_answered(&m);
	CHECK(gdrhook_subscribe(GDRHOOK_EVENT_ALLOC, query_in_callback,
				NULL) >= 0);
	CU_OK(cuMemAlloc(&p, 4096));
	CHECK_EQ(cb.fired, 1);
	CU_OK(cb.rc);
	CHECK_EQ(cb.mt, CU_MEMORYTYPE_DEVICE);
	CHECK_EQ(cb.asked, 2);
	/* The driver's own buffer ID: no tag bit. */
	CHECK_EQ(cb.id >> 63, 0);
	before = driver_queries();
	CU_OK(cuPointerGetAttribute(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID, p));
	CHECK_EQ(id >> 63, 1);
	CHECK_EQ(driver_queries(), before);
	return 0;
}

/* Queries beside allocating threads (scenario_concurrent). */
#define CC_STABLE	64
#define CC_WRITERS	3
#define CC_READERS	3
#define CC_SIZE		4096

static struct {
	CUcontext ctx;
	CUdeviceptr stable[CC_STABLE];
	size_t size[CC_STABLE];
	unsigned long long id[CC_STABLE];
	CUdeviceptr churn[CC_WRITERS];	/* the writer's latest, or 0 */
	int stop;
	unsigned long errors, queries, churn_live, churn_gone;
} cc;

static void cc_error(const char *what, CUdeviceptr p)
{
	if (__atomic_fetch_add(&cc.errors, 1, __ATOMIC_RELAXED) < 5)
		fprintf(stderr, "concurrent: %s at 0x%llx\n", what,
			(unsigned long long)p);
}

static void *cc_writer(void *arg)
{
	CUdeviceptr *slot = arg, p;

	if (cuCtxSetCurrent(cc.ctx))
		cc_error("cuCtxSetCurrent", 0);
	while (!__atomic_load_n(&cc.stop, __ATOMIC_RELAXED)) {
		if (cuMemAlloc(&p, CC_SIZE)) {
			cc_error("cuMemAlloc", 0);
			break;
		}
		__atomic_store_n(slot, p, __ATOMIC_RELAXED);
		if (cuMemFree(p))
			cc_error("cuMemFree", p);
	}
	return NULL;
}

/* A stable allocation: every answer exact. */
static void cc_stable(uint64_t r)
{
	static const CUpointer_attribute at[3] = {
		CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
		CU_POINTER_ATTRIBUTE_BUFFER_ID,
		CU_POINTER_ATTRIBUTE_DEVICE_POINTER,
	};
	unsigned int i = r % CC_STABLE, mt = 0;
	CUdeviceptr p = cc.stable[i] + (r >> 32) % cc.size[i], b = 0, dp = 0;
	unsigned long long id = 0, id3 = 0;
	void *data[3] = { &mt, &id3, &dp };
	size_t sz = 0;

	if (cuPointerGetAttribute(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID, p) ||
	    id != cc.id[i])
		cc_error("stable buffer ID", p);
	if (cuMemGetAddressRange(&b, &sz, p) || b != cc.stable[i] ||
	    sz != cc.size[i])
		cc_error("stable range", p);
	if (cuPointerGetAttributes(3, (CUpointer_attribute *)at, data, p) ||
	    mt != CU_MEMORYTYPE_DEVICE || id3 != cc.id[i] || dp != p)
		cc_error("stable attributes", p);
}

/* A churned allocation: in some live CC_SIZE allocation, or in none. */
static void cc_churned(uint64_t r)
{
	CUdeviceptr q = __atomic_load_n(&cc.churn[r % CC_WRITERS],
					__ATOMIC_RELAXED);
	CUdeviceptr p = q + (r >> 32) % CC_SIZE, b = 7;
	unsigned long long id = 0;
	size_t sz = 7;
	CUresult rc;

	if (!q)
		return;
	rc = cuMemGetAddressRange(&b, &sz, p);
	if (rc == CUDA_SUCCESS && sz == CC_SIZE && p - b < sz)
		__atomic_fetch_add(&cc.churn_live, 1, __ATOMIC_RELAXED);
	else if (rc == CUDA_ERROR_NOT_FOUND && !b && !sz)
		__atomic_fetch_add(&cc.churn_gone, 1, __ATOMIC_RELAXED);
	else
		cc_error("churned range", p);
	rc = cuPointerGetAttribute(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID, p);
	if (!(rc == CUDA_SUCCESS && id >> 63) &&
	    rc != CUDA_ERROR_INVALID_VALUE)
		cc_error("churned buffer ID", p);
}

static void *cc_reader(void *arg)
{
	uint64_t s = (uintptr_t)arg * 0x9e3779b97f4a7c15ull + 1;
	unsigned long n = 0;

	if (cuCtxSetCurrent(cc.ctx))
		cc_error("cuCtxSetCurrent", 0);
	while (!__atomic_load_n(&cc.stop, __ATOMIC_RELAXED)) {
		s ^= s << 13;
		s ^= s >> 7;
		s ^= s << 17;
		cc_stable(s);
		cc_churned(s * 31);
		n++;
	}
	__atomic_fetch_add(&cc.queries, n, __ATOMIC_RELAXED);
	return NULL;
}

/*
 * Readers query stable allocations (every answer exact) and the ones
 * writers keep allocating and freeing (in a live allocation of theirs, or
 * in none) while the writers run: the unguarded answers beside the
 * registry's writers.
 */
static int scenario_concurrent(void)
{
	pthread_t w[CC_WRITERS], rd[CC_READERS];
	struct timespec ts = { 0, 300 * 1000 * 1000 };
	struct mem m;
	int i;

	setup_answered(&m);
	CU_OK(cuCtxGetCurrent(&cc.ctx));
	for (i = 0; i < CC_STABLE; i++) {
		cc.size[i] = 100 + 977 * (size_t)i;
		CU_OK(cuMemAlloc(&cc.stable[i], cc.size[i]));
		CU_OK(cuPointerGetAttribute(&cc.id[i],
					    CU_POINTER_ATTRIBUTE_BUFFER_ID,
					    cc.stable[i]));
		CHECK_EQ(cc.id[i] >> 63, 1);
	}
	for (i = 0; i < CC_WRITERS; i++)
		CHECK_EQ(pthread_create(&w[i], NULL, cc_writer, &cc.churn[i]),
			 0);
	for (i = 0; i < CC_READERS; i++)
		CHECK_EQ(pthread_create(&rd[i], NULL, cc_reader,
					(void *)(uintptr_t)(i + 1)), 0);
	nanosleep(&ts, NULL);
	__atomic_store_n(&cc.stop, 1, __ATOMIC_RELAXED);
	for (i = 0; i < CC_WRITERS; i++)
		CHECK_EQ(pthread_join(w[i], NULL), 0);
	for (i = 0; i < CC_READERS; i++)
		CHECK_EQ(pthread_join(rd[i], NULL), 0);
	fprintf(stderr, "concurrent: %lu queries, churned %lu live / %lu gone\n",
		cc.queries, cc.churn_live, cc.churn_gone);
	CHECK_EQ(cc.errors, 0);
	CHECK(cc.queries > 0);
	CHECK_EQ(gdrhook_trusted(), 1);
	return 0;
}

/*
 * cuMemRetainAllocationHandle (Open MPI 5.0 asks it of every buffer): a
 * refusal of memory the registry holds nothing at is answered without
 * the driver, with or without a context current; anything tracked, a VMM
 * mapping's handle (a reference) and a NULL output go to the driver.
 */
static int scenario_retain(void)
{
	const size_t sz = 2u << 20;
	CUmemGenericAllocationHandle h = 0, got = 77;
	CUmemAllocationProp prop;
	CUmemAccessDesc a;
	CUdeviceptr dev, va = 0;
	unsigned long before;
	static char host[4096];

	primary_ctx(0);
	/* The first query goes to the driver: it shows the driver is up. */
	CHECK_EQ(cuMemRetainAllocationHandle(&got, host),
		 CUDA_ERROR_INVALID_VALUE);
	before = fake_calls("cuMemRetainAllocationHandle");
	CHECK_EQ(cuMemRetainAllocationHandle(&got, host),
		 CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(got, 77);	/* untouched, as the driver leaves it */
	CHECK_EQ(fake_calls("cuMemRetainAllocationHandle"), before);

	/* Tracked, not VMM: the driver says. */
	CU_OK(cuMemAlloc(&dev, 4096));
	CHECK_EQ(cuMemRetainAllocationHandle(&got, (void *)(uintptr_t)dev),
		 CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(fake_calls("cuMemRetainAllocationHandle"), before + 1);
	CU_OK(cuMemFree(dev));

	/* A VMM mapping: the driver's handle and reference. */
	memset(&prop, 0, sizeof(prop));
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	CU_OK(cuMemCreate(&h, sz, &prop, 0));
	CU_OK(cuMemAddressReserve(&va, sz, 0, 0, 0));
	CU_OK(cuMemMap(va, sz, 0, h, 0));
	memset(&a, 0, sizeof(a));
	a.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	CU_OK(cuMemSetAccess(va, sz, &a, 1));
	CU_OK(cuMemRetainAllocationHandle(&got, (void *)(uintptr_t)(va + 8)));
	CHECK_EQ(got, h);
	CHECK_EQ(fake_calls("cuMemRetainAllocationHandle"), before + 2);
	CU_OK(cuMemRelease(got));
	CU_OK(cuMemUnmap(va, sz));
	CU_OK(cuMemRelease(h));
	CU_OK(cuMemAddressFree(va, sz));

	/* Once unmapped, the same address is nothing's: answered again. */
	CHECK_EQ(cuMemRetainAllocationHandle(&got, (void *)(uintptr_t)va),
		 CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(fake_calls("cuMemRetainAllocationHandle"), before + 2);

	/* A NULL output: the driver's own answer. */
	CHECK_EQ(cuMemRetainAllocationHandle(NULL, host),
		 CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(fake_calls("cuMemRetainAllocationHandle"), before + 3);
	/* No context current: the driver refuses alike (retain_probe). */
	CU_OK(cuCtxSetCurrent(NULL));
	CHECK_EQ(cuMemRetainAllocationHandle(&got, host),
		 CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(fake_calls("cuMemRetainAllocationHandle"), before + 3);
	return 0;
}

/* The same under GDRHOOK_VALIDATE=1: each answer checked, all agree. */
static int scenario_retain_validate(void)
{
	struct gdrhook_stats st = { .size = sizeof(st) };
	CUmemGenericAllocationHandle got = 77;
	unsigned long before;
	uint64_t checks;
	static char host[4096];

	primary_ctx(0);
	CHECK_EQ(cuMemRetainAllocationHandle(&got, host),
		 CUDA_ERROR_INVALID_VALUE);	/* the driver is up */
	CHECK_EQ(gdrhook_get_stats(&st), 0);
	checks = st.audit_checks;
	before = fake_calls("cuMemRetainAllocationHandle");
	CHECK_EQ(cuMemRetainAllocationHandle(&got, host),
		 CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(fake_calls("cuMemRetainAllocationHandle"), before + 1);
	CHECK_EQ(gdrhook_get_stats(&st), 0);
	CHECK_EQ(st.audit_checks, checks + 1);
	CHECK_EQ(st.audit_disagreements, 0);
	return 0;
}

/*
 * Untracked pointers where the registry has nothing near (stack, heap,
 * a freed buffer, above 2^48) and where it has (the same 2 MiB region as
 * a live allocation, just past its end): every entry point Open MPI and
 * MPICH ask of a host buffer gives the driver's answer, width for width,
 * leaving the rest of each output as it was.  Registry mode: no call
 * reaches the driver or the runtime.  Under GDRHOOK_VALIDATE=1: each
 * answer is checked (no shortcut skips the check), and all agree.
 */
static const CUpointer_attribute neg_attrs[] = {
	CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_CONTEXT,
	CU_POINTER_ATTRIBUTE_IS_MANAGED, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
	CU_POINTER_ATTRIBUTE_HOST_POINTER, CU_POINTER_ATTRIBUTE_DEVICE_POINTER,
	CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, CU_POINTER_ATTRIBUTE_BUFFER_ID,
	CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE,
	CU_POINTER_ATTRIBUTE_MAPPED,
};
#define NNEG (sizeof(neg_attrs) / sizeof(neg_attrs[0]))
#define POISON 0x5a

/* The driver's value of a pointer it does not know, and its width. */
static uint64_t neg_value(CUpointer_attribute a, CUdeviceptr p, int *width)
{
	*width = a == CU_POINTER_ATTRIBUTE_CONTEXT ||
		 a == CU_POINTER_ATTRIBUTE_HOST_POINTER ||
		 a == CU_POINTER_ATTRIBUTE_DEVICE_POINTER ||
		 a == CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE ||
		 a == CU_POINTER_ATTRIBUTE_BUFFER_ID ? 8 : 4;
	if (a == CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL)
		return 0xfffffffeu;
	return a == CU_POINTER_ATTRIBUTE_HOST_POINTER ? p : 0;
}

static void untracked_one(CUdeviceptr p)
{
	unsigned char buf[NNEG][16];
	void *data[NNEG];
	CUpointer_attribute at[NNEG];
	struct cudaPointerAttributes pa;
	CUmemGenericAllocationHandle h = 77;
	size_t i;
	int w, k;

	for (i = 0; i < NNEG; i++) {
		memset(buf[i], POISON, sizeof(buf[i]));
		CHECK_EQ(cuPointerGetAttribute(buf[i], neg_attrs[i], p),
			 CUDA_ERROR_INVALID_VALUE);
		for (k = 0; k < 16; k++)
			CHECK_EQ(buf[i][k], POISON);
	}
	for (i = 0; i < NNEG; i++) {
		memset(buf[i], POISON, sizeof(buf[i]));
		data[i] = buf[i];
		at[i] = neg_attrs[i];
	}
	/* BUFFER_ID and IPC-capable are among those zeroed: all but the last. */
	CU_OK(cuPointerGetAttributes(NNEG - 1, at, data, p));
	for (i = 0; i < NNEG - 1; i++) {
		uint64_t v = neg_value(at[i], p, &w), got = 0;

		memcpy(&got, buf[i], (size_t)w);
		CHECK_EQ(got, v);
		for (k = w; k < 16; k++)
			CHECK_EQ(buf[i][k], POISON);
	}
	CHECK_EQ(buf[NNEG - 1][0], POISON);
	CHECK_EQ(cuMemRetainAllocationHandle(&h, (void *)(uintptr_t)p),
		 CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(h, 77);
	memset(&pa, 0xcc, sizeof(pa));
	CU_OK(cudaPointerGetAttributes(&pa, (void *)(uintptr_t)p));
	CHECK_EQ(pa.type, cudaMemoryTypeUnregistered);
	CHECK_EQ(pa.device, -2);
	CHECK(pa.devicePointer == NULL);
	CHECK(pa.hostPointer == (void *)(uintptr_t)p);
	CHECK_EQ(pa.reserved[0], 0xcccccccccccccccc);
}

/*
 * Once the registry is untrusted (here: a graph memory node destroyed,
 * which gdrhook does not follow), "not CUDA memory" is the driver's to
 * say, each entry point's.
 */
static void untrusted_asks_driver(CUdeviceptr p)
{
	CUmemGenericAllocationHandle h = 77;
	CUgraphNodeParams np;
	unsigned int mt = 7;
	unsigned long drv, rt;
	CUgraphNode n;
	CUgraph g;

	memset(&np, 0, sizeof(np));
	np.type = CU_GRAPH_NODE_TYPE_MEM_ALLOC;
	np.alloc.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
	np.alloc.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	np.alloc.bytesize = 1 << 20;
	CU_OK(cuGraphCreate(&g, 0));
	CU_OK(cuGraphAddNode(&n, g, NULL, NULL, 0, &np));
	CU_OK(cuGraphDestroyNode(n));
	CHECK_EQ(gdrhook_trusted(), 0);
	drv = driver_queries();
	CHECK_EQ(cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p),
		 CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(driver_queries(), drv + 1);
	CU_OK(cuPointerGetAttributes(1, (CUpointer_attribute[]){
		CU_POINTER_ATTRIBUTE_MEMORY_TYPE }, (void *[]){ &mt }, p));
	CHECK_EQ(mt, 0);
	CHECK_EQ(driver_queries(), drv + 2);
	drv = fake_calls("cuMemRetainAllocationHandle");
	CHECK_EQ(cuMemRetainAllocationHandle(&h, (void *)(uintptr_t)p),
		 CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(fake_calls("cuMemRetainAllocationHandle"), drv + 1);
	rt = cudaFakePointerQueries();
	CU_OK(cudaPointerGetAttributes(&(struct cudaPointerAttributes){ 0 },
				       (void *)(uintptr_t)p));
	CHECK_EQ(cudaFakePointerQueries(), rt + 1);
	CU_OK(cuGraphDestroy(g));
}

static int scenario_untracked(void)
{
	struct gdrhook_stats st = { .size = sizeof(st) };
	int validate = getenv("GDRHOOK_VALIDATE") != NULL;
	unsigned long drv, rt;
	uint64_t checks;
	CUdeviceptr gone, near, p[6];
	struct mem m;
	int stackv = 0;
	size_t i, n = 0;
	char *heap;

	setup_answered(&m);
	CU_OK(cudaPointerGetAttributes(&(struct cudaPointerAttributes){ 0 },
				       &stackv));	/* the runtime is up */
	CU_OK(cuMemAlloc(&gone, 4096));
	CU_OK(cuMemFree(gone));
	/* Past the end of a live one, in its 2 MiB region. */
	near = m.dev + (64 << 10);
	heap = malloc(100);
	CHECK(heap != NULL);
	p[n++] = (CUdeviceptr)(uintptr_t)&stackv;
	p[n++] = (CUdeviceptr)(uintptr_t)heap;
	p[n++] = gone;
	p[n++] = near;
	p[n++] = 1ull << 50;
	p[n++] = (CUdeviceptr)(uintptr_t)m.host + (64 << 10);
	CHECK_EQ(gdrhook_get_stats(&st), 0);
	checks = st.audit_checks;
	drv = driver_queries() + fake_calls("cuMemRetainAllocationHandle");
	rt = cudaFakePointerQueries();
	for (i = 0; i < n; i++)
		untracked_one(p[i]);
	CHECK_EQ(gdrhook_get_stats(&st), 0);
	if (validate) {
		/*
		 * Per pointer, each answer checked: 9 single attributes (a
		 * BUFFER_ID is ours, not compared), 9 in the one call (one
		 * check each), the retain and the runtime's.
		 */
		CHECK_EQ(st.audit_checks - checks, 20 * n);
		CHECK_EQ(st.audit_disagreements, 0);
	} else {
		CHECK_EQ(driver_queries() +
			 fake_calls("cuMemRetainAllocationHandle"), drv);
		CHECK_EQ(cudaFakePointerQueries(), rt);
		CHECK_EQ(st.audit_checks, checks);
	}
	free(heap);
	untrusted_asks_driver((CUdeviceptr)(uintptr_t)&stackv);
	return 0;
}

/*
 * The registry marked untrusted while other threads query host memory:
 * once the mark has returned, every query of each thread reaches the
 * driver (the early refusal's gate is cleared before the mark returns).
 */
#define UR_READERS	3
#define UR_AFTER	2000

static struct {
	int marked, stop;
	unsigned long after;	/* queries begun after the mark returned */
	unsigned long wrong;
} ur;

static void *ur_reader(void *arg)
{
	static char host[64];
	unsigned int mt = 7;
	unsigned long n = 0;

	(void)arg;
	CU_OK(cuCtxSetCurrent(cc.ctx));
	while (!__atomic_load_n(&ur.marked, __ATOMIC_ACQUIRE))
		cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
				      (CUdeviceptr)(uintptr_t)host);
	for (; n < UR_AFTER; n++)
		if (cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
					  (CUdeviceptr)(uintptr_t)host) !=
		    CUDA_ERROR_INVALID_VALUE)
			__atomic_add_fetch(&ur.wrong, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&ur.after, n, __ATOMIC_RELAXED);
	return NULL;
}

static int scenario_untrust_race(void)
{
	struct timespec ts = { 0, 20 * 1000 * 1000 };
	pthread_t t[UR_READERS];
	CUgraphNodeParams np;
	unsigned long before;
	struct mem m;
	CUgraphNode node;
	CUgraph g;

	setup_answered(&m);
	CU_OK(cuCtxGetCurrent(&cc.ctx));
	for (int i = 0; i < UR_READERS; i++)
		CHECK_EQ(pthread_create(&t[i], NULL, ur_reader, NULL), 0);
	nanosleep(&ts, NULL);	/* the readers answered from the registry */
	memset(&np, 0, sizeof(np));
	np.type = CU_GRAPH_NODE_TYPE_MEM_ALLOC;
	np.alloc.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
	np.alloc.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	np.alloc.bytesize = 1 << 20;
	CU_OK(cuGraphCreate(&g, 0));
	CU_OK(cuGraphAddNode(&node, g, NULL, NULL, 0, &np));
	before = fake_calls("cuPointerGetAttribute");
	CU_OK(cuGraphDestroyNode(node));	/* untrusted from here */
	__atomic_store_n(&ur.marked, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < UR_READERS; i++)
		CHECK_EQ(pthread_join(t[i], NULL), 0);
	CHECK_EQ(gdrhook_trusted(), 0);
	CHECK_EQ(ur.wrong, 0);
	CHECK_EQ(ur.after, UR_READERS * UR_AFTER);
	/* every query after the mark, and perhaps some racing it */
	CHECK(fake_calls("cuPointerGetAttribute") - before >= ur.after);
	CU_OK(cuGraphDestroy(g));
	return 0;
}

static const struct scenario scenarios[] = {
	{ "registry", scenario_registry },
	{ "validate", scenario_validate },
	{ "driver", scenario_driver },
	{ "noctx", scenario_noctx },
	{ "runtime", scenario_runtime },
	{ "runtime_validate", scenario_runtime_validate },
	{ "runtime_bytes", scenario_runtime_bytes },
	{ "errno", scenario_errno },
	{ "callback", scenario_callback },
	{ "concurrent", scenario_concurrent },
	{ "retain", scenario_retain },
	{ "retain_validate", scenario_retain_validate },
	{ "untracked", scenario_untracked },
	{ "untrust_race", scenario_untrust_race },
};

static const char *const registry_env[] = {
	"GDRHOOK_POINTER_QUERIES=registry", NULL
};
static const char *const validate_env[] = {
	"GDRHOOK_VALIDATE=1", "GDRHOOK_LOG_LEVEL=error", NULL
};
static const char *const driver_env[] = {
	"GDRHOOK_POINTER_QUERIES=driver", NULL
};

/* A case: one scenario in a child with its environment. */
#define QUERY_TEST(name, scenario, env)					\
	TEST(name)							\
	{								\
		CHECK_EQ(run_scenario(scenario, env), 0);		\
	}

QUERY_TEST(queries_from_registry_without_driver, "registry", registry_env)
QUERY_TEST(queries_agree_with_driver_under_validate, "validate", validate_env)
QUERY_TEST(queries_driver_mode_asks_driver, "driver", driver_env)
QUERY_TEST(queries_without_context_answered_as_driver, "noctx", registry_env)
QUERY_TEST(runtime_query_answered_without_runtime, "runtime", registry_env)
QUERY_TEST(runtime_query_agrees_under_validate, "runtime_validate",
	   validate_env)
QUERY_TEST(runtime_query_leaves_unwritten_bytes, "runtime_bytes",
	   registry_env)
QUERY_TEST(context_reading_queries_keep_errno, "errno", registry_env)
QUERY_TEST(queries_from_gdrhook_callbacks_ask_driver, "callback",
	   registry_env)
QUERY_TEST(queries_beside_allocating_threads_exact, "concurrent",
	   registry_env)
QUERY_TEST(retain_refusal_of_untracked_memory_answered, "retain",
	   registry_env)
QUERY_TEST(retain_refusal_agrees_under_validate, "retain_validate",
	   validate_env)

QUERY_TEST(untracked_pointers_answered_as_driver, "untracked",
	   registry_env)
QUERY_TEST(untracked_pointers_agree_under_validate, "untracked",
	   validate_env)
QUERY_TEST(untrust_beside_querying_threads_sends_them_to_driver,
	   "untrust_race", registry_env)

SCENARIO_MAIN(scenarios)
