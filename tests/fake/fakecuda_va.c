/* SPDX-License-Identifier: MIT */
/*
 * Fake CUDA driver: device address space: VA region, blocks, allocation records.
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

int fc_fl_push(struct fc_flset *s, size_t size, uintptr_t v)
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

int fc_fl_pop(struct fc_flset *s, size_t size, uintptr_t *v)
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
	base = fc_round_up(raw, FC_GRAN);
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

int fc_dev_of(uintptr_t p)
{
	if (p < fc.region || p >= fc.region + (size_t)fc.ndev * FC_DEV_SPAN)
		return -1;
	return (int)((p - fc.region) / FC_DEV_SPAN);
}

void fc_unmap_to_reserved(uintptr_t va, size_t len)
{
	mmap((void *)va, len, PROT_NONE,
	     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
}

/* Take @span bytes of VA of device @d (not backed). */
CUresult fc_dev_take_va(int d, size_t span, uintptr_t *out)
{
	struct fc_dev *D = &fc.dev[d];
	uintptr_t va;

	if (!fc_fl_pop(&D->big_free, span, &va)) {
		if (D->bump + span > D->hi)
			return CUDA_ERROR_OUT_OF_MEMORY;
		va = D->bump;
		D->bump += span;
	}
	*out = va;
	return CUDA_SUCCESS;
}

void fc_dev_put_va(int d, uintptr_t va, size_t span)
{
	fc_unmap_to_reserved(va, span);
	fc_fl_push(&fc.dev[d].big_free, span, va);
}

/* VA plus committed pages from the device memfd. */
static CUresult dev_alloc_span(int d, size_t span, uintptr_t *out)
{
	struct fc_dev *D = &fc.dev[d];
	uintptr_t va;
	CUresult rc = fc_dev_take_va(d, span, &va);

	if (rc)
		return rc;
	if (mmap((void *)va, span, PROT_READ | PROT_WRITE,
		 MAP_SHARED | MAP_FIXED, D->memfd, va - D->lo) == MAP_FAILED) {
		fc_fl_push(&D->big_free, span, va);
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
	fc_dev_put_va(d, va, span);
}

/* Device memory block: small (< 2 MiB) from chunks, else whole spans. */
CUresult fc_dev_block_alloc(int d, size_t size, uintptr_t *va,
			    size_t *span, int *small)
{
	struct fc_dev *D = &fc.dev[d];
	size_t rs = fc_round_up(size, FC_SMALL_ALIGN);
	CUresult rc;

	if (size > FC_DEV_SPAN)
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (rs >= FC_GRAN) {
		*span = fc_round_up(size, FC_GRAN);
		*small = 0;
		return dev_alloc_span(d, *span, va);
	}
	*span = rs;
	*small = 1;
	if (fc_fl_pop(&D->small_free, rs, va))
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

void fc_dev_block_free(int d, uintptr_t va, size_t span, int small)
{
	if (small) {
		memset((void *)va, 0, span);
		fc_fl_push(&fc.dev[d].small_free, span, va);
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
struct fc_alloc *fc_reg_overlap(uintptr_t p, size_t len)
{
	size_t i = reg_lower(p + len - 1);
	struct fc_alloc *a;

	if (!i)
		return NULL;
	a = fc.a[i - 1];
	return a->base + a->size > p ? a : NULL;
}

/*
 * Freed records are kept for reuse (never returned to malloc), so a free
 * calls no malloc or free: programs free from signal handlers, and the
 * tests check what the shim does then.
 */
static struct fc_alloc *spare;

struct fc_alloc *fc_reg_add(enum fc_kind kind, uintptr_t base, size_t size,
			    int dev, CUcontext ctx)
{
	struct fc_alloc *a = spare;
	size_t i;

	if (a) {
		spare = *(struct fc_alloc **)a;
		memset(a, 0, sizeof(*a));
	} else {
		a = calloc(1, sizeof(*a));
	}
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
	*(struct fc_alloc **)a = spare;
	spare = a;
}

/* ------------------------------------------------------------- freeing */

void fc_release_alloc(struct fc_alloc *a)
{
	switch (a->kind) {
	case FC_K_DEVICE:
	case FC_K_MANAGED:
		fc_dev_block_free(a->dev, a->span_base, a->span, a->small);
		break;
	case FC_K_POOL:
		a->pool->used_bytes -= a->span;
		if (a->pool->alive) {
			fc_fl_push(&a->pool->cache, a->span, a->span_base);
			a->pool->cached_bytes += a->span;
		} else {
			fc_dev_block_free(a->dev, a->span_base, a->span, a->small);
		}
		break;
	case FC_K_HOST_ALLOC:
		munmap((void *)a->span_base, a->span);
		break;
	case FC_K_HOST_REG:
		break;
	case FC_K_VMM:
		fc_unmap_to_reserved(a->base, a->size);
		if (!--a->vmmh->refs) {
			close(a->vmmh->fd);
			a->vmmh->magic = 0;
			free(a->vmmh);
		}
		break;
	case FC_K_IPC:
		fc_dev_put_va(a->dev, a->span_base, a->span);
		break;
	case FC_K_GRAPH:
		/* The VA stays the graph node's: only the pages go. */
		fallocate(fc.dev[a->dev].memfd,
			  FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			  a->span_base - fc.dev[a->dev].lo, a->span);
		fc_unmap_to_reserved(a->span_base, a->span);
		break;
	case FC_K_EXTERNAL:
	case FC_K_POOL_IMPORT:
		fc_dev_put_va(a->dev, a->span_base, a->span);
		break;
	case FC_K_GLOBAL:
		fc_dev_block_free(a->dev, a->span_base, a->span, a->small);
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
			fc_release_alloc(a);
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
