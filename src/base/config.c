// SPDX-License-Identifier: MIT
/*
 * GDRHOOK_* configuration: one table, parsed once from environ at init.
 * The README's variable table is generated from the same rows
 * (scripts/gen-doc.py, `make doc`; `make check` verifies it).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config.h"
#include "fmt.h"
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
	GH_OPT_PATH,		/* a file name template (gh_path_check) */
	GH_OPT_RENAMED,		/* an old name: read as the row renamed_to */
};

struct gh_opt {
	const char *name;	/* without the GDRHOOK_ prefix */
	const char *def;
	enum gh_opt_type type;
	size_t offset;
	const char *doc;
	const char *const *words;	/* GH_OPT_ENUM: NULL-terminated */
	const char *renamed_to;		/* GH_OPT_RENAMED: the new name */
};

#define GH_OPT(n, d, t, field, doc) \
	{ n, d, t, offsetof(struct gh_config, field), doc, NULL, NULL }
/* words: in the order of the field's enum (config.h) */
#define GH_OPT_WORDS(n, d, field, doc, words) \
	{ n, d, GH_OPT_ENUM, offsetof(struct gh_config, field), doc, words, \
	  NULL }
/*
 * A name the variable had before: still read, with one deprecation line
 * (mimalloc and UCX keep theirs the same way).  The new name wins when
 * both are set.  Not a row of the README's table: the new row's doc says
 * its old name.
 */
#define GH_OPT_OLD(old, new) \
	{ old, NULL, GH_OPT_RENAMED, 0, NULL, NULL, new }

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
static const char *const trace_mode_words[] = {
	[GH_CFG_TRACE_MODE_DROP] = "drop",
	[GH_CFG_TRACE_MODE_BLOCK] = "block",
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
	       "`0` makes gdrhook a pure pass-through: no registry, no event log, no caching."),
	GH_OPT("LOG_LEVEL", "warn", GH_OPT_LEVEL, log_level,
	       "Diagnostics, on stderr or in `GDRHOOK_LOG_FILE`: `none`, `error`, `warn`, `info` or `debug` (also `0`-`4`, `warning`, and `trace` as NCCL spells debug). `info` adds one line naming the pin backend; `debug` adds a line per decision: the route a registration took, the backend chosen and why, and whether a registration was wrapped, windowed or passed through. Each line starts `gdrhook[host:pid:tid]: level:`."),
	GH_OPT("LOG_FILE", "", GH_OPT_PATH, log_file,
	       "Write the diagnostics to this file instead of stderr (as `NCCL_DEBUG_FILE`, `UCX_LOG_FILE`): `%h` expands to the host name, `%p` to the pid, `%%` to `%`; a relative path is relative to where the program started. Appended to, created `0600`, never through a symlink, opened at the first message. One that cannot be opened: stderr, with one warning. Unset or `stderr`: stderr."),
	GH_OPT("TRACE", "", GH_OPT_PATH, trace_path,
	       "Write the event log (JSON Lines, one event per CUDA or verbs call; what `gdrhook-trace` reads) to this path, or `stderr`; `%p` expands to the pid, `%h` to the host name, `%%` to `%`; a relative path is relative to where the program started. Created `0600`, never through a symlink, never waited for (a FIFO needs its reader first). Unset: no event log, and no formatting on any hook path. Formerly `GDRHOOK_LOG` (still read, with a deprecation note)."),
	GH_OPT("TRACE_BUFFER", "12m", GH_OPT_SIZE, trace_ring_bytes,
	       "Event log buffer per thread, in bytes (suffixes k, m, g; 192 bytes per event, rounded down to a power of two events: the default holds 65536). Events that do not fit are counted and reported at exit (`GDRHOOK_TRACE_MODE=drop`) or waited for (`block`). Formerly `GDRHOOK_LOG_BUFFER`."),
	GH_OPT_WORDS("TRACE_MODE", "drop", trace_mode,
		     "What a hook does when its event log buffer is full: `drop` counts the event as dropped and goes on; `block` waits for the writer, never losing an event (a hook may then wait on the disk). Formerly `GDRHOOK_LOG_MODE`.",
		     trace_mode_words),
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

	GH_OPT_OLD("LOG", "TRACE"),
	GH_OPT_OLD("LOG_BUFFER", "TRACE_BUFFER"),
	GH_OPT_OLD("LOG_MODE", "TRACE_MODE"),
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
	char bad_esc[3];

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
	case GH_OPT_PATH:
		if (gh_path_check(val, bad_esc))
			return -EINVAL;
		/* fall through */
	case GH_OPT_STR:
		*(const char **)field = *val ? val : NULL;
		return 0;
	case GH_OPT_RENAMED:
		break;		/* read as its new row, never on its own */
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

/* ------------------------------------------------------ did you mean */

#define GH_NAME_MAX 40

/*
 * Edits (insert, delete, change, swap two neighbours) from a to b, case
 * aside; names longer than GH_NAME_MAX are far from everything.  On the
 * stack, no malloc: the report runs inside the first hooked call.
 */
static unsigned int distance(const char *a, size_t la, const char *b,
			     size_t lb)
{
	unsigned char d[GH_NAME_MAX + 1][GH_NAME_MAX + 1];

	if (la > GH_NAME_MAX || lb > GH_NAME_MAX)
		return 255;
	for (size_t i = 0; i <= la; i++)
		d[i][0] = (unsigned char)i;
	for (size_t j = 0; j <= lb; j++)
		d[0][j] = (unsigned char)j;
	for (size_t i = 1; i <= la; i++) {
		for (size_t j = 1; j <= lb; j++) {
			int ca = a[i - 1] | 0x20, cb = b[j - 1] | 0x20;
			unsigned int v = d[i - 1][j - 1] + (ca != cb);

			if (d[i - 1][j] + 1u < v)
				v = d[i - 1][j] + 1u;
			if (d[i][j - 1] + 1u < v)
				v = d[i][j - 1] + 1u;
			if (i > 1 && j > 1 && ca == (b[j - 2] | 0x20) &&
			    (a[i - 2] | 0x20) == cb && d[i - 2][j - 2] + 1u < v)
				v = d[i - 2][j - 2] + 1u;
			d[i][j] = (unsigned char)v;
		}
	}
	return d[la][lb];
}

/* One name is the other's first or last words: CACHE for CACHE_MAX_SIZE,
 * BACKEND_TYPE for BACKEND. */
static int affix(const char *u, size_t ul, const char *k, size_t kl)
{
	const char *s = ul < kl ? u : k, *l = ul < kl ? k : u;
	size_t sl = ul < kl ? ul : kl, ll = ul < kl ? kl : ul;

	if (sl < 3 || sl == ll)
		return 0;
	if (!strncasecmp(l, s, sl) && l[sl] == '_')
		return 1;
	return !strncasecmp(l + ll - sl, s, sl) && l[ll - sl - 1] == '_';
}

/* The variable an unknown name (without the prefix) probably meant. */
static const char *suggest(const char *name, size_t len)
{
	const struct gh_opt *best = NULL;
	unsigned int bestd = 3;		/* 2 edits at most */

	for (size_t i = 0; i < GH_NOPTS; i++) {
		const struct gh_opt *o = &gh_opts[i];
		unsigned int d = distance(name, len, o->name, strlen(o->name));

		if (d < bestd) {
			best = o;
			bestd = d;
		}
	}
	/* old names only by spelling: LOG_DIR does not mean the trace */
	for (size_t i = 0; !best && i < GH_NOPTS; i++)
		if (gh_opts[i].type != GH_OPT_RENAMED &&
		    affix(name, len, gh_opts[i].name, strlen(gh_opts[i].name)))
			best = &gh_opts[i];
	if (!best)
		return NULL;
	return best->renamed_to ? best->renamed_to : best->name;
}

/* ------------------------------------------------------------ loading */

/*
 * Unknown names, bad values and old names are reported at the first CUDA
 * or verbs call, not at load: a shell or tool that merely inherits the
 * environment should stay silent.
 */
#define GH_MAX_UNKNOWN 8
static const char *unknown[GH_MAX_UNKNOWN];
static int n_unknown;

struct bad_value {
	const struct gh_opt *opt;
	const char *name;	/* as set: the row's name or an old one */
	const char *val;
	int err;
};
static struct bad_value bad[GH_MAX_UNKNOWN];
static int n_bad;

/* Per row: the environment's "GDRHOOK_NAME=value" that set it, valid or
 * not (an old name's too), and whether it was valid. */
static const char *env_of[GH_NOPTS];
static unsigned char bad_row[GH_NOPTS];

/* Old names set, in the order met; shadowed: the new name was set too. */
struct old_set {
	const struct gh_opt *old;
	const char *entry;
	int shadowed;
};
static struct old_set olds[GH_NOPTS];
static int n_olds;
static unsigned char by_new[GH_NOPTS];	/* set under the new name */

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
	case GH_OPT_PATH:
		return "a file name; the escapes: " GH_PATH_ESCAPES;
	case GH_OPT_STR:
	case GH_OPT_RENAMED:
		return "any string";
	}
	return buf;
}

static void report_bad(const struct bad_value *v)
{
	const struct gh_opt *o = v->opt;
	char words[256], esc[3];

	if (v->err == -ERANGE) {
		gh_warn("bad value \"%s\" for " GH_PREFIX "%s (too large), using \"%s\": %s, below 2^64",
			v->val, v->name, o->def, accepted(o, words, sizeof(words)));
	} else if (o->type == GH_OPT_PATH && gh_path_check(v->val, esc)) {
		/* "%" alone at the end shows as itself */
		gh_warn("bad value \"%s\" for " GH_PREFIX "%s: unknown escape \"%s\" (the escapes: %s), %s%s%s",
			v->val, v->name, esc, GH_PATH_ESCAPES,
			*o->def ? "using \"" : "left unset",
			o->def, *o->def ? "\"" : "");
	} else if (o->type == GH_OPT_SIZE || o->type == GH_OPT_SIZE_INF) {
		gh_warn("bad value \"%s\" for " GH_PREFIX "%s (%s), using \"%s\"",
			v->val, v->name, accepted(o, words, sizeof(words)),
			o->def);
	} else {
		gh_warn("bad value \"%s\" for " GH_PREFIX "%s (one of: %s), using \"%s\"",
			v->val, v->name, accepted(o, words, sizeof(words)),
			o->def);
	}
}

void gh_config_report(void)
{
	for (int i = 0; i < n_olds; i++) {
		const struct gh_opt *n = find_opt(olds[i].old->renamed_to,
						  strlen(olds[i].old->renamed_to));

		if (olds[i].shadowed)
			gh_warn("deprecated variable %s ignored: %s is set too and wins",
				olds[i].entry, env_of[n - gh_opts]);
		else
			gh_warn("deprecated variable %s: read as " GH_PREFIX "%s, its new name",
				olds[i].entry, n->name);
	}
	for (int i = 0; i < n_unknown; i++) {
		const char *name = unknown[i] + GH_PREFIX_LEN;
		const char *s = suggest(name, strcspn(name, "="));

		if (s)
			gh_warn("unknown variable ignored: %s (did you mean " GH_PREFIX "%s?)",
				unknown[i], s);
		else
			gh_warn("unknown variable ignored: %s", unknown[i]);
	}
	for (int i = 0; i < n_bad; i++)
		report_bad(&bad[i]);
	if (deferred_msg)
		gh_warn("%s \"%s\"", deferred_msg, deferred_arg);
}

/* The i-th unknown GDRHOOK_* "NAME=value" of the environment, or NULL. */
const char *gh_config_unknown(unsigned int i)
{
	return i < (unsigned int)n_unknown ? unknown[i] : NULL;
}

const char *gh_config_setting(const char *name)
{
	const struct gh_opt *o = find_opt(name, strlen(name));

	if (!o || o->type == GH_OPT_RENAMED || bad_row[o - gh_opts])
		return NULL;
	return env_of[o - gh_opts];
}

/* entry ("GDRHOOK_NAME=value") sets o, named name in messages. */
static int set_one(const struct gh_opt *o, const char *name,
		   const char *entry)
{
	const char *val = strchr(entry, '=') + 1;
	size_t i = (size_t)(o - gh_opts);
	int err = apply(o, val);

	env_of[i] = entry;
	bad_row[i] = !!err;
	if (err) {
		apply(o, o->def);
		if (n_bad < GH_MAX_UNKNOWN)
			bad[n_bad++] = (struct bad_value){ o, name, val, err };
	}
	if (o->type == GH_OPT_LEVEL)
		gh_log_level = gh_cfg.log_level;
	return !!err;
}

/*
 * Defaults first, then environ, then the old names whose new name was not
 * set.  getenv-free walk of environ so unknown GDRHOOK_* names (typos) can
 * be reported.  Returns the number of bad values (each reported later by
 * gh_config_report(); its default is kept).
 */
int gh_config_load(void)
{
	extern char **environ;
	int nbad = 0;

	for (size_t i = 0; i < GH_NOPTS; i++)
		if (gh_opts[i].type != GH_OPT_RENAMED)
			apply(&gh_opts[i], gh_opts[i].def);
	gh_log_level = gh_cfg.log_level;
	for (char **e = environ; e && *e; e++) {
		const char *name, *eq;
		const struct gh_opt *o;

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
		if (o->type == GH_OPT_RENAMED) {
			if (n_olds < (int)GH_NOPTS)
				olds[n_olds++] = (struct old_set){ o, *e, 0 };
			continue;
		}
		by_new[o - gh_opts] = 1;
		nbad += set_one(o, o->name, *e);
	}
	for (int i = 0; i < n_olds; i++) {
		const char *to = olds[i].old->renamed_to;
		const struct gh_opt *n = find_opt(to, strlen(to));

		if (by_new[n - gh_opts])
			olds[i].shadowed = 1;	/* the new name wins */
		else
			nbad += set_one(n, olds[i].old->name, olds[i].entry);
	}
	gh_log_set_file(gh_cfg.log_file);
	return nbad;
}

static int valid(const struct gh_opt *o, const char *s)
{
	char esc[3];
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
	case GH_OPT_PATH:
		return !gh_path_check(s, esc);
	case GH_OPT_STR:
		return 1;
	case GH_OPT_RENAMED:
		break;
	}
	return 0;
}

/* The value of GDRHOOK_<name> in the environment now (the last one), or
 * NULL. */
static const char *env_now(const char *name)
{
	extern char **environ;
	size_t len = strlen(name);
	const char *v = NULL;

	for (char **e = environ; e && *e; e++) {
		const char *n = *e + GH_PREFIX_LEN;

		if (!strncmp(*e, GH_PREFIX, GH_PREFIX_LEN) &&
		    !strncmp(n, name, len) && n[len] == '=')
			v = n + len + 1;
	}
	return v;
}

/* The i-th row that is not an old name. */
static const struct gh_opt *nth_row(unsigned int i)
{
	for (size_t k = 0; k < GH_NOPTS; k++)
		if (gh_opts[k].type != GH_OPT_RENAMED && !i--)
			return &gh_opts[k];
	return NULL;
}

/* Row i of the table as it applies now (gdrhook-info, src/face/info.c):
 * the value as written, under the new name or, failing that, an old one. */
int gh_config_row(unsigned int i, struct gh_config_row *r_p)
{
	const struct gh_opt *o = nth_row(i);
	const char *v, *via = NULL;

	if (!o)
		return -ENOENT;
	v = env_now(o->name);
	for (size_t k = 0; !v && k < GH_NOPTS; k++) {
		if (gh_opts[k].type != GH_OPT_RENAMED ||
		    strcmp(gh_opts[k].renamed_to, o->name))
			continue;
		v = env_now(gh_opts[k].name);
		via = v ? gh_opts[k].name : NULL;
	}
	r_p->name = o->name;
	r_p->def = o->def;
	r_p->doc = o->doc;
	r_p->value = o->def;
	r_p->source = GH_CFG_DEFAULT;
	r_p->via = via;
	if (v && valid(o, v)) {
		r_p->value = v;
		r_p->source = GH_CFG_ENV;
	} else if (v) {
		r_p->source = GH_CFG_BAD_ENV;
	}
	return 0;
}
