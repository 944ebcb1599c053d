/* SPDX-License-Identifier: MIT */
/*
 * The fake NIC's cost profiles (fakeverbs_cost.c): FAKEVERBS_COST=<name>
 * charges each registration, deregistration, window allocation, bind and
 * unbind the time the named profile gives it, to a per-process counter
 * of modelled nanoseconds (fakeverbs_modelled_ns()); nothing is slept
 * unless FAKEVERBS_COST_SLEEP=1.  Unset: nothing is charged.
 */
#ifndef FAKEVERBS_COST_H
#define FAKEVERBS_COST_H

#include <stddef.h>
#include <stdint.h>

struct fv_mr;
struct ibv_send_wr;

/* What the NIC (and the GPU driver under it) does, one row each. */
enum fv_cost_op {
	FV_COST_REG_HOST,	/* ibv_reg_mr of host memory: pin + mkey */
	FV_COST_DEREG_HOST,	/* its ibv_dereg_mr: unpin + mkey destroy */
	FV_COST_REG_GPU,	/* ibv_reg_mr of GPU memory (peer memory) */
	FV_COST_DEREG_GPU,
	FV_COST_REG_DMABUF,	/* ibv_reg_dmabuf_mr: attach + map + mkey */
	FV_COST_DEREG_DMABUF,
	FV_COST_ALLOC_MW,	/* ibv_alloc_mw */
	FV_COST_DEALLOC_MW,
	FV_COST_BIND,		/* a window bound, to its CQE */
	FV_COST_UNBIND,		/* a window unbound or invalidated, to its CQE */
	FV_COST_NOPS
};

/* One row of a profile, as fakeverbs_cost.c's table and tests/hw/calibrate
 * print it: the time of one op of len bytes is ns + ns_per_mib * len /
 * MiB.  lo/hi: the ends a constant with no public source is swept over
 * (FAKEVERBS_COST_END=lo|hi); equal to the figure where it is sourced. */
struct fv_cost_row {
	const char *profile;
	enum fv_cost_op op;
	uint64_t ns, ns_per_mib;
	uint64_t ns_lo, ns_hi, mib_lo, mib_hi;
	const char *source;
};

/* The op's name as the table spells it (tests/hw/calibrate prints rows). */
static inline const char *fv_cost_op_name(enum fv_cost_op op)
{
	static const char *const names[FV_COST_NOPS] = {
		"FV_COST_REG_HOST", "FV_COST_DEREG_HOST", "FV_COST_REG_GPU",
		"FV_COST_DEREG_GPU", "FV_COST_REG_DMABUF",
		"FV_COST_DEREG_DMABUF", "FV_COST_ALLOC_MW",
		"FV_COST_DEALLOC_MW", "FV_COST_BIND", "FV_COST_UNBIND",
	};

	return op < FV_COST_NOPS ? names[op] : "?";
}

/* Charges op on len bytes to the modelled clock (and sleeps it with
 * FAKEVERBS_COST_SLEEP=1); nothing without a profile.  Never called with
 * fv_lock held when sleeping matters: call sites are outside it. */
void fv_cost_charge(enum fv_cost_op op, uint64_t len);
/* A registration just made, or about to be destroyed: its kind (host,
 * GPU, DMA-BUF) read from the MR. */
void fv_cost_reg(const struct fv_mr *m);
void fv_cost_dereg(const struct fv_mr *m);
/* A bind or invalidate work request the NIC runs now. */
void fv_cost_wr(const struct ibv_send_wr *wr);

/* Test hook: the table of every profile, *n rows (tests/bench prints the
 * constants it ran with). */
const struct fv_cost_row *fakeverbs_cost_table(size_t *n);

#endif
