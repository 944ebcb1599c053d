/* SPDX-License-Identifier: MIT */
/*
 * Test hooks exported by the fake libcuda.so.1 (tests/fake).  Declare
 * them weak in code that may also run against the real driver.
 */
#ifndef FAKECUDA_H
#define FAKECUDA_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Kinds reported in struct fakecuda_live.kind. */
enum {
	FAKECUDA_DEVICE = 1,	/* cuMemAlloc_v2, cuMemAllocPitch_v2 */
	FAKECUDA_MANAGED,	/* cuMemAllocManaged */
	FAKECUDA_POOL,		/* cuMemAllocAsync, cuMemAllocFromPoolAsync */
	FAKECUDA_HOST_ALLOC,	/* cuMemAllocHost_v2, cuMemHostAlloc */
	FAKECUDA_HOST_REG,	/* cuMemHostRegister_v2 */
	FAKECUDA_VMM,		/* one cuMemMap'd range */
	FAKECUDA_IPC,		/* cuIpcOpenMemHandle_v2 */
	FAKECUDA_GRAPH,		/* a launched graph memory node */
	FAKECUDA_EXTERNAL,	/* cuExternalMemoryGetMappedBuffer */
	FAKECUDA_GLOBAL,	/* cuModuleGetGlobal_v2, cuLibraryGet* */
	FAKECUDA_POOL_IMPORT,	/* cuMemPoolImportPointer */
};

struct fakecuda_live {
	CUdeviceptr base;
	size_t size;
	unsigned long long buffer_id;
	CUcontext ctx;		/* NULL for VMM mappings */
	int kind;
	int device;
};

typedef void (*fakecuda_live_cb)(CUdeviceptr base, size_t size,
				 unsigned long long buffer_id, CUcontext ctx,
				 void *arg);

/* How many times the exported symbol @sym was entered (0 if never). */
unsigned long fakecuda_calls(const char *sym);
void fakecuda_reset_calls(void);
/* The next @n calls of @sym return @rc without any side effect. */
void fakecuda_fail_next(const char *sym, CUresult rc, int n);
/*
 * The next @n calls of @sym that take the double's lock send @sig to the
 * calling thread while they hold it: its handler runs as the call drops
 * the lock, still inside the call (the double's calls are safe to make
 * from a handler that interrupted one on the same thread).
 */
void fakecuda_signal_in_lock(const char *sym, int sig, int n);
/*
 * The next call of @sym waits at its entry, before it does anything and
 * holding no lock of the double, until fakecuda_unstall(): a driver call
 * that takes as long as a test needs (a free waiting for the device, a
 * large cuMemHostRegister).  fakecuda_stalled(): calls waiting now.
 */
void fakecuda_stall_next(const char *sym);
/* ... at its exit instead: its work is done (memory mapped), the caller
 * has not heard of it yet. */
void fakecuda_stall_next_exit(const char *sym);
int fakecuda_stalled(void);
void fakecuda_unstall(void);
/* Every driver call sets errno to @e just before returning; e < 0: off. */
void fakecuda_set_errno(int e);
/* Live allocations: every kind above, host registrations included. */
size_t fakecuda_live_count(void);
size_t fakecuda_live_bytes(void);
/* Calls @cb once per live allocation, without the fake's lock held. */
void fakecuda_foreach_live(fakecuda_live_cb cb, void *arg);
/* Copies up to @max records, returns how many are live. */
size_t fakecuda_snapshot(struct fakecuda_live *out, size_t max);
/*
 * DMA-BUF stand-in: fds from cuMemGetHandleForAddressRange are a fresh
 * open of the backing memfd; the range begins at *@off within it.
 * Returns 0, or -1 if @fd did not come from the fake.
 */
int fakecuda_dmabuf_offset(int fd, uint64_t *off);
/* ... and the device address the export began at (what a NIC holding
 * the dma-buf reaches), or -1. */
int fakecuda_dmabuf_address(int fd, uint64_t *va);

/*
 * Exported by the fake libcudart.so.13: resolve the plain entry points'
 * driver table as if the program were built with per-thread default
 * stream (same as FAKECUDART_PTDS=1).  Call before the first CUDA call.
 */
void cudaFakeSetPerThread(int on);
/* Calls of cudaPointerGetAttributes that reached the runtime double. */
unsigned long cudaFakePointerQueries(void);
#ifdef __CUDA_RUNTIME_API_H__
/* The runtime double's own cudaPointerGetAttributes, never interposed. */
cudaError_t cudaFakePointerGetAttributes(struct cudaPointerAttributes *attr,
					 const void *ptr);
#endif

#ifdef __cplusplus
}
#endif

#endif
