/* SPDX-License-Identifier: MIT */
/*
 * What gdrhook-info finds before it writes anything: gdrpin's version,
 * the GPUs (the driver, called as a tool calls it), the RDMA devices and
 * what each can do (DMA-BUF import, memory windows, the route of an
 * exact registration), the pin backend's verdicts and the routes to the
 * driver.  The verdicts are the pin layer's (src/pin/pin_choose.c):
 * nothing here decides.
 */
#include <cuda.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "base/base.h"
#include "platform/platform.h"
#include "registry/registry.h"
#include "pin/pin.h"
#include "rcache/rcache.h"
#include "hooks/hooks.h"
#include "routes.h"
#include "info_impl.h"
#include "gdrpin_ioctl.h"

/* ----------------------------------------------------------- versions */

static void gdrpin_probe(struct gdrpin_state *g)
{
	struct gdrpin_version_args v;
	int fd = open(gh_gdrpin_dev, O_RDWR | O_CLOEXEC);

	memset(g, 0, sizeof(*g));
	if (fd < 0) {
		gh_str_printf(g->why, sizeof(g->why), "%s: %s", gh_gdrpin_dev,
		    strerror(errno));
		return;
	}
	memset(&v, 0, sizeof(v));
	v.size = sizeof(v);
	if (ioctl(fd, GDRPIN_IOC_GET_VERSION, &v)) {
		gh_str_printf(g->why, sizeof(g->why), "%s: GET_VERSION: %s",
		    gh_gdrpin_dev, strerror(errno));
	} else {
		g->present = 1;
		g->major = v.abi_major;
		g->minor = v.abi_minor;
		g->caps = v.caps;
		gh_str_printf(g->why, sizeof(g->why), "%s", gh_gdrpin_dev);
	}
	close(fd);
}

/* ------------------------------------------------------------- GPUs */

typedef CUresult (*cu_int_fn)(int *);
typedef CUresult (*cu_init_fn)(unsigned int);
typedef CUresult (*cu_name_fn)(char *, int, CUdevice);
typedef CUresult (*cu_attr_fn)(int *, CUdevice_attribute, CUdevice);

static void find_gpus(struct facts *f)
{
	void *h = gh_libcuda_handle();
	cu_init_fn init = h ? (cu_init_fn)gh_real_dlsym(h, "cuInit") : NULL;
	cu_int_fn ver = h ? (cu_int_fn)gh_real_dlsym(h, "cuDriverGetVersion") : NULL;
	cu_int_fn count = h ? (cu_int_fn)gh_real_dlsym(h, "cuDeviceGetCount") : NULL;
	cu_name_fn name = h ? (cu_name_fn)gh_real_dlsym(h, "cuDeviceGetName") : NULL;
	cu_name_fn pci = h ? (cu_name_fn)gh_real_dlsym(h, "cuDeviceGetPCIBusId") : NULL;
	cu_attr_fn attr = h ? (cu_attr_fn)gh_real_dlsym(h, "cuDeviceGetAttribute") : NULL;
	char e[32];
	int n = 0, v = 0;
	CUresult rc;

	if (!h) {
		gh_str_printf(f->cuda_why, sizeof(f->cuda_why), "%s cannot be loaded",
		    gh_platform_cfg.libcuda ? gh_platform_cfg.libcuda : "libcuda.so.1");
	} else if (!init || !count || !name) {
		gh_str_printf(f->cuda_why, sizeof(f->cuda_why), "the driver lacks cuInit/cuDeviceGetCount/cuDeviceGetName");
	} else if ((rc = init(0)) != CUDA_SUCCESS) {
		gh_str_printf(f->cuda_why, sizeof(f->cuda_why), "cuInit failed: %s",
		    gh_cu_errname(h, rc, e, sizeof(e)));
	} else if ((rc = count(&n)) != CUDA_SUCCESS) {
		gh_str_printf(f->cuda_why, sizeof(f->cuda_why), "cuDeviceGetCount failed: %s",
		    gh_cu_errname(h, rc, e, sizeof(e)));
		n = 0;
	}
	if (ver && ver(&v) != CUDA_SUCCESS)
		v = 0;
	f->driver = v;
	f->ngpu = n < INFO_GPUS ? n : INFO_GPUS;
	for (int i = 0; i < f->ngpu; i++) {
		struct gpu *g = &f->gpu[i];
		int d = 0;

		g->dmabuf = -1;
		if (name(g->name, sizeof(g->name), i) != CUDA_SUCCESS)
			gh_str_printf(g->name, sizeof(g->name), "?");
		if (!pci || pci(g->pci, sizeof(g->pci), i) != CUDA_SUCCESS)
			g->pci[0] = '\0';
		if (attr && attr(&d, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED,
				 i) == CUDA_SUCCESS)
			g->dmabuf = !!d;
		g->bar1_src = "unknown";
		if (g->pci[0])
			g->bar1 = gh_bar1_size(g->pci, &g->bar1_src);
	}
}

/* ------------------------------------------------------- RDMA devices */

/*
 * Can exact exposure use memory windows on the device (src/pin/mwin.c)?  The
 * capability the first registration probes; its first bind proves it.
 */
static int windows_cap(const struct gh_verbs *v, struct ibv_device *dev,
		       char *why, size_t cap)
{
	struct ibv_device_attr da;
	struct ibv_context *ctx;
	int yes = 0, err;

	if (!gh_pin_cfg.windows) {
		gh_str_printf(why, cap, "off: GDRHOOK_WINDOWS=0");
		return 0;
	}
	if (!v->query_device || !(ctx = v->open_device(dev))) {
		gh_str_printf(why, cap, "cannot ask the device");
		return -1;
	}
	memset(&da, 0, sizeof(da));
	err = v->query_device(ctx, &da);
	if (err)
		gh_str_printf(why, cap, "ibv_query_device: %s", gh_errtext(err));
	else if (!(da.device_cap_flags & IBV_DEVICE_MEM_WINDOW) || da.max_mw <= 0)
		gh_str_printf(why, cap, "no memory windows");
	else {
		yes = 1;
		gh_str_printf(why, cap, "type 1, up to %d",
			      da.max_mw);
	}
	v->close_device(ctx);
	return err ? -1 : yes;
}

/*
 * Does the device import DMA-BUF?  A registration with no file (-1)
 * tells: a provider without it answers EOPNOTSUPP before looking at the
 * fd, one with it fails on the fd (EBADF).
 */
static int dmabuf_import(const struct gh_verbs *v, struct ibv_device *dev,
			 char *why, size_t cap)
{
	struct ibv_context *ctx = v->open_device(dev);
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	int e, yes = 0;

	if (!ctx) {
		gh_str_printf(why, cap, "cannot open: %s", strerror(errno));
		return -1;
	}
	pd = v->alloc_pd ? v->alloc_pd(ctx) : NULL;
	if (!pd) {
		gh_str_printf(why, cap, "ibv_alloc_pd: %s", strerror(errno));
		v->close_device(ctx);
		return -1;
	}
	if (!v->reg_dmabuf_mr) {
		gh_str_printf(why, cap, "libibverbs has no ibv_reg_dmabuf_mr");
	} else {
		errno = 0;
		mr = v->reg_dmabuf_mr(pd, 0, 65536, 0, -1, IBV_ACCESS_LOCAL_WRITE);
		e = errno;
		if (mr) {
			if (v->dereg_mr)
				v->dereg_mr(mr);
			yes = 1;
			gh_str_printf(why, cap, "ibv_reg_dmabuf_mr accepted a registration");
		} else if (e == EOPNOTSUPP || e == ENOSYS ||
			   e == EPROTONOSUPPORT) {
			gh_str_printf(why, cap, "ibv_reg_dmabuf_mr: %s", strerror(e));
		} else {
			yes = 1;
			gh_str_printf(why, cap, "ibv_reg_dmabuf_mr implemented: a registration without a file fails with \"%s\"",
			    strerror(e));
		}
	}
	if (v->dealloc_pd)
		v->dealloc_pd(pd);
	v->close_device(ctx);
	return yes;
}

/*
 * The backend an exact registration on a NIC would use: what the cache
 * runs, else the verdict, with auto's fallback where this NIC cannot
 * import DMA-BUF (import 0).
 */
static const char *nic_backend(int import)
{
	const struct gh_pin_ops *c = gh_pin_chosen(NULL);
	struct gh_pin_explanation x;
	unsigned int b;

	if (c)
		return c->name;
	gh_pin_explain(-1, 0, &x);
	b = x.chosen;
	if (b == GH_PIN_DMABUF && !import)
		b = gh_pin_cfg.backend == GH_CFG_BACKEND_AUTO ?
		    gh_pin_auto_fallback() : GH_PIN_NONE;
	return gh_pin_backend_ops(b)->name;
}

/* The route of an exact registration on a NIC, its cost and why. */
static void exact_route(int win, const char *why, int import, char *buf,
			unsigned int cap)
{
	const char *b = nic_backend(import);

	if (gh_rcache_cfg.remote_exposure != GH_CFG_EXPOSURE_EXACT)
		gh_str_printf(buf, cap, "off: GDRHOOK_REMOTE_EXPOSURE=allocation (no NIC operation after the first)");
	else if (!strcmp(b, "none"))
		gh_str_printf(buf, cap, "the program's own registration (no cache on this NIC)");
	else if (win < 0)
		gh_str_printf(buf, cap, "unknown (%s)", why);
	else if (win > 0 && gh_pin_cfg.windows && !gh_pin_chosen(NULL) &&
		 gh_pin_cfg.backend == GH_CFG_BACKEND_AUTO && !strcmp(b, "dmabuf"))
		/* auto's window preference (src/pin/pin_choose.c) is decided
		 * by a registration of GPU memory this tool does not make */
		gh_str_printf(buf, cap,
			      "a window per MR over peermem if a peer-memory client serves (auto tries one GPU page at the first registration), else a dmabuf registration per MR (DMA-BUF parent: mlx5 binds no type-1 window)");
	else
		gh_mw_route_text(win, b, buf, cap);
}

static void find_nics(struct facts *f)
{
	struct ibv_device **list = NULL;
	int n = 0, loaded;
	/* the program's libibverbs, else loaded for good (vreal.h) */
	const struct gh_verbs *v = gh_vreal_load(&loaded);

	if (!loaded)
		gh_str_printf(f->rdma_why, sizeof(f->rdma_why), "no libibverbs.so.1");
	else if (!v || !v->get_device_list || !v->free_device_list ||
		 !v->get_device_name || !v->open_device || !v->close_device)
		gh_str_printf(f->rdma_why, sizeof(f->rdma_why), "libibverbs.so.1 lacks the device calls");
	else if (!(list = v->get_device_list(&n)) || n <= 0)
		gh_str_printf(f->rdma_why, sizeof(f->rdma_why), "ibv_get_device_list: %s",
		    list ? "none listed" : strerror(errno));
	f->nnic = list && n > 0 ? n : 0;
	for (int i = 0; list && i < n; i++) {
		struct nic *d = &f->nic[f->nic_listed];
		const char *nm;

		if (f->nic_listed == INFO_NICS)
			break;
		f->nic_listed++;
		nm = v->get_device_name(list[i]);
		gh_str_printf(d->name, sizeof(d->name), "%s", nm ? nm : "?");
		d->import = dmabuf_import(v, list[i], d->dwhy, sizeof(d->dwhy));
		d->win = windows_cap(v, list[i], d->wwhy, sizeof(d->wwhy));
		exact_route(d->win, d->wwhy, d->import, d->route,
			    sizeof(d->route));
		f->nic_import += d->import > 0;
	}
	if (list)
		v->free_device_list(list);
}

/* ------------------------------------------------------------ backend */

/*
 * What auto's choice means here.  With no RDMA device there is nothing to
 * register, so nothing is chosen (the verdict is what a device would
 * get).  Where no device imports DMA-BUF, auto's NIC-import probe at the
 * first registration (src/pin/pin_choose.c) falls back from dmabuf to
 * gh_pin_auto_fallback(): that is the answer.  In a process that has
 * registered GPU memory, what the cache runs is read from its record
 * (gh_pin_chosen), never decided here.
 */
static void find_backend(struct facts *f)
{
	struct gh_pin_explanation *x = &f->x;
	int rdma_found = f->nnic > 0;

	f->chosen = gh_pin_chosen(&f->chosen_why);
	gh_pin_explain(-1, 1, x);
	/* The verdict is the GPU's and libibverbs'; the NICs have the last word. */
	if (x->usable[GH_PIN_DMABUF] && rdma_found && !f->nic_import) {
		char gpu[GH_PIN_WHY_LEN];

		gh_str_printf(gpu, sizeof(gpu), "%s", x->why[GH_PIN_DMABUF]);
		x->usable[GH_PIN_DMABUF] = 0;
		gh_str_printf(x->why[GH_PIN_DMABUF], sizeof(x->why[GH_PIN_DMABUF]),
		    "no RDMA device here imports DMA-BUF (%s)", gpu);
	}
	f->rule = gh_pin_backend_ops(x->chosen)->name;
	f->choice = rdma_found ? f->rule : NULL;
	gh_str_printf(f->reason, sizeof(f->reason), "%s", x->reason);
	if (x->chosen == GH_PIN_DMABUF && rdma_found && !f->nic_import) {
		if (gh_pin_cfg.backend == GH_CFG_BACKEND_AUTO) {
			f->choice = gh_pin_backend_ops(gh_pin_auto_fallback())->name;
			gh_str_printf(f->reason, sizeof(f->reason),
			    "auto: no RDMA device here imports DMA-BUF, so the NIC-import probe at the first registration falls back from dmabuf to %s",
			    f->choice);
		} else {
			f->note = "no RDMA device found here imports DMA-BUF: dmabuf registrations would fail on them";
		}
	}
}

/* ------------------------------------------------------- interception */

static void find_routes(struct facts *f)
{
	gh_routes_check(f->r);
	f->untrusted = __atomic_load_n(&gh_untrusted, __ATOMIC_RELAXED);
	for (int i = 0; i < GH_ROUTES; i++) {
		f->missed += f->r[i].state == 0;
		f->unchecked += f->r[i].state < 0;
	}
}

/*
 * Every fact, before anything is written: the verdict on the first line
 * needs all of it.
 */
void gh_info_gather(struct facts *f)
{
	int was;

	gdrpin_probe(&f->pin);
	f->active = gh_state == GH_STATE_ACTIVE;
	/* Devices first: cuInit, and libibverbs loaded for the probe. */
	was = gh_guard_enter();
	find_gpus(f);
	find_nics(f);
	find_backend(f);
	gh_guard_leave(was);
	/* The routes are called as a program calls them: no guard. */
	find_routes(f);
}
