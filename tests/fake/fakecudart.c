/* SPDX-License-Identifier: MIT */
/*
 * Fake CUDA runtime (test double of libcudart.so.13).
 *
 * It takes the route the real runtime takes to the driver, because that
 * is the route gdrhook must catch: it never links libcuda; on first use it
 * does dlopen("libcuda.so.1", RTLD_NOW), dlsym(handle,
 * "cuGetProcAddress_v2") and resolves every driver function it uses
 * through that pointer (cudaVersion 13000).  Two tables are resolved: one
 * with the default-stream mode of the program (legacy, or per-thread when
 * FAKECUDART_PTDS=1 or cudaFakeSetPerThread(1)), used by the plain entry
 * points, and one with CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, used
 * by the _ptsz/_ptds entry points.  Devices are driven through their
 * primary contexts (cuDevicePrimaryCtxRetain + cuCtxSetCurrent).
 */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <cuda_runtime_api.h>

#include "fakecuda.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define RT_API __attribute__((visibility("default")))
#define RT_VERSION 13000
#define RT_MAX_DEV 16

/* (field, base name for cuGetProcAddress, symbol whose type it has) */
#define RT_DRIVER_FNS(X)						\
	X(init, "cuInit", cuInit)					\
	X(driver_version, "cuDriverGetVersion", cuDriverGetVersion)	\
	X(device_get_count, "cuDeviceGetCount", cuDeviceGetCount)	\
	X(primary_retain, "cuDevicePrimaryCtxRetain", cuDevicePrimaryCtxRetain) \
	X(primary_release, "cuDevicePrimaryCtxRelease", cuDevicePrimaryCtxRelease_v2) \
	X(primary_reset, "cuDevicePrimaryCtxReset", cuDevicePrimaryCtxReset_v2) \
	X(ctx_get_current, "cuCtxGetCurrent", cuCtxGetCurrent)		\
	X(ctx_set_current, "cuCtxSetCurrent", cuCtxSetCurrent)		\
	X(ctx_synchronize, "cuCtxSynchronize", cuCtxSynchronize)	\
	X(mem_alloc, "cuMemAlloc", cuMemAlloc_v2)			\
	X(mem_alloc_pitch, "cuMemAllocPitch", cuMemAllocPitch_v2)	\
	X(mem_free, "cuMemFree", cuMemFree_v2)				\
	X(mem_alloc_managed, "cuMemAllocManaged", cuMemAllocManaged)	\
	X(mem_alloc_host, "cuMemAllocHost", cuMemAllocHost_v2)		\
	X(mem_host_alloc, "cuMemHostAlloc", cuMemHostAlloc)		\
	X(mem_free_host, "cuMemFreeHost", cuMemFreeHost)		\
	X(mem_host_register, "cuMemHostRegister", cuMemHostRegister_v2)	\
	X(mem_host_unregister, "cuMemHostUnregister", cuMemHostUnregister) \
	X(mem_alloc_async, "cuMemAllocAsync", cuMemAllocAsync)		\
	X(mem_alloc_from_pool_async, "cuMemAllocFromPoolAsync", cuMemAllocFromPoolAsync) \
	X(mem_free_async, "cuMemFreeAsync", cuMemFreeAsync)		\
	X(mem_pool_create, "cuMemPoolCreate", cuMemPoolCreate)		\
	X(mem_pool_destroy, "cuMemPoolDestroy", cuMemPoolDestroy)	\
	X(mem_pool_trim_to, "cuMemPoolTrimTo", cuMemPoolTrimTo)		\
	X(mem_pool_set_attribute, "cuMemPoolSetAttribute", cuMemPoolSetAttribute) \
	X(mem_pool_get_attribute, "cuMemPoolGetAttribute", cuMemPoolGetAttribute) \
	X(device_get_default_mem_pool, "cuDeviceGetDefaultMemPool", cuDeviceGetDefaultMemPool) \
	X(stream_create, "cuStreamCreate", cuStreamCreate)		\
	X(stream_destroy, "cuStreamDestroy", cuStreamDestroy_v2)	\
	X(stream_synchronize, "cuStreamSynchronize", cuStreamSynchronize) \
	X(stream_begin_capture, "cuStreamBeginCapture", cuStreamBeginCapture_v2) \
	X(stream_end_capture, "cuStreamEndCapture", cuStreamEndCapture) \
	X(graph_instantiate, "cuGraphInstantiateWithFlags", cuGraphInstantiateWithFlags) \
	X(graph_launch, "cuGraphLaunch", cuGraphLaunch)			\
	X(graph_exec_destroy, "cuGraphExecDestroy", cuGraphExecDestroy)	\
	X(graph_destroy, "cuGraphDestroy", cuGraphDestroy)		\
	X(ipc_get_mem_handle, "cuIpcGetMemHandle", cuIpcGetMemHandle)	\
	X(ipc_open_mem_handle, "cuIpcOpenMemHandle", cuIpcOpenMemHandle_v2) \
	X(ipc_close_mem_handle, "cuIpcCloseMemHandle", cuIpcCloseMemHandle) \
	X(memcpy, "cuMemcpy", cuMemcpy)					\
	X(memset_d8, "cuMemsetD8", cuMemsetD8_v2)			\
	X(pointer_get_attributes, "cuPointerGetAttributes", cuPointerGetAttributes)

struct rt_driver {
#define X(field, name, sym) __typeof__(&sym) field;
	RT_DRIVER_FNS(X)
#undef X
};

static const char *const rt_names[] = {
#define X(field, name, sym) name,
	RT_DRIVER_FNS(X)
#undef X
};

static struct {
	pthread_once_t once;
	pthread_mutex_t lock;
	cudaError_t init_err;
	void *handle;
	__typeof__(&cuGetProcAddress_v2) gpa;
	struct rt_driver drv[2];	/* [0] program's mode, [1] per-thread */
	int ptds;
	int ndev;
	int retained[RT_MAX_DEV];
	CUcontext primary[RT_MAX_DEV];
} rt = {
	.once = PTHREAD_ONCE_INIT,
	.lock = PTHREAD_MUTEX_INITIALIZER,
};

static __thread int rt_dev;
static __thread cudaError_t rt_last;

/* ----------------------------------------------------------- errors */

static cudaError_t rt_err(CUresult rc)
{
	switch (rc) {
	case CUDA_SUCCESS: return cudaSuccess;
	case CUDA_ERROR_INVALID_VALUE: return cudaErrorInvalidValue;
	case CUDA_ERROR_OUT_OF_MEMORY: return cudaErrorMemoryAllocation;
	case CUDA_ERROR_NOT_INITIALIZED: return cudaErrorInitializationError;
	case CUDA_ERROR_DEINITIALIZED: return cudaErrorCudartUnloading;
	case CUDA_ERROR_NO_DEVICE: return cudaErrorNoDevice;
	case CUDA_ERROR_INVALID_DEVICE: return cudaErrorInvalidDevice;
	case CUDA_ERROR_INVALID_CONTEXT: return cudaErrorDeviceUninitialized;
	case CUDA_ERROR_MAP_FAILED: return cudaErrorMapBufferObjectFailed;
	case CUDA_ERROR_OPERATING_SYSTEM: return cudaErrorOperatingSystem;
	case CUDA_ERROR_INVALID_HANDLE: return cudaErrorInvalidResourceHandle;
	case CUDA_ERROR_ILLEGAL_STATE: return cudaErrorIllegalState;
	case CUDA_ERROR_NOT_FOUND: return cudaErrorSymbolNotFound;
	case CUDA_ERROR_CONTEXT_IS_DESTROYED: return cudaErrorContextIsDestroyed;
	case CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED:
		return cudaErrorHostMemoryAlreadyRegistered;
	case CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED:
		return cudaErrorHostMemoryNotRegistered;
	case CUDA_ERROR_NOT_SUPPORTED: return cudaErrorNotSupported;
	case CUDA_ERROR_NOT_PERMITTED: return cudaErrorNotPermitted;
	default: return cudaErrorUnknown;
	}
}

static cudaError_t rt_ret(cudaError_t e)
{
	if (e != cudaSuccess)
		rt_last = e;
	return e;
}

#define RT_CALL(expr) rt_ret(rt_err(expr))

static const struct {
	cudaError_t e;
	const char *name, *str;
} rt_errs[] = {
#define E(c, s) { c, #c, s }
	E(cudaSuccess, "no error"),
	E(cudaErrorInvalidValue, "invalid argument"),
	E(cudaErrorMemoryAllocation, "out of memory"),
	E(cudaErrorInitializationError, "initialization error"),
	E(cudaErrorCudartUnloading, "driver shutting down"),
	E(cudaErrorInsufficientDriver, "CUDA driver version is insufficient for CUDA runtime version"),
	E(cudaErrorNoDevice, "no CUDA-capable device is detected"),
	E(cudaErrorInvalidDevice, "invalid device ordinal"),
	E(cudaErrorDeviceUninitialized, "invalid device context"),
	E(cudaErrorMapBufferObjectFailed, "mapping of buffer object failed"),
	E(cudaErrorOperatingSystem, "OS call failed or operation not supported on this OS"),
	E(cudaErrorInvalidResourceHandle, "invalid resource handle"),
	E(cudaErrorIllegalState, "the operation is not permitted in the current state"),
	E(cudaErrorSymbolNotFound, "named symbol not found"),
	E(cudaErrorContextIsDestroyed, "context is destroyed"),
	E(cudaErrorHostMemoryAlreadyRegistered, "part or all of the requested memory range is already mapped"),
	E(cudaErrorHostMemoryNotRegistered, "pointer does not correspond to a registered memory region"),
	E(cudaErrorNotSupported, "operation not supported"),
	E(cudaErrorNotPermitted, "operation not permitted"),
	E(cudaErrorUnknown, "unknown error"),
#undef E
};

RT_API const char *CUDARTAPI cudaGetErrorString(cudaError_t error)
{
	for (size_t i = 0; i < sizeof(rt_errs) / sizeof(rt_errs[0]); i++)
		if (rt_errs[i].e == error)
			return rt_errs[i].str;
	return "unrecognized error code";
}

RT_API const char *CUDARTAPI cudaGetErrorName(cudaError_t error)
{
	for (size_t i = 0; i < sizeof(rt_errs) / sizeof(rt_errs[0]); i++)
		if (rt_errs[i].e == error)
			return rt_errs[i].name;
	return "cudaErrorUnknown";
}

RT_API cudaError_t CUDARTAPI cudaGetLastError(void)
{
	cudaError_t e = rt_last;

	rt_last = cudaSuccess;
	return e;
}

RT_API cudaError_t CUDARTAPI cudaPeekAtLastError(void)
{
	return rt_last;
}

/* ------------------------------------------------------------ startup */

static int resolve(struct rt_driver *d, cuuint64_t flags)
{
	void **slot = (void **)d;

	for (size_t i = 0; i < sizeof(rt_names) / sizeof(rt_names[0]); i++) {
		CUdriverProcAddressQueryResult st;

		if (rt.gpa(rt_names[i], &slot[i], RT_VERSION, flags, &st) ||
		    !slot[i])
			return -1;
	}
	return 0;
}

static void rt_init(void)
{
	const char *e = getenv("FAKECUDART_PTDS");
	cuuint64_t mode;
	int n = 0;

	if (e && *e && strcmp(e, "0"))
		rt.ptds = 1;
	rt.handle = dlopen("libcuda.so.1", RTLD_NOW);
	if (!rt.handle) {
		rt.init_err = cudaErrorInsufficientDriver;
		return;
	}
	rt.gpa = (__typeof__(rt.gpa))dlsym(rt.handle, "cuGetProcAddress_v2");
	if (!rt.gpa) {
		rt.init_err = cudaErrorInsufficientDriver;
		return;
	}
	mode = rt.ptds ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM :
		CU_GET_PROC_ADDRESS_LEGACY_STREAM;
	if (resolve(&rt.drv[0], mode) ||
	    resolve(&rt.drv[1], CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)) {
		rt.init_err = cudaErrorInsufficientDriver;
		return;
	}
	rt.init_err = rt_err(rt.drv[0].init(0));
	if (rt.init_err)
		return;
	rt.init_err = rt_err(rt.drv[0].device_get_count(&n));
	rt.ndev = n > RT_MAX_DEV ? RT_MAX_DEV : n;
	if (!rt.init_err && !rt.ndev)
		rt.init_err = cudaErrorNoDevice;
}

static cudaError_t rt_start(void)
{
	pthread_once(&rt.once, rt_init);
	return rt.init_err;
}

/* The driver table for plain (0) or per-thread (1) entry points. */
static const struct rt_driver *drv(int per_thread)
{
	return &rt.drv[per_thread ? 1 : rt.ptds];
}

/* Make the current device's primary context current on this thread. */
static cudaError_t rt_ctx(void)
{
	cudaError_t e = rt_start();
	CUcontext cur = NULL;
	int d = rt_dev;

	if (e)
		return rt_ret(e);
	if (d >= rt.ndev)
		return rt_ret(cudaErrorInvalidDevice);
	pthread_mutex_lock(&rt.lock);
	if (!rt.retained[d]) {
		e = rt_err(rt.drv[0].primary_retain(&rt.primary[d], d));
		if (!e)
			rt.retained[d] = 1;
	}
	pthread_mutex_unlock(&rt.lock);
	if (e)
		return rt_ret(e);
	e = rt_err(rt.drv[0].ctx_get_current(&cur));
	if (!e && cur != rt.primary[d])
		e = rt_err(rt.drv[0].ctx_set_current(rt.primary[d]));
	return rt_ret(e);
}

#define RT_CTX()				\
	do {					\
		cudaError_t rt_e_ = rt_ctx();	\
		if (rt_e_)			\
			return rt_e_;		\
	} while (0)

RT_API void cudaFakeSetPerThread(int on)
{
	rt.ptds = !!on;
}

/* ----------------------------------------------------- device management */

RT_API cudaError_t CUDARTAPI cudaGetDeviceCount(int *count)
{
	cudaError_t e = rt_start();

	if (!count)
		return rt_ret(cudaErrorInvalidValue);
	*count = e ? 0 : rt.ndev;
	return rt_ret(e);
}

RT_API cudaError_t CUDARTAPI cudaSetDevice(int device)
{
	cudaError_t e = rt_start();

	if (e)
		return rt_ret(e);
	if (device < 0 || device >= rt.ndev)
		return rt_ret(cudaErrorInvalidDevice);
	rt_dev = device;
	return rt_ctx();
}

RT_API cudaError_t CUDARTAPI cudaGetDevice(int *device)
{
	cudaError_t e = rt_start();

	if (e)
		return rt_ret(e);
	if (!device)
		return rt_ret(cudaErrorInvalidValue);
	*device = rt_dev;
	return cudaSuccess;
}

/* Destroys every allocation of the device's primary context. */
RT_API cudaError_t CUDARTAPI cudaDeviceReset(void)
{
	cudaError_t e = rt_start();
	int d = rt_dev;

	if (e)
		return rt_ret(e);
	pthread_mutex_lock(&rt.lock);
	if (rt.retained[d]) {
		e = rt_err(rt.drv[0].primary_reset(d));
		if (!e)
			e = rt_err(rt.drv[0].primary_release(d));
		rt.retained[d] = 0;
	}
	pthread_mutex_unlock(&rt.lock);
	return rt_ret(e);
}

RT_API cudaError_t CUDARTAPI cudaDeviceSynchronize(void)
{
	RT_CTX();
	return RT_CALL(drv(0)->ctx_synchronize());
}

RT_API cudaError_t CUDARTAPI cudaDriverGetVersion(int *driverVersion)
{
	if (!driverVersion)
		return rt_ret(cudaErrorInvalidValue);
	pthread_once(&rt.once, rt_init);
	if (!rt.gpa || !rt.drv[0].driver_version) {
		*driverVersion = 0;
		return cudaSuccess;
	}
	return RT_CALL(rt.drv[0].driver_version(driverVersion));
}

RT_API cudaError_t CUDARTAPI cudaRuntimeGetVersion(int *runtimeVersion)
{
	if (!runtimeVersion)
		return rt_ret(cudaErrorInvalidValue);
	*runtimeVersion = RT_VERSION;
	return cudaSuccess;
}

/* ------------------------------------------------------------- memory */

RT_API cudaError_t CUDARTAPI cudaMalloc(void **devPtr, size_t size)
{
	RT_CTX();
	if (!devPtr)
		return rt_ret(cudaErrorInvalidValue);
	if (!size) {
		*devPtr = NULL;
		return cudaSuccess;
	}
	return RT_CALL(drv(0)->mem_alloc((CUdeviceptr *)devPtr, size));
}

RT_API cudaError_t CUDARTAPI cudaFree(void *devPtr)
{
	RT_CTX();
	if (!devPtr)
		return cudaSuccess;
	return RT_CALL(drv(0)->mem_free((CUdeviceptr)devPtr));
}

RT_API cudaError_t CUDARTAPI cudaMallocPitch(void **devPtr, size_t *pitch,
					     size_t width, size_t height)
{
	RT_CTX();
	return RT_CALL(drv(0)->mem_alloc_pitch((CUdeviceptr *)devPtr, pitch,
					       width, height, 4));
}

RT_API cudaError_t CUDARTAPI cudaMallocManaged(void **devPtr, size_t size,
					       unsigned int flags)
{
	RT_CTX();
	return RT_CALL(drv(0)->mem_alloc_managed((CUdeviceptr *)devPtr, size,
						 flags));
}

RT_API cudaError_t CUDARTAPI cudaMallocHost(void **ptr, size_t size)
{
	RT_CTX();
	return RT_CALL(drv(0)->mem_alloc_host(ptr, size));
}

RT_API cudaError_t CUDARTAPI cudaHostAlloc(void **pHost, size_t size,
					   unsigned int flags)
{
	RT_CTX();
	return RT_CALL(drv(0)->mem_host_alloc(pHost, size, flags));
}

RT_API cudaError_t CUDARTAPI cudaFreeHost(void *ptr)
{
	RT_CTX();
	if (!ptr)
		return cudaSuccess;
	return RT_CALL(drv(0)->mem_free_host(ptr));
}

RT_API cudaError_t CUDARTAPI cudaHostRegister(void *ptr, size_t size,
					      unsigned int flags)
{
	RT_CTX();
	return RT_CALL(drv(0)->mem_host_register(ptr, size, flags));
}

RT_API cudaError_t CUDARTAPI cudaHostUnregister(void *ptr)
{
	RT_CTX();
	return RT_CALL(drv(0)->mem_host_unregister(ptr));
}

static cudaError_t malloc_async(int pt, void **p, size_t size, cudaStream_t s)
{
	RT_CTX();
	return RT_CALL(drv(pt)->mem_alloc_async((CUdeviceptr *)p, size, s));
}

RT_API cudaError_t CUDARTAPI cudaMallocAsync(void **devPtr, size_t size,
					     cudaStream_t hStream)
{
	return malloc_async(0, devPtr, size, hStream);
}

RT_API cudaError_t CUDARTAPI cudaMallocAsync_ptsz(void **devPtr, size_t size,
						  cudaStream_t hStream)
{
	return malloc_async(1, devPtr, size, hStream);
}

static cudaError_t from_pool(int pt, void **p, size_t size, cudaMemPool_t pool,
			     cudaStream_t s)
{
	RT_CTX();
	return RT_CALL(drv(pt)->mem_alloc_from_pool_async((CUdeviceptr *)p,
							  size, pool, s));
}

RT_API cudaError_t CUDARTAPI cudaMallocFromPoolAsync(void **ptr, size_t size,
						     cudaMemPool_t memPool,
						     cudaStream_t stream)
{
	return from_pool(0, ptr, size, memPool, stream);
}

RT_API cudaError_t CUDARTAPI cudaMallocFromPoolAsync_ptsz(void **ptr,
							  size_t size,
							  cudaMemPool_t memPool,
							  cudaStream_t stream)
{
	return from_pool(1, ptr, size, memPool, stream);
}

static cudaError_t free_async(int pt, void *p, cudaStream_t s)
{
	RT_CTX();
	return RT_CALL(drv(pt)->mem_free_async((CUdeviceptr)p, s));
}

RT_API cudaError_t CUDARTAPI cudaFreeAsync(void *devPtr, cudaStream_t hStream)
{
	return free_async(0, devPtr, hStream);
}

RT_API cudaError_t CUDARTAPI cudaFreeAsync_ptsz(void *devPtr,
						cudaStream_t hStream)
{
	return free_async(1, devPtr, hStream);
}

RT_API cudaError_t CUDARTAPI cudaMemPoolCreate(cudaMemPool_t *memPool,
					       const struct cudaMemPoolProps *poolProps)
{
	CUmemPoolProps p;

	RT_CTX();
	if (!poolProps)
		return rt_ret(cudaErrorInvalidValue);
	memset(&p, 0, sizeof(p));
	p.allocType = (CUmemAllocationType)poolProps->allocType;
	p.handleTypes = (CUmemAllocationHandleType)poolProps->handleTypes;
	p.location.type = (CUmemLocationType)poolProps->location.type;
	p.location.id = poolProps->location.id;
	p.win32SecurityAttributes = poolProps->win32SecurityAttributes;
	p.maxSize = poolProps->maxSize;
	p.usage = poolProps->usage;
	return RT_CALL(drv(0)->mem_pool_create(memPool, &p));
}

RT_API cudaError_t CUDARTAPI cudaMemPoolDestroy(cudaMemPool_t memPool)
{
	RT_CTX();
	return RT_CALL(drv(0)->mem_pool_destroy(memPool));
}

RT_API cudaError_t CUDARTAPI cudaMemPoolTrimTo(cudaMemPool_t memPool,
					       size_t minBytesToKeep)
{
	RT_CTX();
	return RT_CALL(drv(0)->mem_pool_trim_to(memPool, minBytesToKeep));
}

RT_API cudaError_t CUDARTAPI cudaMemPoolSetAttribute(cudaMemPool_t memPool,
						     enum cudaMemPoolAttr attr,
						     void *value)
{
	RT_CTX();
	return RT_CALL(drv(0)->mem_pool_set_attribute(memPool,
						      (CUmemPool_attribute)attr,
						      value));
}

RT_API cudaError_t CUDARTAPI cudaMemPoolGetAttribute(cudaMemPool_t memPool,
						     enum cudaMemPoolAttr attr,
						     void *value)
{
	RT_CTX();
	return RT_CALL(drv(0)->mem_pool_get_attribute(memPool,
						      (CUmemPool_attribute)attr,
						      value));
}

RT_API cudaError_t CUDARTAPI cudaDeviceGetDefaultMemPool(cudaMemPool_t *memPool,
							 int device)
{
	cudaError_t e = rt_start();

	if (e)
		return rt_ret(e);
	return RT_CALL(drv(0)->device_get_default_mem_pool(memPool, device));
}

/* ------------------------------------------------------------- streams */

RT_API cudaError_t CUDARTAPI cudaStreamCreate(cudaStream_t *pStream)
{
	RT_CTX();
	return RT_CALL(drv(0)->stream_create(pStream, CU_STREAM_DEFAULT));
}

RT_API cudaError_t CUDARTAPI cudaStreamDestroy(cudaStream_t stream)
{
	RT_CTX();
	return RT_CALL(drv(0)->stream_destroy(stream));
}

RT_API cudaError_t CUDARTAPI cudaStreamSynchronize(cudaStream_t stream)
{
	RT_CTX();
	return RT_CALL(drv(0)->stream_synchronize(stream));
}

RT_API cudaError_t CUDARTAPI cudaStreamSynchronize_ptsz(cudaStream_t stream)
{
	RT_CTX();
	return RT_CALL(drv(1)->stream_synchronize(stream));
}

/* ------------------------------------------------- capture and graphs */

RT_API cudaError_t CUDARTAPI cudaStreamBeginCapture(cudaStream_t stream,
						    enum cudaStreamCaptureMode mode)
{
	RT_CTX();
	return RT_CALL(drv(0)->stream_begin_capture(stream,
						    (CUstreamCaptureMode)mode));
}

RT_API cudaError_t CUDARTAPI cudaStreamEndCapture(cudaStream_t stream,
						  cudaGraph_t *pGraph)
{
	RT_CTX();
	return RT_CALL(drv(0)->stream_end_capture(stream, pGraph));
}

RT_API cudaError_t CUDARTAPI cudaGraphInstantiateWithFlags(
		cudaGraphExec_t *pGraphExec, cudaGraph_t graph,
		unsigned long long flags)
{
	RT_CTX();
	return RT_CALL(drv(0)->graph_instantiate(pGraphExec, graph, flags));
}

/* The CUDA 12 signature (flags, no error node or log). */
RT_API cudaError_t CUDARTAPI cudaGraphInstantiate(cudaGraphExec_t *pGraphExec,
						  cudaGraph_t graph,
						  unsigned long long flags)
{
	RT_CTX();
	return RT_CALL(drv(0)->graph_instantiate(pGraphExec, graph, flags));
}

RT_API cudaError_t CUDARTAPI cudaGraphLaunch(cudaGraphExec_t graphExec,
					     cudaStream_t stream)
{
	RT_CTX();
	return RT_CALL(drv(0)->graph_launch(graphExec, stream));
}

RT_API cudaError_t CUDARTAPI cudaGraphExecDestroy(cudaGraphExec_t graphExec)
{
	RT_CTX();
	return RT_CALL(drv(0)->graph_exec_destroy(graphExec));
}

RT_API cudaError_t CUDARTAPI cudaGraphDestroy(cudaGraph_t graph)
{
	RT_CTX();
	return RT_CALL(drv(0)->graph_destroy(graph));
}

/* ---------------------------------------------------------------- IPC */

RT_API cudaError_t CUDARTAPI cudaIpcGetMemHandle(cudaIpcMemHandle_t *handle,
						 void *devPtr)
{
	CUipcMemHandle h;
	cudaError_t e;

	RT_CTX();
	if (!handle)
		return rt_ret(cudaErrorInvalidValue);
	e = RT_CALL(drv(0)->ipc_get_mem_handle(&h, (CUdeviceptr)devPtr));
	if (!e)
		memcpy(handle->reserved, h.reserved, sizeof(h.reserved));
	return e;
}

RT_API cudaError_t CUDARTAPI cudaIpcOpenMemHandle(void **devPtr,
						  cudaIpcMemHandle_t handle,
						  unsigned int flags)
{
	CUipcMemHandle h;

	RT_CTX();
	memcpy(h.reserved, handle.reserved, sizeof(h.reserved));
	return RT_CALL(drv(0)->ipc_open_mem_handle((CUdeviceptr *)devPtr, h,
						   flags));
}

RT_API cudaError_t CUDARTAPI cudaIpcCloseMemHandle(void *devPtr)
{
	RT_CTX();
	return RT_CALL(drv(0)->ipc_close_mem_handle((CUdeviceptr)devPtr));
}

/* -------------------------------------------------------- copy and set */

/*
 * As 13.0 does on an H100/H200 (driver 580): one driver query, no
 * context made current (with none, devicePointer reads NULL); memory the
 * driver does not know is cudaMemoryTypeUnregistered, device -2,
 * hostPointer the pointer, and not an error.
 */
static unsigned long rt_pointer_queries;

/* Tests: how many times the program's queries reached this runtime. */
RT_API unsigned long cudaFakePointerQueries(void)
{
	return __atomic_load_n(&rt_pointer_queries, __ATOMIC_RELAXED);
}

static cudaError_t rt_pointer_get_attributes(
	struct cudaPointerAttributes *attributes, const void *ptr)
{
	CUpointer_attribute at[5] = {
		CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED,
		CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
		CU_POINTER_ATTRIBUTE_DEVICE_POINTER,
		CU_POINTER_ATTRIBUTE_HOST_POINTER,
	};
	unsigned int mt = 0;
	int managed = 0, ord = -2;
	CUdeviceptr dp = 0;
	void *hp = NULL;
	void *data[5] = { &mt, &managed, &ord, &dp, &hp };
	cudaError_t e = rt_start();

	__atomic_fetch_add(&rt_pointer_queries, 1, __ATOMIC_RELAXED);
	if (e)
		return rt_ret(e);
	if (!attributes)
		return rt_ret(cudaErrorInvalidValue);
	e = RT_CALL(drv(0)->pointer_get_attributes(5, at, data,
						   (CUdeviceptr)(uintptr_t)ptr));
	if (e)
		return e;
	attributes->type = managed ? cudaMemoryTypeManaged :
		mt == CU_MEMORYTYPE_HOST ? cudaMemoryTypeHost :
		mt == CU_MEMORYTYPE_DEVICE ? cudaMemoryTypeDevice :
		cudaMemoryTypeUnregistered;
	attributes->device = ord;
	attributes->devicePointer = (void *)(uintptr_t)dp;
	attributes->hostPointer = hp;
	return cudaSuccess;
}

RT_API cudaError_t CUDARTAPI cudaPointerGetAttributes(
	struct cudaPointerAttributes *attributes, const void *ptr)
{
	return rt_pointer_get_attributes(attributes, ptr);
}

/* Tests: this runtime's own answer, which a preloaded library cannot
 * answer in its place (it writes the four fields, reserved[] untouched). */
RT_API cudaError_t cudaFakePointerGetAttributes(
	struct cudaPointerAttributes *attributes, const void *ptr)
{
	return rt_pointer_get_attributes(attributes, ptr);
}

RT_API cudaError_t CUDARTAPI cudaMemcpy(void *dst, const void *src,
					size_t count, enum cudaMemcpyKind kind)
{
	RT_CTX();
	return RT_CALL(drv(0)->memcpy((CUdeviceptr)dst, (CUdeviceptr)src,
				      count));
}

RT_API cudaError_t CUDARTAPI cudaMemcpy_ptds(void *dst, const void *src,
					     size_t count,
					     enum cudaMemcpyKind kind)
{
	RT_CTX();
	return RT_CALL(drv(1)->memcpy((CUdeviceptr)dst, (CUdeviceptr)src,
				      count));
}

RT_API cudaError_t CUDARTAPI cudaMemset(void *devPtr, int value, size_t count)
{
	RT_CTX();
	return RT_CALL(drv(0)->memset_d8((CUdeviceptr)devPtr,
					 (unsigned char)value, count));
}

RT_API cudaError_t CUDARTAPI cudaMemset_ptds(void *devPtr, int value,
					     size_t count)
{
	RT_CTX();
	return RT_CALL(drv(1)->memset_d8((CUdeviceptr)devPtr,
					 (unsigned char)value, count));
}

/* ------------------------------------------------- driver entry points */

static cudaError_t entry_point(const char *symbol, void **funcPtr,
			       unsigned int version, unsigned long long flags,
			       enum cudaDriverEntryPointQueryResult *status)
{
	CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
	cudaError_t e = rt_start();

	if (e)
		return rt_ret(e);
	e = RT_CALL(rt.gpa(symbol, funcPtr, (int)version, flags, &st));
	if (!e && status)
		*status = (enum cudaDriverEntryPointQueryResult)st;
	return e;
}

RT_API cudaError_t CUDARTAPI cudaGetDriverEntryPoint(
	const char *symbol, void **funcPtr, unsigned long long flags,
	enum cudaDriverEntryPointQueryResult *driverStatus)
{
	return entry_point(symbol, funcPtr, RT_VERSION, flags, driverStatus);
}

RT_API cudaError_t CUDARTAPI cudaGetDriverEntryPoint_ptsz(
	const char *symbol, void **funcPtr, unsigned long long flags,
	enum cudaDriverEntryPointQueryResult *driverStatus)
{
	if (!(flags & (cudaEnableLegacyStream | cudaEnablePerThreadDefaultStream)))
		flags |= cudaEnablePerThreadDefaultStream;
	return entry_point(symbol, funcPtr, RT_VERSION, flags, driverStatus);
}

RT_API cudaError_t CUDARTAPI cudaGetDriverEntryPointByVersion(
	const char *symbol, void **funcPtr, unsigned int cudaVersion,
	unsigned long long flags,
	enum cudaDriverEntryPointQueryResult *driverStatus)
{
	return entry_point(symbol, funcPtr, cudaVersion, flags, driverStatus);
}

RT_API cudaError_t CUDARTAPI cudaGetDriverEntryPointByVersion_ptsz(
	const char *symbol, void **funcPtr, unsigned int cudaVersion,
	unsigned long long flags,
	enum cudaDriverEntryPointQueryResult *driverStatus)
{
	if (!(flags & (cudaEnableLegacyStream | cudaEnablePerThreadDefaultStream)))
		flags |= cudaEnablePerThreadDefaultStream;
	return entry_point(symbol, funcPtr, cudaVersion, flags, driverStatus);
}
