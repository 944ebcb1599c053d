// SPDX-License-Identifier: MIT
/*
 * drvcount: counts the calls that reach the CUDA driver, per entry point,
 * for the entry points a communication library classifies message
 * buffers with (and the ones around them).  Nothing else changes: each
 * wrapper adds one to its counter and calls the next definition
 * (dlsym(RTLD_NEXT), which gdrhook passes through untouched).
 *
 * Without gdrhook: LD_PRELOAD=libdrvcount.so counts what the program
 * calls.  With it: LD_PRELOAD="libgdrhook.so libdrvcount.so" and
 * GDRHOOK_LIBCUDA=<this file's path>: gdrhook resolves the driver it
 * forwards to from this library (which needs libcuda.so.1, so the rest
 * of the driver is found through it), and the entry points gdrhook does
 * not wrap bind here, so only what reaches the driver is counted.
 *
 * Read in-process with drvcount_count(), drvcount_name(i) and
 * drvcount_read(i) (found with dlsym; tests/bench/bench_mpi.c), and at
 * exit on stderr with DRVCOUNT=1.  Entry points resolved through
 * dlsym on a libcuda handle or cuGetProcAddress bypass it: an MPI that
 * links libcuda (Open MPI 5) is counted, a dlopen'ing one is not.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <cuda.h>

/*
 * D(name, (parameters), (arguments)): each wrapper.  The names are the
 * symbols libcuda exports (cuda.h's macros map the unsuffixed ones).
 */
#define DRVCOUNT_LIST \
	D(cuPointerGetAttribute, (void *d, CUpointer_attribute a, CUdeviceptr p), (d, a, p)) \
	D(cuPointerGetAttributes, (unsigned int n, CUpointer_attribute *a, void **d, CUdeviceptr p), (n, a, d, p)) \
	D(cuMemGetAddressRange_v2, (CUdeviceptr *b, size_t *s, CUdeviceptr p), (b, s, p)) \
	D(cuMemRetainAllocationHandle, (CUmemGenericAllocationHandle *h, void *p), (h, p)) \
	D(cuMemGetAllocationPropertiesFromHandle, (CUmemAllocationProp *pr, CUmemGenericAllocationHandle h), (pr, h)) \
	D(cuMemRelease, (CUmemGenericAllocationHandle h), (h)) \
	D(cuMemGetAccess, (unsigned long long *f, const CUmemLocation *l, CUdeviceptr p), (f, l, p)) \
	D(cuMemPoolGetAccess, (CUmemAccess_flags *f, CUmemoryPool m, CUmemLocation *l), (f, m, l)) \
	D(cuCtxGetCurrent, (CUcontext *c), (c)) \
	D(cuCtxSetCurrent, (CUcontext c), (c)) \
	D(cuCtxPushCurrent_v2, (CUcontext c), (c)) \
	D(cuCtxPopCurrent_v2, (CUcontext *c), (c)) \
	D(cuCtxGetDevice, (CUdevice *d), (d)) \
	D(cuDeviceGet, (CUdevice *d, int o), (d, o)) \
	D(cuDeviceGetCount, (int *n), (n)) \
	D(cuDeviceGetAttribute, (int *v, CUdevice_attribute a, CUdevice d), (v, a, d)) \
	D(cuMemcpy, (CUdeviceptr d, CUdeviceptr s, size_t n), (d, s, n)) \
	D(cuMemcpyAsync, (CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st), (d, s, n, st)) \
	D(cuStreamSynchronize, (CUstream s), (s)) \
	D(cuEventRecord, (CUevent e, CUstream s), (e, s)) \
	D(cuEventQuery, (CUevent e), (e)) \
	D(cuStreamWaitEvent, (CUstream s, CUevent e, unsigned int f), (s, e, f)) \
	D(cuIpcGetMemHandle, (CUipcMemHandle *h, CUdeviceptr p), (h, p)) \
	D(cuIpcOpenMemHandle_v2, (CUdeviceptr *p, CUipcMemHandle h, unsigned int f), (p, h, f)) \
	D(cuIpcOpenEventHandle, (CUevent *e, CUipcEventHandle h), (e, h)) \
	D(cuEventCreate, (CUevent *e, unsigned int f), (e, f)) \
	D(cuEventDestroy_v2, (CUevent e), (e))

enum {
#define D(name, params, args) DC_##name,
	DRVCOUNT_LIST
#undef D
	DC_N
};

static const char *const names[DC_N] = {
#define D(name, params, args) #name,
	DRVCOUNT_LIST
#undef D
};

static uint64_t counts[DC_N];

int drvcount_count(void);
const char *drvcount_name(int i);
uint64_t drvcount_read(int i);

int drvcount_count(void)
{
	return DC_N;
}

const char *drvcount_name(int i)
{
	return i >= 0 && i < DC_N ? names[i] : NULL;
}

uint64_t drvcount_read(int i)
{
	return i >= 0 && i < DC_N ?
	       __atomic_load_n(&counts[i], __ATOMIC_RELAXED) : 0;
}

/* The next definition of @name; a missing one is fatal (a driver too old). */
static void *next(const char *name)
{
	void *p = dlsym(RTLD_NEXT, name);

	if (!p) {
		fprintf(stderr, "drvcount: no %s after this library\n", name);
		abort();
	}
	return p;
}

#define D(name, params, args)						\
	CUresult name params;						\
	CUresult name params						\
	{								\
		static CUresult (*real_) params;			\
		CUresult (*fn_) params = __atomic_load_n(&real_,	\
						 __ATOMIC_ACQUIRE);	\
									\
		if (!fn_) {						\
			*(void **)&fn_ = next(#name);			\
			__atomic_store_n(&real_, fn_, __ATOMIC_RELEASE);\
		}							\
		__atomic_add_fetch(&counts[DC_##name], 1,		\
				   __ATOMIC_RELAXED);			\
		return fn_ args;					\
	}
#undef cuPointerGetAttribute
#undef cuPointerGetAttributes
DRVCOUNT_LIST
#undef D

__attribute__((destructor)) static void drvcount_report(void)
{
	const char *e = getenv("DRVCOUNT");

	if (!e || *e != '1')
		return;
	for (int i = 0; i < DC_N; i++)
		if (counts[i])
			fprintf(stderr, "drvcount[%d]: %s %llu\n", (int)getpid(),
				names[i], (unsigned long long)counts[i]);
}
