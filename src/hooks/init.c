// SPDX-License-Identifier: MIT
/*
 * Process lifecycle: one-shot init (from the constructor or from whichever
 * hook runs first), exit-time work, fork.
 *
 * Init only parses the configuration and maps the registry: no threads,
 * no files, no driver calls, so programs that inherit LD_PRELOAD and never
 * touch CUDA (bash, python without CUDA) are unaffected.  The log file is
 * opened and the writer started at the first event.
 */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/base.h"
#include "evlog/evlog.h"
#include "registry/registry.h"
#include "hookrt.h"
#include "hooks_opts.h"
#include "init.h"

int gh_state;

static void atfork_prepare(void)
{
	gh_evlog_atfork_prepare();
	gh_registry_atfork_prepare();
}

static void atfork_parent(void)
{
	gh_registry_atfork_parent();
	gh_evlog_atfork_parent();
}

/*
 * The child keeps the parent's registry (same address space) and stays
 * usable; CUDA itself is not usable in a child of a CUDA process, so its
 * calls fail in the driver and we log them as failed calls.
 */
static void atfork_child(void)
{
	gh_registry_atfork_child();
	gh_evlog_atfork_child();
}

static void do_init(void)
{
	int state = GH_STATE_DISABLED;

	gh_config_load();
	if (!gh_hooks_cfg.enable) {
		gh_info("disabled by GDRHOOK_ENABLE=0: pass-through");
		goto out;
	}
	if (gh_registry_init()) {
		gh_warn("cannot set up the registry: running as a pass-through");
		goto out;
	}
	if (gh_evlog_cfg.trace_path) {
		gh_evlog_set_block(gh_evlog_cfg.trace_mode ==
				   GH_CFG_TRACE_MODE_BLOCK);
		if (gh_evlog_configure(gh_evlog_cfg.trace_path,
				       gh_evlog_cfg.trace_ring_bytes))
			gh_config_defer_warning("no event log: bad GDRHOOK_TRACE",
						gh_evlog_cfg.trace_path);
	}
	pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
	gh_guard_set_ops(gh_deferred_pending, gh_deferred_drain,
			 gh_note_cuda_used);
	state = GH_STATE_ACTIVE;
out:
	__atomic_store_n(&gh_state, state, __ATOMIC_RELEASE);
}

void gh_init(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, do_init);
}

/* The lifecycle's one constructor: the face needs none (init.h). */
__attribute__((constructor)) static void gh_constructor(void)
{
	gh_init();
}

/* The linker's bounds of the section gh_face; none (a layer linked
 * without the face, as the unit tests are): both NULL. */
extern const struct gh_face_ops __start_gh_face[]
	__attribute__((weak, visibility("hidden")));
extern const struct gh_face_ops __stop_gh_face[]
	__attribute__((weak, visibility("hidden")));

static const struct gh_face_ops *face(void)
{
	const struct gh_face_ops *lo = __start_gh_face, *hi = __stop_gh_face;

	return lo != hi ? lo : NULL;
}

void gh_lifecycle_banner(void)
{
	const struct gh_face_ops *f = face();

	if (f && f->banner)
		f->banner();
}

static int exit_done;

static void at_exit(void)
{
	const struct gh_face_ops *f = face();

	if (__atomic_exchange_n(&exit_done, 1, __ATOMIC_ACQ_REL))
		return;
	if (gh_state != GH_STATE_ACTIVE)
		return;
	if (gh_registry_cfg.validate)
		gh_audit_sweep();
	if (gh_hooks_cfg.stats) {
		/* Count what is still buffered as written. */
		if (gh_evlog_enabled())
			gh_evlog_flush();
		if (f && f->stats_print)
			f->stats_print();
	}
	if (gh_evlog_enabled())
		gh_evlog_shutdown(gh_registry_count(), gh_registry_bytes());
}

/* Set once the exit-time work is armed (read by the query fast path). */
int gh_cuda_used;

/*
 * Registered at the first CUDA call, after the runtime registered its own
 * exit handler, so ours runs first: the driver still answers the audit
 * sweep then.
 */
void gh_note_cuda_used(void)
{
	if (GH_LIKELY(__atomic_load_n(&gh_cuda_used, __ATOMIC_RELAXED)))
		return;
	if (!__atomic_exchange_n(&gh_cuda_used, 1, __ATOMIC_ACQ_REL)) {
		gh_config_report();
		gh_lifecycle_banner();
		atexit(at_exit);
	}
}

__attribute__((destructor)) static void gh_destructor(void)
{
	at_exit();
}
