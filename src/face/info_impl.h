/* SPDX-License-Identifier: MIT */
/*
 * gdrhook-info's parts (gdrhook_info(), info.c): every fact is found
 * first (info_facts.c), then written as the verdict and the views
 * (info_view.c) or as JSON (info_json.c), through one buffered writer
 * (info_out.c).  All of it runs under gdrhook_info()'s lock.
 */
#ifndef GH_INFO_IMPL_H
#define GH_INFO_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "pin/pin.h"
#include "routes.h"

struct out {
	int fd, json, err;
	int first;		/* JSON: no comma before the next member */
	struct gh_buf b;
	char buf[16384];
};

/* The report fits a terminal: lines longer than this wrap. */
#define INFO_COLS	100
#define INFO_CONT	"      "	/* a wrapped line's indent */

#define INFO_VIEWS	(GDRHOOK_INFO_DEVICES | GDRHOOK_INFO_CONFIG | \
			 GDRHOOK_INFO_ROUTES)

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

/* info_out.c: the report's text, buffered, written to o->fd. */
void gh_info_flush(struct out *o);
void gh_info_room(struct out *o);
void gh_info_text(struct out *o, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void gh_info_line(struct out *o, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* At most maxl lines: the summary's length is bounded by construction. */
void gh_info_line_max(struct out *o, unsigned int maxl, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
const char *gh_info_unmark(const char *s, char *buf, size_t cap);

/* info_facts.c: every fact, found before anything is written. */
void gh_info_gather(struct facts *f);

/* info_view.c: the verdict, then the summary, the views asked for or
 * the JSON. */
void gh_info_report(struct out *o, const struct facts *f, unsigned int flags);

/* info_json.c: the facts and the verdict @v as one JSON object. */
void gh_info_json(struct out *o, const struct facts *f, const char *v);

#endif
