// SPDX-License-Identifier: MIT
/*
 * What each hook does to the registry, the subscribers and the counters
 * (src/hooks/events.c): an allocation is registered after the real call
 * succeeded, with its owner (context, device) and, where the driver
 * alone knows it, its real size; a free is unregistered and told to
 * subscribers before the real call, and put back under a new generation
 * when the real call fails; a context's destroy, reset or last release
 * drops what it owned; an entry point gdrhook does not model marks the
 * registry untrusted.  Checked against the driver double.
 */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>

/* Not every helper of the shared header is used here. */
#pragma GCC diagnostic ignored "-Wunused-function"
#include "agree.h"

TEST(ctx_destroy_drops_its_allocations_first)
{
	CUctxCreateParams params;
	CUcontext ctx, prim;
	CUdeviceptr a, b, c;

	CU_OK(cuInit(0));
	memset(&params, 0, sizeof(params));
	CU_OK(cuCtxCreate_v4(&ctx, &params, 0, 0));
	CU_OK(cuMemAlloc_v2(&a, 4096));
	CU_OK(cuMemAlloc_v2(&b, 1 << 22));
	prim = primary_ctx(1);
	CU_OK(cuMemAlloc_v2(&c, 4096));
	CHECK_EQ(tracked(a, NULL), 0);
	CU_OK(cuCtxDestroy_v2(ctx));
	CHECK_EQ(tracked(a, NULL), -ENOENT);
	CHECK_EQ(tracked(b, NULL), -ENOENT);
	CHECK_EQ(tracked(c, NULL), 0);	/* another context's */
	(void)prim;
	/* Primary reset drops device 1's primary-context allocations. */
	CU_OK(cuDevicePrimaryCtxReset_v2(1));
	CHECK_EQ(tracked(c, NULL), -ENOENT);
}

/* The device of a new allocation is its context's, however the thread
 * switches contexts (the shim caches it per thread and context). */
TEST(device_follows_the_current_context)
{
	CUctxCreateParams params;
	CUcontext ctx[2];
	struct gdrhook_range r;
	CUdeviceptr p;

	CU_OK(cuInit(0));
	memset(&params, 0, sizeof(params));
	CU_OK(cuCtxCreate_v4(&ctx[0], &params, 0, 0));
	CU_OK(cuCtxCreate_v4(&ctx[1], &params, 0, 1));
	for (int i = 0; i < 6; i++) {
		CU_OK(cuCtxSetCurrent(ctx[i % 2]));
		CU_OK(cuMemAlloc_v2(&p, 4096));
		CHECK_EQ(tracked(p, &r), 0);
		CHECK_EQ(r.ctx, (uint64_t)(uintptr_t)ctx[i % 2]);
		CHECK_EQ(r.dev, i % 2);
		CU_OK(cuMemFree_v2(p));
	}
	CU_OK(cuCtxDestroy_v2(ctx[1]));
	CU_OK(cuCtxCreate_v4(&ctx[1], &params, 0, 1));
	CU_OK(cuMemAlloc_v2(&p, 4096));
	CHECK_EQ(tracked(p, &r), 0);
	CHECK_EQ(r.dev, 1);
	CU_OK(cuMemFree_v2(p));
	CU_OK(cuCtxDestroy_v2(ctx[0]));
	CU_OK(cuCtxDestroy_v2(ctx[1]));
}

TEST(primary_release_last_reference_drops)
{
	CUcontext ctx;
	CUdeviceptr a;

	CU_OK(cuInit(0));
	CU_OK(cuDevicePrimaryCtxRetain(&ctx, 0));
	CU_OK(cuDevicePrimaryCtxRetain(&ctx, 0));
	CU_OK(cuCtxSetCurrent(ctx));
	CU_OK(cuMemAlloc_v2(&a, 65536));
	CU_OK(cuDevicePrimaryCtxRelease_v2(0));
	CHECK_EQ(tracked(a, NULL), 0);		/* one reference left */
	CU_OK(cuDevicePrimaryCtxRelease_v2(0));
	CHECK_EQ(tracked(a, NULL), -ENOENT);
}

TEST(cudaDeviceReset_drops_the_device)
{
	void *p;

	CHECK_EQ(cudaSetDevice(0), cudaSuccess);
	CHECK_EQ(cudaMalloc(&p, 4096), cudaSuccess);
	CHECK_EQ(tracked((uintptr_t)p, NULL), 0);
	CHECK_EQ(cudaDeviceReset(), cudaSuccess);
	CHECK_EQ(tracked((uintptr_t)p, NULL), -ENOENT);
}

TEST(failed_free_keeps_the_allocation_under_a_new_gen)
{
	struct gdrhook_range r1, r2;
	CUdeviceptr p;

	primary_ctx(0);
	CU_OK(cuMemAlloc_v2(&p, 4096));
	CHECK_EQ(tracked(p, &r1), 0);
	fake_fail_next("cuMemFree_v2", CUDA_ERROR_LAUNCH_FAILED, 1);
	CHECK_EQ(cuMemFree_v2(p), CUDA_ERROR_LAUNCH_FAILED);
	CHECK_EQ(tracked(p, &r2), 0);
	CHECK(r2.gen != r1.gen);
	CU_OK(cuMemFree_v2(p));
	CHECK_EQ(tracked(p, NULL), -ENOENT);
}

TEST(failed_alloc_registers_nothing)
{
	CUdeviceptr p = 0;
	struct gdrhook_stats s = { .size = sizeof(s) };

	primary_ctx(0);
	fake_fail_next("cuMemAlloc_v2", CUDA_ERROR_OUT_OF_MEMORY, 1);
	errno = 77;
	CHECK_EQ(cuMemAlloc_v2(&p, 4096), CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_EQ(gdrhook_get_stats(&s), 0);
	CHECK_EQ(s.live, 0);
	CHECK_EQ(s.failed_calls, 1);
}

TEST(free_of_unknown_pointer_passes_through)
{
	struct gdrhook_stats s = { .size = sizeof(s) };

	primary_ctx(0);
	/* The driver rejects it: a failed call, and the registry is fine. */
	CHECK(cuMemFree_v2((CUdeviceptr)0x1000) != CUDA_SUCCESS);
	CHECK_EQ(gdrhook_get_stats(&s), 0);
	CHECK_EQ(s.failed_calls, 1);
	CHECK_EQ(s.frees, 0);
	CHECK(gdrhook_trusted());
}

static CUdeviceptr seen_free;
static int still_live_at_free;

static void on_free(const struct gdrhook_event *ev, void *arg)
{
	CUdeviceptr base;
	size_t size;

	seen_free = ev->range.base;
	/* Before the real free: the driver must still have it. */
	still_live_at_free = cuMemGetAddressRange_v2(&base, &size,
						     ev->range.base) ==
			     CUDA_SUCCESS;
	(void)arg;
}

TEST(subscribers_hear_frees_before_the_driver)
{
	CUdeviceptr p;
	int h;

	primary_ctx(0);
	h = gdrhook_subscribe(GDRHOOK_EVENT_FREE, on_free, NULL);
	CHECK(h >= 0);
	CHECK_EQ(gdrhook_subscribe(0x80, on_free, NULL), -EINVAL);
	CU_OK(cuMemAlloc_v2(&p, 8192));
	CU_OK(cuMemFree_v2(p));
	CHECK_EQ(seen_free, p);
	CHECK_EQ(still_live_at_free, 1);
	CHECK_EQ(gdrhook_unsubscribe(h), 0);
	CHECK_EQ(gdrhook_unsubscribe(h), -EINVAL);
}

static CUexternalMemory import_memfd(size_t size)
{
	CUDA_EXTERNAL_MEMORY_HANDLE_DESC d;
	CUexternalMemory x;
	int fd = memfd_create("ext", 0);

	CHECK(fd >= 0);
	CHECK(ftruncate(fd, (off_t)size) == 0);
	memset(&d, 0, sizeof(d));
	d.type = CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD;
	d.handle.fd = fd;
	d.size = size;
	CU_OK(cuImportExternalMemory(&x, &d));
	return x;
}

TEST(external_memory_buffer_until_freed)
{
	CUDA_EXTERNAL_MEMORY_BUFFER_DESC bd;
	CUexternalMemory x;
	CUdeviceptr p, q;
	struct gdrhook_range r;

	primary_ctx(0);
	x = import_memfd(8 << 20);
	memset(&bd, 0, sizeof(bd));
	bd.offset = 1 << 20;
	bd.size = 2 << 20;
	CU_OK(cuExternalMemoryGetMappedBuffer(&p, x, &bd));
	CHECK_EQ(agree(p, GDRHOOK_KIND_EXTERNAL, 2 << 20), 1);
	CHECK_EQ(tracked(p, &r), 0);
	CHECK(r.flags == 0 || r.kind == GDRHOOK_KIND_EXTERNAL);
	CU_OK(cuMemFree_v2(p));
	CHECK_EQ(agree(p, GDRHOOK_KIND_EXTERNAL, 2 << 20), 0);
	CU_OK(cuExternalMemoryGetMappedBuffer(&q, x, &bd));
	CHECK_EQ(agree(q, GDRHOOK_KIND_EXTERNAL, 2 << 20), 1);
	/* Destroying the object leaves the buffer allocated until freed. */
	CU_OK(cuDestroyExternalMemory(x));
	CHECK_EQ(agree(q, GDRHOOK_KIND_EXTERNAL, 2 << 20), 1);
	CU_OK(cuMemFree_v2(q));
	CHECK_EQ(agree(q, GDRHOOK_KIND_EXTERNAL, 2 << 20), 0);
	CHECK_EQ(gdrhook_trusted(), 1);
}

struct export_msg {
	int fd;				/* in the exporter */
	CUmemPoolPtrExportData data;
};

/* The importer: forked before the exporter touched CUDA (a CUDA process
 * cannot fork a CUDA child), gets the pool fd through /proc. */
static void importer(int rd)
{
	struct export_msg m;
	CUmemoryPool ip;
	CUdeviceptr q;
	char path[64];
	int fd;

	CHECK_EQ(read(rd, &m, sizeof(m)), (ssize_t)sizeof(m));
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)getppid(), m.fd);
	fd = open(path, O_RDWR | O_CLOEXEC);
	CHECK(fd >= 0);
	primary_ctx(0);
	CU_OK(cuMemPoolImportFromShareableHandle(
		&ip, (void *)(uintptr_t)fd,
		CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
	CU_OK(cuMemPoolImportPointer(&q, ip, &m.data));
	CHECK_EQ(*(volatile unsigned char *)(uintptr_t)(q + 12345), 0x5a);
	CHECK_EQ(agree(q, GDRHOOK_KIND_POOL, 3 << 20), 1);
	CU_OK(cuMemFree_v2(q));
	CHECK_EQ(agree(q, GDRHOOK_KIND_POOL, 3 << 20), 0);
	CHECK_EQ(gdrhook_trusted(), 1);
	_exit(0);
}

TEST(pool_import_has_its_real_size_until_freed)
{
	struct export_msg m;
	CUmemPoolProps props;
	CUmemoryPool pool;
	CUdeviceptr p;
	int pfd[2], st;
	pid_t pid;

	CHECK(pipe(pfd) == 0);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		close(pfd[1]);
		importer(pfd[0]);
	}
	close(pfd[0]);
	primary_ctx(0);
	memset(&props, 0, sizeof(props));
	props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
	props.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
	props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	CU_OK(cuMemPoolCreate(&pool, &props));
	CU_OK(cuMemAllocFromPoolAsync(&p, 3 << 20, pool, NULL));
	CU_OK(cuMemsetD8_v2(p, 0x5a, 3 << 20));
	memset(&m, 0, sizeof(m));
	CU_OK(cuMemPoolExportToShareableHandle(
		&m.fd, pool, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
	CU_OK(cuMemPoolExportPointer(&m.data, p));
	CHECK_EQ(write(pfd[1], &m, sizeof(m)), (ssize_t)sizeof(m));
	CHECK_EQ(waitpid(pid, &st, 0), pid);
	CHECK(WIFEXITED(st));
	CHECK_EQ(WEXITSTATUS(st), 0);
	CU_OK(cuMemFree_v2(p));
}

/*
 * Entry points gdrhook does not model (array mapping, interop,
 * multicast, the 32-bit global lookup): a success would mark the
 * registry untrusted; the double refuses them all, and a refusal changes
 * no memory: a failed call, the registry still trusted.
 */
TEST(refused_entry_point_not_modelled_stays_trusted)
{
	struct gdrhook_stats s = { .size = sizeof(s) };
	CUmemGenericAllocationHandle none = 0;
	unsigned int a = 0, n = 0;
	CUdeviceptr d = 0;
	size_t sz = 0;
	CUmodule m;

	primary_ctx(0);
	CU_OK(cuModuleLoadData(&m, "fakecubin:flag=8"));
	CHECK_EQ(cuMemMapArrayAsync(NULL, 0, NULL), CUDA_ERROR_NOT_SUPPORTED);
	CHECK_EQ(cuGraphicsResourceGetMappedPointer_v2(&d, &sz, NULL),
		 CUDA_ERROR_NOT_SUPPORTED);
	CHECK_EQ(cuMulticastBindMem(none, 0, none, 0, 4096, 0),
		 CUDA_ERROR_NOT_SUPPORTED);
	CHECK_EQ(((CUresult (*)(unsigned int *, unsigned int *, CUmodule,
				const char *))fake_sym("cuModuleGetGlobal"))(
			 &a, &n, m, "flag"),
		 CUDA_ERROR_NOT_SUPPORTED);
	CHECK_EQ(gdrhook_get_stats(&s), 0);
	CHECK_EQ(s.failed_calls, 4);
	CHECK_EQ(s.untrusted, 0);
	CHECK_EQ(gdrhook_trusted(), 1);
}

TEST_MAIN()
