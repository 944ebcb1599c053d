// SPDX-License-Identifier: MIT
/*
 * Real libibverbs entry points (src/platform/vreal.h): the version the hook list
 * names, through RTLD_NEXT, else what the program's own dlsym/dlvsym on
 * its libibverbs handle returned (resolve.c).  A missing entry point
 * fails with ENOSYS, as a NIC call that cannot be made.
 */
#include <dlfcn.h>
#include <errno.h>
#include <infiniband/verbs.h>

#include <cuda.h>

#include "gh_hooks.h"
#include "base/base.h"
#include "resolve.h"
#include "vreal.h"

#undef ibv_reg_mr
#undef ibv_reg_mr_iova

typedef struct ibv_mr *(*reg_mr_fn)(struct ibv_pd *, void *, size_t, int);
typedef struct ibv_mr *(*reg_mr_iova_fn)(struct ibv_pd *, void *, size_t,
					 uint64_t, int);
typedef struct ibv_mr *(*reg_mr_iova2_fn)(struct ibv_pd *, void *, size_t,
					  uint64_t, unsigned int);
typedef struct ibv_mr *(*reg_dmabuf_fn)(struct ibv_pd *, uint64_t, size_t,
					uint64_t, int, int);
typedef int (*rereg_fn)(struct ibv_mr *, int, struct ibv_pd *, void *,
			size_t, int);
typedef int (*one_fn)(void *);

struct ibv_mr *gh_vreal_reg_mr(struct ibv_pd *pd, void *addr, size_t length,
			       int access)
{
	reg_mr_fn f = (reg_mr_fn)gh_real_get(GH_SYM_ibv_reg_mr);

	if (!f) {
		errno = ENOSYS;
		return NULL;
	}
	return f(pd, addr, length, access);
}

struct ibv_mr *gh_vreal_reg_mr_iova(struct ibv_pd *pd, void *addr,
				    size_t length, uint64_t iova, int access)
{
	reg_mr_iova_fn f = (reg_mr_iova_fn)gh_real_get(GH_SYM_ibv_reg_mr_iova);

	if (!f) {
		errno = ENOSYS;
		return NULL;
	}
	return f(pd, addr, length, iova, access);
}

struct ibv_mr *gh_vreal_reg_mr_iova2(struct ibv_pd *pd, void *addr,
				     size_t length, uint64_t iova,
				     unsigned int access)
{
	reg_mr_iova2_fn f2 = (reg_mr_iova2_fn)gh_real_get(GH_SYM_ibv_reg_mr_iova2);

	if (f2)
		return f2(pd, addr, length, iova, access);
	/* rdma-core before v28: ibv_reg_mr, when iova is the address */
	if (iova == (uint64_t)(uintptr_t)addr)
		return gh_vreal_reg_mr(pd, addr, length, (int)access);
	errno = ENOSYS;
	return NULL;
}

struct ibv_mr *gh_vreal_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset,
				      size_t length, uint64_t iova, int fd,
				      int access)
{
	reg_dmabuf_fn f = (reg_dmabuf_fn)gh_real_get(GH_SYM_ibv_reg_dmabuf_mr);

	if (!f) {
		errno = ENOSYS;
		return NULL;
	}
	return f(pd, offset, length, iova, fd, access);
}

int gh_vreal_dereg_mr(struct ibv_mr *mr)
{
	one_fn f = (one_fn)gh_real_get(GH_SYM_ibv_dereg_mr);
	int rc;

	if (!f)
		return -ENOSYS;
	rc = f(mr);
	return rc > 0 ? -rc : rc;
}

int gh_vreal_dereg_mr_raw(struct ibv_mr *mr)
{
	one_fn f = (one_fn)gh_real_get(GH_SYM_ibv_dereg_mr);

	return f ? f(mr) : ENOSYS;
}

int gh_vreal_rereg_mr(struct ibv_mr *mr, int flags, struct ibv_pd *pd,
		      void *addr, size_t length, int access)
{
	rereg_fn f = (rereg_fn)gh_real_get(GH_SYM_ibv_rereg_mr);

	if (!f) {
		errno = ENOSYS;
		return IBV_REREG_MR_ERR_INPUT;
	}
	return f(mr, flags, pd, addr, length, access);
}

int gh_vreal_dealloc_pd(struct ibv_pd *pd)
{
	one_fn f = (one_fn)gh_real_get(GH_SYM_ibv_dealloc_pd);

	return f ? f(pd) : ENOSYS;
}

int gh_vreal_close_device(struct ibv_context *ctx)
{
	one_fn f = (one_fn)gh_real_get(GH_SYM_ibv_close_device);

	return f ? f(ctx) : -1;
}

int gh_vreal_have(const char *name)
{
	int f = gh_sym_find(name);

	return f >= 0 && gh_syms[f].family == GH_FAM_VERBS &&
	       gh_real_get((unsigned int)f) != NULL;
}

/*
 * A libibverbs function gdrhook does not hook (queue pairs, CQs, device
 * queries, for the memory windows of src/pin/mwin.c): from the library that
 * provides the hooked ones, at rdma-core's version, else its default.
 */
void *gh_vreal_sym(const char *name, const char *version)
{
	void *known = gh_real_get(GH_SYM_ibv_dereg_mr), *h, *p = NULL;
	Dl_info info;

	if (!known || !dladdr(known, &info) || !info.dli_fname)
		return NULL;
	h = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
	if (!h)
		return NULL;
	if (version)
		p = gh_real_dlvsym(h, name, version);
	if (!p)
		p = gh_real_dlsym(h, name);
	dlclose(h);
	return p;
}
