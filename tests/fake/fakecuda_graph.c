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
 * an instance outlives its graph.  The generic cuGraphAddNode makes memory
 * nodes and child graph nodes (a child with memory nodes must be moved into
 * its parent); graphs with memory nodes cannot be cloned; an instance with
 * memory nodes cannot be updated (cuGraphExecUpdate); a graph with memory
 * nodes has at most one instance at a time (a second cuGraphInstantiate*
 * before cuGraphExecDestroy of the first: CUDA_ERROR_NOT_SUPPORTED, as
 * measured on the H100); other node types are not modelled
 * (CUDA_ERROR_NOT_SUPPORTED).
 */
#include "fakecuda_internal.h"
#include "fakecuda.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define FC_GRAPH_MAGIC 0x66477270u
#define FC_EXEC_MAGIC 0x66457863u
/* destroyed while an instance of it lives: freed with its last instance */
#define FC_GRAPH_DEAD 0x66477264u
#define FC_GRAPH_NODES 64

struct fc_gnode {
	int dead;	/* destroyed (cuGraphDestroyNode): not run */
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
	/* moved into a parent (CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE): the
	 * parent owns it; moved_next chains the parent's moved children */
	CUgraph owner, moved_head, moved_next;
	int ninst;	/* live instances */
};

/* An instance holds its own copy of the nodes, as on the real driver: it
 * stays launchable after its graph is destroyed (PyTorch destroys the
 * graph right after instantiating it). */
struct CUgraphExec_st {
	uint32_t magic;
	int n;
	struct fc_gnode node[FC_GRAPH_NODES];
	unsigned long long flags;
	CUgraph src;
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

static CUresult begin_capture(CUstream hStream)
{
	CUresult rc = CUDA_SUCCESS;
	CUgraph g;

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

/* Every exported begin and end of capture, as libcuda.so.1 has them (the
 * capture mode is not modelled). */
FC_FORWARD(FC_ENTER_INIT, cuStreamBeginCapture_v2,
	   (CUstream hStream, CUstreamCaptureMode mode),
	   begin_capture(hStream))
FC_FORWARD(FC_ENTER_INIT, cuStreamBeginCapture_v2_ptsz,
	   (CUstream hStream, CUstreamCaptureMode mode),
	   begin_capture(hStream))
FC_FORWARD(FC_ENTER_INIT, cuStreamBeginCapture, (CUstream hStream),
	   begin_capture(hStream))
FC_FORWARD(FC_ENTER_INIT, cuStreamBeginCapture_ptsz, (CUstream hStream),
	   begin_capture(hStream))

/* Capture into an existing graph: what is captured joins its nodes. */
static CUresult begin_capture_to(CUstream hStream, CUgraph hGraph)
{
	CUresult rc = CUDA_SUCCESS;

	fc_lock();
	if (!hStream || hStream == CU_STREAM_LEGACY ||
	    hStream == CU_STREAM_PER_THREAD || !fc_stream_ok(hStream))
		rc = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	else if (hStream->capture)
		rc = CUDA_ERROR_ILLEGAL_STATE;
	else if (!graph_ok(hGraph) || hGraph->owner)
		rc = CUDA_ERROR_INVALID_VALUE;
	else
		hStream->capture = hGraph;
	fc_unlock();
	return rc;
}

FC_FORWARD(FC_ENTER_INIT, cuStreamBeginCaptureToGraph,
	   (CUstream hStream, CUgraph hGraph, const CUgraphNode *dependencies,
	    const CUgraphEdgeData *dependencyData, size_t numDependencies,
	    CUstreamCaptureMode mode),
	   begin_capture_to(hStream, hGraph))
FC_FORWARD(FC_ENTER_INIT, cuStreamBeginCaptureToGraph_ptsz,
	   (CUstream hStream, CUgraph hGraph, const CUgraphNode *dependencies,
	    const CUgraphEdgeData *dependencyData, size_t numDependencies,
	    CUstreamCaptureMode mode),
	   begin_capture_to(hStream, hGraph))

static CUresult end_capture(CUstream hStream, CUgraph *phGraph)
{
	CUresult rc = CUDA_SUCCESS;

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

FC_FORWARD(FC_ENTER_INIT, cuStreamEndCapture,
	   (CUstream hStream, CUgraph *phGraph),
	   end_capture(hStream, phGraph))
FC_FORWARD(FC_ENTER_INIT, cuStreamEndCapture_ptsz,
	   (CUstream hStream, CUgraph *phGraph),
	   end_capture(hStream, phGraph))

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

/* Node handles: index + 1 in a table of (graph, node index, type); never
 * dereferenced.  Needs the lock. */
#define FC_NODE_HANDLES 4096
static struct {
	CUgraph g;
	int idx;
	CUgraphNodeType type;
} handles[FC_NODE_HANDLES];
static int n_handles;

static void node_out_type(CUgraphNode *ph, CUgraph g, int idx,
			  CUgraphNodeType type)
{
	if (!ph)
		return;
	*ph = NULL;
	if (n_handles >= FC_NODE_HANDLES)
		return;
	handles[n_handles].g = g;
	handles[n_handles].idx = idx;
	handles[n_handles].type = type;
	*ph = (CUgraphNode)(uintptr_t)++n_handles;
}

static void node_out(CUgraphNode *ph, CUgraph g, int idx)
{
	node_out_type(ph, g, idx, g->node[idx].is_free ?
				  CU_GRAPH_NODE_TYPE_MEM_FREE :
				  CU_GRAPH_NODE_TYPE_MEM_ALLOC);
}

/* Needs the lock: the table row of a live node, or -1. */
static int handle_row(CUgraphNode h)
{
	uintptr_t i = (uintptr_t)h;

	if (!i || i > (uintptr_t)n_handles || !graph_ok(handles[i - 1].g))
		return -1;
	if (handles[i - 1].idx >= 0 &&
	    handles[i - 1].g->node[handles[i - 1].idx].dead)
		return -1;
	return (int)i - 1;
}

FC_API CUresult CUDAAPI cuGraphNodeGetType(CUgraphNode hNode,
					   CUgraphNodeType *type)
{
	int r;

	FC_ENTER_INIT();
	if (!type)
		return CUDA_ERROR_INVALID_VALUE;
	fc_lock();
	r = handle_row(hNode);
	if (r >= 0)
		*type = handles[r].type;
	fc_unlock();
	return r >= 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* The node is no longer run by instances made afterwards. */
FC_API CUresult CUDAAPI cuGraphDestroyNode(CUgraphNode hNode)
{
	int r;

	FC_ENTER_INIT();
	fc_lock();
	r = handle_row(hNode);
	if (r >= 0 && handles[r].idx >= 0)
		handles[r].g->node[handles[r].idx].dead = 1;
	fc_unlock();
	return r >= 0 && handles[r].idx >= 0 ? CUDA_SUCCESS :
					      CUDA_ERROR_INVALID_VALUE;
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
	if (!graph_ok(hGraph) || hGraph->owner || dev < 0 || dev >= fc.ndev ||
	    nodeParams->poolProps.location.type != CU_MEM_LOCATION_TYPE_DEVICE) {
		rc = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	rc = add_alloc(hGraph, dev, nodeParams->bytesize, &va);
	if (rc)
		goto out;
	nodeParams->dptr = va;
	node_out(phGraphNode, hGraph, hGraph->n - 1);
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
	if (!graph_ok(hGraph) || hGraph->owner) {
		rc = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	rc = add_free(hGraph, dptr);
	if (!rc)
		node_out(phGraphNode, hGraph, hGraph->n - 1);
out:
	fc_unlock();
	return rc;
}

static int has_mem_nodes(CUgraph g)
{
	return g->n > 0;	/* the fake's graphs hold memory nodes only */
}

/* Child graph node: a moved child's nodes become the parent's. */
static CUresult add_child(CUgraph parent, const CUDA_CHILD_GRAPH_NODE_PARAMS *p)
{
	CUgraph c = p->graph;

	if (!graph_ok(c) || c == parent || c->owner)
		return CUDA_ERROR_INVALID_VALUE;
	if (p->ownership != CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE)
		return has_mem_nodes(c) ? CUDA_ERROR_NOT_SUPPORTED :
					  CUDA_SUCCESS;
	if (parent->n + c->n > FC_GRAPH_NODES)
		return CUDA_ERROR_OUT_OF_MEMORY;
	memcpy(&parent->node[parent->n], c->node, sizeof(c->node[0]) * c->n);
	parent->n += c->n;
	for (int i = 0; i < c->nreuse && parent->nreuse < FC_GRAPH_NODES; i++)
		parent->reuse[parent->nreuse++] = c->reuse[i];
	c->owner = parent;
	c->moved_next = parent->moved_head;
	parent->moved_head = c;
	return CUDA_SUCCESS;
}

static CUresult add_node(CUgraphNode *ph, CUgraph g, CUgraphNodeParams *p)
{
	CUresult rc;

	if (!ph || !p)
		return CUDA_ERROR_INVALID_VALUE;
	fc_lock();
	if (!graph_ok(g) || g->owner) {
		rc = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	switch (p->type) {
	case CU_GRAPH_NODE_TYPE_MEM_ALLOC: {
		int dev = p->alloc.poolProps.location.id;
		uintptr_t va;

		if (!p->alloc.bytesize || dev < 0 || dev >= fc.ndev ||
		    p->alloc.poolProps.location.type !=
			    CU_MEM_LOCATION_TYPE_DEVICE) {
			rc = CUDA_ERROR_INVALID_VALUE;
			goto out;
		}
		rc = add_alloc(g, dev, p->alloc.bytesize, &va);
		if (!rc)
			p->alloc.dptr = va;
		break;
	}
	case CU_GRAPH_NODE_TYPE_MEM_FREE:
		rc = p->free.dptr ? add_free(g, p->free.dptr) :
				    CUDA_ERROR_INVALID_VALUE;
		break;
	case CU_GRAPH_NODE_TYPE_GRAPH:
		rc = add_child(g, &p->graph);
		break;
	default:
		rc = CUDA_ERROR_NOT_SUPPORTED;
		break;
	}
	if (!rc && p->type == CU_GRAPH_NODE_TYPE_GRAPH)
		node_out_type(ph, g, -1, CU_GRAPH_NODE_TYPE_GRAPH);
	else if (!rc)
		node_out(ph, g, g->n - 1);
out:
	fc_unlock();
	return rc;
}

FC_FORWARD(FC_ENTER_INIT, cuGraphAddNode_v2,
	   (CUgraphNode *phGraphNode, CUgraph hGraph,
	    const CUgraphNode *dependencies,
	    const CUgraphEdgeData *dependencyData, size_t numDependencies,
	    CUgraphNodeParams *nodeParams),
	   add_node(phGraphNode, hGraph, nodeParams))

/* CUDA 12.2 ABI: no edge data. */
FC_FORWARD(FC_ENTER_INIT, cuGraphAddNode,
	   (CUgraphNode *phGraphNode, CUgraph hGraph,
	    const CUgraphNode *dependencies, size_t numDependencies,
	    CUgraphNodeParams *nodeParams),
	   add_node(phGraphNode, hGraph, nodeParams))

/* Graphs with memory nodes cannot be cloned. */
FC_API CUresult CUDAAPI cuGraphClone(CUgraph *phGraphClone,
				     CUgraph originalGraph)
{
	CUresult rc = CUDA_SUCCESS;
	CUgraph g;

	FC_ENTER_INIT();
	if (!phGraphClone)
		return CUDA_ERROR_INVALID_VALUE;
	g = calloc(1, sizeof(*g));
	if (!g)
		return CUDA_ERROR_OUT_OF_MEMORY;
	fc_lock();
	if (!graph_ok(originalGraph))
		rc = CUDA_ERROR_INVALID_VALUE;
	else if (has_mem_nodes(originalGraph))
		rc = CUDA_ERROR_NOT_SUPPORTED;
	fc_unlock();
	if (rc) {
		free(g);
		return rc;
	}
	g->magic = FC_GRAPH_MAGIC;
	*phGraphClone = g;
	return CUDA_SUCCESS;
}

/* Only instances without memory nodes can be updated here. */
static CUresult exec_update(CUgraphExec e, CUgraph g)
{
	CUresult rc = CUDA_SUCCESS;

	fc_lock();
	if (!exec_ok(e) || !graph_ok(g) || g->owner)
		rc = CUDA_ERROR_INVALID_VALUE;
	else if (e->n || has_mem_nodes(g))
		rc = CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
	fc_unlock();
	return rc;
}

FC_API CUresult CUDAAPI cuGraphExecUpdate_v2(CUgraphExec hGraphExec,
		CUgraph hGraph, CUgraphExecUpdateResultInfo *resultInfo)
{
	CUresult rc;

	FC_ENTER_INIT();
	rc = exec_update(hGraphExec, hGraph);
	if (resultInfo) {
		memset(resultInfo, 0, sizeof(*resultInfo));
		resultInfo->result = rc ? CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED :
					  CU_GRAPH_EXEC_UPDATE_SUCCESS;
	}
	return rc;
}

FC_API CUresult CUDAAPI cuGraphExecUpdate(CUgraphExec hGraphExec,
		CUgraph hGraph, CUgraphNode *hErrorNode_out,
		CUgraphExecUpdateResult *updateResult_out)
{
	CUresult rc;

	FC_ENTER_INIT();
	rc = exec_update(hGraphExec, hGraph);
	if (hErrorNode_out)
		*hErrorNode_out = NULL;
	if (updateResult_out)
		*updateResult_out = rc ? CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED :
					 CU_GRAPH_EXEC_UPDATE_SUCCESS;
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
	if (!graph_ok(g) || g->owner || (has_mem_nodes(g) && g->ninst)) {
		fc_unlock();
		free(e);
		return graph_ok(g) && !g->owner ? CUDA_ERROR_NOT_SUPPORTED :
						  CUDA_ERROR_INVALID_VALUE;
	}
	g->ninst++;
	e->src = g;
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
FC_FORWARD(FC_ENTER_INIT, cuGraphInstantiate,
	   (CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
	    char *logBuffer, size_t bufferSize),
	   instantiate(phGraphExec, hGraph, 0))
FC_FORWARD(FC_ENTER_INIT, cuGraphInstantiate_v2,
	   (CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
	    char *logBuffer, size_t bufferSize),
	   instantiate(phGraphExec, hGraph, 0))

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

FC_FORWARD(FC_ENTER_INIT, cuGraphInstantiateWithParams,
	   (CUgraphExec *phGraphExec, CUgraph hGraph,
	    CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams),
	   instantiate_params(phGraphExec, hGraph, instantiateParams))
FC_FORWARD(FC_ENTER_INIT, cuGraphInstantiateWithParams_ptsz,
	   (CUgraphExec *phGraphExec, CUgraph hGraph,
	    CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams),
	   instantiate_params(phGraphExec, hGraph, instantiateParams))

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
		if (e->node[i].dead || e->node[i].is_free || !a)
			continue;
		if (!(e->flags & CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH)) {
			rc = CUDA_ERROR_INVALID_VALUE;
			goto out;
		}
	}
	for (int i = 0; i < e->n; i++) {
		struct fc_gnode *n = &e->node[i];

		if (n->dead)
			continue;
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

FC_FORWARD(FC_ENTER_INIT, cuGraphLaunch,
	   (CUgraphExec hGraphExec, CUstream hStream),
	   launch(hGraphExec, hStream))
FC_FORWARD(FC_ENTER_INIT, cuGraphLaunch_ptsz,
	   (CUgraphExec hGraphExec, CUstream hStream),
	   launch(hGraphExec, hStream))

FC_FORWARD(FC_ENTER_INIT, cuGraphUpload,
	   (CUgraphExec hGraphExec, CUstream hStream),
	   exec_ok(hGraphExec) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE)
FC_FORWARD(FC_ENTER_INIT, cuGraphUpload_ptsz,
	   (CUgraphExec hGraphExec, CUstream hStream),
	   exec_ok(hGraphExec) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE)

FC_API CUresult CUDAAPI cuGraphExecDestroy(CUgraphExec hGraphExec)
{
	FC_ENTER_INIT();
	if (!exec_ok(hGraphExec))
		return CUDA_ERROR_INVALID_VALUE;
	fc_lock();
	hGraphExec->magic = 0;
	if (!--hGraphExec->src->ninst &&
	    hGraphExec->src->magic == FC_GRAPH_DEAD)
		free(hGraphExec->src);
	fc_unlock();
	free(hGraphExec);
	return CUDA_SUCCESS;
}

/* Unfreed allocations stay live (and keep their VA); the rest is kept
 * reserved too: the fake never reuses graph addresses. */
FC_API CUresult CUDAAPI cuGraphDestroy(CUgraph hGraph)
{
	FC_ENTER_INIT();
	fc_lock();
	if (!graph_ok(hGraph) || hGraph->owner) {
		fc_unlock();
		return CUDA_ERROR_INVALID_VALUE;
	}
	hGraph->magic = hGraph->ninst ? FC_GRAPH_DEAD : 0;
	for (CUgraph c = hGraph->moved_head, next; c; c = next) {
		next = c->moved_next;
		c->magic = c->ninst ? FC_GRAPH_DEAD : 0;
		if (!c->ninst)
			free(c);
	}
	if (!hGraph->ninst)
		free(hGraph);
	fc_unlock();
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
