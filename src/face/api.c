// SPDX-License-Identifier: MIT
/* The public API of include/gdrhook.h that is not elsewhere. */
#include <errno.h>

#include "registry/registry.h"
#include "hooks/hooks.h"

GH_EXPORT int gdrhook_lookup(const void *ptr, size_t len,
			     struct gdrhook_range *range)
{
	struct gh_range r;
	int rc;

	if (GH_UNLIKELY(!gh_active()))
		return -ENODEV;
	if (GH_UNLIKELY(__atomic_load_n(&gh_untrusted, __ATOMIC_RELAXED)))
		return -ESTALE;
	rc = gh_registry_lookup((uint64_t)(uintptr_t)ptr, len, &r);
	if (GH_UNLIKELY(gh_registry_cfg.validate))
		gh_audit_lookup((uint64_t)(uintptr_t)ptr, rc, &r);
	if (rc == -ENOENT)
		return rc;
	if (range)
		gh_range_copy_out(&r, range);
	return rc;
}

GH_EXPORT int gdrhook_trusted(void)
{
	return gh_active() &&
	       !__atomic_load_n(&gh_untrusted, __ATOMIC_RELAXED);
}

GH_EXPORT void gdrhook_flush_log(void)
{
	if (gh_active() && gh_evlog_enabled())
		gh_evlog_flush();
}

#ifndef GH_VERSION
#define GH_VERSION "unknown"
#endif

GH_EXPORT const char *gdrhook_version(void)
{
	return GH_VERSION;
}

GH_EXPORT unsigned int gdrhook_api_version(void)
{
	return GDRHOOK_API_VERSION;
}

GH_EXPORT int gdrhook_subscribe(uint32_t mask, gdrhook_event_fn fn, void *arg)
{
	if (!fn || !mask ||
	    (mask & ~(uint32_t)(GDRHOOK_EVENT_ALLOC | GDRHOOK_EVENT_FREE |
				GDRHOOK_EVENT_UNTRUSTED)))
		return -EINVAL;
	if (!gh_active())
		return -ENODEV;
	return gh_subscribers_add(mask, fn, arg);
}
