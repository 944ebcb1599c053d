/* SPDX-License-Identifier: MIT */
/*
 * gdrhook public API.
 *
 * libgdrhook.so is usually LD_PRELOADed into an unmodified program; a
 * communication library that wants to use the registry instead of asking
 * the driver (cuPointerGetAttribute(CU_POINTER_ATTRIBUTE_BUFFER_ID)) on
 * every cache hit can either link -lgdrhook or, with no link dependency,
 * include <gdrhook_preload.h>, which finds these functions at run time.
 *
 * Every function here is thread-safe.  gdrhook_lookup() is lock-free and
 * writes no shared memory.
 */
#ifndef GDRHOOK_H
#define GDRHOOK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GDRHOOK_API_VERSION	1

/* What kind of memory a tracked range is. */
enum gdrhook_kind {
	GDRHOOK_KIND_NONE = 0,
	GDRHOOK_KIND_DEVICE = 1,	/* cuMemAlloc, cuMemAllocPitch, cudaMalloc */
	GDRHOOK_KIND_MANAGED = 2,	/* cuMemAllocManaged */
	GDRHOOK_KIND_HOST = 3,		/* cuMemAllocHost, cuMemHostAlloc */
	GDRHOOK_KIND_HOST_REGISTERED = 4, /* cuMemHostRegister */
	GDRHOOK_KIND_POOL = 5,		/* cuMemAllocAsync, ...FromPoolAsync */
	GDRHOOK_KIND_VMM = 6,		/* one cuMemMap'ed range */
	GDRHOOK_KIND_IPC = 7,		/* cuIpcOpenMemHandle */
	GDRHOOK_KIND_GRAPH = 8,		/* graph memory node, while launched */
	GDRHOOK_KIND_GLOBAL = 9,	/* module/library global variable */
	GDRHOOK_KIND_EXTERNAL = 10,	/* external memory mapped buffer */
	GDRHOOK_KIND_COUNT_
};

/* gdrhook_range.flags */
#define GDRHOOK_RANGE_VOLATILE	0x1u	/* pool memory: revalidate before use */

struct gdrhook_range {
	uint64_t base;		/* start of the whole allocation */
	uint64_t size;		/* its size in bytes */
	uint64_t gen;		/* unique per allocation, never reused */
	uint64_t ctx;		/* CUcontext it was made in (0: none) */
	uint64_t pool;		/* CUmemoryPool for pool memory, else 0 */
	int32_t dev;		/* device ordinal, -1 for host memory */
	uint32_t kind;		/* enum gdrhook_kind */
	uint32_t flags;		/* GDRHOOK_RANGE_* */
	uint32_t reserved;
};

/*
 * Look up the tracked allocation containing [ptr, ptr + len) (len 0 means
 * 1 byte).  Returns:
 *   0        found: *range describes the whole allocation;
 *   -ENOENT  ptr is not in any tracked GPU allocation;
 *   -ERANGE  ptr is in one, but ptr + len runs past its end (*range is
 *            filled with that allocation);
 *   -ENODEV  the shim is disabled (GDRHOOK_ENABLE=0) or not initialized;
 *   -ESTALE  the registry is untrusted (an allocation or free entry point
 *            was reached that gdrhook could not wrap): do not cache.
 * The generation replaces the driver's buffer ID: it changes on every
 * free and reallocation at the same address.
 */
int gdrhook_lookup(const void *ptr, size_t len, struct gdrhook_range *range);

/* 1 when every allocation and free has been seen so far, else 0. */
int gdrhook_trusted(void);

/* Events delivered to subscribers. */
enum gdrhook_event_type {
	GDRHOOK_EVENT_ALLOC = 1 << 0,	/* after the real allocation succeeded */
	GDRHOOK_EVENT_FREE = 1 << 1,	/* before the real free runs */
	GDRHOOK_EVENT_UNTRUSTED = 1 << 2, /* the registry became untrusted */
};

struct gdrhook_event {
	uint32_t type;		/* one enum gdrhook_event_type bit */
	uint32_t reserved;
	struct gdrhook_range range;
	const char *api;	/* exact entry point, e.g. "cuMemFreeAsync_ptsz" */
};

/*
 * Callbacks run on the thread that made the call, inside the hook, with no
 * gdrhook lock held.  They must not block for long.  CUDA calls made
 * from them reach the driver directly; their effect on the registry is
 * applied before the hook returns (calls whose effect cannot be replayed,
 * such as destroying a context, mark the registry untrusted).
 */
typedef void (*gdrhook_event_fn)(const struct gdrhook_event *ev, void *arg);

/*
 * Subscribe to the event types in mask.  Returns a handle >= 0, or
 * -EINVAL (no fn, unknown bits), -ENOSPC (too many subscribers), -ENODEV.
 * A handle names this one subscription: once it is unsubscribed, the
 * handle is refused, even when a later subscription took its place.
 * A callback always gets the arg subscribed with its fn.
 */
int gdrhook_subscribe(uint32_t mask, gdrhook_event_fn fn, void *arg);

/*
 * Returns 0, or -EINVAL for a handle that is not subscribed (any more).
 * On 0 no callback of the subscription runs any more, and none starts:
 * it waits for those running on other threads to return.  Called from
 * the subscription's own callback, it does not wait for that callback
 * (which goes on to its end) but for the others; it must not be used to
 * wait for a subscription whose callbacks may themselves be waiting for
 * the caller's.  Not async-signal-safe.
 */
int gdrhook_unsubscribe(int handle);

/*
 * Counters (src/face/stats_list.h is their one list: the README's table and
 * the GDRHOOK_STATS printout come from it).  Members are only ever
 * appended; st->size tells which ones the caller knows.
 */
struct gdrhook_stats {
	uint64_t size;		/* set by the caller: sizeof(struct) */
	uint64_t allocs;	/* successful allocations seen */
	uint64_t frees;		/* frees of tracked allocations */
	uint64_t frees_untracked; /* frees of pointers never seen */
	uint64_t failed_calls;	/* hooked calls whose real call failed */
	uint64_t implicit_frees; /* dropped by context destroy/reset */
	uint64_t live;		/* tracked allocations now */
	uint64_t live_bytes;
	uint64_t peak_live_bytes;
	uint64_t lookups;	/* gdrhook_lookup calls (when counted) */
	uint64_t untrusted;	/* entry points reached with no wrapper */
	uint64_t audit_checks;	/* GDRHOOK_VALIDATE comparisons made */
	uint64_t audit_disagreements;
	uint64_t log_events;	/* event log records written */
	uint64_t log_dropped;	/* event log records lost */
	uint64_t regs_seen;	/* ibv_reg_mr-family calls seen */
	uint64_t regs_passed;	/* ... passed through untouched */
	uint64_t rcache_hits;	/* registration cache: served from it */
	uint64_t rcache_misses;
	uint64_t rcache_evictions;
	uint64_t stale_averted;	/* dropped before their memory was freed */
	uint64_t revoked;	/* ... that the program still held */
	uint64_t pinned_bytes;	/* pinned by the cache now */
	uint64_t nic_regs;	/* real NIC (de)registrations */
	uint64_t nic_deregs;
	uint64_t regs_raced;	/* tied to memory a call in flight made */
	uint64_t window_binds;	/* exact registrations served by a window */
	uint64_t window_invalidations;
	uint64_t window_fallbacks; /* refused binds: NIC registrations instead */
};

/* Fill *st (st->size must be set; older/newer sizes are honoured). */
int gdrhook_get_stats(struct gdrhook_stats *st);

/* Write every buffered event log record out now. */
void gdrhook_flush_log(void);

/* GDRHOOK_API_VERSION of the loaded library. */
unsigned int gdrhook_api_version(void);

/* The library's release, e.g. "1.0". */
const char *gdrhook_version(void);

#define GDRHOOK_INFO_JSON	0x1u	/* one JSON object instead of text: all of it */
/* Text views, any together; none: the summary (a verdict, then one screen). */
#define GDRHOOK_INFO_DEVICES	0x2u	/* versions, each GPU and RDMA device */
#define GDRHOOK_INFO_ROUTES	0x4u	/* pin backend, each NIC's route, interception */
#define GDRHOOK_INFO_CONFIG	0x8u	/* every GDRHOOK_* variable and its meaning */
#define GDRHOOK_INFO_ALL	0xeu

/*
 * Write to fd what gdrhook would do in this process (the gdrhook-info
 * command): first a one-line verdict, then, by the views in flags (none:
 * a one-screen summary), versions, the GPUs and RDMA devices found, the
 * pin backend auto would choose and why each other one was rejected, the
 * route an exact registration takes on each NIC, whether the four routes
 * to a driver entry point resolve to gdrhook's wrappers, and the
 * configuration in effect with each variable's source and meaning.
 * It initializes the CUDA driver and opens RDMA devices: a tool's call,
 * not one for a program's hot path.  Returns 0, -EINVAL for unknown
 * flags, -ENOMEM, or -errno when writing failed.
 */
int gdrhook_info(int fd, unsigned int flags);

#ifdef __cplusplus
}
#endif

#endif
