// SPDX-License-Identifier: MIT
/*
 * Self-test of the libibverbs double's queue pairs and memory windows
 * (tests/fakeverbs/fakeverbs_qp.c), linked against build/fakeverbs/
 * libibverbs.so.1 like an application linked against rdma-core, no
 * LD_PRELOAD: the inline verbs of <infiniband/verbs.h> (ibv_alloc_mw,
 * ibv_post_send, ibv_poll_cq, ibv_query_port ...) through the context's
 * ops, the rules a NIC enforces on binds and invalidations, and the
 * peer's view through fakeverbs_write/fakeverbs_read.
 */
#include <cuda.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "harness.h"
#include "fakeverbs.h"
#include "verbs_qp.h"

#define LW IBV_ACCESS_LOCAL_WRITE
#define RW IBV_ACCESS_REMOTE_WRITE
#define RR IBV_ACCESS_REMOTE_READ
#define BIND IBV_ACCESS_MW_BIND

static char buf[1 << 16] __attribute__((aligned(4096)));

struct nic {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
};

/* The fake's port: no GID routing, its MTU, the library's access. */
static const struct vqp_path fv_path = { .mtu = IBV_MTU_1024,
					 .access = RW | RR };

/* RESET -> INIT -> RTR (connected to itself) -> RTS, the library's QP
 * (also after an error). */
static void connect_self(struct ibv_qp *qp)
{
	const char *step;

	CHECK_EQ(vqp_connect(qp, &fv_path, qp->qp_num, &step), 0);
}

static struct nic open_nic(int n, uint32_t max_send_wr, int sig_all)
{
	struct nic k;

	k.ctx = fakeverbs_open_nic(n);
	CHECK(k.ctx);
	k.pd = ibv_alloc_pd(k.ctx);
	CHECK(k.pd);
	k.cq = ibv_create_cq(k.ctx, 64, NULL, NULL, 0);
	CHECK(k.cq);
	k.qp = vqp_create(k.pd, k.cq, max_send_wr, 1, sig_all);
	CHECK(k.qp);
	connect_self(k.qp);
	return k;
}

static int post_bind(struct ibv_qp *qp, struct ibv_mw *mw, uint32_t rkey,
		     struct ibv_mr *mr, uint64_t addr, uint64_t len,
		     unsigned int access, int signaled, uint64_t wr_id)
{
	struct ibv_send_wr wr, *bad = NULL;
	int rc;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.opcode = IBV_WR_BIND_MW;
	wr.send_flags = signaled ? IBV_SEND_SIGNALED : 0;
	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = rkey;
	wr.bind_mw.bind_info.mr = mr;
	wr.bind_mw.bind_info.addr = addr;
	wr.bind_mw.bind_info.length = len;
	wr.bind_mw.bind_info.mw_access_flags = access;
	rc = ibv_post_send(qp, &wr, &bad);
	if (rc)
		CHECK(bad == &wr);
	return rc;
}

static int post_inv(struct ibv_qp *qp, uint32_t rkey, int signaled,
		    uint64_t wr_id)
{
	struct ibv_send_wr wr, *bad = NULL;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.opcode = IBV_WR_LOCAL_INV;
	wr.send_flags = signaled ? IBV_SEND_SIGNALED : 0;
	wr.invalidate_rkey = rkey;
	return ibv_post_send(qp, &wr, &bad);
}

/* The one completion there must be, with its status and opcode. */
static void expect_wc(struct ibv_cq *cq, uint64_t wr_id,
		      enum ibv_wc_status st, enum ibv_wc_opcode op)
{
	struct ibv_wc wc[2];

	CHECK_EQ(ibv_poll_cq(cq, 2, wc), 1);
	CHECK_EQ(wc[0].wr_id, wr_id);
	CHECK_EQ(wc[0].status, st);
	if (st == IBV_WC_SUCCESS)
		CHECK_EQ(wc[0].opcode, op);
}

static void expect_none(struct ibv_cq *cq)
{
	struct ibv_wc wc;

	CHECK_EQ(ibv_poll_cq(cq, 1, &wc), 0);
}

static uint64_t at(size_t off)
{
	return (uint64_t)(uintptr_t)buf + off;
}

/* A parent as the library makes it: no remote rights, LOCAL_WRITE |
 * MW_BIND, and a window bound on [off, off + len) with access. */
static uint32_t bind_ok(struct nic *k, struct ibv_mr *mr, struct ibv_mw *mw,
			uint32_t old, size_t off, size_t len,
			unsigned int access)
{
	uint32_t rkey = ibv_inc_rkey(old);

	CHECK_EQ(post_bind(k->qp, mw, rkey, mr, at(off), len, access, 1, 7), 0);
	expect_wc(k->cq, 7, IBV_WC_SUCCESS, IBV_WC_BIND_MW);
	return rkey;
}

/* ------------------------------------------------------------------ cases */

TEST(query_device_port_gid)
{
	struct ibv_context *ctx = fakeverbs_open();
	int (*exported)(struct ibv_context *, uint8_t, struct ibv_port_attr *);
	struct ibv_device_attr da;
	struct ibv_port_attr pa;
	union ibv_gid gid;

	CHECK(ctx && ctx->device);
	CHECK_EQ(ibv_query_device(ctx, &da), 0);
	CHECK(da.device_cap_flags & IBV_DEVICE_MEM_WINDOW);
	CHECK(da.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B);
	CHECK(da.max_mw > 0 && da.max_qp > 0 && da.max_cq > 0);
	CHECK(da.max_qp_wr >= 64 && da.max_cqe >= 64 && da.phys_port_cnt == 1);
	/* the inline (verbs_context.query_port) ... */
	memset(&pa, 0xcc, sizeof(pa));
	CHECK_EQ(ibv_query_port(ctx, 1, &pa), 0);
	CHECK_EQ(pa.state, IBV_PORT_ACTIVE);
	CHECK_EQ(pa.gid_tbl_len, 1);
	CHECK(ibv_query_port(ctx, 2, &pa) != 0);
	/* ... and the exported one, as dlvsym finds it */
	exported = (int (*)(struct ibv_context *, uint8_t,
			    struct ibv_port_attr *))
		dlvsym(RTLD_DEFAULT, "ibv_query_port", "IBVERBS_1.1");
	CHECK(exported);
	memset(&pa, 0, sizeof(pa));
	CHECK_EQ(exported(ctx, 1, &pa), 0);
	CHECK_EQ(pa.state, IBV_PORT_ACTIVE);
	CHECK_EQ(pa.active_mtu, IBV_MTU_1024);
	CHECK_EQ(ibv_query_gid(ctx, 1, 0, &gid), 0);
	CHECK_EQ(gid.raw[10], 0xff);
	CHECK_EQ(ibv_query_gid(ctx, 1, 1, &gid), -1);
	CHECK_EQ(fakeverbs_calls("ibv_query_port"), 3);
	CHECK_EQ(ibv_close_device(ctx), 0);
}

TEST(no_mw_every_nic_or_one)
{
	struct ibv_context *c0, *c1;
	struct ibv_device_attr da;
	struct ibv_pd *p0, *p1;
	struct ibv_mw *mw;

	setenv("FAKEVERBS_NO_MW", "1", 1);
	c0 = fakeverbs_open_nic(0);
	p0 = ibv_alloc_pd(c0);
	CHECK_EQ(ibv_query_device(c0, &da), 0);
	CHECK(!(da.device_cap_flags & (IBV_DEVICE_MEM_WINDOW |
				       IBV_DEVICE_MEM_WINDOW_TYPE_2B)));
	CHECK_EQ(da.max_mw, 0);
	errno = 0;
	CHECK(ibv_alloc_mw(p0, IBV_MW_TYPE_2) == NULL);
	CHECK_EQ(errno, EOPNOTSUPP);

	setenv("FAKEVERBS_NO_MW", "fakenic1", 1);
	c1 = fakeverbs_open_nic(1);
	p1 = ibv_alloc_pd(c1);
	mw = ibv_alloc_mw(p0, IBV_MW_TYPE_2);
	CHECK(mw);
	errno = 0;
	CHECK(ibv_alloc_mw(p1, IBV_MW_TYPE_2) == NULL);
	CHECK_EQ(errno, EOPNOTSUPP);
	CHECK_EQ(ibv_query_device(c1, &da), 0);
	CHECK(!(da.device_cap_flags & IBV_DEVICE_MEM_WINDOW));
	CHECK_EQ(ibv_dealloc_mw(mw), 0);
	CHECK_EQ(fakeverbs_calls("ibv_alloc_mw"), 3);
}

TEST(qp_state_machine)
{
	struct ibv_context *ctx = fakeverbs_open();
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	struct ibv_qp *qp = vqp_create(pd, cq, 8, 1, 0);
	struct ibv_mw *mw = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
	struct ibv_qp_init_attr ia = { .send_cq = cq, .recv_cq = cq,
				       .qp_type = IBV_QPT_UD };
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;

	CHECK(qp && mw);
	CHECK_EQ(qp->state, IBV_QPS_RESET);
	errno = 0;
	CHECK(ibv_create_qp(pd, &ia) == NULL);		/* RC only */
	CHECK_EQ(errno, EOPNOTSUPP);
	/* no sends before RTS */
	CHECK_EQ(post_inv(qp, mw->rkey, 1, 1), EINVAL);
	CHECK_EQ(vqp_to(qp, IBV_QPS_RTS, &fv_path, 0), EINVAL);	/* RESET -> RTS */
	CHECK_EQ(vqp_to(qp, IBV_QPS_INIT, &fv_path, 0), 0);
	CHECK_EQ(post_inv(qp, mw->rkey, 1, 1), EINVAL);
	/* RTR needs a live peer */
	CHECK_EQ(vqp_to(qp, IBV_QPS_RTR, &fv_path, 0xabcdef), EINVAL);
	CHECK_EQ(vqp_to(qp, IBV_QPS_RTR, &fv_path, qp->qp_num), 0);
	CHECK_EQ(post_inv(qp, mw->rkey, 1, 1), EINVAL);
	CHECK_EQ(vqp_to(qp, IBV_QPS_RTS, &fv_path, 0), 0);
	CHECK_EQ(qp->state, IBV_QPS_RTS);
	CHECK_EQ(ibv_query_qp(qp, &qa, IBV_QP_STATE | IBV_QP_DEST_QPN, &qi), 0);
	CHECK_EQ(qa.qp_state, IBV_QPS_RTS);
	CHECK_EQ(qa.dest_qp_num, qp->qp_num);
	CHECK(qi.send_cq == cq);
	/* an unmodelled opcode is refused at post */
	{
		struct ibv_send_wr wr = { .opcode = IBV_WR_SEND }, *bad = NULL;

		CHECK_EQ(ibv_post_send(qp, &wr, &bad), EOPNOTSUPP);
		CHECK(bad == &wr);
	}
	expect_none(cq);
	CHECK_EQ(fakeverbs_live_qps(ctx), 1);
	CHECK_EQ(fakeverbs_live_qps(NULL), 1);
	CHECK_EQ(fakeverbs_live_cqs(), 1);
	CHECK_EQ(fakeverbs_calls("ibv_create_qp"), 2);
	CHECK_EQ(fakeverbs_calls("ibv_create_cq"), 1);
}

TEST(bind_write_invalidate_rebind)
{
	struct nic k = open_nic(0, 16, 0);
	struct ibv_pd *other = ibv_alloc_pd(k.ctx);
	struct ibv_mr *mr = ibv_reg_mr(k.pd, buf, sizeof(buf), LW | BIND);
	struct ibv_mw *mw = ibv_alloc_mw(k.pd, IBV_MW_TYPE_2);
	uint32_t fresh, r1, r2;
	char got[8];

	CHECK(mr && mw && other);
	CHECK_EQ(mw->type, IBV_MW_TYPE_2);
	fresh = mw->rkey;
	/* the parent has no remote rights; an unbound window no rkey */
	CHECK_EQ(fakeverbs_write(k.pd, mr->rkey, at(0), "x", 1), -EACCES);
	CHECK_EQ(fakeverbs_write(k.pd, fresh, at(0), "x", 1), -ENOENT);

	r1 = bind_ok(&k, mr, mw, fresh, 4096, 8192, RW);
	CHECK((r1 >> 8) == (fresh >> 8) && r1 != fresh);
	CHECK_EQ(fakeverbs_bound_mws(), 1);
	CHECK_EQ(fakeverbs_write(k.pd, r1, at(4096), "hello", 5), 0);
	CHECK(!memcmp(buf + 4096, "hello", 5));
	CHECK_EQ(fakeverbs_write(k.pd, r1, at(4096 + 8190), "ab", 2), 0);
	CHECK_EQ(fakeverbs_write(k.pd, r1, at(4096 + 8191), "ab", 2), -ERANGE);
	CHECK_EQ(fakeverbs_write(k.pd, r1, at(4095), "ab", 2), -ERANGE);
	CHECK_EQ(fakeverbs_write(other, r1, at(4096), "ab", 2), -EPERM);
	CHECK_EQ(fakeverbs_read(k.pd, r1, at(4096), got, 5), -EACCES);
	CHECK_EQ(fakeverbs_write(k.pd, fresh, at(4096), "x", 1), -ENOENT);

	/* invalidate: the rkey is dead from then on */
	CHECK_EQ(post_inv(k.qp, r1, 1, 9), 0);
	expect_wc(k.cq, 9, IBV_WC_SUCCESS, IBV_WC_LOCAL_INV);
	CHECK_EQ(fakeverbs_bound_mws(), 0);
	CHECK_EQ(fakeverbs_write(k.pd, r1, at(4096), "x", 1), -ENOENT);

	/* rebind with the next tag, readable now: old tags stay refused */
	r2 = bind_ok(&k, mr, mw, r1, 0, 64, RR | RW);
	CHECK(r2 != r1);
	CHECK_EQ(fakeverbs_write(k.pd, r1, at(0), "x", 1), -ENOENT);
	CHECK_EQ(fakeverbs_write(k.pd, fresh, at(0), "x", 1), -ENOENT);
	memcpy(buf, "window", 6);
	CHECK_EQ(fakeverbs_read(k.pd, r2, at(0), got, 6), 0);
	CHECK(!memcmp(got, "window", 6));
	CHECK_EQ(fakeverbs_write(k.pd, r2, at(1), "W", 1), 0);
	CHECK_EQ(buf[1], 'W');
	CHECK_EQ(fakeverbs_calls("bind_mw"), 2);
	CHECK_EQ(fakeverbs_calls("local_inv"), 1);
	CHECK_EQ(fakeverbs_calls("mw_writes"), 3);
	CHECK_EQ(fakeverbs_calls("mw_reads"), 1);
	/* a stale invalidation (the old rkey) is an error */
	CHECK_EQ(post_inv(k.qp, r1, 0, 11), 0);
	expect_wc(k.cq, 11, IBV_WC_LOC_PROT_ERR, 0);
	CHECK_EQ(fakeverbs_qp_state(k.qp), IBV_QPS_ERR);
}

TEST(zero_based_and_zero_length_windows)
{
	struct nic k = open_nic(0, 16, 1);
	struct ibv_mr *mr = ibv_reg_mr(k.pd, buf, sizeof(buf), LW | BIND);
	struct ibv_mw *mw = ibv_alloc_mw(k.pd, IBV_MW_TYPE_2);
	uint32_t r;

	r = bind_ok(&k, mr, mw, mw->rkey, 4096, 0, RW);
	CHECK_EQ(fakeverbs_write(k.pd, r, at(4096), "x", 1), -ERANGE);
	CHECK_EQ(post_inv(k.qp, r, 0, 1), 0);		/* sq_sig_all */
	expect_wc(k.cq, 1, IBV_WC_SUCCESS, IBV_WC_LOCAL_INV);
	r = bind_ok(&k, mr, mw, r, 8192, 100, RW | IBV_ACCESS_ZERO_BASED);
	CHECK_EQ(fakeverbs_write(k.pd, r, 10, "z", 1), 0);
	CHECK_EQ(buf[8192 + 10], 'z');
	CHECK_EQ(fakeverbs_write(k.pd, r, 100, "z", 1), -ERANGE);
}

/* Each bad bind completes with IBV_WC_MW_BIND_ERR (signaled or not), the
 * QP goes to error, and later WRs flush; RESET brings it back. */
TEST(bind_checks_and_error_state)
{
	struct nic k = open_nic(0, 16, 0);
	struct ibv_pd *pd2 = ibv_alloc_pd(k.ctx);
	struct ibv_mr *mr = ibv_reg_mr(k.pd, buf, sizeof(buf), LW | BIND);
	struct ibv_mr *nobind = ibv_reg_mr(k.pd, buf, 4096, LW | RW);
	struct ibv_mr *ro = ibv_reg_mr(k.pd, buf, 4096, BIND);
	struct ibv_mr *mr2 = ibv_reg_mr(pd2, buf, 4096, LW | BIND);
	struct ibv_mw *mw = ibv_alloc_mw(k.pd, IBV_MW_TYPE_2);
	struct ibv_mw *mw2 = ibv_alloc_mw(pd2, IBV_MW_TYPE_2);
	struct ibv_mw *mw1 = ibv_alloc_mw(k.pd, IBV_MW_TYPE_1);
	uint32_t nk = ibv_inc_rkey(mw->rkey), bound;
	struct {
		struct ibv_mw *w;
		uint32_t rkey;
		struct ibv_mr *m;
		uint64_t addr, len;
		unsigned int acc;
	} bad[] = {
		/* rdma-core providers/mlx5/qp.c set_bind_wr:607-622; the
		 * kernel's rxe_mw.c rxe_check_bind_mw C10-73, C10-74 */
		{ mw, nk, nobind, at(0), 64, RW },		/* no MW_BIND */
		{ mw, nk, ro, at(0), 64, RW },		/* write, no LW */
		{ mw, nk, ro, at(0), 64, IBV_ACCESS_REMOTE_ATOMIC },
		{ mw, nk, mr, at(0) - 1, 64, RW },	/* before the MR */
		{ mw, nk, mr, at(sizeof(buf) - 63), 64, RW },	/* past */
		{ mw, nk + 0x100, mr, at(0), 64, RW },	/* other index */
		{ mw, nk, mr2, at(0), 64, RW },		/* MR of other PD */
		{ mw2, ibv_inc_rkey(mw2->rkey), mr2, at(0), 64, RW }, /* QP's PD */
		{ mw1, ibv_inc_rkey(mw1->rkey), mr, at(0), 64, RW }, /* type 1 */
		{ mw, nk, mr, at(0), 64, RW | LW },	/* not a window right */
	};
	struct ibv_wc wc[4];

	CHECK(mr && nobind && ro && mr2 && mw && mw2 && mw1);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CHECK_EQ(post_bind(k.qp, bad[i].w, bad[i].rkey, bad[i].m,
				   bad[i].addr, bad[i].len, bad[i].acc,
				   0, 100 + i), 0);
		CHECK_EQ(fakeverbs_qp_state(k.qp), IBV_QPS_ERR);
		/* flushed, even unsignaled, in order */
		CHECK_EQ(post_inv(k.qp, nk, 0, 200 + i), 0);
		CHECK_EQ(ibv_poll_cq(k.cq, 4, wc), 2);
		CHECK_EQ(wc[0].wr_id, 100 + i);
		CHECK_EQ(wc[0].status, IBV_WC_MW_BIND_ERR);
		CHECK_EQ(wc[0].qp_num, k.qp->qp_num);
		CHECK_EQ(wc[1].wr_id, 200 + i);
		CHECK_EQ(wc[1].status, IBV_WC_WR_FLUSH_ERR);
		CHECK_EQ(fakeverbs_bound_mws(), 0);
		/* the app's qp->state is stale until queried, as in rdma-core */
		CHECK_EQ(k.qp->state, IBV_QPS_RTS);
		connect_self(k.qp);
	}
	/* a type 2 window is bound once: invalidate before rebinding */
	bound = bind_ok(&k, mr, mw, mw->rkey, 0, 64, RW);
	CHECK_EQ(post_bind(k.qp, mw, ibv_inc_rkey(bound), mr, at(0), 64, RW,
			   1, 300), 0);
	expect_wc(k.cq, 300, IBV_WC_MW_BIND_ERR, 0);
	CHECK_EQ(fakeverbs_write(k.pd, bound, at(0), "x", 1), 0);
	CHECK_EQ(fakeverbs_write(k.pd, ibv_inc_rkey(bound), at(0), "x", 1),
		 -ENOENT);
	CHECK_EQ(fakeverbs_calls("wr_errors"), 11);
}

static int bind1(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mr *mr,
		 uint64_t addr, uint64_t len, unsigned int access,
		 uint64_t wr_id)
{
	struct ibv_mw_bind b;

	memset(&b, 0, sizeof(b));
	b.wr_id = wr_id;
	b.send_flags = IBV_SEND_SIGNALED;
	b.bind_info.mr = mr;
	b.bind_info.addr = addr;
	b.bind_info.length = len;
	b.bind_info.mw_access_flags = access;
	return ibv_bind_mw(qp, mw, &b);
}

/* Type 1 (the library's): ibv_bind_mw moves the tag on and the window
 * with it; length 0 unbinds; never by a WR, never invalidated. */
TEST(type1_bind_move_unbind)
{
	struct nic k = open_nic(0, 16, 0);
	struct ibv_mr *mr = ibv_reg_mr(k.pd, buf, sizeof(buf), LW | BIND);
	struct ibv_mr *nobind = ibv_reg_mr(k.pd, buf, 4096, LW);
	struct ibv_mw *mw = ibv_alloc_mw(k.pd, IBV_MW_TYPE_1);
	uint32_t r0, r1, r2;

	CHECK(mr && mw && nobind);
	CHECK_EQ(mw->type, IBV_MW_TYPE_1);
	r0 = mw->rkey;
	CHECK_EQ(bind1(k.qp, mw, mr, at(0), 64, RW, 1), 0);
	r1 = mw->rkey;
	CHECK_EQ(r1, ibv_inc_rkey(r0));
	expect_wc(k.cq, 1, IBV_WC_SUCCESS, IBV_WC_BIND_MW);
	CHECK_EQ(fakeverbs_write(k.pd, r1, at(8), "1", 1), 0);
	CHECK_EQ(fakeverbs_write(k.pd, r0, at(8), "1", 1), -ENOENT);
	CHECK_EQ(fakeverbs_write(k.pd, r1, at(64), "1", 1), -ERANGE);
	CHECK_EQ(ibv_dereg_mr(mr), EBUSY);
	/* bound again elsewhere: it moves, the old key dies */
	CHECK_EQ(bind1(k.qp, mw, mr, at(4096), 128, RW | RR, 2), 0);
	r2 = mw->rkey;
	expect_wc(k.cq, 2, IBV_WC_SUCCESS, IBV_WC_BIND_MW);
	CHECK_EQ(fakeverbs_write(k.pd, r1, at(8), "1", 1), -ENOENT);
	CHECK_EQ(fakeverbs_write(k.pd, r2, at(4096 + 127), "2", 1), 0);
	CHECK_EQ(buf[4096 + 127], '2');
	CHECK_EQ(fakeverbs_bound_mws(), 1);
	/* never invalidated by a WR */
	CHECK_EQ(post_inv(k.qp, r2, 1, 3), 0);
	expect_wc(k.cq, 3, IBV_WC_LOC_PROT_ERR, 0);
	CHECK_EQ(vqp_to(k.qp, IBV_QPS_RESET, &fv_path, 0), 0);
	CHECK_EQ(bind1(k.qp, mw, NULL, 0, 0, 0, 4), EINVAL);	/* not RTS */
	connect_self(k.qp);
	/* length 0: unbound, the tag moved on */
	CHECK_EQ(bind1(k.qp, mw, NULL, 0, 0, 0, 5), 0);
	expect_wc(k.cq, 5, IBV_WC_SUCCESS, IBV_WC_BIND_MW);
	CHECK_EQ(mw->rkey, ibv_inc_rkey(r2));
	CHECK_EQ(fakeverbs_write(k.pd, r2, at(4096), "x", 1), -ENOENT);
	CHECK_EQ(fakeverbs_bound_mws(), 0);
	CHECK_EQ(ibv_dereg_mr(mr), 0);
	/* the provider's own refusals, and the NIC's */
	CHECK_EQ(bind1(k.qp, mw, NULL, at(0), 64, RW, 6), EINVAL);
	CHECK_EQ(bind1(k.qp, mw, nobind, 0, 64, RW | IBV_ACCESS_ZERO_BASED, 7),
		 EINVAL);
	CHECK_EQ(bind1(k.qp, mw, nobind, at(0), 64, RW, 8), 0);
	expect_wc(k.cq, 8, IBV_WC_MW_BIND_ERR, 0);
	CHECK_EQ(fakeverbs_qp_state(k.qp), IBV_QPS_ERR);
	CHECK_EQ(fakeverbs_calls("ibv_bind_mw"), 6);	/* #6: the inline refused */
}

TEST(type1_fail_bind_nth)
{
	struct nic k;
	struct ibv_mr *mr;
	struct ibv_mw *mw;

	setenv("FAKEVERBS_FAIL_BIND", "1", 1);
	k = open_nic(0, 16, 0);
	mr = ibv_reg_mr(k.pd, buf, sizeof(buf), LW | BIND);
	mw = ibv_alloc_mw(k.pd, IBV_MW_TYPE_1);
	CHECK_EQ(bind1(k.qp, mw, mr, at(0), 64, RW, 1), 0);
	expect_wc(k.cq, 1, IBV_WC_MW_BIND_ERR, 0);
	CHECK_EQ(fakeverbs_write(k.pd, mw->rkey, at(0), "x", 1), -ENOENT);
	CHECK_EQ(fakeverbs_bound_mws(), 0);
}

TEST(parent_busy_while_bound_pd_busy)
{
	struct nic k = open_nic(0, 16, 0);
	struct ibv_pd *pd2 = ibv_alloc_pd(k.ctx), *pd3 = ibv_alloc_pd(k.ctx);
	struct ibv_mr *mr = ibv_reg_mr(k.pd, buf, sizeof(buf), LW | BIND);
	struct ibv_mw *mw = ibv_alloc_mw(k.pd, IBV_MW_TYPE_2);
	struct ibv_mw *mw3 = ibv_alloc_mw(pd3, IBV_MW_TYPE_2);
	struct ibv_cq *cq2 = ibv_create_cq(k.ctx, 4, NULL, NULL, 0);
	struct ibv_qp *qp2 = vqp_create(pd2, cq2, 4, 1, 0);
	uint32_t r = bind_ok(&k, mr, mw, mw->rkey, 0, 4096, RW);

	CHECK_EQ(ibv_dereg_mr(mr), EBUSY);
	CHECK_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			      LW), EBUSY);
	CHECK_EQ(fakeverbs_live_mrs(), 1);
	CHECK_EQ(fakeverbs_write(k.pd, r, at(0), "x", 1), 0);
	CHECK_EQ(post_inv(k.qp, r, 1, 5), 0);
	expect_wc(k.cq, 5, IBV_WC_SUCCESS, IBV_WC_LOCAL_INV);
	/* dealloc of a bound window unbinds it */
	r = bind_ok(&k, mr, mw, r, 0, 4096, RW);
	CHECK_EQ(ibv_dereg_mr(mr), EBUSY);
	CHECK_EQ(ibv_dealloc_mw(mw), 0);
	CHECK_EQ(fakeverbs_write(k.pd, r, at(0), "x", 1), -ENOENT);
	CHECK_EQ(ibv_dereg_mr(mr), 0);
	/* PDs: busy with an MW (pd3), a QP (pd2), a QP (k.pd) */
	CHECK_EQ(ibv_dealloc_pd(pd3), EBUSY);
	CHECK_EQ(ibv_dealloc_pd(pd2), EBUSY);
	CHECK_EQ(ibv_dealloc_pd(k.pd), EBUSY);
	CHECK_EQ(ibv_dealloc_mw(mw3), 0);
	CHECK_EQ(ibv_dealloc_pd(pd3), 0);
	/* a CQ is busy while a QP uses it */
	CHECK_EQ(ibv_destroy_cq(cq2), EBUSY);
	CHECK_EQ(ibv_destroy_qp(qp2), 0);
	CHECK_EQ(ibv_destroy_cq(cq2), 0);
	CHECK_EQ(ibv_dealloc_pd(pd2), 0);
	CHECK_EQ(fakeverbs_calls("ibv_dealloc_mw"), 2);
}

TEST(completions_only_on_own_cq)
{
	struct nic a = open_nic(0, 16, 0);
	struct ibv_cq *cqb = ibv_create_cq(a.ctx, 16, NULL, NULL, 0);
	struct ibv_qp *qpb = vqp_create(a.pd, cqb, 16, 1, 1);
	struct ibv_mr *mr = ibv_reg_mr(a.pd, buf, sizeof(buf), LW | BIND);
	struct ibv_mw *mw = ibv_alloc_mw(a.pd, IBV_MW_TYPE_2);
	uint32_t r = ibv_inc_rkey(mw->rkey);

	CHECK(qpb);
	connect_self(qpb);
	/* unsignaled on a: no completion anywhere, so never known to be
	 * complete: a peer is refused (ibv_bind_mw(3)) */
	CHECK_EQ(post_bind(a.qp, mw, r, mr, at(0), 64, RW, 0, 1), 0);
	expect_none(a.cq);
	expect_none(cqb);
	CHECK_EQ(fakeverbs_write(a.pd, r, at(0), "x", 1), -ENOENT);
	/* sq_sig_all on b: on b's CQ only */
	CHECK_EQ(post_inv(qpb, r, 0, 2), 0);
	expect_none(a.cq);
	expect_wc(cqb, 2, IBV_WC_SUCCESS, IBV_WC_LOCAL_INV);
	/* an error on b breaks b, not a */
	CHECK_EQ(post_inv(qpb, r, 0, 3), 0);
	expect_wc(cqb, 3, IBV_WC_LOC_PROT_ERR, 0);
	CHECK_EQ(fakeverbs_qp_state(qpb), IBV_QPS_ERR);
	CHECK_EQ(fakeverbs_qp_state(a.qp), IBV_QPS_RTS);
	r = bind_ok(&a, mr, mw, r, 0, 64, RW);
	expect_none(cqb);
}

/* max_send_wr WRs are held until a later signaled completion is polled. */
TEST(send_queue_depth)
{
	struct nic k = open_nic(0, 4, 0);
	struct ibv_mr *mr = ibv_reg_mr(k.pd, buf, sizeof(buf), LW | BIND);
	struct ibv_mw *mw = ibv_alloc_mw(k.pd, IBV_MW_TYPE_2);
	uint32_t r = mw->rkey;

	for (int i = 0; i < 2; i++) {
		r = ibv_inc_rkey(r);
		CHECK_EQ(post_bind(k.qp, mw, r, mr, at(0), 64, RW, 0, 1), 0);
		CHECK_EQ(post_inv(k.qp, r, 0, 2), 0);
	}
	CHECK_EQ(post_inv(k.qp, r, 1, 3), ENOMEM);	/* full */
	expect_none(k.cq);
	connect_self(k.qp);
	r = ibv_inc_rkey(r);
	CHECK_EQ(post_bind(k.qp, mw, r, mr, at(0), 64, RW, 0, 1), 0);
	CHECK_EQ(post_inv(k.qp, r, 0, 2), 0);
	r = ibv_inc_rkey(r);
	CHECK_EQ(post_bind(k.qp, mw, r, mr, at(0), 64, RW, 0, 1), 0);
	CHECK_EQ(post_inv(k.qp, r, 1, 4), 0);		/* signaled */
	CHECK_EQ(post_inv(k.qp, r, 1, 5), ENOMEM);	/* not polled yet */
	expect_wc(k.cq, 4, IBV_WC_SUCCESS, IBV_WC_LOCAL_INV);
	r = bind_ok(&k, mr, mw, r, 0, 64, RW);		/* room again */
}

TEST(fail_bind_nth)
{
	struct nic k;
	struct ibv_mr *mr;
	struct ibv_mw *mw;
	uint32_t r;

	setenv("FAKEVERBS_FAIL_BIND", "2", 1);
	k = open_nic(0, 16, 0);
	mr = ibv_reg_mr(k.pd, buf, sizeof(buf), LW | BIND);
	mw = ibv_alloc_mw(k.pd, IBV_MW_TYPE_2);
	r = bind_ok(&k, mr, mw, mw->rkey, 0, 64, RW);
	CHECK_EQ(post_inv(k.qp, r, 1, 1), 0);
	expect_wc(k.cq, 1, IBV_WC_SUCCESS, IBV_WC_LOCAL_INV);
	r = ibv_inc_rkey(r);
	CHECK_EQ(post_bind(k.qp, mw, r, mr, at(0), 64, RW, 0, 2), 0);
	expect_wc(k.cq, 2, IBV_WC_MW_BIND_ERR, 0);
	CHECK_EQ(fakeverbs_write(k.pd, r, at(0), "x", 1), -ENOENT);
	CHECK_EQ(fakeverbs_qp_state(k.qp), IBV_QPS_ERR);
	connect_self(k.qp);
	r = bind_ok(&k, mr, mw, r, 0, 64, RW);		/* the third binds */
	CHECK_EQ(fakeverbs_write(k.pd, r, at(0), "x", 1), 0);
}

struct writer {
	struct ibv_pd *pd;
	uint32_t rkey;
	double took;
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *peer(void *arg)
{
	struct writer *w = arg;
	double t0;

	usleep(20000);		/* into the bind's delay */
	t0 = now_s();
	for (int i = 0; i < 100; i++)
		fakeverbs_write(w->pd, w->rkey, at(0), "p", 1);
	w->took = now_s() - t0;
	return NULL;
}

/* A slow bind: the NIC's lock is not held meanwhile (a peer's writes go
 * on), and the window is not bound before the call returns. */
TEST(bind_delay_does_not_block_the_peer)
{
	struct nic k;
	struct ibv_mr *mr;
	struct ibv_mw *mw;
	struct writer w;
	pthread_t t;
	double t0, took;
	uint32_t r;

	k = open_nic(0, 16, 0);
	mr = ibv_reg_mr(k.pd, buf, sizeof(buf), LW | BIND | RW);
	mw = ibv_alloc_mw(k.pd, IBV_MW_TYPE_2);
	w.pd = k.pd;
	w.rkey = mr->rkey;
	setenv("FAKEVERBS_BIND_DELAY_US", "200000", 1);
	CHECK_EQ(pthread_create(&t, NULL, peer, &w), 0);
	t0 = now_s();
	r = bind_ok(&k, mr, mw, mw->rkey, 0, 64, RW);
	took = now_s() - t0;
	pthread_join(t, NULL);
	CHECK(took >= 0.2);
	CHECK(w.took < 0.1);
	CHECK_EQ(fakeverbs_write(k.pd, r, at(0), "x", 1), 0);
}

TEST(index_reuse_keeps_old_rkeys_dead)
{
	struct nic k = open_nic(0, 16, 0);
	struct ibv_mr *mr = ibv_reg_mr(k.pd, buf, sizeof(buf), LW | BIND);
	struct ibv_mw *mw = ibv_alloc_mw(k.pd, IBV_MW_TYPE_2);
	uint32_t r = bind_ok(&k, mr, mw, mw->rkey, 0, 64, RW);

	CHECK_EQ(ibv_dealloc_mw(mw), 0);
	mw = ibv_alloc_mw(k.pd, IBV_MW_TYPE_2);
	CHECK((mw->rkey >> 8) == (r >> 8));	/* the index is reused */
	CHECK(mw->rkey != r);
	r = bind_ok(&k, mr, mw, mw->rkey, 0, 64, RW);
	CHECK_EQ(fakeverbs_write(k.pd, r, at(0), "x", 1), 0);
	CHECK_EQ(fakeverbs_live_mws(), 1);
}

TEST(close_device_destroys_everything)
{
	struct nic k = open_nic(0, 16, 0);
	struct ibv_mr *mr = ibv_reg_mr(k.pd, buf, sizeof(buf), LW | BIND);
	struct ibv_mw *mw = ibv_alloc_mw(k.pd, IBV_MW_TYPE_2);
	struct nic other = open_nic(1, 16, 0);

	bind_ok(&k, mr, mw, mw->rkey, 0, 64, RW);
	CHECK_EQ(fakeverbs_live_qps(k.ctx), 1);
	CHECK_EQ(fakeverbs_live_qps(NULL), 2);
	CHECK_EQ(ibv_close_device(k.ctx), 0);
	CHECK_EQ(fakeverbs_live_mws(), 0);
	CHECK_EQ(fakeverbs_bound_mws(), 0);
	CHECK_EQ(fakeverbs_live_mrs(), 0);
	CHECK_EQ(fakeverbs_live_qps(NULL), 1);
	CHECK_EQ(fakeverbs_live_cqs(), 1);
	CHECK_EQ(fakeverbs_qp_state(other.qp), IBV_QPS_RTS);
	CHECK_EQ(ibv_close_device(other.ctx), 0);
	CHECK_EQ(fakeverbs_live_cqs(), 0);
}

/* --------------------------------------------------- provider profiles */

/* One type-1 bind by ibv_bind_mw, signaled; the verb's return. */
static int bind_k(struct nic *k, struct ibv_mw *mw, struct ibv_mr *mr,
		 uint64_t addr, uint64_t len, unsigned int access)
{
	struct ibv_mw_bind b = { .wr_id = 9, .send_flags = IBV_SEND_SIGNALED,
				 .bind_info = { .mr = mr, .addr = addr,
						.length = len,
						.mw_access_flags = access } };

	return ibv_bind_mw(k->qp, mw, &b);
}

/* A stand-in dma-buf the double imports as a real one: a file whose
 * name says dmabuf (reg_real_dmabuf). */
static int fake_dmabuf(size_t len)
{
	int fd = memfd_create("dmabuf", MFD_CLOEXEC);

	CHECK(fd >= 0);
	CHECK_EQ(ftruncate(fd, (off_t)len), 0);
	return fd;
}

/* An unknown FAKEVERBS_PROVIDER: said, and no device opens. */
TEST(provider_unknown_refuses_to_open)
{
	int n = -1;

	setenv("FAKEVERBS_PROVIDER", "cxgb3", 1);
	CHECK(fakeverbs_provider() == NULL);
	errno = 0;
	CHECK(ibv_get_device_list(&n) == NULL);
	CHECK_EQ(errno, EINVAL);
	errno = 0;
	CHECK(fakeverbs_open() == NULL);
	CHECK_EQ(errno, EINVAL);
}

TEST(provider_default_is_mlx5)
{
	unsetenv("FAKEVERBS_PROVIDER");
	CHECK_STR(fakeverbs_provider(), "mlx5");
}

/*
 * mlx5: rdma-core providers/mlx5/qp.c mlx5_bind_mw:3700 refuses a
 * type-1 bind over an MR that is not IBV_MR_TYPE_MR with ENOTSUP; an
 * ibv_reg_dmabuf_mr MR is IBV_MR_TYPE_DMABUF_MR (libibverbs/cmd_mr.c
 * ibv_cmd_reg_dmabuf_mr:156).  libibverbs/verbs.c ibv_rereg_mr:608
 * refuses a DMA-BUF MR (EINVAL, IBV_REREG_MR_ERR_INPUT) on every
 * provider.
 */
TEST(provider_mlx5_no_type1_window_over_dmabuf)
{
	struct nic k = open_nic(0, 16, 1);
	int fd = fake_dmabuf(1 << 20);
	struct ibv_mr *d = ibv_reg_dmabuf_mr(k.pd, 0, 1 << 20, 0x10000000,
					     fd, LW | BIND);
	struct ibv_mr *m = ibv_reg_mr(k.pd, buf, sizeof(buf), LW | BIND);
	struct ibv_mw *mw = ibv_alloc_mw(k.pd, IBV_MW_TYPE_1);

	CHECK(d && m && mw);
	errno = 0;
	CHECK_EQ(bind_k(&k, mw, d, 0x10000000, 4096, RW), ENOTSUP);
	CHECK_EQ(errno, ENOTSUP);
	expect_none(k.cq);			/* nothing posted */
	CHECK_EQ(bind_k(&k, mw, m, at(0), 4096, RW), 0);	/* an MR: fine */
	expect_wc(k.cq, 9, IBV_WC_SUCCESS, IBV_WC_BIND_MW);
	errno = 0;
	CHECK_EQ(ibv_rereg_mr(d, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			      LW), IBV_REREG_MR_ERR_INPUT);
	CHECK_EQ(errno, EINVAL);
	CHECK_EQ(ibv_rereg_mr(m, IBV_REREG_MR_CHANGE_PD, k.pd, NULL, 0, 0),
		 EBUSY);			/* a window bound */
	close(fd);
}

/*
 * No zero-based type-1 window (mlx5 qp.c mlx5_bind_mw:3694, rxe
 * providers/rxe/rxe.c rxe_bind_mw:176: EINVAL), nor one over a
 * zero-based MR (mlx5_bind_mw:3705 EINVAL at the verb; rxe_mw.c
 * rxe_check_bind_mw: the bind completes in error).
 */
static void zero_based(int rxe)
{
	struct nic k = open_nic(0, 16, 1);
	struct ibv_mr *m = ibv_reg_mr(k.pd, buf, sizeof(buf), LW | BIND);
	struct ibv_mr *z = ibv_reg_mr(k.pd, buf, sizeof(buf),
				      LW | BIND | IBV_ACCESS_ZERO_BASED);
	struct ibv_mw *mw = ibv_alloc_mw(k.pd, IBV_MW_TYPE_1);

	CHECK(m && z && mw);
	CHECK_EQ(bind_k(&k, mw, m, at(0), 64, RW | IBV_ACCESS_ZERO_BASED),
		 EINVAL);
	if (!rxe) {
		CHECK_EQ(bind_k(&k, mw, z, at(0), 64, RW), EINVAL);
		expect_none(k.cq);
	} else {
		CHECK_EQ(bind_k(&k, mw, z, at(0), 64, RW), 0);
		expect_wc(k.cq, 9, IBV_WC_MW_BIND_ERR, 0);
	}
}

TEST(provider_mlx5_no_zero_based_type1)
{
	zero_based(0);
}

TEST(provider_rxe_no_zero_based_type1)
{
	setenv("FAKEVERBS_PROVIDER", "rxe", 1);
	zero_based(1);
}

/* The longest bind: mlx5 qp.c set_bind_wr:626 refuses one over 2 GiB
 * at post (EOPNOTSUPP: the UMR's KLM); rxe has no such limit. */
static void long_bind(int rxe)
{
	const size_t two = (size_t)1 << 31, len = two + 8192;
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	struct nic k = open_nic(0, 16, 1);
	struct ibv_mr *m;
	struct ibv_mw *mw = ibv_alloc_mw(k.pd, IBV_MW_TYPE_1);

	CHECK(p != MAP_FAILED && mw);
	m = ibv_reg_mr(k.pd, p, len, LW | BIND);
	CHECK(m);
	CHECK_EQ(bind_k(&k, mw, m, (uintptr_t)p, two + 1, RW),
		 rxe ? 0 : EOPNOTSUPP);
	if (rxe)
		expect_wc(k.cq, 9, IBV_WC_SUCCESS, IBV_WC_BIND_MW);
	else
		expect_none(k.cq);
	CHECK_EQ(bind_k(&k, mw, m, (uintptr_t)p, two, RW), 0);
	expect_wc(k.cq, 9, IBV_WC_SUCCESS, IBV_WC_BIND_MW);
	CHECK_EQ(fakeverbs_write(k.pd, mw->rkey, (uintptr_t)p + two - 1, "x",
				 1), 0);
	CHECK_EQ(fakeverbs_write(k.pd, mw->rkey, (uintptr_t)p + two, "x", 1),
		 -ERANGE);
}

TEST(provider_mlx5_binds_at_most_2_gib)
{
	long_bind(0);
}

TEST(provider_rxe_binds_longer)
{
	setenv("FAKEVERBS_PROVIDER", "rxe", 1);
	long_bind(1);
}

/*
 * libibverbs/verbs.h ibv_inc_rkey:2791 moves only the low 8 bits: a
 * window's rkey comes back after 256 binds (mlx5_bind_mw, rxe_bind_mw
 * both use it).
 */
TEST(provider_rkey_tag_is_8_bits)
{
	struct nic k = open_nic(0, 16, 1);
	struct ibv_mr *m = ibv_reg_mr(k.pd, buf, sizeof(buf), LW | BIND);
	struct ibv_mw *mw = ibv_alloc_mw(k.pd, IBV_MW_TYPE_1);
	uint32_t first;

	CHECK(m && mw);
	CHECK_EQ(bind_k(&k, mw, m, at(0), 64, RW), 0);
	expect_wc(k.cq, 9, IBV_WC_SUCCESS, IBV_WC_BIND_MW);
	first = mw->rkey;
	for (int i = 1; i < 256; i++) {
		CHECK_EQ(bind_k(&k, mw, m, at(0), 64, RW), 0);
		expect_wc(k.cq, 9, IBV_WC_SUCCESS, IBV_WC_BIND_MW);
		CHECK(mw->rkey != first);
		CHECK_EQ(mw->rkey >> 8, first >> 8);
	}
	CHECK_EQ(bind_k(&k, mw, m, at(0), 64, RW), 0);
	expect_wc(k.cq, 9, IBV_WC_SUCCESS, IBV_WC_BIND_MW);
	CHECK_EQ(mw->rkey, first);
}

/*
 * ibv_bind_mw(3): the window is usable once the bind completed, and a
 * bind of length 0 unbinds it when that completes: a peer reaches the
 * state of the last bind whose completion was polled.
 */
TEST(provider_bind_completes_at_its_cqe)
{
	struct nic k = open_nic(0, 16, 1);
	struct ibv_mr *m = ibv_reg_mr(k.pd, buf, sizeof(buf), LW | BIND);
	struct ibv_mw *mw = ibv_alloc_mw(k.pd, IBV_MW_TYPE_1);
	uint32_t r;

	CHECK(m && mw);
	CHECK_EQ(bind_k(&k, mw, m, at(0), 64, RW), 0);
	r = mw->rkey;
	CHECK_EQ(fakeverbs_write(k.pd, r, at(0), "x", 1), -ENOENT);
	CHECK_EQ(fakeverbs_bound_mws(), 1);
	expect_wc(k.cq, 9, IBV_WC_SUCCESS, IBV_WC_BIND_MW);
	CHECK_EQ(fakeverbs_write(k.pd, r, at(0), "x", 1), 0);
	CHECK_EQ(bind_k(&k, mw, m, 0, 0, 0), 0);		/* unbind */
	CHECK_EQ(fakeverbs_write(k.pd, r, at(0), "y", 1), 0);	/* not yet */
	CHECK_EQ(ibv_dereg_mr(m), EBUSY);	/* still bound for the NIC */
	expect_wc(k.cq, 9, IBV_WC_SUCCESS, IBV_WC_BIND_MW);
	CHECK_EQ(fakeverbs_write(k.pd, r, at(0), "z", 1), -ENOENT);
	CHECK_EQ(fakeverbs_bound_mws(), 0);
	CHECK_EQ(ibv_dereg_mr(m), 0);
}

/* rxe: no DMA-BUF import (providers/rxe/rxe.c has no reg_dmabuf_mr:
 * libibverbs/dummy_ops.c reg_dmabuf_mr:602, EOPNOTSUPP); a parent with a
 * window bound is not deregistered (rxe_mr.c rxe_dereg_mr: EINVAL). */
TEST(provider_rxe_no_dmabuf_parent_kept_while_bound)
{
	struct nic k;
	struct ibv_mr *m;
	struct ibv_mw *mw;
	int fd = fake_dmabuf(1 << 20);

	setenv("FAKEVERBS_PROVIDER", "rxe", 1);
	k = open_nic(0, 16, 1);
	errno = 0;
	CHECK(ibv_reg_dmabuf_mr(k.pd, 0, 4096, 0x10000000, fd, LW) == NULL);
	CHECK_EQ(errno, EOPNOTSUPP);
	m = ibv_reg_mr(k.pd, buf, sizeof(buf), LW | BIND);
	mw = ibv_alloc_mw(k.pd, IBV_MW_TYPE_1);
	CHECK(m && mw);
	CHECK_EQ(bind_k(&k, mw, m, at(0), 64, RW), 0);
	expect_wc(k.cq, 9, IBV_WC_SUCCESS, IBV_WC_BIND_MW);
	CHECK_EQ(ibv_dereg_mr(m), EINVAL);
	close(fd);
}

/* nomw: libibverbs/dummy_ops.c alloc_mw:62 and bind_mw:143 answer
 * EOPNOTSUPP; the device says max_mw 0, no IBV_DEVICE_MEM_WINDOW. */
TEST(provider_nomw_has_no_windows)
{
	struct ibv_device_attr da;
	struct nic k;
	struct ibv_mr *m;
	struct ibv_mw fake = { 0 };

	setenv("FAKEVERBS_PROVIDER", "nomw", 1);
	k = open_nic(0, 16, 1);
	CHECK_EQ(ibv_query_device(k.ctx, &da), 0);
	CHECK_EQ(da.max_mw, 0);
	CHECK(!(da.device_cap_flags & IBV_DEVICE_MEM_WINDOW));
	errno = 0;
	CHECK(ibv_alloc_mw(k.pd, IBV_MW_TYPE_1) == NULL);
	CHECK_EQ(errno, EOPNOTSUPP);
	m = ibv_reg_mr(k.pd, buf, sizeof(buf), LW | BIND);
	CHECK(m);
	fake.context = k.ctx;
	fake.pd = k.pd;
	fake.type = IBV_MW_TYPE_1;
	CHECK_EQ(bind_k(&k, &fake, m, at(0), 64, RW), EOPNOTSUPP);
}

/*
 * Every profile: the kernel's ib_umem_get (drivers/infiniband/core/
 * umem.c) pins every page, for writing when the access is writable
 * (ib_access_writable), and fails with EFAULT where it cannot: a hole in
 * host memory, a read-only mapping asked writable.
 */
static void unmapped_host(void)
{
	long pg = sysconf(_SC_PAGESIZE);
	char *p = mmap(NULL, (size_t)pg * 3, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct ibv_context *ctx = fakeverbs_open();
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_mr *m;

	CHECK(p != MAP_FAILED && pd);
	CHECK_EQ(munmap(p + pg, (size_t)pg), 0);
	errno = 0;
	CHECK(ibv_reg_mr(pd, p, (size_t)pg * 3, LW) == NULL);
	CHECK_EQ(errno, EFAULT);
	CHECK(ibv_reg_mr(pd, p + pg - 1, 2, 0) == NULL);	/* one byte in */
	m = ibv_reg_mr(pd, p, (size_t)pg, LW);
	CHECK(m);
	CHECK_EQ(ibv_dereg_mr(m), 0);
	CHECK_EQ(mprotect(p, (size_t)pg, PROT_READ), 0);
	errno = 0;
	CHECK(ibv_reg_mr(pd, p, 64, LW) == NULL);
	CHECK_EQ(errno, EFAULT);
	CHECK(ibv_reg_mr(pd, p, 64, BIND) == NULL);	/* writable too */
	m = ibv_reg_mr(pd, p, 64, 0);			/* read only: fine */
	CHECK(m);
	CHECK_EQ(ibv_dereg_mr(m), 0);
	CHECK_EQ(fakeverbs_live_mrs(), 0);
}

TEST(provider_all_refuse_unmapped_pages)
{
	static const char *const names[] = { "mlx5", "rxe", "nomw" };

	for (int i = 0; i < 3; i++) {
		pid_t pid = fork();
		int st;

		if (!pid) {
			setenv("FAKEVERBS_PROVIDER", names[i], 1);
			unmapped_host();
			_exit(0);
		}
		CHECK(waitpid(pid, &st, 0) == pid);
		if (!WIFEXITED(st) || WEXITSTATUS(st))
			TH_FAIL("FAKEVERBS_PROVIDER=%s", names[i]);
	}
}

/*
 * The hole of a VMM reservation of the CUDA double (loaded beside the
 * NIC as the real driver would be): refused with EFAULT; a mapping of
 * it, even before cuMemSetAccess (PROT_NONE to the CPU here, pinnable
 * by the peer-memory client), registers; without a peer-memory client
 * it does not.
 */
TEST(provider_all_refuse_a_vmm_hole_and_device_memory_without_peermem)
{
	char self[4096], path[4200];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	CUresult (*init)(unsigned int);
	CUresult (*create)(CUmemGenericAllocationHandle *, size_t,
			   const CUmemAllocationProp *, unsigned long long);
	CUresult (*reserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr,
			    unsigned long long);
	CUresult (*map)(CUdeviceptr, size_t, size_t,
			CUmemGenericAllocationHandle, unsigned long long);
	CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
		.location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 } };
	const size_t g = 2 << 20;
	CUmemGenericAllocationHandle h;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *m;
	CUdeviceptr va;
	void *lib;

	CHECK(n > 0);
	self[n] = 0;
	*strrchr(self, '/') = 0;
	snprintf(path, sizeof(path), "%s/../fake/libcuda.so.1", self);
	lib = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
	if (!lib)
		SKIP("the CUDA driver double is not built (%s)", dlerror());
	init = (CUresult (*)(unsigned int))dlsym(lib, "cuInit");
	create = (CUresult (*)(CUmemGenericAllocationHandle *, size_t,
			       const CUmemAllocationProp *,
			       unsigned long long))dlsym(lib, "cuMemCreate");
	reserve = (CUresult (*)(CUdeviceptr *, size_t, size_t, CUdeviceptr,
				unsigned long long))dlsym(lib,
							  "cuMemAddressReserve");
	map = (CUresult (*)(CUdeviceptr, size_t, size_t,
			    CUmemGenericAllocationHandle,
			    unsigned long long))dlsym(lib, "cuMemMap");
	CHECK(init && create && reserve && map);
	CHECK_EQ(init(0), CUDA_SUCCESS);
	CHECK_EQ(create(&h, g, &prop, 0), CUDA_SUCCESS);
	CHECK_EQ(reserve(&va, 3 * g, 0, 0, 0), CUDA_SUCCESS);
	CHECK_EQ(map(va, g, 0, h, 0), CUDA_SUCCESS);
	ctx = fakeverbs_open();
	pd = ibv_alloc_pd(ctx);
	m = ibv_reg_mr(pd, (void *)va, g, LW | RW);
	CHECK(m);
	CHECK_EQ(ibv_dereg_mr(m), 0);
	errno = 0;
	CHECK(ibv_reg_mr(pd, (void *)(va + g - 4096), 8192, LW) == NULL);
	CHECK_EQ(errno, EFAULT);
	CHECK(ibv_reg_mr(pd, (void *)(va + g), 4096, 0) == NULL);
	CHECK_EQ(fakeverbs_live_mrs(), 0);
	/*
	 * FAKEVERBS_PEERMEM=0, no peer-memory client: ib_umem_get
	 * (drivers/infiniband/core/umem.c) pins with pin_user_pages_fast,
	 * which cannot pin the driver's device mappings; only a peer-memory
	 * client (nvidia-peermem's nv_mem_acquire) claims them.  Device
	 * memory refuses with EFAULT, host memory still registers.
	 */
	setenv("FAKEVERBS_PEERMEM", "0", 1);
	errno = 0;
	CHECK(ibv_reg_mr(pd, (void *)va, 4096, LW) == NULL);
	CHECK_EQ(errno, EFAULT);
	m = ibv_reg_mr(pd, self, sizeof(self), LW);
	CHECK(m);
	CHECK_EQ(ibv_dereg_mr(m), 0);
	setenv("FAKEVERBS_PEERMEM", "1", 1);
	m = ibv_reg_mr(pd, (void *)va, 4096, LW);
	CHECK(m);
	CHECK_EQ(ibv_dereg_mr(m), 0);
	unsetenv("FAKEVERBS_PEERMEM");
	CHECK_EQ(fakeverbs_live_mrs(), 0);
}

TEST_MAIN()
