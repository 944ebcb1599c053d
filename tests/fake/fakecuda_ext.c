/* SPDX-License-Identifier: MIT */
/*
 * Fake CUDA driver: module and library globals, external memory.
 *
 * A fake module image is the text "fakecubin:NAME=SIZE[,NAME=SIZE...]":
 * one device global per entry.  A module's globals are allocated in the
 * current context at load; a library's (context-independent) globals when
 * first asked for in a context.  Both are freed at unload or when their
 * context goes.  External memory: OPAQUE_FD handles only; a mapped buffer
 * maps the fd's pages at a fresh device address and is freed by cuMemFree;
 * cuDestroyExternalMemory closes the fd and leaves mapped buffers
 * allocated until cuMemFree, as the real driver does.
 */
#include "fakecuda_internal.h"
#include "fakecuda.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define FC_MOD_MAGIC 0x664d6f64u
#define FC_EXT_MAGIC 0x66457874u
#define FC_GLOBALS 16

struct fc_global {
	char name[32];
	size_t size;
};

struct fc_module {
	uint32_t magic;
	int is_library;
	int n;
	struct fc_global g[FC_GLOBALS];
};

static CUresult parse_image(const void *image, struct fc_module **out)
{
	const char *s = image;
	struct fc_module *m;

	if (!s || strncmp(s, "fakecubin:", 10))
		return CUDA_ERROR_INVALID_IMAGE;
	m = calloc(1, sizeof(*m));
	if (!m)
		return CUDA_ERROR_OUT_OF_MEMORY;
	m->magic = FC_MOD_MAGIC;
	s += 10;
	while (*s && m->n < FC_GLOBALS) {
		struct fc_global *g = &m->g[m->n];
		const char *eq = strchr(s, '=');
		size_t len = eq ? (size_t)(eq - s) : 0;

		if (!eq || !len || len >= sizeof(g->name)) {
			free(m);
			return CUDA_ERROR_INVALID_IMAGE;
		}
		memcpy(g->name, s, len);
		g->size = strtoul(eq + 1, (char **)&s, 10);
		if (!g->size) {
			free(m);
			return CUDA_ERROR_INVALID_IMAGE;
		}
		m->n++;
		if (*s == ',')
			s++;
	}
	*out = m;
	return CUDA_SUCCESS;
}

/* Needs the lock: global @i of @m in @ctx (allocated on first use). */
static CUresult global_get(struct fc_module *m, int i, CUcontext ctx,
			   uintptr_t *va_p)
{
	struct fc_alloc *a;
	uintptr_t va;
	size_t span;
	int small;
	CUresult rc;

	for (size_t k = 0; k < fc.na; k++) {
		a = fc.a[k];
		if (a->kind == FC_K_GLOBAL && a->owner == m &&
		    a->owner_idx == i && a->ctx == ctx) {
			*va_p = a->base;
			return CUDA_SUCCESS;
		}
	}
	rc = fc_dev_block_alloc(ctx->dev, m->g[i].size, &va, &span, &small);
	if (rc)
		return rc;
	a = fc_reg_add(FC_K_GLOBAL, va, m->g[i].size, ctx->dev, ctx);
	if (!a) {
		fc_dev_block_free(ctx->dev, va, span, small);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	a->span_base = va;
	a->span = span;
	a->small = small;
	a->owner = m;
	a->owner_idx = i;
	*va_p = va;
	return CUDA_SUCCESS;
}

/* Needs the lock: every context's copy of every global goes. */
static void module_free(struct fc_module *m)
{
	for (size_t k = fc.na; k-- > 0;)
		if (fc.a[k]->kind == FC_K_GLOBAL && fc.a[k]->owner == m)
			fc_release_alloc(fc.a[k]);
	m->magic = 0;
	free(m);
}

static CUresult load(void **out, const void *image, int is_library)
{
	struct fc_module *m;
	CUcontext ctx;
	CUresult rc;

	if (!out)
		return CUDA_ERROR_INVALID_VALUE;
	rc = parse_image(image, &m);
	if (rc)
		return rc;
	m->is_library = is_library;
	fc_lock();
	if (!is_library) {
		uintptr_t va;

		rc = fc_current_ctx(&ctx);
		for (int i = 0; !rc && i < m->n; i++)
			rc = global_get(m, i, ctx, &va);
		if (rc) {
			module_free(m);
			fc_unlock();
			return rc;
		}
	}
	fc_unlock();
	*out = m;
	return CUDA_SUCCESS;
}

static CUresult get_global(CUdeviceptr *dptr, size_t *bytes, void *h,
			   const char *name, int is_library)
{
	struct fc_module *m = h;
	CUcontext ctx;
	CUresult rc;

	if (!name)
		return CUDA_ERROR_INVALID_VALUE;
	fc_lock();
	if (!m || m->magic != FC_MOD_MAGIC || m->is_library != is_library) {
		rc = CUDA_ERROR_INVALID_HANDLE;
		goto out;
	}
	rc = fc_current_ctx(&ctx);
	if (rc)
		goto out;
	rc = CUDA_ERROR_NOT_FOUND;
	for (int i = 0; i < m->n; i++) {
		if (strcmp(m->g[i].name, name))
			continue;
		uintptr_t va;

		rc = global_get(m, i, ctx, &va);
		if (rc)
			break;
		if (dptr)
			*dptr = va;
		if (bytes)
			*bytes = m->g[i].size;
		break;
	}
out:
	fc_unlock();
	return rc;
}

static CUresult unload(void *h, int is_library)
{
	struct fc_module *m = h;

	fc_lock();
	if (!m || m->magic != FC_MOD_MAGIC || m->is_library != is_library) {
		fc_unlock();
		return CUDA_ERROR_INVALID_HANDLE;
	}
	module_free(m);
	fc_unlock();
	return CUDA_SUCCESS;
}

FC_API CUresult CUDAAPI cuModuleLoadData(CUmodule *module, const void *image)
{
	FC_ENTER_INIT();
	return load((void **)module, image, 0);
}

FC_API CUresult CUDAAPI cuModuleGetGlobal_v2(CUdeviceptr *dptr, size_t *bytes,
					     CUmodule hmod, const char *name)
{
	FC_ENTER_INIT();
	return get_global(dptr, bytes, hmod, name, 0);
}

/* 32-bit ABI: fake addresses do not fit (see cuMemAlloc). */
FC_API CUresult CUDAAPI cuModuleGetGlobal(CUdeviceptr_v1 *dptr,
					  unsigned int *bytes, CUmodule hmod,
					  const char *name)
{
	FC_ENTER_INIT();
	return CUDA_ERROR_NOT_SUPPORTED;
}

FC_API CUresult CUDAAPI cuModuleUnload(CUmodule hmod)
{
	FC_ENTER_INIT();
	return unload(hmod, 0);
}

FC_API CUresult CUDAAPI cuLibraryLoadData(CUlibrary *library,
		const void *code, CUjit_option *jitOptions,
		void **jitOptionsValues, unsigned int numJitOptions,
		CUlibraryOption *libraryOptions, void **libraryOptionValues,
		unsigned int numLibraryOptions)
{
	FC_ENTER_INIT();
	return load((void **)library, code, 1);
}

FC_API CUresult CUDAAPI cuLibraryGetGlobal(CUdeviceptr *dptr, size_t *bytes,
					   CUlibrary library, const char *name)
{
	FC_ENTER_INIT();
	return get_global(dptr, bytes, library, name, 1);
}

/* Managed variables: the fake makes them device globals too. */
FC_API CUresult CUDAAPI cuLibraryGetManaged(CUdeviceptr *dptr, size_t *bytes,
					    CUlibrary library,
					    const char *name)
{
	FC_ENTER_INIT();
	return get_global(dptr, bytes, library, name, 1);
}

FC_API CUresult CUDAAPI cuLibraryUnload(CUlibrary library)
{
	FC_ENTER_INIT();
	return unload(library, 1);
}

/* ------------------------------------------------------- external memory */

struct fc_extmem {
	uint32_t magic;
	int fd;
	size_t size;
};

FC_API CUresult CUDAAPI cuImportExternalMemory(CUexternalMemory *extMem_out,
		const CUDA_EXTERNAL_MEMORY_HANDLE_DESC *memHandleDesc)
{
	struct fc_extmem *x;

	FC_ENTER_INIT();
	if (!extMem_out || !memHandleDesc || !memHandleDesc->size)
		return CUDA_ERROR_INVALID_VALUE;
	if (memHandleDesc->type != CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD)
		return CUDA_ERROR_NOT_SUPPORTED;
	if (memHandleDesc->handle.fd < 0)
		return CUDA_ERROR_INVALID_VALUE;
	x = calloc(1, sizeof(*x));
	if (!x)
		return CUDA_ERROR_OUT_OF_MEMORY;
	x->magic = FC_EXT_MAGIC;
	x->fd = memHandleDesc->handle.fd;	/* the driver owns it now */
	x->size = memHandleDesc->size;
	*extMem_out = (CUexternalMemory)x;
	return CUDA_SUCCESS;
}

FC_API CUresult CUDAAPI cuExternalMemoryGetMappedBuffer(CUdeviceptr *devPtr,
		CUexternalMemory extMem,
		const CUDA_EXTERNAL_MEMORY_BUFFER_DESC *bufferDesc)
{
	struct fc_extmem *x = (struct fc_extmem *)extMem;
	struct fc_alloc *a;
	CUcontext ctx;
	uintptr_t va;
	size_t span;
	CUresult rc;

	FC_ENTER_INIT();
	if (!devPtr || !bufferDesc || !bufferDesc->size || bufferDesc->flags ||
	    !x || x->magic != FC_EXT_MAGIC ||
	    bufferDesc->offset + bufferDesc->size > x->size ||
	    bufferDesc->offset % 4096)
		return CUDA_ERROR_INVALID_VALUE;
	fc_lock();
	rc = fc_current_ctx(&ctx);
	if (rc)
		goto out;
	span = fc_round_up(bufferDesc->size, FC_GRAN);
	rc = fc_dev_take_va(ctx->dev, span, &va);
	if (rc)
		goto out;
	if (mmap((void *)va, fc_round_up(bufferDesc->size, 4096),
		 PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, x->fd,
		 (off_t)bufferDesc->offset) == MAP_FAILED) {
		fc_dev_put_va(ctx->dev, va, span);
		rc = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	a = fc_reg_add(FC_K_EXTERNAL, va, bufferDesc->size, ctx->dev, ctx);
	if (!a) {
		fc_dev_put_va(ctx->dev, va, span);
		rc = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	a->span_base = va;
	a->span = span;
	*devPtr = va;
out:
	fc_unlock();
	return rc;
}

FC_API CUresult CUDAAPI cuDestroyExternalMemory(CUexternalMemory extMem)
{
	struct fc_extmem *x = (struct fc_extmem *)extMem;

	FC_ENTER_INIT();
	if (!x || x->magic != FC_EXT_MAGIC)
		return CUDA_ERROR_INVALID_HANDLE;
	close(x->fd);
	x->magic = 0;
	free(x);
	return CUDA_SUCCESS;
}
