// SPDX-License-Identifier: MIT
/*
 * Memory windows: windows bound and unbound by work requests on a queue
 * pair gdrhook owns (see mwin.h).
 *
 * Type 1, not type 2: a type-2 window is associated with the QP that
 * bound it, and a remote access is honoured only when it arrives on that
 * QP (IBTA o10-37.2.43; soft-RoCE's rxe_lookup_mw checks mw->qp != qp).
 * A window bound on gdrhook's QP would refuse the program's traffic.  A
 * type-1 window belongs to its PD: any QP of the PD reaches it.  It is
 * bound with ibv_bind_mw (the provider posts the bind and moves the
 * rkey's 8-bit tag on), and a bind of length 0 unbinds it (its rkey is
 * refused from then on).
 *
 * One engine per PD: a CQ and an RC QP connected to itself (port: the
 * first active one), created at the PD's first bind, never seen by the
 * program (its own CQs get no completion of ours).  Every work request is
 * signaled and waited for: a bind is not handed out before the NIC
 * completed it, and ibv_dereg_mr does not return before the invalidation
 * completed.  A work request that fails puts the QP in the error state:
 * the engine is rebuilt at its next use; a window whose invalidation
 * failed is destroyed instead (that, too, makes its rkey refused).
 *
 * Windows of a PD wait in a FIFO: the one idle longest is bound next, and
 * each bind and unbind moves its rkey's 8-bit tag on, so a key comes back
 * only after 128 uses of the same window, each of which had to wait for
 * every other window of the pool to be used first.
 *
 * All under mw.lock, taken inside the cache's lock.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <sys/mman.h>
#include <infiniband/verbs.h>

#include "registry/registry.h"
#include "mwin.h"
#include "pin_opts.h"

#define MW_ENGINES	64
#define MW_CTXS		32
#define MW_CAP		(1u << 16)	/* windows bound or idle, all PDs */
#define MW_SQ		64
#define MW_WAIT_NS	(5ULL * 1000 * 1000 * 1000)

struct gh_mw {
	struct ibv_mw *mw;
	struct mw_eng *eng;
	struct ibv_mr *mr;	/* bound to (its parent), for the unbind */
	uint64_t addr;
	uint32_t rkey;		/* the key it was last bound with */
	uint32_t bound;
	uint32_t next;		/* idle FIFO, or unused list: index + 1 */
	uint32_t used;
};

struct mw_eng {
	struct ibv_pd *pd;
	struct ibv_context *ctx;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	int broken;		/* rebuild the QP before the next request */
	uint64_t wr_seq;
	uint32_t head, tail;	/* idle windows, oldest first */
	uint32_t n_idle;
	uint8_t port;
};

enum { CTX_UNKNOWN = 0, CTX_YES, CTX_NO };
enum { SAID_DMABUF = 1, SAID_LONG = 2, SAID_ZERO_BASED = 4 };

struct mw_ctx {
	struct ibv_context *ctx;
	int state;
	int bound_once;		/* a bind of this NIC completed */
	unsigned int said;	/* SAID_*: routes said for this NIC */
	uint8_t port;
	char why[128];
};

static struct {
	pthread_mutex_t lock;
	int resolved;
	const struct gh_verbs *v;	/* the real libibverbs (vreal.h) */
	struct mw_eng eng[MW_ENGINES];
	struct mw_ctx ctx[MW_CTXS];
	struct gh_mw *w;
	uint32_t w_hi, w_unused;
	struct gh_mw_counters ctr;
} mw = { .lock = PTHREAD_MUTEX_INITIALIZER };

static int resolve(void)
{
	if (mw.resolved)
		return mw.resolved > 0 ? 0 : -ENOSYS;
	/* never loads libibverbs: a program that registered has it */
	mw.v = gh_vreal_verbs();
	if (!mw.w)
		mw.w = mmap(NULL, sizeof(struct gh_mw) * MW_CAP,
			    PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (mw.w == MAP_FAILED)
		mw.w = NULL;
	mw.resolved = mw.v && mw.v->create_cq && mw.v->destroy_cq &&
		      mw.v->create_qp && mw.v->modify_qp && mw.v->destroy_qp &&
		      mw.v->query_device && mw.v->query_port && mw.w ? 1 : -1;
	return mw.resolved > 0 ? 0 : -ENOSYS;
}

static const char *dev_name(const struct ibv_context *ctx)
{
	return ctx && ctx->device && ctx->device->name[0] ?
	       ctx->device->name : "(unnamed)";
}

static int query_port(struct ibv_context *ctx, uint8_t port,
		      struct ibv_port_attr *pa)
{
	struct verbs_context *vctx = verbs_get_ctx_op(ctx, query_port);

	memset(pa, 0, sizeof(*pa));
	if (vctx)
		return vctx->query_port(ctx, port, pa, sizeof(*pa));
	return mw.v->query_port(ctx, port, (struct _compat_ibv_port_attr *)pa);
}

static struct mw_ctx *ctx_of(struct ibv_context *ctx)
{
	struct mw_ctx *free_c = NULL;

	for (int i = 0; i < MW_CTXS; i++) {
		if (mw.ctx[i].ctx == ctx)
			return &mw.ctx[i];
		if (!mw.ctx[i].ctx && !free_c)
			free_c = &mw.ctx[i];
	}
	if (!free_c)
		return NULL;
	memset(free_c, 0, sizeof(*free_c));
	/* published last: gh_mw_supported reads without the lock */
	__atomic_store_n(&free_c->ctx, ctx, __ATOMIC_RELEASE);
	return free_c;
}

static void ctx_refuse(struct mw_ctx *c, const char *why)
{
	gh_str_printf(c->why, sizeof(c->why), "%s", why);
	__atomic_store_n(&c->state, CTX_NO, __ATOMIC_RELEASE);
	gh_warn("memory windows: NIC %s: %s; exact remote exposure registers each MR with the NIC instead",
		dev_name(c->ctx), why);
}

/* Probe a device context once: type-1 windows, an active port. */
static struct mw_ctx *probe(struct ibv_context *ctx)
{
	struct ibv_device_attr da;
	struct mw_ctx *c = ctx_of(ctx);
	char why[128];
	int err;

	if (!c || c->state != CTX_UNKNOWN)
		return c;
	if (!gh_pin_cfg.windows) {
		gh_str_printf(c->why, sizeof(c->why), "GDRHOOK_WINDOWS=0");
		__atomic_store_n(&c->state, CTX_NO, __ATOMIC_RELEASE);
		return c;
	}
	if (resolve()) {
		ctx_refuse(c, "libibverbs lacks queue pair entry points");
		return c;
	}
	memset(&da, 0, sizeof(da));
	err = mw.v->query_device(ctx, &da);
	if (err) {
		gh_str_printf(why, sizeof(why), "ibv_query_device: %s",
			      gh_errtext(err));
		ctx_refuse(c, why);
		return c;
	}
	if (!(da.device_cap_flags & IBV_DEVICE_MEM_WINDOW) ||
	    da.max_mw <= 0) {
		ctx_refuse(c, "no type-1 memory windows (ibv_query_device)");
		return c;
	}
	for (int p = 1; p <= da.phys_port_cnt && !c->port; p++) {
		struct ibv_port_attr pa;

		if (!query_port(ctx, (uint8_t)p, &pa) &&
		    pa.state == IBV_PORT_ACTIVE)
			c->port = (uint8_t)p;
	}
	if (!c->port) {
		ctx_refuse(c, "no active port for gdrhook's queue pair");
		return c;
	}
	__atomic_store_n(&c->state, CTX_YES, __ATOMIC_RELEASE);
	gh_info("memory windows: NIC %s: windows on port %u (exact remote exposure at cache speed)",
		dev_name(ctx), c->port);
	return c;
}

int gh_mw_supported(struct ibv_pd *pd, const char **why)
{
	struct mw_ctx *c;
	int yes;

	if (!pd || !pd->context)
		return 0;
	/* every registration asks: once probed, no lock */
	for (int i = 0; !why && i < MW_CTXS; i++) {
		if (__atomic_load_n(&mw.ctx[i].ctx, __ATOMIC_ACQUIRE) !=
		    pd->context)
			continue;
		yes = __atomic_load_n(&mw.ctx[i].state, __ATOMIC_ACQUIRE);
		if (yes != CTX_UNKNOWN)
			return yes == CTX_YES;
		break;
	}
	pthread_mutex_lock(&mw.lock);
	c = probe(pd->context);
	yes = c && __atomic_load_n(&c->state, __ATOMIC_RELAXED) == CTX_YES;
	if (why)
		*why = c ? c->why : "too many NICs";
	pthread_mutex_unlock(&mw.lock);
	return yes;
}

/* ------------------------------------------------------------- routes */

/*
 * Why a DMA-BUF parent gets no window, and what is done instead.
 * providers/mlx5/qp.c mlx5_bind_mw refuses a type-1 bind whose MR is
 * not IBV_MR_TYPE_MR (ENOTSUP); an ibv_reg_dmabuf_mr MR is
 * IBV_MR_TYPE_DMABUF_MR (libibverbs/cmd_mr.c); irdma and zxdh check the
 * same, and rxe imports no DMA-BUF at all.  Of the ways around it, one
 * works on every provider that imports DMA-BUF: a registration of
 * exactly the range from the export the cache already holds (the
 * dmabuf backend's reg(): ibv_reg_dmabuf_mr at offset addr - pin_base
 * of the same fd).  It costs a NIC registration and deregistration per
 * MR, no new export and no new GPU pin.  An mlx5 indirect mkey over the
 * parent (mlx5dv, UMR) would be cheaper on ConnectX alone.  auto takes
 * a window-capable parent instead where a peer-memory client serves the
 * NIC (src/pin/pin_choose.c), so this route is for hosts without one.
 */
static const char *const why_dmabuf =
	"DMA-BUF parent: mlx5 (like irdma and zxdh) binds no type-1 window over an ibv_reg_dmabuf_mr MR";
static const char *const why_long =
	"over 2 GiB: mlx5 binds no window longer (its UMR)";
static const char *const why_zero_based =
	"zero-based: no provider binds a zero-based type-1 window";

/* pd's NIC's record, if probed (no lock: published once, read only). */
static struct mw_ctx *ctx_find(const struct ibv_context *ctx)
{
	for (int i = 0; i < MW_CTXS; i++)
		if (__atomic_load_n(&mw.ctx[i].ctx, __ATOMIC_ACQUIRE) == ctx)
			return &mw.ctx[i];
	return NULL;
}

static void say_once(struct ibv_pd *pd, unsigned int bit, const char *why)
{
	struct mw_ctx *c = ctx_find(pd->context);

	if (c && !(__atomic_fetch_or(&c->said, bit, __ATOMIC_RELAXED) & bit))
		gh_info("memory windows: NIC %s: %s; exact remote exposure registers such MRs with the NIC (the pin%s stays cached)",
			dev_name(pd->context), why,
			bit == SAID_DMABUF ? " and the export" : "");
}

int gh_mw_route(struct ibv_pd *pd, int dmabuf_parent, uint64_t len,
		unsigned int access)
{
	if (!gh_mw_supported(pd, NULL))
		return 0;	/* said by the probe */
	if (access & IBV_ACCESS_ZERO_BASED) {
		say_once(pd, SAID_ZERO_BASED, why_zero_based);
		return 0;
	}
	if (dmabuf_parent) {
		say_once(pd, SAID_DMABUF, why_dmabuf);
		return 0;
	}
	if (len > GH_MW_MAX_LEN) {
		say_once(pd, SAID_LONG, why_long);
		return 0;
	}
	return 1;
}

void gh_mw_route_text(int windows, const char *backend, char *buf,
		      unsigned int cap)
{
	if (!windows)
		gh_str_printf(buf, cap,
			      "a NIC registration per MR, the pin cached (no type-1 windows)");
	else if (backend && !strcmp(backend, "dmabuf"))
		gh_str_printf(buf, cap,
			      "a dmabuf registration per MR (DMA-BUF parent: mlx5 binds no type-1 window)");
	else
		gh_str_printf(buf, cap,
			      "a type-1 window per MR: bind + unbind, no registration (over 2 GiB: one)");
}

/* ------------------------------------------------------------ engines */

static void eng_qp_down(struct mw_eng *e)
{
	if (e->qp)
		mw.v->destroy_qp(e->qp);
	if (e->cq)
		mw.v->destroy_cq(e->cq);
	e->qp = NULL;
	e->cq = NULL;
}

/* A CQ and an RC QP connected to itself, in RTS. */
static int eng_qp_up(struct mw_eng *e)
{
	const struct gh_verbs *v = mw.v;
	struct ibv_qp_init_attr ia;
	struct ibv_port_attr pa;
	struct ibv_qp_attr a;
	union ibv_gid gid;

	e->cq = v->create_cq(e->ctx, 2 * MW_SQ, NULL, NULL, 0);
	if (!e->cq)
		return -(errno ? errno : ENOMEM);
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = e->cq;
	ia.recv_cq = e->cq;
	ia.cap.max_send_wr = MW_SQ;
	ia.cap.max_recv_wr = 1;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	ia.qp_type = IBV_QPT_RC;
	e->qp = v->create_qp(e->pd, &ia);
	if (!e->qp)
		goto fail;
	if (query_port(e->ctx, e->port, &pa))
		goto fail;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = e->port;
	if (v->modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			 IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		goto fail;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = pa.active_mtu ? pa.active_mtu : IBV_MTU_1024;
	a.dest_qp_num = e->qp->qp_num;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.port_num = e->port;
	a.ah_attr.dlid = pa.lid;
	if (pa.link_layer == IBV_LINK_LAYER_ETHERNET) {
		/* RoCE: itself by its GID */
		if (!v->query_gid || v->query_gid(e->ctx, e->port, 0, &gid))
			goto fail;
		a.ah_attr.is_global = 1;
		a.ah_attr.grh.dgid = gid;
		a.ah_attr.grh.hop_limit = 1;
	}
	if (v->modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_AV |
			 IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			 IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		goto fail;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	if (v->modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
			 IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			 IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		goto fail;
	e->broken = 0;
	return 0;
fail:
	{
		int err = errno ? errno : EIO;

		eng_qp_down(e);
		return -err;
	}
}

static struct mw_eng *eng_get(struct ibv_pd *pd, struct mw_ctx *c)
{
	struct mw_eng *free_e = NULL;
	int err;

	for (int i = 0; i < MW_ENGINES; i++) {
		if (mw.eng[i].pd == pd)
			return &mw.eng[i];
		if (!mw.eng[i].pd && !free_e)
			free_e = &mw.eng[i];
	}
	if (!free_e)
		return NULL;
	memset(free_e, 0, sizeof(*free_e));
	free_e->pd = pd;
	free_e->ctx = pd->context;
	free_e->port = c->port;
	err = eng_qp_up(free_e);
	if (err) {
		char why[128];

		gh_str_printf(why, sizeof(why),
			      "cannot make gdrhook's queue pair (%s)",
			      gh_errtext(-err));
		if (!c->bound_once)
			ctx_refuse(c, why);
		free_e->pd = NULL;
		return NULL;
	}
	return free_e;
}

/* Make the engine's QP usable again after a failed work request. */
static int eng_ready(struct mw_eng *e)
{
	if (!e->broken && e->qp)
		return 0;
	eng_qp_down(e);
	return eng_qp_up(e) ? -EIO : 0;
}

/*
 * Wait for the completion of work request id (others, flushed from
 * before a rebuild, are skipped).  0, or -EIO (failed: the QP is in
 * error now), -ETIMEDOUT.
 */
static int wait_wr(struct mw_eng *e, uint64_t id)
{
	uint64_t t0 = 0;
	struct ibv_wc wc;

	for (int spins = 0;; spins++) {
		int n = ibv_poll_cq(e->cq, 1, &wc);

		if (n < 0) {
			e->broken = 1;
			return -EIO;
		}
		if (n == 1 && wc.wr_id == id) {
			if (wc.status == IBV_WC_SUCCESS)
				return 0;
			e->broken = 1;
			return -EIO;
		}
		if (n == 1)
			continue;
		if (spins < 256)
			continue;
		if (!t0)
			t0 = gh_now_ns();
		else if (gh_now_ns() - t0 > MW_WAIT_NS) {
			e->broken = 1;
			return -ETIMEDOUT;
		}
		sched_yield();
	}
}

/*
 * Bind w to [addr, addr + len) of mr (len 0: unbind; the MR it is bound
 * to, not NULL: providers read its lkey whatever the length) and wait for
 * the NIC.  The provider moves the rkey's tag on (w->mw->rkey).
 */
static int bind_wait(struct mw_eng *e, struct gh_mw *w, struct ibv_mr *mr,
		     uint64_t addr, uint64_t len, unsigned int access)
{
	struct ibv_mw_bind b;
	int rc;

	if (eng_ready(e))
		return -EIO;
	memset(&b, 0, sizeof(b));
	b.wr_id = ++e->wr_seq;
	b.send_flags = IBV_SEND_SIGNALED;
	b.bind_info.mr = mr;
	b.bind_info.addr = addr;
	b.bind_info.length = len;
	b.bind_info.mw_access_flags = access;
	rc = ibv_bind_mw(e->qp, w->mw, &b);
	if (rc) {
		e->broken = 1;
		return -(rc > 0 ? rc : EIO);
	}
	return wait_wr(e, b.wr_id);
}

/* ------------------------------------------------------------ windows */

static uint32_t w_idx(const struct gh_mw *w)
{
	return (uint32_t)(w - mw.w) + 1;
}

static struct gh_mw *w_new(struct mw_eng *e)
{
	struct ibv_mw *m = ibv_alloc_mw(e->pd, IBV_MW_TYPE_1);
	struct gh_mw *w;
	uint32_t i;

	if (!m)
		return NULL;
	if (mw.w_unused) {
		i = mw.w_unused;
		mw.w_unused = mw.w[i - 1].next;
	} else if (mw.w_hi < MW_CAP) {
		i = ++mw.w_hi;
	} else {
		ibv_dealloc_mw(m);
		errno = ENOSPC;
		return NULL;
	}
	w = &mw.w[i - 1];
	memset(w, 0, sizeof(*w));
	w->mw = m;
	w->eng = e;
	w->rkey = m->rkey;
	w->used = 1;
	return w;
}

static void w_destroy(struct gh_mw *w)
{
	if (w->mw)
		ibv_dealloc_mw(w->mw);
	w->mw = NULL;
	w->used = 0;
	w->next = mw.w_unused;
	mw.w_unused = w_idx(w);
}

static void idle_put(struct gh_mw *w)
{
	struct mw_eng *e = w->eng;

	w->bound = 0;
	w->next = 0;
	if (e->tail)
		mw.w[e->tail - 1].next = w_idx(w);
	else
		e->head = w_idx(w);
	e->tail = w_idx(w);
	e->n_idle++;
}

/*
 * The window idle longest, but never the last idle one while a new one
 * can be made: with two or more in turn, a window's rkey (its tag moves
 * on at each bind and each unbind: 128 uses) comes back only after 256
 * registrations, as an MR's key at one index does natively.
 */
static struct gh_mw *idle_take(struct mw_eng *e, int last_ok)
{
	struct gh_mw *w;

	if (!e->head || (e->n_idle < 2 && !last_ok))
		return NULL;
	e->n_idle--;
	w = &mw.w[e->head - 1];
	e->head = w->next;
	if (!e->head)
		e->tail = 0;
	w->next = 0;
	return w;
}

int gh_mw_bind(struct ibv_pd *pd, struct ibv_mr *parent, uint64_t addr,
	       uint64_t len, unsigned int access, struct gh_mw **w_p,
	       uint32_t *rkey_p)
{
	struct mw_ctx *c;
	struct mw_eng *e;
	struct gh_mw *w;
	uint32_t key;
	int err;

	pthread_mutex_lock(&mw.lock);
	c = probe(pd->context);
	if (!c || c->state != CTX_YES) {
		err = -EOPNOTSUPP;
		goto out;
	}
	e = eng_get(pd, c);
	if (!e) {
		err = c->state == CTX_YES ? -ENOSPC : -EOPNOTSUPP;
		goto out;
	}
	w = idle_take(e, 0);
	if (!w)
		w = w_new(e);
	if (!w)
		w = idle_take(e, 1);
	if (!w) {
		err = -(errno ? errno : ENOMEM);
		if (!c->bound_once) {
			char why[128];

			gh_str_printf(why, sizeof(why), "ibv_alloc_mw: %s",
				      gh_errtext(-err));
			ctx_refuse(c, why);
			err = -EOPNOTSUPP;
		}
		goto out;
	}
	err = bind_wait(e, w, parent, addr, len, access);
	if (err) {
		/* its state unknown: never bound again */
		w_destroy(w);
		mw.ctr.fallbacks++;
		if (!c->bound_once) {
			ctx_refuse(c, "the NIC refused gdrhook's first bind");
			err = -EOPNOTSUPP;
		}
		goto out;
	}
	key = w->mw->rkey;
	c->bound_once = 1;
	w->rkey = key;
	w->mr = parent;
	w->addr = addr;
	w->bound = 1;
	mw.ctr.binds++;
	*w_p = w;
	*rkey_p = key;
out:
	pthread_mutex_unlock(&mw.lock);
	return err;
}

void gh_mw_invalidate(struct gh_mw *w)
{
	if (!w)
		return;
	pthread_mutex_lock(&mw.lock);
	if (!w->used || !w->bound) {
		if (w->used)
			idle_put(w);
		goto out;
	}
	if (bind_wait(w->eng, w, w->mr, w->addr, 0, 0)) {
		/* destroying a window invalidates it too */
		gh_warn_once("memory windows: an invalidation failed: the window was destroyed instead");
		w_destroy(w);
	} else {
		mw.ctr.invalidations++;
		idle_put(w);
	}
out:
	pthread_mutex_unlock(&mw.lock);
}

void gh_mw_forget(struct gh_mw *w)
{
	if (!w)
		return;
	pthread_mutex_lock(&mw.lock);
	w->bound = 0;
	w->used = 0;	/* the parent's: never touched from here */
	pthread_mutex_unlock(&mw.lock);
}

static void eng_drop(struct mw_eng *e)
{
	for (uint32_t i = 0; i < mw.w_hi; i++) {
		struct gh_mw *w = &mw.w[i];

		if (w->used && w->eng == e)
			w_destroy(w);
	}
	eng_qp_down(e);
	memset(e, 0, sizeof(*e));
}

void gh_mw_drop_pd(struct ibv_pd *pd)
{
	pthread_mutex_lock(&mw.lock);
	for (int i = 0; i < MW_ENGINES; i++)
		if (pd && mw.eng[i].pd == pd)
			eng_drop(&mw.eng[i]);
	pthread_mutex_unlock(&mw.lock);
}

void gh_mw_drop_context(struct ibv_context *ctx)
{
	pthread_mutex_lock(&mw.lock);
	for (int i = 0; i < MW_ENGINES; i++)
		if (ctx && mw.eng[i].pd && mw.eng[i].ctx == ctx)
			eng_drop(&mw.eng[i]);
	for (int i = 0; i < MW_CTXS; i++)
		if (mw.ctx[i].ctx == ctx) {
			__atomic_store_n(&mw.ctx[i].ctx, NULL, __ATOMIC_RELEASE);
			__atomic_store_n(&mw.ctx[i].state, CTX_UNKNOWN,
					 __ATOMIC_RELEASE);
		}
	pthread_mutex_unlock(&mw.lock);
}

/* A child of fork: a thread that held the lock is gone. */
static void mw_atfork_child(void)
{
	pthread_mutex_init(&mw.lock, NULL);
}

__attribute__((constructor)) static void mw_init(void)
{
	pthread_atfork(NULL, NULL, mw_atfork_child);
}

void gh_mw_counters(struct gh_mw_counters *c_p)
{
	pthread_mutex_lock(&mw.lock);
	*c_p = mw.ctr;
	pthread_mutex_unlock(&mw.lock);
}
