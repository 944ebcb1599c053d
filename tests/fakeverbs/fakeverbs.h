/* SPDX-License-Identifier: MIT */
/*
 * Test hooks of the fake libibverbs (tests/fakeverbs).  A test that
 * dlopen()s the double looks these up with dlsym on its handle.
 */
#ifndef FAKEVERBS_H
#define FAKEVERBS_H

#include <stddef.h>
#include <stdint.h>

struct ibv_context;
struct ibv_mr;
struct ibv_pd;
struct ibv_qp;

/* The provider profile the NIC judges by (FAKEVERBS_PROVIDER: "mlx5",
 * the default, "rxe", "nomw"), or NULL for an unknown name (then every
 * device open fails with EINVAL). */
const char *fakeverbs_provider(void);
/* A device context to allocate PDs from (ibv_alloc_pd). */
struct ibv_context *fakeverbs_open(void);
/* A context of NIC n (0: fakenic0, the listed one; 1: fakenic1). */
struct ibv_context *fakeverbs_open_nic(int n);
/* Calls of an entry point: "ibv_reg_mr", "ibv_reg_mr@IBVERBS_1.0", ...,
 * "ibv_alloc_mw", "ibv_dealloc_mw", "ibv_bind_mw" (type 1, refused),
 * "ibv_create_qp", "ibv_destroy_qp", "ibv_modify_qp", "ibv_create_cq",
 * "ibv_destroy_cq", "ibv_post_send", "ibv_post_recv", "ibv_poll_cq",
 * "ibv_query_device", "ibv_query_port"; work requests run: "bind_mw",
 * "local_inv", "wr_errors" (those completing with an error); peer
 * accesses: "stale_writes", "stale_reads" (through a stale
 * registration), "mw_writes", "mw_reads" (through a window);
 * "cq_overruns" (completions lost to a full CQ). */
unsigned long fakeverbs_calls(const char *name);
int fakeverbs_live_mrs(void);
/* Live registrations whose memory was freed since (the NIC can still
 * reach memory the driver may have reused). */
int fakeverbs_stale_mrs(void);
int fakeverbs_is_mr(const struct ibv_mr *mr);
/* RDMA write by a peer: 0, -ENOENT, -EPERM (other PD), -EACCES, -ERANGE,
 * -EFAULT (nothing mapped where it lands). */
int fakeverbs_write(struct ibv_pd *pd, uint32_t rkey, uint64_t raddr,
		    const void *src, size_t len);
/* An RDMA read by a peer (IBV_ACCESS_REMOTE_READ); as fakeverbs_write. */
int fakeverbs_read(struct ibv_pd *pd, uint32_t rkey, uint64_t raddr,
		   void *dst, size_t len);
/*
 * A window's rkey works for fakeverbs_write/read while bound with that
 * rkey (an old tag or an invalidated one: -ENOENT), for the window's PD,
 * with its access, within its range; it reaches the parent MR's memory.
 */
int fakeverbs_live_mws(void);
/* Windows bound now (the NIC can reach memory through them). */
int fakeverbs_bound_mws(void);
/* QPs of context, or of every context (NULL). */
int fakeverbs_live_qps(const struct ibv_context *context);
int fakeverbs_live_cqs(void);
/* The NIC's state of qp (enum ibv_qp_state; it goes to IBV_QPS_ERR by
 * itself on a failed work request), -1 if not a live QP. */
int fakeverbs_qp_state(const struct ibv_qp *qp);
/* Nanoseconds a cost profile (FAKEVERBS_COST, fakeverbs_cost.c) charged
 * so far in this process, and its name (NULL: none, nothing charged). */
unsigned long long fakeverbs_modelled_ns(void);
const char *fakeverbs_cost_profile(void);

#endif
