// SPDX-License-Identifier: MIT
/*
 * What a resolver hands out (src/hooks/substitute.c), under LD_PRELOAD
 * against the driver test double: for every memory entry point the
 * double's cuGetProcAddress knows, at every version and per-thread flag,
 * the wrapper of exactly the entry point the resolver chose; an
 * allocation or free entry point with no wrapper, or a second real
 * function for a name already resolved (a second driver), is handed out
 * as it is and makes the registry untrusted, saying why.
 */
#include <cuda.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "roundtrip.h"

struct row {
	const char *base;
	int version, per_thread;
	const char *want;	/* the entry point the resolver picks */
};

/* The double's table (tests/fake/gen-gpa.py) for the names gdrhook wraps. */
static const struct row rows[] = {
	{ "cuCtxDestroy", 2000, 0, "cuCtxDestroy" },
	{ "cuCtxDestroy", 4000, 0, "cuCtxDestroy_v2" },
	{ "cuDevicePrimaryCtxRelease", 7000, 0, "cuDevicePrimaryCtxRelease" },
	{ "cuDevicePrimaryCtxRelease", 11000, 0, "cuDevicePrimaryCtxRelease_v2" },
	{ "cuDevicePrimaryCtxReset", 7000, 0, "cuDevicePrimaryCtxReset" },
	{ "cuDevicePrimaryCtxReset", 11000, 0, "cuDevicePrimaryCtxReset_v2" },
	{ "cuDevicePrimaryCtxRetain", 7000, 0, "cuDevicePrimaryCtxRetain" },
	{ "cuExternalMemoryGetMappedBuffer", 10000, 0, "cuExternalMemoryGetMappedBuffer" },
	{ "cuGraphAddMemAllocNode", 11040, 0, "cuGraphAddMemAllocNode" },
	{ "cuGraphAddMemFreeNode", 11040, 0, "cuGraphAddMemFreeNode" },
	{ "cuGraphAddNode", 12020, 0, "cuGraphAddNode" },
	{ "cuGraphAddNode", 12030, 0, "cuGraphAddNode_v2" },
	{ "cuGraphDestroy", 10000, 0, "cuGraphDestroy" },
	{ "cuGraphDestroyNode", 10000, 0, "cuGraphDestroyNode" },
	{ "cuGraphExecDestroy", 10000, 0, "cuGraphExecDestroy" },
	{ "cuGraphExecUpdate", 10020, 0, "cuGraphExecUpdate" },
	{ "cuGraphExecUpdate", 12000, 0, "cuGraphExecUpdate_v2" },
	{ "cuGraphInstantiate", 10000, 0, "cuGraphInstantiate" },
	{ "cuGraphInstantiate", 11000, 0, "cuGraphInstantiate_v2" },
	{ "cuGraphInstantiateWithFlags", 11040, 0, "cuGraphInstantiateWithFlags" },
	{ "cuGraphInstantiateWithParams", 12000, 0, "cuGraphInstantiateWithParams" },
	{ "cuGraphInstantiateWithParams", 12000, 1, "cuGraphInstantiateWithParams_ptsz" },
	{ "cuGraphLaunch", 10000, 0, "cuGraphLaunch" },
	{ "cuGraphLaunch", 10000, 1, "cuGraphLaunch_ptsz" },
	{ "cuGraphicsResourceGetMappedPointer", 3020, 0, "cuGraphicsResourceGetMappedPointer_v2" },
	{ "cuIpcCloseMemHandle", 4010, 0, "cuIpcCloseMemHandle" },
	{ "cuIpcOpenMemHandle", 4010, 0, "cuIpcOpenMemHandle" },
	{ "cuIpcOpenMemHandle", 11000, 0, "cuIpcOpenMemHandle_v2" },
	{ "cuLibraryGetGlobal", 12000, 0, "cuLibraryGetGlobal" },
	{ "cuLibraryGetManaged", 12000, 0, "cuLibraryGetManaged" },
	{ "cuLibraryUnload", 12000, 0, "cuLibraryUnload" },
	{ "cuMemAddressFree", 10020, 0, "cuMemAddressFree" },
	{ "cuMemAlloc", 2000, 0, "cuMemAlloc" },
	{ "cuMemAlloc", 3020, 0, "cuMemAlloc_v2" },
	{ "cuMemAllocAsync", 11020, 0, "cuMemAllocAsync" },
	{ "cuMemAllocAsync", 11020, 1, "cuMemAllocAsync_ptsz" },
	{ "cuMemAllocFromPoolAsync", 11020, 0, "cuMemAllocFromPoolAsync" },
	{ "cuMemAllocFromPoolAsync", 11020, 1, "cuMemAllocFromPoolAsync_ptsz" },
	{ "cuMemAllocHost", 2000, 0, "cuMemAllocHost" },
	{ "cuMemAllocHost", 3020, 0, "cuMemAllocHost_v2" },
	{ "cuMemAllocManaged", 6000, 0, "cuMemAllocManaged" },
	{ "cuMemAllocPitch", 2000, 0, "cuMemAllocPitch" },
	{ "cuMemAllocPitch", 3020, 0, "cuMemAllocPitch_v2" },
	{ "cuMemFree", 2000, 0, "cuMemFree" },
	{ "cuMemFree", 3020, 0, "cuMemFree_v2" },
	{ "cuMemFreeAsync", 11020, 0, "cuMemFreeAsync" },
	{ "cuMemFreeAsync", 11020, 1, "cuMemFreeAsync_ptsz" },
	{ "cuMemFreeHost", 2000, 0, "cuMemFreeHost" },
	{ "cuMemGetHandleForAddressRange", 11070, 0, "cuMemGetHandleForAddressRange" },
	{ "cuMemHostAlloc", 2020, 0, "cuMemHostAlloc" },
	{ "cuMemHostGetDevicePointer", 3020, 0, "cuMemHostGetDevicePointer_v2" },
	{ "cuMemHostRegister", 4000, 0, "cuMemHostRegister" },
	{ "cuMemHostRegister", 6050, 0, "cuMemHostRegister_v2" },
	{ "cuMemHostUnregister", 4000, 0, "cuMemHostUnregister" },
	{ "cuMemMap", 10020, 0, "cuMemMap" },
	{ "cuMemMapArrayAsync", 11010, 0, "cuMemMapArrayAsync" },
	{ "cuMemMapArrayAsync", 11010, 1, "cuMemMapArrayAsync_ptsz" },
	{ "cuMemPoolDestroy", 11020, 0, "cuMemPoolDestroy" },
	{ "cuMemPoolImportPointer", 11020, 0, "cuMemPoolImportPointer" },
	{ "cuMemPoolTrimTo", 11020, 0, "cuMemPoolTrimTo" },
	{ "cuMemUnmap", 10020, 0, "cuMemUnmap" },
	{ "cuModuleGetGlobal", 2000, 0, "cuModuleGetGlobal" },
	{ "cuModuleGetGlobal", 3020, 0, "cuModuleGetGlobal_v2" },
	{ "cuModuleUnload", 2000, 0, "cuModuleUnload" },
	{ "cuMulticastBindAddr", 12010, 0, "cuMulticastBindAddr" },
	{ "cuMulticastBindMem", 12010, 0, "cuMulticastBindMem" },
	{ "cuStreamBeginCapture", 10000, 0, "cuStreamBeginCapture" },
	{ "cuStreamBeginCapture", 10000, 1, "cuStreamBeginCapture_ptsz" },
	{ "cuStreamBeginCapture", 10010, 0, "cuStreamBeginCapture_v2" },
	{ "cuStreamBeginCapture", 10010, 1, "cuStreamBeginCapture_v2_ptsz" },
	{ "cuStreamBeginCaptureToGraph", 12030, 0, "cuStreamBeginCaptureToGraph" },
	{ "cuStreamBeginCaptureToGraph", 12030, 1, "cuStreamBeginCaptureToGraph_ptsz" },
};

TEST(every_version_and_flag_gets_the_wrapper_of_what_the_resolver_chose)
{
	CUdriverProcAddressQueryResult st;

	CU_OK(cuInit(0));
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const struct row *r = &rows[i];
		void *p = NULL, *want = fake_sym(r->want);

		CU_OK(cuGetProcAddress_v2(r->base, &p, r->version,
			r->per_thread ?
			CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM :
			CU_GET_PROC_ADDRESS_DEFAULT, &st));
		if (!in_shim(p) || strcmp(sym_name(p), r->want))
			TH_FAIL("%s at %d%s: got %s (%p), want the wrapper %s",
				r->base, r->version,
				r->per_thread ? " per-thread" : "",
				sym_name(p), p, r->want);
		/* the one wrapper the name binds to */
		CHECK(p == want);
	}
	CHECK_EQ(gdrhook_trusted(), 1);
}

/* Untrusted events: the api named. */
static char untrusted_api[128];

static void on_untrusted(const struct gdrhook_event *ev, void *arg)
{
	snprintf(untrusted_api, sizeof(untrusted_api), "%s", ev->api);
	(void)arg;
}

/* Send stderr to a file of this case; returns its path in buf. */
static const char *err_to_file(char *buf, size_t cap, const char *tag)
{
	int fd;

	snprintf(buf, cap, "%s/gdrhook-test-%d-subst-%s",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid(),
		 tag);
	fd = open(buf, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	CHECK(fd >= 0);
	CHECK(dup2(fd, 2) == 2);
	close(fd);
	return buf;
}

/*
 * cuMemHostGetDevicePointer before CUDA 3.2 is an entry point gdrhook has
 * no wrapper for (only _v2): what it does to memory would go unseen.
 */
TEST(memory_entry_point_without_a_wrapper_marks_untrusted)
{
	CUdriverProcAddressQueryResult st;
	char err[256];
	void *p = NULL;

	err_to_file(err, sizeof(err), "nowrapper");
	CU_OK(cuInit(0));
	CHECK(gdrhook_subscribe(GDRHOOK_EVENT_UNTRUSTED, on_untrusted,
				NULL) >= 0);
	CU_OK(cuGetProcAddress_v2("cuMemHostGetDevicePointer", &p, 3000,
				  CU_GET_PROC_ADDRESS_DEFAULT, &st));
	CHECK(p && !in_shim(p));
	CHECK_STR(sym_name(p), "cuMemHostGetDevicePointer");
	CHECK_EQ(gdrhook_trusted(), 0);
	CHECK_STR(untrusted_api, "cuMemHostGetDevicePointer");
	CHECK_EQ(count_in_file(err, "resolved to an entry point with no wrapper"),
		 1);
	unlink(err);
}

/* A name that is not memory's, with or without a version suffix: as it
 * is, and the registry stays trusted. */
TEST(other_names_without_a_wrapper_stay_trusted)
{
	CUdriverProcAddressQueryResult st;
	void *p = NULL;

	CU_OK(cuInit(0));
	CU_OK(cuGetProcAddress_v2("cuCtxSynchronize", &p, 13000,
				  CU_GET_PROC_ADDRESS_DEFAULT, &st));
	CHECK(p && !in_shim(p));
	CU_OK(cuGetProcAddress_v2("cuStreamSynchronize", &p, 13000,
				  CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
				  &st));
	CHECK(p && !in_shim(p));
	CHECK_EQ(gdrhook_trusted(), 1);
}

/*
 * A second driver (a copy of the double, loaded RTLD_LOCAL beside the
 * first): its cuMemAlloc_v2 is another real function for a name whose
 * real gdrhook already holds.  Calls through a wrapper would reach the
 * first driver, so the copy's function is handed out as it is, and the
 * registry says it can no longer see everything.
 */
TEST(a_second_real_function_for_a_name_marks_untrusted)
{
	char copy[256], err[256], cmd[700];
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD), *h2, *p;
	Dl_info info;
	CUdeviceptr d;

	CHECK(h);
	CHECK(dladdr(dlsym(h, "cuInit"), &info) && info.dli_fname);
	snprintf(copy, sizeof(copy), "%s/gdrhook-test-%d-libcuda-copy.so",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid());
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", info.dli_fname, copy);
	CHECK_EQ(system(cmd), 0);
	/* the real cuMemAlloc_v2 is resolved: the first driver's */
	primary_ctx(0);
	CU_OK(cuMemAlloc_v2(&d, 4096));
	CHECK_EQ(gdrhook_trusted(), 1);
	err_to_file(err, sizeof(err), "tworeals");
	CHECK(gdrhook_subscribe(GDRHOOK_EVENT_UNTRUSTED, on_untrusted,
				NULL) >= 0);
	h2 = dlopen(copy, RTLD_NOW | RTLD_LOCAL);
	CHECK(h2 != NULL);
	p = dlsym(h2, "cuMemAlloc_v2");
	CHECK(p && !in_shim(p));
	CHECK(dladdr(p, &info) && strstr(info.dli_fname, "libcuda-copy"));
	CHECK_EQ(gdrhook_trusted(), 0);
	CHECK_STR(untrusted_api, "cuMemAlloc_v2");
	CHECK_EQ(count_in_file(err, "two different real functions for one name"),
		 1);
	/* the program's own calls still reach the first driver, tracked */
	CHECK_EQ(tracked(d, NULL), -ESTALE);
	CU_OK(cuMemFree_v2(d));
	unlink(err);
	unlink(copy);
}

TEST_MAIN()
