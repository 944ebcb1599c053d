// SPDX-License-Identifier: MIT
/*
 * The fake NIC's contexts, completion queues, queue pairs and memory
 * windows, with the semantics a real NIC and the kernel enforce (rdma-core
 * man pages ibv_alloc_mw(3), ibv_bind_mw(3), ibv_post_send(3),
 * ibv_inc_rkey(3); soft-RoCE's rxe_mw.c for the bind checks):
 *
 *  - every context is an extended one (struct verbs_context, as
 *    rdma-core's providers make them) with a filled ops table, so the
 *    inline verbs of <infiniband/verbs.h> work: ibv_alloc_mw,
 *    ibv_dealloc_mw, ibv_bind_mw, ibv_post_send,
 *    ibv_post_recv, ibv_poll_cq, ibv_req_notify_cq, and ibv_query_port
 *    (through verbs_context.query_port; the exported one too);
 *  - CQs are rings polled in order; a full CQ drops the completion
 *    (cq_overruns) and moves the QP to the error state;
 *  - RC QPs only, RESET -> INIT -> RTR (needs a live dest_qp_num) -> RTS
 *    through ibv_modify_qp; send WRs need RTS (else EINVAL); the send
 *    queue holds max_send_wr WRs until a later signaled completion is
 *    polled (ENOMEM beyond, as real NICs); work is done at post time;
 *  - IBV_WR_BIND_MW binds a type-2 window (checks below), IBV_WR_LOCAL_INV
 *    invalidates one; a failing WR completes with its error status
 *    (always, signaled or not) and moves the QP to the error state, where
 *    later WRs complete with IBV_WC_WR_FLUSH_ERR; the app-visible
 *    ibv_qp.state changes only through ibv_modify_qp/ibv_query_qp, as in
 *    rdma-core; other opcodes are not modelled (EOPNOTSUPP at post);
 *  - type 1 windows: ibv_bind_mw posts a bind WR on the QP with the
 *    rkey's tag moved on (mw->rkey updated once posted), may move a bound
 *    window, and unbinds it with length 0; they cannot be bound by a WR
 *    nor invalidated; reached by the PD's peers like type 2 (the QP a
 *    remote access arrives on is not modelled: a type-2 window answers
 *    every peer of its PD here, not only its QP's);
 *  - a type-2 window's rkey is (index << 8) | tag; a bind takes the new
 *    rkey from the WR (same index, any tag) and leaves ibv_mw.rkey as it
 *    is (mlx5 and rxe do not write it back for type 2): the application
 *    tracks its rkey; an index freed by ibv_dealloc_mw is reused, its tag
 *    going on from the last one, so an old rkey stays refused;
 *  - a bind or invalidation takes effect for a peer once its completion
 *    was polled (ibv_bind_mw(3): the window is usable once the bind
 *    completed); until then a peer reaches what it reached before, so an
 *    rkey handed out before its CQE, or an unbind not waited for, shows;
 *  - the provider profile (fakeverbs_provider.c, FAKEVERBS_PROVIDER)
 *    adds its own checks: mlx5 refuses a type-1 bind over a DMA-BUF MR
 *    (ENOTSUP) and any bind over 2 GiB (EOPNOTSUPP at post); rxe refuses
 *    a bind on a zero-based MR at its CQE; nomw has no windows;
 *  - FAKEVERBS_NO_MW=1 or =<nic>: no window capability (ibv_alloc_mw:
 *    EOPNOTSUPP); FAKEVERBS_BIND_DELAY_US=N: every bind and invalidate
 *    takes N us (outside the NIC's lock, before it takes effect);
 *    FAKEVERBS_FAIL_BIND=N: the Nth bind WR completes with
 *    IBV_WC_MW_BIND_ERR.
 */
#include <endian.h>
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

#include "fakeverbs.h"
#include "fakeverbs_cost.h"
#include "fakeverbs_internal.h"

#define FV_MAXMW 4096		/* max_mw; window indices 1 .. FV_MAXMW */
#define FV_MAXQP 256
#define FV_MAXCQ 256
#define FV_MAX_QP_WR 4096
#define FV_MAX_CQE 65536
#define FV_MAX_SGE 32
#define FV_MAX_INLINE 256

#define FV_MW_RIGHTS (IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE | \
		      IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_ZERO_BASED)

struct fv_cqe {
	struct ibv_wc wc;
	struct fv_qp *qp;
	uint64_t seq;		/* send queue position, 0 for receives */
};

struct fv_cq {
	struct ibv_cq cq;
	int cap, head, n;
	int nqp;		/* QPs using it (send or receive) */
	struct fv_cqe *ring;
};

struct fv_qp {
	struct ibv_qp qp;
	enum ibv_qp_state state;	/* the NIC's; qp.state is the app's */
	struct fv_cq *scq, *rcq;
	struct ibv_qp_cap cap;
	int sig_all;
	uint32_t dest;
	uint8_t port;
	unsigned int access;
	enum ibv_mtu mtu;
	uint64_t posted, done;	/* send WRs posted, retired by polling */
	uint64_t rq_posted;
};

/* What a window reaches: bound or not, by which rkey, where, how. */
struct fv_mw_state {
	int bound;
	uint32_t rkey;
	struct fv_mr *mr;
	uint64_t addr, length;
	unsigned int access;
};

struct fv_mw {
	struct ibv_mw mw;
	uint32_t index;
	uint32_t rkey;		/* the NIC's current rkey */
	int bound;
	struct fv_mr *mr;
	uint64_t addr, length;
	unsigned int access;
	/*
	 * A bind or invalidation posted on pend_qp as its WR pend_seq
	 * takes effect for peers once its completion was polled (or a
	 * later one's: the QP's done passed it); until then a peer reaches
	 * what it reached before, seen (its MR held by nbound).
	 */
	struct fv_qp *pend_qp;
	uint64_t pend_seq;
	struct fv_mw_state seen;
};

static struct fv_mw *mws[FV_MAXMW + 1];
static uint8_t mw_tag[FV_MAXMW + 1];
static int nmws;
static int npend;		/* windows with a bind not yet completed */
static struct fv_qp *qps[FV_MAXQP];
static int nqps;
static uint32_t next_qpn = 0x11;
static struct fv_cq *cqs[FV_MAXCQ];
static int ncqs;

/* ------------------------------------------------------------- lookups */

static struct fv_qp *find_qp_locked(const struct ibv_qp *qp)
{
	for (int i = 0; i < nqps; i++)
		if (&qps[i]->qp == qp)
			return qps[i];
	return NULL;
}

static struct fv_qp *qp_by_num_locked(uint32_t num)
{
	for (int i = 0; i < nqps; i++)
		if (qps[i]->qp.qp_num == num)
			return qps[i];
	return NULL;
}

static struct fv_cq *find_cq_locked(const struct ibv_cq *cq)
{
	for (int i = 0; i < ncqs; i++)
		if (&cqs[i]->cq == cq)
			return cqs[i];
	return NULL;
}

static struct fv_mw *find_mw_locked(const struct ibv_mw *mw)
{
	for (uint32_t i = 1; mw && i <= FV_MAXMW; i++)
		if (mws[i] && &mws[i]->mw == mw)
			return mws[i];
	return NULL;
}

static struct fv_mw *mw_by_rkey_locked(uint32_t rkey)
{
	uint32_t idx = rkey >> 8;

	return idx >= 1 && idx <= FV_MAXMW ? mws[idx] : NULL;
}

int fv_pd_busy_locked(const struct ibv_pd *pd)
{
	for (uint32_t i = 1; i <= FV_MAXMW; i++)
		if (mws[i] && mws[i]->mw.pd == pd)
			return 1;
	for (int i = 0; i < nqps; i++)
		if (qps[i]->qp.pd == pd)
			return 1;
	return 0;
}

/* ------------------------------------------------- bind completion */

/* The window's state as a peer sees it now. */
static struct fv_mw_state seen_now(const struct fv_mw *w)
{
	struct fv_mw_state st = { w->bound, w->rkey, w->mr, w->addr,
				  w->length, w->access };

	return w->pend_qp ? w->seen : st;
}

/* A bind or invalidation of w is about to change it (WR seq on q): peers
 * keep seeing the state before until it completes. */
static void pend_begin_locked(struct fv_mw *w, struct fv_qp *q, uint64_t seq)
{
	if (!w->pend_qp) {
		w->seen = seen_now(w);
		if (w->seen.bound)
			w->seen.mr->nbound++;
		npend++;
	}
	w->pend_qp = q;
	w->pend_seq = seq;
}

static void pend_end_locked(struct fv_mw *w)
{
	if (!w->pend_qp)
		return;
	if (w->seen.bound)
		w->seen.mr->nbound--;
	memset(&w->seen, 0, sizeof(w->seen));
	w->pend_qp = NULL;
	npend--;
}

/* Binds of q whose completion was polled take effect; all of them
 * (all: the QP is reset or destroyed, the work was done). */
static void settle_locked(const struct fv_qp *q, int all)
{
	for (uint32_t i = 1; npend && i <= FV_MAXMW; i++)
		if (mws[i] && mws[i]->pend_qp == q &&
		    (all || mws[i]->pend_seq <= q->done))
			pend_end_locked(mws[i]);
}

/* ---------------------------------------------------------------- CQs */

static void cq_push_locked(struct fv_cq *c, struct fv_qp *q, uint64_t seq,
			   uint64_t wr_id, enum ibv_wc_status st,
			   enum ibv_wc_opcode op)
{
	struct fv_cqe *e;

	if (c->n == c->cap) {
		/* a real CQ overrun: an async error, the QP broken */
		fv_count(C_CQ_OVERRUNS);
		q->state = IBV_QPS_ERR;
		return;
	}
	e = &c->ring[(c->head + c->n) % c->cap];
	memset(e, 0, sizeof(*e));
	e->wc.wr_id = wr_id;
	e->wc.status = st;
	e->wc.opcode = op;
	e->wc.vendor_err = st == IBV_WC_SUCCESS ? 0 : 0x42;
	e->wc.qp_num = q->qp.qp_num;
	e->wc.src_qp = q->dest;
	e->qp = q;
	e->seq = seq;
	c->n++;
}

/* Drops the QP's completions from c (mlx5 cleans the CQ likewise when a
 * QP is destroyed or reset). */
static void cq_clean_locked(struct fv_cq *c, const struct fv_qp *q)
{
	int k = 0;

	for (int i = 0; i < c->n; i++) {
		struct fv_cqe e = c->ring[(c->head + i) % c->cap];

		if (e.qp != q)
			c->ring[(c->head + k++) % c->cap] = e;
	}
	c->n = k;
}

static int fv_poll_cq(struct ibv_cq *cq, int num_entries, struct ibv_wc *wc)
{
	struct fv_cq *c;
	int k = 0;

	fv_count(C_POLL_CQ);
	pthread_mutex_lock(&fv_lock);
	c = find_cq_locked(cq);
	if (!c) {
		pthread_mutex_unlock(&fv_lock);
		errno = EINVAL;
		return -1;
	}
	for (; k < num_entries && c->n; k++) {
		struct fv_cqe *e = &c->ring[c->head];

		wc[k] = e->wc;
		if (e->seq) {	/* retires its WR and the unsignaled ones before */
			e->qp->done = e->seq;
			settle_locked(e->qp, 0);
		}
		c->head = (c->head + 1) % c->cap;
		c->n--;
	}
	pthread_mutex_unlock(&fv_lock);
	return k;
}

static int fv_req_notify_cq(struct ibv_cq *cq, int solicited_only)
{
	(void)cq;
	(void)solicited_only;
	return 0;	/* no completion channels: nothing would be raised */
}

FV_API struct ibv_cq *ibv_create_cq(struct ibv_context *context, int cqe,
				    void *cq_context,
				    struct ibv_comp_channel *channel,
				    int comp_vector)
{
	struct fv_cq *c;

	fv_count(C_CREATE_CQ);
	if (!context || cqe < 1 || cqe > FV_MAX_CQE || comp_vector < 0 ||
	    comp_vector >= context->num_comp_vectors) {
		errno = EINVAL;
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (!c || !(c->ring = calloc((size_t)cqe, sizeof(*c->ring)))) {
		free(c);
		errno = ENOMEM;
		return NULL;
	}
	c->cap = cqe;
	c->cq.context = context;
	c->cq.channel = channel;
	c->cq.cq_context = cq_context;
	c->cq.cqe = cqe;
	pthread_mutex_init(&c->cq.mutex, NULL);
	pthread_cond_init(&c->cq.cond, NULL);
	pthread_mutex_lock(&fv_lock);
	if (ncqs == FV_MAXCQ) {
		pthread_mutex_unlock(&fv_lock);
		free(c->ring);
		free(c);
		errno = ENOMEM;
		return NULL;
	}
	c->cq.handle = (uint32_t)ncqs + 1;
	cqs[ncqs++] = c;
	pthread_mutex_unlock(&fv_lock);
	return &c->cq;
}

static int destroy_cq_locked(struct fv_cq *c)
{
	if (c->nqp)
		return EBUSY;
	for (int i = 0; i < ncqs; i++) {
		if (cqs[i] == c) {
			cqs[i] = cqs[--ncqs];
			free(c->ring);
			free(c);
			return 0;
		}
	}
	return EINVAL;
}

FV_API int ibv_destroy_cq(struct ibv_cq *cq)
{
	struct fv_cq *c;
	int rc;

	fv_count(C_DESTROY_CQ);
	pthread_mutex_lock(&fv_lock);
	c = find_cq_locked(cq);
	rc = c ? destroy_cq_locked(c) : EINVAL;
	pthread_mutex_unlock(&fv_lock);
	return rc;
}

/* ---------------------------------------------------------------- QPs */

FV_API struct ibv_qp *ibv_create_qp(struct ibv_pd *pd,
				    struct ibv_qp_init_attr *attr)
{
	struct ibv_qp_cap *cap = &attr->cap;
	struct fv_cq *scq, *rcq;
	struct fv_qp *q;

	fv_count(C_CREATE_QP);
	if (attr->qp_type != IBV_QPT_RC || attr->srq) {
		errno = EOPNOTSUPP;	/* UD, UC, XRC, SRQs: not modelled */
		return NULL;
	}
	if (!pd || cap->max_send_wr > FV_MAX_QP_WR ||
	    cap->max_recv_wr > FV_MAX_QP_WR || cap->max_send_sge > FV_MAX_SGE ||
	    cap->max_recv_sge > FV_MAX_SGE ||
	    cap->max_inline_data > FV_MAX_INLINE) {
		errno = EINVAL;
		return NULL;
	}
	q = calloc(1, sizeof(*q));
	if (!q) {
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_lock(&fv_lock);
	scq = find_cq_locked(attr->send_cq);
	rcq = find_cq_locked(attr->recv_cq);
	if (!scq || !rcq || scq->cq.context != pd->context ||
	    rcq->cq.context != pd->context || nqps == FV_MAXQP) {
		pthread_mutex_unlock(&fv_lock);
		free(q);
		errno = nqps == FV_MAXQP ? ENOMEM : EINVAL;
		return NULL;
	}
	q->qp.context = pd->context;
	q->qp.qp_context = attr->qp_context;
	q->qp.pd = pd;
	q->qp.send_cq = attr->send_cq;
	q->qp.recv_cq = attr->recv_cq;
	q->qp.qp_num = next_qpn++ & 0xffffff;
	q->qp.handle = q->qp.qp_num;
	q->qp.state = IBV_QPS_RESET;
	q->qp.qp_type = IBV_QPT_RC;
	pthread_mutex_init(&q->qp.mutex, NULL);
	pthread_cond_init(&q->qp.cond, NULL);
	q->state = IBV_QPS_RESET;
	q->scq = scq;
	q->rcq = rcq;
	q->sig_all = attr->sq_sig_all;
	q->port = 1;
	q->mtu = IBV_MTU_1024;
	q->cap = *cap;
	scq->nqp++;
	rcq->nqp++;
	qps[nqps++] = q;
	pthread_mutex_unlock(&fv_lock);
	return &q->qp;
}

static void destroy_qp_locked(struct fv_qp *q)
{
	settle_locked(q, 1);
	for (int i = 0; i < nqps; i++)
		if (qps[i] == q)
			qps[i] = qps[--nqps];
	cq_clean_locked(q->scq, q);
	cq_clean_locked(q->rcq, q);
	q->scq->nqp--;
	q->rcq->nqp--;
	free(q);
}

FV_API int ibv_destroy_qp(struct ibv_qp *qp)
{
	struct fv_qp *q;

	fv_count(C_DESTROY_QP);
	pthread_mutex_lock(&fv_lock);
	q = find_qp_locked(qp);
	if (q)
		destroy_qp_locked(q);
	pthread_mutex_unlock(&fv_lock);
	return q ? 0 : EINVAL;
}

/* The state machine of an RC QP (SQD and SQE not modelled). */
static int transition_ok(enum ibv_qp_state cur, enum ibv_qp_state next)
{
	if (next == IBV_QPS_RESET || next == IBV_QPS_ERR)
		return 1;
	switch (cur) {
	case IBV_QPS_RESET:
		return next == IBV_QPS_INIT;
	case IBV_QPS_INIT:
		return next == IBV_QPS_INIT || next == IBV_QPS_RTR;
	case IBV_QPS_RTR:
		return next == IBV_QPS_RTS;
	case IBV_QPS_RTS:
		return next == IBV_QPS_RTS;
	default:
		return 0;
	}
}

FV_API int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr,
			 int attr_mask)
{
	enum ibv_qp_state next;
	struct fv_qp *q;
	int rc = 0;

	fv_count(C_MODIFY_QP);
	pthread_mutex_lock(&fv_lock);
	q = find_qp_locked(qp);
	if (!q) {
		rc = EINVAL;
		goto out;
	}
	next = attr_mask & IBV_QP_STATE ? attr->qp_state : q->state;
	if ((attr_mask & IBV_QP_CUR_STATE) && attr->cur_qp_state != q->state)
		rc = EINVAL;
	else if (attr_mask & IBV_QP_STATE ? !transition_ok(q->state, next) :
		 q->state == IBV_QPS_RESET || q->state == IBV_QPS_ERR)
		rc = EINVAL;
	else if ((attr_mask & IBV_QP_PORT) && attr->port_num != 1)
		rc = EINVAL;
	/* RC needs its peer to go to RTR: a live QP (itself, for the
	 * library's loopback) */
	else if (next == IBV_QPS_RTR && q->state == IBV_QPS_INIT &&
		 (!(attr_mask & IBV_QP_DEST_QPN) ||
		  !qp_by_num_locked(attr->dest_qp_num)))
		rc = EINVAL;
	else if ((attr_mask & IBV_QP_DEST_QPN) && !qp_by_num_locked(attr->dest_qp_num))
		rc = EINVAL;
	if (rc)
		goto out;
	if (attr_mask & IBV_QP_ACCESS_FLAGS)
		q->access = attr->qp_access_flags;
	if (attr_mask & IBV_QP_DEST_QPN)
		q->dest = attr->dest_qp_num;
	if (attr_mask & IBV_QP_PATH_MTU)
		q->mtu = attr->path_mtu;
	if (next == IBV_QPS_RESET) {
		settle_locked(q, 1);
		q->posted = q->done = q->rq_posted = 0;
		cq_clean_locked(q->scq, q);
		cq_clean_locked(q->rcq, q);
	}
	q->state = next;
	q->qp.state = next;
out:
	pthread_mutex_unlock(&fv_lock);
	return rc;
}

FV_API int ibv_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr,
			int attr_mask, struct ibv_qp_init_attr *init_attr)
{
	struct fv_qp *q;

	(void)attr_mask;
	pthread_mutex_lock(&fv_lock);
	q = find_qp_locked(qp);
	if (!q) {
		pthread_mutex_unlock(&fv_lock);
		return EINVAL;
	}
	memset(attr, 0, sizeof(*attr));
	attr->qp_state = q->state;
	attr->cur_qp_state = q->state;
	attr->path_mtu = q->mtu;
	attr->qp_access_flags = q->access;
	attr->dest_qp_num = q->dest;
	attr->port_num = q->port;
	attr->cap = q->cap;
	if (init_attr) {
		memset(init_attr, 0, sizeof(*init_attr));
		init_attr->qp_context = q->qp.qp_context;
		init_attr->send_cq = q->qp.send_cq;
		init_attr->recv_cq = q->qp.recv_cq;
		init_attr->cap = q->cap;
		init_attr->qp_type = IBV_QPT_RC;
		init_attr->sq_sig_all = q->sig_all;
	}
	q->qp.state = q->state;	/* as rdma-core's ibv_query_qp */
	pthread_mutex_unlock(&fv_lock);
	return 0;
}

/* ------------------------------------------------------ memory windows */

/* The profile has no windows (nomw), or FAKEVERBS_NO_MW names this NIC. */
static int no_mw(const struct ibv_context *ctx)
{
	return !fv_rules() || !fv_rules()->mw ||
	       fv_env_nic("FAKEVERBS_NO_MW", ctx);
}

static struct ibv_mw *fv_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type)
{
	struct fv_mw *w;
	uint32_t idx;

	fv_count(C_ALLOC_MW);
	if (no_mw(pd->context)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (type != IBV_MW_TYPE_1 && type != IBV_MW_TYPE_2) {
		errno = EINVAL;
		return NULL;
	}
	w = calloc(1, sizeof(*w));
	if (!w) {
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_lock(&fv_lock);
	for (idx = 1; idx <= FV_MAXMW && mws[idx]; idx++)
		;
	if (idx > FV_MAXMW) {
		pthread_mutex_unlock(&fv_lock);
		free(w);
		errno = ENOMEM;
		return NULL;
	}
	/* a reused index goes on from its last tag: old rkeys stay dead */
	mw_tag[idx]++;
	w->index = idx;
	w->rkey = idx << 8 | mw_tag[idx];
	w->mw.context = pd->context;
	w->mw.pd = pd;
	w->mw.rkey = w->rkey;
	w->mw.handle = idx;
	w->mw.type = type;
	mws[idx] = w;
	nmws++;
	pthread_mutex_unlock(&fv_lock);
	fv_cost_charge(FV_COST_ALLOC_MW, 0);
	return &w->mw;
}

static void unbind_locked(struct fv_mw *w)
{
	if (!w->bound)
		return;
	w->bound = 0;
	w->mr->nbound--;
	w->mr = NULL;
}

static void dealloc_mw_locked(struct fv_mw *w)
{
	pend_end_locked(w);
	unbind_locked(w);
	mw_tag[w->index] = (uint8_t)w->rkey;
	mws[w->index] = NULL;
	nmws--;
	free(w);
}

static int fv_dealloc_mw(struct ibv_mw *mw)
{
	struct fv_mw *w;

	fv_count(C_DEALLOC_MW);
	fv_cost_charge(FV_COST_DEALLOC_MW, 0);
	pthread_mutex_lock(&fv_lock);
	w = find_mw_locked(mw);
	if (w)
		dealloc_mw_locked(w);	/* a bound window is unbound */
	pthread_mutex_unlock(&fv_lock);
	return w ? 0 : EINVAL;
}

static long env_long(const char *var)
{
	const char *e = getenv(var);

	return e ? atol(e) : 0;
}

/* An IBV_WR_BIND_MW on q: the NIC's checks (rxe_mw.c's, and the IB
 * spec's for type 2), in order. */
static enum ibv_wc_status bind_locked(struct fv_qp *q,
				      const struct ibv_send_wr *wr, int verb,
				      uint64_t seq)
{
	const struct ibv_mw_bind_info *b = &wr->bind_mw.bind_info;
	unsigned long nth = fv_count(C_BIND_MW);
	struct fv_mw *w = find_mw_locked(wr->bind_mw.mw);
	struct fv_mr *m = fv_find_mr_locked(b->mr);
	const char *why = NULL;
	int unbind = 0;

	if (env_long("FAKEVERBS_FAIL_BIND") == (long)nth)
		why = "FAKEVERBS_FAIL_BIND";
	else if (!w)
		why = "no such window";
	else if (w->mw.type == IBV_MW_TYPE_1 && !verb)
		why = "type 1 window bound by a WR (ibv_bind_mw binds it)";
	else if (w->mw.type == IBV_MW_TYPE_2 && verb)
		why = "type 2 window bound by ibv_bind_mw";
	else if (w->mw.pd != q->qp.pd)
		why = "window of another PD than the QP's";
	else if (w->mw.type == IBV_MW_TYPE_2 && w->bound)
		why = "type 2 window already bound (invalidate first)";
	else if (wr->bind_mw.rkey >> 8 != w->index)
		why = "new rkey changes the window's index";
	else if (w->mw.type == IBV_MW_TYPE_1 && !b->length)
		unbind = 1;	/* type 1, length 0: unbound, rkey moved on */
	else if (!m)
		why = "no such MR";
	else if (m->mr.pd != w->mw.pd)
		why = "MR of another PD than the window's";
	else if (m->access & IBV_ACCESS_ZERO_BASED)
		why = "zero-based MR (rxe_mw.c rxe_check_bind_mw)";
	else if (!(m->access & IBV_ACCESS_MW_BIND))
		why = "MR without IBV_ACCESS_MW_BIND";
	else if (b->mw_access_flags & ~FV_MW_RIGHTS)
		why = "window access beyond remote rights";
	else if ((b->mw_access_flags &
		  (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
		 !(m->access & IBV_ACCESS_LOCAL_WRITE))
		why = "remote write/atomic window on an MR without LOCAL_WRITE";
	else if (b->addr < m->iova || b->length > m->mr.length ||
		 b->addr - m->iova > m->mr.length - b->length)
		why = "range outside the MR";
	if (fv_debug())
		fprintf(stderr, "fakeverbs: bind #%lu rkey %#x -> %#llx+%llu access %#x: %s\n",
			nth, wr->bind_mw.rkey, (unsigned long long)b->addr,
			(unsigned long long)b->length, b->mw_access_flags,
			why ? why : unbind ? "unbound" : "bound");
	if (why)
		return IBV_WC_MW_BIND_ERR;
	pend_begin_locked(w, q, seq);
	unbind_locked(w);	/* a type 1 window moves */
	w->rkey = wr->bind_mw.rkey;
	if (unbind)
		return IBV_WC_SUCCESS;
	w->bound = 1;
	w->mr = m;
	w->addr = b->addr;
	w->length = b->length;
	w->access = b->mw_access_flags;
	m->nbound++;
	return IBV_WC_SUCCESS;
}

/* IBV_WR_LOCAL_INV of a type 2 window's current rkey. */
static enum ibv_wc_status local_inv_locked(struct fv_qp *q,
					   const struct ibv_send_wr *wr,
					   uint64_t seq)
{
	struct fv_mw *w = mw_by_rkey_locked(wr->invalidate_rkey);
	const char *why = NULL;

	fv_count(C_LOCAL_INV);
	if (!w)
		why = "no such window (MRs cannot be invalidated)";
	else if (w->mw.type != IBV_MW_TYPE_2)
		why = "type 1 window";
	else if (w->mw.pd != q->qp.pd)
		why = "window of another PD than the QP's";
	else if (w->rkey != wr->invalidate_rkey)
		why = "not the window's current rkey";
	else if (!w->bound)
		why = "window not bound";
	if (fv_debug())
		fprintf(stderr, "fakeverbs: local_inv rkey %#x: %s\n",
			wr->invalidate_rkey, why ? why : "invalidated");
	if (why)
		return IBV_WC_LOC_PROT_ERR;
	pend_begin_locked(w, q, seq);
	unbind_locked(w);
	return IBV_WC_SUCCESS;
}

int fv_mw_resolve_locked(const struct ibv_pd *pd, uint32_t rkey,
			 uint64_t raddr, uint64_t len, unsigned int need,
			 struct fv_mr **m, uint64_t *at)
{
	struct fv_mw *w = mw_by_rkey_locked(rkey);
	struct fv_mw_state st;
	uint64_t off;

	if (!w)
		return -ENOENT;
	st = seen_now(w);	/* a bind not completed yet: the state before */
	if (!st.bound || st.rkey != rkey)
		return -ENOENT;
	if (w->mw.pd != pd)
		return -EPERM;
	if (!(st.access & need))
		return -EACCES;
	off = st.access & IBV_ACCESS_ZERO_BASED ? raddr : raddr - st.addr;
	if ((!(st.access & IBV_ACCESS_ZERO_BASED) && raddr < st.addr) ||
	    len > st.length || off > st.length - len)
		return -ERANGE;
	*m = st.mr;
	*at = st.addr + off - st.mr->iova;
	return 0;
}

/* ---------------------------------------------------------- post send */

static enum ibv_wc_opcode wc_opcode(enum ibv_wr_opcode op)
{
	return op == IBV_WR_BIND_MW ? IBV_WC_BIND_MW : IBV_WC_LOCAL_INV;
}

/* The NIC runs one send WR: 0, or post_send's error for it.  verb: a
 * type 1 bind posted by ibv_bind_mw. */
static int post_one(struct fv_qp *q, const struct ibv_send_wr *wr, int verb)
{
	int slow = wr->opcode == IBV_WR_BIND_MW ||
		   wr->opcode == IBV_WR_LOCAL_INV;
	enum ibv_wc_status st;
	uint64_t seq;
	int rc = 0;

	pthread_mutex_lock(&fv_lock);
	if (!find_qp_locked(&q->qp))
		rc = EINVAL;
	else if (!slow)
		rc = EOPNOTSUPP;	/* data transfers: not modelled */
	else if (q->state != IBV_QPS_RTS && q->state != IBV_QPS_ERR)
		rc = EINVAL;
	else if (q->posted - q->done >= q->cap.max_send_wr)
		rc = ENOMEM;		/* send queue full */
	else if (wr->opcode == IBV_WR_BIND_MW && fv_rules()->max_bind_len &&
		 wr->bind_mw.bind_info.length > fv_rules()->max_bind_len)
		rc = EOPNOTSUPP;	/* mlx5 qp.c set_bind_wr:626 */
	if (rc) {
		pthread_mutex_unlock(&fv_lock);
		return rc;
	}
	seq = ++q->posted;
	if (q->state == IBV_QPS_RTS) {
		/* a slow NIC: the bind takes effect later, unlocked meanwhile */
		pthread_mutex_unlock(&fv_lock);
		fv_nic_wait("FAKEVERBS_BIND_DELAY_US");
		fv_cost_wr(wr);
		pthread_mutex_lock(&fv_lock);
		if (!find_qp_locked(&q->qp)) {
			pthread_mutex_unlock(&fv_lock);
			return 0;	/* destroyed meanwhile */
		}
	}
	if (q->state != IBV_QPS_RTS) {
		cq_push_locked(q->scq, q, seq, wr->wr_id, IBV_WC_WR_FLUSH_ERR,
			       wc_opcode(wr->opcode));
	} else {
		st = wr->opcode == IBV_WR_BIND_MW ?
			bind_locked(q, wr, verb, seq) :
			local_inv_locked(q, wr, seq);
		if (st != IBV_WC_SUCCESS) {
			fv_count(C_WR_ERRORS);
			q->state = IBV_QPS_ERR;
			cq_push_locked(q->scq, q, seq, wr->wr_id, st,
				       wc_opcode(wr->opcode));
		} else if (q->sig_all || (wr->send_flags & IBV_SEND_SIGNALED)) {
			cq_push_locked(q->scq, q, seq, wr->wr_id, st,
				       wc_opcode(wr->opcode));
		}
	}
	pthread_mutex_unlock(&fv_lock);
	return 0;
}

static int fv_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr,
			struct ibv_send_wr **bad_wr)
{
	fv_count(C_POST_SEND);
	for (; wr; wr = wr->next) {
		int rc = post_one((struct fv_qp *)qp, wr, 0);

		if (rc) {
			if (bad_wr)
				*bad_wr = wr;
			return rc;
		}
	}
	return 0;
}

/*
 * ibv_bind_mw, a type 1 window (the inline checked the type and PDs): as
 * rdma-core's providers, a bind WR on qp with the rkey's tag moved on,
 * written to mw->rkey once posted; length 0 unbinds (the tag moves too);
 * a bound window may be bound again elsewhere (it moves).  Zero-based
 * type 1 windows: EINVAL, as rxe.
 */
static int fv_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw,
		      struct ibv_mw_bind *mw_bind)
{
	const struct ibv_mw_bind_info *b = &mw_bind->bind_info;
	struct ibv_send_wr wr;
	int rc;

	fv_count(C_IBV_BIND_MW);
	if (no_mw(qp->context))
		return EOPNOTSUPP;	/* libibverbs dummy_ops.c bind_mw:143 */
	/* mlx5 qp.c mlx5_bind_mw:3694, rxe.c rxe_bind_mw:176 */
	if ((b->mw_access_flags & IBV_ACCESS_ZERO_BASED) ||
	    (!b->mr && (b->addr || b->length)) || mw->type != IBV_MW_TYPE_1)
		return EINVAL;
	if (b->mr && fv_rules()->bind_needs_mr_type) {
		const struct fv_mr *m;
		int type, zb;

		pthread_mutex_lock(&fv_lock);
		m = fv_find_mr_locked(b->mr);
		type = m ? (int)m->type : FV_MR_TYPE_MR;
		zb = m && (m->access & IBV_ACCESS_ZERO_BASED);
		pthread_mutex_unlock(&fv_lock);
		errno = type != FV_MR_TYPE_MR ? ENOTSUP :	/* :3700 */
			zb ? EINVAL : 0;			/* :3705 */
		if (errno)
			return errno;
	}
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = mw_bind->wr_id;
	wr.opcode = IBV_WR_BIND_MW;
	wr.send_flags = mw_bind->send_flags;
	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
	wr.bind_mw.bind_info = *b;
	rc = post_one((struct fv_qp *)qp, &wr, 1);
	if (!rc)
		mw->rkey = wr.bind_mw.rkey;
	return rc;
}

/* Receives: accepted (nothing is ever sent to them); flushed in error. */
static int fv_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr,
			struct ibv_recv_wr **bad_wr)
{
	int rc = 0;

	fv_count(C_POST_RECV);
	pthread_mutex_lock(&fv_lock);
	for (; wr && !rc; wr = rc ? wr : wr->next) {
		struct fv_qp *q = find_qp_locked(qp);

		if (!q || q->state == IBV_QPS_RESET)
			rc = EINVAL;
		else if (q->rq_posted >= q->cap.max_recv_wr)
			rc = ENOMEM;
		else if (q->state == IBV_QPS_ERR)
			cq_push_locked(q->rcq, q, 0, wr->wr_id,
				       IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV);
		else
			q->rq_posted++;
	}
	pthread_mutex_unlock(&fv_lock);
	if (rc && bad_wr)
		*bad_wr = wr;
	return rc;
}

static int fv_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr,
			    struct ibv_recv_wr **bad_wr)
{
	(void)srq;
	if (bad_wr)
		*bad_wr = wr;
	return EOPNOTSUPP;
}

/* ------------------------------------------------------------- queries */

FV_API int ibv_query_device(struct ibv_context *context,
			    struct ibv_device_attr *attr)
{
	int mw = !no_mw(context);

	fv_count(C_QUERY_DEVICE);
	memset(attr, 0, sizeof(*attr));
	snprintf(attr->fw_ver, sizeof(attr->fw_ver), "1.0.0");
	attr->node_guid = htobe64(0x0002c90300fa0000ull +
				  (uint64_t)(fv_device_of(context) -
					     fv_device_of(NULL)));
	attr->sys_image_guid = attr->node_guid;
	attr->max_mr_size = 1ull << 46;
	attr->page_size_cap = 0xfffff000;
	attr->vendor_id = 0x1af4;
	attr->vendor_part_id = 0x4242;
	attr->hw_ver = 1;
	attr->max_qp = FV_MAXQP;
	attr->max_qp_wr = FV_MAX_QP_WR;
	attr->device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN |
				 IBV_DEVICE_MEM_MGT_EXTENSIONS |
				 IBV_DEVICE_SYS_IMAGE_GUID;
	if (mw)
		attr->device_cap_flags |= IBV_DEVICE_MEM_WINDOW |
					  IBV_DEVICE_MEM_WINDOW_TYPE_2B;
	attr->max_sge = FV_MAX_SGE;
	attr->max_sge_rd = FV_MAX_SGE;
	attr->max_cq = FV_MAXCQ;
	attr->max_cqe = FV_MAX_CQE;
	attr->max_mr = FV_MAX;
	attr->max_pd = 1024;
	attr->max_qp_rd_atom = 16;
	attr->max_res_rd_atom = FV_MAXQP * 16;
	attr->max_qp_init_rd_atom = 16;
	attr->atomic_cap = IBV_ATOMIC_HCA;
	attr->max_mw = mw ? FV_MAXMW : 0;
	attr->max_pkeys = 1;
	attr->local_ca_ack_delay = 15;
	attr->phys_port_cnt = 1;
	return 0;
}

static int port_attr(uint8_t port, struct ibv_port_attr *a)
{
	if (port != 1)
		return EINVAL;
	memset(a, 0, sizeof(*a));
	a->state = IBV_PORT_ACTIVE;
	a->max_mtu = IBV_MTU_4096;
	a->active_mtu = IBV_MTU_1024;
	a->gid_tbl_len = 1;
	a->max_msg_sz = 1u << 31;
	a->pkey_tbl_len = 1;
	a->active_width = 2;		/* 4x */
	a->active_speed = 32;		/* EDR */
	a->phys_state = 5;		/* LinkUp */
	a->link_layer = IBV_LINK_LAYER_ETHERNET;
	return 0;
}

/* verbs_context.query_port, what the inline ibv_query_port calls. */
static int fv_query_port_ex(struct ibv_context *context, uint8_t port_num,
			    struct ibv_port_attr *attr, size_t len)
{
	struct ibv_port_attr a;
	int rc;

	(void)context;
	fv_count(C_QUERY_PORT);
	rc = port_attr(port_num, &a);
	if (!rc)
		memcpy(attr, &a, len < sizeof(a) ? len : sizeof(a));
	return rc;
}

/*
 * The exported one, which the inline ___ibv_query_port calls for a
 * context that is not extended: rdma-core fills the compat layout, the
 * port attributes up to flags (port_cap_flags2 and later came after).
 */
#undef ibv_query_port
FV_API int ibv_query_port(struct ibv_context *context, uint8_t port_num,
			  struct _compat_ibv_port_attr *port_attr)
{
	return fv_query_port_ex(context, port_num,
				(struct ibv_port_attr *)port_attr,
				offsetof(struct ibv_port_attr,
					 port_cap_flags2));
}

/* One GID (RoCE v2, ::ffff:10.0.0.<nic>); -1 like rdma-core's on error. */
FV_API int ibv_query_gid(struct ibv_context *context, uint8_t port_num,
			 int index, union ibv_gid *gid)
{
	if (port_num != 1 || index != 0) {
		errno = EINVAL;
		return -1;
	}
	memset(gid, 0, sizeof(*gid));
	gid->raw[10] = 0xff;
	gid->raw[11] = 0xff;
	gid->raw[12] = 10;
	gid->raw[15] = (uint8_t)(1 + (fv_device_of(context) -
				      fv_device_of(NULL)));
	return 0;
}

/* ------------------------------------------------------------ contexts */

struct ibv_context *fv_ctx_new(struct ibv_device *dev)
{
	struct verbs_context *vc;
	struct ibv_context *c;

	if (!fv_rules()) {	/* FAKEVERBS_PROVIDER names no profile */
		errno = EINVAL;
		return NULL;
	}
	vc = calloc(1, sizeof(*vc));
	if (!vc) {
		errno = ENOMEM;
		return NULL;
	}
	vc->sz = sizeof(*vc);
	vc->query_port = fv_query_port_ex;
	c = &vc->context;
	c->abi_compat = __VERBS_ABI_IS_EXTENDED;
	c->device = dev;
	c->cmd_fd = -1;
	c->async_fd = -1;
	c->num_comp_vectors = 1;
	pthread_mutex_init(&c->mutex, NULL);
	c->ops._compat_query_device = ibv_query_device;
	c->ops._compat_query_port = ibv_query_port;
	c->ops.alloc_mw = fv_alloc_mw;
	c->ops.bind_mw = fv_bind_mw;
	c->ops.dealloc_mw = fv_dealloc_mw;
	c->ops.poll_cq = fv_poll_cq;
	c->ops.req_notify_cq = fv_req_notify_cq;
	c->ops.post_srq_recv = fv_post_srq_recv;
	c->ops.post_send = fv_post_send;
	c->ops.post_recv = fv_post_recv;
	return c;
}

void fv_ctx_free(struct ibv_context *ctx)
{
	if (ctx)
		free((char *)ctx - offsetof(struct verbs_context, context));
}

void fv_ctx_destroy_windows(struct ibv_context *ctx)
{
	pthread_mutex_lock(&fv_lock);
	for (int i = nqps - 1; i >= 0; i--)
		if (i < nqps && qps[i]->qp.context == ctx)
			destroy_qp_locked(qps[i]);
	for (uint32_t i = 1; i <= FV_MAXMW; i++)
		if (mws[i] && mws[i]->mw.context == ctx)
			dealloc_mw_locked(mws[i]);
	pthread_mutex_unlock(&fv_lock);
}

void fv_ctx_destroy_cqs(struct ibv_context *ctx)
{
	pthread_mutex_lock(&fv_lock);
	for (int i = ncqs - 1; i >= 0; i--)
		if (i < ncqs && cqs[i]->cq.context == ctx)
			destroy_cq_locked(cqs[i]);
	pthread_mutex_unlock(&fv_lock);
}

/* ------------------------------------------------------------ test hooks */

FV_API int fakeverbs_live_mws(void)
{
	int n;

	pthread_mutex_lock(&fv_lock);
	n = nmws;
	pthread_mutex_unlock(&fv_lock);
	return n;
}

FV_API int fakeverbs_bound_mws(void)
{
	int n = 0;

	pthread_mutex_lock(&fv_lock);
	for (uint32_t i = 1; i <= FV_MAXMW; i++)
		n += mws[i] && (mws[i]->bound ||
				(mws[i]->pend_qp && mws[i]->seen.bound));
	pthread_mutex_unlock(&fv_lock);
	return n;
}

FV_API int fakeverbs_live_qps(const struct ibv_context *context)
{
	int n = 0;

	pthread_mutex_lock(&fv_lock);
	for (int i = 0; i < nqps; i++)
		n += !context || qps[i]->qp.context == context;
	pthread_mutex_unlock(&fv_lock);
	return n;
}

FV_API int fakeverbs_live_cqs(void)
{
	int n;

	pthread_mutex_lock(&fv_lock);
	n = ncqs;
	pthread_mutex_unlock(&fv_lock);
	return n;
}

FV_API int fakeverbs_qp_state(const struct ibv_qp *qp)
{
	struct fv_qp *q;
	int st;

	pthread_mutex_lock(&fv_lock);
	q = find_qp_locked(qp);
	st = q ? (int)q->state : -1;
	pthread_mutex_unlock(&fv_lock);
	return st;
}
