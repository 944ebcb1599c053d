// SPDX-License-Identifier: MIT
/*
 * The driver's own resolvers.  cuGetProcAddress honours the requested
 * CUDA version and the per-thread default-stream flag, so we let the real
 * resolver choose and then swap in the wrapper of the entry point it
 * chose (resolver-first).  cudaGetDriverEntryPoint[ByVersion] is the same
 * one level up, for programs that link the runtime dynamically.
 */
#include <errno.h>

#include "hookrt.h"
#include "platform/platform.h"
#include "init.h"
#include "substitute.h"

#undef cuGetProcAddress
#undef cuGetProcAddress_v2
#undef cudaGetDriverEntryPoint
#undef cudaGetDriverEntryPointByVersion

typedef CUresult (*gpa_v2_fn)(const char *, void **, int, cuuint64_t,
			      CUdriverProcAddressQueryResult *);
typedef CUresult (*gpa_fn)(const char *, void **, int, cuuint64_t);
typedef cudaError_t (*dep_fn)(const char *, void **, unsigned long long,
			      enum cudaDriverEntryPointQueryResult *);
typedef cudaError_t (*depv_fn)(const char *, void **, unsigned int,
			       unsigned long long,
			       enum cudaDriverEntryPointQueryResult *);

static void fix_up(const char *symbol, void **pfn, const char *route)
{
	int saved = errno;

	if (pfn && *pfn && symbol && gh_active())
		*pfn = gh_substitute(symbol, *pfn, route);
	errno = saved;
}

CUresult gh_manual_cuGetProcAddress_v2(const char *symbol, void **pfn,
				       int cudaVersion, cuuint64_t flags,
				       CUdriverProcAddressQueryResult *status)
{
	gpa_v2_fn real = (gpa_v2_fn)gh_real_get(GH_SYM_cuGetProcAddress_v2);
	CUresult rc;

	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	rc = real(symbol, pfn, cudaVersion, flags, status);
	if (rc == CUDA_SUCCESS)
		fix_up(symbol, pfn, "cuGetProcAddress_v2");
	return rc;
}

CUresult gh_manual_cuGetProcAddress(const char *symbol, void **pfn,
				    int cudaVersion, cuuint64_t flags)
{
	gpa_fn real = (gpa_fn)gh_real_get(GH_SYM_cuGetProcAddress);
	CUresult rc;

	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	rc = real(symbol, pfn, cudaVersion, flags);
	if (rc == CUDA_SUCCESS)
		fix_up(symbol, pfn, "cuGetProcAddress");
	return rc;
}

cudaError_t gh_manual_cudaGetDriverEntryPoint(
	const char *symbol, void **funcPtr, unsigned long long flags,
	enum cudaDriverEntryPointQueryResult *driverStatus)
{
	dep_fn real = (dep_fn)gh_real_get_for(GH_SYM_cudaGetDriverEntryPoint,
					      __builtin_return_address(0));
	cudaError_t rc;

	if (!real)
		return cudaErrorInitializationError;
	rc = real(symbol, funcPtr, flags, driverStatus);
	if (rc == cudaSuccess)
		fix_up(symbol, funcPtr, "cudaGetDriverEntryPoint");
	return rc;
}

cudaError_t gh_manual_cudaGetDriverEntryPointByVersion(
	const char *symbol, void **funcPtr, unsigned int cudaVersion,
	unsigned long long flags,
	enum cudaDriverEntryPointQueryResult *driverStatus)
{
	depv_fn real = (depv_fn)gh_real_get_for(
		GH_SYM_cudaGetDriverEntryPointByVersion,
		__builtin_return_address(0));
	cudaError_t rc;

	if (!real)
		return cudaErrorInitializationError;
	rc = real(symbol, funcPtr, cudaVersion, flags, driverStatus);
	if (rc == cudaSuccess)
		fix_up(symbol, funcPtr, "cudaGetDriverEntryPointByVersion");
	return rc;
}

GH_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn,
				       int cudaVersion, cuuint64_t flags,
				       CUdriverProcAddressQueryResult *status)
	__attribute__((alias("gh_manual_cuGetProcAddress_v2")));
GH_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn,
				    int cudaVersion, cuuint64_t flags)
	__attribute__((alias("gh_manual_cuGetProcAddress")));
GH_EXPORT cudaError_t cudaGetDriverEntryPoint(
	const char *symbol, void **funcPtr, unsigned long long flags,
	enum cudaDriverEntryPointQueryResult *driverStatus)
	__attribute__((alias("gh_manual_cudaGetDriverEntryPoint")));
GH_EXPORT cudaError_t cudaGetDriverEntryPointByVersion(
	const char *symbol, void **funcPtr, unsigned int cudaVersion,
	unsigned long long flags,
	enum cudaDriverEntryPointQueryResult *driverStatus)
	__attribute__((alias("gh_manual_cudaGetDriverEntryPointByVersion")));
