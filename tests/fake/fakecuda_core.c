/* SPDX-License-Identifier: MIT */
/*
 * Fake CUDA driver: initialization, devices, contexts, streams, error
 * strings and the fakecuda_* test hooks.  Behaviour mirrors what the real
 * driver (580, CUDA 13.0) did in tests/fake/probe.c; see the README.
 */
#include "fakecuda_internal.h"
#include "fakecuda.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

FC_HIDDEN struct fc_state fc = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
};

/* ---------------------------------------------------------------- hooks */

#define FC_MAX_SYMS 1024
static struct fc_sym fc_syms[FC_MAX_SYMS];
static char fc_sym_names[FC_MAX_SYMS][64];
static int fc_nsyms;
static pthread_mutex_t fc_sym_lock = PTHREAD_MUTEX_INITIALIZER;

/*
 * Both locks are held with every signal blocked on the thread.  A signal
 * handler that calls the double while its thread is inside it (programs
 * free from handlers; the tests check what the shim does then) runs only
 * once the lock is dropped and no realloc of ours is half done; it never
 * waits forever on a lock its own thread holds, nor sees state half
 * changed.  The locks nest (fork takes both): counted per thread.
 */
static __thread int sig_depth;
static __thread sigset_t sig_saved;
static __thread int raise_sig;	/* fakecuda_signal_in_lock(), pending */

static void sig_block(void)
{
	sigset_t all, old;

	if (sig_depth) {
		sig_depth++;
		return;
	}
	/* A signal before the mask is set runs its handler to the end. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	sig_saved = old;
	sig_depth = 1;
}

static void sig_unblock(void)
{
	sigset_t old;

	if (--sig_depth)
		return;
	old = sig_saved;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static void sym_lock(void)
{
	sig_block();
	pthread_mutex_lock(&fc_sym_lock);
}

static void sym_unlock(void)
{
	pthread_mutex_unlock(&fc_sym_lock);
	sig_unblock();
}

void fc_lock(void)
{
	sig_block();
	pthread_mutex_lock(&fc.lock);
	if (raise_sig) {
		int sig = raise_sig;

		raise_sig = 0;
		pthread_kill(pthread_self(), sig);	/* pending till unlock */
	}
}

void fc_hold(void)
{
	struct timespec t0, t;

	if (!fc.hold_ns)
		return;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do
		clock_gettime(CLOCK_MONOTONIC, &t);
	while ((t.tv_sec - t0.tv_sec) * 1000000000L + t.tv_nsec - t0.tv_nsec <
	       fc.hold_ns);
}

void fc_unlock(void)
{
	pthread_mutex_unlock(&fc.lock);
	sig_unblock();
}

/* Find or create the counter slot of @name.  Takes fc_sym_lock. */
struct fc_sym *fc_sym_get(const char *name)
{
	struct fc_sym *s = NULL;

	sym_lock();
	for (int i = 0; i < fc_nsyms; i++)
		if (!strcmp(fc_syms[i].name, name)) {
			s = &fc_syms[i];
			break;
		}
	if (!s && fc_nsyms < FC_MAX_SYMS) {
		snprintf(fc_sym_names[fc_nsyms], sizeof(fc_sym_names[0]), "%s",
			 name);
		s = &fc_syms[fc_nsyms];
		s->name = fc_sym_names[fc_nsyms];
		fc_nsyms++;
	}
	sym_unlock();
	return s;
}

static int fc_stall_count, fc_stall_open;
static __thread const char *fc_stall_at_exit;

/* A stalled call waits here, no lock held, until fakecuda_unstall(). */
static void fc_stall(const char *name)
{
	struct timespec nap = { 0, 100 * 1000 };

	fc_log("%s: stalled", name);
	__atomic_add_fetch(&fc_stall_count, 1, __ATOMIC_SEQ_CST);
	while (!__atomic_load_n(&fc_stall_open, __ATOMIC_ACQUIRE))
		nanosleep(&nap, NULL);
	__atomic_sub_fetch(&fc_stall_count, 1, __ATOMIC_SEQ_CST);
}

FC_API void fakecuda_stall_next(const char *sym)
{
	struct fc_sym *s = fc_sym_get(sym);

	if (!s)
		return;
	__atomic_store_n(&fc_stall_open, 0, __ATOMIC_RELEASE);
	sym_lock();
	s->stall_n = 1;
	sym_unlock();
}

FC_API void fakecuda_stall_next_exit(const char *sym)
{
	struct fc_sym *s = fc_sym_get(sym);

	if (!s)
		return;
	__atomic_store_n(&fc_stall_open, 0, __ATOMIC_RELEASE);
	sym_lock();
	s->stall_exit_n = 1;
	sym_unlock();
}

FC_API int fakecuda_stalled(void)
{
	return __atomic_load_n(&fc_stall_count, __ATOMIC_SEQ_CST);
}

FC_API void fakecuda_unstall(void)
{
	__atomic_store_n(&fc_stall_open, 1, __ATOMIC_RELEASE);
}

int fc_enter(struct fc_sym **slot, const char *name, CUresult *rc)
{
	struct fc_sym *s = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
	int fail = 0, stall = 0;

	if (!s) {
		s = fc_sym_get(name);
		if (!s)
			return 0;
		__atomic_store_n(slot, s, __ATOMIC_RELEASE);
	}
	sym_lock();
	s->calls++;
	if (s->fail_n > 0) {
		s->fail_n--;
		*rc = s->fail_rc;
		fail = 1;
	} else if (s->raise_n > 0) {
		s->raise_n--;
		raise_sig = s->raise_sig;
	}
	if (!fail && s->stall_n > 0) {
		s->stall_n--;
		stall = 1;
	}
	if (!fail && s->stall_exit_n > 0) {
		s->stall_exit_n--;
		fc_stall_at_exit = s->name;
	}
	sym_unlock();
	if (stall)
		fc_stall(name);
	if (fail)
		fc_log("%s: injected failure %d", name, (int)*rc);
	else
		fc_log("%s", name);
	return fail;
}

void fc_leave(int *unused)
{
	(void)unused;
	if (fc_stall_at_exit) {
		const char *name = fc_stall_at_exit;

		fc_stall_at_exit = NULL;
		fc_stall(name);
	}
	if (__atomic_load_n(&fc.errno_set, __ATOMIC_RELAXED))
		errno = __atomic_load_n(&fc.errno_val, __ATOMIC_RELAXED);
}

void fc_log(const char *fmt, ...)
{
	char buf[256];
	va_list ap;
	int saved = errno, n;

	if (!fc.log)
		return;
	n = snprintf(buf, sizeof(buf), "fakecuda[%d]: ", (int)getpid());
	va_start(ap, fmt);
	n += vsnprintf(buf + n, sizeof(buf) - n - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(buf) - 2)
		n = sizeof(buf) - 2;
	buf[n++] = '\n';
	if (write(2, buf, n) < 0) {
		/* nothing to do */
	}
	errno = saved;
}

FC_API unsigned long fakecuda_calls(const char *sym)
{
	unsigned long n = 0;

	sym_lock();
	for (int i = 0; i < fc_nsyms; i++)
		if (!strcmp(fc_syms[i].name, sym))
			n = fc_syms[i].calls;
	sym_unlock();
	return n;
}

FC_API void fakecuda_reset_calls(void)
{
	sym_lock();
	for (int i = 0; i < fc_nsyms; i++)
		fc_syms[i].calls = 0;
	sym_unlock();
}

FC_API void fakecuda_fail_next(const char *sym, CUresult rc, int n)
{
	struct fc_sym *s = fc_sym_get(sym);

	if (!s)
		return;
	sym_lock();
	s->fail_n = n;
	s->fail_rc = rc;
	sym_unlock();
}

FC_API void fakecuda_signal_in_lock(const char *sym, int sig, int n)
{
	struct fc_sym *s = fc_sym_get(sym);

	if (!s)
		return;
	sym_lock();
	s->raise_n = n;
	s->raise_sig = sig;
	sym_unlock();
}

FC_API void fakecuda_set_errno(int e)
{
	__atomic_store_n(&fc.errno_val, e, __ATOMIC_RELAXED);
	__atomic_store_n(&fc.errno_set, e >= 0, __ATOMIC_RELAXED);
}

FC_API size_t fakecuda_live_count(void)
{
	size_t n;

	fc_lock();
	n = fc.na;
	fc_unlock();
	return n;
}

FC_API size_t fakecuda_live_bytes(void)
{
	size_t n;

	fc_lock();
	n = fc.live_bytes;
	fc_unlock();
	return n;
}

FC_API void fakecuda_foreach_live(fakecuda_live_cb cb, void *arg)
{
	struct fakecuda_live *v;
	size_t n;

	fc_lock();
	n = fc.na;
	v = calloc(n ? n : 1, sizeof(*v));
	for (size_t i = 0; v && i < n; i++) {
		v[i].base = fc.a[i]->base;
		v[i].size = fc.a[i]->size;
		v[i].buffer_id = fc.a[i]->buffer_id;
		v[i].ctx = fc.a[i]->ctx;
		v[i].kind = fc.a[i]->kind;
		v[i].device = fc.a[i]->dev;
	}
	fc_unlock();
	for (size_t i = 0; v && i < n; i++)
		cb(v[i].base, v[i].size, v[i].buffer_id, v[i].ctx, arg);
	free(v);
}

FC_API size_t fakecuda_snapshot(struct fakecuda_live *out, size_t max)
{
	size_t n;

	fc_lock();
	n = fc.na;
	for (size_t i = 0; i < n && i < max; i++) {
		out[i].base = fc.a[i]->base;
		out[i].size = fc.a[i]->size;
		out[i].buffer_id = fc.a[i]->buffer_id;
		out[i].ctx = fc.a[i]->ctx;
		out[i].kind = fc.a[i]->kind;
		out[i].device = fc.a[i]->dev;
	}
	fc_unlock();
	return n;
}

/* ------------------------------------------------------------ init/fork */

static __thread CUcontext tls_stack[FC_CTX_STACK];
static __thread int tls_depth;

static void fc_atfork_prepare(void)
{
	sym_lock();
	fc_lock();
}

static void fc_atfork_parent(void)
{
	fc_unlock();
	sym_unlock();
}

/*
 * The real driver refuses CUDA in the child of an initialized process.
 * The fake lets the child start over: it forgets everything, unmaps the
 * inherited (shared) device memory and needs cuInit() again.  The parent's
 * memory stays reachable through IPC handles.
 */
static void fc_atfork_child(void)
{
	/* Unlock (the forking thread holds both): re-initializing a locked
	 * mutex would leave it "held forever" as far as TSan can tell. */
	fc_unlock();
	sym_unlock();
	tls_depth = 0;
	fc_mem_fork_reset();
}

__attribute__((constructor)) static void fc_ctor(void)
{
	const char *e = getenv("FAKECUDA_LOG");

	fc.log = e && *e && strcmp(e, "0");
	e = getenv("FAKECUDA_ALLOC_HOLD_NS");
	fc.hold_ns = e && *e ? strtol(e, NULL, 10) : 0;
	if (fc.hold_ns < 0 || fc.hold_ns > 1000000000L)
		fc.hold_ns = 0;
	pthread_atfork(fc_atfork_prepare, fc_atfork_parent, fc_atfork_child);
}

CUresult fc_check_init(void)
{
	return __atomic_load_n(&fc.initialized, __ATOMIC_ACQUIRE) ?
		CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}

static int fc_env_devices(void)
{
	const char *e = getenv("FAKECUDA_DEVICES");
	long n;

	if (!e || !*e)
		return 2;
	n = strtol(e, NULL, 10);
	if (n < 0)
		n = 0;
	if (n > FC_MAX_DEVICES)
		n = FC_MAX_DEVICES;
	return (int)n;
}

FC_API CUresult CUDAAPI cuInit(unsigned int Flags)
{
	CUresult rc = CUDA_SUCCESS;
	const char *e;

	FC_ENTER();
	if (Flags)
		return CUDA_ERROR_INVALID_VALUE;
	fc_lock();
	if (fc.initialized)
		goto out;
	fc.ndev = fc_env_devices();
	if (!fc.ndev) {
		rc = CUDA_ERROR_NO_DEVICE;
		goto out;
	}
	e = getenv("FAKECUDA_IPC_SAME_PROCESS");
	fc.ipc_same_process = e && *e && strcmp(e, "0");
	if (!fc.next_buffer_id)
		fc.next_buffer_id = 1;
	if (!fc.next_ctx_id)
		fc.next_ctx_id = 1;
	rc = fc_region_init();
	if (rc)
		goto out;
	for (int d = 0; d < fc.ndev; d++) {
		struct fc_dev *D = &fc.dev[d];

		D->primary.magic = FC_CTX_MAGIC;
		D->primary.dev = d;
		D->primary.primary = 1;
		snprintf(D->name, sizeof(D->name),
			 "Fake CUDA GPU %d (gdrhook test double)", d);
		fc_pool_init(&D->default_pool, d, 1);
		D->cur_pool = &D->default_pool;
	}
	__atomic_store_n(&fc.initialized, 1, __ATOMIC_RELEASE);
	fc_log("cuInit: %d devices", fc.ndev);
out:
	fc_unlock();
	return rc;
}

FC_API CUresult CUDAAPI cuDriverGetVersion(int *driverVersion)
{
	FC_ENTER();
	if (!driverVersion)
		return CUDA_ERROR_INVALID_VALUE;
	*driverVersion = FC_DRIVER_VERSION;
	return CUDA_SUCCESS;
}

/* -------------------------------------------------------------- devices */

static CUresult dev_check(CUdevice dev)
{
	CUresult rc = fc_check_init();

	if (rc)
		return rc;
	if (dev < 0 || dev >= fc.ndev)
		return CUDA_ERROR_INVALID_DEVICE;
	return CUDA_SUCCESS;
}

FC_API CUresult CUDAAPI cuDeviceGet(CUdevice *device, int ordinal)
{
	CUresult rc;

	FC_ENTER();
	rc = fc_check_init();
	if (rc)
		return rc;
	if (!device)
		return CUDA_ERROR_INVALID_VALUE;
	if (ordinal < 0 || ordinal >= fc.ndev)
		return CUDA_ERROR_INVALID_DEVICE;
	*device = ordinal;
	return CUDA_SUCCESS;
}

FC_API CUresult CUDAAPI cuDeviceGetCount(int *count)
{
	CUresult rc;

	FC_ENTER();
	rc = fc_check_init();
	if (rc)
		return rc;
	if (!count)
		return CUDA_ERROR_INVALID_VALUE;
	*count = fc.ndev;
	return CUDA_SUCCESS;
}

FC_API CUresult CUDAAPI cuDeviceGetName(char *name, int len, CUdevice dev)
{
	CUresult rc;

	FC_ENTER();
	rc = dev_check(dev);
	if (rc)
		return rc;
	if (!name || len <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	snprintf(name, len, "%s", fc.dev[dev].name);
	return CUDA_SUCCESS;
}

FC_API CUresult CUDAAPI cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
	CUresult rc;

	FC_ENTER();
	rc = dev_check(dev);
	if (rc)
		return rc;
	if (!bytes)
		return CUDA_ERROR_INVALID_VALUE;
	*bytes = FC_DEV_SPAN;
	return CUDA_SUCCESS;
}

FC_API CUresult CUDAAPI cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
	CUresult rc;

	FC_ENTER();
	rc = dev_check(dev);
	if (rc)
		return rc;
	if (!uuid)
		return CUDA_ERROR_INVALID_VALUE;
	memset(uuid, 0, sizeof(*uuid));
	memcpy(uuid->bytes, "fakecuda", 8);
	uuid->bytes[15] = (char)dev;
	return CUDA_SUCCESS;
}

FC_API CUresult CUDAAPI cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib,
					     CUdevice dev)
{
	CUresult rc;
	int v = 0;

	FC_ENTER();
	rc = dev_check(dev);
	if (rc)
		return rc;
	if (!pi || attrib <= 0 || attrib >= CU_DEVICE_ATTRIBUTE_MAX)
		return CUDA_ERROR_INVALID_VALUE;
	switch (attrib) {
	case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
	case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED:
	case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED:
	case CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED:
	case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
	case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED:
	case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED:
	case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY:
	case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY:
	case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS:
	case CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED:
	case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS:
		v = 1;
		break;
	case CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES:
		v = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
		break;
	case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
		v = 9;
		break;
	case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
		v = 132;
		break;
	case CU_DEVICE_ATTRIBUTE_WARP_SIZE:
		v = 32;
		break;
	case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID:
		v = 0x18 + dev;
		break;
	case CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT:
		v = 512;
		break;
	case CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED:
		v = fc_c2c();
		break;
	default:
		v = 0;
	}
	*pi = v;
	return CUDA_SUCCESS;
}

FC_API CUresult CUDAAPI cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev)
{
	CUresult rc;

	FC_ENTER();
	rc = dev_check(dev);
	if (rc)
		return rc;
	if (!pciBusId || len <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	snprintf(pciBusId, len, "0000:%02x:00.0", 0x18 + dev);
	return CUDA_SUCCESS;
}

/* The real driver says 0 for a device and itself; the double's devices
 * all reach each other. */
FC_API CUresult CUDAAPI cuDeviceCanAccessPeer(int *canAccessPeer, CUdevice dev,
					      CUdevice peerDev)
{
	CUresult rc;

	FC_ENTER();
	rc = dev_check(dev);
	if (!rc)
		rc = dev_check(peerDev);
	if (rc)
		return rc;
	if (!canAccessPeer)
		return CUDA_ERROR_INVALID_VALUE;
	*canAccessPeer = dev != peerDev;
	return CUDA_SUCCESS;
}

/* ------------------------------------------------------------- contexts */

CUcontext fc_current(void)
{
	return tls_depth ? tls_stack[tls_depth - 1] : NULL;
}

int fc_ctx_valid(CUcontext c)
{
	return c && c->magic == FC_CTX_MAGIC;
}

/* The context new work goes to: 201 without one, 709 if it is gone. */
CUresult fc_current_ctx(CUcontext *out)
{
	CUcontext c = fc_current();

	if (!c)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (!fc_alive(c))
		return CUDA_ERROR_CONTEXT_IS_DESTROYED;
	*out = c;
	return CUDA_SUCCESS;
}

static void tls_remove(CUcontext c)
{
	if (tls_depth && tls_stack[tls_depth - 1] == c)
		tls_depth--;
}

static CUresult ctx_create(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
	struct CUctx_st *c;
	CUresult rc;

	rc = dev_check(dev);
	if (rc)
		return rc;
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	if (tls_depth >= FC_CTX_STACK)
		return CUDA_ERROR_OUT_OF_MEMORY;
	c = calloc(1, sizeof(*c));
	if (!c)
		return CUDA_ERROR_OUT_OF_MEMORY;
	fc_lock();
	c->magic = FC_CTX_MAGIC;
	c->dev = dev;
	c->alive = 1;
	c->flags = flags;
	c->id = fc.next_ctx_id++;
	fc_unlock();
	tls_stack[tls_depth++] = c;
	*pctx = c;
	return CUDA_SUCCESS;
}

FC_FORWARD(FC_ENTER, cuCtxCreate,
	   (CUcontext *pctx, unsigned int flags, CUdevice dev),
	   ctx_create(pctx, flags, dev))
FC_FORWARD(FC_ENTER, cuCtxCreate_v2,
	   (CUcontext *pctx, unsigned int flags, CUdevice dev),
	   ctx_create(pctx, flags, dev))
FC_FORWARD(FC_ENTER, cuCtxCreate_v3,
	   (CUcontext *pctx, CUexecAffinityParam *paramsArray, int numParams,
	    unsigned int flags, CUdevice dev),
	   ctx_create(pctx, flags, dev))
FC_FORWARD(FC_ENTER, cuCtxCreate_v4,
	   (CUcontext *pctx, CUctxCreateParams *ctxCreateParams,
	    unsigned int flags, CUdevice dev),
	   ctx_create(pctx, flags, dev))

static CUresult ctx_destroy(CUcontext ctx)
{
	CUresult rc = fc_check_init();

	if (rc)
		return rc;
	if (!fc_ctx_valid(ctx) || ctx->primary)
		return CUDA_ERROR_INVALID_CONTEXT;
	fc_lock();
	if (!ctx->alive) {
		fc_unlock();
		return CUDA_ERROR_CONTEXT_IS_DESTROYED;
	}
	fc_free_ctx_allocs(ctx);
	fc_set_alive(ctx, 0);	/* never freed: stale handles stay safe */
	fc_unlock();
	tls_remove(ctx);
	return CUDA_SUCCESS;
}

FC_FORWARD(FC_ENTER, cuCtxDestroy_v2, (CUcontext ctx),
	   ctx_destroy(ctx))
FC_FORWARD(FC_ENTER, cuCtxDestroy, (CUcontext ctx),
	   ctx_destroy(ctx))

FC_API CUresult CUDAAPI cuCtxGetCurrent(CUcontext *pctx)
{
	CUresult rc;

	FC_ENTER();
	rc = fc_check_init();
	if (rc)
		return rc;
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	*pctx = fc_current();
	return CUDA_SUCCESS;
}

FC_API CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx)
{
	CUresult rc;

	FC_ENTER();
	rc = fc_check_init();
	if (rc)
		return rc;
	if (!ctx) {
		if (tls_depth)
			tls_depth--;
		return CUDA_SUCCESS;
	}
	if (!fc_ctx_valid(ctx))
		return CUDA_ERROR_INVALID_CONTEXT;
	if (!ctx->primary && !fc_alive(ctx))
		return CUDA_ERROR_CONTEXT_IS_DESTROYED;
	if (tls_depth)
		tls_stack[tls_depth - 1] = ctx;
	else
		tls_stack[tls_depth++] = ctx;
	return CUDA_SUCCESS;
}

static CUresult ctx_push(CUcontext ctx)
{
	CUresult rc = fc_check_init();

	if (rc)
		return rc;
	if (!fc_ctx_valid(ctx))
		return CUDA_ERROR_INVALID_CONTEXT;
	if (!ctx->primary && !fc_alive(ctx))
		return CUDA_ERROR_CONTEXT_IS_DESTROYED;
	if (tls_depth >= FC_CTX_STACK)
		return CUDA_ERROR_OUT_OF_MEMORY;
	tls_stack[tls_depth++] = ctx;
	return CUDA_SUCCESS;
}

static CUresult ctx_pop(CUcontext *pctx)
{
	CUresult rc = fc_check_init();

	if (rc)
		return rc;
	if (!tls_depth)
		return CUDA_ERROR_INVALID_CONTEXT;
	tls_depth--;
	if (pctx)
		*pctx = tls_stack[tls_depth];
	return CUDA_SUCCESS;
}

FC_FORWARD(FC_ENTER, cuCtxPushCurrent_v2, (CUcontext ctx),
	   ctx_push(ctx))
FC_FORWARD(FC_ENTER, cuCtxPushCurrent, (CUcontext ctx),
	   ctx_push(ctx))

FC_FORWARD(FC_ENTER, cuCtxPopCurrent_v2, (CUcontext *pctx),
	   ctx_pop(pctx))
FC_FORWARD(FC_ENTER, cuCtxPopCurrent, (CUcontext *pctx),
	   ctx_pop(pctx))

FC_API CUresult CUDAAPI cuCtxGetDevice(CUdevice *device)
{
	CUcontext c;
	CUresult rc;

	FC_ENTER();
	rc = fc_check_init();
	if (rc)
		return rc;
	c = fc_current();
	if (!c)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (!device)
		return CUDA_ERROR_INVALID_VALUE;
	*device = c->dev;
	return CUDA_SUCCESS;
}

FC_API CUresult CUDAAPI cuCtxGetApiVersion(CUcontext ctx, unsigned int *version)
{
	FC_ENTER();
	if (!version)
		return CUDA_ERROR_INVALID_VALUE;
	*version = 3020;
	return CUDA_SUCCESS;
}

static CUresult sync_current(void)
{
	CUcontext c;
	CUresult rc = fc_check_init();

	if (rc)
		return rc;
	fc_lock();
	rc = fc_current_ctx(&c);
	if (!rc)
		fc_pool_release_to_threshold(c->dev);
	fc_unlock();
	return rc;
}

FC_API CUresult CUDAAPI cuCtxSynchronize(void)
{
	FC_ENTER();
	return sync_current();
}

/* ------------------------------------------------------ primary contexts */

FC_API CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
	struct CUctx_st *c;
	CUresult rc;

	FC_ENTER();
	rc = dev_check(dev);
	if (rc)
		return rc;
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	fc_lock();
	c = &fc.dev[dev].primary;
	if (!c->alive) {
		fc_set_alive(c, 1);
		c->id = fc.next_ctx_id++;
	}
	c->refcount++;
	fc_unlock();
	*pctx = c;
	return CUDA_SUCCESS;
}

static void primary_drop(struct CUctx_st *c)
{
	fc_free_ctx_allocs(c);
	fc_pool_release_to_threshold(c->dev);
	fc_set_alive(c, 0);
}

static CUresult primary_release(CUdevice dev)
{
	struct CUctx_st *c;
	CUresult rc = dev_check(dev);

	if (rc)
		return rc;
	fc_lock();
	c = &fc.dev[dev].primary;
	if (!c->refcount) {
		fc_unlock();
		return CUDA_ERROR_INVALID_CONTEXT;
	}
	if (!--c->refcount && c->alive)
		primary_drop(c);
	fc_unlock();
	return CUDA_SUCCESS;
}

static CUresult primary_reset(CUdevice dev)
{
	CUresult rc = dev_check(dev);

	if (rc)
		return rc;
	fc_lock();
	if (fc.dev[dev].primary.alive)
		primary_drop(&fc.dev[dev].primary);
	fc_unlock();
	return CUDA_SUCCESS;
}

FC_FORWARD(FC_ENTER, cuDevicePrimaryCtxRelease_v2, (CUdevice dev),
	   primary_release(dev))
FC_FORWARD(FC_ENTER, cuDevicePrimaryCtxRelease, (CUdevice dev),
	   primary_release(dev))

FC_FORWARD(FC_ENTER, cuDevicePrimaryCtxReset_v2, (CUdevice dev),
	   primary_reset(dev))
FC_FORWARD(FC_ENTER, cuDevicePrimaryCtxReset, (CUdevice dev),
	   primary_reset(dev))

FC_API CUresult CUDAAPI cuDevicePrimaryCtxGetState(CUdevice dev,
						   unsigned int *flags,
						   int *active)
{
	CUresult rc;

	FC_ENTER();
	rc = dev_check(dev);
	if (rc)
		return rc;
	if (!flags || !active)
		return CUDA_ERROR_INVALID_VALUE;
	fc_lock();
	*flags = fc.dev[dev].primary.flags;
	*active = fc.dev[dev].primary.alive;
	fc_unlock();
	return CUDA_SUCCESS;
}

FC_API CUresult CUDAAPI cuDevicePrimaryCtxSetFlags_v2(CUdevice dev,
						      unsigned int flags)
{
	CUresult rc;

	FC_ENTER();
	rc = dev_check(dev);
	if (rc)
		return rc;
	fc_lock();
	fc.dev[dev].primary.flags = flags;
	fc_unlock();
	return CUDA_SUCCESS;
}

/* -------------------------------------------------------------- streams */

int fc_stream_ok(CUstream s)
{
	if (!s || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD)
		return 1;
	return s->magic == FC_STREAM_MAGIC && s->alive;
}

FC_API CUresult CUDAAPI cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
	struct CUstream_st *s;
	CUcontext c;
	CUresult rc;

	FC_ENTER();
	rc = fc_check_init();
	if (rc)
		return rc;
	if (!phStream || (Flags & ~CU_STREAM_NON_BLOCKING))
		return CUDA_ERROR_INVALID_VALUE;
	fc_lock();
	rc = fc_current_ctx(&c);
	fc_unlock();
	if (rc)
		return rc;
	s = calloc(1, sizeof(*s));
	if (!s)
		return CUDA_ERROR_OUT_OF_MEMORY;
	s->magic = FC_STREAM_MAGIC;
	s->alive = 1;
	s->ctx = c;
	s->flags = Flags;
	*phStream = s;
	return CUDA_SUCCESS;
}

static CUresult stream_destroy(CUstream s)
{
	CUresult rc = fc_check_init();

	if (rc)
		return rc;
	if (!s || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD ||
	    !fc_stream_ok(s))
		return CUDA_ERROR_INVALID_HANDLE;
	s->alive = 0;	/* never freed: stale handles stay detectable */
	return CUDA_SUCCESS;
}

FC_FORWARD(FC_ENTER, cuStreamDestroy_v2, (CUstream hStream),
	   stream_destroy(hStream))
FC_FORWARD(FC_ENTER, cuStreamDestroy, (CUstream hStream),
	   stream_destroy(hStream))

static CUresult stream_sync(CUstream s)
{
	CUresult rc = fc_check_init();

	if (rc)
		return rc;
	if (!fc_stream_ok(s))
		return CUDA_ERROR_INVALID_HANDLE;
	if (s && s != CU_STREAM_LEGACY && s != CU_STREAM_PER_THREAD) {
		fc_lock();
		fc_pool_release_to_threshold(s->ctx->dev);
		fc_unlock();
		return CUDA_SUCCESS;
	}
	return sync_current();
}

FC_FORWARD(FC_ENTER, cuStreamSynchronize, (CUstream hStream),
	   stream_sync(hStream))
FC_FORWARD(FC_ENTER, cuStreamSynchronize_ptsz, (CUstream hStream),
	   stream_sync(hStream))

FC_FORWARD(FC_ENTER_INIT, cuStreamQuery, (CUstream hStream),
	   fc_stream_ok(hStream) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE)
FC_FORWARD(FC_ENTER_INIT, cuStreamQuery_ptsz, (CUstream hStream),
	   fc_stream_ok(hStream) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE)

/* --------------------------------------------------------------- errors */

static const struct {
	CUresult rc;
	const char *name, *str;
} fc_errs[] = {
#define E(c, s) { c, #c, s }
	E(CUDA_SUCCESS, "no error"),
	E(CUDA_ERROR_INVALID_VALUE, "invalid argument"),
	E(CUDA_ERROR_OUT_OF_MEMORY, "out of memory"),
	E(CUDA_ERROR_NOT_INITIALIZED, "initialization error"),
	E(CUDA_ERROR_DEINITIALIZED, "driver shutting down"),
	E(CUDA_ERROR_NO_DEVICE, "no CUDA-capable device is detected"),
	E(CUDA_ERROR_INVALID_DEVICE, "invalid device ordinal"),
	E(CUDA_ERROR_INVALID_CONTEXT, "invalid device context"),
	E(CUDA_ERROR_CONTEXT_ALREADY_CURRENT, "context already current"),
	E(CUDA_ERROR_MAP_FAILED, "mapping of buffer object failed"),
	E(CUDA_ERROR_ALREADY_MAPPED, "resource already mapped"),
	E(CUDA_ERROR_NOT_MAPPED, "resource not mapped"),
	E(CUDA_ERROR_INVALID_HANDLE, "invalid resource handle"),
	E(CUDA_ERROR_NOT_FOUND, "named symbol not found"),
	E(CUDA_ERROR_NOT_READY, "device not ready"),
	E(CUDA_ERROR_ILLEGAL_ADDRESS, "an illegal memory access was encountered"),
	E(CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, "peer access is not supported between these two devices"),
	E(CUDA_ERROR_CONTEXT_IS_DESTROYED, "context is destroyed"),
	E(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, "part or all of the requested memory range is already mapped"),
	E(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, "pointer does not correspond to a registered memory region"),
	E(CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE, "primary context active"),
	E(CUDA_ERROR_NOT_PERMITTED, "operation not permitted"),
	E(CUDA_ERROR_NOT_SUPPORTED, "operation not supported"),
	E(CUDA_ERROR_INVALID_PC, "invalid program counter"),
	E(CUDA_ERROR_LAUNCH_FAILED, "unspecified launch failure"),
	E(CUDA_ERROR_OPERATING_SYSTEM, "OS call failed or operation not supported on this OS"),
	E(CUDA_ERROR_ILLEGAL_STATE, "the operation is not permitted in the current state"),
	E(CUDA_ERROR_STUB_LIBRARY, "CUDA driver is a stub library"),
	E(CUDA_ERROR_UNKNOWN, "unknown error"),
#undef E
};

FC_API CUresult CUDAAPI cuGetErrorName(CUresult error, const char **pStr)
{
	FC_ENTER();
	if (!pStr)
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < sizeof(fc_errs) / sizeof(fc_errs[0]); i++)
		if (fc_errs[i].rc == error) {
			*pStr = fc_errs[i].name;
			return CUDA_SUCCESS;
		}
	*pStr = NULL;
	return CUDA_ERROR_INVALID_VALUE;
}

FC_API CUresult CUDAAPI cuGetErrorString(CUresult error, const char **pStr)
{
	FC_ENTER();
	if (!pStr)
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < sizeof(fc_errs) / sizeof(fc_errs[0]); i++)
		if (fc_errs[i].rc == error) {
			*pStr = fc_errs[i].str;
			return CUDA_SUCCESS;
		}
	*pStr = NULL;
	return CUDA_ERROR_INVALID_VALUE;
}

/* The real driver answers 1 (INVALID_VALUE) for a UUID it does not know. */
FC_API CUresult CUDAAPI cuGetExportTable(const void **ppExportTable,
					 const CUuuid *pExportTableId)
{
	FC_ENTER();
	if (ppExportTable)
		*ppExportTable = NULL;
	return CUDA_ERROR_INVALID_VALUE;
}
