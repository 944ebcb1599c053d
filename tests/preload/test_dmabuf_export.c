// SPDX-License-Identifier: MIT
/*
 * The program's own dma-buf exports (src/hooks/dmabuf_export.c), end to
 * end over the libibverbs double's checking NIC: a registration of a
 * dma-buf the program exported through the driver is tied to the memory
 * the export reached, whatever iova it names, so that memory's free
 * revokes it; the export is known by its file, not its number, so a new
 * export that gets a closed one's fd number is the one a registration
 * is tied to.  Each case runs in a fresh process (run_scenario), on the
 * cached backends and both exposure policies.
 */
#include <cuda.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "preload_util.h"
#include "each_backend.h"
#include "verbs_load.h"

static void setup(void)
{
	primary_ctx(0);
	verbs_load();
}

static int export_fd(CUdeviceptr a, size_t n)
{
	int fd = -1;

	CU_OK(cuMemGetHandleForAddressRange(&fd, a, n,
		CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0));
	CHECK(fd >= 0);
	return fd;
}

/*
 * The program's own ibv_reg_dmabuf_mr, with an iova unlike the
 * buffer's address (0-based): the free of the exported memory revokes it.
 */
static int scenario_dmabuf_iova(void)
{
	struct ibv_pd *pd;

	setup();
	pd = v.alloc_pd(v.open());
	for (int zero = 0; zero < 2; zero++) {
		CUdeviceptr a = dev_alloc(2 * MiB);
		uint64_t iova = zero ? 0 : 0x1234000;
		struct ibv_mr *m;
		int fd = -1;

		CU_OK(cuMemGetHandleForAddressRange(&fd, a, 2 * MiB,
			CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0));
		CHECK(fd >= 0);
		m = v.dmabuf(pd, 4096, 65536, iova, fd, LW | RW);
		CHECK(m != NULL);
		CHECK_EQ(v.write(pd, m->rkey, iova + 10, "in", 2), 0);
		CHECK(!memcmp((void *)(a + 4096 + 10), "in", 2));
		a = realloc_same(a, 2 * MiB);
		CHECK(refused(pd, m->rkey, iova + 10));
		CHECK_EQ(v.calls("stale_writes"), 0);
		CHECK_EQ(v.dereg(m), 0);
		close(fd);
		CU_OK(cuMemFree(a));
	}
	CHECK_EQ(v.stale(), 0);
	CHECK_EQ(v.live(), 0);
	return 0;
}

/*
 * Export a, close the fd, export b: the new dma-buf gets the old number.
 * A registration of it is b's (writes land in b; b's free revokes it),
 * and a's free leaves it alone.
 */
static int scenario_fd_number_reused(void)
{
	struct ibv_pd *pd;
	CUdeviceptr a, b;
	struct ibv_mr *m;
	int fd, fd2;

	setup();
	pd = v.alloc_pd(v.open());
	a = dev_alloc(2 * MiB);
	b = dev_alloc(2 * MiB);
	CHECK(a != b);
	fd = export_fd(a, 2 * MiB);
	close(fd);
	fd2 = export_fd(b, 2 * MiB);
	CHECK_EQ(fd2, fd);	/* the precondition: the number came back */
	m = v.dmabuf(pd, 8192, 65536, 0, fd2, LW | RW);
	CHECK(m != NULL);
	CHECK_EQ(v.write(pd, m->rkey, 10, "in", 2), 0);
	CHECK(!memcmp((void *)(b + 8192 + 10), "in", 2));
	CU_OK(cuMemFree(a));
	CHECK_EQ(v.write(pd, m->rkey, 20, "on", 2), 0);
	CHECK(!memcmp((void *)(b + 8192 + 20), "on", 2));
	CU_OK(cuMemFree(b));
	CHECK(refused(pd, m->rkey, 10));
	CHECK_EQ(v.calls("stale_writes"), 0);
	CHECK_EQ(v.dereg(m), 0);
	close(fd2);
	CHECK_EQ(v.stale(), 0);
	CHECK_EQ(v.live(), 0);
	return 0;
}

/* An export of part of an allocation: the registration's offset is
 * counted from where the export begins, not from the allocation. */
static int scenario_export_inside(void)
{
	struct ibv_pd *pd;
	struct ibv_mr *m;
	CUdeviceptr a;
	int fd;

	setup();
	pd = v.alloc_pd(v.open());
	a = dev_alloc(4 * MiB);
	fd = export_fd(a + 2 * MiB, 2 * MiB);
	m = v.dmabuf(pd, 4096, 4096, 0x70000, fd, LW | RW);
	CHECK(m != NULL);
	CHECK_EQ(v.write(pd, m->rkey, 0x70000 + 5, "at", 2), 0);
	CHECK(!memcmp((void *)(a + 2 * MiB + 4096 + 5), "at", 2));
	CU_OK(cuMemFree(a));
	CHECK(refused(pd, m->rkey, 0x70000 + 5));
	CHECK_EQ(v.calls("stale_writes"), 0);
	CHECK_EQ(v.dereg(m), 0);
	close(fd);
	CHECK_EQ(v.stale(), 0);
	return 0;
}

static const struct scenario scenarios[] = {
	{ "dmabuf_iova", scenario_dmabuf_iova },
	{ "fd_number_reused", scenario_fd_number_reused },
	{ "export_inside", scenario_export_inside },
};

TEST(own_dmabuf_mr_tied_to_the_exported_memory)
{
	each_backend("dmabuf_iova", NULL);
}

TEST(new_export_on_a_reused_fd_number_is_the_one_tied)
{
	each_backend("fd_number_reused", NULL);
}

TEST(export_of_part_of_an_allocation)
{
	each_backend("export_inside", NULL);
}

SCENARIO_MAIN(scenarios)
