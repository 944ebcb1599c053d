// SPDX-License-Identifier: MIT
/*
 * What gdrhook would do here: gdrhook_info() (the gdrhook-info command)
 * and the one-line banner at GDRHOOK_LOG_LEVEL=info.
 *
 * Nothing here is on a hook path except the banner, which only reads the
 * configuration, the pin backend's verdicts (src/pin/pin_choose.c: the
 * same code that makes the choice) and what the cache runs, as recorded
 * there (gh_pin_chosen): nothing here decides.  gdrhook_info() calls the driver
 * (cuInit), opens RDMA devices and /dev/gdrpin, and calls the four routes
 * to a driver entry point as a program would: it is for tools.
 */
#include <cuda.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "hooks/hooks.h"
#include "info.h"
#include "routes.h"
#include "gdrpin_ioctl.h"

#ifndef GH_VERSION
#define GH_VERSION "unknown"
#endif

GH_EXPORT const char *gdrhook_version(void)
{
	return GH_VERSION;
}

/* ------------------------------------------------------------ banner */

/*
 * One line at the first CUDA or verbs call, and one more each time the
 * backend the cache runs (gh_pin_chosen) differs from the one the last
 * line named: after auto's NIC-import probe fell back, the banner names
 * what the cache runs.
 */
void gh_info_banner(void)
{
	static const struct gh_pin_ops *said;	/* named by the last line */
	struct gh_pin_explanation x;
	const struct gh_pin_ops *c, *s, *name;
	const char *why;

	if (gh_log_level < GH_LOG_INFO)
		return;
	c = gh_pin_chosen(&why);
	s = __atomic_load_n(&said, __ATOMIC_ACQUIRE);
	if (s && (!c || c == s))
		return;
	if (!c) {
		gh_pin_explain(-1, 0, &x);
		name = gh_pin_backend_ops(x.chosen);
		why = x.reason;
	} else {
		name = c;
	}
	if (!__atomic_compare_exchange_n(&said, &s, name, 0, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE))
		return;
	gh_info("gdrhook %s: pin backend %s (%s%s); event log %s",
		GH_VERSION, name->name, c ? "chosen; " : "", why,
		gh_cfg.trace_path ? gh_cfg.trace_path : "off (GDRHOOK_TRACE unset)");
}

/* ------------------------------------------------------------ output */

struct out {
	int fd, json, err;
	int first;		/* JSON: no comma before the next member */
	struct gh_buf b;
	char buf[16384];
};

static void flush(struct out *o)
{
	const char *p = o->b.p;
	size_t n = o->b.len;

	while (n && !o->err) {
		ssize_t w = write(o->fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			o->err = w < 0 ? -errno : -EIO;
			break;
		}
		p += w;
		n -= (size_t)w;
	}
	gh_buf_reset(&o->b);
}

static void room(struct out *o)
{
	if (gh_buf_room(&o->b) < 4096)
		flush(o);
}

static void text(struct out *o, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void text(struct out *o, const char *fmt, ...)
{
	va_list ap;

	room(o);
	va_start(ap, fmt);
	gh_buf_vprintf(&o->b, fmt, ap);
	va_end(ap);
}

/* The report fits a terminal: lines longer than this wrap. */
#define INFO_COLS	100
#define INFO_CONT	"      "	/* a wrapped line's indent */

/*
 * One line of text (fmt ends without a newline), broken at spaces into
 * at most maxl lines (0: any number) of at most INFO_COLS columns,
 * continuations indented; what does not fit in maxl ends in "...".
 */
static void vline(struct out *o, unsigned int maxl, const char *fmt,
		  va_list ap)
{
	static char l[2048];	/* gdrhook_info() holds its lock */
	struct gh_buf lb;
	const size_t cont = sizeof(INFO_CONT) - 1;
	size_t width = INFO_COLS;
	const char *p;

	gh_buf_init(&lb, l, sizeof(l));
	gh_buf_vprintf(&lb, fmt, ap);
	gh_buf_putc(&lb, '\0');
	l[sizeof(l) - 1] = '\0';
	p = l;
	for (unsigned int n_l = 1;; n_l++) {
		size_t n = strlen(p), cut;

		if (n <= width) {
			text(o, "%s\n", p);
			return;
		}
		if (maxl && n_l == maxl) {	/* the last one allowed */
			room(o);
			gh_buf_putn(&o->b, p, width - 3);
			gh_buf_lit(&o->b, "...\n");
			return;
		}
		for (cut = width; cut > 0 && p[cut] != ' '; cut--)
			;
		if (!cut)	/* one word longer than a line: as it is */
			for (cut = width; p[cut] && p[cut] != ' '; cut++)
				;
		room(o);
		gh_buf_putn(&o->b, p, cut);
		gh_buf_putc(&o->b, '\n');
		p += cut;
		while (*p == ' ')
			p++;
		if (!*p)
			return;
		gh_buf_puts(&o->b, INFO_CONT);
		width = INFO_COLS - cont;
	}
}

static void line(struct out *o, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void line(struct out *o, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vline(o, 0, fmt, ap);
	va_end(ap);
}

/* At most maxl lines: the summary's length is bounded by construction. */
static void line_max(struct out *o, unsigned int maxl, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void line_max(struct out *o, unsigned int maxl, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vline(o, maxl, fmt, ap);
	va_end(ap);
}

/*
 * The configuration table's meanings are written for README.md: the
 * backticks are markdown, noise on a terminal and in JSON.
 */
static const char *unmark(const char *s, char *buf, size_t cap)
{
	size_t n = 0;

	for (; *s && n + 1 < cap; s++)
		if (*s != '`')
			buf[n++] = *s;
	buf[n] = '\0';
	return buf;
}

static void j_key(struct out *o, const char *key)
{
	room(o);
	if (!o->first)
		gh_buf_putc(&o->b, ',');
	o->first = 0;
	if (key) {
		gh_buf_json_str(&o->b, key, 64);
		gh_buf_putc(&o->b, ':');
	}
}

static void j_open(struct out *o, const char *key, char c)
{
	j_key(o, key);
	gh_buf_putc(&o->b, c);
	o->first = 1;
}

static void j_close(struct out *o, char c)
{
	gh_buf_putc(&o->b, c);
	o->first = 0;
}

static void j_str(struct out *o, const char *key, const char *v)
{
	j_key(o, key);
	if (v)
		gh_buf_json_str(&o->b, v, 2048);
	else
		gh_buf_lit(&o->b, "null");
}

static void j_u64(struct out *o, const char *key, uint64_t v)
{
	j_key(o, key);
	gh_buf_u64(&o->b, v);
}

static void j_bool(struct out *o, const char *key, int v)
{
	j_key(o, key);
	if (v)
		gh_buf_lit(&o->b, "true");
	else
		gh_buf_lit(&o->b, "false");
}

/* A tri-state (-1: unknown) as a JSON boolean or null. */
static void j_tri(struct out *o, const char *key, int v)
{
	if (v >= 0)
		j_bool(o, key, v);
	else
		j_str(o, key, NULL);
}

static const char *yes_no(int v)
{
	return v < 0 ? "unknown" : v ? "yes" : "no";
}

/* ------------------------------------------------------------- facts */

/*
 * Everything is found first, then written: the verdict on the first line
 * needs all of it, and each view is a way of showing the same facts.
 */
#define INFO_GPUS	64
#define INFO_NICS	64

struct gpu {
	char name[128], pci[32];
	int dmabuf;		/* -1: unknown */
	uint64_t bar1;		/* 0: unknown */
	const char *bar1_src;	/* src/pin/bar.c: sysfs, nvml or unknown */
};

struct nic {
	char name[64];
	int import, win;	/* -1: unknown */
	char dwhy[GH_PIN_WHY_LEN], wwhy[GH_PIN_WHY_LEN], route[320];
};

struct gdrpin_state {
	int present;
	unsigned int major, minor;
	uint64_t caps;
	char why[128];
};

struct facts {
	struct gdrpin_state pin;
	int active;
	/* CUDA */
	int driver, ngpu;		/* driver 0: unknown */
	char cuda_why[160];		/* "": the driver answered */
	struct gpu gpu[INFO_GPUS];
	/* RDMA */
	int nnic, nic_listed, nic_import;	/* listed: probed, at most INFO_NICS */
	char rdma_why[160];
	struct nic nic[INFO_NICS];
	/* pin backend */
	struct gh_pin_explanation x;
	const struct gh_pin_ops *chosen;	/* in this process, or NULL */
	const char *chosen_why, *rule, *choice, *note;
	char reason[sizeof(((struct gh_pin_explanation *)0)->reason) + 160];
	/* interception */
	struct gh_route_check r[GH_ROUTES];
	int missed, unchecked, untrusted;
};

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
		    gh_cfg.libcuda ? gh_cfg.libcuda : "libcuda.so.1");
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

	if (!gh_cfg.windows) {
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
		b = gh_cfg.backend == GH_CFG_BACKEND_AUTO ?
		    gh_pin_auto_fallback() : GH_PIN_NONE;
	return gh_pin_backend_ops(b)->name;
}

/* The route of an exact registration on a NIC, its cost and why. */
static void exact_route(int win, const char *why, int import, char *buf,
			unsigned int cap)
{
	const char *b = nic_backend(import);

	if (gh_cfg.remote_exposure != GH_CFG_EXPOSURE_EXACT)
		gh_str_printf(buf, cap, "off: GDRHOOK_REMOTE_EXPOSURE=allocation (no NIC operation after the first)");
	else if (!strcmp(b, "none"))
		gh_str_printf(buf, cap, "the program's own registration (no cache on this NIC)");
	else if (win < 0)
		gh_str_printf(buf, cap, "unknown (%s)", why);
	else if (win > 0 && gh_cfg.windows && !gh_pin_chosen(NULL) &&
		 gh_cfg.backend == GH_CFG_BACKEND_AUTO && !strcmp(b, "dmabuf"))
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
		if (gh_cfg.backend == GH_CFG_BACKEND_AUTO) {
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
 * Complete only when every route was checked and reaches a wrapper; a
 * route that could not be called (no driver, no runtime) leaves the
 * answer open, and says so.
 */
static int complete(const struct facts *f)
{
	return f->active && !f->untrusted && !f->missed && !f->unchecked;
}

/* ------------------------------------------------------------ verdict */

/* "GPU 0 (NVIDIA H200)", "8 GPUs (NVIDIA H200)" or "2 GPUs" (names differ). */
static void gpus_phrase(const struct facts *f, int named, char *buf,
			size_t cap)
{
	int same = 1;

	for (int i = 1; i < f->ngpu; i++)
		same &= !strcmp(f->gpu[i].name, f->gpu[0].name);
	if (f->ngpu == 1)
		gh_str_printf(buf, cap, named ? "GPU 0 (%s)" : "GPU 0",
			      f->gpu[0].name);
	else if (named && same)
		gh_str_printf(buf, cap, "%d GPUs (%s)", f->ngpu, f->gpu[0].name);
	else
		gh_str_printf(buf, cap, "%d GPUs", f->ngpu);
}

static void nics_phrase(const struct facts *f, int named, char *buf,
			size_t cap)
{
	if (f->nnic == 1)
		gh_str_printf(buf, cap, "NIC %s", f->nic[0].name);
	else if (named)
		gh_str_printf(buf, cap, "%d NICs (%s, ...)", f->nnic,
			      f->nic[0].name);
	else
		gh_str_printf(buf, cap, "%d NICs", f->nnic);
}

/*
 * The first line: what gdrhook does here, in words a person can act on,
 * from the facts alone; next (may be empty): what to do about it.
 * Names are dropped where they would make the line wrap.
 */
static void verdict(const struct facts *f, char *v, size_t cap, char *next,
		    size_t ncap)
{
	const char *be = f->chosen ? f->chosen->name : f->choice;
	char g[192], n[96];

	*next = '\0';
	/* Names dropped as needed: the NICs' first, then the GPUs'. */
	for (int named = 2; named >= 0; named--) {
		gpus_phrase(f, named >= 1, g, sizeof(g));
		nics_phrase(f, named >= 2, n, sizeof(n));
		if (!f->active) {
			gh_str_printf(v, cap, "gdrhook %s: pass-through (GDRHOOK_ENABLE=0 or init failed): nothing tracked or cached",
				      GH_VERSION);
			gh_str_printf(next, ncap, "  unset GDRHOOK_ENABLE, or see the warnings on stderr");
		} else if (f->missed) {
			gh_str_printf(v, cap, "gdrhook %s: NOT ready: %d of %d routes to the CUDA driver miss gdrhook: allocations go untracked",
				      GH_VERSION, f->missed, GH_ROUTES);
			gh_str_printf(next, ncap, "  load it with LD_PRELOAD, not dlopen; the routes: gdrhook-info -r");
		} else if (f->untrusted) {
			gh_str_printf(v, cap, "gdrhook %s: NOT ready: the registry is not trusted here: registrations pass through uncached",
				      GH_VERSION);
		} else if (!f->ngpu && !f->nnic) {
			gh_str_printf(v, cap, "gdrhook %s: no GPU and no RDMA device here: nothing to track or cache",
				      GH_VERSION);
			gh_str_printf(next, ncap, "  to try it without them, in a build tree: LD_LIBRARY_PATH=build/fake:build/fakeverbs (the doubles)");
		} else if (!f->ngpu) {
			gh_str_printf(v, cap, "gdrhook %s: %s, no GPU: host memory registrations pass through, nothing to cache",
				      GH_VERSION, n);
		} else if (!f->nnic) {
			gh_str_printf(v, cap, "gdrhook %s: %s, no RDMA device: allocations tracked, nothing to register",
				      GH_VERSION, g);
		} else if (!strcmp(be, "none")) {
			gh_str_printf(v, cap, "gdrhook %s: %s, %s, no pin backend: allocations tracked, registrations not cached",
				      GH_VERSION, g, n);
		} else {
			gh_str_printf(v, cap, "gdrhook %s: ready: %s, %s: %s registrations cached, revoked at free",
				      GH_VERSION, g, n, be);
		}
		if (strlen(v) <= INFO_COLS)
			break;
	}
}

/* ------------------------------------------------------------- views */

static void show_versions(struct out *o, const struct facts *f,
			  unsigned int maxl)
{
	line_max(o, maxl, "gdrhook %s (API %u, event log format %u), state: %s", GH_VERSION,
	     GDRHOOK_API_VERSION, GH_EV_FORMAT_VERSION,
	     f->active ? "active" :
	     "pass-through (GDRHOOK_ENABLE=0 or init failed)");
	if (f->pin.present)
		line_max(o, maxl, "gdrpin: ABI %u.%u, caps %#llx (%s)",
			 f->pin.major, f->pin.minor,
			 (unsigned long long)f->pin.caps, f->pin.why);
	else
		line_max(o, maxl, "gdrpin: not present (%s)", f->pin.why);
}

static void gpu_text(const struct gpu *g, char *buf, size_t cap)
{
	char bar[64];

	if (g->bar1)
		gh_str_printf(bar, sizeof(bar), "%llu MiB (%s)",
		    (unsigned long long)(g->bar1 >> 20), g->bar1_src);
	else
		gh_str_printf(bar, sizeof(bar), "unknown");
	gh_str_printf(buf, cap, "%s, %s, DMA-BUF export %s, BAR1 %s", g->name,
		      g->pci[0] ? g->pci : "?", yes_no(g->dmabuf), bar);
}

static void gpus_head(struct out *o, const struct facts *f, unsigned int maxl)
{
	if (*f->cuda_why)
		line_max(o, maxl, "  GPUs: none (%s)", f->cuda_why);
	else
		text(o, "  CUDA driver %d.%d, %d GPU%s\n", f->driver / 1000,
		     f->driver % 1000 / 10, f->ngpu, f->ngpu == 1 ? "" : "s");
}

/* The devices view: every GPU and RDMA device, in full. */
static void show_devices(struct out *o, const struct facts *f)
{
	char g[320];

	text(o, "devices:\n");
	gpus_head(o, f, 0);
	for (int i = 0; i < f->ngpu; i++) {
		gpu_text(&f->gpu[i], g, sizeof(g));
		line(o, "  GPU %d: %s", i, g);
	}
	if (*f->rdma_why)
		line(o, "  RDMA devices: none (%s)", f->rdma_why);
	for (int i = 0; i < f->nic_listed; i++) {
		const struct nic *d = &f->nic[i];

		line(o, "  RDMA %s: DMA-BUF import %s (%s)", d->name,
		     yes_no(d->import), d->dwhy);
		line(o, "    memory windows: %s (%s)", yes_no(d->win), d->wwhy);
		line(o, "    exact exposure: %s", d->route);
	}
	if (f->nnic > f->nic_listed)
		text(o, "  %d more RDMA devices not probed\n",
		     f->nnic - f->nic_listed);
}

static void show_backend(struct out *o, const struct facts *f, int full)
{
	const struct gh_pin_explanation *x = &f->x;

	if (f->choice) {
		if (full) {
			text(o, "pin backend: GDRHOOK_BACKEND=%s would choose %s\n",
			     x->requested, f->choice);
			line(o, "  because %s", f->reason);
		} else {
			line_max(o, 2, "pin backend: GDRHOOK_BACKEND=%s would choose %s, because %s",
				 x->requested, f->choice, f->reason);
		}
		if (f->note)
			line_max(o, full ? 0 : 1, "  note: %s", f->note);
	} else {
		text(o, "pin backend: none needed: no RDMA device, nothing to register\n");
		if (full)
			line(o, "  with one, GDRHOOK_BACKEND=%s would choose %s, because %s",
			     x->requested, f->rule, x->reason);
		else
			line_max(o, 1, "  with one, GDRHOOK_BACKEND=%s would choose %s (why: gdrhook-info -r)",
				 x->requested, f->rule);
	}
	if (f->chosen)
		line_max(o, full ? 0 : 1, "  chosen in this process: %s (%s)",
			 f->chosen->name, f->chosen_why);
	if (!full)
		return;
	for (unsigned int b = 0; b < GH_PIN_NBACKENDS; b++)
		line(o, "  %s %s: %s", gh_pin_backend_ops(b)->name,
		     x->usable[b] ? "usable" : "rejected", x->why[b]);
}

static void interception_head(struct out *o, const struct facts *f)
{
	if (!f->active || f->untrusted || f->missed)
		text(o, "interception: INCOMPLETE: the registry would miss allocations (gdrhook-info -r)\n");
	else if (f->unchecked)
		text(o, "interception: not verified: %d of %d routes could not be checked here\n",
		     f->unchecked, GH_ROUTES);
	else
		text(o, "interception: complete: every route reaches gdrhook's wrappers\n");
}

/*
 * The routes view: how a registration is pinned (the backend, each NIC's
 * route for an exact registration) and how a call reaches gdrhook.
 */
static void show_routes(struct out *o, const struct facts *f)
{
	show_backend(o, f, 1);
	if (f->nic_listed) {
		text(o, "\nexact registrations (GDRHOOK_REMOTE_EXPOSURE=exact), per NIC:\n");
		for (int i = 0; i < f->nic_listed; i++)
			line(o, "  %s: %s", f->nic[i].name, f->nic[i].route);
	}
	text(o, "\n");
	interception_head(o, f);
	for (int i = 0; i < GH_ROUTES; i++)
		line(o, "  %s %s: %s", f->r[i].name,
		     f->r[i].state < 0 ? "unchecked" : f->r[i].state ? "ok" : "MISSED",
		     f->r[i].detail);
}

static const char *const cfg_src[] = {
	[GH_CFG_DEFAULT] = "default",
	[GH_CFG_ENV] = "environment",
	[GH_CFG_BAD_ENV] = "default (the environment's value is not valid)",
};

/* Set in the environment (validly or not), or not at its default. */
static int cfg_changed(const struct gh_config_row *r)
{
	return r->source != GH_CFG_DEFAULT ||
	       strcmp(r->value ? r->value : "", r->def ? r->def : "");
}

/*
 * The configuration: every variable and its meaning (all), or only what
 * differs from the defaults, at most SUM_CONFIG lines of it (the summary).
 */
#define SUM_CONFIG	5

static void show_config(struct out *o, int all)
{
	struct gh_config_row r;
	unsigned int shown = 0, more = 0, i;
	char doc[2048];
	const char *u;

	if (all) {
		text(o, "configuration (source, then meaning):\n");
	} else {
		for (i = 0; !gh_config_row(i, &r); i++)
			more += cfg_changed(&r);
		for (i = 0; gh_config_unknown(i); i++)
			more++;
		if (!more) {
			text(o, "configuration: the defaults (every variable: gdrhook-info -c)\n");
			return;
		}
		text(o, "configuration, where not the default (every variable: gdrhook-info -c):\n");
	}
	for (i = 0; !gh_config_row(i, &r); i++) {
		if (!all && !cfg_changed(&r))
			continue;
		if (!all && ++shown > SUM_CONFIG)
			continue;
		line(o, "  GDRHOOK_%s=%s (%s)", r.name, r.value ? r.value : "",
		     cfg_src[r.source]);
		if (all)
			line(o, INFO_CONT "%s", unmark(r.doc, doc, sizeof(doc)));
	}
	/* Typos: set, but not a variable gdrhook reads. */
	for (i = 0; (u = gh_config_unknown(i)); i++)
		if (all || ++shown <= SUM_CONFIG)
			line_max(o, all ? 0 : 1, "  %s (not a gdrhook variable: ignored)", u);
	if (!all && shown > SUM_CONFIG)
		text(o, "  and %u more (gdrhook-info -c)\n", shown - SUM_CONFIG);
}

/*
 * The summary: one screen whatever the machine, its length bounded by
 * construction: the verdict and its advice, 2 lines of versions, the GPUs
 * (a line each up to SUM_GPUS, then one), the RDMA devices (the same, up to
 * SUM_NICS), the routes of an exact registration (one per distinct route
 * up to SUM_ROUTES, then one), the backend in at most 4, interception in
 * 1, the variables that differ in at most SUM_CONFIG + 2, and the pointer
 * to the views: 40 lines at most.
 */
#define SUM_GPUS	8
#define SUM_NICS	8
#define SUM_ROUTES	2

static void show_summary(struct out *o, const struct facts *f)
{
	char g[320];
	int shown = 0;

	show_versions(o, f, 1);
	gpus_head(o, f, 1);
	for (int i = 0; i < f->ngpu && i < SUM_GPUS; i++) {
		gpu_text(&f->gpu[i], g, sizeof(g));
		line_max(o, 1, "  GPU %d: %s", i, g);
	}
	if (f->ngpu > SUM_GPUS)
		text(o, "  and %d more GPUs (gdrhook-info -d)\n", f->ngpu - SUM_GPUS);
	if (*f->rdma_why)
		line_max(o, 1, "  RDMA devices: none (%s)", f->rdma_why);
	for (int i = 0; i < f->nic_listed && i < SUM_NICS; i++)
		line_max(o, 1, "  RDMA %s: DMA-BUF import %s, memory windows %s",
			 f->nic[i].name, yes_no(f->nic[i].import),
			 yes_no(f->nic[i].win));
	if (f->nnic > SUM_NICS)
		text(o, "  and %d more RDMA devices (gdrhook-info -d)\n",
		     f->nnic - SUM_NICS);
	/* The route of an exact registration, once per distinct route. */
	for (int i = 0; i < f->nic_listed; i++) {
		int seen = 0, k = 0;

		for (int j = 0; j < i && !seen; j++)
			seen = !strcmp(f->nic[j].route, f->nic[i].route);
		if (seen)
			continue;
		if (++shown > SUM_ROUTES) {
			text(o, "  other routes on other NICs (gdrhook-info -r)\n");
			break;
		}
		for (int j = i; j < f->nic_listed; j++)
			k += !strcmp(f->nic[j].route, f->nic[i].route);
		if (f->nic_listed == 1)
			line_max(o, 1, "  exact registration: %s", f->nic[i].route);
		else
			line_max(o, 1, "  exact registration on %s%s: %s",
				 f->nic[i].name, k > 1 ? " and alike" : "",
				 f->nic[i].route);
	}
	show_backend(o, f, 0);
	interception_head(o, f);
	show_config(o, 0);
	text(o, "details: gdrhook-info -d devices, -r routes, -c configuration, -a all, --json\n");
}

/* ------------------------------------------------------------- JSON */

static void json_report(struct out *o, const struct facts *f, const char *v)
{
	struct gh_config_row r;
	char doc[2048], name[64];

	j_open(o, NULL, '{');
	j_str(o, "verdict", v);

	j_open(o, "version", '{');
	j_str(o, "library", GH_VERSION);
	j_u64(o, "api", GDRHOOK_API_VERSION);
	j_u64(o, "log_format", GH_EV_FORMAT_VERSION);
	j_open(o, "gdrpin", '{');
	j_bool(o, "present", f->pin.present);
	if (f->pin.present) {
		j_u64(o, "abi_major", f->pin.major);
		j_u64(o, "abi_minor", f->pin.minor);
		j_u64(o, "caps", f->pin.caps);
	}
	j_str(o, "where", f->pin.why);
	j_close(o, '}');
	j_close(o, '}');

	j_open(o, "cuda", '{');
	if (f->driver)
		j_u64(o, "driver_version", (uint64_t)f->driver);
	j_str(o, "error", *f->cuda_why ? f->cuda_why : NULL);
	j_open(o, "gpus", '[');
	for (int i = 0; i < f->ngpu; i++) {
		const struct gpu *g = &f->gpu[i];

		j_open(o, NULL, '{');
		j_u64(o, "index", (uint64_t)i);
		j_str(o, "name", g->name);
		j_str(o, "pci", g->pci[0] ? g->pci : NULL);
		j_tri(o, "dmabuf", g->dmabuf);
		j_u64(o, "bar1_bytes", g->bar1);
		j_close(o, '}');
	}
	j_close(o, ']');
	j_close(o, '}');

	j_open(o, "rdma", '{');
	j_str(o, "error", *f->rdma_why ? f->rdma_why : NULL);
	j_open(o, "devices", '[');
	for (int i = 0; i < f->nic_listed; i++) {
		const struct nic *d = &f->nic[i];

		j_open(o, NULL, '{');
		j_str(o, "name", d->name);
		j_tri(o, "dmabuf_import", d->import);
		j_str(o, "why", d->dwhy);
		j_tri(o, "memory_windows", d->win);
		j_str(o, "memory_windows_why", d->wwhy);
		j_str(o, "exact_route", d->route);
		j_close(o, '}');
	}
	j_close(o, ']');
	j_close(o, '}');

	j_open(o, "backend", '{');
	j_str(o, "requested", f->x.requested);
	j_str(o, "choice", f->choice);
	j_str(o, "choice_with_rdma", f->rule);
	j_str(o, "reason", f->choice ? f->reason : "no RDMA device: nothing to register");
	j_str(o, "note", f->note);
	j_str(o, "chosen_in_process", f->chosen ? f->chosen->name : NULL);
	j_open(o, "verdicts", '[');
	for (unsigned int b = 0; b < GH_PIN_NBACKENDS; b++) {
		j_open(o, NULL, '{');
		j_str(o, "name", gh_pin_backend_ops(b)->name);
		j_bool(o, "usable", f->x.usable[b]);
		j_str(o, "why", f->x.why[b]);
		j_close(o, '}');
	}
	j_close(o, ']');
	j_close(o, '}');

	j_open(o, "interception", '{');
	j_bool(o, "complete", complete(f));
	j_u64(o, "unchecked", (uint64_t)f->unchecked);
	j_bool(o, "untrusted", f->untrusted);
	j_open(o, "routes", '[');
	for (int i = 0; i < GH_ROUTES; i++) {
		j_open(o, NULL, '{');
		j_str(o, "route", f->r[i].name);
		j_tri(o, "ours", f->r[i].state);
		j_str(o, "detail", f->r[i].detail);
		j_close(o, '}');
	}
	j_close(o, ']');
	j_close(o, '}');

	j_open(o, "config", '[');
	for (unsigned int i = 0; !gh_config_row(i, &r); i++) {
		gh_str_printf(name, sizeof(name), "GDRHOOK_%s", r.name);
		j_open(o, NULL, '{');
		j_str(o, "name", name);
		j_str(o, "value", r.value && *r.value ? r.value : NULL);
		j_str(o, "source", r.source == GH_CFG_ENV ?
		      "environment" : "default");
		j_bool(o, "invalid_in_environment", r.source == GH_CFG_BAD_ENV);
		j_str(o, "meaning", unmark(r.doc, doc, sizeof(doc)));
		j_close(o, '}');
	}
	j_close(o, ']');
	j_open(o, "config_unknown", '[');
	for (unsigned int i = 0; gh_config_unknown(i); i++)
		j_str(o, NULL, gh_config_unknown(i));
	j_close(o, ']');

	j_close(o, '}');
	gh_buf_putc(&o->b, '\n');
}

/* ------------------------------------------------------------ report */

#define INFO_VIEWS	(GDRHOOK_INFO_DEVICES | GDRHOOK_INFO_CONFIG | \
			 GDRHOOK_INFO_ROUTES)

static void report(struct out *o, const struct facts *f, unsigned int flags)
{
	char v[256], next[192];
	int sep = 0;

	verdict(f, v, sizeof(v), next, sizeof(next));
	if (o->json) {
		json_report(o, f, v);
		return;
	}
	line_max(o, 1, "%s", v);
	if (*next)
		line_max(o, 1, "%s", next);
	text(o, "\n");
	if (!(flags & INFO_VIEWS)) {
		show_summary(o, f);
		return;
	}
	if (flags & GDRHOOK_INFO_DEVICES) {
		show_versions(o, f, 0);
		show_devices(o, f);
		sep = 1;
	}
	if (flags & GDRHOOK_INFO_ROUTES) {
		if (sep)
			text(o, "\n");
		show_routes(o, f);
		sep = 1;
	}
	if (flags & GDRHOOK_INFO_CONFIG) {
		if (sep)
			text(o, "\n");
		show_config(o, 1);
	}
}

GH_EXPORT int gdrhook_info(int fd, unsigned int flags)
{
	static struct out o;	/* 16 KiB: not on the caller's stack */
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	struct facts *f;
	int was, err;

	if (flags & ~(GDRHOOK_INFO_JSON | INFO_VIEWS))
		return -EINVAL;
	/* A tool's call: the facts (some 50 KiB) are not kept in every process. */
	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	gh_init();
	pthread_mutex_lock(&lock);
	memset(&o, 0, offsetof(struct out, buf));
	o.fd = fd;
	o.json = !!(flags & GDRHOOK_INFO_JSON);
	o.first = 1;
	gh_buf_init(&o.b, o.buf, sizeof(o.buf));
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
	report(&o, f, flags);
	flush(&o);
	err = o.err;
	pthread_mutex_unlock(&lock);
	free(f);
	return err;
}
