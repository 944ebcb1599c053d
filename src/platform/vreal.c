// SPDX-License-Identifier: MIT
/*
 * Real libibverbs entry points (src/platform/vreal.h), the one place that
 * finds them: the hooked ones at the version the hook list names, through
 * RTLD_NEXT, else what the program's own dlsym/dlvsym on its libibverbs
 * handle returned (resolve.c); the others (struct gh_verbs) from the
 * library that provides those.  A missing entry point fails with ENOSYS,
 * as a NIC call that cannot be made.
 */
#include <dlfcn.h>
#include <errno.h>
#include <sched.h>
#include <stddef.h>
#include <string.h>
#include <infiniband/verbs.h>

#include <cuda.h>

#include "gh_hooks.h"
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

/* ------------------------------------------------------------ table */

/*
 * The rows gdrhook does not hook: at IBVERBS_1.1 (rdma-core's default
 * version of each) where the memory windows have always asked for it,
 * else (NULL) at the default version, as gdrhook-info has.  The hooked
 * rows come from gh_real_get, at the hook list's versions, like the
 * calls above.
 */
static const struct row {
	const char *name, *version;
	size_t off;
} rows[] = {
#define ROW(n, v)	{ "ibv_" #n, v, offsetof(struct gh_verbs, n) }
	ROW(get_device_list, NULL),
	ROW(free_device_list, NULL),
	ROW(get_device_name, NULL),
	ROW(open_device, NULL),
	ROW(query_device, "IBVERBS_1.1"),
	ROW(query_port, "IBVERBS_1.1"),
	ROW(query_gid, "IBVERBS_1.1"),
	ROW(alloc_pd, NULL),
	ROW(create_cq, "IBVERBS_1.1"),
	ROW(destroy_cq, "IBVERBS_1.1"),
	ROW(create_qp, "IBVERBS_1.1"),
	ROW(modify_qp, "IBVERBS_1.1"),
	ROW(destroy_qp, "IBVERBS_1.1"),
#undef ROW
};

static struct gh_verbs table;
enum { T_NONE, T_FILLING, T_READY };
static int table_state;

/*
 * From the library that provides the hooked entry points: the one the
 * hooks call (the program's own copy where it dlopen'ed one), opened
 * again RTLD_NOLOAD, so that nothing here makes libibverbs load.
 */
static int fill(struct gh_verbs *t)
{
	void *known = gh_real_get(GH_SYM_ibv_dereg_mr), *h;
	Dl_info info;
	int saved = errno;

	memset(t, 0, sizeof(*t));
	h = known && dladdr(known, &info) && info.dli_fname ?
	    dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD) : NULL;
	if (!h) {
		errno = saved;
		return -1;
	}
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		void *p = NULL;

		if (rows[i].version)
			p = gh_real_dlvsym(h, rows[i].name, rows[i].version);
		if (!p)
			p = gh_real_dlsym(h, rows[i].name);
		memcpy((char *)t + rows[i].off, &p, sizeof(p));
	}
	dlclose(h);
	t->close_device = (int (*)(struct ibv_context *))
			  gh_real_get(GH_SYM_ibv_close_device);
	t->dealloc_pd = (int (*)(struct ibv_pd *))
			gh_real_get(GH_SYM_ibv_dealloc_pd);
	t->reg_dmabuf_mr = (reg_dmabuf_fn)gh_real_get(GH_SYM_ibv_reg_dmabuf_mr);
	t->dereg_mr = (int (*)(struct ibv_mr *))known;
	errno = saved;
	return 0;
}

const struct gh_verbs *gh_vreal_verbs(void)
{
	struct gh_verbs t;
	int none = T_NONE;

	if (__atomic_load_n(&table_state, __ATOMIC_ACQUIRE) == T_READY)
		return &table;
	/* not kept while libibverbs is absent: it may come later */
	if (fill(&t))
		return NULL;
	/*
	 * Racing fillers found the same entry points: the first publishes,
	 * the others wait out its copy (no call in it; a lock would be held
	 * as long, and no longer).
	 */
	if (__atomic_compare_exchange_n(&table_state, &none, T_FILLING, 0,
					__ATOMIC_ACQUIRE, __ATOMIC_ACQUIRE)) {
		table = t;
		__atomic_store_n(&table_state, T_READY, __ATOMIC_RELEASE);
	}
	while (__atomic_load_n(&table_state, __ATOMIC_ACQUIRE) != T_READY)
		sched_yield();
	return &table;
}

/* Kept open for the process's life: the table points into it. */
static void *loaded;

const struct gh_verbs *gh_vreal_load(int *loaded_p)
{
	const struct gh_verbs *v = gh_vreal_verbs();
	void *h, *none = NULL;

	*loaded_p = 1;
	if (v)
		return v;
	h = dlopen("libibverbs.so.1", RTLD_NOW);
	if (!h) {
		*loaded_p = 0;
		return NULL;
	}
	if (!__atomic_compare_exchange_n(&loaded, &none, h, 0,
					 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		dlclose(h);	/* one reference kept is enough */
	return gh_vreal_verbs();
}
