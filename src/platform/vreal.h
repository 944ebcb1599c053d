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
/* An entry point gdrhook does not hook, or NULL. */
void *gh_vreal_sym(const char *name, const char *version);

#endif
