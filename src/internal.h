/* SPDX-License-Identifier: MIT */
/* Internal declarations shared across src/. */
#ifndef GH_INTERNAL_H
#define GH_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "gdrhook.h"
#include "registry.h"
#include "evrec.h"
#include "clock.h"

#define GH_HIDDEN __attribute__((visibility("hidden")))
#define GH_EXPORT __attribute__((visibility("default")))
/* For code a sanitizer runtime may run before it is initialized. */
#define GH_NO_SANITIZE __attribute__((no_sanitize_address, \
					no_sanitize_thread, \
					no_sanitize_undefined))
#define GH_LIKELY(x) __builtin_expect(!!(x), 1)
#define GH_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* Parsed GDRHOOK_* configuration (config.c); read-only after init. */
struct gh_config {
	int enable;
	const char *log_path;
	int log_level;
	int stats;
	int validate;
	uint64_t log_ring_bytes;
	const char *libcuda;
	int strict;
	const char *backend;		/* GDRHOOK_BACKEND (src/pin_choose.c) */
	uint64_t cache_max_size;	/* GDRHOOK_CACHE_MAX_SIZE (src/rcache.c) */
	uint64_t cache_max_count;	/* GDRHOOK_CACHE_MAX_COUNT */
	const char *remote_exposure;	/* GDRHOOK_REMOTE_EXPOSURE (rcache) */
	int windows;			/* GDRHOOK_WINDOWS (src/mwin.c) */
	const char *buffer_id;		/* GDRHOOK_BUFFER_ID (src/ptrattr.c) */
	const char *pointer_queries;	/* GDRHOOK_POINTER_QUERIES (ptrattr.c) */
	const char *log_mode;		/* GDRHOOK_LOG_MODE: "drop", "block" */
	int sync_memops;		/* GDRHOOK_SYNC_MEMOPS (src/syncmemops.c) */
	uint64_t pin_whole_max;		/* GDRHOOK_PIN_WHOLE_MAX (src/bar.c) */
	const char *dmabuf_mapping;	/* GDRHOOK_DMABUF_MAPPING (src/pin_dmabuf.c) */
};
extern struct gh_config gh_cfg;

int gh_config_load(void);
/* Warn about unknown GDRHOOK_* names and bad values (once, at the first
 * CUDA or verbs call: processes that merely inherit the environment stay
 * silent). */
void gh_config_report(void);
/* Keep one warning ("msg \"arg\"") for gh_config_report(). */
void gh_config_defer_warning(const char *msg, const char *arg);

/* One configuration table row and the value in effect (config.c). */
enum gh_cfg_source {
	GH_CFG_DEFAULT,		/* not set */
	GH_CFG_ENV,		/* from the environment */
	GH_CFG_BAD_ENV,		/* set, but not valid: the default is used */
};
struct gh_config_row {
	const char *name;	/* without the GDRHOOK_ prefix */
	const char *def, *doc, *value;
	enum gh_cfg_source source;
};
int gh_config_row(unsigned int i, struct gh_config_row *r_p);	/* -ENOENT: past the end */
const char *gh_config_unknown(unsigned int i);	/* "GDRHOOK_X=v" or NULL */

/* gdrhook-info (info.c); the one-line banner at GDRHOOK_LOG_LEVEL=info,
 * printed once at the first CUDA or verbs call. */
void gh_info_banner(void);
/* The face's part of the lifecycle, handed down to init.c at load: the
 * banner (gh_lifecycle_banner() prints it once) and the exit counters. */
void gh_lifecycle_set_face(void (*banner)(void), void (*stats_print)(void));
void gh_lifecycle_banner(void);

/* Process-wide state (init.c). */
enum gh_state {
	GH_STATE_UNINIT = 0,
	GH_STATE_ACTIVE,
	GH_STATE_DISABLED,	/* GDRHOOK_ENABLE=0 or init failed */
};
extern int gh_state;
void gh_init(void);		/* idempotent; safe from any hook */
static inline int gh_active(void)
{
	int s = __atomic_load_n(&gh_state, __ATOMIC_ACQUIRE);

	if (GH_UNLIKELY(s == GH_STATE_UNINIT)) {
		gh_init();
		s = __atomic_load_n(&gh_state, __ATOMIC_ACQUIRE);
	}
	return s == GH_STATE_ACTIVE;
}
/* Arm the exit-time work (audit sweep, log flush) once CUDA is used. */
void gh_note_cuda_used(void);
extern int gh_cuda_used;

/* Untrusted registry (a memory entry point reached with no wrapper;
 * src/trust.c). */
extern int gh_untrusted;
void gh_mark_untrusted(const char *api, const char *why);

/* Loader access (resolve.c). */
void *gh_real_dlsym(void *handle, const char *name);
/* libc's dlsym/dlvsym themselves, found without any loader call. */
void *gh_libc_dlsym_fn(void);
void *gh_libc_dlvsym_fn(void);
void *gh_real_dlvsym(void *handle, const char *name, const char *version);
void *gh_libcuda_handle(void);
int gh_addr_is_ours(const void *p);
/* Wrapper for a function pointer the program obtained from a resolver:
 * returns the wrapper to hand out instead of p, or p itself. */
void *gh_substitute(const char *requested, void *p, const char *route);
/* The same for ibv_* names (src/verbs.c). */
void *gh_verbs_substitute(const char *name, void *p, const char *route);
int gh_sym_find(const char *name);
/* Record p as the real function of hooked symbol sym (from a resolver);
 * -EEXIST if a different one was recorded before. */
int gh_real_set(unsigned int sym, void *p);
/* @name from the object that defines @fn (NULL if none or ours). */
void *gh_real_sibling(const void *fn, const char *name);

/* Real driver calls made by gdrhook itself, never through a wrapper. */
struct gh_drv;
int gh_drv_ctx_current(uint64_t *ctx_p);
int gh_drv_ctx_device(int *dev_p);
int gh_drv_ctx_device_of(uint64_t ctx, int *dev_p);
void gh_drv_ctx_forget(void);
int gh_drv_range(uint64_t ptr, uint64_t *base_p, uint64_t *size_p);
int gh_drv_buffer_id(uint64_t ptr, uint64_t *id_p);
int gh_drv_primary_ctx(int dev, uint64_t *ctx_p);	/* 0 if active */
int gh_drv_primary_active(int dev);
int gh_drv_vmm_device(uint64_t handle, int *dev_p);
int gh_drv_vmm_mapped(uint64_t ptr);
int gh_drv_pointer_attrs(uint64_t ptr, uint64_t *ctx_p, int *dev_p);
int gh_drv_capture_graph(uint64_t stream, uint64_t *graph_p);
int gh_drv_graph_node_type(uint64_t n);

/* Subscribers (subscribers.c): the table and its notification; the
 * public gdrhook_subscribe (api.c) adds to it once gdrhook is active. */
void gh_subscribers_notify(uint32_t type, const struct gh_range *r,
			   const char *api);
int gh_subscribers_add(uint32_t mask, gdrhook_event_fn fn, void *arg);

/* Counters (stats.c). */
struct gh_counters {
	uint64_t allocs, frees, frees_untracked, failed_calls;
	uint64_t implicit_frees, lookups, untrusted;
	uint64_t audit_checks, audit_disagreements;
	uint64_t peak_live_bytes;
	uint64_t regs_seen, regs_passed;	/* verbs registrations */
};
extern struct gh_counters gh_ctr;
#define GH_COUNT(field, n) \
	__atomic_add_fetch(&gh_ctr.field, (n), __ATOMIC_RELAXED)
void gh_stats_print(void);

/* Audit mode (audit.c, GDRHOOK_VALIDATE=1). */
void gh_audit_alloc(const struct gh_range *r, const char *api);
void gh_audit_free(const struct gh_range *r, const char *api);
void gh_audit_lookup(uint64_t ptr, int rc, const struct gh_range *r);
void gh_audit_sweep(void);
void gh_audit_report(const char *api, uint64_t ptr, uint64_t size,
		     uint64_t gen, const char *what);

/* Guard for gdrhook-initiated work outside a wrapper (guard.c). */
int gh_guard_enter(void);
void gh_guard_leave(int was);
/* Down to was, applying what the guarded window queued (the wrappers). */
void gh_guard_down(int was);
/* What coming down means, handed down by the hooks layer at init: is
 * anything queued, apply it, and the first use (arm the exit work). */
void gh_guard_set_ops(int (*pending)(void), void (*drain)(void),
		      void (*first_use)(void));

/* Per-thread call state (call.c). */
struct gh_tls {
	int busy;		/* inside gdrhook's own code */
	struct gh_call *rt_outer; /* runtime call in progress */
};
extern __thread struct gh_tls gh_tls __attribute__((tls_model("initial-exec")));

/* Non-zero while gdrhook's own code runs on this thread. */
static inline int gh_guard_busy(void)
{
	return gh_tls.busy;
}

/* Emit one event to the log (when configured).  Records are started with
 * gh_evrec_start(); most callers use a family's gh_ev_emit_*() (evrec.h). */
void gh_emit(const struct gh_evrec *r);

#endif
