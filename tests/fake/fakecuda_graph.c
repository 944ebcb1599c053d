/* SPDX-License-Identifier: MIT */
/*
 * Fake CUDA driver: graph memory nodes and stream capture.
 *
 * Only what memory needs: a graph is a list of alloc and free nodes
 * (explicit, or captured from cuMemAllocAsync/cuMemFreeAsync on a
 * capturing stream); there are no kernels.  As on the real driver, an
 * alloc node's address is fixed when the node is made (its VA is reserved
 * then, unbacked; an address freed earlier in the same graph is reused), the memory is backed only from a launch until a free
 * node runs or the program frees it, and a relaunch while it is still
 * allocated fails unless the graph was instantiated with
 * AUTO_FREE_ON_LAUNCH.  Work is synchronous: a launch runs every node.
 * Destroying the graph or its instance leaves unfreed allocations live;
 * an instance outlives its graph.
 */
#include "fakecuda_internal.h"
#include "fakecuda.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define FC_GRAPH_MAGIC 0x66477270u
#define FC_EXEC_MAGIC 0x66457863u
#define FC_GRAPH_NODES 64

struct fc_gnode {
	int is_free;
	uintptr_t va;
	size_t size, span;
	int dev;
};

struct CUgraph_st {
	uint32_t magic;
	int n;
	struct fc_gnode node[FC_GRAPH_NODES];
	/* VA freed by a free node of this graph: later alloc nodes of the
	 * same span reuse it, as the real driver does */
	int nreuse;
	struct { uintptr_t va; size_t span; } reuse[FC_GRAPH_NODES];
};

/* An instance holds its own copy of the nodes, as on the real driver: it
 * stays launchable after its graph is destroyed (PyTorch destroys the
 * graph right after instantiating it). */
struct CUgraphExec_st {
	uint32_t magic;
	int n;
	struct fc_gnode node[FC_GRAPH_NODES];
	unsigned long long flags;
};

static int graph_ok(CUgraph g)
{
	return g && g->magic == FC_GRAPH_MAGIC;
}

static int exec_ok(CUgraphExec e)
{
	return e && e->magic == FC_EXEC_MAGIC;
}

/* Needs the lock. */
static CUresult add_alloc(CUgraph g, int dev, size_t size, uintptr_t *va)
{
	struct fc_gnode *n;
	CUresult rc;

	if (g->n >= FC_GRAPH_NODES)
		return CUDA_ERROR_OUT_OF_MEMORY;
	n = &g->node[g->n];
	n->span = fc_round_up(size, FC_GRAN);
	n->va = 0;
	for (int i = 0; i < g->nreuse; i++) {
		if (g->reuse[i].span == n->span) {
			n->va = g->reuse[i].va;
			g->reuse[i] = g->reuse[--g->nreuse];
			break;
		}
	}
	if (!n->va) {
		rc = fc_dev_take_va(dev, n->span, &n->va);
		if (rc)
			return rc;
	}
	n->is_free = 0;
	n->size = size;
	n->dev = dev;
	g->n++;
	*va = n->va;
	return CUDA_SUCCESS;
}

static CUresult add_free(CUgraph g, uintptr_t va)
{
	if (g->n >= FC_GRAPH_NODES)
		return CUDA_ERROR_OUT_OF_MEMORY;
	for (int i = g->n - 1; i >= 0; i--) {
		if (g->node[i].va != va)
			continue;
		if (!g->node[i].is_free)
			g->reuse[g->nreuse++] = (typeof(g->reuse[0])){
				va, g->node[i].span };
		break;
	}
	memset(&g->node[g->n], 0, sizeof(g->node[0]));
	g->node[g->n].is_free = 1;
	g->node[g->n].va = va;
	g->n++;
	return CUDA_SUCCESS;
}

/* Needs the lock: the graph @s is capturing, or NULL. */
CUgraph fc_capturing(CUstream s)
{
	if (!s || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD)
		return NULL;
	return s->capture;
}

CUresult fc_graph_capture_alloc(CUgraph g, CUcontext ctx, size_t size,
				CUdeviceptr *dptr)
{
	uintptr_t va;
	CUresult rc;

	if (!size)
		return CUDA_ERROR_INVALID_VALUE;
	rc = add_alloc(g, ctx->dev, size, &va);
	if (!rc)
		*dptr = va;
	return rc;
}

CUresult fc_graph_capture_free(CUgraph g, uintptr_t va)
{
	return add_free(g, va);
}

FC_API CUresult CUDAAPI cuStreamBeginCapture_v2(CUstream hStream,
						CUstreamCaptureMode mode)
{
	CUresult rc = CUDA_SUCCESS;
	CUgraph g;

	FC_ENTER_INIT();
	fc_lock();
	if (!hStream || hStream == CU_STREAM_LEGACY ||
	    hStream == CU_STREAM_PER_THREAD || !fc_stream_ok(hStream)) {
		rc = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
		goto out;
	}
	if (hStream->capture) {
		rc = CUDA_ERROR_ILLEGAL_STATE;
		goto out;
	}
	g = calloc(1, sizeof(*g));
	if (!g) {
		rc = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	g->magic = FC_GRAPH_MAGIC;
	hStream->capture = g;
out:
	fc_unlock();
	return rc;
}

FC_API CUresult CUDAAPI cuStreamEndCapture(CUstream hStream, CUgraph *phGraph)
{
	CUresult rc = CUDA_SUCCESS;

	FC_ENTER_INIT();
	fc_lock();
	if (!fc_stream_ok(hStream) || !fc_capturing(hStream)) {
		rc = CUDA_ERROR_ILLEGAL_STATE;
		goto out;
	}
	if (!phGraph) {
		rc = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	*phGraph = hStream->capture;
	hStream->capture = NULL;
out:
	fc_unlock();
	return rc;
}

FC_API CUresult CUDAAPI cuStreamGetCaptureInfo_v3(CUstream hStream,
		CUstreamCaptureStatus *captureStatus_out, cuuint64_t *id_out,
		CUgraph *graph_out, const CUgraphNode **dependencies_out,
		const CUgraphEdgeData **edgeData_out, size_t *numDependencies_out)
{
	CUgraph g;

	FC_ENTER_INIT();
	if (!captureStatus_out)
		return CUDA_ERROR_INVALID_VALUE;
	fc_lock();
	if (!fc_stream_ok(hStream)) {
		fc_unlock();
		return CUDA_ERROR_INVALID_HANDLE;
	}
	g = fc_capturing(hStream);
	fc_unlock();
	*captureStatus_out = g ? CU_STREAM_CAPTURE_STATUS_ACTIVE :
				 CU_STREAM_CAPTURE_STATUS_NONE;
	if (id_out)
		*id_out = (cuuint64_t)(uintptr_t)g;
	if (graph_out && g)
		*graph_out = g;
	if (dependencies_out && g)
		*dependencies_out = NULL;
	if (edgeData_out && g)
		*edgeData_out = NULL;
	if (numDependencies_out && g)
		*numDependencies_out = 0;
	return CUDA_SUCCESS;
}

FC_API CUresult CUDAAPI cuGraphCreate(CUgraph *phGraph, unsigned int flags)
{
	CUgraph g;

	FC_ENTER_INIT();
	if (!phGraph || flags)
		return CUDA_ERROR_INVALID_VALUE;
	g = calloc(1, sizeof(*g));
	if (!g)
		return CUDA_ERROR_OUT_OF_MEMORY;
	g->magic = FC_GRAPH_MAGIC;
	*phGraph = g;
	return CUDA_SUCCESS;
}

/* Node handles: index + 1 in the graph (never dereferenced). */
static void node_out(CUgraphNode *ph, int idx)
{
	if (ph)
		*ph = (CUgraphNode)(uintptr_t)(idx + 1);
}

FC_API CUresult CUDAAPI cuGraphAddMemAllocNode(CUgraphNode *phGraphNode,
		CUgraph hGraph, const CUgraphNode *dependencies,
		size_t numDependencies, CUDA_MEM_ALLOC_NODE_PARAMS *nodeParams)
{
	uintptr_t va;
	CUresult rc;
	int dev;

	FC_ENTER_INIT();
	if (!phGraphNode || !nodeParams || !nodeParams->bytesize)
		return CUDA_ERROR_INVALID_VALUE;
	dev = nodeParams->poolProps.location.id;
	fc_lock();
	if (!graph_ok(hGraph) || dev < 0 || dev >= fc.ndev ||
	    nodeParams->poolProps.location.type != CU_MEM_LOCATION_TYPE_DEVICE) {
		rc = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	rc = add_alloc(hGraph, dev, nodeParams->bytesize, &va);
	if (rc)
		goto out;
	nodeParams->dptr = va;
	node_out(phGraphNode, hGraph->n - 1);
out:
	fc_unlock();
	return rc;
}

FC_API CUresult CUDAAPI cuGraphAddMemFreeNode(CUgraphNode *phGraphNode,
		CUgraph hGraph, const CUgraphNode *dependencies,
		size_t numDependencies, CUdeviceptr dptr)
{
	CUresult rc;

	FC_ENTER_INIT();
	if (!phGraphNode || !dptr)
		return CUDA_ERROR_INVALID_VALUE;
	fc_lock();
	if (!graph_ok(hGraph)) {
		rc = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	rc = add_free(hGraph, dptr);
	if (!rc)
		node_out(phGraphNode, hGraph->n - 1);
out:
	fc_unlock();
	return rc;
}

static CUresult instantiate(CUgraphExec *pe, CUgraph g,
			    unsigned long long flags)
{
	CUgraphExec e;

	if (!pe || (flags & ~(unsigned long long)
		    (CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH |
		     CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD |
		     CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH |
		     CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY)))
		return CUDA_ERROR_INVALID_VALUE;
	e = calloc(1, sizeof(*e));
	if (!e)
		return CUDA_ERROR_OUT_OF_MEMORY;
	fc_lock();
	if (!graph_ok(g)) {
		fc_unlock();
		free(e);
		return CUDA_ERROR_INVALID_VALUE;
	}
	e->n = g->n;
	memcpy(e->node, g->node, sizeof(e->node));
	fc_unlock();
	e->magic = FC_EXEC_MAGIC;
	e->flags = flags;
	*pe = e;
	return CUDA_SUCCESS;
}

FC_API CUresult CUDAAPI cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec,
		CUgraph hGraph, unsigned long long flags)
{
	FC_ENTER_INIT();
	return instantiate(phGraphExec, hGraph, flags);
}

/* CUDA 10.0 and 11.0 ABI: no flags. */
FC_API CUresult CUDAAPI cuGraphInstantiate(CUgraphExec *phGraphExec,
		CUgraph hGraph, CUgraphNode *phErrorNode, char *logBuffer,
		size_t bufferSize)
{
	FC_ENTER_INIT();
	return instantiate(phGraphExec, hGraph, 0);
}

FC_API CUresult CUDAAPI cuGraphInstantiate_v2(CUgraphExec *phGraphExec,
		CUgraph hGraph, CUgraphNode *phErrorNode, char *logBuffer,
		size_t bufferSize)
{
	FC_ENTER_INIT();
	return instantiate(phGraphExec, hGraph, 0);
}

static CUresult instantiate_params(CUgraphExec *pe, CUgraph g,
				   CUDA_GRAPH_INSTANTIATE_PARAMS *p)
{
	CUresult rc;

	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	rc = instantiate(pe, g, p->flags);
	p->result_out = rc ? CUDA_GRAPH_INSTANTIATE_ERROR :
			     CUDA_GRAPH_INSTANTIATE_SUCCESS;
	p->hErrNode_out = NULL;
	return rc;
}

FC_API CUresult CUDAAPI cuGraphInstantiateWithParams(CUgraphExec *phGraphExec,
		CUgraph hGraph, CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
	FC_ENTER_INIT();
	return instantiate_params(phGraphExec, hGraph, instantiateParams);
}

FC_API CUresult CUDAAPI cuGraphInstantiateWithParams_ptsz(
		CUgraphExec *phGraphExec, CUgraph hGraph,
		CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
	FC_ENTER_INIT();
	return instantiate_params(phGraphExec, hGraph, instantiateParams);
}

/* Back node @n's memory: a fresh allocation record at its fixed VA. */
static CUresult back(struct fc_gnode *n, CUcontext ctx)
{
	struct fc_dev *D = &fc.dev[n->dev];
	struct fc_alloc *a;

	if (mmap((void *)n->va, n->span, PROT_READ | PROT_WRITE,
		 MAP_SHARED | MAP_FIXED, D->memfd, n->va - D->lo) == MAP_FAILED)
		return CUDA_ERROR_OUT_OF_MEMORY;
	a = fc_reg_add(FC_K_GRAPH, n->va, n->size, n->dev, ctx);
	if (!a) {
		fc_unmap_to_reserved(n->va, n->span);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	a->span_base = n->va;
	a->span = n->span;
	return CUDA_SUCCESS;
}

static CUresult launch(CUgraphExec e, CUstream s)
{
	CUresult rc = CUDA_SUCCESS;
	struct fc_alloc *a;
	CUcontext ctx;

	fc_lock();
	if (!exec_ok(e) || !fc_stream_ok(s)) {
		rc = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	rc = fc_current_ctx(&ctx);
	if (rc)
		goto out;
	/* Every alloc node must be free (or freed for us) before launch. */
	for (int i = 0; i < e->n; i++) {
		a = fc_find(e->node[i].va);
		if (e->node[i].is_free || !a)
			continue;
		if (!(e->flags & CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH)) {
			rc = CUDA_ERROR_INVALID_VALUE;
			goto out;
		}
	}
	for (int i = 0; i < e->n; i++) {
		struct fc_gnode *n = &e->node[i];

		a = fc_find(n->va);
		if (n->is_free) {
			if (a && a->base == n->va)
				fc_release_alloc(a);
			continue;
		}
		if (a)
			fc_release_alloc(a);	/* auto free on launch */
		rc = back(n, ctx);
		if (rc)
			goto out;
	}
out:
	fc_unlock();
	return rc;
}

FC_API CUresult CUDAAPI cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
	FC_ENTER_INIT();
	return launch(hGraphExec, hStream);
}

FC_API CUresult CUDAAPI cuGraphLaunch_ptsz(CUgraphExec hGraphExec,
					   CUstream hStream)
{
	FC_ENTER_INIT();
	return launch(hGraphExec, hStream);
}

FC_API CUresult CUDAAPI cuGraphUpload(CUgraphExec hGraphExec, CUstream hStream)
{
	FC_ENTER_INIT();
	return exec_ok(hGraphExec) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

FC_API CUresult CUDAAPI cuGraphUpload_ptsz(CUgraphExec hGraphExec,
					   CUstream hStream)
{
	FC_ENTER_INIT();
	return exec_ok(hGraphExec) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

FC_API CUresult CUDAAPI cuGraphExecDestroy(CUgraphExec hGraphExec)
{
	FC_ENTER_INIT();
	if (!exec_ok(hGraphExec))
		return CUDA_ERROR_INVALID_VALUE;
	hGraphExec->magic = 0;
	free(hGraphExec);
	return CUDA_SUCCESS;
}

/* Unfreed allocations stay live (and keep their VA); the rest is kept
 * reserved too: the fake never reuses graph addresses. */
FC_API CUresult CUDAAPI cuGraphDestroy(CUgraph hGraph)
{
	FC_ENTER_INIT();
	fc_lock();
	if (!graph_ok(hGraph)) {
		fc_unlock();
		return CUDA_ERROR_INVALID_VALUE;
	}
	hGraph->magic = 0;
	fc_unlock();
	free(hGraph);
	return CUDA_SUCCESS;
}

/* Physical memory not in use goes back; live allocations are untouched
 * (the fake holds none beyond them). */
FC_API CUresult CUDAAPI cuDeviceGraphMemTrim(CUdevice device)
{
	FC_ENTER_INIT();
	return device >= 0 && device < fc.ndev ? CUDA_SUCCESS :
						 CUDA_ERROR_INVALID_DEVICE;
}
