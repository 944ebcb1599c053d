// SPDX-License-Identifier: MIT
/*
 * Pointer queries answered from the registry: cuPointerGetAttribute,
 * cuPointerGetAttributes, cuMemGetAddressRange_v2 and the runtime's
 * cudaPointerGetAttributes (a static runtime reaches the driver's call
 * through our cuGetProcAddress).  Communication libraries
 * classify every message buffer this way; the driver takes 0.2-2.3 us a
 * call and serializes threads, a registry lookup takes one cache miss.
 *
 * What is answered (GDRHOOK_POINTER_QUERIES=registry, the default):
 *
 *  - a pointer inside a tracked allocation: every attribute the registry
 *    determines exactly for that kind of memory (the table exact[] below,
 *    checked attribute by attribute against the driver on an H100), with
 *    the driver's value, width and return code;
 *  - a pointer in no tracked allocation, while the registry is trusted
 *    and every route to a GPU address is wrapped (routes_complete()):
 *    what the driver answers for plain host memory (INVALID_VALUE;
 *    NOT_FOUND and zeros for the address range; negative_value() for
 *    cuPointerGetAttributes), once the driver has answered one query
 *    itself (so before cuInit the driver still says NOT_INITIALIZED);
 *  - anything else (another attribute, a kind not in the table, bad
 *    arguments, an untrusted registry, a call made from gdrhook's own
 *    code) goes to the driver unchanged.
 *
 * BUFFER_ID of a tracked pointer is the allocation's generation with bit
 * 63 set (GDRHOOK_BUFFER_ID=registry): it changes on every free and
 * reallocation at the same address, is never reused in the process, and
 * cannot collide with an ID the driver hands out (small counters), so a
 * cache that stored one of ours and later gets the driver's sees a
 * mismatch and re-registers: it never mistakes one for the other.
 *
 * GDRHOOK_VALIDATE=1 asks the driver as well for every query answered
 * here, reports any difference as an audit event and returns the
 * driver's answer.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "hookrt.h"
#include "base/base.h"
#include "platform/platform.h"
#include "registry/registry.h"
#include "hooks_opts.h"
#include "init.h"

#undef cuPointerGetAttribute
#undef cuPointerGetAttributes
#undef cuMemGetAddressRange
#undef cudaPointerGetAttributes

#define GH_BUFFER_ID_TAG	(1ULL << 63)
#define GH_ATTR_MAX		32	/* bit per attribute in exact[] */
#define GH_ATTR_BYTES		16	/* widest value we write (8) + slack */
#define GH_POISON		0xa5

typedef CUresult (*get_attr_fn)(void *, CUpointer_attribute, CUdeviceptr);
typedef CUresult (*get_attrs_fn)(unsigned int, CUpointer_attribute *,
				 void **, CUdeviceptr);
typedef CUresult (*get_range_fn)(CUdeviceptr *, size_t *, CUdeviceptr);
typedef CUresult (*retain_fn)(CUmemGenericAllocationHandle *, void *);
typedef cudaError_t (*rt_attrs_fn)(struct cudaPointerAttributes *,
				   const void *);
typedef cudaError_t (*rt_version_fn)(int *);

/* An answer that the registry cannot give exactly: ask the driver. */
#define GH_ASK_DRIVER	(-1)

#define GH_A(x)	(1u << CU_POINTER_ATTRIBUTE_##x)
/* Attributes every tracked kind answers alike (CONTEXT and
 * DEVICE_ORDINAL only when the registry recorded them). */
#define GH_ATTR_COMMON	(GH_A(MEMORY_TYPE) | GH_A(DEVICE_POINTER) | \
			 GH_A(HOST_POINTER) | GH_A(IS_MANAGED) | GH_A(MAPPED))
#define GH_ATTR_RANGE	(GH_A(RANGE_START_ADDR) | GH_A(RANGE_SIZE))

/*
 * Per kind, the attributes the registry knows exactly (values measured
 * on an H100, driver 580).  A kind missing here (a new one) answers
 * nothing: append rows, never renumber kinds.  VMM: RANGE_* describe the
 * whole cuMemAddressReserve range, which the registry does not track.
 * Host kinds: the driver's DEVICE_ORDINAL is the context's device, which
 * the registry does not record for host memory.  Pool: MEMPOOL_HANDLE
 * only when the call named the pool.  IPC: IS_LEGACY_CUDA_IPC_CAPABLE
 * unmeasured.
 */
#define GH_ATTR_KNOWN	(GH_ATTR_COMMON | GH_A(CONTEXT) | GH_A(MEMPOOL_HANDLE))
static const uint32_t exact[] = {
	[GDRHOOK_KIND_DEVICE] = GH_ATTR_KNOWN | GH_ATTR_RANGE |
		GH_A(DEVICE_ORDINAL) | GH_A(IS_LEGACY_CUDA_IPC_CAPABLE),
	[GDRHOOK_KIND_MANAGED] = GH_ATTR_KNOWN | GH_ATTR_RANGE |
		GH_A(DEVICE_ORDINAL) | GH_A(IS_LEGACY_CUDA_IPC_CAPABLE),
	[GDRHOOK_KIND_HOST] = GH_ATTR_KNOWN | GH_ATTR_RANGE |
		GH_A(IS_LEGACY_CUDA_IPC_CAPABLE),
	[GDRHOOK_KIND_HOST_REGISTERED] = GH_ATTR_KNOWN | GH_ATTR_RANGE |
		GH_A(IS_LEGACY_CUDA_IPC_CAPABLE),
	[GDRHOOK_KIND_POOL] = GH_ATTR_KNOWN | GH_ATTR_RANGE |
		GH_A(DEVICE_ORDINAL) | GH_A(IS_LEGACY_CUDA_IPC_CAPABLE),
	[GDRHOOK_KIND_VMM] = GH_ATTR_KNOWN | GH_A(DEVICE_ORDINAL) |
		GH_A(IS_LEGACY_CUDA_IPC_CAPABLE),
	[GDRHOOK_KIND_IPC] = GH_ATTR_KNOWN | GH_ATTR_RANGE |
		GH_A(DEVICE_ORDINAL),
};

/*
 * Attributes of a pointer the driver does not know that
 * cuPointerGetAttributes answers here (negative_value()); a single
 * cuPointerGetAttribute refuses RANGE_* too.  Not RANGE_* here: the
 * driver leaves them alone for host memory but describes the reservation
 * for an unmapped address inside a cuMemAddressReserve range, which the
 * registry does not track.
 */
#define GH_ATTR_NEGATIVE (GH_ATTR_COMMON | GH_A(CONTEXT) | \
			  GH_A(DEVICE_ORDINAL) | GH_A(MEMPOOL_HANDLE) | \
			  GH_A(IS_LEGACY_CUDA_IPC_CAPABLE) | GH_A(BUFFER_ID))

/* Attributes whose value is 8 bytes wide; the others' are 4. */
#define GH_ATTR_WIDE	(GH_A(CONTEXT) | GH_A(DEVICE_POINTER) | \
			 GH_A(HOST_POINTER) | GH_A(BUFFER_ID) | \
			 GH_A(RANGE_START_ADDR) | GH_A(RANGE_SIZE) | \
			 GH_A(MEMPOOL_HANDLE))

/* Bytes the driver writes for an attribute we answer. */
static inline size_t attr_width(CUpointer_attribute a)
{
	return (unsigned int)a < GH_ATTR_MAX && (GH_ATTR_WIDE >> a & 1) ? 8 : 4;
}

enum { MODE_UNSET = -1, MODE_DRIVER = 0, MODE_REGISTRY = 1 };

/*
 * What a query reads besides the registry, in one cache line.  A
 * communication library asks between touching much else (Open MPI: three
 * calls per message), so each flag kept apart is a cache miss of its
 * own: with 64 KiB read between Open MPI's three calls, they took 10.5
 * more L1 misses a message than a library that answers without looking
 * (tests/bench/bench_classify under cachegrind).
 */
#define GATE_LEAN	0x1	/* unguarded(): active, trusted, CUDA used,
				 * nothing validated */
#define GATE_NONE	0x2	/* "not CUDA memory" may be said: none_ok() */

/* The line to itself (the type's alignment pads it): nothing written
 * often shares it. */
static struct __attribute__((aligned(64))) {
	int gate;		/* GATE_*: once set, cleared only by untrust */
	int queries_mode;	/* GDRHOOK_POINTER_QUERIES, read once */
	int buffer_id_mode;	/* GDRHOOK_BUFFER_ID, read once */
	int drv_ready;		/* note_driver_rc() */
	int routes_done;	/* routes_complete(), -1 until decided */
	int rt_state;		/* note_runtime_rc() */
} hot = {
	.queries_mode = MODE_UNSET,
	.buffer_id_mode = MODE_UNSET,
	.routes_done = -1,
};
_Static_assert(sizeof(hot) == 64, "the hot line is one line");

static int mode_of(int v)
{
	return v == GH_CFG_ANSWER_DRIVER ? MODE_DRIVER : MODE_REGISTRY;
}

/* A mode variable's value, read from its setting the first time. */
static __attribute__((noinline)) int mode_init(int *mode, int v)
{
	int m = mode_of(v);

	__atomic_store_n(mode, m, __ATOMIC_RELAXED);
	return m;
}

static inline int mode_get(int *mode, int setting)
{
	int m = __atomic_load_n(mode, __ATOMIC_RELAXED);

	return GH_LIKELY(m != MODE_UNSET) ? m : mode_init(mode, setting);
}

/* GDRHOOK_POINTER_QUERIES, read once. */
static inline int queries_mode(void)
{
	return mode_get(&hot.queries_mode, gh_hooks_cfg.pointer_queries);
}

/* GDRHOOK_BUFFER_ID, read once. */
static inline int buffer_id_mode(void)
{
	return mode_get(&hot.buffer_id_mode, gh_hooks_cfg.buffer_id);
}

/* hot.drv_ready is set once the driver has answered a query itself: it
 * is initialized, so "not CUDA memory" is what it would say for an
 * unknown pointer. */
static void note_driver_rc(CUresult rc)
{
	if (rc != CUDA_ERROR_NOT_INITIALIZED && rc != CUDA_ERROR_DEINITIALIZED &&
	    !__atomic_load_n(&hot.drv_ready, __ATOMIC_RELAXED))
		__atomic_store_n(&hot.drv_ready, 1, __ATOMIC_RELAXED);
}

/*
 * Entry points that hand out GPU addresses besides the allocation calls
 * (module and library globals, graph memory).  "Not CUDA memory" is only
 * exact when each of them is wrapped (has a row in the hook lists) or is
 * absent from the driver: until then untracked pointers go to the driver.
 */
static const char *const addr_routes[] = {
	"cuModuleGetGlobal_v2", "cuModuleGetGlobal", "cuLibraryGetGlobal",
	"cuLibraryGetManaged", "cuGraphAddMemAllocNode",
};

/* routes_complete() the first time. */
static __attribute__((noinline)) int routes_decide(void)
{
	int d = 1;
	void *h;

	h = gh_libcuda_handle();
	for (size_t i = 0; i < sizeof(addr_routes) / sizeof(addr_routes[0]);
	     i++)
		if (gh_sym_find(addr_routes[i]) < 0 &&
		    (!h || gh_real_dlsym(h, addr_routes[i])))
			d = 0;
	__atomic_store_n(&hot.routes_done, d, __ATOMIC_RELAXED);
	return d;
}

/* 1 when every route in addr_routes is covered; decided once. */
static inline int routes_complete(void)
{
	int d = __atomic_load_n(&hot.routes_done, __ATOMIC_RELAXED);

	return GH_LIKELY(d >= 0) ? d : routes_decide();
}

/* Whether "not CUDA memory" may be answered (GATE_NONE), decided. */
static __attribute__((noinline)) bool none_decide(void)
{
	if (queries_mode() != MODE_REGISTRY ||
	    !__atomic_load_n(&hot.drv_ready, __ATOMIC_RELAXED) ||
	    !routes_complete())
		return false;
	__atomic_fetch_or(&hot.gate, GATE_NONE, __ATOMIC_RELAXED);
	return true;
}

/* What the registry knows about ptr. */
enum where {
	W_DRIVER,	/* nothing usable: ask the driver */
	W_TRACKED,	/* *r holds the allocation containing ptr */
	W_NONE,		/* trusted: ptr is no CUDA memory */
};

static inline __attribute__((always_inline)) enum where
locate(CUdeviceptr ptr, struct gh_range *r)
{
	int g = __atomic_load_n(&hot.gate, __ATOMIC_RELAXED);

	/* GATE_LEAN says active and trusted already. */
	if (GH_UNLIKELY(!(g & GATE_LEAN)) &&
	    (!gh_active() || __atomic_load_n(&gh_untrusted, __ATOMIC_RELAXED)))
		return W_DRIVER;
	if (!gh_registry_lookup((uint64_t)ptr, 1, r))
		return W_TRACKED;
	if (GH_LIKELY(g & GATE_NONE) || none_decide())
		return W_NONE;
	return W_DRIVER;
}

/* Pool and VMM memory belong to no context: the driver says NULL. */
static bool no_context(unsigned int kind)
{
	return kind == GDRHOOK_KIND_POOL || kind == GDRHOOK_KIND_VMM;
}

/*
 * DEVICE_POINTER and the address range depend on the calling thread's
 * context (measured on an H100/H200, driver 580): with none current,
 * DEVICE_POINTER is refused with INVALID_CONTEXT (NULL in
 * cuPointerGetAttributes and the runtime's devicePointer) and
 * cuMemGetAddressRange fails with INVALID_CONTEXT for every pointer;
 * another context may not map the memory at all (a module global).  So
 * these are answered only with no context current (for the kinds
 * measured so) or with the allocation's own context current, which
 * costs one cuCtxGetCurrent (~12 ns); anything else asks the driver.
 */
enum ctx_rel {
	CTX_OTHER,	/* unknown, or another context: ask the driver */
	CTX_NONE,	/* no context current */
	CTX_OWN,	/* the allocation's own context is current */
};

static bool no_ctx_measured(unsigned int kind)
{
	return kind == GDRHOOK_KIND_DEVICE || kind == GDRHOOK_KIND_MANAGED ||
	       kind == GDRHOOK_KIND_HOST ||
	       kind == GDRHOOK_KIND_HOST_REGISTERED ||
	       kind == GDRHOOK_KIND_POOL || kind == GDRHOOK_KIND_VMM;
}

/*
 * The calling thread's context, read before the registry lookup: a loop
 * of independent queries then overlaps their cache misses (the driver
 * call between a lookup's miss and the next query's kept them apart:
 * cuMemGetAddressRange at 1 M live took 350 ns instead of 180-220).
 */
struct cur_ctx {
	uint64_t ctx;
	bool known;	/* false: the driver would not say */
};

static struct cur_ctx cur_ctx(void)
{
	struct cur_ctx c = { 0, false };
	int *err = &errno, saved = *err;

	c.known = !gh_drv_ctx_current(&c.ctx);
	*err = saved;	/* an unguarded call leaves errno alone */
	return c;
}

/* How context @c relates to @r (NULL: CTX_OWN when any is current). */
static enum ctx_rel ctx_rel(struct cur_ctx c, const struct gh_range *r)
{
	if (!c.known)
		return CTX_OTHER;
	if (!c.ctx)
		return !r || no_ctx_measured(r->kind) ? CTX_NONE : CTX_OTHER;
	return !r || (r->ctx && c.ctx == r->ctx) ? CTX_OWN : CTX_OTHER;
}

/* BUFFER_ID's bit: ours whatever the kind, while GDRHOOK_BUFFER_ID says so. */
static inline uint32_t buffer_id_bit(void)
{
	return buffer_id_mode() == MODE_REGISTRY ? GH_A(BUFFER_ID) : 0;
}

/*
 * The attributes of tracked range @r that the registry answers exactly
 * (bit a for attribute a): worked out once per call, whatever the number
 * of attributes asked.
 */
static inline uint32_t exact_mask(const struct gh_range *r)
{
	uint32_t m = 0;

	if (queries_mode() == MODE_REGISTRY &&
	    r->kind < sizeof(exact) / sizeof(exact[0])) {
		m = exact[r->kind];
		if (!r->ctx && !no_context(r->kind))
			m &= ~GH_A(CONTEXT);
		if (r->dev < 0)
			m &= ~GH_A(DEVICE_ORDINAL);
		if (r->kind == GDRHOOK_KIND_POOL && !r->pool)
			m &= ~GH_A(MEMPOOL_HANDLE);
	}
	return (m & ~GH_A(BUFFER_ID)) | buffer_id_bit();
}

static inline bool kind_exact(const struct gh_range *r, CUpointer_attribute a)
{
	/* The tag check (libfabric's) needs no more than its own bit. */
	if (a == CU_POINTER_ATTRIBUTE_BUFFER_ID)
		return buffer_id_bit() != 0;
	return (unsigned int)a < GH_ATTR_MAX && (exact_mask(r) >> a & 1);
}

static bool is_host_kind(unsigned int kind)
{
	return kind == GDRHOOK_KIND_HOST ||
	       kind == GDRHOOK_KIND_HOST_REGISTERED;
}

/*
 * The driver's answer for attribute a of ptr inside tracked range r
 * (kind_exact() said yes): the value into *v (a 4-byte value in its low
 * half) and the return code, or GH_ASK_DRIVER.  The driver writes NULL
 * and refuses HOST_POINTER of memory that has no host mapping, and
 * DEVICE_POINTER with no context current (@cc: read when it was asked).
 */
static inline CUresult tracked_value(const struct gh_range *r,
				     CUdeviceptr ptr, CUpointer_attribute a,
				     const struct cur_ctx *cc, uint64_t *v)
{
	CUresult rc = CUDA_SUCCESS;
	uint64_t x = 0;

	switch (a) {
	case CU_POINTER_ATTRIBUTE_CONTEXT:
		x = no_context(r->kind) ? 0 : r->ctx;
		break;
	case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
		x = is_host_kind(r->kind) ? CU_MEMORYTYPE_HOST :
					    CU_MEMORYTYPE_DEVICE;
		break;
	case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
		/* The address in the current context: see ctx_rel(). */
		switch (ctx_rel(*cc, r)) {
		case CTX_OWN:
			x = ptr;
			break;
		case CTX_NONE:
			rc = CUDA_ERROR_INVALID_CONTEXT;
			break;
		default:
			return GH_ASK_DRIVER;
		}
		break;
	case CU_POINTER_ATTRIBUTE_HOST_POINTER:
		if (is_host_kind(r->kind) || r->kind == GDRHOOK_KIND_MANAGED)
			x = ptr;
		else
			rc = CUDA_ERROR_INVALID_VALUE;
		break;
	case CU_POINTER_ATTRIBUTE_BUFFER_ID:
		x = r->gen | GH_BUFFER_ID_TAG;
		break;
	case CU_POINTER_ATTRIBUTE_IS_MANAGED:
		x = r->kind == GDRHOOK_KIND_MANAGED;
		break;
	case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
		x = (uint32_t)r->dev;
		break;
	case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
		x = r->kind == GDRHOOK_KIND_DEVICE;
		break;
	case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
		x = r->base;
		break;
	case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
		x = r->size;
		break;
	case CU_POINTER_ATTRIBUTE_MAPPED:
		x = 1;
		break;
	case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
		x = r->kind == GDRHOOK_KIND_POOL ? r->pool : 0;
		break;
	default:
		return GH_ASK_DRIVER;
	}
	*v = x;
	return rc;
}

/*
 * cuPointerGetAttributes' value for a pointer the driver does not know
 * (measured on an H100, driver 580): zero, except DEVICE_ORDINAL -2 and
 * HOST_POINTER the pointer itself.
 */
static inline uint64_t negative_value(CUpointer_attribute a, CUdeviceptr ptr)
{
	if (a == CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL)
		return (uint32_t)-2;
	if (a == CU_POINTER_ATTRIBUTE_HOST_POINTER)
		return ptr;
	return 0;
}

/*
 * Value @v of attribute @a out, at the attribute's width: fixed-size
 * stores, no call to memcpy.
 */
static inline void put_value(void *dst, uint64_t v, CUpointer_attribute a)
{
	uint32_t v32 = (uint32_t)v;

	if (attr_width(a) == 8)
		memcpy(dst, &v, 8);
	else
		memcpy(dst, &v32, 4);
}

static void report(const char *api, CUdeviceptr ptr, const char *what)
{
	gh_audit_report(api, (uint64_t)ptr, 0, 0, what);
}

/*
 * Audit: does the driver give the same answer?  ours/theirs are
 * GH_ATTR_BYTES buffers poisoned alike before each side wrote.
 */
static bool agrees(const char *api, CUdeviceptr ptr, CUresult our_rc,
		   CUresult drv_rc, const void *ours, const void *theirs)
{
	GH_COUNT(audit_checks, 1);
	if (our_rc == drv_rc && !memcmp(ours, theirs, GH_ATTR_BYTES))
		return true;
	report(api, ptr, our_rc != drv_rc ?
	       "pointer query: the driver returns a different code" :
	       "pointer query: the driver returns a different value");
	return false;
}

/* ------------------------------------------------------------------ */

/*
 * Whether a query may be answered without the guard and without saving
 * errno: gdrhook's own code is not running on this thread and nothing is
 * validated.  Answering then takes no lock, calls no wrapper and leaves
 * errno as it was (cur_ctx() puts back what the driver's call may
 * change), so a signal handler's CUDA call meanwhile is handled like any
 * other.  Validation calls the driver: that goes the guarded way.
 * (The guard, errno and the resolver took about 70 instructions a query,
 * half as many as the lookup.)
 */
static void gate_untrusted(void)
{
	__atomic_fetch_and(&hot.gate, ~GATE_LEAN, __ATOMIC_SEQ_CST);
}

/*
 * GATE_LEAN, decided.  The registry clears it when it becomes untrusted
 * (gate_untrusted(), handed down): set, then the trust read again, so
 * that one of the two sees the other whichever comes first.
 */
static __attribute__((noinline)) bool lean_decide(void)
{
	if (gh_registry_cfg.validate ||
	    !__atomic_load_n(&gh_cuda_used, __ATOMIC_RELAXED) ||
	    __atomic_load_n(&gh_state, __ATOMIC_ACQUIRE) != GH_STATE_ACTIVE ||
	    __atomic_load_n(&gh_untrusted, __ATOMIC_RELAXED))
		return false;
	gh_trust_on_untrusted(gate_untrusted);
	__atomic_fetch_or(&hot.gate, GATE_LEAN, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&gh_untrusted, __ATOMIC_SEQ_CST)) {
		gate_untrusted();
		return false;
	}
	return true;
}

static inline bool unguarded(void)
{
	return GH_LIKELY(!gh_guard_busy()) &&
	       (GH_LIKELY(__atomic_load_n(&hot.gate, __ATOMIC_RELAXED) &
			  GATE_LEAN) || lean_decide());
}

/*
 * locate()'s W_NONE on the unguarded path, before anything else is set
 * up: the calls an MPI makes of every host buffer it sends are answered
 * from this, the thread's guard, the one hot line and the registry's
 * first two levels, with no stack frame.  A pointer the registry may
 * hold goes on to the whole path, which reads the same lines again from
 * L1: for tracked pointers this check costs 7 instructions
 * (bench_queries --count).
 */
static inline __attribute__((always_inline)) bool untracked(CUdeviceptr ptr)
{
	return GH_LIKELY(!gh_guard_busy()) &&
	       GH_LIKELY((__atomic_load_n(&hot.gate, __ATOMIC_RELAXED) &
			  (GATE_LEAN | GATE_NONE)) == (GATE_LEAN | GATE_NONE)) &&
	       gh_registry_absent((uint64_t)ptr);
}

/* Answer one attribute; GH_ASK_DRIVER when the registry cannot. */
static inline __attribute__((always_inline)) CUresult
answer_one(void *data, CUpointer_attribute a, CUdeviceptr ptr,
	   get_attr_fn real)
{
	unsigned char ours[GH_ATTR_BYTES], theirs[GH_ATTR_BYTES];
	struct cur_ctx cc = { 0, false };
	struct gh_range r;
	CUresult rc, drc;
	uint64_t v = 0;
	bool out = true;

	if (a == CU_POINTER_ATTRIBUTE_DEVICE_POINTER)
		cc = cur_ctx();
	switch (locate(ptr, &r)) {
	case W_TRACKED:
		if (!kind_exact(&r, a))
			return GH_ASK_DRIVER;
		/* A refused HOST_POINTER is written too: NULL, as the driver. */
		rc = tracked_value(&r, ptr, a, &cc, &v);
		if (rc == (CUresult)GH_ASK_DRIVER)
			return rc;
		break;
	case W_NONE:
		/* The driver refuses every attribute of such a pointer. */
		if ((unsigned int)a >= GH_ATTR_MAX ||
		    !((GH_ATTR_NEGATIVE | GH_ATTR_RANGE) & (1u << a)))
			return GH_ASK_DRIVER;
		rc = CUDA_ERROR_INVALID_VALUE;
		out = false;
		break;
	default:
		return GH_ASK_DRIVER;
	}
	if (GH_UNLIKELY(gh_registry_cfg.validate) && a != CU_POINTER_ATTRIBUTE_BUFFER_ID &&
	    real) {
		/* Both poisoned alike; W_NONE writes nothing. */
		memset(ours, GH_POISON, sizeof(ours));
		if (out)
			put_value(ours, v, a);
		memset(theirs, GH_POISON, sizeof(theirs));
		drc = real(theirs, a, ptr);
		if (!agrees("cuPointerGetAttribute", ptr, rc, drc, ours, theirs))
			return GH_ASK_DRIVER;
	}
	if (out)
		put_value(data, v, a);
	return rc;
}

/*
 * Everything but the common case (see unguarded()): the guarded answer
 * unless @tried (the unguarded one asked for the driver), then the
 * driver's.  Each entry point is split so: its common case saves few
 * registers.
 */
static __attribute__((noinline)) CUresult
attr_slow(void *data, CUpointer_attribute attribute, CUdeviceptr ptr,
	  bool tried)
{
	get_attr_fn real = (get_attr_fn)gh_real_get(GH_SYM_cuPointerGetAttribute);
	CUresult rc = (CUresult)GH_ASK_DRIVER;
	int saved, was;

	if (!tried) {
		saved = errno;
		was = gh_guard_enter();
		if (!was && data)
			rc = answer_one(data, attribute, ptr, real);
		gh_guard_leave(was);
		errno = saved;
		if (rc != (CUresult)GH_ASK_DRIVER)
			return rc;
	}
	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	rc = real(data, attribute, ptr);
	note_driver_rc(rc);
	return rc;
}

/* The whole path of cuPointerGetAttribute (untracked(): not known). */
static __attribute__((noinline)) CUresult
attr_full(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
	CUresult rc;

	if (GH_UNLIKELY(!unguarded()))
		return attr_slow(data, attribute, ptr, false);
	if (GH_LIKELY(data != NULL)) {
		rc = answer_one(data, attribute, ptr, NULL);
		if (GH_LIKELY(rc != (CUresult)GH_ASK_DRIVER))
			return rc;
	}
	return attr_slow(data, attribute, ptr, true);
}

CUresult gh_manual_cuPointerGetAttribute(void *data,
					 CUpointer_attribute attribute,
					 CUdeviceptr ptr)
{
	/* The driver refuses every attribute of a pointer it does not know. */
	if (GH_LIKELY(data != NULL) &&
	    GH_LIKELY((unsigned int)attribute < GH_ATTR_MAX) &&
	    GH_LIKELY((GH_ATTR_NEGATIVE | GH_ATTR_RANGE) >> attribute & 1) &&
	    untracked(ptr))
		return CUDA_ERROR_INVALID_VALUE;
	return attr_full(data, attribute, ptr);
}

/* Audit of a whole cuPointerGetAttributes answer, @val, against the driver. */
static bool agrees_all(unsigned int n, const CUpointer_attribute *at,
		       CUdeviceptr ptr, get_attrs_fn real, const uint64_t *val,
		       enum where w)
{
	unsigned char ours[GH_ATTR_MAX][GH_ATTR_BYTES];
	unsigned char theirs[GH_ATTR_MAX][GH_ATTR_BYTES];
	void *tp[GH_ATTR_MAX];
	unsigned int i;
	CUresult drc;

	for (i = 0; i < n; i++) {
		memset(ours[i], GH_POISON, GH_ATTR_BYTES);
		put_value(ours[i], val[i], at[i]);
		memset(theirs[i], GH_POISON, GH_ATTR_BYTES);
		tp[i] = theirs[i];
	}
	drc = real(n, (CUpointer_attribute *)at, tp, ptr);
	for (i = 0; i < n; i++) {
		if (at[i] == CU_POINTER_ATTRIBUTE_BUFFER_ID && w == W_TRACKED)
			memcpy(theirs[i], ours[i], GH_ATTR_BYTES);
		if (!agrees("cuPointerGetAttributes", ptr, CUDA_SUCCESS, drc,
			    ours[i], theirs[i]))
			return false;
	}
	return true;
}

/*
 * cuPointerGetAttributes' value of attribute @a once answer_all() has
 * found every attribute answerable: a refused one reads as zero.
 */
static inline uint64_t answered_value(enum where w, const struct gh_range *r,
				      CUdeviceptr ptr, CUpointer_attribute a,
				      const struct cur_ctx *cc)
{
	uint64_t v = 0;

	if (w == W_NONE)
		return negative_value(a, ptr);
	tracked_value(r, ptr, a, cc, &v);
	return v;
}

/*
 * Answer every attribute or none: 0 when data[] is filled, -1 to ask the
 * driver.  *patch_p is set when only BUFFER_ID can be answered, to patch
 * into the driver's answer (its value in *id_p).
 */
static inline __attribute__((always_inline)) int
answer_all(unsigned int n, const CUpointer_attribute *at, void **data,
	   CUdeviceptr ptr, get_attrs_fn real, int *patch_p,
	   unsigned long long *id_p)
{
	uint64_t val[GH_ATTR_MAX];
	struct cur_ctx cc = { 0, false };
	struct gh_range r;
	uint32_t asked = 0;
	bool bad = false;
	enum where w;
	unsigned int i;

	for (i = 0; i < n; i++) {
		bad |= !data[i] || (unsigned int)at[i] >= GH_ATTR_MAX;
		asked |= 1u << (at[i] & (GH_ATTR_MAX - 1));
	}
	if (asked & GH_A(DEVICE_POINTER))
		cc = cur_ctx();
	w = locate(ptr, &r);
	if (w == W_NONE) {
		if (bad || (asked & ~GH_ATTR_NEGATIVE))
			return -1;
	} else if (w == W_TRACKED) {
		/* tracked_value() asks the driver only for DEVICE_POINTER. */
		if (bad || (asked & ~exact_mask(&r)) ||
		    ((asked & GH_A(DEVICE_POINTER)) &&
		     ctx_rel(cc, &r) == CTX_OTHER))
			goto driver;
	} else {
		return -1;
	}
	if (GH_UNLIKELY(gh_registry_cfg.validate) && real) {
		/* The whole answer first: the driver's is compared with it. */
		for (i = 0; i < n; i++)
			val[i] = answered_value(w, &r, ptr, at[i], &cc);
		if (!agrees_all(n, at, ptr, real, val, w))
			return -1;
		for (i = 0; i < n; i++)
			put_value(data[i], val[i], at[i]);
		return 0;
	}
	/* Every value is known now: each goes straight out. */
	for (i = 0; i < n; i++)
		put_value(data[i], answered_value(w, &r, ptr, at[i], &cc),
			  at[i]);
	return 0;
driver:
	/* The driver answers; BUFFER_ID is still ours (patched in). */
	*patch_p = buffer_id_mode() == MODE_REGISTRY;
	*id_p = r.gen | GH_BUFFER_ID_TAG;
	return -1;
}

/* Bounded: the answer is built on the stack. */
static inline bool attrs_ok(unsigned int n, const CUpointer_attribute *at,
			    void **data)
{
	return n && n <= GH_ATTR_MAX && at && data;
}

/* As attr_slow(); BUFFER_ID patched into the driver's answer (answer_all). */
static __attribute__((noinline)) CUresult
attrs_slow(unsigned int numAttributes, CUpointer_attribute *attributes,
	   void **data, CUdeviceptr ptr, bool tried, int patch,
	   unsigned long long id)
{
	get_attrs_fn real =
		(get_attrs_fn)gh_real_get(GH_SYM_cuPointerGetAttributes);
	int saved, was, done = -1;
	unsigned int i;
	CUresult rc;

	if (!tried) {
		saved = errno;
		was = gh_guard_enter();
		if (!was && attrs_ok(numAttributes, attributes, data))
			done = answer_all(numAttributes, attributes, data, ptr,
					  real, &patch, &id);
		gh_guard_leave(was);
		errno = saved;
		if (!done)
			return CUDA_SUCCESS;
	}
	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	rc = real(numAttributes, attributes, data, ptr);
	note_driver_rc(rc);
	if (rc == CUDA_SUCCESS && patch) {
		saved = errno;
		for (i = 0; i < numAttributes; i++)
			if (attributes[i] == CU_POINTER_ATTRIBUTE_BUFFER_ID &&
			    data[i])
				memcpy(data[i], &id, sizeof(id));
		errno = saved;
	}
	return rc;
}

/* The whole path of cuPointerGetAttributes (untracked(): not known). */
static __attribute__((noinline)) CUresult
attrs_full(unsigned int numAttributes, CUpointer_attribute *attributes,
	   void **data, CUdeviceptr ptr)
{
	unsigned long long id = 0;
	int patch = 0;

	if (GH_UNLIKELY(!unguarded()))
		return attrs_slow(numAttributes, attributes, data, ptr, false,
				  0, 0);
	if (GH_LIKELY(attrs_ok(numAttributes, attributes, data)) &&
	    GH_LIKELY(!answer_all(numAttributes, attributes, data, ptr, NULL,
				  &patch, &id)))
		return CUDA_SUCCESS;
	return attrs_slow(numAttributes, attributes, data, ptr, true, patch,
			  id);
}

/*
 * answer_all()'s W_NONE case first: every attribute one the driver
 * zeroes.  The pointer before the attributes, so a tracked one is not
 * scanned twice.
 */
static inline __attribute__((always_inline)) bool
attrs_untracked(unsigned int n, const CUpointer_attribute *at, void **data,
		CUdeviceptr ptr)
{
	uint32_t asked = 0;
	unsigned int i;

	if (!untracked(ptr) || !attrs_ok(n, at, data))
		return false;
	for (i = 0; i < n; i++) {
		if (!data[i] || (unsigned int)at[i] >= GH_ATTR_MAX)
			return false;
		asked |= 1u << at[i];
	}
	if (asked & ~GH_ATTR_NEGATIVE)
		return false;
	for (i = 0; i < n; i++)
		put_value(data[i], negative_value(at[i], ptr), at[i]);
	return true;
}

CUresult gh_manual_cuPointerGetAttributes(unsigned int numAttributes,
					  CUpointer_attribute *attributes,
					  void **data, CUdeviceptr ptr)
{
	if (GH_LIKELY(attrs_untracked(numAttributes, attributes, data, ptr)))
		return CUDA_SUCCESS;
	return attrs_full(numAttributes, attributes, data, ptr);
}

/* 0 and the answer, or -1: ask the driver. */
static inline __attribute__((always_inline)) int
answer_range(CUdeviceptr *pbase, size_t *psize, CUdeviceptr ptr,
	     get_range_fn real, CUresult *rc_p)
{
	CUdeviceptr base = 0, dbase = 0;
	size_t size = 0, dsize = 0;
	struct cur_ctx cc = cur_ctx();
	struct gh_range r;
	enum ctx_rel rel;
	enum where w;
	CUresult rc, drc;

	w = locate(ptr, &r);
	if (w == W_DRIVER || (w == W_TRACKED &&
	    !kind_exact(&r, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR)))
		return -1;
	rel = ctx_rel(cc, w == W_TRACKED ? &r : NULL);
	/* The driver zeroes both outputs of a pointer it refuses. */
	if (rel == CTX_OTHER)
		return -1;
	if (rel == CTX_NONE) {
		rc = CUDA_ERROR_INVALID_CONTEXT;
	} else if (w == W_NONE) {
		rc = CUDA_ERROR_NOT_FOUND;	/* some context is current */
	} else {
		base = r.base;
		size = r.size;
		rc = CUDA_SUCCESS;
	}
	if (GH_UNLIKELY(gh_registry_cfg.validate) && real) {
		drc = real(&dbase, &dsize, ptr);
		GH_COUNT(audit_checks, 1);
		if (drc != rc || dbase != base || dsize != size) {
			report("cuMemGetAddressRange_v2", ptr, drc != rc ?
			       "pointer query: the driver returns a different code" :
			       "pointer query: the driver returns a different range");
			return -1;
		}
	}
	if (pbase)
		*pbase = base;
	if (psize)
		*psize = size;
	*rc_p = rc;
	return 0;
}

/* As attr_slow(). */
static __attribute__((noinline)) CUresult
range_slow(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr, bool tried)
{
	get_range_fn real =
		(get_range_fn)gh_real_get(GH_SYM_cuMemGetAddressRange_v2);
	CUresult rc = CUDA_SUCCESS;
	int saved, was, done = -1;

	if (!tried) {
		saved = errno;
		was = gh_guard_enter();
		if (!was)
			done = answer_range(pbase, psize, dptr, real, &rc);
		gh_guard_leave(was);
		errno = saved;
		if (!done)
			return rc;
	}
	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	rc = real(pbase, psize, dptr);
	note_driver_rc(rc);
	return rc;
}

CUresult gh_manual_cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize,
					   CUdeviceptr dptr)
{
	CUresult rc;

	if (GH_UNLIKELY(!unguarded()))
		return range_slow(pbase, psize, dptr, false);
	if (GH_LIKELY(!answer_range(pbase, psize, dptr, NULL, &rc)))
		return rc;
	return range_slow(pbase, psize, dptr, true);
}

/* ------------------------------------------------------------------ */
/*
 * cuMemRetainAllocationHandle: Open MPI 5.0 asks it of every message's
 * buffer, host memory included.  Only a VMM mapping has a handle, and a
 * retain takes a reference, so only the refusal is answered here: an
 * address the registry holds nothing at gets the driver's INVALID_VALUE
 * (H200, driver 580: for host memory with and without a context current,
 * tests/gpu/retain_probe).  Tracked memory of any kind goes to the
 * driver: a pool or a cuMemAlloc may be backed by a handle it hands out.
 */
static inline __attribute__((always_inline)) int
answer_retain(CUmemGenericAllocationHandle *handle, void *addr,
	      retain_fn real, CUresult *rc_p)
{
	CUmemGenericAllocationHandle dh = 0;
	struct gh_range r;
	CUresult drc;

	if (!handle || locate((CUdeviceptr)addr, &r) != W_NONE)
		return -1;
	if (GH_UNLIKELY(gh_registry_cfg.validate) && real) {
		/* One call: a success holds a reference the caller releases. */
		drc = real(&dh, addr);
		GH_COUNT(audit_checks, 1);
		if (drc != CUDA_ERROR_INVALID_VALUE) {
			report("cuMemRetainAllocationHandle", (CUdeviceptr)addr,
			       "handle query: the driver returns a different code");
			if (drc == CUDA_SUCCESS)
				*handle = dh;
		}
		*rc_p = drc;
		return 0;
	}
	*rc_p = CUDA_ERROR_INVALID_VALUE;
	return 0;
}

/* As attr_slow(). */
static __attribute__((noinline)) CUresult
retain_slow(CUmemGenericAllocationHandle *handle, void *addr, bool tried)
{
	retain_fn real =
		(retain_fn)gh_real_get(GH_SYM_cuMemRetainAllocationHandle);
	CUresult rc = CUDA_SUCCESS;
	int saved, was, done = -1;

	if (!tried) {
		saved = errno;
		was = gh_guard_enter();
		if (!was)
			done = answer_retain(handle, addr, real, &rc);
		gh_guard_leave(was);
		errno = saved;
		if (!done)
			return rc;
	}
	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	rc = real(handle, addr);
	note_driver_rc(rc);
	return rc;
}

/* The whole path of cuMemRetainAllocationHandle (untracked(): not known). */
static __attribute__((noinline)) CUresult
retain_full(CUmemGenericAllocationHandle *handle, void *addr)
{
	CUresult rc;

	if (GH_UNLIKELY(!unguarded()))
		return retain_slow(handle, addr, false);
	if (GH_LIKELY(!answer_retain(handle, addr, NULL, &rc)))
		return rc;
	return retain_slow(handle, addr, true);
}

CUresult gh_manual_cuMemRetainAllocationHandle(
	CUmemGenericAllocationHandle *handle, void *addr)
{
	if (GH_LIKELY(handle != NULL) && untracked((CUdeviceptr)addr))
		return CUDA_ERROR_INVALID_VALUE;
	return retain_full(handle, addr);
}

/* ------------------------------------------------------------------ */
/*
 * The runtime's cudaPointerGetAttributes (a shared libcudart; a static
 * one reaches cuPointerGetAttributes above).  The runtime builds its
 * answer from the driver's MEMORY_TYPE, IS_MANAGED, DEVICE_ORDINAL,
 * DEVICE_POINTER and HOST_POINTER (refused ones read NULL) and makes no
 * context current (measured with 13.0 on an H100/H200, driver 580, in
 * tests/gpu/ptrattr-check): so it is answered where all five are exact,
 * and for memory the driver does not know (cudaMemoryTypeUnregistered,
 * device -2, hostPointer the pointer, not an error), once the runtime
 * has answered a call itself (it is then initialized; an answer here
 * would skip nothing).  The structure has this layout since CUDA 11:
 * an older runtime is always called.
 */
#define GH_RT_NEEDS	(GH_A(MEMORY_TYPE) | GH_A(IS_MANAGED) | \
			 GH_A(DEVICE_ORDINAL) | GH_A(DEVICE_POINTER) | \
			 GH_A(HOST_POINTER))

/*
 * hot.rt_state: 0 until the runtime has answered a call itself; then 1
 * when it is CUDA 11 or later, -1 (never answered here) otherwise.
 */

static void note_runtime_rc(cudaError_t rc, rt_attrs_fn real)
{
	rt_version_fn f;
	int v = 0;

	if (rc != cudaSuccess || __atomic_load_n(&hot.rt_state, __ATOMIC_RELAXED))
		return;
	/* The version of the runtime that answered. */
	f = (rt_version_fn)gh_real_sibling((const void *)real,
					   "cudaRuntimeGetVersion");
	__atomic_store_n(&hot.rt_state, f && f(&v) == cudaSuccess && v >= 11000 ?
			 1 : -1, __ATOMIC_RELAXED);
}

static inline __attribute__((always_inline)) int
rt_answer(struct cudaPointerAttributes *out, const void *p,
	  rt_attrs_fn real)
{
	CUdeviceptr ptr = (CUdeviceptr)(uintptr_t)p;
	struct cudaPointerAttributes a, theirs;
	struct cur_ctx cc;
	struct gh_range r;
	enum where w;
	uint64_t mt = 0, managed = 0, dev = 0, dp = 0, hp = 0;
	cudaError_t drc;

	if (__atomic_load_n(&hot.rt_state, __ATOMIC_RELAXED) != 1)
		return -1;
	cc = cur_ctx();
	w = locate(ptr, &r);
	if (w == W_NONE) {
		a.type = cudaMemoryTypeUnregistered;
		a.device = -2;
		a.devicePointer = NULL;
		a.hostPointer = (void *)p;
	} else if (w == W_TRACKED &&
		   (exact_mask(&r) & GH_RT_NEEDS) == GH_RT_NEEDS) {
		/* Refused attributes read NULL, as the runtime has them. */
		if (tracked_value(&r, ptr, CU_POINTER_ATTRIBUTE_DEVICE_POINTER,
				  &cc, &dp) == (CUresult)GH_ASK_DRIVER)
			return -1;
		tracked_value(&r, ptr, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, &cc, &mt);
		tracked_value(&r, ptr, CU_POINTER_ATTRIBUTE_IS_MANAGED, &cc,
			      &managed);
		tracked_value(&r, ptr, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, &cc,
			      &dev);
		tracked_value(&r, ptr, CU_POINTER_ATTRIBUTE_HOST_POINTER, &cc,
			      &hp);
		a.type = managed ? cudaMemoryTypeManaged :
			 mt == CU_MEMORYTYPE_HOST ? cudaMemoryTypeHost :
						    cudaMemoryTypeDevice;
		a.device = (int)(uint32_t)dev;
		a.devicePointer = (void *)(uintptr_t)dp;
		a.hostPointer = (void *)(uintptr_t)hp;
	} else {
		return -1;
	}
	if (GH_UNLIKELY(gh_registry_cfg.validate) && real) {
		memset(&theirs, GH_POISON, sizeof(theirs));
		drc = real(&theirs, p);
		GH_COUNT(audit_checks, 1);
		if (drc != cudaSuccess || theirs.type != a.type ||
		    theirs.device != a.device ||
		    theirs.devicePointer != a.devicePointer ||
		    theirs.hostPointer != a.hostPointer) {
			report("cudaPointerGetAttributes", ptr,
			       drc != cudaSuccess ?
			       "pointer query: the runtime returns a different code" :
			       "pointer query: the runtime returns a different value");
			return -1;
		}
	}
	/* The runtime writes these four and leaves reserved[] alone. */
	out->type = a.type;
	out->device = a.device;
	out->devicePointer = a.devicePointer;
	out->hostPointer = a.hostPointer;
	return 0;
}

/* As attr_slow(); @caller: the program's call site (gh_real_get_for). */
static __attribute__((noinline)) cudaError_t
rt_slow(struct cudaPointerAttributes *attributes, const void *ptr,
	void *caller, bool tried)
{
	int saved = errno, was, done = -1;
	rt_attrs_fn real;
	cudaError_t rc;

	real = (rt_attrs_fn)gh_real_get_for(GH_SYM_cudaPointerGetAttributes,
					    caller);
	if (!real) {
		errno = saved;
		return cudaErrorInitializationError;
	}
	if (!tried) {
		was = gh_guard_enter();
		if (!was && attributes)
			done = rt_answer(attributes, ptr, real);
		gh_guard_leave(was);
	}
	errno = saved;
	if (!done)
		return cudaSuccess;
	rc = real(attributes, ptr);
	note_runtime_rc(rc, real);
	return rc;
}

/* The whole path of cudaPointerGetAttributes (untracked(): not known). */
static __attribute__((noinline)) cudaError_t
rt_full(struct cudaPointerAttributes *attributes, const void *ptr,
	void *caller)
{
	if (GH_UNLIKELY(!unguarded()))
		return rt_slow(attributes, ptr, caller, false);
	if (GH_LIKELY(attributes != NULL) &&
	    GH_LIKELY(!rt_answer(attributes, ptr, NULL)))
		return cudaSuccess;
	return rt_slow(attributes, ptr, caller, true);
}

cudaError_t gh_manual_cudaPointerGetAttributes(
	struct cudaPointerAttributes *attributes, const void *ptr)
{
	/* rt_answer()'s W_NONE case (MPICH asks this of every buffer). */
	if (GH_LIKELY(attributes != NULL) &&
	    GH_LIKELY(__atomic_load_n(&hot.rt_state, __ATOMIC_RELAXED) == 1) &&
	    untracked((CUdeviceptr)(uintptr_t)ptr)) {
		attributes->type = cudaMemoryTypeUnregistered;
		attributes->device = -2;
		attributes->devicePointer = NULL;
		attributes->hostPointer = (void *)(uintptr_t)ptr;
		return cudaSuccess;
	}
	return rt_full(attributes, ptr, __builtin_return_address(0));
}

GH_EXPORT CUresult cuPointerGetAttribute(void *data,
					 CUpointer_attribute attribute,
					 CUdeviceptr ptr)
	__attribute__((alias("gh_manual_cuPointerGetAttribute")));
GH_EXPORT CUresult cuPointerGetAttributes(unsigned int numAttributes,
					  CUpointer_attribute *attributes,
					  void **data, CUdeviceptr ptr)
	__attribute__((alias("gh_manual_cuPointerGetAttributes")));
GH_EXPORT CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize,
					   CUdeviceptr dptr)
	__attribute__((alias("gh_manual_cuMemGetAddressRange_v2")));
GH_EXPORT CUresult cuMemRetainAllocationHandle(
	CUmemGenericAllocationHandle *handle, void *addr)
	__attribute__((alias("gh_manual_cuMemRetainAllocationHandle")));
GH_EXPORT cudaError_t cudaPointerGetAttributes(
	struct cudaPointerAttributes *attributes, const void *ptr)
	__attribute__((alias("gh_manual_cudaPointerGetAttributes")));
