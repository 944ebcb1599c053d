// SPDX-License-Identifier: MIT
/*
 * SYNC_MEMOPS for memory the registration cache pins (the GPUDirect RDMA
 * guide, "Synchronization and Memory Ordering"): without it a cudaMemcpy
 * that returned may still be in flight when the NIC reads the buffer.
 *
 * Per context where the driver has cuCtxSetFlags (CUDA 12.1 and later):
 * the context's flags get CU_CTX_SYNC_MEMOPS once (read back with
 * cuCtxGetFlags first, so a context that has it costs one flag read).
 * Otherwise per allocation: cuPointerSetAttribute(SYNC_MEMOPS), which the
 * driver refuses for VMM mappings (measured on an H100, driver 580:
 * CUDA_ERROR_NOT_SUPPORTED); that refusal is logged once.
 *
 * When: on the registration path after a cache miss, with no lock of ours
 * held and never from a hook that can run inside a driver callback (the
 * alloc/free hooks never come here).  UCX's progress thread deadlocked
 * calling cuCtxSetFlags while holding its own lock against an application
 * thread inside a launch; here the cache lock is released before this
 * runs, so no lock of gdrhook is held across the driver call.  The
 * program gets its MR only after this returned, so no RDMA can precede it.
 */
#include <errno.h>
#include <cuda.h>

#include "registry/registry.h"
#include "pin_opts.h"
#include "syncmemops.h"

typedef CUresult (*flags_get_fn)(unsigned int *);
typedef CUresult (*flags_set_fn)(unsigned int);
typedef CUresult (*ctx_fn)(CUcontext);
typedef CUresult (*ctx_pop_fn)(CUcontext *);
typedef CUresult (*ctx_get_fn)(CUcontext *);
typedef CUresult (*ptr_set_fn)(const void *, CUpointer_attribute,
			       CUdeviceptr);

/* The driver's entry points this needs; immutable once published. */
struct sm_fns {
	flags_get_fn get_flags;
	flags_set_fn set_flags;
	ctx_fn push;
	ctx_pop_fn pop;
	ctx_get_fn cur;
	ptr_set_fn ptr_set;
};

static struct {
	struct sm_fns tab;		/* written once, by the claim's winner */
	const struct sm_fns *fns;	/* atomic: &tab once it is complete */
	int claimed;			/* atomic: tab is being written */
	int per_pointer;		/* atomic: cuCtxSetFlags refused once */
} sm;

static void *drv_sym(const char *name)
{
	void *h = gh_libcuda_handle();
	void *p = h ? gh_real_dlsym(h, name) : NULL;

	return p && !gh_addr_is_ours(p) ? p : NULL;
}

/*
 * The entry points: the published table, or (while another thread is
 * publishing it) the same pointers resolved into *mine: no thread waits
 * for another, and none reads the table while it is written.
 */
static const struct sm_fns *resolve(struct sm_fns *mine)
{
	const struct sm_fns *f = __atomic_load_n(&sm.fns, __ATOMIC_ACQUIRE);
	int unclaimed = 0;

	if (GH_LIKELY(f))
		return f;
	mine->get_flags = (flags_get_fn)drv_sym("cuCtxGetFlags");
	mine->set_flags = (flags_set_fn)drv_sym("cuCtxSetFlags");
	mine->push = (ctx_fn)drv_sym("cuCtxPushCurrent_v2");
	mine->pop = (ctx_pop_fn)drv_sym("cuCtxPopCurrent_v2");
	mine->cur = (ctx_get_fn)drv_sym("cuCtxGetCurrent");
	mine->ptr_set = (ptr_set_fn)drv_sym("cuPointerSetAttribute");
	if (!mine->get_flags || !mine->set_flags)
		__atomic_store_n(&sm.per_pointer, 1, __ATOMIC_RELAXED);
	if (!__atomic_compare_exchange_n(&sm.claimed, &unclaimed, 1, 0,
					 __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
		return mine;
	sm.tab = *mine;
	__atomic_store_n(&sm.fns, &sm.tab, __ATOMIC_RELEASE);
	return &sm.tab;
}

/* Per context: 1 set now, 0 it had it, -errno (the driver refused). */
static int ctx_mode(const struct sm_fns *f, uint64_t ctx)
{
	CUcontext cur = NULL, popped;
	unsigned int fl = 0;
	int pushed = 0, rc = 0;
	CUresult r;

	if (f->cur(&cur) != CUDA_SUCCESS)
		cur = NULL;
	if ((uint64_t)(uintptr_t)cur != ctx) {
		if (f->push((CUcontext)(uintptr_t)ctx) != CUDA_SUCCESS)
			return -ENXIO;
		pushed = 1;
	}
	r = f->get_flags(&fl);
	if (r == CUDA_SUCCESS && (fl & CU_CTX_SYNC_MEMOPS))
		goto out;
	if (r == CUDA_SUCCESS)
		r = f->set_flags(fl | CU_CTX_SYNC_MEMOPS);
	if (r == CUDA_SUCCESS && f->get_flags(&fl) == CUDA_SUCCESS &&
	    (fl & CU_CTX_SYNC_MEMOPS)) {
		rc = 1;
		gh_info("SYNC_MEMOPS set on context %p (cuCtxSetFlags; flags now %#x)",
			(void *)(uintptr_t)ctx, fl);
	} else {
		rc = r == CUDA_ERROR_NOT_SUPPORTED ? -ENOTSUP : -EIO;
	}
out:
	if (pushed)
		f->pop(&popped);
	return rc;
}

static void ptr_mode(const struct sm_fns *f, const struct gh_range *r)
{
	unsigned int one = 1;
	CUresult rc;

	if (!f->ptr_set)
		return;
	rc = f->ptr_set(&one, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS,
			(CUdeviceptr)r->base);
	if (rc == CUDA_SUCCESS)
		return;
	if (r->kind == GDRHOOK_KIND_VMM)
		gh_warn_once("SYNC_MEMOPS: the driver refuses it per pointer for VMM memory (CUresult %d) and has no usable cuCtxSetFlags: registrations of VMM memory have no ordering guarantee",
			     (int)rc);
	else
		gh_warn_once("SYNC_MEMOPS: cuPointerSetAttribute refused (CUresult %d) for %#llx",
			     (int)rc, (unsigned long long)r->base);
}

void gh_syncmemops_ensure(const struct gh_range *r)
{
	const struct sm_fns *f;
	struct sm_fns mine;
	uint64_t ctx = r->ctx;
	int rc;

	if (!gh_pin_cfg.sync_memops)
		return;
	f = resolve(&mine);
	if (!f->cur || !f->push || !f->pop)
		return;
	if (!ctx && (r->dev < 0 || gh_drv_primary_ctx(r->dev, &ctx)))
		ctx = 0;
	if (ctx && !__atomic_load_n(&sm.per_pointer, __ATOMIC_RELAXED)) {
		rc = ctx_mode(f, ctx);
		if (rc >= 0)
			return;
		if (rc == -ENOTSUP) {
			__atomic_store_n(&sm.per_pointer, 1, __ATOMIC_RELAXED);
			gh_info("SYNC_MEMOPS: cuCtxSetFlags not supported; setting it per allocation");
		}
	}
	ptr_mode(f, r);
}
