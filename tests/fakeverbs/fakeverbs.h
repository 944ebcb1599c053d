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

/* A device context to allocate PDs from (ibv_alloc_pd). */
struct ibv_context *fakeverbs_open(void);
/* A context of NIC n (0: fakenic0, the listed one; 1: fakenic1). */
struct ibv_context *fakeverbs_open_nic(int n);
/* Calls of an entry point: "ibv_reg_mr", "ibv_reg_mr@IBVERBS_1.0", ...,
 * and "stale_writes" (RDMA writes through a stale registration). */
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

#endif
