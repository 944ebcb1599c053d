// SPDX-License-Identifier: MIT
/*
 * The "dmabuf" pin backend (src/pin/pin_dmabuf.c) against the driver
 * double (its exports are files a NIC maps) and the fake NIC: pin()
 * exports the allocation rounded out to 64 KiB (the page-rounded one
 * when that is refused, never after running out of memory) and keeps
 * the fd above the program's numbers; a thread with no current context
 * gets the allocation's (or its device's primary) bound for the call
 * only; reg() registers the range asked at its offset in the export, a
 * peer's write landing in the GPU memory there; a program that took the
 * fd's number gets its file left alone, and the registration goes
 * through a fresh export; unpin() closes the export; the PCIe mapping
 * type asked for where the host link is C2C, refused where it is not.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "capture.h"
#include "doubles_linked.h"
#include "pin/pin.h"

#define MiB	(1ULL << 20)
#define KiB	(1ULL << 10)
#define ALIGN	(64 * KiB)
#define RW	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)

static CUcontext ctx;

static struct gh_pin pin_of(CUdeviceptr base, uint64_t size)
{
	struct gh_pin p = { .base = base, .size = size, .gen = 9, .dev = 0,
			    .kind = GDRHOOK_KIND_DEVICE, .fd = -1 };

	p.ctx = (uint64_t)(uintptr_t)ctx;
	return p;
}

static unsigned long exports(void)
{
	return fakecuda_calls("cuMemGetHandleForAddressRange");
}

/* Where the export behind fd begins (the driver double's answer). */
static uint64_t export_va(int fd)
{
	uint64_t va = 0;

	CHECK_EQ(fakecuda_dmabuf_address(fd, &va), 0);
	return va;
}

TEST(pin_exports_the_allocation_rounded_to_64k)
{
	struct gh_pin p;
	struct stat st;
	CUdeviceptr d;
	uint64_t b;
	int fd;

	ctx = cu_primary(0);
	d = cu_alloc(4 * MiB);
	b = d + ALIGN + 0x1000;		/* 4 KiB into a 64 KiB page */
	p = pin_of(b, 100 * KiB);
	CHECK_STR(gh_pin_dmabuf.name, "dmabuf");
	CHECK_EQ(gh_pin_dmabuf.pin(&p), 0);
	CHECK_EQ(p.pin_base, d + ALIGN);
	CHECK_EQ(p.pin_size, 2 * ALIGN);
	CHECK_EQ(exports(), 1);
	CHECK_EQ(export_va(p.fd), p.pin_base);
	/* kept above the program's numbers, close-on-exec, known by file */
	CHECK(p.fd >= gh_fd_floor());
	CHECK(fcntl(p.fd, F_GETFD) & FD_CLOEXEC);
	CHECK_EQ(fstat(p.fd, &st), 0);
	CHECK_EQ(p.fd_dev, (uint64_t)st.st_dev);
	CHECK_EQ(p.fd_ino, (uint64_t)st.st_ino);
	fd = p.fd;
	gh_pin_dmabuf.unpin(&p);
	CHECK_EQ(p.fd, -1);
	CHECK_EQ(fstat(fd, &st), -1);	/* the export is closed */
	CHECK_EQ(errno, EBADF);
}

TEST(refused_range_falls_back_to_pages_but_not_after_oom)
{
	struct gh_pin p;
	CUdeviceptr d;
	uint64_t b;

	ctx = cu_primary(0);
	d = cu_alloc(4 * MiB);
	b = d + ALIGN + 0x1000;
	p = pin_of(b, 0x2800);
	fakecuda_fail_next("cuMemGetHandleForAddressRange",
			   CUDA_ERROR_INVALID_VALUE, 1);
	CHECK_EQ(gh_pin_dmabuf.pin(&p), 0);
	CHECK_EQ(exports(), 2);
	CHECK_EQ(p.pin_base, b);		/* page-rounded */
	CHECK_EQ(p.pin_size, 0x3000);
	CHECK_EQ(export_va(p.fd), b);
	gh_pin_dmabuf.unpin(&p);

	p = pin_of(b, 0x2800);
	fakecuda_fail_next("cuMemGetHandleForAddressRange",
			   CUDA_ERROR_OUT_OF_MEMORY, 1);
	CHECK_EQ(gh_pin_dmabuf.pin(&p), -ENOMEM);
	CHECK_EQ(exports(), 3);			/* no second try */
	CHECK_EQ(p.fd, -1);
	CHECK_EQ(p.pin_size, 0);
	fakecuda_fail_next("cuMemGetHandleForAddressRange",
			   CUDA_ERROR_NOT_SUPPORTED, 2);
	CHECK_EQ(gh_pin_dmabuf.pin(&p), -ENOTSUP);
}

TEST(no_current_context_binds_one_for_the_export)
{
	CUcontext cur = (CUcontext)0x1;
	struct gh_pin p;
	CUdeviceptr d;

	ctx = cu_primary(0);
	d = cu_alloc(MiB);
	CU_OK(cuCtxSetCurrent(NULL));

	p = pin_of(d, MiB);		/* the allocation's context */
	CHECK_EQ(gh_pin_dmabuf.pin(&p), 0);
	CU_OK(cuCtxGetCurrent(&cur));
	CHECK(cur == NULL);		/* unbound after */
	gh_pin_dmabuf.unpin(&p);

	p = pin_of(d, MiB);		/* the device's primary context */
	p.ctx = 0;
	CHECK_EQ(gh_pin_dmabuf.pin(&p), 0);
	CU_OK(cuCtxGetCurrent(&cur));
	CHECK(cur == NULL);
	gh_pin_dmabuf.unpin(&p);

	p = pin_of(d, MiB);		/* neither */
	p.ctx = 0;
	p.dev = -1;
	CHECK_EQ(gh_pin_dmabuf.pin(&p), -ENXIO);
	CHECK_EQ(exports(), 2);
}

TEST(reg_is_the_range_at_its_offset_in_the_export)
{
	struct ibv_mr *mr = NULL;
	struct ibv_pd *pd;
	struct gh_pin p;
	CUdeviceptr d;
	uint64_t a;
	char got[6] = "";

	ctx = cu_primary(0);
	d = cu_alloc(2 * MiB);
	pd = nic_pd();
	p = pin_of(d + 0x3000, MiB);
	CHECK_EQ(gh_pin_dmabuf.pin(&p), 0);
	a = d + 300 * KiB + 7;
	CHECK_EQ(gh_pin_dmabuf.reg(&p, pd, a, 5000, RW, &mr), 0);
	CHECK(mr && fakeverbs_is_mr(mr));
	CHECK_EQ(mr->length, 5000);
	CHECK(mr->pd == pd);
	CHECK_EQ(fakeverbs_calls("ibv_reg_dmabuf_mr"), 1);
	CHECK_EQ(exports(), 1);		/* through the pin's export */
	/* a peer names it by address and reaches the GPU memory there */
	CHECK_EQ(fakeverbs_write(pd, mr->rkey, a + 20, "hello", 5), 0);
	CU_OK(cuMemcpyDtoH(got, a + 20, 5));
	CHECK(!memcmp(got, "hello", 5));
	CHECK_EQ(fakeverbs_write(pd, mr->rkey, a - 1, "x", 1), -ERANGE);
	CHECK_EQ(fakeverbs_write(pd, mr->rkey, a + 5000, "x", 1), -ERANGE);
	CHECK_EQ(gh_pin_dmabuf.dereg(mr), 0);
	CHECK_EQ(fakeverbs_live_mrs(), 0);
	gh_pin_dmabuf.unpin(&p);
}

TEST(a_nic_that_cannot_import_says_so)
{
	struct ibv_mr *mr = (struct ibv_mr *)0x1;
	struct gh_pin p;

	setenv("FAKEVERBS_NO_DMABUF", "1", 1);
	ctx = cu_primary(0);
	p = pin_of(cu_alloc(MiB), MiB);
	CHECK_EQ(gh_pin_dmabuf.pin(&p), 0);
	CHECK_EQ(gh_pin_dmabuf.reg(&p, nic_pd(), p.base, 4096, RW, &mr),
		 -EOPNOTSUPP);
	CHECK(mr == (struct ibv_mr *)0x1);
	gh_pin_dmabuf.unpin(&p);
}

/* The program closed the export's number and opened its own file there:
 * gdrhook never registers through it nor closes it. */
TEST(program_took_the_number)
{
	struct ibv_mr *mr = NULL;
	struct ibv_pd *pd;
	struct gh_pin p;
	struct stat mine, st;
	char got[4] = "";
	int fd, own;

	ctx = cu_primary(0);
	pd = nic_pd();
	p = pin_of(cu_alloc(MiB), MiB);
	CHECK_EQ(gh_pin_dmabuf.pin(&p), 0);
	fd = p.fd;
	own = memfd_create("programs", 0);
	CHECK(own >= 0);
	CHECK_EQ(dup2(own, fd), fd);	/* closes the export */
	CHECK_EQ(fstat(fd, &mine), 0);

	CHECK_EQ(gh_pin_dmabuf.reg(&p, pd, p.base + 64, 64, RW, &mr), 0);
	CHECK_EQ(exports(), 2);		/* a fresh export of the same range */
	CHECK_EQ(fakeverbs_write(pd, mr->rkey, p.base + 64, "abc", 3), 0);
	CU_OK(cuMemcpyDtoH(got, p.base + 64, 3));
	CHECK(!memcmp(got, "abc", 3));
	CHECK_EQ(gh_pin_dmabuf.dereg(mr), 0);

	gh_pin_dmabuf.unpin(&p);
	/* the program's file is still there, still its own */
	CHECK_EQ(fstat(fd, &st), 0);
	CHECK_EQ(st.st_ino, mine.st_ino);
	CHECK_EQ(lseek(fd, 0, SEEK_END), 0);	/* nothing written to it */
}

TEST(pcie_mapping_where_the_host_link_is_c2c)
{
	struct gh_pin p;

	setenv("FAKECUDA_C2C", "1", 1);
	ctx = cu_primary(0);
	p = pin_of(cu_alloc(MiB), MiB);
	gh_pin_cfg.dmabuf_mapping = GH_CFG_DMABUF_MAPPING_AUTO;
	CHECK_EQ(gh_pin_dmabuf.pin(&p), 0);
	CHECK_EQ(fakecuda_calls("cuMemGetHandleForAddressRange:pcie"), 1);
	gh_pin_dmabuf.unpin(&p);
	gh_pin_cfg.dmabuf_mapping = GH_CFG_DMABUF_MAPPING_DEFAULT;
	CHECK_EQ(gh_pin_dmabuf.pin(&p), 0);
	CHECK_EQ(fakecuda_calls("cuMemGetHandleForAddressRange:pcie"), 1);
	gh_pin_dmabuf.unpin(&p);
}

TEST(pcie_mapping_refused_over_pcie)
{
	struct gh_pin p;
	const char *out;

	ctx = cu_primary(0);
	p = pin_of(cu_alloc(MiB), MiB);
	/* auto: not asked for where the link is PCIe */
	gh_pin_cfg.dmabuf_mapping = GH_CFG_DMABUF_MAPPING_AUTO;
	CHECK_EQ(gh_pin_dmabuf.pin(&p), 0);
	CHECK_EQ(exports(), 1);
	gh_pin_dmabuf.unpin(&p);
	/* asked for: refused, said once */
	gh_pin_cfg.dmabuf_mapping = GH_CFG_DMABUF_MAPPING_PCIE;
	gh_log_level = GH_LOG_WARN;
	capture_begin();
	CHECK_EQ(gh_pin_dmabuf.pin(&p), -ENOTSUP);
	CHECK_EQ(gh_pin_dmabuf.pin(&p), -ENOTSUP);
	out = capture_end();
	CHECK_EQ(p.fd, -1);
	CHECK_EQ(capture_count(out, "GDRHOOK_DMABUF_MAPPING=pcie: the driver "
			       "refuses the PCIe mapping type on device 0"), 1);
	CHECK_EQ(fakecuda_calls("cuMemGetHandleForAddressRange:pcie"), 0);
}

TEST_MAIN()
