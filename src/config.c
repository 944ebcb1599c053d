// SPDX-License-Identifier: MIT
/*
 * GDRHOOK_* configuration: one table, parsed once from environ at init.
 * The README's variable table is generated from the same rows
 * (scripts/gen-doc.py, `make doc`; `make check` verifies it).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "log.h"

struct gh_config gh_cfg;

enum gh_opt_type { GH_OPT_BOOL, GH_OPT_STR, GH_OPT_LEVEL, GH_OPT_SIZE };

struct gh_opt {
	const char *name;	/* without the GDRHOOK_ prefix */
	const char *def;
	enum gh_opt_type type;
	size_t offset;
	const char *doc;
};

#define GH_OPT(n, d, t, field, doc) \
	{ n, d, t, offsetof(struct gh_config, field), doc }

static const struct gh_opt gh_opts[] = {
	GH_OPT("ENABLE", "1", GH_OPT_BOOL, enable,
	       "`0` makes gdrhook a pure pass-through: no registry, no log, no caching."),
	GH_OPT("LOG", "", GH_OPT_STR, log_path,
	       "Write the event log (JSON Lines) to this path, or `stderr`; `%p` expands to the pid. Unset: no log, and no formatting on any hook path."),
	GH_OPT("LOG_LEVEL", "warn", GH_OPT_LEVEL, log_level,
	       "Diagnostics on stderr: `none`, `error`, `warn`, `info` or `debug`."),
	GH_OPT("LOG_BUFFER", "1048576", GH_OPT_SIZE, log_ring_bytes,
	       "Event log buffer per thread, in bytes (suffixes k, m, g). Events that do not fit are counted and reported at exit."),
	GH_OPT("STATS", "0", GH_OPT_BOOL, stats,
	       "`1` prints the counters to stderr at exit."),
	GH_OPT("VALIDATE", "0", GH_OPT_BOOL, validate,
	       "`1` is audit mode: every event and lookup is cross-checked against the driver (`cuMemGetAddressRange`, buffer ID) and the live set is swept at exit; disagreements become `audit` events and a counter."),
	GH_OPT("LIBCUDA", "libcuda.so.1", GH_OPT_STR, libcuda,
	       "The driver library real entry points are resolved from."),
	GH_OPT("STRICT", "0", GH_OPT_BOOL, strict,
	       "`1` aborts the process when the registry becomes untrusted, instead of running on with caching off."),
	GH_OPT("BACKEND", "auto", GH_OPT_STR, backend,
	       "How GPU memory is pinned for RDMA: `dmabuf` (DMA-BUF export + `ibv_reg_dmabuf_mr`), `peermem` (plain `ibv_reg_mr`, nvidia-peermem pins), `none` (no registration cache: pass-through), `gdrpin` (the gdrpin kernel module pins and reports revocations, plain `ibv_reg_mr` registers: combine with nvidia-peermem), or `auto` (dmabuf if the device and libibverbs support it, else peermem if loaded, else gdrpin if `/dev/gdrpin` answers, else none). An unusable choice falls back to none, with the reason logged."),
	GH_OPT("CACHE_MAX_SIZE", "0", GH_OPT_SIZE, cache_max_size,
	       "Most bytes the registration cache keeps pinned (suffixes k, m, g; `0`: no limit). Idle registrations are evicted, least recently used first."),
	GH_OPT("CACHE_MAX_COUNT", "0", GH_OPT_SIZE, cache_max_count,
	       "Most registrations the cache keeps (`0`: its capacity, 262144). Idle ones are evicted, least recently used first."),
	GH_OPT("BUFFER_ID", "registry", GH_OPT_STR, buffer_id,
	       "`registry`: `cuPointerGetAttribute(s)` answers `CU_POINTER_ATTRIBUTE_BUFFER_ID` of a tracked allocation from the registry (its generation with bit 63 set; no driver call). `driver`: always ask the driver."),
	GH_OPT("SYNC_MEMOPS", "1", GH_OPT_BOOL, sync_memops,
	       "`1`: memory the registration cache pins gets synchronous memory operations (the GPUDirect RDMA guide's ordering rule), once per context with `cuCtxSetFlags(CU_CTX_SYNC_MEMOPS)` where the driver has it, else per allocation with `cuPointerSetAttribute(CU_POINTER_ATTRIBUTE_SYNC_MEMOPS)`. `0`: leave it to the program."),
	GH_OPT("PIN_WHOLE_MAX", "0", GH_OPT_SIZE, pin_whole_max,
	       "Largest allocation (or span of VMM mappings) the cache pins whole on its first registration (suffixes k, m, g); larger ones pin the registered range rounded out to 64 KiB. `0`: a tenth of the smaller of the device's BAR1 and its memory (BAR1 from NVML, else the PCI resource in sysfs)."),
	GH_OPT("DMABUF_MAPPING", "auto", GH_OPT_STR, dmabuf_mapping,
	       "How the dmabuf backend asks the driver to map its exports: `pcie` (`CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE`, through BAR1; CUDA 12.8 and later), `default` (the driver's choice), or `auto` (`pcie` on devices whose host link is C2C, where the default mapping does not go over PCIe, falling back to the default if refused; else `default`)."),
};

#define GH_NOPTS (sizeof(gh_opts) / sizeof(gh_opts[0]))
#define GH_PREFIX "GDRHOOK_"
#define GH_PREFIX_LEN 8

static int parse_bool(const char *s, int *v_p)
{
	if (!strcmp(s, "1") || !strcasecmp(s, "yes") || !strcasecmp(s, "on") ||
	    !strcasecmp(s, "true"))
		*v_p = 1;
	else if (!strcmp(s, "0") || !strcasecmp(s, "no") ||
		 !strcasecmp(s, "off") || !strcasecmp(s, "false"))
		*v_p = 0;
	else
		return -EINVAL;
	return 0;
}

static int parse_level(const char *s, int *v_p)
{
	static const char *const names[] = { "none", "error", "warn", "info",
					     "debug" };

	for (int i = 0; i < 5; i++) {
		if (!strcasecmp(s, names[i])) {
			*v_p = i;
			return 0;
		}
	}
	if (s[0] >= '0' && s[0] <= '4' && !s[1]) {
		*v_p = s[0] - '0';
		return 0;
	}
	return -EINVAL;
}

static int parse_size(const char *s, uint64_t *v_p)
{
	uint64_t v = 0;
	const char *p = s;

	if (!*p)
		return -EINVAL;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (v > UINT64_MAX / 10)
			return -ERANGE;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	switch (*p) {
	case 'k': case 'K': v <<= 10; p++; break;
	case 'm': case 'M': v <<= 20; p++; break;
	case 'g': case 'G': v <<= 30; p++; break;
	}
	if (*p || p == s)
		return -EINVAL;
	*v_p = v;
	return 0;
}

static int apply(const struct gh_opt *o, const char *val)
{
	char *field = (char *)&gh_cfg + o->offset;

	switch (o->type) {
	case GH_OPT_BOOL:
		return parse_bool(val, (int *)field);
	case GH_OPT_LEVEL:
		return parse_level(val, (int *)field);
	case GH_OPT_SIZE:
		return parse_size(val, (uint64_t *)field);
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
 * Unknown names are reported at the first CUDA call, not at load: a shell
 * or tool that merely inherits the environment should stay silent.
 */
#define GH_MAX_UNKNOWN 8
static const char *unknown[GH_MAX_UNKNOWN];
static int n_unknown;

void gh_config_report(void)
{
	for (int i = 0; i < n_unknown; i++)
		gh_warn("unknown variable ignored: %s", unknown[i]);
}

/*
 * Defaults first, then environ.  getenv-free walk of environ so unknown
 * GDRHOOK_* names (typos) can be reported.  Returns the number of bad
 * values (each already reported; its default is kept).
 */
int gh_config_load(void)
{
	extern char **environ;
	int bad = 0;

	for (size_t i = 0; i < GH_NOPTS; i++)
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
		if (apply(o, eq + 1)) {
			apply(o, o->def);
			gh_warn("bad value \"%s\" for " GH_PREFIX "%s, using \"%s\"",
				eq + 1, o->name, o->def);
			bad++;
		}
		if (o->type == GH_OPT_LEVEL)
			gh_log_level = gh_cfg.log_level;
	}
	return bad;
}
