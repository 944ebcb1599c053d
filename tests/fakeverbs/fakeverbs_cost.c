// SPDX-License-Identifier: MIT
/*
 * Cost profiles of the fake NIC: FAKEVERBS_COST=<profile> charges every
 * registration, deregistration, window allocation, bind and unbind the
 * time a real NIC and GPU driver would take, from the one table below,
 * to a per-process counter of modelled nanoseconds
 * (fakeverbs_modelled_ns()).  The time is accounted, not slept, so a
 * benchmark of 4 GiB registrations runs in seconds; FAKEVERBS_COST_SLEEP=1
 * also sleeps it (a program that measures wall time, tests/hw/calibrate,
 * then sees the profile).  FAKEVERBS_COST_END=lo|hi takes the ends of the
 * ranges instead of the figures (a constant with no public source is
 * swept over its range; sourced ones have lo = hi = the figure, or the
 * spread of the measurements quoted).  Unset: nothing is charged, every
 * test keeps its speed.
 *
 * Not charged: ibv_rereg_mr (the model has no figure for it), QPs and CQs
 * (made once per PD by the shim and the program alike).  A registration
 * the double refuses after making its MR (a page it cannot pin) is
 * charged its deregistration only.
 *
 * The calibration program (tests/hw/calibrate) prints rows in exactly
 * this table's format, measured on a real NIC and GPU: paste them here
 * as a new profile.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <infiniband/verbs.h>

#include "fakeverbs.h"
#include "fakeverbs_cost.h"
#include "fakeverbs_internal.h"

/*
 * The constants, ns and ns per MiB, with their sources.
 *   profile, op, ns, ns/MiB, ns lo, ns hi, ns/MiB lo, ns/MiB hi, source
 * cx7-h100: a ConnectX-7 with an H100 (peer memory = nvidia-peermem).
 * No public source measures a ConnectX registration of GPU memory by
 * size, a DMA-BUF import, or a bind: the GPU pin is gdrcopy's measured
 * one, the rest is swept.  ucx: UCX's shipped registration model (one
 * formula for every memory type) with cx7-h100's windows, the upper
 * bound the research note gives at large sizes.
 */
static const struct fv_cost_row fv_cost_table[] = {
	{ "cx7-h100", FV_COST_REG_HOST, 16000, 62915, 16000, 16000, 62915, 62915,
	  "openucx/ucx src/uct/ib/base/ib_md.c:56-60 (UCX's default: 16 us + 0.06 ns/B)" },
	{ "cx7-h100", FV_COST_DEREG_HOST, 10000, 24600, 5000, 20000, 24600, 24600,
	  "per MiB: kvcache-ai/Mooncake PR #855 (500 GB deregistered in 11.75 s, sequential); fixed: no public source: swept over [5, 20] us" },
	{ "cx7-h100", FV_COST_REG_GPU, 70000, 3300, 41600, 70000, 3300, 3300,
	  "GPU pin: NVIDIA/gdrcopy PR #129 (V100: 70 us at 64 KiB and 1 MiB, 119 us at 16 MiB: 3.3 us/MiB); lo: T4 41.6 us, bottlerocket-os/bottlerocket-kernel-kit PR #462; the NIC's mkey part unpublished, not added" },
	{ "cx7-h100", FV_COST_DEREG_GPU, 40000, 0, 25400, 63000, 0, 0,
	  "GPU unpin: NVIDIA/gdrcopy PR #129 (V100 38-63 us), bottlerocket-os/bottlerocket-kernel-kit PR #462 (T4 25.4 us)" },
	{ "cx7-h100", FV_COST_REG_DMABUF, 43000, 1650, 16000, 70000, 0, 3300,
	  "no public source: swept over [16, 70] us + [0, 3.3] us/MiB (UCX's fixed cost .. a full GPU pin, gdrcopy PR #129); figure: the middle" },
	{ "cx7-h100", FV_COST_DEREG_DMABUF, 25000, 0, 10000, 40000, 0, 0,
	  "no public source: swept over [10, 40] us (an mkey destroy .. a GPU unpin, gdrcopy PR #129); figure: the middle" },
	{ "cx7-h100", FV_COST_ALLOC_MW, 10000, 0, 2000, 20000, 0, 0,
	  "no public source: swept over [2, 20] us (one kernel call creating an mkey)" },
	{ "cx7-h100", FV_COST_DEALLOC_MW, 10000, 0, 2000, 20000, 0, 0,
	  "no public source: swept over [2, 20] us (one kernel call destroying an mkey)" },
	{ "cx7-h100", FV_COST_BIND, 2200, 0, 1100, 3300, 0, 0,
	  "no public source: swept over [1.1, 3.3] us: one UMR WQE (rdma-core providers/mlx5/qp.c:3686-3727) posted, 0.1-0.3 us, run and its CQE polled, 1-3 us (ibv_bind_mw(3): the rkey is usable at the CQE)" },
	{ "cx7-h100", FV_COST_UNBIND, 2200, 0, 1100, 3300, 0, 0,
	  "no public source: swept over [1.1, 3.3] us: a zero-length bind (ibv_alloc_mw(3)), the same UMR WQE to its CQE" },

	{ "ucx", FV_COST_REG_HOST, 16000, 62915, 16000, 16000, 62915, 62915,
	  "openucx/ucx src/uct/ib/base/ib_md.c:56-60" },
	{ "ucx", FV_COST_DEREG_HOST, 0, 0, 0, 0, 0, 0,
	  "openucx/ucx src/uct/ib/base/ib_md.c:56-60 (no deregistration term)" },
	{ "ucx", FV_COST_REG_GPU, 16000, 62915, 16000, 16000, 62915, 62915,
	  "openucx/ucx src/uct/ib/base/ib_md.c:56-60 (every memory type)" },
	{ "ucx", FV_COST_DEREG_GPU, 0, 0, 0, 0, 0, 0,
	  "openucx/ucx src/uct/ib/base/ib_md.c:56-60 (no deregistration term)" },
	{ "ucx", FV_COST_REG_DMABUF, 16000, 62915, 16000, 16000, 62915, 62915,
	  "openucx/ucx src/uct/ib/base/ib_md.c:56-60 (every memory type)" },
	{ "ucx", FV_COST_DEREG_DMABUF, 0, 0, 0, 0, 0, 0,
	  "openucx/ucx src/uct/ib/base/ib_md.c:56-60 (no deregistration term)" },
	{ "ucx", FV_COST_ALLOC_MW, 10000, 0, 2000, 20000, 0, 0,
	  "no public source: swept over [2, 20] us (as cx7-h100)" },
	{ "ucx", FV_COST_DEALLOC_MW, 10000, 0, 2000, 20000, 0, 0,
	  "no public source: swept over [2, 20] us (as cx7-h100)" },
	{ "ucx", FV_COST_BIND, 2200, 0, 1100, 3300, 0, 0,
	  "no public source: swept over [1.1, 3.3] us (as cx7-h100)" },
	{ "ucx", FV_COST_UNBIND, 2200, 0, 1100, 3300, 0, 0,
	  "no public source: swept over [1.1, 3.3] us (as cx7-h100)" },
};

#define NROWS (sizeof(fv_cost_table) / sizeof(fv_cost_table[0]))

/* The chosen profile, once: per op its (ns, ns/MiB), and whether on. */
static struct {
	int on, sleep;
	const char *name;
	uint64_t ns[FV_COST_NOPS], per_mib[FV_COST_NOPS];
} prof;
static pthread_once_t prof_once = PTHREAD_ONCE_INIT;
static uint64_t modelled;	/* ns, atomically added */

/* A profile that is named but does not exist would charge nothing and a
 * benchmark would print a model of no cost: refuse at once instead. */
static void prof_load(void)
{
	const char *name = getenv("FAKEVERBS_COST");
	const char *end = getenv("FAKEVERBS_COST_END");
	const char *sl = getenv("FAKEVERBS_COST_SLEEP");
	int lo = end && !strcmp(end, "lo"), hi = end && !strcmp(end, "hi");
	unsigned int seen = 0;

	if (!name || !*name || !strcmp(name, "none"))
		return;
	if (end && *end && !lo && !hi) {
		fprintf(stderr, "fakeverbs: FAKEVERBS_COST_END=%s: lo or hi\n", end);
		abort();
	}
	for (size_t i = 0; i < NROWS; i++) {
		const struct fv_cost_row *r = &fv_cost_table[i];

		if (strcmp(r->profile, name))
			continue;
		prof.ns[r->op] = lo ? r->ns_lo : hi ? r->ns_hi : r->ns;
		prof.per_mib[r->op] = lo ? r->mib_lo : hi ? r->mib_hi :
				      r->ns_per_mib;
		prof.name = r->profile;
		seen |= 1u << r->op;
	}
	if (seen != (1u << FV_COST_NOPS) - 1) {
		fprintf(stderr, "fakeverbs: FAKEVERBS_COST=%s: %s (profiles: cx7-h100, ucx)\n",
			name, seen ? "a row is missing" : "no such profile");
		abort();
	}
	prof.sleep = sl && !strcmp(sl, "1");
	prof.on = 1;
}

static uint64_t mono_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* FAKEVERBS_COST_SLEEP: a wait of ns.  Under a millisecond it spins: a
 * sleep overshoots by the timer slack (50-80 us on a VM), more than a
 * bind costs. */
static void take_time(uint64_t ns)
{
	uint64_t end = mono_ns() + ns;
	struct timespec t = { (time_t)(ns / 1000000000ull),
			      (long)(ns % 1000000000ull) };

	if (ns < 1000000) {
		while (mono_ns() < end)
			;
		return;
	}
	while (nanosleep(&t, &t) && errno == EINTR)
		;
}

void fv_cost_charge(enum fv_cost_op op, uint64_t len)
{
	uint64_t ns;

	pthread_once(&prof_once, prof_load);
	if (!prof.on || op >= FV_COST_NOPS)
		return;
	/* per MiB in 128-bit: 4 GiB x 63 us/MiB fits, larger need not wrap */
	ns = prof.ns[op] + (uint64_t)((unsigned __int128)prof.per_mib[op] *
				      len >> 20);
	__atomic_add_fetch(&modelled, ns, __ATOMIC_RELAXED);
	if (prof.sleep)
		take_time(ns);
}

static enum fv_cost_op kind(const struct fv_mr *m, int dereg)
{
	if (m->map)
		return dereg ? FV_COST_DEREG_DMABUF : FV_COST_REG_DMABUF;
	if (m->npins)
		return dereg ? FV_COST_DEREG_GPU : FV_COST_REG_GPU;
	return dereg ? FV_COST_DEREG_HOST : FV_COST_REG_HOST;
}

void fv_cost_reg(const struct fv_mr *m)
{
	fv_cost_charge(kind(m, 0), m->mr.length);
}

void fv_cost_dereg(const struct fv_mr *m)
{
	fv_cost_charge(kind(m, 1), m->mr.length);
}

void fv_cost_wr(const struct ibv_send_wr *wr)
{
	if (wr->opcode == IBV_WR_BIND_MW)
		fv_cost_charge(wr->bind_mw.bind_info.length ? FV_COST_BIND :
			       FV_COST_UNBIND, 0);
	else if (wr->opcode == IBV_WR_LOCAL_INV)
		fv_cost_charge(FV_COST_UNBIND, 0);
}

FV_API unsigned long long fakeverbs_modelled_ns(void)
{
	return __atomic_load_n(&modelled, __ATOMIC_RELAXED);
}

FV_API const char *fakeverbs_cost_profile(void)
{
	pthread_once(&prof_once, prof_load);
	return prof.on ? prof.name : NULL;
}

FV_API const struct fv_cost_row *fakeverbs_cost_table(size_t *n)
{
	*n = NROWS;
	return fv_cost_table;
}
