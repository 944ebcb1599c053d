// SPDX-License-Identifier: MIT
/*
 * What a resolver route hands out (dlsym/dlvsym, cuGetProcAddress,
 * cudaGetDriverEntryPoint): the real resolver chose the entry point
 * (honouring version and per-thread flags); this maps what it returned to
 * the wrapper with that exact prototype (libibverbs names: verbs.c).
 * Hooks layer: the resolver below it only finds real functions.
 */
#include <dlfcn.h>
#include <string.h>

#include "hookrt.h"
#include "base/base.h"
#include "platform/platform.h"
#include "registry/registry.h"
#include "substitute.h"

static int is_memory_action(unsigned int action)
{
	return action != GH_ACT_MANUAL;
}

/* Is there any memory-family row with this base name? */
static int base_is_memory(const char *base)
{
	for (unsigned int i = 0; i < GH_SYM_COUNT; i++)
		if (is_memory_action(gh_syms[i].action) &&
		    !strcmp(gh_syms[i].base, base))
			return 1;
	return 0;
}

static void strip_version(const char *name, char *out, size_t cap)
{
	size_t n = strlen(name);
	const char *p;

	if (n >= cap)
		n = cap - 1;
	memcpy(out, name, n);
	out[n] = 0;
	for (int pass = 0; pass < 2; pass++) {
		size_t len = strlen(out);

		if (len > 5 && (!strcmp(out + len - 5, "_ptsz") ||
				!strcmp(out + len - 5, "_ptds"))) {
			out[len - 5] = 0;
			continue;
		}
		p = strrchr(out, '_');
		if (p && p[1] == 'v' && p[2] >= '0' && p[2] <= '9') {
			const char *q = p + 2;

			while (*q >= '0' && *q <= '9')
				q++;
			if (!*q)
				out[p - out] = 0;
		}
	}
}

/*
 * Resolver-first substitution: the real resolver already chose the entry
 * point (honouring version and per-thread flags); map what it returned to
 * the wrapper with that exact prototype.  An allocation or free entry
 * point without a wrapper makes the registry untrusted.
 */
void *gh_substitute(const char *requested, void *p, const char *route)
{
	Dl_info info;
	int sym = -1;
	char base[128];

	if (!p || !requested || gh_addr_is_ours(p))
		return p;
	if (!strncmp(requested, "ibv_", 4))
		return gh_verbs_substitute(requested, p, route);
	if (requested[0] != 'c' || requested[1] != 'u')
		return p;
	if (dladdr(p, &info) && info.dli_sname && info.dli_saddr == p)
		sym = gh_sym_find(info.dli_sname);
	if (sym < 0) {
		/* Not an exported symbol (or unnamed): try the row names. */
		sym = gh_sym_find(requested);
		if (sym >= 0 && gh_real_get((unsigned int)sym) != p)
			sym = -1;
	}
	if (sym >= 0) {
		const struct gh_sym *s = &gh_syms[sym];

		if (gh_real_set((unsigned int)sym, p)) {
			gh_mark_untrusted(s->name,
					  "two different real functions for one name");
			return p;
		}
		gh_dbg("%s: %s -> wrapper %s", route, requested, s->name);
		return gh_sym_wrappers[sym];
	}
	strip_version(requested, base, sizeof(base));
	if (base_is_memory(base)) {
		gh_mark_untrusted(requested,
				  "resolved to an entry point with no wrapper");
	}
	return p;
}
