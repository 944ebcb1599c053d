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
		gh_cfg.log_path ? gh_cfg.log_path : "off (GDRHOOK_LOG unset)");
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
 * lines of at most INFO_COLS columns; continuations indented.
 */
static void line(struct out *o, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void line(struct out *o, const char *fmt, ...)
{
	static char l[2048];	/* gdrhook_info() holds its lock */
	struct gh_buf lb;
	const size_t cont = sizeof(INFO_CONT) - 1;
	size_t width = INFO_COLS;
	const char *p;
	va_list ap;

	gh_buf_init(&lb, l, sizeof(l));
	va_start(ap, fmt);
	gh_buf_vprintf(&lb, fmt, ap);
	va_end(ap);
	gh_buf_putc(&lb, '\0');
	l[sizeof(l) - 1] = '\0';
	p = l;
	for (;;) {
		size_t n = strlen(p), cut;

		if (n <= width) {
			text(o, "%s\n", p);
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
		gh_buf_puts(&o->b, INFO_CONT);
		p += cut;
		while (*p == ' ')
			p++;
		if (!*p)
			return;
		width = INFO_COLS - cont;
	}
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

/* ----------------------------------------------------------- versions */

struct gdrpin_state {
	int present;
	unsigned int major, minor;
	uint64_t caps;
	char why[128];
};

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

static void versions(struct out *o)
{
	struct gdrpin_state g;

	gdrpin_probe(&g);
	if (o->json) {
		j_open(o, "version", '{');
		j_str(o, "library", GH_VERSION);
		j_u64(o, "api", GDRHOOK_API_VERSION);
		j_u64(o, "log_format", GH_EV_FORMAT_VERSION);
		j_open(o, "gdrpin", '{');
		j_bool(o, "present", g.present);
		if (g.present) {
			j_u64(o, "abi_major", g.major);
			j_u64(o, "abi_minor", g.minor);
			j_u64(o, "caps", g.caps);
		}
		j_str(o, "where", g.why);
		j_close(o, '}');
		j_close(o, '}');
		return;
	}
	line(o, "gdrhook %s (API %u, event log format %u), state: %s", GH_VERSION,
	     GDRHOOK_API_VERSION, GH_EV_FORMAT_VERSION,
	     gh_state == GH_STATE_ACTIVE ? "active" :
	     "pass-through (GDRHOOK_ENABLE=0 or init failed)");
	if (g.present)
		line(o, "gdrpin: ABI %u.%u, caps %#llx (%s)", g.major, g.minor,
		     (unsigned long long)g.caps, g.why);
	else
		line(o, "gdrpin: not present (%s)", g.why);
}

/* ------------------------------------------------------ configuration */

static void configuration(struct out *o)
{
	static const char *const src[] = {
		[GH_CFG_DEFAULT] = "default",
		[GH_CFG_ENV] = "environment",
		[GH_CFG_BAD_ENV] = "default (the environment's value is not valid)",
	};
	struct gh_config_row r;
	char name[64];

	if (o->json)
		j_open(o, "config", '[');
	else
		text(o, "\nconfiguration (source, then meaning):\n");
	for (unsigned int i = 0; !gh_config_row(i, &r); i++) {
		gh_str_printf(name, sizeof(name), "GDRHOOK_%s", r.name);
		if (o->json) {
			j_open(o, NULL, '{');
			j_str(o, "name", name);
			j_str(o, "value", *r.value ? r.value : NULL);
			j_str(o, "source", r.source == GH_CFG_ENV ?
			      "environment" : "default");
			j_bool(o, "invalid_in_environment",
			       r.source == GH_CFG_BAD_ENV);
			j_str(o, "meaning", r.doc);
			j_close(o, '}');
		} else {
			line(o, "  %s=%s (%s)", name, *r.value ? r.value : "",
			     src[r.source]);
			line(o, INFO_CONT "%s", r.doc);
		}
	}
	if (o->json) {
		j_close(o, ']');
		j_open(o, "config_unknown", '[');
	}
	/* Typos: set, but not a variable gdrhook reads. */
	for (unsigned int i = 0; gh_config_unknown(i); i++) {
		if (o->json)
			j_str(o, NULL, gh_config_unknown(i));
		else
			text(o, "  %s (not a gdrhook variable: ignored)\n",
			     gh_config_unknown(i));
	}
	if (o->json)
		j_close(o, ']');
}

/* ------------------------------------------------------------- GPUs */

struct gpu {
	char name[128], pci[32];
	int dmabuf;		/* -1: unknown */
	uint64_t bar1;		/* 0: unknown */
	const char *bar1_src;	/* src/pin/bar.c: sysfs, nvml or unknown */
};

typedef CUresult (*cu_int_fn)(int *);
typedef CUresult (*cu_init_fn)(unsigned int);
typedef CUresult (*cu_name_fn)(char *, int, CUdevice);
typedef CUresult (*cu_attr_fn)(int *, CUdevice_attribute, CUdevice);

static void gpus(struct out *o)
{
	void *h = gh_libcuda_handle();
	cu_init_fn init = h ? (cu_init_fn)gh_real_dlsym(h, "cuInit") : NULL;
	cu_int_fn ver = h ? (cu_int_fn)gh_real_dlsym(h, "cuDriverGetVersion") : NULL;
	cu_int_fn count = h ? (cu_int_fn)gh_real_dlsym(h, "cuDeviceGetCount") : NULL;
	cu_name_fn name = h ? (cu_name_fn)gh_real_dlsym(h, "cuDeviceGetName") : NULL;
	cu_name_fn pci = h ? (cu_name_fn)gh_real_dlsym(h, "cuDeviceGetPCIBusId") : NULL;
	cu_attr_fn attr = h ? (cu_attr_fn)gh_real_dlsym(h, "cuDeviceGetAttribute") : NULL;
	char why[160] = "", e[32];
	int n = 0, v = 0;
	CUresult rc;

	if (!h) {
		gh_str_printf(why, sizeof(why), "%s cannot be loaded",
		    gh_cfg.libcuda ? gh_cfg.libcuda : "libcuda.so.1");
	} else if (!init || !count || !name) {
		gh_str_printf(why, sizeof(why), "the driver lacks cuInit/cuDeviceGetCount/cuDeviceGetName");
	} else if ((rc = init(0)) != CUDA_SUCCESS) {
		gh_str_printf(why, sizeof(why), "cuInit failed: %s",
		    gh_cu_errname(h, rc, e, sizeof(e)));
	} else if ((rc = count(&n)) != CUDA_SUCCESS) {
		gh_str_printf(why, sizeof(why), "cuDeviceGetCount failed: %s",
		    gh_cu_errname(h, rc, e, sizeof(e)));
		n = 0;
	}
	if (ver && ver(&v) != CUDA_SUCCESS)
		v = 0;
	if (o->json) {
		j_open(o, "cuda", '{');
		if (v)
			j_u64(o, "driver_version", (uint64_t)v);
		j_str(o, "error", *why ? why : NULL);
		j_open(o, "gpus", '[');
	} else {
		text(o, "\ndevices:\n");
		if (*why)
			line(o, "  GPUs: none (%s)", why);
		else
			text(o, "  CUDA driver %d.%d, %d GPU%s\n", v / 1000,
			     v % 1000 / 10, n, n == 1 ? "" : "s");
	}
	for (int i = 0; i < n && i < 64; i++) {
		struct gpu g = { .dmabuf = -1 };
		char bar[64];
		int d = 0;

		if (name(g.name, sizeof(g.name), i) != CUDA_SUCCESS)
			gh_str_printf(g.name, sizeof(g.name), "?");
		if (!pci || pci(g.pci, sizeof(g.pci), i) != CUDA_SUCCESS)
			g.pci[0] = '\0';
		if (attr && attr(&d, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED,
				 i) == CUDA_SUCCESS)
			g.dmabuf = !!d;
		g.bar1_src = "unknown";
		if (g.pci[0])
			g.bar1 = gh_bar1_size(g.pci, &g.bar1_src);
		if (o->json) {
			j_open(o, NULL, '{');
			j_u64(o, "index", (uint64_t)i);
			j_str(o, "name", g.name);
			j_str(o, "pci", g.pci[0] ? g.pci : NULL);
			if (g.dmabuf >= 0)
				j_bool(o, "dmabuf", g.dmabuf);
			else
				j_str(o, "dmabuf", NULL);
			j_u64(o, "bar1_bytes", g.bar1);
			j_close(o, '}');
			continue;
		}
		if (g.bar1)
			gh_str_printf(bar, sizeof(bar), "%llu MiB (%s)",
			    (unsigned long long)(g.bar1 >> 20), g.bar1_src);
		else
			gh_str_printf(bar, sizeof(bar), "unknown");
		line(o, "  GPU %d: %s, %s, DMA-BUF export %s, BAR1 %s", i,
		     g.name, g.pci[0] ? g.pci : "?",
		     g.dmabuf < 0 ? "unknown" : g.dmabuf ? "yes" : "no", bar);
	}
	if (o->json) {
		j_close(o, ']');
		j_close(o, '}');
	}
}

/* ------------------------------------------------------- RDMA devices */

typedef struct ibv_device **(*get_list_fn)(int *);
typedef void (*free_list_fn)(struct ibv_device **);
typedef const char *(*dev_name_fn)(struct ibv_device *);
typedef struct ibv_context *(*open_fn)(struct ibv_device *);
typedef int (*close_fn)(struct ibv_context *);
typedef struct ibv_pd *(*alloc_pd_fn)(struct ibv_context *);
typedef int (*dealloc_pd_fn)(struct ibv_pd *);
typedef struct ibv_mr *(*reg_dmabuf_fn)(struct ibv_pd *, uint64_t, size_t,
					uint64_t, int, int);
typedef int (*dereg_fn)(struct ibv_mr *);

struct verbs_api {
	get_list_fn get_list;
	free_list_fn free_list;
	dev_name_fn dev_name;
	open_fn open;
	close_fn close;
	alloc_pd_fn alloc_pd;
	dealloc_pd_fn dealloc_pd;
	reg_dmabuf_fn reg_dmabuf;
	dereg_fn dereg;
	int (*query_device)(struct ibv_context *, struct ibv_device_attr *);
};

/*
 * Can exact exposure use memory windows on the device (src/pin/mwin.c)?  The
 * capability the first registration probes; its first bind proves it.
 */
static int windows_cap(const struct verbs_api *v, struct ibv_device *dev,
		       char *why, size_t cap)
{
	struct ibv_device_attr da;
	struct ibv_context *ctx;
	int yes = 0, err;

	if (!gh_cfg.windows) {
		gh_str_printf(why, cap, "off: GDRHOOK_WINDOWS=0");
		return 0;
	}
	if (!v->query_device || !(ctx = v->open(dev))) {
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
	v->close(ctx);
	return err ? -1 : yes;
}

/*
 * Does the device import DMA-BUF?  A registration with no file (-1)
 * tells: a provider without it answers EOPNOTSUPP before looking at the
 * fd, one with it fails on the fd (EBADF).
 */
static int dmabuf_import(const struct verbs_api *v, struct ibv_device *dev,
			 char *why, size_t cap)
{
	struct ibv_context *ctx = v->open(dev);
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
		v->close(ctx);
		return -1;
	}
	if (!v->reg_dmabuf) {
		gh_str_printf(why, cap, "libibverbs has no ibv_reg_dmabuf_mr");
	} else {
		errno = 0;
		mr = v->reg_dmabuf(pd, 0, 65536, 0, -1, IBV_ACCESS_LOCAL_WRITE);
		e = errno;
		if (mr) {
			if (v->dereg)
				v->dereg(mr);
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
	v->close(ctx);
	return yes;
}

/* Kept open: the backend probe (gh_vreal_have) looks for this copy. */
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
	else
		gh_mw_route_text(win, b, buf, cap);
}

static void *verbs_handle;
/* RDMA devices found, and those that import DMA-BUF (for backend()). */
static int rdma_found, rdma_import;

static void rdma(struct out *o)
{
	struct verbs_api v = { 0 };
	struct ibv_device **list = NULL;
	char why[160] = "";
	int n = 0;

	rdma_found = rdma_import = 0;

	if (!verbs_handle)
		verbs_handle = dlopen("libibverbs.so.1", RTLD_NOW);
	if (verbs_handle) {
		void *h = verbs_handle;

		v.get_list = (get_list_fn)gh_real_dlsym(h, "ibv_get_device_list");
		v.free_list = (free_list_fn)gh_real_dlsym(h, "ibv_free_device_list");
		v.dev_name = (dev_name_fn)gh_real_dlsym(h, "ibv_get_device_name");
		v.open = (open_fn)gh_real_dlsym(h, "ibv_open_device");
		v.close = (close_fn)gh_real_dlsym(h, "ibv_close_device");
		v.alloc_pd = (alloc_pd_fn)gh_real_dlsym(h, "ibv_alloc_pd");
		v.dealloc_pd = (dealloc_pd_fn)gh_real_dlsym(h, "ibv_dealloc_pd");
		v.reg_dmabuf = (reg_dmabuf_fn)gh_real_dlsym(h, "ibv_reg_dmabuf_mr");
		v.dereg = (dereg_fn)gh_real_dlsym(h, "ibv_dereg_mr");
		v.query_device = (int (*)(struct ibv_context *,
					  struct ibv_device_attr *))
				 gh_real_dlsym(h, "ibv_query_device");
	}
	if (!verbs_handle)
		gh_str_printf(why, sizeof(why), "no libibverbs.so.1");
	else if (!v.get_list || !v.free_list || !v.dev_name || !v.open ||
		 !v.close)
		gh_str_printf(why, sizeof(why), "libibverbs.so.1 lacks the device calls");
	else if (!(list = v.get_list(&n)) || n <= 0)
		gh_str_printf(why, sizeof(why), "no RDMA device (ibv_get_device_list: %s)",
		    list ? "empty" : strerror(errno));
	if (o->json) {
		j_open(o, "rdma", '{');
		j_str(o, "error", *why ? why : NULL);
		j_open(o, "devices", '[');
	} else if (*why) {
		line(o, "  RDMA devices: none (%s)", why);
	}
	for (int i = 0; list && i < n; i++) {
		char dwhy[GH_PIN_WHY_LEN], wwhy[GH_PIN_WHY_LEN], route[320];
		int yes = dmabuf_import(&v, list[i], dwhy, sizeof(dwhy));
		int win = windows_cap(&v, list[i], wwhy, sizeof(wwhy));
		const char *nm = v.dev_name(list[i]);

		exact_route(win, wwhy, yes, route, sizeof(route));

		rdma_found++;
		rdma_import += yes > 0;

		if (o->json) {
			j_open(o, NULL, '{');
			j_str(o, "name", nm);
			if (yes >= 0)
				j_bool(o, "dmabuf_import", yes);
			else
				j_str(o, "dmabuf_import", NULL);
			j_str(o, "why", dwhy);
			if (win >= 0)
				j_bool(o, "memory_windows", win);
			else
				j_str(o, "memory_windows", NULL);
			j_str(o, "memory_windows_why", wwhy);
			j_str(o, "exact_route", route);
			j_close(o, '}');
		} else {
			line(o, "  RDMA %s: DMA-BUF import %s (%s)", nm ? nm : "?",
			     yes < 0 ? "unknown" : yes ? "yes" : "no", dwhy);
			line(o, "    exact exposure: %s", route);
		}
	}
	if (list)
		v.free_list(list);
	if (o->json) {
		j_close(o, ']');
		j_close(o, '}');
	}
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
static void backend(struct out *o)
{
	struct gh_pin_explanation x;
	const char *why;
	const struct gh_pin_ops *c = gh_pin_chosen(&why);
	const char *rule, *choice, *note = NULL;
	char reason[sizeof(x.reason) + 160];
	int auto_ = 0;

	gh_pin_explain(-1, 1, &x);
	/* The verdict is the GPU's and libibverbs'; the NICs have the last word. */
	if (x.usable[GH_PIN_DMABUF] && rdma_found && !rdma_import) {
		char gpu[GH_PIN_WHY_LEN];

		gh_str_printf(gpu, sizeof(gpu), "%s", x.why[GH_PIN_DMABUF]);
		x.usable[GH_PIN_DMABUF] = 0;
		gh_str_printf(x.why[GH_PIN_DMABUF], sizeof(x.why[GH_PIN_DMABUF]),
		    "no RDMA device here imports DMA-BUF (%s)", gpu);
	}
	rule = gh_pin_backend_ops(x.chosen)->name;
	choice = rdma_found ? rule : NULL;
	gh_str_printf(reason, sizeof(reason), "%s", x.reason);
	auto_ = gh_cfg.backend == GH_CFG_BACKEND_AUTO;
	if (x.chosen == GH_PIN_DMABUF && rdma_found && !rdma_import) {
		if (auto_) {
			choice = gh_pin_backend_ops(gh_pin_auto_fallback())->name;
			gh_str_printf(reason, sizeof(reason),
			    "auto: no RDMA device here imports DMA-BUF, so the NIC-import probe at the first registration falls back from dmabuf to %s",
			    choice);
		} else {
			note = "no RDMA device found here imports DMA-BUF: dmabuf registrations would fail on them";
		}
	}
	if (o->json) {
		j_open(o, "backend", '{');
		j_str(o, "requested", x.requested);
		j_str(o, "choice", choice);
		j_str(o, "choice_with_rdma", rule);
		j_str(o, "reason", choice ? reason : "no RDMA device: nothing to register");
		j_str(o, "note", note);
		j_str(o, "chosen_in_process", c ? c->name : NULL);
		j_open(o, "verdicts", '[');
	} else if (choice) {
		text(o, "\npin backend: GDRHOOK_BACKEND=%s would choose %s\n",
		     x.requested, choice);
		line(o, "  because %s", reason);
		if (note)
			line(o, "  note: %s", note);
		if (c)
			line(o, "  chosen in this process: %s (%s)", c->name, why);
	} else {
		text(o, "\npin backend: none needed: no RDMA device, nothing to register\n");
		line(o, "  with one, GDRHOOK_BACKEND=%s would choose %s, because %s",
		     x.requested, rule, x.reason);
		if (c)
			line(o, "  chosen in this process: %s (%s)", c->name, why);
	}
	for (unsigned int b = 0; b < GH_PIN_NBACKENDS; b++) {
		const char *nm = gh_pin_backend_ops(b)->name;

		if (o->json) {
			j_open(o, NULL, '{');
			j_str(o, "name", nm);
			j_bool(o, "usable", x.usable[b]);
			j_str(o, "why", x.why[b]);
			j_close(o, '}');
		} else {
			line(o, "  %s %s: %s", nm,
			     x.usable[b] ? "usable" : "rejected", x.why[b]);
		}
	}
	if (o->json) {
		j_close(o, ']');
		j_close(o, '}');
	}
}

/* ------------------------------------------------------- interception */

/*
 * Complete only when every route was checked and reaches a wrapper; a
 * route that could not be called (no driver, no runtime) leaves the
 * answer open, and says so.
 */
static void interception(struct out *o)
{
	struct gh_route_check r[GH_ROUTES];
	int missed = 0, unchecked = 0, untrusted, active;

	gh_routes_check(r);
	untrusted = __atomic_load_n(&gh_untrusted, __ATOMIC_RELAXED);
	active = gh_state == GH_STATE_ACTIVE;
	for (int i = 0; i < GH_ROUTES; i++) {
		missed += r[i].state == 0;
		unchecked += r[i].state < 0;
	}
	if (o->json) {
		j_open(o, "interception", '{');
		j_bool(o, "complete", active && !untrusted && !missed && !unchecked);
		j_u64(o, "unchecked", (uint64_t)unchecked);
		j_bool(o, "untrusted", untrusted);
		j_open(o, "routes", '[');
		for (int i = 0; i < GH_ROUTES; i++) {
			j_open(o, NULL, '{');
			j_str(o, "route", r[i].name);
			if (r[i].state >= 0)
				j_bool(o, "ours", r[i].state);
			else
				j_str(o, "ours", NULL);
			j_str(o, "detail", r[i].detail);
			j_close(o, '}');
		}
		j_close(o, ']');
		j_close(o, '}');
		return;
	}
	if (!active || untrusted || missed)
		text(o, "\ninterception: INCOMPLETE: the registry would miss allocations (see below)\n");
	else if (unchecked)
		text(o, "\ninterception: not verified: %d of %d routes could not be checked here\n",
		     unchecked, GH_ROUTES);
	else
		text(o, "\ninterception: complete: every route reaches gdrhook's wrappers\n");
	for (int i = 0; i < GH_ROUTES; i++)
		line(o, "  %s %s: %s", r[i].name,
		     r[i].state < 0 ? "unchecked" : r[i].state ? "ok" : "MISSED",
		     r[i].detail);
}

GH_EXPORT int gdrhook_info(int fd, unsigned int flags)
{
	static struct out o;	/* 16 KiB: not on the caller's stack */
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	int was, err;

	if (flags & ~GDRHOOK_INFO_JSON)
		return -EINVAL;
	gh_init();
	pthread_mutex_lock(&lock);
	memset(&o, 0, offsetof(struct out, buf));
	o.fd = fd;
	o.json = !!(flags & GDRHOOK_INFO_JSON);
	o.first = 1;
	gh_buf_init(&o.b, o.buf, sizeof(o.buf));
	if (o.json)
		j_open(&o, NULL, '{');
	/* The answers first, the configuration after them. */
	versions(&o);
	/* Devices first: cuInit, and libibverbs loaded for the probe. */
	was = gh_guard_enter();
	gpus(&o);
	rdma(&o);
	backend(&o);
	gh_guard_leave(was);
	/* The routes are called as a program calls them: no guard. */
	interception(&o);
	configuration(&o);
	if (o.json) {
		j_close(&o, '}');
		gh_buf_putc(&o.b, '\n');
	}
	flush(&o);
	err = o.err;
	pthread_mutex_unlock(&lock);
	return err;
}
