// SPDX-License-Identifier: MIT
/*
 * The CUDA runtime API under gdrhook: cudaMalloc/cudaFree (and the same
 * address handed out again), cudaMallocAsync/cudaFreeAsync on a stream,
 * pinned host memory from cudaMallocHost, and a cudaMemPool of our own
 * that is allocated from, trimmed and destroyed.  Plain C against
 * cuda_runtime_api.h, so gcc builds it; it knows nothing of gdrhook.
 *
 *   make examples                  # or: make run EXAMPLE=runtime_api
 *   LD_PRELOAD=build/libgdrhook.so GDRHOOK_TRACE=trace.jsonl \
 *       build/examples/runtime_api
 *   scripts/tools/gdrhook-trace summary trace.jsonl
 *
 * It links -lcudart (SONAME libcudart.so.13) against the runtime test
 * double in build/fake; add LD_LIBRARY_PATH=build/fake to run it on a
 * machine without a GPU.  On a GPU machine the same binary runs against
 * the real CUDA 13 runtime.
 *
 * The runtime never calls the driver through ELF symbols: it dlopen()s
 * libcuda.so.1 and asks cuGetProcAddress for every entry point.  The log
 * still names the runtime call the program made (cudaMalloc,
 * cudaMallocFromPoolAsync, cudaMemPoolTrimTo, ...), and with gdrhook
 * preloaded the program shows what the registry answers for each buffer.
 */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <string.h>

#include "gdrhook_preload.h"

#define CK(call)							\
	do {								\
		cudaError_t rc_ = (call);				\
		if (rc_ != cudaSuccess) {				\
			fprintf(stderr, "%s: %s\n", #call,		\
				cudaGetErrorName(rc_));			\
			return 1;					\
		}							\
	} while (0)

static struct gdrhook_preload gh;
static int have_gh;

static const char *kind_name(uint32_t kind)
{
	static const char *const names[] = {
		"none", "device", "managed", "host", "host_registered",
		"pool", "vmm", "ipc",
	};

	return kind < GDRHOOK_KIND_COUNT_ ? names[kind] : "?";
}

/* What the registry says about p: no driver call. */
static void show(const char *what, const void *p)
{
	struct gdrhook_range r;
	int rc;

	if (!have_gh) {
		printf("%-32s %p\n", what, p);
		return;
	}
	rc = gh.lookup(p, 1, &r);
	if (rc == 0)
		printf("%-32s %p  registry: %s, %llu bytes, gen %llu%s\n",
		       what, p, kind_name(r.kind),
		       (unsigned long long)r.size, (unsigned long long)r.gen,
		       (r.flags & GDRHOOK_RANGE_VOLATILE) ? ", volatile" : "");
	else
		printf("%-32s %p  registry: not tracked (%s)\n", what, p,
		       rc == -ENOENT ? "ENOENT" : rc == -ESTALE ? "ESTALE" :
		       "error");
}

int main(void)
{
	struct cudaMemPoolProps props;
	void *a, *b, *async, *host, *p1, *p2;
	cudaMemPool_t pool;
	cudaStream_t stream;
	int ndev = 0;

	have_gh = gdrhook_preload_open(&gh) == 0;
	printf("gdrhook %s\n", have_gh ? "is preloaded" : "is not loaded");
	CK(cudaGetDeviceCount(&ndev));
	printf("%d CUDA device(s)\n", ndev);
	CK(cudaSetDevice(0));

	/* Plain device memory; the driver hands the address out again. */
	CK(cudaMalloc(&a, 1 << 20));
	show("cudaMalloc 1 MiB", a);
	CK(cudaFree(a));
	show("after cudaFree", a);
	CK(cudaMalloc(&b, 1 << 20));
	show(b == a ? "cudaMalloc again (same address)" :
	     "cudaMalloc again", b);

	/* Stream-ordered allocation from the device's default pool. */
	CK(cudaStreamCreate(&stream));
	CK(cudaMallocAsync(&async, 1 << 20, stream));
	show("cudaMallocAsync 1 MiB", async);
	CK(cudaFreeAsync(async, stream));
	CK(cudaStreamSynchronize(stream));

	/* Page-locked host memory. */
	CK(cudaMallocHost(&host, 64 << 10));
	show("cudaMallocHost 64 KiB", host);
	CK(cudaFreeHost(host));

	/* A pool of our own: allocate, free, trim to nothing, destroy. */
	memset(&props, 0, sizeof(props));
	props.allocType = cudaMemAllocationTypePinned;
	props.handleTypes = cudaMemHandleTypeNone;
	props.location.type = cudaMemLocationTypeDevice;
	props.location.id = 0;
	CK(cudaMemPoolCreate(&pool, &props));
	CK(cudaMallocFromPoolAsync(&p1, 256 << 10, pool, stream));
	CK(cudaMallocFromPoolAsync(&p2, 256 << 10, pool, stream));
	show("cudaMallocFromPoolAsync #1", p1);
	show("cudaMallocFromPoolAsync #2", p2);
	CK(cudaFreeAsync(p1, stream));
	CK(cudaFreeAsync(p2, stream));
	CK(cudaStreamSynchronize(stream));
	CK(cudaMemPoolTrimTo(pool, 0));
	CK(cudaMemPoolDestroy(pool));

	CK(cudaStreamDestroy(stream));
	show("still live", b);
	CK(cudaFree(b));
	show("after the last cudaFree", b);

	if (have_gh) {
		struct gdrhook_stats st;

		memset(&st, 0, sizeof(st));
		st.size = sizeof(st);
		if (gh.get_stats(&st) == 0)
			printf("gdrhook saw %llu allocations and %llu frees; "
			       "%llu live; registry %s\n",
			       (unsigned long long)st.allocs,
			       (unsigned long long)st.frees,
			       (unsigned long long)st.live,
			       gh.trusted() ? "trusted" : "UNTRUSTED");
	}
	return 0;
}
