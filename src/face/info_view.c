/* SPDX-License-Identifier: MIT */
/*
 * gdrhook-info's text: the verdict (the first line, from the facts
 * alone), then the one-screen summary or the views asked for (devices,
 * routes, configuration); JSON instead when asked (info_json.c).
 */
#include <string.h>

#include "base/base.h"
#include "evlog/evlog.h"
#include "pin/pin.h"
#include "info_impl.h"

static const char *yes_no(int v)
{
	return v < 0 ? "unknown" : v ? "yes" : "no";
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
				      gdrhook_version());
			gh_str_printf(next, ncap, "  unset GDRHOOK_ENABLE, or see the warnings on stderr");
		} else if (f->missed) {
			gh_str_printf(v, cap, "gdrhook %s: NOT ready: %d of %d routes to the CUDA driver miss gdrhook: allocations go untracked",
				      gdrhook_version(), f->missed, GH_ROUTES);
			gh_str_printf(next, ncap, "  load it with LD_PRELOAD, not dlopen; the routes: gdrhook-info -r");
		} else if (f->untrusted) {
			gh_str_printf(v, cap, "gdrhook %s: NOT ready: the registry is not trusted here: registrations pass through uncached",
				      gdrhook_version());
		} else if (!f->ngpu && !f->nnic) {
			gh_str_printf(v, cap, "gdrhook %s: no GPU and no RDMA device here: nothing to track or cache",
				      gdrhook_version());
			gh_str_printf(next, ncap, "  to try it without them, in a build tree: LD_LIBRARY_PATH=build/fake:build/fakeverbs (the doubles)");
		} else if (!f->ngpu) {
			gh_str_printf(v, cap, "gdrhook %s: %s, no GPU: host memory registrations pass through, nothing to cache",
				      gdrhook_version(), n);
		} else if (!f->nnic) {
			gh_str_printf(v, cap, "gdrhook %s: %s, no RDMA device: allocations tracked, nothing to register",
				      gdrhook_version(), g);
		} else if (!strcmp(be, "none")) {
			gh_str_printf(v, cap, "gdrhook %s: %s, %s, no pin backend: allocations tracked, registrations not cached",
				      gdrhook_version(), g, n);
		} else {
			gh_str_printf(v, cap, "gdrhook %s: ready: %s, %s: %s registrations cached, revoked at free",
				      gdrhook_version(), g, n, be);
		}
		if (strlen(v) <= INFO_COLS)
			break;
	}
}

/* ------------------------------------------------------------- views */

static void show_versions(struct out *o, const struct facts *f,
			  unsigned int maxl)
{
	gh_info_line_max(o, maxl, "gdrhook %s (API %u, event log format %u), state: %s", gdrhook_version(),
	     GDRHOOK_API_VERSION, GH_EV_FORMAT_VERSION,
	     f->active ? "active" :
	     "pass-through (GDRHOOK_ENABLE=0 or init failed)");
	if (f->pin.present)
		gh_info_line_max(o, maxl, "gdrpin: ABI %u.%u, caps %#llx (%s)",
				 f->pin.major, f->pin.minor,
				 (unsigned long long)f->pin.caps, f->pin.why);
	else
		gh_info_line_max(o, maxl, "gdrpin: not present (%s)", f->pin.why);
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
		gh_info_line_max(o, maxl, "  GPUs: none (%s)", f->cuda_why);
	else
		gh_info_text(o, "  CUDA driver %d.%d, %d GPU%s\n", f->driver / 1000,
			     f->driver % 1000 / 10, f->ngpu, f->ngpu == 1 ? "" : "s");
}

/* The devices view: every GPU and RDMA device, in full. */
static void show_devices(struct out *o, const struct facts *f)
{
	char g[320];

	gh_info_text(o, "devices:\n");
	gpus_head(o, f, 0);
	for (int i = 0; i < f->ngpu; i++) {
		gpu_text(&f->gpu[i], g, sizeof(g));
		gh_info_line(o, "  GPU %d: %s", i, g);
	}
	if (*f->rdma_why)
		gh_info_line(o, "  RDMA devices: none (%s)", f->rdma_why);
	for (int i = 0; i < f->nic_listed; i++) {
		const struct nic *d = &f->nic[i];

		gh_info_line(o, "  RDMA %s: DMA-BUF import %s (%s)", d->name,
			     yes_no(d->import), d->dwhy);
		gh_info_line(o, "    memory windows: %s (%s)", yes_no(d->win), d->wwhy);
		gh_info_line(o, "    exact exposure: %s", d->route);
	}
	if (f->nnic > f->nic_listed)
		gh_info_text(o, "  %d more RDMA devices not probed\n",
			     f->nnic - f->nic_listed);
}

static void show_backend(struct out *o, const struct facts *f, int full)
{
	const struct gh_pin_explanation *x = &f->x;

	if (f->choice) {
		if (full) {
			gh_info_text(o, "pin backend: GDRHOOK_BACKEND=%s would choose %s\n",
				     x->requested, f->choice);
			gh_info_line(o, "  because %s", f->reason);
		} else {
			gh_info_line_max(o, 2, "pin backend: GDRHOOK_BACKEND=%s would choose %s, because %s",
					 x->requested, f->choice, f->reason);
		}
		if (f->note)
			gh_info_line_max(o, full ? 0 : 1, "  note: %s", f->note);
	} else {
		gh_info_text(o, "pin backend: none needed: no RDMA device, nothing to register\n");
		if (full)
			gh_info_line(o, "  with one, GDRHOOK_BACKEND=%s would choose %s, because %s",
				     x->requested, f->rule, x->reason);
		else
			gh_info_line_max(o, 1, "  with one, GDRHOOK_BACKEND=%s would choose %s (why: gdrhook-info -r)",
					 x->requested, f->rule);
	}
	if (f->chosen)
		gh_info_line_max(o, full ? 0 : 1, "  chosen in this process: %s (%s)",
				 f->chosen->name, f->chosen_why);
	if (!full)
		return;
	for (unsigned int b = 0; b < GH_PIN_NBACKENDS; b++)
		gh_info_line(o, "  %s %s: %s", gh_pin_backend_ops(b)->name,
			     x->usable[b] ? "usable" : "rejected", x->why[b]);
}

static void interception_head(struct out *o, const struct facts *f)
{
	if (!f->active || f->untrusted || f->missed)
		gh_info_text(o, "interception: INCOMPLETE: the registry would miss allocations (gdrhook-info -r)\n");
	else if (f->unchecked)
		gh_info_text(o, "interception: not verified: %d of %d routes could not be checked here\n",
			     f->unchecked, GH_ROUTES);
	else
		gh_info_text(o, "interception: complete: every route reaches gdrhook's wrappers\n");
}

/*
 * The routes view: how a registration is pinned (the backend, each NIC's
 * route for an exact registration) and how a call reaches gdrhook.
 */
static void show_routes(struct out *o, const struct facts *f)
{
	show_backend(o, f, 1);
	if (f->nic_listed) {
		gh_info_text(o, "\nexact registrations (GDRHOOK_REMOTE_EXPOSURE=exact), per NIC:\n");
		for (int i = 0; i < f->nic_listed; i++)
			gh_info_line(o, "  %s: %s", f->nic[i].name, f->nic[i].route);
	}
	gh_info_text(o, "\n");
	interception_head(o, f);
	for (int i = 0; i < GH_ROUTES; i++)
		gh_info_line(o, "  %s %s: %s", f->r[i].name,
			     f->r[i].state < 0 ? "unchecked" : f->r[i].state ? "ok" : "MISSED",
			     f->r[i].detail);
}

static const char *const cfg_src[] = {
	[GH_CFG_DEFAULT] = "default",
	[GH_CFG_ENV] = "environment",
	[GH_CFG_BAD_ENV] = "default (the environment's value is not valid)",
};

/* Where r's value came from: a deprecated name is said, as the load
 * said it (gh_config_report). */
static const char *cfg_source(const struct gh_config_row *r, char *buf,
			      size_t cap)
{
	if (!r->via)
		return cfg_src[r->source];
	if (r->source == GH_CFG_BAD_ENV)
		gh_str_printf(buf, cap, "default (the value of GDRHOOK_%s, deprecated, is not valid)",
			      r->via);
	else
		gh_str_printf(buf, cap, "from GDRHOOK_%s, deprecated", r->via);
	return buf;
}

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
	char doc[2048], src[96];
	const char *u;

	if (all) {
		gh_info_text(o, "configuration (source, then meaning):\n");
	} else {
		for (i = 0; !gh_config_row(i, &r); i++)
			more += cfg_changed(&r);
		for (i = 0; gh_config_unknown(i); i++)
			more++;
		if (!more) {
			gh_info_text(o, "configuration: the defaults (every variable: gdrhook-info -c)\n");
			return;
		}
		gh_info_text(o, "configuration, where not the default (every variable: gdrhook-info -c):\n");
	}
	for (i = 0; !gh_config_row(i, &r); i++) {
		if (!all && !cfg_changed(&r))
			continue;
		if (!all && ++shown > SUM_CONFIG)
			continue;
		gh_info_line(o, "  GDRHOOK_%s=%s (%s)", r.name, r.value ? r.value : "",
			     cfg_source(&r, src, sizeof(src)));
		if (all)
			gh_info_line(o, INFO_CONT "%s", gh_info_unmark(r.doc, doc, sizeof(doc)));
	}
	/* Typos: set, but not a variable gdrhook reads. */
	for (i = 0; (u = gh_config_unknown(i)); i++)
		if (all || ++shown <= SUM_CONFIG)
			gh_info_line_max(o, all ? 0 : 1, "  %s (not a gdrhook variable: ignored)", u);
	if (!all && shown > SUM_CONFIG)
		gh_info_text(o, "  and %u more (gdrhook-info -c)\n", shown - SUM_CONFIG);
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
		gh_info_line_max(o, 1, "  GPU %d: %s", i, g);
	}
	if (f->ngpu > SUM_GPUS)
		gh_info_text(o, "  and %d more GPUs (gdrhook-info -d)\n", f->ngpu - SUM_GPUS);
	if (*f->rdma_why)
		gh_info_line_max(o, 1, "  RDMA devices: none (%s)", f->rdma_why);
	for (int i = 0; i < f->nic_listed && i < SUM_NICS; i++)
		gh_info_line_max(o, 1, "  RDMA %s: DMA-BUF import %s, memory windows %s",
				 f->nic[i].name, yes_no(f->nic[i].import),
				 yes_no(f->nic[i].win));
	if (f->nnic > SUM_NICS)
		gh_info_text(o, "  and %d more RDMA devices (gdrhook-info -d)\n",
			     f->nnic - SUM_NICS);
	/* The route of an exact registration, once per distinct route. */
	for (int i = 0; i < f->nic_listed; i++) {
		int seen = 0, k = 0;

		for (int j = 0; j < i && !seen; j++)
			seen = !strcmp(f->nic[j].route, f->nic[i].route);
		if (seen)
			continue;
		if (++shown > SUM_ROUTES) {
			gh_info_text(o, "  other routes on other NICs (gdrhook-info -r)\n");
			break;
		}
		for (int j = i; j < f->nic_listed; j++)
			k += !strcmp(f->nic[j].route, f->nic[i].route);
		if (f->nic_listed == 1)
			gh_info_line_max(o, 1, "  exact registration: %s", f->nic[i].route);
		else
			gh_info_line_max(o, 1, "  exact registration on %s%s: %s",
					 f->nic[i].name, k > 1 ? " and alike" : "",
					 f->nic[i].route);
	}
	show_backend(o, f, 0);
	interception_head(o, f);
	show_config(o, 0);
	gh_info_text(o, "details: gdrhook-info -d devices, -r routes, -c configuration, -a all, --json\n");
}

/* ------------------------------------------------------------ report */

void gh_info_report(struct out *o, const struct facts *f, unsigned int flags)
{
	char v[256], next[192];
	int sep = 0;

	verdict(f, v, sizeof(v), next, sizeof(next));
	if (o->json) {
		gh_info_json(o, f, v);
		return;
	}
	gh_info_line_max(o, 1, "%s", v);
	if (*next)
		gh_info_line_max(o, 1, "%s", next);
	gh_info_text(o, "\n");
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
			gh_info_text(o, "\n");
		show_routes(o, f);
		sep = 1;
	}
	if (flags & GDRHOOK_INFO_CONFIG) {
		if (sep)
			gh_info_text(o, "\n");
		show_config(o, 1);
	}
}
