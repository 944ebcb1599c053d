/* SPDX-License-Identifier: MIT */
/*
 * Fake CUDA driver: DMA-BUF export, legacy IPC, pool export and import.
 */
#include "fakecuda_internal.h"
#include "fakecuda.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------- DMA-BUF */

/* Highest address an export through a may reach. */
static uintptr_t export_limit(const struct fc_alloc *a)
{
	/*
	 * Measured on the H100 (tests/fake/probe.c): a sub-allocated
	 * buffer's page- and 64 KiB-rounded ranges export, neighbours and
	 * all: the limit is its 2 MiB chunk.  A whole allocation exports its
	 * rounded span (its tail page past the size asked is inferred).
	 */
	if (a->small)
		return (a->base & ~(uintptr_t)(FC_GRAN - 1)) + FC_GRAN;
	if (a->kind == FC_K_VMM || a->span_base != a->base)
		return a->base + a->size;
	return a->span_base + a->span;
}

/* File and byte offset behind [p, p + len), or -1. */
static int backing_of(uintptr_t p, size_t len, uint64_t *off)
{
	struct fc_alloc *a = fc_find(p);
	int d;

	/* a rounded range may start in a free gap of a small chunk */
	if (!a && len) {
		a = fc_find(p + len - 1);
		if (a && (!a->small ||
			  p < (a->base & ~(uintptr_t)(FC_GRAN - 1))))
			a = NULL;
	}
	if (!a || p + len > export_limit(a))
		return -1;
	if (a->kind == FC_K_VMM) {
		*off = a->map_offset + (p - a->base);
		return a->vmmh->fd;
	}
	if (a->kind != FC_K_DEVICE && a->kind != FC_K_POOL &&
	    a->kind != FC_K_MANAGED)
		return -1;
	d = fc_dev_of(p);
	if (d < 0)
		return -1;
	*off = p - fc.dev[d].lo;
	return fc.dev[d].memfd;
}

static int reopen_fd(int fd)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	return open(path, O_RDWR | O_CLOEXEC);
}

/*
 * Not a real dma-buf: a fresh open of the backing memfd (mmap-able, with
 * the range at *off within it; see fakecuda_dmabuf_offset()).
 */
FC_API CUresult CUDAAPI cuMemGetHandleForAddressRange(
	void *handle, CUdeviceptr dptr, size_t size,
	CUmemRangeHandleType handleType, unsigned long long flags)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	CUresult rc = CUDA_SUCCESS;
	uint64_t off = 0;
	int bfd, fd;

	FC_ENTER_INIT();
	if (!handle || !size || dptr % pg || size % pg ||
	    handleType != CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD ||
	    (flags & ~(unsigned long long)CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE))
		return CUDA_ERROR_INVALID_VALUE;
	rc = fc_dmabuf_flags(flags);
	if (rc)
		return rc;
	fc_lock();
	bfd = backing_of(dptr, size, &off);
	if (bfd < 0) {
		rc = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	fd = reopen_fd(bfd);
	if (fd < 0) {
		rc = CUDA_ERROR_OPERATING_SYSTEM;
		goto out;
	}
	/*
	 * The export is known by its open file, not its number: a holder
	 * may dup it elsewhere and close the first (gdrhook keeps its own
	 * exports above the numbers programs use).  Its file position (which
	 * dups share and mmap leaves alone) is the export's sequence number.
	 */
	{
		uint64_t seq = ++fc.dmabuf_seq;
		size_t n = sizeof(fc.dmabuf) / sizeof(fc.dmabuf[0]);

		if (lseek(fd, (off_t)seq, SEEK_SET) != (off_t)seq) {
			close(fd);
			rc = CUDA_ERROR_OPERATING_SYSTEM;
			goto out;
		}
		fc.dmabuf[seq % n].seq = seq;
		fc.dmabuf[seq % n].off = off;
		fc.dmabuf[seq % n].va = dptr;
	}
	*(int *)handle = fd;
out:
	fc_unlock();
	return rc;
}

/* The export fd is (by its file position, see above), or -1. */
static int export_of(int fd)
{
	size_t n = sizeof(fc.dmabuf) / sizeof(fc.dmabuf[0]);
	off_t pos = fd >= 0 ? lseek(fd, 0, SEEK_CUR) : -1;

	if (pos <= 0 || fc.dmabuf[(uint64_t)pos % n].seq != (uint64_t)pos)
		return -1;
	return (int)((uint64_t)pos % n);
}

FC_API int fakecuda_dmabuf_offset(int fd, uint64_t *off)
{
	int i;

	fc_lock();
	i = export_of(fd);
	if (i >= 0)
		*off = fc.dmabuf[i].off;
	fc_unlock();
	return i >= 0 ? 0 : -1;
}

FC_API int fakecuda_dmabuf_address(int fd, uint64_t *va)
{
	int i;

	fc_lock();
	i = export_of(fd);
	if (i >= 0)
		*va = fc.dmabuf[i].va;
	fc_unlock();
	return i >= 0 ? 0 : -1;
}

/* ------------------------------------------------------------------ IPC */

#define FC_IPC_MAGIC 0x46434950u	/* "FCIP" */

struct fc_ipc {
	uint32_t magic;
	int32_t pid;
	int32_t fd;		/* the exporter's device memfd */
	int32_t dev;
	uint64_t file_off;	/* 2 MiB-aligned start of what to map */
	uint64_t map_len;
	uint64_t inner;		/* allocation start within the mapping */
	uint64_t size;
	uint64_t buffer_id;
};

_Static_assert(sizeof(struct fc_ipc) <= CU_IPC_HANDLE_SIZE, "ipc handle");

FC_API CUresult CUDAAPI cuIpcGetMemHandle(CUipcMemHandle *pHandle,
					  CUdeviceptr dptr)
{
	struct fc_ipc h;
	struct fc_alloc *a;
	CUresult rc = CUDA_SUCCESS;
	uintptr_t start;

	FC_ENTER_INIT();
	if (!pHandle)
		return CUDA_ERROR_INVALID_VALUE;
	fc_lock();
	a = fc_find(dptr);
	if (!a || a->kind != FC_K_DEVICE) {
		rc = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	start = a->small ? (a->base & ~(FC_GRAN - 1)) : a->span_base;
	memset(&h, 0, sizeof(h));
	h.magic = FC_IPC_MAGIC;
	h.pid = (int32_t)getpid();
	h.fd = fc.dev[a->dev].memfd;
	h.dev = a->dev;
	h.file_off = start - fc.dev[a->dev].lo;
	h.map_len = a->small ? FC_GRAN : a->span;
	h.inner = a->base - start;
	h.size = a->size;
	h.buffer_id = a->buffer_id;
	memset(pHandle, 0, sizeof(*pHandle));
	memcpy(pHandle->reserved, &h, sizeof(h));
out:
	fc_unlock();
	return rc;
}

static CUresult ipc_open(CUdeviceptr *pdptr, CUipcMemHandle handle,
			 unsigned int flags)
{
	struct fc_alloc *a;
	struct fc_ipc h;
	CUcontext ctx;
	char path[64];
	uintptr_t va;
	CUresult rc;
	int fd;

	memcpy(&h, handle.reserved, sizeof(h));
	if (fc_check_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	fc_lock();
	rc = fc_current_ctx(&ctx);
	if (rc)
		goto out;
	if (!pdptr || h.magic != FC_IPC_MAGIC ||
	    (flags & ~CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)) {
		rc = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	if (h.pid == getpid() && !fc.ipc_same_process) {
		rc = CUDA_ERROR_INVALID_CONTEXT;	/* what 580 returns */
		goto out;
	}
	/* one mapping per (exporter, buffer), reference counted */
	for (size_t i = 0; i < fc.na; i++) {
		a = fc.a[i];
		if (a->kind == FC_K_IPC && a->ipc_pid == h.pid &&
		    a->ipc_buffer_id == h.buffer_id) {
			a->ipc_refs++;
			*pdptr = a->base;
			goto out;
		}
	}
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)h.pid, (int)h.fd);
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		rc = CUDA_ERROR_INVALID_HANDLE;
		goto out;
	}
	rc = fc_dev_take_va(ctx->dev, h.map_len, &va);
	if (rc) {
		close(fd);
		goto out;
	}
	if (mmap((void *)va, h.map_len, PROT_READ | PROT_WRITE,
		 MAP_SHARED | MAP_FIXED, fd, h.file_off) == MAP_FAILED) {
		close(fd);
		fc_dev_put_va(ctx->dev, va, h.map_len);
		rc = CUDA_ERROR_MAP_FAILED;
		goto out;
	}
	close(fd);
	a = fc_reg_add(FC_K_IPC, va + h.inner, h.size, ctx->dev, ctx);
	if (!a) {
		fc_dev_put_va(ctx->dev, va, h.map_len);
		rc = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	a->span_base = va;
	a->span = h.map_len;
	a->ipc_refs = 1;
	a->ipc_pid = h.pid;
	a->ipc_buffer_id = h.buffer_id;
	*pdptr = a->base;
out:
	fc_unlock();
	return rc;
}

FC_FORWARD(FC_ENTER, cuIpcOpenMemHandle_v2,
	   (CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags),
	   ipc_open(pdptr, handle, Flags))
FC_FORWARD(FC_ENTER, cuIpcOpenMemHandle,
	   (CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags),
	   ipc_open(pdptr, handle, Flags))

FC_API CUresult CUDAAPI cuIpcCloseMemHandle(CUdeviceptr dptr)
{
	struct fc_alloc *a;
	CUresult rc = CUDA_SUCCESS;

	FC_ENTER_INIT();
	fc_lock();
	a = fc_find(dptr);
	if (!a || a->kind != FC_K_IPC || a->base != dptr) {
		rc = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	if (!--a->ipc_refs)
		fc_release_alloc(a);
out:
	fc_unlock();
	return rc;
}

/* ---------------------------------------------------- pool export/import */

/*
 * A pool exports as a POSIX fd of its device's memfd; a pointer exports as
 * where its block lies in that file.  The importer maps those pages at a
 * fresh address (FAKECUDA_POOL_IMPORT), freed by cuMemFree/cuMemFreeAsync
 * in the importing process.  Pools cannot allocate once imported.
 */
#define FC_PPTR_MAGIC 0x46435050u	/* "FCPP" */

struct fc_pool_ptr {
	uint32_t magic;
	int32_t dev;
	uint64_t file_off;
	uint64_t map_len;
	uint64_t inner;
	uint64_t size;
};

_Static_assert(sizeof(struct fc_pool_ptr) <= sizeof(CUmemPoolPtrExportData),
	       "pool pointer export data");

FC_API CUresult CUDAAPI cuMemPoolExportToShareableHandle(void *handle_out,
		CUmemoryPool pool, CUmemAllocationHandleType handleType,
		unsigned long long flags)
{
	CUresult rc = CUDA_SUCCESS;
	int fd;

	FC_ENTER_INIT();
	if (!handle_out || flags ||
	    handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
		return CUDA_ERROR_INVALID_VALUE;
	fc_lock();
	if (!pool || pool->magic != FC_POOL_MAGIC || !pool->alive ||
	    pool->import_fd >= 0 || !(pool->handle_types & handleType)) {
		rc = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	fd = fcntl(fc.dev[pool->dev].memfd, F_DUPFD_CLOEXEC, 0);
	if (fd < 0) {
		rc = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	*(int *)handle_out = fd;
out:
	fc_unlock();
	return rc;
}

FC_API CUresult CUDAAPI cuMemPoolImportFromShareableHandle(
		CUmemoryPool *pool_out, void *handle,
		CUmemAllocationHandleType handleType, unsigned long long flags)
{
	CUmemoryPool p;
	CUcontext ctx;
	CUresult rc;
	int fd = (int)(uintptr_t)handle;

	FC_ENTER_INIT();
	if (!pool_out || flags ||
	    handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR || fd < 0)
		return CUDA_ERROR_INVALID_VALUE;
	p = malloc(sizeof(*p));
	if (!p)
		return CUDA_ERROR_OUT_OF_MEMORY;
	fc_lock();
	rc = fc_current_ctx(&ctx);
	if (!rc) {
		fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
		rc = fd < 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
	}
	if (rc) {
		fc_unlock();
		free(p);
		return rc;
	}
	fc_pool_init(p, ctx->dev, 0);
	p->import_fd = fd;
	fc_unlock();
	*pool_out = p;
	return CUDA_SUCCESS;
}

FC_API CUresult CUDAAPI cuMemPoolExportPointer(
		CUmemPoolPtrExportData *shareData_out, CUdeviceptr ptr)
{
	struct fc_pool_ptr d;
	struct fc_alloc *a;
	CUresult rc = CUDA_SUCCESS;
	uintptr_t start;

	FC_ENTER_INIT();
	if (!shareData_out)
		return CUDA_ERROR_INVALID_VALUE;
	fc_lock();
	a = fc_find(ptr);
	if (!a || a->kind != FC_K_POOL || a->base != ptr ||
	    !(a->pool->handle_types & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)) {
		rc = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	start = a->small ? (a->base & ~(FC_GRAN - 1)) : a->span_base;
	memset(&d, 0, sizeof(d));
	d.magic = FC_PPTR_MAGIC;
	d.dev = a->dev;
	d.file_off = start - fc.dev[a->dev].lo;
	d.map_len = a->small ? FC_GRAN : a->span;
	d.inner = a->base - start;
	d.size = a->size;
	memset(shareData_out, 0, sizeof(*shareData_out));
	memcpy(shareData_out->reserved, &d, sizeof(d));
out:
	fc_unlock();
	return rc;
}

FC_API CUresult CUDAAPI cuMemPoolImportPointer(CUdeviceptr *ptr_out,
					       CUmemoryPool pool,
					       CUmemPoolPtrExportData *shareData)
{
	struct fc_pool_ptr d;
	struct fc_alloc *a;
	CUcontext ctx;
	uintptr_t va;
	CUresult rc;

	FC_ENTER_INIT();
	if (!ptr_out || !shareData)
		return CUDA_ERROR_INVALID_VALUE;
	memcpy(&d, shareData->reserved, sizeof(d));
	fc_lock();
	rc = fc_current_ctx(&ctx);
	if (rc)
		goto out;
	if (!pool || pool->magic != FC_POOL_MAGIC || !pool->alive ||
	    pool->import_fd < 0 || d.magic != FC_PPTR_MAGIC) {
		rc = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	rc = fc_dev_take_va(ctx->dev, d.map_len, &va);
	if (rc)
		goto out;
	if (mmap((void *)va, d.map_len, PROT_READ | PROT_WRITE,
		 MAP_SHARED | MAP_FIXED, pool->import_fd,
		 (off_t)d.file_off) == MAP_FAILED) {
		fc_dev_put_va(ctx->dev, va, d.map_len);
		rc = CUDA_ERROR_MAP_FAILED;
		goto out;
	}
	a = fc_reg_add(FC_K_POOL_IMPORT, va + d.inner, d.size, ctx->dev, ctx);
	if (!a) {
		fc_dev_put_va(ctx->dev, va, d.map_len);
		rc = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	a->span_base = va;
	a->span = d.map_len;
	*ptr_out = a->base;
out:
	fc_unlock();
	return rc;
}
