// SPDX-License-Identifier: MIT
/*
 * What gdrhook would do here: gdrhook_info() (the gdrhook-info command)
 * and the one-line banner at GDRHOOK_LOG_LEVEL=info.
 *
 * Nothing here is on a hook path except the banner, which only reads the
 * configuration, the pin backend's verdicts (src/pin/pin_choose.c: the
 * same code that makes the choice) and what the cache runs, as recorded
 * there (gh_pin_chosen): nothing here decides.  gdrhook_info() calls the driver
 * (cuInit), opens RDMA devices and /dev/gdrpin, and calls the four routes
 * to a driver entry point as a program would: it is for tools.  Its
 * parts: info_impl.h.
 */
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "evlog/evlog.h"
#include "pin/pin.h"
#include "hooks/hooks.h"
#include "info.h"
#include "info_impl.h"

/* ------------------------------------------------------------ banner */

/*
 * One line at the first CUDA or verbs call, and one more each time the
 * backend the cache runs (gh_pin_chosen) differs from the one the last
 * line named: after auto's NIC-import probe fell back, the banner names
 * what the cache runs.
 */
void gh_info_banner(void)
{
	static const struct gh_pin_ops *said;	/* named by the last line */
	struct gh_pin_explanation x;
	const struct gh_pin_ops *c, *s, *name;
	const char *why;

	if (gh_log_level < GH_LOG_INFO)
		return;
	c = gh_pin_chosen(&why);
	s = __atomic_load_n(&said, __ATOMIC_ACQUIRE);
	if (s && (!c || c == s))
		return;
	if (!c) {
		gh_pin_explain(-1, 0, &x);
		name = gh_pin_backend_ops(x.chosen);
		why = x.reason;
	} else {
		name = c;
	}
	if (!__atomic_compare_exchange_n(&said, &s, name, 0, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE))
		return;
	gh_info("gdrhook %s: pin backend %s (%s%s); event log %s",
		gdrhook_version(), name->name, c ? "chosen; " : "", why,
		gh_evlog_cfg.trace_path ? gh_evlog_cfg.trace_path : "off (GDRHOOK_TRACE unset)");
}

GH_EXPORT int gdrhook_info(int fd, unsigned int flags)
{
	static struct out o;	/* 16 KiB: not on the caller's stack */
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	struct facts *f;
	int err;

	if (flags & ~(GDRHOOK_INFO_JSON | INFO_VIEWS))
		return -EINVAL;
	/* A tool's call: the facts (some 50 KiB) are not kept in every process. */
	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	gh_init();
	pthread_mutex_lock(&lock);
	memset(&o, 0, offsetof(struct out, buf));
	o.fd = fd;
	o.json = !!(flags & GDRHOOK_INFO_JSON);
	o.first = 1;
	gh_buf_init(&o.b, o.buf, sizeof(o.buf));
	gh_info_gather(f);
	gh_info_report(&o, f, flags);
	gh_info_flush(&o);
	err = o.err;
	pthread_mutex_unlock(&lock);
	free(f);
	return err;
}
