// SPDX-License-Identifier: MIT
/*
 * A library that links the CUDA runtime (the double) and that
 * test_local_runtime dlopen()s with RTLD_LOCAL, as Python loads an
 * extension module: its runtime is then in no global scope, so gdrhook's
 * runtime wrappers, which its calls bind to, cannot find the runtime with
 * RTLD_NEXT.
 */
#include <cuda_runtime_api.h>

#include "fake/fakecuda.h"

int lr_malloc(void **p, size_t n);
int lr_free(void *p);
int lr_attrs(struct cudaPointerAttributes *a, const void *p);
int lr_entry_point(void **fn);
unsigned long lr_runtime_queries(void);

__attribute__((visibility("default"))) int lr_malloc(void **p, size_t n)
{
	return cudaMalloc(p, n);
}

__attribute__((visibility("default"))) int lr_free(void *p)
{
	return cudaFree(p);
}

__attribute__((visibility("default")))
int lr_attrs(struct cudaPointerAttributes *a, const void *p)
{
	return cudaPointerGetAttributes(a, p);
}

__attribute__((visibility("default"))) int lr_entry_point(void **fn)
{
	enum cudaDriverEntryPointQueryResult st;

	return cudaGetDriverEntryPointByVersion("cuMemAlloc", fn, 13000,
						cudaEnableDefault, &st);
}

__attribute__((visibility("default"))) unsigned long lr_runtime_queries(void)
{
	return cudaFakePointerQueries();
}
