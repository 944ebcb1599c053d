/* SPDX-License-Identifier: MIT */
/*
 * The real libibverbs entry points, never our wrappers: what the pin
 * backends, the registration cache and the verbs wrappers call to reach
 * the NIC.  Below all of them (src/platform/vreal.c); resolved by resolve.c.
 */
#ifndef GH_VREAL_H
#define GH_VREAL_H

#include <stddef.h>
#include <stdint.h>

struct ibv_context;
struct ibv_pd;
struct ibv_mr;

struct ibv_mr *gh_vreal_reg_mr(struct ibv_pd *pd, void *addr, size_t length,
			       int access);
struct ibv_mr *gh_vreal_reg_mr_iova(struct ibv_pd *pd, void *addr,
				    size_t length, uint64_t iova, int access);
struct ibv_mr *gh_vreal_reg_mr_iova2(struct ibv_pd *pd, void *addr,
				     size_t length, uint64_t iova,
				     unsigned int access);
struct ibv_mr *gh_vreal_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset,
				      size_t length, uint64_t iova, int fd,
				      int access);
/* 0 or -errno (libibverbs returns a positive errno). */
int gh_vreal_dereg_mr(struct ibv_mr *mr);
/* ... and exactly what libibverbs returned. */
int gh_vreal_dereg_mr_raw(struct ibv_mr *mr);
/* What libibverbs returns (0, positive errno, IBV_REREG_MR_ERR_*). */
int gh_vreal_rereg_mr(struct ibv_mr *mr, int flags, struct ibv_pd *pd,
		      void *addr, size_t length, int access);
int gh_vreal_dealloc_pd(struct ibv_pd *pd);
int gh_vreal_close_device(struct ibv_context *ctx);
int gh_vreal_have(const char *name);	/* 1 if libibverbs has it */

/*
 * Every other libibverbs function gdrhook calls (the memory windows of
 * src/pin/mwin.c, the device probes of gdrhook-info), with the four hooked
 * ones they need beside them (the same entry points as the calls above).
 * Resolved once, from the library that provides the hooked ones; NULL
 * while libibverbs is not in the process (never loads it).  A member is
 * NULL where the library lacks it.
 */
struct ibv_device;
struct ibv_device_attr;
struct _compat_ibv_port_attr;
struct ibv_comp_channel;
struct ibv_cq;
struct ibv_qp;
struct ibv_qp_init_attr;
struct ibv_qp_attr;
union ibv_gid;

struct gh_verbs {
	struct ibv_device **(*get_device_list)(int *num);
	void (*free_device_list)(struct ibv_device **list);
	const char *(*get_device_name)(struct ibv_device *dev);
	struct ibv_context *(*open_device)(struct ibv_device *dev);
	int (*close_device)(struct ibv_context *ctx);
	int (*query_device)(struct ibv_context *ctx,
			    struct ibv_device_attr *attr);
	/* the exported one: the old layout (verbs.h's inline takes more) */
	int (*query_port)(struct ibv_context *ctx, uint8_t port,
			  struct _compat_ibv_port_attr *attr);
	int (*query_gid)(struct ibv_context *ctx, uint8_t port, int index,
			 union ibv_gid *gid);
	struct ibv_pd *(*alloc_pd)(struct ibv_context *ctx);
	int (*dealloc_pd)(struct ibv_pd *pd);
	struct ibv_mr *(*reg_dmabuf_mr)(struct ibv_pd *pd, uint64_t offset,
					size_t length, uint64_t iova, int fd,
					int access);
	int (*dereg_mr)(struct ibv_mr *mr);
	struct ibv_cq *(*create_cq)(struct ibv_context *ctx, int cqe,
				    void *cq_context,
				    struct ibv_comp_channel *channel,
				    int comp_vector);
	int (*destroy_cq)(struct ibv_cq *cq);
	struct ibv_qp *(*create_qp)(struct ibv_pd *pd,
				    struct ibv_qp_init_attr *attr);
	int (*modify_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr,
			 int mask);
	int (*destroy_qp)(struct ibv_qp *qp);
};
const struct gh_verbs *gh_vreal_verbs(void);

/*
 * gdrhook-info's libibverbs: the program's, else libibverbs.so.1 loaded
 * now and kept (gh_vreal_have and the backend probe look for it there).
 * The table, or NULL: no libibverbs.so.1 (*loaded_p 0), or one without
 * ibv_dereg_mr (*loaded_p 1).
 */
const struct gh_verbs *gh_vreal_load(int *loaded_p);

#endif
