// SPDX-License-Identifier: MIT
/*
 * The "none" pin backend (src/pin/pin_none.c): it pins and registers
 * nothing (ENOTSUP, what it was given left as it was), has no validity
 * check, and its dereg is the real ibv_dereg_mr (the fake NIC's), with
 * the error as -errno.
 */
#include <stdlib.h>

#include "harness.h"
#include "doubles_linked.h"
#include "pin/pin.h"

TEST(pins_and_registers_nothing)
{
	struct gh_pin p = { .base = 0x7f0000010000ULL, .size = 1 << 20,
			    .gen = 5, .fd = -1 };
	struct ibv_mr *mr = (struct ibv_mr *)0x1;
	struct ibv_pd *pd = nic_pd();

	CHECK_STR(gh_pin_none.name, "none");
	CHECK(gh_pin_none.valid == NULL);
	CHECK_EQ(gh_pin_none.pin(&p), -ENOTSUP);
	CHECK_EQ(p.pin_base, 0);
	CHECK_EQ(p.pin_size, 0);
	CHECK_EQ(p.fd, -1);
	CHECK_EQ(gh_pin_none.reg(&p, pd, p.base, 4096,
				 IBV_ACCESS_LOCAL_WRITE, &mr), -ENOTSUP);
	CHECK(mr == (struct ibv_mr *)0x1);
	gh_pin_none.unpin(&p);
	CHECK_EQ(p.base, 0x7f0000010000ULL);
	CHECK_EQ(p.size, 1 << 20);
	/* the NIC was never asked */
	CHECK_EQ(fakeverbs_calls("ibv_reg_mr_iova2") +
		 fakeverbs_calls("ibv_reg_dmabuf_mr"), 0);
}

TEST(dereg_is_the_real_one)
{
	static char buf[8192] __attribute__((aligned(4096)));
	struct ibv_pd *pd = nic_pd();
	struct ibv_mr *mr, bogus;

	mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr != NULL);
	CHECK_EQ(fakeverbs_live_mrs(), 1);
	CHECK_EQ(gh_pin_none.dereg(mr), 0);
	CHECK_EQ(fakeverbs_live_mrs(), 0);
	CHECK_EQ(fakeverbs_calls("ibv_dereg_mr"), 1);
	/* the NIC's refusal, as -errno */
	memset(&bogus, 0, sizeof(bogus));
	CHECK_EQ(gh_pin_none.dereg(&bogus), -EINVAL);
	CHECK_EQ(fakeverbs_calls("ibv_dereg_mr"), 2);
}

TEST_MAIN()
