/* SPDX-License-Identifier: MIT */
/*
 * RESET then INIT for a QP of the regcache lab programs (rdma_realloc.c,
 * vmm_span.c), also when they reconnect after a refused write.
 */
#ifndef REGCACHE_QP_RESET_H
#define REGCACHE_QP_RESET_H

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <infiniband/verbs.h>

/*
 * 0, or the errno of the step that failed (*step: "RESET" or "INIT").
 * After a refused write soft-RoCE's own tasks may still move the QP to ERR
 * after our RESET (seen on 6.12 under TCG: "rxe_modify_qp: returned err =
 * -22" in dmesg); the INIT then fails with EINVAL.  Reset again, every
 * 10 ms for up to 10 s, and say so.
 */
static inline int qp_reset_init(struct ibv_qp *qp, unsigned int access,
				const char **step)
{
	struct ibv_qp_attr a;
	int rc, tries;

	for (tries = 0;; tries++) {
		memset(&a, 0, sizeof(a));
		a.qp_state = IBV_QPS_RESET;
		*step = "RESET";
		rc = ibv_modify_qp(qp, &a, IBV_QP_STATE);
		if (rc)
			return rc;
		memset(&a, 0, sizeof(a));
		a.qp_state = IBV_QPS_INIT;
		a.port_num = 1;
		a.pkey_index = 0;
		a.qp_access_flags = access;
		*step = "INIT";
		rc = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
				   IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
		if (!rc) {
			if (tries)
				printf("  info: QP INIT refused %d time(s) "
				       "after RESET (a late error): reset "
				       "again\n", tries);
			return 0;
		}
		if (rc != EINVAL || tries == 1000)
			return rc;
		usleep(10000);
	}
}

#endif
