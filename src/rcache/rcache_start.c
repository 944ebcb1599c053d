// SPDX-License-Identifier: MIT
/*
 * Starting the registration cache, at the first registration of tracked
 * GPU memory: the pin backend, asked of the pin layer for each NIC
 * (gh_pin_for_nic: GDRHOOK_BACKEND, or auto's choice with its per-NIC
 * DMA-BUF import probe and fallback, all in src/pin/pin_choose.c), then
 * the cache itself on that backend (GDRHOOK_CACHE_MAX_*,
 * GDRHOOK_REMOTE_EXPOSURE).  What the cache then runs is recorded in the
 * pin layer (gh_pin_record), for the banner and gdrhook-info.
 */
#include <pthread.h>
#include <infiniband/verbs.h>

#include "pin/pin.h"
#include "rcache_api.h"
#include "rcache_opts.h"

static const struct gh_pin_ops *started;	/* what the cache runs */
static const struct gh_pin_ops *tried;	/* the last backend it was given */
static int recorded;

static int exposure_flags(void)
{
	return gh_rcache_cfg.remote_exposure == GH_CFG_EXPOSURE_ALLOCATION ? 0 :
	       GH_RC_EXPOSE_EXACT;
}

static void cache_on(const struct gh_pin_ops *ops)
{
	if (!gh_rcache_init(ops, gh_rcache_cfg.cache_max_size,
			    gh_rcache_cfg.cache_max_count, exposure_flags()))
		__atomic_store_n(&started, ops, __ATOMIC_RELEASE);
	else
		gh_warn("registration cache: no memory for its tables: registrations pass through uncached");
}

const struct gh_pin_ops *gh_rcache_start(const struct gh_range *g,
					 struct ibv_pd *pd)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	const struct gh_pin_ops *ops = gh_pin_for_nic(g, pd, !!exposure_flags()), *run;

	/* the same backend as before, or this NIC passes through */
	if (__atomic_load_n(&recorded, __ATOMIC_ACQUIRE) &&
	    (!ops || ops == __atomic_load_n(&tried, __ATOMIC_ACQUIRE)))
		return ops && ops == __atomic_load_n(&started, __ATOMIC_ACQUIRE) ?
		       ops : NULL;
	pthread_mutex_lock(&lock);
	if (ops && ops != tried && !started) {
		cache_on(ops);
		__atomic_store_n(&tried, ops, __ATOMIC_RELEASE);
	}
	run = started;
	gh_pin_record(run, ops && !run ?
		      "registration cache: no memory for its tables: registrations pass through uncached" :
		      NULL);
	__atomic_store_n(&recorded, 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&lock);
	return ops && ops == run ? ops : NULL;
}
