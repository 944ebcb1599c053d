// SPDX-License-Identifier: MIT
/*
 * The "dmabuf" backend: the driver exports the whole allocation, rounded
 * out to 64 KiB, as a DMA-BUF (cuMemGetHandleForAddressRange with
 * CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD); each registration is an
 * ibv_reg_dmabuf_mr of the range asked within it (offset = addr -
 * pin_base, iova = addr, as UCX and NCCL do).  The fd is
 * the pin: kept open for further PDs and access upgrades until the
 * allocation is freed or evicted.
 *
 * The export needs a current context: on a thread that has none, the
 * allocation's context (or its device's primary context) is bound for the
 * call and unbound after.  If the rounded range cannot be exported (it
 * runs into memory the driver does not consider part of one mapping), the
 * page-rounded allocation is tried instead.
 *
 * What is exported comes from the registry (or a span, src/rcache/rcache_span.c):
 * the offset of a registration is its distance from the pinned base and
 * its length the registered span, never cuMemGetAddressRange of a VMM
 * range (that answers one mapping, 20 MiB for a PyTorch chunk).  One
 * export may cross VMM mappings of different physical allocations (the
 * driver allows it while all of them are mapped).
 *
 * Mapping type (GDRHOOK_DMABUF_MAPPING): on Grace systems the default
 * mapping of an export goes over C2C, which a PCIe NIC cannot use; the
 * PCIe flag (CUDA 12.8+) asks for a BAR1 mapping.  `auto` asks for it on
 * devices whose host link is C2C (CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_
 * SUPPORTED: PCIe hosts lack native atomics) and falls back to the
 * default if refused; on an x86 H100 the driver refuses the flag
 * (CUDA_ERROR_NOT_SUPPORTED), so `auto` leaves it off there.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <cuda.h>

#include "base/base.h"
#include "evlog/evlog.h"
#include "platform/platform.h"
#include "backend.h"
#include "pin_opts.h"

typedef CUresult (*get_handle_fn)(void *, CUdeviceptr, size_t,
				  CUmemRangeHandleType, unsigned long long);
typedef CUresult (*ctx_get_fn)(CUcontext *);
typedef CUresult (*ctx_set_fn)(CUcontext);

static void *drv_sym(const char *name)
{
	void *h = gh_libcuda_handle();
	void *p = h ? gh_real_dlsym(h, name) : NULL;

	return p && !gh_addr_is_ours(p) ? p : NULL;
}

static int cu_errno(CUresult rc)
{
	switch (rc) {
	case CUDA_SUCCESS:
		return 0;
	case CUDA_ERROR_OUT_OF_MEMORY:
		return -ENOMEM;
	case CUDA_ERROR_NOT_SUPPORTED:
		return -ENOTSUP;
	case CUDA_ERROR_INVALID_VALUE:
		return -EINVAL;
	default:
		return -EIO;
	}
}

/* The export flags to try first for dev, and whether 0 may follow. */
static unsigned long long mapping_flags(int dev, int *fallback_p)
{
	int m = gh_pin_cfg.dmabuf_mapping;
	CUresult (*attr)(int *, CUdevice_attribute, CUdevice) =
		(CUresult (*)(int *, CUdevice_attribute, CUdevice))drv_sym(
			"cuDeviceGetAttribute");
	int c2c = 0;

	*fallback_p = 0;
	if (m == GH_CFG_DMABUF_MAPPING_PCIE)
		return CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE;
	if (m != GH_CFG_DMABUF_MAPPING_AUTO || dev < 0 || !attr ||
	    attr(&c2c, CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED,
		 (CUdevice)dev) != CUDA_SUCCESS || !c2c)
		return 0;
	*fallback_p = 1;
	return CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE;
}

static CUresult export_range(get_handle_fn get, uint64_t base, uint64_t size,
			     int dev, int *fd_p)
{
	int fd = -1, fallback;
	unsigned long long fl = mapping_flags(dev, &fallback);
	CUresult rc = get(&fd, (CUdeviceptr)base, (size_t)size,
			  CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, fl);

	if (rc != CUDA_SUCCESS && fl && fallback)
		rc = get(&fd, (CUdeviceptr)base, (size_t)size,
			 CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
	else if (rc == CUDA_ERROR_NOT_SUPPORTED && fl)
		gh_warn_once("GDRHOOK_DMABUF_MAPPING=pcie: the driver refuses the PCIe mapping type on device %d; GPU registrations are passed through",
			     dev);
	if (rc == CUDA_SUCCESS)
		*fd_p = fd;
	return rc;
}

/*
 * Export [lo, hi) of p's allocation.  The export needs a current
 * context: on a thread that has none, the allocation's (or its device's
 * primary) is bound for the call.  lo2/hi2 (when hi2 > lo2): the range
 * tried when the first is refused.
 */
static int export_bound(const struct gh_pin *p, uint64_t *lo, uint64_t *hi,
			uint64_t lo2, uint64_t hi2, int *fd_p)
{
	get_handle_fn get = (get_handle_fn)drv_sym("cuMemGetHandleForAddressRange");
	ctx_get_fn ctx_get = (ctx_get_fn)drv_sym("cuCtxGetCurrent");
	ctx_set_fn ctx_set = (ctx_set_fn)drv_sym("cuCtxSetCurrent");
	CUcontext cur = NULL;
	int bound = 0;
	CUresult rc;

	if (!get || !ctx_get || !ctx_set)
		return -ENOTSUP;
	if (ctx_get(&cur) != CUDA_SUCCESS || !cur) {
		uint64_t ctx = p->ctx;

		if (!ctx && (p->dev < 0 || gh_drv_primary_ctx(p->dev, &ctx)))
			return -ENXIO;
		if (ctx_set((CUcontext)(uintptr_t)ctx) != CUDA_SUCCESS)
			return -ENXIO;
		bound = 1;
	}
	rc = export_range(get, *lo, *hi - *lo, p->dev, fd_p);
	if (rc != CUDA_SUCCESS && rc != CUDA_ERROR_OUT_OF_MEMORY &&
	    hi2 > lo2) {
		*lo = lo2;
		*hi = hi2;
		rc = export_range(get, lo2, hi2 - lo2, p->dev, fd_p);
	}
	if (bound)
		ctx_set(NULL);
	return cu_errno(rc);
}

/*
 * The fd is the program's number too: it may close it (close_range) and
 * open its own file there, or dup2() over it.  It is kept above the
 * numbers programs use and known by its file (evspool.h), never closed
 * or registered through unless it still names that file.
 */
static int own_fd(int fd, struct gh_pin *p)
{
	struct gh_ownfd o;
	int err = gh_fd_own(fd, &o);

	if (err)
		return err;
	p->fd = o.fd;
	p->fd_dev = (uint64_t)o.dev;
	p->fd_ino = (uint64_t)o.ino;
	return 0;
}

static struct gh_ownfd held(const struct gh_pin *p)
{
	struct gh_ownfd o = { .fd = p->fd, .dev = (dev_t)p->fd_dev,
			      .ino = (ino_t)p->fd_ino };

	return o;
}

static int dmabuf_pin(struct gh_pin *p)
{
	uint64_t pg = (uint64_t)sysconf(_SC_PAGESIZE);
	uint64_t lo = p->base & ~(GH_PIN_ALIGN - 1);
	uint64_t hi = (p->base + p->size + GH_PIN_ALIGN - 1) &
		      ~(GH_PIN_ALIGN - 1);
	int fd = -1, err;

	/* the rounded range runs into memory not part of one mapping: the
	 * page-rounded allocation instead */
	err = export_bound(p, &lo, &hi, p->base & ~(pg - 1),
			   (p->base + p->size + pg - 1) & ~(pg - 1), &fd);
	if (!err)
		err = own_fd(fd, p);
	if (err)
		return err;
	p->pin_base = lo;
	p->pin_size = hi - lo;
	return 0;
}

static void dmabuf_unpin(struct gh_pin *p)
{
	struct gh_ownfd o = held(p);

	if (p->fd >= 0)
		gh_fd_close(&o);
	p->fd = -1;
}

static int dmabuf_reg(const struct gh_pin *p, struct ibv_pd *pd,
		      uint64_t addr, uint64_t len, unsigned int access,
		      struct ibv_mr **mr_p)
{
	struct gh_ownfd o = held(p), tmp = { .fd = -1 };
	uint64_t lo = p->pin_base, hi = p->pin_base + p->pin_size;
	struct ibv_mr *mr;
	int fd = o.fd, err;

	if (!gh_fd_ours(&o)) {
		/*
		 * The program took the number: this registration goes
		 * through a fresh export of the same range (the MR keeps it
		 * alive; the memory is the pin's, under the cache's lock).
		 */
		err = export_bound(p, &lo, &hi, 0, 0, &fd);
		if (!err)
			err = gh_fd_own(fd, &tmp);
		if (err)
			return err;
		fd = tmp.fd;
	}
	errno = 0;
	mr = gh_vreal_reg_dmabuf_mr(pd, addr - p->pin_base, len, addr, fd,
				    (int)access);
	err = mr ? 0 : errno ? -errno : -EIO;
	if (tmp.fd >= 0)
		gh_fd_close(&tmp);
	if (err)
		return err;
	*mr_p = mr;
	return 0;
}

static int dmabuf_dereg(struct ibv_mr *mr)
{
	return gh_vreal_dereg_mr(mr);
}

const struct gh_pin_ops gh_pin_dmabuf = {
	.name = "dmabuf",
	.pin = dmabuf_pin,
	.unpin = dmabuf_unpin,
	.reg = dmabuf_reg,
	.dereg = dmabuf_dereg,
};
