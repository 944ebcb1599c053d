// SPDX-License-Identifier: MIT
/*
 * Graph memory made through the runtime, the way torch.cuda.graph with
 * PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync makes it: capture on a
 * side stream (cudaMallocAsync for a temporary, the output, cudaFreeAsync
 * of the temporary), instantiate with AUTO_FREE_ON_LAUNCH, destroy the
 * graph at once (PyTorch keeps only the instance), replay 3 times, free
 * the output outside the graph.  Also through a cuMemAllocAsync the
 * program got from cudaGetDriverEntryPoint.  Each scenario runs under
 * GDRHOOK_VALIDATE=1: after every replay the registry must know the
 * outputs (BUFFER_ID from the registry, a new one each replay), with no
 * audit disagreement, no untracked free and a trusted registry.  And a
 * runtime call and the driver call it makes ask the driver once whether
 * the stream is capturing.
 */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <errno.h>

/* Not every helper of the shared header is used here. */
#pragma GCC diagnostic ignored "-Wunused-function"
#include "preload_util.h"

#define MIB (1u << 20)

typedef CUresult (*alloc_async_fn)(CUdeviceptr *, size_t, CUstream);
typedef CUresult (*free_async_fn)(CUdeviceptr, CUstream);

/* How the scenario allocates on the stream: runtime exports, or driver
 * entry points the program resolved through the runtime. */
struct route {
	alloc_async_fn alloc;
	free_async_fn free;
};

static int rt_alloc(const struct route *r, void **p, size_t size,
		    cudaStream_t s)
{
	if (!r->alloc)
		return cudaMallocAsync(p, size, s);
	return r->alloc((CUdeviceptr *)p, size, s);
}

static int rt_free(const struct route *r, void *p, cudaStream_t s)
{
	if (!r->free)
		return cudaFreeAsync(p, s);
	return r->free((CUdeviceptr)(uintptr_t)p, s);
}

/* The registry holds p as live graph memory of size bytes; its BUFFER_ID
 * comes from the registry (bit 63). */
static uint64_t live_graph(void *p, size_t size)
{
	struct gdrhook_range r;
	unsigned long long id = 0;

	CHECK_EQ(tracked((uintptr_t)p, &r), 0);
	CHECK_EQ(r.base, (uintptr_t)p);
	CHECK_EQ(r.size, size);
	CHECK_EQ(r.kind, GDRHOOK_KIND_GRAPH);
	CU_OK(cuPointerGetAttribute(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID,
				    (CUdeviceptr)(uintptr_t)p));
	CHECK(id >> 63);
	return id;
}

static int torch_like(const struct route *r)
{
	struct gdrhook_stats st = { .size = sizeof(st) };
	uint64_t last_y = 0, last_z = 0;
	void *warm, *tmp, *y, *z;
	cudaGraphExec_t e;
	cudaStream_t s;
	cudaGraph_t g;

	CHECK_EQ(cudaSetDevice(0), cudaSuccess);
	CHECK_EQ(cudaStreamCreate(&s), cudaSuccess);
	/* warm-up outside capture: an ordinary pool allocation */
	CHECK_EQ(rt_alloc(r, &warm, 4 * MIB, s), 0);
	CHECK_EQ(tracked((uintptr_t)warm, NULL), 0);
	CHECK_EQ(rt_free(r, warm, s), 0);
	CHECK_EQ(cudaStreamSynchronize(s), cudaSuccess);

	CHECK_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal),
		 cudaSuccess);
	CHECK_EQ(rt_alloc(r, &tmp, 4 * MIB, s), 0);	/* x * 2 */
	CHECK_EQ(rt_alloc(r, &y, 4 * MIB, s), 0);	/* relu(): kept */
	CHECK_EQ(rt_free(r, tmp, s), 0);
	CHECK_EQ(rt_alloc(r, &z, 4 * MIB, s), 0);	/* y + 1: output */
	CHECK_EQ(cudaStreamEndCapture(s, &g), cudaSuccess);
	CHECK_EQ(tracked((uintptr_t)y, NULL), -ENOENT);
	CHECK_EQ(tracked((uintptr_t)z, NULL), -ENOENT);

	CHECK_EQ(cudaGraphInstantiateWithFlags(
			 &e, g, cudaGraphInstantiateFlagAutoFreeOnLaunch),
		 cudaSuccess);
	CHECK_EQ(cudaGraphDestroy(g), cudaSuccess);
	for (int i = 0; i < 3; i++) {
		uint64_t id_y, id_z;

		CHECK_EQ(cudaGraphLaunch(e, s), cudaSuccess);
		CHECK_EQ(cudaStreamSynchronize(s), cudaSuccess);
		id_y = live_graph(y, 4 * MIB);
		id_z = live_graph(z, 4 * MIB);
		CHECK(id_y != last_y && id_z != last_z && id_y != id_z);
		last_y = id_y;
		last_z = id_z;
	}
	CHECK_EQ(rt_free(r, y, s), 0);
	CHECK_EQ(rt_free(r, z, s), 0);
	CHECK_EQ(cudaStreamSynchronize(s), cudaSuccess);
	CHECK_EQ(tracked((uintptr_t)y, NULL), -ENOENT);
	CHECK_EQ(tracked((uintptr_t)z, NULL), -ENOENT);
	CHECK_EQ(cudaGraphExecDestroy(e), cudaSuccess);
	CHECK_EQ(cudaStreamDestroy(s), cudaSuccess);

	CHECK_EQ(gdrhook_get_stats(&st), 0);
	CHECK(st.audit_checks > 0);
	CHECK_EQ(st.audit_disagreements, 0);
	CHECK_EQ(gdrhook_trusted(), 1);
	return 0;
}

static int scenario_runtime(void)
{
	struct route r = { NULL, NULL };

	return torch_like(&r);
}

static int scenario_entry_point(void)
{
	enum cudaDriverEntryPointQueryResult q;
	struct route r;
	void *a = NULL, *f = NULL;

	CHECK_EQ(cudaGetDriverEntryPointByVersion("cuMemAllocAsync", &a, 12000,
						  cudaEnableDefault, &q),
		 cudaSuccess);
	CHECK_EQ(cudaGetDriverEntryPointByVersion("cuMemFreeAsync", &f, 12000,
						  cudaEnableDefault, &q),
		 cudaSuccess);
	CHECK(a != NULL && f != NULL);
	r.alloc = (alloc_async_fn)a;
	r.free = (free_async_fn)f;
	return torch_like(&r);
}

/*
 * A capture begun through one driver entry point (GH_BEGIN names it, from
 * dlsym of libcuda), first in the process: an allocation on the
 * capturing stream is a graph node, not live memory.  A begin the shim
 * did not see would leave the capture query off and register it.
 */
static int scenario_begin(void)
{
	const char *sym = getenv("GH_BEGIN");
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	void *fn = h && sym ? dlsym(h, sym) : NULL;
	CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
	CUdeviceptr d;
	CUstream s;
	CUgraph g = NULL;

	CHECK(fn != NULL);
	primary_ctx(0);
	CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	if (strstr(sym, "ToGraph")) {
		CU_OK(cuGraphCreate(&g, 0));
		CU_OK(((CUresult (*)(CUstream, CUgraph, const CUgraphNode *,
				     const CUgraphEdgeData *, size_t,
				     CUstreamCaptureMode))fn)(s, g, NULL, NULL,
							      0, mode));
	} else if (strstr(sym, "_v2")) {
		CU_OK(((CUresult (*)(CUstream, CUstreamCaptureMode))fn)(s,
									mode));
	} else {
		CU_OK(((CUresult (*)(CUstream))fn)(s));
	}
	CU_OK(cuMemAllocAsync(&d, MIB, s));
	CHECK_EQ(tracked(d, NULL), -ENOENT);	/* a graph node */
	CU_OK(cuMemFreeAsync(d, s));
	{
		CUgraph out;

		CU_OK(cuStreamEndCapture(s, &out));
		CU_OK(cuGraphDestroy(out));
	}
	CHECK_EQ(gdrhook_trusted(), 1);
	return 0;
}

static const struct scenario scenarios[] = {
	{ "runtime", scenario_runtime },
	{ "entry_point", scenario_entry_point },
	{ "begin", scenario_begin },
};

/* Run scenario name under GDRHOOK_VALIDATE=1: no audit record, no
 * untracked free, nothing live at exit. */
static void validated(const char *name)
{
	char path[256], var[300];
	const char *env[] = { "GDRHOOK_VALIDATE=1", "GDRHOOK_LOG_LEVEL=error",
			      var, NULL };

	snprintf(var, sizeof(var), "GDRHOOK_TRACE=%s",
		 log_path(path, sizeof(path), name));
	CHECK_EQ(run_scenario(name, env), 0);
	CHECK_EQ(LOG_COUNT(path, "\"ev\":\"audit\""), 0);
	CHECK_EQ(LOG_COUNT(path, "\"tracked\":false"), 0);
	CHECK_EQ(LOG_COUNT(path, "\"ev\":\"alloc\"", "\"kind\":\"graph\""), 6);
	CHECK_EQ(LOG_COUNT(path, "\"ev\":\"exit\"", "\"live\":0"), 1);
	unlink(path);
}

TEST(torch_graph_through_runtime_exports)
{
	validated("runtime");
}

TEST(torch_graph_through_driver_entry_point)
{
	validated("entry_point");
}

/* A runtime call and the driver call inside it share one capture query
 * (and so one decision): allocations decide in the driver wrapper, frees
 * in the runtime wrapper.  Before the process's first capture begins no
 * stream can be capturing, and the driver is not asked at all; from then
 * on it is, also after the capture ended. */
TEST(one_capture_query_per_runtime_call)
{
	const char *q = "cuStreamGetCaptureInfo_v3";
	unsigned long before;
	cudaStream_t s;
	cudaGraph_t g;
	void *p, *t;

	CHECK_EQ(cudaSetDevice(0), cudaSuccess);
	/* the runtime loaded the driver locally: its test hooks need it global */
	CHECK(dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL));
	CHECK_EQ(cudaStreamCreate(&s), cudaSuccess);
	/* 0: before any capture; 1: capturing; 2: after it ended */
	for (int capture = 0; capture < 3; capture++) {
		unsigned long asked = capture > 0;

		if (capture == 1)
			CHECK_EQ(cudaStreamBeginCapture(
					 s, cudaStreamCaptureModeGlobal),
				 cudaSuccess);
		before = fake_calls(q);
		CHECK_EQ(cudaMallocAsync(&p, MIB, s), cudaSuccess);
		CHECK_EQ(fake_calls(q), before + asked);
		CHECK_EQ(cudaMallocAsync(&t, MIB, s), cudaSuccess);
		before = fake_calls(q);
		CHECK_EQ(cudaFreeAsync(t, s), cudaSuccess);
		CHECK_EQ(fake_calls(q), before + asked);
		if (capture == 1) {
			CHECK_EQ(cudaStreamEndCapture(s, &g), cudaSuccess);
			CHECK_EQ(cudaGraphDestroy(g), cudaSuccess);
			CHECK_EQ(tracked((uintptr_t)p, NULL), -ENOENT);
		} else {
			CHECK_EQ(tracked((uintptr_t)p, NULL), 0);
			CHECK_EQ(cudaFreeAsync(p, s), cudaSuccess);
		}
	}
	CHECK_EQ(gdrhook_trusted(), 1);
}


/* Every cuStreamBeginCapture* entry point turns the capture query on. */
TEST(each_capture_begin_turns_the_query_on)
{
	static const char *const syms[] = {
		"GH_BEGIN=cuStreamBeginCapture_v2",
		"GH_BEGIN=cuStreamBeginCapture_v2_ptsz",
		"GH_BEGIN=cuStreamBeginCapture",
		"GH_BEGIN=cuStreamBeginCapture_ptsz",
		"GH_BEGIN=cuStreamBeginCaptureToGraph",
		"GH_BEGIN=cuStreamBeginCaptureToGraph_ptsz",
	};

	for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
		const char *env[] = { syms[i], NULL };

		if (run_scenario("begin", env))
			TH_FAIL("%s", syms[i]);
	}
}

SCENARIO_MAIN(scenarios)
