/* SPDX-License-Identifier: MIT */
/*
 * gdrhook-info --json: the verdict and every fact as one JSON object
 * (what tools read; the text views are for people).
 */
#include <stdint.h>

#include "base/base.h"
#include "evlog/evlog.h"
#include "pin/pin.h"
#include "info_impl.h"

static void j_key(struct out *o, const char *key)
{
	gh_info_room(o);
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

/*
 * Complete only when every route was checked and reaches a wrapper; a
 * route that could not be called (no driver, no runtime) leaves the
 * answer open, and says so.
 */
static int complete(const struct facts *f)
{
	return f->active && !f->untrusted && !f->missed && !f->unchecked;
}

void gh_info_json(struct out *o, const struct facts *f, const char *v)
{
	struct gh_config_row r;
	char doc[2048], name[64];

	j_open(o, NULL, '{');
	j_str(o, "verdict", v);

	j_open(o, "version", '{');
	j_str(o, "library", gdrhook_version());
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
		gh_str_printf(name, sizeof(name), "GDRHOOK_%s", r.via ? r.via : "");
		j_str(o, "deprecated_name", r.via ? name : NULL);
		j_str(o, "meaning", gh_info_unmark(r.doc, doc, sizeof(doc)));
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
