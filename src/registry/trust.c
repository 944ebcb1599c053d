// SPDX-License-Identifier: MIT
/*
 * Whether the registry can be trusted: a memory entry point reached with
 * no wrapper (or an effect that could not be replayed) makes it
 * untrusted for good, said once, told to subscribers and the log; lookups
 * answer -ESTALE and nothing is cached from then on.  Registry layer: the
 * resolver, the hooks and the cache all mark it, from below the hooks.
 */
#include <stdlib.h>

#include "base/base.h"
#include "evlog/evlog.h"
#include "ranges.h"
#include "registry_opts.h"
#include "subscribers.h"
#include "trust.h"

int gh_untrusted;

static void (*on_untrusted)(void);

void gh_trust_on_untrusted(void (*fn)(void))
{
	__atomic_store_n(&on_untrusted, fn, __ATOMIC_SEQ_CST);
}

void gh_mark_untrusted(const char *api, const char *why)
{
	struct gh_range none = { 0 };
	int first = !__atomic_exchange_n(&gh_untrusted, 1, __ATOMIC_SEQ_CST);
	void (*fn)(void) = __atomic_load_n(&on_untrusted, __ATOMIC_SEQ_CST);

	if (fn)
		fn();

	GH_COUNT(untrusted, 1);
	if (first) {
		gh_err("%s: %s; the registry is now untrusted and caching is off",
		       api, why);
		gh_subscribers_notify(GDRHOOK_EVENT_UNTRUSTED, &none, api);
	}
	gh_ev_emit_untrusted(GH_EV_UNTRUSTED, 0, api, why);
	if (gh_registry_cfg.strict) {
		gh_err("GDRHOOK_STRICT=1: aborting");
		abort();
	}
}
