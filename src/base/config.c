// SPDX-License-Identifier: MIT
/*
 * GDRHOOK_* configuration: one table, parsed once from environ at init.
 * The README's variable table is generated from the same rows
 * (scripts/gen-doc.py, `make doc`; `make check` verifies it).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "log.h"

struct gh_config gh_cfg;

enum gh_opt_type {
	GH_OPT_BOOL,
	GH_OPT_BOOL_ALL,	/* a boolean, or "all" (stored as 2) */
	GH_OPT_STR,
	GH_OPT_LEVEL,
	GH_OPT_SIZE,		/* bytes or a count */
	GH_OPT_SIZE_INF,	/* same; "inf" (UCX, libfabric) means 0: no limit */
	GH_OPT_ENUM,		/* one of words[], stored as its index (an int) */
};

struct gh_opt {
	const char *name;	/* without the GDRHOOK_ prefix */
	const char *def;
	enum gh_opt_type type;
	size_t offset;
	const char *doc;
	const char *const *words;	/* GH_OPT_ENUM: NULL-terminated */
};

#define GH_OPT(n, d, t, field, doc) \
	{ n, d, t, offsetof(struct gh_config, field), doc, NULL }
/* words: in the order of the field's enum (config.h) */
#define GH_OPT_WORDS(n, d, field, doc, words) \
	{ n, d, GH_OPT_ENUM, offsetof(struct gh_config, field), doc, words }

/* The words of each enum option, by index (mimalloc, UCX: one table each). */
const char *const gh_cfg_backend_words[] = {
	[GH_CFG_BACKEND_AUTO] = "auto",
	[GH_CFG_BACKEND_DMABUF] = "dmabuf",
	[GH_CFG_BACKEND_PEERMEM] = "peermem",
	[GH_CFG_BACKEND_GDRPIN] = "gdrpin",
	[GH_CFG_BACKEND_NONE] = "none",
	NULL
};
static const char *const exposure_words[] = {
	[GH_CFG_EXPOSURE_EXACT] = "exact",
	[GH_CFG_EXPOSURE_ALLOCATION] = "allocation",
	NULL
};
static const char *const answer_words[] = {
	[GH_CFG_ANSWER_REGISTRY] = "registry",
	[GH_CFG_ANSWER_DRIVER] = "driver",
	NULL
};
static const char *const log_mode_words[] = {
	[GH_CFG_LOG_MODE_DROP] = "drop",
	[GH_CFG_LOG_MODE_BLOCK] = "block",
	NULL
};
static const char *const dmabuf_mapping_words[] = {
	[GH_CFG_DMABUF_MAPPING_AUTO] = "auto",
	[GH_CFG_DMABUF_MAPPING_PCIE] = "pcie",
	[GH_CFG_DMABUF_MAPPING_DEFAULT] = "default",
	NULL
};

static const struct gh_opt gh_opts[] = {
	GH_OPT("ENABLE", "1", GH_OPT_BOOL, enable,
	       "`0` makes gdrhook a pure pass-through: no registry, no log, no caching."),
	GH_OPT("LOG", "", GH_OPT_STR, log_path,
	       "Write the event log (JSON Lines) to this path, or `stderr`; `%p` expands to the pid, `%h` to the host name; a relative path is relative to where the program started. Created `0600`, never through a symlink, never waited for (a FIFO needs its reader first). Unset: no log, and no formatting on any hook path."),
	GH_OPT("LOG_LEVEL", "warn", GH_OPT_LEVEL, log_level,
	       "Diagnostics on stderr: `none`, `error`, `warn`, `info` or `debug` (also `0`-`4`, `warning`, and `trace` as NCCL spells debug)."),
	GH_OPT("LOG_BUFFER", "12m", GH_OPT_SIZE, log_ring_bytes,
	       "Event log buffer per thread, in bytes (suffixes k, m, g; 192 bytes per event, rounded down to a power of two events: the default holds 65536). Events that do not fit are counted and reported at exit (`GDRHOOK_LOG_MODE=drop`) or waited for (`block`)."),
	GH_OPT_WORDS("LOG_MODE", "drop", log_mode,
		     "What a hook does when its event log buffer is full: `drop` counts the event as dropped and goes on; `block` waits for the writer, never losing an event (a hook may then wait on the disk).",
		     log_mode_words),
	GH_OPT("STATS", "0", GH_OPT_BOOL_ALL, stats,
	       "`1` prints the counters to stderr at exit, in processes that used CUDA or verbs; `all` in every process."),
	GH_OPT("VALIDATE", "0", GH_OPT_BOOL, validate,
	       "`1` is audit mode: every event and lookup is cross-checked against the driver (`cuMemGetAddressRange`, buffer ID) and the live set is swept at exit; disagreements become `audit` events and a counter."),
	GH_OPT("LIBCUDA", "libcuda.so.1", GH_OPT_STR, libcuda,
	       "The driver library real entry points are resolved from. One that cannot be loaded or is not a CUDA driver is reported on stderr and `libcuda.so.1` used."),
	GH_OPT("STRICT", "0", GH_OPT_BOOL, strict,
	       "`1` aborts the process when the registry becomes untrusted, instead of running on with caching off."),
	GH_OPT_WORDS("BACKEND", "auto", backend,
	       "How GPU memory is pinned for RDMA: `dmabuf` (DMA-BUF export + `ibv_reg_dmabuf_mr`), `peermem` (plain `ibv_reg_mr`, nvidia-peermem pins), `none` (no registration cache: pass-through), `gdrpin` (the gdrpin kernel module pins and reports revocations, plain `ibv_reg_mr` registers: combine with nvidia-peermem), or `auto` (dmabuf if the device and libibverbs support it, else peermem if loaded, else gdrpin if `/dev/gdrpin` answers, else none; with `exact` exposure, peermem first where the NIC binds memory windows and a peer-memory client registers GPU memory). An unusable choice falls back to none, with the reason logged.",
		     gh_cfg_backend_words),
	GH_OPT("CACHE_MAX_SIZE", "0", GH_OPT_SIZE_INF, cache_max_size,
	       "Most bytes the registration cache keeps pinned (suffixes k, m, g; `0` or `inf`: no limit). Idle registrations are evicted, least recently used first."),
	GH_OPT("CACHE_MAX_COUNT", "0", GH_OPT_SIZE_INF, cache_max_count,
	       "Most registrations the cache keeps (`0` or `inf`: its capacity, 262144). Idle ones are evicted, least recently used first."),
	GH_OPT_WORDS("REMOTE_EXPOSURE", "exact", remote_exposure,
	       "What an rkey of cached GPU memory reaches. `exact`: exactly the range the program registered, until its last MR on that range is deregistered (dereg and `ibv_rereg_mr` act as natively; pins stay cached, so a new registration costs only the NIC's part). `allocation`: the whole allocation, until it is freed or evicted, even after `ibv_dereg_mr` (every later registration inside it is a hit).",
		     exposure_words),
	GH_OPT("WINDOWS", "1", GH_OPT_BOOL, windows,
	       "With `exact` exposure, where the NIC has memory windows: one cached registration per allocation and PD with no remote rights, and per MR a window bound to exactly its range and access (its own rkey, unbound by `ibv_dereg_mr`), so registering costs a work request, not a NIC registration. `0`: a NIC registration per MR."),
	GH_OPT_WORDS("BUFFER_ID", "registry", buffer_id,
	       "`registry`: `cuPointerGetAttribute(s)` answers `CU_POINTER_ATTRIBUTE_BUFFER_ID` of a tracked allocation from the registry (its generation with bit 63 set; no driver call). `driver`: always ask the driver.",
		     answer_words),
	GH_OPT_WORDS("POINTER_QUERIES", "registry", pointer_queries,
	       "`registry`: `cuPointerGetAttribute(s)`, `cudaPointerGetAttributes` and `cuMemGetAddressRange` are answered from the registry for every attribute it knows exactly, and for pointers in no tracked allocation while it is trusted (what the driver says for host memory); the rest goes to the driver. `driver`: ask the driver (`BUFFER_ID` keeps following `GDRHOOK_BUFFER_ID`).",
		     answer_words),
	GH_OPT("SYNC_MEMOPS", "1", GH_OPT_BOOL, sync_memops,
	       "`1`: memory the registration cache pins gets synchronous memory operations (the GPUDirect RDMA guide's ordering rule), once per context with `cuCtxSetFlags(CU_CTX_SYNC_MEMOPS)` where the driver has it, else per allocation with `cuPointerSetAttribute(CU_POINTER_ATTRIBUTE_SYNC_MEMOPS)`. `0`: leave it to the program."),
	GH_OPT("PIN_WHOLE_MAX", "0", GH_OPT_SIZE, pin_whole_max,
	       "Largest allocation (or span of VMM mappings) the cache pins whole on its first registration (suffixes k, m, g); larger ones pin the registered range rounded out to 64 KiB. `0`: a tenth of the smaller of the device's BAR1 and its memory (BAR1 from NVML, else the PCI resource in sysfs)."),
	GH_OPT_WORDS("DMABUF_MAPPING", "auto", dmabuf_mapping,
	       "How the dmabuf backend asks the driver to map its exports: `pcie` (`CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE`, through BAR1; CUDA 12.8 and later), `default` (the driver's choice), or `auto` (`pcie` on devices whose host link is C2C, where the default mapping does not go over PCIe, falling back to the default if refused; else `default`).",
		     dmabuf_mapping_words),
};

#define GH_NOPTS (sizeof(gh_opts) / sizeof(gh_opts[0]))
#define GH_PREFIX "GDRHOOK_"
#define GH_PREFIX_LEN 8

/* The spellings UCX, libfabric and NCCL users bring along. */
static const char *const bool_yes[] = { "1", "y", "yes", "on", "true", NULL };
static const char *const bool_no[] = { "0", "n", "no", "off", "false", NULL };

static int parse_bool(const char *s, int *v_p)
{
	for (size_t i = 0; bool_yes[i]; i++) {
		if (!strcasecmp(s, bool_yes[i])) {
			*v_p = 1;
			return 0;
		}
		if (!strcasecmp(s, bool_no[i])) {
			*v_p = 0;
			return 0;
		}
	}
	return -EINVAL;
}

/* Level i's names; the digits 0-4 as well. */
static const char *const level_names[] = {
	"none", "error", "warn", "warning", "info", "debug", "trace", NULL
};
static const int level_of[] = { 0, 1, 2, 2, 3, 4, 4 };

static int parse_level(const char *s, int *v_p)
{
	for (size_t i = 0; level_names[i]; i++) {
		if (!strcasecmp(s, level_names[i])) {
			*v_p = level_of[i];
			return 0;
		}
	}
	if (s[0] >= '0' && s[0] <= '4' && !s[1]) {
		*v_p = s[0] - '0';
		return 0;
	}
	return -EINVAL;
}

/* Digits and an optional k/m/g suffix; anything that overflows is refused. */
static int parse_size(const char *s, int inf_ok, uint64_t *v_p)
{
	uint64_t v = 0;
	unsigned int shift = 0;
	const char *p = s;

	if (inf_ok && (!strcasecmp(s, "inf") || !strcasecmp(s, "unlimited"))) {
		*v_p = 0;
		return 0;
	}
	if (*p < '0' || *p > '9')
		return -EINVAL;
	for (; *p >= '0' && *p <= '9'; p++) {
		unsigned int d = (unsigned int)(*p - '0');

		if (v > (UINT64_MAX - d) / 10)
			return -ERANGE;
		v = v * 10 + d;
	}
	switch (*p) {
	case 'k': case 'K': shift = 10; p++; break;
	case 'm': case 'M': shift = 20; p++; break;
	case 'g': case 'G': shift = 30; p++; break;
	}
	if (*p)
		return -EINVAL;
	if (shift && v > (UINT64_MAX >> shift))
		return -ERANGE;
	*v_p = v << shift;
	return 0;
}

/* The index of s among words (any case). */
static int parse_word(const char *s, const char *const *words, int *v_p)
{
	for (int i = 0; words[i]; i++) {
		if (!strcasecmp(s, words[i])) {
			*v_p = i;
			return 0;
		}
	}
	return -EINVAL;
}

static int apply(const struct gh_opt *o, const char *val)
{
	char *field = (char *)&gh_cfg + o->offset;

	switch (o->type) {
	case GH_OPT_BOOL:
		return parse_bool(val, (int *)field);
	case GH_OPT_BOOL_ALL:
		if (!strcmp(val, "all")) {
			*(int *)field = 2;
			return 0;
		}
		return parse_bool(val, (int *)field);
	case GH_OPT_LEVEL:
		return parse_level(val, (int *)field);
	case GH_OPT_SIZE:
	case GH_OPT_SIZE_INF:
		return parse_size(val, o->type == GH_OPT_SIZE_INF,
				  (uint64_t *)field);
	case GH_OPT_ENUM:
		return parse_word(val, o->words, (int *)field);
	case GH_OPT_STR:
		*(const char **)field = *val ? val : NULL;
		return 0;
	}
	return -EINVAL;
}

static const struct gh_opt *find_opt(const char *name, size_t len)
{
	for (size_t i = 0; i < GH_NOPTS; i++)
		if (strlen(gh_opts[i].name) == len &&
		    !strncmp(gh_opts[i].name, name, len))
			return &gh_opts[i];
	return NULL;
}

/*
 * Unknown names and bad values are reported at the first CUDA or verbs
 * call, not at load: a shell or tool that merely inherits the environment
 * should stay silent.
 */
#define GH_MAX_UNKNOWN 8
static const char *unknown[GH_MAX_UNKNOWN];
static int n_unknown;

struct bad_value {
	const struct gh_opt *opt;
	const char *val;
	int err;
};
static struct bad_value bad[GH_MAX_UNKNOWN];
static int n_bad;

/* A problem found at init that only processes using CUDA hear about. */
static const char *deferred_msg;
static const char *deferred_arg;

void gh_config_defer_warning(const char *msg, const char *arg)
{
	deferred_msg = msg;
	deferred_arg = arg;
}

/* Appends words[] to buf as "a, b, c" (buf holds a string already). */
static void print_words(const char *const *words, char *buf, size_t cap)
{
	size_t n = strlen(buf);

	for (const char *const *w = words; w && *w; w++) {
		size_t l = strlen(*w);

		if (n + l + 3 >= cap)
			break;
		if (n) {
			memcpy(buf + n, ", ", 2);
			n += 2;
		}
		memcpy(buf + n, *w, l);
		n += l;
		buf[n] = '\0';
	}
}

/* The values o accepts, in words, from the tables the parsers use. */
static const char *accepted(const struct gh_opt *o, char *buf, size_t cap)
{
	buf[0] = '\0';
	switch (o->type) {
	case GH_OPT_BOOL:
	case GH_OPT_BOOL_ALL:
		print_words(bool_yes, buf, cap);
		print_words(bool_no, buf, cap);
		if (o->type == GH_OPT_BOOL_ALL)
			print_words((const char *const[]){ "all", NULL }, buf,
				    cap);
		break;
	case GH_OPT_LEVEL:
		print_words(level_names, buf, cap);
		print_words((const char *const[]){ "0", "1", "2", "3", "4",
						   NULL }, buf, cap);
		break;
	case GH_OPT_ENUM:
		print_words(o->words, buf, cap);
		break;
	case GH_OPT_SIZE:
		return "a whole number, optionally followed by k, m or g";
	case GH_OPT_SIZE_INF:
		return "a whole number, optionally followed by k, m or g; or inf or unlimited";
	case GH_OPT_STR:
		return "any string";
	}
	return buf;
}

void gh_config_report(void)
{
	for (int i = 0; i < n_unknown; i++)
		gh_warn("unknown variable ignored: %s", unknown[i]);
	for (int i = 0; i < n_bad; i++) {
		const struct gh_opt *o = bad[i].opt;
		const char *list;
		char words[256];

		list = accepted(o, words, sizeof(words));
		if (bad[i].err == -ERANGE)
			gh_warn("bad value \"%s\" for " "GDRHOOK_" "%s (too large), using \"%s\": %s, below 2^64",
				bad[i].val, o->name, o->def, list);
		else if (o->type == GH_OPT_SIZE || o->type == GH_OPT_SIZE_INF)
			gh_warn("bad value \"%s\" for " "GDRHOOK_" "%s (%s), using \"%s\"",
				bad[i].val, o->name, list, o->def);
		else
			gh_warn("bad value \"%s\" for " "GDRHOOK_" "%s (one of: %s), using \"%s\"",
				bad[i].val, o->name, list, o->def);
	}
	if (deferred_msg)
		gh_warn("%s \"%s\"", deferred_msg, deferred_arg);
}

/* The i-th unknown GDRHOOK_* "NAME=value" of the environment, or NULL. */
const char *gh_config_unknown(unsigned int i)
{
	return i < (unsigned int)n_unknown ? unknown[i] : NULL;
}

/*
 * Defaults first, then environ.  getenv-free walk of environ so unknown
 * GDRHOOK_* names (typos) can be reported.  Returns the number of bad
 * values (each reported later by gh_config_report(); its default is kept).
 */
int gh_config_load(void)
{
	extern char **environ;
	int nbad = 0;

	for (size_t i = 0; i < GH_NOPTS; i++)
		apply(&gh_opts[i], gh_opts[i].def);
	gh_log_level = gh_cfg.log_level;
	for (char **e = environ; e && *e; e++) {
		const char *name, *eq;
		const struct gh_opt *o;
		int err;

		if (strncmp(*e, GH_PREFIX, GH_PREFIX_LEN))
			continue;
		name = *e + GH_PREFIX_LEN;
		eq = strchr(name, '=');
		if (!eq)
			continue;
		o = find_opt(name, (size_t)(eq - name));
		if (!o) {
			if (n_unknown < GH_MAX_UNKNOWN)
				unknown[n_unknown++] = *e;
			continue;
		}
		err = apply(o, eq + 1);
		if (err) {
			apply(o, o->def);
			if (n_bad < GH_MAX_UNKNOWN)
				bad[n_bad++] = (struct bad_value){ o, eq + 1,
								   err };
			nbad++;
		}
		if (o->type == GH_OPT_LEVEL)
			gh_log_level = gh_cfg.log_level;
	}
	return nbad;
}

static int valid(const struct gh_opt *o, const char *s)
{
	int i;
	uint64_t u;

	switch (o->type) {
	case GH_OPT_BOOL:
		return !parse_bool(s, &i);
	case GH_OPT_BOOL_ALL:
		return !strcmp(s, "all") || !parse_bool(s, &i);
	case GH_OPT_LEVEL:
		return !parse_level(s, &i);
	case GH_OPT_SIZE:
	case GH_OPT_SIZE_INF:
		return !parse_size(s, o->type == GH_OPT_SIZE_INF, &u);
	case GH_OPT_ENUM:
		return !parse_word(s, o->words, &i);
	case GH_OPT_STR:
		return 1;
	}
	return 0;
}

/* Row i of the table as it applies now (gdrhook-info, src/face/info.c). */
int gh_config_row(unsigned int i, struct gh_config_row *r_p)
{
	extern char **environ;
	const struct gh_opt *o;
	size_t len;

	if (i >= GH_NOPTS)
		return -ENOENT;
	o = &gh_opts[i];
	len = strlen(o->name);
	r_p->name = o->name;
	r_p->def = o->def;
	r_p->doc = o->doc;
	r_p->value = o->def;
	r_p->source = GH_CFG_DEFAULT;
	for (char **e = environ; e && *e; e++) {
		const char *v = *e + GH_PREFIX_LEN;

		if (strncmp(*e, GH_PREFIX, GH_PREFIX_LEN) ||
		    strncmp(v, o->name, len) || v[len] != '=')
			continue;
		if (valid(o, v + len + 1)) {
			r_p->value = v + len + 1;
			r_p->source = GH_CFG_ENV;
		} else {
			r_p->source = GH_CFG_BAD_ENV;
		}
	}
	return 0;
}
