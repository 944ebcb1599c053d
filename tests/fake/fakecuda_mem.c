/* SPDX-License-Identifier: MIT */
/*
 * Fake CUDA driver: "GPU memory".
 *
 * Layout: one PROT_NONE reservation of FC_DEV_SPAN bytes per device plus
 * one for VMM address reservations.  Device d's span is backed by a memfd
 * (offset = address - span start), mapped MAP_SHARED only while in use, so
 * that IPC importers can map the same pages and the pages are ordinary
 * shmem that ibverbs (soft-RoCE) can pin.
 *
 * Allocations under 2 MiB are carved with 512 B granularity from 2 MiB
 * chunks; larger ones are rounded to 2 MiB.  Freed addresses go to LIFO
 * free lists keyed by rounded size, so free + alloc of the same size
 * returns the same address (as the real driver does) with a new buffer ID.
 * A freed large span gets its pages punched out and is remapped PROT_NONE
 * (use-after-free faults; a later allocation sees fresh zero pages); a
 * freed small block is zeroed.
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

static size_t round_up(size_t v, size_t a)
{
	return (v + a - 1) / a * a;
}

/* -------------------------------------------------------- free-list sets */

static struct fc_freelist *fl_find(struct fc_flset *s, size_t size, int create)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->l[i].size == size)
			return &s->l[i];
	if (!create)
		return NULL;
	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 16;
		struct fc_freelist *l = realloc(s->l, cap * sizeof(*l));

		if (!l)
			return NULL;
		s->l = l;
		s->cap = cap;
	}
	memset(&s->l[s->n], 0, sizeof(s->l[0]));
	s->l[s->n].size = size;
	return &s->l[s->n++];
}

static int fl_push(struct fc_flset *s, size_t size, uintptr_t v)
{
	struct fc_freelist *l = fl_find(s, size, 1);

	if (!l)
		return -1;
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 16;
		uintptr_t *nv = realloc(l->v, cap * sizeof(*nv));

		if (!nv)
			return -1;
		l->v = nv;
		l->cap = cap;
	}
	l->v[l->n++] = v;
	return 0;
}

static int fl_pop(struct fc_flset *s, size_t size, uintptr_t *v)
{
	struct fc_freelist *l = fl_find(s, size, 0);

	if (!l || !l->n)
		return 0;
	*v = l->v[--l->n];
	return 1;
}

static void fl_drop(struct fc_flset *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->l[i].v);
	free(s->l);
	memset(s, 0, sizeof(*s));
}

/* ------------------------------------------------------------ VA region */

CUresult fc_region_init(void)
{
	size_t spans = (size_t)fc.ndev + 1;
	size_t size = spans * FC_DEV_SPAN;
	uintptr_t raw, base;
	void *p;

	p = mmap(NULL, size + FC_GRAN, PROT_NONE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return CUDA_ERROR_OUT_OF_MEMORY;
	raw = (uintptr_t)p;
	base = round_up(raw, FC_GRAN);
	if (base > raw)
		munmap(p, base - raw);
	if (raw + FC_GRAN > base)
		munmap((void *)(base + size), raw + FC_GRAN - base);
	fc.region = base;
	fc.region_size = size;
	for (int d = 0; d < fc.ndev; d++) {
		struct fc_dev *D = &fc.dev[d];
		char name[32];

		snprintf(name, sizeof(name), "fakecuda-gpu%d", d);
		D->lo = base + (size_t)d * FC_DEV_SPAN;
		D->hi = D->lo + FC_DEV_SPAN;
		/* leave the first granule unused: no allocation at span start */
		D->bump = D->lo + FC_GRAN;
		D->memfd = memfd_create(name, MFD_CLOEXEC);
		if (D->memfd < 0 || ftruncate(D->memfd, FC_DEV_SPAN) < 0)
			return CUDA_ERROR_OUT_OF_MEMORY;
	}
	fc.vmm_lo = base + (size_t)fc.ndev * FC_DEV_SPAN;
	fc.vmm_hi = fc.vmm_lo + FC_DEV_SPAN;
	fc.vmm_bump = fc.vmm_lo + FC_GRAN;
	fc_log("region %zu GiB, %d devices", size >> 30, fc.ndev);
	return CUDA_SUCCESS;
}

static int dev_of(uintptr_t p)
{
	if (p < fc.region || p >= fc.region + (size_t)fc.ndev * FC_DEV_SPAN)
		return -1;
	return (int)((p - fc.region) / FC_DEV_SPAN);
}

static void unmap_to_reserved(uintptr_t va, size_t len)
{
	mmap((void *)va, len, PROT_NONE,
	     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
}

/* Take @span bytes of VA of device @d (not backed). */
static CUresult dev_take_va(int d, size_t span, uintptr_t *out)
{
	struct fc_dev *D = &fc.dev[d];
	uintptr_t va;

	if (!fl_pop(&D->big_free, span, &va)) {
		if (D->bump + span > D->hi)
			return CUDA_ERROR_OUT_OF_MEMORY;
		va = D->bump;
		D->bump += span;
	}
	*out = va;
	return CUDA_SUCCESS;
}

static void dev_put_va(int d, uintptr_t va, size_t span)
{
	unmap_to_reserved(va, span);
	fl_push(&fc.dev[d].big_free, span, va);
}

/* VA plus committed pages from the device memfd. */
static CUresult dev_alloc_span(int d, size_t span, uintptr_t *out)
{
	struct fc_dev *D = &fc.dev[d];
	uintptr_t va;
	CUresult rc = dev_take_va(d, span, &va);

	if (rc)
		return rc;
	if (mmap((void *)va, span, PROT_READ | PROT_WRITE,
		 MAP_SHARED | MAP_FIXED, D->memfd, va - D->lo) == MAP_FAILED) {
		fl_push(&D->big_free, span, va);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	*out = va;
	return CUDA_SUCCESS;
}

static void dev_free_span(int d, uintptr_t va, size_t span)
{
	struct fc_dev *D = &fc.dev[d];

	fallocate(D->memfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
		  va - D->lo, span);
	dev_put_va(d, va, span);
}

/* Device memory block: small (< 2 MiB) from chunks, else whole spans. */
static CUresult dev_block_alloc(int d, size_t size, uintptr_t *va,
				size_t *span, int *small)
{
	struct fc_dev *D = &fc.dev[d];
	size_t rs = round_up(size, FC_SMALL_ALIGN);
	CUresult rc;

	if (size > FC_DEV_SPAN)
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (rs >= FC_GRAN) {
		*span = round_up(size, FC_GRAN);
		*small = 0;
		return dev_alloc_span(d, *span, va);
	}
	*span = rs;
	*small = 1;
	if (fl_pop(&D->small_free, rs, va))
		return CUDA_SUCCESS;
	if (!D->chunk || D->chunk_off + rs > FC_GRAN) {
		rc = dev_alloc_span(d, FC_GRAN, &D->chunk);
		if (rc) {
			D->chunk = 0;
			return rc;
		}
		D->chunk_off = 0;
	}
	*va = D->chunk + D->chunk_off;
	D->chunk_off += rs;
	return CUDA_SUCCESS;
}

static void dev_block_free(int d, uintptr_t va, size_t span, int small)
{
	if (small) {
		memset((void *)va, 0, span);
		fl_push(&fc.dev[d].small_free, span, va);
	} else {
		dev_free_span(d, va, span);
	}
}

/* ------------------------------------------------------------- registry */

static size_t reg_lower(uintptr_t p)	/* first index with base > p */
{
	size_t lo = 0, hi = fc.na;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (fc.a[mid]->base <= p)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

struct fc_alloc *fc_find(uintptr_t p)
{
	size_t i = reg_lower(p);
	struct fc_alloc *a;

	if (!i)
		return NULL;
	a = fc.a[i - 1];
	return p < a->base + a->size ? a : NULL;
}

/* Any record intersecting [p, p + len)? */
static struct fc_alloc *reg_overlap(uintptr_t p, size_t len)
{
	size_t i = reg_lower(p + len - 1);
	struct fc_alloc *a;

	if (!i)
		return NULL;
	a = fc.a[i - 1];
	return a->base + a->size > p ? a : NULL;
}

static struct fc_alloc *reg_add(enum fc_kind kind, uintptr_t base, size_t size,
				int dev, CUcontext ctx)
{
	struct fc_alloc *a = calloc(1, sizeof(*a));
	size_t i;

	if (!a)
		return NULL;
	if (fc.na == fc.capa) {
		size_t cap = fc.capa ? 2 * fc.capa : 256;
		struct fc_alloc **v = realloc(fc.a, cap * sizeof(*v));

		if (!v) {
			free(a);
			return NULL;
		}
		fc.a = v;
		fc.capa = cap;
	}
	a->kind = kind;
	a->base = base;
	a->size = size;
	a->dev = dev;
	a->ctx = ctx;
	a->buffer_id = fc.next_buffer_id++;
	i = reg_lower(base);
	memmove(&fc.a[i + 1], &fc.a[i], (fc.na - i) * sizeof(*fc.a));
	fc.a[i] = a;
	fc.na++;
	fc.live_bytes += size;
	return a;
}

static void reg_del(struct fc_alloc *a)
{
	size_t i = reg_lower(a->base);

	if (i && fc.a[i - 1] == a) {
		memmove(&fc.a[i - 1], &fc.a[i], (fc.na - i) * sizeof(*fc.a));
		fc.na--;
		fc.live_bytes -= a->size;
	}
	free(a);
}

/* --------------------------------------------------------------- pools */

void fc_pool_init(struct CUmemPoolHandle_st *p, int dev, int is_default)
{
	memset(p, 0, sizeof(*p));
	p->magic = FC_POOL_MAGIC;
	p->dev = dev;
	p->alive = 1;
	p->is_default = is_default;
	p->reuse_follow_event = 1;
	p->reuse_opportunistic = 1;
	p->reuse_internal = 1;
	p->next = fc.pools;
	fc.pools = p;
}

static int pool_valid(CUmemoryPool p)
{
	return p && p->magic == FC_POOL_MAGIC && p->alive;
}

/* Give cached blocks back to the device until @keep bytes remain. */
static void pool_trim(CUmemoryPool p, size_t keep)
{
	for (size_t i = 0; i < p->cache.n && p->cached_bytes > keep; i++) {
		struct fc_freelist *l = &p->cache.l[i];

		while (l->n && p->cached_bytes > keep) {
			uintptr_t va = l->v[--l->n];

			dev_block_free(p->dev, va, l->size, l->size < FC_GRAN);
			p->cached_bytes -= l->size;
		}
	}
}

void fc_pool_release_to_threshold(int dev)
{
	for (CUmemoryPool p = fc.pools; p; p = p->next)
		if (p->dev == dev && p->alive &&
		    p->cached_bytes > p->release_threshold)
			pool_trim(p, p->release_threshold);
}

static CUresult pool_alloc(CUmemoryPool p, size_t size, CUcontext ctx,
			   CUdeviceptr *dptr)
{
	size_t rs = round_up(size, FC_SMALL_ALIGN);
	struct fc_alloc *a;
	uintptr_t va;
	size_t span;
	int small;
	CUresult rc;

	if (rs >= FC_GRAN)
		rs = round_up(size, FC_GRAN);
	if (fl_pop(&p->cache, rs, &va)) {
		p->cached_bytes -= rs;
		span = rs;
		small = rs < FC_GRAN;
	} else {
		rc = dev_block_alloc(p->dev, size, &va, &span, &small);
		if (rc)
			return rc;
	}
	a = reg_add(FC_K_POOL, va, size, p->dev, ctx);
	if (!a) {
		dev_block_free(p->dev, va, span, small);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	a->span_base = va;
	a->span = span;
	a->small = small;
	a->pool = p;
	p->used_bytes += span;
	if (p->used_bytes > p->high_used)
		p->high_used = p->used_bytes;
	if (p->used_bytes + p->cached_bytes > p->high_reserved)
		p->high_reserved = p->used_bytes + p->cached_bytes;
	*dptr = va;
	return CUDA_SUCCESS;
}

/* ------------------------------------------------------------- freeing */

static void release_alloc(struct fc_alloc *a)
{
	switch (a->kind) {
	case FC_K_DEVICE:
	case FC_K_MANAGED:
		dev_block_free(a->dev, a->span_base, a->span, a->small);
		break;
	case FC_K_POOL:
		a->pool->used_bytes -= a->span;
		if (a->pool->alive) {
			fl_push(&a->pool->cache, a->span, a->span_base);
			a->pool->cached_bytes += a->span;
		} else {
			dev_block_free(a->dev, a->span_base, a->span, a->small);
		}
		break;
	case FC_K_HOST_ALLOC:
		munmap((void *)a->span_base, a->span);
		break;
	case FC_K_HOST_REG:
		break;
	case FC_K_VMM:
		unmap_to_reserved(a->base, a->size);
		if (!--a->vmmh->refs) {
			close(a->vmmh->fd);
			a->vmmh->magic = 0;
			free(a->vmmh);
		}
		break;
	case FC_K_IPC:
		dev_put_va(a->dev, a->span_base, a->span);
		break;
	}
	reg_del(a);
}

/* Every allocation made in context @c (VMM mappings are not per context). */
void fc_free_ctx_allocs(CUcontext c)
{
	size_t i = 0;

	while (i < fc.na) {
		struct fc_alloc *a = fc.a[i];

		if (a->ctx == c && a->kind != FC_K_VMM)
			release_alloc(a);
		else
			i++;
	}
}

void fc_mem_fork_reset(void)
{
	if (fc.region)
		munmap((void *)fc.region, fc.region_size);
	for (int d = 0; d < fc.ndev; d++) {
		if (fc.dev[d].memfd > 0)
			close(fc.dev[d].memfd);
		fl_drop(&fc.dev[d].big_free);
		fl_drop(&fc.dev[d].small_free);
	}
	/* records, pools and contexts of the parent are leaked on purpose */
	memset(fc.dev, 0, sizeof(fc.dev));
	fl_drop(&fc.vmm_free);
	fc.region = 0;
	fc.region_size = 0;
	fc.a = NULL;
	fc.na = fc.capa = 0;
	fc.live_bytes = 0;
	fc.res = NULL;
	fc.nres = fc.capres = 0;
	fc.pools = NULL;
	fc.ndev = 0;
	fc.initialized = 0;
	memset(fc.dmabuf, 0, sizeof(fc.dmabuf));
}

/* --------------------------------------------------- common entry checks */

static CUresult stream_ctx(CUstream s, CUcontext *ctx)
{
	CUresult rc = fc_check_init();

	if (rc)
		return rc;
	if (!fc_stream_ok(s))
		return CUDA_ERROR_INVALID_HANDLE;
	if (s && s != CU_STREAM_LEGACY && s != CU_STREAM_PER_THREAD) {
		if (!s->ctx->alive)
			return CUDA_ERROR_CONTEXT_IS_DESTROYED;
		*ctx = s->ctx;
		return CUDA_SUCCESS;
	}
	return fc_current_ctx(ctx);
}

/* ------------------------------------------------------ linear memory */

static CUresult mem_alloc(CUdeviceptr *dptr, size_t size, enum fc_kind kind)
{
	struct fc_alloc *a;
	CUcontext ctx;
	uintptr_t va;
	size_t span;
	int small;
	CUresult rc;

	if (fc_check_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	fc_lock();
	rc = fc_current_ctx(&ctx);
	if (rc)
		goto out;
	if (!dptr || !size) {
		rc = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	rc = dev_block_alloc(ctx->dev, size, &va, &span, &small);
	if (rc)
		goto out;
	a = reg_add(kind, va, size, ctx->dev, ctx);
	if (!a) {
		dev_block_free(ctx->dev, va, span, small);
		rc = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	a->span_base = va;
	a->span = span;
	a->small = small;
	*dptr = va;
	fc_log("alloc %zu -> %#lx id %llu", size, (unsigned long)va,
	       a->buffer_id);
out:
	fc_unlock();
	return rc;
}

FC_API CUresult CUDAAPI cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
	FC_ENTER();
	return mem_alloc(dptr, bytesize, FC_K_DEVICE);
}

FC_API CUresult CUDAAPI cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch,
					   size_t WidthInBytes, size_t Height,
					   unsigned int ElementSizeBytes)
{
	size_t pitch;
	CUresult rc;

	FC_ENTER();
	if (fc_check_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!pPitch || !WidthInBytes || !Height ||
	    (ElementSizeBytes != 4 && ElementSizeBytes != 8 &&
	     ElementSizeBytes != 16))
		return CUDA_ERROR_INVALID_VALUE;
	pitch = round_up(WidthInBytes, 512);
	rc = mem_alloc(dptr, pitch * Height, FC_K_DEVICE);
	if (!rc)
		*pPitch = pitch;
	return rc;
}

FC_API CUresult CUDAAPI cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize,
					  unsigned int flags)
{
	FC_ENTER();
	if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST)
		return fc_check_init() ? CUDA_ERROR_NOT_INITIALIZED :
			CUDA_ERROR_INVALID_VALUE;
	return mem_alloc(dptr, bytesize, FC_K_MANAGED);
}

static CUresult mem_free(CUdeviceptr dptr, int async)
{
	struct fc_alloc *a;
	CUresult rc = CUDA_SUCCESS;

	if (fc_check_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!dptr)
		return CUDA_SUCCESS;
	fc_lock();
	a = fc_find(dptr);
	if (!a || a->base != dptr ||
	    (a->kind != FC_K_DEVICE && a->kind != FC_K_POOL &&
	     (async || a->kind != FC_K_MANAGED))) {
		rc = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	fc_log("free %#lx id %llu", (unsigned long)dptr, a->buffer_id);
	release_alloc(a);
out:
	fc_unlock();
	return rc;
}

FC_API CUresult CUDAAPI cuMemFree_v2(CUdeviceptr dptr)
{
	FC_ENTER();
	return mem_free(dptr, 0);
}

/* ------------------------------------------- legacy 32-bit ABI entries */

/*
 * CUdeviceptr_v1 is 32 bits wide; every fake device address is above
 * 4 GiB, so these can only refuse.  They exist so that resolvers and
 * interposers find the real set of names.
 */
FC_API CUresult CUDAAPI cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize)
{
	FC_ENTER();
	return CUDA_ERROR_NOT_SUPPORTED;
}

FC_API CUresult CUDAAPI cuMemAllocPitch(CUdeviceptr_v1 *dptr,
					unsigned int *pPitch,
					unsigned int WidthInBytes,
					unsigned int Height,
					unsigned int ElementSizeBytes)
{
	FC_ENTER();
	return CUDA_ERROR_NOT_SUPPORTED;
}

FC_API CUresult CUDAAPI cuMemFree(CUdeviceptr_v1 dptr)
{
	FC_ENTER();
	return dptr ? CUDA_ERROR_NOT_SUPPORTED : CUDA_SUCCESS;
}

FC_API CUresult CUDAAPI cuMemGetAddressRange(CUdeviceptr_v1 *pbase,
					     unsigned int *psize,
					     CUdeviceptr_v1 dptr)
{
	FC_ENTER();
	return CUDA_ERROR_NOT_SUPPORTED;
}

FC_API CUresult CUDAAPI cuMemHostGetDevicePointer(CUdeviceptr_v1 *pdptr,
						  void *p, unsigned int Flags)
{
	FC_ENTER();
	return CUDA_ERROR_NOT_SUPPORTED;
}

/* ----------------------------------------------------------- host memory */

static CUresult host_alloc(void **pp, size_t size, unsigned int flags)
{
	struct fc_alloc *a;
	CUcontext ctx;
	size_t span;
	void *p;
	CUresult rc;

	if (fc_check_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	fc_lock();
	rc = fc_current_ctx(&ctx);
	if (rc)
		goto out;
	if (!pp || !size || (flags & ~(CU_MEMHOSTALLOC_PORTABLE |
				      CU_MEMHOSTALLOC_DEVICEMAP |
				      CU_MEMHOSTALLOC_WRITECOMBINED))) {
		rc = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	span = round_up(size, (size_t)sysconf(_SC_PAGESIZE));
	p = mmap(NULL, span, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		rc = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	a = reg_add(FC_K_HOST_ALLOC, (uintptr_t)p, size, ctx->dev, ctx);
	if (!a) {
		munmap(p, span);
		rc = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	a->span_base = (uintptr_t)p;
	a->span = span;
	a->host_flags = flags;
	*pp = p;
out:
	fc_unlock();
	return rc;
}

FC_API CUresult CUDAAPI cuMemAllocHost_v2(void **pp, size_t bytesize)
{
	FC_ENTER();
	return host_alloc(pp, bytesize, 0);
}

FC_API CUresult CUDAAPI cuMemAllocHost(void **pp, unsigned int bytesize)
{
	FC_ENTER();
	return host_alloc(pp, bytesize, 0);
}

FC_API CUresult CUDAAPI cuMemHostAlloc(void **pp, size_t bytesize,
				       unsigned int Flags)
{
	FC_ENTER();
	return host_alloc(pp, bytesize, Flags);
}

FC_API CUresult CUDAAPI cuMemFreeHost(void *p)
{
	struct fc_alloc *a;
	CUresult rc = CUDA_SUCCESS;

	FC_ENTER();
	if (fc_check_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	fc_lock();
	a = fc_find((uintptr_t)p);
	if (!p || !a || a->base != (uintptr_t)p || a->kind != FC_K_HOST_ALLOC)
		rc = CUDA_ERROR_INVALID_VALUE;
	else
		release_alloc(a);
	fc_unlock();
	return rc;
}

static CUresult host_register(void *p, size_t size, unsigned int flags)
{
	struct fc_alloc *a;
	CUcontext ctx;
	CUresult rc;

	if (fc_check_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	fc_lock();
	rc = fc_current_ctx(&ctx);
	if (rc)
		goto out;
	if (!p || !size || (flags & ~0xfu)) {
		rc = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	a = reg_overlap((uintptr_t)p, size);
	if (a) {
		rc = a->kind == FC_K_HOST_REG ?
			CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED :
			CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	a = reg_add(FC_K_HOST_REG, (uintptr_t)p, size, ctx->dev, ctx);
	if (!a) {
		rc = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	a->host_flags = flags;
out:
	fc_unlock();
	return rc;
}

FC_API CUresult CUDAAPI cuMemHostRegister_v2(void *p, size_t bytesize,
					     unsigned int Flags)
{
	FC_ENTER();
	return host_register(p, bytesize, Flags);
}

FC_API CUresult CUDAAPI cuMemHostRegister(void *p, size_t bytesize,
					  unsigned int Flags)
{
	FC_ENTER();
	return host_register(p, bytesize, Flags);
}

FC_API CUresult CUDAAPI cuMemHostUnregister(void *p)
{
	struct fc_alloc *a;
	CUresult rc = CUDA_SUCCESS;

	FC_ENTER();
	if (fc_check_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	fc_lock();
	a = fc_find((uintptr_t)p);
	if (!a || a->kind != FC_K_HOST_REG)
		rc = CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
	else if (a->base != (uintptr_t)p)
		rc = CUDA_ERROR_INVALID_VALUE;
	else
		release_alloc(a);
	fc_unlock();
	return rc;
}

FC_API CUresult CUDAAPI cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p,
						     unsigned int Flags)
{
	struct fc_alloc *a;
	CUresult rc = CUDA_SUCCESS;

	FC_ENTER();
	if (fc_check_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!pdptr || Flags)
		return CUDA_ERROR_INVALID_VALUE;
	fc_lock();
	a = fc_find((uintptr_t)p);
	if (!a || (a->kind != FC_K_HOST_ALLOC && a->kind != FC_K_HOST_REG))
		rc = CUDA_ERROR_INVALID_VALUE;
	else
		*pdptr = (CUdeviceptr)p;
	fc_unlock();
	return rc;
}

FC_API CUresult CUDAAPI cuMemHostGetFlags(unsigned int *pFlags, void *p)
{
	struct fc_alloc *a;
	CUresult rc = CUDA_SUCCESS;

	FC_ENTER();
	if (fc_check_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!pFlags)
		return CUDA_ERROR_INVALID_VALUE;
	fc_lock();
	a = fc_find((uintptr_t)p);
	if (!a || a->kind != FC_K_HOST_ALLOC)
		rc = CUDA_ERROR_INVALID_VALUE;
	else
		*pFlags = a->host_flags;
	fc_unlock();
	return rc;
}

/* ------------------------------------------------- stream-ordered memory */

static CUresult alloc_async(CUdeviceptr *dptr, size_t size, CUmemoryPool pool,
			    CUstream s)
{
	CUcontext ctx = NULL;
	CUresult rc;

	if (fc_check_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	fc_lock();
	rc = stream_ctx(s, &ctx);
	if (rc)
		goto out;
	if (!dptr || !size) {
		rc = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	if (!pool)
		pool = fc.dev[ctx->dev].cur_pool;
	else if (!pool_valid(pool)) {
		rc = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	rc = pool_alloc(pool, size, ctx, dptr);
out:
	fc_unlock();
	return rc;
}

FC_API CUresult CUDAAPI cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize,
					CUstream hStream)
{
	FC_ENTER();
	return alloc_async(dptr, bytesize, NULL, hStream);
}

FC_API CUresult CUDAAPI cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize,
					     CUstream hStream)
{
	FC_ENTER();
	return alloc_async(dptr, bytesize, NULL, hStream);
}

static CUresult from_pool(CUdeviceptr *dptr, size_t size, CUmemoryPool pool,
			  CUstream s)
{
	if (!pool)
		return fc_check_init() ? CUDA_ERROR_NOT_INITIALIZED :
			CUDA_ERROR_INVALID_VALUE;
	return alloc_async(dptr, size, pool, s);
}

FC_API CUresult CUDAAPI cuMemAllocFromPoolAsync(CUdeviceptr *dptr,
						size_t bytesize,
						CUmemoryPool pool,
						CUstream hStream)
{
	FC_ENTER();
	return from_pool(dptr, bytesize, pool, hStream);
}

FC_API CUresult CUDAAPI cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr,
						     size_t bytesize,
						     CUmemoryPool pool,
						     CUstream hStream)
{
	FC_ENTER();
	return from_pool(dptr, bytesize, pool, hStream);
}

static CUresult free_async(CUdeviceptr dptr, CUstream s)
{
	if (fc_check_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!fc_stream_ok(s))
		return CUDA_ERROR_INVALID_HANDLE;
	if (!dptr)
		return CUDA_ERROR_INVALID_VALUE;
	return mem_free(dptr, 1);
}

FC_API CUresult CUDAAPI cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
	FC_ENTER();
	return free_async(dptr, hStream);
}

FC_API CUresult CUDAAPI cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
	FC_ENTER();
	return free_async(dptr, hStream);
}

FC_API CUresult CUDAAPI cuMemPoolCreate(CUmemoryPool *pool,
					const CUmemPoolProps *poolProps)
{
	CUmemoryPool p;

	FC_ENTER();
	if (fc_check_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!pool || !poolProps ||
	    poolProps->allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
	    poolProps->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
	    poolProps->location.id < 0 || poolProps->location.id >= fc.ndev)
		return CUDA_ERROR_INVALID_VALUE;
	p = malloc(sizeof(*p));
	if (!p)
		return CUDA_ERROR_OUT_OF_MEMORY;
	fc_lock();
	fc_pool_init(p, poolProps->location.id, 0);
	fc_unlock();
	*pool = p;
	return CUDA_SUCCESS;
}

/*
 * Like the real driver, destroying a pool with live allocations succeeds;
 * they stay valid and go straight back to the device when freed.
 */
FC_API CUresult CUDAAPI cuMemPoolDestroy(CUmemoryPool pool)
{
	CUresult rc = CUDA_SUCCESS;

	FC_ENTER();
	if (fc_check_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	fc_lock();
	if (!pool_valid(pool) || pool->is_default) {
		rc = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	pool_trim(pool, 0);
	pool->alive = 0;	/* never freed: stale handles stay detectable */
	if (fc.dev[pool->dev].cur_pool == pool)
		fc.dev[pool->dev].cur_pool = &fc.dev[pool->dev].default_pool;
out:
	fc_unlock();
	return rc;
}

FC_API CUresult CUDAAPI cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
	CUresult rc = CUDA_SUCCESS;

	FC_ENTER();
	if (fc_check_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	fc_lock();
	if (!pool_valid(pool))
		rc = CUDA_ERROR_INVALID_VALUE;
	else
		pool_trim(pool, minBytesToKeep);
	fc_unlock();
	return rc;
}

FC_API CUresult CUDAAPI cuMemPoolSetAttribute(CUmemoryPool pool,
					      CUmemPool_attribute attr,
					      void *value)
{
	CUresult rc = CUDA_SUCCESS;

	FC_ENTER();
	if (fc_check_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!value)
		return CUDA_ERROR_INVALID_VALUE;
	fc_lock();
	if (!pool_valid(pool)) {
		rc = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	switch (attr) {
	case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
		pool->reuse_follow_event = *(int *)value;
		break;
	case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
		pool->reuse_opportunistic = *(int *)value;
		break;
	case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
		pool->reuse_internal = *(int *)value;
		break;
	case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
		pool->release_threshold = *(cuuint64_t *)value;
		break;
	case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
		if (*(cuuint64_t *)value)
			rc = CUDA_ERROR_INVALID_VALUE;
		else
			pool->high_reserved = pool->used_bytes +
					      pool->cached_bytes;
		break;
	case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
		if (*(cuuint64_t *)value)
			rc = CUDA_ERROR_INVALID_VALUE;
		else
			pool->high_used = pool->used_bytes;
		break;
	default:
		rc = CUDA_ERROR_INVALID_VALUE;
	}
out:
	fc_unlock();
	return rc;
}

FC_API CUresult CUDAAPI cuMemPoolGetAttribute(CUmemoryPool pool,
					      CUmemPool_attribute attr,
					      void *value)
{
	CUresult rc = CUDA_SUCCESS;

	FC_ENTER();
	if (fc_check_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!value)
		return CUDA_ERROR_INVALID_VALUE;
	fc_lock();
	if (!pool_valid(pool)) {
		rc = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	switch (attr) {
	case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
		*(int *)value = pool->reuse_follow_event;
		break;
	case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
		*(int *)value = pool->reuse_opportunistic;
		break;
	case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
		*(int *)value = pool->reuse_internal;
		break;
	case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
		*(cuuint64_t *)value = pool->release_threshold;
		break;
	case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT:
		*(cuuint64_t *)value = pool->used_bytes + pool->cached_bytes;
		break;
	case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
		*(cuuint64_t *)value = pool->high_reserved;
		break;
	case CU_MEMPOOL_ATTR_USED_MEM_CURRENT:
		*(cuuint64_t *)value = pool->used_bytes;
		break;
	case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
		*(cuuint64_t *)value = pool->high_used;
		break;
	default:
		rc = CUDA_ERROR_INVALID_VALUE;
	}
out:
	fc_unlock();
	return rc;
}

FC_API CUresult CUDAAPI cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out,
						  CUdevice dev)
{
	FC_ENTER();
	if (fc_check_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (dev < 0 || dev >= fc.ndev)
		return CUDA_ERROR_INVALID_DEVICE;
	if (!pool_out)
		return CUDA_ERROR_INVALID_VALUE;
	*pool_out = &fc.dev[dev].default_pool;
	return CUDA_SUCCESS;
}

FC_API CUresult CUDAAPI cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
	FC_ENTER();
	if (fc_check_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (dev < 0 || dev >= fc.ndev)
		return CUDA_ERROR_INVALID_DEVICE;
	if (!pool)
		return CUDA_ERROR_INVALID_VALUE;
	fc_lock();
	*pool = fc.dev[dev].cur_pool;
	fc_unlock();
	return CUDA_SUCCESS;
}

FC_API CUresult CUDAAPI cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool)
{
	CUresult rc = CUDA_SUCCESS;

	FC_ENTER();
	if (fc_check_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (dev < 0 || dev >= fc.ndev)
		return CUDA_ERROR_INVALID_DEVICE;
	fc_lock();
	if (!pool_valid(pool) || pool->dev != dev)
		rc = CUDA_ERROR_INVALID_VALUE;
	else
		fc.dev[dev].cur_pool = pool;
	fc_unlock();
	return rc;
}

/* ------------------------------------------------------------------ VMM */

static struct fc_vmmh *vmmh_of(CUmemGenericAllocationHandle h)
{
	struct fc_vmmh *v = (struct fc_vmmh *)(uintptr_t)h;

	return v && v->magic == FC_VMMH_MAGIC ? v : NULL;
}

static struct fc_reserve *res_find(uintptr_t p)
{
	for (size_t i = 0; i < fc.nres; i++)
		if (p >= fc.res[i].base && p < fc.res[i].base + fc.res[i].size)
			return &fc.res[i];
	return NULL;
}

FC_API CUresult CUDAAPI cuMemGetAllocationGranularity(
	size_t *granularity, const CUmemAllocationProp *prop,
	CUmemAllocationGranularity_flags option)
{
	FC_ENTER();
	if (fc_check_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!granularity || !prop)
		return CUDA_ERROR_INVALID_VALUE;
	*granularity = FC_GRAN;
	return CUDA_SUCCESS;
}

FC_API CUresult CUDAAPI cuMemAddressReserve(CUdeviceptr *ptr, size_t size,
					    size_t alignment, CUdeviceptr addr,
					    unsigned long long flags)
{
	CUresult rc = CUDA_SUCCESS;
	uintptr_t va;

	FC_ENTER();
	if (fc_check_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!ptr || !size || size % FC_GRAN || flags ||
	    (alignment & (alignment - 1)))
		return CUDA_ERROR_INVALID_VALUE;
	fc_lock();
	if (alignment <= FC_GRAN && fl_pop(&fc.vmm_free, size, &va))
		goto got;
	va = round_up(fc.vmm_bump, alignment > FC_GRAN ? alignment : FC_GRAN);
	if (va + size > fc.vmm_hi) {
		rc = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	fc.vmm_bump = va + size;
got:
	if (fc.nres == fc.capres) {
		size_t cap = fc.capres ? 2 * fc.capres : 16;
		struct fc_reserve *r = realloc(fc.res, cap * sizeof(*r));

		if (!r) {
			fl_push(&fc.vmm_free, size, va);
			rc = CUDA_ERROR_OUT_OF_MEMORY;
			goto out;
		}
		fc.res = r;
		fc.capres = cap;
	}
	fc.res[fc.nres].base = va;
	fc.res[fc.nres].size = size;
	fc.nres++;
	*ptr = va;
out:
	fc_unlock();
	return rc;
}

FC_API CUresult CUDAAPI cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
	struct fc_reserve *r;
	CUresult rc = CUDA_SUCCESS;

	FC_ENTER();
	if (fc_check_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	fc_lock();
	r = res_find(ptr);
	if (!r || r->base != ptr || r->size != size) {
		rc = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	/* mappings left inside are dropped with the range */
	for (size_t i = 0; i < fc.na;) {
		struct fc_alloc *a = fc.a[i];

		if (a->kind == FC_K_VMM && a->base >= ptr &&
		    a->base < ptr + size)
			release_alloc(a);
		else
			i++;
	}
	fl_push(&fc.vmm_free, size, ptr);
	*r = fc.res[--fc.nres];
out:
	fc_unlock();
	return rc;
}

FC_API CUresult CUDAAPI cuMemCreate(CUmemGenericAllocationHandle *handle,
				    size_t size,
				    const CUmemAllocationProp *prop,
				    unsigned long long flags)
{
	struct fc_vmmh *v;

	FC_ENTER();
	if (fc_check_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!handle || !prop || !size || size % FC_GRAN || flags ||
	    prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
	    prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
	    prop->location.id < 0 || prop->location.id >= fc.ndev)
		return CUDA_ERROR_INVALID_VALUE;
	v = calloc(1, sizeof(*v));
	if (!v)
		return CUDA_ERROR_OUT_OF_MEMORY;
	v->fd = memfd_create("fakecuda-vmm", MFD_CLOEXEC);
	if (v->fd < 0 || ftruncate(v->fd, size) < 0) {
		if (v->fd >= 0)
			close(v->fd);
		free(v);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	v->magic = FC_VMMH_MAGIC;
	v->dev = prop->location.id;
	v->size = size;
	v->refs = 1;
	v->handle_refs = 1;
	v->prop = *prop;
	*handle = (CUmemGenericAllocationHandle)(uintptr_t)v;
	return CUDA_SUCCESS;
}

/* Physical memory lives until the last handle and the last mapping go. */
FC_API CUresult CUDAAPI cuMemRelease(CUmemGenericAllocationHandle handle)
{
	struct fc_vmmh *v;
	CUresult rc = CUDA_SUCCESS;

	FC_ENTER();
	if (fc_check_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	fc_lock();
	v = vmmh_of(handle);
	if (!v || !v->handle_refs) {
		rc = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	v->handle_refs--;
	if (!--v->refs) {
		close(v->fd);
		v->magic = 0;
		free(v);
	}
out:
	fc_unlock();
	return rc;
}

FC_API CUresult CUDAAPI cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
				 CUmemGenericAllocationHandle handle,
				 unsigned long long flags)
{
	struct fc_reserve *r;
	struct fc_vmmh *v;
	struct fc_alloc *a;
	CUresult rc = CUDA_SUCCESS;

	FC_ENTER();
	if (fc_check_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!size || ptr % FC_GRAN || size % FC_GRAN || offset % FC_GRAN ||
	    flags)
		return CUDA_ERROR_INVALID_VALUE;
	fc_lock();
	v = vmmh_of(handle);
	r = res_find(ptr);
	if (!v || !v->handle_refs || offset + size > v->size || !r ||
	    ptr + size > r->base + r->size || reg_overlap(ptr, size)) {
		rc = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	/* no access until cuMemSetAccess, as on the real device */
	if (mmap((void *)ptr, size, PROT_NONE, MAP_SHARED | MAP_FIXED, v->fd,
		 offset) == MAP_FAILED) {
		rc = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	a = reg_add(FC_K_VMM, ptr, size, v->dev, NULL);
	if (!a) {
		unmap_to_reserved(ptr, size);
		rc = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	a->span_base = ptr;
	a->span = size;
	a->vmmh = v;
	a->map_offset = offset;
	v->refs++;
out:
	fc_unlock();
	return rc;
}

FC_API CUresult CUDAAPI cuMemUnmap(CUdeviceptr ptr, size_t size)
{
	CUresult rc = CUDA_SUCCESS;
	int found = 0;

	FC_ENTER();
	if (fc_check_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!size || ptr % FC_GRAN || size % FC_GRAN)
		return CUDA_ERROR_INVALID_VALUE;
	fc_lock();
	/* every mapping in the range must lie wholly inside it */
	for (size_t i = 0; i < fc.na; i++) {
		struct fc_alloc *a = fc.a[i];

		if (a->kind != FC_K_VMM || a->base + a->size <= ptr ||
		    a->base >= ptr + size)
			continue;
		if (a->base < ptr || a->base + a->size > ptr + size) {
			rc = CUDA_ERROR_INVALID_VALUE;
			goto out;
		}
		found = 1;
	}
	if (!found) {
		rc = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	for (size_t i = 0; i < fc.na;) {
		struct fc_alloc *a = fc.a[i];

		if (a->kind == FC_K_VMM && a->base >= ptr &&
		    a->base < ptr + size)
			release_alloc(a);
		else
			i++;
	}
out:
	fc_unlock();
	return rc;
}

FC_API CUresult CUDAAPI cuMemSetAccess(CUdeviceptr ptr, size_t size,
				       const CUmemAccessDesc *desc, size_t count)
{
	CUresult rc = CUDA_SUCCESS;
	int prot = PROT_NONE;
	uintptr_t p;

	FC_ENTER();
	if (fc_check_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!desc || !count || !size || ptr % FC_GRAN || size % FC_GRAN)
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < count; i++) {
		if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
		    desc[i].location.id < 0 || desc[i].location.id >= fc.ndev)
			return CUDA_ERROR_INVALID_VALUE;
		if (desc[i].flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
			prot = PROT_READ | PROT_WRITE;
		else if (desc[i].flags == CU_MEM_ACCESS_FLAGS_PROT_READ &&
			 prot == PROT_NONE)
			prot = PROT_READ;
	}
	fc_lock();
	/* the whole range must be mapped */
	for (p = ptr; p < ptr + size;) {
		struct fc_alloc *a = fc_find(p);

		if (!a || a->kind != FC_K_VMM) {
			rc = CUDA_ERROR_INVALID_VALUE;
			goto out;
		}
		p = a->base + a->size;
	}
	if (mprotect((void *)ptr, size, prot))
		rc = CUDA_ERROR_INVALID_VALUE;
out:
	fc_unlock();
	return rc;
}

FC_API CUresult CUDAAPI cuMemGetAllocationPropertiesFromHandle(
	CUmemAllocationProp *prop, CUmemGenericAllocationHandle handle)
{
	struct fc_vmmh *v;
	CUresult rc = CUDA_SUCCESS;

	FC_ENTER();
	if (fc_check_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!prop)
		return CUDA_ERROR_INVALID_VALUE;
	fc_lock();
	v = vmmh_of(handle);
	if (!v)
		rc = CUDA_ERROR_INVALID_VALUE;
	else
		*prop = v->prop;
	fc_unlock();
	return rc;
}

FC_API CUresult CUDAAPI cuMemRetainAllocationHandle(
	CUmemGenericAllocationHandle *handle, void *addr)
{
	struct fc_alloc *a;
	CUresult rc = CUDA_SUCCESS;

	FC_ENTER();
	if (fc_check_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!handle)
		return CUDA_ERROR_INVALID_VALUE;
	fc_lock();
	a = fc_find((uintptr_t)addr);
	if (!a || a->kind != FC_K_VMM) {
		rc = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	a->vmmh->refs++;
	a->vmmh->handle_refs++;
	*handle = (CUmemGenericAllocationHandle)(uintptr_t)a->vmmh;
out:
	fc_unlock();
	return rc;
}

/* --------------------------------------------------- address queries */

FC_API CUresult CUDAAPI cuMemGetAddressRange_v2(CUdeviceptr *pbase,
						size_t *psize,
						CUdeviceptr dptr)
{
	struct fc_alloc *a;
	CUresult rc = CUDA_SUCCESS;

	FC_ENTER();
	if (fc_check_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	fc_lock();
	a = fc_find(dptr);
	if (!a) {
		rc = CUDA_ERROR_NOT_FOUND;
	} else {
		if (pbase)
			*pbase = a->base;
		if (psize)
			*psize = a->size;
	}
	fc_unlock();
	return rc;
}

static size_t attr_size(CUpointer_attribute attr)
{
	switch (attr) {
	case CU_POINTER_ATTRIBUTE_CONTEXT:
	case CU_POINTER_ATTRIBUTE_HOST_POINTER:
	case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
	case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
		return sizeof(void *);
	case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
	case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
		return sizeof(CUdeviceptr);
	case CU_POINTER_ATTRIBUTE_BUFFER_ID:
	case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
	case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
		return sizeof(unsigned long long);
	case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
	case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
		return sizeof(size_t);
	case CU_POINTER_ATTRIBUTE_P2P_TOKENS:
		return sizeof(CUDA_POINTER_ATTRIBUTE_P2P_TOKENS);
	default:
		return sizeof(int);
	}
}

static int is_host_kind(const struct fc_alloc *a)
{
	return a->kind == FC_K_HOST_ALLOC || a->kind == FC_K_HOST_REG;
}

/* Needs the lock; @a is the record containing @p. */
static CUresult attr_get(const struct fc_alloc *a, CUpointer_attribute attr,
			 void *data, CUdeviceptr p)
{
	const struct fc_reserve *r = NULL;
	uintptr_t mbase = a->span_base;
	size_t msize = a->span;

	if (a->kind == FC_K_VMM)
		r = res_find(a->base);
	if (a->small) {
		mbase = a->base & ~(FC_GRAN - 1);
		msize = FC_GRAN;
	}
	if (a->kind == FC_K_HOST_REG) {
		mbase = a->base;
		msize = a->size;
	}
	switch (attr) {
	case CU_POINTER_ATTRIBUTE_CONTEXT:
		*(CUcontext *)data = a->ctx;
		break;
	case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
		*(unsigned int *)data = is_host_kind(a) ? CU_MEMORYTYPE_HOST :
			CU_MEMORYTYPE_DEVICE;
		break;
	case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
		*(CUdeviceptr *)data = p;
		break;
	case CU_POINTER_ATTRIBUTE_HOST_POINTER:
		if (!is_host_kind(a) && a->kind != FC_K_MANAGED) {
			*(void **)data = NULL;	/* as 580 does */
			return CUDA_ERROR_INVALID_VALUE;
		}
		*(void **)data = (void *)p;
		break;
	case CU_POINTER_ATTRIBUTE_P2P_TOKENS: {
		CUDA_POINTER_ATTRIBUTE_P2P_TOKENS *t = data;

		if (a->kind != FC_K_DEVICE)
			return CUDA_ERROR_INVALID_VALUE;
		t->p2pToken = a->buffer_id;
		t->vaSpaceToken = 1;
		break;
	}
	case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
		*(int *)data = fc_syncmemops_get(a);
		break;
	case CU_POINTER_ATTRIBUTE_BUFFER_ID:
		*(unsigned long long *)data = a->buffer_id;
		break;
	case CU_POINTER_ATTRIBUTE_IS_MANAGED:
		*(int *)data = a->kind == FC_K_MANAGED;
		break;
	case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
		*(int *)data = a->dev;
		break;
	case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
		*(int *)data = a->kind == FC_K_DEVICE;
		break;
	case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
		*(CUdeviceptr *)data = r ? r->base : a->base;
		break;
	case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
		*(size_t *)data = r ? r->size : a->size;
		break;
	case CU_POINTER_ATTRIBUTE_MAPPED:
		*(int *)data = 1;
		break;
	case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
		*(unsigned long long *)data = a->kind == FC_K_VMM ?
			a->vmmh->prop.requestedHandleTypes : 0;
		break;
	case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
		*(int *)data = !is_host_kind(a);
		break;
	case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
		*(int *)data = CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE;
		break;
	case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
		*(CUmemoryPool *)data = a->pool;
		break;
	case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
		*(size_t *)data = msize;
		break;
	case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
		*(void **)data = (void *)mbase;
		break;
	case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
		*(unsigned long long *)data = a->kind == FC_K_VMM ?
			(unsigned long long)(uintptr_t)a->vmmh : a->buffer_id;
		break;
	case CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE:
		*(int *)data = 0;
		break;
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
	return CUDA_SUCCESS;
}

FC_API CUresult CUDAAPI cuPointerGetAttribute(void *data,
					      CUpointer_attribute attribute,
					      CUdeviceptr ptr)
{
	struct fc_alloc *a;
	CUresult rc;

	FC_ENTER();
	if (fc_check_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!data)
		return CUDA_ERROR_INVALID_VALUE;
	fc_lock();
	a = fc_find(ptr);
	rc = a ? attr_get(a, attribute, data, ptr) : CUDA_ERROR_INVALID_VALUE;
	fc_unlock();
	return rc;
}

/*
 * Unknown pointers are not an error here: every value reads as zero
 * (NULL, 0), except DEVICE_ORDINAL, which the real driver sets to -2.
 */
FC_API CUresult CUDAAPI cuPointerGetAttributes(unsigned int numAttributes,
					       CUpointer_attribute *attributes,
					       void **data, CUdeviceptr ptr)
{
	struct fc_alloc *a;

	FC_ENTER();
	if (fc_check_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!numAttributes || !attributes || !data)
		return CUDA_ERROR_INVALID_VALUE;
	for (unsigned int i = 0; i < numAttributes; i++)
		if (attributes[i] < CU_POINTER_ATTRIBUTE_CONTEXT ||
		    attributes[i] > CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE)
			return CUDA_ERROR_INVALID_VALUE;
	fc_lock();
	a = fc_find(ptr);
	for (unsigned int i = 0; i < numAttributes; i++) {
		if (!data[i])
			continue;
		if (a && !attr_get(a, attributes[i], data[i], ptr))
			continue;
		memset(data[i], 0, attr_size(attributes[i]));
		if (!a && attributes[i] == CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL)
			*(int *)data[i] = -2;
	}
	fc_unlock();
	return CUDA_SUCCESS;
}

FC_API CUresult CUDAAPI cuPointerSetAttribute(const void *value,
					      CUpointer_attribute attribute,
					      CUdeviceptr ptr)
{
	struct fc_alloc *a;
	CUresult rc = CUDA_SUCCESS;

	FC_ENTER();
	if (fc_check_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!value || attribute != CU_POINTER_ATTRIBUTE_SYNC_MEMOPS)
		return CUDA_ERROR_INVALID_VALUE;
	fc_lock();
	a = fc_find(ptr);
	if (!a || is_host_kind(a))
		rc = CUDA_ERROR_INVALID_VALUE;
	else
		rc = fc_syncmemops_set(a);
	fc_unlock();
	return rc;
}

/* ------------------------------------------------------------- DMA-BUF */

/* File and byte offset behind [p, p + len), or -1. */
static int backing_of(uintptr_t p, size_t len, uint64_t *off)
{
	struct fc_alloc *a = fc_find(p);
	int d;

	if (!a || p + len > a->base + a->size)
		return -1;
	if (a->kind == FC_K_VMM) {
		*off = a->map_offset + (p - a->base);
		return a->vmmh->fd;
	}
	if (a->kind != FC_K_DEVICE && a->kind != FC_K_POOL &&
	    a->kind != FC_K_MANAGED)
		return -1;
	d = dev_of(p);
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

	FC_ENTER();
	if (fc_check_init())
		return CUDA_ERROR_NOT_INITIALIZED;
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
	if (fd < (int)(sizeof(fc.dmabuf) / sizeof(fc.dmabuf[0]))) {
		fc.dmabuf[fd].fd = fd + 1;	/* 0 means unset */
		fc.dmabuf[fd].off = off;
	}
	*(int *)handle = fd;
out:
	fc_unlock();
	return rc;
}

FC_API int fakecuda_dmabuf_offset(int fd, uint64_t *off)
{
	int rc = -1;

	fc_lock();
	if (fd >= 0 && fd < (int)(sizeof(fc.dmabuf) / sizeof(fc.dmabuf[0])) &&
	    fc.dmabuf[fd].fd == fd + 1) {
		*off = fc.dmabuf[fd].off;
		rc = 0;
	}
	fc_unlock();
	return rc;
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

	FC_ENTER();
	if (fc_check_init())
		return CUDA_ERROR_NOT_INITIALIZED;
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
	rc = dev_take_va(ctx->dev, h.map_len, &va);
	if (rc) {
		close(fd);
		goto out;
	}
	if (mmap((void *)va, h.map_len, PROT_READ | PROT_WRITE,
		 MAP_SHARED | MAP_FIXED, fd, h.file_off) == MAP_FAILED) {
		close(fd);
		dev_put_va(ctx->dev, va, h.map_len);
		rc = CUDA_ERROR_MAP_FAILED;
		goto out;
	}
	close(fd);
	a = reg_add(FC_K_IPC, va + h.inner, h.size, ctx->dev, ctx);
	if (!a) {
		dev_put_va(ctx->dev, va, h.map_len);
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

FC_API CUresult CUDAAPI cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr,
					      CUipcMemHandle handle,
					      unsigned int Flags)
{
	FC_ENTER();
	return ipc_open(pdptr, handle, Flags);
}

FC_API CUresult CUDAAPI cuIpcOpenMemHandle(CUdeviceptr *pdptr,
					   CUipcMemHandle handle,
					   unsigned int Flags)
{
	FC_ENTER();
	return ipc_open(pdptr, handle, Flags);
}

FC_API CUresult CUDAAPI cuIpcCloseMemHandle(CUdeviceptr dptr)
{
	struct fc_alloc *a;
	CUresult rc = CUDA_SUCCESS;

	FC_ENTER();
	if (fc_check_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	fc_lock();
	a = fc_find(dptr);
	if (!a || a->kind != FC_K_IPC || a->base != dptr) {
		rc = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	if (!--a->ipc_refs)
		release_alloc(a);
out:
	fc_unlock();
	return rc;
}

/* --------------------------------------------------------- copies, sets */

/* [p, p + n) is inside one tracked allocation that the device may touch. */
static int dev_range_ok(CUdeviceptr p, size_t n)
{
	struct fc_alloc *a;
	int ok;

	if (!n)
		return 1;
	fc_lock();
	a = fc_find(p);
	ok = a && p + n <= a->base + a->size;
	fc_unlock();
	return ok;
}

static CUresult copy(void *dst, const void *src, size_t n, CUdeviceptr dchk,
		     CUdeviceptr schk)
{
	if (fc_check_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	if ((dchk && !dev_range_ok(dchk, n)) || (schk && !dev_range_ok(schk, n)))
		return CUDA_ERROR_INVALID_VALUE;
	if (n)
		memmove(dst, src, n);
	return CUDA_SUCCESS;
}

FC_API CUresult CUDAAPI cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
	FC_ENTER();
	return copy((void *)dst, (const void *)src, n, 0, 0);
}

FC_API CUresult CUDAAPI cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
	FC_ENTER();
	return copy((void *)dst, (const void *)src, n, 0, 0);
}

FC_API CUresult CUDAAPI cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n,
				      CUstream hStream)
{
	FC_ENTER();
	if (!fc_stream_ok(hStream))
		return CUDA_ERROR_INVALID_HANDLE;
	return copy((void *)dst, (const void *)src, n, 0, 0);
}

FC_API CUresult CUDAAPI cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src,
					   size_t n, CUstream hStream)
{
	FC_ENTER();
	if (!fc_stream_ok(hStream))
		return CUDA_ERROR_INVALID_HANDLE;
	return copy((void *)dst, (const void *)src, n, 0, 0);
}

FC_API CUresult CUDAAPI cuMemcpyHtoD_v2(CUdeviceptr dstDevice,
				       const void *srcHost, size_t ByteCount)
{
	FC_ENTER();
	return copy((void *)dstDevice, srcHost, ByteCount, dstDevice, 0);
}

FC_API CUresult CUDAAPI cuMemcpyHtoD_v2_ptds(CUdeviceptr dstDevice,
					    const void *srcHost,
					    size_t ByteCount)
{
	FC_ENTER();
	return copy((void *)dstDevice, srcHost, ByteCount, dstDevice, 0);
}

FC_API CUresult CUDAAPI cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice,
				       size_t ByteCount)
{
	FC_ENTER();
	return copy(dstHost, (const void *)srcDevice, ByteCount, 0, srcDevice);
}

FC_API CUresult CUDAAPI cuMemcpyDtoH_v2_ptds(void *dstHost,
					    CUdeviceptr srcDevice,
					    size_t ByteCount)
{
	FC_ENTER();
	return copy(dstHost, (const void *)srcDevice, ByteCount, 0, srcDevice);
}

FC_API CUresult CUDAAPI cuMemcpyDtoD_v2(CUdeviceptr dstDevice,
				       CUdeviceptr srcDevice, size_t ByteCount)
{
	FC_ENTER();
	return copy((void *)dstDevice, (const void *)srcDevice, ByteCount,
		    dstDevice, srcDevice);
}

FC_API CUresult CUDAAPI cuMemcpyDtoD_v2_ptds(CUdeviceptr dstDevice,
					    CUdeviceptr srcDevice,
					    size_t ByteCount)
{
	FC_ENTER();
	return copy((void *)dstDevice, (const void *)srcDevice, ByteCount,
		    dstDevice, srcDevice);
}

FC_API CUresult CUDAAPI cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice,
					    const void *srcHost,
					    size_t ByteCount, CUstream hStream)
{
	FC_ENTER();
	if (!fc_stream_ok(hStream))
		return CUDA_ERROR_INVALID_HANDLE;
	return copy((void *)dstDevice, srcHost, ByteCount, dstDevice, 0);
}

FC_API CUresult CUDAAPI cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dstDevice,
						 const void *srcHost,
						 size_t ByteCount,
						 CUstream hStream)
{
	FC_ENTER();
	if (!fc_stream_ok(hStream))
		return CUDA_ERROR_INVALID_HANDLE;
	return copy((void *)dstDevice, srcHost, ByteCount, dstDevice, 0);
}

FC_API CUresult CUDAAPI cuMemcpyDtoHAsync_v2(void *dstHost,
					    CUdeviceptr srcDevice,
					    size_t ByteCount, CUstream hStream)
{
	FC_ENTER();
	if (!fc_stream_ok(hStream))
		return CUDA_ERROR_INVALID_HANDLE;
	return copy(dstHost, (const void *)srcDevice, ByteCount, 0, srcDevice);
}

FC_API CUresult CUDAAPI cuMemcpyDtoHAsync_v2_ptsz(void *dstHost,
						 CUdeviceptr srcDevice,
						 size_t ByteCount,
						 CUstream hStream)
{
	FC_ENTER();
	if (!fc_stream_ok(hStream))
		return CUDA_ERROR_INVALID_HANDLE;
	return copy(dstHost, (const void *)srcDevice, ByteCount, 0, srcDevice);
}

static CUresult memset8(CUdeviceptr dst, unsigned char v, size_t n)
{
	if (fc_check_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!dev_range_ok(dst, n))
		return CUDA_ERROR_INVALID_VALUE;
	memset((void *)dst, v, n);
	return CUDA_SUCCESS;
}

static CUresult memset32(CUdeviceptr dst, unsigned int v, size_t n)
{
	if (fc_check_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (dst % 4 || !dev_range_ok(dst, n * 4))
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < n; i++)
		((unsigned int *)dst)[i] = v;
	return CUDA_SUCCESS;
}

FC_API CUresult CUDAAPI cuMemsetD8_v2(CUdeviceptr dstDevice, unsigned char uc,
				     size_t N)
{
	FC_ENTER();
	return memset8(dstDevice, uc, N);
}

FC_API CUresult CUDAAPI cuMemsetD8_v2_ptds(CUdeviceptr dstDevice,
					  unsigned char uc, size_t N)
{
	FC_ENTER();
	return memset8(dstDevice, uc, N);
}

FC_API CUresult CUDAAPI cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc,
					size_t N, CUstream hStream)
{
	FC_ENTER();
	if (!fc_stream_ok(hStream))
		return CUDA_ERROR_INVALID_HANDLE;
	return memset8(dstDevice, uc, N);
}

FC_API CUresult CUDAAPI cuMemsetD8Async_ptsz(CUdeviceptr dstDevice,
					     unsigned char uc, size_t N,
					     CUstream hStream)
{
	FC_ENTER();
	if (!fc_stream_ok(hStream))
		return CUDA_ERROR_INVALID_HANDLE;
	return memset8(dstDevice, uc, N);
}

FC_API CUresult CUDAAPI cuMemsetD32_v2(CUdeviceptr dstDevice, unsigned int ui,
				      size_t N)
{
	FC_ENTER();
	return memset32(dstDevice, ui, N);
}

FC_API CUresult CUDAAPI cuMemsetD32_v2_ptds(CUdeviceptr dstDevice,
					   unsigned int ui, size_t N)
{
	FC_ENTER();
	return memset32(dstDevice, ui, N);
}

FC_API CUresult CUDAAPI cuMemGetInfo_v2(size_t *free_b, size_t *total)
{
	CUcontext ctx;
	CUresult rc;

	FC_ENTER();
	if (fc_check_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	fc_lock();
	rc = fc_current_ctx(&ctx);
	if (!rc) {
		struct fc_dev *D = &fc.dev[ctx->dev];

		if (free_b)
			*free_b = D->hi - D->bump;
		if (total)
			*total = FC_DEV_SPAN;
	}
	fc_unlock();
	return rc;
}
