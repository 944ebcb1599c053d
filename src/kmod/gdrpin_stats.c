// SPDX-License-Identifier: GPL-2.0
/*
 * gdrpin: accounting, quota and counters.
 *
 * Counters are read-only sysfs attributes of the misc device:
 *   /sys/class/misc/gdrpin/stats/<name>
 * pinned_bytes counts pins still held by an fd (revoked ones included until
 * they are released with UNPIN or GET_REVOKED); max_pinned_bytes (module
 * parameter, 0 = unlimited) bounds it, and a pin that would exceed it fails
 * with -ENOSPC; so does one over its opener's max_user_pinned_bytes
 * (gdrpin_user.c).
 */
#include <linux/device.h>
#include <linux/errno.h>
#include <linux/moduleparam.h>
#include <linux/sysfs.h>

#include "gdrpin.h"

struct gdrpin_counters gdrpin_cnt;
atomic_t gdrpin_live_ctx = ATOMIC_INIT(0);	/* open contexts (gdrpin_ctx.c) */

unsigned long gdrpin_max_pinned_bytes;
module_param_named(max_pinned_bytes, gdrpin_max_pinned_bytes, ulong, 0644);
MODULE_PARM_DESC(max_pinned_bytes,
		 "Quota on bytes pinned by all fds; 0 = unlimited (-ENOSPC)");

/* Charge a pin's bytes to the global quota and the opener's uid. */
bool gdrpin_quota_reserve(struct gdrpin_ctx *ctx, u64 bytes)
{
	u64 max = READ_ONCE(gdrpin_max_pinned_bytes);
	u64 now = atomic64_add_return(bytes, &gdrpin_cnt.pinned_bytes);

	if (max && now > max) {
		atomic64_sub(bytes, &gdrpin_cnt.pinned_bytes);
		return false;
	}
	if (!gdrpin_user_reserve(ctx->user, bytes)) {
		atomic64_sub(bytes, &gdrpin_cnt.pinned_bytes);
		return false;
	}
	return true;
}

void gdrpin_quota_release(struct gdrpin_ctx *ctx, u64 bytes)
{
	gdrpin_user_unreserve(ctx->user, bytes);
	WARN_ON(atomic64_sub_return(bytes, &gdrpin_cnt.pinned_bytes) < 0);
}

void gdrpin_count_failure(int err)
{
	switch (err) {
	case -ENOMEM:
		atomic64_inc(&gdrpin_cnt.fail_nomem);
		break;
	case -EINVAL:
		atomic64_inc(&gdrpin_cnt.fail_inval);
		break;
	case -ENOSPC:
	case -ENOBUFS:
		atomic64_inc(&gdrpin_cnt.fail_nospc);
		break;
	case -ENODEV:
		atomic64_inc(&gdrpin_cnt.fail_nodev);
		break;
	default:
		atomic64_inc(&gdrpin_cnt.fail_other);
		break;
	}
}

void gdrpin_count_pin_time(u64 ns)
{
	s64 old = atomic64_read(&gdrpin_cnt.pin_ns_max);

	atomic64_add(ns, &gdrpin_cnt.pin_ns_total);
	while ((u64)old < ns) {
		s64 seen = atomic64_cmpxchg(&gdrpin_cnt.pin_ns_max, old, ns);

		if (seen == old)
			break;
		old = seen;
	}
}

#define GDRPIN_STAT_ATTR(name)						\
static ssize_t name##_show(struct device *dev,				\
			   struct device_attribute *attr, char *buf)	\
{									\
	return sysfs_emit(buf, "%lld\n",				\
			  (long long)atomic64_read(&gdrpin_cnt.name));	\
}									\
static DEVICE_ATTR_RO(name)

GDRPIN_STAT_ATTR(pins);
GDRPIN_STAT_ATTR(unpins);
GDRPIN_STAT_ATTR(revocations);
GDRPIN_STAT_ATTR(legacy_fallbacks);
GDRPIN_STAT_ATTR(fail_nomem);
GDRPIN_STAT_ATTR(fail_inval);
GDRPIN_STAT_ATTR(fail_nospc);
GDRPIN_STAT_ATTR(fail_nodev);
GDRPIN_STAT_ATTR(fail_other);
GDRPIN_STAT_ATTR(pin_ns_total);
GDRPIN_STAT_ATTR(pin_ns_max);
GDRPIN_STAT_ATTR(pinned_bytes);
GDRPIN_STAT_ATTR(live_pins);
GDRPIN_STAT_ATTR(kapi_refs);
GDRPIN_STAT_ATTR(peer_regs);
GDRPIN_STAT_ATTR(peer_invalidations);
GDRPIN_STAT_ATTR(peer_client);

static ssize_t live_ctx_show(struct device *dev, struct device_attribute *attr,
			     char *buf)
{
	return sysfs_emit(buf, "%d\n", atomic_read(&gdrpin_live_ctx));
}
static DEVICE_ATTR_RO(live_ctx);

static struct attribute *gdrpin_stats_attrs[] = {
	&dev_attr_pins.attr,
	&dev_attr_unpins.attr,
	&dev_attr_revocations.attr,
	&dev_attr_legacy_fallbacks.attr,
	&dev_attr_fail_nomem.attr,
	&dev_attr_fail_inval.attr,
	&dev_attr_fail_nospc.attr,
	&dev_attr_fail_nodev.attr,
	&dev_attr_fail_other.attr,
	&dev_attr_pin_ns_total.attr,
	&dev_attr_pin_ns_max.attr,
	&dev_attr_pinned_bytes.attr,
	&dev_attr_live_pins.attr,
	&dev_attr_kapi_refs.attr,
	&dev_attr_live_ctx.attr,
	&dev_attr_peer_regs.attr,
	&dev_attr_peer_invalidations.attr,
	&dev_attr_peer_client.attr,
	NULL,
};

static const struct attribute_group gdrpin_stats_group = {
	.name = "stats",
	.attrs = gdrpin_stats_attrs,
};

const struct attribute_group *gdrpin_attr_groups[] = {
	&gdrpin_stats_group,
	NULL,
};
