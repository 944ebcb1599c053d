// SPDX-License-Identifier: MIT
/*
 * Audit mode (GDRHOOK_VALIDATE=1): cross-check the registry against the
 * driver.  This is what a user turns on when they doubt the tool; it is
 * slow on purpose (driver queries on every event and lookup).
 *
 * What the driver can confirm depends on the kind of memory:
 * cuMemGetAddressRange and the buffer ID answer for device, managed, pool
 * and IPC allocations.  A VMM mapping is checked with
 * cuMemRetainAllocationHandle (cuMemGetAddressRange does not see it until
 * access is set); host memory only for being known to the driver.
 */
#include <errno.h>
#include <string.h>

#include "platform/platform.h"
#include "audit.h"
#include "ranges.h"

void gh_audit_report(const char *api, uint64_t ptr, uint64_t size,
		     uint64_t gen, const char *what)
{
	GH_COUNT(audit_disagreements, 1);
	gh_warn("audit: %s %p: %s", api ? api : "?", (void *)(uintptr_t)ptr,
		what);
	gh_ev_emit_audit(GH_EV_AUDIT, 0, api, ptr, size, gen, what);
}

static int exact_kind(unsigned int kind)
{
	return kind == GDRHOOK_KIND_DEVICE || kind == GDRHOOK_KIND_MANAGED ||
	       kind == GDRHOOK_KIND_POOL || kind == GDRHOOK_KIND_IPC;
}

/* Does the driver agree that r is live as recorded?  NULL if so. */
static const char *check(const struct gh_range *r)
{
	uint64_t base, size, id;

	GH_COUNT(audit_checks, 1);
	if (r->kind == GDRHOOK_KIND_VMM)
		return gh_drv_vmm_mapped(r->base) ? NULL :
		       "driver has no allocation mapped at a live VMM range";
	if (gh_drv_range(r->base, &base, &size)) {
		uint64_t ctx = 0;

		if (r->kind == GDRHOOK_KIND_HOST_REGISTERED ||
		    r->kind == GDRHOOK_KIND_HOST)
			return NULL;	/* not every host range is queryable */
		/* With no context current the driver gives no range at all
		 * (a program that unset its context before exit). */
		if (!gh_drv_ctx_current(&ctx) && !ctx)
			return NULL;
		return "driver does not know a live allocation";
	}
	if (exact_kind(r->kind)) {
		if (base != r->base)
			return "driver reports a different base";
		if (size != r->size && !(r->kind == GDRHOOK_KIND_DEVICE &&
					 size >= r->size))
			return "driver reports a different size";
		if (r->buffer_id && !gh_drv_buffer_id(r->base, &id) &&
		    id != r->buffer_id)
			return "buffer ID changed while the allocation was live";
	}
	return NULL;
}

void gh_audit_alloc(const struct gh_range *r, const char *api)
{
	const char *what = check(r);

	if (what)
		gh_audit_report(api, r->base, r->size, r->gen, what);
}

void gh_audit_free(const struct gh_range *r, const char *api)
{
	const char *what = check(r);

	if (what)
		gh_audit_report(api, r->base, r->size, r->gen, what);
}

void gh_audit_lookup(uint64_t ptr, int rc, const struct gh_range *r)
{
	uint64_t base, size;
	int known;

	GH_COUNT(lookups, 1);
	if (rc != -ENOENT) {
		gh_audit_alloc(r, "gdrhook_lookup");
		return;
	}
	GH_COUNT(audit_checks, 1);
	known = !gh_drv_range(ptr, &base, &size);
	if (known)
		gh_audit_report("gdrhook_lookup", ptr, 0, 0,
				"driver knows an allocation the registry does not");
}

static void sweep_one(const struct gh_range *r, void *arg)
{
	const char **first = arg;
	const char *what = check(r);

	if (what) {
		gh_audit_report("exit", r->base, r->size, r->gen, what);
		if (!*first)
			*first = what;
	}
}

void gh_audit_sweep(void)
{
	const char *first = NULL;
	int was = gh_guard_enter();

	gh_registry_foreach(sweep_one, &first);
	gh_guard_leave(was);
}
