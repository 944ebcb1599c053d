/* SPDX-License-Identifier: MIT */
/*
 * The libibverbs double (tests/fakeverbs) loaded the way NCCL does it:
 * dlopen("libibverbs.so.1") + dlvsym(handle, ..., "IBVERBS_1.1"), with
 * its test hooks.  For the preload tests of the verbs hooks (found
 * through the test program's RUNPATH).
 */
#ifndef GH_VERBS_LOAD_H
#define GH_VERBS_LOAD_H

#include <dlfcn.h>
#include <stdint.h>
#include <string.h>
#include <infiniband/verbs.h>

#include "preload_util.h"

#undef ibv_reg_mr
#undef ibv_reg_mr_iova

#define MiB (1ULL << 20)
#define LW IBV_ACCESS_LOCAL_WRITE
#define RW IBV_ACCESS_REMOTE_WRITE

typedef struct ibv_mr *(*reg_fn)(struct ibv_pd *, void *, size_t, int);
typedef struct ibv_mr *(*reg2_fn)(struct ibv_pd *, void *, size_t, uint64_t,
				  unsigned int);
typedef struct ibv_mr *(*dmabuf_fn)(struct ibv_pd *, uint64_t, size_t,
				    uint64_t, int, int);
typedef int (*rereg_fn)(struct ibv_mr *, int, struct ibv_pd *, void *,
			size_t, int);
typedef int (*dereg_fn)(struct ibv_mr *);
typedef struct ibv_pd *(*alloc_pd_fn)(struct ibv_context *);
typedef int (*dealloc_pd_fn)(struct ibv_pd *);
typedef int (*close_fn)(struct ibv_context *);

static struct verbs {
	void *h;
	reg_fn reg, reg10;
	reg2_fn reg2;
	dmabuf_fn dmabuf;
	rereg_fn rereg;
	dereg_fn dereg;
	alloc_pd_fn alloc_pd;
	dealloc_pd_fn dealloc_pd;
	close_fn close_dev;
	struct ibv_context *(*open)(void);
	struct ibv_context *(*open_nic)(int);
	unsigned long (*calls)(const char *);
	int (*live)(void);
	int (*stale)(void);
	int (*is_mr)(const struct ibv_mr *);
	int (*write)(struct ibv_pd *, uint32_t, uint64_t, const void *, size_t);
} v;

static inline int in_shim(const void *p)
{
	Dl_info info;

	return p && dladdr(p, &info) && info.dli_fname &&
	       strstr(info.dli_fname, "libgdrhook");
}

static inline void *need(void *p, const char *what)
{
	if (!p)
		TH_FAIL("fake libibverbs lacks %s", what);
	return p;
}

/* NCCL's way: dlopen + dlvsym with the version. */
static inline void verbs_load(void)
{
	v.h = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!v.h)
		TH_FAIL("dlopen libibverbs.so.1: %s", dlerror());
	v.reg = need(dlvsym(v.h, "ibv_reg_mr", "IBVERBS_1.1"), "ibv_reg_mr");
	v.reg10 = need(dlvsym(v.h, "ibv_reg_mr", "IBVERBS_1.0"), "1.0");
	v.reg2 = need(dlvsym(v.h, "ibv_reg_mr_iova2", "IBVERBS_1.8"), "iova2");
	v.dmabuf = need(dlvsym(v.h, "ibv_reg_dmabuf_mr", "IBVERBS_1.12"),
			"dmabuf");
	v.rereg = need(dlvsym(v.h, "ibv_rereg_mr", "IBVERBS_1.1"), "rereg");
	v.dereg = need(dlvsym(v.h, "ibv_dereg_mr", "IBVERBS_1.1"), "dereg");
	v.alloc_pd = need(dlvsym(v.h, "ibv_alloc_pd", "IBVERBS_1.1"), "pd");
	v.dealloc_pd = need(dlsym(v.h, "ibv_dealloc_pd"), "dealloc_pd");
	v.close_dev = need(dlsym(v.h, "ibv_close_device"), "close");
	v.open = need(dlsym(v.h, "fakeverbs_open"), "open");
	v.open_nic = need(dlsym(v.h, "fakeverbs_open_nic"), "open_nic");
	v.calls = need(dlsym(v.h, "fakeverbs_calls"), "calls");
	v.live = need(dlsym(v.h, "fakeverbs_live_mrs"), "live");
	v.stale = need(dlsym(v.h, "fakeverbs_stale_mrs"), "stale");
	v.is_mr = need(dlsym(v.h, "fakeverbs_is_mr"), "is_mr");
	v.write = need(dlsym(v.h, "fakeverbs_write"), "write");
}

static inline CUdeviceptr dev_alloc(size_t n)
{
	CUdeviceptr d = 0;

	CU_OK(cuMemAlloc(&d, n));
	return d;
}

/* Free d and allocate the same size again: the double hands the same
 * address back (LIFO), with new memory behind it. */
static inline CUdeviceptr realloc_same(CUdeviceptr d, size_t n)
{
	CUdeviceptr b;

	CU_OK(cuMemFree(d));
	b = dev_alloc(n);
	if (b != d)
		TH_FAIL("the double did not reuse %#llx (got %#llx)",
			(unsigned long long)d, (unsigned long long)b);
	return b;
}

/* Is the peer's write through rkey refused?  (any NIC error) */
static inline int refused(struct ibv_pd *pd, uint32_t rkey, uint64_t raddr)
{
	return v.write(pd, rkey, raddr, "x", 1) != 0;
}

#endif
