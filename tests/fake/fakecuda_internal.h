/* SPDX-License-Identifier: MIT */
/*
 * Fake CUDA driver (test double of libcuda.so.1): shared internals.
 *
 * One process-wide mutex (fc.lock) guards all state; it is held with
 * signals blocked, so a signal handler may call the double.  Every exported
 * driver function starts with FC_ENTER(), which counts the call, applies
 * an injected failure (fakecuda_fail_next) before any side effect, and
 * arranges for errno to be set on return (fakecuda_set_errno).
 */
#ifndef FAKECUDA_INTERNAL_H
#define FAKECUDA_INTERNAL_H

#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define FC_API __attribute__((visibility("default")))
#define FC_HIDDEN __attribute__((visibility("hidden")))

#define FC_DRIVER_VERSION 13000
#define FC_MAX_DEVICES 16
#define FC_GRAN (2UL << 20)		/* large page / VMM granularity */
#define FC_SMALL_ALIGN 512UL		/* sub-allocation granularity */
#define FC_DEV_SPAN (16UL << 30)	/* VA per device (and for VMM) */
#define FC_CTX_STACK 64

/* ---- call accounting and test hooks (fakecuda_core.c) ---- */

struct fc_sym {
	const char *name;
	unsigned long calls;
	int fail_n;
	CUresult fail_rc;
	int raise_n;		/* fakecuda_signal_in_lock() */
	int raise_sig;
	int stall_n;		/* fakecuda_stall_next() */
	int stall_exit_n;	/* fakecuda_stall_next_exit() */
};

struct fc_sym *fc_sym_get(const char *name);
int fc_enter(struct fc_sym **slot, const char *name, CUresult *rc);
void fc_leave(int *unused);
void fc_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * Count the call, set errno on the way out, and return early with an
 * injected error.  Must be the first statement of an exported function.
 */
#define FC_ENTER()							\
	int fc_guard_ __attribute__((cleanup(fc_leave))) = 0;		\
	do {								\
		static struct fc_sym *fc_slot_;				\
		CUresult fc_inj_;					\
		(void)fc_guard_;					\
		if (fc_enter(&fc_slot_, __func__, &fc_inj_))		\
			return fc_inj_;					\
	} while (0)

/*
 * The entry preamble of most exported functions: FC_ENTER(), then refuse
 * with CUDA_ERROR_NOT_INITIALIZED before cuInit, as the real driver does.
 */
#define FC_ENTER_INIT()							\
	FC_ENTER();							\
	do {								\
		if (fc_check_init())					\
			return CUDA_ERROR_NOT_INITIALIZED;		\
	} while (0)

/* Same, for exported functions that return void or a non-CUresult. */
#define FC_ENTER_NOFAIL()						\
	int fc_guard_ __attribute__((cleanup(fc_leave))) = 0;		\
	do {								\
		static struct fc_sym *fc_slot_;				\
		CUresult fc_inj_;					\
		(void)fc_guard_;					\
		(void)fc_enter(&fc_slot_, __func__, &fc_inj_);		\
	} while (0)

/*
 * An exported entry point that only forwards: the driver exports one call
 * under several names (_v2, _ptsz, _ptds, older ABIs) and the double
 * models them as one.  Each name stays a function of its own, since
 * FC_ENTER counts calls and injects failures by name.  @params is the
 * parenthesized parameter list, @call what the function returns.
 */
#define FC_FORWARD(enter, name, params, call)				\
	FC_API CUresult CUDAAPI name params				\
	{								\
		enter();						\
		return call;						\
	}

/* ---- objects ---- */

#define FC_CTX_MAGIC 0x66437478u	/* "fCtx" */
#define FC_STREAM_MAGIC 0x66537472u
#define FC_POOL_MAGIC 0x66506f6cu
#define FC_VMMH_MAGIC 0x66566d68u
#define FC_EVENT_MAGIC 0x66457674u	/* "fEvt" */

struct CUctx_st {
	uint32_t magic;
	int dev;
	int primary;
	int alive;		/* non-primary: not destroyed; primary: active */
	unsigned int flags;
	unsigned int refcount;	/* primary only */
	unsigned long long id;
};

/* A context's alive flag is read without the double's lock (the real
 * driver is thread-safe there) and written under it. */
static inline int fc_alive(const struct CUctx_st *c)
{
	return __atomic_load_n(&c->alive, __ATOMIC_ACQUIRE);
}

static inline void fc_set_alive(struct CUctx_st *c, int v)
{
	__atomic_store_n(&c->alive, v, __ATOMIC_RELEASE);
}

struct CUstream_st {
	uint32_t magic;
	int alive;
	CUcontext ctx;
	unsigned int flags;
	struct CUgraph_st *capture;	/* graph being captured, or NULL */
};

/* Work is synchronous, so an event is always complete: it records only
 * whether and when it was recorded (fakecuda_event.c). */
struct CUevent_st {
	uint32_t magic;
	int alive;
	CUcontext ctx;
	unsigned int flags;	/* CU_EVENT_* */
	int recorded;
	uint64_t recorded_ns;	/* CLOCK_MONOTONIC at the last record */
};

struct fc_freelist {
	size_t size;
	uintptr_t *v;
	size_t n, cap;
};

struct fc_flset {
	struct fc_freelist *l;
	size_t n, cap;
};

struct CUmemPoolHandle_st {
	uint32_t magic;
	int dev;
	int alive;
	int is_default;
	cuuint64_t release_threshold;
	int reuse_follow_event, reuse_opportunistic, reuse_internal;
	size_t cached_bytes, used_bytes, high_used, high_reserved;
	struct fc_flset cache;	/* freed blocks kept by the pool */
	struct CUmemPoolHandle_st *next;
	unsigned int handle_types;	/* exportable as (CUmemPoolProps) */
	int import_fd;		/* imported pool: the exporter's memfd, else -1 */
};

struct fc_vmmh {
	uint32_t magic;
	int dev;
	int fd;
	size_t size;
	unsigned int refs;	/* handle references + live mappings */
	unsigned int handle_refs;
	CUmemAllocationProp prop;
};

enum fc_kind {
	FC_K_DEVICE = 1,	/* cuMemAlloc, cuMemAllocPitch */
	FC_K_MANAGED,
	FC_K_POOL,		/* cuMemAlloc[FromPool]Async */
	FC_K_HOST_ALLOC,	/* cuMemAllocHost, cuMemHostAlloc */
	FC_K_HOST_REG,		/* cuMemHostRegister */
	FC_K_VMM,		/* one cuMemMap'd range */
	FC_K_IPC,		/* cuIpcOpenMemHandle */
	FC_K_GRAPH,		/* a launched graph memory node */
	FC_K_EXTERNAL,		/* cuExternalMemoryGetMappedBuffer */
	FC_K_GLOBAL,		/* a module or library global */
	FC_K_POOL_IMPORT,	/* cuMemPoolImportPointer */
};

struct fc_alloc {
	uintptr_t base;
	size_t size;		/* what the caller asked for */
	uintptr_t span_base;	/* VA held (rounded) */
	size_t span;
	enum fc_kind kind;
	int dev;
	int small;		/* sub-allocated from a 2 MiB chunk */
	CUcontext ctx;
	unsigned long long buffer_id;
	struct CUmemPoolHandle_st *pool;
	unsigned int host_flags;
	/* VMM mapping / IPC import */
	struct fc_vmmh *vmmh;
	size_t map_offset;
	unsigned int ipc_refs;
	int ipc_pid;
	unsigned long long ipc_buffer_id;
	/* VMM mapping: CUmemAccess_flags per device (cuMemSetAccess) */
	unsigned char access[FC_MAX_DEVICES];
	/* global: its module or library, and its index there */
	const void *owner;
	int owner_idx;
};

struct fc_reserve {
	uintptr_t base;
	size_t size;
};

struct fc_dev {
	uintptr_t lo, hi, bump;
	int memfd;
	struct fc_flset big_free;	/* free VA spans, by size, LIFO */
	struct fc_flset small_free;	/* free small blocks, by size, LIFO */
	uintptr_t chunk;		/* current small chunk */
	size_t chunk_off;
	struct CUctx_st primary;
	struct CUmemPoolHandle_st default_pool;
	struct CUmemPoolHandle_st *cur_pool;
	char name[64];
};

struct fc_state {
	pthread_mutex_t lock;
	int initialized;
	int ndev;
	int log;
	/* FAKECUDA_ALLOC_HOLD_NS: ns the driver's lock is held in each
	 * allocation and free (a busy wait), as the real driver serializes
	 * them; 0: off */
	long hold_ns;
	int ipc_same_process;
	int errno_set;
	int errno_val;
	uintptr_t region;
	size_t region_size;
	struct fc_dev dev[FC_MAX_DEVICES];
	/* VMM address space */
	uintptr_t vmm_lo, vmm_hi, vmm_bump;
	struct fc_flset vmm_free;
	struct fc_reserve *res;
	size_t nres, capres;
	/* allocation registry, sorted by base */
	struct fc_alloc **a;
	size_t na, capa;
	size_t live_bytes;
	unsigned long long next_buffer_id;
	unsigned long long next_ctx_id;
	struct CUmemPoolHandle_st *pools;
	/* DMA-BUF fallback: fd -> byte offset of the range in the file */
	/* exports by the sequence number their file position holds */
	struct { uint64_t seq, off, va; } dmabuf[4096];
	uint64_t dmabuf_seq;
};

extern FC_HIDDEN struct fc_state fc;

/*
 * fc.lock, taken with every signal blocked on the thread (fakecuda_core.c
 * says why).
 */
void fc_lock(void);
/* The serialization model: busy-wait fc.hold_ns with fc.lock held. */
void fc_hold(void);
void fc_unlock(void);

/* fakecuda_core.c */
CUresult fc_check_init(void);
CUcontext fc_current(void);
CUresult fc_current_ctx(CUcontext *out);	/* needs lock */
int fc_ctx_valid(CUcontext c);
int fc_stream_ok(CUstream s);

static inline size_t fc_round_up(size_t v, size_t a)
{
	return (v + a - 1) / a * a;
}

/* fakecuda_va.c: address space, blocks, allocation records (need lock) */
void fc_mem_fork_reset(void);
CUresult fc_region_init(void);
int fc_fl_push(struct fc_flset *s, size_t size, uintptr_t v);
int fc_fl_pop(struct fc_flset *s, size_t size, uintptr_t *v);
int fc_dev_of(uintptr_t p);
void fc_unmap_to_reserved(uintptr_t va, size_t len);
CUresult fc_dev_take_va(int d, size_t span, uintptr_t *out);
void fc_dev_put_va(int d, uintptr_t va, size_t span);
CUresult fc_dev_block_alloc(int d, size_t size, uintptr_t *va, size_t *span,
			    int *small);
void fc_dev_block_free(int d, uintptr_t va, size_t span, int small);
struct fc_alloc *fc_find(uintptr_t p);
struct fc_alloc *fc_reg_overlap(uintptr_t p, size_t len);
struct fc_alloc *fc_reg_add(enum fc_kind kind, uintptr_t base, size_t size,
			    int dev, CUcontext ctx);
void fc_release_alloc(struct fc_alloc *a);
void fc_free_ctx_allocs(CUcontext c);

/* fakecuda_mem.c */
CUresult fc_mem_free(CUdeviceptr dptr, int async);

/* fakecuda_pool.c */
void fc_pool_init(struct CUmemPoolHandle_st *p, int dev, int is_default);
void fc_pool_release_to_threshold(int dev);

/* fakecuda_vmm.c */
struct fc_reserve *fc_res_find(uintptr_t p);

/* fakecuda_graph.c (need lock) */
CUgraph fc_capturing(CUstream s);
CUresult fc_graph_capture_alloc(CUgraph g, CUcontext ctx, size_t size,
				CUdeviceptr *dptr);
CUresult fc_graph_capture_free(CUgraph g, uintptr_t va);

/* fakecuda_gpa.c */
CUresult fc_getprocaddress(const char *symbol, void **pfn, int ver,
			   cuuint64_t flags,
			   CUdriverProcAddressQueryResult *status, int legacy);

/* SYNC_MEMOPS per pointer (fakecuda_gdr.c); fc lock held. */
CUresult fc_syncmemops_set(const struct fc_alloc *a);
int fc_syncmemops_get(const struct fc_alloc *a);
/* DMA-BUF mapping type (fakecuda_gdr.c): FAKECUDA_C2C=1, and whether an
 * export with these flags is accepted. */
int fc_c2c(void);
CUresult fc_dmabuf_flags(unsigned long long flags);

#endif
