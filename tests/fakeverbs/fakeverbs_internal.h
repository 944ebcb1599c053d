/* SPDX-License-Identifier: MIT */
/*
 * Shared between the fake NIC's registrations (fakeverbs.c) and its
 * queues and memory windows (fakeverbs_qp.c).  One lock, fv_lock, guards
 * every object table of both; nothing holds it while sleeping (the slow
 * NIC's delays are taken outside it).
 */
#ifndef FAKEVERBS_INTERNAL_H
#define FAKEVERBS_INTERNAL_H

#include <pthread.h>
#include <stdint.h>
#include <infiniband/verbs.h>

#define FV_API __attribute__((visibility("default")))
#define FV_MAX 4096
#define FV_PINS 8

/* rdma-core's enum ibv_mr_type (infiniband/driver.h), the kinds used */
enum fv_mr_type { FV_MR_TYPE_MR, FV_MR_TYPE_DMABUF_MR = 3 };

struct fv_mr {
	struct ibv_mr mr;
	enum fv_mr_type type;
	int live;
	int compat;
	int nbound;		/* memory windows bound to it */
	unsigned int access;
	uint64_t iova;		/* what a peer names */
	uint64_t mem;		/* what the NIC reaches: the pinned memory */
	void *map;		/* dmabuf: the NIC's view of the pages */
	size_t map_len, map_delta;
	/* the GPU allocations it pinned, as they were at registration */
	int npins;
	struct { uint64_t base, size; unsigned long long id; } pin[FV_PINS];
};

extern pthread_mutex_t fv_lock;

/*
 * A provider profile (fakeverbs_provider.c, FAKEVERBS_PROVIDER): the
 * rules the fake NIC judges by where providers differ.
 */
struct fv_rules {
	const char *name;
	int mw;			/* memory windows at all */
	int dmabuf;		/* ibv_reg_dmabuf_mr imports */
	int bind_needs_mr_type;	/* type 1 over a non-IBV_MR_TYPE_MR: ENOTSUP */
	uint64_t max_bind_len;	/* longer binds: EOPNOTSUPP at post (0: none) */
	int dereg_bound_err;	/* dereg of a parent with windows bound */
};

/* The profile, or NULL (an unknown name: said once, the NIC refuses). */
const struct fv_rules *fv_rules(void);

enum fv_counter {
	C_REG_MR_1_0, C_REG_MR, C_REG_MR_IOVA, C_REG_MR_IOVA2, C_REG_DMABUF,
	C_DEREG_1_0, C_DEREG, C_REREG, C_STALE_WRITES,
	C_STALE_READS, C_ALLOC_MW, C_DEALLOC_MW, C_IBV_BIND_MW, C_BIND_MW,
	C_LOCAL_INV, C_WR_ERRORS, C_CREATE_QP, C_DESTROY_QP, C_MODIFY_QP,
	C_CREATE_CQ, C_DESTROY_CQ, C_POST_SEND, C_POST_RECV, C_POLL_CQ,
	C_QUERY_DEVICE, C_QUERY_PORT, C_MW_WRITES, C_MW_READS, C_CQ_OVERRUNS,
	C_COUNT
};

unsigned long fv_count(enum fv_counter c);
int fv_debug(void);
void fv_nic_wait(const char *var);
const struct ibv_device *fv_device_of(const struct ibv_context *ctx);
/* Is the env variable var "1" or the name of ctx's NIC? */
int fv_env_nic(const char *var, const struct ibv_context *ctx);

/* fakeverbs.c, under fv_lock */
struct fv_mr *fv_find_mr_locked(const struct ibv_mr *mr);
int fv_mr_busy_pd_locked(const struct ibv_pd *pd);

/* fakeverbs_qp.c */
struct ibv_context *fv_ctx_new(struct ibv_device *dev);
void fv_ctx_free(struct ibv_context *ctx);
/* Destroys the context's QPs, memory windows (before its MRs go) ... */
void fv_ctx_destroy_windows(struct ibv_context *ctx);
/* ... and, after its MRs, its CQs. */
void fv_ctx_destroy_cqs(struct ibv_context *ctx);
int fv_pd_busy_locked(const struct ibv_pd *pd);
/*
 * A peer's access through a memory window's rkey: 0 with the parent MR
 * and the offset into it in *m and *at; -ENOENT (no such bound window,
 * or an old tag), -EPERM, -EACCES, -ERANGE.
 */
int fv_mw_resolve_locked(const struct ibv_pd *pd, uint32_t rkey,
			 uint64_t raddr, uint64_t len, unsigned int need,
			 struct fv_mr **m, uint64_t *at);

#endif
