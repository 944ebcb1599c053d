// SPDX-License-Identifier: MIT
/*
 * Graph memory nodes: alloc and free nodes made explicitly
 * (cuGraphAddMemAllocNode/FreeNode) or by stream capture of
 * cuMemAllocAsync/cuMemFreeAsync (and the runtime's), followed through
 * instantiate, launch and destroy.
 *
 * The driver fixes a node's address when the node is made but backs it
 * only from a launch until the memory is freed: by a free node, by the
 * program (cuMemFree*, cudaFree*), or by the next launch of an instance
 * made with AUTO_FREE_ON_LAUNCH.  So the registry holds such a range
 * (kind graph, volatile: never cached for RDMA) exactly from a successful
 * launch until one of those frees; before that, a lookup answers "not GPU
 * memory", as the driver does.  A node freed inside its own graph is never
 * registered: it is backed only while the graph's own work runs.  Destroying
 * the graph or its instance leaves unfreed allocations live, as the driver
 * does; upload and cuDeviceGraphMemTrim change no live allocation.
 *
 * An instance runs the nodes its graph had when it was made, and outlives
 * the graph (PyTorch destroys the graph right after instantiating it).  So
 * nodes belong to a graph generation (gid), not to the graph handle: the
 * handle finds them only while the graph lives (a new graph may get the
 * same handle), and they are dropped once the graph and every instance
 * made from it are destroyed.  A graph changed after it was instantiated
 * (a node added, a child graph moved in) gets a new generation, a copy of
 * its nodes, so the instances made before keep running the old set.
 *
 * Nodes come from cuGraphAddMemAllocNode/FreeNode, the generic
 * cuGraphAddNode (the runtime's calls reach these), capture, and a child
 * graph moved into its parent (CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE): its
 * nodes become the parent's.  The driver refuses to clone a graph with
 * memory nodes (cuGraphClone, a cloned child graph node), so no copy can
 * hold one unseen.  An update of an instance (cuGraphExecUpdate) that the
 * driver accepts while either side has memory nodes, and destroying a
 * memory node (cuGraphDestroyNode), are not modelled: they mark the
 * registry untrusted.
 *
 * The node lists live in fixed tables (no malloc on hook paths) under a
 * spinlock held only for table updates, never across a call out.  A full
 * table marks the registry untrusted.
 */
#include <string.h>

#include "base/base.h"
#include "platform/platform.h"
#include "registry/registry.h"
#include "hookrt.h"

#define GH_GRAPH_NODES 4096
#define GH_GRAPH_EXECS 1024

struct gnode {
	uint64_t gid;		/* graph generation; 0: slot free */
	uint64_t graph;		/* its handle; 0 once the graph is destroyed */
	uint64_t ptr, size;
	int dev;
	int is_free;		/* a free node (of ptr) */
	int freed_in_graph;	/* alloc node with a free node in its graph */
};

struct gexec {
	uint64_t exec, gid;
	uint64_t flags;
};

static struct gnode nodes[GH_GRAPH_NODES];
static struct gexec execs[GH_GRAPH_EXECS];
/* Slots at or above these were never used: scans stop there.  Launches of
 * graphs without memory nodes (the common case) find no instance and pay
 * for a scan of the instances with memory nodes only. */
static size_t nodes_hi, execs_hi;
static uint64_t last_gid;
static int tlock;

static void lock(void)
{
	while (__atomic_exchange_n(&tlock, 1, __ATOMIC_ACQUIRE)) {
#if defined(__x86_64__) || defined(__i386__)
		__builtin_ia32_pause();
#endif
	}
}

static void unlock(void)
{
	__atomic_store_n(&tlock, 0, __ATOMIC_RELEASE);
}

/*
 * Record one node.  The same node can be reported twice (by the runtime
 * call and by the driver call inside it), and an address freed inside a
 * graph can be allocated again by a later node of the same graph: a
 * (graph, ptr) pair has one alloc slot holding its latest state, and an
 * alloc slot whose allocation was freed in the graph is simply reused.
 */
/* Is generation gid run by an instance?  Needs the lock. */
static int gid_executed(uint64_t gid);

/* A free slot, or NULL: the table is full.  Needs the lock. */
static struct gnode *slot_new(void)
{
	for (size_t i = 0; i < nodes_hi; i++)
		if (!nodes[i].gid)
			return &nodes[i];
	return nodes_hi < GH_GRAPH_NODES ? &nodes[nodes_hi++] : NULL;
}

/*
 * The generation graph's next change goes to: its own, unless an instance
 * runs it, in which case the graph gets a copy of its nodes under a new
 * one and the old nodes stay with the instances.  0: the graph has no
 * nodes yet (*ok 1), or the table is full (*ok 0).  Needs the lock.
 */
static uint64_t gid_for_change(uint64_t graph, int *ok)
{
	uint64_t gid = 0, ngid;
	size_t n = 0, free_slots = GH_GRAPH_NODES - nodes_hi;

	*ok = 1;
	for (size_t i = 0; i < nodes_hi; i++) {
		if (!nodes[i].gid)
			free_slots++;
		else if (nodes[i].graph == graph) {
			gid = nodes[i].gid;
			n++;
		}
	}
	if (!gid || !gid_executed(gid))
		return gid;
	if (free_slots < n) {
		*ok = 0;
		return 0;
	}
	ngid = ++last_gid;
	for (size_t i = 0; i < nodes_hi; i++) {
		struct gnode *s;

		if (nodes[i].gid != gid || nodes[i].graph != graph)
			continue;
		s = slot_new();
		*s = nodes[i];
		s->gid = ngid;
		nodes[i].graph = 0;	/* the instances' now */
	}
	return ngid;
}

/*
 * Record one node.  The same node can be reported twice (by the runtime
 * call and by the driver call inside it), and an address freed inside a
 * graph can be allocated again by a later node of the same graph: a
 * (graph, ptr) pair has one alloc slot holding its latest state, and an
 * alloc slot whose allocation was freed in the graph is simply reused.
 * Needs the lock; 0, or -1: the table is full.
 */
static int add_node_locked(uint64_t graph, uint64_t ptr, uint64_t size,
			   int dev, int is_free)
{
	struct gnode *slot, *same = NULL;
	uint64_t gid;
	int ok;

	for (size_t i = 0; i < nodes_hi; i++) {
		struct gnode *n = &nodes[i];

		if (!n->gid || n->graph != graph || n->ptr != ptr)
			continue;
		if (!n->is_free)
			same = n;	/* the alloc node of ptr, if any */
		else if (is_free)
			return 0;	/* this free node is known */
	}
	if (same && !is_free && !same->freed_in_graph)
		return 0;	/* the same alloc node, reported twice */
	gid = gid_for_change(graph, &ok);
	if (!ok)
		return -1;
	if (same && same->graph != graph) {
		/* copied to the new generation: find the copy */
		same = NULL;
		for (size_t i = 0; i < nodes_hi && !same; i++)
			if (nodes[i].gid == gid && nodes[i].ptr == ptr &&
			    !nodes[i].is_free)
				same = &nodes[i];
	}
	if (same && is_free) {
		same->freed_in_graph = 1;	/* freed in the graph (again) */
		return 0;
	}
	/* A new allocation at an address freed in the graph reuses its slot. */
	slot = same ? same : slot_new();
	if (!slot)
		return -1;
	slot->gid = gid ? gid : ++last_gid;
	slot->graph = graph;
	slot->ptr = ptr;
	slot->size = size;
	slot->dev = dev;
	slot->is_free = is_free;
	slot->freed_in_graph = 0;
	return 0;
}

static void add_node(struct gh_call *c, uint64_t graph, uint64_t ptr,
		     uint64_t size, int dev, int is_free)
{
	int err;

	lock();
	err = add_node_locked(graph, ptr, size, dev, is_free);
	unlock();
	if (err)
		gh_mark_untrusted(c->api, "too many graph memory nodes to follow");
}

/*
 * Set before the first capture can begin (the wrappers of every
 * cuStreamBeginCapture* entry point), never cleared: until then no stream
 * can be capturing, and the driver is not asked.
 */
static int capture_seen;

static void capture_may_begin(void)
{
	if (!__atomic_load_n(&capture_seen, __ATOMIC_RELAXED))
		__atomic_store_n(&capture_seen, 1, __ATOMIC_RELEASE);
}

void gh_capture_begin_pre(struct gh_call *c, CUstream hStream,
			  CUstreamCaptureMode mode)
{
	capture_may_begin();
}

void gh_capture_begin_legacy_pre(struct gh_call *c, CUstream hStream)
{
	capture_may_begin();
}

void gh_capture_begin_to_graph_pre(struct gh_call *c, CUstream hStream,
				   CUgraph hGraph,
				   const CUgraphNode *dependencies,
				   const CUgraphEdgeData *dependencyData,
				   size_t numDependencies,
				   CUstreamCaptureMode mode)
{
	capture_may_begin();
}

/*
 * Is stream capturing (1, *graph_p), or not (0)?  Decided once per call the
 * program made: a runtime call and the driver call it makes share the
 * answer, whichever wrapper asks first (the driver call for an
 * allocation, the runtime call for a free), so both record the same thing
 * and the driver is asked once.  *first_p: this wrapper decided.
 */
static int capturing(struct gh_call *c, uint64_t stream, uint64_t *graph_p,
		     int *first_p)
{
	struct gh_call *top = c->outer ? c->outer : c;

	*first_p = 0;
	if (top->capture && top->capture_stream == stream) {
		*graph_p = top->capture_graph;
		return top->capture > 0;
	}
	*first_p = 1;
	top->capture_stream = stream;
	top->capture_graph = 0;
	top->capture = __atomic_load_n(&capture_seen, __ATOMIC_ACQUIRE) &&
		       gh_drv_capture_graph(stream, &top->capture_graph) ?
		       1 : -1;
	*graph_p = top->capture_graph;
	return top->capture > 0;
}

int gh_graph_captured_alloc(struct gh_call *c, uint64_t stream, uint64_t ptr,
			    uint64_t size)
{
	uint64_t graph;
	int dev = -1, first;

	if (!capturing(c, stream, &graph, &first))
		return 0;
	if (first) {
		gh_drv_ctx_device(&dev);
		add_node(c, graph, ptr, size, dev, 0);
	}
	return 1;
}

int gh_graph_captured_free(struct gh_call *c, uint64_t stream, uint64_t ptr)
{
	uint64_t graph;
	int first;

	if (!ptr || !capturing(c, stream, &graph, &first))
		return 0;
	if (first)
		add_node(c, graph, ptr, 0, -1, 1);
	c->arg = ptr;
	c->skip = 1;		/* freed when the graph runs, not now */
	return 1;
}

void gh_graph_alloc_node_post(struct gh_call *c, CUgraphNode *phGraphNode,
			      CUgraph hGraph, const CUgraphNode *dependencies,
			      size_t numDependencies,
			      CUDA_MEM_ALLOC_NODE_PARAMS *nodeParams)
{
	if (c->rc || !nodeParams)
		return;
	add_node(c, (uint64_t)(uintptr_t)hGraph, nodeParams->dptr,
		 nodeParams->bytesize, nodeParams->poolProps.location.id, 0);
}

void gh_graph_free_node_post(struct gh_call *c, CUgraphNode *phGraphNode,
			     CUgraph hGraph, const CUgraphNode *dependencies,
			     size_t numDependencies, CUdeviceptr dptr)
{
	if (!c->rc)
		add_node(c, (uint64_t)(uintptr_t)hGraph, dptr, 0, -1, 1);
}

/* The generation of live graph g's nodes; 0: it has none.  Needs the
 * lock. */
static uint64_t graph_gid(uint64_t g)
{
	for (size_t i = 0; i < nodes_hi; i++)
		if (nodes[i].gid && nodes[i].graph == g)
			return nodes[i].gid;
	return 0;
}

static int gid_executed(uint64_t gid)
{
	for (size_t i = 0; i < execs_hi; i++)
		if (execs[i].exec && execs[i].gid == gid)
			return 1;
	return 0;
}

/* Drop the nodes of generation gid once neither its graph nor an instance
 * made from it remains.  Needs the lock. */
static void gid_release(uint64_t gid)
{
	if (!gid || gid_executed(gid))
		return;
	for (size_t i = 0; i < nodes_hi; i++)
		if (nodes[i].gid == gid && nodes[i].graph)
			return;		/* the graph lives */
	for (size_t i = 0; i < nodes_hi; i++)
		if (nodes[i].gid == gid)
			memset(&nodes[i], 0, sizeof(nodes[i]));
}

/*
 * A child graph moved into its parent: its nodes join the parent's (next)
 * generation as if made there, so a free node of the child frees the
 * parent's allocation of that address inside the graph; the child's handle
 * now belongs to the parent (it cannot be instantiated, destroyed or
 * changed on its own any more), and instances made from it before keep its
 * old generation.  Needs the lock; 0, or -1: the table is full.
 */
static int move_child_locked(uint64_t parent, uint64_t child)
{
	uint64_t cgid = graph_gid(child);
	int err = 0;

	if (!cgid)
		return 0;
	/* allocations first, then the frees: a free needs its allocation */
	for (int frees = 0; frees < 2; frees++) {
		for (size_t i = 0; i < nodes_hi && !err; i++) {
			struct gnode n = nodes[i];

			if (n.gid != cgid || n.graph != child ||
			    n.is_free != frees)
				continue;
			err = add_node_locked(parent, n.ptr, n.size, n.dev,
					      n.is_free);
			if (!err && n.freed_in_graph)
				err = add_node_locked(parent, n.ptr, 0, -1, 1);
		}
	}
	for (size_t i = 0; i < nodes_hi; i++)
		if (nodes[i].gid == cgid && nodes[i].graph == child)
			nodes[i].graph = 0;
	gid_release(cgid);
	return err;
}

static void move_child(struct gh_call *c, uint64_t parent, uint64_t child)
{
	int err;

	lock();
	err = move_child_locked(parent, child);
	unlock();
	if (err)
		gh_mark_untrusted(c->api, "too many graph memory nodes to follow");
}

static void add_generic(struct gh_call *c, CUgraph hGraph,
			const CUgraphNodeParams *p)
{
	uint64_t g = (uint64_t)(uintptr_t)hGraph;

	if (c->rc || !p)
		return;
	switch (p->type) {
	case CU_GRAPH_NODE_TYPE_MEM_ALLOC:
		add_node(c, g, p->alloc.dptr, p->alloc.bytesize,
			 p->alloc.poolProps.location.id, 0);
		break;
	case CU_GRAPH_NODE_TYPE_MEM_FREE:
		add_node(c, g, p->free.dptr, 0, -1, 1);
		break;
	case CU_GRAPH_NODE_TYPE_GRAPH:
		if (p->graph.ownership == CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE)
			move_child(c, g, (uint64_t)(uintptr_t)p->graph.graph);
		break;
	default:
		break;
	}
}

void gh_graph_add_node_post(struct gh_call *c, CUgraphNode *phGraphNode,
			    CUgraph hGraph, const CUgraphNode *dependencies,
			    const CUgraphEdgeData *dependencyData,
			    size_t numDependencies, CUgraphNodeParams *nodeParams)
{
	add_generic(c, hGraph, nodeParams);
}

/* CUDA 12.2's cuGraphAddNode (no edge data). */
void gh_graph_add_node_legacy_post(struct gh_call *c,
				   CUgraphNode *phGraphNode, CUgraph hGraph,
				   const CUgraphNode *dependencies,
				   size_t numDependencies,
				   CUgraphNodeParams *nodeParams)
{
	add_generic(c, hGraph, nodeParams);
}

/* Asked before the call: afterwards the node is gone. */
void gh_graph_destroy_node_pre(struct gh_call *c, CUgraphNode hNode)
{
	int t = gh_drv_graph_node_type((uint64_t)(uintptr_t)hNode);

	c->arg = t == CU_GRAPH_NODE_TYPE_MEM_ALLOC ||
		 t == CU_GRAPH_NODE_TYPE_MEM_FREE;
}

void gh_graph_destroy_node_post(struct gh_call *c, CUgraphNode hNode)
{
	if (!c->rc && c->arg)
		gh_mark_untrusted(c->api, "a graph memory node was destroyed");
}

static void exec_update(struct gh_call *c, CUgraphExec e, CUgraph g)
{
	int involved = 0;

	if (c->rc)
		return;
	lock();
	involved = graph_gid((uint64_t)(uintptr_t)g) != 0;
	for (size_t i = 0; i < execs_hi && !involved; i++)
		involved = execs[i].exec == (uint64_t)(uintptr_t)e;
	unlock();
	if (involved)
		gh_mark_untrusted(c->api,
				  "a graph instance with memory nodes was updated");
}

void gh_graph_exec_update_post(struct gh_call *c, CUgraphExec hGraphExec,
			       CUgraph hGraph,
			       CUgraphExecUpdateResultInfo *resultInfo)
{
	exec_update(c, hGraphExec, hGraph);
}

/* CUDA 10.2-11's cuGraphExecUpdate. */
void gh_graph_exec_update_legacy_post(struct gh_call *c,
				      CUgraphExec hGraphExec, CUgraph hGraph,
				      CUgraphNode *hErrorNode_out,
				      CUgraphExecUpdateResult *updateResult_out)
{
	exec_update(c, hGraphExec, hGraph);
}

static void add_exec(struct gh_call *c, CUgraphExec *pe, CUgraph g,
		     uint64_t flags)
{
	struct gexec *slot = NULL;
	uint64_t gid;

	if (c->rc || !pe)
		return;
	lock();
	gid = graph_gid((uint64_t)(uintptr_t)g);
	if (!gid) {
		unlock();
		return;
	}
	for (size_t i = 0; i < execs_hi && !slot; i++)
		if (!execs[i].exec)
			slot = &execs[i];
	if (!slot && execs_hi < GH_GRAPH_EXECS)
		slot = &execs[execs_hi++];
	if (slot) {
		slot->exec = (uint64_t)(uintptr_t)*pe;
		slot->gid = gid;
		slot->flags = flags;
	}
	unlock();
	if (!slot)
		gh_mark_untrusted(c->api, "too many graph instances to follow");
}

void gh_graph_instantiate_post(struct gh_call *c, CUgraphExec *phGraphExec,
			       CUgraph hGraph, unsigned long long flags)
{
	add_exec(c, phGraphExec, hGraph, flags);
}

/* The CUDA 10/11 entry points (5 arguments, no flags). */
void gh_graph_instantiate_legacy_post(struct gh_call *c,
				      CUgraphExec *phGraphExec, CUgraph hGraph,
				      CUgraphNode *phErrorNode, char *logBuffer,
				      size_t bufferSize)
{
	add_exec(c, phGraphExec, hGraph, 0);
}

void gh_graph_instantiate_params_post(struct gh_call *c,
				      CUgraphExec *phGraphExec, CUgraph hGraph,
				      CUDA_GRAPH_INSTANTIATE_PARAMS *p)
{
	add_exec(c, phGraphExec, hGraph, p ? p->flags : 0);
}

static int find_exec(uint64_t exec, struct gexec *out)
{
	int found = 0;

	lock();
	for (size_t i = 0; i < execs_hi && !found; i++) {
		if (execs[i].exec == exec) {
			*out = execs[i];
			found = 1;
		}
	}
	unlock();
	return found;
}

/* Unregister the range at ptr (a free the driver makes for the program). */
static void drop_at(struct gh_call *c, uint64_t ptr, unsigned int kind)
{
	struct gh_call d;
	struct gh_range cur;

	if (gh_registry_lookup(ptr, 1, &cur) || cur.base != ptr ||
	    (kind && cur.kind != kind))
		return;
	memset(&d, 0, sizeof(d));
	d.sym = c->sym;
	d.api = c->api;
	d.dev = -1;
	gh_free_pre(&d, ptr);
	gh_free_post(&d);
}

/*
 * Visit the nodes of generation gid, copied out in batches under the table
 * lock and visited with it dropped (fn calls into the registry and the
 * driver).
 */
#define GH_NODE_BATCH 32

static void each_node(uint64_t gid, void (*fn)(struct gh_call *,
					     const struct gnode *, void *),
		      struct gh_call *c, void *arg)
{
	struct gnode batch[GH_NODE_BATCH];
	size_t i = 0, n;

	do {
		n = 0;
		lock();
		for (; i < nodes_hi && n < GH_NODE_BATCH; i++)
			if (nodes[i].gid == gid)
				batch[n++] = nodes[i];
		unlock();
		for (size_t k = 0; k < n; k++)
			fn(c, &batch[k], arg);
	} while (n == GH_NODE_BATCH);
}

static void launch_pre_one(struct gh_call *c, const struct gnode *n,
			   void *arg)
{
	const struct gexec *x = arg;

	if (n->is_free)
		drop_at(c, n->ptr, 0);	/* freed while the graph runs */
	else if (!n->freed_in_graph &&
		 (x->flags & CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH))
		drop_at(c, n->ptr, GDRHOOK_KIND_GRAPH);
}

static void launch_post_one(struct gh_call *c, const struct gnode *n,
			    void *arg)
{
	const struct gexec *x = arg;
	struct gh_range cur;

	if (n->is_free || n->freed_in_graph)
		return;
	if (!gh_registry_lookup(n->ptr, 1, &cur) && cur.base == n->ptr)
		return;
	gh_alloc_post(c, GDRHOOK_KIND_GRAPH, n->ptr, n->size, x->exec, 0);
}

void gh_graph_launch_pre(struct gh_call *c, CUgraphExec hGraphExec,
			 CUstream hStream)
{
	struct gexec x;

	if (find_exec((uint64_t)(uintptr_t)hGraphExec, &x))
		each_node(x.gid, launch_pre_one, c, &x);
}

void gh_graph_launch_post(struct gh_call *c, CUgraphExec hGraphExec,
			  CUstream hStream)
{
	struct gexec x;

	if (c->rc) {
		GH_COUNT(failed_calls, 1);
		return;
	}
	if (find_exec((uint64_t)(uintptr_t)hGraphExec, &x))
		each_node(x.gid, launch_post_one, c, &x);
}

void gh_graph_exec_destroy_post(struct gh_call *c, CUgraphExec hGraphExec)
{
	if (c->rc)
		return;
	lock();
	for (size_t i = 0; i < execs_hi; i++) {
		uint64_t gid = execs[i].gid;

		if (execs[i].exec != (uint64_t)(uintptr_t)hGraphExec)
			continue;
		memset(&execs[i], 0, sizeof(execs[i]));
		gid_release(gid);
	}
	unlock();
}

void gh_graph_destroy_post(struct gh_call *c, CUgraph hGraph)
{
	uint64_t gid;

	if (c->rc)
		return;
	lock();
	gid = graph_gid((uint64_t)(uintptr_t)hGraph);
	for (size_t i = 0; gid && i < nodes_hi; i++)
		if (nodes[i].gid == gid)
			nodes[i].graph = 0;	/* instances keep them */
	gid_release(gid);
	unlock();
}
