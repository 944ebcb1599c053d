// SPDX-License-Identifier: MIT
/*
 * The "peermem" pin backend (src/pin/pin_peermem.c) against the driver
 * double and the fake NIC: pin() only records the 64 KiB-rounded range
 * (no fd, nothing asked of the NIC or the driver); reg() is a plain
 * registration of exactly the range asked, iova = its address, which a
 * peer's RDMA write reaches and nothing outside it; without a
 * peer-memory client the NIC's EFAULT comes back; dereg() drops the MR.
 */
#include <stdlib.h>

#include "harness.h"
#include "doubles_linked.h"
#include "pin/pin.h"

#define MiB	(1ULL << 20)
#define KiB	(1ULL << 10)
#define RW	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)

static struct gh_pin pin_of(CUdeviceptr d, uint64_t size)
{
	struct gh_pin p = { .base = d, .size = size, .gen = 3, .dev = 0,
			    .fd = 42, .kind = GDRHOOK_KIND_DEVICE };

	return p;
}

TEST(pin_records_the_rounded_range)
{
	struct gh_pin p = pin_of(0x7f0000012345ULL, 0x10000);

	CHECK_STR(gh_pin_peermem.name, "peermem");
	CHECK(gh_pin_peermem.valid == NULL);
	CHECK_EQ(gh_pin_peermem.pin(&p), 0);
	CHECK_EQ(p.pin_base, 0x7f0000010000ULL);
	CHECK_EQ(p.pin_size, 0x20000);
	CHECK_EQ(p.fd, -1);
	/* aligned already: itself */
	p = pin_of(0x7f0000100000ULL, 2 * MiB);
	CHECK_EQ(gh_pin_peermem.pin(&p), 0);
	CHECK_EQ(p.pin_base, 0x7f0000100000ULL);
	CHECK_EQ(p.pin_size, 2 * MiB);
	gh_pin_peermem.unpin(&p);
	CHECK_EQ(p.pin_base, 0);
	CHECK_EQ(p.pin_size, 0);
	/* no NIC call, no driver call */
	CHECK_EQ(fakeverbs_calls("ibv_reg_mr_iova2"), 0);
	CHECK_EQ(fakecuda_calls("cuMemGetHandleForAddressRange"), 0);
}

TEST(reg_is_exactly_the_range_asked)
{
	struct ibv_pd *pd;
	struct ibv_mr *mr = NULL;
	struct gh_pin p;
	CUdeviceptr d;
	uint64_t a;
	uint32_t rkey;
	char got[6] = "";

	cu_primary(0);
	d = cu_alloc(MiB);
	pd = nic_pd();
	p = pin_of(d, MiB);
	CHECK_EQ(gh_pin_peermem.pin(&p), 0);
	a = d + 8 * KiB + 100;
	CHECK_EQ(gh_pin_peermem.reg(&p, pd, a, 1000, RW, &mr), 0);
	CHECK(mr != NULL && fakeverbs_is_mr(mr));
	CHECK_EQ((uint64_t)(uintptr_t)mr->addr, a);
	CHECK_EQ(mr->length, 1000);
	CHECK(mr->pd == pd);
	CHECK_EQ(fakeverbs_calls("ibv_reg_mr_iova2"), 1);
	/* a peer reaches the range, by its address, and nothing beyond */
	CHECK_EQ(fakeverbs_write(pd, mr->rkey, a + 10, "hello", 5), 0);
	CU_OK(cuMemcpyDtoH(got, d + 8 * KiB + 110, 5));
	CHECK(!memcmp(got, "hello", 5));
	CHECK_EQ(fakeverbs_write(pd, mr->rkey, a - 1, "x", 1), -ERANGE);
	CHECK_EQ(fakeverbs_write(pd, mr->rkey, a + 1000, "x", 1), -ERANGE);
	rkey = mr->rkey;
	CHECK_EQ(gh_pin_peermem.dereg(mr), 0);
	CHECK_EQ(fakeverbs_live_mrs(), 0);
	CHECK_EQ(fakeverbs_write(pd, rkey, a, "x", 1), -ENOENT);
	gh_pin_peermem.unpin(&p);
}

TEST(reg_without_a_peer_client_fails_with_the_nics_errno)
{
	struct ibv_mr *mr = (struct ibv_mr *)0x1;
	struct gh_pin p;
	CUdeviceptr d;

	setenv("FAKEVERBS_PEERMEM", "0", 1);
	cu_primary(0);
	d = cu_alloc(MiB);
	p = pin_of(d, MiB);
	CHECK_EQ(gh_pin_peermem.pin(&p), 0);
	CHECK_EQ(gh_pin_peermem.reg(&p, nic_pd(), d, 4096, RW, &mr), -EFAULT);
	CHECK(mr == (struct ibv_mr *)0x1);
	CHECK_EQ(fakeverbs_live_mrs(), 0);
}

TEST_MAIN()
