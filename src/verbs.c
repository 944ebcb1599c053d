// SPDX-License-Identifier: MIT
/*
 * libibverbs wrappers (hooks/verbs.hooks): memory registration goes
 * through the registration cache (rcache.c) when it is on tracked GPU
 * memory; everything else reaches libibverbs untouched.
 *
 * Which registrations are served from the cache: ibv_reg_mr,
 * ibv_reg_mr_iova and ibv_reg_mr_iova2 with iova == addr, access flags
 * within LOCAL_WRITE|REMOTE_*|RELAXED_ORDERING, of a range that lies in
 * one tracked device, VMM or IPC allocation.  Other registrations of
 * tracked memory (pool memory, managed memory, odd flags, iova != addr,
 * the program's own ibv_reg_dmabuf_mr, whose iova names the range) go to
 * libibverbs and are wrapped so a free revokes them.  Host memory and
 * untracked ranges pass through untouched; so does everything when the
 * backend is none, the shim is disabled, or the registry is untrusted.
 *
 * Reentrancy: libibverbs' own ibv_reg_mr calls ibv_reg_mr_iova2 through
 * its PLT, i.e. our export.  The per-thread hook guard (call.c) stays up
 * while a wrapper runs, real calls included, so that nested call passes
 * straight through and one registration is seen once.
 *
 * Real entry points: gh_real_get (resolve.c: the version the hook list
 * names, through RTLD_NEXT, else the copy a program dlopen'ed), or what
 * the program's own dlsym or dlvsym on its libibverbs handle returned
 * (gh_verbs_substitute).
 */
#include <dlfcn.h>
#include <errno.h>
#include <string.h>
#include <infiniband/verbs.h>

#include "internal.h"
#include "hookrt.h"
#include "rcache.h"
#include "rcache_span.h"
#include "log.h"
#include "evlog.h"

#undef ibv_reg_mr
#undef ibv_reg_mr_iova

/*
 * dlsym/dlvsym (and the ELF-less routes) found p for an ibv_ name: hand
 * out our wrapper when p is the library's default version of a function
 * we wrap; the IBVERBS_1.0 compat entry points take old structure
 * layouts and are left alone.
 */
void *gh_verbs_substitute(const char *name, void *p, const char *route)
{
	int f = gh_sym_find(name);
	Dl_info info;
	void *h, *def;

	if (f < 0 || gh_syms[f].family != GH_FAM_VERBS || !dladdr(p, &info) ||
	    !info.dli_fname)
		return p;
	h = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
	if (!h)
		return p;
	def = gh_real_dlsym(h, name);
	dlclose(h);
	if (def != p)
		return p;
	if (gh_real_set((unsigned int)f, p)) {
		gh_warn_once("%s: two different libibverbs definitions of %s; leaving the second one unwrapped",
			     route, name);
		return p;
	}
	gh_dbg("%s: %s -> wrapper", route, name);
	return gh_syms[f].wrapper;
}

/* ------------------------------------------ real calls, for the backends */

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

struct ibv_mr *gh_vreal_reg_mr_iova2(struct ibv_pd *pd, void *addr,
				     size_t length, uint64_t iova,
				     unsigned int access)
{
	reg_mr_iova2_fn f2 = (reg_mr_iova2_fn)gh_real_get(GH_SYM_ibv_reg_mr_iova2);
	reg_mr_fn f1;

	if (f2)
		return f2(pd, addr, length, iova, access);
	f1 = (reg_mr_fn)gh_real_get(GH_SYM_ibv_reg_mr);
	if (f1 && iova == (uint64_t)(uintptr_t)addr)
		return f1(pd, addr, length, (int)access);
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

int gh_vreal_have(const char *name)
{
	int f = gh_sym_find(name);

	return f >= 0 && gh_syms[f].family == GH_FAM_VERBS &&
	       gh_real_get((unsigned int)f) != NULL;
}

/* --------------------------------------------------------- registrations */

struct vreq {
	unsigned int fn;	/* GH_SYM_ibv_* */
	struct ibv_pd *pd;
	void *addr;
	size_t len;
	uint64_t iova;
	unsigned int access;
	int fd;
	uint64_t offset;
};

static struct ibv_mr *call_real(const struct vreq *q)
{
	void *f = gh_real_get(q->fn);

	if (!f) {
		errno = ENOSYS;
		return NULL;
	}
	switch (q->fn) {
	case GH_SYM_ibv_reg_mr:
		return ((reg_mr_fn)f)(q->pd, q->addr, q->len, (int)q->access);
	case GH_SYM_ibv_reg_mr_iova:
		return ((reg_mr_iova_fn)f)(q->pd, q->addr, q->len, q->iova,
					   (int)q->access);
	case GH_SYM_ibv_reg_mr_iova2:
		return ((reg_mr_iova2_fn)f)(q->pd, q->addr, q->len, q->iova,
					    q->access);
	case GH_SYM_ibv_reg_dmabuf_mr:
		return ((reg_dmabuf_fn)f)(q->pd, q->offset, q->len, q->iova,
					  q->fd, (int)q->access);
	}
	errno = EINVAL;
	return NULL;
}

static void ev_lookup(unsigned int ev, const struct vreq *q, uint64_t addr,
		      const struct gh_range *r, struct ibv_mr *mr,
		      uint64_t t0)
{
	struct gh_evrec e;

	if (!gh_evlog_enabled())
		return;
	gh_evrec_init(&e, ev, t0);
	e.api = gh_syms[q->fn].name;
	e.ptr = addr;
	e.size = q->len;
	e.gen = r->gen;
	e.dev = r->dev;
	e.aux = (uint64_t)(uintptr_t)mr;
	e.aux2 = (uint64_t)(uintptr_t)q->pd;
	e.kind = (uint16_t)q->access;
	gh_emit(&e);
}

static int untrusted_now(void)
{
	static int purged;

	if (GH_LIKELY(!__atomic_load_n(&gh_untrusted, __ATOMIC_RELAXED)))
		return 0;
	if (!__atomic_exchange_n(&purged, 1, __ATOMIC_ACQ_REL))
		gh_rcache_purge(1);
	return 1;
}

/*
 * With the guard up: register q, from the cache or wrapped, or untouched.
 * Returns what the program gets; errno as the real call left it.
 */
static struct ibv_mr *vreg_guarded(const struct vreq *q, int saved_errno)
{
	uint64_t addr = q->fn == GH_SYM_ibv_reg_dmabuf_mr ? q->iova :
			(uint64_t)(uintptr_t)q->addr;
	const struct gh_pin_ops *ops;
	struct ibv_mr *mr, *alias;
	struct gh_range r;
	uint64_t t0;
	int err, hit = 0, e, straddle;

	if (untrusted_now() || !q->pd || !q->len)
		goto pass;
	/* untracked, or runs past one allocation (served only as a span of
	 * VMM mappings: src/rcache_span.c) */
	straddle = gh_registry_lookup(addr, q->len, &r);
	if (straddle && straddle != -ERANGE)
		goto pass;
	if (r.kind == GDRHOOK_KIND_HOST ||
	    r.kind == GDRHOOK_KIND_HOST_REGISTERED)
		goto pass;
	ops = gh_rcache_ops();
	if (!ops) {
		ops = gh_pin_choose(r.dev);
		if (ops == &gh_pin_none ||
		    gh_rcache_init(ops, gh_cfg.cache_max_size,
				   gh_cfg.cache_max_count))
			goto pass;
		ops = gh_rcache_ops();
	}
	if (ops == &gh_pin_none)
		goto pass;
	t0 = gh_evlog_clock();
	if (q->fn != GH_SYM_ibv_reg_dmabuf_mr && q->iova == addr) {
		err = gh_rcspan_reg(&r, straddle, q->pd, addr, q->len,
				    q->access, &alias, &hit);
		if (!err) {
			ev_lookup(hit ? GH_EV_HIT : GH_EV_MISS, q, addr, &r,
				  alias, t0);
			errno = saved_errno;
			return alias;
		}
		if (err != -ENOTSUP && err != -ENOSPC && err != -ESTALE)
			gh_dbg("%s: cache registration of %p+%zu failed: error %d; passing through",
			       gh_syms[q->fn].name, q->addr, q->len, -err);
	}
	if (straddle)
		goto pass;
	errno = saved_errno;
	mr = call_real(q);
	if (!mr)
		return NULL;
	e = errno;
	if (!gh_rcache_wrap(&r, mr, q->access, &alias)) {
		ev_lookup(GH_EV_MISS, q, addr, &r, alias, t0);
		mr = alias;
	}
	errno = e;
	return mr;
pass:
	errno = saved_errno;
	return call_real(q);
}

static struct ibv_mr *vreg(const struct vreq *q)
{
	int saved = errno, was, e;
	struct ibv_mr *mr;

	if (!gh_active()) {
		errno = saved;
		return call_real(q);
	}
	was = gh_guard_enter();
	if (was) {
		/* Nested (libibverbs calling itself, or our own code). */
		errno = saved;
		return call_real(q);
	}
	mr = vreg_guarded(q, saved);
	e = errno;
	gh_guard_leave(was);
	errno = e;
	return mr;
}

struct ibv_mr *gh_manual_ibv_reg_mr(struct ibv_pd *pd, void *addr,
				    size_t length, int access)
{
	struct vreq q = { GH_SYM_ibv_reg_mr, pd, addr, length, (uintptr_t)addr,
			  (unsigned int)access, -1, 0 };

	return vreg(&q);
}

struct ibv_mr *gh_manual_ibv_reg_mr_iova(struct ibv_pd *pd, void *addr,
					 size_t length, uint64_t iova,
					 int access)
{
	struct vreq q = { GH_SYM_ibv_reg_mr_iova, pd, addr, length, iova,
			  (unsigned int)access, -1, 0 };

	return vreg(&q);
}

struct ibv_mr *gh_manual_ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr,
					  size_t length, uint64_t iova,
					  unsigned int access)
{
	struct vreq q = { GH_SYM_ibv_reg_mr_iova2, pd, addr, length, iova, access, -1,
			  0 };

	return vreg(&q);
}

struct ibv_mr *gh_manual_ibv_reg_dmabuf_mr(struct ibv_pd *pd,
					   uint64_t offset, size_t length,
					   uint64_t iova, int fd, int access)
{
	struct vreq q = { GH_SYM_ibv_reg_dmabuf_mr, pd, NULL, length, iova,
			  (unsigned int)access, fd, offset };

	return vreg(&q);
}

int gh_manual_ibv_dereg_mr(struct ibv_mr *mr)
{
	one_fn f;
	int saved = errno, rc, was;

	if (gh_rcache_is_alias(mr)) {
		was = gh_guard_enter();
		rc = gh_rcache_dereg(mr);
		gh_guard_leave(was);
		errno = saved;
		return rc ? -rc : 0;
	}
	f = (one_fn)gh_real_get(GH_SYM_ibv_dereg_mr);
	if (!f)
		return ENOSYS;
	return f(mr);
}

/*
 * ibv_rereg_mr of an alias: register the new (pd, range, access) like a
 * fresh ibv_reg_mr and move the program's MR object onto it; the old
 * registration loses one reference.  The MR pointer stays; lkey and rkey
 * may change (as with the real call).  On failure the old MR is intact
 * (IBV_REREG_MR_ERR_INPUT).  A real MR passes through.
 */
int gh_manual_ibv_rereg_mr(struct ibv_mr *mr, int flags, struct ibv_pd *pd,
			   void *addr, size_t length, int access)
{
	rereg_fn f;
	struct vreq q;
	struct ibv_mr *nm, *na;
	int saved = errno, was, e;

	if (!gh_rcache_is_alias(mr)) {
		f = (rereg_fn)gh_real_get(GH_SYM_ibv_rereg_mr);
		if (!f) {
			errno = ENOSYS;
			return IBV_REREG_MR_ERR_INPUT;
		}
		return f(mr, flags, pd, addr, length, access);
	}
	if (flags & ~IBV_REREG_MR_FLAGS_SUPPORTED || !flags) {
		errno = EINVAL;
		return IBV_REREG_MR_ERR_INPUT;
	}
	memset(&q, 0, sizeof(q));
	q.fn = GH_SYM_ibv_reg_mr_iova2;
	q.pd = flags & IBV_REREG_MR_CHANGE_PD ? pd : mr->pd;
	q.addr = flags & IBV_REREG_MR_CHANGE_TRANSLATION ? addr : mr->addr;
	q.len = flags & IBV_REREG_MR_CHANGE_TRANSLATION ? length : mr->length;
	q.iova = (uintptr_t)q.addr;
	q.access = flags & IBV_REREG_MR_CHANGE_ACCESS ?
		   (unsigned int)access : gh_rcache_alias_access(mr);
	q.fd = -1;
	was = gh_guard_enter();
	nm = vreg_guarded(&q, saved);
	if (!nm) {
		e = errno;
		gh_guard_leave(was);
		errno = e;
		return IBV_REREG_MR_ERR_INPUT;
	}
	if (!gh_rcache_is_alias(nm)) {
		/* The new range is not tracked: wrap the plain MR. */
		if (gh_rcache_wrap(NULL, nm, q.access, &na)) {
			gh_vreal_dereg_mr(nm);
			gh_guard_leave(was);
			errno = ENOMEM;
			return IBV_REREG_MR_ERR_INPUT;
		}
		nm = na;
	}
	gh_rcache_move(mr, nm);
	gh_guard_leave(was);
	errno = saved;
	return 0;
}

int gh_manual_ibv_dealloc_pd(struct ibv_pd *pd)
{
	one_fn f = (one_fn)gh_real_get(GH_SYM_ibv_dealloc_pd);
	int saved = errno, was;

	if (gh_rcache_ready() && gh_active()) {
		/* Our idle cached MRs must not make the real call fail. */
		was = gh_guard_enter();
		gh_rcache_drop_pd(pd);
		gh_guard_leave(was);
		errno = saved;
	}
	if (!f)
		return ENOSYS;
	return f(pd);
}

int gh_manual_ibv_close_device(struct ibv_context *context)
{
	one_fn f = (one_fn)gh_real_get(GH_SYM_ibv_close_device);
	int saved = errno, was;

	if (gh_rcache_ready() && gh_active()) {
		/* Closing the device destroys every MR: ours first, for real. */
		was = gh_guard_enter();
		gh_rcache_drop_context(context);
		gh_guard_leave(was);
		errno = saved;
	}
	if (!f)
		return -1;
	return f(context);
}

GH_EXPORT struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr,
				    size_t length, int access)
	__attribute__((alias("gh_manual_ibv_reg_mr")));
GH_EXPORT struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr,
					 size_t length, uint64_t iova,
					 int access)
	__attribute__((alias("gh_manual_ibv_reg_mr_iova")));
GH_EXPORT struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr,
					  size_t length, uint64_t iova,
					  unsigned int access)
	__attribute__((alias("gh_manual_ibv_reg_mr_iova2")));
GH_EXPORT struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd,
					   uint64_t offset, size_t length,
					   uint64_t iova, int fd, int access)
	__attribute__((alias("gh_manual_ibv_reg_dmabuf_mr")));
GH_EXPORT int ibv_rereg_mr(struct ibv_mr *mr, int flags, struct ibv_pd *pd,
			   void *addr, size_t length, int access)
	__attribute__((alias("gh_manual_ibv_rereg_mr")));
GH_EXPORT int ibv_dereg_mr(struct ibv_mr *mr)
	__attribute__((alias("gh_manual_ibv_dereg_mr")));
GH_EXPORT int ibv_dealloc_pd(struct ibv_pd *pd)
	__attribute__((alias("gh_manual_ibv_dealloc_pd")));
GH_EXPORT int ibv_close_device(struct ibv_context *context)
	__attribute__((alias("gh_manual_ibv_close_device")));
