// SPDX-License-Identifier: MIT
/*
 * Memory owned by something other than an allocation call: module and
 * library globals, and the device alias of host memory.
 *
 * A global is registered (kind global) the first time the program asks for
 * its address, with its module or library as the owner, and dropped when
 * that is unloaded or its context goes (like every range).  Asking again
 * is not a new allocation.  A library's managed variables are globals too.
 * (A mapped buffer of external memory needs no code here: its alloc row
 * registers it, cuMemFree_v2 frees it; destroying the external memory
 * object leaves it allocated, as measured on the H100.)
 */
#include "base/base.h"
#include "registry/registry.h"
#include "hookrt.h"

struct owned {
	unsigned int kind;
	uint64_t owner;
};

static int match_owned(const struct gh_range *r, void *arg)
{
	const struct owned *o = arg;

	return r->kind == o->kind && r->pool == o->owner;
}

static void drop_owned(struct gh_call *c, unsigned int kind, uint64_t owner)
{
	struct owned o = { kind, owner };

	if (owner)
		gh_drop_matching(c, match_owned, &o);
}

static void global_post(struct gh_call *c, CUdeviceptr *dptr, size_t *bytes,
			uint64_t owner)
{
	struct gh_range cur;

	if (c->rc) {
		GH_COUNT(failed_calls, 1);
		return;
	}
	if (!dptr || !*dptr)
		return;
	if (!gh_registry_lookup(*dptr, 1, &cur) && cur.base == *dptr &&
	    cur.kind == GDRHOOK_KIND_GLOBAL)
		return;		/* asked again: the same variable */
	gh_alloc_post(c, GDRHOOK_KIND_GLOBAL, *dptr,
		      bytes ? (uint64_t)*bytes : GH_SIZE_FROM_DRIVER, owner, 0);
}

void gh_module_global_post(struct gh_call *c, CUdeviceptr *dptr, size_t *bytes,
			   CUmodule hmod, const char *name)
{
	global_post(c, dptr, bytes, (uint64_t)(uintptr_t)hmod);
}

void gh_library_global_post(struct gh_call *c, CUdeviceptr *dptr,
			    size_t *bytes, CUlibrary library, const char *name)
{
	global_post(c, dptr, bytes, (uint64_t)(uintptr_t)library);
}

/* The runtime resolves the symbol through the driver (hooked above); this
 * is the fallback when that call was not seen.  Its module is unknown, so
 * it goes with its context. */
void gh_symbol_address_post(struct gh_call *c, void **devPtr,
			    const void *symbol)
{
	struct gh_range cur;

	if (c->rc || !devPtr || !*devPtr || c->nested_allocs)
		return;
	if (!gh_registry_lookup((uint64_t)(uintptr_t)*devPtr, 1, &cur))
		return;		/* known: the driver-level call registered it */
	gh_alloc_post(c, GDRHOOK_KIND_GLOBAL, (uint64_t)(uintptr_t)*devPtr,
		      GH_SIZE_FROM_DRIVER, 0, 0);
}

void gh_module_unload_pre(struct gh_call *c, CUmodule hmod)
{
	drop_owned(c, GDRHOOK_KIND_GLOBAL, (uint64_t)(uintptr_t)hmod);
}

void gh_library_unload_pre(struct gh_call *c, CUlibrary library)
{
	drop_owned(c, GDRHOOK_KIND_GLOBAL, (uint64_t)(uintptr_t)library);
}

void gh_host_devptr_post(struct gh_call *c, CUdeviceptr *pdptr, void *p,
			 unsigned int Flags)
{
	if (c->rc || !pdptr)
		return;
	if (*pdptr != (CUdeviceptr)(uintptr_t)p)
		gh_mark_untrusted(c->api,
				  "device alias of host memory is not its host address (no unified addressing)");
}
