// SPDX-License-Identifier: MIT
/*
 * libibverbs wrappers (hooks/verbs.hooks): memory registration goes
 * through the registration cache (src/rcache) when it is on tracked GPU
 * memory; everything else reaches libibverbs untouched.
 *
 * Which registrations are served from the cache: ibv_reg_mr,
 * ibv_reg_mr_iova and ibv_reg_mr_iova2 with iova == addr, access flags
 * within LOCAL_WRITE|REMOTE_*|RELAXED_ORDERING, of a range that lies in
 * one tracked device, VMM or IPC allocation.  Other registrations of
 * tracked memory (pool memory, managed memory, odd flags, iova != addr,
 * the program's own ibv_reg_dmabuf_mr, whose iova names the range) go to
 * libibverbs and are wrapped so a free revokes them; so are ranges that
 * straddle two allocations, run past one's end or cover several: the
 * free of any allocation they touch revokes them (rcache.h,
 * gh_rcache_wrap).  Host memory and untracked ranges pass through
 * untouched; so does everything when the backend is none, the shim is
 * disabled, or the registry is untrusted.
 *
 * Reentrancy: libibverbs' own ibv_reg_mr calls ibv_reg_mr_iova2 through
 * its PLT, i.e. our export.  The per-thread hook guard (call.c) stays up
 * while a wrapper runs, real calls included, so that nested call passes
 * straight through and one registration is seen once.
 *
 * Real entry points: src/platform/vreal.c (resolve.c: the version the hook list
 * names, through RTLD_NEXT, else the copy a program dlopen'ed, or what
 * the program's own dlsym or dlvsym on its libibverbs handle returned:
 * gh_verbs_substitute).
 */
#include <dlfcn.h>
#include <errno.h>
#include <string.h>
#include <infiniband/verbs.h>

#include "rcache/rcache.h"
#include "dmabuf_export.h"
#include "hookrt.h"
#include "init.h"
#include "substitute.h"

#undef ibv_reg_mr
#undef ibv_reg_mr_iova

static struct ibv_mr *reg_mr_1_0(struct ibv_pd *pd, void *addr, size_t len,
				 int access);
static void *compat_reg_mr(void *h, void *p);

/*
 * dlsym/dlvsym (and the ELF-less routes) found p for an ibv_ name: hand
 * out our wrapper when p is the library's default version of a function
 * we wrap.  The IBVERBS_1.0 compat entry points take old structure
 * layouts: ibv_reg_mr@IBVERBS_1.0 gets a wrapper that only watches it
 * (reg_mr_1_0), the others are left alone.
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
	if (def != p && !strcmp(name, "ibv_reg_mr")) {
		p = compat_reg_mr(h, p);
		dlclose(h);
		return p;
	}
	dlclose(h);
	if (def != p)
		return p;
	if (gh_real_set((unsigned int)f, p)) {
		gh_warn_once("%s: two different libibverbs definitions of %s; leaving the second one unwrapped",
			     route, name);
		return p;
	}
	gh_dbg("%s: %s -> wrapper", route, name);
	return gh_sym_wrappers[f];
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
	switch (q->fn) {
	case GH_SYM_ibv_reg_mr:
		return gh_vreal_reg_mr(q->pd, q->addr, q->len, (int)q->access);
	case GH_SYM_ibv_reg_mr_iova:
		return gh_vreal_reg_mr_iova(q->pd, q->addr, q->len, q->iova,
					    (int)q->access);
	case GH_SYM_ibv_reg_mr_iova2:
		return gh_vreal_reg_mr_iova2(q->pd, q->addr, q->len, q->iova,
					     q->access);
	case GH_SYM_ibv_reg_dmabuf_mr:
		return gh_vreal_reg_dmabuf_mr(q->pd, q->offset, q->len, q->iova,
					      q->fd, (int)q->access);
	}
	errno = EINVAL;
	return NULL;
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
 * What a registration's range touched before its NIC call: the GPU
 * allocations (kind not host), at most GH_SNAP of them.
 */
#define GH_SNAP		64
#define GH_REG_TRIES	16

struct snap {
	unsigned int n;
	int over;
	struct gh_range r[GH_SNAP];
};

static int snap_one(const struct gh_range *g, void *arg)
{
	struct snap *sn = arg;

	if (g->kind == GDRHOOK_KIND_HOST ||
	    g->kind == GDRHOOK_KIND_HOST_REGISTERED)
		return 0;
	if (sn->n == GH_SNAP) {
		sn->over = 1;
		return 1;
	}
	sn->r[sn->n++] = *g;
	return 0;
}

/*
 * A registration made outside the cache's lock is watched (inflight.h):
 * watch_begin announces [lo, lo + len) and reads what it touches now
 * (-ENOMEM: no record, the call is not to be trusted); after the NIC
 * call, watch_end says 0 (untouched), 1 (an allocation or free touched
 * the range, or a signal handler queued one here: undo and retry), 2
 * (give up: a free of memory in the range did not end within a second)
 * or 3 (as 0, but memory calls elsewhere were in flight: the MR the
 * program gets goes to watch_commit, which may still say 1).  Only 3
 * keeps the record.
 */
static int watch_begin(uint64_t lo, uint64_t len, struct snap *sn,
		       struct gh_if_rec **rec_p)
{
	int err = gh_inflight_enter(lo, len ? len : 1, rec_p);

	sn->n = 0;
	sn->over = 0;
	if (!err)
		gh_registry_overlaps(lo, len ? len : 1, snap_one, sn);
	return err;
}

static int watch_end(struct gh_if_rec *rec)
{
	int moved = gh_inflight_settle(rec);

	if (moved == 1 || moved == 2) {
		gh_inflight_leave(rec);
		return moved;
	}
	if (gh_deferred_pending()) {
		if (moved == 3)
			gh_inflight_leave(rec);
		return 1;
	}
	return moved;
}

/* What a committed registration is, for raced() */
#define WATCH_PLAIN	0u	/* libibverbs' MR, handed out as it is */
#define WATCH_ALIAS	1u	/* our alias over it */

/*
 * A memory call that was in flight when a registration's NIC call
 * returned inserted (or is about to free) r, which that registration
 * reaches: tie it to r, so r's free revokes it; what cannot be tied is
 * revoked now (before the free, for a free).  On the thread of that
 * call, before it returns.
 */
static void raced(void *cookie, unsigned int what, const struct gh_range *r,
		  int freed)
{
	struct ibv_mr *mr = cookie;

	if (r->kind == GDRHOOK_KIND_HOST ||
	    r->kind == GDRHOOK_KIND_HOST_REGISTERED)
		return;		/* host memory: nothing to revoke for */
	GH_COUNT(regs_raced, 1);
	gh_dbg("%s: registration %p raced the %s of %p+%llu: %s",
	       freed ? "free" : "allocation", (void *)mr,
	       freed ? "free" : "allocation", (void *)(uintptr_t)r->base,
	       (unsigned long long)r->size,
	       freed ? "revoked before the free" : "tied to it");
	/* a plain MR may be the first registration the cache hears of
	 * (an alias: the cache runs; its pd may be moving, not read) */
	if (what == WATCH_ALIAS || gh_rcache_start(r, mr->pd))
		gh_rcache_raced(mr, what == WATCH_ALIAS, r);
}

/* The calls in flight it waits on are handed mr, and raced() with it. */
static int watch_commit(struct gh_if_rec *rec, int moved, struct ibv_mr *mr,
			unsigned int what)
{
	if (moved != 3)
		return 0;
	return gh_inflight_commit(rec, raced, mr, what);
}

/*
 * The program's own dma-buf: the memory it reaches is what it was
 * exported from (dmabuf_export.c), whatever iova the program names.
 * 0 and sn, *addr_p; -ENOENT: not an export seen here.
 */
static int snap_dmabuf(const struct vreq *q, struct snap *sn,
		       uint64_t *addr_p)
{
	struct gh_export x;
	uint64_t lo, hi;

	if (gh_dmabuf_export_find(q->fd, &x))
		return -ENOENT;
	lo = x.base + q->offset;
	hi = lo + q->len;
	sn->n = 0;
	sn->over = 0;
	for (unsigned int k = 0; k < x.n; k++)
		if (x.r[k].base < hi && lo < x.r[k].base + x.r[k].size)
			sn->r[sn->n++] = x.r[k];
	*addr_p = lo;
	return 0;
}

static int backend_none(void)
{
	return gh_pin_decided() == &gh_pin_none;
}

/*
 * A registration the cache does not serve, made by libibverbs, tied to
 * the generations its range touched before the NIC call (see
 * inflight.h): an allocation or free of that range during the call
 * makes it undo and start again (up to GH_REG_TRIES times), so the MR
 * it returns reaches the memory that is tracked for it, never memory
 * freed meanwhile.  Range-less (host or untracked) results pass through
 * as libibverbs made them.
 */
static struct ibv_mr *vreg_wrapped(const struct vreq *q, uint64_t addr,
				   int saved_errno, uint64_t t0)
{
	int dmabuf = q->fn == GH_SYM_ibv_reg_dmabuf_mr;
	struct ibv_mr *mr, *alias;
	struct snap sn;
	int err = 0, e, moved = 0, tries;

	for (tries = 0; tries < GH_REG_TRIES; tries++) {
		struct gh_if_rec *rec = NULL;

		moved = 0;
		if (!dmabuf) {
			err = watch_begin(addr, q->len, &sn, &rec);
			if (err)
				break;
		} else if (snap_dmabuf(q, &sn, &addr)) {
			/* a dma-buf we did not see made: nothing to tie */
			errno = saved_errno;
			return call_real(q);
		}
		if (sn.over) {
			if (rec)
				gh_inflight_leave(rec);
			err = -ENOSPC;
			break;
		}
		errno = saved_errno;
		mr = call_real(q);
		e = errno;
		if (rec) {
			moved = watch_end(rec);
			if ((moved == 1 || moved == 2) && mr) {
				gh_vreal_dereg_mr(mr);
				err = -EAGAIN;
				if (moved == 2)
					break;
				continue;
			}
		}
		if (!mr || !sn.n || !gh_rcache_start(&sn.r[0], q->pd)) {
			/* failed, or nothing tracked: as libibverbs made it */
			if (watch_commit(rec, mr ? moved : 0, mr, WATCH_PLAIN)) {
				gh_vreal_dereg_mr(mr);
				err = -EAGAIN;
				continue;
			}
			if (!mr && moved == 3)
				gh_inflight_leave(rec);
			if (mr && !sn.n)
				GH_COUNT(regs_passed, 1);
			errno = e;
			return mr;
		}
		err = gh_rcache_wrap(mr, sn.r, sn.n, addr, q->len, q->access,
				     0, &alias);
		if (!err) {
			if (watch_commit(rec, moved, alias, WATCH_ALIAS)) {
				/* its ring deregisters the real MR */
				gh_rcache_dereg(alias);
				err = -EAGAIN;
				continue;
			}
			gh_rcache_log_lookup(0, gh_syms[q->fn].name, addr,
					     q->len, &sn.r[0], alias, q->pd,
					     q->access, t0);
			errno = e;
			return alias;
		}
		if (moved == 3)
			gh_inflight_leave(rec);
		gh_vreal_dereg_mr(mr);
		if (err != -ESTALE || dmabuf)
			break;
	}
	/*
	 * Never hand out an unwrapped registration of tracked GPU memory: a
	 * free could not revoke it.  Say which memory and why.
	 */
	gh_warn("%s: registration of %s memory %p+%zu refused (%s): %s",
		gh_syms[q->fn].name, sn.n ? "GPU" : "host",
		(void *)(uintptr_t)addr, q->len,
		err == -ESTALE ? "EFAULT" : err == -EAGAIN ? "EAGAIN" :
		"ENOMEM",
		err == -ESTALE ?
		"GPU memory it reached was freed while it was made" :
		err == -EAGAIN && moved == 2 ?
		"GPU memory in its range is being freed by another thread whose call has not ended after 1 s" :
		err == -EAGAIN ?
		"GPU memory in its range was allocated or freed by other threads each of 16 times it was made" :
		err == -ENOSPC && sn.over ?
		"it spans more than 64 GPU allocations" :
		err == -ENOSPC ? "the registration cache's tables are full" :
		err == -ENOMEM ? "no memory for its in-flight record" :
		"the registration cache is off");
	errno = err == -ESTALE ? EFAULT : err == -EAGAIN ? EAGAIN : ENOMEM;
	return NULL;
}

/*
 * With the guard up: register q, from the cache or wrapped, or untouched.
 * Returns what the program gets; errno as the real call left it.
 */
static struct ibv_mr *vreg_guarded(const struct vreq *q, int saved_errno)
{
	int dmabuf = q->fn == GH_SYM_ibv_reg_dmabuf_mr;
	uint64_t addr = dmabuf ? q->iova : (uint64_t)(uintptr_t)q->addr;
	struct ibv_mr *alias;
	struct gh_range r;
	uint64_t t0 = 0;
	int err, hit = 0, inside, tries = 0;

	if (untrusted_now() || !q->pd || !q->len)
		goto pass;
	/* A capability probe (NCCL: fd -1, EOPNOTSUPP expected). */
	if (dmabuf && q->fd < 0)
		goto pass;
	/* A range past 2^64: the kernel refuses it (ib_umem_get). */
	if (!dmabuf && addr + q->len < addr) {
		errno = EINVAL;
		return NULL;
	}
	if (backend_none())
		goto pass;
	if (dmabuf)
		goto wrap;
again:
	/* the cache's line of a hit, fetched while the registry answers */
	gh_rcache_prefetch(q->pd, addr, q->len, q->access);
	inside = !gh_registry_lookup(addr, q->len, &r);
	if (inside && (r.kind == GDRHOOK_KIND_HOST ||
		       r.kind == GDRHOOK_KIND_HOST_REGISTERED))
		goto wrap;
	/* Straddling, overrunning or several allocations: wrapped below. */
	if (!inside && gh_rcache_touches(addr, q->len, &r))
		goto wrap;	/* no tracked GPU memory (now) */
	if (!gh_rcache_start(&r, q->pd))
		goto pass;	/* backend none, or this NIC cannot import */
	t0 = gh_evlog_clock();
	/* Inside one allocation, or a run of adjacent VMM mappings from addr's
	 * (a span, src/rcache/rcache_span.c); anything else is wrapped below. */
	if ((inside || addr >= r.base) && q->iova == addr) {
		err = gh_rcspan_reg(&r, inside ? 0 : -ERANGE, q->pd, addr,
				    q->len, q->access, &alias, &hit);
		if (!err) {
			gh_rcache_log_lookup(hit, gh_syms[q->fn].name, addr,
					     q->len, &r, alias, q->pd,
					     q->access, t0);
			gh_dbg("%s %p+%zu pd %p: served by the cache (%s)", gh_syms[q->fn].name, q->addr, q->len, (void *)q->pd, hit ? "hit" : "miss: pinned and registered now");
			errno = saved_errno;
			return alias;
		}
		/* freed meanwhile: what is there now decides */
		if (err == -ESTALE && ++tries < GH_REG_TRIES)
			goto again;
		if (err != -ENOTSUP && err != -ENOSPC && err != -ESTALE)
			gh_dbg("%s: cache registration of %p+%zu failed: %s; registering uncached",
			       gh_syms[q->fn].name, q->addr, q->len,
			       gh_errtext(-err));
	}
wrap:
	gh_dbg("%s %p+%zu pd %p: wrapped: registered by libibverbs, tied to what it covers (%s)", gh_syms[q->fn].name, q->addr, q->len, (void *)q->pd, dmabuf ? "a DMA-BUF registration" : t0 ? "the cache did not take it" : "host memory, or not inside one tracked GPU allocation");
	if (!t0)
		t0 = gh_evlog_clock();
	return vreg_wrapped(q, addr, saved_errno, t0);
pass:
	GH_COUNT(regs_passed, 1);
	gh_dbg("%s %p+%zu pd %p: passed through untouched (%s)", gh_syms[q->fn].name, q->addr, q->len, (void *)q->pd, __atomic_load_n(&gh_untrusted, __ATOMIC_RELAXED) ? "the registry is not trusted" : !q->pd || !q->len ? "no PD or no length" : dmabuf && q->fd < 0 ? "a capability probe (fd -1)" : backend_none() ? "pin backend none" : "the pin backend cannot serve this NIC");
	errno = saved_errno;
	return call_real(q);
}

/* Registrations this thread brought to vreg (reg_mr_1_0 watches it). */
static __thread unsigned int vreg_calls;

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
	gh_lifecycle_banner();	/* a verbs program on host memory, too */
	GH_COUNT(regs_seen, 1);
	vreg_calls++;
	mr = vreg_guarded(q, saved);
	e = errno;
	gh_lifecycle_banner();	/* again if the backend the cache runs changed */
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

/*
 * ibv_reg_mr@IBVERBS_1.0.  rdma-core's wraps a registration by the
 * default version, made through its PLT: our wrapper of that one sees
 * it (and a free revokes it).  A library whose compat entry registers by
 * itself would hand out a registration of GPU memory no free could
 * revoke: such a one is deregistered and refused.  pd is an old-layout
 * object: passed on, never read.
 */
static struct {
	struct ibv_mr *(*reg)(struct ibv_pd *, void *, size_t, int);
	int (*dereg)(struct ibv_mr *);
} compat;

static void *compat_reg_mr(void *h, void *p)
{
	void *dereg = gh_real_dlvsym(h, "ibv_dereg_mr", "IBVERBS_1.0");

	if (!dereg)
		return p;
	if (!__atomic_load_n(&compat.reg, __ATOMIC_ACQUIRE)) {
		compat.dereg = (int (*)(struct ibv_mr *))dereg;
		__atomic_store_n(&compat.reg,
				 (struct ibv_mr *(*)(struct ibv_pd *, void *,
						     size_t, int))p,
				 __ATOMIC_RELEASE);
	}
	if ((void *)compat.reg != p)
		return p;	/* a second libibverbs: left alone */
	return (void *)reg_mr_1_0;
}

static struct ibv_mr *reg_mr_1_0(struct ibv_pd *pd, void *addr, size_t len,
				 int access)
{
	unsigned int seen = vreg_calls;
	struct ibv_mr *mr;
	struct gh_if_rec *rec;
	struct snap sn;
	int was, e, moved = 2;

	if (!gh_active() || gh_guard_busy() || backend_none())
		return compat.reg(pd, addr, len, access);
	e = watch_begin((uintptr_t)addr, len, &sn, &rec);
	mr = compat.reg(pd, addr, len, access);
	if (!e) {
		e = errno;
		moved = watch_end(rec);
		/* not handed over: its MR has the old layout (rare enough
		 * to wait for the calls in flight) */
		if (moved == 3)
			moved = gh_inflight_wait(rec);
	} else {
		e = errno;
	}
	if (!mr || vreg_calls != seen || (!sn.n && !sn.over && !moved)) {
		errno = e;
		return mr;	/* seen by our ibv_reg_mr, or not GPU memory */
	}
	was = gh_guard_enter();
	compat.dereg(mr);
	gh_warn_once("ibv_reg_mr@IBVERBS_1.0 registered GPU memory without the default ibv_reg_mr: no free could revoke it, refused");
	gh_guard_leave(was);
	errno = EOPNOTSUPP;
	return NULL;
}

int gh_manual_ibv_dereg_mr(struct ibv_mr *mr)
{
	int saved = errno, rc, was;

	/* no memory call may tie or revoke it once it is gone */
	gh_inflight_forget(mr);
	if (gh_rcache_is_alias(mr)) {
		was = gh_guard_enter();
		rc = gh_rcache_dereg(mr);
		gh_guard_leave(was);
		errno = saved;
		return rc ? -rc : 0;
	}
	if (gh_rcache_unadopt(mr) < 0) {
		errno = saved;
		return 0;	/* a free deregistered it already */
	}
	return gh_vreal_dereg_mr_raw(mr);
}

/*
 * ibv_rereg_mr of an MR libibverbs handed out (not through the cache):
 * natively; if that moves it onto tracked GPU memory it is adopted
 * (rcache.h), so a free still revokes it first.  One already revoked by
 * a free is a failed command, and so is one a free moved onto the
 * private page unless the call gives translation and access anew (a
 * success would leave the program believing in access it lost).
 *
 * Without a new translation it keeps reaching the same memory: its
 * adoption (if any) stays in force across the call, so a free meanwhile
 * still revokes it.  With one, the old adoption also stays until the
 * call returned, and the new range is tied to what it touched before
 * the call, as a new registration is (vreg_wrapped): if that changed
 * meanwhile, the call is made again.
 */
static int rereg_real(struct ibv_mr *mr, int flags, struct ibv_pd *pd,
		      void *addr, size_t length, int access)
{
	const int both = IBV_REREG_MR_CHANGE_TRANSLATION |
			 IBV_REREG_MR_CHANGE_ACCESS;
	struct snap sn;
	int rc, was, e, tries = 0, moved = 0, moved_before;

	if (!gh_active())
		return gh_vreal_rereg_mr(mr, flags, pd, addr, length, access);
	was = gh_guard_enter();
	moved_before = gh_rcache_moved(mr);
	if ((flags & both) != both && moved_before) {
		gh_guard_leave(was);
		errno = EINVAL;
		return IBV_REREG_MR_ERR_CMD;
	}
	if (!(flags & IBV_REREG_MR_CHANGE_TRANSLATION) || backend_none()) {
		rc = gh_vreal_rereg_mr(mr, flags, pd, addr, length, access);
		e = errno;
		gh_guard_leave(was);
		errno = e;
		return rc;
	}
	/* its old range's record, if any: the new one is watched below */
	gh_inflight_forget(mr);
	for (;;) {
		struct gh_if_rec *rec;

		if (watch_begin((uintptr_t)addr, length, &sn, &rec)) {
			rc = gh_vreal_rereg_mr(mr, flags, pd, addr, length,
					       access);
			e = errno;
			moved = 2;
			break;
		}
		rc = gh_vreal_rereg_mr(mr, flags, pd, addr, length, access);
		e = errno;
		moved = watch_end(rec);
		if (moved == 3) {
			if (rc) {
				gh_inflight_leave(rec);
				moved = 0;
			} else {
				moved = watch_commit(rec, moved, mr,
						     WATCH_PLAIN);
			}
		}
		if (rc || !moved || ++tries >= GH_REG_TRIES || moved == 2)
			break;
		/* the range changed under the call: make it again */
	}
	/* what follows may change mr again: a racing memory call waits */
	gh_inflight_hold(mr);
	/*
	 * A free of its old memory moved it onto the private page during
	 * the call (before or after the call took effect: not knowable):
	 * it stays there, and the call failed.
	 */
	if ((!moved_before && gh_rcache_moved(mr)) ||
	    gh_rcache_unadopt(mr) < 0) {
		if (!rc)
			gh_vreal_rereg_mr(mr, both, NULL,
					  gh_rcache_dummy_page(), 4096, 0);
		gh_inflight_unhold(mr, mr, WATCH_PLAIN);
		gh_guard_leave(was);
		errno = EINVAL;
		return IBV_REREG_MR_ERR_CMD;
	}
	if (!rc && (sn.n || sn.over || moved) &&
	    (sn.over || moved || gh_rcache_start(&sn.r[0], mr->pd)) &&
	    (sn.over || moved || gh_rcache_adopt(mr, sn.r, sn.n))) {
		/* untracked: never left reaching GPU memory */
		gh_vreal_rereg_mr(mr, both, NULL, gh_rcache_dummy_page(),
				  4096, 0);
		gh_warn_once("ibv_rereg_mr: cannot track a registration moved onto GPU memory: refused");
		rc = IBV_REREG_MR_ERR_CMD;
		e = ENOMEM;
	}
	gh_inflight_unhold(mr, mr, WATCH_PLAIN);
	gh_guard_leave(was);
	errno = e;
	return rc;
}

/*
 * ibv_rereg_mr of an alias, as libibverbs does it: the same input checks
 * (IBV_REREG_MR_ERR_INPUT, errno EINVAL), then the new (pd, range,
 * access) is registered like a fresh ibv_reg_mr and the program's MR
 * object moves onto it; its old registration loses this MR's reference
 * (exact exposure: deregistered with its last MR, so the old rkey dies
 * as natively).  The MR pointer stays; lkey and rkey may change (as with
 * the real call).  If the new registration fails: IBV_REREG_MR_ERR_CMD
 * with its errno, and the MR keeps nothing of the old grant either (the
 * program must deregister it, as the man page says).  No fork ranges are
 * changed here (the new registration's own ibv_reg_mr does that), so the
 * DONT_FORK/DO_FORK codes never come back.  A real MR passes through.
 */
int gh_manual_ibv_rereg_mr(struct ibv_mr *mr, int flags, struct ibv_pd *pd,
			   void *addr, size_t length, int access)
{
	struct vreq q;
	struct ibv_mr *nm, *na, *made;
	int saved = errno, was, e, ua;

	if (!gh_rcache_is_alias(mr))
		return rereg_real(mr, flags, pd, addr, length, access);
	/* it is about to name another registration */
	gh_inflight_forget(mr);
	if ((flags & ~IBV_REREG_MR_FLAGS_SUPPORTED) ||
	    ((flags & IBV_REREG_MR_CHANGE_TRANSLATION) && (!length || !addr)) ||
	    (access && !(flags & IBV_REREG_MR_CHANGE_ACCESS))) {
		errno = EINVAL;
		return IBV_REREG_MR_ERR_INPUT;
	}
	if (!flags) {
		errno = saved;
		return 0;	/* nothing to change */
	}
	/*
	 * A free revoked it (or a failed rereg left it nothing): its old
	 * translation names memory it no longer has and its access is
	 * gone with it, so only a call that gives both anew makes it a
	 * grant again (as for an adopted MR, rereg_real), never access or
	 * PD alone: that would bring it back on whatever is at the
	 * address now.
	 */
	if ((flags & (IBV_REREG_MR_CHANGE_TRANSLATION |
		      IBV_REREG_MR_CHANGE_ACCESS)) !=
	    (IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_ACCESS) &&
	    gh_rcache_revoked(mr)) {
		errno = EINVAL;
		return IBV_REREG_MR_ERR_CMD;
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
	/* nm is consumed below, the program keeps mr: a memory call that
	 * raced nm ties mr, once it is moved */
	made = nm;
	gh_inflight_hold(made);
	/* a memory call that raced it adopted it before the hold: it is
	 * tied elsewhere and cannot be wrapped too (a free would deregister
	 * it twice): made again by the program, as a failed command */
	if (nm && !gh_rcache_is_alias(nm) && (ua = gh_rcache_unadopt(nm))) {
		gh_inflight_unhold(made, NULL, 0);
		if (ua > 0)	/* else a free deregistered it */
			gh_vreal_dereg_mr(nm);
		nm = made = NULL;
		errno = EAGAIN;
	}
	if (nm && !gh_rcache_is_alias(nm)) {
		/* The new range is not tracked: wrap the plain MR. */
		if (gh_rcache_wrap(nm, NULL, 0, (uintptr_t)q.addr, q.len,
				   q.access, 1, &na)) {
			gh_vreal_dereg_mr(nm);
			nm = NULL;
			errno = ENOMEM;
		} else {
			nm = na;
		}
	}
	/*
	 * Same translation: the new grant is for the memory the old one
	 * had only if a free has not revoked the old one meanwhile (then
	 * that memory is gone and the new one may be another's).
	 */
	if (nm && !(flags & IBV_REREG_MR_CHANGE_TRANSLATION) &&
	    !gh_rcache_still_granted(mr)) {
		gh_rcache_dereg(nm);
		nm = NULL;
		errno = EINVAL;
	}
	e = errno;
	gh_rcache_move(mr, nm);	/* NULL: the old grant goes too */
	gh_inflight_unhold(made, nm ? mr : NULL, WATCH_ALIAS);
	gh_guard_leave(was);
	if (!nm) {
		errno = e;
		return IBV_REREG_MR_ERR_CMD;
	}
	errno = saved;
	return 0;
}

int gh_manual_ibv_dealloc_pd(struct ibv_pd *pd)
{
	int saved = errno, was;

	if (gh_rcache_ready() && gh_active()) {
		/* Our idle cached MRs must not make the real call fail. */
		was = gh_guard_enter();
		gh_rcache_drop_pd(pd);
		gh_guard_leave(was);
		errno = saved;
	}
	return gh_vreal_dealloc_pd(pd);
}

int gh_manual_ibv_close_device(struct ibv_context *context)
{
	int saved = errno, was;

	if (gh_rcache_ready() && gh_active()) {
		/* Closing the device destroys every MR: ours first, for real. */
		was = gh_guard_enter();
		gh_rcache_drop_context(context);
		gh_guard_leave(was);
		errno = saved;
	}
	return gh_vreal_close_device(context);
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
