/* SPDX-License-Identifier: MIT */
/*
 * An RC QP on port 1 connected to another of the same port, or to itself:
 * the bring-up the test, bench and lab programs share.  Header only (the
 * lab builds its programs with cc alone); included as "verbs_qp.h" with
 * -Itests.
 */
#ifndef TESTS_VERBS_QP_H
#define TESTS_VERBS_QP_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <infiniband/verbs.h>

/* How a QP of the port reaches another, and what it grants. */
struct vqp_path {
	enum ibv_mtu mtu;
	uint16_t dlid;
	int global;		/* addressed by GID (RoCE) */
	union ibv_gid gid;
	unsigned int access;	/* INIT's qp_access_flags */
	uint8_t timeout;	/* RTS: 4.096 us << timeout per try; 0: 14 */
	unsigned int reset_tries; /* see vqp_connect; 0: none */
};

/* p for port 1 of ctx: its MTU, its LID, on Ethernet its GID 0.  0 or an
 * errno. */
static inline int vqp_path_query(struct ibv_context *ctx, unsigned int access,
				 struct vqp_path *p)
{
	struct ibv_port_attr pa;

	memset(p, 0, sizeof(*p));
	if (ibv_query_port(ctx, 1, &pa))
		return errno ? errno : EIO;
	p->mtu = pa.active_mtu ? pa.active_mtu : IBV_MTU_1024;
	p->dlid = pa.lid;
	p->access = access;
	if (pa.link_layer == IBV_LINK_LAYER_ETHERNET) {
		if (ibv_query_gid(ctx, 1, 0, &p->gid))
			return errno ? errno : EIO;
		p->global = 1;
	}
	return 0;
}

/* An RC QP with one SGE per WR, both queues on cq; NULL and errno. */
static inline struct ibv_qp *vqp_create(struct ibv_pd *pd, struct ibv_cq *cq,
					uint32_t max_send_wr,
					uint32_t max_recv_wr, int sig_all)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.sq_sig_all = sig_all,
		.cap = { .max_send_wr = max_send_wr,
			 .max_recv_wr = max_recv_wr,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};

	return ibv_create_qp(pd, &ia);
}

/* One transition to st (RTR: towards QP number dest); ibv_modify_qp's
 * result. */
static inline int vqp_to(struct ibv_qp *qp, enum ibv_qp_state st,
			 const struct vqp_path *p, uint32_t dest)
{
	struct ibv_qp_attr a;
	int mask = IBV_QP_STATE;

	memset(&a, 0, sizeof(a));
	a.qp_state = st;
	switch (st) {
	case IBV_QPS_INIT:
		a.port_num = 1;
		a.qp_access_flags = p->access;
		mask |= IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
		break;
	case IBV_QPS_RTR:
		a.path_mtu = p->mtu;
		a.dest_qp_num = dest;
		a.max_dest_rd_atomic = 1;
		a.min_rnr_timer = 12;
		a.ah_attr.port_num = 1;
		a.ah_attr.dlid = p->dlid;
		if (p->global) {
			a.ah_attr.is_global = 1;
			a.ah_attr.grh.dgid = p->gid;
			a.ah_attr.grh.hop_limit = 1;
		}
		mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
			IBV_QP_MIN_RNR_TIMER;
		break;
	case IBV_QPS_RTS:
		a.timeout = p->timeout ? p->timeout : 14;
		a.retry_cnt = 7;
		a.rnr_retry = 7;
		a.max_rd_atomic = 1;
		mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC;
		break;
	default:
		break;
	}
	return ibv_modify_qp(qp, &a, mask);
}

/*
 * RESET -> INIT -> RTR towards QP number dest (qp's own: a loopback) ->
 * RTS, from any state: a QP in error is reconnected by the same call.
 * 0, or the errno of the step that failed (*step_p names it).
 *
 * After a refused write soft-RoCE's own tasks may still move the QP to
 * ERR after our RESET (seen on 6.12 under TCG: "rxe_modify_qp: returned
 * err = -22" in dmesg); the INIT then fails with EINVAL.  With
 * p->reset_tries it resets again, every 10 ms, up to that many times, and
 * says so.
 */
static inline int vqp_connect(struct ibv_qp *qp, const struct vqp_path *p,
			      uint32_t dest, const char **step_p)
{
	unsigned int tries;
	int rc;

	for (tries = 0;; tries++) {
		*step_p = "RESET";
		rc = vqp_to(qp, IBV_QPS_RESET, p, 0);
		if (rc)
			return rc;
		*step_p = "INIT";
		rc = vqp_to(qp, IBV_QPS_INIT, p, 0);
		if (!rc)
			break;
		if (rc != EINVAL || tries >= p->reset_tries)
			return rc;
		usleep(10000);
	}
	if (tries)
		printf("  info: QP INIT refused %u time(s) after RESET (a late error): reset again\n",
		       tries);
	*step_p = "RTR";
	rc = vqp_to(qp, IBV_QPS_RTR, p, dest);
	if (rc)
		return rc;
	*step_p = "RTS";
	return vqp_to(qp, IBV_QPS_RTS, p, 0);
}

#endif
