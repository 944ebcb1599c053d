// SPDX-License-Identifier: MIT
/*
 * The fake NIC's provider profiles: which provider's rules it judges by
 * (FAKEVERBS_PROVIDER=mlx5|rxe|nomw, default mlx5), one row per profile.
 * Each rule names where the provider's own source states it (rdma-core
 * at 691953d, the kernel's drivers/infiniband); the selftest has a case
 * per rule (tests/fakeverbs/selftest.c, "provider_*").
 *
 * An unknown name is said on stderr once and the NIC refuses to open
 * (ibv_get_device_list and ibv_open_device fail with EINVAL): a test
 * that names a profile the double lacks must not run on another one.
 *
 * Rules every profile shares are not rows: a registration over a page
 * nothing is mapped at fails with EFAULT (fakeverbs.c, fv_mapped: the
 * kernel's ib_umem_get pins the pages and gives up there), ibv_rereg_mr
 * of a DMA-BUF MR fails with EINVAL (libibverbs/verbs.c ibv_rereg_mr:608
 * refuses every mr_type but IBV_MR_TYPE_MR), an rkey's tag is its low 8
 * bits (libibverbs/verbs.h ibv_inc_rkey:2791), and a bind takes effect
 * for a peer only once its completion was polled (ibv_bind_mw(3): the
 * window may be used after the bind completed; fakeverbs_qp.c).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fakeverbs.h"
#include "fakeverbs_internal.h"

static const struct fv_rules rules[] = {
	{
		/*
		 * ConnectX (providers/mlx5): windows of both types
		 * (mlx5_alloc_mw, verbs.c:939) and DMA-BUF imports
		 * (mlx5_reg_dmabuf_mr, verbs.c:753).  A type-1 bind
		 * (qp.c mlx5_bind_mw:3686) refuses zero-based access
		 * (:3694, EINVAL), a parent that is not IBV_MR_TYPE_MR
		 * (:3700, ENOTSUP: a DMA-BUF MR is IBV_MR_TYPE_DMABUF_MR,
		 * libibverbs/cmd_mr.c:156) and a zero-based parent (:3705,
		 * EINVAL); any bind longer than 2 GiB is refused at post
		 * (qp.c set_bind_wr:626, the UMR's KLM reaches 2 GiB,
		 * EOPNOTSUPP).  The parent must carry MW_BIND, and a
		 * window with remote write or atomic needs LOCAL_WRITE on
		 * it (set_bind_wr:607-622): the HCA completes such a bind
		 * in error.
		 */
		.name = "mlx5", .mw = 1, .dmabuf = 1,
		.bind_needs_mr_type = 1,
		.max_bind_len = 1ULL << 31,
		.dereg_bound_err = EBUSY,
	},
	{
		/*
		 * Soft-RoCE (providers/rxe with the kernel's
		 * drivers/infiniband/sw/rxe): windows of both types
		 * (rxe.c rxe_alloc_mw:132; rxe_mw.c rxe_alloc_mw); no
		 * DMA-BUF import (rxe.c's ops table has no reg_dmabuf_mr,
		 * so libibverbs' dummy_ops.c reg_dmabuf_mr:602 answers
		 * EOPNOTSUPP).  A type-1 bind refuses zero-based access
		 * (rxe.c rxe_bind_mw:176, EINVAL); the kernel's
		 * rxe_mw.c rxe_check_bind_mw completes in error a bind on
		 * a zero-based parent, one without MW_BIND (C10-73), a
		 * writable window on a parent without LOCAL_WRITE
		 * (C10-74), one outside the parent (C10-75); any MR type
		 * binds and no length limit applies.  A parent with
		 * windows bound cannot be deregistered: EINVAL (rxe_mr.c
		 * rxe_dereg_mr, IBA 10.6.7.2.6).
		 */
		.name = "rxe", .mw = 1, .dmabuf = 0,
		.bind_needs_mr_type = 0,
		.max_bind_len = 0,
		.dereg_bound_err = EINVAL,
	},
	{
		/*
		 * A NIC without memory windows (EFA, for one): the
		 * provider has no alloc_mw/bind_mw, so libibverbs'
		 * dummy_ops.c alloc_mw:62 fails EOPNOTSUPP and bind_mw:143
		 * returns it; ibv_query_device says max_mw 0 and no
		 * IBV_DEVICE_MEM_WINDOW.  DMA-BUF imports work.
		 */
		.name = "nomw", .mw = 0, .dmabuf = 1,
		.bind_needs_mr_type = 0,
		.max_bind_len = 0,
		.dereg_bound_err = EBUSY,
	},
};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static const struct fv_rules *chosen;

static void choose(void)
{
	const char *e = getenv("FAKEVERBS_PROVIDER");

	if (!e || !*e)
		e = "mlx5";
	for (size_t i = 0; i < sizeof(rules) / sizeof(rules[0]); i++)
		if (!strcmp(e, rules[i].name))
			chosen = &rules[i];
	if (!chosen)
		fprintf(stderr, "fakeverbs: FAKEVERBS_PROVIDER=%s: no such provider profile (mlx5, rxe, nomw); the fake NIC refuses to open\n",
			e);
}

const struct fv_rules *fv_rules(void)
{
	pthread_once(&once, choose);
	return chosen;
}

FV_API const char *fakeverbs_provider(void)
{
	const struct fv_rules *r = fv_rules();

	return r ? r->name : NULL;
}
